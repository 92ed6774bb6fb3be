//! The buddy: free lists per order under the zone lock, merging on free
//! (`__free_one_page`) and splitting on allocation (`__rmqueue_smallest`).
//!
//! Each list keeps the blocks known zero at its back and the others at its front: a plain
//! allocation takes the front (so zeroed blocks are not spent on callers that overwrite them),
//! a zeroed allocation the back, and background zeroing finds a block to clear at a front.
//!
//! [`FreeArea`] is everything the zone lock protects; its fields are private to this module,
//! so every change to the lists, the counts, the memory map's ranges and the compaction
//! cursor is one of the methods here (Linux's `free_area` is the lists and `nr_free`; the
//! ranges and the cursor are what `struct zone` keeps beside them).

use crate::error::contig::ContigError;
use crate::events::Extfrag;
use crate::frame::{FrameState, Word};
use crate::migratetype::MigrateType;
use crate::migratetype::{CMA, INITIALIZED, ISOLATE, LIST_TYPES, Pageblock};
use crate::report_sink::{PageReporting, ReportStats};
use crate::types::{FrameIdx, MAX_SUPPORTED_ORDER, Order, PageblockIdx};
use crate::zone::config::{Fallback, Watermarks};
use crate::zone::counters::{FallbackCounts, LockStats};
use crate::zone::list::{FreeCount, List};
use crate::zone::map::FrameMap;
use crate::zone::pageblock::{PageblockClaim, set_pageblocks};
use crate::zone::ranges::{AddedRanges, DeferredRanges};
use core::ops::Range;

/// Which free block an allocation would rather have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prefer {
    /// The smallest order that fits, and in it one not known zero (a plain allocation,
    /// whose caller writes it anyway): a zeroed block only when that order has no other.
    Unzeroed,
    /// One known zero, of the smallest order that has one (split down: the halves stay
    /// known zero); else what a plain allocation would take.
    Zeroed,
}

/// Everything the zone lock protects.
pub(crate) struct FreeArea {
    /// Per order, per free-list index: the three [`MigrateType`]s, CMA reservations, then
    /// isolated blocks.
    lists: [[List; LIST_TYPES]; MAX_SUPPORTED_ORDER as usize + 1],
    /// Frames reserved for CMA (`Zone::reserve_cma`): while there are none, movable
    /// allocations do not look at the CMA lists.
    cma_reserved: u64,
    /// Frames free in the buddy, and of those in blocks known zero.
    count: FreeCount,
    /// Usable frames initialized: every range added, holes and deferred frames excluded.
    present: u64,
    /// The watermarks of a zone of `present` frames ([`Watermarks::for_pages`]), kept with
    /// it (a square root each): the pageblock reserve's `min`, the boost's and the tuned
    /// per-cpu high marks' `high`.
    watermarks: Watermarks,
    /// The ranges added, for the overlap check of `add_memory`.
    added: AddedRanges,
    /// Ranges added whose frames are not initialized yet.
    deferred: DeferredRanges,
    /// What the zone lock's holders did (`Zone::lock_stats`).
    stats: LockStats,
    /// Where proactive compaction's scanners stopped (`Zone::compact_some`).
    scanners: Option<Scanners>,
    /// The fallbacks taken.
    fallbacks: FallbackCounts,
    /// Linux's `watermark_boost`: frames of free pageblocks background compaction owes.
    boost: u64,
    /// Direct compaction's deferral after failures.
    defer: CompactDefer,
    /// Free page reporting's registration and counts.
    reporting: Reporting,
    /// Background compaction calls left to skip after a run that could not improve the
    /// zone (Linux's `proactive_defer`).
    background_defer: u32,
    /// The fallbacks taken since the zone last handed them to its event hook.
    extfrag: PendingExtfrag,
    /// Per free-list index, bit `o` set where that list of order `o` may hold a block known
    /// zero (its back: every list keeps them behind the others), clear where it holds none.
    /// Linking a known-zero block sets the bit; a zeroed allocation that finds none there
    /// clears it, so that taking a block off a list costs the other paths nothing. A zeroed
    /// allocation looks at the orders this word names, not at each order's back.
    zeroed_orders: [u32; LIST_TYPES],
}

// An order's bit fits the word.
const _: () = assert!(MAX_SUPPORTED_ORDER < u32::BITS as u8);

/// Fallbacks not yet handed to the event hook: the first few of them, and how many more.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingExtfrag {
    events: [Extfrag; PENDING_EXTFRAG],
    len: u8,
}

/// Fallbacks kept between two reports to the hook (one refill batch takes at most a few:
/// the first claims the pageblock the rest come from).
const PENDING_EXTFRAG: usize = 4;

impl PendingExtfrag {
    /// The fallbacks kept, in the order taken.
    pub(crate) fn events(&self) -> &[Extfrag] {
        &self.events[..usize::from(self.len)]
    }

    const NONE: Self = Self {
        events: [Extfrag {
            pfn: mm_types::Pfn(0),
            alloc_order: Order::ZERO,
            fallback_order: Order::ZERO,
            alloc_kind: MigrateType::Unmovable,
            fallback_kind: MigrateType::Unmovable,
            change_ownership: false,
        }; PENDING_EXTFRAG],
        len: 0,
    };

    fn push(&mut self, e: Extfrag) {
        if let Some(slot) = self.events.get_mut(usize::from(self.len)) {
            *slot = e;
            self.len += 1;
        }
    }
}

impl FreeArea {
    pub(crate) const EMPTY: Self = Self {
        lists: [[List::EMPTY; LIST_TYPES]; MAX_SUPPORTED_ORDER as usize + 1],
        cma_reserved: 0,
        count: FreeCount::NONE,
        present: 0,
        watermarks: Watermarks::for_pages(0),
        added: AddedRanges::EMPTY,
        deferred: DeferredRanges::EMPTY,
        stats: LockStats::ZERO,
        scanners: None,
        fallbacks: FallbackCounts::ZERO,
        boost: 0,
        defer: CompactDefer::NONE,
        background_defer: 0,
        reporting: Reporting::NONE,
        extfrag: PendingExtfrag::NONE,
        zeroed_orders: [0; LIST_TYPES],
    };

    /// Frames `[0, frames)` added, none of them initialized yet: a static zone's, which
    /// initializes them on demand.
    #[cfg(not(loom))]
    pub(crate) const fn all_deferred(frames: u32) -> Self {
        let (first, end) = (FrameIdx::FIRST, FrameIdx(frames));
        Self {
            added: AddedRanges::one(first, end),
            deferred: DeferredRanges::one(first, end, false),
            ..Self::EMPTY
        }
    }

    /// Puts the free block at `idx`, which the caller owns, on free list `list` of its order,
    /// leaving the free count to the caller: [`FreeArea::insert_marked`] counts the block, a
    /// merge or a split its net change once.
    #[inline(always)]
    fn link(&mut self, m: FrameMap<'_>, idx: FrameIdx, order: Order, zeroed: bool, list: u8) {
        self.put_on_list(m, idx, order, zeroed, list);
        if zeroed {
            self.zeroed_orders[list as usize] |= 1 << order.get();
        }
    }

    /// [`FreeArea::link`] leaving the word of known-zero orders to the caller (a split sets
    /// the bits of all its halves' orders at once).
    #[inline(always)]
    fn put_on_list(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
        zeroed: bool,
        list: u8,
    ) {
        m.frame(idx)
            .store(Word::free(FrameState::Buddy, order.get(), zeroed, list));
        self.lists[order.get() as usize][list as usize].push(m.frames, idx, zeroed);
        self.stats.list_ops += 1;
    }

    /// Puts the free block at `idx`, which the caller owns, on free list `list` of its order,
    /// counted free, and marks it reported where `reported` says (a part of a reported
    /// block, still discarded).
    pub(crate) fn insert_marked(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
        (zeroed, reported): (bool, bool),
        list: u8,
    ) {
        self.link(m, idx, order, zeroed, list);
        self.count.add(order, zeroed);
        if reported {
            self.mark_reported(m, idx, order);
        }
    }

    /// Counts `pages` of reported memory taken for use (Linux's reporting has no such
    /// count: the free page reporting statistics' `reused`).
    pub(crate) fn count_reused(&mut self, pages: u64) {
        self.reporting.counts.reused += pages;
    }

    /// Unlinks the free block at `idx`; returns whether it was known zero. The caller owns
    /// it (its head reads as a tail until the caller stores another word).
    #[inline]
    pub(crate) fn remove(&mut self, m: FrameMap<'_>, idx: FrameIdx, order: Order) -> bool {
        let zeroed = self.unlink(m, idx, order, m.frame(idx).load());
        self.count.sub(order, zeroed);
        zeroed
    }

    /// Unlinks the free block at `idx` whose head word the caller has just read under the
    /// zone lock (`w`), leaving the free count to the caller ([`FreeArea::remove`] counts
    /// it; a merge's buddy, read to decide the merge, or the block a split takes count
    /// their net change once). Returns whether it was known zero.
    #[inline(always)]
    fn unlink(&mut self, m: FrameMap<'_>, idx: FrameIdx, order: Order, w: Word) -> bool {
        if w.reported() {
            self.reporting.counts.reported_free -= order.pages();
        }
        // The word of known-zero orders keeps this order's bit: the next zeroed allocation
        // that finds none there clears it.
        self.lists[order.get() as usize][w.mt() as usize].remove(m.frames, idx);
        m.frame(idx).store(Word::TAIL);
        self.stats.list_ops += 1;
        w.zeroed()
    }

    /// `__free_one_page`: frees the block at `idx`, which the caller owns and whose other
    /// frames are tails, merging it with free buddies of the same order up to MAX_ORDER,
    /// onto the lists of its pageblock's type. A buddy that is reserved, allocated, being
    /// zeroed, on a per-cpu list, or of other knowledge (known zero where this block is not,
    /// or the reverse) stops the merge: a merged block is known zero exactly when both halves
    /// were. So does a buddy in another pageblock that is isolated or in a CMA reservation
    /// where this one is not (or the reverse: Linux's `migratetype_is_mergeable`); a merged
    /// pair of two types takes the lower half's type.
    #[inline]
    pub(crate) fn free_one_page(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
        zeroed: bool,
    ) {
        self.free_one_page_marked(m, idx, order, zeroed, false);
    }

    /// [`FreeArea::free_one_page`] of a block whose memory the host discarded when
    /// `reported`: the block that results is marked reported exactly when every block it
    /// merged was too (discarded memory merged with resident memory is not).
    pub(crate) fn free_one_page_marked(
        &mut self,
        m: FrameMap<'_>,
        mut idx: FrameIdx,
        mut order: Order,
        zeroed: bool,
        mut reported: bool,
    ) {
        if order > m.cfg.pageblock_order {
            let pb = m.cfg.pageblock_order;
            // Stepping the range, not the frames (`FrameIdx::span(..).step_by` walks every
            // frame of the block).
            let chunks = || {
                (idx.0..idx.0 + order.pages() as u32)
                    .step_by(pb.pages() as usize)
                    .map(FrameIdx)
            };
            // Its pageblocks all of one type, none isolated: freed pageblock by pageblock
            // they would merge back into this block (merging does not depend on the order of
            // the frees), so it is freed whole, merged from its own order up.
            let bits = |chunk| m.pageblock_bits_frame(chunk).pageblock_bits();
            let first = bits(idx);
            // The first chunk is `idx`, read above.
            let uniform = !Pageblock::from_bits(first).isolated
                && chunks().skip(1).all(|chunk| bits(chunk) == first);
            if !uniform {
                // Pageblock by pageblock, each to its own type's lists (`split_large_buddy`):
                // they merge back where their types allow.
                for chunk in chunks() {
                    m.frame(chunk).store(Word::TAIL);
                    self.free_one_page_marked(m, chunk, pb, zeroed, reported);
                }
                return;
            }
        }
        let mut list = m.free_list_of(idx);
        // The zone gains the freed frames, whatever they merge into (a merge's halves are
        // alike known zero or not): counted once, not per block unlinked and linked.
        self.count.add(order, zeroed);
        while order < m.cfg.max_order {
            let Some((b, w)) = merge_partner(m, idx, order, zeroed, list) else {
                break;
            };
            if w.mt() != list {
                // The merged block takes the lower half's type, not the freed block's (Linux
                // 6.10+): whatever order the halves are freed in, the same type results, so
                // that `free_contig_range`'s aligned blocks leave the zone exactly as page
                // by page frees do (the lockstep harness compares the two).
                if b < idx {
                    list = w.mt();
                    if let Some(mt) = MigrateType::from_index(list) {
                        set_pageblocks(m, idx, order, mt);
                    }
                } else if let Some(mt) = MigrateType::from_index(list) {
                    set_pageblocks(m, b, order, mt);
                }
            }
            reported &= w.reported();
            self.unlink(m, b, order, w);
            m.frame(idx).store(Word::TAIL);
            idx = idx.min(b);
            order = order.up();
        }
        self.link(m, idx, order, zeroed, list);
        if reported {
            self.mark_reported(m, idx, order);
        }
    }

    /// `__rmqueue_smallest`: takes the smallest free block of at least `order` on `mt`'s
    /// lists, split down, the front of its list (one not known zero if the order has any);
    /// the upper halves go back to the free lists (known zero if the block was). Returns the
    /// block, which the caller owns, and whether it is known zero.
    #[inline]
    pub(crate) fn rmqueue_smallest(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
    ) -> Option<(FrameIdx, bool)> {
        self.rmqueue_list(m, order, mt as u8)
    }

    /// [`FreeArea::rmqueue_smallest`] from free-list index `list`.
    #[inline]
    fn rmqueue_list(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        list: u8,
    ) -> Option<(FrameIdx, bool)> {
        let (o, idx) = self.smallest_on(m, order, list)?;
        Some((idx, self.take_split(m, idx, o, order)))
    }

    /// The block `__rmqueue_smallest` takes from free-list index `list` for `order`: the
    /// front of the smallest order of at least `order` with a free block there, and that
    /// order.
    #[inline]
    fn smallest_on(&self, m: FrameMap<'_>, order: Order, list: u8) -> Option<(Order, FrameIdx)> {
        let l = list as usize;
        // Order ranges here are `from..max + 1` (MAX_ORDER is at most 20: no overflow), not
        // `from..=max`: an inclusive range's iterator costs about twice the instructions
        // per step on the allocation paths.
        let o = (order.get()..m.cfg.max_order.get() + 1)
            .find(|&o| !self.lists[o as usize][l].is_empty())?;
        Some((Order(o), self.lists[o as usize][l].head()?))
    }

    /// Takes the smallest block known zero of at least `order` on `mt`'s lists (for a
    /// movable allocation, then on the CMA lists), else on its fallbacks' as `fallback`
    /// allows (claiming the pageblock for `mt` where an allocation would), split down (the
    /// halves stay known zero), or `None` if the buddy has none. Out of line, so that
    /// [`FreeArea::rmqueue_zeroed_run`] inlines into a zeroed refill without growing the
    /// plain paths' `rmqueue`, which calls this only for [`Prefer::Zeroed`].
    #[inline(never)]
    pub(crate) fn rmqueue_zeroed(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Option<FrameIdx> {
        self.rmqueue_zeroed_run(m, order, mt, fallback, 1)
            .map(|(idx, _)| idx)
    }

    /// [`FreeArea::rmqueue_zeroed`] for up to `most` blocks at once (at least one): the
    /// first `2^j` blocks of `order` of the block found, `2^j <= most`, which the caller
    /// owns as blocks of `order`, with the number of them. Where `rmqueue_zeroed` called
    /// again and again would take exactly these blocks, in ascending order, this splits the
    /// block only down to `order + j`: a known-zero block taken from `mt`'s own lists, not
    /// reported. Otherwise (a fallback or CMA block, a reported one) it is one block, as
    /// `rmqueue_zeroed` takes it.
    ///
    /// Why the blocks are the same: split down to `order`, a block leaves its upper halves,
    /// one per order below its own, at the backs of `mt`'s lists, which the next call looks
    /// at first (no known-zero block below the block's order was on them, or that would have
    /// been taken); so each next call takes the next `2^order` frames of the block.
    #[inline(always)]
    pub(crate) fn rmqueue_zeroed_run(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
        fallback: Fallback,
        most: u64,
    ) -> Option<(FrameIdx, u64)> {
        // No known-zero frame in the buddy (the common case of a pool spent): nothing to
        // look through, every order of every list.
        if self.count.zeroed == 0 {
            return None;
        }
        if let Some((o, idx)) = self.zeroed_back(m, mt as u8, order.get()) {
            let (_, n) = self.take_run(m, idx, o, order, most);
            return Some((idx, n));
        }
        let cma = (mt == MigrateType::Movable && self.cma_reserved > 0)
            .then(|| self.zeroed_back(m, CMA, order.get()))
            .flatten();
        let lowest = fallback.lowest_order(order, m.cfg.pageblock_order);
        let (o, idx) = cma.or_else(|| {
            mt.fallbacks().into_iter().find_map(|from| {
                let (o, idx) = self.zeroed_back(m, from as u8, lowest.get())?;
                let mut claimed = mt.claims_on_fallback(o, m.cfg.pageblock_order)
                    && self.try_claim(m, idx, o, mt, from);
                if !claimed && fallback == Fallback::Claiming && from == MigrateType::Movable {
                    self.claim_whole(m, idx, o, mt);
                    claimed = true;
                }
                if !claimed {
                    self.fallbacks.count_steal(mt, from);
                }
                self.fell_back(m.pfn(idx), (order, o), (mt, from), claimed);
                Some((o, idx))
            })
        })?;
        self.take_split(m, idx, o, order);
        Some((idx, 1))
    }

    /// The smallest order from `lowest` up whose free list `list` has a known-zero block, and
    /// the block at its back; the bits of the orders it finds none on cleared.
    #[inline(always)]
    fn zeroed_back(&mut self, m: FrameMap<'_>, list: u8, lowest: u8) -> Option<(Order, FrameIdx)> {
        let orders = self.zeroed_orders.get_mut(usize::from(list))?;
        loop {
            let above = orders.checked_shr(u32::from(lowest)).unwrap_or(0);
            if above == 0 {
                return None;
            }
            let o = lowest + above.trailing_zeros() as u8;
            let back = self.lists.get(usize::from(o))?[usize::from(list)].tail();
            if let Some(idx) = back
                && m.frame(idx).load().zeroed()
            {
                return Some((Order(o), idx));
            }
            *orders &= !(1 << o);
        }
    }

    /// [`FreeArea::rmqueue`] of a block not preferring zero, for up to `most` blocks at once
    /// (at least one): the first `2^j` blocks of `order` of the block found, `2^j <= most`,
    /// whether they are known zero, and how many. Where `rmqueue` called again and again
    /// would take exactly these blocks, in ascending order, this splits the block only down
    /// to `order + j`: a block from `mt`'s own lists (in a zone without CMA reservations for
    /// a movable one), not reported. Otherwise it is one block, as `rmqueue` takes it.
    ///
    /// Why the blocks are the same: the block is on the smallest order of `mt`'s lists that
    /// has any, so below it the lists are empty; split down to `order`, it leaves one upper
    /// half on each, and each next call takes the smallest: the next `2^order` frames.
    #[inline]
    pub(crate) fn rmqueue_run(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
        fallback: Fallback,
        most: u64,
    ) -> Option<(FrameIdx, bool, u64)> {
        if mt != MigrateType::Movable || self.cma_reserved == 0 {
            let Some((o, idx)) = self.smallest_on(m, order, mt as u8) else {
                return self
                    .rmqueue_fallback(m, order, mt, fallback)
                    .map(|(idx, zeroed)| (idx, zeroed, 1));
            };
            let (zeroed, n) = self.take_run(m, idx, o, order, most);
            return Some((idx, zeroed, n));
        }
        self.rmqueue(m, order, Prefer::Unzeroed, mt, fallback)
            .map(|(idx, zeroed)| (idx, zeroed, 1))
    }

    /// Whether the buddy holds fewer free frames than a block of `order`: then no list has
    /// one, whatever the type.
    #[inline(always)]
    pub(crate) fn holds_less_than(&self, order: Order) -> bool {
        self.count.pages < order.pages()
    }

    /// Takes the free block `[idx, idx + 2^from)` as a run of blocks of `order`: split down
    /// only to the largest `order + j <= from` with `2^j <= most` (to `order` for a
    /// reported block, whose pieces are counted as they are taken), the upper halves back
    /// on the lists. Returns whether it was known zero and the number of blocks, `2^j`.
    #[inline]
    fn take_run(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        from: Order,
        order: Order,
        most: u64,
    ) -> (bool, u64) {
        let run = if from == order || m.frame(idx).load().reported() {
            order
        } else {
            let fits = u8::try_from(most.max(1).ilog2()).unwrap_or(u8::MAX);
            Order(order.get() + (from.get() - order.get()).min(fits))
        };
        let zeroed = self.take_split(m, idx, from, run);
        (zeroed, 1 << (run.get() - order.get()))
    }

    /// A block `prefer` would rather have (see [`Prefer`]) for an allocation of `mt`: from
    /// its own lists, else by falling back to the other types as `fallback` allows
    /// (`__rmqueue_fallback`).
    #[inline]
    pub(crate) fn rmqueue(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Option<(FrameIdx, bool)> {
        if prefer == Prefer::Zeroed
            && let Some(idx) = self.rmqueue_zeroed(m, order, mt, fallback)
        {
            return Some((idx, true));
        }
        if mt == MigrateType::Movable && self.cma_reserved > 0 {
            return self.rmqueue_movable_with_cma(m, order, fallback);
        }
        self.rmqueue_smallest(m, order, mt)
            .or_else(|| self.rmqueue_fallback(m, order, mt, fallback))
    }

    /// [`FreeArea::rmqueue`] for a request of whole pageblocks in a zone that keeps a
    /// [pageblock reserve](crate::ZoneConfig::pageblock_reserve): served only while the
    /// free pageblocks a fallback can claim hold the block and the reserve; below that a
    /// movable request takes only a CMA reservation's block, which no fallback could claim.
    #[cold]
    pub(crate) fn rmqueue_leaving_reserve(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Option<(FrameIdx, bool)> {
        if self.claimable_pageblocks(m) >= self.pageblocks_with_reserve(order) {
            self.rmqueue(m, order, prefer, mt, fallback)
        } else if mt == MigrateType::Movable {
            self.rmqueue_list(m, order, CMA)
        } else {
            None
        }
    }

    /// The frames a request of `order` whole pageblocks needs free in pageblocks where a
    /// [pageblock reserve](crate::ZoneConfig::pageblock_reserve) is kept: its own and the
    /// reserve (the min watermark's worth) it must leave.
    pub(crate) fn pageblocks_with_reserve(&self, order: Order) -> u64 {
        order.pages().saturating_add(self.watermarks.min)
    }

    /// Linux's `__rmqueue` for a movable allocation in a zone with CMA reservations
    /// (`ALLOC_CMA`): from the CMA lists first while they hold over half the zone's free
    /// frames (so that the reservation's memory is used, not left idle), else from the
    /// movable lists, then the CMA lists, then the fallback to other types.
    #[cold]
    fn rmqueue_movable_with_cma(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        fallback: Fallback,
    ) -> Option<(FrameIdx, bool)> {
        if self.cma_free(m) > self.count.pages / 2
            && let Some(taken) = self.rmqueue_list(m, order, CMA)
        {
            return Some(taken);
        }
        self.rmqueue_smallest(m, order, MigrateType::Movable)
            .or_else(|| self.rmqueue_list(m, order, CMA))
            .or_else(|| self.rmqueue_fallback(m, order, MigrateType::Movable, fallback))
    }

    /// Frames free in the buddy on the CMA lists (`NR_FREE_CMA_PAGES`).
    pub(crate) fn cma_free(&self, m: FrameMap<'_>) -> u64 {
        (0..m.cfg.max_order.get() + 1)
            .map(|o| u64::from(self.lists[o as usize][CMA as usize].len()) << o)
            .sum()
    }

    /// Frames reserved for CMA.
    pub(crate) fn cma_reserved(&self) -> u64 {
        self.cma_reserved
    }

    /// `frames` more frames reserved for CMA (their pageblocks are marked).
    pub(crate) fn add_cma_reserved(&mut self, frames: u64) {
        self.cma_reserved = self.cma_reserved.saturating_add(frames);
    }

    /// `__rmqueue_fallback`: [`FreeArea::rmqueue_claim`], else (unless `fallback` is
    /// [`Fallback::WholePageblocks`]) [`FreeArea::rmqueue_steal`]; with a
    /// [pageblock reserve](crate::ZoneConfig::pageblock_reserve), an unmovable or
    /// reclaimable allocation also steals from the other one's pageblocks (never from a
    /// movable one) in place of a whole pageblock. [`Fallback::Claiming`] steals from
    /// those too, and else claims a movable pageblock whole
    /// ([`FreeArea::rmqueue_claim_movable`]).
    #[inline]
    pub(crate) fn rmqueue_fallback(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Option<(FrameIdx, bool)> {
        if let Some((idx, zeroed, _)) = self.rmqueue_claim(m, order, mt, fallback) {
            return Some((idx, zeroed));
        }
        match fallback {
            Fallback::Any => self.rmqueue_steal(m, order, mt, true),
            Fallback::Claiming => self
                .rmqueue_steal(m, order, mt, false)
                .or_else(|| self.rmqueue_claim_movable(m, order, mt)),
            // With a pageblock reserve, an unmovable or reclaimable allocation may still take
            // a block out of the other one's pageblocks: that pins no pageblock a huge page
            // could have (neither type's pageblocks are ever compacted into one).
            Fallback::WholePageblocks if m.cfg.pageblock_reserve && mt != MigrateType::Movable => {
                self.rmqueue_steal(m, order, mt, false)
            }
            Fallback::WholePageblocks => None,
        }
    }

    /// `__rmqueue_claim`: from the largest order down to `order` (to the pageblock order for
    /// [`Fallback::WholePageblocks`]), while `mt` may claim a block of that order
    /// ([`MigrateType::claims_on_fallback`]), the first of `mt`'s fallback types with a
    /// free block there (`find_suitable_fallback`): if `mt` can claim that block's pageblock
    /// ([`FreeArea::try_claim`]), the allocation is taken from `mt`'s lists. Returns it with
    /// the pageblocks claimed.
    pub(crate) fn rmqueue_claim(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Option<(FrameIdx, bool, PageblockClaim)> {
        let lowest = fallback.lowest_order(order, m.cfg.pageblock_order);
        for o in (lowest.get()..m.cfg.max_order.get() + 1).rev() {
            if !mt.claims_on_fallback(Order(o), m.cfg.pageblock_order) {
                break;
            }
            let Some((from, idx)) = self.suitable_fallback(Order(o), mt) else {
                continue;
            };
            if self.try_claim(m, idx, Order(o), mt, from) {
                let claim = PageblockClaim::of(m, idx, Order(o), from, mt);
                let (idx, zeroed) = self.rmqueue_smallest(m, order, mt)?;
                self.fell_back(m.pfn(idx), (order, Order(o)), (mt, from), true);
                return Some((idx, zeroed, claim));
            }
        }
        None
    }

    /// `__rmqueue_steal`: the smallest free block of at least `order` on the first of `mt`'s
    /// fallback types' lists that has one (movable ones only if `from_movable`), taken
    /// without changing any pageblock's type (counted: each steal by an unmovable or
    /// reclaimable allocation pins a pageblock of another type against compaction).
    pub(crate) fn rmqueue_steal(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
        from_movable: bool,
    ) -> Option<(FrameIdx, bool)> {
        let (o, (from, idx)) = (order.get()..m.cfg.max_order.get() + 1).find_map(|o| {
            let found = self.suitable_fallback(Order(o), mt)?;
            (from_movable || found.0 != MigrateType::Movable).then_some((o, found))
        })?;
        self.fallbacks.count_steal(mt, from);
        self.fell_back(m.pfn(idx), (order, Order(o)), (mt, from), false);
        Some((idx, self.take_split(m, idx, Order(o), order)))
    }

    /// [`Fallback::Claiming`]'s last step, for an unmovable or reclaimable allocation `mt`
    /// with no free block of at least `order` on any list but movable ones: the pageblock
    /// of the largest free movable block becomes `mt`'s (of the pageblocks the lists'
    /// heads show, one with the most free memory in one block), its free blocks moving
    /// with it, and the allocation is taken from `mt`'s lists.
    fn rmqueue_claim_movable(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        mt: MigrateType,
    ) -> Option<(FrameIdx, bool)> {
        let movable = MigrateType::Movable;
        let (o, idx) = (order.get()..m.cfg.max_order.get() + 1)
            .rev()
            .find_map(|o| Some((Order(o), self.lists[o as usize][movable as usize].head()?)))?;
        self.claim_whole(m, idx, o, mt);
        let (taken, zeroed) = self.rmqueue_smallest(m, order, mt)?;
        self.fell_back(m.pfn(taken), (order, o), (mt, movable), true);
        Some((taken, zeroed))
    }

    /// Makes the pageblock of the free block at `idx` of `order` (from the pageblock order
    /// up, every pageblock of the block) `mt`'s whatever else it holds, its free blocks
    /// moving with it: counted as a claim, and below the pageblock order the watermark is
    /// boosted, as for any fallback that fragments, so that background compaction makes
    /// free pageblocks again.
    fn claim_whole(&mut self, m: FrameMap<'_>, idx: FrameIdx, order: Order, mt: MigrateType) {
        if order >= m.cfg.pageblock_order {
            self.set_block_type(m, idx, order, mt);
        } else {
            self.boost_watermark(m);
            self.set_pageblock(m, idx, Pageblock::of(mt));
        }
        self.fallbacks.claims += 1;
    }

    /// `find_suitable_fallback`: the first of `mt`'s fallback types with a free block of
    /// exactly `order`, and that list's first block.
    #[inline]
    fn suitable_fallback(&self, order: Order, mt: MigrateType) -> Option<(MigrateType, FrameIdx)> {
        mt.fallbacks().into_iter().find_map(|from| {
            Some((
                from,
                self.lists[order.get() as usize][from as usize].head()?,
            ))
        })
    }

    /// Whether a free block of `order` or above sits on a list any allocation can take from
    /// (a CMA reservation's serves movable ones only).
    pub(crate) fn has_free(&self, m: FrameMap<'_>, order: Order) -> bool {
        (order.get()..m.cfg.max_order.get() + 1).any(|o| {
            self.lists[o as usize][..CMA as usize]
                .iter()
                .any(|l| !l.is_empty())
        })
    }

    /// Removes the free block `[idx, idx + 2^from)` and returns its upper halves down to
    /// `order` to the lists; returns whether it was known zero.
    #[inline]
    pub(crate) fn take_split(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        from: Order,
        order: Order,
    ) -> bool {
        let w = m.frame(idx).load();
        let zeroed = self.unlink(m, idx, from, w);
        if zeroed {
            // The halves' orders, `order..from` (`from <= MAX_SUPPORTED_ORDER < 32`).
            let halves = (1u32 << from.get()) - (1u32 << order.get());
            self.zeroed_orders[usize::from(w.mt())] |= halves;
        }
        for lower in (order.get()..from.get()).rev() {
            self.put_on_list(m, idx + (1u32 << lower), Order(lower), zeroed, w.mt());
        }
        // The zone loses the frames taken, the halves going back included: counted once.
        self.count.sub(order, zeroed);
        if w.reported() {
            self.split_reported(m, idx, from, order);
        }
        zeroed
    }

    /// A reported block `[idx, idx + 2^from)` was split and its first `2^order` frames
    /// taken: they are counted as reused, the upper halves (still discarded) stay reported.
    #[cold]
    fn split_reported(&mut self, m: FrameMap<'_>, idx: FrameIdx, from: Order, order: Order) {
        self.count_reused(order.pages());
        for lower in order.get()..from.get() {
            self.mark_reported(m, idx + (1u32 << lower), Order(lower));
        }
    }

    /// Takes the block `[idx, idx + 2^order)` if it lies wholly inside one free buddy block,
    /// halving that block around it and returning the other halves (known zero if it was).
    /// Returns whether the block is known zero.
    pub(crate) fn take_block_at(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
    ) -> Result<bool, ContigError> {
        let (zeroed, reported) = self.split_out(m, idx, order)?;
        if reported {
            self.count_reused(order.pages());
        }
        Ok(zeroed)
    }

    /// Makes `[idx, idx + 2^order)`, inside a free buddy block larger than a pageblock, a
    /// free block of its own (the rest goes back as the fewest blocks), every piece keeping
    /// the block's marks: a pageblock cut out of a larger block to change lists alone.
    pub(crate) fn cut_out(&mut self, m: FrameMap<'_>, idx: FrameIdx, order: Order) {
        let Some((_, w)) = m.block_head(idx) else {
            return;
        };
        if let Ok(marks) = self.split_out(m, idx, order) {
            self.insert_marked(m, idx, order, marks, w.mt());
        }
    }

    /// Removes the free buddy block holding `[idx, idx + 2^order)` and returns its other
    /// halves to the lists (known zero and reported as it was); `[idx, idx + 2^order)` is
    /// the caller's. Returns the block's marks: known zero, reported.
    fn split_out(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
    ) -> Result<(bool, bool), ContigError> {
        let not_free = ContigError::NotInBuddy(m.pfn(idx));
        let (head, w) = m.block_head(idx).ok_or(not_free)?;
        if w.state() != FrameState::Buddy || w.order() < order.get() {
            return Err(not_free);
        }
        let zeroed = self.remove(m, head, Order(w.order()));
        let (mut base, mut o) = (head, w.order());
        while o > order.get() {
            o -= 1;
            let half = 1u32 << o;
            let other = if idx >= base + half {
                let lower = base;
                base += half;
                lower
            } else {
                base + half
            };
            self.insert_marked(m, other, Order(o), (zeroed, w.reported()), w.mt());
        }
        Ok((zeroed, w.reported()))
    }
}

/// Whether free blocks on list `list` merge with blocks on other lists across pageblocks:
/// the three types' lists do, an isolated or CMA pageblock's do not (Linux's
/// `migratetype_is_mergeable`).
#[inline]
const fn mergeable(list: u8) -> bool {
    list < CMA
}

/// The buddy the free block at `idx` of `order` (known zero as `zeroed` says, on list
/// `list`) merges with, and its word, if any: a free buddy of the same order and the same
/// knowledge (a freed block does not make its zeroed buddy unknown; the slow path's
/// `merge_mixed` merges those pairs), on the same list or, across pageblocks, on another
/// mergeable one (below the pageblock order both halves share one pageblock, and so one list).
#[inline]
fn merge_partner(
    m: FrameMap<'_>,
    idx: FrameIdx,
    order: Order,
    zeroed: bool,
    list: u8,
) -> Option<(FrameIdx, Word)> {
    let b = m.buddy(idx, order)?;
    let w = m.frame(b).load();
    if w.ignoring_mt().ignoring_reported() != Word::free(FrameState::Buddy, order.get(), zeroed, 0)
    {
        return None;
    }
    (w.mt() == list || (mergeable(list) && mergeable(w.mt()))).then_some((b, w))
}

/// Whether freeing the block at `idx` of `order` (known zero as `zeroed` says) would merge
/// it, directly or through the blocks it merges into, with a buddy not marked reported: the
/// merges `free_one_page_marked` makes, walked without making them.
fn merges_with_unreported(m: FrameMap<'_>, idx: FrameIdx, order: Order, zeroed: bool) -> bool {
    let (mut idx, mut order, mut list) = (idx, order, m.free_list_of(idx));
    while order < m.cfg.max_order {
        let Some((b, w)) = merge_partner(m, idx, order, zeroed, list) else {
            return false;
        };
        if !w.reported() {
            return true;
        }
        if b < idx {
            list = w.mt();
        }
        idx = idx.min(b);
        order = order.up();
    }
    false
}

/// Where compaction's two scanners are (Linux keeps the cursor in `struct zone`): the
/// migrate scanner's next frame (going up), the pageblock the free scanner takes targets
/// from (going down), and where in that pageblock it looks next (the frames below held no
/// target when it passed them, as Linux's free scanner isolates a pageblock's free pages
/// in one pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scanners {
    pub(crate) migrate: FrameIdx,
    pub(crate) free: PageblockIdx,
    pub(crate) free_from: FrameIdx,
}

/// Linux's compaction deferral (`defer_compaction`, `compaction_deferred`,
/// `compaction_defer_reset`): after a direct compaction for some order fails, the next
/// `2^shift` ones for that order or above are skipped (the shift growing to 6 with each
/// failure), so that a zone that cannot be compacted is not scanned on every allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CompactDefer {
    considered: u32,
    shift: u32,
    order_failed: u8,
}

impl CompactDefer {
    const NONE: Self = Self {
        considered: 0,
        shift: 0,
        order_failed: u8::MAX,
    };
    /// Linux's `COMPACT_MAX_DEFER_SHIFT`.
    const MAX_SHIFT: u32 = 6;
}

impl Scanners {
    pub(crate) fn start(m: FrameMap<'_>) -> Self {
        // A zone has frames, fewer than u32::MAX.
        let last = FrameIdx(m.frames.len() as u32 - 1);
        let free = m.pageblock_index(last);
        Self {
            migrate: FrameIdx::FIRST,
            free,
            free_from: free.first(),
        }
    }
}

impl FreeArea {
    /// Makes the pageblocks `range` (frames being added as usable memory) overlaps movable
    /// if nothing set their type before, as Linux's `memmap_init` does: all memory starts
    /// movable, and the other types claim pageblocks as they need them.
    pub(crate) fn init_pageblocks(&mut self, m: FrameMap<'_>, range: Range<FrameIdx>) {
        let movable = Pageblock::of(MigrateType::Movable);
        for block in m.pageblocks(range.clone()) {
            if m.pageblock_bits_frame(block.start).pageblock_bits() & INITIALIZED == 0 {
                if block.start >= range.start && block.end <= range.end {
                    // Nothing of it was usable before: no free block to move.
                    m.pageblock_bits_frame(block.start)
                        .set_pageblock_bits(movable.bits());
                } else {
                    self.set_pageblock(m, block.start, movable);
                }
            }
        }
    }

    /// Sets the pageblock holding `idx` to `pb` and moves its free buddy blocks to the lists
    /// that go with it (`move_freepages_block`). Blocks on per-cpu lists stay there; they go
    /// to the pageblock's lists when drained. Only for pageblocks below a free block of the
    /// pageblock order or above (those are moved whole by `set_block_type`).
    pub(crate) fn set_pageblock(&mut self, m: FrameMap<'_>, idx: FrameIdx, pb: Pageblock) {
        let range = m.pageblock_range(idx);
        m.pageblock_bits_frame(range.start)
            .set_pageblock_bits(pb.bits());
        let list = pb.list();
        for (i, w) in m.heads(range.start, range.end) {
            if w.state() == FrameState::Buddy && w.mt() != list {
                self.relist(m, i, Order(w.order()), list);
            }
        }
    }

    /// Sets every pageblock of the free block at `idx` (of `order`, at least the pageblock
    /// order) to `mt`, not isolated, and moves the block to that type's list.
    pub(crate) fn set_block_type(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
        mt: MigrateType,
    ) {
        set_pageblocks(m, idx, order, mt);
        self.relist(m, idx, order, mt as u8);
    }

    /// Linux's `try_to_claim_block`, for an allocation of `mt` that falls back to the free
    /// block at `idx` of `order` on `from`'s lists: a block of the pageblock order or above
    /// becomes `mt` whole; below it the fallback fragments, so the watermark is boosted
    /// ([`FreeArea::boost_watermark`]), and the block's pageblock becomes `mt`, its free
    /// blocks moving with it, if at least half of it is free in the buddy or alike: for a
    /// movable allocation its movable allocations, for another falling back to a movable
    /// pageblock everything neither free nor movable (per-cpu blocks included, as in
    /// Linux), between unmovable and reclaimable nothing. Whether the claim was made.
    pub(crate) fn try_claim(
        &mut self,
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
        mt: MigrateType,
        from: MigrateType,
    ) -> bool {
        if order >= m.cfg.pageblock_order {
            self.claim_whole(m, idx, order, mt);
            return true;
        }
        self.boost_watermark(m);
        let range = m.pageblock_range(idx);
        let (mut free, mut movable) = (0u32, 0u32);
        // Below the pageblock order, so every block here lies inside the pageblock.
        for (_, w) in m.heads(range.start, range.end) {
            let pages = 1u32 << w.order();
            match w.state() {
                FrameState::Buddy => free += pages,
                FrameState::Allocated if w.mt() == MigrateType::Movable as u8 => movable += pages,
                _ => {}
            }
        }
        let alike = match (mt, from) {
            (MigrateType::Movable, _) => movable,
            (_, MigrateType::Movable) => (range.end - range.start).saturating_sub(free + movable),
            _ => 0,
        };
        if free + alike < m.pageblock_pages() / 2 {
            return false;
        }
        self.set_pageblock(m, idx, Pageblock::of(mt));
        self.fallbacks.claims += 1;
        true
    }

    /// Linux's `boost_watermark`, on a fallback that fragments: the boost grows by a
    /// pageblock, up to [`ZoneConfig::watermark_boost_factor`](crate::ZoneConfig::watermark_boost_factor)
    /// ten-thousandths of the high watermark (at least a pageblock); not for a zone of fewer
    /// than four pageblocks, nor with a factor of 0. Background compaction
    /// ([`Zone::compact_work`](crate::Zone::compact_work)) works the boost off.
    fn boost_watermark(&mut self, m: FrameMap<'_>) {
        let pageblock = u64::from(m.pageblock_pages());
        let factor = u64::from(m.cfg.watermark_boost_factor);
        if factor == 0 || pageblock.saturating_mul(4) > self.present {
            return;
        }
        let most = (self.watermarks.high.saturating_mul(factor) / 10_000).max(pageblock);
        self.boost = self.boost.saturating_add(pageblock).min(most);
        self.fallbacks.boosts += 1;
    }
}

impl FreeArea {
    /// Gives the pageblocks of `claim` their type back, moving their free blocks with them;
    /// under the zone lock, after the claiming allocation's block was freed again. A
    /// pageblock whose type changed since (to other than the claiming type) is left alone,
    /// and an isolated one stays isolated.
    pub(crate) fn unclaim_pageblocks(&mut self, m: FrameMap<'_>, claim: PageblockClaim) {
        for block in m.pageblocks(claim.start..claim.end) {
            let pb = m.pageblock(block.start);
            if pb.mt != claim.by {
                continue;
            }
            match m.block_head(block.start) {
                // Free and whole across pageblocks: moved as one (its later pageblocks then
                // read as `was` and are passed over).
                Some((head, w))
                    if w.state() == FrameState::Buddy
                        && w.order() >= m.cfg.pageblock_order.get()
                        && !pb.isolated =>
                {
                    self.set_block_type(m, head, Order(w.order()), claim.was);
                }
                _ => self.set_pageblock(
                    m,
                    block.start,
                    Pageblock {
                        mt: claim.was,
                        ..pb
                    },
                ),
            }
        }
    }
}

impl FreeArea {
    /// Takes the largest free block not known zero for background zeroing, split down to at
    /// most `most` (the upper halves go back, not known zero); its head becomes `Zeroing`
    /// and the caller owns it until it frees it again.
    pub(crate) fn take_unzeroed(
        &mut self,
        m: FrameMap<'_>,
        most: Order,
    ) -> Option<(FrameIdx, Order)> {
        // Not a reported block: clearing it would make the host back it again. Blocks not
        // known zero are at the front, reported ones at the back.
        let (o, idx) = (0..m.cfg.max_order.get() + 1).rev().find_map(|o| {
            self.lists[o as usize][..ISOLATE as usize]
                .iter()
                .find_map(|l| {
                    let head = l.head()?;
                    let w = m.frame(head).load();
                    (!w.zeroed() && !w.reported()).then_some((o, head))
                })
        })?;
        let keep = Order(o.min(most.get()));
        self.take_split(m, idx, Order(o), keep);
        m.frame(idx)
            .store(Word::new(FrameState::Zeroing, keep.get()));
        Some((idx, keep))
    }

    /// The allocation slow path's last resort: merges every pair of free buddies that stayed
    /// apart because one is known zero and the other is not (the merged block is not known
    /// zero), up to MAX_ORDER. Returns whether it merged any. O(free blocks), and O(1) when
    /// no free block is known zero.
    pub(crate) fn merge_mixed(&mut self, m: FrameMap<'_>) -> bool {
        // A mixed pair has a known-zero half: with no known-zero block free, none (and no
        // walk over every free block on each failed allocation).
        if self.count.zeroed == 0 {
            return false;
        }
        let mut merged = false;
        for (o, list) in
            (0..m.cfg.max_order.get()).flat_map(|o| (0..LIST_TYPES as u8).map(move |l| (o, l)))
        {
            let order = Order(o);
            let mut at = self.lists[o as usize][list as usize].head();
            while let Some(idx) = at {
                at = m.frame(idx).next();
                let Some(b) = m.buddy(idx, order) else {
                    continue;
                };
                // A free buddy of the same order, on this list or (across pageblocks) another
                // type's; never across an isolated or CMA pageblock's edge.
                let w = m.frame(b).load();
                if w.ignoring_zeroed().ignoring_mt() != Word::new(FrameState::Buddy, o)
                    || (w.mt() != list && !(mergeable(w.mt()) && mergeable(list)))
                {
                    continue;
                }
                // Same order and knowledge would have merged already: this pair is mixed
                // (`free_one_page` below settles the halves' types as a free would).
                if at == Some(b) {
                    at = m.frame(b).next();
                }
                let reported = m.frame(idx).load().reported() && w.reported();
                let zeroed = self.remove(m, idx, order) & self.remove(m, b, order);
                self.free_one_page_marked(m, idx.min(b), order.up(), zeroed, reported);
                merged = true;
            }
        }
        merged
    }
}

/// The memory map's bookkeeping and the counters: what the features read, and the only
/// ways they change it.
impl FreeArea {
    /// Frames free in the buddy, and of those in blocks known zero.
    #[inline]
    pub(crate) fn count(&self) -> FreeCount {
        self.count
    }

    /// Usable frames initialized: every range added, holes and deferred frames excluded.
    #[inline]
    pub(crate) fn present(&self) -> u64 {
        self.present
    }

    /// The free lists, per order and free-list index (for the zone's check).
    pub(crate) fn lists(&self) -> &[[List; LIST_TYPES]; MAX_SUPPORTED_ORDER as usize + 1] {
        &self.lists
    }

    /// Whether the word of known-zero orders says that free list `list` of order `o` may hold
    /// a block known zero (for the zone's check).
    pub(crate) fn says_zeroed(&self, o: usize, list: usize) -> bool {
        self.zeroed_orders[list] >> o & 1 != 0
    }

    /// The counters of what the zone lock's holders did.
    #[inline]
    pub(crate) fn stats(&mut self) -> &mut LockStats {
        &mut self.stats
    }

    /// Records `pages` as added; false when the table could not hold it (the overlap check
    /// then reads frames: [`FreeArea::added_overlap`]).
    pub(crate) fn record_added(&mut self, pages: Range<FrameIdx>) -> bool {
        self.added.insert(pages)
    }

    /// The first frame of `pages` the recorded ranges hold, or `Err` when the table
    /// overflowed and cannot say.
    pub(crate) fn added_overlap(&self, pages: &Range<FrameIdx>) -> Result<Option<FrameIdx>, ()> {
        self.added.overlap(pages)
    }

    /// Forgets `pages` (taken offline) and its initialized frames; false, with nothing
    /// changed, when the table of added ranges has no slot for the cut.
    pub(crate) fn remove_added(&mut self, pages: &Range<FrameIdx>) -> bool {
        if !self.added.remove(pages) {
            return false;
        }
        self.set_present(self.present - u64::from(pages.end - pages.start));
        true
    }

    /// `frames` more frames initialized (added at once, not deferred).
    pub(crate) fn add_present(&mut self, frames: u64) {
        self.set_present(self.present + frames);
    }

    /// The zone has `present` usable frames initialized; its watermarks follow.
    fn set_present(&mut self, present: u64) {
        self.present = present;
        self.watermarks = Watermarks::for_pages(present);
    }

    /// The watermarks of the zone's present frames.
    #[inline]
    pub(crate) fn watermarks(&self) -> Watermarks {
        self.watermarks
    }

    /// Whether the free frames in the buddy are below the zone's high watermark (Linux's
    /// `ZONE_BELOW_HIGH`): tuned per-cpu high marks then shrink instead of growing.
    #[inline]
    pub(crate) fn below_high_watermark(&self) -> bool {
        self.count.pages < self.watermarks.high
    }

    /// The deferred ranges and their counts.
    #[inline]
    pub(crate) fn deferred(&self) -> &DeferredRanges {
        &self.deferred
    }

    /// Defers `pages`; false (nothing recorded) when the deferred table is full.
    pub(crate) fn defer(&mut self, pages: Range<FrameIdx>, zeroed: bool) -> bool {
        self.deferred.push(pages, zeroed)
    }

    /// Takes up to `max` deferred frames off the oldest range for the caller to initialize
    /// ([`DeferredRanges::pop`]), with whether they are known zero.
    pub(crate) fn take_deferred(&mut self, max: u64) -> Option<(Range<FrameIdx>, bool)> {
        self.deferred.pop(max)
    }

    /// A chunk [`FreeArea::take_deferred`] handed out is initialized and its blocks freed:
    /// its frames are present.
    pub(crate) fn finish_deferred(&mut self, chunk: &Range<FrameIdx>) {
        self.set_present(self.present + u64::from(chunk.end - chunk.start));
        self.deferred.in_flight -= 1;
        self.deferred.completed += 1;
    }

    /// Where proactive compaction's scanners stopped, if it has not finished a pass.
    pub(crate) fn scanners(&self) -> Option<Scanners> {
        self.scanners
    }

    /// Where proactive compaction goes on next time (`None`: from the ends).
    pub(crate) fn set_scanners(&mut self, scanners: Option<Scanners>) {
        self.scanners = scanners;
    }

    /// Frames free in blocks of the pageblock order or above, on lists an allocation can
    /// take from.
    pub(crate) fn free_in_pageblocks(&self, m: FrameMap<'_>) -> u64 {
        self.free_from(m, m.cfg.pageblock_order)
    }

    /// Frames free in blocks of the pageblock order or above that a fallback can claim:
    /// on the three types' lists, not a CMA reservation's.
    pub(crate) fn claimable_pageblocks(&self, m: FrameMap<'_>) -> u64 {
        self.free_on(m, m.cfg.pageblock_order, CMA)
    }

    /// Frames free in blocks of `order` or above on lists an allocation can take from.
    fn free_from(&self, m: FrameMap<'_>, order: Order) -> u64 {
        self.free_on(m, order, ISOLATE)
    }

    /// Frames free in blocks of `order` or above on the free lists before index `lists`.
    fn free_on(&self, m: FrameMap<'_>, order: Order, lists: u8) -> u64 {
        (order.get()..m.cfg.max_order.get() + 1)
            .map(|o| {
                let blocks: u64 = self.lists[o as usize][..lists as usize]
                    .iter()
                    .map(|l| u64::from(l.len()))
                    .sum();
                blocks << o
            })
            .sum()
    }

    /// Linux's `fragmentation_score_zone` (`extfrag_for_order` at the pageblock order): the
    /// percentage of free frames outside free blocks of the pageblock order or above; 0
    /// with nothing free.
    pub(crate) fn fragmentation_score(&self, m: FrameMap<'_>) -> u8 {
        let free = self.free_from(m, Order::ZERO);
        if free == 0 {
            return 0;
        }
        // At most 100.
        ((free - self.free_in_pageblocks(m)) * 100 / free) as u8
    }

    /// Keeps an allocation of `mt` and `order` that fell back to a free block of
    /// `fallback_order` at `pfn` in a pageblock of type `from` (claiming it or not) for the
    /// event hook (`mm_page_alloc_extfrag`).
    fn fell_back(
        &mut self,
        pfn: mm_types::Pfn,
        (alloc_order, fallback_order): (Order, Order),
        (alloc_kind, fallback_kind): (MigrateType, MigrateType),
        change_ownership: bool,
    ) {
        self.extfrag.push(Extfrag {
            pfn,
            alloc_order,
            fallback_order,
            alloc_kind,
            fallback_kind,
            change_ownership,
        });
    }

    /// Takes the fallbacks not yet handed to the event hook.
    #[inline(always)]
    pub(crate) fn take_extfrag(&mut self) -> Option<PendingExtfrag> {
        if self.extfrag.len == 0 {
            return None;
        }
        Some(core::mem::replace(&mut self.extfrag, PendingExtfrag::NONE))
    }

    /// The fallbacks counted since the zone was built or its counters reset.
    pub(crate) fn fallback_counts(&self) -> FallbackCounts {
        self.fallbacks
    }

    /// Forgets the fallbacks counted.
    pub(crate) fn reset_fallback_counts(&mut self) {
        self.fallbacks = FallbackCounts::ZERO;
    }

    /// The watermark boost: frames background compaction owes.
    pub(crate) fn boost(&self) -> u64 {
        self.boost
    }

    /// Background compaction worked the boost off (kswapd's `zone->watermark_boost = 0`).
    pub(crate) fn clear_boost(&mut self) {
        self.boost = 0;
    }

    /// Whether background compaction skips this call (counting it).
    pub(crate) fn background_deferred(&mut self) -> bool {
        let skip = self.background_defer > 0;
        self.background_defer = self.background_defer.saturating_sub(1);
        skip
    }

    /// Background compaction could not improve the zone: it skips the next 64 calls
    /// (`1 << COMPACT_MAX_DEFER_SHIFT`).
    pub(crate) fn defer_background(&mut self) {
        self.background_defer = 1 << CompactDefer::MAX_SHIFT;
    }

    /// `compaction_deferred`: whether a direct compaction for `order` is skipped this time.
    pub(crate) fn compaction_deferred(&mut self, order: Order) -> bool {
        let d = &mut self.defer;
        if order.get() < d.order_failed {
            return false;
        }
        let limit = 1u32 << d.shift;
        d.considered = d.considered.saturating_add(1);
        if d.considered >= limit {
            d.considered = limit;
            return false;
        }
        true
    }

    /// `defer_compaction`: a direct compaction for `order` failed.
    pub(crate) fn defer_compaction(&mut self, order: Order) {
        let d = &mut self.defer;
        d.considered = 0;
        d.shift = (d.shift + 1).min(CompactDefer::MAX_SHIFT);
        d.order_failed = d.order_failed.min(order.get());
    }

    /// `compaction_defer_reset`: a direct compaction for `order` made its block.
    pub(crate) fn compaction_succeeded(&mut self, order: Order) {
        let d = &mut self.defer;
        d.considered = 0;
        d.shift = 0;
        if order.get() >= d.order_failed {
            d.order_failed = order.get().saturating_add(1);
        }
    }
}

/// Free page reporting's state under the zone lock: the registration, and the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reporting {
    pub(crate) registered: Option<PageReporting>,
    pub(crate) counts: ReportStats,
}

impl Reporting {
    const NONE: Self = Self {
        registered: None,
        counts: ReportStats::ZERO,
    };
}

impl FreeArea {
    /// Free page reporting's registration and counts.
    pub(crate) fn reporting(&mut self) -> &mut Reporting {
        &mut self.reporting
    }

    /// Frames free and marked reported.
    pub(crate) fn reported_free(&self) -> u64 {
        self.reporting.counts.reported_free
    }

    /// Takes the smallest free block of `lowest` or above that is not reported, from any
    /// list but the isolated ones, whole, for free page reporting (Linux never splits a block
    /// to report it: a reported part put back beside its unreported remainder would merge
    /// with it and lose its mark); its head becomes `Reporting` and the caller owns it until
    /// [`FreeArea::put_back_round`]. Returns it, its order and whether it is known zero.
    pub(crate) fn take_unreported(
        &mut self,
        m: FrameMap<'_>,
        lowest: Order,
    ) -> Option<(FrameIdx, Order, bool)> {
        let (order, idx) = (lowest.get()..m.cfg.max_order.get() + 1).find_map(|o| {
            self.lists[o as usize][..ISOLATE as usize]
                .iter()
                .find_map(|l| l.blocks(m.frames).find(|&i| !m.frame(i).load().reported()))
                .map(|i| (Order(o), i))
        })?;
        let zeroed = self.remove(m, idx, order);
        m.frame(idx)
            .store(Word::new(FrameState::Reporting, order.get()));
        Some((idx, order, zeroed))
    }

    /// Frees the blocks of a report round, `(first frame, order, known zero when taken)`,
    /// that [`FreeArea::take_unreported`] took; with `reported`, marked reported at the back
    /// of their lists (allocated last), unless one merged with a buddy that is not (freed
    /// meanwhile): the merged block is reported again later.
    ///
    /// With `discard_zeroed`, the host's discard zeroed them: once every block is back as it
    /// was known when taken (so that each merges with its round's blocks only), each free
    /// block that the round's blocks not known zero make up is taken as known zero, unless
    /// that would merge it with a known-zero buddy that is not reported (it did not merge with
    /// it as it was): the merged block, its mark lost, would be reported again at once. Such
    /// a block stays not known zero, reported.
    pub(crate) fn put_back_round(
        &mut self,
        m: FrameMap<'_>,
        round: &[(FrameIdx, Order, bool)],
        reported: bool,
        discard_zeroed: bool,
    ) {
        for &(idx, order, was_zero) in round {
            self.free_one_page_marked(m, idx, order, was_zero, reported);
        }
        if !(reported && discard_zeroed) {
            return;
        }
        for &(idx, _, _) in round.iter().filter(|&&(_, _, was_zero)| !was_zero) {
            // The free block it is part of now (an earlier one of the round may have taken
            // it up already).
            let Some((head, w)) = m.block_head(idx) else {
                continue;
            };
            if w.state() != FrameState::Buddy || w.zeroed() || !w.reported() {
                continue;
            }
            let order = Order(w.order());
            let end = head + order.pages() as u32;
            // Made up of this round's blocks not known zero alone: all of it was discarded.
            let covered: u64 = round
                .iter()
                .filter(|&&(i, _, z)| !z && head <= i && i < end)
                .map(|&(_, o, _)| o.pages())
                .sum();
            if covered != order.pages() || merges_with_unreported(m, head, order, true) {
                continue;
            }
            self.remove(m, head, order);
            self.free_one_page_marked(m, head, order, true, true);
        }
    }

    /// Moves the free block at `idx` of `order` to list `list` (its pageblock changed type
    /// or isolation), keeping its marks, known zero and reported (as Linux's
    /// `move_to_free_list` keeps `PageReported`).
    fn relist(&mut self, m: FrameMap<'_>, idx: FrameIdx, order: Order, list: u8) {
        let reported = m.frame(idx).load().reported();
        let zeroed = self.remove(m, idx, order);
        self.insert_marked(m, idx, order, (zeroed, reported), list);
    }

    /// Marks the free buddy block at `idx` of `order` reported and moves it to the back of
    /// its list, allocated last; one not known zero goes before the known-zero blocks,
    /// which the lists keep at their backs.
    fn mark_reported(&mut self, m: FrameMap<'_>, idx: FrameIdx, order: Order) {
        let w = m.frame(idx).load();
        let list = &mut self.lists[order.get() as usize][w.mt() as usize];
        list.remove(m.frames, idx);
        m.frame(idx).store(w.with_reported());
        if w.zeroed() {
            list.push_back(m.frames, idx);
        } else {
            list.push_before_zeroed(m.frames, idx);
        }
        self.reporting.counts.reported_free += order.pages();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Prefer, set_pageblocks};
    use crate::migratetype::{MigrateType, Pageblock};
    use crate::types::Order;
    use crate::zone::config::Fallback;
    use crate::zone::config::ZoneConfig;
    use crate::zone::{FreeWhere, StaticZone};
    use mm_types::Pfn;

    /// A zone of two blocks of order 10, each two pageblocks; a frozen block of order 10
    /// allocated from it, and the zone, for a test to change the block's pageblocks and free
    /// it. A zone per use: tests run in parallel.
    macro_rules! zone_with_a_block {
        () => {{
            static ZONE: StaticZone<2048, 1> =
                StaticZone::new_static(ZoneConfig::new(Pfn(0x1_0000), 2048));
            let block = ZONE.cpu(0).unwrap().alloc_frozen_pages(Order(10)).unwrap();
            (&ZONE, block)
        }};
    }

    /// A free block above the pageblock order goes back as its pageblocks' types allow:
    /// over pageblocks alike, one block of its order; over two types, pageblock by
    /// pageblock, the halves merging into a block of the lower half's type (its pageblocks
    /// retyped, as `check` wants); over an isolated pageblock, a block per pageblock, each
    /// on its own pageblock's lists, unmerged. (Freed whole over pageblocks that differ, it
    /// would sit on one type's list across them: `check` and the types below catch it.)
    #[test]
    #[allow(unsafe_code)]
    fn a_block_above_a_pageblock_frees_as_its_pageblocks_types_allow() {
        let upper = |block: Pfn| Pfn(block.0 + 512);
        let free = |zone: &'static StaticZone<2048, 1>, block| {
            // SAFETY: the block came from `alloc_frozen_pages` of this order, freed once.
            unsafe { zone.cpu(0).unwrap().free_frozen_pages(block, Order(10)) }.unwrap();
            zone.check().unwrap();
        };
        // Alike.
        let (zone, block) = zone_with_a_block!();
        free(zone, block);
        assert!(
            zone.free_blocks()
                .any(|b| b == (block, Order(10), FreeWhere::Buddy))
        );
        // The upper pageblock movable: merged back, both unmovable.
        let (zone, block) = zone_with_a_block!();
        let m = zone.map();
        set_pageblocks(
            m,
            m.index(upper(block)).unwrap(),
            Order(9),
            MigrateType::Movable,
        );
        free(zone, block);
        assert!(
            zone.free_blocks()
                .any(|b| b == (block, Order(10), FreeWhere::Buddy))
        );
        for pfn in [block, upper(block)] {
            assert_eq!(
                zone.pageblock_type(pfn),
                Ok((MigrateType::Unmovable, false))
            );
        }
        // The upper pageblock isolated: two blocks, the upper still isolated.
        let (zone, block) = zone_with_a_block!();
        let m = zone.map();
        let isolated = Pageblock {
            isolated: true,
            ..Pageblock::of(MigrateType::Unmovable)
        };
        m.pageblock_bits_frame(m.index(upper(block)).unwrap())
            .set_pageblock_bits(isolated.bits());
        free(zone, block);
        for pfn in [block, upper(block)] {
            assert!(
                zone.free_blocks()
                    .any(|b| b == (pfn, Order(9), FreeWhere::Buddy))
            );
        }
        assert_eq!(
            zone.pageblock_type(upper(block)),
            Ok((MigrateType::Unmovable, true))
        );
    }

    /// The word of known-zero orders follows the lists: a known-zero block linked sets its
    /// order's bit, a zeroed allocation takes the smallest order from its own up whose list
    /// has one (split down, the halves known zero), and a bit whose list has none left stays
    /// until a zeroed allocation's search passes it. `check` catches a word that leaves out
    /// a list with known-zero blocks.
    #[test]
    fn the_word_of_known_zero_orders_follows_the_lists() {
        static ZONE: StaticZone<2048, 1> =
            StaticZone::new_static_empty(ZoneConfig::new(Pfn(0), 2048));
        ZONE.add_zeroed_memory(Pfn(0), 1024).unwrap();
        ZONE.add_memory(Pfn(1024), 1024).unwrap();
        let movable = MigrateType::Movable;
        let orders = |zone: &StaticZone<2048, 1>| {
            let free = zone.lock_zone();
            (0..=10)
                .filter(|&o| free.says_zeroed(o, movable as usize))
                .collect::<std::vec::Vec<_>>()
        };
        assert_eq!(orders(&ZONE), [10]);
        ZONE.check().unwrap();
        // Negative control: the word leaving out order 10, whose list has a known-zero block.
        ZONE.lock_zone().zeroed_orders[movable as usize] &= !(1 << 10);
        let caught = ZONE.check().unwrap_err();
        assert!(caught.what.contains("known-zero orders"), "{caught:?}");
        ZONE.lock_zone().zeroed_orders[movable as usize] |= 1 << 10;
        ZONE.check().unwrap();
        // Blocks taken straight off the buddy (not handed out: `check` would see their
        // frames as no block's).
        let m = ZONE.map();
        let zeroed = |order| {
            let taken = ZONE
                .lock_zone()
                .rmqueue_zeroed(m, Order(order), movable, Fallback::Any);
            taken.map(|idx| m.pfn(idx))
        };
        let plain = |order| {
            let taken =
                ZONE.lock_zone()
                    .rmqueue(m, Order(order), Prefer::Unzeroed, movable, Fallback::Any);
            taken.map(|(idx, zeroed)| (m.pfn(idx), zeroed))
        };
        assert_eq!(zeroed(8), Some(Pfn(0)));
        assert_eq!(orders(&ZONE), [8, 9, 10]);
        // The block not known zero goes first, then the known-zero halves, smallest first.
        assert_eq!(plain(10), Some((Pfn(1024), false)));
        assert_eq!(plain(8), Some((Pfn(256), true)));
        assert_eq!(orders(&ZONE), [8, 9, 10]);
        // The search passes order 8, now without one (its bit goes), and splits the block
        // of order 9, whose bit stays with order 10's, and the half sets order 8's again.
        assert_eq!(zeroed(8), Some(Pfn(512)));
        assert_eq!(orders(&ZONE), [8, 9, 10]);
        // None of order 9 or above: the search clears both bits and finds nothing.
        assert_eq!(zeroed(9), None);
        assert_eq!(orders(&ZONE), [8]);
        assert_eq!(zeroed(8), Some(Pfn(768)));
    }
}
