//! Intel EPT (extended page tables) leaf-entry bits, host-portable: the second stage of
//! translation a VMX hypervisor builds for its guests, guest-physical to host-physical.
//!
//! An entry is present when any of read, write or execute is granted (bits 2:0). With
//! accessed and dirty flags enabled in the EPTP (bit 6), the processor sets [`ACCESSED`] on any
//! guest access through a leaf, and [`DIRTY`] on a write. The frame field and the leaf sizes
//! are those of [`crate::pte`] ([`LeafSize`](crate::pte::LeafSize)).

/// Bit 0: the guest may read.
pub const READ: u64 = 1 << 0;
/// Bit 1: the guest may write.
pub const WRITE: u64 = 1 << 1;
/// Bit 2: the guest may fetch instructions (supervisor mode, with mode-based execute control).
pub const EXEC: u64 = 1 << 2;
/// Bits 2:0: the permission field; an entry with none of them is not present.
pub const RWX_MASK: u64 = READ | WRITE | EXEC;
/// Bits 5:3 of a leaf: the EPT memory type, 6 = write-back.
pub const MEMTYPE_WB: u64 = 6 << 3;
/// Bits 5:3 of a leaf: the memory-type field.
pub const MEMTYPE_MASK: u64 = 7 << 3;
/// Bit 6 of a leaf: ignore the guest's PAT memory type.
pub const IGNORE_PAT: u64 = 1 << 6;
/// Bit 7 of a level-2 or level-3 entry: the entry is a 2 MiB / 1 GiB leaf.
pub const HUGE: u64 = 1 << 7;
/// Bit 8: accessed, set by the processor on any access through the entry (EPTP A/D enabled).
pub const ACCESSED: u64 = 1 << 8;
/// Bit 9 of a leaf: dirty, set by the processor on a write through the entry.
pub const DIRTY: u64 = 1 << 9;
/// Bit 10: user-mode execute (mode-based execute control).
pub const USER_EXEC: u64 = 1 << 10;
/// Bit 63: suppress #VE on an EPT violation through the entry.
pub const SUPPRESS_VE: u64 = 1 << 63;

/// Whether an EPT entry is present: any of read, write, execute.
#[must_use]
pub const fn is_present(entry: u64) -> bool {
    entry & RWX_MASK != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_match_the_sdm() {
        assert_eq!(ACCESSED, 0x100);
        assert_eq!(DIRTY, 0x200);
        assert_eq!(MEMTYPE_WB, 0x30);
        let fields = [
            READ,
            WRITE,
            EXEC,
            MEMTYPE_MASK,
            IGNORE_PAT,
            HUGE,
            ACCESSED,
            DIRTY,
            USER_EXEC,
            SUPPRESS_VE,
        ];
        for (i, a) in fields.iter().enumerate() {
            for b in &fields[i + 1..] {
                assert_eq!(a & b, 0, "{a:#x} overlaps {b:#x}");
            }
            assert_eq!(a & crate::pte::PFN_MASK, 0);
        }
        assert!(is_present(EXEC) && !is_present(ACCESSED | DIRTY));
    }
}
