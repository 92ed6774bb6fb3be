//! Huge pages after long churn: what moves allocations so that free frames come together.
//! Compaction (through the embedder's `Migrate` callback), contiguous allocation of any
//! length, and memory offline, over the zone core's pageblock types and isolation.

pub(crate) mod compaction;
pub(crate) mod contig_alloc;
pub(crate) mod hotplug;
pub(crate) mod reservation;
