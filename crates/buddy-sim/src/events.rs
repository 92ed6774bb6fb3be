//! The zone's events, as Linux's page allocator tracepoints report them: an embedder that
//! wants them implements [`ZoneEvents`] and hands the zone its per-CPU storage wrapped with
//! the hook ([`WithEvents`](crate::WithEvents)); a zone given plain storage (a slice, an
//! array, a vector of [`PerCpu`](crate::PerCpu)) has [`NoEvents`], whose empty methods
//! compile to nothing.
//!
//! Every method has an empty default body, so a hook implements only what it reads. Each
//! is called on the CPU that caused the event, some with the zone lock held (said on each):
//! a hook must not call into the zone, and should be short (count, or write a ring).

use core::fmt;

use crate::migratetype::MigrateType;
use crate::sync::{AtomicU32, Ordering};
use crate::types::Order;
use mm_types::Pfn;

/// The number of the CPU an event happened on (its index in the zone's per-CPU storage),
/// read when asked for: a hook that does not ask pays nothing for it.
#[derive(Clone, Copy)]
pub struct CpuNumber<'a>(pub(crate) &'a AtomicU32);

impl CpuNumber<'_> {
    /// The number.
    #[inline(always)]
    #[must_use]
    pub fn get(self) -> usize {
        self.0.load(Ordering::Relaxed) as usize
    }
}

impl fmt::Debug for CpuNumber<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}

impl PartialEq for CpuNumber<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for CpuNumber<'_> {}

/// An allocation of a block (Linux's `mm_page_alloc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageAlloc<'a> {
    /// The block's first frame.
    pub pfn: Pfn,
    /// Its order.
    pub order: Order,
    /// Its kind (`migratetype`).
    pub kind: MigrateType,
    /// The CPU whose lists it was allocated on.
    pub cpu: CpuNumber<'a>,
    /// Whether its order is served by the per-CPU lists (else by the buddy, under the zone
    /// lock: `mm_page_alloc_zone_locked`).
    pub percpu: bool,
}

/// A free of a block (Linux's `mm_page_free`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageFree<'a> {
    /// The block's first frame.
    pub pfn: Pfn,
    /// Its order.
    pub order: Order,
    /// The CPU whose lists it was freed to.
    pub cpu: CpuNumber<'a>,
    /// Whether it went to a per-CPU list (else to the buddy, under the zone lock).
    pub percpu: bool,
}

/// A refill of a per-CPU list from the buddy (Linux's `mm_page_alloc_zone_locked` with
/// `percpu_refill`, one event per batch), under the zone lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcpRefill<'a> {
    /// The CPU.
    pub cpu: CpuNumber<'a>,
    /// The order of the blocks moved.
    pub order: Order,
    /// Blocks asked for.
    pub blocks: u64,
}

/// A drain of a per-CPU list set to the buddy (Linux's `mm_page_pcpu_drain`, one event per
/// drain), under the CPU's list lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcpDrain<'a> {
    /// The CPU.
    pub cpu: CpuNumber<'a>,
    /// Frames asked to go back (`u64::MAX`: all of them).
    pub pages: u64,
}

/// An allocation that fell back to another type's pageblock (Linux's
/// `mm_page_alloc_extfrag`, with its fields), under the zone lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extfrag {
    /// The first frame of the block taken.
    pub pfn: Pfn,
    /// The order asked for (`alloc_order`).
    pub alloc_order: Order,
    /// The order of the free block fallen back to (`fallback_order`).
    pub fallback_order: Order,
    /// The kind of the allocation (`alloc_migratetype`).
    pub alloc_kind: MigrateType,
    /// The type of the pageblock taken from (`fallback_migratetype`).
    pub fallback_kind: MigrateType,
    /// Whether the pageblock was claimed for the allocation's kind (`change_ownership`).
    pub change_ownership: bool,
}

/// Why compaction ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactionKind {
    /// Direct compaction of an allocation's slow path.
    Direct,
    /// Compaction the embedder asked for ([`Cpu::compact`](crate::Cpu::compact)), or
    /// background compaction ([`Zone::compact_work`](crate::Zone::compact_work)(crate::Zone::compact_work)).
    Requested,
}

/// Compaction starting (Linux's `mm_compaction_begin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionBegin {
    /// Why.
    pub kind: CompactionKind,
    /// The order it works towards (`None`: a budget or a fragmentation score instead).
    pub order: Option<Order>,
}

/// Compaction ending (Linux's `mm_compaction_end`, with its `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionEnd {
    /// Why it ran.
    pub kind: CompactionKind,
    /// The order it worked towards (`None`: a budget or a fragmentation score instead).
    pub order: Option<Order>,
    /// Frames it moved.
    pub moved_pages: u64,
    /// Whether it made what it worked towards (`COMPACT_SUCCESS`).
    pub success: bool,
}

/// A zone lock found held (the 2026 `zone_lock_contended` tracepoint, with its wait).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockContended {
    /// The time waited, in the units of [`ZoneEvents::now`] (0 where it returns 0).
    pub wait: u64,
}

/// A round of free page reporting (Linux's `page_reporting` work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportingRound {
    /// Blocks handed to the sink.
    pub blocks: u64,
    /// Frames in them.
    pub pages: u64,
    /// Whether the sink accepted them.
    pub accepted: bool,
}

/// The hook a zone calls at each event. Every method defaults to doing nothing.
pub trait ZoneEvents {
    /// A block was allocated.
    #[inline(always)]
    fn page_alloc(&self, _event: &PageAlloc<'_>) {}
    /// A block was freed.
    #[inline(always)]
    fn page_free(&self, _event: &PageFree<'_>) {}
    /// A per-CPU list was refilled (zone lock held).
    #[inline(always)]
    fn pcp_refill(&self, _event: &PcpRefill<'_>) {}
    /// A CPU's lists were drained.
    #[inline(always)]
    fn pcp_drain(&self, _event: &PcpDrain<'_>) {}
    /// An allocation fell back to another type's pageblock (zone lock held).
    #[inline(always)]
    fn extfrag(&self, _event: &Extfrag) {}
    /// Compaction starts.
    #[inline(always)]
    fn compaction_begin(&self, _event: &CompactionBegin) {}
    /// Compaction ended.
    #[inline(always)]
    fn compaction_end(&self, _event: &CompactionEnd) {}
    /// The zone lock was held by another CPU; it is held now.
    #[inline(always)]
    fn zone_lock_contended(&self, _event: &LockContended) {}
    /// A round of free page reporting ended.
    #[inline(always)]
    fn reporting_round(&self, _event: &ReportingRound) {}
    /// The embedder's clock, for [`LockContended::wait`] (0 by default: no wait measured).
    #[inline(always)]
    fn now(&self) -> u64 {
        0
    }
}

/// The hook of a zone given no hook: every event does nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoEvents;

impl ZoneEvents for NoEvents {}

impl<E: ZoneEvents + ?Sized> ZoneEvents for &E {
    #[inline(always)]
    fn page_alloc(&self, e: &PageAlloc<'_>) {
        (**self).page_alloc(e);
    }
    #[inline(always)]
    fn page_free(&self, e: &PageFree<'_>) {
        (**self).page_free(e);
    }
    #[inline(always)]
    fn pcp_refill(&self, e: &PcpRefill<'_>) {
        (**self).pcp_refill(e);
    }
    #[inline(always)]
    fn pcp_drain(&self, e: &PcpDrain<'_>) {
        (**self).pcp_drain(e);
    }
    #[inline(always)]
    fn extfrag(&self, e: &Extfrag) {
        (**self).extfrag(e);
    }
    #[inline(always)]
    fn compaction_begin(&self, e: &CompactionBegin) {
        (**self).compaction_begin(e);
    }
    #[inline(always)]
    fn compaction_end(&self, e: &CompactionEnd) {
        (**self).compaction_end(e);
    }
    #[inline(always)]
    fn zone_lock_contended(&self, e: &LockContended) {
        (**self).zone_lock_contended(e);
    }
    #[inline(always)]
    fn reporting_round(&self, e: &ReportingRound) {
        (**self).reporting_round(e);
    }
    #[inline(always)]
    fn now(&self) -> u64 {
        (**self).now()
    }
}
