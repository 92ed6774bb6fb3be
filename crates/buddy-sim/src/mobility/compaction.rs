//! Compaction (Linux's `compact_zone`): movable allocations move from the bottom of the zone
//! to free blocks at its top until a free block of the order asked for exists, so that huge
//! pages can still be found after long churn.
//!
//! Two scanners walk towards each other: the migrate scanner up from the zone's first frame,
//! looking for movable allocations; the free scanner down from its last pageblock, taking free
//! blocks out of movable pageblocks as targets (never a whole free pageblock: that is what
//! compaction makes). The zone copies nothing itself: for each block it freezes the source
//! (no reference count, so that no free or `get_page` can reach it while it moves), takes a
//! target off the free lists, and asks the embedder's [`Migrate`] callback to copy the
//! contents and repoint its mappings, or to refuse. Then the source is freed (or unfrozen, if
//! refused, and the target given back as it was taken: known zero if it was, and with any
//! pageblock its fallback claimed given its type back). A block whose reference count is not
//! exactly the one of its allocation (pinned by `get_page`), or that is poisoned or
//! vmalloc's, is not moved.

use crate::error::contig::ContigError;
use crate::events::{CompactionBegin, CompactionEnd, CompactionKind, ZoneEvents};
use crate::frame::{FrameState, Word};
use crate::frame_storage::FrameStorage;
use crate::migrate::{Migrate, Migration};
use crate::migratetype::MigrateType;
use crate::reclaim::Reclaim;
use crate::types::{FrameIdx, Order, PageblockIdx};
use crate::zone::Zone;
use crate::zone::buddy::{FreeArea, Scanners};
use crate::zone::cpu::{Access, Cpu};
use crate::zone::map::FrameMap;
use crate::zone::pageblock::PageblockClaim;
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;

/// What one compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactStats {
    /// Frames moved (the sum of the orders' pages of the blocks moved).
    pub moved_pages: u64,
    /// Blocks the callback refused.
    pub refused: u64,
    /// A free block of the order asked for exists at the end.
    pub success: bool,
}

impl core::ops::AddAssign for CompactStats {
    /// What two compactions did together.
    fn add_assign(&mut self, other: Self) {
        self.moved_pages += other.moved_pages;
        self.refused += other.refused;
        self.success |= other.success;
    }
}

impl core::iter::Sum for CompactStats {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |mut all, s| {
            all += s;
            all
        })
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// The scanners' loop: until `goal` is met, `budget` frames moved, or they meet.
    fn compact_run(
        &self,
        s: &mut Scanners,
        goal: Goal,
        budget: u64,
        migrate: &mut impl Migrate,
    ) -> CompactStats {
        let m = self.map();
        let mut stats = CompactStats::default();
        loop {
            if goal.met(m, &self.lock_zone()) {
                stats.success = true;
                break;
            }
            if stats.moved_pages >= budget {
                break;
            }
            let Some((src, w)) = self.next_movable(s.migrate, s.free, goal.whole_pageblocks(m))
            else {
                break;
            };
            let order = Order(w.order());
            s.migrate = src + order.pages() as u32;
            if order >= m.cfg.pageblock_order {
                // As large as what compaction makes: left where it is.
                continue;
            }
            let Some(dst) = self.take_target(s, src, order) else {
                break;
            };
            match self.move_block(src, w, dst, migrate) {
                Ok(()) => stats.moved_pages += order.pages(),
                Err(NotMoved::Refused) => stats.refused += 1,
                Err(NotMoved::Changed) => {}
            }
        }
        stats
    }

    /// `run`, a compaction of `kind` towards `order`, between its begin and end events.
    fn reporting_compaction(
        &self,
        kind: CompactionKind,
        order: Option<Order>,
        run: impl FnOnce() -> CompactStats,
    ) -> CompactStats {
        self.events()
            .compaction_begin(&CompactionBegin { kind, order });
        let stats = run();
        self.events().compaction_end(&CompactionEnd {
            kind,
            order,
            moved_pages: stats.moved_pages,
            success: stats.success,
        });
        stats
    }

    /// [`Zone::compact_run`] from where the zone's last compaction stopped; the cursor is
    /// kept for the next one unless the scanners met (or found no target), as Linux keeps
    /// `compact_cached_migrate_pfn` and `compact_cached_free_pfn`.
    fn compact_resuming(
        &self,
        goal: Goal,
        budget: u64,
        migrate: &mut impl Migrate,
    ) -> CompactStats {
        let m = self.map();
        let mut scanners = self
            .lock_zone()
            .scanners()
            .unwrap_or_else(|| Scanners::start(m));
        let stats = self.compact_run(&mut scanners, goal, budget, migrate);
        let stopped_early = stats.success || stats.moved_pages >= budget;
        self.lock_zone()
            .set_scanners(stopped_early.then_some(scanners));
        stats
    }

    /// Direct compaction for an allocation of `order` in its slow path: unless deferred
    /// after earlier failures for that order (`compaction_deferred`), drains `pcp`'s lists
    /// (every CPU's for a locked handle) and compacts from where the last compaction
    /// stopped until a free block of `goal` exists (the allocation's order, or in defrag
    /// mode the pageblock order its fallback needs) or the scanners meet; for whole
    /// pageblocks where a [pageblock reserve](crate::ZoneConfig::pageblock_reserve) is
    /// kept, until the block and the reserve are free in pageblocks. Deferral is by the
    /// allocation's order, as Linux's: failed huge-page compactions do not defer the
    /// compaction a small allocation runs before it would fragment.
    pub(crate) fn compact_direct(
        &self,
        pcp: CpuLists<'_, R>,
        (order, goal): (Order, Order),
        migrate: &mut impl Migrate,
    ) -> CompactStats {
        let goal = {
            let mut free = self.lock_zone();
            if free.compaction_deferred(order) {
                return CompactStats::default();
            }
            if self.cfg.pageblock_reserve && order >= self.cfg.pageblock_order {
                Goal::ClaimablePageblocks(free.pageblocks_with_reserve(order))
            } else {
                Goal::Order(goal)
            }
        };
        self.drain_reachable(pcp);
        let stats = self.reporting_compaction(CompactionKind::Direct, Some(order), || {
            self.compact_resuming(goal, u64::MAX, migrate)
        });
        let mut free = self.lock_zone();
        free.stats().compact_stall += 1;
        if stats.success {
            free.stats().compact_success += 1;
            free.compaction_succeeded(order);
        } else {
            free.stats().compact_fail += 1;
            free.defer_compaction(order);
        }
        stats
    }

    /// The migrate scanner: the first movable block at or after `from` in a pageblock below
    /// `limit` (the free scanner's), with its word. Reads without locks: a guess that the
    /// freeze by compare-and-swap confirms.
    ///
    /// With `whole` (compaction that makes whole free pageblocks) it passes over a
    /// pageblock that moving its movable blocks cannot empty: one holding an unmovable,
    /// pinned or reserved frame (Linux's async compaction skips such a pageblock at its
    /// first unmovable page).
    fn next_movable(
        &self,
        from: FrameIdx,
        limit: PageblockIdx,
        whole: bool,
    ) -> Option<(FrameIdx, Word)> {
        let m = self.map();
        let end = limit.first();
        let mut at = from;
        while at < end {
            let block = m.pageblock_range(at);
            let stop = block.end.min(end);
            if !(whole && at == block.start && !can_empty(m, block.clone())) {
                let found = m
                    .heads(at, stop)
                    .find(|&(i, w)| is_movable(w) && !m.pageblock(i).isolated);
                if found.is_some() {
                    return found;
                }
            }
            at = stop;
        }
        None
    }

    /// The free scanner: a free block of `order` taken off the buddy from the highest
    /// movable pageblock at or below `s.free` that lies above `src`'s pageblock, not a whole
    /// free pageblock, looking in `s.free` from `s.free_from` on; its head frozen-allocated.
    /// Moves the cursor down past pageblocks without one, and up to the target taken.
    fn take_target(&self, s: &mut Scanners, src: FrameIdx, order: Order) -> Option<Target> {
        let m = self.map();
        let floor = m.pageblock_index(src);
        while s.free > floor {
            let pb = m.pageblock(s.free.first());
            if pb.mt == MigrateType::Movable && !pb.isolated {
                let mut guard = self.lock_zone();
                let range = m.pageblock_range(s.free.first());
                let fits = |(i, w): (FrameIdx, Word)| {
                    (w.state() == FrameState::Buddy
                        && w.order() >= order.get()
                        && w.order() < m.cfg.pageblock_order.get())
                    .then_some(i)
                };
                let from = s.free_from.max(range.start);
                if let Some(i) = m.heads(from, range.end).find_map(fits)
                    && let Ok(zeroed) = guard.take_block_at(m, i, order)
                {
                    // The rest of that free block lies above `i`; nothing below fitted.
                    s.free_from = i;
                    return Some(Target::frozen(m, i, order, zeroed, None));
                }
            }
            let prev = m.pageblock_index(s.free.first() - 1);
            if prev <= floor {
                return None;
            }
            s.free = prev;
            s.free_from = prev.first();
        }
        None
    }

    /// Moves the block at `src` (read as `w`) to the target `dst` it was given: freezes the
    /// source, asks `migrate`, then frees the source; or undoes, the target given back as
    /// it was ([`FreeArea::put_back`]).
    pub(crate) fn move_block(
        &self,
        src: FrameIdx,
        w: Word,
        dst: Target,
        migrate: &mut impl Migrate,
    ) -> Result<(), NotMoved> {
        let m = self.map();
        let order = Order(w.order());
        let source = m.frame(src);
        if source.cas(w, w.freeze()).is_err() {
            self.lock_zone().put_back(m, dst, order);
            return Err(NotMoved::Changed);
        }
        let key = source.key();
        let job = Migration {
            key,
            from: m.pfn(src),
            to: m.pfn(dst.idx),
            order,
        };
        if !migrate.migrate(&job) {
            source.store(w);
            // The callback changed nothing (`Migrate`'s contract): the target is as it was,
            // known zero included.
            self.lock_zone().put_back(m, dst, order);
            return Err(NotMoved::Refused);
        }
        let target = m.frame(dst.idx);
        target.set_key(key);
        self.move_owner(src, dst.idx);
        target.store(w);
        let zeroed = self.debugging() && self.init_freed(src, order);
        self.lock_zone().free_one_page(m, src, order, zeroed);
        Ok(())
    }
}

/// A free block taken off the free lists for one migration: where it is, whether it was
/// known zero, and the pageblocks taking it claimed; all given back if no block moves there.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    idx: FrameIdx,
    zeroed: bool,
    claim: Option<PageblockClaim>,
}

impl Target {
    /// The target at `idx`, just taken off the free lists, its head marked a frozen movable
    /// allocation of `order` (nobody else's while the move runs).
    fn frozen(
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
        zeroed: bool,
        claim: Option<PageblockClaim>,
    ) -> Self {
        m.frame(idx)
            .store(Word::allocated_as(order.get(), MigrateType::Movable).freeze());
        Self { idx, zeroed, claim }
    }
}

impl FreeArea {
    /// A target of `order` for a movable block, taken as a movable allocation takes its
    /// block (its own type's lists, else a fallback that may claim a pageblock; in defrag
    /// mode only a whole free one), from any pageblock that is not isolated; under the zone
    /// lock.
    pub(crate) fn take_migration_target(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
    ) -> Option<Target> {
        let movable = MigrateType::Movable;
        let (idx, zeroed, claim) = match self.rmqueue_smallest(m, order, movable) {
            Some((idx, zeroed)) => (idx, zeroed, None),
            // In defrag mode as a movable allocation there: whole free pageblocks only,
            // never part of another type's pageblock (a claim by Linux's rule would turn an
            // unmovable pageblock movable with its unmovable blocks still in it).
            None => match self.rmqueue_claim(m, order, movable, m.cfg.fallback()) {
                Some((idx, zeroed, claim)) => (idx, zeroed, Some(claim)),
                None if m.cfg.defrag_mode => return None,
                None => {
                    let (idx, zeroed) = self.rmqueue_steal(m, order, movable, true)?;
                    (idx, zeroed, None)
                }
            },
        };
        Some(Target::frozen(m, idx, order, zeroed, claim))
    }

    /// Gives back a target of `order` that no block moved to: freed as it was taken (known
    /// zero if it was, so it merges back with its halves), its claim undone.
    pub(crate) fn put_back(&mut self, m: FrameMap<'_>, target: Target, order: Order) {
        self.free_one_page(m, target.idx, order, target.zeroed);
        if let Some(claim) = target.claim {
            self.unclaim_pageblocks(m, claim);
        }
    }
}

/// Proactive compaction's marks for a proactiveness (Linux's `fragmentation_score_wmark`):
/// it stops at `max(100 - p, 5)` and starts above `min(that + 10, 100)`.
#[must_use]
fn proactive_marks(proactiveness: u8) -> (u8, u8) {
    let low = 100u8.saturating_sub(proactiveness.min(100)).max(5);
    (low, low.saturating_add(10).min(100))
}

/// Why background compaction ([`Cpu::compact_work`]) ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactReason {
    /// A fallback fragmented a pageblock and boosted the watermark.
    Boost,
    /// Defrag mode: less than the high watermark's worth of memory in free pageblocks.
    DefragWatermark,
    /// The fragmentation score was above the proactiveness's high mark.
    Proactive,
}

/// What one call of background compaction ([`Cpu::compact_work`]) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactWork {
    /// Why it ran; `None` when nothing asked for it, or it was deferred.
    pub reason: Option<CompactReason>,
    /// Whether the fragmentation score asked for it but the last proactive run could not
    /// improve it: it then waits 64 calls (Linux's `proactive_defer`).
    pub deferred: bool,
    /// What compaction did (`success`: its goal was met).
    pub stats: CompactStats,
    /// Frames the embedder's reclaim callback said it freed.
    pub reclaimed: u64,
    /// The zone's fragmentation score before and after ([`FragmentationStats::score`](crate::FragmentationStats::score)).
    pub score_before: u8,
    /// See `score_before`.
    pub score_after: u8,
    /// The watermark boost left (0 once worked off).
    pub boost_left: u64,
}

/// When a compaction stops, besides its budget and its scanners meeting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Goal {
    /// A free block of this order or above exists (direct compaction, `compact_finished`).
    Order(Order),
    /// The fragmentation score is at most this (proactive compaction's low mark).
    Score(u8),
    /// At least this many frames are free in blocks of the pageblock order or above
    /// (defrag mode's watermark).
    FreePageblocks(u64),
    /// At least this many frames are free in pageblocks a fallback can claim (not a CMA
    /// reservation's): a huge page and the pageblock reserve it must leave.
    ClaimablePageblocks(u64),
    /// Only the budget ([`Cpu::compact_some`]).
    Budget,
}

impl Goal {
    /// Whether only whole free pageblocks serve it (the migrate scanner then passes over
    /// pageblocks it cannot empty).
    fn whole_pageblocks(self, m: FrameMap<'_>) -> bool {
        match self {
            Self::Order(order) => order >= m.cfg.pageblock_order,
            Self::Score(_)
            | Self::FreePageblocks(_)
            | Self::ClaimablePageblocks(_)
            | Self::Budget => true,
        }
    }

    /// Whether the free area meets it (under the zone lock).
    fn met(self, m: FrameMap<'_>, free: &FreeArea) -> bool {
        match self {
            Self::Order(order) => free.has_free(m, order),
            Self::Score(most) => free.fragmentation_score(m) <= most,
            Self::FreePageblocks(least) => free.free_in_pageblocks(m) >= least,
            Self::ClaimablePageblocks(least) => free.claimable_pageblocks(m) >= least,
            Self::Budget => false,
        }
    }
}

/// Why [`Zone::move_block`] left a block where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotMoved {
    /// The embedder's callback refused.
    Refused,
    /// The source changed (freed, referenced) before it could be frozen.
    Changed,
}

/// Whether moving the movable blocks of the pageblock `frames` could leave it wholly free:
/// every block in it is free or movable, and it is not isolated. A moment's guess without
/// locks.
fn can_empty(m: FrameMap<'_>, frames: core::ops::Range<FrameIdx>) -> bool {
    !m.pageblock(frames.start).isolated
        && m.heads(frames.start, frames.end)
            .all(|(_, w)| matches!(w.state(), FrameState::Buddy | FrameState::Pcp) || is_movable(w))
}

/// A block compaction may move: an allocated movable head with the one reference of its
/// allocation and no flags.
#[inline]
pub(crate) fn is_movable(w: Word) -> bool {
    w.state() == FrameState::Allocated
        && w.mt() == MigrateType::Movable as u8
        && w.refcount() == 1
        && w.ignoring_mt() == Word::allocated(w.order())
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Compacts the zone until a free block of `order` or above exists (Linux's
    /// `compact_zone` for a failed allocation of that order), the two scanners meet, or no
    /// target is left: drains the per-cpu lists (every CPU's, or through a
    /// [`LocalCpu`](crate::LocalCpu) this CPU's), then moves movable blocks from the bottom to
    /// free blocks at the top through `migrate`. The zone stays usable from other CPUs
    /// throughout; the zone lock is held only to take a target and to free a source.
    ///
    /// # Errors
    /// [`ContigError::OrderTooLarge`].
    pub fn compact(
        &self,
        order: Order,
        migrate: &mut impl Migrate,
    ) -> Result<CompactStats, ContigError> {
        let zone = self.zone;
        zone.check_order(order)?;
        zone.drain_reachable(self.lists());
        let mut scanners = Scanners::start(zone.map());
        Ok(
            zone.reporting_compaction(CompactionKind::Requested, Some(order), || {
                zone.compact_run(&mut scanners, Goal::Order(order), u64::MAX, migrate)
            }),
        )
    }

    /// Proactive compaction for an idle CPU, like [`Zone::zero_some`]: moves at most
    /// `budget` frames' worth of movable blocks towards the top of the zone, the scanners
    /// going on where the last call left them (from the ends again once they met). Returns
    /// what it did; `moved_pages == 0` when there is nothing left to move.
    pub fn compact_some(&self, budget: u64, migrate: &mut impl Migrate) -> CompactStats {
        let zone = self.zone;
        zone.drain_reachable(self.lists());
        zone.reporting_compaction(CompactionKind::Requested, None, || {
            zone.compact_resuming(Goal::Budget, budget, migrate)
        })
    }

    /// Background compaction, kcompactd's job, for the embedder's idle loop or a worker:
    /// works off the watermark boost that fragmenting fallbacks raised (asking `reclaim`
    /// for the boost's frames, as kswapd's boosted reclaim, then compacting until a free
    /// pageblock exists); else, in [defrag mode](crate::ZoneConfig::defrag_mode), keeps the
    /// high watermark's worth of memory in free pageblocks (reclaiming until two
    /// pageblocks above the high watermark are free, as kswapd does before it hands over to
    /// kcompactd, then compacting); else compacts proactively while the fragmentation score is above
    /// the proactiveness's high mark, down to its low mark
    /// ([`ZoneConfig::compaction_proactiveness`](crate::ZoneConfig::compaction_proactiveness)).
    /// At most `budget` frames are moved per call; the scanners go on where the last
    /// compaction stopped. Returns why it ran and what it did (`reason: None`: nothing to
    /// do).
    pub fn compact_work(
        &self,
        budget: u64,
        migrate: &mut impl Migrate,
        reclaim: &mut impl Reclaim,
    ) -> CompactWork {
        let zone = self.zone;
        zone.drain_reachable(self.lists());
        let before = zone.fragmentation();
        let cfg = zone.cfg;
        let (low_mark, high_mark) = proactive_marks(cfg.compaction_proactiveness);
        let high = before.watermarks.high;
        let reason = if before.boost > 0 {
            Some(CompactReason::Boost)
        } else if cfg.defrag_mode && before.free_in_pageblocks < high {
            Some(CompactReason::DefragWatermark)
        } else if cfg.compaction_proactiveness > 0 && before.score > high_mark {
            Some(CompactReason::Proactive)
        } else {
            None
        };
        // A score that the last proactive run could not improve waits 64 calls (Linux's
        // `proactive_defer`); a boost and defrag mode's watermark are always worked on.
        let deferred =
            reason == Some(CompactReason::Proactive) && zone.lock_zone().background_deferred();
        let (Some(reason), false) = (reason, deferred) else {
            return CompactWork {
                reason: None,
                deferred,
                score_before: before.score,
                score_after: before.score,
                ..CompactWork::default()
            };
        };
        let (want, goal) = match reason {
            CompactReason::Boost => (before.boost, Goal::Order(cfg.pageblock_order)),
            // kswapd in defrag mode reclaims until compaction can succeed at the pageblock
            // order (`compaction_suitable`: two pageblocks above the watermark free).
            CompactReason::DefragWatermark => (
                (high + (2u64 << cfg.pageblock_order.get())).saturating_sub(before.free),
                Goal::FreePageblocks(high),
            ),
            CompactReason::Proactive => (0, Goal::Score(low_mark)),
        };
        let reclaimed = if want > 0 { reclaim.reclaim(want) } else { 0 };
        if reclaimed > 0 {
            zone.drain_reachable(self.lists());
        }
        let order = match goal {
            Goal::Order(order) => Some(order),
            _ => None,
        };
        let stats = zone.reporting_compaction(CompactionKind::Requested, order, || {
            zone.compact_resuming(goal, budget, migrate)
        });
        let after = zone.fragmentation();
        let mut free = zone.lock_zone();
        match reason {
            CompactReason::Boost if stats.success || stats.moved_pages < budget => {
                free.clear_boost();
            }
            CompactReason::Proactive
                if !stats.success
                    && after.score >= before.score
                    && after.free_in_pageblocks <= before.free_in_pageblocks =>
            {
                free.defer_background();
            }
            _ => {}
        }
        let boost_left = free.boost();
        drop(free);
        CompactWork {
            reason: Some(reason),
            deferred: false,
            stats,
            reclaimed,
            score_before: before.score,
            score_after: after.score,
            boost_left,
        }
    }
}
