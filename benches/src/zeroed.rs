//! The "zeroed allocation" section: what buddy-sim's `alloc_zeroed` costs with a full pool of
//! known-zero blocks and with an empty one, beside a plain allocation and beside allocating
//! and clearing by hand (what an embedder did before); how fast background zeroing
//! (`zero_some`) refills the pool; and how much of a stream of zeroed allocations (page
//! faults) the pool absorbs while another core zeroes in the background.
//!
//! Every zone here is buddy-sim's over an anonymous mapping that stands for physical memory
//! (pre-faulted, THP advised), MAX_ORDER 18 so that 1 GiB blocks exist, its frame metadata
//! in huge pages as a kernel's frame table is; clearing goes through zero-core's detected
//! policy.

use crate::count::{self, Workload as Counted};
use crate::frame_table::zone_in_huge_pages;
use crate::measure::{
    Budget, Estimate, Region, Samples, allowed_cpus, pin_current_thread, round_order,
};
use crate::report::ratio_text;
use crate::{Cell, Plot, Section, SectionContext, Table, must, order};
use buddy_sim::zero_core::{NoResched, clear_contig_pages};
use buddy_sim::{BoxedZone, FrameClearer, OffsetMap, Order, Pfn, ZoneConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The zeroed allocation section.
pub struct ZeroedAllocation;

const PAGE: usize = 4096;
const GIB: usize = 1 << 30;

/// Block sizes measured: order, name, blocks allocated per timed batch.
const SIZES: [(u8, &str, usize); 3] = [(0, "4 KiB", 64), (9, "2 MiB", 16), (18, "1 GiB", 1)];

/// A zone over its own memory and the clearer that reaches it.
struct Pool {
    zone: BoxedZone,
    clearer: FrameClearer<OffsetMap>,
    /// The frames' memory; the zone and the clearer reach it by address.
    region: Region,
}

impl Pool {
    /// `bytes` of memory (not zero: the region is filled with 0xA5) as one zone of 4 KiB
    /// frames from pfn 0, MAX_ORDER 18, `cpus` CPUs.
    fn new(bytes: usize, cpus: usize) -> Self {
        let mut region = Region::new(bytes);
        let base = region.as_mut_slice().as_mut_ptr().expose_provenance();
        // SAFETY: frame i is byte i * 4 KiB of the region, which lives as long as the pool
        // and which nothing but the zone's owners touches while the pool is in use.
        let memory = unsafe { OffsetMap::new(base) };
        let cfg = ZoneConfig {
            max_order: order(18),
            ..ZoneConfig::new(Pfn(0), (bytes / PAGE) as u64).with_cpus(cpus)
        };
        let zone = zone_in_huge_pages(cfg);
        // Measure the steady state: every frame initialized, none deferred.
        zone.init_deferred(u64::MAX);
        Self {
            zone,
            clearer: FrameClearer::detected(memory),
            region,
        }
    }

    /// Background zeroing of up to `frames` free frames not known zero (the per-cpu lists
    /// drained first, since `zero_some` leaves them alone).
    fn fill(&self, frames: u64) {
        self.zone.drain_all();
        must(self.zone.zero_some(frames, &self.clearer, &mut NoResched));
    }

    /// The bytes of the block at `pfn`, which the caller holds.
    fn block(&mut self, pfn: Pfn, o: Order) -> &mut [u8] {
        let start = pfn.0 as usize * PAGE;
        &mut self.region.as_mut_slice()[start..start + o.pages() as usize * PAGE]
    }
}

/// The ways of getting a block, compared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `alloc_pages`: not zeroed, from a zone nothing zeroes (a plain allocation's steady
    /// state: its blocks recycle).
    Plain,
    /// `alloc_pages` from the full pool, after the same background zeroing as
    /// [`Path::FullPool`]: the baseline the goal is against (one call differs, nothing else).
    PlainFullPool,
    /// `alloc_zeroed` with every free block known zero.
    FullPool,
    /// `alloc_zeroed` with no block known zero: it clears at allocation.
    EmptyPool,
    /// `alloc_pages`, then zero-core's `clear_contig_pages` by the caller.
    ByHand,
}

const PATHS: [(Path, &str); 5] = [
    (Path::Plain, "alloc_pages (not zeroed)"),
    (Path::PlainFullPool, "alloc_pages (not zeroed), full pool"),
    (Path::FullPool, "alloc_zeroed, full pool"),
    (Path::EmptyPool, "alloc_zeroed, empty pool (clears)"),
    (Path::ByHand, "alloc_pages + clear_contig_pages by hand"),
];

// `PATHS` lists the paths in their declaration order: a path's number is its row.
const _: () = {
    let mut i = 0;
    while i < PATHS.len() {
        assert!(PATHS[i].0 as usize == i);
        i += 1;
    }
};

impl Path {
    /// Whether the path clears memory on the clock (its batches take milliseconds).
    fn clears(self) -> bool {
        matches!(self, Path::EmptyPool | Path::ByHand)
    }
}

/// Batches in a row per round, each prepared as usual, for a path whose batch of 4 KiB or
/// 2 MiB blocks clears nothing: such a batch takes microseconds, which one clock reading
/// resolves coarsely. A round's sample is their mean.
const CHEAP_BATCHES: u32 = 8;

/// One timed batch of `n` blocks of order `o` by `path`: the batch's time per block and
/// its slowest single allocation. The pool is prepared before and the blocks freed after,
/// untimed.
fn batch(pools: &mut [Pool; 2], path: Path, o: Order, n: usize) -> (Duration, Duration) {
    let full_pool = matches!(path, Path::FullPool | Path::PlainFullPool);
    let pool = &mut pools[usize::from(!full_pool)];
    // The full pool: background zeroing (untimed) has cleared what the last batch freed,
    // as an idle core does between bursts (so the blocks recycle, as a plain allocation's
    // do); a 1 GiB batch needs a whole known-zero 1 GiB block, so before it all of it.
    if full_pool {
        pool.fill(if o.get() == 18 {
            u64::MAX
        } else {
            o.pages() * (n as u64 + 1)
        });
    }
    let clear = *pool.clearer.clearer();
    let take = |pool: &mut Pool| match path {
        Path::Plain | Path::PlainFullPool => must(pool.zone.alloc_pages(0, o)),
        Path::FullPool | Path::EmptyPool => {
            must(
                pool.zone
                    .alloc_zeroed(0, o, &pool.clearer, None, &mut NoResched),
            )
        }
        Path::ByHand => {
            let pfn = must(pool.zone.alloc_pages(0, o));
            clear_contig_pages(pool.block(pfn, o), &clear, &mut NoResched)
                .unwrap_or_else(|e| panic!("clear: {e}"));
            pfn
        }
    };
    // One untimed allocation first, so that every path starts with this order's lists and
    // metadata in cache (a batch of one would spend the full pool's only block on it).
    if n > 1 {
        let warm = take(pool);
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        must(unsafe { pool.zone.free_pages(0, warm, o) });
    }
    let mut held = Vec::with_capacity(n);
    let mut worst = Duration::ZERO;
    let t0 = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        let pfn = take(pool);
        worst = worst.max(t.elapsed());
        held.push(pfn);
    }
    let total = t0.elapsed();
    for pfn in held {
        // The caller writes what it got (and a full pool's blocks come back not zero).
        pool.block(pfn, o)[0] = 1;
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        must(unsafe { pool.zone.free_pages(0, pfn, o) });
    }
    (total / n as u32, worst)
}

/// Background zeroing of `bytes` of dirty free memory on this core: its time.
fn background_round(pool: &mut Pool, bytes: usize) -> Duration {
    // Make `bytes` of free memory dirty: allocate it plainly, write it, free it.
    pool.zone.drain_all();
    let o = order(9);
    let blocks: Vec<Pfn> = (0..bytes / (512 * PAGE))
        .map(|_| must(pool.zone.alloc_pages(0, o)))
        .collect();
    for &pfn in &blocks {
        pool.block(pfn, o)[0] = 1;
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        must(unsafe { pool.zone.free_pages(0, pfn, o) });
    }
    pool.zone.drain_all();
    let t = Instant::now();
    let cleared = must(
        pool.zone
            .zero_some((bytes / PAGE) as u64, &pool.clearer, &mut NoResched),
    );
    let d = t.elapsed();
    assert_eq!(
        cleared as usize * PAGE,
        bytes,
        "zero_some cleared less than was dirty"
    );
    d
}

/// The fault stream: one core takes `faults` zeroed blocks of order `o` (each one touched
/// in every page, as a process's first writes would, then kept in a window of `window`
/// blocks, the oldest freed), `gap` of other work between faults; with `background`, a
/// second core runs `zero_some` in 2 MiB steps meanwhile. Returns the share of faults
/// served by a known-zero block and the faults' latencies.
fn fault_stream(
    zone: &BoxedZone,
    clearer: &FrameClearer<OffsetMap>,
    o: Order,
    faults: usize,
    gap: Duration,
    background: bool,
    cpus: &[usize],
) -> (f64, Samples) {
    let window = 8usize;
    zone.drain_all();
    zone.reset_counters();
    let done = AtomicBool::new(false);
    let latencies = std::thread::scope(|s| {
        if background {
            let done = &done;
            let core = cpus.get(1).copied();
            s.spawn(move || {
                if let Some(c) = core {
                    pin_current_thread(c);
                }
                while !done.load(Ordering::Relaxed) {
                    let n = must(zone.zero_some(512, clearer, &mut NoResched));
                    if n == 0 {
                        std::thread::yield_now();
                    }
                }
            });
        }
        if let Some(&c) = cpus.first() {
            pin_current_thread(c);
        }
        let mut held = std::collections::VecDeque::new();
        let mut lat = Vec::with_capacity(faults);
        for _ in 0..faults {
            let t = Instant::now();
            let pfn = must(zone.alloc_zeroed(0, o, clearer, None, &mut NoResched));
            lat.push(t.elapsed());
            touch(clearer, pfn, o);
            held.push_back(pfn);
            if held.len() > window
                && let Some(old) = held.pop_front()
            {
                // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
                must(unsafe { zone.free_pages(0, old, o) });
            }
            let until = Instant::now() + gap;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        done.store(true, Ordering::Relaxed);
        for pfn in held {
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            must(unsafe { zone.free_pages(0, pfn, o) });
        }
        lat
    });
    let c = zone.counters();
    (
        c.zeroed_hits as f64 / faults as f64,
        Samples::from_durations(latencies),
    )
}

/// Writes one byte in every page of a block the caller holds, through the clearer's map.
fn touch(clearer: &FrameClearer<OffsetMap>, pfn: Pfn, o: Order) {
    use buddy_sim::FrameMemory;
    for k in 0..o.pages() {
        if let Some(p) = clearer.memory().frame_ptr(Pfn(pfn.0 + k)) {
            // SAFETY: the caller holds the block, so this page of the region is its own.
            unsafe { p.as_ptr().write_volatile(1) };
        }
    }
}

/// Blocks per counted batch, as the timed 2 MiB batches.
const COUNTED_BATCH: usize = 16;

/// What a counted batch of 2 MiB allocations calls, and from which zone.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum CountedBatch {
    /// `alloc_zeroed` from a zone whose every frame is known zero.
    Zeroed,
    /// `alloc_pages` from a zone whose every frame is known zero.
    PlainFromFullPool,
    /// `alloc_pages` from a zone with no known-zero frame.
    Plain,
}

/// For the instruction counts: `n` batches of 16 2 MiB allocations, each batch inside
/// [`count::counted`] and freed outside it, as `batch` says. A zone known zero was added as
/// zero: nothing is ever cleared, so no memory is needed. The zone spans 2 GiB: 1024 blocks,
/// more than the 16 x 50 a counted run takes.
pub fn count_batches(n: u32, batch: CountedBatch) {
    let zeroed = batch == CountedBatch::Zeroed;
    let frames = (2 * GIB / PAGE) as u64;
    let cfg = ZoneConfig {
        max_order: order(18),
        ..ZoneConfig::new(Pfn(0), frames)
    };
    let zone = BoxedZone::new_boxed_empty(cfg).unwrap_or_else(|e| panic!("zone: {e}"));
    must(if batch != CountedBatch::Plain {
        zone.add_zeroed_memory(Pfn(0), frames)
    } else {
        zone.add_memory(Pfn(0), frames)
    });
    zone.init_deferred(u64::MAX);
    // SAFETY: never dereferenced: every block this zone hands out is known zero, so
    // alloc_zeroed neither clears nor (not verifying) reads it.
    let clearer = FrameClearer::detected(unsafe { OffsetMap::new(0) });
    let o = order(9);
    // Freed blocks are not known zero: past the zone's blocks a zeroed allocation would
    // clear one through the map above, which maps nothing.
    assert!(
        u64::from(n) * COUNTED_BATCH as u64 <= frames >> o.get(),
        "at most {} batches of 2 MiB blocks from a 2 GiB zone",
        (frames >> o.get()) / COUNTED_BATCH as u64
    );
    let mut held = Vec::with_capacity(COUNTED_BATCH);
    for _ in 0..n {
        count::counted(&mut || {
            for _ in 0..COUNTED_BATCH {
                held.push(must(if zeroed {
                    zone.alloc_zeroed(0, o, &clearer, None, &mut NoResched)
                } else {
                    zone.alloc_pages(0, o)
                }));
            }
        });
        for pfn in held.drain(..) {
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            must(unsafe { zone.free_pages(0, pfn, o) });
        }
    }
    // Freed blocks are not known zero; the zone is large enough that every counted zeroed
    // allocation found a known-zero block (it has no memory to clear).
    assert!(
        !zeroed || zone.counters().cleared_on_alloc == 0,
        "a counted zeroed allocation cleared"
    );
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Section for ZeroedAllocation {
    fn name(&self) -> &'static str {
        "zeroed allocation"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        3
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        // A full pool and an empty one, of 3 GiB each (the same metadata footprint).
        let mut pools = [Pool::new(3 * GIB, 2), Pool::new(3 * GIB, 2)];
        pools[0].fill(u64::MAX);
        let (lat, two_mib) = latency_table(ctx, &mut pools);
        let rate = background_table(ctx, &mut pools[1]);
        vec![
            lat,
            rate,
            fault_stream_table(ctx),
            goals_table(ctx, two_mib),
        ]
    }
}

/// The latency table: every block size and path, over a full pool (`pools[0]`) and an empty
/// one; and the 2 MiB full-pool zeroed allocation's ratios over the plain ones, for the goal.
fn latency_table(ctx: &SectionContext, pools: &mut [Pool; 2]) -> (Table, TwoMibFullPool) {
    ctx.step("zeroed allocation: latency");
    let budget = Budget::cell(ctx.quick, 6.0);
    // [size][path]: per-block batch means, and the worst single allocation.
    let mut means = vec![vec![Vec::new(); PATHS.len()]; SIZES.len()];
    let mut worst = vec![vec![Duration::ZERO; PATHS.len()]; SIZES.len()];
    budget.run(|round| {
        for (si, &(o, _, n)) in SIZES.iter().enumerate() {
            for pi in round_order(round, PATHS.len()) {
                let path = PATHS[pi].0;
                let batches = if o == 18 || path.clears() {
                    1
                } else {
                    CHEAP_BATCHES
                };
                let mut sum = Duration::ZERO;
                for _ in 0..batches {
                    let (mean, w) = batch(pools, path, order(o), n);
                    sum += mean;
                    worst[si][pi] = worst[si][pi].max(w);
                }
                means[si][pi].push(sum / batches);
            }
        }
    });
    let mut lat = Table::new(
        "zeroed-latency",
        "Zeroed allocation: latency per block",
        &[
            "block",
            "how",
            "median µs",
            "worst µs",
            "over alloc_pages",
            "speed-up over alloc + clear by hand",
        ],
    );
    let mut two_mib = TwoMibFullPool {
        over_same_pool: Estimate::exact(f64::NAN),
        over_plain: Estimate::exact(f64::NAN),
    };
    for (si, &(_, name, n)) in SIZES.iter().enumerate() {
        let samples: Vec<Samples> = means[si]
            .iter()
            .map(|d| Samples::from_durations(d.clone()))
            .collect();
        for (pi, &(path, how)) in PATHS.iter().enumerate() {
            let s = &samples[pi];
            // Time over time: the baseline's speed-up over this path.
            let over_plain = samples[Path::Plain as usize].speedup_over(s);
            let vs_hand = s.speedup_over(&samples[Path::ByHand as usize]);
            if path == Path::FullPool && name == "2 MiB" {
                two_mib = TwoMibFullPool {
                    over_same_pool: samples[Path::PlainFullPool as usize].speedup_over(s),
                    over_plain,
                };
            }
            lat.row(vec![
                Cell::text(format!("{name} (batches of {n})")),
                Cell::text(how),
                Cell::estimate(s.seconds().map(|x| x * 1e6), 3, ""),
                Cell::num(micros(worst[si][pi]), 1, ""),
                Cell::ratio_ci(over_plain),
                match path {
                    Path::FullPool | Path::EmptyPool => Cell::ratio_ci(vs_hand),
                    Path::Plain | Path::PlainFullPool | Path::ByHand => Cell::text("—"),
                },
            ]);
        }
    }
    lat.note(format!(
        "Each sample times a batch of allocations on one CPU and divides by its size (median \
         ± the half-width of its 95% interval over rounds); worst is the slowest single \
         allocation in any round (one call timed alone). A path that clears nothing \
         times {CHEAP_BATCHES} batches in a row per round (4 KiB and 2 MiB blocks; each \
         prepared as usual) and takes their mean as its sample. The ratios are taken round by \
         round (the paths take turns in a shuffled order). \"over alloc_pages\" is time \
         over time (1.00x costs the same, above 1 is slower); the speed-up is the by-hand \
         path's time over this one's (above 1 is faster). Full pool: before each batch, background \
         zeroing made every free block known zero; empty pool: no frame is known \
         zero, so alloc_zeroed clears through zero-core's policy, as by hand does after a \
         plain alloc_pages. Full pool: before each batch zero_some (untimed) clears \
         what the last one freed, as an idle core would between bursts (before a 1 GiB \
         batch, the whole zone), on this core: it writes (n + 1) blocks' bytes, which \
         leaves this core's caches as the first plain row's never are. \
         \"alloc_pages (not zeroed), full pool\" takes its batch from the full pool after \
         the same zeroing: the baseline that differs from alloc_zeroed in the call alone. \
         The plain rows' pool is never zeroed, so its blocks recycle; both pools are zones \
         of 3 GiB. Batches of more than one block follow one untimed allocation of \
         the same path (metadata in cache); every batch's blocks are freed (untimed) after \
         it. Anonymous memory, MAX_ORDER 18, one CPU's lists used."
    ));
    lat.plot = Some(
        Plot::new("block, how", "µs per block (median, 95% interval)", vec![2])
            .log()
            .labelled_by(vec![0, 1]),
    );
    ctx.headline(
        "2 MiB alloc_zeroed over alloc_pages, both from the full pool after the same background zeroing (time)",
        two_mib.over_same_pool,
    );
    ctx.headline(
        "2 MiB alloc_zeroed with a full pool over a plain 2 MiB alloc_pages from a pool nothing zeroes (time)",
        two_mib.over_plain,
    );
    (lat, two_mib)
}

/// The 2 MiB zeroed allocation from the full pool, time over time (above 1: slower).
#[derive(Clone, Copy)]
struct TwoMibFullPool {
    /// Over `alloc_pages` from the same pool after the same background zeroing.
    over_same_pool: Estimate,
    /// Over `alloc_pages` from the pool nothing zeroes (its blocks recycle).
    over_plain: Estimate,
}

/// Background zeroing's rate over dirty free memory of `pool`.
fn background_table(ctx: &SectionContext, pool: &mut Pool) -> Table {
    ctx.step("zeroed allocation: background zeroing rate");
    let mut rate = Table::new(
        "zeroed-background",
        "Background zeroing (zero_some) on one core",
        &["dirty free memory per call", "GB/s (median)", "µs per call"],
    );
    for mib in [2usize, 64] {
        let bytes = mib << 20;
        let mut d = Vec::new();
        Budget::cell(ctx.quick, 2.0).run(|_| d.push(background_round(pool, bytes)));
        let s = Samples::from_durations(d);
        rate.row(vec![
            Cell::text(format!("{mib} MiB")),
            Cell::estimate(s.gbps(bytes), 2, ""),
            Cell::estimate(s.seconds().map(|x| x * 1e6), 1, ""),
        ]);
    }
    rate.note(
        "zero_some over free memory that is all dirty (allocated, written and freed before \
         each call, untimed): it takes the free blocks off their lists, clears them with \
         the zone lock released (zero-core's policy, whole blocks) and puts them back as \
         known zero. GB/s is 10^9 bytes per second on one core.",
    );
    rate
}

/// How much of a stream of faults a background-zeroing core serves known zero.
fn fault_stream_table(ctx: &SectionContext) -> Table {
    ctx.step("zeroed allocation: fault stream");
    let cpus = allowed_cpus();
    let mut stream = Table::new(
        "zeroed-fault-stream",
        "Fault stream: how much clearing a background-zeroing core absorbs",
        &[
            "faults",
            "background zeroing",
            "served known zero",
            "fault latency median µs",
            "worst µs",
        ],
    );
    let (faults_2m, faults_4k) = if ctx.quick {
        (200, 4000)
    } else {
        (1000, 20000)
    };
    let streams = [
        (order(9), "2 MiB", faults_2m, Duration::from_micros(200)),
        (order(0), "4 KiB", faults_4k, Duration::from_micros(2)),
    ];
    for (o, name, n, gap) in streams {
        for background in [false, true] {
            // A fresh zone each time: 64 MiB, none of it known zero.
            let p = Pool::new(64 << 20, 1);
            let (served, lat) = fault_stream(&p.zone, &p.clearer, o, n, gap, background, &cpus);
            stream.row(vec![
                Cell::text(format!("{n} x {name}, {} µs apart", gap.as_micros())),
                Cell::text(if background {
                    format!("on a second core ({} cores)", cpus.len())
                } else {
                    "none".into()
                }),
                Cell::num(100.0 * served, 1, "%"),
                Cell::estimate(lat.seconds().map(|x| x * 1e6), 2, ""),
                Cell::num(micros(lat.worst()), 1, ""),
            ]);
        }
    }
    stream.note(format!(
        "One core takes zeroed blocks back to back with the given gap of other work \
         between them (a stream of page faults): each block is touched in every page and \
         kept in a window of 8, the oldest freed (dirty) as the next arrives. With \
         background zeroing a second thread, pinned to another core where there is one, \
         calls zero_some in 2 MiB steps the whole time. \"served known zero\" is the \
         share of faults that took a known-zero block and cleared nothing (the zone's \
         zeroed_hits counter). Each run has a zone of its own: 64 MiB, none of it known \
         zero at the start. {}",
        if cpus.len() < 2 {
            "This machine gave one core: both threads share it."
        } else {
            ""
        }
    ));
    stream
}

/// The zeroed-allocation goal: time (`two_mib`) and callgrind instructions.
fn goals_table(ctx: &SectionContext, two_mib: TwoMibFullPool) -> Table {
    let mut goals = Table::new(
        "zeroed-goals",
        "Zeroed allocation goal, measured",
        &["goal", "measured (median [95% interval])", "verdict"],
    );
    ctx.progress
        .set_message("zeroed allocation: counting instructions under callgrind");
    let per_block = |w: Counted| count::per_op(w).map(|n| n / COUNTED_BATCH as f64);
    let instructions = per_block(COUNTED[0])
        .and_then(|zeroed| Ok((zeroed, per_block(COUNTED[1])?, per_block(COUNTED[2])?)));
    let time = two_mib.over_same_pool.judge(1.2, false);
    let (counted, verdict) = match instructions {
        Ok((zeroed, same_pool, plain)) => {
            let over_same_pool = Estimate::exact(zeroed / same_pool);
            let over_plain = Estimate::exact(zeroed / plain);
            ctx.headline(
                "2 MiB alloc_zeroed with a full pool over a plain 2 MiB alloc_pages (instructions, callgrind)",
                over_plain,
            );
            (
                format!(
                    "; instructions per block {zeroed:.0} / {same_pool:.0} (plain, the same \
                     full pool): {}, and / {plain:.0} (plain, a pool nothing zeroes): {}",
                    ratio_text(over_same_pool),
                    ratio_text(over_plain)
                ),
                time.and(over_same_pool.judge(1.2, false))
                    .and(over_plain.judge(1.2, false)),
            )
        }
        Err(e) => (format!("; instructions not counted: {e}"), time),
    };
    goals.row(vec![
        Cell::text("2 MiB alloc_zeroed with a full pool <= 1.2x a plain 2 MiB allocation"),
        Cell::text(format!(
            "time over plain from the same full pool {}; over plain from a pool nothing \
             zeroes {} (not judged: see below){counted}",
            ratio_text(two_mib.over_same_pool),
            ratio_text(two_mib.over_plain)
        )),
        Cell::verdict(verdict),
    ]);
    goals.note(
        "Why the time is judged against a plain allocation from the same full pool: before \
         a full-pool batch, background zeroing runs on this core (untimed, as the pool \
         needs it) and writes (n + 1) blocks' bytes, so the allocations that follow find \
         the blocks' metadata out of this core's caches, which a kernel zeroing on an idle \
         core would not do to the allocating one. A plain alloc_pages after the same \
         zeroing pays the same: the latency table's two plain rows differ by that zeroing \
         (their instructions by a few percent: the counts above). On \
         the same pool the zeroed allocation may take less time than the plain one: its \
         refill takes a run of 16 blocks from one split (8 in a zone of less than 1 GiB \
         per CPU), the plain refill the \
         per-cpu batch (2 blocks of 2 MiB), so the plain batch splits large, cold blocks \
         more often. \
         Against the pool nothing zeroes, the zeroed allocation also recycles less: a \
         plain allocation recycles the blocks just freed from its \
         CPU's list; a known-zero block comes from the buddy, where background zeroing \
         returned it and it merged (freed blocks are not known zero until zeroed again, \
         and a full pool's blocks merge up to 1 GiB), so a refill splits a large block. A \
         zeroed refill takes at least 8 blocks, 16 where a CPU's lists may grow to hold \
         four such batches (this zone: 2 GiB, one CPU); with the 2 blocks of a 2 MiB \
         per-cpu batch the ratio was 1.83x, with 8 1.40x. It takes them as runs: it splits \
         the block it finds only down to a block of the batch and hands out its pieces, \
         where taking them one at a time split down to 2 MiB and took the halves back off \
         the free lists (479 instructions per block then; the count now is in the row \
         above). It finds that block in a word per free list of the orders holding \
         known-zero blocks, not by reading the back of each order's list. The zones' \
         frame metadata is in huge \
         pages, as a kernel maps its frame table: in 4 KiB pages the 18 MiB of a 3 GiB \
         zone's metadata cost a TLB miss per block head read (2.9x then).",
    );
    goals.note(format!(
        "Time: the latency table's ratio (median of per-round ratios of batch means). \
         Instructions: callgrind counts of batches of {COUNTED_BATCH} 2 MiB allocations \
         on one CPU (each batch freed outside the count), alloc_zeroed from a zone whose \
         every frame is known zero against alloc_pages from the same kind of zone and \
         from one whose frames are not; exact, and the same on every run. The goal needs \
         the time and both instruction ratios."
    ));
    goals.note("Goals are reported, never asserted in tests: these machines are shared.");
    goals
}

/// The workloads callgrind counts: a batch of 2 MiB `alloc_zeroed` calls from a full pool of
/// known-zero blocks, the same batch of plain 2 MiB `alloc_pages` calls from such a pool,
/// and from a zone with no known-zero block.
pub const COUNTED: [Counted; 3] = [
    Counted {
        name: "alloc-zeroed-2m-full-pool",
        ops: 25,
        run: |n| count_batches(n, CountedBatch::Zeroed),
    },
    Counted {
        name: "alloc-pages-2m-full-pool",
        ops: 25,
        run: |n| count_batches(n, CountedBatch::PlainFromFullPool),
    },
    Counted {
        name: "alloc-pages-2m",
        ops: 25,
        run: |n| count_batches(n, CountedBatch::Plain),
    },
];
