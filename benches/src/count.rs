//! Instructions per operation from `valgrind --tool=callgrind`: exact and the same on every
//! run of the same binary, whatever else the machine is doing, so the CPU-bound goals
//! (contiguous free, young clearing, zeroed allocation from a full pool) can be judged where
//! wall time is noise.
//!
//! The report runs its own binary again as `report count WORKLOAD N` under callgrind with
//! collection on only inside [`counted`], once with `N` and once with `2N` operations, and
//! divides the difference by `N`: what a workload does once (its first per-CPU refill, lazy
//! initialisation) cancels out.

use crate::contig_free::{self, Free};
use crate::young::{Scenario, Touch};
use crate::zeroed;
use pte_batch::format::Arm64;
use pte_batch::{FpbFlags, PteFormat, X86_64};
use std::process::{Command, ExitCode};
use std::sync::Mutex;

/// The workloads that can be counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// One iteration of the free_contig_range() patch's loop (allocate order 9, split, free
    /// the 512 pages), freeing with `free_contig_range`.
    ContigFreeBatched,
    /// The same iteration freeing page by page (the reference path).
    ContigFreePerPage,
    /// One aging pass over 64 MiB of 64 KiB contpte folios (arm64, 4 KiB granule), batched.
    YoungBatched,
    /// The same pass, per entry (the reference walk).
    YoungPerEntry,
    /// One aging pass over 64 MiB of 64 KiB folios in x86_64 page tables, batched.
    YoungBatchedX86,
    /// The same pass, per entry.
    YoungPerEntryX86,
    /// A batch of 2 MiB `alloc_zeroed` calls from a full pool of known-zero blocks.
    ZeroedAllocFullPool,
    /// The same batch of plain 2 MiB `alloc_pages` calls.
    PlainAlloc,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Self; 8] = [
        Self::ContigFreeBatched,
        Self::ContigFreePerPage,
        Self::YoungBatched,
        Self::YoungPerEntry,
        Self::YoungBatchedX86,
        Self::YoungPerEntryX86,
        Self::ZeroedAllocFullPool,
        Self::PlainAlloc,
    ];

    /// The name `report count` takes.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::ContigFreeBatched => "contig-free-batched",
            Self::ContigFreePerPage => "contig-free-per-page",
            Self::YoungBatched => "young-batched",
            Self::YoungPerEntry => "young-per-entry",
            Self::YoungBatchedX86 => "young-batched-x86",
            Self::YoungPerEntryX86 => "young-per-entry-x86",
            Self::ZeroedAllocFullPool => "alloc-zeroed-2m-full-pool",
            Self::PlainAlloc => "alloc-pages-2m",
        }
    }

    /// Operations per counted run (the second run does twice as many).
    const fn ops(self) -> u32 {
        match self {
            Self::ContigFreeBatched | Self::ContigFreePerPage => 200,
            Self::ZeroedAllocFullPool | Self::PlainAlloc => 25,
            _ => 4,
        }
    }

    /// Runs `n` operations, each inside [`counted`], with the preparation outside it.
    fn run(self, n: u32) {
        match self {
            Self::ContigFreeBatched | Self::ContigFreePerPage => {
                let free = if self == Self::ContigFreeBatched {
                    Free::Batched
                } else {
                    Free::PerPage
                };
                let zone = contig_free::zone();
                for _ in 0..n {
                    counted(&mut || {
                        contig_free::split_and_free_iteration(
                            &zone,
                            contig_free::PATCH_WORKLOAD,
                            free,
                        )
                    });
                }
            }
            Self::YoungBatched | Self::YoungPerEntry => {
                age(Arm64::G4K, n, self == Self::YoungBatched);
            }
            Self::YoungBatchedX86 | Self::YoungPerEntryX86 => {
                age(X86_64, n, self == Self::YoungBatchedX86);
            }
            Self::ZeroedAllocFullPool | Self::PlainAlloc => {
                zeroed::count_batches(n, self == Self::ZeroedAllocFullPool);
            }
        }
    }
}

/// `n` aging passes over [`YOUNG_BYTES`] of 64 KiB folios in tables of `format`, each after
/// the accesses are replayed (not counted).
fn age<F: PteFormat>(format: F, n: u32, batched: bool) {
    let s = Scenario::new(format, YOUNG_BYTES, 16, false, Touch::RandomPage);
    for _ in 0..n {
        s.touch();
        counted(&mut || {
            std::hint::black_box(if batched {
                s.age_batched(FpbFlags::NONE)
            } else {
                s.age_per_entry()
            });
        });
    }
}

/// The range the young-clearing workloads age: small enough to set up quickly under
/// callgrind, large enough that a pass is thousands of folios.
pub const YOUNG_BYTES: u64 = 64 << 20;

/// Callgrind counts only inside this function (`--toggle-collect`).
#[inline(never)]
pub fn counted(op: &mut dyn FnMut()) {
    op();
}

/// The pattern callgrind's `--toggle-collect` matches [`counted`] with.
const COUNTED_SYMBOL: &str = "benches::count::counted";

/// `report count WORKLOAD N`: runs the workload (under callgrind, started by [`per_op`]).
#[must_use]
pub fn main(args: &[String]) -> ExitCode {
    let workload = args
        .first()
        .and_then(|w| Workload::ALL.into_iter().find(|k| k.name() == w));
    let n = args.get(1).and_then(|n| n.parse::<u32>().ok());
    match (workload, n) {
        (Some(w), Some(n)) => {
            w.run(n);
            ExitCode::SUCCESS
        }
        _ => {
            let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
            eprintln!("usage: report count {{{}}} N", names.join("|"));
            ExitCode::from(2)
        }
    }
}

/// Instructions per operation of `w`, counted by callgrind once per process (the count is
/// the same every time: `--repeat` reuses it).
///
/// # Errors
/// Why no count came back: valgrind missing or failing, or no count in its output.
pub fn per_op(w: Workload) -> Result<f64, String> {
    static COUNTS: Mutex<Vec<(Workload, Result<f64, String>)>> = Mutex::new(Vec::new());
    let mut counts = COUNTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, r)) = counts.iter().find(|(k, _)| *k == w) {
        return r.clone();
    }
    let r = count_per_op(w);
    counts.push((w, r.clone()));
    r
}

fn count_per_op(w: Workload) -> Result<f64, String> {
    let n = w.ops();
    let one = collected(w, n)?;
    let two = collected(w, 2 * n)?;
    let diff = two
        .checked_sub(one)
        .ok_or_else(|| format!("{}: {two} instructions for 2N < {one} for N", w.name()))?;
    Ok(diff as f64 / f64::from(n))
}

/// Total instructions callgrind collected inside [`counted`] for `n` operations.
fn collected(w: Workload, n: u32) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--collect-atstart=no",
            &format!("--toggle-collect={COUNTED_SYMBOL}"),
        ])
        .arg(exe)
        .args(["count", w.name(), &n.to_string()])
        .output()
        .map_err(|e| format!("valgrind: {e} (is it installed? `cargo xtask test` installs it)"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!(
            "valgrind failed ({}): {}",
            out.status,
            tail.join(" | ")
        ));
    }
    // "==123== Collected : 4567890"
    stderr
        .lines()
        .find_map(|l| {
            let (_, v) = l.split_once("Collected :")?;
            v.trim().parse::<u64>().ok()
        })
        .filter(|&c| c > 0)
        .ok_or_else(|| {
            format!(
                "no instruction count in callgrind's output for {}",
                w.name()
            )
        })
}
