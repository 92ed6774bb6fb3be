//! Free page reporting (Linux's `mm/page_reporting.c`, virtio-balloon's
//! `VIRTIO_BALLOON_F_REPORTING`): a guest hands free blocks to its hypervisor, which discards
//! their memory, and gets them back on its next touch.
//!
//! The embedder registers once ([`Zone::register_page_reporting`]) with the smallest order
//! worth reporting (the pageblock order by default, as Linux's `page_reporting_order`) and
//! its device's batch (`capacity`, at most 32 blocks as Linux's
//! `PAGE_REPORTING_CAPACITY`), then calls [`Zone::report_free_pages`] from a timer or its
//! idle loop. Each round takes up to `capacity` free blocks not reported yet, whole, off the
//! free lists (their heads [`FrameState::Reporting`](crate::FrameState::Reporting): nobody can
//! allocate or merge them), hands them to the sink with the zone lock released, and returns
//! them: on success marked reported, at the back of their lists so that they are allocated
//! last (Linux's `PageReported`); on failure as they were. Taking a block for use (an
//! allocation, a compaction target) takes the mark off the part taken, as Linux's
//! `del_page_from_free_list`; the rest of a split block, still discarded, keeps it, and a
//! merge keeps it only where both halves had it (a block merged with resident memory is
//! reported again later). The mark is advisory: an operation that fails after draining,
//! merging or trying ranges (a contiguous allocation, an allocation's slow path) may take
//! it off blocks it touched, and changes nothing else; such a block is reported again,
//! one more discard of memory already discarded.
//!
//! A block the host discarded reads zero on its next touch when the device's discard zeroes
//! (anonymous memory, no page poisoning): registered with
//! [`PageReporting::discard_zeroes`], reported blocks go back known zero, and
//! [`AllocRequest::zeroed`](crate::AllocRequest::zeroed) hands them out without a clear,
//! where Linux clears them again.

use crate::error::report::ReportError;
use crate::events::{ReportingRound, ZoneEvents};
use crate::frame_storage::FrameStorage;
use crate::report_sink::{PageReporting, ReportSink, ReportStats, ReportedBlock};
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Registers free page reporting on the zone (Linux's `page_reporting_register`).
    ///
    /// # Errors
    /// [`ReportError::AlreadyRegistered`], [`ReportError::OrderTooLarge`] for an order above
    /// the zone's MAX_ORDER, [`ReportError::Capacity`] for a capacity outside 1..=32;
    /// nothing changes then.
    pub fn register_page_reporting(&self, reporting: PageReporting) -> Result<(), ReportError> {
        if reporting.order() > self.cfg.max_order {
            return Err(ReportError::OrderTooLarge {
                order: reporting.order(),
                max: self.cfg.max_order,
            });
        }
        if !(1..=PageReporting::MAX_CAPACITY).contains(&reporting.capacity()) {
            return Err(ReportError::Capacity(reporting.capacity()));
        }
        let mut free = self.lock_zone();
        let r = free.reporting();
        if r.registered.is_some() {
            return Err(ReportError::AlreadyRegistered);
        }
        r.registered = Some(reporting);
        Ok(())
    }

    /// Ends free page reporting (`page_reporting_unregister`); the marks stay, as Linux's.
    /// Returns the registration there was.
    pub fn unregister_page_reporting(&self) -> Option<PageReporting> {
        self.lock_zone().reporting().registered.take()
    }

    /// One call of the reporting worker (Linux's `page_reporting_process`), for a timer or
    /// an idle loop: rounds of up to `capacity` free blocks of the registered order or
    /// above that are not reported yet (the smallest first, each whole: as Linux, a block is
    /// never split to be reported, so that the reported part cannot merge back with its
    /// unreported rest and be reported again), each taken off the free lists, handed to
    /// `sink` with the zone lock released, and returned marked reported (known zero if the
    /// registration says the discard zeroes), until `budget` frames are reported or no such
    /// block is left. Blocks on per-cpu lists are left alone, and so is deferred memory
    /// (never initialized, never touched: the host has not backed it). Returns the frames
    /// reported: past `budget` by less than the last block taken, so that a call with any
    /// budget makes progress while unreported blocks are left; with no allocation or free
    /// in between, repeated calls report each free frame once.
    ///
    /// A block being reported is out of every allocation's reach until the sink returns:
    /// keep `budget` small beside the free memory, and call again.
    ///
    /// # Errors
    /// [`ReportError::NotRegistered`]; [`ReportError::Rejected`] if the sink refused a
    /// round (its blocks went back unmarked, as they were; the rounds before it stay
    /// reported).
    pub fn report_free_pages(
        &self,
        budget: u64,
        sink: &mut impl ReportSink,
    ) -> Result<u64, ReportError> {
        let m = self.map();
        // A discarded block would read zero, not the poison: nothing is reported while page
        // poisoning is on.
        if self.poisoning() {
            return Ok(0);
        }
        let reporting = self
            .lock_zone()
            .reporting()
            .registered
            .ok_or(ReportError::NotRegistered)?;
        let mut reported = 0u64;
        // A round's blocks as the sink sees them, and as the zone puts them back: where,
        // which order, and whether each was known zero when taken.
        let mut blocks = [ReportedBlock {
            pfn: Pfn(0),
            order: Order::ZERO,
        }; PageReporting::MAX_CAPACITY];
        let mut round = [(FrameIdx(0), Order::ZERO, false); PageReporting::MAX_CAPACITY];
        while reported < budget {
            let (mut n, mut frames) = (0, 0u64);
            {
                let mut free = self.lock_zone();
                while n < reporting.capacity() && reported.saturating_add(frames) < budget {
                    let Some(taken @ (idx, order, _)) = free.take_unreported(m, reporting.order())
                    else {
                        break;
                    };
                    round[n] = taken;
                    blocks[n] = ReportedBlock {
                        pfn: m.pfn(idx),
                        order,
                    };
                    frames += order.pages();
                    n += 1;
                }
            }
            if n == 0 {
                break;
            }
            // The blocks are off every list: nobody can allocate, merge or free them until
            // they are put back below, after the sink has returned.
            let accepted = sink.report(&blocks[..n]);
            self.events().reporting_round(&ReportingRound {
                blocks: n as u64,
                pages: frames,
                accepted,
            });
            let mut free = self.lock_zone();
            free.put_back_round(m, &round[..n], accepted, accepted && reporting.zeroes());
            let counts = &mut free.reporting().counts;
            if !accepted {
                counts.rejected += 1;
                return Err(ReportError::Rejected);
            }
            counts.reports += 1;
            counts.reported += frames;
            reported += frames;
        }
        Ok(reported)
    }

    /// Free page reporting's counts.
    pub fn page_reporting_stats(&self) -> ReportStats {
        self.lock_zone().reporting().counts
    }
}
