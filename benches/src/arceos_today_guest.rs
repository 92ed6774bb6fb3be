//! The "ArceOS today" section's guest half: today's ArceOS (`ax-std` 0.7.5 on `axplat-dyn`,
//! from the published crates) booted under QEMU with `-icount shift=0` on buddy-sim's
//! drop-in and on ax-alloc 0.9.2's own backends as the registry ships them
//! (buddy-slab-allocator, what `axplat-dyn` selects, and TLSF), each timing the allocator
//! calls ArceOS makes most inside the guest (`arceos/today`'s `bench` feature). The guest's
//! clock advances 1 ns per guest instruction there, so the figures are instruction counts:
//! ax-alloc's own code paths whole (its IRQ-saving locks, its usage counts, its per-CPU slab
//! lookup), which the host rows' stand-ins leave out.
//!
//! `cargo xtask report` builds and boots the guests and leaves their `today bench` lines in
//! the file named by [`LOG_ENV`] (first line `UNAVAILABLE: why` when it could not).

use crate::capture;
use crate::measure::Estimate;
use crate::report::ratio_text;
use crate::{Cell, SectionContext, Table};

/// The environment variable naming the captured guest runs.
pub const LOG_ENV: &str = "ZC_ARCEOS_TODAY_LOG";

/// The allocators booted, as the log names them: buddy-sim first, then ax-alloc's backends.
const BACKENDS: [&str; 3] = ["buddy-sim", "buddy-slab-allocator", "TLSF"];

/// What each backend is, for the tables.
const BACKEND_TITLES: [&str; 3] = [
    "buddy-sim (arceos/ax-alloc drop-in)",
    "ax-alloc 0.9.2, buddy-slab-allocator backend (axplat-dyn's default)",
    "ax-alloc 0.9.2, TLSF backend",
];

/// The page workloads: the page paths issue 50 asks 1.5x on; the rest are judged against
/// [`HEAP_GOAL`].
const PAGE_WORKLOADS: [&str; 3] = [
    "one page (alloc + free)",
    "page-table pages (512 taken, then freed)",
    "heap growth (runs of 8 to 8192 pages, then freed)",
];

/// The goal over ax-alloc's backends on a page path.
const PAGE_GOAL: f64 = 1.5;
/// The goal over ax-alloc's backends on a heap call (the section's: at least as fast).
const HEAP_GOAL: f64 = 1.0;

/// Guest ns per call, one a round, by (architecture, workload), for each of [`BACKENDS`].
type GuestRuns = Vec<((String, String), [Vec<f64>; 3])>;

/// Parses the captured runs.
///
/// # Errors
/// The `UNAVAILABLE` reason, a run naming no architecture or an unknown allocator, or a log
/// without a `today bench` line.
pub fn parse(log: &str) -> Result<GuestRuns, String> {
    let mut runs: GuestRuns = Vec::new();
    let mut current: Option<(String, usize)> = None;
    for line in capture::available(log)?.lines() {
        if let Some(fields) = line.strip_prefix("TODAY RUN ") {
            let arch = capture::field(fields, "arch").ok_or("a run without arch=")?;
            let name = capture::field(fields, "allocator").ok_or("a run without allocator=")?;
            let backend = BACKENDS
                .iter()
                .position(|b| *b == name)
                .ok_or_else(|| format!("a run of an unknown allocator {name:?}"))?;
            current = Some((arch.to_string(), backend));
        } else if let Some(rest) = line.strip_prefix("today bench ")
            && let (Some((arch, backend)), Some((work, ns))) = (&current, capture::per_call(rest))
        {
            capture::entry(
                &mut runs,
                (arch.clone(), work.to_string()),
                Default::default,
            )[*backend]
                .push(ns);
        }
    }
    if runs.is_empty() {
        return Err("the log holds no today bench line".into());
    }
    Ok(runs)
}

/// A peer's rounds over buddy-sim's: the ratio of their medians, its interval the lowest
/// and highest ratio any two rounds give (the peer's fewest instructions over buddy-sim's
/// most, and the reverse).
fn ratio(peer: &[f64], ours: &[f64]) -> Option<Estimate> {
    let (p, o) = (
        Estimate::of(peer.iter().copied()),
        Estimate::of(ours.iter().copied()),
    );
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let median = p.median / o.median;
    median.is_finite().then(|| Estimate {
        median,
        lo: min(peer) / max(ours),
        hi: max(peer) / min(ours),
        n: peer.len().min(ours.len()),
    })
}

/// The guest table and its goals, headlines in `ctx`.
pub fn tables(ctx: &SectionContext) -> Vec<Table> {
    let mut t = Table::new(
        "arceos-today-guest",
        "Today's ArceOS (ax-std 0.7.5) booted under QEMU -icount shift=0 on buddy-sim and on ax-alloc 0.9.2's own backends: guest ns per call (= instructions; median [lowest, highest] over rounds), and each backend ÷ buddy-sim (ratio of medians; above 1: buddy-sim faster)",
        &[
            "workload",
            "arch",
            BACKEND_TITLES[0],
            BACKEND_TITLES[1],
            BACKEND_TITLES[2],
            "buddy-slab-allocator ÷ buddy-sim",
            "TLSF ÷ buddy-sim",
        ],
    );
    let mut goals = Table::new(
        "arceos-today-guest-goals",
        "buddy-sim's drop-in over ax-alloc 0.9.2's backends inside today's ArceOS (guest instructions, from the table above)",
        &[
            "workload",
            "peer ÷ buddy-sim (ratio of medians [lowest, highest over rounds])",
            "goal",
            "verdict",
        ],
    );
    let runs = capture::read(LOG_ENV).and_then(|l| parse(&l));
    match runs {
        Ok(runs) => {
            for ((arch, work), rounds) in &runs {
                let cells = rounds.iter().map(|r| {
                    if r.is_empty() {
                        Cell::text("—")
                    } else {
                        // Five rounds: the interval is their lowest to highest.
                        Cell::estimate(Estimate::of(r.iter().copied()), 0, "")
                    }
                });
                let mut row = vec![Cell::text(work.clone()), Cell::text(arch.clone())];
                row.extend(cells);
                for peer in 1..BACKENDS.len() {
                    let Some(r) = ratio(&rounds[peer], &rounds[0]) else {
                        row.push(Cell::text("—"));
                        continue;
                    };
                    row.push(Cell::num(r.median, 2, "x"));
                    let goal = if PAGE_WORKLOADS.contains(&work.as_str()) {
                        PAGE_GOAL
                    } else {
                        HEAP_GOAL
                    };
                    let name = format!(
                        "{arch} guest: {work}: buddy-sim over {}",
                        BACKEND_TITLES[peer]
                    );
                    ctx.headline(name.clone(), r);
                    goals.row(vec![
                        Cell::text(name),
                        Cell::text(ratio_text(r)),
                        Cell::text(format!(">= {goal}x")),
                        Cell::text(r.judge(goal, true).as_str()),
                    ]);
                }
                t.row(row);
            }
        }
        Err(why) => t.note(format!("Not measured: {why}.")),
    }
    t.note(
        "Each backend is the whole allocator a kernel of ArceOS's current line links: \
         buddy-sim's drop-in (`arceos/ax-alloc`, patched in), or ax-alloc 0.9.2 from the \
         registry with the backend `axplat-dyn` selects (buddy-slab-allocator 0.6.1: one \
         global lock over its buddy, per-CPU slab caches for the heap) or its `tlsf` feature, \
         each lock taken with interrupts saved and masked, its usage counts under a lock of \
         their own. The app (`arceos/today` with its `bench` feature; `arceos/today-control` \
         for ax-alloc's backends) boots with one CPU and 512 MiB and runs each workload five \
         rounds in a row: one page for a page table allocated and freed at once (2 000 \
         times); page-table pages for a 1 GiB mapping, 512 taken then freed (4 times); heap \
         growth, runs of 8 to 8192 pages doubling, then freed (10 times, 22 calls each); a \
         64-byte block of the Rust heap (`Box`, through `#[global_allocator]`) allocated and \
         freed at once (5 000 times). Under -icount shift=0 the guest clock advances 1 ns per \
         guest instruction: the figures are instruction counts, the same on every host, blind \
         to cache misses and to how fast an instruction is.",
    );
    goals.note(
        "The page paths (one page, page-table pages, heap growth) against ax-alloc's backends \
         as ArceOS runs them: >= 1.5x (issue 50: the page paths of buddy-slab-allocator and \
         TLSF as ax-alloc 0.9 uses them); the heap block: >= 1x. Met when even the lowest \
         ratio of any two rounds reaches the goal, not met when even the highest stays below, \
         inconclusive otherwise.",
    );
    vec![t, goals]
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
TODAY RUN arch=x86_64 allocator=buddy-sim
today bench one page (alloc + free): 143 ns per call
today bench one page (alloc + free): 145 ns per call
TODAY RUN arch=x86_64 allocator=buddy-slab-allocator
today bench one page (alloc + free): 509 ns per call
TODAY RUN arch=x86_64 allocator=TLSF
today bench one page (alloc + free): 300 ns per call
today bench 64-byte heap block (alloc + free): 100 ns per call
";

    #[test]
    fn runs_are_grouped_by_architecture_workload_and_backend() {
        let runs = parse(LOG).unwrap();
        assert_eq!(runs.len(), 2);
        let ((arch, work), rounds) = &runs[0];
        assert_eq!(
            (arch.as_str(), work.as_str()),
            ("x86_64", "one page (alloc + free)")
        );
        assert_eq!(rounds[0], vec![143.0, 145.0]);
        assert_eq!(rounds[1], vec![509.0]);
        assert_eq!(rounds[2], vec![300.0]);
        assert!(runs[1].1[0].is_empty());
    }

    #[test]
    fn a_ratio_spans_the_rounds_and_needs_both_sides() {
        let r = ratio(&[500.0, 510.0], &[100.0, 125.0]).unwrap();
        assert!((r.median - 505.0 / 112.5).abs() < 1e-9);
        assert!((r.lo - 4.0).abs() < 1e-9 && (r.hi - 5.1).abs() < 1e-9);
        assert!(ratio(&[500.0], &[]).is_none());
    }

    #[test]
    fn an_unavailable_log_or_an_unknown_allocator_says_why() {
        assert_eq!(parse("UNAVAILABLE: no QEMU\n").unwrap_err(), "no QEMU");
        assert!(parse("TODAY RUN arch=x86_64 allocator=slab\n").is_err());
        assert!(parse("TODAY RUN arch=x86_64 allocator=TLSF\ntoday bench: done\n").is_err());
    }
}
