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
    fn pfn_round_trips_and_keeps_flags() {
        let e = with_pfn(PRESENT | ACCESSED | NO_EXECUTE, Pfn(0x12_3456));
        assert_eq!(pfn(e), Pfn(0x12_3456));
        assert_eq!(e & !PFN_MASK, PRESENT | ACCESSED | NO_EXECUTE);
        assert_eq!(pfn(with_pfn(0, Pfn(u64::MAX))), Pfn(PFN_MASK >> PFN_SHIFT));
    }
}
