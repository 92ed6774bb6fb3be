//! `/proc/pagetypeinfo`: free blocks per order and type, and pageblocks per type.

use core::fmt;

use crate::types::Order;
use crate::vmstat::snapshot::FreeListType;
use crate::vmstat::zones::{ZoneSet, nodes_of, zones_of_node};

/// `/proc/pagetypeinfo` of a zone or a node set (`Display`), per node as Linux's
/// `pagetypeinfo_show` prints it: the pageblock order and size, then per zone and type the
/// free blocks of each order (`pagetypeinfo_showfree`, counts of 100 000 or more shown as
/// `>100000` as Linux caps its walk), then per zone the pageblocks of each type
/// (`pagetypeinfo_showblockcount`). The table of mixed pageblocks, which Linux prints only
/// with `page_owner`, is not printed.
#[derive(Clone, Copy)]
pub struct PageTypeInfo<'a, S: ?Sized>(pub &'a S);

/// Where Linux stops counting a free list (`pagetypeinfo_showfree_print`).
const CAP: u64 = 100_000;

impl<S: ZoneSet + ?Sized> fmt::Display for PageTypeInfo<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for node in nodes_of(self.0) {
            let Some((_, first)) = zones_of_node(self.0, node).next() else {
                continue;
            };
            let (pageblock_order, max_order) = (first.pageblock_order.get(), first.max_order);
            writeln!(f, "Page block order: {pageblock_order}")?;
            writeln!(f, "Pages per block:  {}", 1u64 << pageblock_order)?;
            writeln!(f)?;
            write!(f, "{:<43} ", "Free pages count per migrate type at order")?;
            for order in 0..=max_order.get() {
                write!(f, "{order:>6} ")?;
            }
            writeln!(f)?;
            for (_, zone) in zones_of_node(self.0, node) {
                for t in FreeListType::ALL {
                    write!(
                        f,
                        "Node {:>4}, zone {:>8}, type {:>12} ",
                        node.0,
                        zone.kind.name(),
                        t.name()
                    )?;
                    for order in 0..=zone.max_order.get() {
                        let n = zone.free_blocks[Order(order).get() as usize][t as usize];
                        if n >= CAP {
                            write!(f, ">{CAP:>6} ")?;
                        } else {
                            write!(f, "{n:>6} ")?;
                        }
                    }
                    writeln!(f)?;
                }
            }
            write!(f, "\n{:<23}", "Number of blocks type ")?;
            for t in FreeListType::ALL {
                write!(f, "{:>12} ", t.name())?;
            }
            writeln!(f)?;
            for (_, zone) in zones_of_node(self.0, node) {
                write!(f, "Node {}, zone {:>8} ", node.0, zone.kind.name())?;
                for count in zone.pageblocks {
                    write!(f, "{count:>12} ")?;
                }
                writeln!(f)?;
            }
        }
        Ok(())
    }
}
