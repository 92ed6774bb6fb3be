//! `decompose` against the brute force, and the batched `free_contig_range` against the
//! per-page path over arbitrary operation sequences, with `check()` after every step.
//!
//! The frees are `unsafe` (a free of what the caller does not hold could make a zone write
//! memory in use): these zones have no memory behind them, no `FrameClearer` or migration
//! ever writes a frame, so a wrong free here can only be the metadata error being tested.
// loom atomics work only inside loom::model: these run on the real ones.
#![cfg(not(loom))]

mod common;

use buddy_sim::mm_types::FrameRange;
use buddy_sim::reference::brute_force_cover;
use buddy_sim::testing::{Lockstep, Op};
use buddy_sim::{
    Access, AllocRequest, Cpu, DefaultRawMutex, Frame, MigrateType, Order, PerCpu, Pfn, VmArea,
    Zone, ZoneConfig, decompose,
};
use buddy_sim::{AllocError, ContigError, FailPageAlloc, FreeError, MapError};
use proptest::prelude::*;

const MAX_ZONE: u64 = if cfg!(miri) { 128 } else { 2048 };
const MAX_OPS: usize = if cfg!(miri) { 6 } else { 80 };

type VecZone = Zone<Vec<Frame>, Vec<PerCpu>>;

fn metadata(cfg: ZoneConfig) -> (Vec<Frame>, Vec<PerCpu>) {
    (
        (0..cfg.nr_pages).map(|_| Frame::new()).collect(),
        (0..cfg.cpus).map(|_| PerCpu::new()).collect(),
    )
}

fn zone(cfg: ZoneConfig) -> VecZone {
    let (frames, pcps) = metadata(cfg);
    Zone::new(cfg, frames, pcps).unwrap()
}

/// A zone over `cfg`'s span whose usable memory is `ranges` (offsets from the start): the
/// rest are holes.
fn zone_with_holes(cfg: ZoneConfig, ranges: &[(u64, u64)]) -> VecZone {
    let (frames, pcps) = metadata(cfg);
    let z = Zone::new_empty(cfg, frames, pcps).unwrap();
    for &(off, len) in ranges {
        z.add_memory(Pfn(cfg.start.0 + off), len).unwrap();
    }
    z
}

/// Where a zone starts: low in the pfn space, or so that it ends at most a few thousand
/// frames below its top (every computation of a frame number near `u64::MAX` checked).
fn zone_start(nr: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..5000,
        (0u64..5000).prop_map(move |gap| u64::MAX - nr - gap)
    ]
}

fn zone_config() -> impl Strategy<Value = ZoneConfig> {
    (
        16..=MAX_ZONE,
        0u8..=10,
        0u32..=12,
        1usize..=3,
        0u64..600,
        1u64..64,
        3u8..=8,
        prop_oneof![Just(0u64), 0u64..2000],
    )
        .prop_flat_map(
            |(nr, max, section_log, cpus, high, batch, pcp_max, high_max)| {
                // Half the zones defer most of each added range (init_deferred, the slow path).
                let eager = prop_oneof![Just(u64::MAX), 1u64..=nr];
                // Linux's defrag mode (with or without the pageblock reserve), a movable-only
                // zone, any proactiveness.
                let mobility = (any::<bool>(), any::<bool>(), any::<bool>(), 0u8..=100);
                ((0..=max), eager, zone_start(nr), mobility).prop_map(
                    move |(
                        pb,
                        eager_pages,
                        start,
                        (defrag_mode, reserve, movable_only, compaction_proactiveness),
                    )| {
                        ZoneConfig {
                            defrag_mode,
                            pageblock_reserve: defrag_mode && reserve,
                            movable_only,
                            compaction_proactiveness,
                            max_order: Order::new(max).unwrap(),
                            pageblock_order: Order::new(pb).unwrap(),
                            section_pages: 1 << section_log,
                            cpus,
                            pcp_high: high,
                            // Fixed marks, or marks tuned up to a bound (below `high`: fixed).
                            pcp_high_max: high_max,
                            pcp_batch: batch,
                            // Linux's per-cpu orders, or more of them (ArceOS's drop-in).
                            pcp_max_order: Order::new(pcp_max).unwrap(),
                            eager_pages,
                            ..ZoneConfig::new(Pfn(start), nr)
                        }
                    },
                )
            },
        )
}

/// Fault injection's attributes: any probability, interval, limit, space, order and kind.
fn fail_page_alloc() -> impl Strategy<Value = FailPageAlloc> {
    (
        any::<u64>(),
        0u8..=100,
        0u64..4,
        prop::option::of(0u64..8),
        0u64..64,
        0u8..12,
        0u8..4,
    )
        .prop_map(|(seed, p, interval, times, space, min_order, kind)| {
            let attr = FailPageAlloc::new(seed)
                .probability(p)
                .interval(interval)
                .space(space)
                .min_order(Order::new(min_order).unwrap());
            let attr = match times {
                Some(t) => attr.times(t),
                None => attr,
            };
            match kind {
                3 => attr,
                k => attr.only(MigrateType::ALL[usize::from(k)]),
            }
        })
}

fn op() -> impl Strategy<Value = Op> {
    let cpu = 0usize..4; // 3 is out of range for some zones: an error on both paths
    let slot = 0usize..64;
    prop_oneof![
        3 => (cpu.clone(), 0u8..12).prop_map(|(cpu, order)| Op::Alloc { cpu, order }),
        3 => slot.clone().prop_map(|slot| Op::Split { slot }),
        1 => (slot.clone(), any::<u64>()).prop_map(|(slot, page)| Op::Get { slot, page }),
        1 => (cpu.clone(), slot.clone(), any::<u64>()).prop_map(|(cpu, slot, page)| Op::Put { cpu, slot, page }),
        1 => (slot.clone(), any::<u64>()).prop_map(|(slot, page)| Op::Poison { slot, page }),
        4 => (cpu.clone(), slot.clone(), any::<u64>(), any::<u64>()).prop_map(|(cpu, slot, offset, len)| Op::FreeRun { cpu, slot, offset, len }),
        1 => (cpu.clone(), 0u64..6000, 0u64..300).prop_map(|(cpu, offset, len)| Op::FreeRaw { cpu, offset, len }),
        1 => (cpu.clone(), slot.clone()).prop_map(|(cpu, slot)| Op::FreePages { cpu, slot }),
        2 => (cpu.clone(), 0u8..12).prop_map(|(cpu, order)| Op::AllocFrozen { cpu, order }),
        1 => (cpu.clone(), slot.clone()).prop_map(|(cpu, slot)| Op::FreeFrozen { cpu, slot }),
        3 => (cpu.clone(), slot.clone()).prop_map(|(cpu, slot)| Op::SplitFrozen { cpu, slot }),
        1 => cpu.clone().prop_map(|cpu| Op::DrainCpu { cpu }),
        1 => cpu.clone().prop_map(|cpu| Op::DecayPcpHigh { cpu }),
        1 => Just(Op::DrainAll),
        1 => (0u64..3000, 0u64..200, any::<bool>())
            .prop_map(|(offset, len, zeroed)| Op::AddMemory { offset, len, zeroed }),
        1 => (0u64..600).prop_map(|budget| Op::InitDeferred { budget }),
        2 => (cpu.clone(), 0u8..12, 0u8..3).prop_map(|(cpu, order, mt)| Op::AllocTyped { cpu, order, mt }),
        1 => (cpu.clone(), 0u64..6000, 0u64..700, any::<bool>())
            .prop_map(|(cpu, offset, len, frozen)| Op::AllocContig { cpu, offset, len, frozen }),
        1 => (cpu.clone(), 0u64..200, 0u8..12, any::<bool>())
            .prop_map(|(cpu, len, align, frozen)| Op::AllocContigPages { cpu, len, align, frozen }),
        1 => (cpu.clone(), 0u64..6000, 0u64..300)
            .prop_map(|(cpu, offset, len)| Op::Offline { cpu, offset, len }),
        1 => (cpu.clone(), 0u8..12, 0u8..3).prop_map(|(cpu, order, mt)| Op::AllocHooked { cpu, order, mt }),
        1 => (cpu.clone(), 0u64..600).prop_map(|(cpu, budget)| Op::CompactWork { cpu, budget }),
        1 => prop::option::of(fail_page_alloc()).prop_map(Op::FailPageAlloc),
        1 => (0u64..600, any::<bool>()).prop_map(|(budget, accept)| Op::Report { budget, accept }),
        1 => (cpu.clone(), 0u64..MAX_ZONE, 0u64..3)
            .prop_map(|(cpu, offset, len)| Op::ReserveCma { cpu, offset, len }),
        2 => (cpu.clone(), 0usize..4, 0u64..64, 0u8..8)
            .prop_map(|(cpu, area, len, align)| Op::AllocCma { cpu, area, len, align }),
        2 => (cpu, slot, any::<u64>(), any::<u64>())
            .prop_map(|(cpu, slot, offset, len)| Op::FreeContig { cpu, slot, offset, len }),
    ]
}

/// Up to three holes in a zone of `nr` frames; the usable ranges are the rest.
fn usable_ranges(nr: u64, holes: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut hole = vec![false; nr as usize];
    for &(off, len) in holes {
        for i in off.min(nr)..(off + len).min(nr) {
            hole[i as usize] = true;
        }
    }
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < nr {
        let start = i;
        while i < nr && !hole[i as usize] {
            i += 1;
        }
        if i > start {
            ranges.push((start, i - start));
        }
        i += 1;
    }
    ranges
}

proptest! {
    #![proptest_config(common::proptest_config(3))]

    #[test]
    fn decompose_is_the_minimal_aligned_cover(pfn in 0u64..1 << 40, nr in 0u64..5000, max in 0u8..=20) {
        let max = Order::new(max).unwrap();
        let blocks: Vec<_> = decompose(Pfn(pfn), nr, max).unwrap().collect();
        let mut brute = Vec::new();
        brute_force_cover(Pfn(pfn), nr, max, |p, o| brute.push((p, o)));
        prop_assert_eq!(&blocks, &brute);
        let mut next = pfn;
        for (i, &(p, o)) in blocks.iter().enumerate() {
            prop_assert_eq!(p.0, next, "not contiguous");
            prop_assert!(o.aligns(p) && o <= max, "misaligned or too large");
            // Minimal: no block merges with the next one into an aligned block <= max.
            if let Some(&(q, o2)) = blocks.get(i + 1) {
                prop_assert!(!(o == o2 && o < max && q == o.buddy_of(p) && Order::new(o.get() + 1).unwrap().aligns(p)));
            }
            next += o.pages();
        }
        prop_assert_eq!(next, pfn + nr, "not an exact cover");
    }

    #[test]
    fn decompose_rejects_overflow(pfn in any::<u64>(), nr in any::<u64>()) {
        let r = decompose(Pfn(pfn), nr, Order::new(10).unwrap());
        prop_assert_eq!(r.is_err(), pfn.checked_add(nr).is_none());
    }

    #[test]
    fn batched_and_per_page_free_agree(
        cfg in zone_config(),
        holes in prop::collection::vec((0u64..MAX_ZONE, 1u64..64), 0..3),
        ops in prop::collection::vec(op(), 1..MAX_OPS),
    ) {
        let usable = usable_ranges(cfg.nr_pages, &holes);
        // SAFETY: the harness's zones are its own and have no memory behind them.
        let mut model = unsafe { Lockstep::new(zone_with_holes(cfg, &usable), zone_with_holes(cfg, &usable)) };
        for op in ops {
            model.apply(op).map_err(|d| TestCaseError::fail(format!("{op:?}: {d:?}")))?;
        }
        model.finish().map_err(|d| TestCaseError::fail(format!("finish: {d:?}")))?;
    }
}

proptest! {
    // 64 cases unless PROPTEST_CASES says otherwise (and 2 under Miri): each case is an
    // operation per frame of its zone before its random ones, and the QEMU stage runs it
    // unoptimized under emulation.
    #![proptest_config(common::proptest_config_of(64, 2))]

    /// Defrag mode's last resort in lockstep: a zone full of movable pages with every
    /// `every`-th of the last ones freed has its free memory only in holes of movable
    /// pageblocks, where the unmovable and reclaimable allocations that follow claim a
    /// pageblock whole and movable ones fail; the batched and per-page zones agree
    /// throughout.
    #[test]
    fn defrag_modes_last_resort_agrees_in_lockstep(
        cfg in zone_config(),
        every in 2usize..5,
        ops in prop::collection::vec(op(), 1..MAX_OPS),
    ) {
        // At most 128 frames: the fill is an operation per frame, each draining and
        // comparing both zones.
        let cfg = ZoneConfig {
            defrag_mode: true,
            movable_only: false,
            nr_pages: cfg.nr_pages.min(128),
            ..cfg
        };
        let usable = usable_ranges(cfg.nr_pages, &[]);
        // SAFETY: the harness's zones are its own and have no memory behind them.
        let mut model = unsafe { Lockstep::new(zone_with_holes(cfg, &usable), zone_with_holes(cfg, &usable)) };
        let fill = (0..cfg.nr_pages).map(|_| Op::AllocTyped { cpu: 0, order: 0, mt: 1 });
        let holes = (0..64).step_by(every).map(|slot| Op::FreePages { cpu: 0, slot });
        for op in fill.chain(holes).chain(ops) {
            model.apply(op).map_err(|d| TestCaseError::fail(format!("{op:?}: {d:?}")))?;
        }
        model.finish().map_err(|d| TestCaseError::fail(format!("finish: {d:?}")))?;
    }
}

proptest! {
    #![proptest_config(common::proptest_config(3))]

    /// `free_pages_total` is every usable frame not held by a caller, whatever sits on the
    /// per-cpu lists or is still deferred.
    #[test]
    fn free_pages_total_is_present_minus_held(
        cfg in zone_config(),
        ops in proptest::collection::vec((0usize..3, 0u8..6, any::<bool>(), 0u64..300), 1..60),
    ) {
        let z = zone(cfg);
        let mut held: Vec<(usize, Pfn, Order)> = Vec::new();
        prop_assert_eq!(z.free_pages_total(), z.present_pages());
        for (cpu, order, free, budget) in ops {
            let cpu = cpu % cfg.cpus;
            if free && !held.is_empty() {
                let (_, pfn, order) = held.swap_remove(budget as usize % held.len());
                // SAFETY: no memory behind these zones (module docs).
                unsafe { z.free_pages(cpu, pfn, order) }.unwrap();
            } else if budget % 7 == 0 {
                z.init_deferred(budget);
            } else if let Ok(pfn) = z.alloc_pages(cpu, Order::new(order).unwrap()) {
                held.push((cpu, pfn, Order::new(order).unwrap()));
            }
            let held_pages: u64 = held.iter().map(|&(_, _, o)| o.pages()).sum();
            prop_assert_eq!(z.free_pages_total(), z.present_pages() - held_pages);
        }
    }
}

proptest! {
    #![proptest_config(common::proptest_config(3))]

    /// `alloc_pages_exact` takes exactly `pages` frames (aligned, each its own order-0
    /// allocation) and `free_pages_exact` gives every one back; beyond MAX_ORDER or for zero
    /// pages it refuses and changes nothing.
    #[test]
    fn exact_allocations_take_exactly_their_pages(
        cfg in zone_config(),
        requests in proptest::collection::vec((0usize..3, 0u64..700), 1..12),
    ) {
        let z = zone(cfg);
        let mut held = Vec::new();
        for (cpu, pages) in requests {
            let cpu = cpu % cfg.cpus;
            let before = z.free_pages_total();
            match z.cpu(cpu).unwrap().alloc_raw(AllocRequest::frames(pages)) {
                Ok(pfn) => {
                    let order = Order::covering(pages).unwrap();
                    prop_assert!(order.aligns(pfn));
                    prop_assert_eq!(z.free_pages_total(), before - pages);
                    for p in 0..pages {
                        let f = z.frame(Pfn(pfn.0 + p)).unwrap();
                        prop_assert_eq!((f.order, f.refcount), (0, 1));
                    }
                    held.push((cpu, pfn, pages));
                }
                Err(e) => {
                    // A run from the buddy is unmovable: a movable-only zone refuses it.
                    let refused = pages == 0 && e == AllocError::ZeroPages
                        || matches!(e, AllocError::OrderTooLarge { .. } | AllocError::OutOfMemory(_))
                        || cfg.movable_only && e == AllocError::MovableOnly(MigrateType::Unmovable);
                    prop_assert!(refused, "{:?}", e);
                    prop_assert_eq!(z.free_pages_total(), before);
                }
            }
            z.check().unwrap();
        }
        for (cpu, pfn, pages) in held {
            // SAFETY: no memory behind these zones (module docs).
            unsafe { z.free_contig_range(cpu, pfn, pages) }.unwrap();
        }
        prop_assert_eq!(z.free_pages_total(), z.present_pages());
        z.check().unwrap();
    }
}

/// The example of the patch that batches `__free_contig_range`: pfn 0x1003, 13 pages ->
/// orders 0, 2, 3.
#[test]
fn thirteen_pages_from_pfn_0x1003_free_as_orders_0_2_3() {
    let d: Vec<_> = decompose(Pfn(0x1003), 13, Order::new(10).unwrap())
        .unwrap()
        .map(|(p, o)| (p.0, o.get()))
        .collect();
    assert_eq!(d, [(0x1003, 0), (0x1004, 2), (0x1008, 3)]);
    let d: Vec<_> = decompose(Pfn(0), 5000, Order::new(10).unwrap())
        .unwrap()
        .map(|(_, o)| o.get())
        .collect();
    assert_eq!(d, [10, 10, 10, 10, 9, 8, 7, 3], "pfn 0 aligns to MAX_ORDER");
}

fn small() -> VecZone {
    zone(ZoneConfig {
        cpus: 2,
        section_pages: 64,
        ..ZoneConfig::new(Pfn(0x100), 1024)
    })
}

/// A block of `order` from CPU 0 of `z`, split into pages (each with a reference of its own).
fn split_block(z: &VecZone, order: u8) -> Pfn {
    let order = Order::new(order).unwrap();
    let block = z.alloc_pages(0, order).unwrap();
    z.split_page(block, order).unwrap();
    block
}

#[test]
fn errors_name_the_problem_and_leave_the_zone_intact() {
    let z = small();
    let o9 = Order::new(9).unwrap();
    let block = z.alloc_pages(0, o9).unwrap();
    let before: Vec<_> = z.frames_slice().iter().map(Frame::info).collect();
    // An unsplit high-order block in free_contig_range: the kernel warns and frees nothing.
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_contig_range(0, block, 512) },
        Err(FreeError::CompoundPage(block))
    );
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_contig_range(0, Pfn(block.0 + 7), 3) },
        Err(FreeError::CompoundPage(Pfn(block.0 + 7)))
    );
    // Outside the zone, overflow, bad CPU, order too large.
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_contig_range(0, Pfn(0x100 + 1020), 10) },
        Err(FreeError::OutOfZone(Pfn(0x100 + 1024)))
    );
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_contig_range(0, Pfn(u64::MAX), 2) },
        Err(FreeError::Overflow)
    );
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_contig_range(2, block, 1) },
        Err(FreeError::BadCpu(2))
    );
    assert_eq!(
        z.alloc_pages(0, Order::new(11).unwrap()),
        Err(AllocError::OrderTooLarge { order: 11, max: 10 })
    );
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(0, block, Order::new(3).unwrap()) },
        Err(FreeError::OrderMismatch {
            pfn: block,
            given: Order::new(3).unwrap(),
            allocated: o9
        })
    );
    assert_eq!(
        z.frames_slice().iter().map(Frame::info).collect::<Vec<_>>(),
        before
    );
    z.check().unwrap();

    // Split, poison one page, free the run: that page is leaked, the rest is free.
    z.split_page(block, o9).unwrap();
    z.mark_hwpoison(Pfn(block.0 + 100)).unwrap();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.free_contig_range(1, block, 512) }.unwrap();
    z.check().unwrap();
    assert_eq!(z.leaked_pages(), 1);
    // Double free, and freeing the leaked page.
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_contig_range(0, block, 4) },
        Err(FreeError::DoubleFree(block))
    );
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.put_page(0, Pfn(block.0 + 100)) },
        Err(FreeError::LeakedPage(Pfn(block.0 + 100)))
    );
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(0, block, Order::ZERO) },
        Err(FreeError::DoubleFree(block))
    );
    z.check().unwrap();
    z.drain_all();
    assert_eq!(z.buddy_pages(), 1023);
}

#[test]
fn runs_do_not_coalesce_across_sections() {
    // 64-frame sections: a 128-frame run at a section boundary frees as two order-6 blocks
    // even though one order-7 block would cover it.
    let z = small();
    let block = split_block(&z, 7);
    z.reset_counters();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.free_contig_range(0, block, 128) }.unwrap();
    // Two blocks of order 6: neither is a per-cpu order, so two zone-lock acquisitions.
    assert_eq!(z.counters().zone_locks, 2);
    assert_eq!(z.counters().prepares, 128);
}

/// A run freed as blocks of per-cpu orders: each block goes onto its list, the run's
/// checks all counted (the first block carries them, the others none), and so are its frames
/// and the two pushes; the counts started with blocks already on the lists.
#[test]
fn a_run_freed_to_the_per_cpu_lists_counts_its_checks_frames_and_pushes() {
    let z = small();
    let block = split_block(&z, 4);
    let first = z.alloc_pages(0, Order::ZERO).unwrap();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.free_pages(0, first, Order::ZERO) }.unwrap();
    z.reset_counters();
    // 12 pages: an order-3 block and an order-2 block, both to CPU 0's lists.
    // SAFETY: as above.
    unsafe { z.free_contig_range(0, block, 12) }.unwrap();
    let c = z.counters();
    assert_eq!(
        (c.zone_locks, c.prepares, c.pgfree, c.list_ops),
        (0, 12, 12, 2)
    );
    // The page on the list before the counts started, taken: one more list operation.
    assert_eq!(z.alloc_pages(0, Order::ZERO), Ok(first));
    assert_eq!(z.counters().list_ops, 3);
}

#[test]
fn pcp_lists_drain_past_high() {
    // A fixed mark (untuned): the lists never hold more than `pcp_high`.
    let cfg = ZoneConfig {
        pcp_high: 8,
        pcp_high_max: 0,
        pcp_batch: 4,
        ..ZoneConfig::new(Pfn(0), 256)
    };
    let z = zone(cfg);
    let mut pages = Vec::new();
    for _ in 0..16 {
        pages.push(z.alloc_pages(0, Order::ZERO).unwrap());
    }
    for p in pages {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.put_page(0, p) }.unwrap();
        assert!(z.pcp_pages(0).unwrap() <= 8, "per-cpu list passed high");
        z.check().unwrap();
    }
    z.drain_all();
    assert_eq!(z.buddy_pages(), 256);
    assert_eq!(
        z.free_blocks().count(),
        1,
        "everything merged back into one block"
    );
}

#[test]
fn a_run_of_frees_drains_in_larger_batches() {
    // As Linux's nr_pcp_free: each drain past high returns the frames freed since the last
    // allocation, at least a batch and at most high - batch, so a run of 512 frees takes
    // the zone lock about (512 - high) / (high - batch) times, not (512 - high) / batch.
    let cfg = ZoneConfig {
        pcp_high: 64,
        pcp_high_max: 0,
        pcp_batch: 8,
        ..ZoneConfig::new(Pfn(0), 1024)
    };
    let z = zone(cfg);
    let pages: Vec<_> = (0..512)
        .map(|_| z.alloc_pages(0, Order::ZERO).unwrap())
        .collect();
    z.reset_counters();
    for p in pages {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.put_page(0, p) }.unwrap();
        assert!(z.pcp_pages(0).unwrap() <= 64, "per-cpu list passed high");
    }
    let locks = z.counters().zone_locks;
    assert!((7..=12).contains(&locks), "{locks} drains for 512 frees");
    z.check().unwrap();
    z.drain_all();
    assert_eq!(z.buddy_pages(), 1024);
}

/// Zone-lock acquisitions of one burst on CPU 0: `pages` pages taken, then freed.
fn burst_locks(z: &VecZone, pages: usize) -> u64 {
    z.reset_counters();
    let held: Vec<_> = (0..pages)
        .map(|_| z.alloc_pages(0, Order::ZERO).unwrap())
        .collect();
    for p in held {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.put_page(0, p) }.unwrap();
    }
    z.check().unwrap();
    z.counters().zone_locks
}

#[test]
fn tuned_high_marks_keep_a_burst_on_the_list_and_decay_back() {
    // Linux 6.7's pcp->high tuning: each refill raises the mark by a batch, so a burst
    // larger than the fixed mark stops draining and refilling; a periodic decay brings it
    // back down an eighth at a time, draining what the lists hold past it.
    let fixed = ZoneConfig {
        pcp_high: 64,
        pcp_high_max: 0,
        pcp_batch: 8,
        ..ZoneConfig::new(Pfn(0), 4096)
    };
    let tuned = fixed.with_pcp_high_max(1024);
    let (f, t) = (zone(fixed), zone(tuned));
    let (first_f, first_t) = (burst_locks(&f, 256), burst_locks(&t, 256));
    // The first burst refills 32 times on both: 32 batches raise the tuned mark by 256.
    assert_eq!(t.cpu(0).unwrap().pcp_high(), 64 + 256);
    assert!(first_t <= first_f, "{first_t} > {first_f}");
    // From the second burst on, the tuned zone's list holds it whole: no zone lock.
    for _ in 0..3 {
        assert_eq!(burst_locks(&t, 256), 0);
        assert!(
            burst_locks(&f, 256) > 2 * 256 / 64,
            "the fixed mark drains and refills"
        );
    }
    assert_eq!(f.cpu(0).unwrap().pcp_high(), 64);
    assert!(!f.cpu(0).unwrap().decay_pcp_high(), "nothing to decay");
    assert_eq!(t.pcp_pages(0).unwrap(), 256 + 8 * 32 - 256);
    // Decay: an eighth of the mark a tick, down to the fixed mark, the lists drained past it.
    let cpu = t.cpu(0).unwrap();
    let mut ticks = 0;
    let mut last = cpu.pcp_high();
    while cpu.decay_pcp_high() {
        ticks += 1;
        let high = cpu.pcp_high();
        assert!(high < last || high == 64, "{high} after {last}");
        assert!(cpu.pcp_pages() <= high);
        t.check().unwrap();
        last = high;
        assert!(ticks < 64, "the decay does not end");
    }
    assert_eq!(cpu.pcp_high(), 64);
    assert!(cpu.pcp_pages() <= 64);
    t.drain_all();
    assert_eq!(t.buddy_pages(), 4096);
}

#[test]
fn a_small_tuned_mark_decays_to_its_bound() {
    // An eighth of a mark under 8 frames is 0: each tick still takes at least a frame off,
    // so the decay ends (a fixed mark of 0 included: nothing to wrap).
    for fixed in [0, 1] {
        let cfg = ZoneConfig {
            pcp_high: fixed,
            pcp_batch: 1,
            ..ZoneConfig::new(Pfn(0), 4096)
        }
        .with_pcp_high_max(6);
        let z = zone(cfg);
        let held: Vec<_> = (0..8)
            .map(|_| z.alloc_pages(0, Order::ZERO).unwrap())
            .collect();
        let cpu = z.cpu(0).unwrap();
        assert_eq!(cpu.pcp_high(), 6, "a refill for each page raised it");
        let mut ticks = 0;
        while cpu.decay_pcp_high() {
            ticks += 1;
            assert!(ticks <= 6, "the decay does not end");
        }
        assert_eq!(cpu.pcp_high(), fixed);
        for p in held {
            // SAFETY: no memory behind these zones (module docs).
            unsafe { z.put_page(0, p) }.unwrap();
        }
        z.check().unwrap();
    }
}

#[test]
fn tuned_high_marks_shrink_below_the_high_watermark() {
    // Linux's ZONE_BELOW_HIGH: with the buddy's free frames below the high watermark, a
    // free past the mark lowers it by the run of frees, so the lists do not hoard what the
    // zone lacks; refills raise it only while the zone is above the watermark.
    let cfg = ZoneConfig {
        pcp_high: 64,
        pcp_batch: 8,
        ..ZoneConfig::new(Pfn(0), 4096)
    }
    .with_pcp_high_max(2048);
    let z = zone(cfg);
    let cpu = z.cpu(0).unwrap();
    // Everything taken: the refills raised the mark while the zone had memory to spare.
    let mut held = Vec::new();
    while let Ok(p) = z.alloc_pages(0, Order::ZERO) {
        held.push(p);
    }
    assert_eq!((held.len(), z.buddy_pages()), (4096, 0));
    let raised = cpu.pcp_high();
    assert!(raised > 1024, "{raised}");
    // Given back: the first drain past the mark finds the buddy empty and lowers it.
    let mut lowest = raised;
    for p in held {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.put_page(0, p) }.unwrap();
        lowest = lowest.min(cpu.pcp_high());
        assert!(cpu.pcp_pages() <= raised, "past the mark the frees found");
    }
    assert!(lowest < raised, "the mark stayed at {raised}");
    z.check().unwrap();
    z.drain_all();
    assert_eq!(z.buddy_pages(), 4096);
}

#[test]
fn alloc_pages_at_takes_exactly_that_block() {
    let z = small();
    let initial: Vec<_> = z.free_blocks().collect();
    let o2 = Order::new(2).unwrap();
    z.alloc_pages_at(Pfn(0x104), o2).unwrap();
    assert_eq!(z.frame(Pfn(0x104)).unwrap().refcount, 1);
    assert_eq!(
        z.alloc_pages_at(Pfn(0x104), o2),
        Err(ContigError::NotInBuddy(Pfn(0x104)))
    );
    assert_eq!(
        z.alloc_pages_at(Pfn(0x102), o2),
        Err(ContigError::Misaligned {
            pfn: Pfn(0x102),
            order: o2
        })
    );
    z.check().unwrap();
    assert_eq!(z.buddy_pages(), 1020);
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.free_pages(0, Pfn(0x104), o2) }.unwrap();
    z.drain_all();
    assert_eq!(z.free_blocks().collect::<Vec<_>>(), initial, "merged back");
}

#[test]
fn alloc_pages_at_takes_a_block_from_the_cpu_list_that_holds_it() {
    let o0 = Order::new(0).unwrap();
    let o3 = Order::new(3).unwrap();
    {
        let z = small();
        // A page freed on CPU 1 sits on its list, one freed on CPU 0 on CPU 0's, elsewhere.
        let (page, elsewhere) = (Pfn(0x200), Pfn(0x300));
        z.alloc_pages_at(page, o0).unwrap();
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(1, page, o0) }.unwrap();
        z.alloc_pages_at(elsewhere, o0).unwrap();
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(0, elsewhere, o0) }.unwrap();
        let cpu0_before = z.pcp_pages(0).unwrap();
        assert_eq!((cpu0_before, z.pcp_pages(1).unwrap()), (1, 1));
        // The order-3 block that starts with it; its other pages are free in the buddy.
        let block = page;
        z.alloc_pages_at(block, o3).unwrap();
        assert_eq!(z.pcp_pages(1).unwrap(), 0, "CPU 1's lists drained");
        assert_eq!(
            z.pcp_pages(0).unwrap(),
            cpu0_before,
            "CPU 0's lists untouched"
        );
        assert_eq!(z.frame(block).unwrap().refcount, 1);
        z.check().unwrap();
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(0, block, o3) }.unwrap();
        z.check().unwrap();
    }
}

#[test]
#[cfg(feature = "alloc")] // `vmalloc_buf`
fn an_owned_vmalloc_area_needs_no_buffer() {
    let z = small();
    let whole: Vec<_> = z.free_blocks().collect();
    // Fragment the zone: hold every other page of the first 64, so an area needs many runs.
    let o0 = Order::new(0).unwrap();
    let held: Vec<Pfn> = (0..64u64)
        .step_by(2)
        .map(|i| {
            let pfn = Pfn(0x100 + i);
            z.alloc_pages_at(pfn, o0).unwrap();
            pfn
        })
        .collect();
    let area = z.cpu(0).unwrap().vmalloc_buf(1024 - 32).unwrap();
    assert_eq!(area.pages(), 1024 - 32);
    assert!(area.runs().len() > 32, "{} runs", area.runs().len());
    assert_eq!(z.free_pages_total(), 0);
    z.check().unwrap();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.vfree(0, &area.area()) }.unwrap();
    for pfn in held {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(0, pfn, o0) }.unwrap();
    }
    z.drain_all();
    assert_eq!(z.free_blocks().collect::<Vec<_>>(), whole);
}

#[test]
fn vmalloc_and_vfree_round_trip() {
    let z = small();
    let mut runs = [FrameRange::new(Pfn(0), 0); 8];
    let area = z.vmalloc(0, 300, &mut runs).unwrap();
    assert_eq!(area.pages(), 300);
    let runs_copy: Vec<_> = area.runs().to_vec();
    // 300 = 256 + 32 + 8 + 4: at most one run per block, merged where physically adjacent.
    assert!(runs_copy.len() <= 4, "{runs_copy:?}");
    for w in runs_copy.windows(2) {
        assert_ne!(
            w[0].end(),
            Some(w[1].start),
            "adjacent runs not merged: {runs_copy:?}"
        );
    }
    z.check().unwrap();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.vfree(0, &buddy_sim::VmArea::from_runs(&runs_copy)) }.unwrap();
    z.drain_all();
    z.check().unwrap();
    assert_eq!(z.buddy_pages(), 1024);
    // Too few run slots: an error, and everything allocated on the way is given back.
    let _held = z.alloc_pages(0, Order::ZERO).unwrap();
    z.drain_all();
    let free_before = z.buddy_pages();
    let mut no_slots: [FrameRange; 0] = [];
    assert_eq!(
        z.vmalloc(0, 3, &mut no_slots).unwrap_err(),
        AllocError::RunsFull
    );
    z.drain_all();
    assert_eq!(z.buddy_pages(), free_before, "a failed vmalloc kept frames");
    let mut one = [FrameRange::new(Pfn(0), 0); 1];
    assert_eq!(z.vmalloc(0, 1, &mut one).unwrap().pages(), 1);
    z.check().unwrap();
}

#[test]
fn holes_are_never_handed_out_or_merged_across() {
    // 0x100 frames spanned; usable: [0x00, 0x30) and [0x40, 0x100); 0x30..0x40 is a hole.
    let cfg = ZoneConfig::new(Pfn(0x1000), 0x100);
    let z = zone_with_holes(cfg, &[(0, 0x30), (0x40, 0xc0)]);
    z.check().unwrap();
    assert_eq!(z.present_pages(), 0xf0);
    assert_eq!(z.buddy_pages(), 0xf0);
    // The largest blocks stop at the hole: no block covers 0x1030..0x1040.
    for (pfn, order, _) in z.free_blocks() {
        let end = pfn.0 + order.pages();
        assert!(
            end <= 0x1030 || pfn.0 >= 0x1040,
            "{pfn:?} order {order} spans the hole"
        );
    }
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.put_page(0, Pfn(0x1031)) },
        Err(FreeError::Hole(Pfn(0x1031)))
    );
    assert_eq!(
        z.add_memory(Pfn(0x1020), 0x20),
        Err(MapError::AlreadyAdded(Pfn(0x1020)))
    );
    assert_eq!(
        z.add_memory(Pfn(0x10f0), 0x20),
        Err(MapError::OutOfZone(Pfn(0x1100)))
    );
    // Take every frame: none of them is in the hole.
    let mut got = Vec::new();
    while let Ok(p) = z.alloc_pages(0, Order::ZERO) {
        assert!(
            !(0x1030..0x1040).contains(&p.0),
            "handed out hole frame {p:?}"
        );
        got.push(p);
    }
    assert_eq!(got.len(), 0xf0);
    for p in got {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(0, p, Order::ZERO) }.unwrap();
    }
    // Memory hot-added later fills the hole and merges into one block.
    z.add_memory(Pfn(0x1030), 0x10).unwrap();
    z.drain_all();
    z.check().unwrap();
    assert_eq!(
        z.free_blocks().count(),
        1,
        "whole again after the hole was filled"
    );
}

#[test]
fn vfree_is_all_or_nothing_and_checks_provenance() {
    let z = small();
    // A page held in the middle of the zone: the area cannot be one run.
    let pin = Pfn(0x300);
    z.alloc_pages_at(pin, Order::ZERO).unwrap();
    let mut runs = [FrameRange::new(Pfn(0), 0); 8];
    let area = z.vmalloc(1, 300, &mut runs).unwrap();
    let kept: Vec<_> = area.runs().to_vec();
    assert!(kept.len() >= 2, "{kept:?}");
    for r in &kept {
        assert!(z.frame(r.start).unwrap().vmalloc);
    }
    let fp = buddy_sim::testing::Snapshot::of(&z);
    let unchanged = |what: &str| {
        assert_eq!(
            buddy_sim::testing::Snapshot::of(&z),
            fp,
            "{what} changed the zone"
        );
        z.check().unwrap();
    };
    // A run named twice.
    let twice = [kept[0], kept[1], kept[0]];
    // SAFETY: no memory behind these zones (module docs).
    assert!(unsafe { z.vfree(0, &VmArea::from_runs(&twice)) }.is_err());
    unchanged("a run named twice");
    // A page that never came from vmalloc, after valid runs.
    let plain = z.alloc_pages(0, Order::ZERO).unwrap();
    let fp = buddy_sim::testing::Snapshot::of(&z);
    let foreign = [kept[0], FrameRange::new(plain, 1)];
    assert_eq!(
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.vfree(0, &VmArea::from_runs(&foreign)) },
        Err(FreeError::NotVmalloc(plain))
    );
    assert_eq!(buddy_sim::testing::Snapshot::of(&z), fp);
    // Free the second run by other means: vfree of the whole area must then fail without
    // freeing the first run (it used to free it and then fail).
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.free_contig_range(0, kept[1].start, kept[1].pages) }.unwrap();
    let fp = buddy_sim::testing::Snapshot::of(&z);
    // SAFETY: no memory behind these zones (module docs).
    assert!(unsafe { z.vfree(0, &VmArea::from_runs(&kept)) }.is_err());
    assert_eq!(
        buddy_sim::testing::Snapshot::of(&z),
        fp,
        "a failed vfree freed pages"
    );
    assert!(z.frame(kept[0].start).unwrap().vmalloc);
    // A shared page: vfree drops vmalloc's reference and the page stays with its other owner.
    z.get_page(kept[0].start).unwrap();
    let rest: Vec<_> = kept
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != 1)
        .map(|(_, r)| *r)
        .collect();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.vfree(0, &VmArea::from_runs(&rest)) }.unwrap();
    let kept0 = z.frame(kept[0].start).unwrap();
    assert_eq!((kept0.refcount, kept0.vmalloc), (1, false));
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.put_page(0, kept[0].start) }.unwrap();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.free_pages(0, plain, Order::ZERO) }.unwrap();
    // SAFETY: no memory behind these zones (module docs).
    unsafe { z.free_pages(0, pin, Order::ZERO) }.unwrap();
    z.drain_all();
    z.check().unwrap();
    assert_eq!(z.buddy_pages(), 1024);
}

#[test]
fn the_zone_is_sync_and_its_metadata_can_be_statics() {
    fn shared<T: Sync + Send>(_: &T) {}
    static FRAMES: [Frame; 64] = [const { Frame::new() }; 64];
    static PCPS: [PerCpu; 2] = [const { PerCpu::new() }; 2];
    let z = Zone::new(
        ZoneConfig::new(Pfn(0), 64).with_cpus(2),
        &FRAMES[..],
        &PCPS[..],
    )
    .unwrap();
    shared(&z);
    std::thread::scope(|s| {
        for cpu in 0..2 {
            let z = &z;
            s.spawn(move || {
                for _ in 0..100 {
                    let p = z.alloc_pages(cpu, Order::ZERO).unwrap();
                    // SAFETY: no memory behind these zones (module docs).
                    unsafe { z.put_page(1 - cpu, p) }.unwrap();
                }
            });
        }
    });
    z.drain_all();
    z.check().unwrap();
    assert_eq!(z.buddy_pages(), 64);
}

/// A 16-frame zone with the derived defaults behaves like a plain buddy: the first order-0
/// allocation moves one frame to the per-cpu list (not the whole zone), and after orders
/// 0, 0, 1 and 2 the order-3 block that is left can be had. With the fixed batch of 63 the
/// first allocation moved all 16 frames onto the list and the order-3 request failed.
#[test]
fn a_tiny_zone_with_derived_defaults_is_a_plain_buddy() {
    let o = |n| Order::new(n).unwrap();
    let z = zone(ZoneConfig::new(Pfn(0), 16));
    z.alloc_pages(0, o(0)).unwrap();
    assert_eq!(z.pcp_pages(0).unwrap(), 0, "one frame moved and handed out");
    z.alloc_pages(0, o(0)).unwrap();
    z.alloc_pages(0, o(1)).unwrap();
    z.alloc_pages(0, o(2)).unwrap();
    let last = z.alloc_pages(0, o(3)).unwrap();
    assert_eq!(last, Pfn(8));
    z.check().unwrap();
    // The fixed tuning of earlier versions, for comparison: the zone is then one CPU's list.
    let fixed = zone(ZoneConfig::new(Pfn(0), 16).with_pcp(1536, buddy_sim::LINUX_PCP_BATCH));
    fixed.alloc_pages(0, o(0)).unwrap();
    assert_eq!(fixed.pcp_pages(0).unwrap(), 15);
}

/// A zone past `EAGER_PAGES` frames: the first gigabyte is usable at once, the rest is
/// deferred, reads as reserved, and becomes usable through `init_deferred` (here from two
/// threads at once) or the allocation slow path; adding an overlapping range fails either
/// way and changes nothing.
#[test]
fn large_zones_defer_what_allocation_does_not_need_yet() {
    if cfg!(miri) {
        return; // 8 MiB of metadata, walked several times: minutes under Miri.
    }
    let eager = buddy_sim::EAGER_PAGES;
    let n = 2 * eager;
    let o10 = Order::new(10).unwrap();
    let cfg = ZoneConfig::new(Pfn(0), n);
    let z = zone(cfg);
    assert_eq!(z.present_pages(), n);
    assert_eq!(z.deferred_pages(), eager);
    assert_eq!(z.buddy_pages(), eager);
    assert_eq!(
        z.frame(Pfn(n - 1)).unwrap().state,
        buddy_sim::FrameState::Reserved
    );
    z.check().unwrap();
    assert_eq!(
        z.add_memory(Pfn(n - 5), 5),
        Err(MapError::AlreadyAdded(Pfn(n - 5)))
    );
    assert_eq!(z.deferred_pages(), eager);
    // Every order-10 block, the deferred half through the slow path.
    let blocks: Vec<Pfn> = (0..n >> 10)
        .map(|_| z.alloc_pages(0, o10).unwrap())
        .collect();
    assert_eq!(z.deferred_pages(), 0);
    assert_eq!(z.alloc_pages(0, o10), Err(AllocError::OutOfMemory(o10)));
    for b in blocks {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.free_pages(0, b, o10) }.unwrap();
    }
    z.check().unwrap();

    // In parallel, from two threads, in small steps.
    let z = zone(cfg.with_cpus(2));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| while z.init_deferred(1000) > 0 {});
        }
    });
    assert_eq!(z.deferred_pages(), 0);
    assert_eq!(z.buddy_pages(), n);
    assert_eq!(z.buddy_blocks_per_order()[10], (n >> 10) as u32);
    z.check().unwrap();
}

/// Metadata known to be zero is not written: `new_empty_zeroed` over zeroed frames behaves
/// as `new_empty`.
#[test]
fn zeroed_metadata_needs_no_reset() {
    let cfg = ZoneConfig::new(Pfn(0x100), 64);
    let (frames, pcps) = metadata(cfg);
    // SAFETY: `Frame::new()` is the all-zero frame.
    let z = unsafe { Zone::new_empty_zeroed(cfg, frames, pcps) }.unwrap();
    z.add_memory(Pfn(0x100), 32).unwrap();
    z.add_memory(Pfn(0x130), 16).unwrap();
    assert_eq!(z.present_pages(), 48);
    assert_eq!(
        z.add_memory(Pfn(0x110), 1),
        Err(MapError::AlreadyAdded(Pfn(0x110)))
    );
    z.check().unwrap();
}

/// [`fast_paths_take_one_per_cpu_lock_and_no_zone_lock`] through one handle.
fn fast_paths_on<A: Access>(
    z: &VecZone,
    cpu: Cpu<'_, Vec<Frame>, Vec<PerCpu>, DefaultRawMutex, A>,
    how: &str,
) {
    let o0 = Order::ZERO;
    let warm = cpu.alloc_raw(AllocRequest::page()).unwrap(); // refills the list
    // SAFETY: no memory behind these zones (module docs).
    unsafe { cpu.free_pages(warm, o0) }.unwrap();
    z.reset_counters();
    let p = cpu.alloc_raw(AllocRequest::page()).unwrap();
    let c = z.counters();
    // A CPU-local handle takes no lock at all.
    let lock = u64::from(!A::LOCAL);
    assert_eq!((c.pcp_locks, c.zone_locks), (lock, 0), "alloc, {how}");
    assert_eq!(c.list_ops, 1, "alloc, {how}");
    // SAFETY: no memory behind these zones (module docs).
    unsafe { cpu.free_pages(p, o0) }.unwrap();
    let c = z.counters();
    assert_eq!((c.pcp_locks, c.zone_locks), (2 * lock, 0), "free, {how}");
    assert_eq!(c.list_ops, 2, "free, {how}");
}

/// The lock acquisitions (one atomic read-modify-write each with the default spin lock)
/// the README's table counts: an order-0 allocation served from the CPU's list takes only
/// that CPU's lock, and a free onto it the same; with CPU-local lists the same work is done
/// under no lock (the counters count the list accesses, and no lock).
#[test]
fn fast_paths_take_one_per_cpu_lock_and_no_zone_lock() {
    for local in [false, true] {
        let z = zone(ZoneConfig::new(Pfn(0), 1 << 12));
        if local {
            // SAFETY: one thread, CPU 0 only: no two calls overlap.
            fast_paths_on(&z, unsafe { z.local_cpu(0) }.unwrap(), "local");
        } else {
            fast_paths_on(&z, z.cpu(0).unwrap(), "locked");
        }
        z.check().unwrap();
    }
}
