//! Allocations of any number of frames (Linux's `alloc_pages_exact` / `free_pages_exact`):
//! the covering block, split into order-0 pages, with the pages past the request given back
//! at once as the fewest aligned blocks.

use crate::frame::Frame;
use crate::{BuddyError, Order, PerCpu, Pfn, Zone};
use lock_api::RawMutex;

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
    R: RawMutex,
{
    /// Allocates `pages` contiguous frames on `cpu` (Linux's `alloc_pages_exact`): the block
    /// of [`Order::covering`]`(pages)`, split into order-0 pages with one reference each
    /// ([`Zone::split_page`]), the pages past `pages` freed again at once
    /// ([`Zone::free_contig_range`]). The run starts aligned to that order. Free it with
    /// [`Zone::free_pages_exact`] (or any part of it with `free_contig_range`: each page is
    /// its own allocation).
    ///
    /// # Errors
    /// [`BuddyError::ZeroPages`]; [`BuddyError::OrderTooLarge`] when the covering order is
    /// above the zone's MAX_ORDER; as [`Zone::alloc_pages`] otherwise. Nothing is
    /// allocated then.
    pub fn alloc_pages_exact(&self, cpu: usize, pages: u64) -> Result<Pfn, BuddyError> {
        self.alloc_pages_exact_aligned(cpu, pages, Order::ZERO)
    }

    /// [`Zone::alloc_pages_exact`] with the run starting aligned to `align` as well (a block
    /// of the larger of `align` and the covering order is taken, and everything past
    /// `pages` given back).
    ///
    /// # Errors
    /// As [`Zone::alloc_pages_exact`].
    #[allow(unsafe_code)]
    pub fn alloc_pages_exact_aligned(
        &self,
        cpu: usize,
        pages: u64,
        align: Order,
    ) -> Result<Pfn, BuddyError> {
        let order = Order::covering(pages)?.max(align);
        let pfn = self.alloc_pages(cpu, order)?;
        if let Err(e) = self.split_page(pfn, order) {
            // Not reached (the block is this call's alone, with one reference); give it
            // back rather than leak it.
            // SAFETY: this call allocated the block and hands it to nobody.
            let _ = unsafe { self.free_pages(cpu, pfn, order) };
            return Err(e);
        }
        let tail = order.pages() - pages;
        // SAFETY: this call allocated and split the block: the pages past the request are
        // its own, and on the unreachable error all of them are.
        let freed =
            (tail > 0).then(|| unsafe { self.free_contig_range(cpu, Pfn(pfn.0 + pages), tail) });
        if let Some(Err(e)) = freed {
            // Not reached either: every page is this call's, split, with one reference.
            // SAFETY: as above.
            let _ = unsafe { self.free_contig_range(cpu, pfn, order.pages()) };
            return Err(e);
        }
        Ok(pfn)
    }

    /// Frees `pages` frames from `pfn` that [`Zone::alloc_pages_exact`] handed out (Linux's
    /// `free_pages_exact`): one reference dropped per page, the run freed as the fewest
    /// aligned blocks ([`Zone::free_contig_range`]).
    ///
    /// # Errors
    /// As [`Zone::free_contig_range`]; nothing is freed then.
    ///
    /// # Safety
    /// As [`Zone::free_contig_range`].
    #[allow(unsafe_code)]
    pub unsafe fn free_pages_exact(
        &self,
        cpu: usize,
        pfn: Pfn,
        pages: u64,
    ) -> Result<(), BuddyError> {
        // SAFETY: the caller's contract is this one's.
        unsafe { self.free_contig_range(cpu, pfn, pages) }
    }
}
