//! [`Lockstep`]: a zone and the per-page reference side by side.

use crate::cma::CmaArea;
use crate::error::buddy::BuddyError;
use crate::error::report::ReportError;
use crate::frame_storage::FrameStorage;
use crate::migratetype::MigrateType;
use crate::migratetype::Pageblock;
use crate::reference::free_contig_range_per_page;
use crate::request::AllocRequest;
use crate::testing::ops::{CheckInterval, Op, kind};
use crate::testing::outcome::any;
use crate::testing::snapshot::{Snapshot, SnapshotDifference};
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

/// How [`Lockstep`] found the two paths to differ, or a zone to be corrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Divergence {
    /// The two zones answered an operation differently.
    Results {
        /// The batched zone's answer.
        batched: Result<(), BuddyError>,
        /// The per-page zone's answer.
        per_page: Result<(), BuddyError>,
    },
    /// A zone failed [`Zone::check`].
    Corrupt(crate::zone::check::Corruption),
    /// After draining, the zones differ in a frame's state, order, refcount or poison.
    Frames(Pfn),
    /// After draining, the zones differ in their free blocks.
    FreeBlocks,
    /// An operation failed and changed the batched zone beyond what its docs allow: the
    /// first difference between the zone before and after it.
    ChangedOnError(SnapshotDifference),
    /// `alloc_contig_pages` answered otherwise than the search of every aligned candidate:
    /// what it answered and the first candidate wholly free, if any.
    ContigSearch {
        /// The zone's answer.
        got: Result<Pfn, BuddyError>,
        /// The first aligned run of free frames of that length.
        free: Option<Pfn>,
    },
    /// Free page reporting broke its contract on one zone.
    Reporting {
        /// Whether on the per-page zone (else on the batched zone).
        per_page: bool,
        /// What was wrong.
        fault: ReportFault,
    },
}

/// How free page reporting broke its contract under [`Op::Report`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFault {
    /// A frame was handed to the sink twice with no allocation or free in between.
    HandedTwice(Pfn),
    /// A call reported nothing while free blocks were left unreported, or calls went on
    /// reporting past the zone's size.
    NoProgress {
        /// Frames free in the buddy.
        free: u64,
        /// Frames free and marked reported.
        reported_free: u64,
    },
    /// An accepting sink's call failed.
    Failed(ReportError),
    /// A refused report answered other than `Ok(0)` or `Rejected`, or changed the zone.
    RefusalChanged,
}

/// What the batched and the per-page zone answered.
type PairResult = (Result<(), BuddyError>, Result<(), BuddyError>);

/// Allocations [`Lockstep`] remembers for later operations.
const SLOTS: usize = 64;

/// Two zones with the same configuration driven by the same operations: one frees runs with
/// [`Zone::free_contig_range`], the other with [`free_contig_range_per_page`]. Everything
/// else is applied to both. [`Lockstep::apply`] checks both zones after every step (or
/// every few: [`Lockstep::with_check_interval`]) and that both returned the same result;
/// [`Lockstep::finish`] drains both and compares every frame and every free block.
pub struct Lockstep<F, P, R> {
    /// The zone using the batched path.
    pub batched: Zone<F, P, R>,
    /// The zone using the per-page path.
    pub per_page: Zone<F, P, R>,
    allocs: [Option<(Pfn, Order)>; SLOTS],
    next_slot: usize,
    /// Contiguous allocations: first frame, frames, frozen.
    contigs: [Option<(Pfn, u64, bool)>; SLOTS],
    next_contig: usize,
    cmas: [Option<CmaArea>; SLOTS],
    next_cma: usize,
    checks: CheckInterval,
    /// The batched zone before and after the operation being applied (storage kept).
    before: Snapshot,
    after: Snapshot,
}

impl<F, P, R> Lockstep<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Two zones built from the same configuration and memory map.
    ///
    /// # Safety
    /// Nothing but this harness uses the zones, and no [`FrameClearer`](crate::FrameClearer)
    /// or migration reaches their memory: the harness frees pages it may not hold (that is
    /// what its error paths test), which is sound only where the zones never write a frame.
    #[must_use]
    #[allow(unsafe_code)]
    pub unsafe fn new(batched: Zone<F, P, R>, per_page: Zone<F, P, R>) -> Self {
        // Free page reporting of every order, four blocks a round, for `Op::Report` (a zone
        // the caller registered keeps its registration).
        let reporting = crate::report_sink::PageReporting::new(Order::ZERO).with_capacity(4);
        for z in [&batched, &per_page] {
            let _ = z.register_page_reporting(reporting);
        }
        let before = Snapshot::of(&batched);
        Self {
            after: before.clone(),
            before,
            batched,
            per_page,
            allocs: [None; SLOTS],
            next_slot: 0,
            contigs: [None; SLOTS],
            next_contig: 0,
            cmas: [None; SLOTS],
            next_cma: 0,
            checks: CheckInterval::every(1),
        }
    }

    /// The same harness checking both zones (`Zone::check`) only every `ops` calls of
    /// [`Lockstep::apply`] (at least 1; 1 by default), for long runs such as fuzzing: the
    /// two zones' results are compared every time, and [`Lockstep::finish`] checks and
    /// compares everything at the end.
    #[must_use]
    pub fn with_check_interval(self, ops: usize) -> Self {
        Self {
            checks: CheckInterval::every(ops),
            ..self
        }
    }

    fn slot(&self, slot: usize) -> Option<(Pfn, Order)> {
        let used = self.next_slot.min(SLOTS);
        (used > 0).then(|| self.allocs[slot % used]).flatten()
    }

    fn page(&self, slot: usize, page: u64) -> Option<Pfn> {
        let (pfn, order) = self.slot(slot)?;
        Some(Pfn(pfn.0 + page % order.pages()))
    }

    /// Applies one operation to both zones. When it fails, the batched zone must read
    /// exactly as before it (a [`Snapshot`] of the whole zone), but for what the operation's
    /// docs allow: an allocation that runs out of memory may initialize deferred frames.
    /// Operations that drain the per-cpu lists and merge free blocks on their way (the
    /// allocations, contiguous allocation, offline) find both zones drained and merged
    /// first, and an offline, which initializes every deferred frame first, finds none.
    ///
    /// # Errors
    /// The first [`Divergence`] found.
    pub fn apply(&mut self, op: Op) -> Result<(), Divergence> {
        if matches!(
            op,
            Op::Alloc { .. }
                | Op::AllocFrozen { .. }
                | Op::AllocTyped { .. }
                | Op::AllocHooked { .. }
                | Op::AllocContig { .. }
                | Op::AllocContigPages { .. }
                | Op::Offline { .. }
                | Op::ReserveCma { .. }
                | Op::AllocCma { .. }
                | Op::Report { .. }
        ) {
            if matches!(op, Op::Offline { .. }) {
                for z in [&self.batched, &self.per_page] {
                    while z.init_deferred(u64::MAX) > 0 {}
                }
            }
            // Drained and merged zones hold the same free blocks (merging is canonical),
            // though not in the same list order. (Merging the pairs that stayed apart for
            // their knowledge of zero first: else only the batched zone's slow path would.)
            for z in [&self.batched, &self.per_page] {
                z.drain_all();
                z.merge_free_blocks();
            }
        }
        self.before.retake(&self.batched);
        let deferred = self.batched.deferred_pages();
        let Some((a, b)) = self.apply_both(op)? else {
            return Ok(());
        };
        if a != b {
            return Err(Divergence::Results {
                batched: a,
                per_page: b,
            });
        }
        let documented = matches!(a, Err(BuddyError::OutOfMemory(_)))
            && self.batched.deferred_pages() != deferred;
        if a.is_err() && !documented {
            self.after.retake(&self.batched);
            // The reported mark is advisory: a failed operation that drained, merged or tried
            // ranges may take it off (the block is reported again later), which
            // `report_free_pages` documents; compared without it.
            self.before.forget_reported_marks();
            self.after.forget_reported_marks();
            if let Some(d) = self.before.difference(&self.after) {
                return Err(Divergence::ChangedOnError(d));
            }
        }
        if !self.checks.due() {
            return Ok(());
        }
        self.batched.check().map_err(Divergence::Corrupt)?;
        self.per_page.check().map_err(Divergence::Corrupt)
    }

    /// [`Lockstep::apply`]'s operation on both zones: their answers, or `None` for an
    /// operation that names nothing recorded (or that this harness does not model).
    #[allow(unsafe_code)]
    fn apply_both(&mut self, op: Op) -> Result<Option<PairResult>, Divergence> {
        let start = self.batched.config().start;
        let pair = match op {
            Op::Alloc { cpu, order } => {
                self.alloc_both(cpu, order, MigrateType::Unmovable, How::Plain)
            }
            Op::AllocFrozen { cpu, order } => {
                self.alloc_both(cpu, order, MigrateType::Unmovable, How::Frozen)
            }
            Op::AllocTyped { cpu, order, mt } => self.alloc_both(cpu, order, kind(mt), How::Plain),
            Op::AllocHooked { cpu, order, mt } => {
                self.alloc_both(cpu, order, kind(mt), How::Hooked)
            }
            Op::ReserveCma { cpu, offset, len } => {
                let pb = self.batched.config().pageblock_order.pages();
                let Some(first) = start.0.checked_add(offset).map(|p| Pfn(p & !(pb - 1))) else {
                    return Ok(None);
                };
                let nr = len.saturating_mul(pb);
                let reserve = |z: &Zone<F, P, R>| {
                    let refuse = |_: &crate::migrate::Migration| false;
                    z.reserve_cma_at(cpu, first, nr, &mut { refuse })
                };
                let (a, b) = (reserve(&self.batched), reserve(&self.per_page));
                if let Ok(area) = a {
                    self.cmas[self.next_cma % SLOTS] = Some(area);
                    self.next_cma += 1;
                }
                (any(a.map(drop)), any(b.map(drop)))
            }
            Op::AllocCma {
                cpu,
                area,
                len,
                align,
            } => {
                let used = self.next_cma.min(SLOTS);
                let Some(area) = (used > 0).then(|| self.cmas[area % used]).flatten() else {
                    return Ok(None);
                };
                let align = match Order::new(align) {
                    Ok(o) => o,
                    Err(e) => return Ok(Some((Err(e.into()), Err(e.into())))),
                };
                let take = |z: &Zone<F, P, R>| {
                    let mut refuse = |_: &crate::migrate::Migration| false;
                    let request = AllocRequest::frames(len)
                        .aligned(align)
                        .contiguous(&mut refuse)
                        .from_cma(area);
                    any(any(z.cpu(cpu))?.alloc_raw(request))
                };
                let (a, b) = (take(&self.batched), take(&self.per_page));
                if let Ok(first) = a {
                    if !area.contains(first, len) {
                        return Err(Divergence::ContigSearch { got: a, free: None });
                    }
                    self.contigs[self.next_contig % SLOTS] = Some((first, len, false));
                    self.next_contig += 1;
                }
                (a.map(drop), b.map(drop))
            }
            Op::FailPageAlloc(attr) => {
                self.batched.set_fail_page_alloc(attr);
                return Ok(None);
            }
            Op::CompactWork { cpu, budget } => {
                let work = |z: &Zone<F, P, R>| -> Result<(), BuddyError> {
                    let refuse = |_: &crate::migrate::Migration| false;
                    let done = z.compact_work(cpu, budget, &mut { refuse }, &mut |_| 0)?;
                    // Every move refused: nothing moved, and nothing freed to reclaim.
                    if done.stats.moved_pages != 0 || done.reclaimed != 0 {
                        return Err(BuddyError::Overflow);
                    }
                    z.drain_all();
                    z.merge_free_blocks();
                    Ok(())
                };
                (any(work(&self.batched)), any(work(&self.per_page)))
            }
            Op::AllocContig {
                cpu,
                offset,
                len,
                frozen,
            } => match start.checked_add(offset) {
                Some(first) => {
                    let refuse = |_: &crate::migrate::Migration| false;
                    let contig = |z: &Zone<F, P, R>| {
                        if frozen {
                            z.alloc_contig_frozen_range(cpu, first, len, &mut { refuse })
                        } else {
                            z.alloc_contig_range(cpu, first, len, &mut { refuse })
                        }
                    };
                    let (a, b) = (any(contig(&self.batched)), any(contig(&self.per_page)));
                    if a.is_ok() {
                        self.contigs[self.next_contig % SLOTS] = Some((first, len, frozen));
                        self.next_contig += 1;
                    }
                    (a, b)
                }
                None => return Ok(None),
            },
            Op::AllocContigPages {
                cpu,
                len,
                align,
                frozen,
            } => self.contig_pages_both(cpu, len, align, frozen)?,
            Op::Offline { cpu, offset, len } => match start.checked_add(offset) {
                Some(first) => {
                    let offline = |z: &Zone<F, P, R>| {
                        z.offline_range(cpu, first, len, &mut |_: &crate::migrate::Migration| false)
                            .map(drop)
                    };
                    (any(offline(&self.batched)), any(offline(&self.per_page)))
                }
                None => return Ok(None),
            },
            Op::FreeContig {
                cpu,
                slot,
                offset,
                len,
            } => match self.contig(slot) {
                Some((pfn, pages, frozen)) => {
                    let first = Pfn(pfn.0 + offset % pages);
                    let len = len % (pages + 2);
                    if frozen {
                        self.free_frozen_both(cpu, first, len)
                    } else {
                        self.free_both(cpu, first, len)
                    }
                }
                None => return Ok(None),
            },
            Op::Split { slot } => match self.slot(slot) {
                Some((pfn, order)) => (
                    any(self.batched.split_page(pfn, order)),
                    any(self.per_page.split_page(pfn, order)),
                ),
                None => return Ok(None),
            },
            Op::SplitFrozen { cpu, slot } => match self.slot(slot) {
                // The CPU the pages are freed on first: a split whose free cannot follow
                // would change the zone on an error.
                Some(_) if self.batched.cpu(cpu).is_err() => (
                    any(self.batched.cpu(cpu).map(drop)),
                    any(self.per_page.cpu(cpu).map(drop)),
                ),
                // SAFETY: as for `Op::Put`; a recorded frozen block is this harness's, split
                // once (a second split fails alike on both zones: its head is a page now).
                Some((pfn, order)) => match unsafe {
                    (
                        any(self.batched.split_frozen_pages(pfn, order)),
                        any(self.per_page.split_frozen_pages(pfn, order)),
                    )
                } {
                    (Ok(()), Ok(())) => self.free_frozen_both(cpu, pfn, order.pages()),
                    refused => refused,
                },
                None => return Ok(None),
            },
            Op::Get { slot, page } => match self.page(slot, page) {
                Some(pfn) => (
                    any(self.batched.get_page(pfn)),
                    any(self.per_page.get_page(pfn)),
                ),
                None => return Ok(None),
            },
            Op::Put { cpu, slot, page } => match self.page(slot, page) {
                // SAFETY: `Lockstep::new`'s contract: the zones are this harness's alone and
                // never write a frame.
                Some(pfn) => unsafe {
                    (
                        any(self.batched.put_page(cpu, pfn)),
                        any(self.per_page.put_page(cpu, pfn)),
                    )
                },
                None => return Ok(None),
            },
            Op::Poison { slot, page } => match self.page(slot, page) {
                Some(pfn) => (
                    any(self.batched.mark_hwpoison(pfn)),
                    any(self.per_page.mark_hwpoison(pfn)),
                ),
                None => return Ok(None),
            },
            Op::FreeRun {
                cpu,
                slot,
                offset,
                len,
            } => match self.slot(slot) {
                Some((pfn, order)) => {
                    let first = Pfn(pfn.0 + offset % order.pages());
                    let len = len % (order.pages() + 2);
                    self.free_both(cpu, first, len)
                }
                None => return Ok(None),
            },
            Op::FreeRaw { cpu, offset, len } => match start.checked_add(offset) {
                Some(first) => self.free_both(cpu, first, len),
                None => return Ok(None),
            },
            Op::FreePages { cpu, slot } => match self.slot(slot) {
                // SAFETY: as for `Op::Put`.
                Some((pfn, order)) => unsafe {
                    (
                        any(self.batched.free_pages(cpu, pfn, order)),
                        any(self.per_page.free_pages(cpu, pfn, order)),
                    )
                },
                None => return Ok(None),
            },
            Op::FreeFrozen { cpu, slot } => match self.slot(slot) {
                // SAFETY: as for `Op::Put`. The batched zone tries the listed free first (an
                // embedder's fast path): a refusal must have changed nothing, so that the
                // whole free after it leaves the zone as the other's.
                Some((pfn, order)) => unsafe {
                    (
                        any(any(self.batched.cpu(cpu)).and_then(|c| {
                            if c.free_frozen_pages_listed(pfn, order) {
                                Ok(())
                            } else {
                                any(c.free_frozen_pages(pfn, order))
                            }
                        })),
                        any(any(self.per_page.cpu(cpu))
                            .and_then(|c| any(c.free_frozen_pages(pfn, order)))),
                    )
                },
                None => return Ok(None),
            },
            Op::DrainCpu { cpu } => (
                any(self.batched.cpu(cpu).map(|c| c.drain())),
                any(self.per_page.cpu(cpu).map(|c| c.drain())),
            ),
            Op::DecayPcpHigh { cpu } => (
                any(self.batched.cpu(cpu).map(|c| {
                    c.decay_pcp_high();
                })),
                any(self.per_page.cpu(cpu).map(|c| {
                    c.decay_pcp_high();
                })),
            ),
            Op::DrainAll => {
                self.batched.drain_all();
                self.per_page.drain_all();
                (Ok(()), Ok(()))
            }
            Op::AddMemory {
                offset,
                len,
                zeroed,
            } => match start.checked_add(offset) {
                Some(first) if zeroed => (
                    any(self.batched.add_zeroed_memory(first, len)),
                    any(self.per_page.add_zeroed_memory(first, len)),
                ),
                Some(first) => (
                    any(self.batched.add_memory(first, len)),
                    any(self.per_page.add_memory(first, len)),
                ),
                None => return Ok(None),
            },
            Op::InitDeferred { budget } => {
                let (a, b) = (
                    self.batched.init_deferred(budget),
                    self.per_page.init_deferred(budget),
                );
                // Both zones defer the same ranges: they initialize as much.
                let same = if a == b {
                    Ok(())
                } else {
                    Err(BuddyError::Overflow)
                };
                (Ok(()), same)
            }
            // Everything free is reported, `budget` frames a call, calls repeated until one
            // reports nothing. Which free blocks already carry the mark differs between the
            // zones (a per-cpu refill of the batched zone takes marked blocks off, where the
            // per-page zone takes the same block in place), so each zone is judged alone:
            // accepted, every call makes progress, no frame is handed to the sink twice (no
            // allocation in between) and every free block ends up reported; refused, the zone
            // is exactly as it was.
            Op::Report { budget, accept } => {
                let per_page_before = Snapshot::of(&self.per_page);
                for (per_page, z, before) in [
                    (false, &self.batched, &self.before),
                    (true, &self.per_page, &per_page_before),
                ] {
                    let judged = if accept {
                        reports_each_free_frame_once(z, budget.max(1))
                    } else {
                        let mut refuse = |_: &[crate::report_sink::ReportedBlock]| false;
                        let r = z.report_free_pages(budget, &mut refuse);
                        let unchanged = matches!(r, Ok(0) | Err(ReportError::Rejected))
                            && before.difference(&Snapshot::of(z)).is_none();
                        if unchanged {
                            Ok(())
                        } else {
                            Err(ReportFault::RefusalChanged)
                        }
                    };
                    judged.map_err(|fault| Divergence::Reporting { per_page, fault })?;
                }
                (Ok(()), Ok(()))
            }
            // No memory behind these zones: zeroing is the zero reference's.
            Op::AllocZeroed { .. } | Op::ZeroSome { .. } | Op::HugeFault { .. } => {
                return Ok(None);
            }
        };
        Ok(Some(pair))
    }

    /// Allocates a block of `mt` on both zones: the batched zone chooses, the per-page zone
    /// takes the same block.
    fn alloc_both(&mut self, cpu: usize, order: u8, mt: MigrateType, how: How) -> PairResult {
        // Both zones were drained and merged (`apply`), but their lists are not in the
        // same order: the per-page zone takes the very block the batched zone handed out.
        let order = Order::new(order).map_err(BuddyError::from);
        let typed = |o| AllocRequest::order(o).kind(mt);
        let (mut refuse, mut nothing) = (|_: &crate::migrate::Migration| false, |_| 0);
        let injected = self.batched.injected_failures();
        let a = order.and_then(|o| {
            let cpu = any(self.batched.cpu(cpu))?;
            match how {
                How::Plain => any(cpu.alloc_raw(typed(o))),
                How::Hooked => {
                    any(cpu.alloc_raw(typed(o).reclaim(&mut nothing).compact(&mut refuse)))
                }
                How::Frozen => any(cpu.alloc_frozen_pages(o)),
            }
        });
        let b = match (a, order) {
            // A failure fault injection made: out of memory (the zone unchanged, which
            // `apply` checks), and nothing for the per-page zone to mirror.
            (_, Ok(o)) if self.batched.injected_failures() != injected => {
                Err(BuddyError::OutOfMemory(o))
            }
            (Ok(pfn), Ok(o)) => {
                self.allocs[self.next_slot % SLOTS] = Some((pfn, o));
                self.next_slot += 1;
                // The batched zone's slow path may have initialized deferred memory (in
                // chunks taken in order): the per-page zone initializes as much.
                let grown = self
                    .per_page
                    .deferred_pages()
                    .saturating_sub(self.batched.deferred_pages());
                if grown > 0 {
                    self.per_page.init_deferred(grown);
                }
                // The batched zone's allocation may have claimed pageblocks.
                self.per_page.copy_pageblocks_from(&self.batched);
                let taken = any(self.per_page.alloc_pages_at_as(pfn, o, mt));
                if how == How::Frozen {
                    self.per_page.freeze_fresh_block(pfn, o);
                }
                taken.map(|()| pfn)
            }
            // Both fail alike: same order check, same (canonical) free blocks.
            _ => order.and_then(|o| {
                let cpu = any(self.per_page.cpu(cpu))?;
                match how {
                    How::Frozen => any(cpu.alloc_frozen_pages(o)),
                    _ => any(cpu.alloc_raw(typed(o))),
                }
            }),
        };
        (a.map(|_| ()), b.map(|_| ()))
    }

    fn contig(&self, slot: usize) -> Option<(Pfn, u64, bool)> {
        let used = self.next_contig.min(SLOTS);
        (used > 0).then(|| self.contigs[slot % used]).flatten()
    }

    /// Frees a run of frozen pages on both zones, batched and per page.
    #[allow(unsafe_code)]
    fn free_frozen_both(&self, cpu: usize, pfn: Pfn, len: u64) -> PairResult {
        // SAFETY: `Lockstep::new`'s contract: the zones are this harness's alone and never
        // write a frame.
        unsafe {
            (
                any(self.batched.free_contig_frozen_range(cpu, pfn, len)),
                any(crate::reference::free_contig_frozen_range_per_page(
                    &self.per_page,
                    cpu,
                    pfn,
                    len,
                )),
            )
        }
    }

    /// Frees a run on both zones, batched and per page.
    #[allow(unsafe_code)]
    fn free_both(&self, cpu: usize, pfn: Pfn, len: u64) -> PairResult {
        // SAFETY: `Lockstep::new`'s contract: the zones are this harness's alone and never
        // write a frame.
        unsafe {
            (
                any(self.batched.free_contig_range(cpu, pfn, len)),
                any(self.per_page.cpu(cpu))
                    .and_then(|c| any(free_contig_range_per_page(&c, pfn, len))),
            )
        }
    }

    /// `alloc_contig_pages` (or the frozen variant) on both zones, refusing every move, and
    /// its answer checked against the search of every aligned candidate: with nothing
    /// allowed to move, the first aligned run of free frames (every frame in the buddy: the
    /// zones are drained) is the answer, and out of memory only if there is none.
    fn contig_pages_both(
        &mut self,
        cpu: usize,
        len: u64,
        align: u8,
        frozen: bool,
    ) -> Result<PairResult, Divergence> {
        let align = match Order::new(align) {
            Ok(o) => o,
            Err(e) => return Ok((Err(e.into()), Err(e.into()))),
        };
        let free = first_free_run(&self.batched, len, align);
        let contig = |z: &Zone<F, P, R>| {
            let mut refuse = |_: &crate::migrate::Migration| false;
            let request = AllocRequest::frames(len)
                .aligned(align)
                .contiguous(&mut refuse);
            any(any(z.cpu(cpu))?.alloc_raw(if frozen { request.frozen() } else { request }))
        };
        let (a, b) = (contig(&self.batched), contig(&self.per_page));
        let searched =
            len > 0 && cpu < self.batched.config().cpus && align <= self.batched.config().max_order;
        if searched && a.ok() != free {
            return Err(Divergence::ContigSearch { got: a, free });
        }
        if let Ok(first) = a {
            self.contigs[self.next_contig % SLOTS] = Some((first, len, frozen));
            self.next_contig += 1;
        }
        Ok((a.map(drop), b.map(drop)))
    }

    /// Drains both zones and compares them frame by frame and block by block.
    ///
    /// # Errors
    /// The first [`Divergence`] found.
    pub fn finish(&mut self) -> Result<(), Divergence> {
        self.batched.drain_all();
        self.per_page.drain_all();
        self.batched.check().map_err(Divergence::Corrupt)?;
        self.per_page.check().map_err(Divergence::Corrupt)?;
        let start = self.batched.config().start;
        let (fa, fb) = (self.batched.frames_slice(), self.per_page.frames_slice());
        for (i, (x, y)) in fa.iter().zip(fb).enumerate() {
            // The metadata words: state, order, references and flags (one comparison), but
            // the reported mark (see `Op::Report`).
            if x.load().ignoring_reported() != y.load().ignoring_reported() {
                return Err(Divergence::Frames(Pfn(start.0 + i as u64)));
            }
        }
        if !self.batched.free_blocks().eq(self.per_page.free_blocks()) {
            return Err(Divergence::FreeBlocks);
        }
        Ok(())
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Gives this zone's pageblocks the types and isolation of `other`'s (a zone of the same
    /// geometry), moving free blocks with them: for harnesses whose second zone replays an
    /// allocation at the address the first chose (`alloc_pages_at` claims nothing).
    pub(crate) fn copy_pageblocks_from<F2, P2, R2>(&self, other: &Zone<F2, P2, R2>)
    where
        F2: FrameStorage,
        P2: PerCpuSet<R2>,
        R2: lock_api::RawMutex,
    {
        let (m, theirs) = (self.map(), other.map());
        let mut free = self.lock_zone();
        // The frame count fits the indices (`ZoneConfig::validate`).
        for block in m.pageblocks(FrameIdx::FIRST..FrameIdx(m.frames.len() as u32)) {
            let bits = theirs.pageblock_bits_frame(block.start).pageblock_bits();
            if m.pageblock_bits_frame(block.start).pageblock_bits() != bits {
                free.set_pageblock(m, block.start, Pageblock::from_bits(bits));
                // The exact bits (an uninitialized pageblock of theirs stays so).
                m.pageblock_bits_frame(block.start).set_pageblock_bits(bits);
            }
        }
    }
}

/// The first run of `len` frames aligned to `align` (from the zone's first aligned frame)
/// whose every frame lies in a free block, or `None`.
fn first_free_run<F, P, R>(zone: &Zone<F, P, R>, len: u64, align: Order) -> Option<Pfn>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    let cfg = zone.config();
    let mut free = std::vec![false; zone.frames_slice().len()];
    for (pfn, order, _) in zone.free_blocks() {
        let at = (pfn.0 - cfg.start.0) as usize;
        free[at..at + order.pages() as usize].fill(true);
    }
    // A search outside the reservations passes over their frames.
    let m = zone.map();
    for block in m.pageblocks(FrameIdx::FIRST..FrameIdx(free.len() as u32)) {
        if m.pageblock(block.start).cma {
            free[block.start.0 as usize..block.end.0 as usize].fill(false);
        }
    }
    let step = align.pages();
    let mut start = cfg.start.0.div_ceil(step).checked_mul(step)?;
    while len > 0 && start.checked_add(len)? <= cfg.start.0 + cfg.nr_pages {
        let at = (start - cfg.start.0) as usize;
        if free[at..at + len as usize].iter().all(|&f| f) {
            return Some(Pfn(start));
        }
        start = start.checked_add(step)?;
    }
    None
}

/// Reports everything free in `z`, `budget` frames a call, until a call reports nothing;
/// checks that every call but the last made progress, no frame was handed to the sink twice,
/// and every free block in the buddy ends up reported.
fn reports_each_free_frame_once<F, P, R>(z: &Zone<F, P, R>, budget: u64) -> Result<(), ReportFault>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    let mut handed = std::vec::Vec::new();
    let mut sink = |blocks: &[crate::report_sink::ReportedBlock]| {
        handed.extend(blocks.iter().map(|b| (b.pfn.0, b.pfn.0 + b.pages())));
        true
    };
    let no_progress = || ReportFault::NoProgress {
        free: z.buddy_pages(),
        reported_free: z.page_reporting_stats().reported_free,
    };
    // Each call that reports something reports at least one frame: the zone's frames bound
    // the calls.
    let mut calls = 0u64;
    loop {
        match z.report_free_pages(budget, &mut sink) {
            Ok(0) => break,
            Ok(_) if calls <= z.span().pages => calls += 1,
            Ok(_) => return Err(no_progress()),
            Err(e) => return Err(ReportFault::Failed(e)),
        }
    }
    handed.sort_unstable();
    if let Some(w) = handed.windows(2).find(|w| w[0].1 > w[1].0) {
        return Err(ReportFault::HandedTwice(Pfn(w[1].0)));
    }
    if z.page_reporting_stats().reported_free != z.buddy_pages() {
        return Err(no_progress());
    }
    Ok(())
}

/// How [`Lockstep::alloc_both`] allocates a block.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    /// `alloc_raw` of the block.
    Plain,
    /// `alloc_raw` with slow-path callbacks that reclaim nothing and move nothing.
    Hooked,
    /// `alloc_frozen_pages`.
    Frozen,
}
