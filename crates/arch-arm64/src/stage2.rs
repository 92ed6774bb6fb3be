//! arm64 stage-2 (guest-physical to physical) last-level descriptor facts, host-portable:
//! what a hypervisor's tables hold for its guests' memory.
//!
//! The valid, page, access-flag, DBM and contiguous bits and the output-address field are
//! where stage 1 has them ([`crate::descriptor`]); permissions are S2AP (read, write) instead
//! of AP, and execute-never is XN\[1:0\]. With VTCR_EL2.HA the MMU sets AF on access; with
//! VTCR_EL2.HD a write through a DBM descriptor whose S2AP grants no write sets S2AP\[1\]
//! (stage 1 clears AP\[2\] instead): the write permission is the dirty state.

use mm_types::PhysAddr;

/// Bits \[5:2\]: MemAttr, the stage-2 memory type (0b1111: Normal, write-back cacheable).
pub const MEMATTR_NORMAL_WB: u64 = 0b1111 << 2;
/// Bits \[5:2\]: MemAttr = 0b0001, Device-nGnRE: a device's registers passed through to a
/// guest.
pub const MEMATTR_DEVICE_NGNRE: u64 = 0b0001 << 2;
/// Bit 6: S2AP\[0\], the guest may read.
pub const S2AP_READ: u64 = 1 << 6;
/// Bit 7: S2AP\[1\], the guest may write. Hardware dirty management sets it on the first
/// write through a DBM descriptor.
pub const S2AP_WRITE: u64 = 1 << 7;
/// Bits \[9:8\]: SH, inner shareable.
pub const SH_INNER: u64 = 0b11 << 8;
/// Bits \[54:53\]: XN\[1:0\] = 0b10, execute-never at EL1 and EL0.
pub const XN: u64 = 0b10 << 53;
/// Bits \[54:53\]: both XN bits (the field).
pub const XN_MASK: u64 = 0b11 << 53;
/// Bit 55: the software dirty bit (a software-use bit at stage 2 as at stage 1): dirty
/// state kept while the descriptor is write-protected.
pub const SW_DIRTY: u64 = 1 << 55;

/// The operand of `TLBI IPAS2E1IS` (invalidate by intermediate physical address, stage 2
/// only): IPA\[51:12\] in bits \[39:0\], whatever the granule (the low bits of a larger
/// granule's page are ignored).
#[must_use]
pub const fn tlbi_ipa_operand(ipa: PhysAddr) -> u64 {
    (ipa.0 >> 12) & ((1 << 40) - 1)
}

/// Whether a stage-2 descriptor is dirty: `(DBM and S2AP write)` or the software dirty bit.
#[must_use]
pub const fn is_dirty(entry: u64) -> bool {
    (entry & crate::descriptor::DBM != 0 && entry & S2AP_WRITE != 0) || entry & SW_DIRTY != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::{AF, CONT, DBM, PAGE, VALID};

    #[test]
    fn stage2_bits_are_distinct_from_each_other_and_the_shared_ones() {
        let fields = [
            VALID,
            PAGE,
            MEMATTR_NORMAL_WB,
            S2AP_READ,
            S2AP_WRITE,
            SH_INNER,
            AF,
            DBM,
            CONT,
            XN_MASK,
            SW_DIRTY,
        ];
        for (i, a) in fields.iter().enumerate() {
            for b in &fields[i + 1..] {
                assert_eq!(a & b, 0, "{a:#x} overlaps {b:#x}");
            }
        }
        assert_eq!(XN & XN_MASK, XN);
        assert!(is_dirty(DBM | S2AP_WRITE) && is_dirty(SW_DIRTY));
        assert!(!is_dirty(DBM) && !is_dirty(S2AP_WRITE));
    }

    #[test]
    fn ipa_operand_is_the_page_number() {
        assert_eq!(tlbi_ipa_operand(PhysAddr(0x4000_2fff)), 0x4_0002);
        assert_eq!(tlbi_ipa_operand(PhysAddr(1 << 52)), 0);
        assert_eq!(tlbi_ipa_operand(PhysAddr((1 << 52) - 1)), (1 << 40) - 1);
    }
}
