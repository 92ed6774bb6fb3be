//! Report sections and the report: the [`Section`] trait each measurement implements, the
//! [`Report`] that runs them and renders Markdown (terminal and `report.md`) and JSON
//! (`report.json`). Tables and their cells are in `table`, the SVG bar charts in `svg`,
//! the comparison with an earlier report in `compare` (its earlier report made section by
//! section beside this one in `alternate`), verdicts over `--repeat`'s runs in
//! `repeats`.

pub mod alternate;
pub mod compare;
pub mod repeats;
mod svg;
mod table;

pub use table::{Cell, Plot, Table, ratio_text};

use crate::measure::Estimate;
use indicatif::ProgressBar;
use serde::{Deserialize, Deserializer, Serialize};
use std::cell::RefCell;
use std::fmt::Write as _;

/// One report section: a named set of measurements that produces tables.
pub trait Section {
    /// Short name, used by `--only` and as the heading.
    fn name(&self) -> &'static str;
    /// How many progress steps [`Section::run`] will report (for the progress bar).
    fn planned_steps(&self, quick: bool) -> u64;
    /// Measures and returns the tables.
    fn run(&self, ctx: &SectionContext) -> Vec<Table>;
}

/// What a section gets to run with.
pub struct SectionContext {
    /// The progress bar: one `inc(1)` per planned step.
    pub progress: ProgressBar,
    /// Smaller regions and fewer runs, for a fast look.
    pub quick: bool,
    /// The headline ratios recorded so far (see [`SectionContext::headline`]).
    pub headlines: RefCell<Vec<Headline>>,
}

impl SectionContext {
    /// Marks one step done, naming the next.
    pub fn step(&self, what: impl Into<String>) {
        self.progress.set_message(what.into());
        self.progress.inc(1);
    }

    /// Records one of the report's headline ratios: the figures `--repeat` compares between
    /// runs and the report lists at its top.
    pub fn headline(&self, name: impl Into<String>, ratio: Estimate) {
        self.headlines.borrow_mut().push(Headline {
            name: name.into(),
            ratio,
        });
    }
}

/// A headline ratio: what a reader would quote from the report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Headline {
    /// What it compares, in words.
    pub name: String,
    /// The ratio, median and 95% interval.
    pub ratio: Estimate,
}

/// The mailing-list threads the published figures come from, named in words.
pub mod thread {
    /// The folio_zero_user() batching patch (Linux 2026).
    pub const FOLIO_ZERO_USER: &str =
        "the folio_zero_user() patch clearing contiguous page ranges in preemption-bounded batches";
    /// The folio_zero_user() patch, for column headings.
    pub const FOLIO_ZERO_USER_SHORT: &str = "folio_zero_user() patch";
    /// The 2018 RFC for streaming stores on 1 GiB pages.
    pub const MOVNTI_1G: &str = "the 2018 RFC clearing 1 GiB pages with movnti streaming stores";
    /// arm64's test_and_clear_young_ptes() patch (Linux 2026).
    pub const YOUNG_PTES: &str =
        "the arm64 test_and_clear_young_ptes() patch (batched, contpte-aware young clearing)";
    /// The test_and_clear_young_ptes() patch, for column headings.
    pub const YOUNG_PTES_SHORT: &str = "test_and_clear_young_ptes() patch";
    /// The free_contig_range() batching patch (Linux 2026).
    pub const FREE_CONTIG_RANGE: &str =
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        "the unsafe { free_contig_range() } patch freeing runs as naturally aligned power-of-two chunks";
    /// The free_contig_range() patch, for column headings.
    // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
    pub const FREE_CONTIG_RANGE_SHORT: &str = "unsafe { free_contig_range() } patch";
}

/// Where and from what a report was made: printed at its top.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// When it finished, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    /// The commit measured (`git rev-parse HEAD`), marked when the tree had changes.
    pub commit: String,
    /// `rustc -V` of the compiler that built the report.
    pub toolchain: String,
    /// The CPU's full brand string.
    pub cpu: String,
    /// The CPU the measuring thread was pinned to (none if the kernel refused).
    pub pinned_cpu: Option<usize>,
    /// The report's arguments.
    pub arguments: String,
}

/// A whole report: every section's tables, with when and where it ran. It reads back from
/// its `report.json` (`report layouts` merges several).
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    /// Where and from what it was made.
    pub header: Header,
    /// Whether `--quick` shrank the workloads.
    pub quick: bool,
    /// The headline ratios of each run (one list per `--repeat`); the tables are the last
    /// run's.
    pub runs: Vec<Vec<Headline>>,
    /// Whether the runs are one each of the report program linked in as many layouts
    /// (`report layouts`), not `--repeat`'s runs of one program.
    #[serde(default)]
    pub layouts: bool,
    /// Sections in order: (name, tables).
    pub sections: Vec<(String, Vec<Table>)>,
}

/// A number of a `report.json`, where JSON's `null` is what a NaN was written as.
///
/// # Errors
/// Neither a number nor `null`.
pub fn float_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A headline ratio may differ by less than this between two runs (in percent).
pub const REPEAT_TOLERANCE_PCT: f64 = 10.0;

impl Report {
    /// The whole report as Markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let h = &self.header;
        let mut s = String::from("# Report\n\n");
        let _ = write!(
            s,
            "| | |\n|---|---|\n| date | {} |\n| commit | {} |\n| toolchain | {} |\n\
             | CPU | {} |\n| measuring thread pinned to | {} |\n| arguments | {} |\n\n",
            h.date,
            h.commit,
            h.toolchain,
            h.cpu,
            h.pinned_cpu
                .map_or_else(|| "not pinned".into(), |c| format!("CPU {c}")),
            if h.arguments.is_empty() {
                "(none)"
            } else {
                &h.arguments
            },
        );
        s.push_str(READING);
        if self.quick {
            s.push_str(
                "\n**--quick**: small workloads and few samples; do not quote these figures.\n",
            );
        }
        s.push('\n');
        s.push_str(&self.headline_table().markdown(false));
        for (name, tables) in &self.sections {
            let _ = write!(s, "\n## {name}\n\n");
            for t in tables {
                s.push_str(&t.markdown(true));
                s.push('\n');
            }
        }
        s
    }

    /// The largest difference, in percent, between a later run's median of the headline
    /// `name` and the first run's; NaN when a run lacks it.
    #[must_use]
    pub fn repeat_difference(&self, name: &str) -> f64 {
        let median = |run: &Vec<Headline>| {
            run.iter()
                .find(|h| h.name == name)
                .map_or(f64::NAN, |h| h.ratio.median)
        };
        let Some(first) = self.runs.first().map(median) else {
            return f64::NAN;
        };
        self.runs[1..]
            .iter()
            .map(|r| (median(r) / first - 1.0).abs() * 100.0)
            .fold(
                0.0,
                |worst, d| if d.is_nan() { f64::NAN } else { worst.max(d) },
            )
    }

    /// The headlines whose figure moved by [`REPEAT_TOLERANCE_PCT`] or more between runs,
    /// with the difference.
    #[must_use]
    pub fn unstable_headlines(&self) -> Vec<(String, f64)> {
        self.runs
            .last()
            .into_iter()
            .flatten()
            .map(|h| (h.name.clone(), self.repeat_difference(&h.name)))
            .filter(|(_, d)| d.is_nan() || *d >= REPEAT_TOLERANCE_PCT)
            .collect()
    }

    /// Marks each goal verdict of this report's tables that an earlier run's `earlier`
    /// sections gave otherwise ([`repeats::mark_varying_verdicts`], the runs named as
    /// [`Report::layouts`] says); how many varied.
    pub fn mark_varying_verdicts(&mut self, earlier: &[Vec<repeats::SectionTables>]) -> usize {
        repeats::mark_varying_verdicts(&mut self.sections, earlier, self.layouts)
    }

    /// The headline ratios of the last run and, with several runs, how far each run's figure
    /// is from the first run's.
    #[must_use]
    pub fn headline_table(&self) -> Table {
        let repeats = self.runs.len();
        let mut columns = vec!["headline ratio".to_string()];
        if repeats > 1 {
            columns.extend((1..=repeats).map(|r| format!("run {r}")));
            columns.push("largest difference to run 1".into());
            columns.push(format!("within {REPEAT_TOLERANCE_PCT:.0}%"));
            columns.push("why not".into());
        } else {
            columns.push("median [95% interval]".into());
        }
        let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
        let mut t = Table::new("headlines", "Headline ratios", &cols);
        let Some(last) = self.runs.last() else {
            return t;
        };
        for h in last {
            let mut row = vec![Cell::text(&h.name)];
            if repeats > 1 {
                let figures: Vec<Option<Estimate>> = self
                    .runs
                    .iter()
                    .map(|r| r.iter().find(|o| o.name == h.name).map(|o| o.ratio))
                    .collect();
                row.extend(
                    figures
                        .iter()
                        .map(|f| f.map_or_else(|| Cell::text("-"), |e| Cell::text(ratio_text(e)))),
                );
                let diff = self.repeat_difference(&h.name);
                row.push(Cell::num(diff, 1, "%"));
                let stable = diff < REPEAT_TOLERANCE_PCT;
                row.push(Cell::text(if stable { "yes" } else { "NO" }));
                row.push(Cell::text(if stable {
                    String::new()
                } else {
                    why_unstable(&figures, self.layouts)
                }));
            } else {
                row.push(Cell::text(ratio_text(h.ratio)));
            }
            t.row(row);
        }
        t.note(
            "The figures a reader would quote, each from the section named in it. A ratio \
             above 1 means the first-named path is faster (or, for instruction counts, \
             executes fewer instructions).",
        );
        if repeats > 1 && self.layouts {
            t.note(format!(
                "`cargo xtask report --layouts {repeats}`: run k is the report program linked \
                 in layout k (its functions in another order), one run each, one after the \
                 other; the tables below are the last layout's. A difference of \
                 {REPEAT_TOLERANCE_PCT:.0}% or more means that figure depends on where the \
                 code lies as much as on what it does, or did not reproduce on this machine \
                 between the runs (see the section's notes for why it is noisy)."
            ));
        } else if repeats > 1 {
            t.note(format!(
                "`--repeat {repeats}`: every section ran {repeats} times in this one \
                 invocation; the tables below are the last run's. A difference of \
                 {REPEAT_TOLERANCE_PCT:.0}% or more means that figure did not reproduce on \
                 this machine during this run (see the section's notes for why it is noisy)."
            ));
        }
        t
    }
}

/// Why a headline ratio moved between runs, from its intervals: overlapping intervals mean the
/// figure's own noise is as wide as the difference; disjoint ones that the machine changed
/// between the runs, or, over `layouts`, that where the code lies moves the figure.
fn why_unstable(figures: &[Option<Estimate>], layouts: bool) -> String {
    let known: Vec<Estimate> = figures.iter().flatten().copied().collect();
    if known.len() < figures.len() {
        return "missing from a run (see that run's section output)".into();
    }
    if known.iter().all(|e| e.lo == e.hi) {
        return "an exact count that changed: the measured binary or its input changed".into();
    }
    let overlap = known.iter().map(|e| e.lo).fold(f64::MIN, f64::max)
        <= known.iter().map(|e| e.hi).fold(f64::MAX, f64::min);
    if layouts && !overlap {
        return "the layouts' 95% intervals do not overlap: where the code lies moves this \
                figure, or the machine changed between the runs (a shared host)"
            .into();
    }
    if overlap {
        "the runs' 95% intervals overlap: the difference is within this figure's own noise \
         (a wide interval: see the section's note)"
            .into()
    } else {
        "the runs' 95% intervals do not overlap: the machine changed between the runs (a \
         shared host: other tenants' memory bandwidth and CPU time)"
            .into()
    }
}

/// How to read the figures: printed under the header.
const READING: &str = "\
How to read it. Every timed figure is measured here, in one run, with the paths it compares \
run once per round in a shuffled order on the same memory (so drift on a shared host hits \
them alike), the measuring thread pinned to one CPU, and each cell sampled for a time budget \
(at least 10 rounds) rather than a fixed count. A figure is the **median** of its samples; \
`±N%` is the larger distance from the median to an end of its **95% confidence interval** \
(distribution-free, from order statistics), whose ends are in `report.json` and drawn as \
error bars. A ratio `1.23x [1.18, 1.30]` is the median of the per-round ratios with its \
interval. Goals are judged on the interval: **met** when all of it meets the target, **not \
met** when none of it does, **inconclusive** when it straddles the target. Instruction \
counts come from `valgrind --tool=callgrind` and are exact (the same on every run), so they \
judge CPU-bound goals where wall time is noise. The benchmarks are built as one codegen \
unit, so that the peers compiled into them are compiled the same whatever buddy-sim's code \
is. Figures from the mailing-list threads are quoted as published, on their authors' \
machines.\n";
