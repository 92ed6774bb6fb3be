//! Pure plans: how many pages a batch holds, how a range is cut into chunks, and in which
//! order a folio's pages are cleared. No memory is touched here, so every function is safe to
//! call with any input (and is fuzzed with arbitrary ones).

use crate::{PageSize, PreemptModel, ZeroError};
use core::num::NonZeroUsize;
use core::ops::Range;

/// The merged kernel's `PROCESS_PAGES_NON_PREEMPT_BATCH`: 32 MiB per batch under a
/// cooperative preemption model (v10 of the series used 8 MiB). About 3 ms at 10 GB/s, and
/// large enough for the AMD Zen cache-allocation elision that starts near LLC size.
pub const NON_PREEMPT_BATCH_BYTES: usize = 32 << 20;

/// Pages per batch under a cooperative preemption model: 32 MiB worth with an extent
/// primitive, else a single page (the kernel's generic `clear_page()` loop).
#[must_use]
pub const fn non_preempt_batch_pages(page_size: PageSize, extent: bool) -> NonZeroUsize {
    let pages = if extent {
        NON_PREEMPT_BATCH_BYTES >> page_size.shift()
    } else {
        1
    };
    match NonZeroUsize::new(pages) {
        Some(n) => n,
        None => NonZeroUsize::MIN,
    }
}

/// Pages per batch so that one batch takes at most `max_latency_ns` at a measured
/// `bytes_per_sec` store bandwidth: batch size from a latency target instead of a fixed
/// 32 MiB. At least one page; saturates instead of overflowing.
#[must_use]
pub fn batch_pages_for_latency(
    page_size: PageSize,
    bytes_per_sec: u64,
    max_latency_ns: u64,
) -> NonZeroUsize {
    let bytes = u128::from(bytes_per_sec) * u128::from(max_latency_ns) / 1_000_000_000;
    let pages = bytes >> page_size.shift();
    let pages = usize::try_from(pages).unwrap_or(usize::MAX);
    NonZeroUsize::new(pages).unwrap_or(NonZeroUsize::MIN)
}

/// The chunk size `clear_contig` uses for `npages` pages: the whole range when the model is
/// preemptible, else `batch`.
#[must_use]
pub fn chunk_unit(npages: usize, preempt: PreemptModel, batch: NonZeroUsize) -> NonZeroUsize {
    if preempt.is_preemptible() {
        NonZeroUsize::new(npages).unwrap_or(NonZeroUsize::MIN)
    } else {
        batch
    }
}

/// The chunks `clear_contig` clears, in order: consecutive page ranges of at most `unit`
/// pages that cover `pages` exactly once, ascending. `cond_resched` runs before each one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    next: usize,
    end: usize,
    unit: NonZeroUsize,
}

impl ChunkPlan {
    /// The plan for a page-index range cut into chunks of at most `unit` pages.
    #[must_use]
    pub fn new(pages: Range<usize>, unit: NonZeroUsize) -> Self {
        Self {
            next: pages.start,
            end: pages.end.max(pages.start),
            unit,
        }
    }

    /// The plan for clearing `pages` under `preempt`, with `batch` pages per batch when the
    /// model is cooperative.
    #[must_use]
    pub fn for_clear(pages: Range<usize>, preempt: PreemptModel, batch: NonZeroUsize) -> Self {
        let unit = chunk_unit(pages.len(), preempt, batch);
        Self::new(pages, unit)
    }
}

impl Iterator for ChunkPlan {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        if self.next >= self.end {
            return None;
        }
        let start = self.next;
        let len = self.unit.get().min(self.end - start);
        self.next = start + len;
        Some(start..self.next)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.end - self.next).div_ceil(self.unit.get());
        (n, Some(n))
    }
}

impl ExactSizeIterator for ChunkPlan {}

/// Pages on each side of the faulting page that are cleared last unless the policy says
/// otherwise ([`crate::Policy::with_fault_radius`]): the kernel's radius 2
/// (`folio_zero_user`'s `FOLIO_ZERO_LOCALITY_RADIUS`).
pub const FAULT_RADIUS: usize = 2;

/// The three page ranges `folio_zero_user` clears, in the order it clears them: right of the
/// fault's neighbourhood, left of it, then the neighbourhood itself (kept cache-hot). Empty
/// ranges are skipped by the clearers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRanges {
    /// Pages after the neighbourhood, cleared first.
    pub right: Range<usize>,
    /// Pages before the neighbourhood, cleared second.
    pub left: Range<usize>,
    /// The faulting page and up to the radius's pages each side, cleared last.
    pub neighbourhood: Range<usize>,
}

impl FaultRanges {
    /// The ranges of a folio of `npages` pages whose fault is in page `fault`, with `radius`
    /// pages each side of it in its neighbourhood.
    ///
    /// # Errors
    /// [`ZeroError::ZeroLength`] if `npages` is 0, [`ZeroError::FaultPageOutsideFolio`] if
    /// `fault >= npages`.
    pub fn new(npages: usize, fault: usize, radius: usize) -> Result<Self, ZeroError> {
        if npages == 0 {
            return Err(ZeroError::ZeroLength);
        }
        if fault >= npages {
            return Err(ZeroError::FaultPageOutsideFolio {
                page: fault,
                pages: npages,
            });
        }
        Ok(Self::around(npages, fault, radius))
    }

    /// [`FaultRanges::new`] for a `fault` the caller knows is below `npages`.
    #[inline(always)]
    pub(crate) const fn around(npages: usize, fault: usize, radius: usize) -> Self {
        let start = fault.saturating_sub(radius);
        let last = fault.saturating_add(radius);
        let end = if last < npages { last + 1 } else { npages };
        Self {
            right: end..npages,
            left: 0..start,
            neighbourhood: start..end,
        }
    }

    /// The ranges in clearing order, each with whether it is the hot neighbourhood.
    #[must_use]
    pub fn in_order(&self) -> [(Range<usize>, bool); 3] {
        [
            (self.right.clone(), false),
            (self.left.clone(), false),
            (self.neighbourhood.clone(), true),
        ]
    }
}

/// The older "clear the target sub-page last" order (`process_huge_page`, still used for
/// copies): pages far from the target first, then converging on it from both sides, the
/// target last. Yields each page index of `0..npages` exactly once.
#[derive(Clone, Debug)]
pub struct TargetLastOrder {
    /// The far part, cleared first: descending when `descending`, else ascending.
    far: Range<usize>,
    descending: bool,
    /// Start of the converging window `[base, base + 2 * half)`.
    base: usize,
    half: usize,
    /// Next step of the converging part (two pages a step).
    step: usize,
    /// The second page of the current step, still to yield.
    pending: Option<usize>,
}

impl TargetLastOrder {
    /// The order for a folio of `npages` pages with the target in page `target`.
    ///
    /// # Errors
    /// [`ZeroError::ZeroLength`] if `npages` is 0, [`ZeroError::FaultPageOutsideFolio`] if
    /// `target >= npages`.
    pub fn new(npages: usize, target: usize) -> Result<Self, ZeroError> {
        if npages == 0 {
            return Err(ZeroError::ZeroLength);
        }
        if target >= npages {
            return Err(ZeroError::FaultPageOutsideFolio {
                page: target,
                pages: npages,
            });
        }
        // `target <= npages / 2` is `2 * target <= npages` without overflow; in the else
        // branch 2 * (npages - target) <= npages, so nothing overflows either.
        let (far, descending, base, half) = if target <= npages / 2 {
            (2 * target..npages, true, 0, target)
        } else {
            let half = npages - target;
            let base = npages - 2 * half;
            (0..base, false, base, half)
        };
        Ok(Self {
            far,
            descending,
            base,
            half,
            step: 0,
            pending: None,
        })
    }
}

impl Iterator for TargetLastOrder {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let far = if self.descending {
            self.far.next_back()
        } else {
            self.far.next()
        };
        if far.is_some() {
            return far;
        }
        if let Some(p) = self.pending.take() {
            return Some(p);
        }
        if self.step >= self.half {
            return None;
        }
        let i = self.step;
        self.step += 1;
        self.pending = Some(self.base + 2 * self.half - 1 - i);
        Some(self.base + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn a_fault_outside_the_folio_is_reported_in_pages() {
        let outside = Some(ZeroError::FaultPageOutsideFolio { page: 8, pages: 8 });
        assert_eq!(FaultRanges::new(8, 8, FAULT_RADIUS).err(), outside);
        assert_eq!(TargetLastOrder::new(8, 8).err(), outside);
        assert_eq!(
            FaultRanges::new(0, 0, FAULT_RADIUS).err(),
            Some(ZeroError::ZeroLength)
        );
    }

    #[test]
    fn batch_is_32_mib_for_extents_and_one_page_otherwise() {
        assert_eq!(
            non_preempt_batch_pages(PageSize::Size4KiB, true).get(),
            8192
        );
        assert_eq!(
            non_preempt_batch_pages(PageSize::Size64KiB, true).get(),
            512
        );
        assert_eq!(non_preempt_batch_pages(PageSize::Size4KiB, false).get(), 1);
    }

    #[test]
    fn latency_batch() {
        // 10 GB/s for 3.2 ms is 32 MB: 7812 4 KiB pages.
        assert_eq!(
            batch_pages_for_latency(PageSize::Size4KiB, 10_000_000_000, 3_200_000).get(),
            7812
        );
        assert_eq!(batch_pages_for_latency(PageSize::Size4KiB, 0, 1).get(), 1);
        assert!(batch_pages_for_latency(PageSize::Size4KiB, u64::MAX, u64::MAX).get() > 1);
    }

    #[test]
    fn worked_examples_of_the_target_last_order() {
        let order = |n, t| TargetLastOrder::new(n, t).unwrap().collect::<Vec<_>>();
        assert_eq!(order(8, 2), [7, 6, 5, 4, 0, 3, 1, 2]);
        assert_eq!(order(8, 6), [0, 1, 2, 3, 4, 7, 5, 6]);
        assert_eq!(order(8, 0), [7, 6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(order(1, 0), [0]);
        assert!(TargetLastOrder::new(8, 8).is_err());
        assert!(TargetLastOrder::new(0, 0).is_err());
    }

    #[test]
    fn fault_ranges_examples() {
        let r = FaultRanges::new(512, 0, FAULT_RADIUS).unwrap();
        assert_eq!((r.right, r.left, r.neighbourhood), (3..512, 0..0, 0..3));
        let r = FaultRanges::new(512, 100, FAULT_RADIUS).unwrap();
        assert_eq!(
            (r.right, r.left, r.neighbourhood),
            (103..512, 0..98, 98..103)
        );
        let r = FaultRanges::new(4, 3, FAULT_RADIUS).unwrap();
        assert_eq!((r.right, r.left, r.neighbourhood), (4..4, 0..1, 1..4));
        let r = FaultRanges::new(512, 100, 0).unwrap();
        assert_eq!(
            (r.right, r.left, r.neighbourhood),
            (101..512, 0..100, 100..101)
        );
        let r = FaultRanges::new(512, 100, usize::MAX).unwrap();
        assert_eq!((r.right, r.left, r.neighbourhood), (512..512, 0..0, 0..512));
    }

    #[test]
    fn chunk_plan_handles_the_extremes() {
        let one = NonZeroUsize::MIN;
        assert_eq!(ChunkPlan::new(5..5, one).count(), 0);
        #[allow(clippy::reversed_empty_ranges)] // a reversed range from a caller is empty
        let reversed = 7..3;
        assert_eq!(ChunkPlan::new(reversed, one).count(), 0);
        let big = NonZeroUsize::new(usize::MAX).unwrap();
        let chunks: Vec<_> = ChunkPlan::new(usize::MAX - 3..usize::MAX, big).collect();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0], usize::MAX - 3..usize::MAX);
        assert_eq!(ChunkPlan::new(usize::MAX - 3..usize::MAX, one).len(), 3);
    }
}
