//! Reclaim end to end on the host: an allocation that finds no memory calls the registered
//! callback through buddy-sim's direct reclaim, the callback frees pages through the same
//! allocator on the same thread (it would wait for itself if the allocation held its page
//! lock while calling it), and the allocation gets them.

use ax_alloc::{AllocError, GlobalAllocator, UsageKind, register_page_reclaim_fn};
use std::sync::Mutex;

const PAGE: usize = 4096;

static PAGES: GlobalAllocator = GlobalAllocator::new();

/// What the kernel's page cache holds: the pages the callback drops.
static CACHE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The callback: frees up to `num_pages` cached pages through [`PAGES`].
fn drop_cache(num_pages: usize) -> usize {
    let mut cache = CACHE.lock().unwrap();
    let n = num_pages.min(cache.len());
    for pos in cache.drain(..n) {
        PAGES.dealloc_pages(pos, 1, UsageKind::PageCache);
    }
    n
}

#[test]
fn an_allocation_short_of_memory_gets_the_pages_the_callback_frees_through_the_same_allocator() {
    let size = 4 << 20;
    let memory = Box::leak(vec![0u8; size + PAGE].into_boxed_slice());
    let start = (memory.as_ptr() as usize).next_multiple_of(PAGE);
    PAGES.init(start, size).unwrap();
    // Every free page into the cache (no callback yet: the allocation that finds none
    // fails after one retry).
    let mut cached = Vec::new();
    loop {
        match PAGES.alloc_pages(1, PAGE, UsageKind::PageCache) {
            Ok(pos) => cached.push(pos),
            Err(AllocError::NoMemory) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    let held = cached.len();
    assert!(held > 900, "{held} pages");
    assert_eq!(PAGES.available_pages(), 0);
    *CACHE.lock().unwrap() = cached;

    register_page_reclaim_fn(drop_cache);
    // One page: one round of reclaim, which asks for 32 (Linux's SWAP_CLUSTER_MAX).
    let table = PAGES.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap();
    assert_eq!(CACHE.lock().unwrap().len(), held - 32);
    assert_eq!(PAGES.available_pages(), 31);
    // The 31 left serve without reclaim; the next page reclaims again.
    let more: Vec<usize> = (0..32)
        .map(|_| PAGES.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap())
        .collect();
    assert_eq!(CACHE.lock().unwrap().len(), held - 64);
    let usages = PAGES.usages();
    assert_eq!(usages.get(UsageKind::PageCache), (held - 64) * PAGE);
    assert_eq!(usages.get(UsageKind::PageTable), 33 * PAGE);

    // A callback with nothing left: the allocation fails, the allocator unchanged.
    CACHE.lock().unwrap().clear();
    let free = PAGES.available_pages();
    for _ in 0..free {
        PAGES.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap();
    }
    assert_eq!(
        PAGES.alloc_pages(1, PAGE, UsageKind::PageTable),
        Err(AllocError::NoMemory)
    );
    assert_eq!(PAGES.available_pages(), 0);
    PAGES.dealloc_pages(table, 1, UsageKind::PageTable);
    for pos in more {
        PAGES.dealloc_pages(pos, 1, UsageKind::PageTable);
    }
    assert_eq!(PAGES.available_pages(), 33);
}
