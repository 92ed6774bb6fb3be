//! Intrusive doubly linked lists of block heads, threaded through their frames by index, so
//! that removing a buddy from the middle of a free list is O(1). A list and the links of the
//! frames on it belong to one lock (a per-cpu list's, or the zone's).

use crate::types::{FrameIdx, Order};
use crate::zone::map::Frames;

/// Frames in the blocks on a set of free lists, and of those the frames in blocks known zero:
/// what the zone lock and each per-cpu lock count for their lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FreeCount {
    pub(crate) pages: u64,
    pub(crate) zeroed: u64,
}

impl FreeCount {
    pub(crate) const NONE: Self = Self {
        pages: 0,
        zeroed: 0,
    };

    /// A block of `order` joined the lists.
    #[inline]
    pub(crate) fn add(&mut self, order: Order, zeroed: bool) {
        self.add_blocks(order, 1, zeroed);
    }

    /// `n` blocks of `order` joined the lists.
    #[inline]
    pub(crate) fn add_blocks(&mut self, order: Order, n: u64, zeroed: bool) {
        self.pages += n * order.pages();
        if zeroed {
            self.zeroed += n * order.pages();
        }
    }

    /// A block of `order` left the lists.
    #[inline]
    pub(crate) fn sub(&mut self, order: Order, zeroed: bool) {
        self.sub_blocks(order, 1, zeroed);
    }

    /// `n` blocks of `order` left the lists.
    #[inline]
    pub(crate) fn sub_blocks(&mut self, order: Order, n: u64, zeroed: bool) {
        self.pages -= n * order.pages();
        if zeroed {
            self.zeroed -= n * order.pages();
        }
    }
}

/// A list's ends are stored as the frames' links are: index + 1, 0 for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl List {
    pub(crate) const EMPTY: Self = Self {
        head: 0,
        tail: 0,
        len: 0,
    };

    /// The block heads on the list, front to back (read under the list's lock, unchanged
    /// while iterating).
    pub(crate) fn blocks<'a>(&self, frames: Frames<'a>) -> impl Iterator<Item = FrameIdx> + 'a {
        let mut at = self.head();
        core::iter::from_fn(move || {
            let idx = at?;
            at = frames.at(idx.get()).next();
            Some(idx)
        })
    }

    #[inline]
    pub(crate) const fn len(&self) -> u32 {
        self.len
    }

    #[inline]
    pub(crate) const fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) const fn head(&self) -> Option<FrameIdx> {
        match self.head.checked_sub(1) {
            Some(i) => Some(FrameIdx(i)),
            None => None,
        }
    }

    #[inline]
    pub(crate) const fn tail(&self) -> Option<FrameIdx> {
        match self.tail.checked_sub(1) {
            Some(i) => Some(FrameIdx(i)),
            None => None,
        }
    }

    /// Adds `idx` at the front (most recently freed: handed out first, still cache-hot).
    #[inline]
    fn push_front(&mut self, frames: Frames<'_>, idx: FrameIdx) {
        let link = idx.0 + 1;
        let f = frames.at(idx.get());
        f.set_prev_raw(0);
        f.set_next_raw(self.head);
        match self.head {
            0 => self.tail = link,
            h => frames.at(h as usize - 1).set_prev_raw(link),
        }
        self.head = link;
        self.len += 1;
    }

    /// Adds the free block `idx` where its knowledge puts it: known zero at the back (plain
    /// allocations, which take the front, reach it last; zeroed allocations take it from
    /// there), else at the front. Every list keeps its known-zero blocks behind the others.
    #[inline]
    pub(crate) fn push(&mut self, frames: Frames<'_>, idx: FrameIdx, zeroed: bool) {
        if zeroed {
            self.push_back(frames, idx);
        } else {
            self.push_front(frames, idx);
        }
    }

    /// Adds `idx`, a block not known zero, behind every other such block: just before the
    /// known-zero blocks at the list's back (a reported block, allocated after the others).
    pub(crate) fn push_before_zeroed(&mut self, frames: Frames<'_>, idx: FrameIdx) {
        let mut first_zeroed = None;
        let mut at = self.tail();
        while let Some(i) = at {
            let f = frames.at(i.get());
            if !f.load().zeroed() {
                break;
            }
            first_zeroed = Some(i);
            at = f.prev();
        }
        let Some(next) = first_zeroed else {
            self.push_back(frames, idx);
            return;
        };
        let link = idx.0 + 1;
        let n = frames.at(next.get());
        let prev = n.prev_raw();
        let f = frames.at(idx.get());
        f.set_prev_raw(prev);
        f.set_next_raw(next.0 + 1);
        match prev {
            0 => self.head = link,
            p => frames.at(p as usize - 1).set_next_raw(link),
        }
        n.set_prev_raw(link);
        self.len += 1;
    }

    /// Adds `idx` at the back.
    #[inline]
    pub(crate) fn push_back(&mut self, frames: Frames<'_>, idx: FrameIdx) {
        let link = idx.0 + 1;
        let f = frames.at(idx.get());
        f.set_next_raw(0);
        f.set_prev_raw(self.tail);
        match self.tail {
            0 => self.head = link,
            t => frames.at(t as usize - 1).set_next_raw(link),
        }
        self.tail = link;
        self.len += 1;
    }

    /// Unlinks `idx`, which must be on this list. O(1).
    #[inline]
    pub(crate) fn remove(&mut self, frames: Frames<'_>, idx: FrameIdx) {
        let f = frames.at(idx.get());
        let (prev, next) = (f.prev_raw(), f.next_raw());
        match prev {
            0 => self.head = next,
            p => frames.at(p as usize - 1).set_next_raw(next),
        }
        match next {
            0 => self.tail = prev,
            n => frames.at(n as usize - 1).set_prev_raw(prev),
        }
        f.set_prev_raw(0);
        f.set_next_raw(0);
        self.len -= 1;
    }

    #[inline]
    pub(crate) fn pop_front(&mut self, frames: Frames<'_>) -> Option<FrameIdx> {
        let idx = self.head()?;
        self.remove(frames, idx);
        Some(idx)
    }

    /// Removes the oldest entry (what a drain returns to the buddy first).
    #[inline]
    pub(crate) fn pop_back(&mut self, frames: Frames<'_>) -> Option<FrameIdx> {
        let idx = self.tail()?;
        self.remove(frames, idx);
        Some(idx)
    }

    /// Removes the back block and, linked in front of it, the blocks that continue a run
    /// with it, at most `max` blocks in all (at least the back): a run's blocks have one
    /// `kind` (an order and whether known zero) and lie at consecutive frames, each block
    /// of order `o` just past the one before it or each just before it (the second block
    /// sets which: blocks freed in ascending order and pushed at the front come off the
    /// back ascending). Returns the run's lowest block, its length in blocks and its kind.
    ///
    /// The list is relinked once for the whole run, and the links of every block taken
    /// are cleared, as [`List::remove`] clears them.
    #[inline]
    pub(crate) fn pop_back_run(
        &mut self,
        frames: Frames<'_>,
        max: u32,
        kind: impl Fn(FrameIdx) -> (Order, bool),
    ) -> Option<(FrameIdx, u32, (Order, bool))> {
        let back = self.tail()?;
        let first = kind(back);
        // Takes block `idx` off the list (but for its neighbours' links, relinked once at
        // the end): returns its front neighbour's link.
        let take = |idx: u32| {
            let f = frames.at(idx as usize);
            let link = f.prev_raw();
            f.set_prev_raw(0);
            f.set_next_raw(0);
            link
        };
        let mut link = take(back.0);
        let (mut last, mut n) = (back.0, 1u32);
        // The second block, `step` frames past the back or before it, sets the run's
        // direction; each further one continues it.
        if max > 1 && link != 0 {
            let delta = i64::from(link - 1) - i64::from(back.0);
            // (An order past 62 is no block's: its step is no distance between two.)
            if delta.abs() == 1i64 << (first.0.get() & 63) {
                while n < max && link != 0 {
                    let idx = link - 1;
                    if i64::from(idx) - i64::from(last) != delta || kind(FrameIdx(idx)) != first {
                        break;
                    }
                    link = take(idx);
                    last = idx;
                    n += 1;
                }
            }
        }
        // The run's lowest block: the back, or the last taken where it descends.
        let lo = last.min(back.0);
        // `link` is the list's new back, or 0 for none.
        self.tail = link;
        match link {
            0 => self.head = 0,
            l => frames.at(l as usize - 1).set_next_raw(0),
        }
        self.len -= n;
        Some((FrameIdx(lo), n, first))
    }
}
