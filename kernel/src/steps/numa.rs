//! NUMA nodes: what the firmware says of them ([`NodeMap`], which each platform fills from
//! the device tree or from ACPI's SRAT and SLIT), the kernel's memory as buddy-sim's
//! `NodeSet` (a zone per node, see `zone`), and the node step: node-local allocation on each
//! CPU, then a range of node 1 that holds movable data taken offline (its pages migrated
//! within the node) and brought back online.

use super::*;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use buddy_sim::{
    BuddyError, FrameState, LOCAL_DISTANCE, Migration, NodeId, NodePolicy, Order, Pfn,
    REMOTE_DISTANCE, Topology,
};
use pte_batch::mm_types::FrameRange;

/// Nodes the kernel's statics have room for: a zone per node.
pub const NODES: usize = 2;

/// Order-0 pages each CPU allocates node-local.
const LOCAL_PAGES: usize = 64;

/// Movable pages put on node 1 before part of it goes offline.
const MOVABLE_PAGES: usize = 1024;

/// The window the range taken offline lies in: 16 MiB, aligned (the range is its usable
/// pageblocks around the first movable page).
const OFFLINE_FRAMES: u64 = 4096;

/// Blocks the step may hold while it empties node 1.
const MAX_HELD: usize = 512;

/// The machine's NUMA layout as its firmware describes it: each node's RAM, each CPU's node
/// and the distances between nodes (ACPI SLIT's scale: 10 local).
#[derive(Clone, Copy, Debug)]
pub struct NodeMap {
    /// Each node's RAM, from its lowest to its highest frame (`pages` 0: none named).
    span: [FrameRange; NODES],
    distance: [[u8; NODES]; NODES],
    cpu_node: [u8; CPUS],
    /// Where the layout came from ("the device tree", "ACPI SRAT and SLIT", ...).
    pub source: &'static str,
}

impl NodeMap {
    /// No memory yet, every CPU on node 0, [`REMOTE_DISTANCE`] between nodes.
    pub const fn new(source: &'static str) -> Self {
        let mut distance = [[REMOTE_DISTANCE; NODES]; NODES];
        let mut i = 0;
        while i < NODES {
            distance[i][i] = LOCAL_DISTANCE;
            i += 1;
        }
        Self {
            span: [FrameRange::new(Pfn(0), 0); NODES],
            distance,
            cpu_node: [0; CPUS],
            source,
        }
    }

    /// One node spanning `span`, found as `source` says.
    pub fn one_node(span: FrameRange, source: &'static str) -> Self {
        let mut map = Self::new(source);
        map.span[0] = span;
        map
    }

    fn node(node: u64) -> Result<usize, &'static str> {
        usize::try_from(node)
            .ok()
            .filter(|&n| n < NODES)
            .ok_or("a node past the two the kernel has zones for")
    }

    /// Node `node` has the RAM `[addr, addr + bytes)` (whole frames of it).
    ///
    /// # Errors
    /// A node the kernel has no zone for, or a range past the end of the address space.
    pub fn add_memory(&mut self, node: u64, addr: u64, bytes: u64) -> Result<(), &'static str> {
        let n = Self::node(node)?;
        let end = addr.checked_add(bytes).ok_or("a range past 2^64")? / PAGE;
        let start = addr.div_ceil(PAGE);
        if end <= start {
            return Ok(());
        }
        let s = &mut self.span[n];
        let (lo, hi) = if s.pages == 0 {
            (start, end)
        } else {
            (s.start.0.min(start), (s.start.0 + s.pages).max(end))
        };
        *s = FrameRange::new(Pfn(lo), hi - lo);
        Ok(())
    }

    /// CPU `cpu` (the kernel's numbering: 0 boots, 1 is started second) is on `node`; CPUs
    /// past the kernel's are ignored.
    ///
    /// # Errors
    /// A node the kernel has no zone for.
    pub fn set_cpu(&mut self, cpu: u64, node: u64) -> Result<(), &'static str> {
        let n = Self::node(node)?;
        if let Some(c) = usize::try_from(cpu)
            .ok()
            .and_then(|c| self.cpu_node.get_mut(c))
        {
            *c = n as u8;
        }
        Ok(())
    }

    /// The distance from node `a` to node `b` is `d`.
    ///
    /// # Errors
    /// A node the kernel has no zone for, or a distance past 255.
    pub fn set_distance(&mut self, a: u64, b: u64, d: u64) -> Result<(), &'static str> {
        let (a, b) = (Self::node(a)?, Self::node(b)?);
        self.distance[a][b] = u8::try_from(d).map_err(|_| "a distance past 255")?;
        Ok(())
    }

    /// Nodes with memory: the first without ends them.
    pub fn nodes(&self) -> usize {
        self.span.iter().take_while(|s| s.pages > 0).count()
    }

    /// Node `n`'s RAM, from its lowest to its highest frame.
    pub fn span(&self, n: usize) -> FrameRange {
        self.span[n]
    }

    /// The one past the highest byte of RAM any node has.
    pub fn ram_top(&self) -> u64 {
        self.span
            .iter()
            .map(|s| (s.start.0 + s.pages) * PAGE)
            .max()
            .unwrap_or(0)
    }

    /// The topology buddy-sim allocates under.
    ///
    /// # Errors
    /// As [`Topology::new`]: distances that are not a valid SLIT, a CPU on a node without
    /// memory.
    pub fn topology(&self) -> Result<Topology, BuddyError> {
        let n = self.nodes();
        let mut distance = [0u8; NODES * NODES];
        for a in 0..n {
            for b in 0..n {
                distance[a * n + b] = self.distance[a][b];
            }
        }
        let cpu_node = self.cpu_node.map(NodeId);
        Ok(Topology::new(n, &distance[..n * n], &cpu_node)?)
    }
}

/// Per CPU: pages of its node-local allocation that came from its own node.
static LOCAL_HITS: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];
/// Per CPU: its node-local allocation ran.
static LOCAL_DONE: [AtomicBool; CPUS] = [const { AtomicBool::new(false) }; CPUS];

/// `cpu` allocates [`LOCAL_PAGES`] order-0 pages under [`NodePolicy::Local`] and counts those
/// on its own node, then frees them.
pub(super) fn local_allocations<P: Platform>(cpu: usize) {
    let set = nodes::<P>();
    let mine = set
        .topology()
        .node_of_cpu(cpu)
        .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("cpu {cpu}: {e}")));
    let mut pfns = [Pfn(0); LOCAL_PAGES];
    let mut hits = 0;
    for p in &mut pfns {
        *p = set
            .alloc_pages(cpu, Order::ZERO, NodePolicy::Local)
            .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("cpu {cpu}: local: {e}")));
        if set.zone_of(*p).is_ok_and(|z| z.node() == mine) {
            hits += 1;
        }
    }
    for p in pfns {
        // SAFETY: allocated just above by this CPU and never touched.
        unsafe { set.free_pages(cpu, p, Order::ZERO) }
            .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("cpu {cpu}: free: {e}")));
    }
    LOCAL_HITS[cpu].store(hits, Ordering::Relaxed);
    LOCAL_DONE[cpu].store(true, Ordering::Release);
}

/// Word `w` of movable page `i`, as stamped.
fn stamp(i: usize, w: usize) -> u64 {
    0x0ff1_0000_0000_0000 | (i as u64) << 16 | w as u64
}

fn page_words(pfn: u64) -> *mut u64 {
    (pfn * PAGE) as *mut u64
}

/// Checks every word of movable page `i` at `pfn`; a difference fails the step.
fn check_stamps<P: Platform>(i: usize, pfn: u64) {
    for w in 0..(PAGE / 8) as usize {
        // SAFETY: page `i` is this step's, identity-mapped, at `pfn` (the migrations moved it
        // there and updated the table the caller read `pfn` from).
        let v = unsafe { page_words(pfn).add(w).read_volatile() };
        if v != stamp(i, w) {
            fail::<P>(
                Step::Numa,
                format_args!("movable page {i} at pfn {pfn:#x}: word {w} reads {v:#x}"),
            );
        }
    }
}

impl<P: Platform> Kernel<P> {
    /// The node step (after the SMP steps, which ran each CPU's node-local allocation): every
    /// CPU's node-local pages checked; with two nodes, remote allocation too, then
    /// [`Kernel::offline_step`].
    pub(super) fn numa_step(&mut self) {
        local_allocations::<P>(0);
        let map = node_map::<P>();
        let set = nodes::<P>();
        let topo = set.topology();
        let node_of = |c| topo.node_of_cpu(c).map_or(u8::MAX, |n| n.0);
        let mut got = [(0u64, 0u8); CPUS];
        for (cpu, g) in got.iter_mut().enumerate() {
            if !LOCAL_DONE[cpu].load(Ordering::Acquire) {
                continue;
            }
            *g = (LOCAL_HITS[cpu].load(Ordering::Relaxed), node_of(cpu));
            if g.0 != LOCAL_PAGES as u64 {
                fail::<P>(
                    Step::Numa,
                    format_args!(
                        "cpu {cpu}: {} of {LOCAL_PAGES} node-local pages from its node {}",
                        g.0, g.1
                    ),
                );
            }
        }
        if topo.nodes() < 2 {
            println!(
                "numa: one node ({}): cpu 0 took {} of {LOCAL_PAGES} pages from node 0 (node-local only); boot with two -numa nodes for the offline step",
                map.source, got[0].0
            );
            return;
        }
        let distance = topo.distance(NodeId(0), NodeId(1)).unwrap_or(0);
        let spans = (map.span(0), map.span(1));
        println!(
            "numa: 2 nodes from {}: node 0 {} frames at pfn {:#x}, node 1 {} frames at pfn {:#x}; distance 0-1: {distance}; cpu 0 on node {}, cpu 1 on node {}",
            map.source,
            spans.0.pages,
            spans.0.start.0,
            spans.1.pages,
            spans.1.start.0,
            node_of(0),
            node_of(1)
        );
        // Remote by preference: node 1 from CPU 0.
        let remote = set
            .alloc_pages(0, Order::ZERO, NodePolicy::Preferred(NodeId(1)))
            .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("remote: {e}")));
        let remote_node = set.zone_of(remote).map_or(u8::MAX, |z| z.node().0);
        // SAFETY: allocated just above, never touched.
        unsafe { set.free_pages(0, remote, Order::ZERO) }
            .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("free: {e}")));
        if remote_node != 1 {
            fail::<P>(
                Step::Numa,
                format_args!("Preferred(node 1) from cpu 0 came from node {remote_node}"),
            );
        }
        if self.second_cpu {
            println!(
                "numa: node-local allocation: cpu 0 took {} of {LOCAL_PAGES} pages from node {}, cpu 1 {} of {LOCAL_PAGES} from node {}; Preferred(node 1) on cpu 0 from node 1",
                got[0].0, got[0].1, got[1].0, got[1].1
            );
        } else {
            println!(
                "numa: node-local allocation: cpu 0 took {} of {LOCAL_PAGES} pages from node {} (no second CPU); Preferred(node 1) on cpu 0 from node 1",
                got[0].0, got[0].1
            );
        }
        self.offline_step();
    }

    /// Node 1 gets [`MOVABLE_PAGES`] movable pages, each stamped word by word; the usable
    /// pageblocks of the [`OFFLINE_FRAMES`] aligned frames around the first go offline, their
    /// pages migrated
    /// to the rest of the node (every page must read back its stamps where it went);
    /// emptying the node then must not hand out a frame of the range; `online_range` brings
    /// it back, and once the pages are freed node 1 must be whole.
    fn offline_step(&mut self) {
        let set = nodes::<P>();
        let node1 = NodeId(1);
        let stats = |what| {
            set.node_stats(node1)
                .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("{what}: {e}")))
        };
        let before = stats("node_stats");
        let mut pages = [0u64; MOVABLE_PAGES];
        for (i, p) in pages.iter_mut().enumerate() {
            *p = set
                .alloc_movable(0, Order::ZERO, i as u64, NodePolicy::Bind(node1))
                .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("movable {i}: {e}")))
                .0;
            for w in 0..(PAGE / 8) as usize {
                // SAFETY: the zone just handed this identity-mapped page to this CPU.
                unsafe { page_words(*p).add(w).write_volatile(stamp(i, w)) };
            }
        }
        let zone1 = set
            .zone_of(Pfn(pages[0]))
            .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("{e}")));
        // The hole-free run of the aligned window around the first page, in whole pageblocks
        // (an offline takes usable memory only, as Linux's refuses a block with holes).
        let cfg = zone1.config();
        let zone_end = cfg.start.0 + cfg.nr_pages;
        let window = (pages[0] - pages[0] % OFFLINE_FRAMES).max(cfg.start.0)
            ..(pages[0] - pages[0] % OFFLINE_FRAMES + OFFLINE_FRAMES).min(zone_end);
        let usable = |p: u64| {
            zone1
                .frame(Pfn(p))
                .is_ok_and(|f| f.state != FrameState::Reserved)
        };
        let (mut lo, mut hi) = (pages[0], pages[0]);
        while lo > window.start && usable(lo - 1) {
            lo -= 1;
        }
        while hi < window.end && usable(hi) {
            hi += 1;
        }
        let block = cfg.pageblock_order.pages();
        let (start, end) = (lo.next_multiple_of(block), hi - hi % block);
        if end <= start {
            fail::<P>(
                Step::Numa,
                format_args!(
                    "no whole pageblock of usable memory around pfn {:#x}",
                    pages[0]
                ),
            );
        }
        let (range, frames) = (start..end, end - start);
        let inside = pages.iter().filter(|p| range.contains(p)).count() as u64;
        if inside == 0 {
            fail::<P>(
                Step::Numa,
                format_args!("no movable page in the range to offline"),
            );
        }

        // The callback: the pages are this step's, known by key; it copies and records.
        // SAFETY: every frame is identity-mapped, and a page's bytes are touched only by
        // whoever the zone handed it to (this step, which runs the callback).
        let memory = unsafe { OffsetMap::new(0) };
        let mut moved = 0u64;
        let mut migrate = |m: &Migration| {
            let i = match usize::try_from(m.key) {
                Ok(i) if i < MOVABLE_PAGES && pages[i] == m.from.0 => i,
                _ => return false,
            };
            // SAFETY: `memory` reaches every frame; this CPU, which runs the callback, is the
            // only writer of the page.
            if unsafe { m.copy(&memory) }.is_err() {
                return false;
            }
            pages[i] = m.to.0;
            moved += m.order.pages();
            true
        };
        let t0 = P::now_ns();
        let migrated = set
            .offline_range(0, Pfn(start), frames, &mut migrate)
            .unwrap_or_else(|e| {
                fail::<P>(
                    Step::Numa,
                    format_args!("offline_range {start:#x}+{frames}: {e}"),
                )
            });
        let offline_us = (P::now_ns() - t0) / 1000;
        if migrated != inside || moved != inside {
            fail::<P>(
                Step::Numa,
                format_args!(
                    "{inside} movable pages in the range, {migrated} migrated, {moved} moved by the callback"
                ),
            );
        }
        for (i, &p) in pages.iter().enumerate() {
            if range.contains(&p) {
                fail::<P>(
                    Step::Numa,
                    format_args!("movable page {i} still at pfn {p:#x}, offline"),
                );
            }
            if set.zone_of(Pfn(p)).map(|z| z.node()) != Ok(node1) {
                fail::<P>(
                    Step::Numa,
                    format_args!("movable page {i} left node 1 (pfn {p:#x})"),
                );
            }
            check_stamps::<P>(i, p);
        }
        let offline = stats("after offline_range");
        if offline.present != before.present - frames {
            fail::<P>(
                Step::Numa,
                format_args!(
                    "node 1 present {} after offlining {frames} of {}",
                    offline.present, before.present
                ),
            );
        }
        println!(
            "numa: offline_range: {} MiB of node 1 at pfn {start:#x} taken offline in {offline_us} us, its {inside} movable pages migrated within the node (every page read back its stamps); node 1 present {} -> {} frames",
            (frames * PAGE) >> 20,
            before.present,
            offline.present
        );
        let (blocks, held) = self.empty_node(range.clone());
        println!(
            "numa: node 1 emptied by Bind(node 1) allocations ({blocks} blocks, {held} frames): none from the offline range"
        );

        set.online_range(Pfn(start), frames, false)
            .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("online_range: {e}")));
        let online = stats("after online_range");
        if online.present != before.present {
            fail::<P>(
                Step::Numa,
                format_args!(
                    "node 1 present {} after online_range, {} before",
                    online.present, before.present
                ),
            );
        }
        for (i, &p) in pages.iter().enumerate() {
            check_stamps::<P>(i, p);
            // SAFETY: this step's page, used no more.
            unsafe { set.free_pages(0, Pfn(p), Order::ZERO) }
                .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("free {p:#x}: {e}")));
        }
        check_whole::<P>(zone1, node_whole::<P>(1));
        println!(
            "numa: online_range: the {} MiB are back (node 1 present {} frames, {} known zero: not assumed zero); movable pages freed; node 1 whole",
            (frames * PAGE) >> 20,
            online.present,
            online.zeroed
        );
    }

    /// Allocates everything node 1 has left (largest blocks first, [`NodePolicy::Bind`]);
    /// a block in `offline` fails the step. Frees it all again; returns the blocks and
    /// frames it held.
    fn empty_node(&mut self, offline: core::ops::Range<u64>) -> (usize, u64) {
        let set = nodes::<P>();
        let mut held = [(0u64, 0u8); MAX_HELD];
        let mut n = 0;
        let mut frames = 0;
        for order in (0..=buddy_sim::MAX_SUPPORTED_ORDER).rev() {
            let o = Order::new(order).unwrap_or(Order::ZERO);
            while let Ok(p) = set.alloc_pages(0, o, NodePolicy::Bind(NodeId(1))) {
                let end = p.0 + o.pages();
                if p.0 < offline.end && offline.start < end {
                    fail::<P>(
                        Step::Numa,
                        format_args!("order-{order} block at pfn {:#x} is offline memory", p.0),
                    );
                }
                if n == MAX_HELD {
                    fail::<P>(Step::Numa, format_args!("node 1 in over {MAX_HELD} blocks"));
                }
                held[n] = (p.0, order);
                n += 1;
                frames += o.pages();
            }
        }
        if set.node_stats(NodeId(1)).is_ok_and(|s| s.free != 0) {
            fail::<P>(
                Step::Numa,
                format_args!("node 1 still has free frames after Bind allocations failed"),
            );
        }
        for &(p, order) in &held[..n] {
            let o = Order::new(order).unwrap_or(Order::ZERO);
            // SAFETY: allocated above by this CPU, never touched.
            unsafe { set.free_pages(0, Pfn(p), o) }
                .unwrap_or_else(|e| fail::<P>(Step::Numa, format_args!("free {p:#x}: {e}")));
        }
        (n, frames)
    }
}
