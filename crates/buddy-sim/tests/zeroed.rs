//! Zeroed allocation and background zeroing: the zone's knowledge of zero through merges and
//! splits against the per-page reference ([`ZeroedModel`]) over arbitrary operation
//! sequences, and the preferences, errors and debug check one by one.
// loom atomics work only inside loom::model: these run on the real ones.
#![cfg(not(loom))]

mod common;
use common::Before;
use common::TestZone;
use common::bytes::all_bytes_are;

use buddy_sim::zero_core::{ClearConfig, CountingResched, NoResched, PageSize, PreemptModel};
use buddy_sim::{AllocError, ConfigError};
use buddy_sim::{FrameClearer, FrameMemory, MigrateType, OffsetMap, Order, Pfn, ZoneConfig};
/// The zone against `testing::ZeroedModel` (features `alloc` and `testing`).
#[cfg(all(feature = "alloc", feature = "testing"))]
mod model {
    use super::*;
    use buddy_sim::testing::{Op, ZeroedModel};
    use proptest::prelude::*;

    const MAX_ZONE: u64 = if cfg!(miri) { 16 } else { 96 };
    const MAX_OPS: usize = if cfg!(miri) { 6 } else { 60 };

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..3, 0u8..6).prop_map(|(cpu, order)| Op::Alloc { cpu, order }),
            (0usize..3, 0u8..6, proptest::option::of(0u64..200_000))
                .prop_map(|(cpu, order, fault)| Op::AllocZeroed { cpu, order, fault }),
            (0usize..3, 0usize..64).prop_map(|(cpu, slot)| Op::FreePages { cpu, slot }),
            (0usize..3, 0u64..40_000, 0u8..3).prop_map(|(cpu, offset, mt)| Op::HugeFault {
                cpu,
                offset,
                mt
            }),
            (0u64..80).prop_map(|budget| Op::ZeroSome { budget }),
            (0u64..80, any::<bool>()).prop_map(|(budget, accept)| Op::Report { budget, accept }),
            (0usize..3).prop_map(|cpu| Op::DrainCpu { cpu }),
            (0usize..3).prop_map(|cpu| Op::DecayPcpHigh { cpu }),
            Just(Op::DrainAll),
        ]
    }

    proptest! {
        #![proptest_config(common::proptest_config(1))]

        /// Any sequence of allocations, zeroed allocations, huge-page faults, frees, background
        /// zeroing and drains
        /// over a zone whose memory is added in pieces, some declared zero: the reference finds
        /// no block known zero that is not, no zeroed allocation that is not, no held page
        /// cleared, no known-zero block passed over, and the zone's invariants hold throughout.
        #[test]
        fn zero_knowledge_matches_the_per_page_reference(
            nr in 16..=MAX_ZONE,
            start in 0u64..300,
            max_order in 0u8..=6,
            cpus in 1usize..=2,
            high in 0u64..40,
            high_max in prop_oneof![Just(0u64), 0u64..200],
            batch in 1u64..9,
            pieces in proptest::collection::vec((0u64..MAX_ZONE, 1u64..40, any::<bool>()), 1..5),
            ops in proptest::collection::vec(op(), 1..MAX_OPS),
        ) {
            let cfg = ZoneConfig {
                max_order: Order::new(max_order).unwrap(),
                pageblock_order: Order::new(max_order.min(3)).unwrap(),
                cpus,
                pcp_high: high,
                pcp_high_max: high_max,
                pcp_batch: batch,
                ..ZoneConfig::new(Pfn(start), nr)
            };
            let mut model = ZeroedModel::new(cfg, PreemptModel::None).unwrap();
            for (offset, len, zeroed) in pieces {
                model.apply(Op::AddMemory { offset, len, zeroed }).unwrap();
            }
            for op in ops {
                if let Err(d) = model.apply(op) {
                    prop_assert!(false, "{op:?}: {d:?}");
                }
            }
            model.apply(Op::DrainAll).unwrap();
            let budget = nr;
            model.apply(Op::ZeroSome { budget }).unwrap();
        }
    }
}

/// 16 frames of memory that reads 0xA5, and a single-CPU zone of them, every frame added
/// not known zero.
struct Fixture {
    ram: Vec<Page>,
    zone: TestZone,
    clearer: FrameClearer<OffsetMap>,
}

#[repr(C, align(4096))]
struct Page([u8; 4096]);

const START: Pfn = Pfn(0x100);

fn o(order: u8) -> Order {
    Order::new(order).unwrap()
}

impl Fixture {
    fn new(preempt: PreemptModel) -> Self {
        let mut ram: Vec<Page> = (0..16).map(|_| Page([0xA5; 4096])).collect();
        // SAFETY: frame START + i is ram[i]; the tests read it only between zone calls.
        let memory = unsafe { OffsetMap::with_frame_at(START, ram.as_mut_ptr().cast()) }.unwrap();
        let cfg = ZoneConfig {
            max_order: o(4),
            pageblock_order: o(3),
            ..ZoneConfig::new(START, 16)
        };
        let zone = common::zone(cfg).unwrap();
        let clear = ClearConfig::new(PageSize::Size4KiB, preempt);
        let clearer = FrameClearer::new(memory, clear).unwrap().verifying();
        Self { ram, zone, clearer }
    }

    fn page(&self, pfn: Pfn) -> &[u8; 4096] {
        &self.ram[(pfn.0 - START.0) as usize].0
    }

    fn zeroed(&self, pfn: Pfn) -> bool {
        self.zone.frame(pfn).unwrap().zeroed
    }

    fn alloc_zeroed(&self, order: u8) -> Result<Pfn, AllocError> {
        self.zone
            .alloc_zeroed(0, o(order), &self.clearer, None, &mut NoResched)
    }
}

#[test]
fn background_zeroing_fills_the_pool_and_zeroed_allocations_take_from_it() {
    let f = Fixture::new(PreemptModel::None);
    assert_eq!(f.zone.zeroed_pages(), 0);
    // A budget of 4 frames splits the 16-frame block and clears its first quarter.
    let cleared = f.zone.zero_some(4, &f.clearer, &mut NoResched).unwrap();
    assert_eq!(cleared, 4);
    assert_eq!(f.zone.zeroed_pages(), 4);
    assert!(f.zeroed(START));
    assert!((0..4).all(|k| all_bytes_are(f.page(Pfn(START.0 + k)), 0)));
    assert!(
        all_bytes_are(f.page(Pfn(START.0 + 4)), 0xA5),
        "beyond the budget"
    );
    // A zeroed order-0 allocation takes a page of the zeroed block (split: the rest stays
    // known zero) and clears nothing.
    let before = f.zone.counters();
    let p = f.alloc_zeroed(0).unwrap();
    let after = f.zone.counters();
    assert!(p.0 < START.0 + 4, "{p}");
    assert_eq!(after.zeroed_hits, before.zeroed_hits + 1);
    assert_eq!(after.cleared_on_alloc, before.cleared_on_alloc);
    f.zone.check().unwrap();
}

#[test]
fn plain_allocations_leave_known_zero_blocks_for_zeroed_ones() {
    let f = Fixture::new(PreemptModel::None);
    // Two order-3 halves: the first known zero, the second not.
    f.zone.zero_some(8, &f.clearer, &mut NoResched).unwrap();
    f.zone.drain_all();
    let plain = f.zone.alloc_pages(0, o(3)).unwrap();
    assert_eq!(
        plain,
        Pfn(START.0 + 8),
        "a plain allocation took the zeroed half"
    );
    // SAFETY: allocated just above, its memory not used.
    unsafe { f.zone.free_pages(0, plain, o(3)) }.unwrap();
    f.zone.drain_all();
    let zeroed = f.alloc_zeroed(3).unwrap();
    assert_eq!(
        zeroed, START,
        "a zeroed allocation passed over the zeroed half"
    );
    f.zone.check().unwrap();
}

#[test]
fn a_freed_block_does_not_merge_with_a_known_zero_buddy_until_memory_is_short() {
    let f = Fixture::new(PreemptModel::None);
    f.zone.zero_some(8, &f.clearer, &mut NoResched).unwrap();
    // Order 3 is the pageblock order: drain so both halves sit in the buddy.
    f.zone.drain_all();
    assert_eq!(
        f.zone.buddy_blocks_per_order()[3],
        2,
        "mixed halves stay apart"
    );
    assert_eq!(f.zone.zeroed_pages(), 8);
    // The whole zone: the slow path merges the mixed pair (dropping the knowledge).
    let all = f.zone.alloc_pages(0, o(4)).unwrap();
    assert_eq!(all, START);
    // SAFETY: allocated just above, its memory not used.
    unsafe { f.zone.free_pages(0, all, o(4)) }.unwrap();
    assert_eq!(f.zone.zeroed_pages(), 0);
    // Zeroing both halves merges them into one known-zero block.
    assert_eq!(
        f.zone.zero_some(16, &f.clearer, &mut NoResched).unwrap(),
        16
    );
    assert_eq!(f.zone.buddy_blocks_per_order()[4], 1);
    assert!(f.zeroed(START));
    f.zone.check().unwrap();
}

#[test]
fn a_mixed_pair_across_pageblocks_of_two_types_merges_when_memory_is_short() {
    let f = Fixture::new(PreemptModel::None);
    // An unmovable allocation claims the whole zone (memory starts movable, the block it
    // splits is two pageblocks); a movable one then claims the second pageblock back.
    let unmovable = f.zone.alloc_pages(0, o(3)).unwrap();
    let movable = f.zone.alloc_movable(0, o(3), 7).unwrap();
    assert_eq!([unmovable, movable], [START, Pfn(START.0 + 8)]);
    let types = || [START, Pfn(START.0 + 8)].map(|p| f.zone.pageblock_type(p).unwrap().0);
    assert_eq!(types(), [MigrateType::Unmovable, MigrateType::Movable]);
    // The movable half comes back and is zeroed in the background; then the unmovable one.
    // SAFETY: allocated just above, its memory not used.
    unsafe { f.zone.free_pages(0, movable, o(3)) }.unwrap();
    f.zone.drain_all();
    assert_eq!(f.zone.zero_some(8, &f.clearer, &mut NoResched).unwrap(), 8);
    // SAFETY: as above.
    unsafe { f.zone.free_pages(0, unmovable, o(3)) }.unwrap();
    f.zone.drain_all();
    // Two types and two knowledges: the free did not merge them; the last resort does.
    assert_eq!(f.zone.buddy_blocks_per_order()[3], 2);
    assert!(
        f.zone.merge_free_blocks(),
        "the mixed pair across types stayed apart"
    );
    assert_eq!(f.zone.buddy_blocks_per_order()[4], 1);
    assert_eq!(f.zone.zeroed_pages(), 0);
    // The merged block is of one type, the lower half's (whichever half was freed last).
    assert_eq!(types(), [MigrateType::Unmovable; 2]);
    f.zone.check().unwrap();
}

#[test]
fn zeroed_allocations_clear_what_is_not_known_zero_fault_neighbourhood_last() {
    let f = Fixture::new(PreemptModel::Voluntary);
    let mut resched = CountingResched::new();
    let fault = 5 * 4096 + 7;
    let p = f
        .zone
        .alloc_zeroed(0, o(4), &f.clearer, Some(fault), &mut resched)
        .unwrap();
    assert_eq!(p, START);
    assert!(f.ram.iter().all(|page| all_bytes_are(&page.0, 0)));
    assert!(resched.calls() >= 1, "cleared in zero-core's batches");
    assert_eq!(f.zone.counters().cleared_on_alloc, 16);
}

#[test]
fn a_fault_outside_the_block_is_refused_and_changes_nothing() {
    let f = Fixture::new(PreemptModel::None);
    let before = Before::of(&f.zone);
    let e = f
        .zone
        .alloc_zeroed(0, o(1), &f.clearer, Some(2 * 4096), &mut NoResched);
    assert_eq!(
        e,
        Err(AllocError::FaultOutsideBlock {
            order: o(1),
            offset: 8192
        })
    );
    before.assert_unchanged(&f.zone);
    assert!(all_bytes_are(f.page(START), 0xA5));
}

#[test]
fn the_debug_check_catches_a_write_after_free_into_a_known_zero_block() {
    let f = Fixture::new(PreemptModel::None);
    f.zone.zero_some(16, &f.clearer, &mut NoResched).unwrap();
    // A use after free scribbles on the zeroed pool (through the map the zone uses).
    let p = f.clearer.memory().frame_ptr(START).unwrap();
    // SAFETY: frame START is ram[0], alive; nothing else accesses it during this write.
    unsafe { p.as_ptr().add(100).write(1) };
    assert_eq!(f.alloc_zeroed(4), Err(AllocError::StaleZero(START)));
    // The block went back, no longer known zero; the next zeroed allocation clears it.
    assert!(!f.zeroed(START));
    f.zone.check().unwrap();
    assert_eq!(f.alloc_zeroed(4), Ok(START));
    assert!(all_bytes_are(f.page(START), 0));
}

#[test]
fn memory_declared_zero_is_known_zero_and_reads_zero() {
    // Zero from the allocator: the embedder knows it.
    let mut ram: Vec<Page> = (0..8).map(|_| Page([0; 4096])).collect();
    // SAFETY: frame START + i is ram[i], read only between zone calls.
    let memory = unsafe { OffsetMap::with_frame_at(START, ram.as_mut_ptr().cast()) }.unwrap();
    let clearer = FrameClearer::new(
        memory,
        ClearConfig::new(PageSize::Size4KiB, PreemptModel::None),
    )
    .unwrap()
    .verifying();
    let zone = common::empty_zone(ZoneConfig::new(START, 8)).unwrap();
    zone.add_zeroed_memory(START, 8).unwrap();
    assert_eq!(zone.zeroed_pages(), 8);
    assert_eq!(
        zone.zero_some(8, &clearer, &mut NoResched),
        Ok(0),
        "nothing to clear"
    );
    let p = zone
        .alloc_zeroed(0, o(3), &clearer, None, &mut NoResched)
        .unwrap();
    assert_eq!(p, START);
    assert_eq!(zone.counters().zeroed_hits, 1);
    assert_eq!(zone.counters().cleared_on_alloc, 0);
    assert!(ram.iter().all(|page| all_bytes_are(&page.0, 0)));
}

#[test]
fn a_clearer_refuses_other_page_sizes() {
    // SAFETY: never used to reach memory.
    let memory = unsafe { OffsetMap::new(0) };
    let clear = ClearConfig::new(PageSize::Size16KiB, PreemptModel::None);
    assert!(matches!(
        FrameClearer::new(memory, clear),
        Err(ConfigError::ClearPageSize)
    ));
}
