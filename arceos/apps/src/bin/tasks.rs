//! Tasks on every CPU allocating at once: eight tasks, each taking and freeing page runs
//! (marked, so that a run handed to two tasks is found) and heap objects, yielding between
//! calls; then every task's result is checked.
#![no_std]
#![no_main]

#[macro_use]
extern crate axstd as std;

use alloc_apps::{Checks, PAGE, Rng, mark, marked};
use axalloc::{UsageKind, global_allocator};
use std::string::String;
use std::thread;
use std::vec::Vec;

const TASKS: usize = 8;

/// One task's work: page runs and heap vectors, marked with the task's tag.
fn work(task: usize) -> Result<usize, String> {
    let a = global_allocator();
    let mut rng = Rng::new(100 + task as u64);
    let tag = 0x7a5c_0000 + task;
    let mut runs: Vec<(usize, usize)> = Vec::with_capacity(32);
    let mut done = 0;
    for round in 0..3_000 {
        if runs.len() < 32 && (runs.is_empty() || rng.below(2) == 0) {
            let pages = 1 + rng.below(8);
            if let Ok(at) = a.alloc_pages(pages, PAGE << rng.below(3), UsageKind::VirtMem) {
                // SAFETY: the run is this task's.
                unsafe { mark(at, pages, tag ^ at) };
                runs.push((at, pages));
            }
        } else {
            let (at, pages) = runs.swap_remove(rng.below(runs.len()));
            // SAFETY: as above.
            unsafe { marked(at, pages, tag ^ at) }
                .map_err(|e| format!("task {task}, round {round}: {e}"))?;
            a.dealloc_pages(at, pages, UsageKind::VirtMem);
            done += 1;
        }
        let v: Vec<usize> = (0..rng.below(300)).map(|i| i ^ tag).collect();
        if v.iter().enumerate().any(|(i, &x)| x != i ^ tag) {
            return Err(format!("task {task}: a heap vector was overwritten"));
        }
        if round % 64 == 0 {
            thread::yield_now();
        }
    }
    for (at, pages) in runs {
        // SAFETY: as above.
        unsafe { marked(at, pages, tag ^ at) }.map_err(|e| format!("task {task}: {e}"))?;
        a.dealloc_pages(at, pages, UsageKind::VirtMem);
    }
    Ok(done)
}

#[unsafe(no_mangle)]
fn main() {
    let mut checks = Checks::new("tasks");
    let handles: Vec<_> = (0..TASKS).map(|t| thread::spawn(move || work(t))).collect();
    let mut frees = 0;
    let mut failure = None;
    for h in handles {
        match h.join() {
            Ok(Ok(n)) => frees += n,
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some(String::from("a task panicked")),
        }
    }
    checks.check(
        "eight tasks allocating at once",
        match failure {
            Some(e) => Err(e),
            None if frees == 0 => Err(String::from("no task freed a run")),
            None => Ok(()),
        },
    );
    #[cfg(feature = "buddy-sim")]
    checks.check("every CPU's own lists used", every_cpu_used());
    checks.verdict();
}

/// Pages left on each CPU's per-cpu lists after the tasks: a CPU whose lists hold none
/// never allocated or freed through them (the CPU id from ArceOS's per-CPU register).
#[cfg(feature = "buddy-sim")]
fn every_cpu_used() -> Result<(), String> {
    let mut held = Vec::new();
    let mut cpu = 0;
    while let Some(pages) = global_allocator().pcp_pages(cpu) {
        held.push(pages);
        cpu += 1;
    }
    println!("tasks: pages on each CPU's lists: {held:?}");
    if held.iter().all(|&p| p > 0) {
        Ok(())
    } else {
        Err(format!("a CPU's lists hold no page: {held:?}"))
    }
}
