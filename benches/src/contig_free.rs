//! The "contiguous free" section: the loop of the free_contig_range() patch and the
//! `buddy_system_allocator` peer.
//!
//! 1. N x (alloc order k, split_page, free the run): batched `free_contig_range` vs the
//!    per-page path (one `put_page` per page), for orders 9 (the patch's), 3, 4 and 10, and a
//!    misaligned run, with the work counters per iteration and, for order 9, callgrind's
//!    instructions per iteration.
//! 2. Against `buddy_system_allocator::FrameAllocator`: whole-run free, one-frame frees, and
//!    allocation throughput for orders 0, 3 and 9.

use crate::count::{self, Cache, Workload as Counted, counted};
use crate::frame_table::zone_in_huge_pages;
use crate::measure::{Budget, Estimate, Samples, Verdict};
use crate::report::{ratio_text, thread};
use crate::{Cell, Plot, Section, SectionContext, Table, must, order};
use buddy_sim::reference::free_contig_range_per_page;
use buddy_sim::{
    Access, AllocRequest, BoxedZone, Cpu, DefaultRawMutex, Frame, Local, Locked, OpCounters,
    PerCpu, Pfn, ZoneConfig,
};
use buddy_system_allocator::FrameAllocator;
use std::time::Duration;

/// The contiguous-free section.
pub struct ContigFree;

/// Frames in the zone: 1 GiB of 4 KiB frames.
const ZONE_FRAMES: u64 = 1 << 18;
/// MAX_ORDER 10, as `FrameAllocator<11>`.
type Peer = FrameAllocator<11>;

/// A fresh zone of [`ZONE_FRAMES`] frames, its frame metadata in huge pages as a kernel's
/// frame table is ([`zone_in_huge_pages`]).
pub(crate) fn zone() -> BoxedZone {
    zone_in_huge_pages(zone_config())
}

/// The configuration of [`zone`]'s zones: Linux's sizes for [`ZONE_FRAMES`] frames, one CPU.
fn zone_config() -> ZoneConfig {
    ZoneConfig::new(Pfn(0), ZONE_FRAMES)
}

fn peer() -> Peer {
    let mut p = Peer::new();
    p.add_frame(0, ZONE_FRAMES as usize);
    p
}

/// How a run is freed in one iteration of the split-and-free loop.
#[derive(Clone, Copy)]
pub(crate) enum Free {
    Batched,
    PerPage,
}

/// One split-and-free workload: allocate order `k`, split, then free `[skip, 2^k)` and, when
/// `skip > 0`, the first `skip` pages separately (a run that starts misaligned).
#[derive(Clone, Copy)]
pub(crate) struct Workload {
    name: &'static str,
    order: u8,
    skip: u64,
}

/// The patch's own workload: order 9.
pub(crate) const PATCH_WORKLOAD: Workload = Workload {
    name: "order 9 (the patch's)",
    order: 9,
    skip: 0,
};

/// The workloads callgrind counts: one iteration of the patch's loop (allocate order 9,
/// split, free the 512 pages) freeing with `free_contig_range`, and the same freeing page by
/// page (the reference path). The peer table's throughput rows are [`PAIR_COUNTED`].
pub const COUNTED: [Counted; 2] = [
    Counted {
        name: "contig-free-batched",
        ops: 200,
        run: |n| count_iterations(n, Free::Batched),
    },
    Counted {
        name: "contig-free-per-page",
        ops: 200,
        run: |n| count_iterations(n, Free::PerPage),
    },
];

/// `n` iterations of the patch's loop, each inside [`counted`].
fn count_iterations(n: u32, free: Free) {
    let zone = zone();
    for _ in 0..n {
        counted(&mut || split_and_free_iteration(&zone, PATCH_WORKLOAD, free));
    }
}

const WORKLOADS: [Workload; 5] = [
    PATCH_WORKLOAD,
    Workload {
        name: "order 3",
        order: 3,
        skip: 0,
    },
    Workload {
        name: "order 4",
        order: 4,
        skip: 0,
    },
    Workload {
        name: "order 10",
        order: 10,
        skip: 0,
    },
    Workload {
        name: "order 10, run from page 1",
        order: 10,
        skip: 1,
    },
];

/// One iteration of the split-and-free loop on CPU 0 of `z`.
pub(crate) fn split_and_free_iteration(z: &BoxedZone, w: Workload, free: Free) {
    let o = order(w.order);
    let run = |pfn: Pfn, nr: u64| match free {
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        Free::Batched => must(unsafe { z.free_contig_range(0, pfn, nr) }),
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        Free::PerPage => must(unsafe { free_contig_range_per_page(&must(z.cpu(0)), pfn, nr) }),
    };
    let pfn = must(z.alloc_pages(0, o));
    must(z.split_page(pfn, o));
    run(Pfn(pfn.0 + w.skip), o.pages() - w.skip);
    if w.skip > 0 {
        run(pfn, w.skip);
    }
}

/// `iterations` of the split-and-free loop on a fresh zone: the time and the zone's work counters.
fn split_and_free_loop(w: Workload, free: Free, iterations: u32) -> (Duration, OpCounters) {
    let z = zone();
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        split_and_free_iteration(&z, w, free);
    }
    let elapsed = start.elapsed();
    (elapsed, z.counters())
}

fn per_iter(c: OpCounters, n: u32) -> String {
    let n = f64::from(n);
    format!(
        "{:.1} / {:.1} / {:.1} / {:.0}",
        c.zone_locks as f64 / n,
        c.pcp_locks as f64 / n,
        c.list_ops as f64 / n,
        c.prepares as f64 / n
    )
}

impl Section for ContigFree {
    fn name(&self) -> &'static str {
        "contiguous free"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        // The batched table's workloads, the peer table's rows (two of different work, a
        // one-frame row and three throughput rows with reference counts and again frozen,
        // the control row, and the control against the frozen order-9 row), the floor.
        (WORKLOADS.len() + 2 + 2 * 4 + 2 + 1) as u64
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let iterations: u32 = if ctx.quick { 2_000 } else { 10_000 };
        let budget = Budget::cell(ctx.quick, 2.0);
        let (batched, order9) = batched_vs_per_page_table(ctx, iterations, budget);
        let PeerTable {
            table: mut peer,
            slower,
            one_frame,
            paces,
            over_control,
        } = peer_table(ctx, iterations, budget);
        // Frees alone hold a sample's order-9 blocks at once: at most half the zone.
        let held = (iterations / 10).min((ZONE_FRAMES / 512 / 2) as u32);
        let (floor, over_floor, floor_ns) = floor_table(ctx, held, budget);
        if let Some((ours, theirs)) = one_frame {
            peer.note(format!(
                "One-frame frees against their floor: per frame (the order-9 allocation and \
                 split included), buddy-sim with CPU-local lists {ours:.1} ns, \
                 buddy_system_allocator {theirs:.1} ns; the floor, the one compare-and-swap \
                 the reference count needs per frame (the floor table below), {floor_ns:.1} ns: \
                 buddy-sim pays {:.1}x it. Its per-cpu drain returns a run of consecutive pages \
                 as aligned blocks (one merge per block, not per page). The two execute about \
                 as many instructions per frame (the table's count): what buddy-sim pays \
                 beyond the peer is about that compare-and-swap (buddy-sim less the floor: \
                 {:.1} ns a frame, against the peer's {theirs:.1}). It stays: `get_page` is \
                 safe, so another CPU may take a reference to any allocated page at any \
                 time, and a plain store could lose it and free the page under its holder.",
                ours / floor_ns,
                ours - floor_ns,
            ));
        }
        let goals = goals_table(&order9, &slower, (&paces, over_control), over_floor);
        vec![batched, peer, floor, goals]
    }
}

/// The contiguous-free goals: order 9 over the per-page path, the peer on every row
/// comparing the same work, with reference counts and with frozen blocks (`slower`: those
/// not clearly faster), the floor.
fn goals_table(
    order9: &Order9,
    slower: &Slower,
    (paces, over_control): (&[Pace], Estimate),
    over_floor: Estimate,
) -> Table {
    let mut goals = Table::new(
        "contig-free-goals",
        "Contiguous-free goals, measured",
        &["goal", "measured (median [95% interval])", "verdict"],
    );
    let instructions = order9.instructions.as_ref().ok().map(|&(pp, b)| pp / b);
    let wall = order9.ratio.judge(10.0, true);
    goals.row(vec![
        Cell::text(">= 10x over the per-page path for order 9"),
        Cell::text(format!(
            "wall time {}; instructions {}",
            ratio_text(order9.ratio),
            instructions.map_or_else(|| "not counted".into(), |r| format!("{r:.2}x")),
        )),
        Cell::verdict(match instructions {
            Some(r) => wall.and(Estimate::exact(r).judge(10.0, true)),
            None => wall,
        }),
    ]);
    for (kind, which) in [
        (
            RowKind::Counted,
            "with a reference count per block (`alloc_raw`, `free_pages`)",
        ),
        (
            RowKind::Frozen,
            "with frozen blocks (`alloc_frozen_pages`, `free_frozen_pages`: no reference \
             count, as the peer keeps none)",
        ),
    ] {
        let rows: Vec<_> = slower.iter().filter(|r| r.0 == kind).collect();
        let verdict = rows.iter().map(|r| r.2).fold(Verdict::Met, Verdict::and);
        goals.row(vec![
            Cell::text(format!(
                ">= {PEER_GOAL}x buddy_system_allocator on every row that compares the same \
                 work (CPU-local lists, one CPU), {which}"
            )),
            Cell::text(if rows.is_empty() {
                format!(">= {PEER_GOAL}x on every row")
            } else {
                format!(
                    "not clearly >= {PEER_GOAL}x on: {}",
                    rows.iter()
                        .map(|r| r.1.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }),
            Cell::verdict(verdict),
        ]);
    }
    goals.row(vec![
        Cell::text(format!(
            "free_contig_range per page <= {FLOOR_GOAL}x one atomic per frame word"
        )),
        Cell::text(ratio_text(over_floor)),
        Cell::verdict(over_floor.judge(FLOOR_GOAL, false)),
    ]);
    if order9.ratio.median < 10.0 {
        goals.note(format!(
            "Why the order-9 ratio falls short: per page of an iteration, the per-page path \
             costs {:.1} ns and the batched one {:.1} ns (medians){}. Both drop each page's \
             reference with an atomic compare-and-swap (as the kernel's put_page_testzero), \
             so that two CPUs freeing the same page cannot both free it; that one CAS per \
             page is the batched path's floor, and 10x would need the per-page path to cost \
             ten of them.",
            order9.per_page_ns,
            order9.batched_ns,
            match &order9.instructions {
                Ok((pp, b)) => format!("; {:.1} and {:.1} instructions", pp / 512.0, b / 512.0),
                Err(_) => String::new(),
            }
        ));
    }
    if !slower.is_empty() {
        let (frame, stride) = (size_of::<Frame>(), 1usize << 9);
        let (order3, order9) = (pair_count(3), pair_count(9));
        goals.note(format!(
            "Where buddy-sim is not faster: in the alloc-then-free-all rows every block the \
             per-CPU list cannot keep (past its high mark) passes through the buddy twice, \
             once when a refill moves a batch of blocks to the list and once when a drain \
             returns them (merged there); each free \
             also drops a reference by compare-and-swap (the floor buddy_system_allocator \
             does not pay: no reference counts, no per-CPU lists, no lock of its own). Each \
             block's state is its head's word in the frame metadata ({frame} bytes a frame: from \
             order 3 up, a cache line of its own per block), written when the block is \
             handed out and read and written when it comes back; with thousands of blocks \
             held in between, those accesses miss L1 (the L1d column; each miss at least an \
             L2 hit), where buddy_system_allocator keeps its free blocks as 8-byte keys in \
             one B-tree per order, whose nodes mostly stay in L1. At order 3 buddy-sim \
             executes fewer instructions than the peer and loses the difference to those \
             misses and the compare-and-swap; they are misses for lack of capacity (a fully \
             associative L1 of the same size misses as often: the heads of {order3} blocks are \
             {order3} lines). At order 9 they are set conflicts (the fully associative L1 \
             misses none): {order9} heads are {order9} lines, which fit, but heads {stride} \
             frames apart lie {stride} x {frame} bytes = {} KiB apart, a multiple of the 4 KiB \
             one way of an x86 L1 data cache spans (its set is picked by the address bits inside a 4 KiB \
             page), so they all pick one set, of 8 to 12 ways. A pair writes the head \
             when the block is handed out and reads it when it comes back (the free's \
             check), {} other heads in between: both miss, 2 a pair, whatever path the \
             block takes between; a block that goes through the buddy misses more there \
             (its buddy's head and its free-list neighbours', multiples of 12 KiB apart too: \
             the L1d column). Any frame record of a \
             multiple of 8 bytes does this (Linux's 64-byte struct page puts them 32 KiB \
             apart); spreading the heads over the sets means an index computation on every \
             frame access, the order-0 paths' included. One-frame frees \
             gained from draining runs of consecutive pages as aligned blocks (a split \
             block freed page by page merges once per block, not once per page). The \
             frozen rows make the same calls without the reference count: the difference \
             between a row and its frozen twin is what the compare-and-swap costs. The \
             per-CPU layer is what makes the SMP table scale.",
            stride * frame / 1024,
            order9 - 1,
        ));
        if let Some(note) = order9_pace_note(paces, over_control) {
            goals.note(note);
        }
    }
    goals.note(
        "Judged on the intervals of the per-round ratios, and for order 9 also on \
         callgrind's instruction counts (exact); both must meet the target. Goals are \
         reported, never asserted in tests.",
    );
    goals
}

/// What the order-9 throughput rows spend their time on, from the counted rows' `paces` and
/// the frozen order-9 row's time over its control's (`over_control`, per round): at most
/// what buddy-sim's L1 misses cost it (its time per instruction against the control's,
/// whose blocks' heads stay in L1 and whose blocks stay on the lists: the difference is the
/// misses and the transit's instruction mix together), and how many of its instructions
/// are its per-CPU lists'
/// transit ([`TRANSIT`]). `None` without those rows' counts.
fn order9_pace_note(paces: &[Pace], over_control: Estimate) -> Option<String> {
    let find = |kind, order| paces.iter().find(|p| p.kind == kind && p.order == order);
    let (counted, frozen) = (find(RowKind::Counted, 9)?, find(RowKind::Frozen, 9)?);
    let control = find(RowKind::Control, 9)?;
    let [mine, theirs] = counted.instructions;
    let [mine_frozen, _] = frozen.instructions;
    let [grouped, _] = control.instructions;
    // Time per instruction, the frozen row's over the control's: the per-round time ratio
    // over the (exact) instruction ratio.
    let per_instruction = over_control.map(|r| r * grouped / mine_frozen);
    let misses = if per_instruction.lo <= 1.0 {
        "cost it no time that this run tells from noise".to_owned()
    } else {
        format!(
            "cost it at most {:.0}% of a frozen pair's time",
            (1.0 - 1.0 / per_instruction.median) * 100.0
        )
    };
    let count = match (mine < theirs, mine_frozen < theirs) {
        (true, true) => format!(
            "The rows execute fewer instructions than the peer, {mine:.0} a pair (frozen: \
             {mine_frozen:.0}) against its {theirs:.0}: they lose on time per instruction."
        ),
        (false, true) => format!(
            "The row with a reference count is short by instructions, {mine:.0} a pair \
             against the peer's {theirs:.0}; the frozen row executes fewer, {mine_frozen:.0}, \
             and loses on time per instruction."
        ),
        _ => format!(
            "The rows are short by instructions: {mine:.0} a pair (frozen: {mine_frozen:.0}) \
             against the peer's {theirs:.0}."
        ),
    };
    let transit = match (counted.transit, frozen.transit) {
        (Some(t), Some(t_frozen)) => {
            let cfg = zone_config();
            // The blocks of order 9 a list keeps between rounds at its highest mark.
            let kept = cfg.pcp_high_max.max(cfg.pcp_high) >> cfg.pageblock_order.get();
            format!(
                " {t:.0} of buddy-sim's a pair (frozen: {t_frozen:.0}) are the per-CPU lists' \
                 refills and \
                 drains (callgrind counting inside `PcpLists::refill` and `PcpLists::drain` \
                 alone, and what they call): Linux's rule refills the pageblock order's list \
                 {} blocks at a time (`nr_pcp_alloc`: max(batch >> order, 2), batch {}) and \
                 drains it past its high mark, which Linux 6.7's tuning raises from {} frames \
                 to at most {} (an eighth of the zone: {kept} blocks of order 9), so while \
                 the row holds {} blocks, {} of them go from the buddy to the list and back \
                 each round, a refill, a drain and a merge each, where the peer takes a key \
                 out of a B-tree and puts it back. The rest of a pair, the list's pop and \
                 push with the allocation's and the free's checks, is {:.0} instructions \
                 (frozen: {:.0}).",
                cfg.pcp_blocks(cfg.pageblock_order),
                cfg.pcp_batch,
                cfg.pcp_high,
                cfg.pcp_high_max,
                pair_count(9),
                u64::from(pair_count(9)).saturating_sub(kept),
                mine - t,
                mine_frozen - t_frozen,
            )
        }
        _ => String::new(),
    };
    Some(format!(
        "What the order-9 rows lose to, measured: their L1 misses (the set conflicts above) \
         {misses}. Against the control row (the same calls {GROUP} blocks at a time, so that \
         the blocks' heads stay in L1), buddy-sim's frozen order-9 row takes {} as long per \
         instruction (the two timed side by side, the per-round ratio of their times over \
         the ratio of their instructions, {mine_frozen:.0} and {grouped:.0} a pair: the \
         control's lists keep some of its blocks between groups). That bounds what the \
         misses cost from above: the control also runs none of the transit's code, whose \
         mix of instructions runs at a pace of its own. {count}{transit}",
        ratio_text(per_instruction),
    ))
}

/// The floor of `free_contig_range`: the reference count sets one atomic read-modify-write
/// per page, so the floor is a loop of exactly that over the same frames' words.
const FLOOR_GOAL: f64 = 1.2;

/// `free_contig_range` of 512 pages beside a loop doing one atomic read-modify-write per
/// frame word over 512 frames laid out as the zone's are: ns per page, and the ratio.
/// The floor table, `free_contig_range` over the floor (per-round ratio), and the floor's ns
/// per page (median).
fn floor_table(ctx: &SectionContext, iterations: u32, budget: Budget) -> (Table, Estimate, f64) {
    ctx.step("free_contig_range against one atomic per frame");
    let mut t = Table::new(
        "contig-free-floor",
        "free_contig_range per page vs its floor: one atomic read-modify-write per frame word",
        &["path", "ns per page", "÷ floor"],
    );
    struct Target {
        zone: BoxedZone,
        /// One frame's metadata stride (24 bytes: the word, the list links, the pageblock).
        words: Vec<[std::sync::atomic::AtomicU64; 3]>,
    }
    let mut target = Target {
        zone: zone(),
        words: (0..512).map(|_| Default::default()).collect(),
    };
    let n = iterations;
    let mut candidates: Vec<crate::measure::Candidate<'static, Target>> = vec![
        Box::new(move |t: &mut Target| {
            for _ in 0..n {
                for w in &t.words {
                    // What free_contig_range's claim does per page: one compare-and-swap
                    // that succeeds.
                    let v = w[0].load(std::sync::atomic::Ordering::Relaxed);
                    let _ = w[0].compare_exchange(
                        v,
                        v.wrapping_add(1),
                        std::sync::atomic::Ordering::AcqRel,
                        std::sync::atomic::Ordering::Acquire,
                    );
                }
                std::hint::black_box(&t.words);
            }
        }),
        Box::new(move |t: &mut Target| {
            for _ in 0..n {
                split_and_free_iteration(&t.zone, PATCH_WORKLOAD, Free::Batched);
            }
        }),
    ];
    let samples = Samples::interleaved(budget, &mut target, &mut candidates);
    let pages = f64::from(n) * 512.0;
    let per_page = |s: &Samples| s.seconds().map(|x| x * 1e9 / pages);
    let ratio = samples[0].speedup_over(&samples[1]);
    // Frees alone: allocate and split outside the timed region, interleaved with the floor.
    let mut frees = Vec::new();
    let mut floors = Vec::new();
    budget.run(|_| {
        let o = order(9);
        let held: Vec<Pfn> = (0..n)
            .map(|_| {
                let f = must(target.zone.alloc_pages(0, o));
                must(target.zone.split_page(f, o));
                f
            })
            .collect();
        let start = std::time::Instant::now();
        for f in held {
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            must(unsafe { target.zone.free_contig_range(0, f, 512) });
        }
        frees.push(start.elapsed());
        let start = std::time::Instant::now();
        (candidates[0])(&mut target);
        floors.push(start.elapsed());
    });
    let (frees, floors) = (
        Samples::from_durations(frees),
        Samples::from_durations(floors),
    );
    let free_ratio = floors.speedup_over(&frees);
    t.row(vec![
        Cell::text("floor: one compare-and-swap per frame word, 512 frames"),
        Cell::estimate(per_page(&samples[0]), 2, ""),
        Cell::text("1.00x"),
    ]);
    t.row(vec![
        Cell::text("free_contig_range of 512 split pages (the free alone)"),
        Cell::estimate(per_page(&frees), 2, ""),
        Cell::ratio_ci(free_ratio),
    ]);
    t.row(vec![
        Cell::text("alloc order 9 + split + free_contig_range (the whole iteration)"),
        Cell::estimate(per_page(&samples[1]), 2, ""),
        Cell::ratio_ci(ratio),
    ]);
    t.note(format!(
        "{n} iterations per sample; ns per page (median, 95% interval). The floor loop does, \
         for each of 512 frame words laid out 24 bytes apart as the zone's metadata is, one \
         load and one compare-and-swap that succeeds: what the reference count costs \
         `free_contig_range` (its claim of each page) and what no batching can remove. \
         \"The free alone\" times only the `free_contig_range` calls of a sample (the \
         allocations and splits before it are untimed), interleaved round by round with the \
         floor; the whole iteration is measured interleaved with it too. ÷ floor is how many \
         times the floor's time per page a path takes (median per-round ratio); goal: the \
         free within {FLOOR_GOAL}x."
    ));
    ctx.headline(
        "free_contig_range per page over one atomic per frame (lower is better)",
        free_ratio,
    );
    (t, free_ratio, per_page(&samples[0]).median)
}

/// What the batched-vs-per-page table measured for the patch's own workload (order 9).
struct Order9 {
    ratio: Estimate,
    /// ns per page of the whole iteration (alloc, split, free), per-page path and batched.
    per_page_ns: f64,
    batched_ns: f64,
    /// Instructions per iteration, per-page path and batched (callgrind), or why not.
    instructions: Result<(f64, f64), String>,
}

fn batched_vs_per_page_table(
    ctx: &SectionContext,
    iterations: u32,
    budget: Budget,
) -> (Table, Order9) {
    let published = format!("published ({})", thread::FREE_CONTIG_RANGE_SHORT);
    let mut t = Table::new(
        "contig-free-loop",
        "N x (alloc, split_page, free the run): per-page vs batched free_contig_range",
        &[
            "workload",
            "per-page ms",
            "batched ms",
            "ratio",
            "instructions per iteration, per-page / batched",
            "instruction ratio",
            &published,
            "per-page zone locks / cpu locks / list ops / prepares per iteration",
            "batched zone locks / cpu locks / list ops / prepares per iteration",
        ],
    );
    let mut order9 = Order9 {
        ratio: Estimate::exact(f64::NAN),
        per_page_ns: f64::NAN,
        batched_ns: f64::NAN,
        instructions: Err("not measured".into()),
    };
    for w in WORKLOADS {
        ctx.step(format!(
            "contiguous free: {}, both paths alternating",
            w.name
        ));
        // Alternate the two paths round by round (starting with each in turn) so drift on a
        // shared host hits both alike; each run starts from a fresh zone.
        let mut times = [Vec::new(), Vec::new()];
        let mut counters = [OpCounters::default(); 2];
        budget.run(|round| {
            for k in 0..2 {
                let i = (round + k) % 2;
                let free = if i == 0 { Free::PerPage } else { Free::Batched };
                let (d, c) = split_and_free_loop(w, free, iterations);
                times[i].push(d);
                counters[i] = c;
            }
        });
        let [per_page, batched] = times.map(Samples::from_durations);
        let [pc, bc] = counters;
        let ms = |s: &Samples| Cell::estimate(s.seconds().map(|x| x * 1e3), 1, "");
        let ratio = batched.speedup_over(&per_page);
        let is_patch_workload = w.order == PATCH_WORKLOAD.order && w.skip == PATCH_WORKLOAD.skip;
        let mut instruction_cells = [Cell::text("-"), Cell::text("-")];
        if is_patch_workload {
            ctx.progress
                .set_message("contiguous free: counting instructions under callgrind");
            let per_page_of =
                |s: &Samples| s.median().as_secs_f64() * 1e9 / (f64::from(iterations) * 512.0);
            let instructions =
                count::per_op(COUNTED[1]).and_then(|pp| Ok((pp, count::per_op(COUNTED[0])?)));
            instruction_cells = match &instructions {
                Ok((pp, b)) => [Cell::text(format!("{pp:.0} / {b:.0}")), Cell::ratio(pp / b)],
                Err(e) => [Cell::text(format!("not counted: {e}")), Cell::text("-")],
            };
            if let Ok((pp, b)) = instructions {
                ctx.headline(
                    "freeing 512-page runs: batched over per-page, instructions (callgrind)",
                    Estimate::exact(pp / b),
                );
            }
            ctx.headline(
                "freeing 512-page runs: batched over per-page, wall time",
                ratio,
            );
            order9 = Order9 {
                ratio,
                per_page_ns: per_page_of(&per_page),
                batched_ns: per_page_of(&batched),
                instructions,
            };
        }
        let [instructions, instruction_ratio] = instruction_cells;
        t.row(vec![
            Cell::text(w.name),
            ms(&per_page),
            ms(&batched),
            Cell::ratio_ci(ratio),
            instructions,
            instruction_ratio,
            Cell::text(if is_patch_workload {
                "5.61x (4 097 358 -> 729 831 µs)"
            } else {
                "-"
            }),
            Cell::text(per_iter(pc, iterations)),
            Cell::text(per_iter(bc, iterations)),
        ]);
    }
    let cfg = zone_config();
    t.note(format!(
        "{iterations} iterations per sample on a fresh {} Ki-frame zone (MAX_ORDER 10, \
         pageblock 9, pcp high {} tuned up to {} / batch {} as derived from the zone's size, \
         one CPU), the two paths alternating round by \
         round; wall time of the whole loop including the allocation and split (median ± the \
         half-width of its 95% interval; the ratio is the median per-round ratio). Per-page = \
         `reference::free_contig_range_per_page` (one put_page per page, each order-0 page to \
         the per-cpu list, merged only when drained; the drain returns consecutive pages as \
         aligned blocks, where Linux's free_pcppages_bulk merges each page on its own, so \
         this per-page path is faster than the kernel's); batched = `Zone::free_contig_range`. \
         Instructions: callgrind, per iteration, counted inside the loop only (exact, the same \
         every run). Published in {}: 100 000 iterations of order 9 on a server-class arm64 \
         machine, in the kernel.",
        ZONE_FRAMES >> 10,
        cfg.pcp_high,
        cfg.pcp_high_max,
        cfg.pcp_batch,
        thread::FREE_CONTIG_RANGE,
    ));
    t.plot = Some(
        Plot::new(
            "workload",
            "ms per sample (median, 95% interval)",
            vec![1, 2, 3],
        )
        .log(),
    );
    (t, order9)
}

/// Both allocators, each with the same frames: the target the peer rows run on. buddy-sim
/// twice: with per-cpu lists under their lock (the default) and with CPU-local lists.
struct Pair {
    ours: ZoneCpu<Locked>,
    local: ZoneCpu<Local>,
    theirs: Peer,
}

/// CPU 0 of a zone the report keeps for its whole run, reached as `A` says.
type ZoneCpu<A> = Cpu<'static, Vec<Frame>, Vec<PerCpu>, DefaultRawMutex, A>;

/// The two instances of one row's loop over a CPU handle: under the list lock and
/// CPU-local.
macro_rules! on_both {
    (|$z:ident, $n:ident| $body:block) => {
        (
            |$z: &ZoneCpu<Locked>, $n: u32| $body,
            |$z: &ZoneCpu<Local>, $n: u32| $body,
        )
    };
}

type PairCandidate = crate::measure::Candidate<'static, Pair>;

/// The goal on every row that compares the same work.
const PEER_GOAL: f64 = 1.25;

fn peer_alloc(p: &mut Peer, n: usize) -> usize {
    p.alloc(n).unwrap_or_else(|| panic!("peer out of frames"))
}

/// Blocks of order `o` a throughput row allocates before it frees them all: half the zone,
/// at most 50 000.
const fn pair_count(o: u8) -> u32 {
    let blocks = (ZONE_FRAMES / 2) >> o;
    if blocks < 50_000 {
        blocks as u32
    } else {
        50_000
    }
}

/// A throughput row on buddy-sim: `count` blocks of order `O`, then frees them all.
fn ours_pairs<const O: u8, A: Access>(z: &ZoneCpu<A>, count: u32) {
    let held: Vec<Pfn> = (0..count)
        .map(|_| must(z.alloc_raw(AllocRequest::order(order(O)))))
        .collect();
    for f in held {
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        must(unsafe { z.free_pages(f, order(O)) });
    }
}

/// [`ours_pairs`] with frozen blocks: `alloc_frozen_pages` and `free_frozen_pages`, no
/// reference count (the peer keeps none).
fn ours_frozen_pairs<const O: u8, A: Access>(z: &ZoneCpu<A>, count: u32) {
    let held: Vec<Pfn> = (0..count)
        .map(|_| must(z.alloc_frozen_pages(order(O))))
        .collect();
    for f in held {
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        must(unsafe { z.free_frozen_pages(f, order(O)) });
    }
}

/// Blocks the order-9 control row holds at once: few enough that their heads, 12 KiB
/// apart in the frame table and so all in one L1 set, fit its ways (8 to 12 on x86).
const GROUP: u32 = 8;

/// The order-9 control row on buddy-sim: the frozen order-9 row's `count` pairs, made
/// [`GROUP`] blocks at a time (each group allocated, then freed).
fn ours_frozen_groups<A: Access>(z: &ZoneCpu<A>, count: u32) {
    for _ in 0..count / GROUP {
        ours_frozen_pairs::<9, A>(z, GROUP);
    }
}

/// [`ours_frozen_groups`] on the peer.
fn theirs_groups(p: &mut Peer, count: u32) {
    for _ in 0..count / GROUP {
        theirs_pairs::<9>(p, GROUP);
    }
}

/// A throughput row on buddy_system_allocator.
fn theirs_pairs<const O: u8>(p: &mut Peer, count: u32) {
    let held: Vec<usize> = (0..count).map(|_| peer_alloc(p, 1 << O)).collect();
    for f in held {
        p.dealloc(f, 1 << O);
    }
}

/// What a row of the peer table compares, and which goal row judges it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RowKind {
    /// Different work from the peer's (see the table's note): shown, not judged.
    Different,
    /// The same work, buddy-sim's blocks with a reference count.
    Counted,
    /// The same work, buddy-sim's blocks frozen: no reference count, as the peer keeps none.
    Frozen,
    /// The frozen order-9 row's work in groups whose blocks' heads stay in L1, on both
    /// sides: shown, not judged; the order-9 rows' misses are measured against it.
    Control,
}

impl RowKind {
    /// The start of the row's name.
    const fn prefix(self) -> &'static str {
        match self {
            Self::Frozen | Self::Control => "frozen, no reference count: ",
            Self::Different | Self::Counted => "",
        }
    }
}

/// The peer table's judged rows not clearly >= [`PEER_GOAL`]: each one's kind, its name
/// with its ratio, and its verdict.
type Slower = Vec<(RowKind, String, Verdict)>;

/// One iteration of the one-frame row on buddy-sim: an order-9 block, split, then each of
/// its pages freed on its own, as the peer's `dealloc(f + i, 1)`: no check of the whole run
/// first (`reference::free_contig_range_per_page` makes one).
fn ours_one_frame<A: Access>(z: &ZoneCpu<A>) {
    let f = must(z.alloc_raw(AllocRequest::order(order(9))));
    must(z.zone().split_page(f, order(9)));
    for i in 0..512 {
        // SAFETY: the benchmark frees what it allocated (each page of the split block,
        // whose own reference it holds), once, and no longer uses it.
        must(unsafe { z.free_pages(Pfn(f.0 + i), order(0)) });
    }
}

/// [`ours_one_frame`] with a frozen block: `alloc_frozen_pages`, `split_frozen_pages`, then
/// `free_frozen_page` of each page, no reference count (the peer keeps none).
fn ours_one_frame_frozen<A: Access>(z: &ZoneCpu<A>) {
    let f = must(z.alloc_frozen_pages(order(9)));
    // SAFETY: the benchmark splits the frozen block it allocated, once, then frees each of
    // its pages once and no longer uses it.
    unsafe {
        must(z.zone().split_frozen_pages(f, order(9)));
        for i in 0..512 {
            must(z.free_frozen_page(Pfn(f.0 + i)));
        }
    }
}

/// One iteration of the one-frame row on buddy_system_allocator.
fn theirs_one_frame(p: &mut Peer) {
    let f = peer_alloc(p, 512);
    for i in 0..512 {
        p.dealloc(f + i, 1);
    }
}

/// For the instruction counts: `n` iterations of `iteration`, each inside [`counted`], on
/// buddy-sim with CPU-local lists.
fn count_local(n: u32, iteration: fn(&ZoneCpu<Local>)) {
    let z = local_cpu();
    for _ in 0..n {
        counted(&mut || iteration(&z));
    }
}

/// [`count_local`] on the peer.
fn count_peer(n: u32, iteration: fn(&mut Peer)) {
    let mut p = peer();
    for _ in 0..n {
        counted(&mut || iteration(&mut p));
    }
}

/// Iterations of the one-frame row a count runs (and twice as many): enough that where the
/// per-cpu list's drains fall (one every 1 217 frees) moves the count per frame by a few
/// instructions at most.
const ONE_FRAME_RUNS: u32 = 40;

/// The one-frame row's counted workloads (callgrind, `report count`): buddy-sim with
/// CPU-local lists, with a reference count and frozen, then the peer.
pub const ONE_FRAME_COUNTED: [Counted; 3] = [
    Counted {
        name: "one-frame-buddy-local",
        ops: ONE_FRAME_RUNS,
        run: |n| count_local(n, ours_one_frame),
    },
    Counted {
        name: "one-frame-frozen-local",
        ops: ONE_FRAME_RUNS,
        run: |n| count_local(n, ours_one_frame_frozen),
    },
    Counted {
        name: "one-frame-peer",
        ops: ONE_FRAME_RUNS,
        run: |n| count_peer(n, theirs_one_frame),
    },
];

/// The counted workloads of the throughput rows of `$o`s: per order, buddy-sim with
/// CPU-local lists, with a reference count and frozen, then the peer; each run one row's
/// allocations, then its frees.
macro_rules! pair_workloads {
    ($($o:literal),+) => {[$(
        (
            $o,
            [
                Counted {
                    name: concat!("pairs-order", $o, "-buddy-local"),
                    ops: 2,
                    run: |n| count_local(n, |z| ours_pairs::<$o, Local>(z, pair_count($o))),
                },
                Counted {
                    name: concat!("pairs-order", $o, "-frozen-local"),
                    ops: 2,
                    run: |n| {
                        count_local(n, |z| ours_frozen_pairs::<$o, Local>(z, pair_count($o)))
                    },
                },
                Counted {
                    name: concat!("pairs-order", $o, "-peer"),
                    ops: 2,
                    run: |n| count_peer(n, |p| theirs_pairs::<$o>(p, pair_count($o))),
                },
            ],
        )
    ),+]};
}

/// The throughput rows' orders and their counted workloads (callgrind, `report count`), as
/// [`ONE_FRAME_COUNTED`]'s.
pub const PAIR_COUNTED: [(u8, [Counted; 3]); 3] = pair_workloads!(0, 3, 9);

/// A row's counted workloads `[ours, the peer's]` and the units (pairs, or frames) one
/// counted run holds.
type RowCounts = ([Counted; 2], f64);

/// The order-9 control row's counted workloads: buddy-sim's (frozen, CPU-local lists), the
/// peer's; each run one row's groups.
pub const GROUPS_COUNTED: [Counted; 2] = [
    Counted {
        name: "groups-order9-frozen-local",
        ops: 2,
        run: |n| count_local(n, |z| ours_frozen_groups::<Local>(z, pair_count(9))),
    },
    Counted {
        name: "groups-order9-peer",
        ops: 2,
        run: |n| count_peer(n, |p| theirs_groups(p, pair_count(9))),
    },
];

/// The counts of the throughput row of order `o` (`None` for an order not counted), `kind`
/// saying which of buddy-sim's workloads.
fn pair_counts(o: u8, kind: RowKind) -> Option<RowCounts> {
    let &(_, [ours, frozen, peer]) = PAIR_COUNTED.iter().find(|(k, _)| *k == o)?;
    let ours = if kind == RowKind::Frozen {
        frozen
    } else {
        ours
    };
    Some(([ours, peer], f64::from(pair_count(o))))
}

/// A row's instructions per unit of its work (callgrind), ours and the peer's from its
/// workloads `[ours, peer]`, each counted run holding `units` of them, with their ratio; or
/// why not counted.
fn row_instructions([ours, peer]: [Counted; 2], units: f64) -> String {
    match (count::per_op(ours), count::per_op(peer)) {
        (Ok(ours), Ok(peer)) => format!(
            "{:.0} / {:.0} (peer ÷ ours {:.2}x)",
            ours / units,
            peer / units,
            peer / ours
        ),
        (Err(e), _) | (_, Err(e)) => format!("not counted: {e}"),
    }
}

/// A row's L1 data-cache misses per unit of its work (callgrind's cache simulation), ours
/// and the peer's, as [`row_instructions`], in this CPU's L1 and then in a fully associative
/// one of its size (what remains there is capacity; the difference, set conflicts); or why
/// not counted.
fn row_l1d_misses([ours, peer]: [Counted; 2], units: f64) -> String {
    let misses = |cache| {
        Ok::<_, String>((
            count::l1d_misses_per_op(ours, cache)? / units,
            count::l1d_misses_per_op(peer, cache)? / units,
        ))
    };
    match (misses(Cache::ThisCpu), misses(Cache::FullyAssociative)) {
        (Ok((ours, peer)), Ok((ours_fa, peer_fa))) => {
            format!("{ours:.2} / {peer:.2} (fully associative: {ours_fa:.2} / {peer_fa:.2})")
        }
        (Ok((ours, peer)), Err(e)) => {
            format!("{ours:.2} / {peer:.2} (fully associative: not counted: {e})")
        }
        (Err(e), _) => format!("not counted: {e}"),
    }
}

/// CPU 0 of a zone of [`ZONE_FRAMES`] frames, kept for the report's run, under its list lock.
fn locked_cpu() -> ZoneCpu<Locked> {
    must(Box::leak(Box::new(zone())).cpu(0))
}

/// CPU 0 of a zone of [`ZONE_FRAMES`] frames, kept for the report's run, with CPU-local lists.
fn local_cpu() -> ZoneCpu<Local> {
    let zone: &'static BoxedZone = Box::leak(Box::new(zone()));
    // SAFETY: the report uses this zone from one thread, through this one handle: no two
    // calls ever overlap, and nothing else reaches CPU 0's lists.
    must(unsafe { zone.local_cpu(0) })
}

/// What [`peer_table`] gives.
struct PeerTable {
    /// The table.
    table: Table,
    /// Its rows not clearly >= [`PEER_GOAL`].
    slower: Slower,
    /// The one-frame row's ns per frame (buddy-sim with CPU-local lists, the peer), if
    /// measured.
    one_frame: Option<(f64, f64)>,
    /// The counted throughput rows' instructions.
    paces: Vec<Pace>,
    /// The frozen order-9 row's time a pair over its control's, per round, buddy-sim with
    /// CPU-local lists on both, measured side by side.
    over_control: Estimate,
}

/// What a throughput row's pair (an allocation and its free) costs in instructions.
#[derive(Clone, Copy)]
struct Pace {
    kind: RowKind,
    order: u8,
    /// Instructions a pair: buddy-sim's (CPU-local lists), the peer's.
    instructions: [f64; 2],
    /// Of buddy-sim's, those its per-CPU lists' refills and drains execute ([`TRANSIT`]).
    transit: Option<f64>,
}

/// The functions of a block's way from the buddy to a per-CPU list and back (callgrind's
/// `--toggle-collect` patterns): a refill, which takes a batch of blocks from the buddy onto
/// a list, and a drain, which returns blocks past the list's high mark to the buddy, merging
/// them there.
const TRANSIT: &[&str] = &["*::PcpLists::refill", "*::PcpLists::drain"];

/// buddy-sim against buddy_system_allocator on the same work.
fn peer_table(ctx: &SectionContext, iterations: u32, budget: Budget) -> PeerTable {
    let mut t = Table::new(
        "contig-free-peer",
        "buddy-sim vs the buddy_system_allocator crate (ns per operation, median)",
        &[
            "workload",
            "buddy-sim ns",
            "buddy-sim, CPU-local lists ns",
            "buddy_system_allocator ns",
            "speedup",
            "speedup, CPU-local lists",
            "instructions per pair (one frame at a time: per frame), CPU-local / peer (callgrind)",
            "L1d misses per pair (per frame), CPU-local / peer (callgrind's cache simulation: this CPU's L1, and one of its size fully associative)",
            "ns per instruction, CPU-local / peer",
        ],
    );
    t.note(format!(
        "Rows after the first compare the same work; the goal (>= {PEER_GOAL}x) is judged on \
         those but the last, with CPU-local lists: one CPU, no atomic instruction for its \
         lists, as buddy_system_allocator (unlocked, one CPU) has none. The last row is a \
         control, not judged: the frozen order-9 row's calls made {GROUP} blocks at a time \
         (each group allocated, then freed), so that the blocks' heads, which all pick one \
         L1 set (the goals' notes), stay in L1: against it the order-9 rows' misses are \
         measured."
    ));
    let mut pair = Pair {
        ours: locked_cpu(),
        local: local_cpu(),
        theirs: peer(),
    };
    /// A measured row: its kind, name and counts, ns per operation (buddy-sim under its
    /// list lock, with CPU-local lists, the peer) and the speedups of both over the peer.
    struct Row {
        kind: RowKind,
        name: String,
        /// The order of a throughput row's blocks.
        order: Option<u8>,
        counts: Option<RowCounts>,
        ns: [Estimate; 3],
        speedup: Estimate,
        local_speedup: Estimate,
    }
    let mut rows: Vec<Row> = Vec::new();
    // Each row: our loop on both zones and theirs, measured round-robin; ns per operation.
    type Ours = (fn(&ZoneCpu<Locked>, u32), fn(&ZoneCpu<Local>, u32));
    let mut measure =
        |(kind, name, order, counts): (RowKind, String, Option<u8>, Option<RowCounts>),
         ops: u32,
         (ours, local): Ours,
         theirs: fn(&mut Peer, u32)| {
            ctx.step(format!("peer: {name}"));
            let mut candidates: [PairCandidate; 3] = [
                Box::new(move |p: &mut Pair| ours(&p.ours, ops)),
                Box::new(move |p: &mut Pair| local(&p.local, ops)),
                Box::new(move |p: &mut Pair| theirs(&mut p.theirs, ops)),
            ];
            let s = Samples::interleaved(budget, &mut pair, &mut candidates);
            let ns = |s: &Samples| s.seconds().map(|x| x * 1e9 / f64::from(ops));
            rows.push(Row {
                kind,
                name,
                order,
                counts,
                ns: [ns(&s[0]), ns(&s[1]), ns(&s[2])],
                speedup: s[0].speedup_over(&s[2]),
                local_speedup: s[1].speedup_over(&s[2]),
            });
        };
    fn peer_alloc_dealloc_512(p: &mut Peer, n: u32) {
        for _ in 0..n {
            let f = peer_alloc(p, 512);
            p.dealloc(f, 512);
        }
    }

    measure(
        (
            RowKind::Different,
            "alloc 512 frames + split + free_contig_range (ours) / dealloc(512) (theirs)".into(),
            None,
            None,
        ),
        iterations,
        on_both!(|z, n| {
            for _ in 0..n {
                let f = must(z.alloc_raw(AllocRequest::order(order(9))));
                must(z.zone().split_page(f, order(9)));
                // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
                must(unsafe { z.free_contig_range(f, 512) });
            }
        }),
        peer_alloc_dealloc_512,
    );
    measure(
        (
            RowKind::Counted,
            "alloc 512 frames + free them as one block (free_pages order 9)".into(),
            None,
            None,
        ),
        iterations,
        on_both!(|z, n| {
            for _ in 0..n {
                let f = must(z.alloc_raw(AllocRequest::order(order(9))));
                // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
                must(unsafe { z.free_pages(f, order(9)) });
            }
        }),
        peer_alloc_dealloc_512,
    );
    // An order-9 block split, its pages freed one at a time: `$ours` the buddy-sim
    // iteration, `$counted` its workload in [`ONE_FRAME_COUNTED`].
    macro_rules! one_frame {
        ($kind:expr, $ours:ident, $counted:literal) => {
            measure(
                (
                    $kind,
                    format!(
                        "{}alloc 512 frames + free them one frame at a time",
                        $kind.prefix()
                    ),
                    None,
                    Some(([ONE_FRAME_COUNTED[$counted], ONE_FRAME_COUNTED[2]], 512.0)),
                ),
                iterations / 10,
                on_both!(|z, n| {
                    for _ in 0..n {
                        $ours(z);
                    }
                }),
                |p, n| {
                    for _ in 0..n {
                        theirs_one_frame(p);
                    }
                },
            )
        };
    }
    // Allocation throughput: N blocks of each order, then free them all; `$ours` the
    // buddy-sim loop.
    macro_rules! throughput {
        ($kind:expr, $ours:ident, $($o:literal),+) => {$(
            measure(
                (
                    $kind,
                    format!(
                        "{}{} x alloc order {}, then free all",
                        $kind.prefix(),
                        pair_count($o),
                        $o
                    ),
                    Some($o),
                    pair_counts($o, $kind),
                ),
                pair_count($o),
                ($ours::<$o, Locked>, $ours::<$o, Local>),
                theirs_pairs::<$o>,
            );
        )+};
    }
    one_frame!(RowKind::Counted, ours_one_frame, 0);
    throughput!(RowKind::Counted, ours_pairs, 0, 3, 9);
    // The same rows with frozen blocks, no reference count: the peer keeps none.
    one_frame!(RowKind::Frozen, ours_one_frame_frozen, 1);
    throughput!(RowKind::Frozen, ours_frozen_pairs, 0, 3, 9);
    // The control: the frozen order-9 row's work with its blocks' heads kept in L1.
    measure(
        (
            RowKind::Control,
            format!(
                "{}{} x alloc order 9, then free all, {GROUP} blocks at a time (control: \
                 their heads stay in L1)",
                RowKind::Control.prefix(),
                pair_count(9)
            ),
            Some(9),
            Some((GROUPS_COUNTED, f64::from(pair_count(9)))),
        ),
        pair_count(9),
        (ours_frozen_groups::<Locked>, ours_frozen_groups::<Local>),
        theirs_groups,
    );

    // The frozen order-9 row and its control side by side, round by round: the rows above
    // are measured one after the other, and the host's speed drifts between them.
    ctx.step("peer: the frozen order-9 row against its control");
    let mut both: [PairCandidate; 2] = [
        Box::new(|p: &mut Pair| ours_frozen_pairs::<9, Local>(&p.local, pair_count(9))),
        Box::new(|p: &mut Pair| ours_frozen_groups::<Local>(&p.local, pair_count(9))),
    ];
    let s = Samples::interleaved(budget, &mut pair, &mut both);
    let over_control = s[1].speedup_over(&s[0]);
    let mut slower = Slower::new();
    let mut paces = Vec::new();
    // The one-frame row, per frame (alloc and split included), for the floor's note.
    let one_frame = rows
        .iter()
        .find(|r| {
            r.counts
                .is_some_and(|([w, _], _)| w.name == ONE_FRAME_COUNTED[0].name)
        })
        .map(|r| (r.ns[1].median / 512.0, r.ns[2].median / 512.0));
    for r in rows {
        let verdict = r.local_speedup.judge(PEER_GOAL, true);
        if matches!(r.kind, RowKind::Counted | RowKind::Frozen) {
            if verdict != Verdict::Met {
                let row = format!("{} ({})", r.name, ratio_text(r.local_speedup));
                slower.push((r.kind, row, verdict));
            }
            ctx.headline(
                format!(
                    "buddy-sim (CPU-local lists) over buddy_system_allocator: {}",
                    r.name
                ),
                r.local_speedup,
            );
        }
        // The misses first: their runs under the cache simulation count the instructions too.
        let misses = r
            .counts
            .map_or_else(|| "-".into(), |(w, units)| row_l1d_misses(w, units));
        let instructions = r
            .counts
            .map_or_else(|| "-".into(), |(w, units)| row_instructions(w, units));
        let [ours, local, theirs] = r.ns;
        // Instructions per counted run, buddy-sim's and the peer's, where both were counted.
        let counted = r.counts.and_then(|([w, peer], units)| {
            let (Ok(mine), Ok(theirs)) = (count::per_op(w), count::per_op(peer)) else {
                return None;
            };
            Some((w, [mine, theirs], units))
        });
        // ns per instruction: a throughput row times pairs (a counted run holds `units` of
        // them), the one-frame row whole iterations (one counted run).
        let pace = counted.map(|(_, [mine, theirs_count], units)| {
            let timed = if r.order.is_some() { units } else { 1.0 };
            [
                local.median * timed / mine,
                theirs.median * timed / theirs_count,
            ]
        });
        if let (Some(order), Some((w, [mine, theirs], units))) = (r.order, counted) {
            paces.push(Pace {
                kind: r.kind,
                order,
                instructions: [mine / units, theirs / units],
                transit: count::per_op_inside(w, TRANSIT).ok().map(|c| c / units),
            });
        }
        t.row(vec![
            Cell::text(r.name),
            Cell::estimate(ours, 0, ""),
            Cell::estimate(local, 0, ""),
            Cell::estimate(theirs, 0, ""),
            Cell::ratio_ci(r.speedup),
            Cell::ratio_ci(r.local_speedup),
            Cell::text(instructions),
            Cell::text(misses),
            Cell::text(pace.map_or_else(
                || "-".into(),
                |[ours, peer]| format!("{ours:.3} / {peer:.3}"),
            )),
        ]);
    }
    t.note(format!(
        "Same frame counts on both: a {} Ki-frame zone, MAX_ORDER 10 (`FrameAllocator<11>`), \
         its frame metadata in huge pages as a kernel's frame table is (`frame_table`; the \
         peer keeps its free blocks in small B-trees on the process heap). \
         buddy_system_allocator keeps a BTreeSet per order and has no refcounts, per-cpu lists \
         or per-page checks; buddy-sim does all of that (per-cpu lists for orders 0-3 and 9). \
         `free_contig_range` must drop a reference and check each of the 512 pages (its \
         contract), which `dealloc(512)` never does: the first row compares different work, \
         the second the same work. One frame at a time: `free_pages` of each order-0 page \
         of the split block (it drops the page's reference, checks it and frees it to the \
         per-cpu list; drains merge), as the peer's `dealloc(f + i, 1)`. Rows named \
         \"{}...\" make the same calls with frozen blocks (`alloc_frozen_pages`, \
         `free_frozen_pages`; one frame at a time: `split_frozen_pages`, then \
         `free_frozen_page` of each page), which have no reference count to drop, so no \
         compare-and-swap, as the peer keeps none; each free still checks the block's head. \
         ns per iteration (per allocation + free for the throughput rows), median ± the \
         half-width of its 95% interval, the three paths once per round in a shuffled order; \
         the speedup is the median per-round ratio. CPU-local lists: \
         `Zone::local_cpu` (Linux's local_lock: the CPU's lists reached without an \
         atomic instruction; a free still drops its reference by compare-and-swap). \
         Instructions: callgrind's count of one throughput row (all its allocations, then \
         all its frees) in steady state (four runs counted less two, halved: what the first run does once \
         cancels out), per allocation + free; one frame at a time: {} iterations counted \
         less {}, per frame freed. L1d misses: the same runs under callgrind's \
         cache simulation (`--cache-sim=yes`, the L1 data cache valgrind configures from this \
         CPU; it simulates no L2), reads and writes: lines an operation reaches that are not \
         in L1; in parentheses the same runs with an L1 of the same size and line in which \
         any line may go anywhere (`--D1=size,size/line,line`): what misses there lacks \
         capacity, and what misses only in the CPU's L1 is a set conflict, more lines whose \
         addresses pick one set than the set has ways. ns per instruction: the CPU-local \
         column's median over the instructions callgrind counts for the same operation, and \
         the peer's: how fast each side runs its instructions on this CPU (a miss the core \
         cannot overlap with other work raises it).",
        ZONE_FRAMES >> 10,
        RowKind::Frozen.prefix(),
        2 * ONE_FRAME_RUNS,
        ONE_FRAME_RUNS,
    ));
    t.plot = Some(
        Plot::new(
            "workload",
            "ns per operation (median, 95% interval)",
            vec![1, 2],
        )
        .log(),
    );
    PeerTable {
        table: t,
        slower,
        one_frame,
        paces,
        over_control,
    }
}

#[cfg(test)]
mod tests {
    use super::{Estimate, Pace, RowKind, order9_pace_note};

    fn pace(kind: RowKind, instructions: f64, transit: f64) -> Pace {
        Pace {
            kind,
            order: 9,
            instructions: [instructions, 600.0],
            transit: Some(transit),
        }
    }

    #[test]
    fn the_order9_note_takes_time_per_instruction_against_the_control_and_the_transit() {
        let paces = [
            pace(RowKind::Counted, 700.0, 460.0),
            pace(RowKind::Frozen, 660.0, 450.0),
            pace(RowKind::Control, 528.0, 300.0),
        ];
        let ratio = |median, lo, hi| Estimate {
            median,
            lo,
            hi,
            n: 20,
        };
        // 660 instructions in 1.25x the control's time for 528: as fast per instruction.
        let same = order9_pace_note(&paces, ratio(1.25, 1.2, 1.3)).unwrap();
        assert!(
            same.contains("1.00x [0.96, 1.04] as long per instruction"),
            "{same}"
        );
        assert!(
            same.contains("no time that this run tells from noise"),
            "{same}"
        );
        assert!(
            same.contains("460 of buddy-sim's a pair (frozen: 450)"),
            "{same}"
        );
        assert!(same.contains("is 240 instructions (frozen: 210)"), "{same}");
        // 1.5x the control's time: 1.2x as long per instruction, a sixth of the pair.
        let slower = order9_pace_note(&paces, ratio(1.5, 1.45, 1.55)).unwrap();
        assert!(
            slower.contains("cost it at most 17% of a frozen pair's time"),
            "{slower}"
        );
        // Without the control's counts there is nothing to compare.
        assert!(order9_pace_note(&paces[..2], ratio(1.5, 1.45, 1.55)).is_none());
        // More instructions than the peer's 600: short by instructions; fewer: on time.
        assert!(
            same.contains("short by instructions: 700 a pair (frozen: 660)"),
            "{same}"
        );
        let mut fewer = paces;
        fewer[0].instructions[0] = 560.0;
        fewer[1].instructions[0] = 520.0;
        let on_time = order9_pace_note(&fewer, ratio(1.25, 1.2, 1.3)).unwrap();
        assert!(
            on_time.contains("fewer instructions than the peer, 560 a pair (frozen: 520)"),
            "{on_time}"
        );
        assert!(!on_time.contains("short by instructions"), "{on_time}");
        // Only the frozen row below the peer: each row told as it is.
        let mut between = paces;
        between[1].instructions[0] = 580.0;
        let split = order9_pace_note(&between, ratio(1.25, 1.2, 1.3)).unwrap();
        assert!(
            split.contains(
                "reference count is short by instructions, 700 a pair against the peer's 600; \
                 the frozen row executes fewer, 580"
            ),
            "{split}"
        );
    }
}
