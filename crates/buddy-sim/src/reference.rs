//! The obvious definitions, never optimized: what the batched paths are checked against and
//! the "before" column of the benchmarks. The harnesses that drive a zone and its reference
//! side by side are in `testing` (feature `testing`).

use crate::error::free::FreeError;
use crate::frame::Word;
use crate::frame_storage::FrameStorage;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

/// Frees `[pfn, pfn + nr)` the way the kernel did before `free_contig_range` was batched:
/// one `put_page` per page, so every page that reaches zero is checked and freed as order 0
/// (to the per-cpu list, merging only when drained). Checks the whole range first, as
/// [`Cpu::free_contig_range`] does, so both return the same errors; unlike it, it is not
/// all or nothing against another CPU freeing the same pages meanwhile.
///
/// # Errors
/// As [`Cpu::free_contig_range`].
///
/// # Safety
/// As [`Cpu::free_contig_range`].
#[allow(unsafe_code)]
pub unsafe fn free_contig_range_per_page<F, P, R, A, C>(
    cpu: &Cpu<'_, F, P, R, A, C>,
    pfn: Pfn,
    nr: u64,
) -> Result<(), FreeError>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    let zone = cpu.zone();
    let pages = zone.map().range(pfn, nr)?;
    zone.check_claimable(pages)?;
    for i in 0..nr {
        // SAFETY: the caller's contract covers every page of the run.
        unsafe { cpu.put_page(Pfn(pfn.0 + i))? };
    }
    Ok(())
}

/// The minimal aligned cover of `[pfn, pfn + nr)` by brute force: every page starts as an
/// order-0 block, and a block merges with its buddy while the merged block lies inside the
/// run and is at most `max_order`. Calls `visit` with each resulting block, ascending.
/// Does nothing if `pfn + nr` overflows.
pub fn brute_force_cover(pfn: Pfn, nr: u64, max_order: Order, mut visit: impl FnMut(Pfn, Order)) {
    let Some(end) = pfn.0.checked_add(nr) else {
        return;
    };
    let mut p = pfn.0;
    while p < end {
        // Grow page p's block while its parent block stays inside the run.
        let mut order = 0u8;
        while order < max_order.get() {
            let parent = 1u64 << (order + 1);
            let base = p & !(parent - 1);
            if base < pfn.0 || base.checked_add(parent).is_none_or(|e| e > end) {
                break;
            }
            order += 1;
        }
        // p is the head of its block (we always jump to block heads).
        visit(Pfn(p), Order(order));
        p += 1u64 << order;
    }
}

/// Frees the frozen pages `[pfn, pfn + nr)` the way `__free_contig_frozen_range` did before
/// it was batched: each page freed as order 0 on its own (`free_frozen_pages`), after a check
/// of the whole range, so that it returns the errors [`Zone::free_contig_frozen_range`] does.
///
/// # Errors
/// As [`Zone::free_contig_frozen_range`].
///
/// # Safety
/// As [`Zone::free_contig_frozen_range`].
#[allow(unsafe_code)]
pub unsafe fn free_contig_frozen_range_per_page<F, P, R>(
    zone: &Zone<F, P, R>,
    cpu: usize,
    pfn: Pfn,
    nr: u64,
) -> Result<(), FreeError>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    let pcp = zone.pcp(cpu)?;
    let pages = zone.map().range(pfn, nr)?;
    if let Some(i) =
        FrameIdx::each(pages.clone()).find(|&i| zone.map().frame(i).load() != Word::FROZEN_PAGE)
    {
        return Err(zone.not_frozen(i));
    }
    for i in FrameIdx::each(pages) {
        let frame = zone.map().frame(i);
        // A concurrent free of the same page: the contract says there is none; still, only
        // a page this call takes is freed.
        if frame
            .cas(Word::FROZEN_PAGE, Word::FROZEN_PAGE.freeing())
            .is_ok()
        {
            zone.free_block(pcp, i, Order::ZERO, 1);
        }
    }
    Ok(())
}
