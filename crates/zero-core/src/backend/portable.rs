//! Targets without a backend of their own, and Miri on every target: `write_bytes` only.

use crate::Strategy;

pub(crate) const TEMPORAL_PREFERENCE: &[Strategy] = &[Strategy::Portable];
pub(crate) const STREAMING_PREFERENCE: &[Strategy] = &[];

#[inline]
pub(crate) fn is_available(strategy: Strategy) -> bool {
    strategy == Strategy::Portable
}

/// # Safety
/// `dst..dst + len` valid for writes and not accessed concurrently.
#[inline]
pub(crate) unsafe fn clear(_strategy: Strategy, dst: *mut u8, len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { core::ptr::write_bytes(dst, 0, len) }
}

#[inline]
pub(crate) fn store_fence() {
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

#[inline]
pub(crate) fn dc_zva_block() -> Option<usize> {
    None
}

#[inline]
pub(crate) fn reported_llc_bytes() -> Option<usize> {
    None
}

/// No cache maintenance here (or caches are invisible, under Miri): false, it cannot.
pub(crate) fn evict(buf: &[u8]) -> bool {
    let _ = buf;
    false
}
