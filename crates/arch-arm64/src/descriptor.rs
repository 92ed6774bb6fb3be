//! arm64 stage-1 page-table descriptor facts (64-bit descriptors), host-portable, and what
//! each translation granule (a [`PageSize`]) means for them.

use mm_types::{PageRange, PageSize, Pfn, VirtAddr};

/// Bit 0: the descriptor is valid.
pub const VALID: u64 = 1 << 0;
/// Bit 1: with bit 0 at the last level, a page descriptor (`\[1:0\] = 0b11`).
pub const PAGE: u64 = 1 << 1;
/// Bit 6: AP\[1\], EL0 may access.
pub const USER: u64 = 1 << 6;
/// Bit 7: AP\[2\], read-only. Hardware dirty management clears it on a write to a DBM page.
pub const RDONLY: u64 = 1 << 7;
/// Bit 10: the access flag ("young"); hardware with FEAT_HAFDBS sets it on access.
pub const AF: u64 = 1 << 10;
/// Bit 11: not global (tagged with the ASID).
pub const NG: u64 = 1 << 11;
/// Bit 51: dirty bit modifier (hardware dirty management; Linux also uses it as WRITE).
pub const DBM: u64 = 1 << 51;
/// Bit 52: the contiguous hint.
pub const CONT: u64 = 1 << 52;
/// Bit 53: privileged execute-never.
pub const PXN: u64 = 1 << 53;
/// Bit 54: unprivileged execute-never.
pub const UXN: u64 = 1 << 54;
/// Bit 55: Linux's software dirty bit.
pub const SW_DIRTY: u64 = 1 << 55;

/// Whether a descriptor is dirty: `(DBM and not RDONLY)` or the software dirty bit.
#[must_use]
pub const fn is_dirty(entry: u64) -> bool {
    (entry & DBM != 0 && entry & RDONLY == 0) || entry & SW_DIRTY != 0
}

/// Entries in one contiguous (`CONT`) block for each translation granule: 16 (a 64 KiB block
/// of 4 KiB pages), 128 (2 MiB of 16 KiB pages), 32 (2 MiB of 64 KiB pages).
#[must_use]
pub const fn cont_ptes(granule: PageSize) -> usize {
    match granule {
        PageSize::Size4KiB => 16,
        PageSize::Size16KiB => 128,
        PageSize::Size64KiB => 32,
    }
}

/// The output-address field of a last-level descriptor: bits `[47:page shift]` (48-bit
/// physical addresses).
#[must_use]
pub const fn output_address_mask(granule: PageSize) -> u64 {
    ((1u64 << 48) - 1) & !((1u64 << granule.shift()) - 1)
}

/// The frame a page descriptor maps.
#[must_use]
pub const fn pfn(granule: PageSize, entry: u64) -> Pfn {
    Pfn((entry & output_address_mask(granule)) >> granule.shift())
}

/// `entry` mapping frame `pfn` instead (frame bits beyond the field are dropped).
#[must_use]
pub const fn with_pfn(granule: PageSize, entry: u64, pfn: Pfn) -> u64 {
    let mask = output_address_mask(granule);
    (entry & !mask) | ((pfn.0 << granule.shift()) & mask)
}

/// The TLBI range operand's TG field for a granule.
const fn tlbi_tg(granule: PageSize) -> u64 {
    match granule {
        PageSize::Size4KiB => 1,
        PageSize::Size16KiB => 2,
        PageSize::Size64KiB => 3,
    }
}

/// The operand of `TLBI VALE1IS` (and friends): VA\[55:12\] in bits \[43:0\], ASID in \[63:48\].
#[must_use]
pub const fn tlbi_va_operand(va: VirtAddr, asid: u16) -> u64 {
    ((va.0 >> 12) & ((1 << 44) - 1)) | ((asid as u64) << 48)
}

/// One `TLBI RVALE1IS` (FEAT_TLBIRANGE) covering `(NUM + 1) << (5 * SCALE + 1)` pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeOp {
    /// The operand register value.
    pub operand: u64,
    /// Pages it covers.
    pub pages: u64,
}

/// The largest page count one range operation covers: `32 << 16` (SCALE 3, NUM 31).
pub const MAX_TLBI_RANGE_PAGES: u64 = 32 << 16;

/// Splits the first `pages & !1` pages of `range` (at most [`MAX_TLBI_RANGE_PAGES`]) into
/// `TLBI RVALE1IS` operations, largest scale first; a range operation covers an even number
/// of pages, so a caller invalidates an odd last page with [`tlbi_va_operand`].
pub fn tlbi_range_ops(range: PageRange, asid: u16) -> impl Iterator<Item = RangeOp> {
    let granule = range.size;
    let shift = granule.shift();
    let mut next = range.start.0;
    let mut left = range.pages.min(MAX_TLBI_RANGE_PAGES) & !1;
    let mut scale = 3u32;
    core::iter::from_fn(move || {
        while left > 0 {
            let unit = 1u64 << (5 * scale + 1);
            let num = (left / unit).min(32);
            if num == 0 {
                scale = scale.checked_sub(1)?;
                continue;
            }
            let covered = num * unit;
            // BaseADDR is in units of the granule's page size: VA >> page_shift.
            let base = (next >> shift) & ((1 << 37) - 1);
            let operand = base
                | (u64::from(scale) << 44)
                | ((num - 1) << 39)
                | (tlbi_tg(granule) << 46)
                | (u64::from(asid) << 48);
            next = next.wrapping_add(covered << shift);
            left -= covered;
            return Some(RangeOp {
                operand,
                pages: covered,
            });
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_match_reference() {
        assert_eq!(AF, 0x400);
        assert_eq!(RDONLY, 0x80);
        assert_eq!(CONT, 1 << 52);
        assert_eq!(DBM, 1 << 51);
        assert!(is_dirty(DBM));
        assert!(!is_dirty(DBM | RDONLY));
        assert!(is_dirty(RDONLY | SW_DIRTY));
    }

    #[test]
    fn granules_match_reference() {
        let facts: [(PageSize, u32, usize); 3] = [
            (PageSize::Size4KiB, 12, 16),
            (PageSize::Size16KiB, 14, 128),
            (PageSize::Size64KiB, 16, 32),
        ];
        for (g, shift, cont) in facts {
            assert_eq!(g.shift(), shift);
            assert_eq!(cont_ptes(g), cont);
            assert_eq!(output_address_mask(g).trailing_zeros(), shift);
            assert_eq!(64 - output_address_mask(g).leading_zeros(), 48);
            let e = with_pfn(g, VALID | PAGE | AF | CONT, Pfn(0x1234));
            assert_eq!(pfn(g, e), Pfn(0x1234));
            assert_eq!(e & !output_address_mask(g), VALID | PAGE | AF | CONT);
        }
        // A contiguous block is 64 KiB (4K granule) and 2 MiB (16K, 64K).
        assert_eq!(PageSize::Size4KiB.bytes() * 16, 64 << 10);
        assert_eq!(PageSize::Size16KiB.bytes() * 128, 2 << 20);
        assert_eq!(PageSize::Size64KiB.bytes() * 32, 2 << 20);
    }

    #[test]
    fn tlbi_operands() {
        assert_eq!(tlbi_va_operand(VirtAddr(0x1234_5000), 7), 0x12345 | 7 << 48);
        // 16 pages of 4 KiB: SCALE 0, NUM 7 (8 << 1 pages).
        let ops: std::vec::Vec<_> = tlbi_range_ops(
            PageRange::new(VirtAddr(0x40_0000), 16, PageSize::Size4KiB),
            1,
        )
        .collect();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].pages, 16);
        assert_eq!((ops[0].operand >> 39) & 0x1f, 7);
        assert_eq!((ops[0].operand >> 44) & 3, 0);
        assert_eq!((ops[0].operand >> 46) & 3, 1);
        assert_eq!(ops[0].operand & ((1 << 37) - 1), 0x400);
        // Any even count is covered exactly, with few operations.
        for pages in (0..5000).step_by(2) {
            let ops: std::vec::Vec<_> =
                tlbi_range_ops(PageRange::new(VirtAddr(0), pages, PageSize::Size64KiB), 0)
                    .collect();
            assert_eq!(ops.iter().map(|o| o.pages).sum::<u64>(), pages);
            assert!(ops.len() <= 4, "{pages}: {ops:?}");
        }
    }
}
