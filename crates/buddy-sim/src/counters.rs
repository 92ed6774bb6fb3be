//! Counts of the work the allocator did: what the report shows beside the times.

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
}

/// The counts one lock keeps of the work done under it; bumped only while it is held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LockStats {
    pub(crate) acquisitions: u64,
    pub(crate) list_ops: u64,
    pub(crate) prepares: u64,
}

impl LockStats {
    pub(crate) const ZERO: Self = Self {
        acquisitions: 0,
        list_ops: 0,
        prepares: 0,
    };
}
