//! The allocator calls today's ArceOS makes most, timed inside the guest for runs under
//! QEMU's `-icount shift=0`, where the guest's clock counts instructions (1 ns each): the
//! same calls on buddy-sim and on ax-alloc's own backends, measured by what the guest
//! executes (IRQ-saving locks and per-CPU lookups included), not by the host's wall clock.
//!
//! Each workload runs [`ROUNDS`] times after a round untimed, one line a round:
//! `today bench <workload>: <ns> ns per call`; the first line is `today bench: start`, the
//! last `today bench: done`.

use ax_alloc::{UsageKind, global_allocator};
use std::boxed::Box;
use std::time::Instant;

const PAGE: usize = 4096;

/// Rounds of each workload (each a line).
pub const ROUNDS: usize = 5;

/// One page allocated and freed at once, this many times a round.
const PAIRS: usize = 2_000;

/// Page-table pages taken then freed together (a 1 GiB mapping's 512 tables of 4 KiB
/// pages).
const TABLES: usize = 512;
/// Batches of [`TABLES`] a round.
const TABLE_BATCHES: usize = 4;

/// Heap-growth rounds a line times: runs of 8 to 8192 pages, doubling, then freed.
const GROWTH_ROUNDS: usize = 10;
/// Runs a heap-growth round takes: 8 pages, doubling to 8192.
const GROWTH_RUNS: usize = 11;

/// Heap blocks of 64 bytes allocated and freed at once, this many times a round.
const SMALL_BLOCKS: usize = 5_000;

/// Times `f` (`calls` calls of the allocator) and prints the guest nanoseconds per call.
fn timed(name: &str, calls: usize, f: impl FnOnce()) {
    let t = Instant::now();
    f();
    let ns = t.elapsed().as_nanos();
    println!(
        "today bench {name}: {} ns per call",
        ns / calls.max(1) as u128
    );
}

/// One page for a page table, allocated and freed at once.
fn one_page() {
    let a = global_allocator();
    for _ in 0..PAIRS {
        let at = a
            .alloc_pages(1, PAGE, UsageKind::PageTable)
            .expect("a page-table page");
        a.dealloc_pages(core::hint::black_box(at), 1, UsageKind::PageTable);
    }
}

/// Page-table pages for a 1 GiB mapping: 512 taken, then all freed.
fn page_tables() {
    let a = global_allocator();
    let mut held = [0usize; TABLES];
    for _ in 0..TABLE_BATCHES {
        for h in held.iter_mut() {
            *h = a
                .alloc_pages(1, PAGE, UsageKind::PageTable)
                .expect("a page-table page");
        }
        for &h in held.iter() {
            a.dealloc_pages(h, 1, UsageKind::PageTable);
        }
    }
}

/// Heap growth: runs of 8 to 8192 pages, doubling ([`GROWTH_RUNS`] runs), then all freed.
fn heap_growth() {
    let a = global_allocator();
    let mut held = [(0usize, 0usize); GROWTH_RUNS];
    for _ in 0..GROWTH_ROUNDS {
        for (i, h) in held.iter_mut().enumerate() {
            let pages = 8 << i;
            let at = a
                .alloc_pages(pages, PAGE, UsageKind::VirtMem)
                .expect("a heap run");
            *h = (at, pages);
        }
        for &(at, pages) in held.iter() {
            a.dealloc_pages(at, pages, UsageKind::VirtMem);
        }
    }
}

/// A 64-byte block of the Rust heap (through `#[global_allocator]`), allocated and freed at
/// once.
fn small_block() {
    for i in 0..SMALL_BLOCKS {
        drop(core::hint::black_box(Box::new([i as u8; 64])));
    }
}

/// Each workload [`ROUNDS`] times in a row, after a round untimed.
pub fn run() {
    // A line of its own first: the runtime's first console message may land inside it.
    println!("today bench: start");
    let workloads: [(&str, usize, fn()); 4] = [
        ("one page (alloc + free)", 2 * PAIRS, one_page),
        (
            "page-table pages (512 taken, then freed)",
            2 * TABLES * TABLE_BATCHES,
            page_tables,
        ),
        (
            "heap growth (runs of 8 to 8192 pages, then freed)",
            2 * GROWTH_RUNS * GROWTH_ROUNDS,
            heap_growth,
        ),
        (
            "64-byte heap block (alloc + free)",
            2 * SMALL_BLOCKS,
            small_block,
        ),
    ];
    for (name, calls, work) in workloads {
        // One round untimed first: what the workload before left on the CPU's lists (a
        // page-table batch's 512 pages, drained by the next free past the lists' high mark)
        // is not this workload's cost.
        work();
        for _ in 0..ROUNDS {
            timed(name, calls, work);
        }
    }
    println!("today bench: done");
}
