//! A fault in memory that a huge page may map (Linux's `do_huge_pmd_anonymous_page`): a
//! zeroed block of the pageblock order (2 MiB with 4 KiB frames), or, when the zone has
//! none, the zeroed page the fault is in (`thp_fault_fallback`), counted as Linux counts
//! them in `/proc/vmstat`.

use crate::error::alloc::AllocError;
use crate::frame_storage::FrameStorage;
use crate::memory::FRAME;
use crate::migratetype::MigrateType;
use crate::request::AllocRequest;
use crate::zone::cpu::{Access, Cpu, WithClearer};
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

/// What a huge-page fault got ([`Cpu::alloc_huge_fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultFolio {
    /// A zeroed block of the zone's pageblock order, for one huge mapping; its first frame.
    Huge(Pfn),
    /// No such block: the zeroed frame the fault is in, for a base-page mapping. The
    /// kernel maps the rest of the huge page's range page by page as it faults.
    Page(Pfn),
}

impl FaultFolio {
    /// The frame the faulting access touches first: the block's frame at the fault's
    /// offset, or the page. An offset past the end of the frame numbers names the last
    /// one (saturating: no overflow, whatever the caller passes).
    #[must_use]
    pub const fn faulting_frame(self, offset: usize) -> Pfn {
        match self {
            Self::Huge(pfn) => Pfn(pfn.0.saturating_add((offset / FRAME.bytes()) as u64)),
            Self::Page(pfn) => pfn,
        }
    }
}

impl<F, P, R, A> Cpu<'_, F, P, R, A, WithClearer>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// A fault `offset` bytes into a range a huge page may map, with memory of `kind` (a
    /// process's anonymous memory is [`MigrateType::Movable`]): a zeroed block of the zone's
    /// pageblock order, cleared through this handle's clearer with the fault's
    /// neighbourhood last ([`AllocRequest::fault_at`]), counted as `thp_fault_alloc`; or,
    /// when the zone has no such block (after its slow path: drained lists, merged buddies,
    /// deferred memory; no reclaim or compaction, as Linux's default `defrag` setting does
    /// not stall a fault for them), the zeroed frame the fault is in, counted as
    /// `thp_fault_fallback` ([`OpCounters`](crate::OpCounters), `/proc/vmstat`). A huge
    /// page that is mapped and later unmapped in part is split into frames with
    /// [`Zone::split_page`](crate::Zone::split_page) first.
    ///
    /// # Errors
    /// [`AllocError::FaultOutsideBlock`] if `offset` is not inside a block of the
    /// pageblock order; [`AllocError::OutOfMemory`] if not even a frame is free; as
    /// [`Cpu::alloc_raw`] for a zeroed allocation (the clearer's errors). Nothing is
    /// allocated and nothing is counted on an error.
    pub fn alloc_huge_fault(
        &self,
        offset: usize,
        kind: MigrateType,
    ) -> Result<FaultFolio, AllocError> {
        let order = self.zone.cfg.pageblock_order;
        let huge = AllocRequest::order(order)
            .kind(kind)
            .zeroed()
            .fault_at(offset);
        let folio = match self.alloc_raw(huge) {
            Ok(pfn) => FaultFolio::Huge(pfn),
            Err(AllocError::OutOfMemory(_)) => {
                let page = AllocRequest::page().kind(kind).zeroed();
                FaultFolio::Page(self.alloc_raw(page)?)
            }
            Err(e) => return Err(e),
        };
        // Counted on this CPU's lists (no zone lock for a fault that took none).
        let mut lists = self.zone.lock_pcp(self.lists());
        let stats = &mut lists.stats;
        match folio {
            FaultFolio::Huge(_) => stats.thp_fault_alloc += 1,
            FaultFolio::Page(_) => stats.thp_fault_fallback += 1,
        }
        Ok(folio)
    }
}
