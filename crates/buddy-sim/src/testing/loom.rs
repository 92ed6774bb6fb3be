//! loom models of CPUs sharing one zone: allocation and free on several CPUs, a free on
//! another CPU than the allocation, draining every CPU's lists while others allocate,
//! refills and drains past `high`, two CPUs freeing the same page or run, background
//! zeroing racing allocation and free, compaction racing the owner's free and
//! allocation of movable pages, an offline racing allocation and free on another CPU, a
//! CMA reservation racing an unmovable allocation, free page reporting racing
//! allocation and free, page_owner's records read while written, and fault injection
//! armed while two CPUs allocate. The zone is the real one; under
//! `cfg(loom)` its atomics and locks are loom's (`crate::sync`).
//!
//! The frees are `unsafe` (a wrong one could make a zone write memory in use): each model
//! frees what its thread holds, and the races of two frees of one page or run run on zones
//! that no clearer or migration writes, where the loser gets the metadata error they check.

// The zeroing models map a buffer as the zone's memory and write pages their thread holds.
#![allow(unsafe_code)]

use crate::frame_storage::FrameStorage;
use loom::sync::Arc;
use loom::thread;
use std::vec::Vec;

use crate::error::alloc::AllocError;
use crate::error::contig::ContigError;
use crate::error::free::FreeError;
use crate::frame::Frame;
use crate::memory::{FrameClearer, OffsetMap};
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::config::ZoneConfig;
use crate::zone::pcp::PerCpu;
use mm_types::Pfn;
use zero_core::{NoResched, Resched};

type LoomZone = Zone<Vec<Frame>, Vec<PerCpu>>;

const START: Pfn = Pfn(0x40);
const O0: Order = Order::ZERO;

/// A zone as `cfg` says, a per-cpu set for each of its CPUs.
fn built(cfg: ZoneConfig) -> Arc<LoomZone> {
    let frames = (0..cfg.nr_pages).map(|_| Frame::new()).collect();
    let pcps = (0..cfg.cpus).map(|_| PerCpu::new()).collect();
    Arc::new(Zone::new(cfg, frames, pcps).unwrap())
}

/// 16 frames, `cpus` CPUs, tiny batches and a fixed high mark so that refills and drains
/// happen in the model (the tuned mark has a model of its own).
fn config(cpus: usize) -> ZoneConfig {
    ZoneConfig {
        max_order: Order(4),
        pageblock_order: Order(4),
        cpus,
        pcp_high: 2,
        pcp_high_max: 0,
        pcp_batch: 2,
        ..ZoneConfig::new(START, 16)
    }
}

/// A zone as [`config`] makes it.
fn zone(cpus: usize) -> Arc<LoomZone> {
    built(config(cpus))
}

/// Two pages taken on `cpu`, then both freed (with a mark of 2, the second free drains).
fn take_two_then_free(z: &LoomZone, cpu: usize) {
    let p = z.alloc_pages(cpu, O0).unwrap();
    let q = z.alloc_pages(cpu, O0).unwrap();
    // SAFETY: see the module docs.
    unsafe { z.free_pages(cpu, p, O0) }.unwrap();
    // SAFETY: see the module docs.
    unsafe { z.free_pages(cpu, q, O0) }.unwrap();
}

/// After every thread joined: consistent, and all its frames back in one block of its
/// largest order.
fn assert_whole(z: &LoomZone) {
    z.drain_all();
    z.check().unwrap();
    assert_eq!(
        z.buddy_blocks_per_order()[z.cfg.max_order.get() as usize],
        1,
        "the zone is not whole again"
    );
}

/// Runs `f` on another (loom) thread with its own handle on the zone.
fn on_another_thread<T: Send + 'static>(
    z: &Arc<LoomZone>,
    f: impl FnOnce(&LoomZone) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let z = z.clone();
    thread::spawn(move || f(&z))
}

fn alloc_free(z: &LoomZone, cpu: usize, order: Order) {
    let p = z.alloc_pages(cpu, order).unwrap();
    // SAFETY: see the module docs.
    unsafe { z.free_pages(cpu, p, order) }.unwrap();
}

#[test]
fn loom_two_cpus_allocate_and_free_at_once() {
    loom::model(|| {
        let z = zone(2);
        let other = on_another_thread(&z, move |z| alloc_free(z, 1, O0));
        alloc_free(&z, 0, Order(1));
        other.join().unwrap();
        assert_whole(&z);
    });
}

#[test]
fn loom_remote_free_while_the_owner_allocates() {
    loom::model(|| {
        let z = zone(2);
        let page = z.alloc_pages(0, O0).unwrap();
        // SAFETY: see the module docs.
        let remote = on_another_thread(&z, move |z| unsafe { z.put_page(1, page) }.unwrap());
        alloc_free(&z, 0, O0);
        remote.join().unwrap();
        assert_whole(&z);
    });
}

#[test]
fn loom_drain_all_while_others_allocate() {
    loom::model(|| {
        let z = zone(2);
        let drainer = on_another_thread(&z, move |z| z.drain_all());
        take_two_then_free(&z, 0);
        drainer.join().unwrap();
        assert_whole(&z);
    });
}

#[test]
fn loom_three_cpus_refill_and_drain_through_the_zone_lock() {
    loom::model(|| {
        let z = zone(3);
        let threads: Vec<_> = (1..3)
            .map(|cpu| on_another_thread(&z, move |z| alloc_free(z, cpu, O0)))
            .collect();
        // Order 2 has a per-cpu list too; a batch of 2 frames is one block, so this refills.
        alloc_free(&z, 0, Order(2));
        for t in threads {
            t.join().unwrap();
        }
        assert_whole(&z);
    });
}

/// A timer tick's decay of CPU 0's tuned high mark (the lists' lock, then the zone's, as a
/// drain takes them) while CPU 0's own calls raise it: two pages taken (a refill raises the
/// mark), then freed past the fixed mark (a drain). Whatever the order, the mark stays
/// within its bounds, and the lists end at or below it once the decay has run again.
#[test]
fn loom_decay_of_a_tuned_mark_races_the_cpus_refills_and_drains() {
    loom::model(|| {
        let z = built(config(1).with_pcp_high_max(8));
        let tick = on_another_thread(&z, |z| z.cpu(0).unwrap().decay_pcp_high());
        take_two_then_free(&z, 0);
        tick.join().unwrap();
        let cpu = z.cpu(0).unwrap();
        assert!((2..=8).contains(&cpu.pcp_high()), "{}", cpu.pcp_high());
        while cpu.decay_pcp_high() {}
        assert_eq!(cpu.pcp_high(), 2);
        assert!(z.pcp_pages(0).unwrap() <= 2);
        assert_whole(&z);
    });
}

#[test]
fn loom_two_cpus_free_the_same_page() {
    loom::model(|| {
        let z = zone(2);
        let page = z.alloc_pages(0, O0).unwrap();
        // SAFETY: see the module docs.
        let other = on_another_thread(&z, move |z| unsafe { z.put_page(1, page) });
        // SAFETY: see the module docs.
        let mine = unsafe { z.put_page(0, page) };
        let theirs = other.join().unwrap();
        let double = Err(FreeError::DoubleFree(page));
        assert!(
            (mine.is_ok() && theirs == double) || (theirs.is_ok() && mine == double),
            "{mine:?} {theirs:?}"
        );
        assert_whole(&z);
    });
}

#[test]
fn loom_two_cpus_free_the_same_run() {
    loom::model(|| {
        let z = zone(2);
        let run = z.alloc_pages(0, Order(1)).unwrap();
        z.split_page(run, Order(1)).unwrap();
        // SAFETY: see the module docs.
        let other = on_another_thread(&z, move |z| unsafe { z.free_contig_range(1, run, 2) });
        // SAFETY: see the module docs.
        let mine = unsafe { z.free_contig_range(0, run, 2) };
        let theirs = other.join().unwrap();
        assert!(mine.is_ok() != theirs.is_ok(), "{mine:?} {theirs:?}");
        assert_whole(&z);
    });
}

#[test]
fn loom_slow_path_drains_the_other_cpus_lists_and_retries() {
    loom::model(|| {
        let z = zone(2);
        // CPU 0 refills its list (two frames) and frees its page back onto it; it finds
        // nothing if CPU 1 took the whole zone first.
        let owner = on_another_thread(&z, move |z| match z.alloc_pages(0, O0) {
            // SAFETY: see the module docs.
            Ok(p) => unsafe { z.free_pages(0, p, O0) }.unwrap(),
            Err(e) => assert_eq!(e, AllocError::OutOfMemory(O0)),
        });
        // The whole zone: only there if the slow path drains CPU 0's list into the buddy,
        // and only while CPU 0 holds no page.
        let whole = Order(4);
        let first_try = z.alloc_pages(1, whole);
        owner.join().unwrap();
        let block = match first_try {
            Ok(p) => p,
            Err(e) => {
                assert_eq!(e, AllocError::OutOfMemory(whole));
                z.alloc_pages(1, whole)
                    .expect("the slow path drains and retries")
            }
        };
        // SAFETY: see the module docs.
        unsafe { z.free_pages(1, block, whole) }.unwrap();
        assert_whole(&z);
    });
}

/// A `put_page` whose reference drop is a plain load and store instead of a
/// compare-and-swap: what the frame word protocol exists to prevent.
fn put_page_load_store(z: &LoomZone, cpu: usize, pfn: Pfn) -> bool {
    let m = z.map();
    let idx = m.index(pfn).unwrap();
    let w = m.frame(idx).load();
    if !w.is_live() {
        return false;
    }
    m.frame(idx).store(w.freeing());
    z.free_block(z.pcp(cpu).unwrap(), idx, Order(w.order()), 1);
    true
}

/// The negative control: with the load+store drop, two CPUs freeing the same page can both
/// free it, and the model must find that interleaving (the page is then on two lists).
#[test]
#[should_panic]
fn loom_load_store_reference_drop_frees_a_page_twice() {
    loom::model(|| {
        let z = zone(2);
        let page = z.alloc_pages(0, O0).unwrap();
        let other = on_another_thread(&z, move |z| put_page_load_store(z, 1, page));
        let mine = put_page_load_store(&z, 0, page);
        let theirs = other.join().unwrap();
        assert!(mine != theirs, "both CPUs freed the page");
        assert_whole(&z);
    });
}

/// A cooperative scheduler's `cond_resched`: a point where loom may run another thread, as
/// zero-core calls it before every batch of a clear.
struct LoomResched;

impl Resched for LoomResched {
    fn cond_resched(&mut self) {
        thread::yield_now();
    }
}

/// The 16 frames' memory, which starts out not zero.
#[repr(C, align(4096))]
struct Page([u8; 4096]);

/// A verifying clearer over `ram`, which backs frames `START..START + 16`.
fn clearer(ram: &mut [Page]) -> FrameClearer<OffsetMap> {
    // SAFETY: frame START + i is ram[i]; the threads reach it only through the zone's
    // owners, and the final checks read it after every thread joined.
    let memory = unsafe { OffsetMap::with_frame_at(START, ram.as_mut_ptr().cast()) };
    let memory = memory.expect("a page-aligned buffer");
    FrameClearer::detected(memory).verifying()
}

fn ram() -> Vec<Page> {
    (0..16).map(|_| Page([0xA5; 4096])).collect()
}

/// Writes a byte into every page of a block its caller holds, through the clearer's map.
fn scribble(c: &FrameClearer<OffsetMap>, pfn: Pfn, order: Order) {
    use crate::memory::FrameMemory;
    for k in 0..order.pages() {
        let p = c.memory().frame_ptr(Pfn(pfn.0 + k)).unwrap();
        // SAFETY: the caller holds the block; the page is mapped (OffsetMap over `ram`).
        unsafe { p.as_ptr().add(123).write_volatile(0x5A) };
    }
}

/// Every free block the zone knows to be zero reads zero (after every thread joined).
fn assert_known_zero_reads_zero(z: &LoomZone, c: &FrameClearer<OffsetMap>) {
    for (pfn, order, _) in z.free_blocks() {
        if z.frame(pfn).unwrap().zeroed {
            assert_eq!(
                c.reads_zero(pfn, order),
                Ok(true),
                "known zero at {pfn} is not"
            );
        }
    }
}

/// One CPU allocates a zeroed page (the verifying clearer checks it reads zero if it was
/// known zero), writes it and frees it, then does the same with a plain page, while the
/// other runs background zeroing over the zone.
fn allocate_while_zeroing(zero: fn(&LoomZone, &FrameClearer<OffsetMap>)) {
    loom::model(move || {
        let mut ram = ram();
        let c = Arc::new(clearer(&mut ram));
        let z = zone(2);
        let zeroer = {
            let (z, c) = (z.clone(), c.clone());
            thread::spawn(move || zero(&z, &c))
        };
        let p = z.alloc_zeroed(0, O0, &c, None, &mut NoResched).unwrap();
        assert_eq!(c.reads_zero(p, O0), Ok(true));
        scribble(&c, p, O0);
        // SAFETY: see the module docs.
        unsafe { z.free_pages(0, p, O0) }.unwrap();
        let q = z.alloc_pages(0, O0).unwrap();
        scribble(&c, q, O0);
        // SAFETY: see the module docs.
        unsafe { z.free_pages(0, q, O0) }.unwrap();
        zeroer.join().unwrap();
        assert_known_zero_reads_zero(&z, &c);
        // Known-zero blocks and others do not merge: zero the rest, and all are one again.
        z.drain_all();
        z.zero_some(16, &c, &mut NoResched).unwrap();
        assert_known_zero_reads_zero(&z, &c);
        assert_whole(&z);
        drop(ram);
    });
}

#[test]
fn loom_background_zeroing_races_allocation_and_free() {
    // Two rounds of a quarter of the zone: what is being cleared is out of reach meanwhile,
    // so a round never takes all of it.
    allocate_while_zeroing(|z, c| {
        for _ in 0..2 {
            z.zero_some(4, c, &mut LoomResched).unwrap();
        }
    });
}

/// `zero_some` with its two steps swapped: the block goes back known zero first and is
/// cleared after, while another CPU may already hold it. What taking the block off its list
/// for the clear exists to prevent.
fn zero_some_marking_first(z: &LoomZone, c: &FrameClearer<OffsetMap>) {
    let m = z.map();
    let Some((idx, order)) = z.lock_zone().take_unzeroed(m, Order(2)) else {
        return;
    };
    z.lock_zone().free_one_page(m, idx, order, true);
    // The block may be another CPU's by now: the bug this control plants.
    c.clear_run(m.pfn(idx), order.pages(), None, &mut LoomResched)
        .unwrap();
}

/// The negative control: marking before the clear finishes lets a zeroed allocation take a
/// block that does not read zero yet (the verifying clearer reports it), or lets the late
/// clear wipe a page its holder wrote; loom must find that interleaving.
#[test]
#[should_panic(expected = "StaleZero")]
fn loom_marking_zero_before_the_clear_hands_out_dirty_memory() {
    allocate_while_zeroing(zero_some_marking_first);
}

/// Free page reporting on the other CPU: a registration (order 2, two blocks a round, the
/// discard zeroing) and a report of 4 frames (the smallest free block, whole), whose sink
/// discards each block as a host does (the memory reads zero afterwards). Blocks go back
/// known zero.
fn report_discarding(z: &LoomZone, c: &FrameClearer<OffsetMap>) {
    use crate::report_sink::{PageReporting, ReportedBlock};
    let reporting = PageReporting::new(Order(2))
        .with_capacity(2)
        .discard_zeroes(true);
    z.register_page_reporting(reporting).unwrap();
    let mut discard = |blocks: &[ReportedBlock]| {
        for b in blocks {
            c.clear_run(b.pfn, b.order.pages(), None, &mut LoomResched)
                .unwrap();
        }
        true
    };
    z.report_free_pages(4, &mut discard).unwrap();
}

/// One CPU allocates a page, writes it, and reads its write back before it frees it, then
/// allocates a zeroed page (the verifying clearer checks it reads zero if it was known
/// zero), while the other reports free pages to a sink that discards them: a discard may
/// never reach a page someone holds, and what goes back known zero must read zero.
fn allocate_while_reporting(report: fn(&LoomZone, &FrameClearer<OffsetMap>)) {
    // The held block's allocation and free take the model past loom's default 1000 branches.
    let mut model = loom::model::Builder::new();
    model.max_branches = 4000;
    model.check(move || {
        let mut ram = ram();
        let c = Arc::new(clearer(&mut ram));
        let z = zone(2);
        // Frames 0..4 held: the free memory is a block of 4 frames and one of 8, so that a
        // report (of whole blocks) leaves the allocation a block to take.
        let held = z.alloc_pages(0, Order(2)).unwrap();
        let reporter = {
            let (z, c) = (z.clone(), c.clone());
            thread::spawn(move || report(&z, &c))
        };
        let p = z.alloc_pages(0, O0).unwrap();
        scribble(&c, p, O0);
        thread::yield_now();
        assert!(scribbled(&c, p), "a discard reached the held page {p}");
        // SAFETY: see the module docs.
        unsafe { z.free_pages(0, p, O0) }.unwrap();
        let q = z.alloc_zeroed(0, O0, &c, None, &mut NoResched).unwrap();
        assert_eq!(c.reads_zero(q, O0), Ok(true));
        // SAFETY: see the module docs.
        unsafe { z.free_pages(0, q, O0) }.unwrap();
        reporter.join().unwrap();
        // SAFETY: see the module docs.
        unsafe { z.free_pages(0, held, Order(2)) }.unwrap();
        assert_known_zero_reads_zero(&z, &c);
        z.drain_all();
        z.zero_some(16, &c, &mut NoResched).unwrap();
        assert_whole(&z);
        drop(ram);
    });
}

/// Whether the page at `pfn` still has [`scribble`]'s byte.
fn scribbled(c: &FrameClearer<OffsetMap>, pfn: Pfn) -> bool {
    use crate::memory::FrameMemory;
    let p = c.memory().frame_ptr(pfn).unwrap();
    // SAFETY: the caller holds the page; the page is mapped (OffsetMap over `ram`).
    unsafe { p.as_ptr().add(123).read_volatile() == 0x5A }
}

#[test]
fn loom_free_page_reporting_races_allocation_and_free() {
    allocate_while_reporting(report_discarding);
}

/// Reporting without taking the block off its list: it is found under the zone lock and
/// discarded with the lock released, while another CPU may allocate and write a page of
/// it meanwhile. What taking the blocks off the lists for the sink exists to prevent.
fn report_in_place(z: &LoomZone, c: &FrameClearer<OffsetMap>) {
    let m = z.map();
    let found = {
        let free = z.lock_zone();
        (2..=4).find_map(|o| {
            free.lists()[o as usize][..3]
                .iter()
                .find_map(|l| l.head())
                .map(|i| (i, Order(o)))
        })
    };
    if let Some((idx, order)) = found {
        c.clear_run(m.pfn(idx), order.pages(), None, &mut LoomResched)
            .unwrap();
    }
}

/// The negative control: a block reported in place can be allocated and written while the
/// sink discards it; loom must find the interleaving where the discard wipes the page its
/// holder wrote.
#[test]
#[should_panic(expected = "a discard reached the held page")]
fn loom_reporting_without_taking_the_block_is_caught() {
    allocate_while_reporting(report_in_place);
}

/// CPU `cpu` of `z` with CPU-local lists ([`Zone::local_cpu`]): under loom each list is
/// still reached through `try_lock`, which panics when two contexts meet on one CPU's lists.
fn local_cpu(
    z: &LoomZone,
    cpu: usize,
) -> crate::zone::cpu::LocalCpu<'_, Vec<Frame>, Vec<PerCpu>, crate::sync::DefaultRawMutex> {
    // SAFETY: each model below makes a CPU's handle on one thread only (but the negative
    // control, which breaks the contract on purpose and expects the panic that reports it),
    // and visits every CPU's lists only after joining the other threads.
    unsafe { z.local_cpu(cpu) }.unwrap()
}

/// An allocation and its free through CPU `cpu`'s local handle.
fn local_alloc_free(z: &LoomZone, cpu: usize, order: Order) {
    let cpu = local_cpu(z, cpu);
    let p = cpu
        .alloc_raw(crate::request::AllocRequest::order(order))
        .unwrap();
    // SAFETY: see the module docs.
    unsafe { cpu.free_pages(p, order) }.unwrap();
}

/// CPU-local lists: two CPUs allocating and freeing on their own lists, a remote free onto
/// CPU 1's list of a page CPU 0 allocated, and CPU 1's allocation slow path, which must
/// drain only CPU 1's lists (touching CPU 0's while CPU 0 is inside would panic here).
#[test]
fn loom_cpu_local_lists_never_reach_another_cpus_lists() {
    loom::model(|| {
        let z = zone(2);
        let page = local_cpu(&z, 0)
            .alloc_raw(crate::request::AllocRequest::page())
            .unwrap();
        let other = on_another_thread(&z, move |z| {
            let cpu = local_cpu(z, 1);
            // SAFETY: see the module docs.
            unsafe { cpu.put_page(page) }.unwrap();
            let whole = Order(4);
            match cpu.alloc_raw(crate::request::AllocRequest::order(whole)) {
                // SAFETY: see the module docs.
                Ok(p) => unsafe { cpu.free_pages(p, whole) }.unwrap(),
                Err(e) => assert_eq!(e, AllocError::OutOfMemory(whole)),
            }
        });
        local_alloc_free(&z, 0, O0);
        other.join().unwrap();
        assert_whole(&z);
    });
}

/// The negative control: two threads naming the same CPU at once break the contract of
/// CPU-local lists, and the model must find the interleaving where they meet on its lists.
#[test]
#[should_panic]
fn loom_two_contexts_on_one_cpus_local_lists_are_caught() {
    loom::model(|| {
        let z = zone(2);
        let other = on_another_thread(&z, move |z| local_alloc_free(z, 0, O0));
        local_alloc_free(&z, 0, O0);
        other.join().unwrap();
    });
}

/// Two frozen pages taken and freed on `cpu` (with `pcp_high` 2, the second free drains).
fn frozen_pair(z: &LoomZone, cpu: usize) {
    let c = z.cpu(cpu).unwrap();
    let a = c.alloc_frozen_page().unwrap();
    let b = c.alloc_frozen_page().unwrap();
    // SAFETY: see the module docs.
    unsafe { c.free_frozen_page(a) }.unwrap();
    // SAFETY: as above.
    unsafe { c.free_frozen_page(b) }.unwrap();
}

/// Frozen pages on one CPU (their frees write the page's word without a compare-and-swap)
/// racing refills, drains and merges of their buddies on another CPU, and a frozen block of
/// order 1 freed on another CPU than its allocation: nothing is lost and the zone is whole
/// again.
#[test]
fn loom_frozen_blocks_race_other_cpus_refills_drains_and_merges() {
    loom::model(|| {
        let z = zone(2);
        let block = z.cpu(0).unwrap().alloc_frozen_pages(Order(1)).unwrap();
        let other = on_another_thread(&z, move |z| {
            alloc_free(z, 1, Order(1));
            // SAFETY: see the module docs (this thread frees the block the main one handed
            // it).
            unsafe { z.cpu(1).unwrap().free_frozen_pages(block, Order(1)) }.unwrap();
        });
        frozen_pair(&z, 0);
        other.join().unwrap();
        assert_whole(&z);
    });
}

/// The negative control of [`Cpu::free_frozen_page`](crate::Cpu::free_frozen_page)'s
/// contract (a frozen page is freed by one call): its free checks the word and writes it
/// without a compare-and-swap, so two CPUs freeing one frozen page at once can both
/// succeed, and the model must find that interleaving (the page then sits on two lists).
#[test]
#[should_panic(expected = "both CPUs freed the frozen page")]
fn loom_two_frees_of_one_frozen_page_at_once_are_not_caught() {
    loom::model(|| {
        let z = zone(2);
        let page = z.cpu(0).unwrap().alloc_frozen_page().unwrap();
        // SAFETY: breaks the contract on purpose; the zone's memory is never written.
        let other = on_another_thread(&z, move |z| unsafe {
            z.cpu(1).unwrap().free_frozen_page(page).is_ok()
        });
        // SAFETY: as above.
        let mine = unsafe { z.cpu(0).unwrap().free_frozen_page(page) }.is_ok();
        let theirs = other.join().unwrap();
        assert!(mine != theirs, "both CPUs freed the frozen page");
        assert_whole(&z);
    });
}

/// 16 frames of which only the first 4 are initialized when added: 12 deferred.
fn deferred_zone() -> Arc<LoomZone> {
    let z = built(ZoneConfig {
        eager_pages: 4,
        ..config(2)
    });
    assert_eq!(z.deferred_pages(), 12);
    z
}

/// An allocation that needs deferred memory, split and freed page by page: every frame
/// word it meets is what the allocator made it.
fn alloc_split_free(z: &LoomZone, cpu: usize) {
    let o3 = Order(3);
    let p = z.alloc_pages(cpu, o3).unwrap();
    z.split_page(p, o3).unwrap();
    // SAFETY: see the module docs.
    unsafe { z.free_contig_range(cpu, p, 8) }.unwrap();
}

/// Background initialization racing an allocation that needs the deferred memory: the
/// allocation never fails for want of memory another CPU is initializing (its slow path
/// initializes a chunk itself or waits for the one in flight), and nothing is lost.
#[test]
fn loom_deferred_init_races_an_allocation_that_needs_it() {
    loom::model(|| {
        let z = deferred_zone();
        let init = on_another_thread(&z, move |z| z.init_deferred(u64::MAX));
        alloc_split_free(&z, 0);
        init.join().unwrap();
        assert_eq!(z.deferred_pages(), 0);
        assert_whole(&z);
    });
}

/// An `init_deferred` that frees the chunk's blocks into the buddy first and writes their
/// tails after releasing the lock: what taking the chunk off the list before publishing it
/// exists to prevent.
fn init_deferred_publish_first(z: &LoomZone) {
    let m = z.map();
    let Some((chunk, zeroed)) = z.lock_zone().take_deferred(u64::MAX) else {
        return;
    };
    let blocks = || {
        crate::decompose::decompose(
            m.pfn(chunk.start),
            u64::from(chunk.end - chunk.start),
            z.cfg.max_order,
        )
        .unwrap()
    };
    {
        let mut free = z.lock_zone();
        for (head, order) in blocks() {
            free.free_one_page(m, m.index_of(head), order, zeroed);
        }
        free.finish_deferred(&chunk);
    }
    m.init_tails(blocks());
}

/// The negative control: publishing a chunk before its frames are written lets an
/// allocation split it and then see its pages overwritten, and the model must find that.
#[test]
#[should_panic]
fn loom_deferred_chunk_published_before_its_frames_is_caught() {
    loom::model(|| {
        let z = deferred_zone();
        let init = on_another_thread(&z, move |z| init_deferred_publish_first(z));
        let o3 = Order(3);
        if let Ok(p) = z.alloc_pages(1, o3) {
            z.split_page(p, o3).unwrap();
            // Let the late tail writes land first in some interleavings.
            loom::thread::yield_now();
            // SAFETY: see the module docs.
            unsafe { z.free_contig_range(1, p, 8) }.unwrap();
        }
        init.join().unwrap();
        assert_whole(&z);
    });
}

/// 8 frames in pageblocks of two, two CPUs: room for compaction to move a page up; fully
/// proactive, so background compaction runs at any fragmentation.
fn mobile_zone() -> Arc<LoomZone> {
    let cfg = ZoneConfig {
        max_order: Order(3),
        pageblock_order: Order(1),
        cpus: 2,
        pcp_high: 2,
        pcp_high_max: 0,
        pcp_batch: 1,
        compaction_proactiveness: 100,
        ..ZoneConfig::new(START, 8)
    };
    built(cfg)
}

/// Where each movable page's "mapping" says it is, by key: what the owner frees through and
/// the migrate callback repoints, under the owner's lock (a page table lock).
type Mappings = Arc<loom::sync::Mutex<[Pfn; 3]>>;

/// The owner frees the page of `key` through its mapping: a page being moved is frozen
/// (the free fails with `Frozen` and changes nothing), so it lets the move finish and
/// frees the page where the mapping then says.
fn owner_frees(z: &LoomZone, maps: &Mappings, key: usize) {
    loop {
        let at = maps.lock().unwrap();
        // SAFETY: the owner holds the page its mapping names, and uses it no more.
        match unsafe { z.free_pages(1, at[key], O0) } {
            Ok(()) => return,
            Err(FreeError::Frozen(_)) => {
                drop(at);
                thread::yield_now();
            }
            Err(e) => panic!("the owner's free of key {key} failed: {e}"),
        }
    }
}

/// Compaction on CPU 0 (`compact`: how it moves pages) while the owner on CPU 1 allocates a
/// second movable page and frees both through their mappings.
/// How a model moves pages: the real compaction, or the negative control's.
type Compactor = fn(&LoomZone, &mut dyn FnMut(&crate::migrate::Migration) -> bool);

fn compaction_races_the_owner(compact: Compactor) {
    loom::model(move || {
        let z = mobile_zone();
        // A movable page at the bottom (key 1, for compaction to move) and one at the top
        // (key 0: its pageblock is then a target, not a whole free one).
        let (first, top) = (START, Pfn(START.0 + 7));
        for (pfn, key) in [(first, 1), (top, 0)] {
            z.alloc_pages_at_as(pfn, O0, crate::migratetype::MigrateType::Movable)
                .unwrap();
            let head = z.map().frame(z.map().index_of(pfn));
            let w = head.load();
            head.set_key(key);
            head.store(w);
        }
        let maps: Mappings = Arc::new(loom::sync::Mutex::new([top, first, Pfn(0)]));
        let owner = {
            let (z, maps) = (z.clone(), maps.clone());
            thread::spawn(move || {
                let second = z.alloc_movable(1, O0, 2).unwrap();
                maps.lock().unwrap()[2] = second;
                owner_frees(&z, &maps, 1);
                owner_frees(&z, &maps, 2);
            })
        };
        let mut repoint = |m: &crate::migrate::Migration| {
            let mut at = maps.lock().unwrap();
            // The key 2 page may move before the owner recorded it: then it is not moved.
            if at[m.key as usize] != m.from {
                return false;
            }
            at[m.key as usize] = m.to;
            true
        };
        compact(&z, &mut repoint);
        owner.join().unwrap();
        let top = maps.lock().unwrap()[0];
        // SAFETY: the model's page, never used.
        unsafe { z.free_pages(0, top, O0) }.unwrap();
        assert_whole(&z);
    });
}

#[test]
fn loom_compaction_races_the_owners_free_and_allocation() {
    compaction_races_the_owner(|z, migrate| {
        z.compact_some(0, 16, &mut { migrate }).unwrap();
    });
}

/// Background compaction (`compact_work`, proactive here) is the same moves through the
/// same freeze: the negative control below is its too.
#[test]
fn loom_background_compaction_races_the_owners_free_and_allocation() {
    compaction_races_the_owner(|z, migrate| {
        let work = z.compact_work(0, 16, &mut { migrate }, &mut |_| 0).unwrap();
        // Proactiveness 100 starts above a score of 15.
        assert!(work.reason.is_some() || work.score_before <= 15, "{work:?}");
    });
}

/// A move without freezing the source first: the owner's free can run while the callback
/// copies, and the source is then freed by both. What the freeze exists to prevent.
fn move_without_freezing(
    z: &LoomZone,
    migrate: &mut dyn FnMut(&crate::migrate::Migration) -> bool,
) {
    let m = z.map();
    let Some(src) = FrameIdx::span(FrameIdx(0), FrameIdx(8))
        .find(|&i| crate::mobility::compaction::is_movable(m.frame(i).load()))
    else {
        return;
    };
    let w = m.frame(src).load();
    let Some((dst, _)) = z.lock_zone().rmqueue(
        m,
        O0,
        crate::zone::buddy::Prefer::Unzeroed,
        crate::migratetype::MigrateType::Movable,
        crate::zone::config::Fallback::Any,
    ) else {
        return;
    };
    let key = m.frame(src).key();
    let job = crate::migrate::Migration {
        key,
        from: m.pfn(src),
        to: m.pfn(dst),
        order: O0,
    };
    if !migrate(&job) {
        z.lock_zone().free_one_page(m, dst, O0, false);
        return;
    }
    m.frame(dst).set_key(key);
    m.frame(dst).store(w);
    z.lock_zone().free_one_page(m, src, O0, false);
}

/// The negative control: loom must find the interleaving where the owner frees the source
/// before the unfrozen move frees it again (a block freed twice: the zone is corrupt, or a
/// page is lost).
#[test]
#[should_panic]
fn loom_a_move_without_freezing_frees_the_source_twice() {
    compaction_races_the_owner(move_without_freezing);
}

/// How the owner in [`a_held_movable_page_races_compaction`] takes and frees its page.
type Holder = fn(&LoomZone);

/// Unmovable pages at frames 3 and 6 of [`mobile_zone`]: free frames 2 and 7 in partly
/// used pageblocks are where compaction moves a page at frame 0 or 1 to.
const TARGETS_AT_2_AND_7: &[u64] = &[3, 6];

/// [`mobile_zone`] with unmovable pages at frames `taken`.
fn zone_with_pages_at(taken: &'static [u64]) -> Arc<LoomZone> {
    let z = mobile_zone();
    for at in taken {
        z.alloc_pages_at_as(
            Pfn(START.0 + at),
            O0,
            crate::migratetype::MigrateType::Unmovable,
        )
        .unwrap();
    }
    z
}

/// Frees the model's unmovable pages at frames `taken` and checks that the zone is whole
/// again.
fn free_the_models_pages(z: &LoomZone, taken: &[u64]) {
    for at in taken {
        // SAFETY: the model's pages, never used.
        unsafe { z.free_pages(0, Pfn(START.0 + at), O0) }.unwrap();
    }
    assert_whole(z);
}

/// Compaction on CPU 0 (every move agreed to, none of the held page's) while the owner on
/// CPU 1 takes a movable page, keeps it, and frees it through the frame number it was given
/// (`hold`).
fn a_held_movable_page_races_compaction(hold: Holder) {
    loom::model(move || {
        let z = zone_with_pages_at(TARGETS_AT_2_AND_7);
        // Frame 0 on CPU 1's list: the owner's page unless compaction drains it first.
        z.alloc_pages_at_as(START, O0, crate::migratetype::MigrateType::Movable)
            .unwrap();
        // SAFETY: just allocated, never used.
        unsafe { z.free_pages(1, START, O0) }.unwrap();
        let owner = {
            let z = z.clone();
            thread::spawn(move || hold(&z))
        };
        let mut agree = |m: &crate::migrate::Migration| {
            assert_ne!(m.key, 1, "the held page moved: {m:?}");
            true
        };
        z.compact_some(0, 16, &mut agree).unwrap();
        owner.join().unwrap();
        free_the_models_pages(&z, TARGETS_AT_2_AND_7);
    });
}

/// A [`Block`](crate::Block) of a movable page pins it from the allocation's store on: the
/// page is never moved, and the block frees it where it was allocated.
#[test]
fn loom_a_block_pins_its_movable_page_against_compaction() {
    a_held_movable_page_races_compaction(|z| {
        let cpu = z.cpu(1).unwrap();
        let block = cpu
            .alloc(crate::request::AllocRequest::page().movable(1))
            .unwrap();
        let w = z.map().frame(z.map().index_of(block.pfn())).load();
        assert_eq!(w.refcount(), 2, "a held movable page carries its pin");
        drop(block);
    });
}

/// The negative control: the page taken raw, with no pin, and freed through the frame
/// number it was allocated at. Loom must find the interleaving where compaction moves it
/// first (the free then fails on a frozen or free frame, or frees another's page): what a
/// movable `Block` did when it followed its page by key.
#[test]
#[should_panic]
fn loom_an_unpinned_movable_page_is_moved_under_its_holder() {
    a_held_movable_page_races_compaction(|z| {
        let cpu = z.cpu(1).unwrap();
        let at = cpu
            .alloc_raw(crate::request::AllocRequest::page().movable(1))
            .unwrap();
        // SAFETY: (broken on purpose) the owner frees where it was given the page, not
        // where a move took it.
        unsafe { cpu.free_pages(at, O0) }.unwrap();
    });
}

/// 8 frames in pageblocks of four, two CPUs, an unmovable page at frame 7, and the
/// order-1 block at frame 0 on CPU 1's list: the next movable order-1 block taken there is
/// frame 0's, and compaction moves it to frames 4-5.
fn run_zone() -> Arc<LoomZone> {
    let cfg = ZoneConfig {
        max_order: Order(3),
        pageblock_order: Order(2),
        cpus: 2,
        pcp_high: 2,
        pcp_high_max: 0,
        pcp_batch: 1,
        compaction_proactiveness: 100,
        ..ZoneConfig::new(START, 8)
    };
    let z = built(cfg);
    let movable = crate::migratetype::MigrateType::Movable;
    z.alloc_pages_at_as(
        Pfn(START.0 + 7),
        O0,
        crate::migratetype::MigrateType::Unmovable,
    )
    .unwrap();
    z.alloc_pages_at_as(START, Order(1), movable).unwrap();
    // SAFETY: just allocated, never used.
    unsafe { z.free_pages(1, START, Order(1)) }.unwrap();
    z
}

/// How the owner in [`a_movable_run_races_compaction`] allocates a movable run of two
/// pages on CPU 1.
type RunAllocator = fn(&LoomZone) -> Result<Pfn, AllocError>;

/// Compaction on CPU 0 while the owner on CPU 1 allocates a movable run of two pages
/// (`alloc`), records where they are, and frees them where its mapping says (the pages
/// may move once the allocation returns: the callback repoints the mapping; a page moved
/// before the owner recorded it is not moved).
fn a_movable_run_races_compaction(alloc: RunAllocator) {
    loom::model(move || {
        let z = run_zone();
        let maps: Mappings = Arc::new(loom::sync::Mutex::new([Pfn(0); 3]));
        let owner = {
            let (z, maps) = (z.clone(), maps.clone());
            thread::spawn(move || {
                let run = alloc(&z).unwrap();
                let mut at = maps.lock().unwrap();
                at[0] = run;
                at[1] = Pfn(run.0 + 1);
            })
        };
        let mut repoint = |m: &crate::migrate::Migration| {
            let mut at = maps.lock().unwrap();
            match at[..2].iter().position(|&p| p == m.from) {
                Some(i) if m.order == O0 => {
                    assert_eq!(m.key, 1, "a page of the run under another key");
                    at[i] = m.to;
                    true
                }
                _ => false,
            }
        };
        z.compact_some(0, 16, &mut repoint).unwrap();
        owner.join().unwrap();
        for key in 0..2 {
            owner_frees(&z, &maps, key);
        }
        // SAFETY: the model's page, never used.
        unsafe { z.free_pages(0, Pfn(START.0 + 7), O0) }.unwrap();
        assert_whole(&z);
    });
}

/// A movable run is pinned from the allocation's store until its block is split into
/// pages (and the pages past the run freed): no mover takes the block meanwhile, and the
/// call splits and frees exactly what it allocated.
#[test]
fn loom_a_movable_run_is_split_while_pinned() {
    a_movable_run_races_compaction(|z| {
        let cpu = z.cpu(1).unwrap();
        cpu.alloc_raw(crate::request::AllocRequest::frames(2).movable(1))
    });
}

/// The negative control: the run's block allocated without its pin, then split. Loom must
/// find the interleaving where compaction moves the block before the split: the split then
/// finds no block of its own and the allocation fails (its block leaked where it went).
#[test]
#[should_panic]
fn loom_an_unpinned_movable_run_is_moved_before_its_split() {
    a_movable_run_races_compaction(|z| {
        use crate::request::{HeadTag, Pin};
        let tag = HeadTag {
            key: 1,
            pin: Pin::None,
        };
        let (pcp, order) = (z.pcp(1)?, Order(1));
        let movable = crate::migratetype::MigrateType::Movable;
        let (idx, _) = z.alloc_preferring(
            pcp,
            order,
            crate::zone::buddy::Prefer::Unzeroed,
            movable,
            tag,
        )?;
        z.split_run(pcp, (idx, order, tag), 2)
    });
}

/// 16 frames in pageblocks of four, two CPUs, per-cpu batches of one block: what an offline
/// of the whole zone races.
fn hotplug_zone() -> Arc<LoomZone> {
    let cfg = ZoneConfig {
        max_order: Order(4),
        pageblock_order: Order(2),
        cpus: 2,
        pcp_high: 1,
        pcp_high_max: 0,
        pcp_batch: 1,
        ..ZoneConfig::new(START, 16)
    };
    built(cfg)
}

/// How a model takes the zone offline: the real `offline_range`, or the negative control's.
type Offliner = fn(&LoomZone) -> Result<u64, ContigError>;

/// CPU 1 allocates a page, frees it and allocates another, which it keeps, while CPU 0 takes
/// the whole zone offline. Either the offline wins (CPU 1 holds nothing: its allocations
/// found no memory) or it fails with a page CPU 1 holds (or held then) in its way, changing
/// nothing; never both an offline and a page of it handed out.
fn offline_races_allocation(offline: Offliner) {
    loom::model(move || {
        let z = hotplug_zone();
        let cpu1 = on_another_thread(&z, |z| {
            let first = z.alloc_pages(1, O0).ok()?;
            // SAFETY: see the module docs.
            unsafe { z.free_pages(1, first, O0) }.unwrap();
            z.alloc_pages(1, O0).ok()
        });
        let offlined = offline(&z);
        let held = cpu1.join().unwrap();
        match (offlined, held) {
            (Ok(_), Some(p)) => panic!("frame {p} was handed out from an offlined range"),
            (Ok(moved), None) => {
                assert_eq!(moved, 0);
                z.check().unwrap();
                assert_eq!(z.present_pages(), 0);
                z.add_memory(START, 16).unwrap();
            }
            (Err(ContigError::Busy(at)), Some(p)) => {
                assert_eq!(at, p, "the offline failed on a frame nobody holds");
                // SAFETY: see the module docs.
                unsafe { z.free_pages(1, p, O0) }.unwrap();
            }
            // CPU 1's first page, held while the offline looked and freed since: a transient
            // failure (the caller tries again), with nothing changed.
            (Err(ContigError::Busy(_)), None) => {}
            (Err(e), held) => panic!("the offline failed ({e}) with {held:?} held"),
        }
        assert_whole(&z);
    });
}

#[test]
fn loom_offline_races_allocation_and_free_on_another_cpu() {
    offline_races_allocation(|z| {
        let mut refuse = |_: &crate::migrate::Migration| false;
        z.offline_range(0, START, 16, &mut refuse)
    });
}

/// An offline that looks (every frame free) under the zone lock and then takes the frames
/// under it again, without isolating them in between: an allocation can take a frame
/// between the look and the take. What the isolation exists to prevent.
fn offline_without_isolating(z: &LoomZone) -> Result<u64, ContigError> {
    use crate::frame::{FrameState, Word};
    let m = z.map();
    z.drain_all();
    {
        let _look = z.lock_zone();
        if let Some((i, _)) = m
            .heads(FrameIdx(0), FrameIdx(16))
            .find(|(_, w)| w.state() != FrameState::Buddy)
        {
            return Err(ContigError::Busy(m.pfn(i)));
        }
    }
    let mut free = z.lock_zone();
    for (i, w) in m.heads(FrameIdx(0), FrameIdx(16)) {
        if w.state() == FrameState::Buddy {
            free.remove(m, i, Order(w.order()));
        }
        for j in FrameIdx::span(i, i + (1 << w.order())) {
            m.frame(j).store(Word::RESERVED);
        }
    }
    free.remove_added(&(FrameIdx(0)..FrameIdx(16)));
    Ok(0)
}

/// The negative control: loom must find the interleaving where CPU 1 allocates between the
/// look and the take, and then holds a frame of the offlined range.
#[test]
#[should_panic(expected = "handed out from an offlined range")]
fn loom_an_offline_without_isolation_hands_out_an_offlined_frame() {
    offline_races_allocation(offline_without_isolating);
}

/// How a model reserves the upper half of the zone for CMA: the real `reserve_cma_at`, or
/// the negative control's.
type Reserver = fn(&LoomZone) -> Result<crate::cma::CmaArea, ContigError>;

/// With the zone's lower half allocated, CPU 1 allocates an unmovable page (from the upper
/// half) and keeps it, while CPU 0 reserves the upper half for CMA. Either may win, but an
/// unmovable page never sits inside a reservation: the reservation fails on CPU 1's page,
/// or CPU 1's allocation finds no memory.
fn reservation_races_allocation(reserve: Reserver) {
    loom::model(move || {
        let z = hotplug_zone();
        let lower = Order(3);
        z.alloc_pages_at_as(START, lower, crate::migratetype::MigrateType::Unmovable)
            .unwrap();
        let cpu1 = on_another_thread(&z, |z| z.alloc_pages(1, O0).ok());
        let reserved = reserve(&z);
        let held = cpu1.join().unwrap();
        if let (Ok(area), Some(p)) = (reserved, held) {
            assert!(
                !area.contains(p, 1),
                "an unmovable page at {p} inside the reservation"
            );
        }
        if let Some(p) = held {
            // SAFETY: see the module docs.
            unsafe { z.free_pages(1, p, O0) }.unwrap();
        }
        // SAFETY: the model's block, never used.
        unsafe { z.free_pages(0, START, lower) }.unwrap();
        z.drain_all();
        z.check().unwrap();
        let reserved_frames = z.stats().cma_reserved;
        assert_eq!(reserved_frames, if reserved.is_ok() { 8 } else { 0 });
    });
}

#[test]
fn loom_a_cma_reservation_races_an_unmovable_allocation() {
    reservation_races_allocation(|z| {
        let mut refuse = |_: &crate::migrate::Migration| false;
        z.reserve_cma_at(0, Pfn(START.0 + 8), 8, &mut refuse)
    });
}

/// A reservation that looks (every frame free) and then marks the pageblocks, without
/// taking the range first: an allocation can take a frame between the look and the mark,
/// and then holds an unmovable page inside the reservation. What taking the range (as
/// `alloc_contig_range` does, under isolation) exists to prevent.
fn reserve_without_taking(z: &LoomZone) -> Result<crate::cma::CmaArea, ContigError> {
    use crate::frame::FrameState;
    use crate::migratetype::{MigrateType, Pageblock};
    let m = z.map();
    let range = FrameIdx(8)..FrameIdx(16);
    z.drain_all();
    {
        let _look = z.lock_zone();
        if let Some((i, _)) = m
            .heads(range.start, range.end)
            .find(|(_, w)| w.state() != FrameState::Buddy)
        {
            return Err(ContigError::Busy(m.pfn(i)));
        }
    }
    let mut free = z.lock_zone();
    let reserved = Pageblock {
        cma: true,
        ..Pageblock::of(MigrateType::Movable)
    };
    for block in m.pageblocks(range) {
        free.set_pageblock(m, block.start, reserved);
    }
    free.add_cma_reserved(8);
    Ok(crate::cma::CmaArea::new(Pfn(START.0 + 8), 8))
}

/// The negative control: loom must find the interleaving where CPU 1 allocates between the
/// look and the mark.
#[test]
#[should_panic(expected = "inside the reservation")]
fn loom_a_reservation_without_taking_the_range_is_caught() {
    reservation_races_allocation(reserve_without_taking);
}

/// page_owner's records are written by the allocating CPU and read by a dump on another,
/// without a lock: a record read live carries the fields written before it was published.
fn page_owner_publication(publish: crate::sync::Ordering) {
    use crate::migratetype::MigrateType;
    use crate::page_owner::OwnerRecord;
    loom::model(move || {
        let record = Arc::new(OwnerRecord::new());
        let writer = {
            let record = record.clone();
            thread::spawn(move || record.publish(O0, MigrateType::Movable, (1, 7, 3), publish))
        };
        if let Some(b) = record.read(START) {
            assert_eq!(
                (b.tag, b.seq, b.cpu),
                (7, 3, 1),
                "a live record with stale fields"
            );
        }
        writer.join().unwrap();
        assert_eq!(record.read(START).map(|b| b.tag), Some(7));
    });
}

#[test]
fn loom_page_owner_records_are_read_whole() {
    page_owner_publication(crate::sync::Ordering::Release);
}

/// The negative control: published with a relaxed store, a reader may see the record live
/// with the fields of before.
#[test]
#[should_panic(expected = "stale fields")]
fn loom_page_owner_records_published_relaxed_are_caught() {
    page_owner_publication(crate::sync::Ordering::Relaxed);
}

/// Two CPUs allocate while fault injection is armed to fail once: exactly one of them
/// fails, out of memory, the zone unchanged by it.
#[test]
fn loom_fault_injection_fails_as_many_calls_as_told_across_cpus() {
    use crate::fail_page_alloc::FailPageAlloc;
    loom::model(|| {
        let z = zone(2);
        z.set_fail_page_alloc(Some(FailPageAlloc::new(1).times(1)));
        let other = on_another_thread(&z, |z| z.alloc_pages(1, O0));
        let mine = z.alloc_pages(0, O0);
        let theirs = other.join().unwrap();
        let failed = [mine, theirs]
            .iter()
            .filter(|r| **r == Err(AllocError::OutOfMemory(O0)))
            .count();
        assert_eq!(failed, 1);
        assert_eq!(z.injected_failures(), 1);
        for (cpu, r) in [(0, mine), (1, theirs)] {
            if let Ok(p) = r {
                // SAFETY: see the module docs.
                unsafe { z.free_pages(cpu, p, O0) }.unwrap();
            }
        }
        assert_whole(&z);
    });
}

/// The negative control: a decision that reads the failures left under the lock and takes
/// one off in a second critical section lets both CPUs fail a call armed to fail once.
#[test]
#[should_panic(expected = "both CPUs failed")]
fn loom_fault_injection_deciding_in_two_critical_sections_is_caught() {
    use crate::fail_page_alloc::FailPageAlloc;
    loom::model(|| {
        let z = zone(2);
        z.set_fail_page_alloc(Some(FailPageAlloc::new(1).times(1)));
        let other = on_another_thread(&z, |z| decide_split_for_loom(z));
        let mine = decide_split_for_loom(&z);
        let theirs = other.join().unwrap();
        assert!(!(mine && theirs), "both CPUs failed");
    });
}

/// The loom model's negative control: fault injection's decision for an order-0 call with
/// the failures left read in one critical section and taken off in another (what the one
/// critical section of [`FaultInjection::decide`] prevents).
fn decide_split_for_loom<F, P, R>(zone: &Zone<F, P, R>) -> bool
where
    F: FrameStorage,
    P: crate::zone::per_cpu_set::PerCpuSet<R>,
    R: lock_api::RawMutex,
{
    let left = zone.fault.state.lock().0.and_then(|a| a.attr.times);
    if left == Some(0) {
        return false;
    }
    let mut state = zone.fault.state.lock();
    if let Some(Some(t)) = state.0.as_mut().map(|a| a.attr.times.as_mut()) {
        *t = t.saturating_sub(1);
    }
    state.1 += 1;
    true
}
