//! Today's ArceOS on buddy-sim: the heap (ArceOS's memtest workload: a 3 M-element vector
//! sorted, a 50 000-entry `BTreeMap<String, u32>`), page runs with alignments freed in
//! parts, DMA32 pages, fixed-address runs, a 2 MiB page split into 4 KiB pages, and eight
//! tasks allocating at once on every CPU.
//! Each check prints `today <check>: ok` (or `FAIL`), and the last line the verdict.
//!
//! The same source is the control (`../today-control`: ax-alloc's own backends, no patch).
//! There a call a backend leaves `unimplemented!()` (TLSF's `alloc_dma32_pages`, both
//! backends' `alloc_pages_at`) is not made: the check fails, saying so.
//!
//! With the `bench` feature it runs no check: it times the allocator calls ArceOS makes
//! most ([`bench`]), for the report's runs under QEMU's `-icount`.
#![no_std]
#![no_main]

#[macro_use]
extern crate ax_std as std;

use ax_alloc::{AllocError, UsageKind, global_allocator};
use std::collections::BTreeMap;
use std::string::{String, ToString};
use std::thread;
use std::vec::Vec;

mod bench;
#[cfg(feature = "ram-pattern")]
mod ram_pattern;
#[cfg(feature = "hypervisor-guest")]
mod working_set;
#[cfg(all(feature = "hypervisor-guest", not(target_arch = "aarch64")))]
compile_error!("the `hypervisor-guest` feature is for the arm64 hypervisor's guest (aarch64)");

const PAGE: usize = 4096;

/// Checks run and failed.
struct Checks {
    run: usize,
    failed: usize,
}

impl Checks {
    fn check(&mut self, name: &str, outcome: Result<(), String>) {
        self.run += 1;
        match outcome {
            Ok(()) => {
                println!("today {name}: ok");
            }
            Err(why) => {
                self.failed += 1;
                println!("today {name}: FAIL {why}");
            }
        }
    }
}

/// xorshift64*: the same stream on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Writes `tag` into each word of the run's first and last page.
fn mark(at: usize, pages: usize, tag: usize) {
    for page in [at, at + (pages - 1) * PAGE] {
        for i in 0..PAGE / 8 {
            // SAFETY: the run is the caller's, mapped (ArceOS maps all of its RAM).
            unsafe { (page as *mut usize).add(i).write_volatile(tag ^ i) };
        }
    }
}

/// Whether the run still holds `tag` ([`mark`]).
fn marked(at: usize, pages: usize, tag: usize) -> Result<(), String> {
    for page in [at, at + (pages - 1) * PAGE] {
        for i in 0..PAGE / 8 {
            // SAFETY: as in `mark`.
            let got = unsafe { (page as *const usize).add(i).read_volatile() };
            if got != tag ^ i {
                return Err(format!("the run at {at:#x} was overwritten at word {i}"));
            }
        }
    }
    Ok(())
}

/// ArceOS's memtest: a 3 M-element vector sorted, a 50 000-entry map of strings.
fn memtest() -> Result<(), String> {
    let mut rng = Rng(0x1234_5678);
    let n = 3_000_000;
    let mut v: Vec<u32> = (0..n).map(|_| rng.next() as u32).collect();
    v.sort_unstable();
    if v.windows(2).any(|w| w[0] > w[1]) {
        return Err("the vector is not sorted".to_string());
    }
    drop(v);
    let mut m = BTreeMap::new();
    for i in 0..50_000u32 {
        m.insert(format!("key_{}", rng.next() % 1_000_000), i);
    }
    if m.len() < 40_000 || m.keys().zip(m.keys().skip(1)).any(|(a, b)| a >= b) {
        return Err(format!("the map holds {} entries out of order", m.len()));
    }
    Ok(())
}

/// Runs of 1..512 pages aligned 4 KiB..2 MiB, marked, freed in two parts (whole, on the
/// control's backends, which free nothing else).
fn aligned_runs() -> Result<(), String> {
    let a = global_allocator();
    let before = a.available_pages();
    let mut runs = Vec::new();
    for (i, pages) in [1, 2, 3, 8, 16, 64, 5, 512].into_iter().enumerate() {
        let align = PAGE << (i % 10);
        let at = a
            .alloc_pages(pages, align, UsageKind::VirtMem)
            .map_err(|e| format!("{pages} pages aligned {align:#x}: {e}"))?;
        if at % align != 0 {
            return Err(format!("{at:#x} is not aligned to {align:#x}"));
        }
        mark(at, pages, at);
        runs.push((at, pages));
    }
    for &(at, pages) in &runs {
        marked(at, pages, at)?;
        // ax-alloc's backends free only whole runs (a TLSF block, a buddy-slab block of the
        // power of two covering the run): the control frees each whole.
        let head = if cfg!(feature = "buddy-sim") {
            pages / 2
        } else {
            0
        };
        if head > 0 {
            a.dealloc_pages(at, head, UsageKind::VirtMem);
        }
        a.dealloc_pages(at + head * PAGE, pages - head, UsageKind::VirtMem);
    }
    if a.usages().get(UsageKind::VirtMem) != 0 || a.available_pages() != before {
        return Err(format!(
            "{} pages free after, {before} before; {} bytes counted",
            a.available_pages(),
            a.usages().get(UsageKind::VirtMem)
        ));
    }
    Ok(())
}

/// DMA32 pages lie below 4 GiB; a run taken at a fixed address is the one asked for, and
/// one that is not free is refused.
fn dma32_and_fixed() -> Result<(), String> {
    if cfg!(all(not(feature = "buddy-sim"), feature = "tlsf")) {
        return Err("alloc_dma32_pages is unimplemented!() in this backend".to_string());
    }
    let a = global_allocator();
    let at = a
        .alloc_dma32_pages(4, PAGE, UsageKind::Dma)
        .map_err(|e| format!("DMA32: {e}"))?;
    let phys = ax_plat::mem::virt_to_phys(at.into()).as_usize();
    if phys + 4 * PAGE > 1 << 32 {
        return Err(format!("DMA32 pages at {phys:#x}"));
    }
    a.dealloc_pages(at, 4, UsageKind::Dma);
    if cfg!(not(feature = "buddy-sim")) {
        return Err("alloc_pages_at is unimplemented!() in this backend".to_string());
    }
    let fixed = a
        .alloc_pages_at(at, 4, PAGE, UsageKind::Dma)
        .map_err(|e| format!("alloc_pages_at({at:#x}): {e}"))?;
    if fixed != at {
        return Err(format!("alloc_pages_at({at:#x}) gave {fixed:#x}"));
    }
    match a.alloc_pages_at(at, 1, PAGE, UsageKind::Dma) {
        Err(AllocError::NoMemory) => {}
        other => return Err(format!("a taken page taken again: {other:?}")),
    }
    a.dealloc_pages(at, 4, UsageKind::Dma);
    Ok(())
}

/// A 2 MiB huge page split into 4 KiB pages (StarryOS's transparent huge pages split a 2 MiB
/// mapping so), its pages freed one by one, odd ones first.
#[cfg(feature = "buddy-sim")]
fn huge_page_split() -> Result<(), String> {
    let a = global_allocator();
    let before = a.available_pages();
    let huge = a
        .alloc_pages(512, 2 << 20, UsageKind::VirtMem)
        .map_err(|e| format!("a 2 MiB page: {e}"))?;
    mark(huge, 512, huge);
    let pages = a
        .split_pages(huge)
        .map_err(|e| format!("split_pages: {e}"))?;
    if pages != 512 {
        return Err(format!("split into {pages} pages"));
    }
    marked(huge, 512, huge)?;
    for i in (1..512).step_by(2).chain((0..512).step_by(2)) {
        a.dealloc_pages(huge + i * PAGE, 1, UsageKind::VirtMem);
    }
    if a.available_pages() != before {
        return Err(format!(
            "{} pages free after, {before} before",
            a.available_pages()
        ));
    }
    Ok(())
}

/// ax-alloc 0.9.2's backends have no `split_pages`.
#[cfg(not(feature = "buddy-sim"))]
fn huge_page_split() -> Result<(), String> {
    Err("ax-alloc 0.9.2 has no split_pages".to_string())
}

/// One task's work: marked page runs and heap vectors.
fn work(task: usize) -> Result<usize, String> {
    let a = global_allocator();
    let mut rng = Rng(100 + task as u64);
    let tag = 0x7a5c_0000 + task;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut frees = 0;
    for round in 0..2_000 {
        if runs.len() < 32 && (runs.is_empty() || rng.below(2) == 0) {
            let pages = 1 + rng.below(8);
            if let Ok(at) = a.alloc_pages(pages, PAGE << rng.below(3), UsageKind::VirtMem) {
                mark(at, pages, tag ^ at);
                runs.push((at, pages));
            }
        } else {
            let (at, pages) = runs.swap_remove(rng.below(runs.len()));
            marked(at, pages, tag ^ at).map_err(|e| format!("task {task}: {e}"))?;
            a.dealloc_pages(at, pages, UsageKind::VirtMem);
            frees += 1;
        }
        if round % 64 == 0 {
            thread::yield_now();
        }
    }
    for (at, pages) in runs {
        marked(at, pages, tag ^ at)?;
        a.dealloc_pages(at, pages, UsageKind::VirtMem);
    }
    Ok(frees)
}

/// Eight tasks at once; then each CPU's lists hold pages (each CPU allocated through its
/// own, found through ArceOS's per-CPU area).
fn tasks() -> Result<(), String> {
    let handles: Vec<_> = (0..8).map(|t| thread::spawn(move || work(t))).collect();
    let mut frees = 0;
    for h in handles {
        frees += h.join().map_err(|_| "a task panicked".to_string())??;
    }
    if frees == 0 {
        return Err("no task freed a run".to_string());
    }
    every_cpu_used()
}

/// Each CPU's lists hold pages after the tasks (each CPU allocated through its own, found
/// through ArceOS's per-CPU area).
#[cfg(feature = "buddy-sim")]
fn every_cpu_used() -> Result<(), String> {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let held: Vec<u64> = (0..cpus)
        .map(|cpu| global_allocator().buddy().pcp_pages(cpu).unwrap_or(0))
        .collect();
    println!("today pages on each CPU's lists: {held:?}");
    if held.contains(&0) {
        return Err(format!("a CPU's lists hold no page: {held:?}"));
    }
    Ok(())
}

/// The control's backends have no per-CPU page lists to look at.
#[cfg(not(feature = "buddy-sim"))]
fn every_cpu_used() -> Result<(), String> {
    Ok(())
}

/// The regions the allocator manages (buddy-sim's zones; the control's backends do not say).
fn regions() -> String {
    #[cfg(feature = "buddy-sim")]
    return format!("{} region(s)", global_allocator().buddy().region_count());
    #[cfg(not(feature = "buddy-sim"))]
    return "its regions".to_string();
}

#[unsafe(no_mangle)]
fn main() {
    if cfg!(feature = "bench") {
        bench::run();
    } else {
        run_checks();
    }
}

/// Every check, then the verdict.
fn run_checks() {
    let mut checks = Checks { run: 0, failed: 0 };
    checks.check("memtest", memtest());
    let name = if cfg!(feature = "buddy-sim") {
        "aligned runs freed in parts"
    } else {
        "aligned runs freed whole"
    };
    checks.check(name, aligned_runs());
    checks.check("DMA32 and fixed-address runs", dma32_and_fixed());
    checks.check("a 2 MiB page split into 4 KiB pages", huge_page_split());
    checks.check("eight tasks on every CPU", tasks());
    #[cfg(feature = "ram-pattern")]
    checks.check(
        "guest RAM written and read back",
        ram_pattern::ram_pattern(),
    );
    #[cfg(feature = "hypervisor-guest")]
    checks.check(
        "working set seen by the hypervisor",
        working_set::working_set(),
    );
    println!("today on {} with {}", global_allocator().name(), regions());
    if checks.failed == 0 {
        println!("today: all {} checks passed", checks.run);
    } else {
        println!("today: {} of {} checks failed", checks.failed, checks.run);
    }
}
