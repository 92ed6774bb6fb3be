//! The "scale" section: what a zone costs as it grows from 1 GiB to 1 TiB of 4 KiB frames:
//! the time until it can allocate, the time until every frame is initialized (one thread,
//! and every core at once), and the per-operation costs, which should not grow with it.

use crate::measure::{Estimate, Region, Verdict, allowed_cpus, pin_current_thread, round_order};
use crate::{Cell, Section, SectionContext, Table, must, order};
use buddy_sim::{BoxedZone, Frame, PerCpu, Pfn, Zone, ZoneConfig};
use std::time::{Duration, Instant};
use zero_core::Strategy;

/// The scale section.
pub struct Scale;

/// Zone sizes, in frames (1 GiB, 16 GiB, 256 GiB, 1 TiB of 4 KiB frames).
const SIZES: [u32; 4] = [18, 22, 26, 28];
/// Repetitions of each per-operation measurement (the median counts).
const REPS: usize = 7;
/// The goal for initialization, per frame.
const INIT_GOAL_NS: f64 = 2.0;
/// How much a per-operation cost may grow from the smallest zone to the largest and still
/// count as flat (the medians of runs on a shared machine move by this much on their own).
const FLAT_GOAL: f64 = 1.3;

fn ns_per(d: Duration, n: f64) -> f64 {
    d.as_secs_f64() * 1e9 / n
}

/// The median of `REPS` runs of `f`, in ns per each of its `ops` operations.
fn per_op(ops: u32, mut f: impl FnMut()) -> Estimate {
    f();
    Estimate::of((0..REPS).map(|_| {
        let t = Instant::now();
        f();
        ns_per(t.elapsed(), f64::from(ops))
    }))
}

/// Rounds of the initialization measurements at each size (medians reported, with their
/// 95% intervals).
const INIT_ROUNDS: usize = 6;

/// What one zone size measured.
struct Row {
    frames: u64,
    /// The share of the mapped metadata the host backs with huge pages, if known.
    huge_pages: Option<f64>,
    /// Ready to allocate, ms.
    ready: Estimate,
    full_fresh: Duration,
    /// All initialized on one thread, ns per frame.
    full_one: Estimate,
    /// All initialized on every core, ns per frame.
    full_all: Estimate,
    /// The metadata's bytes written with streaming stores on every core (ns per frame), and
    /// each round's every-core initialization against it, if this CPU has streaming stores.
    floor: Option<(Strategy, Estimate, Estimate)>,
    threads: usize,
    pair: Estimate,
    order10: Estimate,
    contig: Estimate,
    check_ns: f64,
}

fn fresh(frames: u64, cpus: usize) -> (BoxedZone, Duration) {
    let t = Instant::now();
    let z = BoxedZone::new_boxed(ZoneConfig::new(Pfn(0), frames).with_cpus(cpus))
        .unwrap_or_else(|e| panic!("zone: {e}"));
    (z, t.elapsed())
}

/// Frame metadata in pre-faulted memory, zeroed before the clock starts: what a kernel has
/// once its memory map is mapped.
struct MappedFrames(Region);

impl MappedFrames {
    fn new(frames: u64) -> Self {
        let bytes = usize::try_from(frames).unwrap_or(usize::MAX) * size_of::<Frame>();
        Self(Region::new(bytes))
    }

    /// The frames, all zero again, as before a zone's first use.
    fn zeroed(&mut self) -> &[Frame] {
        let bytes = self.0.as_mut_slice();
        bytes.fill(0);
        let n = bytes.len() / size_of::<Frame>();
        // SAFETY: the region is page-aligned (so aligned for a Frame), holds `n` frames'
        // bytes, all zero, which is a valid Frame (integer atomics only); the slice borrows
        // the region.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<Frame>(), n) }
    }

    /// The hardware floor of initialization: the metadata's bytes written with `strategy`
    /// (streaming stores), split over `threads` threads.
    fn stream_over(&mut self, strategy: Strategy, threads: usize) -> Duration {
        let bytes = self.0.as_mut_slice();
        let part = bytes
            .len()
            .div_ceil(threads)
            .next_multiple_of(strategy.granule().max(strategy.alignment()));
        let t = Instant::now();
        on_every_core(bytes.chunks_mut(part), |chunk| {
            if let Err(e) = strategy.clear(chunk) {
                panic!("{} over the metadata: {e}", strategy.name());
            }
        });
        t.elapsed()
    }
}

/// Runs `f` on every item of `items` at once, a thread each, the `i`-th thread pinned to the
/// `i`-th CPU this process may use (the measuring thread is pinned to one, and a thread
/// inherits its parent's affinity).
fn on_every_core<T: Send>(items: impl IntoIterator<Item = T>, f: impl Fn(T) + Sync) {
    let cpus = allowed_cpus();
    let f = &f;
    std::thread::scope(|s| {
        for (i, item) in items.into_iter().enumerate() {
            let cpu = cpus[i % cpus.len()];
            s.spawn(move || {
                pin_current_thread(cpu);
                f(item);
            });
        }
    });
}

/// A zone over pre-faulted zeroed metadata, all usable: the time until it can allocate.
fn mapped(frames: &[Frame], cpus: usize) -> (Zone<&[Frame], Vec<PerCpu>>, Duration) {
    let cfg = ZoneConfig::new(Pfn(0), frames.len() as u64).with_cpus(cpus);
    let t = Instant::now();
    let pcps = (0..cpus).map(|_| PerCpu::new()).collect();
    // SAFETY: MappedFrames zeroed every byte.
    let z = unsafe { Zone::new_empty_zeroed(cfg, frames, pcps) }
        .unwrap_or_else(|e| panic!("zone: {e}"));
    must(z.add_memory(cfg.start, cfg.nr_pages));
    (z, t.elapsed())
}

fn measure(ctx: &SectionContext, shift: u32) -> Row {
    let frames = 1u64 << shift;
    let threads = allowed_cpus().len().max(1);
    ctx.step(format!("scale: 2^{shift} frames, initialization"));
    // Fresh metadata from the allocator, one thread: page faults included.
    let (z, ready_fresh) = fresh(frames, 1);
    let t = Instant::now();
    z.init_deferred(u64::MAX);
    let full_fresh = ready_fresh + t.elapsed();
    drop(z);
    // Mapped metadata: one thread, every core in parallel, and the streaming floor, in turn
    // in each round (shuffled), so that other tenants' load on a shared host falls on all three
    // alike.
    let streaming =
        Strategy::available().find(|s| s.is_non_temporal() && !s.uses_vector_registers());
    let per_frame = |d: Duration| ns_per(d, frames as f64);
    let mut metadata = MappedFrames::new(frames);
    let (mut ready, mut one, mut all, mut floor) = (vec![], vec![], vec![], vec![]);
    for round in 0..INIT_ROUNDS {
        for which in round_order(round, 3) {
            match which {
                0 => {
                    let (z, ready_one) = mapped(metadata.zeroed(), 1);
                    let t = Instant::now();
                    z.init_deferred(u64::MAX);
                    one.push(per_frame(ready_one + t.elapsed()));
                    ready.push(ready_one.as_secs_f64() * 1e3);
                }
                1 => {
                    let (z, ready_all) = mapped(metadata.zeroed(), threads);
                    let t = Instant::now();
                    on_every_core(0..threads, |_| {
                        while z.init_deferred(buddy_sim::DEFERRED_CHUNK_PAGES) > 0 {}
                    });
                    all.push(per_frame(ready_all + t.elapsed()));
                }
                _ => {
                    if let Some(strategy) = streaming {
                        metadata.zeroed();
                        floor.push(per_frame(metadata.stream_over(strategy, threads)));
                    }
                }
            }
        }
    }
    let floor = streaming.map(|s| {
        let to_floor = all.iter().zip(&floor).map(|(a, f)| a / f);
        (
            s,
            Estimate::of(floor.iter().copied()),
            Estimate::of(to_floor),
        )
    });

    ctx.step(format!("scale: 2^{shift} frames, operations"));
    // On the mapped metadata, as a kernel's memory map is (mapped with huge pages where the
    // host gives them): the allocator's memory behind `fresh` is not advised, so 4 KiB pages
    // of it would put a TLB miss on every block head the operations touch.
    let huge_pages = metadata.0.huge_page_share();
    let (z, _) = mapped(metadata.zeroed(), 1);
    z.init_deferred(u64::MAX);
    let (o0, o9, o10) = (order(0), order(9), order(10));
    let pair = per_op(10_000, || {
        for _ in 0..10_000 {
            let p = must(z.alloc_pages(0, o0));
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            must(unsafe { z.free_pages(0, p, o0) });
        }
    });
    let order10 = per_op(1_000, || {
        for _ in 0..1_000 {
            let p = must(z.alloc_pages(0, o10));
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            must(unsafe { z.free_pages(0, p, o10) });
        }
    });
    let contig = per_op(200 * 512, || {
        for _ in 0..200 {
            let p = must(z.alloc_pages(0, o9));
            must(z.split_page(p, o9));
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            must(unsafe { z.free_contig_range(0, p, 512) });
        }
    });
    let t = Instant::now();
    if let Err(e) = z.check() {
        panic!("check on a quiescent zone: {e}");
    }
    let check_ns = ns_per(t.elapsed(), frames as f64);
    Row {
        frames,
        huge_pages,
        ready: Estimate::of(ready),
        full_fresh,
        full_one: Estimate::of(one),
        full_all: Estimate::of(all),
        floor,
        threads,
        pair,
        order10,
        contig,
        check_ns,
    }
}

impl Section for Scale {
    fn name(&self) -> &'static str {
        "scale"
    }

    fn planned_steps(&self, quick: bool) -> u64 {
        2 * sizes(quick).len() as u64
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let rows: Vec<Row> = sizes(ctx.quick).iter().map(|&s| measure(ctx, s)).collect();
        vec![costs_table(&rows), goals_table(&rows)]
    }
}

/// Initialization and per-operation costs at every zone size.
fn costs_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "scale",
        "A zone from 1 GiB to 1 TiB: initialization and per-operation costs",
        &[
            "frames",
            "metadata",
            "mapped metadata in huge pages",
            "ready to allocate ms",
            "all initialized, 1 thread: ns per frame",
            "all initialized, every core: ns per frame",
            "floor: streaming stores, every core: ns per frame",
            "every core / floor",
            "fresh metadata, 1 thread: ns per frame",
            "order-0 alloc + free ns",
            "order-10 alloc + free ns",
            "free_contig_range ns per page",
            "check() ns per frame",
        ],
    );
    for r in rows {
        t.row(vec![
            Cell::text(format!("2^{}", r.frames.trailing_zeros())),
            Cell::text(crate::measure::size_name(
                (r.frames as usize).saturating_mul(size_of::<Frame>()),
            )),
            r.huge_pages
                .map_or(Cell::text("unknown"), |h| Cell::num(h * 100.0, 0, "%")),
            Cell::estimate(r.ready, 1, ""),
            Cell::estimate(r.full_one, 2, ""),
            Cell::estimate(r.full_all, 2, ""),
            r.floor
                .map_or(Cell::text("n/a"), |(_, f, _)| Cell::estimate(f, 2, "")),
            r.floor.map_or(Cell::text("n/a"), |(_, _, ratio)| {
                Cell::estimate(ratio, 2, "x")
            }),
            Cell::num(ns_per(r.full_fresh, r.frames as f64), 2, ""),
            Cell::estimate(r.pair, 1, ""),
            Cell::estimate(r.order10, 1, ""),
            Cell::estimate(r.contig, 2, ""),
            Cell::num(r.check_ns, 2, ""),
        ]);
    }
    let threads = rows.first().map_or(1, |r| r.threads);
    t.note(format!(
        "Each size a fresh zone over 24 bytes of metadata per frame, zeroed and mapped \
         before the clock starts, as a kernel's memory map is (`Zone::new_empty_zeroed`, \
         which does not write it). Ready to allocate: that and `add_memory` of every \
         frame, which initializes the first {} frames and defers the rest. All \
         initialized: that plus `init_deferred` until none is left, on one thread, or on \
         {threads} threads at once (each taking {}-frame chunks). Floor: the same \
         metadata's bytes, pre-faulted the same way, written with {} on {threads} threads \
         at once: the memory bandwidth initialization is bounded by (it writes every byte \
         of the metadata, with streaming stores on x86_64). Fresh metadata: \
         `BoxedZone::new_boxed` (the allocator's zeroing path) initialized on one thread, \
         the first-touch page faults of its metadata included (expensive on a VM whose \
         guest page faults are emulated); the global allocator's memory is not advised for \
         huge pages, so under THP's `madvise` mode it is 4 KiB pages. Operations: median of \
         {REPS} runs (10 000 order-0 pairs, 1 000 order-10 pairs, 200 order-9 allocations \
         split and freed with free_contig_range) on a fully initialized zone over the mapped \
         metadata (huge pages advised, as a kernel maps its memory map with 2 MiB or 1 GiB \
         pages; the huge-page column is the share the host gave: `AnonHugePages` in \
         /proc/self/smaps); check(): one run on it. Ready to allocate, all \
         initialized and floor: medians of {INIT_ROUNDS} rounds with their 95% intervals, \
         each round running the three in a shuffled order over the same metadata, zeroed \
         again before each; every core / floor: the median of the rounds' ratios.",
        buddy_sim::EAGER_PAGES,
        buddy_sim::DEFERRED_CHUNK_PAGES,
        rows.iter()
            .find_map(|r| r.floor)
            .map_or("streaming stores (none on this CPU)", |(s, _, _)| s.name()),
    ));
    t
}

/// The scale goals: a 1 TiB zone ready and initialized in time, per-operation costs flat.
fn goals_table(rows: &[Row]) -> Table {
    let threads = rows.first().map_or(1, |r| r.threads);
    let mut goals = Table::new(
        "scale-goals",
        "Scale goals, measured",
        &["goal", "measured", "verdict"],
    );
    if let Some(big) = rows.iter().find(|r| r.frames == 1 << 28) {
        goals.row(vec![
            Cell::text("a 1 TiB zone (2^28 frames) ready to allocate in <= 0.5 s on one core"),
            Cell::text(format!(
                "{:.1} ms [{:.1}, {:.1}]",
                big.ready.median, big.ready.lo, big.ready.hi
            )),
            Cell::verdict(big.ready.judge(500.0, false)),
        ]);
        goals.row(vec![
            Cell::text(format!(
                "1 TiB fully initialized at <= {INIT_GOAL_NS} ns per frame (every core)"
            )),
            Cell::text(format!(
                "{:.2} ns per frame [{:.2}, {:.2}] on {threads} threads ({:.2} on one){}",
                big.full_all.median,
                big.full_all.lo,
                big.full_all.hi,
                big.full_one.median,
                big.floor.map_or(String::new(), |(s, f, ratio)| format!(
                    "; the floor, {} over the metadata on {threads} threads: {:.2} \
                     ({:.2}x of it)",
                    s.name(),
                    f.median,
                    ratio.median
                ))
            )),
            Cell::verdict(big.full_all.judge(INIT_GOAL_NS, false)),
        ]);
    }
    if let (Some(small), Some(big)) = (rows.first(), rows.last()) {
        let growth = [
            big.pair.median / small.pair.median,
            big.order10.median / small.order10.median,
            big.contig.median / small.contig.median,
        ];
        let flat = growth.iter().all(|&g| g <= FLAT_GOAL);
        goals.row(vec![
            Cell::text(format!(
                "per-operation costs flat in zone size: largest zone's median within \
                 {FLAT_GOAL}x the smallest's"
            )),
            Cell::text(format!(
                "order-0 pair {:.2}x, order-10 pair {:.2}x, free_contig_range {:.2}x",
                growth[0], growth[1], growth[2]
            )),
            Cell::verdict(Verdict::met_if(flat)),
        ]);
    }
    goals.note("Goals are reported, never asserted in tests: these machines are shared.");
    goals
}

/// The sizes measured: up to 1 TiB, or up to 16 GiB with `--quick`.
fn sizes(quick: bool) -> &'static [u32] {
    if quick { &SIZES[..2] } else { &SIZES }
}
