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
use crate::frame::{Frame, FrameState, Word};
use crate::migrate::{Migrate, Migration};
use crate::migratetype::MigrateType;
use crate::types::{FrameIdx, Order, PageblockIdx};
use crate::zone::Zone;
use crate::zone::buddy::{FreeArea, Scanners};
use crate::zone::cpu::{Access, Cpu};
use crate::zone::map::FrameMap;
use crate::zone::pageblock::PageblockClaim;
use crate::zone::pcp::PerCpu;
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
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
    R: RawMutex,
{
    /// The scanners' loop: until `target` is met, `budget` frames moved, or they meet.
    fn compact_run(
        &self,
        s: &mut Scanners,
        target: Option<Order>,
        budget: u64,
        migrate: &mut impl Migrate,
    ) -> CompactStats {
        let m = self.map();
        let mut stats = CompactStats::default();
        loop {
            if let Some(order) = target
                && self.lock_zone().has_free(m, order)
            {
                stats.success = true;
                break;
            }
            if stats.moved_pages >= budget {
                break;
            }
            let Some((src, w)) = self.next_movable(s.migrate, s.free) else {
                break;
            };
            let order = Order(w.order());
            s.migrate = src + order.pages() as u32;
            if order >= m.cfg.pageblock_order {
                // As large as what compaction makes: left where it is.
                continue;
            }
            let Some(dst) = self.take_target(&mut s.free, src, order) else {
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

    /// The migrate scanner: the first movable block at or after `from` in a pageblock below
    /// `limit` (the free scanner's), with its word. Reads without locks: a guess that the
    /// freeze by compare-and-swap confirms.
    fn next_movable(&self, from: FrameIdx, limit: PageblockIdx) -> Option<(FrameIdx, Word)> {
        let m = self.map();
        m.heads(from, limit.first())
            .find(|&(i, w)| is_movable(w) && !m.pageblock(i).isolated)
    }

    /// The free scanner: a free block of `order` taken off the buddy from the highest
    /// movable pageblock at or below `*free` that lies above `src`'s pageblock, not a whole
    /// free pageblock; its head frozen-allocated. Moves `*free` down past pageblocks without
    /// one.
    fn take_target(&self, free: &mut PageblockIdx, src: FrameIdx, order: Order) -> Option<Target> {
        let m = self.map();
        let floor = m.pageblock_index(src);
        while *free > floor {
            let pb = m.pageblock(free.first());
            if pb.mt == MigrateType::Movable && !pb.isolated {
                let mut guard = self.lock_zone();
                let range = m.pageblock_range(free.first());
                let fits = |(i, w): (FrameIdx, Word)| {
                    (w.state() == FrameState::Buddy
                        && w.order() >= order.get()
                        && w.order() < m.cfg.pageblock_order.get())
                    .then_some(i)
                };
                if let Some(i) = m.heads(range.start, range.end).find_map(fits)
                    && let Ok(zeroed) = guard.take_block_at(m, i, order)
                {
                    return Some(Target::frozen(m, i, order, zeroed, None));
                }
            }
            let prev = m.pageblock_index(free.first() - 1);
            if prev <= floor {
                return None;
            }
            *free = prev;
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
        target.store(w);
        self.lock_zone().free_one_page(m, src, order, false);
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
    /// block (its own type's lists, else a fallback that may claim a pageblock), from any
    /// pageblock that is not isolated; under the zone lock.
    pub(crate) fn take_migration_target(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
    ) -> Option<Target> {
        let movable = MigrateType::Movable;
        let (idx, zeroed, claim) = match self.rmqueue_smallest(m, order, movable) {
            Some((idx, zeroed)) => (idx, zeroed, None),
            None => self.rmqueue_fallback_claiming(m, order, movable)?,
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

/// Why [`Zone::move_block`] left a block where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotMoved {
    /// The embedder's callback refused.
    Refused,
    /// The source changed (freed, referenced) before it could be frozen.
    Changed,
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

impl<F, P, R, A> Cpu<'_, F, P, R, A>
where
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
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
        Ok(zone.compact_run(&mut scanners, Some(order), u64::MAX, migrate))
    }

    /// Proactive compaction for an idle CPU, like [`Zone::zero_some`]: moves at most
    /// `budget` frames' worth of movable blocks towards the top of the zone, the scanners
    /// going on where the last call left them (from the ends again once they met). Returns
    /// what it did; `moved_pages == 0` when there is nothing left to move.
    pub fn compact_some(&self, budget: u64, migrate: &mut impl Migrate) -> CompactStats {
        let zone = self.zone;
        zone.drain_reachable(self.lists());
        let m = zone.map();
        let mut scanners = zone
            .lock_zone()
            .scanners()
            .unwrap_or_else(|| Scanners::start(m));
        let stats = zone.compact_run(&mut scanners, None, budget, migrate);
        // Met (or nothing to do): start from the ends next time.
        let done = stats.moved_pages < budget;
        zone.lock_zone().set_scanners((!done).then_some(scanners));
        stats
    }
}
