//! aarch64: FEAT_MOPS (and its non-temporal form), DC ZVA, `stnp` and NEON `stp q` from
//! arch-arm64. NEON exists only where the target has it (not on soft-float targets).

use crate::Strategy;
use arch_arm64::{barrier, clear as arm64, cpu};

/// MOPS, else DC ZVA, else `stnp`; NEON stores last (the detected policy takes them only
/// where nothing else is available; the calibrated policy times them).
pub(crate) const TEMPORAL_PREFERENCE: &[Strategy] = &[
    Strategy::Mops,
    Strategy::DcZva,
    Strategy::Stnp,
    Strategy::NeonStp,
];

/// Only MOPS has a non-temporal form (DC ZVA and `stnp` stay temporal choices).
pub(crate) const STREAMING_PREFERENCE: &[Strategy] = &[Strategy::MopsNt];

#[inline]
pub(crate) fn is_available(strategy: Strategy) -> bool {
    match strategy {
        Strategy::Portable | Strategy::Stnp => true,
        Strategy::NeonStp => cfg!(target_feature = "neon"),
        Strategy::DcZva => dc_zva_block().is_some(),
        Strategy::Mops | Strategy::MopsNt => cpu::features().mops,
        Strategy::RepStosb
        | Strategy::RepStosq
        | Strategy::UnrolledStores
        | Strategy::Avx2Stores
        | Strategy::Avx512Stores
        | Strategy::Movnti
        | Strategy::Avx2Stream
        | Strategy::Avx512Stream
        | Strategy::Clzero => false,
    }
}

/// # Safety
/// `dst..dst + len` valid for writes and not accessed concurrently; `strategy` available
/// ([`is_available`]). Each primitive checks its own alignment and length and falls back to
/// plain stores.
#[inline(always)]
pub(crate) unsafe fn clear(strategy: Strategy, dst: *mut u8, len: usize) {
    // SAFETY: the caller's range contract, and availability (MOPS present; DC ZVA permitted,
    // which dc_zva re-reads; NEON compiled in) for every arm.
    unsafe {
        match strategy {
            Strategy::DcZva => arm64::dc_zva(dst, len),
            Strategy::Stnp => arm64::stnp(dst, len),
            #[cfg(target_feature = "neon")]
            Strategy::NeonStp => arm64::neon_stp(dst, len),
            Strategy::Mops => arm64::mops_set(dst, len),
            Strategy::MopsNt => arm64::mops_set_nt(dst, len),
            _ => core::ptr::write_bytes(dst, 0, len),
        }
    }
}

#[inline]
pub(crate) fn store_fence() {
    barrier::dmb_ishst();
}

#[inline]
pub(crate) fn dc_zva_block() -> Option<usize> {
    cpu::features().dc_zva_block
}

#[inline]
pub(crate) fn reported_llc_bytes() -> Option<usize> {
    None
}

/// Takes `buf` out of every cache (`dc civac`): true, it can.
pub(crate) fn evict(buf: &[u8]) -> bool {
    // SAFETY: this backend runs at EL1/EL2 (a kernel or hypervisor: no condition) or at EL0
    // under an OS that permits EL0 cache maintenance (Linux sets SCTLR_EL1.UCT and UCI).
    unsafe { arm64::clean_invalidate_lines(buf) };
    true
}
