//! The buddy: free lists per order under the zone lock, merging on free
//! (`__free_one_page`) and splitting on allocation (`__rmqueue_smallest`).

use crate::counters::LockStats;
use crate::frame::{FrameState, Word};
use crate::list::List;
use crate::map::FrameMap;
use crate::{BuddyError, MAX_SUPPORTED_ORDER, Order};

/// Everything the zone lock protects.
pub(crate) struct FreeArea {
    pub(crate) lists: [List; MAX_SUPPORTED_ORDER as usize + 1],
    /// Frames free in the buddy.
    pub(crate) pages: u64,
    /// Usable frames: every range added, holes excluded.
    pub(crate) present: u64,
    pub(crate) stats: LockStats,
}

impl FreeArea {
    pub(crate) const EMPTY: Self = Self {
        lists: [List::EMPTY; MAX_SUPPORTED_ORDER as usize + 1],
        pages: 0,
        present: 0,
        stats: LockStats::ZERO,
    };

    #[inline]
    fn insert(&mut self, m: FrameMap<'_>, idx: u32, order: Order) {
        m.frame(idx)
            .store(Word::new(FrameState::Buddy, order.get()));
        self.lists[order.get() as usize].push_front(m.frames, idx);
        self.pages += order.pages();
        self.stats.list_ops += 1;
    }

    #[inline]
    fn remove(&mut self, m: FrameMap<'_>, idx: u32, order: Order) {
        self.lists[order.get() as usize].remove(m.frames, idx);
        m.frame(idx).store(Word::TAIL);
        self.pages -= order.pages();
        self.stats.list_ops += 1;
    }

    /// `__free_one_page`: frees the block at `idx`, which the caller owns and whose other
    /// frames are tails, merging it with free buddies of the same order up to MAX_ORDER.
    /// A buddy that is reserved, allocated or on a per-cpu list stops the merge.
    #[inline]
    pub(crate) fn free_one_page(&mut self, m: FrameMap<'_>, mut idx: u32, mut order: Order) {
        while order < m.cfg.max_order {
            let Some(b) = m.buddy(idx, order) else { break };
            if m.frame(b).load() != Word::new(FrameState::Buddy, order.get()) {
                break;
            }
            self.remove(m, b, order);
            m.frame(idx).store(Word::TAIL);
            idx = idx.min(b);
            order = order.up();
        }
        self.insert(m, idx, order);
    }

    /// `__rmqueue_smallest`: takes the smallest free block of at least `order`, split down;
    /// the upper halves go back to the free lists. The caller owns the block it returns.
    #[inline]
    pub(crate) fn rmqueue_smallest(&mut self, m: FrameMap<'_>, order: Order) -> Option<u32> {
        let o =
            (order.get()..=m.cfg.max_order.get()).find(|&o| !self.lists[o as usize].is_empty())?;
        let idx = self.lists[o as usize].head()?;
        self.remove(m, idx, Order(o));
        for lower in (order.get()..o).rev() {
            self.insert(m, idx + (1u32 << lower), Order(lower));
        }
        Some(idx)
    }

    /// Takes the block `[idx, idx + 2^order)` if it lies wholly inside one free buddy block,
    /// halving that block around it and returning the other halves.
    pub(crate) fn take_block_at(
        &mut self,
        m: FrameMap<'_>,
        idx: u32,
        order: Order,
    ) -> Result<(), BuddyError> {
        let not_free = BuddyError::NotInBuddy(m.pfn(idx));
        let (head, w) = m.block_head(idx).ok_or(not_free)?;
        if w.state() != FrameState::Buddy || w.order() < order.get() {
            return Err(not_free);
        }
        self.remove(m, head, Order(w.order()));
        let (mut base, mut o) = (head, w.order());
        while o > order.get() {
            o -= 1;
            let half = 1u32 << o;
            if idx >= base + half {
                self.insert(m, base, Order(o));
                base += half;
            } else {
                self.insert(m, base + half, Order(o));
            }
        }
        Ok(())
    }
}
