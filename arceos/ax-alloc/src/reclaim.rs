//! Reclaim under memory pressure (ax-alloc's): the kernel registers a callback that frees
//! pages it can drop (clean page cache); an allocation that finds no memory calls it through
//! buddy-sim's direct reclaim ([`reclaim_and_retry`]: the rounds and sizes of Linux's
//! `should_reclaim_retry`) and tries again. A lease lets one reclaim run at a time, and none
//! from inside another.
//!
//! The callback runs with no lock of the allocator held: it frees through the usual calls,
//! which take this CPU's page lock (or the heap's).

use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use axalloc_buddy::buddy_sim::reclaim_and_retry;

use crate::{AllocError, AllocResult};

/// A callback that frees about `num_pages` pages the kernel can drop and returns how many it
/// freed. It must not allocate from this allocator, do I/O or wait for contended locks.
pub type PageReclaimFn = fn(num_pages: usize) -> usize;

/// The registered callback, as a pointer (null: none), so that reading it takes no lock.
static RECLAIM: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Held while a reclaim runs.
static RECLAIMING: AtomicBool = AtomicBool::new(false);

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

/// `first`, the result of a first attempt for `pages` pages; on [`AllocError::NoMemory`],
/// rounds of the registered reclaim ([`try_page_reclaim`], under its lease), each followed
/// by another `attempt`, as buddy-sim's direct reclaim makes them ([`reclaim_and_retry`]).
/// The caller makes the first attempt itself, as code of its own rather than a call of
/// `attempt`: an allocation that succeeds costs no more than the allocator's call.
#[inline(always)]
pub(crate) fn reclaiming<T>(
    pages: usize,
    first: AllocResult<T>,
    attempt: impl FnMut() -> AllocResult<T>,
) -> AllocResult<T> {
    reclaiming_with(pages, first, attempt, try_page_reclaim)
}

/// [`reclaiming`] with `reclaim` for the registered callback.
#[inline(always)]
fn reclaiming_with<T>(
    pages: usize,
    first: AllocResult<T>,
    attempt: impl FnMut() -> AllocResult<T>,
    mut reclaim: impl FnMut(usize) -> usize,
) -> AllocResult<T> {
    match first {
        Err(AllocError::NoMemory) => {
            let mut round = |want: u64| reclaim(usize::try_from(want).unwrap_or(usize::MAX)) as u64;
            reclaim_and_retry(
                pages as u64,
                &mut round,
                |e| *e == AllocError::NoMemory,
                attempt,
                AllocError::NoMemory,
            )
        }
        first => first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use core::cell::Cell;

    /// [`reclaiming_with`] of an attempt that succeeds on try `succeed_at` (never with
    /// `None`), for `pages` pages, with a reclaim that frees `freed` pages each round:
    /// the result, the attempts and what each round asked for.
    fn run(
        pages: usize,
        succeed_at: Option<u32>,
        freed: usize,
    ) -> (AllocResult<u32>, u32, Vec<usize>) {
        let tries = Cell::new(0);
        let mut asked = Vec::new();
        let attempt = || {
            tries.set(tries.get() + 1);
            match succeed_at {
                Some(at) if tries.get() >= at => Ok(tries.get()),
                _ => Err(AllocError::NoMemory),
            }
        };
        let r = reclaiming_with(pages, attempt(), attempt, |n| {
            asked.push(n);
            freed
        });
        (r, tries.get(), asked)
    }

    #[test]
    fn a_reclaim_that_frees_memory_lets_the_retry_succeed() {
        assert_eq!(run(1, Some(3), 1), (Ok(3), 3, vec![32, 32]));
        assert_eq!(run(1, Some(1), 1), (Ok(1), 1, vec![]));
    }

    #[test]
    fn a_reclaim_that_frees_nothing_gets_one_retry() {
        assert_eq!(run(64, None, 0), (Err(AllocError::NoMemory), 2, vec![64]));
    }

    #[test]
    fn retries_are_bounded_and_other_errors_are_final() {
        let (r, tries, asked) = run(1, None, 1);
        assert_eq!((r, tries, asked.len()), (Err(AllocError::NoMemory), 17, 16));
        // A run above 8 pages (a costly order) gets one round.
        assert_eq!(run(16, None, 1), (Err(AllocError::NoMemory), 2, vec![32]));
        let reclaims = Cell::new(0);
        let r: AllocResult<()> = reclaiming_with(
            1,
            Err(AllocError::InvalidParam),
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
