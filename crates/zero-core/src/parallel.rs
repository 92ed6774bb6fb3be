//! Clearing one huge extent on several cores at once: for a hypervisor that pre-zeroes guest
//! RAM, or a kernel that zeroes a 1 GiB folio before mapping it.
//!
//! The extent is cut into chunks (the same [`ChunkPlan`](crate::plan::ChunkPlan) units as
//! [`clear_contig_pages`](crate::clear_contig_pages)); each worker claims the next chunk with
//! one atomic `fetch_add` on a shared cursor, so every chunk is cleared by exactly one worker
//! and no worker waits for another. The claim protocol is model-checked with loom.

use crate::sync::{AtomicUsize, Ordering};
use crate::{Clearer, Locality, Policy, Resched, ZeroError};
use core::marker::PhantomData;
use core::num::NonZeroUsize;
use core::ops::Range;

/// A shared cursor over the chunks `0..total`: [`ChunkCursor::claim`] hands out each chunk
/// index exactly once across all threads.
#[derive(Debug)]
pub struct ChunkCursor {
    next: AtomicUsize,
    total: usize,
}

impl ChunkCursor {
    /// A cursor over `total` chunks.
    #[must_use]
    pub fn new(total: usize) -> Self {
        Self {
            next: AtomicUsize::new(0),
            total,
        }
    }

    /// Claims the next unclaimed chunk, or `None` when all are claimed (a worker stops at
    /// its first `None`, so the counter moves past `total` at most once per worker).
    pub fn claim(&self) -> Option<usize> {
        // Relaxed suffices: the cursor only partitions the work; the memory the chunks
        // cover is published by however the caller joins its workers.
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.total).then_some(i)
    }
}

/// One extent being cleared by several workers. Create it from the extent, share `&self`
/// with the workers (it is `Sync`), and have each call [`ParallelClear::work`]; when all have
/// returned (and been joined), every byte is zero.
///
/// ```
/// use zero_core::{ClearConfig, NoResched, PageSize, PreemptModel, ParallelClear};
/// # let mut backing = vec![0xA5u8; 65 * 4096];
/// # let at = backing.as_ptr().align_offset(4096);
/// # let extent = &mut backing[at..at + 64 * 4096];
/// let clearer = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None).validate()?;
/// let job = ParallelClear::new(extent, core::num::NonZeroUsize::new(8).unwrap(), &clearer)?;
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| job.work(&mut NoResched));
///     }
/// });
/// assert!(extent.iter().all(|&b| b == 0));
/// # Ok::<(), zero_core::ZeroError>(())
/// ```
#[derive(Debug)]
pub struct ParallelClear<'a> {
    base: *mut u8,
    npages: usize,
    chunk_pages: NonZeroUsize,
    cursor: ChunkCursor,
    clearer: Clearer,
    _extent: PhantomData<&'a mut [u8]>,
}

// SAFETY: the workers write only through `base`, each to the disjoint chunk the cursor gave
// it, and the extent is exclusively borrowed for 'a, so sharing `&ParallelClear` between
// threads cannot create overlapping or foreign accesses.
unsafe impl Sync for ParallelClear<'_> {}

impl<'a> ParallelClear<'a> {
    /// Prepares to clear `extent` (page-aligned, whole pages) in chunks of `chunk_pages`.
    /// The strategy is chosen once, for the whole extent and the clearer's temperature: a
    /// 1 GiB extent past the policy's streaming threshold (or a cold one past its cold
    /// threshold) streams even when its chunks are smaller than the threshold (each
    /// worker's chunks are still cut into the configuration's batches).
    ///
    /// # Errors
    /// As [`clear_contig_pages`](crate::clear_contig_pages): bad geometry. Nothing is
    /// written.
    pub fn new(
        extent: &'a mut [u8],
        chunk_pages: NonZeroUsize,
        clearer: &Clearer,
    ) -> Result<Self, ZeroError> {
        let npages = clearer.check_slice(extent)?;
        let base = extent.as_mut_ptr();
        let strategy = clearer
            .config()
            .policy
            .choose(extent.len(), clearer.extent_locality());
        Ok(Self {
            base,
            npages,
            chunk_pages,
            cursor: ChunkCursor::new(npages.div_ceil(chunk_pages.get())),
            // The strategy the clearer chose is available, so the fixed policy validates.
            clearer: clearer.with_policy(Policy::fixed(strategy))?,
            _extent: PhantomData,
        })
    }

    /// The pages of chunk `i`.
    fn chunk(&self, i: usize) -> Range<usize> {
        let start = i.saturating_mul(self.chunk_pages.get()).min(self.npages);
        start
            ..start
                .saturating_add(self.chunk_pages.get())
                .min(self.npages)
    }

    /// Claims and clears chunks until none is left; `cond_resched` runs before each.
    /// Returns how many chunks this worker cleared.
    pub fn work(&self, resched: &mut impl Resched) -> usize {
        let mut done = 0;
        while let Some(i) = self.cursor.claim() {
            let pages = self.chunk(i);
            // SAFETY: the cursor gave chunk i to this worker alone; its pages lie inside the
            // extent borrowed for 'a and validated in new().
            unsafe {
                self.clearer
                    .clear_range(self.base, pages, Locality::Unknown, resched);
            };
            done += 1;
        }
        done
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{ClearConfig, NoResched, PageSize, PreemptModel, Strategy};

    /// The strategy follows the extent's size, not the chunk's: chunks of one page of an
    /// extent past the threshold stream, and the extent reads back zero.
    #[test]
    fn strategy_is_chosen_for_the_whole_extent() {
        let streaming = Strategy::available().find(|s| s.is_non_temporal());
        let policy = Policy::fixed(Strategy::Portable)
            .with_streaming(streaming)
            .with_streaming_threshold(8 * 4096);
        let clearer = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
            .with_policy(policy)
            .validate()
            .expect("available strategies");
        let mut backing = std::vec![0xA5u8; 17 * 4096];
        let at = backing.as_ptr().align_offset(4096);
        let extent = &mut backing[at..at + 16 * 4096];
        let one = NonZeroUsize::MIN;
        let job = ParallelClear::new(extent, one, &clearer).expect("a valid extent");
        let expected = streaming.unwrap_or(Strategy::Portable);
        assert_eq!(
            job.clearer.config().policy.choose(4096, Locality::Unknown),
            expected
        );
        assert_eq!(job.work(&mut NoResched), 16);
        assert!(extent.iter().all(|&b| b == 0));
    }
}
