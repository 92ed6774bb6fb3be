//! What the apps share: a check list that prints one line per check and a verdict, a
//! deterministic random stream, and runs of pages marked with a pattern to find overlaps.
#![no_std]

extern crate axstd as std;

use std::println;

/// Bytes per page.
pub const PAGE: usize = 4096;

/// The checks of one app: each prints `<app> <check>: ok` or `<app> <check>: FAIL <why>`,
/// and [`Checks::verdict`] prints `<app>: all N checks passed` or `<app>: K of N checks
/// failed`, the line the test stage looks for.
pub struct Checks {
    app: &'static str,
    run: usize,
    failed: usize,
}

impl Checks {
    /// No check run yet.
    pub const fn new(app: &'static str) -> Self {
        Self {
            app,
            run: 0,
            failed: 0,
        }
    }

    /// Records a check: `Ok(())` passes, `Err(why)` fails.
    pub fn check(&mut self, name: &str, outcome: Result<(), std::string::String>) {
        self.run += 1;
        match outcome {
            Ok(()) => println!("{} {name}: ok", self.app),
            Err(why) => {
                self.failed += 1;
                println!("{} {name}: FAIL {why}", self.app);
            }
        }
    }

    /// Prints the verdict line.
    pub fn verdict(&self) {
        if self.failed == 0 {
            println!("{}: all {} checks passed", self.app, self.run);
        } else {
            println!(
                "{}: {} of {} checks failed",
                self.app, self.failed, self.run
            );
        }
    }
}

/// xorshift64*: the same stream on every run and both allocators.
pub struct Rng(u64);

impl Rng {
    /// A stream from `seed` (not 0).
    pub const fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next value below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Writes `tag` into the first word of each page of `[at, at + pages * 4 KiB)`.
///
/// # Safety
/// The run is the caller's, mapped and writable.
pub unsafe fn mark(at: usize, pages: usize, tag: usize) {
    for p in 0..pages {
        // SAFETY: the caller's run.
        unsafe { ((at + p * PAGE) as *mut usize).write_volatile(tag ^ p) };
    }
}

/// Whether each page of the run still holds the mark [`mark`] wrote: `Err` names the first
/// page another owner wrote.
///
/// # Safety
/// As [`mark`].
pub unsafe fn marked(at: usize, pages: usize, tag: usize) -> Result<(), std::string::String> {
    for p in 0..pages {
        // SAFETY: the caller's run.
        let got = unsafe { ((at + p * PAGE) as *const usize).read_volatile() };
        if got != tag ^ p {
            return Err(std::format!(
                "page {p} of the run at {at:#x} was overwritten ({got:#x}): handed out twice"
            ));
        }
    }
    Ok(())
}
