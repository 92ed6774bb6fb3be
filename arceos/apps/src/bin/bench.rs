//! Allocation work timed inside the guest, for runs under QEMU's `-icount shift=0`, where
//! the guest's clock counts instructions (1 ns each): the same calls on both allocators,
//! measured by what the guest executes, not by the host's wall clock. One line per
//! workload: `bench <workload>: <ns> ns per call`.
#![no_std]
#![no_main]

#[macro_use]
extern crate axstd as std;

use alloc_apps::{PAGE, Rng};
use axalloc::{GlobalPage, UsageKind, global_allocator};
use std::time::Instant;

/// Runs `f` `calls` times' worth and prints the time per call.
fn timed(name: &str, calls: usize, f: impl FnOnce()) {
    let t = Instant::now();
    f();
    let ns = t.elapsed().as_nanos() as usize;
    println!("bench {name}: {} ns per call", ns / calls.max(1));
}

#[unsafe(no_mangle)]
fn main() {
    let a = global_allocator();
    println!("bench: {} allocator", a.name());
    let mut held = [0usize; 512];
    // Page-table pages: 512 single pages taken, then freed, 20 times.
    timed(
        "page-table pages (alloc + free of 1 page)",
        20 * 512,
        || {
            for _ in 0..20 {
                for h in held.iter_mut() {
                    *h = a
                        .alloc_pages(1, PAGE, UsageKind::PageTable)
                        .expect("a page");
                }
                for &h in held.iter() {
                    a.dealloc_pages(h, 1, UsageKind::PageTable);
                }
            }
        },
    );
    // Runs the heap and task stacks ask for: 8..1024 pages, freed at once.
    timed("runs of 8..1024 pages (alloc + free)", 8 * 8, || {
        for _ in 0..8 {
            for shift in 3..=10 {
                let pages = 1usize << shift;
                let at = a
                    .alloc_pages(pages, PAGE, UsageKind::VirtMem)
                    .expect("a run");
                a.dealloc_pages(at, pages, UsageKind::VirtMem);
            }
        }
    });
    // Random churn: runs of 1..24 pages, alignments up to 64 KiB, whole and partial frees.
    let mut rng = Rng::new(99);
    let mut runs = [(0usize, 0usize); 64];
    let mut live = 0;
    timed("random churn (one call)", 20_000, || {
        for _ in 0..20_000 {
            if live < runs.len() && (live == 0 || rng.below(2) == 0) {
                let pages = 1 + rng.below(24);
                if let Ok(at) = a.alloc_pages(pages, PAGE << rng.below(5), UsageKind::VirtMem) {
                    runs[live] = (at, pages);
                    live += 1;
                }
            } else {
                let i = rng.below(live);
                let (at, pages) = runs[i];
                live -= 1;
                runs[i] = runs[live];
                a.dealloc_pages(at, pages, UsageKind::VirtMem);
            }
        }
    });
    for &(at, pages) in &runs[..live] {
        a.dealloc_pages(at, pages, UsageKind::VirtMem);
    }
    // Zeroed pages, as `GlobalPage::alloc_zero` hands them out.
    timed("zeroed page (alloc_zero + free)", 2_000, || {
        for _ in 0..2_000 {
            let p = GlobalPage::alloc_zero().expect("a zeroed page");
            core::hint::black_box(&p);
        }
    });
    println!("bench: done");
}
