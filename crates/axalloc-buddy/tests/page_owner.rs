//! page_owner through the page calls (feature `page-owner`): every run recorded with its
//! kind, CPU and sequence number, runs of one call listed whole, the records' usage by kind
//! equal to the counters', a leak report from a mark, regions added later recorded too.
#![cfg(feature = "page-owner")]

use axalloc_buddy::{GlobalAllocator, OwnedRun, UsageKind};
use core::alloc::Layout;

const PAGE: usize = 4096;

/// Zeroed, page-aligned memory for an allocator, given back when dropped (declare it before
/// the allocator).
struct Region {
    at: *mut u8,
    layout: Layout,
}

impl Region {
    fn new(bytes: usize) -> Self {
        let layout = Layout::from_size_align(bytes, PAGE).unwrap();
        // SAFETY: the size is not zero.
        let at = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!at.is_null());
        Self { at, layout }
    }

    fn start(&self) -> usize {
        self.at as usize
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.at, self.layout) };
    }
}

fn runs(a: &GlobalAllocator) -> Vec<OwnedRun> {
    let mut v = Vec::new();
    a.owned_runs(|r| v.push(r));
    v
}

fn give_back(a: &GlobalAllocator, at: usize, pages: usize, kind: UsageKind) {
    // SAFETY: the test gives back runs it took from `a`, once, and uses them no more.
    unsafe { a.dealloc_pages(at, pages, kind) }
}

/// Kinds and bytes of pages the counters hold, but the heap's (counted as bytes there).
fn page_usages(a: &GlobalAllocator, owners: bool) -> Vec<usize> {
    let u = if owners { a.owner_usages() } else { a.usages() };
    [
        UsageKind::VirtMem,
        UsageKind::PageCache,
        UsageKind::PageTable,
        UsageKind::TaskStack,
        UsageKind::Dma,
    ]
    .map(|k| u.get(k))
    .to_vec()
}

#[test]
fn page_runs_are_recorded_with_kind_cpu_and_sequence() {
    let bytes = if cfg!(miri) { 1 << 20 } else { 4 << 20 };
    let region = Region::new(bytes);
    let a = GlobalAllocator::new();
    // page_owner before `init`: the first region gets its table at `init`.
    assert_eq!(a.enable_page_owner().unwrap(), 0);
    // SAFETY: the region is the allocator's alone; it outlives the allocator.
    unsafe { a.try_init(region.start(), bytes) }.unwrap();
    // SAFETY: between page calls.
    let zone = unsafe { a.zone() }.unwrap();
    assert!(zone.page_owner_enabled());
    // Untracked: recorded with a kind, no sequence number.
    let table = a.alloc_pages(1, PAGE, UsageKind::PageTable).unwrap();
    a.set_page_tracking(true);
    let mark = a.sequence();
    let stack = a.alloc_pages(4, 4 * PAGE, UsageKind::TaskStack).unwrap();
    // Three pages: a block of two and one of one (the fourth page given back), one run.
    let buffer = a.alloc_pages(3, PAGE, UsageKind::VirtMem).unwrap();
    let dma = a.alloc_zeroed_pages(2, PAGE, UsageKind::Dma).unwrap();
    // The heap numbers its own records in the same order.
    let heap_seq = a.next_sequence();
    let cache = a.alloc_pages(1, PAGE, UsageKind::PageCache).unwrap();
    let all = runs(&a);
    let find = |at: usize| *all.iter().find(|r| r.addr == at).unwrap();
    let t = find(table);
    assert_eq!(
        (t.pages, t.kind, t.sequence),
        (1, Some(UsageKind::PageTable), None)
    );
    assert_eq!(t.cpu, Some(0));
    let s = find(stack);
    assert_eq!(
        (s.pages, s.kind, s.sequence),
        (4, Some(UsageKind::TaskStack), Some(mark))
    );
    let b = find(buffer);
    assert_eq!(
        (b.pages, b.kind, b.sequence),
        (3, Some(UsageKind::VirtMem), Some(mark + 1))
    );
    let d = find(dma);
    assert_eq!(
        (d.pages, d.kind, d.sequence),
        (2, Some(UsageKind::Dma), Some(mark + 2))
    );
    assert_eq!(heap_seq, mark + 3);
    let c = find(cache);
    assert_eq!(
        (c.pages, c.kind, c.sequence),
        (1, Some(UsageKind::PageCache), Some(mark + 4))
    );
    // The records' usages are the counters'.
    assert_eq!(page_usages(&a, true), page_usages(&a, false));
    // The leak report: what is alive from the mark on.
    let since: Vec<usize> = all
        .iter()
        .filter(|r| r.sequence.is_some_and(|s| s >= mark))
        .map(|r| r.addr)
        .collect();
    assert_eq!(since.len(), 4);
    // A part of a run freed: the rest stays recorded, with the run's call.
    give_back(&a, buffer, 2, UsageKind::VirtMem);
    let left = runs(&a);
    let rest = left.iter().find(|r| r.addr == buffer + 2 * PAGE).unwrap();
    assert_eq!((rest.pages, rest.sequence), (1, Some(mark + 1)));
    assert!(left.iter().all(|r| r.addr != buffer));
    for (at, pages, kind) in [
        (table, 1, UsageKind::PageTable),
        (stack, 4, UsageKind::TaskStack),
        (buffer + 2 * PAGE, 1, UsageKind::VirtMem),
        (dma, 2, UsageKind::Dma),
        (cache, 1, UsageKind::PageCache),
    ] {
        give_back(&a, at, pages, kind);
    }
    assert_eq!(page_usages(&a, false), vec![0; 5]);
    assert_eq!(
        page_usages(&a, true),
        vec![0; 5],
        "dma {dma:#x}: {:#x?}",
        runs(&a)
    );
    assert!(runs(&a).iter().all(|r| r.kind == Some(UsageKind::RustHeap)));
    zone.check().unwrap();
}

#[test]
fn regions_added_later_get_records_and_tracking_stops() {
    let bytes = if cfg!(miri) { 1 << 20 } else { 2 << 20 };
    let first = Region::new(bytes);
    let second = Region::new(bytes);
    let a = GlobalAllocator::new();
    // SAFETY: the regions are the allocator's alone; they outlive it.
    unsafe { a.try_init(first.start(), bytes) }.unwrap();
    let tables = a.enable_page_owner().unwrap();
    assert!(tables >= 1, "{tables} pages of records");
    // SAFETY: as above.
    unsafe { a.add_memory(second.start(), bytes) }.unwrap();
    // SAFETY: between page calls.
    assert!(unsafe { a.zones() }.all(|z| z.page_owner_enabled()));
    a.set_page_tracking(true);
    // Take the first region's pages: the next run comes from the second.
    let mut held = Vec::new();
    let in_second = |p: usize| (second.start()..second.start() + bytes).contains(&p);
    let run = loop {
        let p = a.alloc_pages(8, PAGE, UsageKind::VirtMem).unwrap();
        if in_second(p) {
            break p;
        }
        held.push(p);
    };
    let r = runs(&a).into_iter().find(|r| r.addr == run).unwrap();
    assert_eq!((r.pages, r.kind), (8, Some(UsageKind::VirtMem)));
    assert!(r.sequence.is_some());
    a.set_page_tracking(false);
    assert!(!a.page_tracking());
    let untracked = a.alloc_pages(8, PAGE, UsageKind::VirtMem).unwrap();
    let u = runs(&a).into_iter().find(|r| r.addr == untracked).unwrap();
    assert_eq!((u.kind, u.sequence), (Some(UsageKind::VirtMem), None));
    assert_eq!(page_usages(&a, true), page_usages(&a, false));
    for p in held.into_iter().chain([run, untracked]) {
        give_back(&a, p, 8, UsageKind::VirtMem);
    }
    assert_eq!(a.owner_usages().get(UsageKind::VirtMem), 0);
}
