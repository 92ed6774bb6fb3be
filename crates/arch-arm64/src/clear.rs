//! The arm64 clearing primitives. Each zeroes `len` bytes at `dst` in one call, so a caller
//! can clear a whole extent; each states its alignment, checks it with `debug_assert!`, and
//! runs a portable `write_bytes` under Miri.
//!
//! - [`dc_zva`]: `DC ZVA`, one block of `4 << DCZID_EL0.BS` bytes per instruction (64 on most
//!   hardware, 512 under qemu-user `-cpu max`). Needs DZP clear.
//! - [`stnp`]: `STNP xzr, xzr` pairs, the fallback where DC ZVA is prohibited.
//! - [`mops_set`] and [`mops_set_nt`]: FEAT_MOPS `SETP/SETM/SETE` and the non-temporal
//!   `SETPN/SETMN/SETEN`; any alignment and length. The non-temporal form should be followed
//!   by [`crate::barrier::dmb_ishst`] before the memory is published.

#[cfg(not(miri))]
use core::arch::asm;

/// [`stnp`] stores 64 bytes per loop step: `len` a multiple of 64, `dst` aligned to 16.
pub const STNP_MULTIPLE: usize = 64;
/// [`stnp`]'s alignment.
pub const STNP_ALIGN: usize = 16;

/// Zeroes `len` bytes at `dst` with `DC ZVA`, `block` bytes per instruction.
///
/// # Safety
/// DC ZVA must be permitted (`cpu::features().dc_zva_block == Some(block)`); `dst` aligned
/// to `block` and `len` a multiple of it; the range valid for writes and unshared.
pub unsafe fn dc_zva(dst: *mut u8, len: usize, block: usize) {
    debug_assert!(
        block.is_power_of_two() && dst.addr().is_multiple_of(block) && len.is_multiple_of(block)
    );
    #[cfg(not(miri))]
    {
        let mut p = dst;
        let end = dst.wrapping_add(len);
        while p < end {
            // SAFETY: p is block-aligned inside the caller's writable range; DC ZVA zeroes
            // exactly the block holding p, and the caller checked DZP.
            unsafe { asm!("dc zva, {}", in(reg) p, options(nostack, preserves_flags)) };
            p = p.wrapping_add(block);
        }
    }
    #[cfg(miri)]
    // SAFETY: the caller guarantees the range is writable.
    unsafe {
        core::ptr::write_bytes(dst, 0, len);
    }
}

/// Zeroes `len` bytes at `dst` with `STNP xzr, xzr` (four pairs per 64 bytes).
///
/// # Safety
/// `dst` aligned to [`STNP_ALIGN`], `len` a multiple of [`STNP_MULTIPLE`]; the range valid
/// for writes and unshared.
pub unsafe fn stnp(dst: *mut u8, len: usize) {
    debug_assert!(dst.addr().is_multiple_of(STNP_ALIGN) && len.is_multiple_of(STNP_MULTIPLE));
    if len == 0 {
        return;
    }
    #[cfg(not(miri))]
    // SAFETY: len / 64 >= 1 steps of 64 bytes stay inside the caller's writable range.
    unsafe {
        asm!(
            "2:",
            "stnp xzr, xzr, [{p}]",
            "stnp xzr, xzr, [{p}, #16]",
            "stnp xzr, xzr, [{p}, #32]",
            "stnp xzr, xzr, [{p}, #48]",
            "add {p}, {p}, #64",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            p = inout(reg) dst => _,
            n = inout(reg) len / STNP_MULTIPLE => _,
            options(nostack),
        );
    }
    #[cfg(miri)]
    // SAFETY: the caller guarantees the range is writable.
    unsafe {
        core::ptr::write_bytes(dst, 0, len);
    }
}

/// The three-instruction MOPS set sequence (prologue, main, epilogue) zeroing `len` bytes at
/// `dst`; `.arch_extension mops` enables the mnemonics for this asm block only.
#[cfg(not(miri))]
macro_rules! mops_sequence {
    ($dst:expr, $len:expr, $p:literal, $m:literal, $e:literal) => {
        asm!(
            ".arch_extension mops",
            concat!($p, " [{d}]!, {n}!, xzr"),
            concat!($m, " [{d}]!, {n}!, xzr"),
            concat!($e, " [{d}]!, {n}!, xzr"),
            d = inout(reg) $dst => _,
            n = inout(reg) $len => _,
            options(nostack),
        )
    };
}

/// Zeroes `len` bytes at `dst` with the FEAT_MOPS set sequence `SETP/SETM/SETE`.
///
/// # Safety
/// The CPU (and OS, for EL0) must have MOPS (`cpu::features().mops`); the range valid for
/// writes and unshared. Any alignment and length.
pub unsafe fn mops_set(dst: *mut u8, len: usize) {
    #[cfg(not(miri))]
    // SAFETY: MOPS checked by the caller; the sequence writes exactly len bytes from dst.
    unsafe {
        mops_sequence!(dst, len, "setp", "setm", "sete");
    }
    #[cfg(miri)]
    // SAFETY: the caller guarantees the range is writable.
    unsafe {
        core::ptr::write_bytes(dst, 0, len);
    }
}

/// Zeroes `len` bytes at `dst` with the non-temporal MOPS set sequence `SETPN/SETMN/SETEN`.
///
/// # Safety
/// As [`mops_set`]. Follow with [`crate::barrier::dmb_ishst`] before publishing.
pub unsafe fn mops_set_nt(dst: *mut u8, len: usize) {
    #[cfg(not(miri))]
    // SAFETY: as in mops_set.
    unsafe {
        mops_sequence!(dst, len, "setpn", "setmn", "seten");
    }
    #[cfg(miri)]
    // SAFETY: the caller guarantees the range is writable.
    unsafe {
        core::ptr::write_bytes(dst, 0, len);
    }
}
