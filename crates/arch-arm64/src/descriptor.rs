//! arm64 stage-1 page-table descriptor facts (64-bit descriptors), host-portable.

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

/// The translation granule: the base page size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Granule {
    /// 4 KiB pages.
    Size4KiB,
    /// 16 KiB pages.
    Size16KiB,
    /// 64 KiB pages.
    Size64KiB,
}

impl Granule {
    /// Every granule.
    pub const ALL: [Self; 3] = [Self::Size4KiB, Self::Size16KiB, Self::Size64KiB];

    /// log2 of the page size.
    #[must_use]
    pub const fn page_shift(self) -> u32 {
        match self {
            Self::Size4KiB => 12,
            Self::Size16KiB => 14,
            Self::Size64KiB => 16,
        }
    }

    /// The page size in bytes.
    #[must_use]
    pub const fn page_size(self) -> u64 {
        1 << self.page_shift()
    }

    /// Entries in one contiguous block: 16 (64 KiB), 128 (2 MiB), 32 (2 MiB).
    #[must_use]
    pub const fn cont_ptes(self) -> usize {
        match self {
            Self::Size4KiB => 16,
            Self::Size16KiB => 128,
            Self::Size64KiB => 32,
        }
    }

    /// The output-address field of a last-level descriptor: bits `[47:page_shift]` (48-bit
    /// physical addresses).
    #[must_use]
    pub const fn output_address_mask(self) -> u64 {
        ((1u64 << 48) - 1) & !((1u64 << self.page_shift()) - 1)
    }

    /// The page frame number a page descriptor maps.
    #[must_use]
    pub const fn pfn(self, entry: u64) -> u64 {
        (entry & self.output_address_mask()) >> self.page_shift()
    }

    /// `entry` mapping frame `pfn` instead (frame bits beyond the field are dropped).
    #[must_use]
    pub const fn with_pfn(self, entry: u64, pfn: u64) -> u64 {
        let mask = self.output_address_mask();
        (entry & !mask) | ((pfn << self.page_shift()) & mask)
    }

    /// The TLBI range operand's TG field for this granule.
    const fn tlbi_tg(self) -> u64 {
        match self {
            Self::Size4KiB => 1,
            Self::Size16KiB => 2,
            Self::Size64KiB => 3,
        }
    }
}

/// The operand of `TLBI VALE1IS` (and friends): VA\[55:12\] in bits \[43:0\], ASID in \[63:48\].
#[must_use]
pub const fn tlbi_va_operand(va: u64, asid: u16) -> u64 {
    ((va >> 12) & ((1 << 44) - 1)) | ((asid as u64) << 48)
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

/// Splits the first `pages & !1` pages from `va` (at most [`MAX_TLBI_RANGE_PAGES`]) into
/// `TLBI RVALE1IS` operations, largest scale first; a range operation covers an even number
/// of pages, so a caller invalidates an odd last page with [`tlbi_va_operand`].
pub fn tlbi_range_ops(
    va: u64,
    pages: u64,
    asid: u16,
    granule: Granule,
) -> impl Iterator<Item = RangeOp> {
    let shift = granule.page_shift();
    let mut next = va;
    let mut left = pages.min(MAX_TLBI_RANGE_PAGES) & !1;
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
                | (granule.tlbi_tg() << 46)
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
        let facts: [(Granule, u32, usize); 3] = [
            (Granule::Size4KiB, 12, 16),
            (Granule::Size16KiB, 14, 128),
            (Granule::Size64KiB, 16, 32),
        ];
        for (g, shift, cont) in facts {
            assert_eq!(g.page_shift(), shift);
            assert_eq!(g.cont_ptes(), cont);
            assert_eq!(g.output_address_mask().trailing_zeros(), shift);
            assert_eq!(64 - g.output_address_mask().leading_zeros(), 48);
            let e = g.with_pfn(VALID | PAGE | AF | CONT, 0x1234);
            assert_eq!(g.pfn(e), 0x1234);
            assert_eq!(e & !g.output_address_mask(), VALID | PAGE | AF | CONT);
        }
        // A contiguous block is 64 KiB (4K granule) and 2 MiB (16K, 64K).
        assert_eq!(Granule::Size4KiB.page_size() * 16, 64 << 10);
        assert_eq!(Granule::Size16KiB.page_size() * 128, 2 << 20);
        assert_eq!(Granule::Size64KiB.page_size() * 32, 2 << 20);
    }

    #[test]
    fn tlbi_operands() {
        assert_eq!(tlbi_va_operand(0x1234_5000, 7), 0x12345 | 7 << 48);
        // 16 pages of 4 KiB: SCALE 0, NUM 7 (8 << 1 pages).
        let ops: std::vec::Vec<_> = tlbi_range_ops(0x40_0000, 16, 1, Granule::Size4KiB).collect();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].pages, 16);
        assert_eq!((ops[0].operand >> 39) & 0x1f, 7);
        assert_eq!((ops[0].operand >> 44) & 3, 0);
        assert_eq!((ops[0].operand >> 46) & 3, 1);
        assert_eq!(ops[0].operand & ((1 << 37) - 1), 0x400);
        // Any even count is covered exactly, with few operations.
        for pages in (0..5000).step_by(2) {
            let ops: std::vec::Vec<_> = tlbi_range_ops(0, pages, 0, Granule::Size64KiB).collect();
            assert_eq!(ops.iter().map(|o| o.pages).sum::<u64>(), pages);
            assert!(ops.len() <= 4, "{pages}: {ops:?}");
        }
    }
}
