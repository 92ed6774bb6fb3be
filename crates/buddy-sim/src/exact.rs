//! Runs of any number of frames from the buddy (Linux's `alloc_pages_exact` /
//! `free_pages_exact`): the covering block, split into order-0 pages, with the pages past the
//! request given back at once as the fewest aligned blocks.

use crate::error::alloc::AllocError;
use crate::frame::Frame;
use crate::memory::Clearing;
use crate::request::{AllocRequest, ReschedPoint, SlowPath};
use crate::types::Order;
use crate::zeroed::{Zeroing, fault_inside};
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
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
    /// (its first `pages` frames zeroed if the request is), split into order-0 pages with one reference
    /// each, the pages past `pages` freed again at once.
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
        let (mt, key) = (request.mt, request.key);
        let mut hooks = SlowPath::of(&mut request.reclaim, &mut request.compact);
        let pfn = match clearing {
            None => {
                let (idx, _) =
                    self.alloc_with(cpu, order, (Prefer::Unzeroed, mt, key), &mut hooks)?;
                self.map().pfn(idx)
            }
            Some(clearing) => {
                // Only the run is made zero: the pages past it go straight back.
                fault_inside(pages, order, request.fault)?;
                let (idx, contents) =
                    self.alloc_with(cpu, order, (Prefer::Zeroed, mt, key), &mut hooks)?;
                let zeroing = Zeroing {
                    clearing,
                    fault: request.fault,
                    resched: ReschedPoint(&mut request.resched),
                };
                self.make_allocation_zero(cpu, (idx, order), pages, contents, zeroing)?
            }
        };
        if self.split_page(pfn, order).is_err() {
            // Not reached (the block is this call's alone, with one reference); give it
            // back rather than leak it, and report that nothing was allocated.
            // SAFETY: this call allocated the block and hands it to nobody.
            let _ = unsafe { self.free_pages_on(cpu, pfn, order) };
            return Err(AllocError::OutOfMemory(order));
        }
        let tail = order.pages() - pages;
        // SAFETY: this call allocated and split the block: the pages past the request are
        // its own, and on the unreachable error all of them are.
        let freed =
            (tail > 0).then(|| unsafe { self.free_contig_range_on(cpu, Pfn(pfn.0 + pages), tail) });
        if let Some(Err(_)) = freed {
            // Not reached either: every page is this call's, split, with one reference.
            // SAFETY: as above.
            let _ = unsafe { self.free_contig_range_on(cpu, pfn, order.pages()) };
            return Err(AllocError::OutOfMemory(order));
        }
        Ok(pfn)
    }
}
