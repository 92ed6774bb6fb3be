//! The "numa" section: a host's memory in nodes ([`buddy_sim::NodeSet`]).
//!
//! - Allocation rates: an order-0 allocation and its free, 50 000 at a time, through a lone
//!   zone, through a node set on the CPU's node, on a remote node (`Preferred`), and with the
//!   CPU's node full so every allocation falls back to the next node (the first pass tries
//!   the full node's lists and buddy, then takes the next node's). Ratios to the lone zone,
//!   per round, side by side. This machine has no NUMA hardware: the figures are the
//!   allocator's own cost, not remote memory latency.
//! - Fallback under pressure: three nodes (node 0 nearer to node 2 than to node 1), every
//!   allocation on CPU 0 with the local policy until memory runs out: where each phase
//!   landed, in order, and its time per allocation.
//! - Offline time per GiB: a 256 MiB range of a node's 1 GiB zone taken offline with no
//!   allocation in it, and with a quarter of its frames movable pages whose contents the
//!   migrate callback copies (through memory backing the zone); then online again.

use std::time::Instant;

use buddy_sim::{
    BoxedNodeSet, BoxedZone, FrameMemory, Migration, NodeId, NodePolicy, OffsetMap, Pfn, Topology,
    ZoneConfig,
};

use crate::measure::{Budget, Candidate, Estimate, Samples};
use crate::{Cell, Section, SectionContext, Table, must, order};

/// The NUMA section.
pub struct Numa;

/// Frames per node in the rate and offline workloads (1 GiB).
const NODE_FRAMES: u64 = 1 << 18;
/// First frame of node 0.
const START: u64 = 1 << 20;
/// Allocations per timed round.
const BATCH: u32 = 50_000;

/// Two CPUs, CPU 0 on node 0 and CPU 1 on node 1, 20 apart.
fn two_nodes() -> Topology {
    must(Topology::new(2, &[10, 20, 20, 10], &[NodeId(0), NodeId(1)]))
}

fn zone(start: u64, frames: u64, cpus: usize, node: NodeId) -> BoxedZone {
    must(BoxedZone::new_boxed(
        ZoneConfig::new(Pfn(start), frames)
            .with_cpus(cpus)
            .with_node(node),
    ))
}

/// A node set of `sizes[i]` frames on node `i`, one after another from [`START`].
fn node_set(topology: Topology, sizes: &[u64]) -> BoxedNodeSet {
    let cpus = topology.cpus();
    let mut at = START;
    let mut zones = Vec::new();
    for (node, &n) in sizes.iter().enumerate() {
        zones.push(zone(at, n, cpus, NodeId(node as u8)));
        at += n;
    }
    must(BoxedNodeSet::new(topology, zones))
}

/// What the rate rows run on.
struct Rates {
    lone: BoxedZone,
    set: BoxedNodeSet,
    /// Node 0 full (every frame allocated and kept).
    pressed: BoxedNodeSet,
    held: Vec<Pfn>,
}

fn set_round(set: &BoxedNodeSet, policy: NodePolicy, held: &mut Vec<Pfn>) {
    held.clear();
    for _ in 0..BATCH {
        held.push(must(set.alloc_pages(0, order(0), policy)));
    }
    for &p in held.iter() {
        // SAFETY: the benchmark frees what it allocated, once; nothing touches the memory.
        must(unsafe { set.free_pages(0, p, order(0)) });
    }
}

fn rates(ctx: &SectionContext) -> Table {
    let mut t = Table::new(
        "numa-rates",
        "Order-0 allocation and free through a node set, ns per pair (median [95% CI] over rounds), and the ratio to a lone zone (per-round ratio medians)",
        &["path", "ns per alloc+free", "÷ lone zone (time ratio)"],
    );
    let pressed = node_set(two_nodes(), &[NODE_FRAMES, NODE_FRAMES]);
    let mut kept = Vec::new();
    while let Ok(p) = pressed.alloc_pages(0, order(9), NodePolicy::Bind(NodeId(0))) {
        kept.push(p);
    }
    while let Ok(p) = pressed.alloc_pages(0, order(0), NodePolicy::Bind(NodeId(0))) {
        kept.push(p);
    }
    let mut r = Rates {
        lone: zone(START, NODE_FRAMES, 2, NodeId(0)),
        set: node_set(two_nodes(), &[NODE_FRAMES, NODE_FRAMES]),
        pressed,
        held: Vec::with_capacity(BATCH as usize),
    };
    let mut candidates: Vec<Candidate<'static, Rates>> = vec![
        Box::new(|r: &mut Rates| {
            r.held.clear();
            for _ in 0..BATCH {
                r.held.push(must(r.lone.alloc_pages(0, order(0))));
            }
            for &p in &r.held {
                // SAFETY: as in `set_round`.
                must(unsafe { r.lone.free_pages(0, p, order(0)) });
            }
        }),
        Box::new(|r: &mut Rates| set_round(&r.set, NodePolicy::Local, &mut r.held)),
        Box::new(|r: &mut Rates| {
            set_round(&r.set, NodePolicy::Preferred(NodeId(1)), &mut r.held);
        }),
        Box::new(|r: &mut Rates| set_round(&r.pressed, NodePolicy::Local, &mut r.held)),
    ];
    let budget = Budget::cell(ctx.quick, 4.0);
    let s = Samples::interleaved(budget, &mut r, &mut candidates);
    // Every fallback allocation landed on node 1: the pressed set's node 0 is still full.
    assert_eq!(must(r.pressed.node_stats(NodeId(0))).free, 0);
    let names = [
        "lone zone (Zone::alloc_pages)",
        "node set, local node (NodePolicy::Local)",
        "node set, remote node (NodePolicy::Preferred(1))",
        "node set, local node full: falls back to node 1",
    ];
    for (i, name) in names.iter().enumerate() {
        let ns = s[i].seconds().map(|x| x * 1e9 / f64::from(BATCH));
        t.row(vec![
            Cell::text(*name),
            Cell::estimate(ns, 1, ""),
            Cell::ratio_ci(s[0].speedup_over(&s[i])),
        ]);
    }
    t.note(
        "Two nodes of 1 GiB, CPU 0 on node 0; every row allocates on CPU 0 with per-cpu lists \
         (the common case: one CPU lock, no zone lock per allocation). The floor of each row \
         is the lone zone's path; a node set adds the policy's node lookup (the zones each \
         node's allocations may try are listed once, as Linux's zonelists) and, under \
         pressure, one failed attempt on the full node before the next node's: its empty \
         per-cpu list's lock, and the zone lock to read that its buddy holds fewer free frames \
         than the block (no free list is looked at then). That attempt is most of the fallback \
         row's excess. Linux skips a full zone without either lock (a watermark check on a \
         counter read without one); buddy-sim takes both, uncontended here. This machine has \
         one memory node: remote memory's own latency (a NUMA hop, ~1.5-2x DRAM latency on \
         two-socket servers) is not in these figures.",
    );
    t
}

fn fallback(ctx: &SectionContext) -> Table {
    let mut t = Table::new(
        "numa-fallback",
        "Fallback under pressure: CPU 0 (node 0) allocates order 0 with the local policy until memory runs out; three nodes of 64 MiB, node 0 at distance 15 from node 2 and 30 from node 1",
        &["phase", "node", "allocations", "ns per allocation"],
    );
    #[rustfmt::skip]
    let slit = [
        10, 30, 15,
        30, 10, 20,
        15, 20, 10,
    ];
    let frames = 1 << 14;
    let set = node_set(
        must(Topology::new(3, &slit, &[NodeId(0), NodeId(1), NodeId(2)])),
        &[frames, frames, frames],
    );
    ctx.step("numa: fallback");
    let mut phases: Vec<(NodeId, u64, f64)> = Vec::new();
    let mut held = Vec::new();
    loop {
        let start = Instant::now();
        let Ok(p) = set.alloc_pages(0, order(0), NodePolicy::Local) else {
            break;
        };
        let ns = start.elapsed().as_secs_f64() * 1e9;
        let node = must(set.zone_of(p)).node();
        match phases.last_mut() {
            Some((n, count, total)) if *n == node => {
                *count += 1;
                *total += ns;
            }
            _ => phases.push((node, 1, ns)),
        }
        held.push(p);
    }
    for (i, (node, count, total)) in phases.iter().enumerate() {
        t.row(vec![
            Cell::text(format!("{}", i + 1)),
            Cell::text(format!("node {}", node.0)),
            Cell::num(*count as f64, 0, ""),
            Cell::num(total / *count as f64, 1, ""),
        ]);
    }
    for p in held {
        // SAFETY: as in `set_round`.
        must(unsafe { set.free_pages(0, p, order(0)) });
    }
    let order_seen: Vec<u8> = phases.iter().map(|(n, _, _)| n.0).collect();
    t.note(format!(
        "Nodes in the order allocations reached them: {order_seen:?} (the fallback order is \
         nearest first: 0, then 2 at 15, then 1 at 30). A phase's time is single \
         allocations timed one by one (clock overhead included, ~20 ns), median-free: the \
         mean. Each node's last allocations take its slow path (draining the per-cpu lists) \
         before the next node is reached in the second pass."
    ));
    t
}

/// One offline measurement: a 1 GiB node with backing memory.
struct OfflineRun {
    set: BoxedNodeSet,
    memory: OffsetMap,
    _ram: Vec<u8>,
}

impl OfflineRun {
    fn new() -> Self {
        let set = node_set(two_nodes(), &[NODE_FRAMES, NODE_FRAMES]);
        let bytes = (2 * NODE_FRAMES * 4096) as usize;
        // Zero-filled from the allocator: mapped lazily.
        let mut ram = vec![0u8; bytes + 4096];
        // Node 1's memory faulted in before anything is timed: the migrations' copies then
        // measure copies, not the host's page faults.
        ram[bytes / 2..].fill(1);
        let first = ram
            .as_mut_ptr()
            .wrapping_add(ram.as_ptr().align_offset(4096));
        // SAFETY: frame START + i is at first + i * 4 KiB inside `ram`, alive with the set;
        // only the workload and the migration copies touch it.
        let memory = unsafe { OffsetMap::with_frame_at(Pfn(START), first) };
        let memory = memory.expect("a page-aligned address");
        Self {
            set,
            memory,
            _ram: ram,
        }
    }
}

fn offline(ctx: &SectionContext) -> Table {
    let mut t = Table::new(
        "numa-offline",
        "Offline and online of 256 MiB of node 1's 1 GiB zone, per GiB (median [min, max] over runs)",
        &[
            "operation",
            "ms per GiB",
            "frames migrated",
            "GB/s of data moved",
        ],
    );
    let range_frames: u64 = 1 << 16;
    let gib = (range_frames * 4096) as f64 / f64::from(1u32 << 30);
    let runs = if ctx.quick { 2 } else { 5 };
    let (mut empty, mut moving, mut online) = (Vec::new(), Vec::new(), Vec::new());
    let mut migrated = 0;
    for _ in 0..runs {
        ctx.step("numa: offline");
        let node1 = START + NODE_FRAMES;
        // Without data: the range's free blocks leave the buddy.
        let run = OfflineRun::new();
        let range = Pfn(node1 + NODE_FRAMES - range_frames);
        let mut refuse = |_: &Migration| false;
        let start = Instant::now();
        assert_eq!(
            must(run.set.offline_range(1, range, range_frames, &mut refuse)),
            0
        );
        empty.push(start.elapsed().as_secs_f64() * 1e3 / gib);
        let start = Instant::now();
        must(run.set.online_range(range, range_frames, false));
        online.push(start.elapsed().as_secs_f64() * 1e3 / gib);
        // With data: the node filled with movable pages, each stamped; every second one
        // outside the range and every fourth inside it freed again, so a quarter of the
        // range is data to move and room for it exists below.
        let mut at: Vec<Pfn> = (0..NODE_FRAMES)
            .map_while(|k| {
                run.set
                    .alloc_movable(1, order(0), k, NodePolicy::Bind(NodeId(1)))
                    .ok()
            })
            .collect();
        let inside = |p: Pfn| (range.0..range.0 + range_frames).contains(&p.0);
        let mut kept = Vec::new();
        for (k, &p) in at.iter().enumerate() {
            let keep = if inside(p) { k % 4 == 0 } else { k % 2 == 0 };
            if keep {
                let ptr = run
                    .memory
                    .frame_ptr(p)
                    .expect("the zone's memory maps every frame");
                // SAFETY: the page is the workload's; 8 bytes inside it.
                unsafe { ptr.cast::<u64>().write(k as u64) };
                kept.push(k);
            } else {
                // SAFETY: as in `set_round`.
                must(unsafe { run.set.free_pages(1, p, order(0)) });
            }
        }
        let memory = &run.memory;
        let mut moved = 0u64;
        let mut follow = |m: &Migration| {
            // SAFETY: the workload is the block's only user and does not run meanwhile.
            if at[m.key as usize] != m.from || unsafe { m.copy(memory) }.is_err() {
                return false;
            }
            at[m.key as usize] = m.to;
            moved += m.order.pages();
            true
        };
        let start = Instant::now();
        let got = must(run.set.offline_range(1, range, range_frames, &mut follow));
        moving.push(start.elapsed().as_secs_f64() * 1e3 / gib);
        assert_eq!(got, moved);
        migrated = got;
        for k in kept {
            let p = at[k];
            assert!(!inside(p), "page {k} still in the offlined range");
            let ptr = run
                .memory
                .frame_ptr(p)
                .expect("the zone's memory maps every frame");
            // SAFETY: the workload's page, stamped above and copied by every move.
            assert_eq!(unsafe { ptr.cast::<u64>().read() }, k as u64);
        }
    }
    let row = |t: &mut Table, name: &str, e: &[f64], frames: u64| {
        let est = Estimate::of(e.iter().copied());
        let moved_gb = (frames * 4096) as f64 / 1e9;
        let rate = if frames == 0 {
            Cell::text("-")
        } else {
            Cell::num(moved_gb / (est.median * gib / 1e3), 2, "")
        };
        t.row(vec![
            Cell::text(name),
            Cell::text(format!("{:.2} [{:.2}, {:.2}]", est.median, est.lo, est.hi)),
            Cell::num(frames as f64, 0, ""),
            rate,
        ]);
    };
    row(&mut t, "offline, no allocation in the range", &empty, 0);
    row(
        &mut t,
        "offline, a quarter of the range movable data",
        &moving,
        migrated,
    );
    row(&mut t, "online (add_memory of the range)", &online, 0);
    t.note(
        "Offline: isolate the range's pageblocks, drain the per-cpu lists, migrate each \
         movable page out (the callback copies 4 KiB through the zone's backing memory and \
         repoints the workload's table), then make every frame a hole. Every moved page is \
         read back at its new frame. Its floor is the copy: at ~10 GB/s, 0.4 µs a page, \
         ~26 ms per GiB of range at a quarter movable; the metadata work without data is \
         one pass over the range's frames and free blocks. Online is add_memory: the range's \
         frames initialized and freed as the fewest aligned blocks.",
    );
    t
}

impl Section for Numa {
    fn name(&self) -> &'static str {
        "numa"
    }

    fn planned_steps(&self, quick: bool) -> u64 {
        2 + if quick { 2 } else { 5 }
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        ctx.step("numa: allocation rates");
        vec![rates(ctx), fallback(ctx), offline(ctx)]
    }
}
