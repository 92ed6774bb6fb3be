//! What the files walk: [`ZoneSet`] (a zone, or a node set's zones), each zone's place and
//! figures, and the formatting the indices share.

use crate::frame_storage::FrameStorage;
use crate::node::NodeSet;
use crate::types::NodeId;
use crate::vmstat::snapshot::{ZoneKind, ZoneSnapshot};
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

/// One CPU's per-cpu lists in a zone, as `/proc/zoneinfo`'s `pagesets` show them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcpSnapshot {
    /// Frames on the lists (`count`).
    pub count: u64,
    /// The frames past which a free drains a batch (`high`): the CPU's mark now.
    pub high: u64,
    /// The least the mark is tuned to (`high_min`): [`ZoneConfig::pcp_high`](crate::ZoneConfig::pcp_high).
    pub high_min: u64,
    /// The most the mark is tuned to (`high_max`): `high_min` where the zone does not tune
    /// it ([`ZoneConfig::pcp_high_max`](crate::ZoneConfig::pcp_high_max)).
    pub high_max: u64,
    /// Frames moved per refill or drain (`batch`).
    pub batch: u64,
}

/// The zones a file prints: one [`Zone`], or every zone of a [`NodeSet`]. Implemented by
/// both; each file is `Display` over any of them.
pub trait ZoneSet {
    /// How many zones.
    fn zone_count(&self) -> usize;
    /// Zone `i`'s node, kind and first frame (`None` past the zones): where the files
    /// print it, read without taking its figures.
    fn zone_place(&self, i: usize) -> Option<(NodeId, ZoneKind, Pfn)>;
    /// Zone `i`'s figures now (`i` below [`ZoneSet::zone_count`]; `None` past them).
    fn zone_snapshot(&self, i: usize) -> Option<ZoneSnapshot>;
    /// CPU `cpu`'s lists in zone `i` now (`None` past the zones or the CPUs).
    fn zone_pcp(&self, i: usize, cpu: usize) -> Option<PcpSnapshot>;
}

impl<F, P, R> ZoneSet for Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    fn zone_count(&self) -> usize {
        1
    }

    fn zone_place(&self, i: usize) -> Option<(NodeId, ZoneKind, Pfn)> {
        (i == 0).then(|| (self.node(), self.kind(), self.cfg.start))
    }

    fn zone_snapshot(&self, i: usize) -> Option<ZoneSnapshot> {
        (i == 0).then(|| self.snapshot())
    }

    fn zone_pcp(&self, i: usize, cpu: usize) -> Option<PcpSnapshot> {
        if i != 0 {
            return None;
        }
        let cpu = self.cpu(cpu).ok()?;
        Some(PcpSnapshot {
            count: cpu.pcp_pages(),
            high: cpu.pcp_high(),
            high_min: self.cfg.pcp_high,
            high_max: self.cfg.pcp_high_max.max(self.cfg.pcp_high),
            batch: self.cfg.pcp_batch,
        })
    }
}

impl<Z, F, P, R> ZoneSet for NodeSet<Z, F, P, R>
where
    Z: AsRef<[Zone<F, P, R>]>,
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    fn zone_count(&self) -> usize {
        self.zones().count()
    }

    fn zone_place(&self, i: usize) -> Option<(NodeId, ZoneKind, Pfn)> {
        self.zones().nth(i)?.zone_place(0)
    }

    fn zone_snapshot(&self, i: usize) -> Option<ZoneSnapshot> {
        self.zones().nth(i).map(Zone::snapshot)
    }

    fn zone_pcp(&self, i: usize, cpu: usize) -> Option<PcpSnapshot> {
        self.zones().nth(i)?.zone_pcp(0, cpu)
    }
}

/// The snapshots of `set`'s zones on `node`, in Linux's zone order (DMA, DMA32, Normal,
/// Movable; by first frame within a kind), each taken when reached: what a file walks for
/// one node (`walk_zones_in_node`).
pub(crate) fn zones_of_node<S: ZoneSet + ?Sized>(
    set: &S,
    node: NodeId,
) -> impl Iterator<Item = (usize, ZoneSnapshot)> + '_ {
    // Order by (kind, first frame) without storage: each step finds the first zone after
    // the last one yielded.
    let mut last: Option<(ZoneKind, u64)> = None;
    core::iter::from_fn(move || {
        let mut next: Option<(usize, (ZoneKind, u64))> = None;
        for i in 0..set.zone_count() {
            let Some((n, kind, start)) = set.zone_place(i) else {
                continue;
            };
            let key = (kind, start.0);
            let later = last.is_none_or(|l| key > l);
            if n == node && later && next.is_none_or(|(_, k)| key < k) {
                next = Some((i, key));
            }
        }
        let (i, key) = next?;
        last = Some(key);
        Some((i, set.zone_snapshot(i)?))
    })
}

/// The nodes `set`'s zones are on, ascending, each once.
pub(crate) fn nodes_of<S: ZoneSet + ?Sized>(set: &S) -> impl Iterator<Item = NodeId> + '_ {
    let mut last: Option<u8> = None;
    core::iter::from_fn(move || {
        let next = (0..set.zone_count())
            .filter_map(|i| set.zone_place(i).map(|(n, _, _)| n.0))
            .filter(|&n| last.is_none_or(|l| n > l))
            .min();
        last = next;
        next.map(NodeId)
    })
}

/// Thousandths as Linux prints them (`%d.%03d` of `index / 1000` and `index % 1000`, both
/// truncated towards zero: -500 prints as `0.-500`, as there), `width` the integer part's.
pub(crate) fn write_thousandths(
    f: &mut core::fmt::Formatter<'_>,
    index: i32,
    width: usize,
) -> core::fmt::Result {
    write!(f, "{:>width$}.{:03} ", index / 1000, index % 1000)
}
