//! Tracking on the host (feature `tracking`): page calls recorded by buddy-sim's page_owner
//! with their kind, CPU and a generation from the heap's sequence, listed by range; their
//! usage by kind equal to the counters'; nothing listed once given back.
#![cfg(feature = "tracking")]

use ax_alloc::{UsageKind, global_allocator, global_init, tracking};
use core::alloc::{GlobalAlloc, Layout};

const PAGE: usize = 4096;

/// The page kinds' bytes, from the counters or from page_owner's records.
fn page_usages(records: bool) -> Vec<usize> {
    let u = if records {
        tracking::page_usages()
    } else {
        global_allocator().usages()
    };
    [
        UsageKind::VirtMem,
        UsageKind::PageTable,
        UsageKind::TaskStack,
    ]
    .map(|k| u.get(k))
    .to_vec()
}

#[test]
fn heap_and_page_allocations_are_tracked_in_one_order() {
    let size = 4 << 20;
    let memory = Box::leak(vec![0u8; size + PAGE].into_boxed_slice());
    let start = (memory.as_ptr() as usize).next_multiple_of(PAGE);
    global_init(start, size).unwrap();
    let a = global_allocator();
    let untracked = a.alloc_pages(2, PAGE, UsageKind::VirtMem).unwrap();
    let layout = Layout::from_size_align(64, 8).unwrap();
    // A 64-byte object's slab, taken before tracking starts: the class keeps it once its
    // object is back, so the tracked allocation of one below takes no page.
    // SAFETY: a non-zero layout; given back at once with it.
    unsafe { GlobalAlloc::dealloc(a, GlobalAlloc::alloc(a, layout), layout) };
    tracking::enable_tracking();
    assert!(tracking::tracking_enabled());
    let first = tracking::current_generation();
    let table = a.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap();
    // SAFETY: a non-zero layout; given back below with it.
    let object = unsafe { GlobalAlloc::alloc(a, layout) };
    assert!(!object.is_null());
    let stack = a.alloc_pages(4, 4 * PAGE, UsageKind::TaskStack).unwrap();
    let mut pages = Vec::new();
    tracking::page_allocations_in(first..u64::MAX, |p| pages.push(*p));
    let kinds: Vec<_> = pages
        .iter()
        .map(|p| (p.addr, p.pages, p.kind, p.cpu, p.sequence.unwrap()))
        .collect();
    assert!(kinds.contains(&(table, 1, Some(UsageKind::PageTable), Some(0), first)));
    assert!(kinds.contains(&(stack, 4, Some(UsageKind::TaskStack), Some(0), first + 2)));
    assert_eq!(pages.len(), 2, "{pages:#x?}");
    let mut heap = Vec::new();
    tracking::allocations_in(first..u64::MAX, |h| heap.push((h.layout, h.generation)));
    assert_eq!(heap, vec![(layout, first + 1)]);
    // The run allocated before tracking is counted, not listed; page_owner records only
    // what was allocated after it started.
    let mut before = Vec::new();
    tracking::page_allocations_in(0..first, |p| before.push(p.addr));
    assert!(before.is_empty());
    a.dealloc_pages(untracked, 2, UsageKind::VirtMem);
    assert_eq!(page_usages(true), page_usages(false));
    tracking::disable_tracking();
    a.dealloc_pages(table, 1, UsageKind::PageTable);
    a.dealloc_pages(stack, 4, UsageKind::TaskStack);
    // SAFETY: allocated above with this layout, given back once.
    unsafe { GlobalAlloc::dealloc(a, object, layout) };
    let mut left = 0;
    tracking::page_allocations_in(first..u64::MAX, |_| left += 1);
    assert_eq!(left, 0);
    assert_eq!(page_usages(true), vec![0; 3]);
    assert_eq!(page_usages(false), vec![0; 3]);
}
