//! The operation sequences the harnesses apply, and how often they check everything.

/// One step of an operation sequence for [`Lockstep`](super::Lockstep) and (features `alloc` and `spin`) the
/// zero reference `ZeroedModel`; each applies the steps it models and passes over the
/// others (`Lockstep`'s zones have no memory to zero; the zero reference frees whole
/// blocks only). Allocation slots name recent allocations (modulo the number recorded);
/// page offsets are taken modulo the block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Drain both zones and merge their free blocks (so they hand out the same frames),
    /// then allocate.
    Alloc {
        /// CPU.
        cpu: usize,
        /// Order (may exceed MAX_ORDER: an error).
        order: u8,
    },
    /// Drain both zones and merge their free blocks, then allocate a frozen unmovable block
    /// (`alloc_frozen_pages`), recorded as the other allocations are (the reference calls on
    /// it fail alike on both zones).
    AllocFrozen {
        /// CPU.
        cpu: usize,
        /// Order (may exceed MAX_ORDER: an error).
        order: u8,
    },
    /// `free_frozen_pages` of a recorded allocation at its order (an error for one with a
    /// reference count).
    FreeFrozen {
        /// CPU.
        cpu: usize,
        /// Allocation slot.
        slot: usize,
    },
    /// `split_page` a recorded allocation.
    Split {
        /// Allocation slot.
        slot: usize,
    },
    /// `split_frozen_pages` of a recorded allocation at its order (an error for one with a
    /// reference count); once split, its pages freed, as a run on one zone
    /// (`free_contig_frozen_range`), one `free_frozen_page` at a time on the other.
    SplitFrozen {
        /// CPU.
        cpu: usize,
        /// Allocation slot.
        slot: usize,
    },
    /// `get_page` on a page of a recorded allocation.
    Get {
        /// Allocation slot.
        slot: usize,
        /// Page offset.
        page: u64,
    },
    /// `put_page` on a page of a recorded allocation.
    Put {
        /// CPU.
        cpu: usize,
        /// Allocation slot.
        slot: usize,
        /// Page offset.
        page: u64,
    },
    /// `mark_hwpoison` on a page of a recorded allocation.
    Poison {
        /// Allocation slot.
        slot: usize,
        /// Page offset.
        page: u64,
    },
    /// Free a run inside (or overlapping the end of) a recorded allocation: batched on one
    /// zone, per page on the other.
    FreeRun {
        /// CPU.
        cpu: usize,
        /// Allocation slot.
        slot: usize,
        /// First page offset.
        offset: u64,
        /// Pages.
        len: u64,
    },
    /// Free an arbitrary run, relative to the zone start (mostly errors).
    FreeRaw {
        /// CPU.
        cpu: usize,
        /// Offset from the zone's first frame (may lie outside).
        offset: u64,
        /// Pages.
        len: u64,
    },
    /// `free_pages` of a recorded allocation at its order.
    FreePages {
        /// CPU.
        cpu: usize,
        /// Allocation slot.
        slot: usize,
    },
    /// Drain one CPU's lists.
    DrainCpu {
        /// CPU.
        cpu: usize,
    },
    /// Drain every CPU's lists.
    DrainAll,
    /// Decay one CPU's tuned high mark, draining past it (`Cpu::decay_pcp_high`: a timer
    /// tick).
    DecayPcpHigh {
        /// CPU.
        cpu: usize,
    },
    /// Add reserved frames as usable memory (mostly errors once the zone is full):
    /// `add_memory`, or `add_zeroed_memory` for memory the embedder zeroed first.
    AddMemory {
        /// Offset from the zone's first frame (may lie outside).
        offset: u64,
        /// Frames.
        len: u64,
        /// Declared zero.
        zeroed: bool,
    },
    /// `alloc_zeroed`, with a fault offset into the block or none (the zero reference).
    AllocZeroed {
        /// CPU.
        cpu: usize,
        /// Order (may exceed MAX_ORDER: an error).
        order: u8,
        /// Fault offset in bytes, if any (may lie outside the block).
        fault: Option<u64>,
    },
    /// `alloc_huge_fault` `offset` bytes into a huge page's range, for memory of kind `mt`
    /// (an index into [`MigrateType::ALL`](crate::MigrateType::ALL), modulo 3; the zero
    /// reference): a zeroed block of the pageblock order, or the zeroed page the fault is in
    /// when the zone has no such block free.
    HugeFault {
        /// CPU.
        cpu: usize,
        /// Fault offset in bytes (may lie outside the block: an error).
        offset: u64,
        /// The kind.
        mt: u8,
    },
    /// `zero_some` with this budget in frames (the zero reference).
    ZeroSome {
        /// Frames at most.
        budget: u64,
    },
    /// `report_free_pages` with this budget in frames, to a sink that discards the blocks
    /// (zeroes their memory, as a host's `MADV_DONTNEED`) and accepts them, or refuses them
    /// (the zero reference, which registers reporting of every order, 4 blocks a round,
    /// the discard zeroing).
    Report {
        /// Frames to report, at least.
        budget: u64,
        /// Whether the sink accepts.
        accept: bool,
    },
    /// `init_deferred` with this budget in frames.
    InitDeferred {
        /// Frames at most.
        budget: u64,
    },
    /// As [`Op::Alloc`], for an allocation of kind `mt` (0 unmovable, 1 movable, 2
    /// reclaimable, modulo 3): [`AllocRequest::kind`](crate::AllocRequest::kind).
    AllocTyped {
        /// CPU.
        cpu: usize,
        /// Order (may exceed MAX_ORDER: an error).
        order: u8,
        /// The kind, an index into [`MigrateType::ALL`](crate::MigrateType::ALL) (modulo 3).
        mt: u8,
    },
    /// `alloc_contig_range` (or its frozen variant) of a range relative to the zone's first
    /// frame; a movable block in the way is refused (the harness has no memory to move).
    AllocContig {
        /// CPU.
        cpu: usize,
        /// Offset from the zone's first frame (may lie outside).
        offset: u64,
        /// Frames.
        len: u64,
        /// The frozen variant.
        frozen: bool,
    },
    /// `alloc_contig_pages` (or its frozen variant) of `len` frames aligned to `align`; a
    /// movable block in the way is refused (the harness has no memory to move), so it must
    /// find the first aligned run of free frames, or fail only if there is none.
    AllocContigPages {
        /// CPU.
        cpu: usize,
        /// Frames.
        len: u64,
        /// Alignment order (may exceed MAX_ORDER: an error).
        align: u8,
        /// The frozen variant.
        frozen: bool,
    },
    /// `offline_range` of a range relative to the zone's first frame; a movable block in
    /// the way is refused (the harness has no memory to move). `AddMemory` brings it back.
    Offline {
        /// CPU.
        cpu: usize,
        /// Offset from the zone's first frame (may lie outside).
        offset: u64,
        /// Frames.
        len: u64,
    },
    /// As [`Op::AllocTyped`], with the slow path's callbacks: a reclaim that frees nothing
    /// (the harness holds no cache) and a compaction whose moves are all refused (it has no
    /// memory to move); so the slow path runs its rounds, compaction its scans and deferral,
    /// and the answer must be the plain allocation's.
    AllocHooked {
        /// CPU.
        cpu: usize,
        /// Order (may exceed MAX_ORDER: an error).
        order: u8,
        /// The kind, an index into [`MigrateType::ALL`](crate::MigrateType::ALL) (modulo 3).
        mt: u8,
    },
    /// `reserve_cma_at` of the pageblocks from the one holding `start + offset`, `len`
    /// pageblocks (migration refused).
    ReserveCma {
        /// CPU.
        cpu: usize,
        /// Offset of a frame in the first pageblock, from the zone's start.
        offset: u64,
        /// Pageblocks.
        len: u64,
    },
    /// A contiguous run of `len` frames aligned to `2^align` from one of the reservations
    /// made so far (`area`, modulo their number; migration refused).
    AllocCma {
        /// CPU.
        cpu: usize,
        /// Which reservation.
        area: usize,
        /// Frames.
        len: u64,
        /// Alignment order.
        align: u8,
    },
    /// `compact_work` (background compaction) with this budget, its moves refused and
    /// nothing to reclaim: it must leave the free blocks as they were.
    CompactWork {
        /// CPU.
        cpu: usize,
        /// Frames at most.
        budget: u64,
    },
    /// Arm fault injection on the batched zone with these attributes, or with `None` disarm
    /// it ([`Zone::set_fail_page_alloc`](crate::Zone::set_fail_page_alloc)): each failure
    /// it injects must be out of memory with the zone unchanged; the per-page zone, which
    /// takes the block the batched zone handed out, skips a call that failed so.
    FailPageAlloc(Option<crate::fail_page_alloc::FailPageAlloc>),
    /// Free a run inside (or overlapping the end of) a recorded contiguous allocation:
    /// batched on one zone (`free_contig_range`, `free_contig_frozen_range` for a frozen
    /// one), per page on the other.
    FreeContig {
        /// CPU.
        cpu: usize,
        /// Contiguous allocation slot.
        slot: usize,
        /// First page offset.
        offset: u64,
        /// Pages.
        len: u64,
    },
}

/// The kind an operation's `mt` names: an index into
/// [`MigrateType::ALL`](crate::MigrateType::ALL), modulo 3.
pub(crate) fn kind(mt: u8) -> crate::migratetype::MigrateType {
    crate::migratetype::MigrateType::ALL[usize::from(mt) % 3]
}

/// When a harness runs its full check: every `every`-th call of its `apply`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CheckInterval {
    every: usize,
    applied: usize,
}

impl CheckInterval {
    /// Every `every` calls (at least 1).
    pub(crate) const fn every(every: usize) -> Self {
        Self {
            every: if every == 0 { 1 } else { every },
            applied: 0,
        }
    }

    /// Counts one call; whether its full check is due.
    pub(crate) fn due(&mut self) -> bool {
        self.applied += 1;
        self.applied.is_multiple_of(self.every)
    }
}
