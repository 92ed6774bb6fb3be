//! What a failed operation leaves behind, and zones where frame numbers end: each case found
//! by an independent check of the published crate, as a whole-zone snapshot compared before
//! and after (every frame's word, known-zero state, every pageblock's type, the counts:
//! `testing::Snapshot`, with the feature `testing`; without it, the zone's statistics and
//! its consistency check). The class is covered by the lockstep model (`properties`, and the `buddy_ops`
//! fuzz target), which compares a snapshot around every failed operation.
//!
//! The frees are `unsafe`: these zones have no memory behind them, and no clearer or
//! migration writes a frame (the callbacks here copy nothing).
#![cfg(not(loom))]

mod common;
use common::Before;
use common::TestZone;

use buddy_sim::zero_core::{ClearConfig, NoResched, PageSize, PreemptModel};
use buddy_sim::{AllocError, ContigError, FreeError, MapError};
use buddy_sim::{AllocRequest, FrameClearer, MigrateType, Migration, Order, Pfn, ZoneConfig};
use common::Nowhere;

fn o(order: u8) -> Order {
    Order::new(order).unwrap()
}

fn refuse(_: &Migration) -> bool {
    false
}

fn accept(_: &Migration) -> bool {
    true
}

const START: Pfn = Pfn(0x2000);

/// 64 frames at 0x2000 in pageblocks of 16, MAX_ORDER 6: the zone of the reports.
fn small_zone() -> TestZone {
    let cfg = ZoneConfig {
        pageblock_order: o(4),
        ..ZoneConfig::new(START, 64).with_max_order(o(6))
    };
    common::empty_zone(cfg).unwrap()
}

/// A zone with one movable page at its start and the rest known zero: a migration target
/// the refusing callback is handed comes out of the known-zero block at 0x2010.
fn known_zero_but_one_movable_page() -> TestZone {
    let z = small_zone();
    z.add_zeroed_memory(START, 64).unwrap();
    assert_eq!(z.alloc_movable(0, o(0), 1), Ok(START));
    assert_eq!(z.zeroed_pages(), 63);
    z
}

#[test]
fn a_refused_offline_keeps_the_known_zero_blocks_it_took_a_target_from() {
    let z = known_zero_but_one_movable_page();
    let before = Before::of(&z);
    let mut calls = 0;
    let mut count_and_refuse = |m: &Migration| {
        calls += 1;
        refuse(m)
    };
    assert_eq!(
        z.offline_range(0, START, 16, &mut count_and_refuse),
        Err(ContigError::Busy(START))
    );
    assert_eq!(calls, 1);
    z.check().unwrap();
    assert_eq!(z.zeroed_pages(), 63);
    before.assert_unchanged(&z);
}

#[test]
fn a_refused_contiguous_allocation_keeps_the_known_zero_blocks_it_took_a_target_from() {
    let z = known_zero_but_one_movable_page();
    let before = Before::of(&z);
    for frozen in [false, true] {
        let got = if frozen {
            z.alloc_contig_frozen_range(0, START, 16, &mut refuse)
        } else {
            z.alloc_contig_range(0, START, 16, &mut refuse)
        };
        assert_eq!(got, Err(ContigError::Busy(START)));
        z.check().unwrap();
        before.assert_unchanged(&z);
    }
}

/// A block of `2^order` frames of kind `mt` from CPU 0.
fn alloc_on_cpu0(z: &TestZone, order: u8, mt: MigrateType) -> Pfn {
    z.cpu(0)
        .unwrap()
        .alloc_raw(AllocRequest::order(o(order)).kind(mt))
        .unwrap()
}

#[test]
fn a_refused_move_gives_back_the_pageblock_its_target_claimed() {
    let z = small_zone();
    z.add_memory(START, 64).unwrap();
    let alloc = |order, mt| alloc_on_cpu0(&z, order, mt);
    assert_eq!(alloc(1, MigrateType::Movable), START);
    assert_eq!(alloc(3, MigrateType::Unmovable), Pfn(0x2020));
    for at in [0x2008, 0x2010, 0x2018] {
        assert_eq!(alloc(3, MigrateType::Movable), Pfn(at));
    }
    assert_eq!(
        z.pageblock_type(Pfn(0x2030)),
        Ok((MigrateType::Unmovable, false))
    );
    let before = Before::of(&z);
    assert_eq!(
        z.alloc_contig_range(0, START, 16, &mut refuse),
        Err(ContigError::Busy(START))
    );
    z.check().unwrap();
    assert_eq!(
        z.pageblock_type(Pfn(0x2030)),
        Ok((MigrateType::Unmovable, false))
    );
    before.assert_unchanged(&z);
    // Accepted, the same move claims it, as a movable allocation falling back would.
    assert_eq!(z.alloc_contig_range(0, START, 16, &mut accept), Ok(()));
    assert_eq!(
        z.pageblock_type(Pfn(0x2030)),
        Ok((MigrateType::Movable, false))
    );
    z.check().unwrap();
}

#[test]
fn alloc_contig_pages_goes_on_past_a_candidate_whose_movable_block_finds_no_target() {
    let z = small_zone();
    z.add_memory(START, 64).unwrap();
    let alloc = |order, mt| alloc_on_cpu0(&z, order, mt);
    assert_eq!(alloc(3, MigrateType::Unmovable), START);
    for at in [0x2020, 0x2028, 0x2030] {
        assert_eq!(alloc(3, MigrateType::Movable), Pfn(at));
    }
    assert_eq!(alloc(3, MigrateType::Unmovable), Pfn(0x2008));
    assert_eq!(alloc(3, MigrateType::Movable), Pfn(0x2038));
    assert_eq!(alloc(1, MigrateType::Movable), Pfn(0x2010));
    // 0x2012..0x2020 is free: the candidate at 0x2010 isolates the only free pageblock
    // itself, so its movable page has nowhere to go; the next candidate needs no move.
    let mut calls = 0;
    let mut count = |m: &Migration| {
        calls += 1;
        accept(m)
    };
    assert_eq!(
        z.cpu(0)
            .unwrap()
            .alloc_raw(AllocRequest::frames(6).aligned(o(1)).contiguous(&mut count)),
        Ok(Pfn(0x2012))
    );
    assert_eq!(calls, 0);
    z.check().unwrap();
    for p in 0x2012..0x2018 {
        assert_eq!(z.frame(Pfn(p)).unwrap().refcount, 1);
    }
}

/// The largest zone whose span ends at the top of the pfn space: its last frame is
/// `u64::MAX - 1` (a span's end, `start + nr_pages`, is a pfn too).
fn top_zone(nr: u64) -> ZoneConfig {
    ZoneConfig::new(Pfn(u64::MAX - nr), nr)
}

#[test]
fn a_zone_at_the_top_of_the_pfn_space_builds_and_works() {
    let z = common::zone(top_zone(3000)).unwrap();
    z.check().unwrap();
    assert_eq!(z.free_pages_total(), 3000);
    // Everything handed out and given back, block by block, then as one contiguous run.
    let mut held = Vec::new();
    for order in (0..=10).rev() {
        while let Ok(p) = z.alloc_pages(0, o(order)) {
            held.push((p, o(order)));
        }
    }
    assert_eq!(held.iter().map(|(_, o)| o.pages()).sum::<u64>(), 3000);
    for (p, order) in held {
        // SAFETY: no memory behind this zone (module docs).
        unsafe { z.free_pages(0, p, order) }.unwrap();
    }
    z.drain_all();
    z.check().unwrap();
    let last = Pfn(u64::MAX - 1);
    assert_eq!(
        z.cpu(0)
            .unwrap()
            .alloc_raw(AllocRequest::frames(100).contiguous(&mut refuse)),
        Ok(Pfn(u64::MAX - 3000))
    );
    // SAFETY: as above.
    unsafe { z.free_contig_range(0, Pfn(u64::MAX - 3000), 100) }.unwrap();
    assert_eq!(
        z.alloc_contig_range(0, Pfn(last.0 - 99), 100, &mut refuse),
        Ok(())
    );
    // SAFETY: as above.
    unsafe { z.free_contig_range(0, Pfn(last.0 - 99), 100) }.unwrap();
    // A movable page moves out of the range going offline; the top of the zone goes
    // offline and comes back; compaction makes a 2 MiB block.
    let moving = z.alloc_movable(0, o(0), 7).unwrap();
    let around = Pfn(moving.0 & !511);
    assert_eq!(z.offline_range(0, around, 512, &mut accept), Ok(1));
    z.add_memory(around, 512).unwrap();
    z.alloc_pages_at(Pfn(last.0 - 511), o(0)).unwrap();
    let top = Pfn(last.0 - 511);
    assert_eq!(
        z.offline_range(0, top, 512, &mut accept),
        Err(ContigError::Busy(top))
    );
    // SAFETY: as above.
    unsafe { z.free_pages(0, top, o(0)) }.unwrap();
    assert_eq!(z.offline_range(0, top, 512, &mut accept), Ok(0));
    assert_eq!(z.present_pages(), 3000 - 512);
    z.add_memory(top, 512).unwrap();
    assert!(z.compact(0, o(9), &mut accept).unwrap().success);
    z.check().unwrap();
    // No frame up here has a byte address (its physical address does not fit 64 bits): a
    // zeroed allocation fails, frees the block again and leaks nothing.
    let clear = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None);
    let clearer = FrameClearer::new(Nowhere, clear).unwrap();
    let free = z.free_pages_total();
    assert!(matches!(
        z.alloc_zeroed(0, o(0), &clearer, None, &mut NoResched),
        Err(AllocError::NotAddressable(_))
    ));
    assert_eq!(z.free_pages_total(), free);
    z.check().unwrap();
    // A frame past the zone's end is an error, not an overflow.
    assert_eq!(
        z.frame(Pfn(u64::MAX)),
        Err(MapError::OutOfZone(Pfn(u64::MAX)))
    );
    assert_eq!(
        // SAFETY: as above.
        unsafe { z.free_contig_range(0, last, 2) },
        Err(FreeError::Overflow)
    );
}

/// A frozen block (`alloc_frozen_pages`) is freed only whole, at its order, as a frozen
/// block: a free at another order, as a block with a reference count, of a page inside it,
/// or twice is refused with the zone unchanged; the other reference calls refuse it too.
#[test]
fn a_frozen_block_is_freed_only_whole_at_its_order() {
    let z = small_zone();
    z.add_memory(START, 64).unwrap();
    let cpu = z.cpu(0).unwrap();
    for order in 0..=6 {
        let pfn = cpu.alloc_frozen_pages(o(order)).unwrap();
        let f = z.frame(pfn).unwrap();
        assert!(f.frozen && f.refcount == 0 && f.order == order);
        z.check().unwrap();
        // SAFETY: no memory behind the zone; the block is this test's.
        unsafe { cpu.free_frozen_pages(pfn, o(order)) }.unwrap();
    }
    let (pfn, order) = (cpu.alloc_frozen_pages(o(2)).unwrap(), o(2));
    let inside = Pfn(pfn.0 + 1);
    let before = Before::of(&z);
    // SAFETY: these frees fail (checked) and free nothing.
    unsafe {
        assert_eq!(
            cpu.free_frozen_pages(pfn, o(1)),
            Err(FreeError::OrderMismatch {
                pfn,
                given: o(1),
                allocated: order
            })
        );
        assert_eq!(
            cpu.free_frozen_page(pfn),
            Err(FreeError::OrderMismatch {
                pfn,
                given: o(0),
                allocated: order
            })
        );
        assert_eq!(cpu.free_pages(pfn, order), Err(FreeError::Frozen(pfn)));
        assert_eq!(
            cpu.free_frozen_pages(inside, o(0)),
            Err(FreeError::CompoundPage(inside))
        );
        assert_eq!(cpu.free_contig_range(pfn, 4), Err(FreeError::Frozen(pfn)));
    }
    assert_eq!(z.get_page(pfn), Err(FreeError::Frozen(pfn)));
    assert_eq!(z.split_page(pfn, order), Err(FreeError::Frozen(pfn)));
    before.assert_unchanged(&z);
    // A block with a reference count is not a frozen one.
    let counted = cpu.alloc_raw(AllocRequest::order(order)).unwrap();
    let before = Before::of(&z);
    // SAFETY: this free fails (checked) and frees nothing.
    let r = unsafe { cpu.free_frozen_pages(counted, order) };
    assert_eq!(r, Err(FreeError::NotFrozen(counted)));
    before.assert_unchanged(&z);
    // SAFETY: both blocks are this test's; freed once each.
    unsafe {
        cpu.free_frozen_pages(pfn, order).unwrap();
        cpu.free_pages(counted, order).unwrap();
        assert_eq!(
            cpu.free_frozen_pages(pfn, order),
            Err(FreeError::DoubleFree(pfn))
        );
    }
    z.check().unwrap();
    z.drain_all();
    assert_eq!(z.free_pages_total(), 64);
    assert_eq!(z.buddy_pages(), 64);
}

/// A frozen block its owner caches (`cache_frozen`) is allocated to the zone (its check
/// passes, a contiguous allocation over it finds it busy) and refused by every free,
/// reference and split, the zone unchanged, until `uncache_frozen` hands it back frozen;
/// only a frozen block of the order given is cached, and only a cached one uncached.
#[test]
fn a_cached_frozen_block_is_refused_by_every_free_until_it_is_uncached() {
    let z = small_zone();
    z.add_memory(START, 64).unwrap();
    let cpu = z.cpu(0).unwrap();
    let (pfn, order) = (cpu.alloc_frozen_pages(o(2)).unwrap(), o(2));
    let counted = cpu.alloc_raw(AllocRequest::order(order)).unwrap();
    let before = Before::of(&z);
    // SAFETY: both blocks are this test's; these calls refuse (checked), changing nothing.
    unsafe {
        assert!(!z.cache_frozen(pfn, o(1)));
        assert!(!z.cache_frozen(Pfn(pfn.0 + 1), o(0)));
        assert!(!z.cache_frozen(counted, order));
        assert!(!z.cache_frozen(Pfn(START.0 + 64), o(0)));
        assert!(!z.uncache_frozen(pfn, order));
    }
    before.assert_unchanged(&z);
    // SAFETY: the block is this test's, unused but through this "cache".
    assert!(unsafe { z.cache_frozen(pfn, order) });
    assert_eq!(z.frame(pfn).unwrap().state, buddy_sim::FrameState::Cached);
    z.check().unwrap();
    let before = Before::of(&z);
    // SAFETY: every call refuses the cached block (checked), freeing nothing.
    unsafe {
        assert!(!z.cache_frozen(pfn, order));
        assert!(!z.uncache_frozen(pfn, o(1)));
        assert_eq!(
            cpu.free_frozen_pages(pfn, order),
            Err(FreeError::DoubleFree(pfn))
        );
        assert!(!cpu.free_frozen_pages_listed(pfn, order));
        assert_eq!(cpu.free_pages(pfn, order), Err(FreeError::DoubleFree(pfn)));
        assert_eq!(
            cpu.free_contig_range(pfn, 4),
            Err(FreeError::DoubleFree(pfn))
        );
        assert!(z.split_frozen_pages(pfn, order).is_err());
    }
    assert!(z.get_page(pfn).is_err());
    assert!(z.split_page(pfn, order).is_err());
    assert!(cpu.alloc_contig_range(pfn, 4, &mut refuse).is_err());
    before.assert_unchanged(&z);
    // SAFETY: this test's "cache" holds the block; then it is freed once.
    unsafe {
        assert!(z.uncache_frozen(pfn, order));
        cpu.free_frozen_pages(pfn, order).unwrap();
        cpu.free_pages(counted, order).unwrap();
    }
    z.check().unwrap();
    z.drain_all();
    assert_eq!(z.buddy_pages(), 64);
}

/// `split_frozen_pages` splits only the head of a frozen block of the order it is given,
/// leaving the zone as it was otherwise; a split block's pages are frozen pages, freed one
/// by one or as a run.
#[test]
fn a_frozen_block_is_split_only_whole_at_its_order() {
    let z = small_zone();
    z.add_memory(START, 64).unwrap();
    let cpu = z.cpu(0).unwrap();
    let (pfn, order) = (cpu.alloc_frozen_pages(o(3)).unwrap(), o(3));
    let counted = cpu.alloc_raw(AllocRequest::order(o(3))).unwrap();
    let before = Before::of(&z);
    let inside = Pfn(pfn.0 + 1);
    // SAFETY: these splits fail (checked) and write nothing.
    unsafe {
        assert_eq!(
            z.split_frozen_pages(pfn, o(2)),
            Err(FreeError::OrderMismatch {
                pfn,
                given: o(2),
                allocated: order
            })
        );
        assert_eq!(
            z.split_frozen_pages(inside, o(0)),
            Err(FreeError::CompoundPage(inside))
        );
        assert_eq!(
            z.split_frozen_pages(counted, order),
            Err(FreeError::NotFrozen(counted))
        );
        assert!(z.split_frozen_pages(Pfn(START.0 + 64), o(0)).is_err());
    }
    before.assert_unchanged(&z);
    // SAFETY: the block is this test's; split once, each page freed once.
    unsafe {
        z.split_frozen_pages(pfn, order).unwrap();
        for i in 0..4 {
            let page = Pfn(pfn.0 + i);
            let f = z.frame(page).unwrap();
            assert!(f.frozen && f.order == 0);
            cpu.free_frozen_page(page).unwrap();
        }
        cpu.free_contig_frozen_range(Pfn(pfn.0 + 4), 4).unwrap();
        assert_eq!(
            z.split_frozen_pages(pfn, order),
            Err(FreeError::DoubleFree(pfn))
        );
        cpu.free_pages(counted, o(3)).unwrap();
    }
    z.check().unwrap();
    z.drain_all();
    assert_eq!(z.buddy_pages(), 64);
}

/// Fault injection (`fail_page_alloc`): every failure it injects is the out-of-memory error
/// an allocation that found nothing gets, and leaves the whole zone as it was; its filters
/// pass over what they exclude, and the same seed fails the same calls.
#[test]
fn an_injected_failure_is_out_of_memory_and_changes_nothing() {
    use buddy_sim::FailPageAlloc;
    let z = small_zone();
    z.add_memory(START, 64).unwrap();
    // Something on the per-cpu lists and in the buddy, pageblocks of two types.
    let page = z.alloc_pages(0, o(0)).unwrap();
    assert!(z.alloc_movable(0, o(2), 7).is_ok());
    z.set_fail_page_alloc(Some(FailPageAlloc::new(1)));
    for (cpu, order, mt) in [
        (0, 0, MigrateType::Unmovable),
        (0, 0, MigrateType::Movable),
        (0, 3, MigrateType::Reclaimable),
        (0, 6, MigrateType::Movable),
    ] {
        let before = Before::of(&z);
        let got = z
            .cpu(cpu)
            .unwrap()
            .alloc_raw(AllocRequest::order(o(order)).kind(mt));
        assert_eq!(got, Err(AllocError::OutOfMemory(o(order))));
        before.assert_unchanged(&z);
        let before = Before::of(&z);
        assert_eq!(
            z.cpu(cpu).unwrap().alloc_frozen_pages(o(order)),
            Err(AllocError::OutOfMemory(o(order)))
        );
        before.assert_unchanged(&z);
    }
    assert_eq!(z.injected_failures(), 8);
    // What is wrong with a call is still what it gets.
    assert_eq!(
        z.alloc_pages(0, o(7)),
        Err(AllocError::OrderTooLarge { order: 7, max: 6 })
    );
    assert_eq!(z.injected_failures(), 8);
    // Filters: only movable calls of order 2 or above fail.
    z.set_fail_page_alloc(Some(
        FailPageAlloc::new(1)
            .only(MigrateType::Movable)
            .min_order(o(2)),
    ));
    assert!(z.alloc_movable(0, o(1), 8).is_ok());
    assert!(z.alloc_pages(0, o(2)).is_ok());
    assert_eq!(
        z.alloc_movable(0, o(2), 9),
        Err(AllocError::OutOfMemory(o(2)))
    );
    // Space: the first 4 frames asked for pass.
    z.set_fail_page_alloc(Some(FailPageAlloc::new(1).space(4)));
    assert!(z.alloc_pages(0, o(1)).is_ok());
    assert!(z.alloc_pages(0, o(0)).is_ok());
    assert_eq!(z.alloc_pages(0, o(1)), Err(AllocError::OutOfMemory(o(1))));
    // Disarmed: nothing fails on purpose.
    z.set_fail_page_alloc(None);
    assert!(z.alloc_pages(0, o(0)).is_ok());
    // SAFETY: `page` was allocated above and is freed once; no memory behind the zone.
    #[allow(unsafe_code)]
    unsafe { z.free_pages(0, page, o(0)) }.unwrap();
    z.check().unwrap();
}

/// `probability` with a seed: the same seed fails the same calls of two zones, about the
/// share asked for, and no more than `times`.
#[test]
fn a_seeded_probability_fails_the_same_calls_every_run() {
    use buddy_sim::FailPageAlloc;
    let run = |seed: u64| {
        let z = small_zone();
        z.add_memory(START, 64).unwrap();
        z.set_fail_page_alloc(Some(FailPageAlloc::new(seed).probability(30)));
        let mut failed = [false; 200];
        for f in &mut failed {
            match z.alloc_pages(0, o(0)) {
                // SAFETY: just allocated, freed once; no memory behind the zone.
                #[allow(unsafe_code)]
                Ok(p) => unsafe { z.free_pages(0, p, o(0)) }.unwrap(),
                Err(e) => {
                    assert_eq!(e, AllocError::OutOfMemory(o(0)));
                    *f = true;
                }
            }
        }
        failed
    };
    let (a, b) = (run(42), run(42));
    assert_eq!(a, b);
    let n = a.iter().filter(|&&f| f).count();
    assert!((30..=90).contains(&n), "{n} of 200 failed at 30%");
    assert_ne!(run(43), a);

    let z = small_zone();
    z.add_memory(START, 64).unwrap();
    z.set_fail_page_alloc(Some(FailPageAlloc::new(5).probability(50).times(3)));
    let mut failures = 0;
    for _ in 0..100 {
        match z.alloc_pages(0, o(0)) {
            // SAFETY: just allocated, freed once; no memory behind the zone.
            #[allow(unsafe_code)]
            Ok(p) => unsafe { z.free_pages(0, p, o(0)) }.unwrap(),
            Err(_) => failures += 1,
        }
    }
    assert_eq!(failures, 3);
    assert_eq!(z.injected_failures(), 3);
}
