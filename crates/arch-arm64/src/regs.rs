//! System registers aarch64-cpu does not define, defined the way it defines the others:
//! tock-registers bitfields plus a `Readable` whose `get` is one `mrs`.

use tock_registers::interfaces::Readable;
use tock_registers::register_bitfields;

pub use fields::{DCZID_EL0, ID_AA64ISAR2_EL1};

/// The macro-generated field types (documented at the register definitions below).
#[allow(missing_docs)]
mod fields {
    use super::register_bitfields;

    register_bitfields! {u64,
        /// Data Cache Zero ID register: the DC ZVA block size and whether DC ZVA is allowed.
        pub DCZID_EL0 [
            /// DC ZVA prohibited when set.
            DZP OFFSET(4) NUMBITS(1) [],
            /// log2 of the block size in 4-byte words.
            BS OFFSET(0) NUMBITS(4) []
        ],
        /// Instruction Set Attribute Register 2.
        pub ID_AA64ISAR2_EL1 [
            /// FEAT_MOPS: 0b0001 when the memory copy and set instructions are implemented.
            MOPS OFFSET(16) NUMBITS(4) []
        ]
    }
}

/// `DCZID_EL0` (readable at EL0).
pub struct DczidEl0;

impl Readable for DczidEl0 {
    type T = u64;
    type R = DCZID_EL0::Register;

    #[inline]
    fn get(&self) -> u64 {
        let v: u64;
        // SAFETY: DCZID_EL0 is readable at every exception level and has no side effects.
        unsafe {
            core::arch::asm!("mrs {}, dczid_el0", out(reg) v, options(nomem, nostack, preserves_flags));
        }
        v
    }
}

/// `ID_AA64ISAR2_EL1` (EL1; Linux and qemu-user emulate the read at EL0).
pub struct IdAa64Isar2El1;

impl Readable for IdAa64Isar2El1 {
    type T = u64;
    type R = ID_AA64ISAR2_EL1::Register;

    #[inline]
    fn get(&self) -> u64 {
        let v: u64;
        // SAFETY: an ID register read has no side effects; at EL0 Linux traps and emulates
        // it (as qemu-user does). Written by encoding so any assembler accepts it.
        unsafe {
            core::arch::asm!("mrs {}, S3_0_C0_C6_2", out(reg) v, options(nomem, nostack, preserves_flags));
        }
        v
    }
}

/// The `DCZID_EL0` register.
pub const DCZID: DczidEl0 = DczidEl0;
/// The `ID_AA64ISAR2_EL1` register.
pub const ID_AA64ISAR2: IdAa64Isar2El1 = IdAa64Isar2El1;
