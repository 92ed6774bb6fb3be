//! Runs of any number of frames from the buddy (Linux's `alloc_pages_exact` /
//! `free_pages_exact`): the covering block, split into order-0 pages, with the pages past the
//! request given back at once as the fewest aligned blocks.

use crate::error::alloc::AllocError;
use crate::error::free::FreeError;
use crate::frame::Word;
use crate::frame_storage::FrameStorage;
use crate::memory::Clearing;
use crate::migratetype::MigrateType;
use crate::request::{AllocRequest, HeadTag, Pin, ReschedPoint, SlowPath};
use crate::types::{FrameIdx, Order};
use crate::zeroed::{Zeroing, fault_inside};
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// [`Cpu::alloc_raw`](crate::Cpu::alloc_raw) of a run: contiguous, or from the buddy,
    /// zeroed through `clearing` if it is `Some`.
    pub(crate) fn alloc_run<Z>(
        &self,
        cpu: CpuLists<'_, R>,
        request: &mut AllocRequest<'_, Z>,
        clearing: Option<Clearing<'_>>,
    ) -> Result<Pfn, AllocError> {
        match request.frames {
            Some(pages) if request.migrate.is_none() => {
                self.alloc_exact_request(cpu, request, pages, clearing)
            }
            _ => self.alloc_contig_request(cpu, request, clearing),
        }
    }

    /// [`Cpu::alloc_raw`](crate::Cpu::alloc_raw) of a run of `pages` frames from the buddy:
    /// the block of the larger of [`Order::covering`]`(pages)` and the request's alignment
    /// (its first `pages` frames zeroed if the request is), split into order-0 pages with one
    /// reference each (two for a movable run a [`Block`](crate::Block) holds), the pages
    /// past `pages` freed again at once.
    #[allow(unsafe_code)]
    pub(crate) fn alloc_exact_request<Z>(
        &self,
        cpu: CpuLists<'_, R>,
        request: &mut AllocRequest<'_, Z>,
        pages: u64,
        clearing: Option<Clearing<'_>>,
    ) -> Result<Pfn, AllocError> {
        let order = Order::covering(pages)?.max(request.align);
        self.check_order(order)?;
        let (mt, tag) = (request.mt, request.tag());
        let prefer = match clearing {
            Some(_) => {
                // Only the run is made zero: the pages past it go straight back.
                fault_inside(pages, order, request.fault)?;
                Prefer::Zeroed
            }
            None => Prefer::Unzeroed,
        };
        let mut hooks = SlowPath::of(&mut request.reclaim, &mut request.compact);
        let (idx, contents) = self.alloc_with(cpu, order, (prefer, mt, tag), &mut hooks)?;
        if let Some(clearing) = clearing {
            let zeroing = Zeroing {
                clearing,
                fault: request.fault,
                resched: ReschedPoint(&mut request.resched),
            };
            self.make_allocation_zero(cpu, (idx, order, tag), pages, contents, zeroing)?;
        }
        self.split_run(cpu, (idx, order, tag), pages)
    }

    /// Splits the block `(idx, order)` just allocated with `tag` into `pages` order-0 pages
    /// of its kind and frees the rest. A movable block stays pinned until every page past
    /// the run is freed (no mover sees a page of it with one reference before that: those
    /// pages are frozen, then freed); the run's pages keep the references `tag` leaves them.
    #[allow(unsafe_code)]
    pub(crate) fn split_run(
        &self,
        cpu: CpuLists<'_, R>,
        (idx, order, tag): (FrameIdx, Order, HeadTag),
        pages: u64,
    ) -> Result<Pfn, AllocError> {
        let m = self.map();
        let pfn = m.pfn(idx);
        let held = tag.refcount();
        let split = self.update_head(pfn, Some(order), |w| match w.refcount() {
            n if n == held => Ok(w.with_order(0)),
            _ => Err(FreeError::Shared(pfn)),
        });
        let Ok((_, w)) = split else {
            // Someone took a reference to the block meanwhile (`get_page`): drop this
            // call's and report that nothing was allocated.
            // SAFETY: this call allocated the block and holds these references.
            let _ = unsafe { self.put_refs(cpu, pfn, order, held) };
            return Err(AllocError::OutOfMemory(order));
        };
        self.split_owner(
            idx,
            FrameIdx::span(idx, idx + order.pages() as u32).map(|i| (i, Order::ZERO)),
        );
        // pages <= 2^order <= 2^MAX_SUPPORTED_ORDER: a u32.
        let end = idx + pages as u32;
        let page = Word::allocated(0).with_mt(w.mt()).with_refcount(held);
        let movable = w.mt() == MigrateType::Movable as u8;
        let m = self.map();
        for frame in m.frames_in(idx + 1..end) {
            // Each movable page carries the run's key to the embedder's `Migrate` callback.
            if movable {
                frame.set_key(tag.key);
            }
            frame.store(page);
        }
        let tail = order.pages() - pages;
        if tail > 0 {
            for frame in m.frames_in(end..idx + order.pages() as u32) {
                frame.store(Word::FROZEN_PAGE);
            }
            // SAFETY: this call split the block: the pages past the run are its own, frozen.
            let freed = unsafe { self.free_contig_frozen_range_on(cpu, m.pfn(end), tail) };
            debug_assert!(freed.is_ok(), "the frozen pages past a run");
        }
        if tag.pin == Pin::WhileAllocating {
            for i in FrameIdx::span(idx, end) {
                self.allocated(i, tag);
            }
        }
        Ok(pfn)
    }
}
