//! What a zone, or a node of zones, holds at one instant: [`MemoryStats`], a zone's from
//! [`Zone::stats`], a node's their sum.

use crate::frame_storage::FrameStorage;
use crate::zone::per_cpu_set::PerCpuSet;
use core::iter::Sum;
use core::ops::{Add, AddAssign};

use crate::migratetype::{ISOLATE, MigrateType};
use crate::zone::Zone;
use crate::zone::config::Watermarks;
use crate::zone::counters::FallbackCounts;
use lock_api::RawMutex;

/// Memory at one instant: a zone's ([`Zone::stats`]) or a node's, the sum of its zones'
/// ([`NodeSet::node_stats`](crate::NodeSet::node_stats)). Each count is read under its own
/// locks: with other CPUs allocating meanwhile, a moment's estimate, as Linux's vmstat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Usable frames ([`Zone::present_pages`]), deferred ones included.
    pub present: u64,
    /// Free frames ([`Zone::free_pages_total`]): buddy, per-cpu lists, deferred.
    pub free: u64,
    /// Free frames known zero ([`Zone::zeroed_pages`]).
    pub zeroed: u64,
    /// Frames not initialized yet ([`Zone::deferred_pages`]).
    pub deferred: u64,
    /// Free frames in the buddy on each type's lists, indexed as [`MigrateType::ALL`]
    /// (isolated pageblocks' and CMA reservations' on none).
    pub free_by_type: [u64; 3],
    /// Frames reserved for CMA ([`Cpu::reserve_cma`](crate::Cpu::reserve_cma); Linux's
    /// `CmaTotal`).
    pub cma_reserved: u64,
    /// Free frames in the buddy inside CMA reservations (`CmaFree`): free memory only
    /// movable allocations and the reservations' owners can take.
    pub cma_free: u64,
}

impl Add for MemoryStats {
    type Output = Self;

    fn add(mut self, other: Self) -> Self {
        self += other;
        self
    }
}

impl AddAssign for MemoryStats {
    fn add_assign(&mut self, other: Self) {
        self.present += other.present;
        self.free += other.free;
        self.zeroed += other.zeroed;
        self.deferred += other.deferred;
        self.cma_reserved += other.cma_reserved;
        self.cma_free += other.cma_free;
        for (mine, theirs) in self.free_by_type.iter_mut().zip(other.free_by_type) {
            *mine += theirs;
        }
    }
}

impl Sum for MemoryStats {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), Add::add)
    }
}

/// How fragmented a zone's free memory is, and what its allocations did to it
/// ([`Zone::fragmentation`]): what background compaction
/// ([`Zone::compact_work`](crate::Zone::compact_work)) reads, and what a report shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragmentationStats {
    /// Free frames in the buddy (isolated pageblocks' excluded; per-cpu lists are not in
    /// the buddy).
    pub free: u64,
    /// Of those, frames in free blocks of the pageblock order or above: what huge pages
    /// can be taken from without compaction.
    pub free_in_pageblocks: u64,
    /// Linux's fragmentation score (`fragmentation_score_zone`): the percentage of free
    /// frames outside those blocks.
    pub score: u8,
    /// The watermark boost in frames, raised by fallbacks that fragment a pageblock and
    /// worked off by background compaction.
    pub boost: u64,
    /// The watermarks of a zone of this size ([`Watermarks::for_pages`] of its present
    /// frames).
    pub watermarks: Watermarks,
    /// The fallbacks to other types' pageblocks since the zone was built or its counters
    /// were reset ([`Zone::reset_counters`]).
    pub fallbacks: FallbackCounts,
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// The zone's fragmentation now, read under the zone lock.
    pub fn fragmentation(&self) -> FragmentationStats {
        let m = self.map();
        let free = self.free.lock();
        let in_pageblocks = free.free_in_pageblocks(m);
        FragmentationStats {
            free: free.count().pages
                - free.lists()[..=self.cfg.max_order.get() as usize]
                    .iter()
                    .enumerate()
                    .map(|(o, l)| u64::from(l[ISOLATE as usize].len()) << o)
                    .sum::<u64>(),
            free_in_pageblocks: in_pageblocks,
            score: free.fragmentation_score(m),
            boost: free.boost(),
            watermarks: free.watermarks(),
            fallbacks: free.fallback_counts(),
        }
    }

    /// The zone's memory now.
    pub fn stats(&self) -> MemoryStats {
        let mut free_by_type = [0; 3];
        for (t, mt) in MigrateType::ALL.into_iter().enumerate() {
            free_by_type[t] = self
                .buddy_blocks_of_type(mt)
                .iter()
                .enumerate()
                .map(|(o, &n)| u64::from(n) << o)
                .sum();
        }
        let (cma_reserved, cma_free) = {
            let free = self.free.lock();
            (free.cma_reserved(), free.cma_free(self.map()))
        };
        MemoryStats {
            present: self.present_pages(),
            free: self.free_pages_total(),
            zeroed: self.zeroed_pages(),
            deferred: self.deferred_pages(),
            free_by_type,
            cma_reserved,
            cma_free,
        }
    }
}
