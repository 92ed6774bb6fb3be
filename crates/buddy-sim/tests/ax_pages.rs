//! `AxPageAllocator` under `axallocator`'s interface: the cases ArceOS's page allocators are
//! tested with (one page, alignment, a fixed base, a whole region in and out, overlap,
//! counts), and arbitrary sequences against a model of which pages are held.
#![cfg(not(loom))]

mod common;
use common::TestZone;
use common::bytes::all_bytes_are;

use axallocator::{AllocError, BaseAllocator, PageAllocator};
use buddy_sim::{AxPageAllocator, BuddyError, Pfn, ZoneConfig};
use proptest::prelude::*;

const PAGE: usize = 4096;

/// The adapter over a test zone.
type Ax<'z> =
    AxPageAllocator<'z, common::FrameVec, Vec<buddy_sim::PerCpu>, buddy_sim::DefaultRawMutex>;

/// The allocator on `z`'s `cpu`, frames at `offset`.
fn ax(z: &TestZone, cpu: usize, offset: usize) -> Result<Ax<'_>, BuddyError> {
    // SAFETY: no memory behind these zones: the frees these tests make, right or wrong, can
    // only change metadata (which they check).
    unsafe { AxPageAllocator::new(z, cpu, offset) }
}

/// `split_pages` on `a`.
fn split(a: &mut Ax<'_>, pos: usize) -> Result<usize, AllocError> {
    // SAFETY: no memory behind these zones (as `ax`), and each test splits on one thread.
    unsafe { a.split_pages(pos) }
}

/// An empty zone spanning `pages` frames from position `base` (offset 0: identity map).
fn zone(base: usize, pages: u64) -> TestZone {
    common::empty_zone(ZoneConfig::new(Pfn((base / PAGE) as u64), pages).with_cpus(2)).unwrap()
}

#[test]
fn one_page_in_and_out() {
    let z = zone(PAGE, 1);
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(PAGE, PAGE);
    assert_eq!(
        (a.total_pages(), a.used_pages(), a.available_pages()),
        (1, 0, 1)
    );
    let p = a.alloc_pages(1, PAGE).unwrap();
    assert_eq!(p, PAGE);
    assert_eq!((a.used_pages(), a.available_pages()), (1, 0));
    assert!(matches!(a.alloc_pages(1, PAGE), Err(AllocError::NoMemory)));
    a.dealloc_pages(p, 1);
    assert_eq!(a.last_error(), None);
    assert_eq!(a.alloc_pages(1, PAGE).unwrap(), PAGE);
    // Twice freed: reported, nothing changes.
    a.dealloc_pages(p, 1);
    a.dealloc_pages(p, 1);
    assert!(matches!(a.last_error(), Some(BuddyError::DoubleFree(_))));
    assert_eq!(a.used_pages(), 0);
    z.check().unwrap();
}

/// ArceOS's heap grows by doubling (16 MiB, 32 MiB, ...): runs larger than the zone's
/// largest block come from anywhere in the zone, contiguous and aligned, and go back in
/// pieces, as the bitmap allocator serves them.
#[test]
fn runs_larger_than_a_block_are_served() {
    let base = 1 << 30;
    // MAX_ORDER 4: a block is at most 16 frames.
    let cfg = ZoneConfig {
        max_order: buddy_sim::Order::new(4).unwrap(),
        pageblock_order: buddy_sim::Order::new(4).unwrap(),
        ..ZoneConfig::new(Pfn((base / PAGE) as u64), 256).with_cpus(2)
    };
    let z = common::empty_zone(cfg).unwrap();
    let mut a = ax(&z, 1, 0).unwrap();
    a.init(base, 256 * PAGE);
    // A page in the way at the bottom: the run starts past it.
    let low = a.alloc_pages(1, PAGE).unwrap();
    let big = a
        .alloc_pages(100, PAGE)
        .expect("100 frames, more than a 16-frame block");
    assert!(big >= low + PAGE || big + 100 * PAGE <= low);
    let aligned = a
        .alloc_pages(40, 16 * PAGE)
        .expect("40 frames aligned to 64 KiB");
    assert_eq!(aligned % (16 * PAGE), 0);
    let (mine, theirs) = (big..big + 100 * PAGE, aligned..aligned + 40 * PAGE);
    assert!(
        mine.end <= theirs.start || theirs.end <= mine.start,
        "runs overlap"
    );
    assert_eq!(a.used_pages(), 1 + 100 + 40);
    // More than is free: refused as out of memory, nothing taken.
    assert!(matches!(
        a.alloc_pages(200, PAGE),
        Err(AllocError::NoMemory)
    ));
    assert_eq!(a.used_pages(), 141);
    // Given back in pieces.
    a.dealloc_pages(big + 50 * PAGE, 50);
    a.dealloc_pages(big, 50);
    a.dealloc_pages(aligned, 40);
    a.dealloc_pages(low, 1);
    assert_eq!((a.used_pages(), a.last_error()), (0, None));
    z.check().unwrap();
}

#[test]
fn alignments_are_honoured_and_bad_ones_refused() {
    let base = 1 << 30;
    let z = zone(base, 4096);
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, 4096 * PAGE);
    let mut held = Vec::new();
    for (n, align) in [
        (1, PAGE),
        (3, PAGE),
        (1, 1 << 16),
        (5, 1 << 20),
        (2, 1 << 21),
    ] {
        let p = a.alloc_pages(n, align).unwrap();
        assert_eq!(p % align, 0, "{n} pages aligned to {align:#x} at {p:#x}");
        held.push((p, n));
    }
    assert_eq!(a.used_pages(), 1 + 3 + 1 + 5 + 2);
    for bad in [0, 3 * PAGE, 1 << 40] {
        assert!(a.alloc_pages(1, bad).is_err(), "align {bad:#x}");
    }
    assert!(matches!(
        a.alloc_pages(0, PAGE),
        Err(AllocError::InvalidParam)
    ));
    for (p, n) in held {
        a.dealloc_pages(p, n);
        assert_eq!(a.last_error(), None);
    }
    assert_eq!(a.used_pages(), 0);
    z.drain_all();
    z.check().unwrap();
}

#[test]
fn a_fixed_base_is_taken_exactly_once() {
    let base = 1 << 24;
    let z = zone(base, 1024);
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, 1024 * PAGE);
    // A misaligned run of 13 pages: the fewest aligned blocks, split into pages.
    let at = base + 3 * PAGE;
    assert_eq!(a.alloc_pages_at(at, 13, PAGE).ok(), Some(at));
    assert_eq!(a.used_pages(), 13);
    // Overlapping it: refused, nothing taken.
    assert!(matches!(
        a.alloc_pages_at(base + 8 * PAGE, 16, PAGE),
        Err(AllocError::NoMemory)
    ));
    assert_eq!(a.used_pages(), 13);
    // Misaligned for its alignment, or outside the zone: invalid.
    assert!(matches!(
        a.alloc_pages_at(at, 1, 1 << 16),
        Err(AllocError::InvalidParam)
    ));
    assert!(a.alloc_pages_at(base + 2048 * PAGE, 1, PAGE).is_err());
    // Any part of it can go back.
    a.dealloc_pages(at + 5 * PAGE, 8);
    a.dealloc_pages(at, 5);
    assert_eq!((a.used_pages(), a.last_error()), (0, None));
    z.drain_all();
    z.check().unwrap();
    assert_eq!(z.buddy_pages(), 1024);
}

#[test]
fn the_whole_region_goes_out_and_back() {
    let base = 1 << 24;
    let z = zone(base, 512);
    let mut a = ax(&z, 1, 0).unwrap();
    a.init(base, 512 * PAGE);
    let all = a.alloc_pages(512, PAGE).unwrap();
    assert_eq!(all, base);
    assert_eq!(a.available_pages(), 0);
    assert!(matches!(a.alloc_pages(1, PAGE), Err(AllocError::NoMemory)));
    a.dealloc_pages(all, 512);
    assert_eq!(a.available_pages(), 512);
    z.drain_all();
    z.check().unwrap();
}

#[test]
fn memory_is_added_once_and_only_inside_the_zone() {
    let base = 1 << 24;
    let z = zone(base, 256);
    let mut a = ax(&z, 0, 0).unwrap();
    // Partial pages at both ends are left out.
    assert!(a.add_memory(base + 100, 64 * PAGE).is_ok());
    assert_eq!(a.total_pages(), 63);
    assert!(matches!(
        a.add_memory(base, 2 * PAGE),
        Err(AllocError::MemoryOverlap)
    ));
    assert_eq!(a.total_pages(), 63);
    assert!(matches!(
        a.add_memory(base + 512 * PAGE, PAGE),
        Err(AllocError::InvalidParam)
    ));
    assert!(matches!(a.last_error(), Some(BuddyError::OutOfZone(_))));
    assert!(ax(&z, 5, 0).is_err());
    assert!(ax(&z, 0, 100).is_err());
    z.check().unwrap();
}

#[test]
fn positions_follow_the_offset() {
    let offset = 0xffff_8000_0000_0000usize;
    let z = zone(1 << 24, 64);
    let mut a = ax(&z, 0, offset).unwrap();
    a.init(offset + (1 << 24), 64 * PAGE);
    let p = a.alloc_pages(4, 4 * PAGE).unwrap();
    assert!(p >= offset + (1 << 24) && p < offset + (1 << 24) + 64 * PAGE);
    assert_eq!(p % (4 * PAGE), 0);
    a.dealloc_pages(p, 4);
    assert_eq!(a.last_error(), None);
    // A position below the offset is no frame.
    a.dealloc_pages(PAGE, 1);
    assert_eq!(a.last_error(), Some(BuddyError::NotAFrame { addr: PAGE }));
}

/// Runs are held as blocks: one free can take parts of two runs (the second half of one,
/// the first half of the next), splitting the two blocks it reaches into pages, and the rest
/// of each run still goes back; a free of frames no run holds frees nothing.
#[test]
fn a_free_across_two_runs_splits_the_blocks_it_reaches() {
    let base = 1 << 24;
    let cfg = ZoneConfig::new(Pfn((base / PAGE) as u64), 32)
        .with_cpus(2)
        .with_max_order(buddy_sim::Order::new(4).unwrap());
    let z = common::empty_zone(cfg).unwrap();
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, 32 * PAGE);
    let first = a.alloc_pages(16, PAGE).unwrap();
    let second = a.alloc_pages(16, PAGE).unwrap();
    let (lo, hi) = (first.min(second), first.max(second));
    assert_eq!(
        hi - lo,
        16 * PAGE,
        "two runs of the 32 frames, side by side"
    );
    assert_eq!(a.used_pages(), 32);
    a.dealloc_pages(lo + 8 * PAGE, 16);
    assert_eq!((a.used_pages(), a.last_error()), (16, None));
    z.check().unwrap();
    // The middle is free: freeing it again frees nothing and says why.
    a.dealloc_pages(lo + 8 * PAGE, 1);
    assert!(a.last_error().is_some());
    assert_eq!(a.used_pages(), 16);
    // What is left of each run: pages now, freed in one call each.
    a.dealloc_pages(lo, 8);
    a.dealloc_pages(hi + 8 * PAGE, 8);
    assert_eq!((a.used_pages(), a.last_error()), (0, None));
    z.check().unwrap();
    // The whole region merged back into the largest blocks, and goes out as one run again.
    let all = a.alloc_pages(32, PAGE).unwrap();
    assert_eq!(all, base);
    a.dealloc_pages(all, 32);
    assert_eq!((a.used_pages(), a.last_error()), (0, None));
    z.check().unwrap();
}

#[test]
fn pages_allocated_alone_go_back_one_by_one_or_together() {
    let base = 1 << 24;
    let cfg = ZoneConfig::new(Pfn((base / PAGE) as u64), 16).with_cpus(1);
    let z = common::empty_zone(cfg).unwrap();
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, 16 * PAGE);
    let mut pages: Vec<usize> = (0..16).map(|_| a.alloc_pages(1, PAGE).unwrap()).collect();
    assert!(a.alloc_pages(1, PAGE).is_err());
    pages.sort_unstable();
    assert_eq!(pages[15] - pages[0], 15 * PAGE, "the 16 frames");
    // Frozen: no reference to take or drop.
    let pfn = Pfn((pages[3] / PAGE) as u64);
    assert_eq!(z.get_page(pfn), Err(buddy_sim::FreeError::Frozen(pfn)));
    // One by one, and a second free of one is refused and changes nothing.
    a.dealloc_pages(pages[3], 1);
    assert_eq!((a.used_pages(), a.last_error()), (15, None));
    a.dealloc_pages(pages[3], 1);
    assert!(a.last_error().is_some());
    assert_eq!(a.used_pages(), 15);
    z.check().unwrap();
    // Pages allocated one at a time, given back in one call (ArceOS's contract allows any
    // part of what it was given): a run that meets a free page frees nothing.
    a.dealloc_pages(pages[0], 8);
    assert!(a.last_error().is_some());
    assert_eq!(a.used_pages(), 15);
    z.check().unwrap();
    a.dealloc_pages(pages[0], 3);
    a.dealloc_pages(pages[4], 12);
    assert_eq!((a.used_pages(), a.last_error()), (0, None));
    z.check().unwrap();
    assert_eq!(a.alloc_pages(16, PAGE).ok(), Some(base));
}

#[test]
fn a_run_with_no_free_block_of_its_order_comes_from_free_memory() {
    let base = 1 << 24;
    let cfg = ZoneConfig::new(Pfn((base / PAGE) as u64), 32)
        .with_cpus(1)
        .with_max_order(buddy_sim::Order::new(5).unwrap());
    let z = common::empty_zone(cfg).unwrap();
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, 32 * PAGE);
    let mut pages: Vec<usize> = (0..32).map(|_| a.alloc_pages(1, PAGE).unwrap()).collect();
    pages.sort_unstable();
    // Frames 4..20 free: 16 pages, but no free block of order 4 (16 frames, aligned).
    a.dealloc_pages(pages[4], 16);
    assert_eq!((a.used_pages(), a.last_error()), (16, None));
    let run = a
        .alloc_pages(16, PAGE)
        .expect("the 16 free pages, found as a run");
    assert_eq!(run, pages[4]);
    z.check().unwrap();
    a.dealloc_pages(run, 16);
    assert_eq!((a.used_pages(), a.last_error()), (16, None));
}

#[derive(Clone, Debug)]
enum Call {
    Alloc {
        pages: usize,
        align_log: u8,
    },
    AllocAt {
        page: usize,
        pages: usize,
    },
    Dealloc {
        which: usize,
        from: usize,
        len: usize,
    },
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (1usize..40, 0u8..8).prop_map(|(pages, align_log)| Call::Alloc { pages, align_log }),
        (0usize..300, 1usize..40).prop_map(|(page, pages)| Call::AllocAt { page, pages }),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(which, from, len)| Call::Dealloc { which, from, len }),
    ]
}

proptest! {
    #![proptest_config(common::proptest_config(2))]

    /// Any sequence of allocations (aligned or at a base, up to 40 pages where the largest
    /// block is 16) and frees of any part of a run (its head, its tail, its middle, or all
    /// of it): runs never overlap, stay inside the region, honour their alignment, and the
    /// counts are the model's; a refused call changes nothing; the zone is consistent after
    /// every call.
    #[test]
    fn runs_never_overlap_and_counts_match(calls in proptest::collection::vec(call(), 1..40)) {
        const FRAMES: usize = 256;
        let base = 1 << 24;
        let cfg = ZoneConfig::new(Pfn((base / PAGE) as u64), FRAMES as u64)
            .with_cpus(2)
            .with_max_order(buddy_sim::Order::new(4).unwrap());
        let z = common::empty_zone(cfg).unwrap();
        let mut a = ax(&z, 0, 0).unwrap();
        a.init(base, FRAMES * PAGE);
        let mut held = [false; FRAMES];
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for c in calls {
            let before = a.used_pages();
            let got = match c {
                Call::Alloc { pages, align_log } => {
                    let align = PAGE << align_log;
                    a.alloc_pages(pages, align).map(|p| {
                        prop_assert_eq!(p % align, 0);
                        Ok((p, pages))
                    })
                }
                Call::AllocAt { page, pages } => {
                    a.alloc_pages_at(base + page * PAGE, pages, PAGE).map(|p| Ok((p, pages)))
                }
                Call::Dealloc { which, from, len } => {
                    if !runs.is_empty() {
                        let i = which % runs.len();
                        let (p, n) = runs.swap_remove(i);
                        // Free pages `[from, from + len)` of the run, keep the rest held.
                        let from = from % n;
                        let len = 1 + len % (n - from);
                        a.dealloc_pages(p + from * PAGE, len);
                        prop_assert_eq!(a.last_error(), None);
                        let first = (p - base) / PAGE + from;
                        held[first..first + len].fill(false);
                        if from > 0 {
                            runs.push((p, from));
                        }
                        if from + len < n {
                            runs.push((p + (from + len) * PAGE, n - from - len));
                        }
                    }
                    prop_assert_eq!(a.used_pages(), held.iter().filter(|&&h| h).count());
                    z.check().unwrap();
                    continue;
                }
            };
            match got {
                Ok(run) => {
                    let (p, n) = run?;
                    prop_assert!(p >= base && p + n * PAGE <= base + FRAMES * PAGE);
                    let first = (p - base) / PAGE;
                    prop_assert!(held[first..first + n].iter().all(|&h| !h), "overlap at {:#x}", p);
                    held[first..first + n].fill(true);
                    runs.push((p, n));
                }
                Err(_) => prop_assert_eq!(a.used_pages(), before),
            }
            prop_assert_eq!(a.used_pages(), held.iter().filter(|&&h| h).count());
            prop_assert_eq!(a.used_pages() + a.available_pages(), FRAMES);
            z.check().unwrap();
        }
        // Every run back: the whole region is free again.
        for (p, n) in runs {
            a.dealloc_pages(p, n);
            prop_assert_eq!(a.last_error(), None);
        }
        prop_assert_eq!(a.used_pages(), 0);
        z.check().unwrap();
    }
}

/// The allocator built at compile time over a static zone, as a `static` global needs it,
/// and its checks made there.
#[test]
fn a_static_allocator_is_built_at_compile_time() {
    use buddy_sim::{ConfigError, DefaultRawMutex, Frame, PerCpu, StaticZone};
    type Static = AxPageAllocator<'static, [Frame; 64], [PerCpu; 2], DefaultRawMutex>;
    static ZONE: StaticZone<64, 2> =
        StaticZone::new_static_empty(ZoneConfig::new(Pfn(0x4000), 64).with_cpus(2));
    // SAFETY: no memory behind the zone (module docs); its frames, at 64 MiB, all have
    // addresses at offset 0.
    const ON_CPU_1: Result<Static, BuddyError> =
        unsafe { AxPageAllocator::new_static(&ZONE, 1, 0) };
    let mut a = ON_CPU_1.unwrap();
    a.init(0x4000 * PAGE, 64 * PAGE);
    let run = a.alloc_pages(5, PAGE).unwrap();
    assert_eq!(a.used_pages(), 5);
    a.dealloc_pages(run, 5);
    assert_eq!((a.used_pages(), a.last_error()), (0, None));
    // SAFETY: as above.
    let refused = unsafe {
        (
            AxPageAllocator::new_static(&ZONE, 2, 0).map(drop),
            AxPageAllocator::new_static(&ZONE, 0, 100).map(drop),
        )
    };
    assert_eq!(
        refused,
        (
            Err(BuddyError::BadCpu(2)),
            Err(BuddyError::Config(ConfigError::DirectMapOffset(100)))
        )
    );
    ZONE.check().unwrap();
}

/// One allocator for every CPU, each call on the lists of the CPU the embedder says it runs
/// on (ArceOS's `this_cpu_id`), as one global allocator behind an interrupt-disabling lock
/// uses them.
#[test]
fn each_call_uses_the_current_cpus_lists() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CURRENT: AtomicUsize = AtomicUsize::new(1);
    fn current() -> usize {
        CURRENT.load(Ordering::Relaxed)
    }
    let z = zone(1 << 30, 64);
    let mut a = ax(&z, 0, 0).unwrap().on_current_cpu(current);
    a.init(1 << 30, 64 * PAGE);
    let page = a.alloc_pages(1, PAGE).unwrap();
    a.dealloc_pages(page, 1);
    // Freed on CPU 1: onto its list, not CPU 0's.
    assert_eq!(
        (z.pcp_pages(0).unwrap(), z.pcp_pages(1).unwrap() > 0),
        (0, true)
    );
    CURRENT.store(0, Ordering::Relaxed);
    let again = a.alloc_pages(1, PAGE).unwrap();
    a.dealloc_pages(again, 1);
    assert!(z.pcp_pages(0).unwrap() > 0);
    // A CPU the zone has no lists for: the call fails and says why.
    CURRENT.store(5, Ordering::Relaxed);
    assert!(matches!(
        a.alloc_pages(1, PAGE),
        Err(AllocError::InvalidParam)
    ));
    assert_eq!(a.last_error(), Some(BuddyError::BadCpu(5)));
    CURRENT.store(1, Ordering::Relaxed);
    assert_eq!(a.used_pages(), 0);
    z.check().unwrap();
}

/// Under one lock that serializes every call (ArceOS's global allocator), the allocator can
/// reach its CPU's lists without their lock: the same answers, the pages on the same lists.
#[test]
fn a_cpu_local_allocator_serves_the_same_calls() {
    let z = zone(1 << 30, 64);
    // SAFETY: this test is the zone's only user, one call at a time.
    let mut a = unsafe { ax(&z, 1, 0).unwrap().cpu_local() };
    a.init(1 << 30, 64 * PAGE);
    let page = a.alloc_pages(1, PAGE).unwrap();
    let run = a.alloc_pages(5, 4 * PAGE).unwrap();
    assert_eq!(run % (4 * PAGE), 0);
    assert_eq!(a.used_pages(), 6);
    a.dealloc_pages(page, 1);
    assert!(
        z.pcp_pages(1).unwrap() > 0,
        "the page went back to CPU 1's list"
    );
    a.dealloc_pages(run + 2 * PAGE, 3);
    a.dealloc_pages(run, 2);
    a.dealloc_pages(run, 2);
    assert!(matches!(a.last_error(), Some(BuddyError::DoubleFree(_))));
    assert_eq!(a.used_pages(), 0);
    z.check().unwrap();
}

/// Zeroed pages through the adapter (ArceOS's `GlobalPage::alloc_zero`, page-table pages):
/// one page, an aligned run and a run larger than the zone's largest block all read zero,
/// over memory dirtied by their previous owners, and go back as any other run.
#[test]
fn zeroed_runs_read_zero_over_dirty_memory() {
    #[repr(C, align(4096))]
    struct Page([u8; PAGE]);
    const FRAMES: usize = 64;
    let mut ram: Vec<Page> = (0..FRAMES).map(|_| Page([0; PAGE])).collect();
    let base = ram.as_mut_ptr() as usize;
    // Frames numbered by their address (the adapter's offset 0): frame `base / 4 KiB + i`
    // is `ram[i]`.
    let z = common::empty_zone(
        ZoneConfig {
            max_order: buddy_sim::Order::new(3).unwrap(),
            pageblock_order: buddy_sim::Order::new(3).unwrap(),
            ..ZoneConfig::new(Pfn((base / PAGE) as u64), FRAMES as u64)
        }
        .with_cpus(2),
    )
    .unwrap();
    // SAFETY: frame `pfn` is the page at `pfn * 4 KiB`, inside `ram`, which only this test
    // and the zone touch, and the test touches a run only while it holds it.
    let clearer = buddy_sim::FrameClearer::detected(unsafe { buddy_sim::OffsetMap::new(0) });
    let mut a = ax(&z, 1, 0).unwrap();
    a.init(base, FRAMES * PAGE);
    let dirty = |at: usize, pages: usize| {
        // SAFETY: `[at, at + pages * 4 KiB)` is a run this test holds, inside `ram`.
        unsafe { core::ptr::write_bytes(at as *mut u8, 0xa5, pages * PAGE) };
    };
    let reads_zero = |at: usize, pages: usize| {
        // SAFETY: as `dirty`.
        let bytes = unsafe { core::slice::from_raw_parts(at as *const u8, pages * PAGE) };
        all_bytes_are(bytes, 0)
    };
    // Every frame dirty, then given back.
    let all = a.alloc_pages(FRAMES, PAGE).unwrap();
    dirty(all, FRAMES);
    a.dealloc_pages(all, FRAMES);
    for (pages, align) in [(1, PAGE), (3, 4 * PAGE), (8, 8 * PAGE), (20, PAGE)] {
        let run = a.alloc_zeroed_pages(pages, align, &clearer).unwrap();
        assert_eq!(run % align, 0, "{pages} pages aligned to {align}");
        assert!(
            reads_zero(run, pages),
            "{pages} pages at {run:#x} read zero"
        );
        dirty(run, pages);
        a.dealloc_pages(run, pages);
        assert_eq!(a.last_error(), None);
    }
    // 20 pages is beyond a block of order 3: the contiguous path zeroed it too (above).
    assert_eq!(a.used_pages(), 0);
    z.check().unwrap();
    drop(ram);
}

/// `split_pages` splits an unmovable block the allocator handed out into pages freed one by
/// one, and refuses a movable block of another user of the zone (compaction moves those by
/// their head), a page inside a block and a free block, changing nothing.
#[test]
fn split_pages_splits_unmovable_blocks_only() {
    let base = 1 << 20;
    let z = zone(base, 64);
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, 64 * PAGE);
    let run = a.alloc_pages(8, 8 * PAGE).unwrap();
    assert!(matches!(
        split(&mut a, run + PAGE),
        Err(AllocError::InvalidParam)
    ));
    assert_eq!(split(&mut a, run).unwrap(), 8);
    for i in (0..8).rev() {
        a.dealloc_pages(run + i * PAGE, 1);
        assert_eq!(a.last_error(), None, "page {i}");
    }
    assert!(matches!(split(&mut a, run), Err(AllocError::NotAllocated)));
    let movable = z
        .cpu(0)
        .unwrap()
        .alloc_raw(buddy_sim::AllocRequest::order(buddy_sim::Order::new(2).unwrap()).movable(7))
        .unwrap();
    let pos = movable.0 as usize * PAGE;
    assert!(matches!(split(&mut a, pos), Err(AllocError::InvalidParam)));
    assert_eq!(
        z.frame(movable).unwrap().order,
        2,
        "the movable block stays whole"
    );
    z.check().unwrap();
}

/// page_owner follows a frozen block through `split_pages` as it follows `split_page`: each
/// page is then a block of its own, owned as the block was, and a page freed alone leaves
/// the others' records.
#[test]
fn split_pages_gives_each_page_the_blocks_owner() {
    const FRAMES: u64 = 64;
    static RECORDS: [buddy_sim::OwnerRecord; FRAMES as usize] =
        [const { buddy_sim::OwnerRecord::new() }; FRAMES as usize];
    let base = 1 << 20;
    let z = zone(base, FRAMES);
    z.enable_page_owner(&RECORDS).unwrap();
    z.set_owner_tag(0, 0x57ac).unwrap();
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, FRAMES as usize * PAGE);
    let run = a.alloc_pages(8, 8 * PAGE).unwrap();
    let first = (run / PAGE) as u64;
    let before: Vec<_> = z.owned_blocks().collect();
    assert_eq!(before.len(), 1);
    assert_eq!((before[0].pfn.0, before[0].order.get()), (first, 3));
    assert_eq!(split(&mut a, run).unwrap(), 8);
    let owned: Vec<_> = z.owned_blocks().collect();
    assert_eq!(
        owned
            .iter()
            .map(|b| (b.pfn.0, b.order.get()))
            .collect::<Vec<_>>(),
        (first..first + 8).map(|p| (p, 0)).collect::<Vec<_>>()
    );
    assert!(
        owned
            .iter()
            .all(|b| (b.tag, b.seq, b.cpu) == (before[0].tag, before[0].seq, before[0].cpu))
    );
    a.dealloc_pages(run + 3 * PAGE, 1);
    assert_eq!(a.last_error(), None);
    assert_eq!(z.owned_blocks().count(), 7);
    assert!(z.owned_blocks().all(|b| b.pfn.0 != first + 3));
    for i in (0..8).filter(|&i| i != 3) {
        a.dealloc_pages(run + i * PAGE, 1);
    }
    assert_eq!(z.owned_blocks().count(), 0);
    z.check().unwrap();
}

/// A block's worth of pages aligned above its size (16 KiB on a 64 KiB boundary) is one
/// frozen block, aligned, taken again from the lists where the previous one went; an
/// offset that is not a multiple of the alignment (frame alignment is then not address
/// alignment) refuses it, as it refuses a block's worth aligned to its size.
#[test]
fn blocks_aligned_above_their_size_are_aligned_frozen_blocks() {
    let base = 1 << 24;
    let z = zone(base, 1024);
    let mut a = ax(&z, 0, 0).unwrap();
    a.init(base, 1024 * PAGE);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let p = a.alloc_pages(4, 16 * PAGE).unwrap();
        assert_eq!(p % (16 * PAGE), 0);
        let f = z.frame(Pfn((p / PAGE) as u64)).unwrap();
        assert!(f.frozen && f.order == 2);
        assert_eq!(a.used_pages(), 4);
        a.dealloc_pages(p, 4);
        assert_eq!(a.last_error(), None);
        seen.push(p);
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:x?}");
    // Held side by side: each aligned, none overlapping.
    let held: Vec<usize> = (0..8)
        .map(|_| a.alloc_pages(2, 8 * PAGE).unwrap())
        .collect();
    let mut starts = held.clone();
    starts.sort_unstable();
    starts.dedup();
    assert_eq!(starts.len(), 8);
    assert!(held.iter().all(|p| p % (8 * PAGE) == 0));
    z.check().unwrap();
    for p in held {
        a.dealloc_pages(p, 2);
        assert_eq!(a.last_error(), None);
    }
    assert_eq!(a.used_pages(), 0);
    z.check().unwrap();

    let z = zone(base, 64);
    let mut odd = ax(&z, 0, PAGE).unwrap();
    odd.init(base + PAGE, 64 * PAGE);
    for (pages, align) in [(2, 2 * PAGE), (2, 8 * PAGE), (4, 4 * PAGE)] {
        assert!(matches!(
            odd.alloc_pages(pages, align),
            Err(AllocError::InvalidParam)
        ));
    }
    assert_eq!(odd.used_pages(), 0);
    let one = odd.alloc_pages(2, PAGE).unwrap();
    odd.dealloc_pages(one, 2);
    assert_eq!(odd.last_error(), None);
    z.check().unwrap();
}

/// An allocator is made only over a zone whose every frame has a position: at the top of
/// the address space, the zone whose last frame's address is the last page's, and refused
/// one frame further or one page of offset more (`DirectMapRange`), with nothing changed.
#[test]
fn every_frame_has_a_position_or_no_allocator() {
    use buddy_sim::ConfigError;
    let top = (usize::MAX / PAGE) as u64; // the last frame an address reaches, offset 0
    let edge = common::empty_zone(ZoneConfig::new(Pfn(top - 15), 16).with_cpus(2)).unwrap();
    let past = common::empty_zone(ZoneConfig::new(Pfn(top - 15), 17).with_cpus(2)).unwrap();
    assert_eq!(
        ax(&past, 0, 0).map(drop),
        Err(BuddyError::Config(ConfigError::DirectMapRange {
            offset: 0,
            last: top + 1
        }))
    );
    assert_eq!(
        ax(&edge, 0, PAGE).map(drop),
        Err(BuddyError::Config(ConfigError::DirectMapRange {
            offset: PAGE,
            last: top
        }))
    );
    let mut a = ax(&edge, 0, 0).unwrap();
    let base = (top - 15) as usize * PAGE;
    // [base, base + 16 pages) ends at 2^64: `init` cannot name it, and says so.
    a.init(base, 16 * PAGE);
    assert_eq!(a.last_error(), Some(BuddyError::Overflow));
    a.init(base, 15 * PAGE);
    assert_eq!(a.last_error(), None);
    edge.add_memory(Pfn(top), 1).unwrap();
    let mut held: Vec<usize> = (0..16).map(|_| a.alloc_pages(1, PAGE).unwrap()).collect();
    held.sort_unstable();
    let all: Vec<usize> = (0..16).map(|i| base + i * PAGE).collect();
    assert_eq!(held, all, "each frame once, at its own address");
    assert!(matches!(a.alloc_pages(1, PAGE), Err(AllocError::NoMemory)));
    for pos in held {
        a.dealloc_pages(pos, 1);
        assert_eq!(a.last_error(), None);
    }
    let run = a.alloc_pages(16, 16 * PAGE).unwrap();
    assert_eq!(run, base);
    a.dealloc_pages(run, 16);
    assert_eq!((a.used_pages(), a.last_error()), (0, None));
    edge.check().unwrap();
}
