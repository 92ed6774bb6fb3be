//! The zones both kernels allocate from, one per NUMA node: their metadata in statics, built
//! once from the platform's memory map and node layout, and the zeroed allocations and background zeroing the steps use.

use super::*;

use buddy_sim::{
    CmaArea, Frame, FrameClearer, NodeId, NodeSet, OffsetMap, Order, OwnerRecord, PerCpu, Pfn,
    Zone, ZoneConfig,
};
use pte_batch::mm_types::FrameRange;
use spin::Once;
use zero_core::NoResched;

/// Frames the boot CPU zeroes in the background before the steps start (8 MiB: the data
/// region and every table page find the pool full).
pub const BOOT_POOL: u64 = 2048;

/// Frames per background-zeroing call of the second CPU.
pub(super) const ZERO_STEP: u64 = 512;

pub(super) const MAX_FRAMES: usize = (MAX_RAM / PAGE) as usize;

/// Node 0's page_owner records, one per frame (in .bss).
static OWNERS: [OwnerRecord; MAX_FRAMES] = [const { OwnerRecord::new() }; MAX_FRAMES];

/// Makes every CPU's allocations from `zone` owned by `name` (page_owner's tag: the name's
/// bytes).
pub fn set_owner(zone: &KernelZone, name: [u8; 4]) {
    for cpu in 0..CPUS {
        let _ = zone.set_owner_tag(cpu, u64::from(u32::from_be_bytes(name)));
    }
}

/// Each node's zone's metadata: plain statics (all zero, so in .bss), no `static mut`.
pub(super) static FRAMES: [[Frame; MAX_FRAMES]; NODES] =
    [const { [const { Frame::new() }; MAX_FRAMES] }; NODES];

pub(super) static PCPS: [[PerCpu; CPUS]; NODES] =
    [const { [const { PerCpu::new() }; CPUS] }; NODES];

/// The zone type of both kernels.
pub type KernelZone = Zone<&'static [Frame], &'static [PerCpu]>;

/// The kernels' zones, node 0's first: one per node.
pub type KernelZones = heapless::Vec<KernelZone, NODES>;

/// The kernels' memory: a zone per node under the firmware's topology.
pub type KernelNodes = NodeSet<KernelZones, &'static [Frame], &'static [PerCpu]>;

/// Free blocks per order of a whole zone.
pub type Blocks = [u32; buddy_sim::MAX_SUPPORTED_ORDER as usize + 1];

/// Frames of node 0's memory onlined as a movable-only zone (Linux's `ZONE_MOVABLE`, as
/// `movablecore=16M` makes it): the top 16 MiB of node 0's zone span, aligned to its size,
/// when all of it is usable; node 0's own zone leaves them out.
pub const MOVABLE_PAGES: u64 = 4096;

/// The movable-only zone's metadata.
static MOVABLE_FRAMES: [Frame; MOVABLE_PAGES as usize] =
    [const { Frame::new() }; MOVABLE_PAGES as usize];
static MOVABLE_PCPS: [PerCpu; CPUS] = [const { PerCpu::new() }; CPUS];

/// The movable-only zone, if node 0 had the memory for it.
static MOVABLE_ZONE: Once<KernelZone> = Once::new();

/// Frames of node 0's zone reserved for CMA at boot (Linux's `hugetlb_cma=`): 4 MiB, one
/// MAX_ORDER block.
pub const CMA_PAGES: u64 = 1024;

/// Node 0's CMA reservation, once [`make_zones`] has made it.
static CMA_AREA: Once<CmaArea> = Once::new();

/// The node set every core allocates from, set up once by the boot core.
static NODE_SET: Once<KernelNodes> = Once::new();

/// The firmware's node layout the zones were built from.
static NODE_MAP: Once<NodeMap> = Once::new();

/// Each node's zone's free blocks per order once it was built: what "whole" means.
static WHOLE: Once<[Blocks; NODES]> = Once::new();

/// Builds a zone per node of `map` (its span, up to [`MAX_RAM`] of it) with the parts of
/// the `usable` ranges (the firmware's memory map past the image) it spans, and the node set
/// over them; then fills node 0's known-zero pool with `pool` frames (0: it starts empty).
/// Returns node 0's zone, the one the steps use, and its free blocks per order, the "whole"
/// [`Kernel::finish`] compares with.
pub fn make_zones<P: Platform>(
    map: &NodeMap,
    usable: &[FrameRange],
    pool: u64,
) -> (&'static KernelZone, Blocks) {
    NODE_MAP.call_once(|| *map);
    let carve = movable_carve(map.span(0), usable);
    let set = NODE_SET.call_once(|| {
        let topology = map
            .topology()
            .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{}: {e}", map.source)));
        let mut zones = KernelZones::new();
        for (n, frames) in FRAMES.iter().enumerate().take(map.nodes()) {
            let whole = map.span(n);
            let span = FrameRange::new(whole.start, whole.pages.min(MAX_FRAMES as u64));
            // Linux's defrag mode: the mobility step's churn and huge blocks run in it.
            let zone = Zone::new_empty(
                ZoneConfig::new(span.start, span.pages)
                    .with_cpus(CPUS)
                    .with_node(NodeId(n as u8))
                    .with_defrag_mode(true),
                &frames[..span.pages as usize],
                &PCPS[n][..],
            )
            .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("node {n}: {e}")));
            // Node 0's owners recorded from the first allocation on (Linux's page_owner).
            if n == 0 {
                zone.enable_page_owner(&OWNERS[..span.pages as usize])
                    .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("page_owner: {e}")));
                set_owner(&zone, *b"boot");
            }
            let (mut pages, mut ranges) = (0, 0);
            for r in usable {
                let start = r.start.0.max(span.start.0);
                let end = (r.start.0 + r.pages).min(span.start.0 + span.pages);
                // Node 0's zone leaves the movable zone's frames out.
                let cut = carve.clone().filter(|_| n == 0).unwrap_or(end..end);
                for (start, end) in [(start, end.min(cut.start)), (start.max(cut.end), end)] {
                    if start < end {
                        zone.add_memory(Pfn(start), end - start).unwrap_or_else(|e| {
                            fail::<P>(Step::Zone, format_args!("node {n}: {r:?}: {e}"))
                        });
                        pages += end - start;
                        ranges += 1;
                    }
                }
            }
            println!(
                "buddy-sim: node {n}: zone of {} frames from pfn {:#x}, {pages} usable in {ranges} ranges ({} MiB), {CPUS} CPUs",
                span.pages,
                span.start.0,
                (pages * PAGE) >> 20
            );
            if zones.push(zone).is_err() {
                fail::<P>(Step::Zone, format_args!("more than {NODES} zones"));
            }
        }
        NodeSet::new(topology, zones)
            .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("node set: {e}")))
    });
    if let Some(c) = carve {
        MOVABLE_ZONE.call_once(|| {
            let cfg = ZoneConfig::new(Pfn(c.start), MOVABLE_PAGES)
                .with_cpus(CPUS)
                .with_defrag_mode(true)
                .movable_only();
            let z = Zone::new_empty(cfg, &MOVABLE_FRAMES[..], &MOVABLE_PCPS[..])
                .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("movable zone: {e}")));
            z.add_memory(Pfn(c.start), MOVABLE_PAGES)
                .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("movable zone: {e}")));
            println!(
                "buddy-sim: movable zone (ZONE_MOVABLE) of {} MiB from pfn {:#x}, taken out of node 0's",
                (MOVABLE_PAGES * PAGE) >> 20,
                c.start
            );
            z
        });
    }
    // `hugetlb_cma=`: node 0 sets memory aside for gigantic runs, lent to movable pages; as
    // Linux's (memblock allocates top-down), from the highest aligned range that is usable.
    let area = CMA_AREA.call_once(|| {
        let mut nothing_to_move = |_: &buddy_sim::Migration| false;
        let z0 = set
            .zones()
            .next()
            .unwrap_or_else(|| fail::<P>(Step::Zone, format_args!("no zone on node 0")));
        let (start, end) = (
            z0.config().start.0,
            z0.config().start.0 + z0.config().nr_pages,
        );
        let mut at = end & !(CMA_PAGES - 1);
        loop {
            at = match at.checked_sub(CMA_PAGES) {
                Some(a) if a >= start => a,
                _ => fail::<P>(
                    Step::Zone,
                    format_args!("no usable {CMA_PAGES} frames for a CMA reservation"),
                ),
            };
            if let Ok(area) = z0.reserve_cma_at(0, Pfn(at), CMA_PAGES, &mut nothing_to_move) {
                break area;
            }
        }
    });
    println!(
        "buddy-sim: CMA reservation (hugetlb_cma) of {} MiB from pfn {:#x} in node 0's zone",
        (area.pages() * PAGE) >> 20,
        area.base().0
    );
    let mut whole = [Blocks::default(); NODES];
    for (i, z) in set.zones().enumerate() {
        whole[i] = z.buddy_blocks_per_order();
    }
    let zone = zone::<P>();
    // The boot CPU, idle until the steps start, fills the zeroed pool: the page tables and
    // the data region are zeroed allocations that find it full.
    let pooled = zero_in_background::<P>(zone, pool, &clearer());
    println!(
        "buddy-sim: zero_some put {pooled} frames in the zeroed pool before the steps ({} known zero)",
        zone.zeroed_pages()
    );
    whole[0] = zone.buddy_blocks_per_order();
    WHOLE.call_once(|| whole);
    (zone, whole[0])
}

/// The frames of node 0 that become the movable zone: [`MOVABLE_PAGES`] aligned to their
/// size, at the top of node 0's zone span (capped at [`MAX_RAM`]), all inside one usable
/// range; `None` if node 0 has no such frames.
fn movable_carve(span: FrameRange, usable: &[FrameRange]) -> Option<core::ops::Range<u64>> {
    let top = span.start.0 + span.pages.min(MAX_FRAMES as u64);
    let end = top & !(MOVABLE_PAGES - 1);
    let start = end.checked_sub(MOVABLE_PAGES)?;
    (start >= span.start.0
        && usable
            .iter()
            .any(|r| r.start.0 <= start && end <= r.start.0 + r.pages))
    .then_some(start..end)
}

/// Node 0's CMA reservation, if [`make_zones`] made it.
pub fn cma_area() -> Option<CmaArea> {
    CMA_AREA.get().copied()
}

/// The movable-only zone, if [`make_zones`] made one.
pub fn movable_zone() -> Option<&'static KernelZone> {
    MOVABLE_ZONE.get()
}

/// The node set, once [`make_zones`] has run.
pub fn nodes<P: Platform>() -> &'static KernelNodes {
    NODE_SET
        .get()
        .unwrap_or_else(|| fail::<P>(Step::Zone, format_args!("no zones")))
}

/// The firmware's node layout, once [`make_zones`] has run.
pub fn node_map<P: Platform>() -> &'static NodeMap {
    NODE_MAP
        .get()
        .unwrap_or_else(|| fail::<P>(Step::Zone, format_args!("no node map")))
}

/// Node 0's zone, the one the steps share, once [`make_zones`] has run.
pub fn zone<P: Platform>() -> &'static KernelZone {
    nodes::<P>()
        .zones()
        .next()
        .unwrap_or_else(|| fail::<P>(Step::Zone, format_args!("no zones")))
}

/// Node `n`'s zone's free blocks per order when it was whole, for [`check_whole`].
pub fn node_whole<P: Platform>(n: usize) -> Blocks {
    WHOLE
        .get()
        .and_then(|w| w.get(n).copied())
        .unwrap_or_else(|| fail::<P>(Step::Zone, format_args!("no zone for node {n}")))
}

/// How both kernels reach and clear frames: the identity map and zero-core's detected
/// policy. (No debug check: [`alloc_zeroed`] reads every block it hands out anyway.)
pub fn clearer() -> FrameClearer<OffsetMap> {
    // SAFETY: both kernels identity-map every frame the zone spans as normal memory, and a
    // frame's bytes are touched only by whoever the zone handed it to (or by the zone while
    // it is free).
    FrameClearer::detected(unsafe { OffsetMap::new(0) })
}

/// A zeroed block of `order` on `cpu` from the zone's `alloc_zeroed` (known zero, or cleared
/// by zero-core), every word checked.
pub fn alloc_zeroed<P: Platform>(
    zone: &KernelZone,
    cpu: usize,
    order: u8,
    clearer: &FrameClearer<OffsetMap>,
) -> Pfn {
    let o = Order::new(order).unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
    let pfn = zone
        .alloc_zeroed(cpu, o, clearer, None, &mut NoResched)
        .unwrap_or_else(|e| {
            fail::<P>(
                Step::Zeroing,
                format_args!("cpu {cpu}: alloc_zeroed order {order}: {e}"),
            )
        });
    // SAFETY: the zone just handed this identity-mapped block to this core.
    unsafe { check_zero::<P>(pfn, o.pages(), format_args!("cpu {cpu}")) };
    pfn
}

/// Checks every word of the `pages` frames from `pfn` reads zero; a word that does not
/// fails [`Step::Zeroing`], naming `whose` block it is.
///
/// # Safety
/// The frames are identity-mapped and the caller's, not written by anyone meanwhile.
pub unsafe fn check_zero<P: Platform>(pfn: Pfn, pages: u64, whose: core::fmt::Arguments<'_>) {
    let p = (pfn.0 * PAGE) as *const u64;
    for w in 0..(pages * PAGE / 8) as usize {
        // SAFETY: the caller's.
        let v = unsafe { core::ptr::read_volatile(p.add(w)) };
        if v != 0 {
            fail::<P>(
                Step::Zeroing,
                format_args!("{whose}: pfn {pfn} word {w} reads {v:#x}"),
            );
        }
    }
}

/// Gives block `pfn` of `order` back on `cpu`; a refusal fails `step`.
///
/// # Safety
/// The caller holds the block (it allocated it, or another core handed it over) and nothing
/// touches its memory afterwards: [`buddy_sim::Zone::free_pages`].
pub unsafe fn free_block<P: Platform>(
    zone: &KernelZone,
    cpu: usize,
    pfn: u64,
    order: u8,
    step: Step,
) {
    let o = Order::new(order).unwrap_or_else(|e| fail::<P>(step, format_args!("{e}")));
    // SAFETY: the caller's contract.
    unsafe { zone.free_pages(cpu, Pfn(pfn), o) }
        .unwrap_or_else(|e| fail::<P>(step, format_args!("cpu {cpu}: free {pfn:#x}: {e}")));
}

/// Checks the zone is whole again, every frame given back: drains the per-CPU lists, merges
/// known-zero and other free blocks, and compares the free blocks per order with `whole`
/// ([`make_zones`]'s); a difference fails [`Step::Free`].
pub fn check_whole<P: Platform>(zone: &KernelZone, whole: Blocks) {
    zone.drain_all();
    // Blocks known zero and others stay apart: merge them, and the free blocks are the
    // zone's first ones again.
    zone.merge_free_blocks();
    if let Err(c) = zone.check() {
        fail::<P>(Step::Free, format_args!("zone corrupt: {c:?}"));
    }
    let now = zone.buddy_blocks_per_order();
    let leaked = zone.leaked_pages();
    if now != whole || leaked != 0 {
        fail::<P>(
            Step::Free,
            format_args!(
                "the zone is not whole again: free blocks per order {now:?}, at the start {whole:?}; {leaked} pages leaked"
            ),
        );
    }
}

/// Background zeroing on `cpu`'s behalf until `frames` more frames are known zero or none
/// is left to clear; returns the frames cleared.
pub fn zero_in_background<P: Platform>(
    zone: &KernelZone,
    frames: u64,
    clearer: &FrameClearer<OffsetMap>,
) -> u64 {
    zone.zero_some(frames, clearer, &mut NoResched)
        .unwrap_or_else(|e| fail::<P>(Step::Zeroing, format_args!("zero_some: {e}")))
}
