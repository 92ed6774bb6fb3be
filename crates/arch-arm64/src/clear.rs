//! The arm64 clearing primitives. Each zeroes `len` bytes at `dst` in one call, so a caller
//! can clear a whole extent; each states its alignment and checks it in every build: a range
//! that does not meet it (or is shorter than one unit) is cleared with plain stores
//! (`write_bytes`) instead, so no instruction writes outside `dst..dst + len` or loops on a
//! zero count. Under Miri every primitive runs `write_bytes`.
//!
//! - [`dc_zva`]: `DC ZVA`, one block of `4 << DCZID_EL0.BS` bytes per instruction (64 on most
//!   hardware, 512 under qemu-user `-cpu max`), the size read from DCZID_EL0 itself; plain
//!   stores where DZP prohibits it.
//! - [`stnp`]: `STNP xzr, xzr` pairs, the fallback where DC ZVA is prohibited.
//! - `neon_stp`: `STP q, q` pairs of zeroed NEON registers, 32 bytes a store, temporal: for
//!   cache-resident extents, where the target has NEON and the context may use it.
//! - [`mops_set`] and [`mops_set_nt`]: FEAT_MOPS `SETP/SETM/SETE` and the non-temporal
//!   `SETPN/SETMN/SETEN`; any alignment and length. The non-temporal form should be followed
//!   by [`crate::barrier::dmb_ishst`] before the memory is published.

#[cfg(not(miri))]
use core::arch::asm;

/// [`stnp`] stores 64 bytes per loop step: `len` a multiple of 64, `dst` aligned to 16.
pub const STNP_MULTIPLE: usize = 64;
/// [`stnp`]'s alignment.
pub const STNP_ALIGN: usize = 16;

/// How many whole units of `unit` bytes `len` is, when `dst` is aligned to `align`, `len` a
/// multiple of `unit` and at least one unit; `None` otherwise (the caller then clears with
/// [`plain`]).
fn units(dst: *mut u8, len: usize, align: usize, unit: usize) -> Option<usize> {
    (dst.addr().is_multiple_of(align) && len.is_multiple_of(unit) && len >= unit)
        .then_some(len / unit)
}

/// The fallback of every primitive: zeroes `dst..dst + len` with `write_bytes`.
///
/// # Safety
/// `dst..dst + len` valid for writes and not accessed concurrently.
unsafe fn plain(dst: *mut u8, len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { core::ptr::write_bytes(dst, 0, len) }
}

/// Zeroes `len` bytes at `dst` with `DC ZVA`, one block per instruction, the block size read
/// from DCZID_EL0 ([`crate::cpu::Features::dc_zva_block`]) so it can never be wrong.
///
/// # Safety
/// `dst..dst + len` must be valid for writes and not accessed concurrently. Runs `DC ZVA`
/// when it is permitted (DZP clear), `dst` is aligned to the block and `len` a non-zero
/// multiple of it; otherwise plain stores (`write_bytes`).
pub unsafe fn dc_zva(dst: *mut u8, len: usize) {
    let whole_blocks = crate::cpu::features()
        .dc_zva_block
        .and_then(|block| Some((block, units(dst, len, block, block)?)));
    let Some((block, blocks)) = whole_blocks else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    for i in 0..blocks {
        // SAFETY: DC ZVA is permitted with this block size (DCZID_EL0, read above); dst is
        // block-aligned and the range `blocks` whole blocks, so block i lies inside the
        // caller's writable range and DC ZVA zeroes exactly it.
        unsafe {
            asm!("dc zva, {}", in(reg) dst.add(i * block), options(nostack, preserves_flags));
        }
    }
    #[cfg(miri)]
    {
        let _ = (block, blocks);
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Zeroes `len` bytes at `dst` with `STNP xzr, xzr` (four pairs per 64 bytes).
///
/// # Safety
/// `dst..dst + len` must be valid for writes and not accessed concurrently. Runs `STNP` when
/// `dst` is aligned to [`STNP_ALIGN`] and `len` is a non-zero multiple of [`STNP_MULTIPLE`];
/// otherwise plain stores (`write_bytes`).
pub unsafe fn stnp(dst: *mut u8, len: usize) {
    let Some(steps) = units(dst, len, STNP_ALIGN, STNP_MULTIPLE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: `units` checked the range is `steps` >= 1 whole 64-byte steps from a 16-aligned
    // dst; the loop, from n = steps down to zero, stores exactly those.
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
            n = inout(reg) steps => _,
            options(nostack),
        );
    }
    #[cfg(miri)]
    {
        let _ = steps;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// [`neon_stp`] stores 64 bytes per loop step: `len` a multiple of 64, `dst` aligned to 16.
pub const NEON_STP_MULTIPLE: usize = 64;
/// [`neon_stp`]'s alignment.
pub const NEON_STP_ALIGN: usize = 16;

/// Zeroes `len` bytes at `dst` with NEON `STP q, q` pairs (two per 64 bytes), temporal
/// stores that leave the lines in the cache.
///
/// Compiled only where the target has NEON (not on soft-float targets).
///
/// # Safety
/// The caller's execution context must allow FP/SIMD registers (at EL1, CPACR_EL1.FPEN set
/// and the interrupted context's vector state saved). `dst..dst + len` must be valid for
/// writes and not accessed concurrently. Runs `STP` when `dst` is aligned to
/// [`NEON_STP_ALIGN`] and `len` is a non-zero multiple of [`NEON_STP_MULTIPLE`]; otherwise
/// plain stores (`write_bytes`).
#[cfg(target_feature = "neon")]
pub unsafe fn neon_stp(dst: *mut u8, len: usize) {
    let Some(steps) = units(dst, len, NEON_STP_ALIGN, NEON_STP_MULTIPLE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller allows SIMD registers; `units` checked the range is `steps` >= 1
    // whole 64-byte steps from a 16-aligned dst; the loop, from n = steps down to zero,
    // stores exactly those. v0 is declared clobbered.
    unsafe {
        asm!(
            "movi v0.16b, #0",
            "2:",
            "stp q0, q0, [{p}]",
            "stp q0, q0, [{p}, #32]",
            "add {p}, {p}, #64",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            p = inout(reg) dst => _,
            n = inout(reg) steps => _,
            out("v0") _,
            options(nostack),
        );
    }
    #[cfg(miri)]
    {
        let _ = steps;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
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

/// Cleans and invalidates every data-cache line holding a byte of `buf` to the point of
/// coherency (`dc civac` each line, the smallest line size read from CTR_EL0, then `dsb sy`):
/// afterwards the range is in no cache and the next access to each line goes to memory. What
/// makes memory cold for a measurement. It changes no data, so a shared borrow is enough.
///
/// # Safety
/// At EL0 the operating system must let EL0 read CTR_EL0 and run `dc civac`
/// (SCTLR_EL1.UCT and UCI, which Linux sets); at EL1 and EL2 there is no condition. Without
/// that permission the instructions trap.
pub unsafe fn clean_invalidate_lines(buf: &[u8]) {
    #[cfg(not(miri))]
    {
        let ctr: u64;
        // SAFETY: reading CTR_EL0 has no side effect; EL0 access is the caller's contract.
        unsafe { asm!("mrs {}, ctr_el0", out(reg) ctr, options(nomem, nostack, preserves_flags)) };
        // DminLine, bits 19:16: log2 of the smallest data-cache line in 4-byte words.
        let step = 4usize << ((ctr >> 16) & 0xf);
        let start = buf.as_ptr().addr() & !(step - 1);
        let end = buf.as_ptr().addr().saturating_add(buf.len());
        let mut line = start;
        while line < end {
            // SAFETY: `line` lies in a cache line holding a byte of `buf`, so it is mapped;
            // `dc civac` changes no data; EL0 permission is the caller's contract.
            unsafe { asm!("dc civac, {}", in(reg) line, options(nostack, preserves_flags)) };
            line += step;
        }
        // SAFETY: dsb sy has no operands and no preconditions.
        unsafe { asm!("dsb sy", options(nostack, preserves_flags)) };
    }
    #[cfg(miri)]
    {
        // Caches are invisible to the abstract machine: nothing to do.
        let _ = buf;
    }
}
