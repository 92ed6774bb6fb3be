//! Intrusive doubly linked lists of block heads, threaded through their frames by index, so
//! that removing a buddy from the middle of a free list is O(1). A list and the links of the
//! frames on it belong to one lock (a per-cpu list's, or the zone's).

use crate::frame::Frame;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct List {
    head: Option<u32>,
    tail: Option<u32>,
    len: u32,
}

impl List {
    pub(crate) const EMPTY: Self = Self {
        head: None,
        tail: None,
        len: 0,
    };

    #[inline]
    pub(crate) const fn len(&self) -> u32 {
        self.len
    }

    #[inline]
    pub(crate) const fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) const fn head(&self) -> Option<u32> {
        self.head
    }

    #[inline]
    pub(crate) const fn tail(&self) -> Option<u32> {
        self.tail
    }

    /// Adds `idx` at the front (most recently freed: handed out first, still cache-hot).
    #[inline]
    pub(crate) fn push_front(&mut self, frames: &[Frame], idx: u32) {
        let f = &frames[idx as usize];
        f.set_prev(None);
        f.set_next(self.head);
        match self.head {
            None => self.tail = Some(idx),
            Some(h) => frames[h as usize].set_prev(Some(idx)),
        }
        self.head = Some(idx);
        self.len += 1;
    }

    /// Unlinks `idx`, which must be on this list. O(1).
    #[inline]
    pub(crate) fn remove(&mut self, frames: &[Frame], idx: u32) {
        let f = &frames[idx as usize];
        let (prev, next) = (f.prev(), f.next());
        match prev {
            None => self.head = next,
            Some(p) => frames[p as usize].set_next(next),
        }
        match next {
            None => self.tail = prev,
            Some(n) => frames[n as usize].set_prev(prev),
        }
        f.set_prev(None);
        f.set_next(None);
        self.len -= 1;
    }

    #[inline]
    pub(crate) fn pop_front(&mut self, frames: &[Frame]) -> Option<u32> {
        let idx = self.head?;
        self.remove(frames, idx);
        Some(idx)
    }

    /// Removes the oldest entry (what a drain returns to the buddy first).
    #[inline]
    pub(crate) fn pop_back(&mut self, frames: &[Frame]) -> Option<u32> {
        let idx = self.tail?;
        self.remove(frames, idx);
        Some(idx)
    }
}
