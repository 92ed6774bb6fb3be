//! `/proc/vmstat`: the page allocator's counters, one `name value` line each.

use core::fmt;

use crate::vmstat::snapshot::ZoneKind;
use crate::vmstat::zones::ZoneSet;
use crate::zone::counters::{FallbackCounts, OpCounters};

/// `/proc/vmstat` of a zone or a node set (`Display`): Linux's `name value` lines, summed
/// over the zones, for the counters the zones keep, in Linux's order: `nr_free_pages`,
/// `nr_free_pages_blocks`, `nr_free_cma`; `pgalloc_dma`, `pgalloc_dma32`,
/// `pgalloc_normal`, `pgalloc_movable` (each zone's allocations under its
/// [`ZoneKind`]), `pgfree`; `compact_stall`, `compact_fail`, `compact_success`;
/// `thp_fault_alloc`, `thp_fault_fallback`. Then the
/// `mm_page_alloc_extfrag` events, which Linux gives only as a tracepoint, counted here
/// under names of their own in the same format: `extfrag_claim` (fallbacks that claimed the
/// pageblock), `extfrag_steal_unmovable`, `extfrag_steal_reclaimable`,
/// `extfrag_steal_movable` (blocks taken from another type's pageblock without claiming
/// it) and `extfrag_steal_from_movable` (the unmovable and reclaimable ones out of a
/// movable pageblock).
///
/// The counters are the zones' [`OpCounters`] and [`FallbackCounts`]: they start at 0 when
/// a zone is built and [`Zone::reset_counters`](crate::Zone::reset_counters) zeroes them.
#[derive(Clone, Copy)]
pub struct VmStat<'a, S: ?Sized>(pub &'a S);

impl<S: ZoneSet + ?Sized> fmt::Display for VmStat<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mut free, mut blocks, mut cma) = (0, 0, 0);
        let mut pgalloc = [0u64; ZoneKind::ALL.len()];
        let mut events = OpCounters::default();
        let mut fallbacks = FallbackCounts::default();
        for zone in (0..self.0.zone_count()).filter_map(|i| self.0.zone_snapshot(i)) {
            free += zone.free_pages;
            blocks += zone.free_pages_blocks;
            cma += zone.free_cma;
            pgalloc[zone.kind as usize] += zone.events.pgalloc;
            events.pgfree += zone.events.pgfree;
            events.compact_stall += zone.events.compact_stall;
            events.compact_fail += zone.events.compact_fail;
            events.compact_success += zone.events.compact_success;
            events.thp_fault_alloc += zone.events.thp_fault_alloc;
            events.thp_fault_fallback += zone.events.thp_fault_fallback;
            let z = zone.fallbacks;
            fallbacks.claims += z.claims;
            fallbacks.unmovable_steals += z.unmovable_steals;
            fallbacks.reclaimable_steals += z.reclaimable_steals;
            fallbacks.movable_steals += z.movable_steals;
            fallbacks.steals_from_movable += z.steals_from_movable;
        }
        writeln!(f, "nr_free_pages {free}")?;
        writeln!(f, "nr_free_pages_blocks {blocks}")?;
        writeln!(f, "nr_free_cma {cma}")?;
        for kind in ZoneKind::ALL {
            writeln!(
                f,
                "pgalloc_{} {}",
                kind.counter_suffix(),
                pgalloc[kind as usize]
            )?;
        }
        writeln!(f, "pgfree {}", events.pgfree)?;
        writeln!(f, "compact_stall {}", events.compact_stall)?;
        writeln!(f, "compact_fail {}", events.compact_fail)?;
        writeln!(f, "compact_success {}", events.compact_success)?;
        writeln!(f, "thp_fault_alloc {}", events.thp_fault_alloc)?;
        writeln!(f, "thp_fault_fallback {}", events.thp_fault_fallback)?;
        writeln!(f, "extfrag_claim {}", fallbacks.claims)?;
        writeln!(f, "extfrag_steal_unmovable {}", fallbacks.unmovable_steals)?;
        writeln!(
            f,
            "extfrag_steal_reclaimable {}",
            fallbacks.reclaimable_steals
        )?;
        writeln!(f, "extfrag_steal_movable {}", fallbacks.movable_steals)?;
        writeln!(
            f,
            "extfrag_steal_from_movable {}",
            fallbacks.steals_from_movable
        )
    }
}
