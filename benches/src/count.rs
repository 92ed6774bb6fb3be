//! Instructions per operation from `valgrind --tool=callgrind`: exact and the same on every
//! run of the same binary, whatever else the machine is doing, so the CPU-bound goals
//! (contiguous free, young clearing, zeroed allocation from a full pool) can be judged where
//! wall time is noise.
//!
//! The report runs its own binary again as `report count WORKLOAD N` under callgrind with
//! collection on only inside [`counted`], once with `N` and once with `2N` operations, and
//! divides the difference by `N`: what a workload does once (its first per-CPU refill, lazy
//! initialisation) cancels out.
//!
//! [`l1d_misses_per_op`] counts the same way under callgrind's cache simulation (the L1 data
//! cache valgrind configures from this CPU): how many distinct lines a workload's operation
//! reaches beyond what stays in L1, which instruction counts do not show. Simulated, so as
//! exact and repeatable as the instructions. [`Cache::FullyAssociative`] simulates an L1 of
//! the same size and line in which any line may go anywhere: a miss the CPU's L1 has and that
//! one does not is a set conflict (lines whose addresses pick the same set, more of them than
//! the set has ways), not a lack of capacity.
//!
//! [`per_op_inside`] counts a workload's operations inside some functions of the code under
//! them alone (callgrind toggling collection at their entry and exit instead of
//! [`counted`]'s): how many of an operation's instructions one layer executes.

use std::process::{Command, ExitCode};
use std::sync::Mutex;

/// A workload callgrind can count, defined by the section it measures: its name
/// (`report count NAME N`), operations per counted run (the second run does twice as many),
/// and how to run `n` operations, each inside [`counted`] with its preparation outside.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// The name `report count` takes.
    pub name: &'static str,
    /// Operations per counted run.
    pub ops: u32,
    /// Runs `n` operations.
    pub run: fn(u32),
}

/// Callgrind counts only inside this function (`--toggle-collect`).
#[inline(never)]
pub fn counted(op: &mut dyn FnMut()) {
    op();
}

/// The pattern callgrind's `--toggle-collect` matches [`counted`] with.
const COUNTED_SYMBOL: &str = "benches::count::counted";

/// `report count WORKLOAD N`: runs the workload of `all` so named (under callgrind, started
/// by [`per_op`]).
#[must_use]
pub fn main(args: &[String], all: &[Workload]) -> ExitCode {
    let workload = args
        .first()
        .and_then(|w| all.iter().find(|k| k.name == w.as_str()));
    let n = args.get(1).and_then(|n| n.parse::<u32>().ok());
    match (workload, n) {
        (Some(w), Some(n)) => {
            // The counted thread is CPU 0 of the drop-in, holding its id as a kernel's CPU
            // does (its page calls through CPU 0's magazines).
            crate::smp::on_cpu(0);
            (w.run)(n);
            ExitCode::SUCCESS
        }
        _ => {
            let names: Vec<&str> = all.iter().map(|w| w.name).collect();
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
    memo(w, Collect::Counted, None).map(|c| c.instructions)
}

/// The L1 data cache callgrind simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cache {
    /// The one valgrind configures from this CPU (its size, ways and line).
    ThisCpu,
    /// One of this CPU's L1 data cache's size and line, fully associative (as many ways as
    /// lines): it misses only for lack of capacity.
    FullyAssociative,
}

/// L1 data-cache misses (reads and writes) per operation of `w` in callgrind's cache
/// simulation of `cache`, counted once per process as [`per_op`]. The same runs count the
/// instructions, which [`per_op`] then reuses.
///
/// # Errors
/// As [`per_op`]; for [`Cache::FullyAssociative`], also this CPU's L1 data cache not found
/// in `/sys/devices/system/cpu/cpu0/cache`.
pub fn l1d_misses_per_op(w: Workload, cache: Cache) -> Result<f64, String> {
    memo(w, Collect::Counted, Some(cache)).map(|c| c.l1d_misses.unwrap_or_default())
}

/// callgrind's `--D1=size,ways,line` for a fully associative cache of this CPU's L1 data
/// cache's size and line (Linux's sysfs cache description of CPU 0).
fn fully_associative_l1d() -> Result<String, String> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let read = |index: &std::path::Path, f: &str| {
        std::fs::read_to_string(index.join(f)).map(|s| s.trim().to_owned())
    };
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let index = e.path();
        if read(&index, "level").ok().as_deref() != Some("1")
            || read(&index, "type").ok().as_deref() != Some("Data")
        {
            continue;
        }
        let (size, line) = (read(&index, "size"), read(&index, "coherency_line_size"));
        return size
            .ok()
            .zip(line.ok())
            .and_then(|(size, line)| fully_associative_option(&size, &line))
            .ok_or_else(|| format!("{}: no size or line size", index.display()));
    }
    Err(format!("no level-1 data cache in {}", dir.display()))
}

/// callgrind's `--D1` option for a fully associative cache of `size` bytes (sysfs's "48K")
/// in lines of `line` bytes: as many ways as lines. `None` for what does not parse or does
/// not divide into lines.
fn fully_associative_option(size: &str, line: &str) -> Option<String> {
    let bytes = |s: &str| -> Option<u64> {
        match s.strip_suffix('K') {
            Some(k) => k.parse::<u64>().ok()?.checked_mul(1024),
            None => s.parse().ok(),
        }
    };
    let (size, line) = (bytes(size)?, bytes(line)?);
    (line > 0 && size % line == 0).then(|| format!("--D1={size},{},{line}", size / line))
}

#[cfg(test)]
mod tests {
    use super::fully_associative_option;

    #[test]
    fn fully_associative_option_has_a_way_per_line() {
        assert_eq!(
            fully_associative_option("48K", "64").as_deref(),
            Some("--D1=49152,768,64")
        );
        assert_eq!(
            fully_associative_option("32768", "64").as_deref(),
            Some("--D1=32768,512,64")
        );
        assert_eq!(fully_associative_option("48K", "0"), None);
        assert_eq!(fully_associative_option("100", "64"), None);
        assert_eq!(fully_associative_option("big", "64"), None);
    }
}

/// What callgrind counted for one workload: per operation, or in total for one run.
#[derive(Clone, Copy, Debug)]
struct Counts {
    /// Instructions executed (`Ir`).
    instructions: f64,
    /// L1 data-cache read and write misses (`D1mr + D1mw`), when the cache simulation ran.
    l1d_misses: Option<f64>,
}

/// Where callgrind counts: inside [`counted`], or inside the named functions alone
/// (callgrind's `--toggle-collect` patterns: what those functions and everything they call
/// execute, wherever they are called from, [`counted`]'s operations or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Collect {
    /// Inside [`counted`].
    Counted,
    /// Inside the functions these `--toggle-collect` patterns name.
    Inside(&'static [&'static str]),
}

/// Instructions per operation of `w` executed inside the functions `patterns` name
/// (callgrind's `--toggle-collect` patterns, `*` a wildcard; none of them may call another),
/// counted as [`per_op`]: how much of an operation a layer of the code under it costs.
///
/// # Errors
/// As [`per_op`], also when no instruction ran inside those functions (none was called, or
/// the compiler inlined every call of them, which leaves no function to count in).
pub fn per_op_inside(w: Workload, patterns: &'static [&'static str]) -> Result<f64, String> {
    memo(w, Collect::Inside(patterns), None).map(|c| c.instructions)
}

/// [`count_per_op`] of `w`, once per process, place counted and cache simulation (`None`:
/// none). A count with a simulation also gives the instructions, which a count without one
/// reuses.
fn memo(w: Workload, collect: Collect, cache: Option<Cache>) -> Result<Counts, String> {
    type Memo = Vec<(
        (&'static str, Collect, Option<Cache>),
        Result<Counts, String>,
    )>;
    static COUNTS: Mutex<Memo> = Mutex::new(Vec::new());
    let mut counts = COUNTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let known = counts.iter().find(|((k, at, c), r)| {
        *k == w.name && *at == collect && (*c == cache || (cache.is_none() && r.is_ok()))
    });
    if let Some((_, r)) = known {
        return r.clone();
    }
    let r = count_per_op(w, collect, cache);
    counts.push(((w.name, collect, cache), r.clone()));
    r
}

fn count_per_op(w: Workload, collect: Collect, cache: Option<Cache>) -> Result<Counts, String> {
    let n = w.ops;
    let one = collected(w, n, collect, cache)?;
    let two = collected(w, 2 * n, collect, cache)?;
    let per_op = |two: f64, one: f64| {
        if two < one {
            Err(format!("{}: {two} events for 2N < {one} for N", w.name))
        } else {
            Ok((two - one) / f64::from(n))
        }
    };
    Ok(Counts {
        instructions: per_op(two.instructions, one.instructions)?,
        l1d_misses: match (two.l1d_misses, one.l1d_misses) {
            (Some(two), Some(one)) => Some(per_op(two, one)?),
            _ => None,
        },
    })
}

/// What callgrind collected where `collect` says for `n` operations, with its simulation of
/// `cache` if one is given.
fn collected(
    w: Workload,
    n: u32,
    collect: Collect,
    cache: Option<Cache>,
) -> Result<Counts, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let mut valgrind = Command::new("valgrind");
    valgrind.args([
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        "--collect-atstart=no",
    ]);
    match collect {
        Collect::Counted => {
            valgrind.arg(format!("--toggle-collect={COUNTED_SYMBOL}"));
        }
        Collect::Inside(patterns) => {
            valgrind.args(patterns.iter().map(|p| format!("--toggle-collect={p}")));
        }
    }
    match cache {
        Some(Cache::ThisCpu) => {
            valgrind.arg("--cache-sim=yes");
        }
        Some(Cache::FullyAssociative) => {
            valgrind.args(["--cache-sim=yes", &fully_associative_l1d()?]);
        }
        None => {}
    }
    let out = valgrind
        .arg(exe)
        .args(["count", w.name, &n.to_string()])
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
    // "==123== Collected : 4567890", or with the cache simulation
    // "==123== Collected : Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw" as numbers.
    stderr
        .lines()
        .find_map(|l| {
            let (_, v) = l.split_once("Collected :")?;
            let fields: Vec<u64> = v
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            let l1d_misses = if cache.is_some() {
                Some((fields.get(4)? + fields.get(5)?) as f64)
            } else {
                None
            };
            Some(Counts {
                instructions: *fields.first()? as f64,
                l1d_misses,
            })
        })
        .filter(|c| c.instructions > 0.0)
        .ok_or_else(|| {
            format!(
                "no count in callgrind's output for {} (nothing ran where it counts)",
                w.name
            )
        })
}
