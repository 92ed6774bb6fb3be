//! x86_64 (4-level and 5-level paging) page-table entry bits.
//!
//! Host-portable: plain constants and `const fn`s that compile on every target, so the
//! `pte-batch` models can use x86 entries on an arm64 host and the reverse.

use mm_types::{PageSize, Pfn};

/// Bit 0: the entry maps something.
pub const PRESENT: u64 = 1 << 0;
/// Bit 1: writes are allowed.
pub const WRITABLE: u64 = 1 << 1;
/// Bit 2: user-mode accesses are allowed.
pub const USER: u64 = 1 << 2;
/// Bit 3: page-level write-through.
pub const WRITE_THROUGH: u64 = 1 << 3;
/// Bit 4: page-level cache disable.
pub const CACHE_DISABLE: u64 = 1 << 4;
/// Bit 5: accessed ("young"); set by the CPU on any access through this entry.
pub const ACCESSED: u64 = 1 << 5;
/// Bit 6: dirty; set by the CPU on a write through this entry (leaf entries only).
pub const DIRTY: u64 = 1 << 6;
/// Bit 7 of a leaf 4 KiB entry: the PAT bit (in a PMD/PUD entry: the huge-page bit).
pub const PAT: u64 = 1 << 7;
/// Bit 7 of a PMD/PUD entry (PS): the entry is a 2 MiB / 1 GiB leaf, not a table pointer.
pub const HUGE: u64 = 1 << 7;
/// Bit 8: global, not flushed on a CR3 switch.
pub const GLOBAL: u64 = 1 << 8;
/// Bit 63: instructions may not be fetched through this entry (needs EFER.NXE).
pub const NO_EXECUTE: u64 = 1 << 63;
/// The page size a last-level entry maps.
pub const PAGE_SIZE: PageSize = PageSize::Size4KiB;
/// Shift of the page frame number inside an entry.
pub const PFN_SHIFT: u32 = PAGE_SIZE.shift();
/// The physical frame field: bits 12..=51 (52-bit physical addresses).
pub const PFN_MASK: u64 = 0x000F_FFFF_FFFF_F000;

/// The size a leaf entry maps: a 4 KiB page (PTE), or a 2 MiB (PMD) or 1 GiB (PUD) leaf. The
/// same three sizes are the leaves of Intel EPT and AMD NPT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LeafSize {
    /// A 4 KiB page: a last-level entry.
    Size4KiB,
    /// A 2 MiB leaf: a level-2 entry with the page-size bit.
    Size2MiB,
    /// A 1 GiB leaf: a level-3 entry with the page-size bit.
    Size1GiB,
}

impl LeafSize {
    /// The three sizes, smallest first.
    pub const ALL: [Self; 3] = [Self::Size4KiB, Self::Size2MiB, Self::Size1GiB];

    /// log2 of the bytes the leaf maps: 12, 21, 30.
    #[must_use]
    pub const fn shift(self) -> u32 {
        match self {
            Self::Size4KiB => 12,
            Self::Size2MiB => 21,
            Self::Size1GiB => 30,
        }
    }

    /// 4 KiB frames one leaf maps: 1, 512, 262 144.
    #[must_use]
    pub const fn frames(self) -> u64 {
        1 << (self.shift() - PFN_SHIFT)
    }

    /// The frame field of a leaf of this size: bits `51:shift` (a 2 MiB or 1 GiB leaf's bits
    /// below are its PAT bit and reserved bits, not address).
    #[must_use]
    pub const fn frame_mask(self) -> u64 {
        PFN_MASK & !((1 << self.shift()) - 1)
    }

    /// Whether the leaf's entry carries the page-size bit ([`HUGE`], EPT's bit 7): every size
    /// but 4 KiB.
    #[must_use]
    pub const fn is_huge(self) -> bool {
        !matches!(self, Self::Size4KiB)
    }
}

/// The page frame number (in 4 KiB frames) a leaf of `leaf` size maps.
#[must_use]
pub const fn leaf_pfn(leaf: LeafSize, entry: u64) -> Pfn {
    Pfn((entry & leaf.frame_mask()) >> PFN_SHIFT)
}

/// `entry` (a leaf of `leaf` size) mapping `pfn` instead; frame bits outside the leaf's frame
/// field are dropped.
#[must_use]
pub const fn with_leaf_pfn(leaf: LeafSize, entry: u64, pfn: Pfn) -> u64 {
    let mask = leaf.frame_mask();
    (entry & !mask) | ((pfn.0 << PFN_SHIFT) & mask)
}

/// The page frame number an entry maps.
#[must_use]
pub const fn pfn(entry: u64) -> Pfn {
    Pfn((entry & PFN_MASK) >> PFN_SHIFT)
}

/// `entry` with its frame field replaced by `pfn`; frame bits beyond bit 51 are dropped.
#[must_use]
pub const fn with_pfn(entry: u64, pfn: Pfn) -> u64 {
    (entry & !PFN_MASK) | ((pfn.0 << PFN_SHIFT) & PFN_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_match_the_sdm() {
        assert_eq!(ACCESSED, 0x20);
        assert_eq!(DIRTY, 0x40);
        assert_eq!(NO_EXECUTE, 0x8000_0000_0000_0000);
        assert_eq!(PFN_MASK.count_ones(), 40);
    }

    #[test]
    fn leaf_sizes_match_the_sdm() {
        let facts = [
            (LeafSize::Size4KiB, 1, 40),
            (LeafSize::Size2MiB, 512, 31),
            (LeafSize::Size1GiB, 1 << 18, 22),
        ];
        for (leaf, frames, field_bits) in facts {
            assert_eq!(leaf.frames(), frames);
            assert_eq!(leaf.frame_mask().count_ones(), field_bits);
            let e = with_leaf_pfn(leaf, PRESENT | HUGE, Pfn(3 * frames));
            assert_eq!(leaf_pfn(leaf, e), Pfn(3 * frames));
            assert_eq!(e & !leaf.frame_mask(), PRESENT | HUGE);
        }
        assert!(!LeafSize::Size4KiB.is_huge() && LeafSize::Size1GiB.is_huge());
        assert_eq!(
            with_leaf_pfn(LeafSize::Size4KiB, 0, Pfn(7)),
            with_pfn(0, Pfn(7))
        );
    }

    #[test]
    fn pfn_round_trips_and_keeps_flags() {
        let e = with_pfn(PRESENT | ACCESSED | NO_EXECUTE, Pfn(0x12_3456));
        assert_eq!(pfn(e), Pfn(0x12_3456));
        assert_eq!(e & !PFN_MASK, PRESENT | ACCESSED | NO_EXECUTE);
        assert_eq!(pfn(with_pfn(0, Pfn(u64::MAX))), Pfn(PFN_MASK >> PFN_SHIFT));
    }
}
