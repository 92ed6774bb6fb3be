//! Ring-0 measurements (the `measure` word on the command line): the TSC, calibrated against
//! the PIT, times zero-core's strategies and policy over extents of 4 KiB to 1 GiB, clearing
//! page at a time against one extent, the worst cooperative batch, buddy-sim's per-page and
//! batched `free_contig_range` loops and the young-clearing pass on the live MMU. Each figure
//! is printed as raw samples between `MEASURE BEGIN` and `MEASURE END`, one line per figure:
//! `sample NAME BYTES NS NS ...` (nanoseconds per operation); `cargo xtask report` computes
//! medians and intervals from them as it does for the user-space figures.

use core::arch::asm;

use pte_batch::mm_types::PageSize;
use zero_core::reference::clear_pages_one_by_one;
use zero_core::{ClearConfig, Clearer, NoResched, Policy, PreemptModel, Resched, Strategy};

use super::Machine;
use crate::steps::{Kernel, Step, fail};

/// Reads the time-stamp counter.
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC has no side effects (CR4.TSD is clear in ring 0 anyway).
    unsafe { asm!("lfence", "rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (u64::from(hi) << 32) | u64::from(lo)
}

fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: a port read of the PIT or the system control port; no memory effects.
    unsafe { asm!("in al, dx", out("al") v, in("dx") port, options(nomem, nostack)) };
    v
}

fn outb(port: u16, v: u8) {
    // SAFETY: a port write to the PIT or the system control port; no memory effects.
    unsafe { asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack)) };
}

/// TSC ticks per second, against PIT channel 2 counting 50 ms (1.193182 MHz) in mode 0.
pub fn tsc_hz() -> u64 {
    const PIT_HZ: u64 = 1_193_182;
    const MS: u64 = 50;
    let count = PIT_HZ * MS / 1000;
    // Gate channel 2 on, speaker off.
    outb(0x61, (inb(0x61) & !0x02) | 0x01);
    // Channel 2, low then high byte, mode 0 (interrupt on terminal count), binary.
    outb(0x43, 0xb0);
    outb(0x42, (count & 0xff) as u8);
    outb(0x42, (count >> 8) as u8);
    let t0 = rdtsc();
    // OUT2 (bit 5 of port 0x61) rises at the terminal count.
    while inb(0x61) & 0x20 == 0 {}
    let t1 = rdtsc();
    (t1 - t0) * 1000 / MS
}

/// Converts TSC ticks to nanoseconds.
struct Clock {
    hz: u64,
}

impl Clock {
    fn ns(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e9 / self.hz as f64
    }
}

/// One printed figure: up to [`MAX_SAMPLES`] samples in nanoseconds.
const MAX_SAMPLES: usize = 32;

struct Figure {
    samples: [f64; MAX_SAMPLES],
    len: usize,
}

impl Figure {
    fn new() -> Self {
        Self {
            samples: [0.0; MAX_SAMPLES],
            len: 0,
        }
    }
    fn push(&mut self, ns: f64) {
        if self.len < MAX_SAMPLES {
            self.samples[self.len] = ns;
            self.len += 1;
        }
    }
    /// Prints the figure's line; `name` is written with its spaces as `-` (strategy names).
    fn print(&self, name: core::fmt::Arguments<'_>, bytes: usize) {
        print!("sample ");
        let mut dashes = Dashes;
        let _ = core::fmt::write(&mut dashes, name);
        print!(" {bytes}");
        for s in &self.samples[..self.len] {
            print!(" {s:.1}");
        }
        println!();
    }
}

/// Writes to the console with spaces as `-`, so a figure's name is one word.
struct Dashes;

impl core::fmt::Write for Dashes {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let mut console = super::console::Console;
        for c in s.chars() {
            core::fmt::Write::write_char(&mut console, if c == ' ' { '-' } else { c })?;
        }
        Ok(())
    }
}

/// Extents the clearing figures cover.
const EXTENTS: [usize; 6] = [4 << 10, 64 << 10, 2 << 20, 32 << 20, 256 << 20, 1 << 30];
/// The bytes one sample clears at least (small extents repeat).
const SAMPLE_BYTES: usize = 8 << 20;

fn samples_for(bytes: usize) -> usize {
    if bytes >= 1 << 30 { 7 } else { 15 }
}

/// Times `clear` on `buf[..bytes]`: each sample repeats it to cover [`SAMPLE_BYTES`] and
/// records nanoseconds per clear; one untimed clear first.
fn time_clear(
    clock: &Clock,
    buf: &mut [u8],
    bytes: usize,
    mut clear: impl FnMut(&mut [u8]),
) -> Figure {
    let mut fig = Figure::new();
    let reps = (SAMPLE_BYTES / bytes).max(1);
    let buf = &mut buf[..bytes];
    clear(buf);
    for _ in 0..samples_for(bytes) {
        let t0 = rdtsc();
        for _ in 0..reps {
            clear(buf);
        }
        fig.push(clock.ns(rdtsc() - t0) / reps as f64);
    }
    fig
}

/// Records the time between `cond_resched` calls: each batch's duration.
struct BatchTimer {
    last: u64,
    worst: u64,
}

impl Resched for BatchTimer {
    fn cond_resched(&mut self) {
        let now = rdtsc();
        if self.last != 0 {
            self.worst = self.worst.max(now - self.last);
        }
        self.last = now;
    }
}

/// Runs every measurement over `region` (identity-mapped RAM outside the zone, at least
/// 1 GiB, 2 MiB aligned) and the kernel's data region and zone, printing the block.
pub fn run(kernel: &mut Kernel<Machine>, region: &mut [u8]) {
    let clock = Clock {
        hz: super::TSC_HZ
            .load(core::sync::atomic::Ordering::Relaxed)
            .max(1),
    };
    let policy = Policy::detect();
    let cfg = Clearer::detected(PageSize::Size4KiB, PreemptModel::None);
    println!(
        "MEASURE BEGIN tsc_hz={} kvm={}",
        clock.hz,
        super::under_kvm()
    );
    for strategy in Strategy::available() {
        for bytes in EXTENTS {
            let fig = time_clear(&clock, region, bytes, |b| {
                if strategy.clear(b).is_err() {
                    fail::<Machine>(Step::Zeroing, format_args!("{}", strategy.name()));
                }
            });
            fig.print(format_args!("strategy:{}", strategy.name()), bytes);
        }
    }
    for bytes in EXTENTS {
        let fig = time_clear(&clock, region, bytes, |b| {
            if zero_core::clear_contig_pages(b, &cfg, &mut NoResched).is_err() {
                fail::<Machine>(Step::Zeroing, format_args!("policy"));
            }
        });
        fig.print(format_args!("policy"), bytes);
    }
    // A folio cleared 4 KiB at a time (the policy's 4 KiB choice) or as one extent.
    let per_page = policy.choose(4096, zero_core::Locality::Unknown);
    for bytes in [2 << 20, 1 << 30] {
        let fig = time_clear(&clock, region, bytes, |b| {
            if clear_pages_one_by_one(b, PageSize::Size4KiB, per_page, &mut NoResched).is_err() {
                fail::<Machine>(Step::Zeroing, format_args!("page at a time"));
            }
        });
        fig.print(format_args!("folio-page-at-a-time"), bytes);
        let fig = time_clear(&clock, region, bytes, |b| {
            if zero_core::clear_contig_pages(b, &cfg, &mut NoResched).is_err() {
                fail::<Machine>(Step::Zeroing, format_args!("extent"));
            }
        });
        fig.print(format_args!("folio-extent"), bytes);
    }
    // The worst cooperative batch over 1 GiB, for 8, 32 and 64 MiB batches.
    let gib = &mut region[..1 << 30];
    for mib in [8usize, 32, 64] {
        let pages = core::num::NonZeroUsize::new(mib << 8).unwrap_or(core::num::NonZeroUsize::MIN);
        let Ok(cfg) = ClearConfig::new(PageSize::Size4KiB, PreemptModel::Voluntary)
            .with_batch_pages(pages)
            .validate()
        else {
            fail::<Machine>(Step::Zeroing, format_args!("detected policy refused"));
        };
        let mut fig = Figure::new();
        for _ in 0..5 {
            let mut timer = BatchTimer { last: 0, worst: 0 };
            if zero_core::clear_contig_pages(gib, &cfg, &mut timer).is_err() {
                fail::<Machine>(Step::Zeroing, format_args!("batches"));
            }
            fig.push(clock.ns(timer.worst));
        }
        fig.print(format_args!("worst-batch:{mib}MiB"), mib << 20);
    }
    // free_contig_range of a 512-page run, batched and per page.
    let (mut batched, mut per_page) = (Figure::new(), Figure::new());
    kernel.time_free(20, rdtsc, |b, t| {
        if b { &mut batched } else { &mut per_page }.push(clock.ns(t));
    });
    batched.print(format_args!("free-batched"), 512 * 4096);
    per_page.print(format_args!("free-per-page"), 512 * 4096);
    // The young-clearing pass over the data region on the live MMU.
    let (mut batched, mut per_entry) = (Figure::new(), Figure::new());
    kernel.time_aging(20, rdtsc, |b, t| {
        if b { &mut batched } else { &mut per_entry }.push(clock.ns(t));
    });
    batched.print(
        format_args!("young-batched"),
        crate::steps::DATA_PAGES * 4096,
    );
    per_entry.print(
        format_args!("young-per-entry"),
        crate::steps::DATA_PAGES * 4096,
    );
    println!("MEASURE END");
}
