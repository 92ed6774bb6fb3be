//! Free page reporting, one rule at a time: what is reported and in what batches, where
//! reported blocks go, what takes the mark off, a refusing sink, registration errors, and
//! the skipped clear of a block whose discard zeroed it. (The per-page reference,
//! `ZeroedModel`, drives reporting interleaved with every other operation in the zeroed
//! tests and the `zeroed_ops` fuzz target; the lockstep harness in the property tests.)
// loom atomics work only inside loom::model: these run on the real ones.
#![cfg(not(loom))]

mod common;
use common::Before;
use common::TestZone;
use common::bytes::all_bytes_are;

use buddy_sim::zero_core::NoResched;
use buddy_sim::{
    FrameClearer, FrameState, OffsetMap, Order, PageReporting, Pfn, ReportError, ReportStats,
    ReportedBlock, ZoneConfig,
};

const START: u64 = 0x100;

/// A zone of 256 frames (MAX_ORDER 6, pageblocks of 16) on one CPU, all free.
fn zone() -> TestZone {
    let cfg = ZoneConfig {
        pageblock_order: Order::new(4).unwrap(),
        ..ZoneConfig::new(Pfn(START), 256)
            .with_max_order(Order::new(6).unwrap())
            .with_pcp(0, 1)
    };
    common::zone(cfg).unwrap()
}

fn order(o: u8) -> Order {
    Order::new(o).unwrap()
}

/// A sink that records what it is handed and checks each block is off the free lists.
fn recording<'z>(
    zone: &'z TestZone,
    seen: &'z mut Vec<Vec<ReportedBlock>>,
    accept: bool,
) -> impl FnMut(&[ReportedBlock]) -> bool + 'z {
    move |blocks: &[ReportedBlock]| {
        for b in blocks {
            assert_eq!(zone.frame(b.pfn).unwrap().state, FrameState::Reporting);
        }
        seen.push(blocks.to_vec());
        accept
    }
}

#[test]
fn reports_unreported_blocks_of_the_order_in_rounds_of_the_capacity() {
    let z = zone();
    z.register_page_reporting(PageReporting::new(order(4)).with_capacity(2))
        .unwrap();
    // Four 64-frame blocks free; hold 16 frames of the first to leave 16 + 32 + 64 x 3.
    let held = z.alloc_pages(0, order(4)).unwrap();
    let mut seen = Vec::new();
    let reported = z
        .report_free_pages(u64::MAX, &mut recording(&z, &mut seen, true))
        .unwrap();
    assert_eq!(reported, 240);
    // Rounds of at most two blocks, the smallest orders first.
    assert!(seen.iter().all(|r| r.len() <= 2));
    let orders: Vec<u8> = seen.iter().flatten().map(|b| b.order.get()).collect();
    assert_eq!(orders, [4, 5, 6, 6, 6]);
    let stats = z.page_reporting_stats();
    assert_eq!(
        stats,
        ReportStats {
            reported_free: 240,
            reported: 240,
            reports: 3,
            rejected: 0,
            reused: 0,
        }
    );
    // Everything free is reported: a second call has nothing to do.
    let mut again = Vec::new();
    assert_eq!(
        z.report_free_pages(u64::MAX, &mut recording(&z, &mut again, true)),
        Ok(0)
    );
    assert!(again.is_empty());
    z.check().unwrap();
    // SAFETY: the test frees what it allocated, once.
    unsafe { z.free_pages(0, held, order(4)) }.unwrap();
    // The freed block merged with its reported buddies (16, then 32 frames): the merged
    // 64-frame block is not reported, and the next call reports it again.
    assert_eq!(z.page_reporting_stats().reported_free, 192);
    z.check().unwrap();
    let mut third = Vec::new();
    assert_eq!(
        z.report_free_pages(u64::MAX, &mut recording(&z, &mut third, true)),
        Ok(64)
    );
}

#[test]
fn a_budget_stops_after_the_round_that_reaches_it() {
    let z = zone();
    z.register_page_reporting(PageReporting::new(order(6)).with_capacity(1))
        .unwrap();
    let mut seen = Vec::new();
    assert_eq!(
        z.report_free_pages(65, &mut recording(&z, &mut seen, true)),
        Ok(128)
    );
    assert_eq!(seen.len(), 2);
    assert_eq!(
        z.report_free_pages(0, &mut recording(&z, &mut seen, true)),
        Ok(0)
    );
}

#[test]
fn reported_blocks_are_allocated_last_and_their_reuse_is_counted() {
    let z = zone();
    z.register_page_reporting(PageReporting::new(order(6)).with_capacity(1))
        .unwrap();
    let mut seen = Vec::new();
    // One of the four 64-frame blocks reported.
    assert_eq!(
        z.report_free_pages(1, &mut recording(&z, &mut seen, true)),
        Ok(64)
    );
    let reported = seen[0][0].pfn;
    // The three others go first.
    let taken: Vec<Pfn> = (0..3)
        .map(|_| z.alloc_pages(0, order(6)).unwrap())
        .collect();
    assert!(!taken.contains(&reported));
    assert_eq!(z.page_reporting_stats().reused, 0);
    assert_eq!(z.alloc_pages(0, order(6)).unwrap(), reported);
    let stats = z.page_reporting_stats();
    assert_eq!((stats.reused, stats.reported_free), (64, 0));
    z.check().unwrap();
}

#[test]
fn a_refusing_sink_gets_every_block_back_as_it_was() {
    let z = zone();
    z.register_page_reporting(PageReporting::new(order(4)))
        .unwrap();
    let _held = z.alloc_pages(0, order(3)).unwrap();
    let before = Before::of(&z);
    let mut seen = Vec::new();
    assert_eq!(
        z.report_free_pages(u64::MAX, &mut recording(&z, &mut seen, false)),
        Err(ReportError::Rejected)
    );
    assert!(!seen.is_empty());
    before.assert_unchanged(&z);
    let stats = z.page_reporting_stats();
    assert_eq!(
        (stats.reported_free, stats.rejected, stats.reports),
        (0, 1, 0)
    );
    z.check().unwrap();
}

#[test]
fn registration_is_checked_and_once() {
    let z = zone();
    let mut nothing = |_: &[ReportedBlock]| true;
    assert_eq!(
        z.report_free_pages(64, &mut nothing),
        Err(ReportError::NotRegistered)
    );
    assert_eq!(
        z.register_page_reporting(PageReporting::new(order(7))),
        Err(ReportError::OrderTooLarge {
            order: order(7),
            max: order(6)
        })
    );
    for capacity in [0, 33] {
        assert_eq!(
            z.register_page_reporting(PageReporting::new(order(4)).with_capacity(capacity)),
            Err(ReportError::Capacity(capacity))
        );
    }
    let r = PageReporting::new(order(4));
    z.register_page_reporting(r).unwrap();
    assert_eq!(
        z.register_page_reporting(r),
        Err(ReportError::AlreadyRegistered)
    );
    assert_eq!(z.unregister_page_reporting(), Some(r));
    assert_eq!(
        z.report_free_pages(64, &mut nothing),
        Err(ReportError::NotRegistered)
    );
}

/// A zone of 256 frames, as `zone()`, over memory that reads 0xA5 (which the caller keeps).
struct WithMemory {
    zone: TestZone,
    clearer: FrameClearer<OffsetMap>,
}

#[repr(C, align(4096))]
struct Aligned([u8; 4096]);

impl WithMemory {
    fn new() -> (Vec<Aligned>, Self) {
        let mut ram: Vec<Aligned> = (0..256).map(|_| Aligned([0xA5; 4096])).collect();
        let first = ram.as_mut_ptr().cast();
        // SAFETY: frame START + i is ram[i], alive as long as the test; only the zone and
        // this test touch it.
        let memory = unsafe { OffsetMap::with_frame_at(Pfn(START), first) }.unwrap();
        let clearer = FrameClearer::detected(memory).verifying();
        let w = Self {
            zone: zone(),
            clearer,
        };
        (ram, w)
    }
}

#[test]
fn a_discard_that_zeroes_makes_reported_blocks_known_zero_and_skips_their_clear() {
    let (mut ram, w) = WithMemory::new();
    let z = &w.zone;
    z.register_page_reporting(PageReporting::new(order(6)).discard_zeroes(true))
        .unwrap();
    let base = ram.as_mut_ptr();
    // The host's discard: the memory reads zero afterwards.
    let mut discard = |blocks: &[ReportedBlock]| {
        for b in blocks {
            for pfn in b.pfn.0..b.pfn.0 + b.pages() {
                // SAFETY: page pfn - START of the test's buffer, in a block the zone handed
                // to the sink.
                unsafe { (*base.add((pfn - START) as usize)).0.fill(0) };
            }
        }
        true
    };
    assert_eq!(z.report_free_pages(u64::MAX, &mut discard), Ok(256));
    assert_eq!(z.zeroed_pages(), 256);
    // A zeroed allocation takes a reported block without clearing it; the verifying
    // clearer reads every known-zero block it hands out.
    let cleared = z.counters().cleared_on_alloc;
    let pfn = z
        .alloc_zeroed(0, order(6), &w.clearer, None, &mut NoResched)
        .unwrap();
    assert_eq!(z.counters().cleared_on_alloc, cleared);
    let page = (pfn.0 - START) as usize;
    assert!(ram[page..page + 64].iter().all(|p| all_bytes_are(&p.0, 0)));
    z.check().unwrap();
}

#[test]
fn without_a_zeroing_discard_reported_blocks_stay_unknown_and_background_zeroing_leaves_them() {
    let (_ram, w) = WithMemory::new();
    let z = &w.zone;
    z.register_page_reporting(PageReporting::new(order(6)))
        .unwrap();
    let mut accept = |_: &[ReportedBlock]| true;
    assert_eq!(z.report_free_pages(128, &mut accept), Ok(128));
    assert_eq!(z.zeroed_pages(), 0);
    // Clearing a reported block would make the host back it again: zero_some takes the
    // two blocks not reported only.
    assert_eq!(z.zero_some(u64::MAX, &w.clearer, &mut NoResched), Ok(128));
    assert_eq!(z.page_reporting_stats().reported_free, 128);
    z.check().unwrap();
}

#[test]
fn a_node_set_registers_every_zone_or_none_and_reports_across_them() {
    use buddy_sim::{NodeId, Topology};
    let t = Topology::uniform(2, &[NodeId(0), NodeId(1)]).unwrap();
    let on = |node: u8, start: u64| {
        let cfg = ZoneConfig::new(Pfn(start), 128)
            .with_max_order(order(6))
            .with_cpus(2)
            .with_node(NodeId(node));
        common::zone(cfg).unwrap()
    };
    let set = common::node_set(t, vec![on(0, 0x1000), on(1, 0x2000)]).unwrap();
    // The second zone already has a registration: the set's fails and leaves the first
    // zone unregistered.
    let zones: Vec<&TestZone> = set.zones().collect();
    zones[1]
        .register_page_reporting(PageReporting::new(order(6)))
        .unwrap();
    assert_eq!(
        set.register_page_reporting(PageReporting::new(order(5))),
        Err(ReportError::AlreadyRegistered)
    );
    assert_eq!(zones[0].unregister_page_reporting(), None);
    zones[1].unregister_page_reporting().unwrap();
    set.register_page_reporting(PageReporting::new(order(6)))
        .unwrap();
    let mut accept = |_: &[ReportedBlock]| true;
    assert_eq!(set.report_free_pages(192, &mut accept), Ok(192));
    let reported: Vec<u64> = zones
        .iter()
        .map(|z| z.page_reporting_stats().reported_free)
        .collect();
    assert_eq!(reported, [128, 64]);
}

/// The zone of the reproductions: 64 frames at pfn 0x1000, MAX_ORDER 6, pageblocks of 8, one
/// CPU, all free (one block of 64 frames).
fn small_zone() -> TestZone {
    let cfg = ZoneConfig {
        pageblock_order: order(3),
        ..ZoneConfig::new(Pfn(0x1000), 64)
            .with_max_order(order(6))
            .with_pcp(0, 1)
    };
    common::zone(cfg).unwrap()
}

#[test]
fn a_budget_smaller_than_a_block_reports_it_whole_and_never_twice() {
    let z = small_zone();
    z.register_page_reporting(PageReporting::new(order(3)))
        .unwrap();
    let mut seen = Vec::new();
    // Reporting eight frames at a time until a call reports nothing: every free frame is
    // handed to the sink exactly once (a block split for the budget would merge its reported
    // part back into its unreported rest, and the same frames would be reported every call).
    let mut calls = 0;
    while z
        .report_free_pages(8, &mut recording(&z, &mut seen, true))
        .unwrap()
        > 0
    {
        calls += 1;
        assert!(calls <= 64, "reporting makes no progress: {seen:?}");
    }
    let mut frames: Vec<u64> = seen
        .iter()
        .flatten()
        .flat_map(|b| b.pfn.0..b.pfn.0 + b.pages())
        .collect();
    frames.sort_unstable();
    assert_eq!(frames, (0x1000..0x1040).collect::<Vec<u64>>());
    let stats = z.page_reporting_stats();
    assert_eq!((stats.reported_free, stats.reported), (64, 64));
    z.check().unwrap();
}

#[test]
fn a_contiguous_allocation_takes_the_mark_off_the_frames_it_takes_only() {
    let z = small_zone();
    z.register_page_reporting(PageReporting::new(order(3)))
        .unwrap();
    let mut seen = Vec::new();
    assert_eq!(
        z.report_free_pages(u64::MAX, &mut recording(&z, &mut seen, true)),
        Ok(64)
    );
    let mut no_migration = |_: &buddy_sim::Migration| false;
    z.alloc_contig_range(0, Pfn(0x1003), 2, &mut no_migration)
        .unwrap();
    let stats = z.page_reporting_stats();
    assert_eq!((stats.reported_free, stats.reused), (62, 2));
    z.check().unwrap();
    // The 62 frames left are still reported: nothing is handed to the sink again.
    let mut again = Vec::new();
    assert_eq!(
        z.report_free_pages(u64::MAX, &mut recording(&z, &mut again, true)),
        Ok(0)
    );
}

#[test]
#[cfg(feature = "testing")] // the lockstep harness
fn the_lockstep_harness_reports_in_small_budgets_and_checks_each_frame_goes_once() {
    use buddy_sim::testing::{Lockstep, Op};
    // SAFETY: the harness's zones are its own, and nothing reaches their (absent) memory.
    let mut model = unsafe { Lockstep::new(small_zone(), small_zone()) };
    for budget in [8, 1, 0, 600] {
        model
            .apply(Op::Report {
                budget,
                accept: true,
            })
            .unwrap();
        model.apply(Op::Alloc { cpu: 0, order: 2 }).unwrap();
    }
    model.finish().unwrap();
}
