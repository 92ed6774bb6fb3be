//! Reclaim under memory pressure (ax-alloc's): the kernel registers a callback that frees
//! pages it can drop (clean page cache); an allocation that finds no memory calls it and
//! tries again, a bounded number of times. A lease lets one reclaim run at a time, and none
//! from inside another.
//!
//! The callback runs with no lock of the allocator held: it frees through the usual calls,
//! which take this CPU's page lock.

use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use crate::{AllocError, AllocResult};

/// A callback that frees about `num_pages` pages the kernel can drop and returns how many it
/// freed. It must not allocate from this allocator, do I/O or wait for contended locks.
pub type PageReclaimFn = fn(num_pages: usize) -> usize;

/// The registered callback, as a pointer (null: none), so that reading it takes no lock.
static RECLAIM: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Held while a reclaim runs.
static RECLAIMING: AtomicBool = AtomicBool::new(false);

/// The least a reclaim is asked to free.
const MIN_RECLAIM_PAGES: usize = 16;

/// Reclaims an allocation tries before it fails.
const MAX_RECLAIMS: usize = 4;

/// Registers `f` as the callback an allocation calls when memory is short (replacing any
/// before it).
pub fn register_page_reclaim_fn(f: PageReclaimFn) {
    RECLAIM.store(f as *mut (), Ordering::Release);
}

/// Calls the registered callback for `num_pages` pages and returns how many it freed: 0
/// without a callback, or while another reclaim runs (on any CPU, or this one further out).
pub fn try_page_reclaim(num_pages: usize) -> usize {
    if RECLAIMING
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return 0;
    }
    let f = RECLAIM.load(Ordering::Acquire);
    let freed = if f.is_null() {
        0
    } else {
        // SAFETY: only `register_page_reclaim_fn` stores a non-null pointer here, a
        // `PageReclaimFn` cast to a data pointer (same size on every target ArceOS runs on).
        let f: PageReclaimFn = unsafe { core::mem::transmute::<*mut (), PageReclaimFn>(f) };
        f(num_pages)
    };
    RECLAIMING.store(false, Ordering::Release);
    freed
}

/// `attempt`, and on [`AllocError::NoMemory`] a reclaim of at least `pages` pages and
/// another attempt, up to [`MAX_RECLAIMS`] times, while reclaims free something (the first
/// retry happens either way: another CPU may have freed memory meanwhile).
pub(crate) fn retrying<T>(pages: usize, attempt: impl Fn() -> AllocResult<T>) -> AllocResult<T> {
    retrying_with(pages, attempt, try_page_reclaim)
}

/// [`retrying`] with `reclaim` for the registered callback.
fn retrying_with<T>(
    pages: usize,
    attempt: impl Fn() -> AllocResult<T>,
    mut reclaim: impl FnMut(usize) -> usize,
) -> AllocResult<T> {
    let mut result = attempt();
    for _ in 0..MAX_RECLAIMS {
        if !matches!(result, Err(AllocError::NoMemory)) {
            break;
        }
        let freed = reclaim(pages.max(MIN_RECLAIM_PAGES));
        result = attempt();
        if freed == 0 {
            break;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;

    #[test]
    fn a_reclaim_that_frees_memory_lets_the_retry_succeed() {
        let tries = Cell::new(0);
        let r = retrying_with(
            1,
            || {
                tries.set(tries.get() + 1);
                if tries.get() < 3 {
                    Err(AllocError::NoMemory)
                } else {
                    Ok(7)
                }
            },
            |n| {
                assert_eq!(n, MIN_RECLAIM_PAGES);
                1
            },
        );
        assert_eq!((r, tries.get()), (Ok(7), 3));
    }

    #[test]
    fn a_reclaim_that_frees_nothing_gets_one_retry() {
        let tries = Cell::new(0);
        let r: AllocResult<()> = retrying_with(
            64,
            || {
                tries.set(tries.get() + 1);
                Err(AllocError::NoMemory)
            },
            |n| {
                assert_eq!(n, 64);
                0
            },
        );
        assert_eq!((r, tries.get()), (Err(AllocError::NoMemory), 2));
    }

    #[test]
    fn retries_are_bounded_and_other_errors_are_final() {
        let tries = Cell::new(0);
        let r: AllocResult<()> = retrying_with(
            1,
            || {
                tries.set(tries.get() + 1);
                Err(AllocError::NoMemory)
            },
            |_| 1,
        );
        assert_eq!(
            (r, tries.get()),
            (Err(AllocError::NoMemory), MAX_RECLAIMS + 1)
        );
        let reclaims = Cell::new(0);
        let r: AllocResult<()> = retrying_with(
            1,
            || Err(AllocError::InvalidParam),
            |_| {
                reclaims.set(reclaims.get() + 1);
                1
            },
        );
        assert_eq!((r, reclaims.get()), (Err(AllocError::InvalidParam), 0));
    }

    #[test]
    fn a_reclaim_inside_a_reclaim_gets_nothing() {
        fn nested(n: usize) -> usize {
            // The lease is held: an inner call returns 0 without calling anything.
            assert_eq!(try_page_reclaim(n), 0);
            5
        }
        register_page_reclaim_fn(nested);
        assert_eq!(try_page_reclaim(3), 5);
        assert!(!RECLAIMING.load(Ordering::Relaxed));
    }
}
