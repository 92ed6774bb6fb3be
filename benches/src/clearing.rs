//! The "clearing" section: seed 000's and 001's experiments on this machine.
//!
//! 1. Folios of 2 MiB and 1 GiB: page-at-a-time (the reference) vs `folio_zero_user` with the
//!    32 MiB batch (preempt none) vs one whole extent (preempt full).
//! 2. The Genoa sweep: 1 GiB extents with 8, 32, 64 MiB and whole-extent batches.
//! 3. Every strategy, `ptr::write_bytes` and the policy at extent sizes from 4 KiB to 1 GiB,
//!    the peak store bandwidth, and whether the policy's streaming threshold is right here.
//! 4. The worst single-batch time per batch size: the preemption latency a batch implies.

use crate::measure::{Region, Samples, gbps, mem_available, size_name};
use crate::{Cell, Plot, Section, SectionContext, Table};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};
use zero_core::{
    ClearConfig, CountingResched, PageSize, Policy, PreemptModel, Resched, Strategy,
    clear_contig_pages, folio_zero_user, reference,
};

/// The clearing section.
pub struct Clearing;

/// One candidate of the strategy table: clears the extent it is given.
type Candidate = crate::measure::Candidate<'static, [u8]>;

const PAGE: PageSize = PageSize::Size4KiB;
const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;
/// Extent sizes of table 3.
const SIZES: [usize; 7] = [4096, 2 * MIB, 8 * MIB, 32 * MIB, 64 * MIB, 256 * MIB, GIB];
/// Each table-3 sample clears at least this much (small extents repeat).
const SAMPLE_VOLUME: usize = 256 * MIB;
/// Batch sizes of table 4.
const LATENCY_BATCHES: [usize; 6] = [4096, 2 * MIB, 8 * MIB, 32 * MIB, 64 * MIB, GIB];

struct Plan {
    region: usize,
    runs: usize,
    note: String,
}

fn plan(quick: bool) -> Plan {
    let wanted = if quick { GIB } else { 4 * GIB };
    let avail = mem_available().map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX));
    // Leave room for the rest of the machine: use at most a third of what is available.
    let region = wanted.min((avail / 3) / GIB * GIB).max(GIB);
    let runs = if quick { 3 } else { 5 };
    let mut note = format!(
        "Region: {} pre-faulted anonymous memory (THP advised), 4 KiB base pages; each figure \
         is the median of {runs} runs after a warm-up, with the spread (slowest - fastest) / \
         median in parentheses.",
        size_name(region)
    );
    if region < wanted {
        note.push_str(&format!(
            " Memory was short: {} instead of {}.",
            size_name(region),
            size_name(wanted)
        ));
    }
    if quick {
        note.push_str(" --quick: smaller region and fewer runs; do not quote these.");
    }
    Plan { region, runs, note }
}

/// A `cond_resched` that records the time between calls: the length of each batch.
struct LatencyResched {
    last: Option<Instant>,
    batches: Vec<Duration>,
}

impl LatencyResched {
    fn new() -> Self {
        Self {
            last: None,
            batches: Vec::new(),
        }
    }

    /// Closes the batch in progress (call after each clear returns).
    fn finish(&mut self) {
        if let Some(t) = self.last.take() {
            self.batches.push(t.elapsed());
        }
    }
}

impl Resched for LatencyResched {
    fn cond_resched(&mut self) {
        let now = Instant::now();
        if let Some(t) = self.last.replace(now) {
            self.batches.push(now - t);
        }
    }
}

fn gb_cell(s: &Samples, bytes: usize) -> Cell {
    let v = s.median_gbps(bytes);
    Cell::Num {
        value: v,
        text: format!("{v:.1} (±{:.0}%)", s.spread_pct()),
    }
}

fn temporal() -> Strategy {
    Policy::detect().temporal()
}

fn config(preempt: PreemptModel, batch: Option<usize>) -> ClearConfig {
    let cfg = ClearConfig::new(PAGE, preempt).with_policy(Policy::fixed(temporal()));
    match batch.and_then(|b| NonZeroUsize::new(b / PAGE.bytes())) {
        Some(pages) => cfg.with_batch_pages(pages),
        None => cfg,
    }
}

/// Clears `region` as consecutive extents of `extent` bytes with `clear`.
fn pass(region: &mut [u8], extent: usize, mut clear: impl FnMut(&mut [u8])) {
    for e in region.chunks_exact_mut(extent) {
        clear(e);
    }
}

fn expect_ok(r: Result<(), zero_core::ZeroError>) {
    if let Err(e) = r {
        panic!("clearing failed on valid input: {e}");
    }
}

impl Section for Clearing {
    fn name(&self) -> &'static str {
        "clearing"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        (2 + 1 + SIZES.len() + LATENCY_BATCHES.len()) as u64
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let p = plan(ctx.quick);
        ctx.progress
            .set_message(format!("mapping {}", size_name(p.region)));
        let mut region = Region::new(p.region);
        let buf = region.as_mut_slice();
        let t1 = seed_table(ctx, &p, buf);
        let t2 = genoa_sweep(ctx, &p, buf);
        let (t3, t3b, threshold, strategy_goals) = strategies(ctx, &p, buf);
        let t4 = latency(ctx, &p, buf);
        let goals = goals(&t1, strategy_goals);
        vec![t1.table, t2, t3, t3b, threshold, t4, goals]
    }
}

struct SeedTable {
    table: Table,
    /// Whole extent / page-at-a-time at 1 GiB.
    whole_ratio_1g: f64,
}

fn seed_table(ctx: &SectionContext, p: &Plan, buf: &mut [u8]) -> SeedTable {
    let mut t = Table::new(
        "clearing-seed000",
        "Seed 000: page-at-a-time vs batched vs whole-extent clearing of folios (GB/s)",
        &[
            "folio",
            "page-at-a-time",
            "batch 32 MiB, preempt none",
            "ratio",
            "seed 000",
            "whole extent, preempt full",
            "ratio",
            "seed 000",
        ],
    );
    let strategy = temporal();
    let mut whole_ratio_1g = f64::NAN;
    // Seed 000 (Milan): 2 MiB +31.8% with any model; 1 GiB +5.2% with none (8 MiB batch),
    // +144.3% with full.
    for (folio, seed_batched, seed_whole) in [
        (2 * MIB, "1.32x", "1.32x"),
        (GIB, "1.05x (8 MiB batch)", "2.44x"),
    ] {
        let bytes = buf.len() / folio * folio;
        let region = &mut buf[..bytes];
        ctx.step(format!(
            "seed 000: {} folios, three paths interleaved",
            size_name(folio)
        ));
        let folio_zero = |preempt| -> Candidate {
            let cfg = config(preempt, None);
            Box::new(move |region: &mut [u8]| {
                pass(region, folio, |f| {
                    expect_ok(folio_zero_user(f, 0, &cfg, &mut CountingResched::new()));
                });
            })
        };
        let mut candidates: Vec<Candidate> = vec![
            Box::new(move |region: &mut [u8]| {
                pass(region, folio, |f| {
                    expect_ok(reference::clear_pages_one_by_one(
                        f,
                        PAGE,
                        strategy,
                        &mut CountingResched::new(),
                    ));
                });
            }),
            folio_zero(PreemptModel::None),
            folio_zero(PreemptModel::Full),
        ];
        let [per_page, batched, whole]: [Samples; 3] =
            match Samples::interleaved(p.runs, region, &mut candidates).try_into() {
                Ok(three) => three,
                Err(_) => unreachable!("three candidates give three sample sets"),
            };
        let base = per_page.median_gbps(bytes);
        let whole_ratio = whole.median_gbps(bytes) / base;
        if folio == GIB {
            whole_ratio_1g = whole_ratio;
        }
        t.row(vec![
            Cell::text(size_name(folio)),
            gb_cell(&per_page, bytes),
            gb_cell(&batched, bytes),
            Cell::ratio(batched.median_gbps(bytes) / base),
            Cell::text(seed_batched),
            gb_cell(&whole, bytes),
            Cell::ratio(whole_ratio),
            Cell::text(seed_whole),
        ]);
    }
    t.note(&p.note);
    t.note(format!(
        "All three columns clear with `{}` (the temporal strategy the policy picks here) so \
         that only batching differs: page-at-a-time is `reference::clear_pages_one_by_one` (one \
         4 KiB call and one cond_resched per page); the others are `folio_zero_user` with the \
         fault at page 0. The three paths are measured round-robin. Seed 000 (AMD Milan): 2 MiB 12.92 -> 17.03 GB/s (+31.8%); 1 GiB \
         17.14 -> 18.04 (+5.2%, 8 MiB batch) and 17.26 -> 42.17 (+144.3%, whole extent).",
        strategy.name()
    ));
    t.plot = Some(Plot {
        y_label: "GB/s (median)".into(),
        series: vec![1, 2, 5],
        log_y: false,
    });
    SeedTable {
        table: t,
        whole_ratio_1g,
    }
}

fn genoa_sweep(ctx: &SectionContext, p: &Plan, buf: &mut [u8]) -> Table {
    let mut t = Table::new(
        "clearing-batch-sweep",
        "Seed 000 (Genoa sweep): 1 GiB extents, preempt none, by batch size (GB/s)",
        &[
            "batch",
            "GB/s",
            "ratio to 8 MiB",
            "seed 000 Genoa GB/s",
            "seed ratio",
        ],
    );
    let bytes = buf.len() / GIB * GIB;
    let region = &mut buf[..bytes];
    let batches = [
        (8 * MIB, 26.88),
        (32 * MIB, 38.69),
        (64 * MIB, 46.91),
        (GIB, 58.68),
    ];
    ctx.step("batch sweep: four batch sizes, interleaved");
    let mut candidates: Vec<Candidate> = batches
        .iter()
        .map(|&(batch, _)| -> Candidate {
            let cfg = config(PreemptModel::None, Some(batch));
            Box::new(move |region: &mut [u8]| {
                pass(region, GIB, |e| {
                    expect_ok(clear_contig_pages(e, &cfg, &mut CountingResched::new()));
                });
            })
        })
        .collect();
    let samples = Samples::interleaved(p.runs, region, &mut candidates);
    let base = samples.first().map_or(f64::NAN, |s| s.median_gbps(bytes));
    for (&(batch, seed), s) in batches.iter().zip(&samples) {
        let v = s.median_gbps(bytes);
        let name = if batch == GIB {
            "1 GiB (whole)".into()
        } else {
            size_name(batch)
        };
        t.row(vec![
            Cell::text(name),
            gb_cell(s, bytes),
            Cell::ratio(v / base),
            Cell::num(seed, 2, ""),
            Cell::ratio(seed / 26.88),
        ]);
    }
    t.note(format!(
        "`clear_contig_pages` with `{}` and the batch overridden; cond_resched before each batch.",
        temporal().name()
    ));
    t.plot = Some(Plot {
        y_label: "GB/s (median)".into(),
        series: vec![1, 3],
        log_y: false,
    });
    t
}

/// Median GB/s at one extent size: `write_bytes`, each available strategy (in
/// `Strategy::available()` order) and the policy.
struct SizeMedians {
    size: usize,
    write_bytes: f64,
    strategies: Vec<f64>,
    policy: f64,
}

impl SizeMedians {
    /// The best median among the streaming (`true`) or temporal (`false`) strategies.
    fn best(&self, available: &[Strategy], streaming: bool) -> f64 {
        available
            .iter()
            .zip(&self.strategies)
            .filter(|(s, _)| s.is_non_temporal() == streaming)
            .map(|(_, v)| *v)
            .fold(0.0, f64::max)
    }
}

/// Figures the goals table needs from table 3.
struct StrategyGoals {
    /// Worst policy / best-strategy ratio over all sizes, and the size it occurs at.
    worst_policy: (f64, usize),
    /// Best streaming strategy / write_bytes at 256 MiB and at 1 GiB.
    streaming_vs_memset: [f64; 2],
}

fn strategies(
    ctx: &SectionContext,
    p: &Plan,
    buf: &mut [u8],
) -> (Table, Table, Table, StrategyGoals) {
    let available: Vec<Strategy> = Strategy::available().collect();
    let mut columns = vec!["extent".to_string(), "write_bytes".to_string()];
    columns.extend(available.iter().map(|s| s.name().to_string()));
    columns.extend([
        "policy".into(),
        "policy picks".into(),
        "best strategy".into(),
        "policy ÷ best".into(),
    ]);
    let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "clearing-strategies",
        "Every strategy by extent size (GB/s, median)",
        &cols,
    );
    let policy = Policy::detect();
    let whole = ClearConfig::new(PAGE, PreemptModel::Full);
    let mut medians: Vec<SizeMedians> = Vec::new();
    let mut peak = 0.0f64;
    let len = buf.len();
    for size in SIZES.into_iter().filter(|&s| s <= len) {
        let reps = (SAMPLE_VOLUME / size).max(1);
        let volume = reps * size;
        let extent = &mut buf[..size];
        ctx.step(format!(
            "strategies: {} candidates at {}, interleaved",
            available.len() + 2,
            size_name(size)
        ));
        // Candidates: write_bytes, each strategy, the policy; measured round-robin. Each
        // sample clears the extent `reps` times.
        let repeat = |mut clear: Candidate| -> Candidate {
            Box::new(move |e: &mut [u8]| {
                for _ in 0..reps {
                    clear(std::hint::black_box(&mut *e));
                }
            })
        };
        // SAFETY: write_bytes over exactly the borrowed slice.
        let mut candidates = vec![repeat(Box::new(|e: &mut [u8]| unsafe {
            std::ptr::write_bytes(e.as_mut_ptr(), 0, e.len());
        }))];
        for policy in available.iter().map(|&s| Policy::fixed(s)).chain([policy]) {
            let cfg = whole.with_policy(policy);
            candidates.push(repeat(Box::new(move |e: &mut [u8]| {
                expect_ok(clear_contig_pages(e, &cfg, &mut CountingResched::new()));
            })));
        }
        // One sample set per candidate: write_bytes, each strategy, the policy.
        let samples = Samples::interleaved(p.runs, extent, &mut candidates);
        let (wb, strategies, pol) = (
            &samples[0],
            &samples[1..=available.len()],
            &samples[available.len() + 1],
        );
        let mut per = Vec::new();
        let mut row = vec![Cell::text(size_name(size)), gb_cell(wb, volume)];
        for s in strategies {
            if size >= 256 * MIB {
                peak = peak.max(s.best_gbps(volume)).max(wb.best_gbps(volume));
            }
            per.push(s.median_gbps(volume));
            row.push(gb_cell(s, volume));
        }
        let (best_i, best) = per
            .iter()
            .copied()
            .enumerate()
            .fold((0, 0.0), |a, (i, v)| if v > a.1 { (i, v) } else { a });
        row.push(gb_cell(pol, volume));
        row.push(Cell::text(policy.choose(size, false).name()));
        row.push(Cell::text(available[best_i].name()));
        row.push(Cell::ratio(pol.median_gbps(volume) / best));
        t.row(row);
        medians.push(SizeMedians {
            size,
            write_bytes: wb.median_gbps(volume),
            strategies: per,
            policy: pol.median_gbps(volume),
        });
    }
    t.note(format!(
        "Each strategy clears one extent per call through `clear_contig_pages` (preempt full), \
         `portable` being the generic per-page `write_bytes` loop; `write_bytes` is \
         `core::ptr::write_bytes` (glibc memset) over the whole extent; `policy` is \
         `Policy::detect()`: temporal `{}`, streaming `{}` from {}. All candidates of a row are \
         measured round-robin, so drift on a shared host hits them alike. Extents smaller \
         than {} are cleared repeatedly (same buffer, so they stay cache-resident) until each sample \
         clears {}. Peak store bandwidth (best single sample at >= 256 MiB): {peak:.1} GB/s.",
        policy.temporal().name(),
        policy.streaming().map_or("none", Strategy::name),
        size_name(policy.streaming_threshold()),
        size_name(SAMPLE_VOLUME),
        size_name(SAMPLE_VOLUME),
    ));
    t.plot = Some(Plot {
        y_label: "GB/s (median)".into(),
        series: (1..2 + available.len()).collect(),
        log_y: true,
    });

    // Versus write_bytes and the peak.
    let mut vs = Table::new(
        "clearing-vs-memset",
        "Each strategy vs write_bytes (glibc memset) and vs the measured peak store bandwidth",
        &[
            "strategy",
            "÷ write_bytes at 256 MiB",
            "÷ write_bytes at 1 GiB",
            "% of peak at 1 GiB",
        ],
    );
    let at = |size: usize| medians.iter().find(|m| m.size == size);
    let mut names: Vec<&str> = available.iter().map(|s| s.name()).collect();
    names.push("policy");
    for (i, name) in names.iter().enumerate() {
        let value = |m: &SizeMedians| {
            if i < available.len() {
                m.strategies[i]
            } else {
                m.policy
            }
        };
        let ratio = |size| at(size).map_or(f64::NAN, |m| value(m) / m.write_bytes);
        let pct = at(GIB).map_or(f64::NAN, |m| value(m) / peak * 100.0);
        vs.row(vec![
            Cell::text(*name),
            Cell::ratio(ratio(256 * MIB)),
            Cell::ratio(ratio(GIB)),
            Cell::num(pct, 0, "%"),
        ]);
    }
    vs.note(format!("Medians from the table above; peak = {peak:.1} GB/s. Seed 001 (Broadwell, 1 GiB pages): movnti 34 s vs rep stosb 134 s for 512 GiB (3.9x)."));
    vs.plot = Some(Plot {
        y_label: "ratio to write_bytes".into(),
        series: vec![1, 2],
        log_y: false,
    });

    // Is the streaming threshold right here?
    let mut th = Table::new(
        "clearing-threshold",
        "Policy check: temporal vs streaming by extent size",
        &[
            "extent",
            "best temporal GB/s",
            "best streaming GB/s",
            "winner",
            "policy picks",
            "pick ÷ winner",
        ],
    );
    let mut streaming_vs_memset = [f64::NAN; 2];
    let mut worst_pick = (f64::INFINITY, 0);
    for m in &medians {
        let (tb, sb) = (m.best(&available, false), m.best(&available, true));
        let streams = policy.choose(m.size, false).is_non_temporal();
        let pick = if streams { sb } else { tb } / tb.max(sb);
        if pick < worst_pick.0 {
            worst_pick = (pick, m.size);
        }
        th.row(vec![
            Cell::text(size_name(m.size)),
            Cell::num(tb, 1, ""),
            Cell::num(sb, 1, ""),
            Cell::text(if sb > tb { "streaming" } else { "temporal" }),
            Cell::text(if streams { "streaming" } else { "temporal" }),
            Cell::ratio(pick),
        ]);
        if m.size == 256 * MIB {
            streaming_vs_memset[0] = sb / m.write_bytes;
        }
        if m.size == GIB {
            streaming_vs_memset[1] = sb / m.write_bytes;
        }
    }
    let (pick, at) = worst_pick;
    th.note(format!(
        "The default threshold is {} (reported LLC, capped at {}). It is right for this \
         machine when, at every size, the kind it picks is within 5% of the faster kind: \
         worst here {pick:.2}x at {}, so it is {}.",
        size_name(policy.streaming_threshold()),
        size_name(zero_core::MAX_DEFAULT_STREAMING_THRESHOLD),
        size_name(at.max(1)),
        if pick >= 0.95 { "right" } else { "NOT right" },
    ));
    th.plot = Some(Plot {
        y_label: "GB/s (median)".into(),
        series: vec![1, 2],
        log_y: true,
    });

    let worst_policy = medians
        .iter()
        .map(|m| {
            (
                m.policy / m.strategies.iter().copied().fold(0.0, f64::max),
                m.size,
            )
        })
        .fold((f64::INFINITY, 0), |a, b| if b.0 < a.0 { b } else { a });
    (
        t,
        vs,
        th,
        StrategyGoals {
            worst_policy,
            streaming_vs_memset,
        },
    )
}

fn latency(ctx: &SectionContext, p: &Plan, buf: &mut [u8]) -> Table {
    let mut t = Table::new(
        "clearing-batch-latency",
        "Worst single batch per batch size (the preemption latency it implies)",
        &[
            "batch",
            "batches per GiB",
            "median batch µs",
            "worst batch µs",
            "GB/s overall",
        ],
    );
    let bytes = buf.len() / GIB * GIB;
    let region = &mut buf[..bytes];
    for batch in LATENCY_BATCHES {
        ctx.step(format!("batch latency: {}", size_name(batch)));
        let cfg = config(PreemptModel::None, Some(batch));
        let mut all = LatencyResched::new();
        let mut totals = Vec::new();
        for _ in 0..p.runs {
            let start = Instant::now();
            pass(region, GIB, |e| {
                expect_ok(clear_contig_pages(e, &cfg, &mut all));
                all.finish();
            });
            totals.push(start.elapsed());
        }
        let batches = Samples::from_durations(all.batches);
        let overall = gbps(bytes * p.runs, totals.iter().sum());
        t.row(vec![
            Cell::text(size_name(batch)),
            Cell::num((GIB / batch) as f64, 0, ""),
            Cell::num(batches.median().as_secs_f64() * 1e6, 1, ""),
            Cell::num(batches.worst().as_secs_f64() * 1e6, 1, ""),
            Cell::num(overall, 1, ""),
        ]);
    }
    t.note(format!(
        "`clear_contig_pages` with `{}` over 1 GiB extents, preempt none, batch overridden; the \
         time between consecutive cond_resched calls is one batch. Worst of {} passes over the \
         region. The kernel's 32 MiB batch was chosen for ~3 ms at 10 GB/s.",
        temporal().name(),
        p.runs
    ));
    t.plot = Some(Plot {
        y_label: "µs".into(),
        series: vec![2, 3],
        log_y: true,
    });
    t
}

fn goals(seed: &SeedTable, s: StrategyGoals) -> Table {
    let mut t = Table::new(
        "clearing-goals",
        "Clearing goals (issue 3), measured",
        &["goal", "measured", "met"],
    );
    let met = |ok: bool| Cell::text(if ok { "yes" } else { "NO" });
    let (worst, at) = s.worst_policy;
    t.row(vec![
        Cell::text("policy within 5% of the best strategy at every size"),
        Cell::text(format!("worst {worst:.2}x at {}", size_name(at.max(1)))),
        met(worst >= 0.95),
    ]);
    let [m256, m1g] = s.streaming_vs_memset;
    t.row(vec![
        Cell::text(">= 2x write_bytes at >= 256 MiB (streaming stores)"),
        Cell::text(format!("{m256:.2}x at 256 MiB, {m1g:.2}x at 1 GiB")),
        met(m256 >= 2.0 && m1g >= 2.0),
    ]);
    t.row(vec![
        Cell::text("whole extent >= 1.15x page-at-a-time at 1 GiB"),
        Cell::text(format!("{:.2}x", seed.whole_ratio_1g)),
        met(seed.whole_ratio_1g >= 1.15),
    ]);
    t.note("Goals are reported, never asserted in tests: these machines are shared and noisy.");
    t
}
