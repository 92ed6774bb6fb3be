//! `/proc/buddyinfo`: free blocks per order, one line per zone.

use core::fmt;

use crate::types::Order;
use crate::vmstat::snapshot::ZoneSnapshot;
use crate::vmstat::zones::{ZoneSet, nodes_of, zones_of_node};

/// `/proc/buddyinfo` of a zone or a node set (`Display`): per zone, Linux's
/// `frag_show_print` line, `Node %d, zone %8s ` and `%6lu ` per order, the free blocks of
/// each order in the buddy (every type's; per-cpu lists are not counted), for orders 0 up to
/// the zone's largest.
///
/// ```
/// use buddy_sim::{Pfn, StaticZone, ZoneConfig};
/// use buddy_sim::vmstat::BuddyInfo;
///
/// // 16 MiB at 4 GiB: a `Normal` zone, four free blocks of order 10.
/// let zone: StaticZone<4096, 1> = StaticZone::new_static_empty(ZoneConfig::new(Pfn(0x10_0000), 4096));
/// zone.add_memory(Pfn(0x10_0000), 4096)?;
/// let text = format!("{}", BuddyInfo(&zone));
/// assert_eq!(
///     text,
///     "Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      0      4 \n"
/// );
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
#[derive(Clone, Copy)]
pub struct BuddyInfo<'a, S: ?Sized>(pub &'a S);

impl<S: ZoneSet + ?Sized> fmt::Display for BuddyInfo<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for node in nodes_of(self.0) {
            for (_, zone) in zones_of_node(self.0, node) {
                write_zone(f, &zone)?;
            }
        }
        Ok(())
    }
}

/// One zone's line.
fn write_zone(f: &mut fmt::Formatter<'_>, zone: &ZoneSnapshot) -> fmt::Result {
    write!(f, "Node {}, zone {:>8} ", zone.node.0, zone.kind.name())?;
    for order in 0..=zone.max_order.get() {
        write!(f, "{:>6} ", zone.nr_free(Order(order)))?;
    }
    writeln!(f)
}
