//! Direct reclaim's rounds (Linux's `should_reclaim_retry`): how many rounds of the
//! embedder's [`Reclaim`] an allocation that runs out of memory makes, and how much each
//! asks for. The zone's slow path makes them around its own attempts; an adapter whose
//! attempt is a whole call of its own makes them through [`with_direct_reclaim`] (or
//! [`reclaim_and_retry`], after a first attempt of its own).

use crate::reclaim::Reclaim;
use crate::types::Order;
use crate::zone::config::PAGE_ALLOC_COSTLY_ORDER;

/// Linux's `MAX_RECLAIM_RETRIES`: the most rounds of direct reclaim (and compaction) one
/// allocation makes.
const MAX_RECLAIM_RETRIES: u32 = 16;

/// Linux's `SWAP_CLUSTER_MAX`: the least a round of direct reclaim asks for.
const SWAP_CLUSTER_MAX: u64 = 32;

/// The rounds of direct reclaim one allocation may make: each asks for the larger of 32
/// frames and the allocation; another round follows while the last made progress, up to
/// 16, and none after the first for an order above 3 (`PAGE_ALLOC_COSTLY_ORDER`, as Linux
/// without `__GFP_RETRY_MAYFAIL`: huge pages are worth a try, not a drained page cache).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReclaimRounds {
    left: u32,
    costly: bool,
}

impl ReclaimRounds {
    /// The rounds for an allocation of `order` (`None`: larger than any order).
    pub(crate) fn of(order: Option<Order>) -> Self {
        Self {
            left: MAX_RECLAIM_RETRIES,
            costly: order.is_none_or(|o| o > PAGE_ALLOC_COSTLY_ORDER),
        }
    }

    /// What a round asks the embedder to free for an allocation of `pages` frames.
    pub(crate) fn ask(pages: u64) -> u64 {
        pages.max(SWAP_CLUSTER_MAX)
    }

    /// Counts a round that made `progress`: whether another may follow.
    pub(crate) fn another(&mut self, progress: bool) -> bool {
        self.left = self.left.saturating_sub(1);
        progress && !self.costly && self.left > 0
    }
}

/// Direct reclaim around an allocation its caller makes whole (an adapter's page call, a
/// heap's growth, each taking and releasing its own locks): `attempt`; while it fails for
/// want of memory (`out_of_memory` says which errors are that), a round of `reclaim` and
/// another attempt, in the rounds the zone's own slow path makes
/// ([`AllocRequest::reclaim`](crate::AllocRequest::reclaim)): each asks for the larger of
/// 32 frames and `pages`; the retry after the first round follows whatever it freed
/// (another CPU may have freed memory meanwhile); another round only after one that freed
/// something, up to 16, and only one for a run of more than 8 frames.
///
/// `reclaim` runs between attempts, holding none of the caller's locks (an embedder's
/// reclaim frees through the same allocator), on the calling CPU.
///
/// ```
/// use buddy_sim::{AllocError, Order, Pfn, StaticZone, with_direct_reclaim};
/// static ZONE: StaticZone<64, 1> = StaticZone::new_static_at(Pfn(0));
/// let cpu = ZONE.cpu(0)?;
/// let order = Order::new(6)?;
/// // The whole zone in a cache the embedder can drop.
/// let mut cache = Some(cpu.alloc_frozen_pages(order)?);
/// let mut drop_cache = |_pages: u64| match cache.take() {
///     // SAFETY: the cache's block is the cache's alone, unused once dropped.
///     Some(block) => unsafe { cpu.free_frozen_pages(block, order) }.map_or(0, |()| 64),
///     None => 0,
/// };
/// let out_of_memory = |e: &AllocError| matches!(e, AllocError::OutOfMemory(_));
/// let page = with_direct_reclaim(1, &mut drop_cache, out_of_memory, || {
///     cpu.alloc_frozen_page()
/// })?;
/// assert_eq!(ZONE.free_pages_total(), 63);
/// # unsafe { cpu.free_frozen_page(page) }?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// The last attempt's error.
#[inline]
pub fn with_direct_reclaim<T, E>(
    pages: u64,
    reclaim: &mut dyn Reclaim,
    out_of_memory: impl Fn(&E) -> bool,
    mut attempt: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    // The first attempt inline, the rounds out of line: an attempt that succeeds (nearly
    // every one) costs its caller no more than the attempt itself.
    match attempt() {
        Err(e) if out_of_memory(&e) => reclaim_and_retry(pages, reclaim, out_of_memory, attempt, e),
        result => result,
    }
}

/// [`with_direct_reclaim`] after a first attempt the caller made itself failed with
/// `failed`, for want of memory: the rounds of `reclaim`, each followed by another
/// `attempt`. A caller whose first attempt is inlined code of its own (not a closure it
/// must call) makes it, and calls this only when it fails.
///
/// # Errors
/// The last attempt's error; `failed` itself where `out_of_memory` says it is not for want
/// of memory (no round is made).
#[cold]
#[inline(never)]
pub fn reclaim_and_retry<T, E>(
    pages: u64,
    reclaim: &mut dyn Reclaim,
    out_of_memory: impl Fn(&E) -> bool,
    mut attempt: impl FnMut() -> Result<T, E>,
    failed: E,
) -> Result<T, E> {
    let mut result = Err(failed);
    let mut rounds = ReclaimRounds::of(Order::covering(pages).ok());
    while matches!(&result, Err(e) if out_of_memory(e)) {
        let freed = reclaim.reclaim(ReclaimRounds::ask(pages));
        result = attempt();
        if !rounds.another(freed > 0) {
            break;
        }
    }
    result
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::cell::Cell;
    use std::vec;
    use std::vec::Vec;

    /// Runs [`with_direct_reclaim`] for `pages` with an attempt that succeeds on try
    /// `succeed_at` (never with `None`) and a reclaim that frees what `freed` says for each
    /// round; returns the result, the attempts, and what each round asked for.
    fn run(
        pages: u64,
        succeed_at: Option<u32>,
        freed: impl Fn(u32) -> u64,
    ) -> (Result<u32, &'static str>, u32, Vec<u64>) {
        let tries = Cell::new(0);
        let mut asked = Vec::new();
        let mut reclaim = |n: u64| {
            asked.push(n);
            freed(asked.len() as u32)
        };
        let r = with_direct_reclaim(
            pages,
            &mut reclaim,
            |e: &&str| *e == "oom",
            || {
                tries.set(tries.get() + 1);
                match succeed_at {
                    Some(at) if tries.get() >= at => Ok(tries.get()),
                    _ => Err("oom"),
                }
            },
        );
        (r, tries.get(), asked)
    }

    #[test]
    fn an_allocation_that_succeeds_calls_no_reclaim() {
        assert_eq!(run(1, Some(1), |_| 1), (Ok(1), 1, vec![]));
    }

    #[test]
    fn rounds_continue_while_they_free_and_ask_at_least_32_frames() {
        assert_eq!(run(1, Some(3), |_| 5), (Ok(3), 3, vec![32, 32]));
        assert_eq!(run(8, Some(2), |_| 5), (Ok(2), 2, vec![32]));
    }

    #[test]
    fn a_round_that_frees_nothing_gets_one_retry_and_ends() {
        assert_eq!(run(1, None, |_| 0), (Err("oom"), 2, vec![32]));
        // The retry after a fruitless round may still succeed (another CPU freed).
        assert_eq!(run(1, Some(2), |_| 0), (Ok(2), 2, vec![32]));
        // Progress, then none: the rounds end there.
        assert_eq!(
            run(1, None, |r| u64::from(r < 3)),
            (Err("oom"), 4, vec![32; 3])
        );
    }

    #[test]
    fn rounds_are_bounded_and_costly_runs_get_one() {
        let (r, tries, asked) = run(2, None, |_| 1);
        assert_eq!((r, tries, asked.len()), (Err("oom"), 17, 16));
        // More than 8 frames (above order 3), or no order at all: one round.
        assert_eq!(run(9, None, |_| 1), (Err("oom"), 2, vec![32]));
        assert_eq!(run(512, None, |_| 1), (Err("oom"), 2, vec![512]));
        assert_eq!(run(u64::MAX, None, |_| 1), (Err("oom"), 2, vec![u64::MAX]));
    }

    #[test]
    fn other_errors_are_final() {
        let mut reclaims = 0;
        let mut reclaim = |_: u64| {
            reclaims += 1;
            1
        };
        let r: Result<(), &str> =
            with_direct_reclaim(1, &mut reclaim, |e: &&str| *e == "oom", || Err("bad"));
        assert_eq!((r, reclaims), (Err("bad"), 0));
    }
}
