//! The buddy: free lists per order under the zone lock, merging on free
//! (`__free_one_page`) and splitting on allocation (`__rmqueue_smallest`).
//!
//! Each list keeps the blocks known zero at its back and the others at its front: a plain
//! allocation takes the front (so zeroed blocks are not spent on callers that overwrite them),
//! a zeroed allocation the back, and background zeroing finds a block to clear at a front.

use crate::counters::LockStats;
use crate::deferred::{AddedRanges, DeferredRanges};
use crate::frame::{FrameState, Word};
use crate::list::{FreeCount, List};
use crate::map::FrameMap;
use crate::{BuddyError, MAX_SUPPORTED_ORDER, Order};

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
    pub(crate) lists: [List; MAX_SUPPORTED_ORDER as usize + 1],
    /// Frames free in the buddy, and of those in blocks known zero.
    pub(crate) count: FreeCount,
    /// Usable frames initialized: every range added, holes and deferred frames excluded.
    pub(crate) present: u64,
    /// The ranges added, for the overlap check of `add_memory`.
    pub(crate) added: AddedRanges,
    /// Ranges added whose frames are not initialized yet.
    pub(crate) deferred: DeferredRanges,
    pub(crate) stats: LockStats,
}

impl FreeArea {
    pub(crate) const EMPTY: Self = Self {
        lists: [List::EMPTY; MAX_SUPPORTED_ORDER as usize + 1],
        count: FreeCount::NONE,
        present: 0,
        added: AddedRanges::EMPTY,
        deferred: DeferredRanges::EMPTY,
        stats: LockStats::ZERO,
    };

    #[inline]
    fn insert(&mut self, m: FrameMap<'_>, idx: u32, order: Order, zeroed: bool) {
        m.frame(idx)
            .store(Word::free(FrameState::Buddy, order.get(), zeroed));
        self.lists[order.get() as usize].push(m.frames, idx, zeroed);
        self.count.add(order, zeroed);
        self.stats.list_ops += 1;
    }

    /// Unlinks the free block at `idx`; returns whether it was known zero. The caller owns
    /// it (its head reads as a tail until the caller stores another word).
    #[inline]
    pub(crate) fn remove(&mut self, m: FrameMap<'_>, idx: u32, order: Order) -> bool {
        let zeroed = m.frame(idx).load().zeroed();
        self.lists[order.get() as usize].remove(m.frames, idx);
        m.frame(idx).store(Word::TAIL);
        self.count.sub(order, zeroed);
        self.stats.list_ops += 1;
        zeroed
    }

    /// `__free_one_page`: frees the block at `idx`, which the caller owns and whose other
    /// frames are tails, merging it with free buddies of the same order up to MAX_ORDER.
    /// A buddy that is reserved, allocated, being zeroed, on a per-cpu list, or of other
    /// knowledge (known zero where this block is not, or the reverse) stops the merge: a
    /// merged block is known zero exactly when both halves were.
    #[inline]
    pub(crate) fn free_one_page(
        &mut self,
        m: FrameMap<'_>,
        mut idx: u32,
        mut order: Order,
        zeroed: bool,
    ) {
        while order < m.cfg.max_order {
            let Some(b) = m.buddy(idx, order) else { break };
            // Only a buddy of the same knowledge: a freed block does not make its zeroed
            // buddy unknown (the slow path's `merge_mixed` merges those pairs).
            if m.frame(b).load() != Word::free(FrameState::Buddy, order.get(), zeroed) {
                break;
            }
            self.remove(m, b, order);
            m.frame(idx).store(Word::TAIL);
            idx = idx.min(b);
            order = order.up();
        }
        self.insert(m, idx, order, zeroed);
    }

    /// `__rmqueue_smallest`: takes the smallest free block of at least `order`, split down,
    /// the front of its list (one not known zero if the order has any); the upper halves go
    /// back to the free lists (known zero if the block was). Returns the block, which the
    /// caller owns, and whether it is known zero.
    #[inline]
    pub(crate) fn rmqueue_smallest(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
    ) -> Option<(u32, bool)> {
        let o =
            (order.get()..=m.cfg.max_order.get()).find(|&o| !self.lists[o as usize].is_empty())?;
        let idx = self.lists[o as usize].head()?;
        Some((idx, self.take_split(m, idx, Order(o), order)))
    }

    /// Takes the smallest block known zero of at least `order`, split down (the halves stay
    /// known zero), or `None` if the buddy has none.
    #[inline]
    pub(crate) fn rmqueue_zeroed(&mut self, m: FrameMap<'_>, order: Order) -> Option<u32> {
        let (o, idx) = (order.get()..=m.cfg.max_order.get()).find_map(|o| {
            let tail = self.lists[o as usize].tail()?;
            m.frame(tail).load().zeroed().then_some((o, tail))
        })?;
        self.take_split(m, idx, Order(o), order);
        Some(idx)
    }

    /// A block `prefer` would rather have: see [`Prefer`].
    #[inline]
    pub(crate) fn rmqueue(
        &mut self,
        m: FrameMap<'_>,
        order: Order,
        prefer: Prefer,
    ) -> Option<(u32, bool)> {
        if prefer == Prefer::Zeroed
            && let Some(idx) = self.rmqueue_zeroed(m, order)
        {
            return Some((idx, true));
        }
        self.rmqueue_smallest(m, order)
    }

    /// Removes the free block `[idx, idx + 2^from)` and returns its upper halves down to
    /// `order` to the lists; returns whether it was known zero.
    #[inline]
    pub(crate) fn take_split(
        &mut self,
        m: FrameMap<'_>,
        idx: u32,
        from: Order,
        order: Order,
    ) -> bool {
        let zeroed = self.remove(m, idx, from);
        for lower in (order.get()..from.get()).rev() {
            self.insert(m, idx + (1u32 << lower), Order(lower), zeroed);
        }
        zeroed
    }

    /// Takes the block `[idx, idx + 2^order)` if it lies wholly inside one free buddy block,
    /// halving that block around it and returning the other halves (known zero if it was).
    /// Returns whether the block is known zero.
    pub(crate) fn take_block_at(
        &mut self,
        m: FrameMap<'_>,
        idx: u32,
        order: Order,
    ) -> Result<bool, BuddyError> {
        let not_free = BuddyError::NotInBuddy(m.pfn(idx));
        let (head, w) = m.block_head(idx).ok_or(not_free)?;
        if w.state() != FrameState::Buddy || w.order() < order.get() {
            return Err(not_free);
        }
        let zeroed = self.remove(m, head, Order(w.order()));
        let (mut base, mut o) = (head, w.order());
        while o > order.get() {
            o -= 1;
            let half = 1u32 << o;
            if idx >= base + half {
                self.insert(m, base, Order(o), zeroed);
                base += half;
            } else {
                self.insert(m, base + half, Order(o), zeroed);
            }
        }
        Ok(zeroed)
    }
}
