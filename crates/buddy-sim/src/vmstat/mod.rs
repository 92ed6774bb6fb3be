//! What Linux's `mm/vmstat.c` shows of its page allocator, for a zone or a node set: the
//! figures of one instant ([`ZoneSnapshot`], from [`Zone::snapshot`](crate::Zone::snapshot)) and the text files
//! kernel engineers read, printed in Linux's own line formats by `Display` types:
//! [`BuddyInfo`] (`/proc/buddyinfo`), [`PageTypeInfo`] (`/proc/pagetypeinfo`),
//! [`ZoneInfo`] (`/proc/zoneinfo`), [`VmStat`] (`/proc/vmstat`), and the fragmentation
//! indices of debugfs' `extfrag/extfrag_index` and `extfrag/unusable_index`
//! ([`ExtfragIndex`], [`UnusableIndex`]).
//!
//! Nothing stops allocation to take them. A zone's free-list counts, free frames,
//! watermarks, boost and CMA counts are read together under the zone lock: exact at that
//! instant, as Linux's are under its zone lock. The pageblock counts are read without the
//! lock (a pageblock changing type meanwhile may be counted as either), each CPU's list
//! counts under that CPU's lock when printed, and the event counts one lock after
//! another: with other CPUs allocating meanwhile, a moment's estimate, as Linux's per-CPU
//! vmstat counters are. A node set's files take each zone's snapshot when they print it.

pub(crate) mod buddyinfo;
pub(crate) mod fragindex;
pub(crate) mod pagetypeinfo;
pub(crate) mod snapshot;
pub(crate) mod vmstat_file;
pub(crate) mod zoneinfo;
pub(crate) mod zones;

pub use buddyinfo::BuddyInfo;
pub use fragindex::{ExtfragIndex, UnusableIndex};
pub use pagetypeinfo::PageTypeInfo;
pub use snapshot::{FreeListType, ZoneKind, ZoneSnapshot};
pub use vmstat_file::VmStat;
pub use zoneinfo::ZoneInfo;
pub use zones::{PcpSnapshot, ZoneSet};

#[cfg(all(test, not(loom)))]
mod tests;
