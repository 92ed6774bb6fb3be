//! The global allocator through ArceOS's axalloc interface, on host memory: what ArceOS's
//! modules ask of it (the heap growing by doubling past 16 MiB, page runs with alignments
//! 4 KiB..2 MiB, parts of runs freed, fixed-address runs, zeroed pages, usage counts), bad
//! input refused without a change, random churn against a model, and several CPUs at once.

use axalloc_buddy::{CpuId, ExclusiveCpu, GlobalAllocator, InitError, Pinned, UsageKind};
use core::alloc::Layout;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

#[path = "support/bytes.rs"]
mod bytes;
use bytes::all_bytes_are;

const PAGE: usize = 4096;

/// Zeroed, page-aligned memory for an allocator, given back when dropped (after the
/// allocator over it: declare it first).
struct Region {
    at: *mut u8,
    layout: Layout,
}

impl Region {
    fn start(&self) -> usize {
        self.at as usize
    }

    fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether address `p` lies in the region.
    fn holds(&self, p: usize) -> bool {
        (self.start()..self.start() + self.len()).contains(&p)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `region` allocated `at` with this layout.
        unsafe { std::alloc::dealloc(self.at, self.layout) };
    }
}

/// `bytes` of zeroed, page-aligned memory.
fn region(bytes: usize) -> Region {
    aligned_region(bytes, PAGE)
}

/// `bytes` of zeroed memory aligned to `align` bytes (a power of two, at least a page): for a
/// test that needs the zone's blocks at known places, where a page-aligned region's blocks
/// fall wherever the host's allocator put it (under Miri, a random address).
fn aligned_region(bytes: usize, align: usize) -> Region {
    let layout = Layout::from_size_align(bytes, align).unwrap();
    // SAFETY: the layout's size is not zero (every caller asks for pages).
    let at = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!at.is_null(), "{bytes} bytes");
    Region { at, layout }
}

/// An allocator over a fresh region of `bytes` (the region first: it outlives the
/// allocator when both are bound in this order).
fn allocator(bytes: usize) -> (Region, GlobalAllocator) {
    let r = region(bytes);
    let a = GlobalAllocator::new();
    // SAFETY: the region is the allocator's alone; it outlives the allocator.
    unsafe { a.try_init(r.start(), r.len()) }.unwrap();
    (r, a)
}

/// [`allocator`] with lists for `cpus` CPUs, each thread's CPU its [`thread_cpu`].
/// (A function pointer: the `CpuId` the tests call through.)
fn allocator_for_cpus(bytes: usize, cpus: usize) -> (Region, GlobalAllocator<fn() -> usize>) {
    let r = region(bytes);
    let a = GlobalAllocator::with_cpu_id(thread_cpu as fn() -> usize);
    // SAFETY: the region is the allocator's alone; it outlives the allocator.
    unsafe { a.try_init_for_cpus(r.start(), r.len(), cpus) }.unwrap();
    (r, a)
}

/// Gives back `pages` pages from `at` to `a`.
fn give_back(a: &GlobalAllocator<impl CpuId>, at: usize, pages: usize, kind: UsageKind) {
    // SAFETY: the tests give back runs they took from `a` and no longer use, or (in
    // `bad_calls_change_nothing`) runs the allocator refuses: freed already, never handed
    // out, outside its zone, which its zone checks frame by frame before freeing anything.
    unsafe { a.dealloc_pages(at, pages, kind) }
}

/// Gives back `p`, allocated from `a`'s heap with `layout`.
fn give_back_bytes(a: &GlobalAllocator<impl CpuId>, p: core::ptr::NonNull<u8>, layout: Layout) {
    // SAFETY: the tests give back what they allocated from `a` with this layout, once, and
    // use it no more.
    unsafe { a.dealloc(p, layout) }
}

/// The zone's own check, between calls (no page call runs while it reads the per-cpu lists).
fn zone_is_sound(a: &GlobalAllocator<impl CpuId>) {
    // SAFETY: the tests call this between their page calls, never during one.
    let zone = unsafe { a.zone() }.expect("initialized");
    zone.check().unwrap();
    // SAFETY: as above.
    for zone in unsafe { a.zones() } {
        zone.check().unwrap();
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "64 MiB of memory: an hour under Miri; the growth logic runs in the others"
)]
fn the_heap_grows_by_doubling_past_the_largest_block() {
    // 64 MiB: the heap grows 32 KiB, 64 KiB, ... 16 MiB, 32 MiB; past 4 MiB (the zone's
    // largest block) each step is a run found anywhere in the zone.
    let (_region, a) = allocator(64 << 20);
    let mut v: Vec<(core::ptr::NonNull<u8>, Layout)> = Vec::new();
    let mut total = 0;
    while total < 24 << 20 {
        // Past 256 KiB: the byte allocator's (a smaller request is a block of pages).
        let layout = Layout::from_size_align((256 << 10) + PAGE, 64).unwrap();
        let p = a.alloc(layout).unwrap();
        // SAFETY: `p` is `layout.size()` bytes this test owns.
        unsafe { core::ptr::write_bytes(p.as_ptr(), 0x5a, layout.size()) };
        v.push((p, layout));
        total += layout.size();
    }
    assert!(a.used_bytes() >= 24 << 20);
    assert_eq!(a.usages().get(UsageKind::RustHeap), total);
    for (p, layout) in v {
        give_back_bytes(&a, p, layout);
    }
    assert_eq!(
        (a.used_bytes(), a.usages().get(UsageKind::RustHeap)),
        (0, 0)
    );
    zone_is_sound(&a);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "16 MiB of memory: too slow under Miri; churn covers the calls"
)]
fn page_runs_are_aligned_freed_in_parts_and_taken_at_fixed_addresses() {
    let (_region, a) = allocator(16 << 20);
    let before = a.available_pages();
    for shift in 12..=21 {
        let align = 1usize << shift;
        for pages in [1, 3, 8, 600] {
            let at = a.alloc_pages(pages, align, UsageKind::VirtMem).unwrap();
            assert_eq!(at % align, 0, "{pages} pages aligned to {align:#x}");
            // Parts of the run go back: the last page, parts of a block's size (above the
            // lists' orders and of one, which the block frees pass to the general one),
            // then the rest.
            if pages > 1 {
                give_back(&a, at + (pages - 1) * PAGE, 1, UsageKind::VirtMem);
                let (mut from, mut left) = (at, pages - 1);
                for part in [128, 2] {
                    if left > part {
                        give_back(&a, from, part, UsageKind::VirtMem);
                        (from, left) = (from + part * PAGE, left - part);
                    }
                }
                give_back(&a, from, left, UsageKind::VirtMem);
            } else {
                give_back(&a, at, 1, UsageKind::VirtMem);
            }
            assert_eq!(a.usages().get(UsageKind::VirtMem), 0, "{pages} pages");
        }
    }
    assert_eq!(a.available_pages(), before);
    // A fixed-address run: taken once, refused while held, free again after.
    let probe = a.alloc_pages(16, 16 * PAGE, UsageKind::Dma).unwrap();
    give_back(&a, probe, 16, UsageKind::Dma);
    assert_eq!(
        a.alloc_pages_at(probe, 16, PAGE, UsageKind::Dma).ok(),
        Some(probe)
    );
    assert!(
        a.alloc_pages_at(probe + PAGE, 2, PAGE, UsageKind::Dma)
            .is_err()
    );
    assert_eq!(a.usages().get(UsageKind::Dma), 16 * PAGE);
    give_back(&a, probe, 16, UsageKind::Dma);
    assert_eq!(a.usages().get(UsageKind::Dma), 0);
    assert_eq!(a.available_pages(), before);
    zone_is_sound(&a);
}

/// A small block aligned above its size (a DMA buffer, a ring) is found again on the CPU's
/// list once freed: the same block on the next such call, counted for its kind while held.
#[test]
fn an_aligned_small_block_is_taken_again_from_the_cpus_list() {
    let (_region, a) = allocator(4 << 20);
    let before = a.available_pages();
    for (pages, align) in [(1, 16 * PAGE), (4, 16 * PAGE), (8, 64 * PAGE)] {
        let at = a.alloc_pages(pages, align, UsageKind::Dma).unwrap();
        assert_eq!(at % align, 0, "{pages} pages aligned to {align:#x}");
        assert_eq!(a.usages().get(UsageKind::Dma), pages * PAGE);
        give_back(&a, at, pages, UsageKind::Dma);
        assert_eq!(a.usages().get(UsageKind::Dma), 0);
        let again = a.alloc_pages(pages, align, UsageKind::Dma).unwrap();
        assert_eq!(
            again, at,
            "{pages} pages aligned to {align:#x}: the block just freed"
        );
        give_back(&a, again, pages, UsageKind::Dma);
    }
    assert_eq!(a.available_pages(), before);
    zone_is_sound(&a);
}

/// Task stacks (64 pages, a listed order, its list refilled two blocks at a time) taken
/// until the zone has no such block: each counted, each a block of its own; the call that
/// finds none changes nothing, and the pages left (below a stack's alignment) still come
/// one by one; all given back, the zone is whole again.
#[test]
fn task_stacks_refill_their_list_until_none_is_left() {
    let (_region, a) = allocator(4 << 20);
    let before = a.available_pages();
    let mut stacks = Vec::new();
    while let Ok(at) = a.alloc_pages(64, PAGE, UsageKind::VirtMem) {
        assert_eq!(at % (64 * PAGE), 0, "a stack is one block");
        stacks.push(at);
        assert_eq!(a.usages().get(UsageKind::VirtMem), stacks.len() * 64 * PAGE);
    }
    assert!(
        stacks.len() > 8,
        "more than a refill's worth: {}",
        stacks.len()
    );
    let left = a.available_pages();
    assert!(a.alloc_pages(64, PAGE, UsageKind::VirtMem).is_err());
    assert_eq!(a.available_pages(), left, "the refused call took nothing");
    assert_eq!(a.usages().get(UsageKind::VirtMem), stacks.len() * 64 * PAGE);
    let pages: Vec<usize> = (0..left)
        .map(|_| {
            a.alloc_pages(1, PAGE, UsageKind::PageTable)
                .expect("a page left")
        })
        .collect();
    assert_eq!(a.available_pages(), 0);
    for at in pages {
        give_back(&a, at, 1, UsageKind::PageTable);
    }
    for at in stacks {
        give_back(&a, at, 64, UsageKind::VirtMem);
    }
    assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
    assert_eq!(a.available_pages(), before);
    zone_is_sound(&a);
}

/// Zone-lock acquisitions (refills and drains of the CPU's lists) of a burst of 32 task
/// stacks taken, then given back.
fn stack_burst_zone_locks(a: &GlobalAllocator<impl CpuId>) -> u64 {
    // SAFETY: read between page calls (`zone_is_sound`'s rule).
    let locks = || unsafe { a.zone() }.unwrap().counters().zone_locks;
    let before = locks();
    let stacks: Vec<usize> = (0..32)
        .map(|_| a.alloc_pages(64, PAGE, UsageKind::VirtMem).unwrap())
        .collect();
    for at in stacks {
        give_back(a, at, 64, UsageKind::VirtMem);
    }
    locks() - before
}

/// A burst of 32 task stacks (2048 frames) overruns the CPU's list (1024 frames): the first
/// bursts refill and drain through the zone, the refills raise the CPU's high mark, and from
/// then on a burst takes no zone lock at all. Decayed tick by tick, the mark comes back down
/// and the lists give back what they held past it.
#[test]
#[cfg_attr(
    miri,
    ignore = "128 MiB of memory: too slow under Miri; the tuning runs in buddy-sim's tests"
)]
fn task_stack_bursts_stay_on_the_cpu_list_and_decay_back() {
    let (_region, a) = allocator(128 << 20);
    let before = a.available_pages();
    assert!(stack_burst_zone_locks(&a) > 0, "the first burst refills");
    stack_burst_zone_locks(&a);
    for _ in 0..3 {
        assert_eq!(stack_burst_zone_locks(&a), 0, "a burst on the list alone");
        assert!(a.pcp_pages(0).unwrap() >= 32 * 64);
    }
    zone_is_sound(&a);
    let mut ticks = 0;
    while a.decay_cpu_lists() {
        ticks += 1;
        assert!(ticks < 100, "the decay does not end");
    }
    assert!(ticks > 1, "an eighth a tick: {ticks}");
    assert!(
        a.pcp_pages(0).unwrap() <= 1024,
        "{}",
        a.pcp_pages(0).unwrap()
    );
    assert_eq!(a.available_pages(), before);
    zone_is_sound(&a);
    assert!(stack_burst_zone_locks(&a) > 0, "back to the fixed mark");
}

#[test]
fn a_block_above_the_lists_orders_comes_whole_from_the_zone() {
    let (_region, a) = allocator(4 << 20);
    let before = a.available_pages();
    for pages in [128, 256] {
        let at = a.alloc_pages(pages, PAGE, UsageKind::VirtMem).unwrap();
        assert_eq!(at % (pages * PAGE), 0, "{pages} pages: one block");
        assert_eq!(a.usages().get(UsageKind::VirtMem), pages * PAGE);
        assert_eq!(a.available_pages(), before - pages);
        give_back(&a, at, pages, UsageKind::VirtMem);
        assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
        assert_eq!(a.available_pages(), before);
        // Given back in halves, as a run may be: the general free splits the block.
        let at = a.alloc_pages(pages, PAGE, UsageKind::VirtMem).unwrap();
        give_back(&a, at + pages / 2 * PAGE, pages / 2, UsageKind::VirtMem);
        assert_eq!(a.usages().get(UsageKind::VirtMem), pages / 2 * PAGE);
        give_back(&a, at, pages / 2, UsageKind::VirtMem);
        assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
        assert_eq!(a.available_pages(), before);
    }
    // A block larger than the region: refused, nothing counted or taken.
    let r = a.alloc_pages(2048, PAGE, UsageKind::VirtMem);
    assert!(matches!(
        r,
        Err(axalloc_buddy::axallocator::AllocError::NoMemory)
    ));
    assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
    assert_eq!(a.available_pages(), before);
    zone_is_sound(&a);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "16 MiB of memory: too slow under Miri; the zeroed path runs in global_page"
)]
fn zeroed_pages_read_zero_over_dirty_memory() {
    let (_region, a) = allocator(16 << 20);
    assert!(a.clear_strategy().is_some());
    // Dirty every free page (in runs of 64: the free memory is not one run, the heap's
    // first pages split it), give them back, then take zeroed runs.
    let mut dirty = Vec::new();
    while let Ok(at) = a.alloc_pages(64, PAGE, UsageKind::VirtMem) {
        // SAFETY: the run is this test's.
        unsafe { core::ptr::write_bytes(at as *mut u8, 0xee, 64 * PAGE) };
        dirty.push(at);
    }
    assert!(dirty.len() * 64 > 3500);
    for at in dirty {
        give_back(&a, at, 64, UsageKind::VirtMem);
    }
    for (pages, align) in [(1, PAGE), (4, 4 * PAGE), (512, 2 << 20), (1500, PAGE)] {
        let at = a
            .alloc_zeroed_pages(pages, align, UsageKind::PageTable)
            .unwrap();
        // SAFETY: the run is this test's.
        let bytes = unsafe { core::slice::from_raw_parts(at as *const u8, pages * PAGE) };
        assert!(all_bytes_are(bytes, 0), "{pages} zeroed pages");
        give_back(&a, at, pages, UsageKind::PageTable);
    }
    zone_is_sound(&a);
}

#[test]
fn bad_calls_change_nothing() {
    let (mine, a) = allocator(4 << 20);
    let start = mine.start();
    let held = a.alloc_pages(3, PAGE, UsageKind::Global).unwrap();
    let (free, usages) = (a.available_pages(), format!("{:?}", a.usages()));
    // Freed twice, never allocated, outside the zone, misaligned alignments, empty runs.
    give_back(&a, held, 3, UsageKind::Global);
    give_back(&a, held, 3, UsageKind::Global);
    assert_eq!(a.available_pages(), free + 3);
    give_back(&a, start.wrapping_sub(1 << 30), 2, UsageKind::Global);
    give_back(&a, usize::MAX & !(PAGE - 1), 1, UsageKind::Global);
    assert!(a.alloc_pages(1, 3 * PAGE, UsageKind::Global).is_err());
    assert!(a.alloc_pages(usize::MAX, PAGE, UsageKind::Global).is_err());
    assert!(
        a.alloc_pages_at(held + 1, 1, PAGE, UsageKind::Global)
            .is_err()
    );
    assert!(
        a.alloc_pages_at(usize::MAX & !(PAGE - 1), 4, PAGE, UsageKind::Global)
            .is_err()
    );
    assert_eq!(a.available_pages(), free + 3);
    assert_ne!(
        format!("{:?}", a.usages()),
        usages,
        "the one good free counted"
    );
    assert_eq!(a.usages().get(UsageKind::Global), 0);
    // Initialized once only.
    let other = region(1 << 20);
    assert_eq!(
        // SAFETY: refused before anything is written (already initialized).
        unsafe { a.try_init(other.start(), other.len()) },
        Err(InitError::AlreadyInitialized)
    );
    zone_is_sound(&a);
}

#[test]
fn regions_it_cannot_use_are_refused_untouched() {
    let r = region(128 * 1024);
    let (start, size) = (r.start(), r.len());
    let a = GlobalAllocator::new();
    // 8 KiB: room for metadata, not for a heap. The memory is left as it was.
    assert!(matches!(
        // SAFETY: the region is this test's; refused before anything is written.
        unsafe { a.try_init(start, 2 * PAGE) },
        Err(InitError::TooSmall { .. })
    ));
    // SAFETY: the region is this test's (not given to the allocator yet).
    let bytes = unsafe { core::slice::from_raw_parts(start as *const u8, size) };
    assert!(all_bytes_are(bytes, 0));
    assert_eq!(
        // SAFETY: refused before anything is written (it ends past the address space).
        unsafe { a.try_init(usize::MAX - PAGE, 2 * PAGE) },
        Err(InitError::Overflow)
    );
    // SAFETY: refused before anything is written (no CPU).
    let no_cpus = unsafe { a.try_init_for_cpus(start, size, 0) };
    assert_eq!(no_cpus, Err(InitError::NoCpus));
    assert!(a.alloc_pages(1, PAGE, UsageKind::Global).is_err());
    assert!(a.alloc(Layout::new::<u64>()).is_err());
    assert_eq!(
        (a.used_pages(), a.available_pages(), a.clear_strategy()),
        (0, 0, None)
    );
    // Still usable with a region that fits.
    // SAFETY: the region is the allocator's alone; it outlives the allocator.
    unsafe { a.try_init(start, size) }.unwrap();
    // A zone this small keeps per-cpu batches of at most a quarter of its high mark.
    // SAFETY: only the configuration is read, under no per-cpu list.
    let cfg = unsafe { a.zone() }.unwrap().config();
    assert!(
        cfg.pcp_batch * 4 <= cfg.pcp_high,
        "batch {} high {}",
        cfg.pcp_batch,
        cfg.pcp_high
    );
    assert!(a.alloc_pages(1, PAGE, UsageKind::Global).is_ok());
}

/// One call of random churn.
#[derive(Debug, Clone)]
enum Call {
    Alloc {
        pages: usize,
        align_shift: u32,
    },
    FreePart {
        which: usize,
        from: usize,
        len: usize,
    },
    At {
        which: usize,
    },
}

/// The model tests' configuration. Under Miri, where isolation hides the working
/// directory: two cases, no failure file. Elsewhere 32, or as many as `PROPTEST_CASES` asks.
fn model_config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) {
            2
        } else if std::env::var_os("PROPTEST_CASES").is_some() {
            ProptestConfig::default().cases
        } else {
            32
        },
        failure_persistence: if cfg!(miri) {
            None
        } else {
            ProptestConfig::default().failure_persistence
        },
        ..ProptestConfig::default()
    }
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (1usize..40, 12u32..18).prop_map(|(pages, align_shift)| Call::Alloc { pages, align_shift }),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(which, from, len)| Call::FreePart { which, from, len }),
        any::<usize>().prop_map(|which| Call::At { which }),
    ]
}

/// Random page calls against a model of which pages are held, on `a`: no page is handed out
/// twice, every free changes the counts by what it frees, and everything goes back.
fn churn_matches_a_model_on(
    a: &GlobalAllocator<impl CpuId>,
    calls: Vec<Call>,
) -> Result<(), TestCaseError> {
    let base_free = a.available_pages();
    // Held pages: page address -> held.
    let mut held: BTreeMap<usize, ()> = BTreeMap::new();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for c in calls {
        match c {
            Call::Alloc { pages, align_shift } => {
                if let Ok(at) = a.alloc_pages(pages, 1 << align_shift, UsageKind::VirtMem) {
                    prop_assert_eq!(at % (1 << align_shift), 0);
                    for p in 0..pages {
                        prop_assert!(held.insert(at + p * PAGE, ()).is_none(), "handed out twice");
                    }
                    runs.push((at, pages));
                }
            }
            Call::FreePart { which, from, len } if !runs.is_empty() => {
                let (at, pages) = runs.swap_remove(which % runs.len());
                let from = from % pages;
                let len = 1 + len % (pages - from);
                give_back(a, at + from * PAGE, len, UsageKind::VirtMem);
                for p in from..from + len {
                    held.remove(&(at + p * PAGE));
                }
                if from > 0 {
                    runs.push((at, from));
                }
                if from + len < pages {
                    runs.push((at + (from + len) * PAGE, pages - from - len));
                }
            }
            Call::At { which } if !runs.is_empty() => {
                // Free a run and take it back at its address.
                let (at, pages) = runs[which % runs.len()];
                give_back(a, at, pages, UsageKind::VirtMem);
                prop_assert_eq!(
                    a.alloc_pages_at(at, pages, PAGE, UsageKind::VirtMem).ok(),
                    Some(at)
                );
            }
            _ => {}
        }
        prop_assert_eq!(a.available_pages(), base_free - held.len());
    }
    for (at, pages) in runs {
        give_back(a, at, pages, UsageKind::VirtMem);
    }
    prop_assert_eq!(a.available_pages(), base_free);
    zone_is_sound(a);
    Ok(())
}

proptest! {
    #![proptest_config(model_config())]

    /// [`churn_matches_a_model_on`] with every call on CPU 0's lists, under its lock.
    #[test]
    fn churn_matches_a_model(calls in proptest::collection::vec(call(), 1..if cfg!(miri) { 60 } else { 200 })) {
        let (_region, a) = allocator(2 << 20);
        churn_matches_a_model_on(&a, calls)?;
    }

    /// [`churn_matches_a_model_on`] through CPU 0's magazines (an exclusive CPU id): the
    /// pages a magazine holds count as free, and a fixed-address run over one of them
    /// takes it back first.
    #[test]
    fn churn_through_the_magazines_matches_a_model(calls in proptest::collection::vec(call(), 1..if cfg!(miri) { 60 } else { 200 })) {
        static CLAIMS: Claims = Claims::new();
        let (_region, a, claims) = claimed_allocator(2 << 20, 2, &CLAIMS);
        let _cpu = claim(claims, 0);
        churn_matches_a_model_on(&a, calls)?;
    }
}

/// A heap call of the model below: allocate `size` bytes aligned to `2^align_shift`, or
/// free the held object `which` picks.
#[derive(Clone, Debug)]
enum HeapCall {
    Alloc { size: usize, align_shift: u32 },
    Free { which: usize },
}

fn heap_call() -> impl Strategy<Value = HeapCall> {
    prop_oneof![
        // Mostly slab sizes (up to 2 KiB, aligned to at most 16), some larger or aligned
        // further (the byte allocator's).
        3 => (0usize..=2048, 0u32..=4).prop_map(|(size, align_shift)| HeapCall::Alloc { size, align_shift }),
        1 => (0usize..=9000, 0u32..=7).prop_map(|(size, align_shift)| HeapCall::Alloc { size, align_shift }),
        // Past the slabs, aligned to pages (a block of pages aligned above its size too).
        1 => (2049usize..=20_000, 12u32..=16).prop_map(|(size, align_shift)| HeapCall::Alloc { size, align_shift }),
        3 => any::<usize>().prop_map(|which| HeapCall::Free { which }),
    ]
}

/// The bytes the heap counts for a request of `layout` (`usages`' `RustHeap`): what it asks
/// for, but for a request past the slabs' 2 KiB up to 256 KiB, which holds a block of pages
/// (its size rounded up to a power of two of pages), counted whole as Linux counts
/// `kmalloc_large`'s pages.
fn heap_counted(layout: Layout) -> usize {
    let block = layout.size().div_ceil(PAGE).next_power_of_two() * PAGE;
    if layout.size() > 2048 && block <= 256 << 10 {
        block
    } else {
        layout.size()
    }
}

/// Random heap calls on `a`, each on the CPU `on_cpu` moves the calling thread to (one of
/// three: an object freed on a CPU other than its slab's), against a model of the objects
/// held: each aligned as asked, none overlapping another, each reading back what was written
/// into it until it is freed, the heap's counts following; when everything is freed, no
/// byte is counted used, no object active, and every page is free or the heap's.
/// (`used_bytes` is the byte allocator's count too: the slab byte allocator keeps counting
/// the blocks its own slabs took.)
fn heap_churn_matches_a_model_on(
    a: &GlobalAllocator<impl CpuId>,
    calls: Vec<(HeapCall, usize)>,
    mut on_cpu: impl FnMut(usize),
) -> Result<(), TestCaseError> {
    let pages_before = a.available_pages() + a.heap_bytes() / PAGE;
    // Held objects: start -> (end, layout, the byte written through it).
    let mut held: BTreeMap<usize, (usize, Layout, u8)> = BTreeMap::new();
    let mut bytes = 0;
    for (i, (c, cpu)) in calls.into_iter().enumerate() {
        on_cpu(cpu);
        match c {
            HeapCall::Alloc { size, align_shift } => {
                let layout = Layout::from_size_align(size, 1 << align_shift).unwrap();
                let p = a.alloc(layout).unwrap();
                let at = p.as_ptr() as usize;
                prop_assert_eq!(at % layout.align(), 0);
                let end = at + size.max(1);
                if let Some((&before, &(before_end, _, _))) = held.range(..end).next_back() {
                    prop_assert!(
                        before_end <= at || before >= end,
                        "{:#x}+{} overlaps {:#x}..{:#x}",
                        at,
                        size,
                        before,
                        before_end
                    );
                }
                let mark = i as u8;
                // SAFETY: `size` bytes the test holds.
                unsafe { p.as_ptr().write_bytes(mark, size) };
                held.insert(at, (end, layout, mark));
                bytes += heap_counted(layout);
            }
            HeapCall::Free { which } if !held.is_empty() => {
                let at = *held.keys().nth(which % held.len()).unwrap();
                let (_, layout, mark) = held.remove(&at).unwrap();
                // SAFETY: the object's bytes, which only the test wrote.
                let object = unsafe { std::slice::from_raw_parts(at as *const u8, layout.size()) };
                prop_assert!(all_bytes_are(object, mark), "an object's bytes changed");
                give_back_bytes(a, core::ptr::NonNull::new(at as *mut u8).unwrap(), layout);
                bytes -= heap_counted(layout);
            }
            HeapCall::Free { .. } => {}
        }
        prop_assert_eq!(a.usages().get(UsageKind::RustHeap), bytes);
        prop_assert!(a.used_bytes() >= bytes);
    }
    for (at, (_, layout, mark)) in held {
        // SAFETY: as above.
        let object = unsafe { std::slice::from_raw_parts(at as *const u8, layout.size()) };
        prop_assert!(all_bytes_are(object, mark), "an object's bytes changed");
        give_back_bytes(a, core::ptr::NonNull::new(at as *mut u8).unwrap(), layout);
    }
    prop_assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    let active: usize = a.slab_info().classes().map(|c| c.active_objects()).sum();
    prop_assert_eq!(active, 0);
    // The zone's pages are free or the heap's: its byte allocator's and its slabs'.
    prop_assert_eq!(a.available_pages() + a.heap_bytes() / PAGE, pages_before);
    zone_is_sound(a);
    Ok(())
}

proptest! {
    #![proptest_config(model_config())]

    /// [`heap_churn_matches_a_model_on`] with each call's CPU asked through a function
    /// (not exclusive: every small object under its CPU's slot lock).
    #[test]
    fn heap_churn_matches_a_model(calls in proptest::collection::vec((heap_call(), 0usize..3), 1..if cfg!(miri) { 80 } else { 600 })) {
        let (_region, a) = allocator_for_cpus(if cfg!(miri) { 2 << 20 } else { 8 << 20 }, 3);
        heap_churn_matches_a_model_on(&a, calls, |cpu| CPU.with(|c| c.set(cpu)))?;
        CPU.with(|c| c.set(0));
    }

    /// [`heap_churn_matches_a_model_on`] through the CPUs' object magazines (each call's
    /// CPU id claimed, exclusive): an object freed on its slab's CPU waits in that CPU's
    /// magazine, one freed on another goes to its slab.
    #[test]
    fn heap_churn_through_the_object_magazines_matches_a_model(calls in proptest::collection::vec((heap_call(), 0usize..3), 1..if cfg!(miri) { 80 } else { 600 })) {
        static CLAIMS: Claims = Claims::new();
        let (_region, a, claims) = claimed_allocator(if cfg!(miri) { 2 << 20 } else { 8 << 20 }, 3, &CLAIMS);
        let mut held = None;
        heap_churn_matches_a_model_on(&a, calls, |cpu| {
            held = None;
            held = Some(claim(claims, cpu));
        })?;
    }
}

/// The 2 KiB size class's objects handed out and slabs (`slab_info`'s `kmalloc-2k` line).
fn kmalloc_2k(a: &GlobalAllocator<impl CpuId>) -> (usize, usize) {
    let info = a.slab_info();
    let c = info.classes().find(|c| c.object_size() == 2048).unwrap();
    (c.active_objects(), c.slabs())
}

/// Objects freed into a CPU's object magazine keep their slabs (counted the heap's, their
/// objects free) until an allocation on that CPU runs short: then the magazine gives them
/// back, and the slabs they empty go back to the zone but the one a class keeps.
#[test]
fn a_cpus_object_magazine_comes_back_when_its_allocation_runs_short() {
    static CLAIMS: Claims = Claims::new();
    let (_r, a, claims) = claimed_allocator(2 << 20, 2, &CLAIMS);
    let _cpu = claim(claims, 0);
    let layout = Layout::from_size_align(2048, 8).unwrap();
    // Eight slabs of seven objects, all freed on their CPU: the magazine keeps up to 32.
    let objects: Vec<_> = (0..56).map(|_| a.alloc(layout).unwrap()).collect();
    assert_eq!(kmalloc_2k(&a), (56, 8));
    for p in objects {
        give_back_bytes(&a, p, layout);
    }
    let (active, slabs) = kmalloc_2k(&a);
    assert_eq!(active, 0);
    assert!(slabs > 1, "the magazine's objects keep their slabs");
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    // Every page taken: the call that finds none gives the magazine back first.
    let mut pages = Vec::new();
    while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        pages.push(at);
    }
    assert_eq!(
        kmalloc_2k(&a),
        (0, 1),
        "one empty slab kept, the rest given back"
    );
    assert_eq!(a.available_pages(), 0);
    for at in pages {
        give_back(&a, at, 1, UsageKind::VirtMem);
    }
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    zone_is_sound(&a);
}

/// Another CPU's object magazine keeps its objects, and so their slabs, when a CPU runs
/// short of pages: that CPU asks for them, and the owner gives them back at its next timer
/// tick (`decay_cpu_lists`), its emptied slabs' pages back to the zone.
#[test]
fn another_cpus_object_magazine_comes_back_at_its_tick_when_a_cpu_runs_short() {
    static CLAIMS: Claims = Claims::new();
    let (_r, a, claims) = claimed_allocator(2 << 20, 2, &CLAIMS);
    let layout = Layout::from_size_align(2048, 8).unwrap();
    // CPU 1: eight slabs of 2 KiB objects, all freed into its magazine (up to 32 kept).
    let cpu1 = claim(claims, 1);
    let objects: Vec<_> = (0..56).map(|_| a.alloc(layout).unwrap()).collect();
    for p in objects {
        give_back_bytes(&a, p, layout);
    }
    drop(cpu1);
    let (active, slabs) = kmalloc_2k(&a);
    assert_eq!(active, 0);
    assert!(slabs > 1, "CPU 1's magazine keeps its objects' slabs");
    // CPU 0 takes every page: it runs short and asks CPU 1 for its objects.
    let cpu0 = claim(claims, 0);
    let mut pages = Vec::new();
    while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        pages.push(at);
    }
    drop(cpu0);
    assert_eq!(
        kmalloc_2k(&a),
        (0, slabs),
        "only CPU 1 reaches its magazine"
    );
    // CPU 1's tick gives them back; the slabs they empty free their pages.
    let cpu1 = claim(claims, 1);
    a.decay_cpu_lists();
    drop(cpu1);
    assert_eq!(
        kmalloc_2k(&a),
        (0, 1),
        "one empty slab kept, the rest given back"
    );
    assert!(a.available_pages() >= (slabs - 1) * 4);
    let cpu0 = claim(claims, 0);
    for at in pages {
        give_back(&a, at, 1, UsageKind::VirtMem);
    }
    drop(cpu0);
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    zone_is_sound(&a);
}

/// A heap growth that finds no page (under the heap's lock) gives the CPU's object magazine
/// back too: a slab it empties whose block is the byte allocator's stays the CPU's, empty,
/// instead of going back to the byte allocator under the lock the growth holds (which would
/// wait for itself), and the growth fails as it would without the magazine.
#[test]
fn a_heap_growth_with_no_page_gives_back_the_object_magazine_without_waiting_for_itself() {
    static CLAIMS: Claims = Claims::new();
    let (region, a, claims) = claimed_allocator(2 << 20, 2, &CLAIMS);
    let a = std::sync::Arc::new(a);
    let (done, finished) = std::sync::mpsc::channel();
    let worker = a.clone();
    // The worker thread may spin for good if the growth waits for its own lock: the test
    // waits for it a while, then fails (leaving the region to it).
    std::thread::spawn(move || {
        let a = &*worker;
        let _cpu = claim(claims, 0);
        // 300 KiB free in the byte allocator (past the largest block of pages a request
        // takes), then no page left in the zone.
        let big = Layout::from_size_align(300 << 10, 8).unwrap();
        let p = a.alloc(big).unwrap();
        give_back_bytes(a, p, big);
        let mut pages = Vec::new();
        while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
            pages.push(at);
        }
        // Two slabs of 2 KiB objects from the byte allocator, every object freed into the
        // magazine (14 of its 32).
        let layout = Layout::from_size_align(2048, 8).unwrap();
        let objects: Vec<_> = (0..14).map(|_| a.alloc(layout).unwrap()).collect();
        for p in objects {
            give_back_bytes(a, p, layout);
        }
        // 1 MiB: more than the byte allocator has, and no page to grow it by.
        let grown = a.alloc(Layout::from_size_align(1 << 20, 8).unwrap());
        let (active, slabs) = kmalloc_2k(a);
        let after = (grown.is_err(), active, slabs);
        for at in pages {
            give_back(a, at, 1, UsageKind::VirtMem);
        }
        let _ = done.send(after);
    });
    // Under Miri the clock is virtual: it advances 5 us with every basic block any thread
    // runs. The worker alone takes about 39 s of it (38.2 to 38.7 s over seeds 0 to 3), 34 s
    // of them its 361 page allocations (about 6 ms, 1 200 basic blocks, each in this
    // unoptimized build), and it ran past 60 s in one whole run of this file. Ten minutes
    // there.
    let wait = std::time::Duration::from_secs(if cfg!(miri) { 600 } else { 60 });
    let Ok(after) = finished.recv_timeout(wait) else {
        std::mem::forget(region);
        panic!("the growth did not return: it waits for the heap's lock it holds");
    };
    // Refused; the magazine's objects back in their two slabs, both kept, empty.
    assert_eq!(after, (true, 0, 2));
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    zone_is_sound(&a);
    drop(a);
    drop(region);
}

/// A small object given back with the size of another class whose slabs are one page too
/// is refused by its slab (whose header names its own class): nothing changes, the usage
/// counts included, and the object is still the caller's.
#[test]
fn a_small_object_freed_as_another_class_is_refused() {
    let (_region, a) = allocator(2 << 20);
    let (small, other) = (
        Layout::from_size_align(24, 8).unwrap(),
        Layout::from_size_align(500, 8).unwrap(),
    );
    let p = a.alloc(small).unwrap();
    let before = (
        a.used_bytes(),
        a.available_bytes(),
        format!("{:?}", a.usages()),
    );
    // SAFETY: breaks `dealloc`'s contract (the layout is not the allocation's) in a way
    // its slab detects before it writes anything: both sizes' slabs are one page, so the
    // header read is the object's own slab's.
    unsafe { a.dealloc(p, other) };
    let after = (
        a.used_bytes(),
        a.available_bytes(),
        format!("{:?}", a.usages()),
    );
    assert_eq!(after, before);
    give_back_bytes(&a, p, small);
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
}

/// Small objects come from slabs on pages of the zone; a slab left with no object goes back
/// to the zone, but for one a size class keeps.
#[test]
fn slabs_left_empty_go_back_to_the_zone_but_one() {
    let (_region, a) = allocator(2 << 20);
    let layout = Layout::from_size_align(64, 8).unwrap();
    // Objects of a class of its own in this test: no slab of it yet.
    let heap = a.heap_bytes();
    let free = a.available_pages();
    // Four pages of 64-byte objects (63 a page past its header).
    let objects: Vec<_> = (0..4 * 63).map(|_| a.alloc(layout).unwrap()).collect();
    assert_eq!(a.heap_bytes(), heap + 4 * PAGE);
    assert_eq!(a.available_pages(), free - 4);
    for p in objects {
        give_back_bytes(&a, p, layout);
    }
    assert_eq!(a.heap_bytes(), heap + PAGE);
    assert_eq!(a.available_pages(), free - 1);
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    zone_is_sound(&a);
}

/// With every page of the zone handed out, small objects still come from the heap's free
/// memory (their slabs from its byte allocator), and go back there.
#[test]
fn small_objects_come_from_the_heap_when_the_zone_has_no_page() {
    let (_region, a) = allocator(2 << 20);
    // The heap takes memory it keeps: 300 KiB of it free again (past the largest block of
    // pages a request takes, the byte allocator's).
    let big = Layout::from_size_align(300 << 10, 8).unwrap();
    let p = a.alloc(big).unwrap();
    give_back_bytes(&a, p, big);
    let mut pages = Vec::new();
    while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        pages.push(at);
    }
    let heap = a.heap_bytes();
    let layout = Layout::from_size_align(100, 8).unwrap();
    let objects: Vec<_> = (0..200).map(|_| a.alloc(layout).unwrap()).collect();
    assert_eq!(a.heap_bytes(), heap, "no page from the zone");
    assert_eq!(a.usages().get(UsageKind::RustHeap), 200 * 100);
    for p in objects {
        give_back_bytes(&a, p, layout);
    }
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    assert_eq!(a.heap_bytes(), heap);
    for at in pages {
        give_back(&a, at, 1, UsageKind::VirtMem);
    }
    zone_is_sound(&a);
}

thread_local! {
    static CPU: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn thread_cpu() -> usize {
    CPU.with(std::cell::Cell::get)
}

/// The thread's CPU as a type: the answer inlines into the page path.
#[derive(Clone, Copy)]
struct ThreadCpu;

impl CpuId for ThreadCpu {
    fn cpu_id(&self, _pinned: &Pinned<'_>) -> usize {
        thread_cpu()
    }
}

/// One allocator's CPU ids, each claimed by one thread at a time ([`claim`]): each test's
/// own, a `static`.
struct Claims([AtomicBool; 4]);

impl Claims {
    /// No id claimed.
    const fn new() -> Self {
        Self([const { AtomicBool::new(false) }; 4])
    }
}

thread_local! {
    /// The CPU id this thread claimed, and of which allocator's [`Claims`] (their address),
    /// if it holds one.
    static CLAIMED: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
}

/// A thread's claim of a CPU id, released when it drops (on that thread: not `Send`).
struct Claim(&'static Claims, usize, std::marker::PhantomData<*const ()>);

/// Claims CPU `cpu` of `claims` for the calling thread until the claim drops; panics if
/// another thread holds it, or this one holds another.
fn claim(claims: &'static Claims, cpu: usize) -> Claim {
    assert!(
        !claims.0[cpu].swap(true, Ordering::Acquire),
        "CPU {cpu} is another thread's"
    );
    let at = core::ptr::from_ref(claims).addr();
    assert_eq!(CLAIMED.with(|c| c.replace(Some((at, cpu)))), None);
    Claim(claims, cpu, std::marker::PhantomData)
}

impl Drop for Claim {
    fn drop(&mut self) {
        CLAIMED.with(|c| c.set(None));
        self.0.0[self.1].store(false, Ordering::Release);
    }
}

/// The CPU of its allocator's that this thread claimed, an exclusive id: its page calls go
/// through that CPU's magazines. CPU 0's lists, under their lock, for a thread with no claim
/// of this allocator's.
#[derive(Clone, Copy)]
struct ClaimedCpu(&'static Claims);

impl ClaimedCpu {
    /// The id this thread claimed of this allocator's.
    fn claimed(self) -> Option<usize> {
        let at = core::ptr::from_ref(self.0).addr();
        CLAIMED
            .with(std::cell::Cell::get)
            .and_then(|(of, cpu)| (of == at).then_some(cpu))
    }
}

impl CpuId for ClaimedCpu {
    fn cpu_id(&self, _pinned: &Pinned<'_>) -> usize {
        self.claimed().unwrap_or(0)
    }

    fn exclusive_cpu<'a>(&self, pinned: &'a Pinned<'_>) -> Option<ExclusiveCpu<'a>> {
        let cpu = self.claimed()?;
        // SAFETY: this thread holds the claim of `cpu` of this allocator's ([`Claims`]),
        // which no other thread takes until this one drops it, and the tests drop claims
        // between allocator calls only, with release ordering that the next claim's acquire
        // pairs with; no signal handler allocates.
        Some(unsafe { ExclusiveCpu::new(cpu, pinned) })
    }
}

/// An allocator over a fresh region of `bytes` with lists for `cpus` CPUs (at most four),
/// each thread's CPU the one it claimed of `claims` ([`ClaimedCpu`]).
fn claimed_allocator(
    bytes: usize,
    cpus: usize,
    claims: &'static Claims,
) -> (Region, GlobalAllocator<ClaimedCpu>, &'static Claims) {
    let r = region(bytes);
    let a = GlobalAllocator::with_cpu_id(ClaimedCpu(claims));
    // SAFETY: the region is the allocator's alone; it outlives the allocator.
    unsafe { a.try_init_for_cpus(r.start(), r.len(), cpus) }.unwrap();
    (r, a, claims)
}

/// A page freed on a CPU with an exclusive id waits in its magazine, counted free, marked
/// cached in the frame table: a second free of it is refused, the page is handed out once,
/// and the usage counts and the zone stay right.
#[test]
fn a_page_freed_twice_into_a_magazine_is_refused_and_handed_out_once() {
    static CLAIMS: Claims = Claims::new();
    let (_r, a, claims) = claimed_allocator(4 << 20, 2, &CLAIMS);
    let _cpu = claim(claims, 0);
    let free = a.available_pages();
    let pages: Vec<usize> = (0..40)
        .map(|_| a.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap())
        .collect();
    assert_eq!(a.available_pages(), free - 40);
    assert_eq!(a.usages().get(UsageKind::PageTable), 40 * PAGE);
    for &at in &pages {
        give_back(&a, at, 1, UsageKind::PageTable);
    }
    assert_eq!(a.available_pages(), free);
    assert_eq!(a.usages().get(UsageKind::PageTable), 0);
    zone_is_sound(&a);
    // The magazine took the first 32 (its capacity), the lists the rest: its last is on top.
    let last = pages[31];
    // SAFETY: read between page calls.
    let zone = unsafe { a.zone() }.unwrap();
    let frame = |at: usize| zone.frame(buddy_sim::Pfn((at / PAGE) as u64)).unwrap();
    assert_eq!(frame(last).state, buddy_sim::FrameState::Cached);
    // Freed again while the magazine holds it: refused, nothing changes.
    give_back(&a, last, 1, UsageKind::PageTable);
    assert_eq!(a.available_pages(), free);
    assert_eq!(a.usages().get(UsageKind::PageTable), 0);
    let again = a.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap();
    let next = a.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap();
    assert_eq!(again, last, "the magazine's last page first");
    assert_ne!(next, last, "handed out once");
    assert!(frame(again).frozen);
    give_back(&a, again, 1, UsageKind::PageTable);
    give_back(&a, next, 1, UsageKind::PageTable);
    // Blocks of every listed order go through their magazines the same way.
    for pages in [2, 4, 8, 16, 32, 64] {
        let runs: Vec<usize> = (0..3)
            .map(|_| a.alloc_pages(pages, PAGE, UsageKind::TaskStack).unwrap())
            .collect();
        for at in runs {
            give_back(&a, at, pages, UsageKind::TaskStack);
        }
    }
    assert_eq!(a.available_pages(), free);
    assert_eq!(a.usages().get(UsageKind::TaskStack), 0);
    // A block aligned above its size comes from the magazine too: the last freed there so
    // aligned.
    let aligned = a.alloc_pages(4, 16 * PAGE, UsageKind::Dma).unwrap();
    let plain = a.alloc_pages(4, PAGE, UsageKind::Dma).unwrap();
    give_back(&a, aligned, 4, UsageKind::Dma);
    give_back(&a, plain, 4, UsageKind::Dma);
    let again = a.alloc_pages(4, 16 * PAGE, UsageKind::Dma).unwrap();
    assert_eq!(again % (16 * PAGE), 0);
    assert!(again == aligned || again == plain, "from the magazine");
    assert!(frame(again).frozen);
    give_back(&a, again, 4, UsageKind::Dma);
    assert_eq!(a.available_pages(), free);
    assert_eq!(a.usages().get(UsageKind::Dma), 0);
    zone_is_sound(&a);
}

/// The pages in another CPU's magazines are not lost: an allocation that finds no memory
/// asks that CPU for them, and they are back once it runs (here its timer tick,
/// `decay_cpu_lists`); the allocation's own CPU gives its magazines back at once.
#[test]
fn a_cpus_magazines_come_back_when_another_cpu_runs_short() {
    static CLAIMS: Claims = Claims::new();
    let (_r, a, claims) = claimed_allocator(if cfg!(miri) { 1 << 20 } else { 4 << 20 }, 2, &CLAIMS);
    let a = &a;
    let on_cpu1 = |f: &(dyn Fn() + Sync)| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let _cpu = claim(claims, 1);
                f();
            });
        });
    };
    // CPU 1 takes pages and gives them back: its magazine keeps some.
    on_cpu1(&|| {
        let pages: Vec<usize> = (0..16)
            .map(|_| a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap())
            .collect();
        for at in pages {
            give_back(a, at, 1, UsageKind::VirtMem);
        }
    });
    assert!(a.pcp_pages(1).unwrap() >= 16);
    let _cpu = claim(claims, 0);
    // CPU 0 takes every free page but those in CPU 1's magazine.
    let free = a.available_pages();
    let mut taken = Vec::new();
    while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        taken.push(at);
    }
    let cached = free - taken.len();
    assert!(
        (1..=32).contains(&cached),
        "{cached} pages left in CPU 1's magazine"
    );
    assert_eq!(a.available_pages(), cached);
    // CPU 1 runs (its tick): the pages go back to its lists, where CPU 0's next
    // allocation finds them.
    on_cpu1(&|| {
        a.decay_cpu_lists();
    });
    while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        taken.push(at);
    }
    assert_eq!(taken.len(), free);
    assert_eq!(a.available_pages(), 0);
    for at in taken {
        give_back(a, at, 1, UsageKind::VirtMem);
    }
    assert_eq!(a.available_pages(), free);
    zone_is_sound(a);
}

/// Each CPU's list counts, CPU 0's first.
fn lists(a: &GlobalAllocator<impl CpuId>) -> [u64; 2] {
    [0, 1].map(|cpu| a.pcp_pages(cpu).unwrap())
}

/// A `CpuId` type picks the lists of the CPU it names; a closure's answer past the CPUs
/// picks CPU 0's (slower, never wrong).
#[test]
fn a_cpu_id_type_picks_its_cpus_lists_and_an_answer_past_the_cpus_cpu_0s() {
    let r = region(if cfg!(miri) { 1 << 20 } else { 4 << 20 });
    let a = GlobalAllocator::with_cpu_id(ThreadCpu);
    // SAFETY: the region is the allocator's alone; it outlives the allocator.
    unsafe { a.try_init_for_cpus(r.start(), r.len(), 2) }.unwrap();
    let before = lists(&a);
    std::thread::scope(|s| {
        s.spawn(|| {
            CPU.with(|c| c.set(1));
            let at = a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap();
            give_back(&a, at, 1, UsageKind::VirtMem);
        });
    });
    let after = lists(&a);
    assert_eq!(after[0], before[0], "CPU 0's lists untouched");
    assert!(
        after[1] > before[1],
        "CPU 1's list refilled: {before:?} -> {after:?}"
    );
    zone_is_sound(&a);
    drop(a);

    let r = region(if cfg!(miri) { 1 << 20 } else { 4 << 20 });
    let a = GlobalAllocator::with_cpu_id(|| 7);
    // SAFETY: as above.
    unsafe { a.try_init_for_cpus(r.start(), r.len(), 2) }.unwrap();
    let before = lists(&a);
    let at = a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap();
    give_back(&a, at, 1, UsageKind::VirtMem);
    let after = lists(&a);
    assert!(
        after[0] > before[0],
        "CPU 0's list refilled: {before:?} -> {after:?}"
    );
    assert_eq!(after[1], before[1], "CPU 1's lists untouched");
    zone_is_sound(&a);
}

/// Four CPUs, each allocating and freeing pages and heap bytes on its own lists at once;
/// then every page is back and the zone is sound.
#[test]
fn cpus_allocate_at_once() {
    let (_r, a) = allocator_for_cpus(if cfg!(miri) { 1 << 20 } else { 16 << 20 }, 4);
    cpus_allocate_at_once_on(&a, |cpu| CPU.with(|c| c.set(cpu)));
}

/// [`cpus_allocate_at_once`] with each CPU's page calls through its magazines (an
/// exclusive CPU id each), which frees of pages another CPU took fill too.
#[test]
fn cpus_allocate_at_once_through_their_magazines() {
    static CLAIMS: Claims = Claims::new();
    let (_r, a, claims) =
        claimed_allocator(if cfg!(miri) { 1 << 20 } else { 16 << 20 }, 4, &CLAIMS);
    cpus_allocate_at_once_on(&a, |cpu| claim(claims, cpu));
}

/// Four threads on `a`, each on the CPU `enter` makes it (for as long as what `enter`
/// returns lives), allocating and freeing pages and heap bytes at once; then every page is
/// back and the zone is sound.
fn cpus_allocate_at_once_on<C: CpuId + Send + Sync, G>(
    a: &GlobalAllocator<C>,
    enter: impl Fn(usize) -> G + Copy + Send,
) {
    // Pages free, and pages the heap holds (it keeps what it grows by: a slab heap grows
    // during the run, a TLSF one may not).
    let heap_pages = |a: &GlobalAllocator<C>| a.heap_bytes() / PAGE;
    let before = a.available_pages() + heap_pages(a);
    let rounds = if cfg!(miri) { 12 } else { 2000 };
    std::thread::scope(|s| {
        for cpu in 0..4 {
            s.spawn(move || {
                let _cpu = enter(cpu);
                let mut mine = Vec::new();
                for i in 0..rounds {
                    let pages = 1 + (i * 7 + cpu) % 9;
                    if let Ok(at) = a.alloc_pages(pages, PAGE << (i % 3), UsageKind::VirtMem) {
                        for p in 0..pages {
                            // SAFETY: the run is this thread's.
                            unsafe { ((at + p * PAGE) as *mut usize).write(cpu) };
                        }
                        mine.push((at, pages));
                    }
                    let layout = Layout::from_size_align(16 + i % 300, 8).unwrap();
                    let p = a.alloc(layout).unwrap();
                    give_back_bytes(a, p, layout);
                    if mine.len() > 8 {
                        let (at, pages) = mine.remove(i % mine.len());
                        for p in 0..pages {
                            // SAFETY: as above; nobody else wrote it.
                            let mark = unsafe { ((at + p * PAGE) as *const usize).read() };
                            assert_eq!(mark, cpu, "a page written by another CPU");
                        }
                        give_back(a, at, pages, UsageKind::VirtMem);
                    }
                }
                for (at, pages) in mine {
                    give_back(a, at, pages, UsageKind::VirtMem);
                }
            });
        }
    });
    assert_eq!(a.available_pages() + heap_pages(a), before);
    assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
    zone_is_sound(a);
}

/// A small object comes from the slabs of the CPU that allocates it and goes back to them
/// when another CPU frees it (under that CPU's lock): the usage counts add up, and the
/// slabs left empty go back to the zone but for the one the class keeps.
#[test]
fn small_objects_freed_on_another_cpu_go_back_to_their_slabs() {
    let (_r, a) = allocator_for_cpus(4 << 20, 2);
    let a = &a;
    let layout = Layout::from_size_align(64, 8).unwrap();
    let (heap, free, used) = (a.heap_bytes(), a.available_pages(), a.used_bytes());
    // Four pages of 64-byte objects (63 a page past its header), allocated on CPU 1.
    let objects: Vec<usize> = std::thread::scope(|s| {
        s.spawn(|| {
            CPU.with(|c| c.set(1));
            (0..4 * 63)
                .map(|i| {
                    let p = a.alloc(layout).unwrap();
                    // SAFETY: the object is 64 bytes this test holds.
                    unsafe { p.as_ptr().write_bytes(i as u8, 64) };
                    p.as_ptr().addr()
                })
                .collect()
        })
        .join()
        .unwrap()
    });
    assert_eq!(a.heap_bytes(), heap + 4 * PAGE);
    assert_eq!(a.used_bytes(), used + 4 * 63 * 64);
    assert_eq!(a.usages().get(UsageKind::RustHeap), 4 * 63 * 64);
    // Freed on CPU 0 (this thread).
    for (i, at) in objects.into_iter().enumerate() {
        let p = core::ptr::NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(at)).unwrap();
        // SAFETY: as above; nobody else wrote it.
        let bytes = unsafe { core::slice::from_raw_parts(p.as_ptr(), 64) };
        assert!(all_bytes_are(bytes, i as u8));
        give_back_bytes(a, p, layout);
    }
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    assert_eq!(a.used_bytes(), used);
    assert_eq!(a.heap_bytes(), heap + PAGE);
    assert_eq!(a.available_pages(), free - 1);
    // CPU 1's kept slab serves CPU 1 again; CPU 0 makes a slab of its own.
    let p = a.alloc(layout).unwrap();
    assert_eq!(a.heap_bytes(), heap + 2 * PAGE);
    give_back_bytes(a, p, layout);
    zone_is_sound(a);
}

/// With no memory left for a slab (the zone's pages all handed out, the byte allocator
/// full), a CPU with no slab of a class takes a free object of another CPU's slab, which
/// takes it back when it is freed.
#[test]
fn a_cpu_out_of_memory_takes_a_small_object_of_another_cpus_slab() {
    let (_r, a) = allocator_for_cpus(if cfg!(miri) { 512 << 10 } else { 2 << 20 }, 2);
    let a = &a;
    let layout = Layout::from_size_align(64, 8).unwrap();
    // CPU 1 makes a slab of 64-byte objects and keeps one.
    let on_cpu1 = std::thread::scope(|s| {
        s.spawn(|| {
            CPU.with(|c| c.set(1));
            a.alloc(layout).unwrap().as_ptr().expose_provenance()
        })
        .join()
        .unwrap()
    });
    let mut pages = Vec::new();
    while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        pages.push(at);
    }
    // The byte allocator's blocks (aligned past the slabs' 16 bytes) until it is full.
    let large = Layout::from_size_align(2048, 64).unwrap();
    let mut blocks = Vec::new();
    while let Ok(p) = a.alloc(large) {
        blocks.push(p);
    }
    let heap = a.heap_bytes();
    // CPU 0 (this thread), with no slab of its own: one of CPU 1's objects.
    let p = a.alloc(layout).unwrap();
    let slab = |at: usize| at & !(PAGE - 1);
    assert_eq!(slab(p.as_ptr().addr()), slab(on_cpu1), "not CPU 1's slab");
    assert_eq!(a.heap_bytes(), heap);
    assert_eq!(
        a.usages().get(UsageKind::RustHeap),
        2 * 64 + blocks.len() * 2048
    );
    give_back_bytes(a, p, layout);
    let q = core::ptr::NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(on_cpu1)).unwrap();
    give_back_bytes(a, q, layout);
    for p in blocks {
        give_back_bytes(a, p, large);
    }
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    for at in pages {
        give_back(a, at, 1, UsageKind::VirtMem);
    }
    zone_is_sound(a);
}

/// `slab_info` counts every CPU's slabs and objects per class, and prints them as Linux's
/// `/proc/slabinfo` does.
#[test]
fn slab_info_counts_every_cpus_slabs() {
    let (_r, a) = allocator_for_cpus(4 << 20, 2);
    let a = &a;
    let (small, large) = (
        Layout::from_size_align(64, 8).unwrap(),
        Layout::from_size_align(2048, 8).unwrap(),
    );
    let take = |cpu: usize, n: usize, layout: Layout| -> Vec<usize> {
        std::thread::scope(|s| {
            s.spawn(|| {
                CPU.with(|c| c.set(cpu));
                (0..n)
                    .map(|_| a.alloc(layout).unwrap().as_ptr().expose_provenance())
                    .collect()
            })
            .join()
            .unwrap()
        })
    };
    let mut held: Vec<(usize, Layout)> = Vec::new();
    held.extend(take(0, 100, small).into_iter().map(|p| (p, small)));
    held.extend(take(1, 70, small).into_iter().map(|p| (p, small)));
    held.extend(take(1, 3, large).into_iter().map(|p| (p, large)));
    let line = |info: &axalloc_buddy::SlabInfo, size: usize| {
        let c = info.classes().find(|c| c.object_size() == size).unwrap();
        (
            c.active_objects(),
            c.objects(),
            c.slabs(),
            c.objects_per_slab(),
            c.pages_per_slab(),
        )
    };
    let info = a.slab_info();
    // 100 objects on CPU 0 fill two slabs of 63, 70 on CPU 1 two more.
    assert_eq!(line(&info, 64), (170, 4 * 63, 4, 63, 1));
    assert_eq!(line(&info, 2048), (3, 7, 1, 7, 4));
    assert_eq!(info.classes().map(|c| c.slabs()).sum::<usize>(), 5);
    let text = format!("{info}");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("slabinfo - version: 2.1"));
    assert_eq!(
        lines.next(),
        Some(
            "# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> \
             : tunables <limit> <batchcount> <sharedfactor> \
             : slabdata <active_slabs> <num_slabs> <sharedavail>"
        )
    );
    assert!(text.contains(
        "\nkmalloc-64           170    252     64   63    1 : tunables    0    0    0 : slabdata      4      4      0\n"
    ));
    assert!(text.contains(
        "\nkmalloc-2k             3      7   2048    7    4 : tunables    0    0    0 : slabdata      1      1      0\n"
    ));
    assert_eq!(text.lines().count(), 2 + 20);
    for (at, layout) in held {
        let p = core::ptr::NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(at)).unwrap();
        give_back_bytes(a, p, layout);
    }
    // Each CPU keeps one empty slab of each class it made.
    let info = a.slab_info();
    assert_eq!(line(&info, 64), (0, 2 * 63, 2, 63, 1));
    assert_eq!(line(&info, 2048), (0, 7, 1, 7, 4));
    zone_is_sound(a);
}

/// Four CPUs allocate small objects of several classes at once, each handing half of what
/// it allocates to the next CPU, which checks and frees them while their slabs' CPU
/// allocates from the same slabs: every object keeps its bytes, and in the end every byte
/// is given back and every page is free or the heap's.
#[test]
fn cpus_free_each_others_small_objects_at_once() {
    const CPUS: usize = 4;
    let (_r, a) = allocator_for_cpus(if cfg!(miri) { 1 << 20 } else { 16 << 20 }, CPUS);
    let a = &a;
    let before = a.available_pages() + a.heap_bytes() / PAGE;
    let rounds = if cfg!(miri) { 40 } else { 20_000 };
    // What each CPU hands the next: (address, size, mark).
    let handed: Vec<std::sync::Mutex<Vec<(usize, usize, u8)>>> = (0..CPUS)
        .map(|_| std::sync::Mutex::new(Vec::new()))
        .collect();
    let handed = &handed;
    let check_and_free = |(at, size, mark): (usize, usize, u8)| {
        let p = core::ptr::NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(at)).unwrap();
        // SAFETY: the object is `size` bytes handed to this thread, which alone uses it now.
        let bytes = unsafe { core::slice::from_raw_parts(p.as_ptr(), size) };
        assert!(all_bytes_are(bytes, mark), "an object's bytes changed");
        give_back_bytes(a, p, Layout::from_size_align(size, 8).unwrap());
    };
    std::thread::scope(|s| {
        for cpu in 0..CPUS {
            s.spawn(move || {
                CPU.with(|c| c.set(cpu));
                let mut mine = Vec::new();
                for i in 0..rounds {
                    let size = [16, 64, 200, 600, 2048][(i + cpu) % 5];
                    let mark = (i * 7 + cpu) as u8;
                    let p = a.alloc(Layout::from_size_align(size, 8).unwrap()).unwrap();
                    // SAFETY: the object is `size` bytes this thread holds.
                    unsafe { p.as_ptr().write_bytes(mark, size) };
                    let object = (p.as_ptr().expose_provenance(), size, mark);
                    if i % 2 == 0 {
                        handed[(cpu + 1) % CPUS].lock().unwrap().push(object);
                    } else {
                        mine.push(object);
                    }
                    if mine.len() > 32 {
                        check_and_free(mine.swap_remove(i % mine.len()));
                    }
                    let theirs = core::mem::take(&mut *handed[cpu].lock().unwrap());
                    theirs.into_iter().for_each(check_and_free);
                }
                mine.into_iter().for_each(check_and_free);
            });
        }
    });
    for list in handed {
        core::mem::take(&mut *list.lock().unwrap())
            .into_iter()
            .for_each(check_and_free);
    }
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    assert_eq!(a.available_pages() + a.heap_bytes() / PAGE, before);
    zone_is_sound(a);
}

/// Calls that reach every CPU's lists (a run taken at a fixed address, which drains the
/// lists holding part of it; the free-page counts) while other CPUs allocate and free on
/// their own lists without the zone's list locks: debug builds check, on every such access,
/// that nothing else holds the lists.
#[test]
fn fixed_runs_and_counts_while_other_cpus_allocate() {
    let (r, a) = allocator_for_cpus(if cfg!(miri) { 1 << 20 } else { 8 << 20 }, 3);
    let a = &a;
    let rounds = if cfg!(miri) { 8 } else { 500 };
    let pages = r.len() / PAGE;
    // A run the fixed-address calls take and give back, found free first and freed on
    // CPU 1, whose lists then hold it while CPU 1 allocates from them.
    let spot = a.alloc_pages(4, 4 * PAGE, UsageKind::Dma).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            CPU.with(|c| c.set(1));
            give_back(a, spot, 4, UsageKind::Dma);
        });
    });
    std::thread::scope(|s| {
        for cpu in 1..3 {
            s.spawn(move || {
                CPU.with(|c| c.set(cpu));
                for _ in 0..rounds {
                    let p = a.alloc_pages(4, 4 * PAGE, UsageKind::PageTable).unwrap();
                    give_back(a, p, 4, UsageKind::PageTable);
                }
            });
        }
        s.spawn(move || {
            for _ in 0..rounds {
                if let Ok(at) = a.alloc_pages_at(spot, 4, PAGE, UsageKind::Dma) {
                    give_back(a, at, 4, UsageKind::Dma);
                }
                // Read while the other CPUs allocate: at least the heap's first 8 pages are
                // in use, and nothing counts more frames than the zone has.
                let (used, free) = (a.used_pages(), a.available_pages());
                assert!(used >= 8, "{used} pages in use");
                assert!(free <= pages, "{free} pages free");
            }
        });
    });
    assert_eq!(a.usages().get(UsageKind::Dma), 0);
    assert_eq!(a.usages().get(UsageKind::PageTable), 0);
    zone_is_sound(a);
}

/// Usage is counted per CPU (no lock of its own): pages allocated on one CPU and freed on
/// another still add up, on every CPU and in total.
#[test]
fn usage_adds_up_across_cpus() {
    let (_r, a) = allocator_for_cpus(4 << 20, 2);
    let a = &a;
    let run = std::thread::scope(|s| {
        s.spawn(|| {
            CPU.with(|c| c.set(1));
            a.alloc_pages(3, PAGE, UsageKind::PageTable).unwrap()
        })
        .join()
        .unwrap()
    });
    let page = a.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap();
    assert_eq!(a.usages().get(UsageKind::PageTable), 4 * PAGE);
    // Freed on CPU 0, allocated on CPU 1.
    give_back(a, run, 3, UsageKind::PageTable);
    assert_eq!(a.usages().get(UsageKind::PageTable), PAGE);
    std::thread::scope(|s| {
        s.spawn(|| {
            CPU.with(|c| c.set(1));
            give_back(a, page, 1, UsageKind::PageTable);
        });
    });
    assert_eq!(a.usages().get(UsageKind::PageTable), 0);
    zone_is_sound(a);
}

/// Pages another CPU keeps on its lists are not lost to this one: an allocation that finds
/// no memory drains every CPU's lists and tries again (Linux's `drain_all_pages`), so a CPU
/// gets every free page, those on the other CPU's lists included.
#[test]
fn an_allocation_short_of_memory_gets_the_pages_on_other_cpus_lists() {
    let (_r, a) = allocator_for_cpus(if cfg!(miri) { 1 << 20 } else { 4 << 20 }, 2);
    let a = &a;
    // CPU 1 takes pages and gives them back: they stay on its lists.
    std::thread::scope(|s| {
        s.spawn(|| {
            CPU.with(|c| c.set(1));
            let pages: Vec<usize> = (0..16)
                .map(|_| a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap())
                .collect();
            for at in pages {
                give_back(a, at, 1, UsageKind::VirtMem);
            }
        });
    });
    let on_cpu1 = a.pcp_pages(1).unwrap();
    assert!(on_cpu1 > 0);
    // CPU 0 takes every free page, CPU 1's included, then finds none.
    let free = a.available_pages();
    let mut taken = Vec::new();
    while let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        taken.push(at);
    }
    assert_eq!(taken.len(), free);
    assert_eq!((a.available_pages(), a.pcp_pages(1)), (0, Some(0)));
    for at in taken {
        give_back(a, at, 1, UsageKind::VirtMem);
    }
    assert_eq!(a.available_pages(), free);
    zone_is_sound(a);
}

/// A region the heap or the zone holds already is refused (it would be handed out twice:
/// rlsf asserted, or two allocations shared memory), before `init` as after it.
#[test]
fn overlapping_regions_are_refused() {
    use axalloc_buddy::axallocator::AllocError;
    let (mine, a) = allocator(1 << 20);
    let extra = region(256 << 10);
    // SAFETY: `extra` is the allocator's from here on; it outlives the allocator.
    unsafe { a.add_memory(extra.start(), extra.len()) }.unwrap();
    let heap = a.heap_bytes();
    for (at, len) in [
        (extra.start(), extra.len()),
        (extra.start() + (64 << 10), 4 * PAGE),
        (extra.start() - PAGE, 2 * PAGE),
        (mine.start(), mine.len()),
        (mine.start() + mine.len() - PAGE, 2 * PAGE),
    ] {
        // SAFETY: refused before anything is written.
        let r = unsafe { a.add_memory(at, len) };
        assert!(
            matches!(r, Err(AllocError::MemoryOverlap)),
            "{at:#x}+{len:#x}: {r:?}"
        );
    }
    assert_eq!(a.heap_bytes(), heap);
    // Two allocations of the byte allocator (aligned past the slabs' 16 bytes, to 32 KiB)
    // do not overlap.
    let layout = Layout::from_size_align(2048, 32 << 10).unwrap();
    let (p, q) = (a.alloc(layout).unwrap(), a.alloc(layout).unwrap());
    let (p0, q0) = (p.as_ptr() as usize, q.as_ptr() as usize);
    assert!(p0 + layout.size() <= q0 || q0 + layout.size() <= p0);
    give_back_bytes(&a, p, layout);
    give_back_bytes(&a, q, layout);
    zone_is_sound(&a);

    // Before `init`: a region given to the heap first is not the zone's.
    let first = region(64 << 10);
    let b = GlobalAllocator::new();
    // SAFETY: `first` is `b`'s from here on; it outlives `b`.
    unsafe { b.add_memory(first.start(), first.len()) }.unwrap();
    // SAFETY: refused before anything is written.
    let r = unsafe { b.try_init(first.start() - (64 << 10), 1 << 20) };
    assert_eq!(r, Err(InitError::Overlap));
}

/// A heap request past the slabs (2 KiB) up to 256 KiB takes a block of pages of its size
/// rounded up to a power of two of pages, aligned as asked, counted whole for the heap;
/// given back, it waits in its CPU's magazine, and the next such request on that CPU takes
/// it. Past 256 KiB the byte allocator serves.
#[test]
fn a_large_heap_request_takes_a_block_of_pages_from_its_cpus_magazine() {
    static CLAIMS: Claims = Claims::new();
    let (r, a, claims) = claimed_allocator(4 << 20, 2, &CLAIMS);
    let _cpu = claim(claims, 0);
    let (free, heap) = (a.available_pages(), a.heap_bytes());
    let (used, heap_used) = (a.usages().get(UsageKind::RustHeap), a.used_bytes());
    let layout = Layout::from_size_align(5000, 8).unwrap();
    let p = a.alloc(layout).unwrap();
    let at = p.as_ptr() as usize;
    assert!(
        r.holds(at) && at.is_multiple_of(2 * PAGE),
        "{at:#x}: a block of two pages"
    );
    assert_eq!(a.available_pages(), free - 2);
    assert_eq!(a.heap_bytes(), heap + 2 * PAGE);
    assert_eq!(a.usages().get(UsageKind::RustHeap), used + 2 * PAGE);
    assert_eq!(a.used_bytes(), heap_used + 2 * PAGE);
    // SAFETY: the block's bytes are the test's.
    unsafe { p.as_ptr().write_bytes(0x5a, layout.size()) };
    give_back_bytes(&a, p, layout);
    assert_eq!(a.available_pages(), free);
    assert_eq!(a.heap_bytes(), heap);
    assert_eq!(a.usages().get(UsageKind::RustHeap), used);
    assert_eq!(a.used_bytes(), heap_used);
    // The magazine's block again, for a request of the same pages.
    let q = a
        .alloc(Layout::from_size_align(8192, 4096).unwrap())
        .unwrap();
    assert_eq!(q, p);
    give_back_bytes(&a, q, Layout::from_size_align(8192, 4096).unwrap());
    // Aligned above its size: a page aligned to 64 KiB.
    let aligned = Layout::from_size_align(3000, 64 << 10).unwrap();
    let p = a.alloc(aligned).unwrap();
    assert!((p.as_ptr() as usize).is_multiple_of(64 << 10));
    assert_eq!(a.available_pages(), free - 1);
    give_back_bytes(&a, p, aligned);
    // Past 256 KiB: the byte allocator's (its heap grows, and keeps what it took).
    let big = Layout::from_size_align((256 << 10) + 1, 8).unwrap();
    let p = a.alloc(big).unwrap();
    assert_eq!(a.usages().get(UsageKind::RustHeap), used + big.size());
    give_back_bytes(&a, p, big);
    assert_eq!(a.usages().get(UsageKind::RustHeap), used);
    assert!(a.heap_bytes() > heap + (256 << 10));
    zone_is_sound(&a);
}

/// A large heap request before `init` takes the byte allocator's first memory (no zone
/// yet), and goes back there when freed after `init`, whose regions do not hold it: the
/// heap's count returns to nothing, and the zone is untouched.
#[test]
fn a_large_heap_request_from_before_init_goes_back_to_the_byte_allocator() {
    let first = region(64 << 10);
    let zone = region(2 << 20);
    let a = GlobalAllocator::new();
    // SAFETY: both regions are `a`'s from here on; they outlive it.
    unsafe { a.add_memory(first.start(), first.len()) }.unwrap();
    let layout = Layout::from_size_align(8192, 8).unwrap();
    let early = a.alloc(layout).unwrap();
    assert!(first.holds(early.as_ptr() as usize));
    // SAFETY: as above.
    unsafe { a.try_init(zone.start(), zone.len()) }.unwrap();
    let free = a.available_pages();
    let late = a.alloc(layout).unwrap();
    assert!(
        zone.holds(late.as_ptr() as usize),
        "after init: a block of pages"
    );
    give_back_bytes(&a, late, layout);
    give_back_bytes(&a, early, layout);
    assert_eq!(a.usages().get(UsageKind::RustHeap), 0);
    assert_eq!(a.available_pages(), free);
    zone_is_sound(&a);
}

/// Page calls take ArceOS's page allocators' parameters: an alignment of a page or more, a
/// run of a page or more. A heap request of 0 bytes gets a pointer, as from ArceOS's byte
/// allocators.
#[test]
fn page_calls_refuse_what_arceos_refuses() {
    use axalloc_buddy::axallocator::AllocError;
    let (_mine, a) = allocator(1 << 20);
    let free = a.available_pages();
    for align in [0, 1, 8, PAGE / 2, 3 * PAGE] {
        let r = a.alloc_pages(1, align, UsageKind::Global);
        assert!(
            matches!(r, Err(AllocError::InvalidParam)),
            "align {align}: {r:?}"
        );
    }
    let r = a.alloc_pages(0, PAGE, UsageKind::Global);
    assert!(matches!(r, Err(AllocError::InvalidParam)), "0 pages: {r:?}");
    assert_eq!(a.available_pages(), free);
    assert_eq!(a.usages().get(UsageKind::Global), 0);
    let empty = Layout::from_size_align(0, 1).unwrap();
    let p = a.alloc(empty).unwrap();
    give_back_bytes(&a, p, empty);
}

/// Every region given after `init` is a zone of its own, holes between: pages come from the
/// next region when the first has none, frees go to the region that holds them, and a
/// region too small for a zone's metadata goes to the heap. Without a translation,
/// addresses are physical: host memory above 4 GiB serves no DMA32 request.
#[test]
fn every_region_is_managed_with_holes_between() {
    // Under Miri, where a page call costs milliseconds, regions a quarter the size.
    let scale = if cfg!(miri) { 2 } else { 0 };
    let (first, a) = allocator((1 << 20) >> scale);
    // Aligned to its size, so that its upper half is its largest free block (below: its
    // metadata takes the first pages); page-aligned, that block could overlap the metadata.
    let second = aligned_region((2 << 20) >> scale, (2 << 20) >> scale);
    let tiny = region(8 * PAGE);
    // SAFETY: both regions are the allocator's from here on; they outlive it.
    unsafe { a.add_memory(second.start(), second.len()) }.unwrap();
    assert_eq!(a.region_count(), 2);
    let heap = a.heap_bytes();
    // SAFETY: as above.
    unsafe { a.add_memory(tiny.start(), tiny.len()) }.unwrap();
    assert_eq!(a.region_count(), 2, "8 pages hold no zone");
    assert_eq!(a.heap_bytes(), heap + tiny.len());
    // Take every page: the first region's, then the second's.
    let mut pages = Vec::new();
    while let Ok(p) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) {
        assert!(first.holds(p) || second.holds(p), "{p:#x}");
        pages.push(p);
    }
    assert!(pages.iter().any(|&p| first.holds(p)) && pages.iter().any(|&p| second.holds(p)));
    assert_eq!(a.available_pages(), 0);
    assert!(pages.len() > second.len() / PAGE, "{} pages", pages.len());
    let mut seen = std::collections::BTreeSet::new();
    assert!(
        pages.iter().all(|&p| seen.insert(p)),
        "a page handed out twice"
    );
    for &p in pages.iter().rev() {
        give_back(&a, p, 1, UsageKind::VirtMem);
    }
    assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
    zone_is_sound(&a);
    // A run as large as the second region's largest block (half of it: its metadata takes
    // the first pages) comes from it.
    let largest = second.len() / PAGE / 2;
    let run = a
        .alloc_pages(largest, largest * PAGE, UsageKind::VirtMem)
        .unwrap();
    assert!(second.holds(run));
    give_back(&a, run, largest, UsageKind::VirtMem);
    // Host memory is above 4 GiB: no DMA32 region.
    if first.start() as u64 > u64::from(u32::MAX) {
        let r = a.alloc_dma32_pages(1, PAGE, UsageKind::Dma);
        assert!(matches!(
            r,
            Err(axalloc_buddy::axallocator::AllocError::NoMemory)
        ));
    }
    zone_is_sound(&a);
}

/// With the kernel's translation, a region that crosses 4 GiB in physical memory is two
/// zones cut at 4 GiB, and DMA32 pages come only from below it.
#[test]
fn dma32_pages_come_from_below_4_gib() {
    // The region's physical addresses, as a kernel's linear map would give them: it crosses
    // 4 GiB half way (4 MiB on each side: the least that is cut).
    const BYTES: usize = 8 << 20;
    // Pages per DMA32 call: under Miri, where a page call costs milliseconds, runs of 16.
    const RUN: usize = if cfg!(miri) { 16 } else { 1 };
    static BASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    fn virt_to_phys(v: usize) -> usize {
        v - BASE.load(std::sync::atomic::Ordering::Relaxed) + (4 << 30) - BYTES / 2
    }
    let r = region(BYTES);
    BASE.store(r.start(), std::sync::atomic::Ordering::Relaxed);
    let a = GlobalAllocator::new().translating(virt_to_phys);
    // SAFETY: the region is the allocator's alone; it outlives the allocator.
    unsafe { a.try_init(r.start(), r.len()) }.unwrap();
    assert_eq!(a.region_count(), 2, "cut at 4 GiB");
    let mut low = Vec::new();
    while let Ok(p) = a.alloc_dma32_pages(RUN, PAGE, UsageKind::Dma) {
        assert!(virt_to_phys(p + RUN * PAGE - 1) < 1 << 32, "{p:#x}");
        low.push(p);
    }
    assert!(
        low.len() * RUN > BYTES / 4 / PAGE,
        "{} DMA32 runs",
        low.len()
    );
    // The memory above 4 GiB is still there for other requests.
    let high = a.alloc_pages(16, PAGE, UsageKind::VirtMem).unwrap();
    assert!(virt_to_phys(high) >= 1 << 32);
    give_back(&a, high, 16, UsageKind::VirtMem);
    for p in low {
        give_back(&a, p, RUN, UsageKind::Dma);
    }
    assert_eq!(a.usages().get(UsageKind::Dma), 0);
    zone_is_sound(&a);
}

/// `split_pages` on `a`.
fn split(
    a: &GlobalAllocator<impl CpuId>,
    pos: usize,
) -> axalloc_buddy::axallocator::AllocResult<usize> {
    // SAFETY: the tests split only runs they hold, on one thread.
    unsafe { a.split_pages(pos) }
}

/// A 2 MiB huge page split into 4 KiB pages (StarryOS's `split_pages`): each page is then a
/// block of its own, freed alone in any order; a free block, a page inside a block and an
/// address outside the allocator are refused with nothing changed.
#[test]
fn a_huge_page_splits_into_pages_freed_one_by_one() {
    use axalloc_buddy::axallocator::AllocError;
    let (_region, a) = allocator(8 << 20);
    let free = a.available_pages();
    let huge = a.alloc_pages(512, 2 << 20, UsageKind::VirtMem).unwrap();
    assert_eq!(huge % (2 << 20), 0);
    assert!(matches!(
        split(&a, huge + PAGE),
        Err(AllocError::InvalidParam)
    ));
    assert!(matches!(
        split(&a, usize::MAX - PAGE + 1),
        Err(AllocError::InvalidParam)
    ));
    assert_eq!(split(&a, huge).unwrap(), 512);
    // SAFETY: between page calls.
    let zone = unsafe { a.zone() }.unwrap();
    for i in [0, 1, 255, 511] {
        let f = zone
            .frame(buddy_sim::Pfn(((huge + i * PAGE) / PAGE) as u64))
            .unwrap();
        // The huge page was handed out frozen (a block's worth of pages): its pages too.
        assert_eq!(
            (f.state, f.order, f.refcount, f.frozen),
            (buddy_sim::FrameState::Allocated, 0, 0, true)
        );
    }
    // Split again: each page is one already.
    assert_eq!(split(&a, huge).unwrap(), 1);
    // Free the pages in a scattered order: odd ones, then even ones from the top.
    let order: Vec<usize> = (0..512)
        .filter(|i| i % 2 == 1)
        .chain((0..512).filter(|i| i % 2 == 0).rev())
        .collect();
    for i in order {
        give_back(&a, huge + i * PAGE, 1, UsageKind::VirtMem);
    }
    assert_eq!(a.available_pages(), free);
    assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
    assert!(matches!(split(&a, huge), Err(AllocError::NotAllocated)));
    zone_is_sound(&a);
}

/// An allocator over a region of 1 MiB, then one of 2 MiB (a quarter of each under Miri):
/// the two regions and the allocator.
fn two_regions() -> (Region, Region, GlobalAllocator) {
    let scale = if cfg!(miri) { 2 } else { 0 };
    let (first, a) = allocator((1 << 20) >> scale);
    let second = region((2 << 20) >> scale);
    // SAFETY: the region is the allocator's from here on; it outlives it.
    unsafe { a.add_memory(second.start(), second.len()) }.unwrap();
    (first, second, a)
}

/// Pages taken from `a` until one comes from outside `first`: all of them, that one last.
fn fill_first(a: &GlobalAllocator<impl CpuId>, first: &Region) -> Vec<usize> {
    let mut held = Vec::new();
    loop {
        let p = a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap();
        held.push(p);
        if !first.holds(p) {
            return held;
        }
    }
}

/// A region whose page calls found no free page is passed over by the calls that follow (its
/// zone not even locked) until a page is given back to it: once the first region is full,
/// a call costs what it costs in the next region, not a failing slow path in the first
/// (one that drains every CPU's lists and, for a run, searches all of its memory) each time.
/// (Measured natively: a page pair 833 -> 58 ns, an 8-page pair 56 µs -> 56 ns with an
/// 8 MiB first region full.)
#[test]
fn an_exhausted_region_is_passed_over_until_a_page_comes_back() {
    let (first, _second, a) = two_regions();
    let mut held = fill_first(&a, &first);
    // SAFETY: the zones are read between page calls only.
    let zone = unsafe { a.zone() }.unwrap();
    let locks = zone.counters().zone_locks;
    for _ in 0..16 {
        let page = a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap();
        let run = a.alloc_pages(8, PAGE, UsageKind::VirtMem).unwrap();
        assert!(!first.holds(page) && !first.holds(run));
        give_back(&a, page, 1, UsageKind::VirtMem);
        give_back(&a, run, 8, UsageKind::VirtMem);
    }
    assert_eq!(
        zone.counters().zone_locks,
        locks,
        "a call tried the full first region"
    );
    // A page given back to the first region: the next call takes it there.
    let back = held.iter().position(|&p| first.holds(p)).unwrap();
    give_back(&a, held.swap_remove(back), 1, UsageKind::VirtMem);
    let again = a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap();
    assert!(first.holds(again), "{again:#x}");
    held.push(again);
    for p in held {
        give_back(&a, p, 1, UsageKind::VirtMem);
    }
    assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
    zone_is_sound(&a);
}

/// A block freed onto the CPU's list of an exhausted region waits there for the next call
/// of its size, which takes it back whatever the mark says; the mark stays, so one-page
/// calls still pass the region over (the block is no page for them until the general path
/// drains the lists).
#[test]
fn a_block_freed_onto_an_exhausted_regions_list_is_taken_again_by_its_size() {
    let (first, _second, a) = two_regions();
    let stack = a.alloc_pages(8, PAGE, UsageKind::VirtMem).unwrap();
    assert!(first.holds(stack));
    let held = fill_first(&a, &first);
    give_back(&a, stack, 8, UsageKind::VirtMem);
    // SAFETY: the zones are read between page calls only.
    let zone = unsafe { a.zone() }.unwrap();
    let locks = zone.counters().zone_locks;
    let page = a.alloc_pages(1, PAGE, UsageKind::VirtMem).unwrap();
    assert!(
        !first.holds(page),
        "the region was not passed over: {page:#x}"
    );
    assert_eq!(
        a.alloc_pages(8, PAGE, UsageKind::VirtMem).unwrap(),
        stack,
        "the block waiting on the list"
    );
    assert_eq!(zone.counters().zone_locks, locks, "a call locked the zone");
    give_back(&a, page, 1, UsageKind::VirtMem);
    give_back(&a, stack, 8, UsageKind::VirtMem);
    for p in held {
        give_back(&a, p, 1, UsageKind::VirtMem);
    }
    assert_eq!(a.usages().get(UsageKind::VirtMem), 0);
    zone_is_sound(&a);
}

/// The configuration the allocator gives its zone: the region's largest block, per-cpu
/// lists up to order 6 sized for the only zone, valid for any region the allocator takes,
/// and no panic for any input (a CPU count of 0, which `global_init` refuses, included).
#[test]
fn zone_config_is_valid_and_sized_for_the_only_zone() {
    use axalloc_buddy::buddy_sim::{Order, Pfn};
    let cfg = axalloc_buddy::zone_config(Pfn(0x4_0000), 1 << 15, 2);
    assert_eq!(cfg.max_order, Order::new(15).unwrap());
    assert_eq!(cfg.pcp_max_order, Order::new(6).unwrap());
    assert_eq!(
        cfg.pcp_high, 1024,
        "an eighth of 128 MiB over two CPUs, capped"
    );
    assert_eq!(cfg.pcp_batch, axalloc_buddy::buddy_sim::LINUX_PCP_BATCH);
    assert_eq!(cfg.validate(), Ok(()));
    // No panic on any input, even ones the zone then refuses (validate says why).
    for (first, frames, cpus) in [(0, 0, 1), (u64::MAX, u64::MAX, usize::MAX), (1, 3, 0)] {
        let _ = axalloc_buddy::zone_config(Pfn(first), frames, cpus).validate();
    }
    for (frames, cpus) in [(16, 1), (1000, 3), (1 << 20, 64), (1 << 15, 0)] {
        let cfg = axalloc_buddy::zone_config(Pfn(0x10_0000), frames, cpus);
        assert!(
            cfg.pcp_high >= cfg.pcp_batch,
            "{frames} frames, {cpus} CPUs"
        );
        if cpus > 0 {
            assert_eq!(cfg.validate(), Ok(()), "{frames} frames, {cpus} CPUs");
        }
    }
}
