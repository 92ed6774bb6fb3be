//! One per-cpu list: the most recently freed blocks in a small array on top (an allocation
//! pops one, a free pushes one, and neither touches another frame's links), the rest in a
//! linked list of frames below it, known-zero blocks at its back.
//!
//! Linux keeps its per-cpu lists linked through `struct page` alone; a block freed and
//! allocated again at once (a page-table page, a task stack) then writes the links of the
//! list's old head as well as its own. The array holds such blocks by index in the CPU's own
//! cache lines, so the common pair costs an array push and pop.

use crate::types::FrameIdx;
use crate::zone::list::List;
use crate::zone::map::Frames;

/// Blocks each per-cpu list keeps in its array: the pages a burst of page-table or stack
/// allocations frees and takes again. More go on the linked list. A power of two (the
/// array is a ring).
pub(crate) const HOT_BLOCKS: usize = 32;

const HOT_MASK: u32 = HOT_BLOCKS as u32 - 1;
const _: () = assert!(HOT_BLOCKS.is_power_of_two() && HOT_BLOCKS <= u32::MAX as usize);

/// A per-cpu list: the array of recently freed blocks not known zero, then the linked list.
/// Taking from the front takes the array's newest block first; taking from the back takes
/// the linked list's back first (its known-zero and oldest blocks), then the array's oldest.
#[derive(Clone, Copy)]
pub(crate) struct PcpList {
    /// A ring: `hot_len` blocks from `hot[hot_head]`, oldest first.
    hot: [FrameIdx; HOT_BLOCKS],
    hot_head: u32,
    hot_len: u32,
    cold: List,
}

impl PcpList {
    pub(crate) const EMPTY: Self = Self {
        hot: [FrameIdx(0); HOT_BLOCKS],
        hot_head: 0,
        hot_len: 0,
        cold: List::EMPTY,
    };

    /// Blocks on the list.
    #[inline]
    pub(crate) const fn len(&self) -> u32 {
        self.hot_len + self.cold.len()
    }

    #[inline]
    pub(crate) const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k`th block of the array, oldest first.
    #[inline(always)]
    fn hot_at(&self, k: u32) -> FrameIdx {
        self.hot[(self.hot_head.wrapping_add(k) & HOT_MASK) as usize]
    }

    /// The blocks in the array, oldest first.
    pub(crate) fn hot(&self) -> impl Iterator<Item = FrameIdx> + '_ {
        (0..self.hot_len).map(|k| self.hot_at(k))
    }

    /// The linked part.
    pub(crate) const fn cold(&self) -> &List {
        &self.cold
    }

    /// Every block on the list, front to back (read under the list's lock).
    pub(crate) fn blocks<'a>(&'a self, frames: Frames<'a>) -> impl Iterator<Item = FrameIdx> + 'a {
        (0..self.hot_len)
            .rev()
            .map(|k| self.hot_at(k))
            .chain(self.cold.blocks(frames))
    }

    /// Adds the free block `idx`: a block not known zero to the array while it has room,
    /// else to the linked list where its knowledge puts it ([`List::push`]).
    #[inline(always)]
    pub(crate) fn push(&mut self, frames: Frames<'_>, idx: FrameIdx, zeroed: bool) {
        if !zeroed && self.hot_len < HOT_BLOCKS as u32 {
            let at = self.hot_head.wrapping_add(self.hot_len) & HOT_MASK;
            self.hot[at as usize] = idx;
            self.hot_len += 1;
        } else {
            self.cold.push(frames, idx, zeroed);
        }
    }

    /// Takes the array's newest block, if it has one.
    #[inline(always)]
    pub(crate) fn pop_hot(&mut self) -> Option<FrameIdx> {
        self.hot_len = self.hot_len.checked_sub(1)?;
        Some(self.hot_at(self.hot_len))
    }

    /// Takes the most recently freed block: the array's newest, else the linked list's
    /// front.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self, frames: Frames<'_>) -> Option<FrameIdx> {
        self.pop_hot().or_else(|| self.cold.pop_front(frames))
    }

    /// The block [`PcpList::pop_back`] takes, without taking it.
    #[inline]
    pub(crate) fn back(&self) -> Option<FrameIdx> {
        match self.cold.tail() {
            Some(idx) => Some(idx),
            None => (self.hot_len > 0).then(|| self.hot_at(0)),
        }
    }

    /// Takes the oldest block (what a drain returns first, and where known-zero blocks
    /// are): the linked list's back, else the array's oldest (so that a drain returns pages
    /// in the order they were freed, and pages freed in ascending order go back to the
    /// buddy as runs).
    #[inline]
    pub(crate) fn pop_back(&mut self, frames: Frames<'_>) -> Option<FrameIdx> {
        if !self.cold.is_empty() {
            return self.cold.pop_back(frames);
        }
        self.hot_len = self.hot_len.checked_sub(1)?;
        let oldest = self.hot[self.hot_head as usize];
        self.hot_head = self.hot_head.wrapping_add(1) & HOT_MASK;
        Some(oldest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use std::vec::Vec;

    fn frames(n: usize) -> Vec<Frame> {
        (0..n).map(|_| Frame::new()).collect()
    }

    #[allow(unsafe_code)]
    fn map(f: &[Frame]) -> Frames<'_> {
        // SAFETY: the pointer comes from a shared reference to the slice.
        unsafe { Frames::from_slice_ptr(f) }
    }

    #[test]
    fn the_array_fills_first_then_the_linked_list_takes_the_rest() {
        let f = frames(HOT_BLOCKS + 8);
        let frames = map(&f);
        let mut l = PcpList::EMPTY;
        for i in 0..HOT_BLOCKS as u32 + 4 {
            l.push(frames, FrameIdx(i), false);
        }
        assert_eq!(l.hot().count(), HOT_BLOCKS);
        assert_eq!(l.cold().len(), 4);
        assert_eq!(l.len(), HOT_BLOCKS as u32 + 4);
        // A known-zero block goes to the linked list's back even with room in the array.
        let mut z = PcpList::EMPTY;
        z.push(frames, FrameIdx(39), true);
        assert_eq!((z.hot().count(), z.cold().len()), (0, 1));
        assert_eq!(z.back(), Some(FrameIdx(39)));
        // Front: the array, last freed first; then the linked list's front.
        let front: Vec<u32> = l.blocks(frames).map(|i| i.0).collect();
        let mut taken = Vec::new();
        while let Some(i) = l.pop_front(frames) {
            taken.push(i.0);
        }
        assert_eq!(taken, front);
        assert_eq!(taken[0], HOT_BLOCKS as u32 - 1);
        assert_eq!(taken[HOT_BLOCKS], HOT_BLOCKS as u32 + 3);
        assert!(l.is_empty());
    }

    #[test]
    fn the_back_is_the_linked_lists_back_then_the_array() {
        let f = frames(HOT_BLOCKS + 8);
        let frames = map(&f);
        let mut l = PcpList::EMPTY;
        for i in 0..HOT_BLOCKS as u32 + 2 {
            l.push(frames, FrameIdx(i), false);
        }
        let mut taken = Vec::new();
        while let Some(back) = l.back() {
            assert_eq!(l.pop_back(frames), Some(back));
            taken.push(back.0);
        }
        // The linked list's back (its oldest, the first pushed there), then the array from
        // its first (oldest) up.
        assert_eq!(
            &taken[..4],
            &[HOT_BLOCKS as u32, HOT_BLOCKS as u32 + 1, 0, 1]
        );
        assert_eq!(taken.len(), HOT_BLOCKS + 2);
        assert_eq!(taken[HOT_BLOCKS + 1], HOT_BLOCKS as u32 - 1);
        assert_eq!(l.pop_back(frames), None);
    }
}
