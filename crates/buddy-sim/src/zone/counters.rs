//! Counts of the work the allocator did: what the report shows beside the times.

use crate::migratetype::MigrateType;

/// Counts of the work done, summed over the zone lock and every CPU's lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounters {
    /// Times the zone lock was taken (buddy frees, drains, refills, buddy allocations).
    pub zone_locks: u64,
    /// Times a per-cpu lock was taken.
    pub pcp_locks: u64,
    /// Insertions into and removals from any free list.
    pub list_ops: u64,
    /// Per-page free-time checks (`free_pages_prepare`).
    pub prepares: u64,
    /// Zeroed allocations served by a block known zero (nothing cleared on the way).
    pub zeroed_hits: u64,
    /// Frames zeroed allocations cleared themselves (no block known zero was free).
    pub cleared_on_alloc: u64,
    /// Frames background zeroing ([`Zone::zero_some`](crate::Zone::zero_some)) cleared.
    pub cleared_in_background: u64,
    /// Frames handed out by block allocations (Linux's `pgalloc_<zone>`: the per-cpu lists
    /// and the buddy; not contiguous runs, which Linux does not count there either).
    pub pgalloc: u64,
    /// Frames freed by block frees (Linux's `pgfree`), contiguous runs' frees included.
    pub pgfree: u64,
    /// Direct compaction runs that were not deferred (`compact_stall`).
    pub compact_stall: u64,
    /// Of those, the ones that did not make a free block of the order asked for
    /// (`compact_fail`).
    pub compact_fail: u64,
    /// Of those, the ones that did (`compact_success`).
    pub compact_success: u64,
    /// Huge-page faults that got a block of the pageblock order
    /// ([`Cpu::alloc_huge_fault`](crate::Cpu::alloc_huge_fault): `thp_fault_alloc`).
    pub thp_fault_alloc: u64,
    /// Huge-page faults that got none and fell back to a page (`thp_fault_fallback`).
    pub thp_fault_fallback: u64,
}

/// The counts one lock keeps of the work done under it; bumped only while it is held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LockStats {
    pub(crate) acquisitions: u64,
    /// Pushes onto and pops off the buddy's lists. A per-cpu lock leaves its `list_ops`,
    /// `prepares` and `pgfree` at 0: its counts are worked out from its lists' flows when
    /// read ([`PcpLists::work`](crate::zone::pcp::PcpLists::work)).
    pub(crate) list_ops: u64,
    // Not next to `list_ops`: a free to the buddy bumps both, and two neighbours'
    // increments are made one vector add of four instructions instead of two adds.
    pub(crate) zeroed_hits: u64,
    pub(crate) prepares: u64,
    pub(crate) cleared_on_alloc: u64,
    pub(crate) cleared_in_background: u64,
    /// Frames allocated straight from the buddy (under the zone lock). A per-cpu list's
    /// allocations are not counted one by one: they are what came onto the lists
    /// (`refilled`, and the frees to them) less what left for the buddy (`drained`) and
    /// what is on them now ([`LockStats::pcp_pgalloc`]).
    pub(crate) pgalloc: u64,
    pub(crate) pgfree: u64,
    /// Frames a per-cpu list set took from the buddy in refills.
    pub(crate) refilled: u64,
    /// Frames a per-cpu list set gave back to the buddy in drains.
    pub(crate) drained: u64,
    pub(crate) compact_stall: u64,
    pub(crate) compact_fail: u64,
    pub(crate) compact_success: u64,
    pub(crate) thp_fault_alloc: u64,
    pub(crate) thp_fault_fallback: u64,
}

impl LockStats {
    pub(crate) const ZERO: Self = Self {
        acquisitions: 0,
        list_ops: 0,
        prepares: 0,
        zeroed_hits: 0,
        cleared_on_alloc: 0,
        cleared_in_background: 0,
        pgalloc: 0,
        pgfree: 0,
        refilled: 0,
        drained: 0,
        compact_stall: 0,
        compact_fail: 0,
        compact_success: 0,
        thp_fault_alloc: 0,
        thp_fault_fallback: 0,
    };

    /// Frames a per-cpu list set's allocations took since its counts started, with `pgfree`
    /// frames freed to it and `on_lists` frames on it now: what came on (refills, and
    /// frees) less what left for the buddy and what is still there (every other block that
    /// left was allocated).
    pub(crate) fn pcp_pgalloc(&self, pgfree: u64, on_lists: u64) -> u64 {
        (self.refilled + pgfree).saturating_sub(self.drained + on_lists)
    }

    /// A per-cpu list set's counts started afresh with `on_lists` frames on it: those count
    /// as come on, so that only what is allocated from now on counts as allocated.
    pub(crate) const fn restarted(on_lists: u64) -> Self {
        Self {
            refilled: on_lists,
            ..Self::ZERO
        }
    }

    /// Counts a zeroed allocation of `pages` frames: a hit if the block is known zero.
    pub(crate) fn count_zeroed_alloc(&mut self, zeroed: bool, pages: u64) {
        if zeroed {
            self.zeroed_hits += 1;
        } else {
            self.cleared_on_alloc += pages;
        }
    }
}

/// The allocations that fell back to another type's pageblocks since the zone was built or
/// its counters were reset ([`Zone::fragmentation`](crate::Zone::fragmentation)): Linux's
/// `mm_page_alloc_extfrag` events, split as they matter to compaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FallbackCounts {
    /// Fallbacks that claimed the pageblock (or the whole blocks) they took from for their
    /// own type.
    pub claims: u64,
    /// Blocks unmovable allocations took out of another type's pageblock without claiming
    /// it: each pins that pageblock, which compaction can then never empty.
    pub unmovable_steals: u64,
    /// The same for reclaimable allocations (freed only when the embedder reclaims them).
    pub reclaimable_steals: u64,
    /// The same for movable allocations (compaction can move them back out).
    pub movable_steals: u64,
    /// Of the unmovable and reclaimable steals, those out of a movable pageblock (Linux's
    /// unmovable-from-movable `mm_page_alloc_extfrag` events): the ones that pin a
    /// pageblock compaction could otherwise empty. A steal between unmovable and
    /// reclaimable pageblocks pins nothing new.
    pub steals_from_movable: u64,
    /// Fallbacks below the pageblock order that raised the watermark boost.
    pub boosts: u64,
}

impl FallbackCounts {
    pub(crate) const ZERO: Self = Self {
        claims: 0,
        unmovable_steals: 0,
        reclaimable_steals: 0,
        movable_steals: 0,
        steals_from_movable: 0,
        boosts: 0,
    };

    /// An allocation of `mt` took a block out of a pageblock of type `from` without claiming
    /// it.
    pub(crate) fn count_steal(&mut self, mt: MigrateType, from: MigrateType) {
        if mt != MigrateType::Movable && from == MigrateType::Movable {
            self.steals_from_movable += 1;
        }
        match mt {
            MigrateType::Unmovable => self.unmovable_steals += 1,
            MigrateType::Reclaimable => self.reclaimable_steals += 1,
            MigrateType::Movable => self.movable_steals += 1,
        }
    }
}
