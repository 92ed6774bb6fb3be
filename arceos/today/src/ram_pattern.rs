//! A check of the app as any hypervisor's guest (the `ram-pattern` feature): it writes a
//! pattern over all the RAM its allocator gives and reads it back.

use ax_alloc::{UsageKind, global_allocator};
use std::string::String;
use std::vec::Vec;

use crate::PAGE;

/// Pages of each run the RAM pattern takes: 2 MiB.
const RUN_PAGES: usize = 512;

/// Takes 2 MiB runs from the allocator until it has none left, writes each word with its
/// own address scrambled, reads every word back, and frees the runs.
pub fn ram_pattern() -> Result<(), String> {
    let a = global_allocator();
    let mut runs: Vec<usize> = Vec::with_capacity(128);
    while runs.len() < runs.capacity() {
        match a.alloc_pages(RUN_PAGES, PAGE, UsageKind::Global) {
            Ok(at) => runs.push(at),
            Err(_) => break,
        }
    }
    let word = |at: usize| (at as u64) ^ 0xa5a5_5a5a_0f0f_f0f0;
    for &at in &runs {
        for w in (at..at + RUN_PAGES * PAGE).step_by(8) {
            // SAFETY: the run is this function's (ArceOS maps all of its RAM).
            unsafe { (w as *mut u64).write_volatile(word(w)) };
        }
    }
    let mut bad = None;
    for &at in &runs {
        for w in (at..at + RUN_PAGES * PAGE).step_by(8) {
            // SAFETY: as above.
            if unsafe { (w as *const u64).read_volatile() } != word(w) {
                bad = bad.or(Some(w));
            }
        }
    }
    for &at in &runs {
        a.dealloc_pages(at, RUN_PAGES, UsageKind::Global);
    }
    println!(
        "today guest RAM: {} MiB in {} runs of 2 MiB written and read back",
        runs.len() * 2,
        runs.len()
    );
    match bad {
        _ if runs.is_empty() => Err(String::from("no 2 MiB run free")),
        Some(w) => Err(format!("the word at {w:#x} did not read back")),
        None => Ok(()),
    }
}
