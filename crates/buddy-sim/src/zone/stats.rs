//! What a zone, or a node of zones, holds at one instant: [`MemoryStats`], a zone's from
//! [`Zone::stats`], a node's their sum.

use core::iter::Sum;
use core::ops::{Add, AddAssign};

use crate::frame::Frame;
use crate::migratetype::MigrateType;
use crate::zone::Zone;
use crate::zone::pcp::PerCpu;
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
    /// (isolated pageblocks' on none).
    pub free_by_type: [u64; 3],
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

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
    R: RawMutex,
{
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
        MemoryStats {
            present: self.present_pages(),
            free: self.free_pages_total(),
            zeroed: self.zeroed_pages(),
            deferred: self.deferred_pages(),
            free_by_type,
        }
    }
}
