//! The one allocation entry point of a CPU handle, [`Cpu::alloc_raw`]: a block takes the zone
//! core's path inline, a zeroed block the zeroed pool's, a run the path of runs.

use crate::error::alloc::AllocError;
use crate::frame_storage::FrameStorage;
use crate::request::{AllocRequest, ReschedPoint, SlowPath};
use crate::zeroed::Zeroing;
use crate::zone::buddy::Prefer;
use crate::zone::cpu::{Access, Cpu, ServedBy};
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Allocates what `request` asks for on this CPU and returns its first frame, for a
    /// caller that keeps frame numbers (in page tables, in its own structures) and frees
    /// them itself (`free_pages` for a block, `free_contig_range` for a run,
    /// `free_contig_frozen_range` for frozen pages); [`Cpu::alloc`] returns an owned
    /// [`Block`](crate::Block) instead.
    ///
    /// A block ([`AllocRequest::order`]) comes from this CPU's list for per-cpu orders
    /// (refilled from the buddy in a batch when empty), else from the buddy; in the order it
    /// takes from, a block not known zero where there is one (blocks known zero are kept
    /// for zeroed requests). When that fails, it drains every CPU's lists back into the
    /// buddy (a [`LocalCpu`](crate::LocalCpu) only its own) and tries once more, as the
    /// kernel's slow path does with `drain_all_pages()`; then it merges the free buddies
    /// that stayed apart because only one of them is known zero, and tries again; then it
    /// initializes deferred memory ([`Zone::init_deferred`](crate::Zone::init_deferred)) a chunk at a time until the
    /// allocation succeeds or none is left. A kind other than unmovable takes from its own
    /// lists first, falling back to the other types in Linux's order (and claiming a
    /// pageblock where Linux would).
    ///
    /// A zeroed request takes a block known zero if the zone has one that fits (from this
    /// CPU's list, a batch of them from the buddy, or split from a larger one), else the
    /// block a plain allocation takes, cleared before it is returned through the clearer the
    /// request names ([`AllocRequest::zeroed_with`]) or else this handle's
    /// ([`Cpu::with_clearer`]; a handle without one does not take an
    /// [`AllocRequest::zeroed`] request: it does not compile). Where that clearer's memory
    /// temperature is unknown, the zone tells it what it knows: the block above order 3 that
    /// this CPU freed to its list last (nothing of its size freed there since), if it fits
    /// under the policy's streaming threshold, is cleared as hot memory (temporal stores);
    /// one freed before others, or taken from the buddy, as cold (streaming stores, the
    /// fault's neighbourhood last).
    ///
    /// A run ([`AllocRequest::frames`]) is the covering block split into order-0 pages with
    /// the pages past the run freed at once, or, [`contiguous`](AllocRequest::contiguous),
    /// found anywhere in the zone by moving movable blocks out of the way (Linux's
    /// `alloc_contig_pages`: candidates from the zone's bottom, each checked without locks,
    /// then isolated and migrated).
    ///
    /// # Errors
    /// [`AllocError::Conflict`] for options that do not go together;
    /// [`AllocError::OrderTooLarge`] (for a run from the buddy: its covering order or
    /// alignment above the zone's MAX_ORDER; a contiguous run may be aligned further); [`AllocError::ZeroPages`] for a run of no frames;
    /// [`AllocError::OutOfMemory`]. Zeroed: [`AllocError::FaultOutsideBlock`] if the fault
    /// offset is not inside what is allocated; [`AllocError::NotAddressable`] if the
    /// clearer's memory cannot reach the frames, [`AllocError::Clear`] if zero-core refuses
    /// the address it maps; with a [verifying](crate::FrameClearer::verifying) clearer,
    /// [`AllocError::StaleZero`] if a block known zero does not read zero. In the last three
    /// cases what was taken is freed again, no longer known zero. Nothing is allocated on an
    /// error (what an error may have changed: [`BuddyError`](crate::BuddyError)).
    #[inline(always)]
    pub fn alloc_raw<Z>(&self, mut request: AllocRequest<'_, Z>) -> Result<Pfn, AllocError>
    where
        Z: ServedBy<C>,
    {
        // The common cases, inline: a block, plain or zeroed (a request built in place folds
        // these tests away). Runs, and the options that conflict, take the general path.
        if !request.is_block() || request.has_slow_path() {
            return self.alloc_request(request);
        }
        let (zone, cpu) = (self.zone, self.lists());
        let (order, mt, tag) = (request.order, request.mt, request.tag());
        let Some(clearing) = request.clearing(self.clearing()) else {
            // Unzeroed: nothing to do once it is allocated, and so no pin to drop.
            let (idx, _) = zone.alloc_preferring(cpu, order, Prefer::Unzeroed, mt, tag)?;
            return Ok(zone.map().pfn(idx));
        };
        let zeroing = Zeroing {
            clearing,
            fault: request.fault,
            resched: ReschedPoint(&mut request.resched),
        };
        zone.alloc_zeroed_on(cpu, (order, mt, tag), zeroing)
    }

    /// [`Cpu::alloc_raw`] of a run, of a block with slow-path callbacks, or of a request
    /// whose options conflict.
    #[inline(never)]
    fn alloc_request<Z>(&self, mut request: AllocRequest<'_, Z>) -> Result<Pfn, AllocError> {
        request.check()?;
        let clearing = request.clearing(self.clearing());
        let (zone, cpu) = (self.zone, self.lists());
        if !request.allows(zone.span()) {
            return Err(AllocError::OutOfMemory(request.order));
        }
        if !request.is_block() {
            return zone.alloc_run(cpu, &mut request, clearing);
        }
        let (order, mt, tag, fault) = (request.order, request.mt, request.tag(), request.fault);
        let prefer = match clearing {
            Some(_) => {
                zone.check_fault(order, fault)?;
                Prefer::Zeroed
            }
            None => Prefer::Unzeroed,
        };
        let mut hooks = SlowPath::of(&mut request.reclaim, &mut request.compact);
        let (idx, contents) = zone.alloc_with(cpu, order, (prefer, mt, tag), &mut hooks)?;
        if let Some(clearing) = clearing {
            let zeroing = Zeroing {
                clearing,
                fault,
                resched: ReschedPoint(&mut request.resched),
            };
            zone.make_allocation_zero(cpu, (idx, order, tag), order.pages(), contents, zeroing)?;
        }
        Ok(zone.allocated(idx, tag))
    }
}
