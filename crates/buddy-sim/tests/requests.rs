//! The front of the crate: one request type, CPU handles, owned blocks, the static zone and
//! byte-range memory maps. Each failure is checked to change nothing (the whole zone's
//! snapshot), each success to free everything when the blocks drop.

use buddy_sim::mm_types::FrameRange;
use buddy_sim::zero_core::{ClearConfig, NoResched, PageSize, PreemptModel};
use buddy_sim::{AllocError, MapError};
use buddy_sim::{
    AllocRequest, ConfigError, FrameClearer, Holding, MigrateType, Migration, OffsetMap, Order,
    Pfn, StaticZone, ZoneConfig,
};

mod common;
use common::Before;
use common::TestZone;
use common::bytes::all_bytes_are;

const START: Pfn = Pfn(0x100);

fn o(order: u8) -> Order {
    Order::new(order).unwrap()
}

fn zone(frames: u64) -> TestZone {
    let cfg = ZoneConfig {
        max_order: o(6),
        pageblock_order: o(4),
        ..ZoneConfig::new(START, frames).with_cpus(2)
    };
    common::zone(cfg).unwrap()
}

#[repr(C, align(4096))]
struct Page([u8; 4096]);

#[test]
fn blocks_free_what_they_hold_when_dropped() {
    let z = zone(256);
    let cpu = z.cpu(1).unwrap();
    let mut refuse = |_: &Migration| false;
    {
        let page = cpu.alloc(AllocRequest::page()).unwrap();
        let block = cpu.alloc(AllocRequest::order(o(3)).reclaimable()).unwrap();
        let run = cpu.alloc(AllocRequest::frames(37).aligned(o(2))).unwrap();
        let frozen = cpu
            .alloc(AllocRequest::frames(16).contiguous(&mut refuse).frozen())
            .unwrap();
        assert_eq!(page.holding(), Holding::Block(o(0)));
        assert_eq!(block.holding(), Holding::Block(o(3)));
        assert_eq!(
            z.frame(block.pfn()).unwrap().migratetype,
            Some(MigrateType::Reclaimable)
        );
        assert_eq!(run.holding(), Holding::Pages(37));
        assert_eq!(run.pfn().0 % 4, 0, "aligned to order 2");
        assert_eq!(frozen.holding(), Holding::FrozenPages(16));
        assert!(z.frame(frozen.pfn()).unwrap().frozen);
        assert_eq!(z.free_pages_total(), 256 - 1 - 8 - 37 - 16);
        z.check().unwrap();
    }
    assert_eq!(z.free_pages_total(), 256);
    z.check().unwrap();
}

#[test]
fn a_raw_block_made_owned_again_frees_once() {
    let z = zone(64);
    let cpu = z.cpu(0).unwrap();
    let pfn = cpu.alloc(AllocRequest::order(o(2))).unwrap().into_raw();
    assert_eq!(z.free_pages_total(), 60);
    // SAFETY: `into_raw` handed this block over, and nothing else frees it.
    let block = unsafe { buddy_sim::Block::from_raw(cpu, pfn, Holding::Block(o(2))) };
    assert_eq!(block.frames(), FrameRange::new(pfn, 4));
    drop(block);
    assert_eq!(z.free_pages_total(), 64);
    z.check().unwrap();
}

/// A movable block a [`buddy_sim::Block`] holds is pinned: compaction moves the raw
/// movable blocks around it (and the pages of a raw movable run, each under the run's key),
/// never it or the pages of a pinned run, and each block frees exactly what it was given.
/// (A movable `Block` used to follow its moves by key: two blocks under one key, or a move
/// between its look-up and its free, made it free another's block.)
#[test]
fn an_owned_movable_block_is_pinned_and_never_moved() {
    let mut ram: Vec<Page> = (0..64).map(|_| Page([0; 4096])).collect();
    // SAFETY: frame START + i is ram[i]; the test reads it only between zone calls.
    let memory = unsafe { OffsetMap::with_frame_at(START, ram.as_mut_ptr().cast()) }.unwrap();
    let z = common::zone(ZoneConfig {
        max_order: o(4),
        pageblock_order: o(4),
        ..ZoneConfig::new(START, 64)
    })
    .unwrap();
    let cpu = z.cpu(0).unwrap();
    // Every frame in a movable order-1 block, the top pageblock's last four owned (and
    // pinned), all under key 7: keys need not be distinct.
    let mut owned = Vec::new();
    let mut raw = Vec::new();
    for k in 0..32 {
        let request = AllocRequest::order(o(1)).movable(7);
        if k >= 28 {
            let block = cpu.alloc(request).unwrap();
            assert_eq!(block.holding(), Holding::Pinned(o(1)));
            assert_eq!(z.frame(block.pfn()).unwrap().refcount, 2, "no pin");
            owned.push(block);
        } else {
            raw.push(cpu.alloc_raw(request).unwrap());
        }
    }
    let pinned_at: Vec<Pfn> = owned.iter().map(buddy_sim::Block::pfn).collect();
    // Free every other raw block (no order-4 block is free then), and compact: raw blocks
    // move, owned ones never.
    let (keep, free): (Vec<_>, Vec<_>) = raw.into_iter().partition(|p| p.0 / 2 % 2 == 0);
    for pfn in free {
        // SAFETY: allocated above, freed once, never written.
        unsafe { cpu.free_pages(pfn, o(1)) }.unwrap();
    }
    let mut keep: Vec<Pfn> = keep;
    let mut moves = 0;
    let mut copy = |m: &Migration| {
        assert!(!pinned_at.contains(&m.from), "a pinned block moved: {m:?}");
        let Some(at) = keep.iter_mut().find(|p| **p == m.from) else {
            return false;
        };
        // SAFETY: the zone hands over both blocks for the move; the test writes neither.
        unsafe { m.copy(&memory) }.unwrap();
        *at = m.to;
        moves += 1;
        true
    };
    cpu.compact(o(4), &mut copy).unwrap();
    assert!(moves > 0, "compaction moved nothing");
    for b in &owned {
        let f = z.frame(b.pfn()).unwrap();
        assert_eq!((f.order, f.refcount), (1, 2));
    }
    let free_before = z.free_pages_total();
    drop(owned);
    assert_eq!(z.free_pages_total(), free_before + 8);
    for pfn in keep {
        // SAFETY: allocated above, where the moves took it, freed once.
        unsafe { cpu.free_pages(pfn, o(1)) }.unwrap();
    }
    assert_eq!(z.free_pages_total(), 64);
    z.check().unwrap();
    // A pinned run: every page carries two references, and the block frees them all.
    let run = cpu.alloc(AllocRequest::frames(5).movable(7)).unwrap();
    assert_eq!(run.holding(), Holding::PinnedPages(5));
    for i in 0..5 {
        let page = Pfn(run.pfn().0 + i);
        assert_eq!(
            z.frame(page).unwrap().refcount,
            2,
            "page {page:?} of a pinned run"
        );
    }
    drop(run);
    assert_eq!(z.free_pages_total(), 64);
    z.check().unwrap();
    drop(ram);
}

/// 64 frames in pageblocks of four (MAX_ORDER 4), backed by `ram` (every byte 0xA5 first)
/// and cleared through the clearer.
fn small_pageblocks() -> (Vec<Page>, FrameClearer<OffsetMap>, TestZone) {
    let mut ram: Vec<Page> = (0..64).map(|_| Page([0xA5; 4096])).collect();
    // SAFETY: frame START + i is ram[i] (the vector's buffer, which moves with it); the
    // tests read it only between zone calls.
    let memory = unsafe { OffsetMap::with_frame_at(START, ram.as_mut_ptr().cast()) }.unwrap();
    let clearer = FrameClearer::new(
        memory,
        ClearConfig::new(PageSize::Size4KiB, PreemptModel::None),
    )
    .unwrap();
    let z = common::zone(ZoneConfig {
        max_order: o(4),
        pageblock_order: o(2),
        ..ZoneConfig::new(START, 64)
    })
    .unwrap();
    (ram, clearer, z)
}

/// A raw movable allocation that the call works on after taking it (a zeroed block, a run
/// split from its block) is pinned only meanwhile: it comes back with one reference per
/// page, movable, and every page of a run under the run's key.
#[test]
fn a_raw_movable_allocation_comes_back_unpinned() {
    let (ram, clearer, z) = small_pageblocks();
    let cpu = z.cpu(0).unwrap();
    let block = cpu
        .alloc_raw(AllocRequest::order(o(2)).movable(9).zeroed_with(&clearer))
        .unwrap();
    let run = cpu
        .alloc_raw(AllocRequest::frames(5).movable(9).zeroed_with(&clearer))
        .unwrap();
    let plain_run = cpu.alloc_raw(AllocRequest::frames(3).movable(9)).unwrap();
    let info = z.frame(block).unwrap();
    assert_eq!((info.order, info.refcount), (2, 1));
    for (at, n) in [(run, 5), (plain_run, 3)] {
        for p in at.0..at.0 + n {
            let info = z.frame(Pfn(p)).unwrap();
            assert_eq!((info.order, info.refcount), (0, 1), "page {p:#x}");
            assert_eq!(info.migratetype, Some(MigrateType::Movable));
        }
    }
    // Every page of them moves under key 9, and only those are asked about.
    let mut keys = Vec::new();
    let mut note = |m: &Migration| {
        keys.push(m.key);
        false
    };
    cpu.compact_some(64, &mut note);
    assert!(!keys.is_empty() && keys.iter().all(|&k| k == 9), "{keys:?}");
    // SAFETY: allocated above, freed once, never used.
    unsafe {
        cpu.free_pages(block, o(2)).unwrap();
        cpu.free_contig_range(run, 5).unwrap();
        cpu.free_contig_range(plain_run, 3).unwrap();
    }
    assert_eq!(z.free_pages_total(), 64);
    z.check().unwrap();
    drop(ram);
}

/// A huge-page fault gets a zeroed block of the pageblock order while the zone has one
/// (`thp_fault_alloc`), else the zeroed frame it is in (`thp_fault_fallback`), counted in
/// `/proc/vmstat`; a huge block splits into frames freed one by one (StarryOS's
/// `split_pages` of a huge page unmapped in part); a fault outside a block changes nothing.
#[test]
fn a_huge_page_fault_falls_back_to_a_page_and_is_counted() {
    use buddy_sim::FaultFolio;
    use buddy_sim::vmstat::VmStat;
    // Huge pages of four frames.
    let (ram, clearer, z) = small_pageblocks();
    let cpu = z.cpu(0).unwrap().with_clearer(&clearer);
    let before = Before::of(&z);
    assert!(matches!(
        cpu.alloc_huge_fault(4 * 4096, MigrateType::Movable),
        Err(AllocError::FaultOutsideBlock { .. })
    ));
    before.assert_unchanged(&z);
    let reads_zero = |ram: &[Page], pfn: Pfn, frames: u64| {
        (pfn.0..pfn.0 + frames).all(|p| all_bytes_are(&ram[(p - START.0) as usize].0, 0))
    };
    // Take every huge page, then one more fault: a frame.
    let mut huge = Vec::new();
    for _ in 0..16 {
        match cpu
            .alloc_huge_fault(4096 + 5, MigrateType::Movable)
            .unwrap()
        {
            FaultFolio::Huge(pfn) => huge.push(pfn),
            FaultFolio::Page(pfn) => panic!("a frame at {pfn:?} while huge pages were free"),
        }
    }
    // Free one frame of one huge page (split first): no huge page is free, three frames are.
    let split = huge.pop().unwrap();
    z.split_page(split, o(2)).unwrap();
    // SAFETY: the frame is this test's, freed once, unused after.
    unsafe { cpu.free_pages(Pfn(split.0 + 3), o(0)) }.unwrap();
    let fallback = cpu
        .alloc_huge_fault(2 * 4096, MigrateType::Movable)
        .unwrap();
    let FaultFolio::Page(page) = fallback else {
        panic!("{fallback:?} with no huge page free");
    };
    assert_eq!(fallback.faulting_frame(2 * 4096), page);
    assert_eq!(
        FaultFolio::Huge(START).faulting_frame(2 * 4096 + 1),
        Pfn(START.0 + 2)
    );
    assert_eq!(
        FaultFolio::Huge(Pfn(u64::MAX - 1)).faulting_frame(usize::MAX),
        Pfn(u64::MAX)
    );
    for &pfn in &huge {
        assert!(reads_zero(&ram, pfn, 4), "huge page {pfn:?}");
    }
    assert!(reads_zero(&ram, page, 1));
    let counters = z.counters();
    assert_eq!(
        (counters.thp_fault_alloc, counters.thp_fault_fallback),
        (16, 1)
    );
    let vmstat = format!("{}", VmStat(&z));
    assert!(vmstat.contains("thp_fault_alloc 16\n") && vmstat.contains("thp_fault_fallback 1\n"));
    let cpu = z.cpu(0).unwrap();
    // SAFETY: every block and frame is this test's, freed once, unused after.
    unsafe {
        for pfn in huge {
            cpu.free_pages(pfn, o(2)).unwrap();
        }
        for p in [page, split, Pfn(split.0 + 1), Pfn(split.0 + 2)] {
            cpu.free_pages(p, o(0)).unwrap();
        }
    }
    assert_eq!(z.free_pages_total(), 64);
    z.check().unwrap();
    drop(ram);
}

/// `alloc_frozen_page_listed` takes a page from the CPU's list alone: none from an empty
/// list (no refill: nothing changes), the page a free put there after.
#[test]
fn a_listed_frozen_page_comes_from_the_cpus_list_alone() {
    let z = zone(64);
    let cpu = z.cpu(0).unwrap();
    let before = Before::of(&z);
    assert_eq!(cpu.alloc_frozen_page_listed(), None);
    before.assert_unchanged(&z);
    let page = cpu.alloc_frozen_page().unwrap();
    // SAFETY: this test's page, freed once, unused after.
    unsafe { cpu.free_frozen_page(page) }.unwrap();
    assert_eq!(cpu.alloc_frozen_page_listed(), Some(page));
    assert!(z.frame(page).unwrap().frozen);
    // SAFETY: as above.
    unsafe { cpu.free_frozen_page(page) }.unwrap();
    z.drain_all();
    assert_eq!(z.free_pages_total(), 64);
    z.check().unwrap();
}

/// `alloc_frozen_pages_listed` takes a block from its order's list alone: none from an
/// empty list or an order without one (nothing changes), the block a free put there after.
#[test]
fn a_listed_frozen_block_comes_from_its_orders_list_alone() {
    let z = zone(4096);
    let cpu = z.cpu(0).unwrap();
    let (listed, unlisted) = (Order::new(2).unwrap(), Order::new(5).unwrap());
    let before = Before::of(&z);
    assert_eq!(cpu.alloc_frozen_pages_listed(listed), None);
    assert_eq!(cpu.alloc_frozen_pages_listed(unlisted), None);
    before.assert_unchanged(&z);
    for order in [listed, unlisted] {
        let block = cpu.alloc_frozen_pages(order).unwrap();
        // SAFETY: this test's block, freed once, unused after.
        unsafe { cpu.free_frozen_pages(block, order) }.unwrap();
        let again = cpu.alloc_frozen_pages_listed(order);
        // An order with a list finds the block there; one without, nothing (it went back
        // to the buddy).
        assert_eq!(again, (order == listed).then_some(block));
        if let Some(block) = again {
            assert!(z.frame(block).unwrap().frozen);
            // SAFETY: as above.
            unsafe { cpu.free_frozen_pages(block, order) }.unwrap();
        }
    }
    z.drain_all();
    assert_eq!(z.free_pages_total(), 4096);
    z.check().unwrap();
}

/// `alloc_frozen_aligned_listed` takes from its order's list alone the most recently freed
/// block that starts aligned as asked, from under a more recent one that is not (which stays
/// the list's next); none, with nothing changed, when the list holds no block so aligned
/// (no refill, no split).
#[test]
fn a_listed_aligned_frozen_block_comes_from_its_orders_list_alone() {
    let z = zone(4096);
    let cpu = z.cpu(0).unwrap();
    let order = o(2);
    let before = Before::of(&z);
    assert_eq!(cpu.alloc_frozen_aligned_listed(order, o(4)), None);
    before.assert_unchanged(&z);
    // Two blocks of the list: the one aligned further freed first, the other on top of it.
    let (a, b) = (
        cpu.alloc_frozen_pages(order).unwrap(),
        cpu.alloc_frozen_pages(order).unwrap(),
    );
    let alignment = |p: Pfn| o(p.0.trailing_zeros().min(20) as u8);
    let (more, less) = if alignment(a) > alignment(b) {
        (a, b)
    } else {
        (b, a)
    };
    assert!(alignment(more) > alignment(less) && alignment(less) >= order);
    for block in [more, less] {
        // SAFETY: this test's blocks, each freed once, unused after.
        unsafe { cpu.free_frozen_pages(block, order) }.unwrap();
    }
    // Aligned as the first freed: it, from under the other, which stays next.
    assert_eq!(
        cpu.alloc_frozen_aligned_listed(order, alignment(more)),
        Some(more)
    );
    assert!(z.frame(more).unwrap().frozen);
    assert_eq!(cpu.alloc_frozen_pages_listed(order), Some(less));
    // Aligned as both: the most recent, `more` again once it is freed last.
    for block in [less, more] {
        // SAFETY: as above.
        unsafe { cpu.free_frozen_pages(block, order) }.unwrap();
    }
    assert_eq!(
        cpu.alloc_frozen_aligned_listed(order, alignment(less)),
        Some(more)
    );
    // SAFETY: as above.
    unsafe { cpu.free_frozen_pages(more, order) }.unwrap();
    // Aligned to 2^20 frames, which no frame of this zone (0x100..0x1100) is: none.
    let before = Before::of(&z);
    assert_eq!(cpu.alloc_frozen_aligned_listed(order, o(20)), None);
    before.assert_unchanged(&z);
    z.drain_all();
    assert_eq!(z.free_pages_total(), 4096);
    z.check().unwrap();
}

/// `free_frozen_pages_listed` puts a frozen block on its order's list when that push is the
/// whole free, and changes nothing otherwise (each refused block is then freed by
/// `free_frozen_pages`, as an embedder's fast path leaves it): a block of another order, a
/// page with a reference count, a page already free, a frame out of the zone, a free that
/// would take the lists past their high mark, an order without a list, and any free while
/// the zone debugs.
#[test]
fn a_listed_frozen_free_is_a_push_onto_the_array_alone() {
    use buddy_sim::FailPageAlloc;
    let cfg = ZoneConfig {
        max_order: o(6),
        pageblock_order: o(4),
        ..ZoneConfig::new(START, 4096).with_cpus(2).with_pcp(16, 4)
    };
    let z = common::zone(cfg).unwrap();
    let cpu = z.cpu(0).unwrap();
    let refused = |pfn: Pfn, order: Order| {
        let before = Before::of(&z);
        // SAFETY: the test's own blocks (or none at all), used by nobody; a refused free
        // leaves the block the caller's.
        assert!(!unsafe { cpu.free_frozen_pages_listed(pfn, order) });
        before.assert_unchanged(&z);
    };
    let page = cpu.alloc_frozen_page().unwrap();
    refused(page, o(1));
    refused(Pfn(START.0 + 4096), Order::ZERO);
    refused(Pfn(START.0 - 1), Order::ZERO);
    // SAFETY: this test's page, freed once, unused after.
    assert!(unsafe { cpu.free_frozen_pages_listed(page, Order::ZERO) });
    refused(page, Order::ZERO);
    assert_eq!(cpu.alloc_frozen_page_listed(), Some(page));
    let counted = cpu.alloc(AllocRequest::page()).unwrap();
    refused(counted.pfn(), Order::ZERO);
    drop(counted);
    // Pages freed until the lists hold their high mark: the next free would drain.
    let pages: Vec<Pfn> = (0..20).map(|_| cpu.alloc_frozen_page().unwrap()).collect();
    let mut drains = 0;
    for &p in &pages {
        if z.pcp_pages(0).unwrap() < 16 {
            // SAFETY: as above.
            assert!(unsafe { cpu.free_frozen_pages_listed(p, Order::ZERO) });
        } else {
            refused(p, Order::ZERO);
            // SAFETY: as above.
            unsafe { cpu.free_frozen_page(p) }.unwrap();
            drains += 1;
        }
    }
    assert!(drains > 0, "no free reached the high mark");
    // SAFETY: as above.
    unsafe { cpu.free_frozen_page(page) }.unwrap();
    let unlisted = o(5);
    let block = cpu.alloc_frozen_pages(unlisted).unwrap();
    refused(block, unlisted);
    // SAFETY: as above.
    unsafe { cpu.free_frozen_pages(block, unlisted) }.unwrap();
    let page = cpu.alloc_frozen_page().unwrap();
    z.set_fail_page_alloc(Some(FailPageAlloc::new(1)));
    refused(page, Order::ZERO);
    z.set_fail_page_alloc(None);
    // SAFETY: as above.
    assert!(unsafe { cpu.free_frozen_pages_listed(page, Order::ZERO) });
    z.drain_all();
    assert_eq!(z.free_pages_total(), 4096);
    z.check().unwrap();
}

#[test]
fn zeroed_runs_read_zero_in_every_byte() {
    let mut ram: Vec<Page> = (0..64).map(|_| Page([0xA5; 4096])).collect();
    let offset = (ram.as_mut_ptr() as usize).wrapping_sub(START.0 as usize * 4096);
    // SAFETY: frame START + i is ram[i]; the test reads it only between zone calls.
    let memory = unsafe { OffsetMap::new(offset) };
    let clearer = FrameClearer::new(
        memory,
        ClearConfig::new(PageSize::Size4KiB, PreemptModel::None),
    )
    .unwrap();
    let z = zone(64);
    let cpu = z.cpu(0).unwrap();
    let mut refuse = |_: &Migration| false;
    let mut resched = NoResched;
    let run = cpu
        .alloc_raw(
            AllocRequest::frames(7)
                .zeroed_with(&clearer)
                .fault_at(5 * 4096 + 17),
        )
        .unwrap();
    // The covering block's eighth frame went straight back: a run is cleared, not its
    // block.
    assert!(
        all_bytes_are(&ram[(run.0 + 7 - START.0) as usize].0, 0xA5),
        "the frame past the run was cleared"
    );
    let contig = cpu
        .alloc_raw(
            AllocRequest::frames(9)
                .contiguous(&mut refuse)
                .zeroed_with(&clearer)
                .resched(&mut resched),
        )
        .unwrap();
    for (pfn, n) in [(run, 7), (contig, 9)] {
        for p in pfn.0..pfn.0 + n {
            let page = &ram[(p - START.0) as usize].0;
            assert!(all_bytes_are(page, 0), "frame {p:#x} not zero");
        }
    }
    assert_eq!(
        cpu.alloc_raw(
            AllocRequest::frames(5)
                .zeroed_with(&clearer)
                .fault_at(6 * 4096)
        ),
        Err(AllocError::FaultOutsideBlock {
            order: o(3),
            offset: 6 * 4096
        }),
        "a fault past the run, inside its covering block"
    );
    assert!(
        cpu.alloc_raw(
            AllocRequest::frames(4)
                .zeroed_with(&clearer)
                .fault_at(4 * 4096)
        )
        .is_err(),
        "a fault past the run"
    );
    drop(ram);
}

#[test]
fn a_handle_with_a_clearer_zeroes_what_names_none() {
    let mut ram: Vec<Page> = (0..64).map(|_| Page([0xA5; 4096])).collect();
    let offset = (ram.as_mut_ptr() as usize).wrapping_sub(START.0 as usize * 4096);
    // SAFETY: frame START + i is ram[i]; the test reads it only between zone calls.
    let memory = unsafe { OffsetMap::new(offset) };
    let clearer = FrameClearer::detected(memory);
    let z = zone(64);
    let cpu = z.cpu(1).unwrap().with_clearer(&clearer);
    let mut refuse = |_: &Migration| false;
    let page = cpu.alloc(AllocRequest::page().zeroed()).unwrap();
    let huge = cpu
        .alloc(AllocRequest::order(o(4)).zeroed().fault_at(4096 + 8))
        .unwrap();
    let run = cpu.alloc(AllocRequest::frames(5).zeroed()).unwrap();
    let contig = cpu
        .alloc(AllocRequest::frames(3).zeroed().contiguous(&mut refuse))
        .unwrap();
    for block in [&page, &huge, &run, &contig] {
        let frames = block.frames();
        for p in frames.start.0..frames.start.0 + frames.pages {
            let frame = &ram[(p - START.0) as usize].0;
            assert!(all_bytes_are(frame, 0), "frame {p:#x} not zero");
        }
    }
    // The handle is still CPU 1's: what it frees lands on CPU 1's lists.
    assert_eq!(cpu.id(), 1);
    drop((page, huge, run, contig));
    assert_eq!(z.free_pages_total(), 64);
    z.check().unwrap();
    drop(ram);
}

#[test]
fn a_static_zone_is_one_line_and_refuses_a_bad_configuration_without_panicking() {
    static ZONE: StaticZone<64, 2> =
        StaticZone::new_static(ZoneConfig::new(Pfn(0x40), 64).with_cpus(2));
    static MAPPED: StaticZone<64, 1> = StaticZone::new_static_empty(ZoneConfig::new(Pfn(0x40), 64));
    static WRONG: StaticZone<64, 1> = StaticZone::new_static(ZoneConfig::new(Pfn(0x40), 65));
    // The one-value form spans exactly the zone's arrays.
    static AT: StaticZone<64, 2> = StaticZone::new_static_at(Pfn(0x40));
    assert_eq!(AT.config(), &ZoneConfig::new(Pfn(0x40), 64).with_cpus(2));
    assert_eq!(AT.free_pages_total(), 64);
    assert!(AT.cpu(1).is_ok());
    assert_eq!((ZONE.present_pages(), ZONE.deferred_pages()), (64, 64));
    let page = ZONE.cpu(1).unwrap().alloc(AllocRequest::page()).unwrap();
    assert_eq!(ZONE.free_pages_total(), 63);
    drop(page);
    assert_eq!(ZONE.free_pages_total(), 64);
    ZONE.check().unwrap();
    assert_eq!(MAPPED.present_pages(), 0);
    MAPPED.add_memory(Pfn(0x50), 16).unwrap();
    let run = MAPPED
        .cpu(0)
        .unwrap()
        .alloc(AllocRequest::frames(16))
        .unwrap();
    assert_eq!(run.pfn(), Pfn(0x50));
    drop(run);
    MAPPED.check().unwrap();
    assert_eq!(
        WRONG.cpu(0).unwrap().alloc_raw(AllocRequest::page()),
        Err(AllocError::Config(ConfigError::FrameMetadata {
            need: 65,
            got: 64
        }))
    );
    assert_eq!(
        WRONG.add_memory(Pfn(0x40), 64),
        Err(MapError::Config(ConfigError::FrameMetadata {
            need: 65,
            got: 64
        }))
    );
    assert_eq!(WRONG.free_pages_total(), 0);
    assert_eq!(WRONG.frame(Pfn(0x40)), Err(MapError::OutOfZone(Pfn(0x40))));
    // The calls that walk the zone's frames find none to walk.
    let mut refuse = |_: &Migration| false;
    let wrong = WRONG.cpu(0).unwrap();
    assert_eq!(wrong.compact_some(64, &mut refuse).moved_pages, 0);
    assert!(!wrong.compact(Order::ZERO, &mut refuse).unwrap().success);
    assert_eq!(WRONG.init_deferred(u64::MAX), 0);
    assert_eq!(WRONG.free_blocks().count(), 0);
    WRONG.check().unwrap();
    // Per-cpu lists asked for past the orders they have slots for: refused, and no order or
    // kind reaches past them.
    static DEEP: StaticZone<64, 1> = StaticZone::new_static(
        ZoneConfig::new(Pfn(0x40), 64).with_pcp_max_order(Order::MAX_SUPPORTED),
    );
    let deep = DEEP.cpu(0).unwrap();
    for order in 0..=Order::MAX_SUPPORTED.get() {
        let order = o(order);
        for mt in MigrateType::ALL {
            let r = deep.alloc_raw(AllocRequest::order(order).kind(mt));
            assert!(
                matches!(
                    r,
                    Err(AllocError::Config(ConfigError::PcpOrderTooLarge(_))
                        | AllocError::OrderTooLarge { .. })
                ),
                "{r:?}"
            );
        }
        let r = deep.alloc_frozen_pages(order);
        assert!(
            matches!(
                r,
                Err(AllocError::Config(ConfigError::PcpOrderTooLarge(_))
                    | AllocError::OrderTooLarge { .. })
            ),
            "{r:?}"
        );
        // SAFETY: no memory behind the zone; nothing was allocated to free.
        assert!(unsafe { deep.free_frozen_pages(Pfn(0x40), order) }.is_err());
    }
    DEEP.check().unwrap();
}

#[test]
fn a_local_cpu_handle_serves_the_same_requests() {
    let z = zone(128);
    // SAFETY: one thread, and nothing else reaches CPU 0's lists while the handle lives.
    let local = unsafe { z.local_cpu(0) }.unwrap();
    let a = local.alloc(AllocRequest::order(o(2))).unwrap();
    let b = local.alloc(AllocRequest::frames(5)).unwrap();
    assert_eq!(z.free_pages_total(), 128 - 4 - 5);
    drop((a, b));
    assert_eq!(z.free_pages_total(), 128);
    local.drain();
    assert_eq!(local.pcp_pages(), 0);
    z.check().unwrap();
}

/// Failures that must change nothing.
mod unchanged_on_failure {
    use super::*;
    use buddy_sim::mm_types::PhysAddr;
    use buddy_sim::{AddedMemory, NoSuchCpu, RequestConflict};
    use common::Nowhere;

    #[test]
    fn conflicting_options_are_refused_and_change_nothing() {
        let z = zone(256);
        let cpu = z.cpu(0).unwrap();
        let mut refuse = |_: &Migration| false;
        let clearer = FrameClearer::new(
            Nowhere,
            ClearConfig::new(PageSize::Size4KiB, PreemptModel::None),
        )
        .unwrap();
        let before = Before::of(&z);
        let conflict = |r: Result<Pfn, AllocError>| match r {
            Err(AllocError::Conflict(c)) => c,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            conflict(cpu.alloc_raw(AllocRequest::page().frozen())),
            RequestConflict::FrozenWithoutContiguous
        );
        assert_eq!(
            conflict(cpu.alloc_raw(AllocRequest::frames(8).movable(3).contiguous(&mut refuse))),
            RequestConflict::KindWithContiguous
        );
        assert_eq!(
            conflict(cpu.alloc_raw(AllocRequest::order(o(1)).aligned(o(3)))),
            RequestConflict::AlignedBlock
        );
        assert_eq!(
            conflict(cpu.alloc_raw(AllocRequest::page().fault_at(0))),
            RequestConflict::FaultWithoutZeroed
        );
        assert_eq!(z.cpu(2).map(|_| ()), Err(NoSuchCpu(2)));
        before.assert_unchanged(&z);
        // A zeroed block the clearer cannot reach: taken, then freed again.
        assert!(matches!(
            cpu.alloc_raw(AllocRequest::order(o(2)).zeroed_with(&clearer)),
            Err(AllocError::NotAddressable(_))
        ));
        assert_eq!(z.free_pages_total(), 256);
        z.check().unwrap();
    }

    #[test]
    fn a_byte_range_adds_the_whole_frames_inside_it() {
        let z = common::empty_zone(ZoneConfig::new(START, 64)).unwrap();
        let base = START.0 * 4096;
        let added = z
            .add_memory_bytes(PhysAddr(base + 100)..PhysAddr(base + 10 * 4096 + 5))
            .unwrap();
        assert_eq!(
            added,
            AddedMemory {
                frames: FrameRange::new(Pfn(START.0 + 1), 9),
                dropped_head: 4096 - 100,
                dropped_tail: 5,
            }
        );
        assert_eq!(z.present_pages(), 9);
        // Less than a frame: nothing added, all of it dropped.
        let tiny = z
            .add_memory_bytes(PhysAddr(base + 20 * 4096 + 1)..PhysAddr(base + 21 * 4096 - 1))
            .unwrap();
        assert_eq!(tiny.frames.pages, 0);
        assert_eq!(tiny.dropped_head + tiny.dropped_tail, 4094);
        // The top of the address space, and an inverted range: nothing, no panic.
        let top = z
            .add_memory_bytes(PhysAddr(u64::MAX - 10)..PhysAddr(u64::MAX))
            .unwrap();
        assert_eq!(top.frames.pages, 0);
        let inverted = z
            .add_memory_bytes(PhysAddr(base + 8192)..PhysAddr(base))
            .unwrap();
        assert_eq!(inverted.frames.pages, 0);
        // Frames already added: the error of add_memory, nothing changed.
        let before = Before::of(&z);
        assert_eq!(
            z.add_memory_bytes(PhysAddr(base)..PhysAddr(base + 3 * 4096)),
            Err(MapError::AlreadyAdded(Pfn(START.0 + 1)))
        );
        before.assert_unchanged(&z);
        z.check().unwrap();
    }
}

/// A movable block allocated without a key, at a frame whose last block had one (or whose
/// free-list links are left in the head's key fields), is its own block: `into_raw` hands
/// back the frame it was allocated at, never another keyless movable block's. (Found by
/// the page-poisoning model: the key was left unwritten, the block searched for by key 0,
/// and another CPU's block returned: two owners of one block.)
#[test]
fn a_keyless_movable_block_is_never_taken_for_another() {
    use buddy_sim::{FrameClearer, MigrateType};
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    const START: Pfn = Pfn(0x9_0000);
    const FRAMES: usize = 1024;
    let mut ram: Vec<Page> = (0..FRAMES).map(|_| Page([0; 4096])).collect();
    // SAFETY: frame `START + i` is `ram[i]`; only the zone and the blocks' owners reach it.
    let clearer = unsafe { FrameClearer::direct_map(START, ram.as_mut_ptr().cast()) }.unwrap();
    let z = common::zone(ZoneConfig::new(START, FRAMES as u64).with_cpus(2)).unwrap();
    let mut seed = 23u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let steps = if cfg!(miri) { 150 } else { 3000 };
    // Each block's frame, order, and whether a `Block` pinned it (a second reference).
    let mut live: Vec<(Pfn, Order, bool)> = Vec::new();
    for step in 0..steps {
        let cpu = (next() % 2) as usize;
        if next() % 2 == 0 || live.is_empty() {
            let order = Order::new((next() % 4) as u8).unwrap();
            let kind = MigrateType::ALL[(next() % 2) as usize];
            let c = z.cpu(cpu).unwrap().with_clearer(&clearer);
            let got = if next() % 4 == 0 {
                c.alloc(AllocRequest::order(order).kind(kind).zeroed())
                    .map(|b| (b.holding() != Holding::Block(order), b.into_raw()))
            } else {
                c.alloc_raw(AllocRequest::order(order).movable(step + 1).kind(kind))
                    .map(|pfn| (false, pfn))
            };
            if let Ok((pinned, pfn)) = got {
                for &(p, o, _) in &live {
                    assert!(
                        pfn.0 + order.pages() <= p.0 || p.0 + o.pages() <= pfn.0,
                        "step {step}: {pfn:?} handed out while {p:?} is held"
                    );
                }
                live.push((pfn, order, pinned));
            }
        } else {
            let (pfn, order, pinned) = live.swap_remove((next() % live.len() as u64) as usize);
            if pinned {
                // SAFETY: the pin of a block allocated above, dropped once (nothing
                // compacts here: the block stays where it is).
                unsafe { z.cpu(cpu).unwrap().put_page(pfn) }.unwrap();
            }
            // SAFETY: allocated above, freed once; nothing wrote it.
            unsafe { z.free_pages(cpu, pfn, order) }.unwrap();
        }
    }
    z.check().unwrap();
}
