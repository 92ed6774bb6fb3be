//! The fragmentation indices of Linux's debugfs `extfrag` directory: why an allocation of
//! an order would fail (the extfrag index) and how much free memory is too scattered for it
//! (the unusable free space index), computed as `mm/vmstat.c` computes them.

use core::fmt;

use crate::types::Order;
use crate::vmstat::snapshot::ZoneSnapshot;
use crate::vmstat::zones::{ZoneSet, nodes_of, write_thousandths, zones_of_node};

/// Linux's `contig_page_info`: the free memory as an allocation of one order sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ContigPageInfo {
    free_pages: u64,
    free_blocks_total: u64,
    free_blocks_suitable: u64,
}

impl ContigPageInfo {
    /// `fill_contig_page_info`.
    fn of(zone: &ZoneSnapshot, suitable: Order) -> Self {
        let mut info = Self {
            free_pages: 0,
            free_blocks_total: 0,
            free_blocks_suitable: 0,
        };
        for order in 0..=crate::types::MAX_SUPPORTED_ORDER {
            // Saturating: the snapshot's fields are public (a zone's own counts never
            // come near the limits).
            let blocks = zone.nr_free(Order(order));
            let pages = blocks.checked_shl(u32::from(order)).unwrap_or(u64::MAX);
            info.free_blocks_total = info.free_blocks_total.saturating_add(blocks);
            info.free_pages = info.free_pages.saturating_add(pages);
            if order >= suitable.get() {
                let suitable_blocks = blocks
                    .checked_shl(u32::from(order - suitable.get()))
                    .unwrap_or(u64::MAX);
                info.free_blocks_suitable =
                    info.free_blocks_suitable.saturating_add(suitable_blocks);
            }
        }
        info
    }
}

impl ZoneSnapshot {
    /// Linux's fragmentation index of `order` (`__fragmentation_index`), in thousandths:
    /// -1000 when a free block of `order` exists (the allocation would not fail); 0 with
    /// nothing free; otherwise towards 0 (or below, for a few free blocks each nearly of
    /// `order`) when it would fail for lack of memory, towards 1000 when for fragmentation (what `vm.extfrag_threshold`, 500 by default, compares
    /// against before compacting).
    #[must_use]
    pub fn extfrag_index(&self, order: Order) -> i32 {
        let info = ContigPageInfo::of(self, order);
        if info.free_blocks_total == 0 {
            return 0;
        }
        if info.free_blocks_suitable > 0 {
            return -1000;
        }
        let requested = order.pages();
        // Each free block is smaller than `requested`: the quotient is below 2000, and the
        // index above -1000 (negative for a few blocks of nearly the order, as in Linux).
        let quotient =
            (1000 + info.free_pages.saturating_mul(1000) / requested) / info.free_blocks_total;
        1000 - quotient.min(2000) as i32
    }

    /// Linux's unusable free space index of `order` (`unusable_free_index`), in
    /// thousandths: the share of free frames outside free blocks of `order` or above; 1000
    /// (all unusable) with nothing free.
    #[must_use]
    pub fn unusable_index(&self, order: Order) -> i32 {
        let info = ContigPageInfo::of(self, order);
        if info.free_pages == 0 {
            return 1000;
        }
        let usable = info
            .free_blocks_suitable
            .checked_shl(u32::from(order.get()))
            .unwrap_or(u64::MAX);
        (info.free_pages.saturating_sub(usable).saturating_mul(1000) / info.free_pages).min(1000)
            as i32
    }
}

/// debugfs `extfrag/extfrag_index` of a zone or a node set (`Display`): per zone, Linux's
/// `extfrag_show_print` line, `Node %d, zone %8s ` and `%2d.%03d ` per order of
/// [`ZoneSnapshot::extfrag_index`].
#[derive(Clone, Copy)]
pub struct ExtfragIndex<'a, S: ?Sized>(pub &'a S);

/// debugfs `extfrag/unusable_index` of a zone or a node set (`Display`): per zone, Linux's
/// `unusable_show_print` line, `Node %d, zone %8s ` and `%d.%03d ` per order of
/// [`ZoneSnapshot::unusable_index`].
#[derive(Clone, Copy)]
pub struct UnusableIndex<'a, S: ?Sized>(pub &'a S);

impl<S: ZoneSet + ?Sized> fmt::Display for ExtfragIndex<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_indices(f, self.0, 2, ZoneSnapshot::extfrag_index)
    }
}

impl<S: ZoneSet + ?Sized> fmt::Display for UnusableIndex<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_indices(f, self.0, 1, ZoneSnapshot::unusable_index)
    }
}

/// Per zone, `index` of each order up to the zone's largest, `width` the integer part's.
fn write_indices<S: ZoneSet + ?Sized>(
    f: &mut fmt::Formatter<'_>,
    set: &S,
    width: usize,
    index: fn(&ZoneSnapshot, Order) -> i32,
) -> fmt::Result {
    for node in nodes_of(set) {
        for (_, zone) in zones_of_node(set, node) {
            write!(f, "Node {}, zone {:>8} ", node.0, zone.kind.name())?;
            for order in 0..=zone.max_order.get() {
                write_thousandths(f, index(&zone, Order(order)), width)?;
            }
            writeln!(f)?;
        }
    }
    Ok(())
}
