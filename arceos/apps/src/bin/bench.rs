//! Allocation work timed inside the guest, for runs under QEMU's `-icount shift=0`, where
//! the guest's clock counts instructions (1 ns each): the same calls on both allocators,
//! measured by what the guest executes, not by the host's wall clock. One line per
//! workload: `bench <workload>: <ns> ns per call`.
//!
//! Booted with more than one CPU (without `-icount`, which runs the CPUs one at a time), it
//! times page-table pages on each CPU alone and then on every CPU at once instead, by the
//! wall clock, with each CPU's own calls while all ran; and, round by round beside them, a
//! control with no allocator (each CPU writing and reading an array of its own): the
//! scaling QEMU and the host allowed two CPUs that share nothing, at that moment.
#![no_std]
#![no_main]

#[macro_use]
extern crate axstd as std;

use alloc_apps::{PAGE, Rng};
use axalloc::{GlobalPage, UsageKind, global_allocator};
use core::sync::atomic::{AtomicUsize, Ordering};
use std::os::arceos::api::task::{AxCpuMask, ax_set_current_affinity};
use std::os::arceos::modules::axhal;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use std::vec::Vec;

/// Runs `f` `calls` times' worth and prints the time per call.
fn timed(name: &str, calls: usize, f: impl FnOnce()) {
    let t = Instant::now();
    f();
    let ns = t.elapsed().as_nanos() as usize;
    println!("bench {name}: {} ns per call", ns / calls.max(1));
}

/// Iterations of [`count_down`] in the clock's calibration: two instructions each.
const CLOCK_LOOP: u64 = 1_000_000;

/// A loop of exactly `2 * n` instructions (a count-down in a register), out of line.
#[inline(never)]
fn count_down(n: u64) {
    // SAFETY: decrements a register to zero; touches no memory and no other register.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!("2:", "dec {0}", "jnz 2b", inout(reg) n => _, options(nomem, nostack));
    }
    // SAFETY: as above.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("2:", "subs {0}, {0}, #1", "b.ne 2b", inout(reg) n => _, options(nomem, nostack));
    }
}

/// Times a loop of a known number of instructions with the clock the workloads are timed
/// with: under `-icount shift=0` QEMU's counters advance one tick per instruction, and a
/// platform that converts its counter at another frequency than the one it runs at (ArceOS
/// 0.3's x86_64 platform takes the TSC for 4 GHz) reads its figures in other units, which
/// the report divides out.
fn clock_calibration() {
    let t = Instant::now();
    count_down(CLOCK_LOOP);
    let ns = t.elapsed().as_nanos();
    println!("bench clock: {} instructions in {ns} ns", 2 * CLOCK_LOOP);
}

/// Page-table pages each CPU takes and frees (512 taken, then freed, again and again) per
/// timed run of the parallel workload: about a tenth of a second under TCG.
const PARALLEL_PAGES: usize = 500 * 512;
/// Timed runs of the parallel workload, each one CPU alone then every CPU at once.
const PARALLEL_ROUNDS: usize = 5;

/// Passes of the control over [`PARALLEL_PAGES`] words per timed run: under TCG a word's
/// store or load costs about a sixtieth of the drop-in's page call, and with these passes
/// the control's runs last about as long as the drop-in's, so that the host's
/// interruptions hit both alike.
const CONTROL_PASSES: usize = 64;

/// Work the parallel workload times on each CPU: `rounds` times 512 of something taken,
/// then given back.
type Work = fn(usize);

/// On CPU `cpu` (pinned there), once `ready` counts `cpus` tasks: `work` over
/// [`PARALLEL_PAGES`] / 512 rounds; returns the time it took.
fn timed_on(cpu: usize, cpus: usize, ready: &AtomicUsize, work: Work) -> Duration {
    if ax_set_current_affinity(AxCpuMask::one_shot(cpu)).is_err() {
        panic!("bench: cannot pin a task to CPU {cpu}");
    }
    assert_eq!(
        axhal::percpu::this_cpu_id(),
        cpu,
        "bench: pinned to CPU {cpu}"
    );
    ready.fetch_add(1, Ordering::AcqRel);
    // Yield, not spin: the scheduler is FIFO without preemption and places each new or
    // woken task on the CPUs in turn, so the partner task may still wait in this CPU's
    // queue behind this one, to be run and migrate to its own CPU. A spin here would hold
    // this CPU forever (seen once in several hundred boots).
    while ready.load(Ordering::Acquire) < cpus {
        thread::yield_now();
    }
    let t = Instant::now();
    work(PARALLEL_PAGES / 512);
    t.elapsed()
}

/// `rounds` times: 512 page-table pages taken, then freed.
fn page_table_rounds(rounds: usize) {
    let a = global_allocator();
    let mut held = [0usize; 512];
    for _ in 0..rounds {
        for h in held.iter_mut() {
            *h = a
                .alloc_pages(1, PAGE, UsageKind::PageTable)
                .expect("a page");
        }
        for &h in held.iter() {
            a.dealloc_pages(h, 1, UsageKind::PageTable);
        }
    }
}

/// The control's work: `rounds` times [`CONTROL_PASSES`] passes of 512 words of an array
/// of the task's own (on its stack) written, then read, no allocator called; what QEMU and
/// the host let CPUs that share nothing do.
fn private_rounds(rounds: usize) {
    let mut words = [0usize; 512];
    let mut sum = 0usize;
    for r in 0..rounds * CONTROL_PASSES {
        for (i, w) in words.iter_mut().enumerate() {
            // SAFETY: a word of this task's own array, borrowed mutably here.
            unsafe { core::ptr::write_volatile(w, i ^ r) };
        }
        for w in words.iter() {
            // SAFETY: as above, read.
            sum = sum.wrapping_add(unsafe { core::ptr::read_volatile(w) });
        }
    }
    core::hint::black_box(sum);
}

/// `work` on each CPU of `cpus` at once, one pinned task each, started together: each
/// CPU's time, in the order of `cpus`.
fn at_once(cpus: &[usize], work: Work) -> Vec<Duration> {
    let ready = Arc::new(AtomicUsize::new(0));
    let n = cpus.len();
    let tasks: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            let ready = ready.clone();
            thread::spawn(move || timed_on(cpu, n, &ready, work))
        })
        .collect();
    tasks
        .into_iter()
        .map(|t| t.join().expect("a task of the parallel workload"))
        .collect()
}

/// The parallel workload: [`PARALLEL_ROUNDS`] times the control on CPU 0 alone and on every
/// CPU at once, then page-table pages on CPU 0 alone, each other CPU alone, and every CPU at
/// once, each line in ns per call (a word's store or load for the control) over all the
/// CPUs' calls (the inverse of their throughput); after the last, each CPU's own calls in
/// it.
fn parallel(cpus: usize) {
    let calls = 2 * PARALLEL_PAGES;
    let all: Vec<usize> = (0..cpus).collect();
    let control = |name: &str, t: Duration, n: usize| {
        // Fractions of a ns: a word's store or load takes a few under TCG.
        println!(
            "bench control (a private array, no allocator), {name}: {:.3} ns per call",
            t.as_nanos() as f64 / (calls * CONTROL_PASSES * n) as f64
        );
    };
    let line = |name: &str, t: Duration, n: usize| {
        println!(
            "bench page-table pages (alloc + free of 1 page), {name}: {} ns per call",
            t.as_nanos() as usize / (calls * n)
        );
    };
    for _ in 0..PARALLEL_ROUNDS {
        control("one CPU alone", at_once(&[0], private_rounds)[0], 1);
        let times = at_once(&all, private_rounds);
        let last = times.iter().max().copied().unwrap_or_default();
        control("every CPU at once", last, cpus);
        line("one CPU alone", at_once(&[0], page_table_rounds)[0], 1);
        for cpu in 1..cpus {
            line(
                &format!("CPU {cpu} alone"),
                at_once(&[cpu], page_table_rounds)[0],
                1,
            );
        }
        let times = at_once(&all, page_table_rounds);
        let last = times.iter().max().copied().unwrap_or_default();
        line("every CPU at once", last, cpus);
        for (cpu, &t) in times.iter().enumerate() {
            line(&format!("every CPU at once, CPU {cpu}'s own calls"), t, 1);
        }
    }
}

#[unsafe(no_mangle)]
fn main() {
    let a = global_allocator();
    println!("bench: {} allocator", a.name());
    let cpus = axhal::cpu_num();
    if cpus > 1 {
        println!("bench: {cpus} CPUs");
        parallel(cpus);
        println!("bench: done");
        return;
    }
    clock_calibration();
    // Page-table pages: 512 single pages taken, then freed, 20 times.
    timed(
        "page-table pages (alloc + free of 1 page)",
        20 * 512,
        || page_table_rounds(20),
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
