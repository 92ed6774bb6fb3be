//! The tools a kernel engineer reaches for when memory misbehaves, on zones driven through
//! many operations: page_owner's records match the blocks allocated after every step, its
//! leak report lists exactly what was allocated past a mark, and a node set's files list
//! each zone once, in Linux's zone order.
#![cfg(not(loom))]

mod common;
use common::bytes::all_bytes_are;

/// Steps of each random workload: fewer under Miri, which runs each step a thousand times
/// slower.
const STEPS: u64 = if cfg!(miri) { 120 } else { 3000 };

use buddy_sim::page_owner::{PageOwnerDump, TopOwners};
use buddy_sim::vmstat::{BuddyInfo, VmStat};
use buddy_sim::{FrameState, NodeId, NodePolicy, Order, OwnerRecord, Pfn, Topology, ZoneConfig};
use std::collections::BTreeMap;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Every allocated head of the zone with its order, read from the frame table.
fn allocated_heads(z: &common::TestZone) -> BTreeMap<u64, u8> {
    let span = z.span();
    (span.start.0..span.start.0 + span.pages)
        .filter_map(|p| {
            let info = z.frame(Pfn(p)).ok()?;
            (info.state == FrameState::Allocated).then_some((p, info.order))
        })
        .collect()
}

#[test]
fn page_owner_records_exactly_the_blocks_allocated_and_the_leaks_past_a_mark() {
    const FRAMES: u64 = 2048;
    static RECORDS: [OwnerRecord; FRAMES as usize] =
        [const { OwnerRecord::new() }; FRAMES as usize];
    let start = Pfn(0x4000);
    let z = common::zone(ZoneConfig::new(start, FRAMES).with_cpus(2)).unwrap();
    z.enable_page_owner(&RECORDS).unwrap();
    assert!(z.enable_page_owner(&RECORDS).is_err());
    let mut rng = Rng(0x5eed);
    let mut live: Vec<(Pfn, Order, u64, usize)> = Vec::new();
    let mut mark = None;
    for step in 0..STEPS {
        let cpu = (rng.next() % 2) as usize;
        let tag = rng.next() % 5;
        z.set_owner_tag(cpu, tag).unwrap();
        match rng.next() % 8 {
            0..=3 => {
                let order = Order::new((rng.next() % 5) as u8).unwrap();
                let frozen = rng.next().is_multiple_of(3);
                let got = if frozen {
                    z.cpu(cpu).unwrap().alloc_frozen_pages(order)
                } else {
                    z.alloc_pages(cpu, order)
                };
                if let Ok(pfn) = got {
                    live.push((pfn, order, tag, usize::from(frozen)));
                }
            }
            4 if !live.is_empty() => {
                // Split a referenced block into pages, each owned as the block was.
                let i = (rng.next() % live.len() as u64) as usize;
                let (pfn, order, tag, frozen) = live[i];
                if frozen == 0 && order > Order::ZERO {
                    z.split_page(pfn, order).unwrap();
                    live.swap_remove(i);
                    for p in 0..order.pages() {
                        live.push((Pfn(pfn.0 + p), Order::ZERO, tag, 0));
                    }
                }
            }
            _ if !live.is_empty() => {
                let i = (rng.next() % live.len() as u64) as usize;
                let (pfn, order, _, frozen) = live.swap_remove(i);
                // SAFETY: allocated above, freed once; no memory behind the zone.
                #[allow(unsafe_code)]
                let freed = unsafe {
                    if frozen == 1 {
                        z.cpu(cpu).unwrap().free_frozen_pages(pfn, order)
                    } else {
                        z.free_pages(cpu, pfn, order)
                    }
                };
                freed.unwrap();
            }
            _ => {}
        }
        if step == STEPS / 2 {
            mark = Some((z.owner_mark(), live.len()));
        }
        if step % 97 == 0 || step == STEPS - 1 {
            let owned: BTreeMap<u64, (u8, u64)> = z
                .owned_blocks()
                .map(|b| (b.pfn.0, (b.order.get(), b.tag)))
                .collect();
            let heads = allocated_heads(&z);
            assert_eq!(
                owned
                    .iter()
                    .map(|(&p, &(o, _))| (p, o))
                    .collect::<BTreeMap<_, _>>(),
                heads,
                "step {step}"
            );
            for &(pfn, order, tag, _) in &live {
                assert_eq!(owned.get(&pfn.0), Some(&(order.get(), tag)), "step {step}");
            }
        }
    }
    // The leak report: what was allocated after the mark and is still alive.
    let (mark, _) = mark.unwrap();
    let since: Vec<u64> = z.blocks_since(mark).map(|b| b.pfn.0).collect();
    let all: Vec<_> = z.owned_blocks().collect();
    assert!(since.len() < all.len());
    for b in &all {
        assert_eq!(since.contains(&b.pfn.0), b.seq >= mark);
    }
    // Grouped by tag, the pages add up to the blocks'.
    let top = TopOwners::of(&z);
    let pages: u64 = all.iter().map(|b| b.order.pages()).sum();
    let listed: u64 = top.owners[..top.len].iter().map(|o| o.2).sum();
    assert_eq!(listed + top.other_pages, pages);
    assert!(top.owners[..top.len].windows(2).all(|w| w[0].2 >= w[1].2));
    let dump = format!("{}", PageOwnerDump(&z));
    assert_eq!(dump.matches("Page allocated via order").count(), all.len());
    z.check().unwrap();
}

/// A block split into pages, each recorded, then freed as one run (the fewest aligned
/// blocks): every page's record goes, as Linux's `__reset_page_owner` clears each page's.
#[test]
fn a_split_block_freed_as_one_run_leaves_no_record() {
    const FRAMES: u64 = 64;
    static RECORDS: [OwnerRecord; FRAMES as usize] =
        [const { OwnerRecord::new() }; FRAMES as usize];
    let z = common::zone(ZoneConfig::new(Pfn(0x100), FRAMES)).unwrap();
    z.enable_page_owner(&RECORDS).unwrap();
    let order = Order::new(2).unwrap();
    let pfn = z.alloc_pages(0, order).unwrap();
    z.split_page(pfn, order).unwrap();
    assert_eq!(z.owned_blocks().count(), 4);
    // SAFETY: the four pages were allocated above and are freed once; no memory behind the
    // zone.
    #[allow(unsafe_code)]
    unsafe { z.free_contig_range(0, pfn, 4) }.unwrap();
    assert_eq!(z.owned_blocks().count(), 0);
    z.check().unwrap();
}

#[test]
fn a_migrated_blocks_owner_moves_with_it() {
    static RECORDS: [OwnerRecord; 1024] = [const { OwnerRecord::new() }; 1024];
    let z = common::zone(ZoneConfig::new(Pfn(0x8000), 1024)).unwrap();
    z.enable_page_owner(&RECORDS).unwrap();
    z.set_owner_tag(0, 42).unwrap();
    // Movable pages over the whole zone, every other one given back: compaction has
    // holes to fill.
    let pages: Vec<Pfn> = (0..1024)
        .map_while(|k| z.alloc_movable(0, Order::ZERO, k).ok())
        .collect();
    for p in pages.iter().step_by(2) {
        // SAFETY: allocated above, freed once; no memory behind the zone.
        #[allow(unsafe_code)]
        unsafe { z.free_pages(0, *p, Order::ZERO) }.unwrap();
    }
    let stats = z
        .cpu(0)
        .unwrap()
        .compact(Order::new(9).unwrap(), &mut |_: &buddy_sim::Migration| true)
        .unwrap();
    assert!(stats.moved_pages > 0);
    let owned: BTreeMap<u64, u8> = z.owned_blocks().map(|b| (b.pfn.0, b.order.get())).collect();
    assert_eq!(owned, allocated_heads(&z));
    assert!(z.owned_blocks().all(|b| b.tag == 42));
}

#[test]
fn a_node_sets_files_list_each_zone_once_in_linux_zone_order() {
    // Node 1's zone below 4 GiB (DMA32), node 0's above (Normal), a second node-0 zone
    // in the first 16 MiB (DMA): printed per node, DMA before Normal.
    let zones = vec![
        common::zone(ZoneConfig::new(Pfn(0x10_0000), 1024).with_node(NodeId(0))).unwrap(),
        common::zone(ZoneConfig::new(Pfn(0x8_0000), 1024).with_node(NodeId(1))).unwrap(),
        common::zone(ZoneConfig::new(Pfn(0x800), 1024).with_node(NodeId(0))).unwrap(),
    ];
    let set = common::node_set(Topology::uniform(2, &[NodeId(0)]).unwrap(), zones).unwrap();
    set.alloc_pages(0, Order::ZERO, NodePolicy::Local).unwrap();
    let text = format!("{}", BuddyInfo(&set));
    let heads: Vec<&str> = text.lines().map(|l| &l[..21]).collect();
    assert_eq!(
        heads,
        [
            "Node 0, zone      DMA",
            "Node 0, zone   Normal",
            "Node 1, zone    DMA32"
        ]
    );
    let vmstat = format!("{}", VmStat(&set));
    assert!(vmstat.contains("nr_free_pages 3071\n") || vmstat.contains("nr_free_pages 3072\n"));
    assert_eq!(
        vmstat.lines().filter(|l| l.starts_with("pgalloc_")).count(),
        4
    );
}

/// A hook counting every event into per-CPU arrays, as a kernel's would.
#[derive(Default)]
struct Counting {
    alloc_pages: [std::sync::atomic::AtomicU64; 2],
    free_pages: [std::sync::atomic::AtomicU64; 2],
    refills: std::sync::atomic::AtomicU64,
    drains: std::sync::atomic::AtomicU64,
    extfrag: std::sync::atomic::AtomicU64,
    claims: std::sync::atomic::AtomicU64,
    compactions: std::sync::atomic::AtomicU64,
}

impl buddy_sim::events::ZoneEvents for Counting {
    fn page_alloc(&self, e: &buddy_sim::events::PageAlloc<'_>) {
        self.alloc_pages[e.cpu.get()].fetch_add(e.order.pages(), Relaxed);
    }
    fn page_free(&self, e: &buddy_sim::events::PageFree<'_>) {
        self.free_pages[e.cpu.get()].fetch_add(e.order.pages(), Relaxed);
    }
    fn pcp_refill(&self, _: &buddy_sim::events::PcpRefill<'_>) {
        self.refills.fetch_add(1, Relaxed);
    }
    fn pcp_drain(&self, _: &buddy_sim::events::PcpDrain<'_>) {
        self.drains.fetch_add(1, Relaxed);
    }
    fn extfrag(&self, e: &buddy_sim::events::Extfrag) {
        self.extfrag.fetch_add(1, Relaxed);
        self.claims
            .fetch_add(u64::from(e.change_ownership), Relaxed);
        assert_ne!(e.alloc_kind, e.fallback_kind);
        assert!(e.fallback_order >= e.alloc_order);
    }
    fn compaction_end(&self, _: &buddy_sim::events::CompactionEnd) {
        self.compactions.fetch_add(1, Relaxed);
    }
}

use std::sync::atomic::Ordering::Relaxed;

#[test]
fn a_counting_hook_sees_every_page_the_counters_count() {
    use buddy_sim::WithEvents;
    use buddy_sim::{Frame, MigrateType, PerCpu, Zone};
    let hook = Counting::default();
    let cfg = ZoneConfig::new(Pfn(0x2_0000), 4096).with_cpus(2);
    let frames: common::FrameVec = (0..4096).map(|_| Frame::new()).collect();
    let cpus: Vec<PerCpu> = (0..2).map(|_| PerCpu::new()).collect();
    let z = Zone::new_empty(cfg, frames, WithEvents::new(cpus, &hook)).unwrap();
    z.add_memory(Pfn(0x2_0000), 4096).unwrap();
    z.reset_counters();
    let mut rng = Rng(7);
    // Blocks with a reference count and frozen blocks (`frozen`), of orders with a per-cpu
    // list and without.
    let mut live: Vec<(bool, Pfn, Order)> = Vec::new();
    for _ in 0..STEPS {
        let cpu = (rng.next() % 2) as usize;
        let c = z.cpu(cpu).unwrap();
        if rng.next() % 5 < 3 || live.is_empty() {
            let order = Order::new((rng.next() % 6) as u8).unwrap();
            let kind = MigrateType::ALL[(rng.next() % 3) as usize];
            let frozen = rng.next().is_multiple_of(3);
            let got = if frozen {
                c.alloc_frozen_pages(order)
            } else {
                c.alloc_raw(buddy_sim::AllocRequest::order(order).kind(kind))
            };
            if let Ok(pfn) = got {
                live.push((frozen, pfn, order));
            }
        } else {
            let (frozen, pfn, order) = live.swap_remove((rng.next() % live.len() as u64) as usize);
            #[allow(unsafe_code)]
            if frozen {
                // SAFETY: allocated frozen above, freed once; no memory behind the zone.
                unsafe { c.free_frozen_pages(pfn, order) }.unwrap();
            } else {
                // SAFETY: allocated above, freed once; no memory behind the zone.
                unsafe { c.free_pages(pfn, order) }.unwrap();
            }
        }
    }
    z.cpu(0)
        .unwrap()
        .compact(Order::new(9).unwrap(), &mut |_: &buddy_sim::Migration| {
            false
        })
        .unwrap();
    z.drain_all();
    let counters = z.counters();
    let sum =
        |a: &[std::sync::atomic::AtomicU64; 2]| a.iter().map(|c| c.load(Relaxed)).sum::<u64>();
    assert_eq!(sum(&hook.alloc_pages), counters.pgalloc);
    assert_eq!(sum(&hook.free_pages), counters.pgfree);
    assert!(hook.refills.load(Relaxed) > 0 && hook.drains.load(Relaxed) > 0);
    let fallbacks = z.fragmentation().fallbacks;
    let taken = fallbacks.claims
        + fallbacks.unmovable_steals
        + fallbacks.reclaimable_steals
        + fallbacks.movable_steals;
    assert!(taken > 0);
    assert_eq!(hook.extfrag.load(Relaxed), taken);
    assert_eq!(hook.claims.load(Relaxed), fallbacks.claims);
    assert_eq!(hook.compactions.load(Relaxed), 1);
    z.check().unwrap();
}

#[test]
fn init_on_free_clears_every_freed_block_and_hands_it_out_known_zero() {
    use buddy_sim::{AllocRequest, FrameClearer, MigrateType};
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    const START: Pfn = Pfn(0x8_0000);
    const FRAMES: usize = 1024;
    let mut ram: Vec<Page> = (0..FRAMES).map(|_| Page([0xa5; 4096])).collect();
    // SAFETY: frame `START + i` is `ram[i]`; only the zone's owners (this test, which writes
    // what it holds) and the zone reach it, and the test reads it only while it holds the
    // frame or after the zone is done.
    let clearer = unsafe { FrameClearer::direct_map(START, ram.as_mut_ptr().cast()) }.unwrap();
    let base = ram.as_mut_ptr().cast::<u8>();
    let z = common::zone(ZoneConfig::new(START, FRAMES as u64).with_cpus(2)).unwrap();
    z.set_init_on_free(Some(clearer));
    let mut rng = Rng(11);
    let mut live: Vec<(usize, Pfn, Order)> = Vec::new();
    for _ in 0..STEPS {
        let cpu = (rng.next() % 2) as usize;
        if rng.next().is_multiple_of(2) || live.is_empty() {
            let order = Order::new((rng.next() % 4) as u8).unwrap();
            let kind = MigrateType::ALL[(rng.next() % 2) as usize];
            let got = z
                .cpu(cpu)
                .unwrap()
                .alloc_raw(AllocRequest::order(order).kind(kind));
            if let Ok(pfn) = got {
                // The owner writes its block.
                let at = (pfn.0 - START.0) as usize * 4096;
                // SAFETY: the block is this test's, inside `ram`.
                unsafe {
                    base.add(at)
                        .write_bytes(0x5a, order.pages() as usize * 4096)
                };
                live.push((cpu, pfn, order));
            }
        } else {
            let (_, pfn, order) = live.swap_remove((rng.next() % live.len() as u64) as usize);
            // SAFETY: allocated above, freed once, not written after.
            #[allow(unsafe_code)]
            unsafe { z.free_pages(cpu, pfn, order) }.unwrap();
            let at = (pfn.0 - START.0) as usize * 4096;
            // SAFETY: the zone cleared the block and no allocation took it since (this
            // thread is the only one allocating).
            let bytes =
                unsafe { std::slice::from_raw_parts(base.add(at), order.pages() as usize * 4096) };
            assert!(all_bytes_are(bytes, 0), "a freed block does not read zero");
        }
    }
    // Every block freed is free known zero: a zeroed allocation clears none of them.
    for (cpu, pfn, order) in live.drain(..) {
        // SAFETY: as above.
        #[allow(unsafe_code)]
        unsafe { z.free_pages(cpu, pfn, order) }.unwrap();
    }
    let cleared_before = z.counters().cleared_on_alloc;
    let zeroed = z.zeroed_pages();
    assert!(zeroed > 0);
    let cpu = z.cpu(0).unwrap().with_clearer(&clearer);
    let page = cpu.alloc(AllocRequest::page().zeroed()).unwrap();
    assert_eq!(z.counters().cleared_on_alloc, cleared_before);
    drop(page);
    z.check().unwrap();
}

#[test]
fn page_poisoning_finds_the_first_byte_written_after_a_free_and_nothing_else() {
    use buddy_sim::{AllocRequest, FrameClearer, MigrateType, Migration, OffsetMap, PAGE_POISON};
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    const START: Pfn = Pfn(0x9_0000);
    const FRAMES: usize = 1024;
    let mut ram: Vec<Page> = (0..FRAMES).map(|_| Page([0; 4096])).collect();
    let base = ram.as_mut_ptr().cast::<u8>();
    // SAFETY: frame `START + i` is `ram[i]`; only the zone and the owners of its blocks (this
    // test, writing what it holds) reach it, but for the one write after a free below.
    let clearer = unsafe { FrameClearer::direct_map(START, base) }.unwrap();
    // SAFETY: as above.
    let map = unsafe { OffsetMap::with_frame_at(START, base) }.unwrap();
    let z = common::empty_zone(ZoneConfig::new(START, FRAMES as u64).with_cpus(2)).unwrap();
    z.set_page_poison(clearer).unwrap();
    z.add_memory(START, FRAMES as u64).unwrap();
    assert!(z.set_page_poison(clearer).is_err());
    assert!(ram.iter().all(|p| all_bytes_are(&p.0, PAGE_POISON)));
    let write = |pfn: Pfn, order: Order, byte: u8| {
        let at = (pfn.0 - START.0) as usize * 4096;
        // SAFETY: the block is this test's, inside `ram`.
        unsafe {
            base.add(at)
                .write_bytes(byte, order.pages() as usize * 4096)
        };
    };
    let mut rng = Rng(23);
    let mut live: Vec<(usize, Pfn, Order, u8)> = Vec::new();
    for step in 0..STEPS {
        let cpu = (rng.next() % 2) as usize;
        match rng.next() % 6 {
            0..=2 => {
                let order = Order::new((rng.next() % 4) as u8).unwrap();
                let kind = MigrateType::ALL[(rng.next() % 2) as usize];
                let zeroed = rng.next().is_multiple_of(4);
                let c = z.cpu(cpu).unwrap().with_clearer(&clearer);
                let got = if zeroed {
                    c.alloc(AllocRequest::order(order).kind(kind).zeroed())
                        .map(buddy_sim::Block::into_raw)
                } else {
                    c.alloc_raw(AllocRequest::order(order).movable(step).kind(kind))
                };
                if let Ok(pfn) = got {
                    write(pfn, order, 0x11);
                    for l in &live {
                        let (a, b) = (l.1.0, l.1.0 + l.2.pages());
                        assert!(
                            pfn.0 + order.pages() <= a || b <= pfn.0,
                            "step {step}: {pfn:?} o{order:?} zeroed {zeroed} overlaps {l:?}"
                        );
                    }
                    live.push((cpu, pfn, order, u8::from(zeroed)));
                }
            }
            3 => {
                // Compaction moves movable blocks, copying them.
                let mut copy = |m: &Migration| {
                    // SAFETY: `map` keeps the contract; the test writes no block while the
                    // compaction runs.
                    let ok = unsafe { m.copy(&map) }.is_ok();
                    if ok {
                        let n = live.iter().filter(|l| l.1 == m.from).count();
                        assert_eq!(n, 1, "{m:?}");
                        for l in &mut live {
                            if l.1 == m.from {
                                assert_eq!(l.2, m.order, "{m:?}");
                                l.1 = m.to;
                            }
                        }
                    }
                    ok
                };
                let _ = z
                    .cpu(cpu)
                    .unwrap()
                    .compact(Order::new(3).unwrap(), &mut copy);
            }
            _ if !live.is_empty() => {
                let (_, pfn, order, _) =
                    live.swap_remove((rng.next() % live.len() as u64) as usize);
                // SAFETY: allocated above, freed once, not written after.
                #[allow(unsafe_code)]
                unsafe { z.free_pages(cpu, pfn, order) }.unwrap();
            }
            _ => {}
        }
    }
    assert_eq!(
        z.poison_corruption(),
        None,
        "a block that nobody wrote after its free"
    );
    // Nothing is known zero while poisoning: zeroed allocations cleared what they took.
    assert_eq!(z.zeroed_pages(), 0);
    // A use after free: a byte written into a freed page is found when the page is next
    // handed out, at its offset.
    let page = z.alloc_pages(0, Order::ZERO).unwrap();
    // SAFETY: allocated above, freed once.
    #[allow(unsafe_code)]
    unsafe { z.free_pages(0, page, Order::ZERO) }.unwrap();
    let at = (page.0 - START.0) as usize * 4096 + 1234;
    // SAFETY: inside `ram`; the page is free: this is the bug poisoning exists to find.
    unsafe { base.add(at).write(0x42) };
    let mut taken = Vec::new();
    while z.poison_corruption().is_none() {
        match z.alloc_pages(0, Order::ZERO) {
            Ok(p) => taken.push(p),
            Err(e) => panic!("the corrupted page was never handed out: {e}"),
        }
    }
    let found = z.poison_corruption().unwrap();
    assert_eq!(
        (found.pfn, found.offset, found.found, found.blocks),
        (page, 1234, 0x42, 1)
    );
    z.check().unwrap();
}

/// How a block of the mixed test below is held, and so freed.
#[derive(Clone, Copy)]
enum Held {
    /// An exact run of frames (`AllocRequest::frames`), freed by `free_contig_range`.
    Run,
    /// A block split into pages, freed by `free_contig_range`.
    Split,
    /// A frozen block, freed by `free_frozen_pages`.
    Frozen,
    /// A block taken at a frame of the test's choosing (`alloc_pages_at`), freed by
    /// `free_pages`.
    At,
}

#[test]
fn a_counting_hook_agrees_with_the_counters_after_every_kind_of_call() {
    use buddy_sim::mm_types::FrameRange;
    use buddy_sim::{AllocRequest, Frame, PerCpu, WithEvents, Zone};
    const START: Pfn = Pfn(0x2_0000);
    let hook = Counting::default();
    let cfg = ZoneConfig::new(START, 4096).with_cpus(2);
    let frames: common::FrameVec = (0..4096).map(|_| Frame::new()).collect();
    let cpus: Vec<PerCpu> = (0..2).map(|_| PerCpu::new()).collect();
    let z = Zone::new_empty(cfg, frames, WithEvents::new(cpus, &hook)).unwrap();
    z.add_memory(START, 4096).unwrap();
    z.reset_counters();
    let sum =
        |a: &[std::sync::atomic::AtomicU64; 2]| a.iter().map(|c| c.load(Relaxed)).sum::<u64>();
    let mut rng = Rng(9);
    let mut live: Vec<(Held, Pfn, u64)> = Vec::new();
    for step in 0..STEPS {
        let c = z.cpu((rng.next() % 2) as usize).unwrap();
        let order = Order::new((rng.next() % 6) as u8).unwrap();
        if rng.next() % 5 < 3 || live.is_empty() {
            let got = match rng.next() % 5 {
                0 => {
                    let n = 1 + rng.next() % 40;
                    c.alloc_raw(AllocRequest::frames(n))
                        .ok()
                        .map(|p| (Held::Run, p, n))
                }
                1 => c.alloc_raw(AllocRequest::order(order)).ok().map(|p| {
                    z.split_page(p, order).unwrap();
                    (Held::Split, p, order.pages())
                }),
                2 => c
                    .alloc_frozen_pages(order)
                    .ok()
                    .map(|p| (Held::Frozen, p, order.pages())),
                3 => {
                    let at = Pfn((START.0 + rng.next() % 4096) & !(order.pages() - 1));
                    z.alloc_pages_at(at, order)
                        .ok()
                        .map(|()| (Held::At, at, order.pages()))
                }
                _ => {
                    // vmalloc's runs, given back at once.
                    let mut runs = [FrameRange::new(Pfn(0), 0); 64];
                    if let Ok(area) = c.vmalloc(1 + rng.next() % 100, &mut runs) {
                        // SAFETY: allocated just above, freed once; no memory behind the zone.
                        #[allow(unsafe_code)]
                        unsafe { c.vfree(&area) }.unwrap();
                    }
                    None
                }
            };
            live.extend(got);
        } else {
            let (held, pfn, n) = live.swap_remove((rng.next() % live.len() as u64) as usize);
            let order = Order::new(n.trailing_zeros() as u8).unwrap();
            // SAFETY: each allocated above as `held` says, freed once; no memory behind the
            // zone.
            #[allow(unsafe_code)]
            unsafe {
                match held {
                    Held::Run | Held::Split => c.free_contig_range(pfn, n),
                    Held::Frozen => c.free_frozen_pages(pfn, order),
                    Held::At => c.free_pages(pfn, order),
                }
            }
            .unwrap();
        }
        let counters = z.counters();
        assert_eq!(
            sum(&hook.alloc_pages),
            counters.pgalloc,
            "allocated, step {step}"
        );
        assert_eq!(sum(&hook.free_pages), counters.pgfree, "freed, step {step}");
    }
    z.check().unwrap();
}
