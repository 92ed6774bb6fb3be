//! `/proc/zoneinfo`: each zone's free frames, watermarks, sizes, counters and per-cpu lists.

use core::fmt;

use crate::vmstat::snapshot::{ZoneKind, ZoneSnapshot};
use crate::vmstat::zones::{ZoneSet, nodes_of, zones_of_node};

/// `/proc/zoneinfo` of a zone or a node set (`Display`), per zone as Linux's
/// `zoneinfo_show_print` prints it: `pages free`, `boost`, the `min`, `low`, `high` and
/// `promo` watermarks, `spanned`, `present`, `managed`, `cma`, `protection` (no lowmem
/// reserve: zeros, one per zone kind), the zone counters this zone keeps (`nr_free_pages`,
/// `nr_free_pages_blocks`, `nr_free_cma`), each CPU's `pagesets` (`count`, `high`,
/// `batch`, `high_min` and `high_max`: `high` is tuned between those two where
/// [`ZoneConfig::pcp_high_max`](crate::ZoneConfig::pcp_high_max) is above
/// `pcp_high`, else all three are `pcp_high`; and a `vm stats threshold` of 0: its
/// counters are exact), then `node_unreclaimable`,
/// `start_pfn`, `reserved_highatomic` and `free_highatomic` (no high-atomic reserve: 0).
/// The `per-node stats` block, Linux's reclaim and LRU counts, is not printed: the zone
/// keeps no LRU.
#[derive(Clone, Copy)]
pub struct ZoneInfo<'a, S: ?Sized>(pub &'a S);

impl<S: ZoneSet + ?Sized> fmt::Display for ZoneInfo<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for node in nodes_of(self.0) {
            for (i, zone) in zones_of_node(self.0, node) {
                write_zone(f, self.0, i, &zone)?;
            }
        }
        Ok(())
    }
}

/// Zone `i`'s section.
fn write_zone<S: ZoneSet + ?Sized>(
    f: &mut fmt::Formatter<'_>,
    set: &S,
    i: usize,
    zone: &ZoneSnapshot,
) -> fmt::Result {
    let w = zone.watermarks;
    write!(f, "Node {}, zone {:>8}", zone.node.0, zone.kind.name())?;
    write!(
        f,
        "\n  pages free     {}\n        boost    {}\n        min      {}\n        low      {}\
         \n        high     {}\n        promo    {}\n        spanned  {}\n        present  {}\
         \n        managed  {}\n        cma      {}",
        zone.free_pages,
        zone.boost,
        w.min,
        w.low,
        w.high,
        zone.promo_watermark(),
        zone.spanned,
        zone.present,
        zone.present,
        zone.cma,
    )?;
    write!(f, "\n        protection: (0")?;
    for _ in 1..ZoneKind::ALL.len() {
        write!(f, ", 0")?;
    }
    write!(f, ")")?;
    if zone.present == 0 {
        return writeln!(f);
    }
    for (name, value) in [
        ("nr_free_pages", zone.free_pages),
        ("nr_free_pages_blocks", zone.free_pages_blocks),
        ("nr_free_cma", zone.free_cma),
    ] {
        write!(f, "\n      {name:<12} {value}")?;
    }
    write!(f, "\n  pagesets")?;
    for cpu in 0..zone.cpus {
        let Some(p) = set.zone_pcp(i, cpu) else {
            continue;
        };
        write!(
            f,
            "\n    cpu: {cpu}\n              count: {}\n              high:  {}\
             \n              batch: {}\n              high_min: {}\n              high_max: {}",
            p.count, p.high, p.batch, p.high_min, p.high_max
        )?;
        write!(f, "\n  vm stats threshold: 0")?;
    }
    write!(
        f,
        "\n  node_unreclaimable:  0\n  start_pfn:           {}\n  reserved_highatomic: 0\
         \n  free_highatomic:     0",
        zone.start.0
    )?;
    writeln!(f)
}
