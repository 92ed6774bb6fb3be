//! Zeroed frames on demand: [`Zone::alloc_zeroed`] hands out blocks whose every byte is zero,
//! taking blocks known zero where the zone has them and clearing others through zero-core,
//! and [`Zone::zero_some`] refills that pool from an idle CPU, clearing outside the zone lock.
//!
//! What the zone knows: a free block is *known zero* if the zone cleared it and has not
//! handed it out since, or the embedder added it as zero ([`Zone::add_zeroed_memory`]). A
//! split keeps the knowledge; blocks merge only with buddies of the same knowledge, so a
//! freed page never makes its zeroed neighbours unknown. When an allocation finds no block
//! large enough, its slow path merges the mixed pairs too, and the merged blocks are then
//! not known zero.
//!
//! Background zeroing takes a block off its free list (its head reads
//! [`FrameState::Zeroing`](crate::FrameState::Zeroing)), so while it is cleared no CPU can
//! allocate, merge or free it; only when the clear has returned does the block go back, as
//! known zero. So a block is never handed out twice, and never marked zero while someone
//! could write it.

use crate::contents::Contents;
use crate::error::alloc::AllocError;
use crate::frame_storage::FrameStorage;
use crate::memory::{Clearing, FRAME, FrameClearer, FrameMemory};
use crate::migratetype::MigrateType;
use crate::request::HeadTag;
use crate::types::{FrameIdx, MAX_SUPPORTED_ORDER, Order};
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;
use zero_core::Resched;

/// [`AllocError::FaultOutsideBlock`] (naming `order`) if `fault` is not a byte offset inside
/// the first `pages` frames of an allocation.
#[inline(always)]
pub(crate) fn fault_inside(
    pages: u64,
    order: Order,
    fault: Option<usize>,
) -> Result<(), AllocError> {
    let Some(at) = fault else {
        return Ok(());
    };
    let bytes = pages.saturating_mul(FRAME.bytes() as u64);
    match u64::try_from(at) {
        Ok(at) if at < bytes => Ok(()),
        _ => Err(AllocError::FaultOutsideBlock { order, offset: at }),
    }
}

/// How a zeroed allocation clears what it takes: through `clearing`, the bytes around
/// `fault` (an offset into the block) last, `resched` called between zero-core's batches.
pub(crate) struct Zeroing<'c, S> {
    pub(crate) clearing: Clearing<'c>,
    pub(crate) fault: Option<usize>,
    pub(crate) resched: S,
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// [`AllocError::FaultOutsideBlock`] if `fault` is not inside a block of `order`.
    #[inline(always)]
    pub(crate) fn check_fault(&self, order: Order, fault: Option<usize>) -> Result<(), AllocError> {
        let inside = fault_inside(order.pages(), order, fault);
        if inside.is_err() {
            self.check_order(order)?;
        }
        inside
    }

    /// A zeroed block of `2^order` frames of kind `mt` (its head given `tag`) on `cpu`'s
    /// lists: [`Cpu::alloc_raw`](crate::Cpu::alloc_raw)'s path for a zeroed block, and the
    /// named [`Zone::alloc_zeroed`]'s.
    #[inline(always)]
    pub(crate) fn alloc_zeroed_on(
        &self,
        cpu: CpuLists<'_, R>,
        block: (Order, MigrateType, HeadTag),
        zeroing: Zeroing<'_, impl Resched>,
    ) -> Result<Pfn, AllocError> {
        let (order, mt, tag) = block;
        self.check_fault(order, zeroing.fault)?;
        let (idx, contents) = self.alloc_preferring(cpu, order, Prefer::Zeroed, mt, tag)?;
        self.make_allocation_zero(cpu, (idx, order, tag), order.pages(), contents, zeroing)?;
        Ok(self.allocated(idx, tag))
    }

    /// The second half of a zeroed allocation: makes the first `pages` frames of the block
    /// `(idx, order)` just allocated with `tag` read zero (cleared unless it is known zero,
    /// as what is known of its `contents` says), or frees the block again and returns the
    /// error. A movable block is pinned meanwhile (`tag`): nothing moves it while it is
    /// cleared; the caller drops that pin.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) fn make_allocation_zero(
        &self,
        cpu: CpuLists<'_, R>,
        (idx, order, tag): (FrameIdx, Order, HeadTag),
        pages: u64,
        contents: Contents,
        zeroing: Zeroing<'_, impl Resched>,
    ) -> Result<(), AllocError> {
        let Zeroing {
            clearing,
            fault,
            mut resched,
        } = zeroing;
        if contents.known_zero() && !clearing.verify {
            return Ok(());
        }
        let pfn = self.map().pfn(idx);
        let made = clearing
            .clearer
            .make_zero(pfn, pages, contents, fault, &mut resched);
        if let Err(e) = made {
            // The block is this call's with the references its tag gave it: freeing it
            // cannot fail.
            // SAFETY: this call allocated the block and hands it to nobody.
            let _ = unsafe { self.put_refs(cpu, pfn, order, tag.refcount()) };
            return Err(e);
        }
        Ok(())
    }

    /// Merges every pair of free buddies in the buddy that stayed apart because only one of
    /// them is known zero (the merged blocks are not known zero), as the allocation slow path
    /// does when it finds no block large enough: for a caller that wants the largest blocks
    /// back now (before a large allocation, or to compare a zone with its first state).
    /// Per-cpu lists are left alone (drain them first). Returns whether it merged any.
    /// O(free blocks), under the zone lock.
    pub fn merge_free_blocks(&self) -> bool {
        self.lock_zone().merge_mixed(self.map())
    }

    /// Background zeroing, for an idle loop or a helper thread: clears free blocks not known
    /// zero, at most `budget` frames in all, and returns them to the buddy as known zero, so
    /// that later [`Zone::alloc_zeroed`] calls find them ready. It takes the largest such
    /// block first (splitting one larger than what is left of the budget), clears it with
    /// the zone lock released (in zero-core's batches, `resched.cond_resched()` before each;
    /// as cold memory, `zero_core::Temperature::Cold`: streamed from the policy's cold
    /// threshold, so the clear neither reads the block in nor evicts the caller's working
    /// set), and goes on while budget and blocks remain. Blocks on per-cpu lists are left alone.
    /// Returns the frames cleared.
    ///
    /// The block being cleared is out of every allocation's reach until its clear returns:
    /// keep `budget` small beside the free memory (a few MiB), and call again.
    ///
    /// # Errors
    /// [`AllocError::NotAddressable`] if `clearer`'s memory cannot reach a block,
    /// [`AllocError::Clear`] if zero-core refuses the address it maps (the block then goes
    /// back as it was, with the blocks cleared before it kept as known zero).
    pub fn zero_some<M: FrameMemory>(
        &self,
        budget: u64,
        clearer: &FrameClearer<M>,
        resched: &mut impl Resched,
    ) -> Result<u64, AllocError> {
        let m = self.map();
        let mut cleared = 0u64;
        // Free blocks read poison while page poisoning is on: nothing to clear for.
        if self.poisoning() {
            return Ok(0);
        }
        while let Some(left) = budget.checked_sub(cleared).filter(|&l| l > 0) {
            let most = Order::floor_log2(left, Order(MAX_SUPPORTED_ORDER));
            let Some((idx, order)) = self.lock_zone().take_unzeroed(m, most) else {
                break;
            };
            // The block is off every list: nobody can allocate, merge or free it until it is
            // put back below, after the clear has returned.
            let r = clearer.clear_in_background(m.pfn(idx), order, resched);
            let mut free = self.lock_zone();
            free.free_one_page(m, idx, order, r.is_ok());
            r?;
            free.stats().cleared_in_background += order.pages();
            cleared += order.pages();
        }
        Ok(cleared)
    }
}
