//! x86_64: the string stores, the unrolled loop, AVX2/AVX-512 temporal and streaming stores,
//! `movnti` and CLZERO from arch-x86. The vector strategies exist only where the target has
//! SSE: a soft-float kernel target (`x86_64-unknown-none`) does not save vector state.

use crate::Strategy;
use arch_x86::{clear as x86, cpu};

/// Whether the target lets code use vector registers (false on soft-float kernel targets).
const VECTOR_STATE: bool = cfg!(target_feature = "sse2");

/// The kernel's boot-time pick first (ERMS -> `rep stosb`; REP_GOOD -> `rep stosq`; else the
/// unrolled loop), vector stores last: `rep stosb` with ERMS is within a few percent of them
/// on cache-resident extents and never needs vector state, so the detected policy only uses
/// them where nothing else is available (which on x86_64 is never); the calibrated policy
/// times them and takes them where they win.
pub(crate) const TEMPORAL_PREFERENCE: &[Strategy] = &[
    Strategy::RepStosb,
    Strategy::RepStosq,
    Strategy::UnrolledStores,
    Strategy::Avx512Stores,
    Strategy::Avx2Stores,
];

/// In the order measured past the last-level cache, with the candidates interleaved: AVX-512
/// and AVX2 streaming stores write whole lines without reading them and are the fastest,
/// CLZERO next, `movnti` (8 bytes a store) last, or tied with AVX-512 on some CPUs.
/// The "every strategy" table of this project's benchmark report shows the figures on the
/// CPU it runs on.
pub(crate) const STREAMING_PREFERENCE: &[Strategy] = &[
    Strategy::Avx512Stream,
    Strategy::Avx2Stream,
    Strategy::Clzero,
    Strategy::Movnti,
];

#[inline]
pub(crate) fn is_available(strategy: Strategy) -> bool {
    let f = cpu::features();
    match strategy {
        Strategy::Portable
        | Strategy::RepStosb
        | Strategy::RepStosq
        | Strategy::UnrolledStores
        | Strategy::Movnti => true,
        Strategy::Avx2Stores | Strategy::Avx2Stream => VECTOR_STATE && f.avx2,
        Strategy::Avx512Stores | Strategy::Avx512Stream => VECTOR_STATE && f.avx512f,
        Strategy::Clzero => f.clzero,
        Strategy::DcZva
        | Strategy::Stnp
        | Strategy::NeonStp
        | Strategy::Mops
        | Strategy::MopsNt => false,
    }
}

/// # Safety
/// `dst..dst + len` valid for writes and not accessed concurrently; `strategy` available
/// ([`is_available`]). Each primitive checks its own alignment and length and falls back to
/// plain stores.
#[inline(always)]
pub(crate) unsafe fn clear(strategy: Strategy, dst: *mut u8, len: usize) {
    // SAFETY: the caller's range contract, and availability (the CPU has the instruction,
    // and for the vector ones the target saves vector state) for every arm.
    unsafe {
        match strategy {
            Strategy::RepStosb => x86::rep_stosb(dst, len),
            Strategy::RepStosq => x86::rep_stosq(dst, len),
            Strategy::UnrolledStores => x86::unrolled_stores(dst, len),
            Strategy::Movnti => x86::movnti(dst, len),
            #[cfg(target_feature = "sse2")]
            Strategy::Avx2Stores => x86::avx2_stores(dst, len),
            #[cfg(target_feature = "sse2")]
            Strategy::Avx512Stores => x86::avx512_stores(dst, len),
            #[cfg(target_feature = "sse2")]
            Strategy::Avx2Stream => x86::avx2_stream(dst, len),
            #[cfg(target_feature = "sse2")]
            Strategy::Avx512Stream => x86::avx512_stream(dst, len),
            Strategy::Clzero => x86::clzero(dst, len),
            _ => core::ptr::write_bytes(dst, 0, len),
        }
    }
}

#[inline]
pub(crate) fn store_fence() {
    x86::sfence();
}

#[inline]
pub(crate) fn dc_zva_block() -> Option<usize> {
    None
}

pub(crate) fn reported_llc_bytes() -> Option<usize> {
    cpu::caches().last_level().map(|c| c.size)
}

/// Takes `buf` out of every cache (`clflush`): true, it can.
pub(crate) fn evict(buf: &[u8]) -> bool {
    x86::flush_lines(buf);
    true
}
