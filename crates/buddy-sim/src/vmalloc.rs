//! `vmalloc` / `vfree`: many order-0 pages from the largest blocks that fit, given back all
//! or nothing.

use crate::error::alloc::AllocError;
use crate::error::free::FreeError;
use crate::frame::Word;
use crate::frame_storage::FrameStorage;
use crate::migratetype::MigrateType;
use crate::request::HeadTag;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::contig::Claim;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::FrameRange;

/// Frames a [`Zone::vmalloc`] call allocated: physically contiguous runs of order-0 pages,
/// in a buffer the caller lent (`no_std`; `VmAreaBuf` owns its runs, feature `alloc`).
#[derive(Clone, Copy, Debug)]
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

/// A [`Cpu::vmalloc_buf`](crate::Cpu::vmalloc_buf) area that owns its runs (feature `alloc`): no buffer to size
/// beforehand, nothing borrowed. [`VmAreaBuf::area`] is the [`VmArea`] that
/// [`Zone::vfree`] takes.
#[cfg(feature = "alloc")]
#[derive(Clone, Debug, Default)]
pub struct VmAreaBuf {
    runs: alloc::vec::Vec<FrameRange>,
}

#[cfg(feature = "alloc")]
impl VmAreaBuf {
    /// The area, borrowed.
    #[must_use]
    pub fn area(&self) -> VmArea<'_> {
        VmArea::from_runs(&self.runs)
    }

    /// The runs of physically contiguous frames.
    #[must_use]
    pub fn runs(&self) -> &[FrameRange] {
        &self.runs
    }

    /// Frames in the area.
    #[must_use]
    pub fn pages(&self) -> u64 {
        self.area().pages()
    }
}

/// Where `vmalloc` records its runs: a caller's slice, or a vector.
trait RunSink {
    /// The runs recorded so far.
    fn recorded(&mut self) -> &mut [FrameRange];
    /// Records one more run; `false` when there is no room.
    fn record(&mut self, run: FrameRange) -> bool;
}

/// A caller's buffer and how much of it is used.
struct SliceSink<'r> {
    runs: &'r mut [FrameRange],
    used: usize,
}

impl RunSink for SliceSink<'_> {
    fn recorded(&mut self) -> &mut [FrameRange] {
        &mut self.runs[..self.used]
    }

    fn record(&mut self, run: FrameRange) -> bool {
        let Some(slot) = self.runs.get_mut(self.used) else {
            return false;
        };
        *slot = run;
        self.used += 1;
        true
    }
}

#[cfg(feature = "alloc")]
impl RunSink for alloc::vec::Vec<FrameRange> {
    fn recorded(&mut self) -> &mut [FrameRange] {
        self
    }

    fn record(&mut self, run: FrameRange) -> bool {
        self.push(run);
        true
    }
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Allocates `nr_pages` frames the way the kernel's vmalloc does: the largest blocks that
    /// fit (falling back to smaller ones), each split into order-0 pages with one reference,
    /// marked as vmalloc's (see [`Cpu::vfree`]). The physically contiguous runs are written
    /// to `runs`; the area names the ones used.
    ///
    /// # Errors
    /// [`AllocError::OutOfMemory`] or [`AllocError::RunsFull`] (everything allocated so far
    /// is freed again).
    pub fn vmalloc<'r>(
        &self,
        nr_pages: u64,
        runs: &'r mut [FrameRange],
    ) -> Result<VmArea<'r>, AllocError> {
        let mut sink = SliceSink { runs, used: 0 };
        self.zone.vmalloc_into(self.lists(), nr_pages, &mut sink)?;
        let SliceSink { runs, used } = sink;
        Ok(VmArea {
            runs: &runs[..used],
        })
    }

    /// [`Cpu::vmalloc`] into runs the area owns (feature `alloc`).
    ///
    /// # Errors
    /// [`AllocError::OutOfMemory`] (everything allocated so far is freed again).
    #[cfg(feature = "alloc")]
    pub fn vmalloc_buf(&self, nr_pages: u64) -> Result<VmAreaBuf, AllocError> {
        let mut runs = alloc::vec::Vec::new();
        self.zone.vmalloc_into(self.lists(), nr_pages, &mut runs)?;
        Ok(VmAreaBuf { runs })
    }

    /// Frees a [`Cpu::vmalloc`] area, all or nothing: first it checks that every run lies
    /// in the zone and that every page of every run is an order-0 page that `vmalloc` handed
    /// out and that no `vfree` has released since (a mark `vmalloc` sets on each page and
    /// `vfree` clears; freeing the page by other means clears it too), named once in the
    /// area. Only then does it drop vmalloc's reference to each page, freeing those that
    /// reach zero as [`Cpu::free_contig_range`] does. Runs re-assembled from pages of
    /// vmalloc areas pass; pages from [`Cpu::alloc_raw`] do not.
    ///
    /// # Errors
    /// [`FreeError::NotVmalloc`] for a page that is not vmalloc's or whose vmalloc reference
    /// the area already released (named twice while others hold it too),
    /// [`FreeError::DoubleFree`] for a page already freed or named twice, else as
    /// [`Cpu::free_contig_range`]; on any error nothing is freed.
    ///
    /// # Safety
    /// The caller holds the reference it drops (one that its allocation or a `get_page` gave
    /// it and that it has not dropped before), and once the last reference is gone nothing
    /// accesses the page's memory: the zone may clear it (`zero_some`, `alloc_zeroed`),
    /// hand it to a migration's target, or to any CPU's next allocation. A free of what the
    /// caller does not hold is reported as an error where the zone can tell (a double free,
    /// a frame in no allocation), but not always: the block may be someone else's by then.
    #[allow(unsafe_code)]
    pub unsafe fn vfree(&self, area: &VmArea<'_>) -> Result<(), FreeError> {
        let (zone, pcp) = (self.zone, self.lists());
        for run in area.runs {
            zone.map().range(run.start, run.pages)?;
        }
        let pages = |run: &FrameRange| zone.map().range(run.start, run.pages);
        for (k, run) in area.runs.iter().enumerate() {
            if let Err(e) = zone.claim(pages(run)?, Claim::Vmalloc) {
                for done in &area.runs[..k] {
                    zone.unclaim(pages(done)?, Claim::Vmalloc);
                }
                return Err(e);
            }
        }
        for run in area.runs {
            zone.commit(pcp, pages(run)?);
        }
        Ok(())
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// The allocation loop of both `vmalloc` forms, recording runs in `sink`.
    fn vmalloc_into(
        &self,
        pcp: CpuLists<'_, R>,
        nr_pages: u64,
        sink: &mut impl RunSink,
    ) -> Result<(), AllocError> {
        let mut left = nr_pages;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            let mut order = Order::floor_log2(left, self.cfg.max_order);
            let pfn = loop {
                let taken = self.alloc_preferring(
                    pcp,
                    order,
                    Prefer::Unzeroed,
                    MigrateType::Unmovable,
                    HeadTag::NONE,
                );
                match taken {
                    Ok((idx, _)) => break Some(self.map().pfn(idx)),
                    Err(_) if order > Order::ZERO => order = Order(order.get() - 1),
                    Err(_) => break None,
                }
            };
            let Some(pfn) = pfn else {
                break Err(AllocError::OutOfMemory(order));
            };
            // Just allocated: nobody else knows these frames yet.
            let m = self.map();
            let idx = m.index_of(pfn);
            for i in FrameIdx::span(idx, idx + order.pages() as u32) {
                m.frame(i).store(Word::allocated(0).with_vmalloc(true));
            }
            left -= order.pages();
            if let Some(last) = sink.recorded().last_mut()
                && last.end() == Some(pfn)
            {
                last.pages += order.pages();
            } else if !sink.record(FrameRange::new(pfn, order.pages())) {
                self.commit(pcp, idx..idx + order.pages() as u32);
                break Err(AllocError::RunsFull);
            }
        };
        if let Err(e) = result {
            let m = self.map();
            for run in sink.recorded().iter() {
                let idx = m.index_of(run.start);
                self.commit(pcp, idx..idx + run.pages as u32);
            }
            return Err(e);
        }
        Ok(())
    }
}
