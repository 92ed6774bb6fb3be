//! The per-page reference for zeroed allocation and background zeroing: a zone over a buffer
//! that stands for its physical memory, driven by [`Op`]s (those it models: allocations,
//! zeroed allocations, frees of whole blocks, background zeroing, drains, memory added),
//! with every page's expected contents tracked beside it. After each operation [`ZeroedModel::apply`] checks the zone
//! ([`Zone::check`]), that every block the zone knows to be zero reads zero and is zero in
//! the reference, that blocks handed out by `alloc_zeroed` read zero, that nothing cleared a
//! page someone holds, and that zeroed allocations take known-zero blocks whenever the zone
//! has one they can use. Free page reporting runs against it too: the sink discards what it
//! is handed (zeroes it, as a host does), so reported blocks must come back known zero, and
//! a refused report must leave the zone as it was.

// The model reaches its buffer through the same exposed addresses the zone writes through,
// so that both hold the same kind of pointer to it (one `unsafe` per access, below).
#![allow(unsafe_code)]

use alloc::vec;
use alloc::vec::Vec;
use core::ptr::NonNull;

use crate::boxed::BoxedZone;
use crate::error::alloc::AllocError;
use crate::error::buddy::BuddyError;
use crate::huge_fault::FaultFolio;
use crate::memory::ZERO_FRAME;
use crate::memory::{FrameClearer, FrameMemory, OffsetMap};
use crate::migratetype::MigrateType;
use crate::report_sink::{PageReporting, ReportedBlock};
use crate::testing::ops::{CheckInterval, Op, kind};
use crate::testing::snapshot::Snapshot;
use crate::types::Order;
use crate::zone::FreeWhere;
use crate::zone::config::ZoneConfig;
use mm_types::Pfn;
use zero_core::{ClearConfig, NoResched, PageSize, PreemptModel};

/// One page of the buffer: 4 KiB, aligned as a frame.
#[derive(Clone)]
#[repr(C, align(4096))]
struct Page([u8; 4096]);

/// What [`ZeroedModel::apply`] found wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZeroDivergence {
    /// [`Zone::check`](crate::Zone::check) failed.
    Corrupt(crate::zone::check::Corruption),
    /// A block the zone knows to be zero has a page that does not read zero.
    KnownZeroIsNot(Pfn),
    /// `alloc_zeroed` returned a block with a page that does not read zero.
    NotZeroed(Pfn),
    /// A held page's contents changed while it was held.
    HeldPageChanged(Pfn),
    /// An allocation returned a block overlapping one the model holds.
    HandedOutTwice(Pfn),
    /// A zeroed allocation cleared a block although the zone had a known-zero one it could
    /// take.
    MissedKnownZero(Order),
    /// A huge-page fault fell back to a page although a block of the pageblock order was
    /// free, or got a block that is not one (not of that order, or misaligned), or counted
    /// other than what it got (`thp_fault_alloc`, `thp_fault_fallback`).
    HugeFault(FaultFolio),
    /// A huge-page fault failed with other than its documented errors, or changed the zone
    /// although it failed.
    HugeFaultFailed(AllocError),
    /// The pool of known-zero frames shrank by more than a zeroed allocation took, or grew
    /// by other than what background zeroing cleared (a split or merge dropped knowledge).
    KnowledgeLost,
    /// An operation failed that should not have.
    Unexpected(BuddyError),
    /// A block handed to the report sink was not taken off the free lists, or is held.
    ReportedInUse(Pfn),
    /// A frame was handed to an accepting report sink twice with no other operation in
    /// between (a report must make progress, not discard the same memory again).
    ReportedTwice(Pfn),
    /// A refused report changed the zone.
    ReportChanged(crate::testing::snapshot::SnapshotDifference),
    /// A report returned other than what its sink was handed (or than its refusal), or
    /// reported nothing with unreported free blocks in the buddy and budget left.
    ReportResult {
        /// Frames handed to the sink.
        handed: u64,
        /// What the call returned.
        result: Result<u64, crate::error::report::ReportError>,
    },
    /// `zero_some` cleared more than its budget, or less than every free block not known
    /// zero although the budget covered them.
    Budget {
        /// Budget.
        budget: u64,
        /// Frames cleared.
        cleared: u64,
        /// Frames free in the buddy, not known zero and not reported before the call.
        unzeroed: u64,
    },
}

/// A zone of the configuration given (every frame reserved until added), its memory, and
/// the per-page reference: for each page, the byte its holder wrote to it.
pub struct ZeroedModel {
    zone: BoxedZone,
    clearer: FrameClearer<OffsetMap>,
    /// The frames' memory, reached only through `clearer`'s map once the model is built.
    ram: Vec<Page>,
    /// Per page: the byte its last holder wrote at the page's marker offset (every other
    /// byte of a held page reads zero: it was handed out zeroed or fresh from `new`'s
    /// buffer). A free page holds whatever its last holder left, until the zone clears it.
    pages: Vec<u8>,
    held: Vec<(Pfn, Order)>,
    /// Frames `[start, end)` handed to an accepting report sink since the last operation
    /// that was not a report: none may be handed again until one is.
    reported: Vec<(u64, u64)>,
    /// The next non-zero byte a holder writes.
    stamp: u8,
    /// When [`ZeroedModel::apply`] runs the full [`ZeroedModel::check`].
    checks: CheckInterval,
}

impl core::fmt::Debug for ZeroedModel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ZeroedModel")
            .field("zone", &self.zone)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

/// The buffer of the last model dropped, for the next one to reuse (cleared first).
static SPARE_RAM: spin::Mutex<Vec<Page>> = spin::Mutex::new(Vec::new());

impl Drop for ZeroedModel {
    fn drop(&mut self) {
        // The zone never touches its memory once its model is gone.
        let ram = core::mem::take(&mut self.ram);
        let mut spare = SPARE_RAM.lock();
        if ram.capacity() > spare.capacity() {
            *spare = ram;
        }
    }
}

/// Where in page `i` a holder writes (spread over the page, away from its ends too).
fn marker(i: usize) -> usize {
    (i * 1031 + 17) % 4096
}

impl ZeroedModel {
    /// A zone for `cfg` with no usable frames yet, over a buffer whose bytes are not zero
    /// (as memory fresh from firmware is not), clearing with `preempt`'s batches through a
    /// verifying [`FrameClearer`].
    ///
    /// # Errors
    /// As [`BoxedZone::new_boxed_empty`].
    pub fn new(cfg: ZoneConfig, preempt: PreemptModel) -> Result<Self, BuddyError> {
        let zone = BoxedZone::new_boxed_empty(cfg)?;
        // Reporting of every order, four blocks a round, the discard zeroing (`Op::Report`).
        let reporting = PageReporting::new(Order::ZERO)
            .with_capacity(4)
            .discard_zeroes(true);
        zone.register_page_reporting(reporting)?;
        let n = cfg.nr_pages as usize;
        // A dropped model's buffer if there is one: a fresh one costs a page fault per page,
        // most of the time of a short run such as one fuzz input.
        let mut ram = core::mem::take(&mut *SPARE_RAM.lock());
        ram.clear();
        ram.resize(n, Page([0; 4096]));
        let mut pages = vec![0u8; n];
        for (i, (page, expect)) in ram.iter_mut().zip(&mut pages).enumerate() {
            *expect = 0xA5;
            page.0[marker(i)] = 0xA5;
        }
        let base = ram.as_mut_ptr().expose_provenance();
        let offset = base.wrapping_sub((cfg.start.0 as usize).wrapping_mul(4096));
        // SAFETY: frame start + i is ram[i], a 4 KiB-aligned page of the buffer this model
        // owns and only reads between the zone's calls, when the zone is not touching it.
        let memory = unsafe { OffsetMap::new(offset) };
        let clear = ClearConfig::new(PageSize::Size4KiB, preempt);
        let clearer = FrameClearer::new(memory, clear)?.verifying();
        Ok(Self {
            zone,
            clearer,
            ram,
            pages,
            held: Vec::new(),
            reported: Vec::new(),
            stamp: 1,
            checks: CheckInterval::every(1),
        })
    }

    /// The same model running the full [`ZeroedModel::check`] only every `ops` calls of
    /// [`ZeroedModel::apply`] (at least 1; 1 by default), for long runs such as fuzzing:
    /// each operation's own checks (a block handed out twice, a zeroed allocation that does
    /// not read zero, a held page changed when it is freed) still run every time. Call
    /// [`ZeroedModel::check`] at the end.
    #[must_use]
    pub fn with_check_interval(mut self, ops: usize) -> Self {
        self.checks = CheckInterval::every(ops);
        self
    }

    /// The zone.
    #[must_use]
    pub fn zone(&self) -> &BoxedZone {
        &self.zone
    }

    fn index(&self, pfn: Pfn) -> usize {
        (pfn.0 - self.zone.config().start.0) as usize
    }

    /// Page `i`'s first byte, where the zone's memory map has it.
    fn page_ptr(&self, i: usize) -> NonNull<u8> {
        let pfn = Pfn(self.zone.config().start.0 + i as u64);
        match self.clearer.memory().frame_ptr(pfn) {
            Some(p) => p,
            // `new` placed every frame of the zone in the buffer, page-aligned.
            None => unreachable!("frame {pfn} is in the model's buffer"),
        }
    }

    /// Page `i`'s bytes, read between the zone's calls.
    fn page(&self, i: usize) -> &[u8] {
        // SAFETY: page i of the buffer this model owns (`self.ram`, alive as long as self);
        // no zone call is in progress while the model reads or writes it.
        unsafe { core::slice::from_raw_parts(self.page_ptr(i).as_ptr(), 4096) }
    }

    /// Writes `value` at page `i`'s marker (as its holder), or fills the page (as the
    /// embedder zeroing memory before it declares it zero).
    fn write_page(&mut self, i: usize, value: u8, whole: bool) {
        let p = self.page_ptr(i).as_ptr();
        // SAFETY: as in `page`, and `&mut self` excludes every other access meanwhile.
        let page = unsafe { core::slice::from_raw_parts_mut(p, 4096) };
        if whole {
            page.fill(value);
        } else {
            page[marker(i)] = value;
        }
    }

    fn reads_zero(&self, i: usize) -> bool {
        // One slice comparison (a `memcmp`), not 4096 byte comparisons.
        self.page(i) == ZERO_FRAME
    }

    /// The holder of `[pfn, pfn + 2^order)` writes its next stamp into every page.
    fn write(&mut self, pfn: Pfn, order: Order) {
        let stamp = self.stamp;
        self.stamp = self.stamp.checked_add(1).unwrap_or(1);
        let first = self.index(pfn);
        for i in first..first + order.pages() as usize {
            self.write_page(i, stamp, false);
            self.pages[i] = stamp;
        }
    }

    /// Checks that every page of `[pfn, pfn + 2^order)` reads as the reference says.
    fn check_held(&self, pfn: Pfn, order: Order) -> Result<(), ZeroDivergence> {
        let first = self.index(pfn);
        for i in first..first + order.pages() as usize {
            let page = self.page(i);
            let m = marker(i);
            // Slice comparisons (`memcmp`), not a loop over bytes.
            let rest_zero = page[..m] == ZERO_FRAME[..m] && page[m + 1..] == ZERO_FRAME[m + 1..];
            if page[m] != self.pages[i] || !rest_zero {
                return Err(ZeroDivergence::HeldPageChanged(Pfn(
                    pfn.0 + (i - first) as u64
                )));
            }
        }
        Ok(())
    }

    /// Whether a zeroed allocation of `order` on `cpu` has a known-zero block to take: one
    /// of at least `order` in the buddy, or one on `cpu`'s list for `order`.
    fn known_zero_for(&self, cpu: usize, order: Order) -> bool {
        // Zeroed allocations are unmovable: a per-cpu block of that type, or any in the buddy
        // that is not isolated (the zeroed path falls back across types).
        let own_list = self
            .zone
            .config()
            .pcp_list(order, MigrateType::Unmovable)
            .is_some();
        self.zone.free_blocks().any(|(pfn, o, place)| {
            let Ok(f) = self.zone.frame(pfn) else {
                return false;
            };
            f.zeroed
                && match place {
                    FreeWhere::Buddy => o >= order && f.migratetype.is_some(),
                    FreeWhere::Pcp => {
                        own_list
                            && o == order
                            && f.migratetype == Some(MigrateType::Unmovable)
                            && self.zone.on_pcp_list(cpu, pfn)
                    }
                }
        })
    }

    /// Applies `op`, then checks the zone and the reference.
    ///
    /// # Errors
    /// The first [`ZeroDivergence`] found.
    pub fn apply(&mut self, op: Op) -> Result<(), ZeroDivergence> {
        let start = self.zone.config().start;
        if !matches!(op, Op::Report { .. }) {
            self.reported.clear();
        }
        match op {
            Op::Alloc { cpu, order } => {
                if let Ok(o) = Order::new(order)
                    && let Ok(pfn) = self.zone.alloc_pages(cpu, o)
                {
                    self.check_held_free(pfn, o)?;
                    self.write(pfn, o);
                    self.held.push((pfn, o));
                }
            }
            Op::AllocZeroed { cpu, order, fault } => {
                let Ok(o) = Order::new(order) else {
                    return Ok(());
                };
                let expect_hit = self.known_zero_for(cpu, o);
                let hits = self.zone.counters().zeroed_hits;
                let pool = self.zone.zeroed_pages();
                let fault = fault.map(|f| usize::try_from(f).unwrap_or(usize::MAX));
                match self
                    .zone
                    .alloc_zeroed(cpu, o, &self.clearer, fault, &mut NoResched)
                {
                    Ok(pfn) => {
                        let first = self.index(pfn);
                        if let Some(i) =
                            (first..first + o.pages() as usize).find(|&i| !self.reads_zero(i))
                        {
                            return Err(ZeroDivergence::NotZeroed(Pfn(start.0 + i as u64)));
                        }
                        if expect_hit && self.zone.counters().zeroed_hits == hits {
                            return Err(ZeroDivergence::MissedKnownZero(o));
                        }
                        // A hit splits its block keeping the rest known zero: the pool
                        // shrinks by exactly the block.
                        if expect_hit && self.zone.zeroed_pages() + o.pages() != pool {
                            return Err(ZeroDivergence::KnowledgeLost);
                        }
                        self.pages[first..first + o.pages() as usize].fill(0);
                        self.write(pfn, o);
                        self.held.push((pfn, o));
                    }
                    Err(e @ AllocError::StaleZero(_)) => {
                        return Err(ZeroDivergence::Unexpected(e.into()));
                    }
                    Err(_) => {}
                }
            }
            Op::HugeFault { cpu, offset, mt } => self.huge_fault(cpu, offset, mt)?,
            Op::FreePages { cpu, slot } => {
                if !self.held.is_empty() {
                    let k = slot % self.held.len();
                    let (pfn, o) = self.held[k];
                    self.check_held(pfn, o)?;
                    // SAFETY: the model allocated the block and holds it: nobody else frees
                    // it, and the model reads its memory no more once it is freed.
                    if unsafe { self.zone.free_pages(cpu, pfn, o) }.is_ok() {
                        self.held.swap_remove(k);
                    }
                }
            }
            Op::Report { budget, accept } => self.report(budget, accept)?,
            Op::ZeroSome { budget } => {
                let unzeroed = self.buddy_unzeroed();
                let pool = self.zone.zeroed_pages();
                let cleared = self
                    .zone
                    .zero_some(budget, &self.clearer, &mut NoResched)
                    .map_err(|e| ZeroDivergence::Unexpected(e.into()))?;
                if cleared > budget
                    || (budget >= unzeroed && cleared != unzeroed)
                    || (unzeroed > 0 && budget > 0 && cleared == 0)
                {
                    return Err(ZeroDivergence::Budget {
                        budget,
                        cleared,
                        unzeroed,
                    });
                }
                if self.zone.zeroed_pages() != pool + cleared {
                    return Err(ZeroDivergence::KnowledgeLost);
                }
            }
            Op::DrainCpu { cpu } => {
                if let Ok(c) = self.zone.cpu(cpu) {
                    c.drain();
                }
            }
            Op::DecayPcpHigh { cpu } => {
                if let Ok(c) = self.zone.cpu(cpu) {
                    c.decay_pcp_high();
                }
            }
            Op::DrainAll => self.zone.drain_all(),
            Op::InitDeferred { budget } => {
                self.zone.init_deferred(budget);
            }
            Op::AddMemory {
                offset,
                len,
                zeroed,
            } => {
                let Some(first) = start.checked_add(offset) else {
                    return Ok(());
                };
                let all_reserved = (0..len).all(|k| {
                    first.checked_add(k).is_some_and(|p| {
                        self.zone
                            .frame(p)
                            .is_ok_and(|f| f.state == crate::frame::FrameState::Reserved)
                    })
                });
                if zeroed && len > 0 && all_reserved {
                    // The embedder zeroes the range before it declares it zero.
                    let i = self.index(first);
                    for k in i..i + len as usize {
                        self.write_page(k, 0, true);
                        self.pages[k] = 0;
                    }
                }
                let _ = if zeroed {
                    self.zone.add_zeroed_memory(first, len)
                } else {
                    self.zone.add_memory(first, len)
                };
            }
            // References, poison and runs are the lockstep's: nothing to do here.
            Op::Split { .. }
            | Op::SplitFrozen { .. }
            | Op::Get { .. }
            | Op::Put { .. }
            | Op::Poison { .. }
            | Op::FreeRun { .. }
            | Op::FreeRaw { .. }
            | Op::AllocTyped { .. }
            | Op::AllocHooked { .. }
            | Op::AllocFrozen { .. }
            | Op::FreeFrozen { .. }
            | Op::CompactWork { .. }
            | Op::AllocContig { .. }
            | Op::AllocContigPages { .. }
            | Op::Offline { .. }
            | Op::ReserveCma { .. }
            | Op::AllocCma { .. }
            | Op::FailPageAlloc(_)
            | Op::FreeContig { .. } => {}
        }
        if self.checks.due() {
            self.check()
        } else {
            Ok(())
        }
    }

    /// `alloc_huge_fault` on `cpu`: a block of the pageblock order, aligned, or the page
    /// only when no such block is left free (the slow path drains the lists and initializes
    /// deferred memory first); what it got reads zero, is counted as Linux counts it, and
    /// is held from then on; a failure (an offset outside the block, no frame free at all)
    /// leaves the zone as it was and counts nothing. A CPU the zone lacks is passed over.
    fn huge_fault(&mut self, cpu: usize, offset: u64, mt: u8) -> Result<(), ZeroDivergence> {
        let huge = self.zone.config().pageblock_order;
        let kind = kind(mt);
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let block_free = |zone: &BoxedZone| zone.free_blocks().any(|(_, o, _)| o >= huge);
        let block_was_free = block_free(&self.zone);
        let frame_free = self.zone.free_pages_total() > 0;
        let before = Snapshot::of(&self.zone);
        let counted = self.zone.counters();
        let Ok(handle) = self.zone.cpu(cpu) else {
            return Ok(());
        };
        let got = handle
            .with_clearer(&self.clearer)
            .alloc_huge_fault(offset, kind);
        let counters = self.zone.counters();
        let (alloc, fallback) = (
            counters.thp_fault_alloc - counted.thp_fault_alloc,
            counters.thp_fault_fallback - counted.thp_fault_fallback,
        );
        let folio = match got {
            Ok(folio) => folio,
            Err(e) => {
                let documented = match e {
                    AllocError::FaultOutsideBlock { .. } => offset as u64 >= huge.pages() * 4096,
                    AllocError::OutOfMemory(_) => !frame_free,
                    _ => false,
                };
                let unchanged = before.difference(&Snapshot::of(&self.zone)).is_none();
                if !documented || !unchanged || alloc + fallback != 0 {
                    return Err(ZeroDivergence::HugeFaultFailed(e));
                }
                return Ok(());
            }
        };
        // A fallback only with no block of the pageblock order free, before the call (in the
        // buddy or on a list: the slow path drains them) and after it (the slow path also
        // initializes deferred memory, which may form one; the page came from a smaller
        // block, so none is left after it either).
        let (pfn, order, right) = match folio {
            FaultFolio::Huge(pfn) => (
                pfn,
                huge,
                pfn.0.is_multiple_of(huge.pages()) && (alloc, fallback) == (1, 0),
            ),
            FaultFolio::Page(pfn) => {
                let none = !block_was_free && !block_free(&self.zone);
                (pfn, Order::ZERO, none && (alloc, fallback) == (0, 1))
            }
        };
        if !right {
            return Err(ZeroDivergence::HugeFault(folio));
        }
        self.check_held_free(pfn, order)?;
        let first = self.index(pfn);
        if let Some(i) = (first..first + order.pages() as usize).find(|&i| !self.reads_zero(i)) {
            return Err(ZeroDivergence::NotZeroed(Pfn(
                self.zone.config().start.0 + i as u64
            )));
        }
        self.pages[first..first + order.pages() as usize].fill(0);
        self.write(pfn, order);
        self.held.push((pfn, order));
        Ok(())
    }

    /// A freshly allocated block is not one the model holds (never handed out twice).
    fn check_held_free(&self, pfn: Pfn, order: Order) -> Result<(), ZeroDivergence> {
        let end = pfn.0 + order.pages();
        match self
            .held
            .iter()
            .find(|(p, o)| p.0 < end && pfn.0 < p.0 + o.pages())
        {
            Some(&(p, _)) => Err(ZeroDivergence::HandedOutTwice(p)),
            None => Ok(()),
        }
    }

    /// `report_free_pages` to a sink that checks every block it is handed is off the free
    /// lists and held by nobody, and, accepting, discards it (zeroes its memory); a refused
    /// report must leave the zone as it was.
    fn report(&mut self, budget: u64, accept: bool) -> Result<(), ZeroDivergence> {
        let before = Snapshot::of(&self.zone);
        let (zone, clearer, held) = (&self.zone, &self.clearer, &self.held);
        let reported = &mut self.reported;
        let mut handed = 0u64;
        let mut in_use = None;
        let mut twice = None;
        let mut sink = |blocks: &[ReportedBlock]| {
            for b in blocks {
                let end = b.pfn.0 + b.pages();
                if reported.iter().any(|&(p, e)| p < end && b.pfn.0 < e) {
                    twice.get_or_insert(b.pfn);
                }
                if accept {
                    reported.push((b.pfn.0, end));
                }
                let isolated =
                    zone.frame(b.pfn).map(|f| f.state) == Ok(crate::frame::FrameState::Reporting);
                let held = held
                    .iter()
                    .any(|&(p, o)| p.0 < end && b.pfn.0 < p.0 + o.pages());
                if !isolated || held {
                    in_use.get_or_insert(b.pfn);
                }
                handed += b.pages();
                if accept {
                    for pfn in b.pfn.0..end {
                        if let Some(p) = clearer.memory().frame_ptr(Pfn(pfn)) {
                            // SAFETY: a page of the model's buffer, in a block the zone
                            // handed to the sink and nobody else may touch until it returns.
                            unsafe { p.as_ptr().write_bytes(0, 4096) };
                        }
                    }
                }
            }
            accept
        };
        let result = zone.report_free_pages(budget, &mut sink);
        if let Some(pfn) = in_use {
            return Err(ZeroDivergence::ReportedInUse(pfn));
        }
        if let Some(pfn) = twice {
            return Err(ZeroDivergence::ReportedTwice(pfn));
        }
        let unreported = self.buddy_pages() > self.zone.page_reporting_stats().reported_free;
        let expected = match (accept, handed) {
            (_, 0) => result == Ok(0) && !(budget > 0 && unreported),
            (true, _) => result == Ok(handed),
            (false, _) => result == Err(crate::error::report::ReportError::Rejected),
        };
        if !expected {
            return Err(ZeroDivergence::ReportResult { handed, result });
        }
        if !accept && let Some(d) = before.difference(&Snapshot::of(&self.zone)) {
            return Err(ZeroDivergence::ReportChanged(d));
        }
        Ok(())
    }

    /// Frames free in the buddy.
    fn buddy_pages(&self) -> u64 {
        self.zone
            .free_blocks()
            .filter(|&(_, _, place)| place == FreeWhere::Buddy)
            .map(|(_, o, _)| o.pages())
            .sum()
    }

    /// Frames free in the buddy, not known zero and not reported: what background zeroing
    /// clears (a reported block it leaves alone, to keep the host from backing it again).
    fn buddy_unzeroed(&self) -> u64 {
        let m = self.zone.map();
        self.zone
            .free_blocks()
            .filter(|&(pfn, _, place)| {
                place == FreeWhere::Buddy
                    && !self.zone.frame(pfn).is_ok_and(|f| f.zeroed)
                    && !m.frame(m.index_of(pfn)).load().reported()
            })
            .map(|(_, o, _)| o.pages())
            .sum()
    }

    /// The invariants: the zone's own, every known-zero block reads zero, every held page
    /// still has the byte its holder wrote (all its bytes are checked when it is freed).
    ///
    /// # Errors
    /// The first [`ZeroDivergence`] found.
    pub fn check(&self) -> Result<(), ZeroDivergence> {
        self.zone.check().map_err(ZeroDivergence::Corrupt)?;
        for (pfn, o, _) in self.zone.free_blocks() {
            if !self.zone.frame(pfn).is_ok_and(|f| f.zeroed) {
                continue;
            }
            let first = self.index(pfn);
            if let Some(i) = (first..first + o.pages() as usize).find(|&i| !self.reads_zero(i)) {
                return Err(ZeroDivergence::KnownZeroIsNot(Pfn(self
                    .zone
                    .config()
                    .start
                    .0
                    + i as u64)));
            }
        }
        // Held pages: their markers here (cheap); every byte when they are freed.
        let start = self.zone.config().start.0;
        for &(pfn, o) in &self.held {
            let first = self.index(pfn);
            if let Some(i) = (first..first + o.pages() as usize)
                .find(|&i| self.page(i)[marker(i)] != self.pages[i])
            {
                return Err(ZeroDivergence::HeldPageChanged(Pfn(start + i as u64)));
            }
        }
        Ok(())
    }
}
