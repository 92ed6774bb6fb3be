//! `vmalloc` / `vfree`: many order-0 pages from the largest blocks that fit, given back all
//! or nothing.

use crate::contig::Claim;
use crate::frame::{Frame, Word};
use crate::{BuddyError, Order, PerCpu, Zone};
use lock_api::RawMutex;
use mm_types::FrameRange;

/// Frames a [`Zone::vmalloc`] call allocated: physically contiguous runs of order-0 pages.
#[derive(Debug)]
pub struct VmArea<'r> {
    runs: &'r [FrameRange],
}

impl<'r> VmArea<'r> {
    /// An area made of the given runs, e.g. ones saved from an earlier [`Zone::vmalloc`].
    /// [`Zone::vfree`] checks them before it frees anything.
    #[must_use]
    pub const fn from_runs(runs: &'r [FrameRange]) -> Self {
        Self { runs }
    }

    /// The runs of physically contiguous frames.
    #[must_use]
    pub fn runs(&self) -> &[FrameRange] {
        self.runs
    }

    /// Frames in the area.
    #[must_use]
    pub fn pages(&self) -> u64 {
        self.runs.iter().map(|r| r.pages).sum()
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
    R: RawMutex,
{
    /// Allocates `nr_pages` frames the way the kernel's vmalloc does: the largest blocks that
    /// fit (falling back to smaller ones), each split into order-0 pages with one reference,
    /// marked as vmalloc's (see [`Zone::vfree`]). The physically contiguous runs are written
    /// to `runs`; the area names the ones used.
    ///
    /// # Errors
    /// [`BuddyError::OutOfMemory`] or [`BuddyError::RunsFull`] (everything allocated so far
    /// is freed again), [`BuddyError::BadCpu`].
    pub fn vmalloc<'r>(
        &self,
        cpu: usize,
        nr_pages: u64,
        runs: &'r mut [FrameRange],
    ) -> Result<VmArea<'r>, BuddyError> {
        let pcp = self.pcp(cpu)?;
        let mut used = 0usize;
        let mut left = nr_pages;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            let mut order = Order::floor_log2(left, self.cfg.max_order);
            let pfn = loop {
                match self.alloc_pages(cpu, order) {
                    Ok(pfn) => break Some(pfn),
                    Err(_) if order > Order::ZERO => order = Order(order.get() - 1),
                    Err(_) => break None,
                }
            };
            let Some(pfn) = pfn else {
                break Err(BuddyError::OutOfMemory(order));
            };
            // Just allocated: nobody else knows these frames yet.
            let m = self.map();
            let idx = m.index_of(pfn);
            for i in idx..idx + order.pages() as u32 {
                m.frame(i).store(Word::allocated(0).with_vmalloc(true));
            }
            left -= order.pages();
            let extends = used > 0 && runs[used - 1].end() == Some(pfn);
            if extends {
                runs[used - 1].pages += order.pages();
            } else if used < runs.len() {
                runs[used] = FrameRange::new(pfn, order.pages());
                used += 1;
            } else {
                self.commit(pcp, idx..idx + order.pages() as u32);
                break Err(BuddyError::RunsFull);
            }
        };
        if let Err(e) = result {
            let m = self.map();
            for run in &runs[..used] {
                let idx = m.index_of(run.start);
                self.commit(pcp, idx..idx + run.pages as u32);
            }
            return Err(e);
        }
        Ok(VmArea {
            runs: &runs[..used],
        })
    }

    /// Frees a [`Zone::vmalloc`] area, all or nothing: first it checks that every run lies
    /// in the zone and that every page of every run is an order-0 page that `vmalloc` handed
    /// out and that no `vfree` has released since (a mark `vmalloc` sets on each page and
    /// `vfree` clears; freeing the page by other means clears it too), named once in the
    /// area. Only then does it drop vmalloc's reference to each page, freeing those that
    /// reach zero as [`Zone::free_contig_range`] does. Runs re-assembled from pages of
    /// vmalloc areas pass; pages from [`Zone::alloc_pages`] do not.
    ///
    /// # Errors
    /// [`BuddyError::NotVmalloc`] for a page that is not vmalloc's or whose vmalloc reference
    /// the area already released (named twice while others hold it too),
    /// [`BuddyError::DoubleFree`] for a page already freed or named twice, else as
    /// [`Zone::free_contig_range`]; on any error nothing is freed.
    pub fn vfree(&self, cpu: usize, area: &VmArea<'_>) -> Result<(), BuddyError> {
        let pcp = self.pcp(cpu)?;
        for run in area.runs {
            self.map().range(run.start, run.pages)?;
        }
        let pages = |run: &FrameRange| self.map().range(run.start, run.pages);
        for (k, run) in area.runs.iter().enumerate() {
            if let Err(e) = self.claim(pages(run)?, Claim::Vmalloc) {
                for done in &area.runs[..k] {
                    self.unclaim(pages(done)?, Claim::Vmalloc);
                }
                return Err(e);
            }
        }
        for run in area.runs {
            self.commit(pcp, pages(run)?);
        }
        Ok(())
    }
}
