//! The "contiguous free" section: seed 003's loop and the `buddy_system_allocator` peer.
//!
//! 1. N x (alloc order k, split_page, free the run): batched `free_contig_range` vs the
//!    per-page path (one `put_page` per page), for orders 9 (the seed's), 3, 4 and 10, and a
//!    misaligned run, with the work counters per iteration.
//! 2. Against `buddy_system_allocator::FrameAllocator`: whole-run free, one-frame frees, and
//!    allocation throughput for orders 0, 3 and 9.

use crate::measure::Samples;
use crate::{Cell, Plot, Section, SectionContext, Table};
use buddy_sim::reference::free_contig_range_per_page;
use buddy_sim::{BoxedZone, BuddyError, OpCounters, Order, Pfn, ZoneConfig};
use buddy_system_allocator::FrameAllocator;
use std::time::Duration;

/// The contiguous-free section.
pub struct ContigFree;

/// Frames in the zone: 1 GiB of 4 KiB frames.
const ZONE_FRAMES: u64 = 1 << 18;
/// MAX_ORDER 10, as `FrameAllocator<11>`.
type Peer = FrameAllocator<11>;

fn zone() -> BoxedZone {
    BoxedZone::new_boxed(ZoneConfig::new(Pfn(0), ZONE_FRAMES))
        .unwrap_or_else(|e| panic!("zone: {e}"))
}

fn peer() -> Peer {
    let mut p = Peer::new();
    p.add_frame(0, ZONE_FRAMES as usize);
    p
}

fn ok<T>(r: Result<T, BuddyError>) -> T {
    r.unwrap_or_else(|e| panic!("allocator error on a valid workload: {e}"))
}

fn order(o: u8) -> Order {
    ok(Order::new(o))
}

/// How a run is freed in one iteration of the seed loop.
#[derive(Clone, Copy)]
enum Free {
    Batched,
    PerPage,
}

/// One seed-loop workload: allocate order `k`, split, then free `[skip, 2^k)` and, when
/// `skip > 0`, the first `skip` pages separately (a run that starts misaligned).
#[derive(Clone, Copy)]
struct Workload {
    name: &'static str,
    order: u8,
    skip: u64,
}

const WORKLOADS: [Workload; 5] = [
    Workload {
        name: "order 9 (seed 003)",
        order: 9,
        skip: 0,
    },
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

fn seed_loop(w: Workload, free: Free, iterations: u32) -> (Duration, OpCounters) {
    let z = zone();
    let o = order(w.order);
    let pages = o.pages();
    let run = |z: &BoxedZone, pfn: Pfn, nr: u64| match free {
        Free::Batched => ok(z.free_contig_range(0, pfn, nr)),
        Free::PerPage => ok(free_contig_range_per_page(z, 0, pfn, nr)),
    };
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        let pfn = ok(z.alloc_pages(0, o));
        ok(z.split_page(pfn, o));
        run(&z, Pfn(pfn.0 + w.skip), pages - w.skip);
        if w.skip > 0 {
            run(&z, pfn, w.skip);
        }
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
        (WORKLOADS.len() + 3 + 3) as u64
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let iterations: u32 = if ctx.quick { 10_000 } else { 100_000 };
        let runs = if ctx.quick { 1 } else { 3 };
        let (seed, order9) = seed_table(ctx, iterations, runs);
        let (peer, slower_rows) = peer_table(ctx, iterations, runs);
        let mut goals = Table::new(
            "contig-free-goals",
            "Contiguous-free goals, measured",
            &["goal", "measured", "met"],
        );
        let met = |ok: bool| Cell::text(if ok { "yes" } else { "NO" });
        goals.row(vec![
            Cell::text(">= 10x over the per-page path for order 9"),
            Cell::text(format!("{:.1}x", order9.ratio)),
            met(order9.ratio >= 10.0),
        ]);
        goals.row(vec![
            Cell::text(
                "faster than buddy_system_allocator on every row that compares the same work",
            ),
            Cell::text(if slower_rows.is_empty() {
                "every row".into()
            } else {
                format!("slower on: {}", slower_rows.join("; "))
            }),
            met(slower_rows.is_empty()),
        ]);
        if order9.ratio < 10.0 {
            goals.note(format!(
                "Why the seed-003 ratio falls short: per page of an iteration, the per-page path \
                 costs {:.1} ns and the batched one {:.1} ns. Both drop each page's reference with \
                 an atomic compare-and-swap (as the kernel's put_page_testzero), so that two CPUs \
                 freeing the same page cannot both free it; that one CAS per page is the batched \
                 path's floor, and 10x would need the per-page path to cost ten of them.",
                order9.per_page_ns, order9.batched_ns
            ));
        }
        if !slower_rows.is_empty() {
            goals.note(
                "Where buddy-sim is slower: each of its frees drops a reference by \
                 compare-and-swap, takes the CPU's lock and pushes the block onto the per-CPU \
                 list, from which a later drain merges it under the zone lock; \
                 buddy_system_allocator has no reference counts, no per-CPU lists and no lock \
                 of its own, and merges at once. The per-CPU layer is what makes the SMP table \
                 scale.",
            );
        }
        goals.note("Goals are reported, never asserted in tests.");
        vec![seed, peer, goals]
    }
}

/// What the seed table measured for seed 003's own workload (order 9).
struct Order9 {
    ratio: f64,
    /// ns per page of the whole iteration (alloc, split, free), per-page path and batched.
    per_page_ns: f64,
    batched_ns: f64,
}

fn seed_table(ctx: &SectionContext, iterations: u32, runs: usize) -> (Table, Order9) {
    let mut t = Table::new(
        "contig-free-seed003",
        "Seed 003: N x (alloc, split_page, free the run), per-page vs batched free_contig_range",
        &[
            "workload",
            "per-page ms",
            "batched ms",
            "ratio",
            "seed 003",
            "per-page zone locks / cpu locks / list ops / prepares per iteration",
            "batched zone locks / cpu locks / list ops / prepares per iteration",
        ],
    );
    let mut order9 = Order9 {
        ratio: f64::NAN,
        per_page_ns: f64::NAN,
        batched_ns: f64::NAN,
    };
    for w in WORKLOADS {
        ctx.step(format!(
            "contiguous free: {}, both paths alternating",
            w.name
        ));
        // Alternate the two paths run by run (starting with each in turn) so drift on a
        // shared host hits both alike; each run starts from a fresh zone.
        let mut times = [Vec::new(), Vec::new()];
        let mut counters = [OpCounters::default(); 2];
        for round in 0..runs {
            for k in 0..2 {
                let i = (round + k) % 2;
                let free = if i == 0 { Free::PerPage } else { Free::Batched };
                let (d, c) = seed_loop(w, free, iterations);
                times[i].push(d);
                counters[i] = c;
            }
        }
        let [per_page, batched] = times.map(Samples::from_durations);
        let [pc, bc] = counters;
        let ms = |s: &Samples| s.median().as_secs_f64() * 1e3;
        let ratio = ms(&per_page) / ms(&batched);
        if w.order == 9 && w.skip == 0 {
            let per_page_of = |s: &Samples| ms(s) * 1e6 / (f64::from(iterations) * 512.0);
            order9 = Order9 {
                ratio,
                per_page_ns: per_page_of(&per_page),
                batched_ns: per_page_of(&batched),
            };
        }
        t.row(vec![
            Cell::text(w.name),
            Cell::num(ms(&per_page), 1, ""),
            Cell::num(ms(&batched), 1, ""),
            Cell::ratio(ratio),
            Cell::text(if w.order == 9 && w.skip == 0 {
                "5.61x (4 097 358 -> 729 831 µs)"
            } else {
                "-"
            }),
            Cell::text(per_iter(pc, iterations)),
            Cell::text(per_iter(bc, iterations)),
        ]);
    }
    t.note(format!(
        "{iterations} iterations on a {} Ki-frame zone (MAX_ORDER 10, pageblock 9, pcp high \
         1536 / batch 63, one CPU); median of {runs} run(s) (the two paths alternating), wall time of the whole loop \
         including the allocation and split. Per-page = `reference::free_contig_range_per_page` \
         (one put_page per page, each order-0 page to the per-cpu list, merged only when \
         drained); batched = `Zone::free_contig_range`. Seed 003 measured 100 000 iterations \
         of order 9 on a server-class arm64 machine in the kernel.",
        ZONE_FRAMES >> 10
    ));
    t.plot = Some(Plot {
        y_label: "ms (median)".into(),
        series: vec![1, 2],
        log_y: true,
    });
    (t, order9)
}

/// Both allocators, each with the same frames: the target the peer rows run on.
struct Pair {
    ours: BoxedZone,
    theirs: Peer,
}

type PairCandidate = crate::measure::Candidate<'static, Pair>;

fn peer_table(ctx: &SectionContext, iterations: u32, runs: usize) -> (Table, Vec<String>) {
    let mut t = Table::new(
        "contig-free-peer",
        "buddy-sim vs the buddy_system_allocator crate (ns per operation, median)",
        &[
            "workload",
            "buddy-sim ns",
            "buddy_system_allocator ns",
            "buddy-sim speedup",
        ],
    );
    t.note("Rows after the first compare the same work; the goal is judged on those.");
    let o9 = order(9);
    let mut pair = Pair {
        ours: zone(),
        theirs: peer(),
    };
    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    // Each row: our loop and theirs, measured round-robin; ns per operation.
    let mut measure = |name: String, ops: u32, ours: PairCandidate, theirs: PairCandidate| {
        ctx.step(format!("peer: {name}"));
        let mut candidates = [ours, theirs];
        let s = Samples::interleaved(runs, &mut pair, &mut candidates);
        let ns = |s: &Samples| s.median().as_secs_f64() * 1e9 / f64::from(ops);
        rows.push((name, ns(&s[0]), ns(&s[1])));
    };
    let peer_alloc =
        |p: &mut Peer, n: usize| p.alloc(n).unwrap_or_else(|| panic!("peer out of frames"));

    measure(
        "alloc 512 frames + split + free_contig_range (ours) / dealloc(512) (theirs)".into(),
        iterations,
        Box::new(move |p: &mut Pair| {
            for _ in 0..iterations {
                let f = ok(p.ours.alloc_pages(0, o9));
                ok(p.ours.split_page(f, o9));
                ok(p.ours.free_contig_range(0, f, 512));
            }
        }),
        Box::new(move |p: &mut Pair| {
            for _ in 0..iterations {
                let f = peer_alloc(&mut p.theirs, 512);
                p.theirs.dealloc(f, 512);
            }
        }),
    );
    measure(
        "alloc 512 frames + free them as one block (free_pages order 9)".into(),
        iterations,
        Box::new(move |p: &mut Pair| {
            for _ in 0..iterations {
                let f = ok(p.ours.alloc_pages(0, o9));
                ok(p.ours.free_pages(0, f, o9));
            }
        }),
        Box::new(move |p: &mut Pair| {
            for _ in 0..iterations {
                let f = peer_alloc(&mut p.theirs, 512);
                p.theirs.dealloc(f, 512);
            }
        }),
    );
    let n = iterations / 10;
    measure(
        "alloc 512 frames + free them one frame at a time".into(),
        n,
        Box::new(move |p: &mut Pair| {
            for _ in 0..n {
                let f = ok(p.ours.alloc_pages(0, o9));
                ok(p.ours.split_page(f, o9));
                ok(free_contig_range_per_page(&p.ours, 0, f, 512));
            }
        }),
        Box::new(move |p: &mut Pair| {
            for _ in 0..n {
                let f = peer_alloc(&mut p.theirs, 512);
                for i in 0..512 {
                    p.theirs.dealloc(f + i, 1);
                }
            }
        }),
    );
    // Allocation throughput: N blocks, then free them all.
    for o in [0u8, 3, 9] {
        let count = ((ZONE_FRAMES / 2) >> o).min(50_000) as u32;
        let ord = order(o);
        measure(
            format!("{count} x alloc order {o}, then free all"),
            count,
            Box::new(move |p: &mut Pair| {
                let held: Vec<Pfn> = (0..count).map(|_| ok(p.ours.alloc_pages(0, ord))).collect();
                for f in held {
                    ok(p.ours.free_pages(0, f, ord));
                }
            }),
            Box::new(move |p: &mut Pair| {
                let held: Vec<usize> = (0..count)
                    .map(|_| peer_alloc(&mut p.theirs, 1 << o))
                    .collect();
                for f in held {
                    p.theirs.dealloc(f, 1 << o);
                }
            }),
        );
    }

    let mut slower = Vec::new();
    // The first row compares different work (see the note): it is shown, not judged.
    for (i, (name, ours, theirs)) in rows.into_iter().enumerate() {
        if i > 0 && ours >= theirs {
            slower.push(format!("{name} ({:.2}x)", theirs / ours));
        }
        t.row(vec![
            Cell::text(name),
            Cell::num(ours, 0, ""),
            Cell::num(theirs, 0, ""),
            Cell::ratio(theirs / ours),
        ]);
    }
    t.note(format!(
        "Same frame counts on both: a {} Ki-frame zone, MAX_ORDER 10 (`FrameAllocator<11>`). \
         buddy_system_allocator keeps a BTreeSet per order and has no refcounts, per-cpu lists \
         or per-page checks; buddy-sim does all of that (per-cpu lists for orders 0-3 and 9). \
         `free_contig_range` must drop a reference and check each of the 512 pages (its \
         contract), which `dealloc(512)` never does: the first row compares different work, \
         the second the same work. \
         ns per iteration (per allocation + free for the throughput rows), median of {runs} \
         run(s), the two allocators measured round-robin.",
        ZONE_FRAMES >> 10
    ));
    t.plot = Some(Plot {
        y_label: "ns (median)".into(),
        series: vec![1, 2],
        log_y: true,
    });
    (t, slower)
}
