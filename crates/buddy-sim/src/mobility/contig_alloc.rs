//! Contiguous allocation of any length (Linux's `alloc_contig_range` and
//! `alloc_contig_pages`): for gigantic pages, CMA-like regions and virtio-mem.
//!
//! 1. **Isolate** the pageblocks that cover the range: their free blocks move to the isolated
//!    lists, where no allocation finds them, and frees into them skip the per-cpu lists. A
//!    pageblock with an unmovable allocation inside the range is refused before anything
//!    changes; free blocks larger than a pageblock are split at the pageblocks' edges first.
//! 2. **Drain** the per-cpu lists, so that the range's free blocks are all in the buddy.
//! 3. **Migrate** every movable allocation in the range out (compaction's move: the target
//!    comes from outside, since isolated blocks are never handed out).
//! 4. **Take** the range: every frame of it must now be free in the buddy; the free blocks
//!    are cut at the range's ends (what lies outside goes back) and every frame in it becomes
//!    an order-0 page with one reference (or none: the frozen variants).
//! 5. **Undo** the isolation: the pageblocks get their types back and their free blocks are
//!    freed again, merging with their neighbours.
//!
//! On any error, step 5 runs and nothing is allocated; blocks already moved in step 3 stay
//! where they went (their owners saw the move through their callback), and the target a
//! refused move was offered goes back as it was, known zero and its pageblock's type
//! included ([`BuddyError`](crate::BuddyError) lists what a failure may change).

use crate::cma::CmaArea;
use crate::decompose::decompose;
use crate::error::alloc::AllocError;
use crate::error::contig::ContigError;
use crate::frame::{FrameState, Word};
use crate::frame_storage::FrameStorage;
use crate::memory::Clearing;
use crate::migrate::Migrate;
use crate::migratetype::Pageblock;
use crate::mobility::compaction::{NotMoved, is_movable};
use crate::request::{AllocRequest, MigrateCallback, ReschedPoint};
use crate::types::{FrameIdx, Order};
use crate::zeroed::fault_inside;
use crate::zone::Zone;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::map::FrameMap;
use crate::zone::pageblock::pageblocks_covering;
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use core::ops::Range;
use lock_api::RawMutex;
use mm_types::Pfn;

/// What a contiguous range becomes once every frame of it is free.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Every frame an order-0 page with this word (one reference, or frozen).
    Pages(Word),
    /// The frames as unmovable blocks with one reference each: in each free block the
    /// range takes part of, the fewest naturally aligned blocks of that part. A heap run
    /// whose owner frees it whole, or splits a block into pages first where it frees a part
    /// (one head written per block, not a word per frame): ArceOS's runs
    /// (`AxPageAllocator`).
    #[cfg_attr(not(feature = "axallocator"), allow(dead_code))]
    Blocks,
    /// Offline: every frame reserved again (a hole), counted out of the zone's usable
    /// memory and forgotten by the table of added ranges; leaked frames go with the rest.
    Offline,
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// [`Cpu::alloc_raw`](crate::Cpu::alloc_raw) of a contiguous request: its frames found
    /// anywhere in the zone ([`Zone::contig_pages`]), cleared through `clearing` if it is
    /// `Some`.
    #[allow(unsafe_code)]
    pub(crate) fn alloc_contig_request<Z>(
        &self,
        pcp: CpuLists<'_, R>,
        request: &mut AllocRequest<'_, Z>,
        clearing: Option<Clearing<'_>>,
    ) -> Result<Pfn, AllocError> {
        let (nr, align) = match request.frames {
            Some(n) => (n, request.align),
            None => (request.order.pages(), request.order),
        };
        let page = if request.frozen {
            Word::FROZEN_PAGE
        } else {
            Word::allocated(0)
        };
        let Some(migrate) = request.migrate.as_deref_mut() else {
            return Err(AllocError::ZeroPages);
        };
        let covering = Order::covering(nr).unwrap_or(Order::ZERO);
        fault_inside(nr, covering, request.fault)?;
        let within = request.cma;
        let pfn = self.contig_pages(
            pcp,
            (nr, align),
            Take::Pages(page),
            within,
            &mut MigrateCallback(migrate),
        )?;
        let Some(clearing) = clearing else {
            return Ok(pfn);
        };
        let mut resched = ReschedPoint(&mut request.resched);
        let cleared = clearing
            .clearer
            .clear_run(pfn, nr, request.fault, &mut resched);
        if let Err(e) = cleared {
            // The run is this call's: freeing it cannot fail.
            // SAFETY: this call allocated the run and hands it to nobody.
            let _ = unsafe {
                if request.frozen {
                    self.free_contig_frozen_range_on(pcp, pfn, nr)
                } else {
                    self.free_contig_range_on(pcp, pfn, nr)
                }
            };
            return Err(e);
        }
        Ok(pfn)
    }

    /// Finds and allocates `nr` contiguous frames starting aligned to `align` (Linux's
    /// `alloc_contig_pages`), each an order-0 page of word `page`, inside the CMA
    /// reservation `within` or else outside every reservation: candidate ranges from the
    /// bottom, each first checked without locks (no hole, no unmovable or pinned
    /// allocation), then tried as [`Cpu::alloc_contig_range`](crate::Cpu::alloc_contig_range)
    /// does; a candidate that fails moves the search past the frame that stopped it (a hole,
    /// an unmovable, pinned or refused block, a reservation), or to the next candidate when
    /// a movable block found no target. It fails only when every candidate failed
    /// ([`AllocError::OutOfMemory`] of the order covering `nr`, capped at MAX_ORDER;
    /// [`AllocError::ZeroPages`]; [`AllocError::NotCma`] for an area that is not one of the
    /// zone's reservations). The alignment may exceed MAX_ORDER (a run is not a buddy block):
    /// a gigantic page is aligned to its own size, as Linux aligns `alloc_contig_pages` to a
    /// power-of-two run.
    pub(crate) fn contig_pages(
        &self,
        pcp: CpuLists<'_, R>,
        (nr, align): (u64, Order),
        take: Take,
        within: Option<CmaArea>,
        migrate: &mut impl Migrate,
    ) -> Result<Pfn, AllocError> {
        if nr == 0 {
            return Err(AllocError::ZeroPages);
        }
        let oom = AllocError::OutOfMemory(
            Order::covering(nr).map_or(self.cfg.max_order, |o| o.min(self.cfg.max_order)),
        );
        let m = self.map();
        let step = align.pages();
        let (first, end) = match within {
            Some(area) => self.cma_bounds(m, area)?,
            None => (self.cfg.start.0, self.cfg.start.0 + self.cfg.nr_pages),
        };
        let align_up = |p: u64| p.div_ceil(step).saturating_mul(step);
        let mut start = align_up(first);
        while start.checked_add(nr).is_some_and(|e| e <= end) {
            // `pfn_range_valid_contig`: a look without locks first, then the real thing.
            // Inside the zone by the loop's condition.
            let Ok(candidate) = m.range(Pfn(start), nr) else {
                break;
            };
            // Outside a reservation's search, its pageblocks are in the way. Every candidate
            // holding a frame of the block that stopped this one fails alike: the search
            // moves past that block (the look names it, the real thing a frame of it).
            let next = match self.blocker(m, candidate, take, within.is_none()) {
                Err((_, last)) => align_up(last.0.saturating_add(1)),
                Ok(()) => match self.contig_range(pcp, Pfn(start), nr, take, migrate) {
                    Ok(_) => return Ok(Pfn(start)),
                    Err(
                        ContigError::Busy(at) | ContigError::Hole(at) | ContigError::LeakedPage(at),
                    ) => align_up(last_of_block(m, at).0.saturating_add(1)),
                    // No target outside this candidate for one of its movable blocks: the
                    // next candidate may need none, or find one where this candidate was
                    // (Linux's `alloc_contig_pages` goes on too).
                    Err(ContigError::OutOfMemory(_)) => start,
                    // Nothing else fails a range inside the zone; were it to, the search
                    // ends as if every candidate had failed.
                    Err(_) => break,
                },
            };
            start = next.max(start.saturating_add(step));
        }
        Err(oom)
    }

    /// The frames `[first, end)` of `area` if it is one of this zone's CMA reservations (or
    /// part of one): inside the zone, every pageblock reserved.
    fn cma_bounds(&self, m: FrameMap<'_>, area: CmaArea) -> Result<(u64, u64), AllocError> {
        let pages = m
            .range(area.base(), area.pages())
            .map_err(|_| AllocError::NotCma(area.base()))?;
        if let Some(b) = m
            .pageblocks(pages.clone())
            .find(|b| !m.pageblock(b.start).cma)
        {
            return Err(AllocError::NotCma(m.pfn(b.start.max(pages.start))));
        }
        Ok((area.base().0, area.base().0 + area.pages()))
    }

    /// What stops a contiguous allocation (or an offline) of `pages` before anything moves:
    /// the first frame that is a hole ([`ContigError::Hole`]), leaked
    /// ([`ContigError::LeakedPage`]; an offline takes leaked frames with the rest), an
    /// allocation that is not movable or is pinned, or in an isolated pageblock
    /// ([`ContigError::Busy`]); with `cma_blocks`, a CMA reservation's pageblock too
    /// (`Busy` at its last frame: every candidate holding part of it fails alike). Under
    /// the zone lock (isolation) it is exact for the free and unmovable frames; without it
    /// (`alloc_contig_pages`' look ahead), a guess.
    fn first_blocker(
        &self,
        m: FrameMap<'_>,
        pages: Range<FrameIdx>,
        take: Take,
        cma_blocks: bool,
    ) -> Result<(), ContigError> {
        self.blocker(m, pages, take, cma_blocks).map_err(|(e, _)| e)
    }

    /// [`Zone::first_blocker`], with the last frame of the block that holds the frame it
    /// names ([`last_of_block`]'s answer, from the head the look already read).
    fn blocker(
        &self,
        m: FrameMap<'_>,
        pages: Range<FrameIdx>,
        take: Take,
        cma_blocks: bool,
    ) -> Result<(), (ContigError, Pfn)> {
        let first = m.block_head(pages.start).map_or(pages.start, |(h, _)| h);
        for (i, w) in m.heads(first, pages.end) {
            let at = m.pfn(i.max(pages.start));
            // What stops the candidate at `at`, in the block at `i`: that block's last frame
            // for an allocated one, else `at` (worked out only for a blocker).
            let blocked = |e: ContigError| {
                let last = match w.state() {
                    FrameState::Allocated => {
                        let end = m.pfn(i).0.saturating_add((1u64 << w.order()) - 1);
                        Pfn(end.max(at.0))
                    }
                    _ => at,
                };
                Err((e, last))
            };
            match w.state() {
                FrameState::Reserved => return blocked(ContigError::Hole(at)),
                FrameState::Leaked if take == Take::Offline => {}
                FrameState::Leaked => return blocked(ContigError::LeakedPage(at)),
                FrameState::Allocated if !is_movable(w) => return blocked(ContigError::Busy(at)),
                _ => {
                    let pb = m.pageblock(i);
                    if pb.isolated {
                        return blocked(ContigError::Busy(at));
                    }
                    if cma_blocks && pb.cma {
                        let end = m.pfn(m.pageblock_range(i).end - 1);
                        return Err((ContigError::Busy(end), last_of_block(m, end)));
                    }
                }
            }
        }
        Ok(())
    }

    /// The five steps of the module docs, taking the range as `take` says. Returns the
    /// frames migrated out of the way.
    pub(crate) fn contig_range(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        nr: u64,
        take: Take,
        migrate: &mut impl Migrate,
    ) -> Result<u64, ContigError> {
        let m = self.map();
        let pages = m.range(pfn, nr)?;
        let pageblocks = pageblocks_covering(m, pages.clone())?;
        self.isolate(m, pageblocks.clone(), pages.clone(), take)?;
        self.drain_reachable(pcp);
        let taken = self
            .migrate_out(m, pages.clone(), migrate)
            .and_then(|moved| {
                self.take_range(m, pages, take)?;
                Ok(moved)
            });
        self.unisolate(m, pageblocks);
        taken
    }

    /// Step 1: isolates `pageblocks`, refusing (with nothing changed) if one is isolated
    /// already or `pages` holds a hole, a leaked page or an unmovable allocation.
    fn isolate(
        &self,
        m: FrameMap<'_>,
        pageblocks: Range<FrameIdx>,
        pages: Range<FrameIdx>,
        take: Take,
    ) -> Result<(), ContigError> {
        let mut free = self.lock_zone();
        if let Some(block) = m
            .pageblocks(pageblocks.clone())
            .find(|b| m.pageblock(b.start).isolated)
        {
            return Err(ContigError::Busy(m.pfn(block.start.max(pages.start))));
        }
        self.first_blocker(m, pages, take, false)?;
        for b in m.pageblocks(pageblocks).map(|block| block.start) {
            // A free block larger than a pageblock that reaches into the range: this
            // pageblock cut out of it (the rest goes back as the fewest blocks), so that each
            // pageblock's free blocks change lists alone.
            if let Some((_, w)) = m.block_head(b)
                && w.state() == FrameState::Buddy
                && w.order() > m.cfg.pageblock_order.get()
            {
                free.cut_out(m, b, m.cfg.pageblock_order);
            }
            let pb = m.pageblock(b);
            free.set_pageblock(
                m,
                b,
                Pageblock {
                    isolated: true,
                    ..pb
                },
            );
        }
        Ok(())
    }

    /// Step 3: moves every movable allocation that overlaps `pages` to a block outside;
    /// returns the frames moved.
    fn migrate_out(
        &self,
        m: FrameMap<'_>,
        pages: Range<FrameIdx>,
        migrate: &mut impl Migrate,
    ) -> Result<u64, ContigError> {
        let mut moved = 0u64;
        let mut i = m.block_head(pages.start).map_or(pages.start, |(h, _)| h);
        while i < pages.end {
            let w = m.frame(i).load();
            if w.state() == FrameState::Allocated {
                if !is_movable(w) {
                    return Err(ContigError::Busy(m.pfn(i.max(pages.start))));
                }
                let order = Order(w.order());
                // Isolated blocks are never handed out: the target lies outside the range.
                let dst = self
                    .lock_zone()
                    .take_migration_target(m, order)
                    .ok_or(ContigError::OutOfMemory(order))?;
                match self.move_block(i, w, dst, migrate) {
                    Ok(()) => moved += order.pages(),
                    // Changed before it could be frozen (freed, referenced): look again.
                    Err(NotMoved::Changed) => continue,
                    Err(NotMoved::Refused) => {
                        return Err(ContigError::Busy(m.pfn(i.max(pages.start))));
                    }
                }
            }
            i += 1 << w.order().min(m.cfg.max_order.get());
        }
        Ok(moved)
    }

    /// Step 4: takes every frame of `pages`, all free in the buddy by now (or leaked, for an
    /// offline), as `take` says; what the free blocks hold outside `pages` goes back. All or
    /// nothing.
    fn take_range(
        &self,
        m: FrameMap<'_>,
        pages: Range<FrameIdx>,
        take: Take,
    ) -> Result<(), ContigError> {
        let mut free = self.lock_zone();
        let first = m.block_head(pages.start).map_or(pages.start, |(h, _)| h);
        let mut i = first;
        while i < pages.end {
            let w = m.frame(i).load();
            let leaked_offline = w.state() == FrameState::Leaked && take == Take::Offline;
            if w.state() != FrameState::Buddy && !leaked_offline {
                return Err(ContigError::Busy(m.pfn(i.max(pages.start))));
            }
            i += 1 << w.order();
        }
        let page = match take {
            Take::Pages(page) => Some(page),
            Take::Blocks => None,
            Take::Offline => {
                // The table of added ranges must be able to forget the range (it may split
                // one in two) before anything changes.
                if !free.remove_added(&pages) {
                    return Err(ContigError::RangesFull);
                }
                Some(Word::RESERVED)
            }
        };
        let end = i;
        let mut i = first;
        while i < end {
            let w = m.frame(i).load();
            if w.state() == FrameState::Leaked {
                // Order 0, inside the range, and only for an offline: it goes with the
                // memory.
                m.frame(i).store(page.unwrap_or(Word::RESERVED));
                i += 1;
                continue;
            }
            let order = Order(w.order());
            let zeroed = free.remove(m, i, order);
            let block = i..i + order.pages() as u32;
            let inside = block.start.max(pages.start)..block.end.min(pages.end);
            if w.reported() {
                // Only the part taken is reused; the rest, still discarded, keeps its mark.
                free.count_reused(u64::from(inside.end - inside.start));
            }
            match page {
                Some(page) => {
                    for j in FrameIdx::span(inside.start, inside.end) {
                        m.frame(j).store(page);
                    }
                }
                // The block's other frames are tails already: one head per aligned block.
                None => {
                    let len = u64::from(inside.end - inside.start);
                    for (head, o) in decompose(m.pfn(inside.start), len, order)
                        .into_iter()
                        .flatten()
                    {
                        m.frame(m.index_of(head)).store(Word::allocated(o.get()));
                    }
                }
            }
            // The parts outside the range, as the fewest aligned blocks (isolated lists:
            // they merge back when the isolation is undone).
            for part in [
                block.start..pages.start.max(block.start),
                pages.end.min(block.end)..block.end,
            ] {
                if part.is_empty() {
                    continue;
                }
                for (head, o) in decompose(
                    m.pfn(part.start),
                    u64::from(part.end - part.start),
                    self.cfg.max_order,
                )
                .into_iter()
                .flatten()
                {
                    free.insert_marked(m, m.index_of(head), o, (zeroed, w.reported()), w.mt());
                }
            }
            i = block.end;
        }
        Ok(())
    }

    /// Step 5: gives `pageblocks` their types back and frees their free blocks again, so
    /// that they merge with their neighbours.
    fn unisolate(&self, m: FrameMap<'_>, pageblocks: Range<FrameIdx>) {
        let mut free = self.lock_zone();
        for block in m.pageblocks(pageblocks) {
            let pb = m.pageblock(block.start);
            m.pageblock_bits_frame(block.start).set_pageblock_bits(
                Pageblock {
                    isolated: false,
                    ..pb
                }
                .bits(),
            );
            for (i, w) in m.heads(block.start, block.end) {
                if w.state() == FrameState::Buddy {
                    let order = Order(w.order());
                    let zeroed = free.remove(m, i, order);
                    free.free_one_page_marked(m, i, order, zeroed, w.reported());
                }
            }
        }
    }
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Allocates exactly the frames `[pfn, pfn + nr)` (any length), moving the movable
    /// allocations in the way out through `migrate`: each frame becomes an order-0 page with
    /// one reference, to be freed with [`Cpu::free_contig_range`] (any part of it: each page
    /// is its own allocation).
    ///
    /// # Errors
    /// [`ContigError::Busy`] for a frame that is allocated and not movable, pinned, refused by
    /// `migrate`, on another CPU's per-cpu list, or in a pageblock already isolated;
    /// [`ContigError::Hole`] or [`ContigError::LeakedPage`] for a frame that is not usable;
    /// [`ContigError::ZeroPages`], [`ContigError::OutOfZone`], [`ContigError::Overflow`];
    /// [`ContigError::OutOfMemory`] when a movable block finds no target outside the range.
    /// Nothing is allocated then (see the module docs).
    pub fn alloc_contig_range(
        &self,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<(), ContigError> {
        let take = Take::Pages(Word::allocated(0));
        self.zone
            .contig_range(self.lists(), pfn, nr, take, migrate)
            .map(|_| ())
    }

    /// [`Cpu::alloc_contig_range`] handing the pages out frozen: no reference count, as
    /// Linux's `alloc_contig_frozen_range` does for users that manage the pages themselves
    /// (hugetlb's gigantic pages). Free them with [`Cpu::free_contig_frozen_range`].
    ///
    /// # Errors
    /// As [`Cpu::alloc_contig_range`].
    pub fn alloc_contig_frozen_range(
        &self,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<(), ContigError> {
        let take = Take::Pages(Word::FROZEN_PAGE);
        self.zone
            .contig_range(self.lists(), pfn, nr, take, migrate)
            .map(|_| ())
    }
}

/// The last frame of the block holding `at` (by a look without locks), or `at`: every
/// candidate of a contiguous search that holds a frame of a block that stopped one fails
/// alike, so the search moves past the whole block (a heap run held as blocks is passed in
/// a step per block, not per frame).
fn last_of_block(m: FrameMap<'_>, at: Pfn) -> Pfn {
    let Ok(i) = m.index(at) else {
        return at;
    };
    match m.block_head(i) {
        Some((head, w)) if w.state() == FrameState::Allocated => {
            let last = m.pfn(head).0 + (1u64 << w.order()) - 1;
            Pfn(last.max(at.0))
        }
        _ => at,
    }
}
