//! The one place that picks how this target clears memory (hashbrown's `control/group`
//! pattern): [`x86_64`](self) on x86_64, `aarch64` on aarch64, `portable` everywhere else and
//! under Miri on every target. Each backend module has the same items:
//!
//! - `is_available(Strategy) -> bool`: whether this CPU (and target) can execute it;
//! - `unsafe fn clear(Strategy, *mut u8, usize)`: one call of the primitive (a strategy the
//!   backend has no instruction for clears with `write_bytes`);
//! - `store_fence()`: the fence non-temporal stores need before memory is handed out;
//! - `dc_zva_block() -> Option<usize>`: the DC ZVA block, where DC ZVA is permitted;
//! - `TEMPORAL_PREFERENCE` / `STREAMING_PREFERENCE`: the detected policy's candidates, best
//!   first (the first available one the embedder's [`VectorUse`](crate::VectorUse) permits
//!   is chosen);
//! - `reported_llc_bytes()`: the last-level cache size the CPU reports, if it does;
//! - `evict(&[u8]) -> bool`: takes a range out of every cache (what calibration's cold
//!   samples start from), false where the backend cannot.

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86_64;
#[cfg(all(target_arch = "x86_64", not(miri)))]
use self::x86_64 as imp;

#[cfg(all(target_arch = "aarch64", not(miri)))]
mod aarch64;
#[cfg(all(target_arch = "aarch64", not(miri)))]
use self::aarch64 as imp;

#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
mod portable;
#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
use self::portable as imp;

pub(crate) use imp::{
    STREAMING_PREFERENCE, TEMPORAL_PREFERENCE, clear, dc_zva_block, evict, is_available,
    reported_llc_bytes, store_fence,
};
