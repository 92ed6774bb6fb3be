//! The zone both kernels allocate from: its metadata in statics, built once from the
//! platform's memory map, and the zeroed allocations and background zeroing the steps use.

use super::*;

use buddy_sim::{Frame, FrameClearer, OffsetMap, Order, PerCpu, Pfn, Zone, ZoneConfig};
use pte_batch::mm_types::FrameRange;
use spin::Once;
use zero_core::NoResched;

/// Frames the boot CPU zeroes in the background before the steps start (8 MiB: the data
/// region and every table page find the pool full).
pub(super) const BOOT_POOL: u64 = 2048;

/// Frames per background-zeroing call of the second CPU.
pub(super) const ZERO_STEP: u64 = 512;

pub(super) const MAX_FRAMES: usize = (MAX_RAM / PAGE) as usize;

/// The zone's metadata: plain statics (all zero, so in .bss), no `static mut`.
pub(super) static FRAMES: [Frame; MAX_FRAMES] = [const { Frame::new() }; MAX_FRAMES];

pub(super) static PCPS: [PerCpu; CPUS] = [const { PerCpu::new() }; CPUS];

/// The zone type of both kernels.
pub type KernelZone = Zone<&'static [Frame], &'static [PerCpu]>;

/// The zone every core allocates from, set up once by the boot core.
pub(super) static ZONE: Once<KernelZone> = Once::new();

/// Builds the zone over `span` (all RAM, holes included) and adds `usable` ranges (the
/// firmware's memory map past the image), then fills the known-zero pool with
/// [`BOOT_POOL`] frames; returns it and its free blocks per order, the "whole"
/// [`Kernel::finish`] compares with.
pub fn make_zone<P: Platform>(
    span: FrameRange,
    usable: &[FrameRange],
) -> (
    &'static KernelZone,
    [u32; buddy_sim::MAX_SUPPORTED_ORDER as usize + 1],
) {
    make_zone_with_pool::<P>(span, usable, BOOT_POOL)
}

/// [`make_zone`] with `pool` frames zeroed into the known-zero pool by the boot CPU (0: the
/// pool starts empty).
pub fn make_zone_with_pool<P: Platform>(
    span: FrameRange,
    usable: &[FrameRange],
    pool: u64,
) -> (
    &'static KernelZone,
    [u32; buddy_sim::MAX_SUPPORTED_ORDER as usize + 1],
) {
    let cfg = ZoneConfig::new(span.start, span.pages).with_cpus(CPUS);
    let zone = ZONE.call_once(|| {
        let frames = usize::try_from(span.pages)
            .ok()
            .and_then(|n| FRAMES.get(..n))
            .unwrap_or_else(|| {
                fail::<P>(
                    Step::Zone,
                    format_args!("{span:?} spans more than {MAX_RAM} bytes"),
                )
            });
        let zone = Zone::new_empty(cfg, frames, &PCPS[..])
            .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
        for r in usable {
            zone.add_memory(r.start, r.pages)
                .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{r:?}: {e}")));
        }
        zone
    });
    let usable_pages: u64 = usable.iter().map(|r| r.pages).sum();
    println!(
        "buddy-sim: zone of {} frames from pfn {}, {usable_pages} usable in {} ranges ({} MiB), {CPUS} CPUs",
        cfg.nr_pages,
        span.start,
        usable.len(),
        (usable_pages * PAGE) >> 20
    );
    // The boot CPU, idle until the steps start, fills the zeroed pool: the page tables and
    // the data region are zeroed allocations that find it full.
    let pooled = zero_in_background::<P>(zone, pool, &clearer());
    println!(
        "buddy-sim: zero_some put {pooled} frames in the zeroed pool before the steps ({} known zero)",
        zone.zeroed_pages()
    );
    (zone, zone.buddy_blocks_per_order())
}

/// The zone, once [`make_zone`] has run.
pub fn zone<P: Platform>() -> &'static KernelZone {
    ZONE.get()
        .unwrap_or_else(|| fail::<P>(Step::Zone, format_args!("no zone")))
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
    let words = (o.pages() * PAGE / 8) as usize;
    let p = (pfn.0 * PAGE) as *const u64;
    for w in 0..words {
        // SAFETY: the zone just handed this identity-mapped block to this core.
        let v = unsafe { core::ptr::read_volatile(p.add(w)) };
        if v != 0 {
            fail::<P>(
                Step::Zeroing,
                format_args!("cpu {cpu}: pfn {pfn} word {w} reads {v:#x}"),
            );
        }
    }
    pfn
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
/// ([`make_zone`]'s); a difference fails [`Step::Free`].
pub fn check_whole<P: Platform>(
    zone: &KernelZone,
    whole: [u32; buddy_sim::MAX_SUPPORTED_ORDER as usize + 1],
) {
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
