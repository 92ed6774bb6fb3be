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

/// One clearing primitive as a function: what a validated clearer calls for its small
/// extents, so that a page costs an indirect call and no dispatch on the strategy.
pub(crate) type ClearFn = unsafe fn(*mut u8, usize);

/// [`clear`] with the strategy fixed at compile time (`Strategy::ALL[S]`): the dispatch folds
/// away.
///
/// # Safety
/// As [`clear`].
unsafe fn clear_with<const S: usize>(dst: *mut u8, len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { clear(crate::Strategy::ALL[S], dst, len) }
}

/// [`clear_with`] for every strategy, in `Strategy::ALL`'s order.
const PRIMITIVES: [ClearFn; 15] = [
    clear_with::<0>,
    clear_with::<1>,
    clear_with::<2>,
    clear_with::<3>,
    clear_with::<4>,
    clear_with::<5>,
    clear_with::<6>,
    clear_with::<7>,
    clear_with::<8>,
    clear_with::<9>,
    clear_with::<10>,
    clear_with::<11>,
    clear_with::<12>,
    clear_with::<13>,
    clear_with::<14>,
];

const _: () = assert!(PRIMITIVES.len() == crate::Strategy::ALL.len());

/// `strategy`'s primitive as a function (its extent primitive, one call for the whole range).
pub(crate) fn primitive(strategy: crate::Strategy) -> ClearFn {
    let i = crate::Strategy::ALL
        .iter()
        .position(|&s| s == strategy)
        .unwrap_or(0);
    PRIMITIVES[i]
}
