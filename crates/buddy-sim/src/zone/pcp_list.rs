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
/// allocations frees and takes again. More go on the linked list.
pub(crate) const HOT_BLOCKS: usize = 32;

/// A per-cpu list: the array of recently freed blocks not known zero, then the linked list.
/// Taking from the front takes the array's last block first; taking from the back takes
/// the linked list's back first (its known-zero and oldest blocks).
#[derive(Clone, Copy)]
pub(crate) struct PcpList {
    /// `hot[..hot_len]`, the last one freed last.
    hot: [FrameIdx; HOT_BLOCKS],
    hot_len: u32,
    cold: List,
}

impl PcpList {
    pub(crate) const EMPTY: Self = Self {
        hot: [FrameIdx(0); HOT_BLOCKS],
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

    /// The blocks in the array, the last freed last.
    #[inline]
    pub(crate) fn hot(&self) -> &[FrameIdx] {
        &self.hot[..self.hot_len as usize]
    }

    /// The linked part.
    pub(crate) const fn cold(&self) -> &List {
        &self.cold
    }

    /// Every block on the list, front to back (read under the list's lock).
    pub(crate) fn blocks<'a>(&'a self, frames: Frames<'a>) -> impl Iterator<Item = FrameIdx> + 'a {
        self.hot()
            .iter()
            .rev()
            .copied()
            .chain(self.cold.blocks(frames))
    }

    /// Adds the free block `idx`: a block not known zero to the array while it has room,
    /// else to the linked list where its knowledge puts it ([`List::push`]).
    #[inline(always)]
    pub(crate) fn push(&mut self, frames: Frames<'_>, idx: FrameIdx, zeroed: bool) {
        let n = self.hot_len as usize;
        if !zeroed && n < HOT_BLOCKS {
            self.hot[n] = idx;
            self.hot_len += 1;
        } else {
            self.cold.push(frames, idx, zeroed);
        }
    }

    /// Takes the array's last block, if it has one.
    #[inline(always)]
    pub(crate) fn pop_hot(&mut self) -> Option<FrameIdx> {
        let n = self.hot_len.checked_sub(1)?;
        self.hot_len = n;
        Some(self.hot[n as usize])
    }

    /// Takes the most recently freed block of the array that `wanted` accepts (an aligned
    /// one), if any: the blocks above it move down, keeping the array's order. At most
    /// [`HOT_BLOCKS`] looks, none at another frame.
    #[inline]
    pub(crate) fn take_hot_where(&mut self, wanted: impl Fn(FrameIdx) -> bool) -> Option<FrameIdx> {
        let n = self.hot_len as usize;
        let at = self.hot[..n].iter().rposition(|&idx| wanted(idx))?;
        let idx = self.hot[at];
        self.hot.copy_within(at + 1..n, at);
        self.hot_len -= 1;
        Some(idx)
    }

    /// Takes the most recently freed block: the array's last, else the linked list's front.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self, frames: Frames<'_>) -> Option<FrameIdx> {
        self.pop_hot().or_else(|| self.cold.pop_front(frames))
    }

    /// The block [`PcpList::pop_back`] takes, without taking it.
    #[inline]
    pub(crate) fn back(&self) -> Option<FrameIdx> {
        self.cold.tail().or_else(|| self.hot().last().copied())
    }

    /// Takes the oldest block (what a drain returns first, and where known-zero blocks
    /// are): the linked list's back, else the array's last.
    #[inline]
    pub(crate) fn pop_back(&mut self, frames: Frames<'_>) -> Option<FrameIdx> {
        if self.cold.is_empty() {
            return self.pop_front(frames);
        }
        self.cold.pop_back(frames)
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
        assert_eq!(l.hot().len(), HOT_BLOCKS);
        assert_eq!(l.cold().len(), 4);
        assert_eq!(l.len(), HOT_BLOCKS as u32 + 4);
        // A known-zero block goes to the linked list's back even with room in the array.
        let mut z = PcpList::EMPTY;
        z.push(frames, FrameIdx(39), true);
        assert_eq!((z.hot().len(), z.cold().len()), (0, 1));
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
    fn a_block_taken_from_inside_the_array_keeps_the_others_in_order() {
        let f = frames(8);
        let frames = map(&f);
        let mut l = PcpList::EMPTY;
        for i in [3, 4, 8, 5, 12, 7] {
            l.push(frames, FrameIdx(i), false);
        }
        // The most recently freed multiple of 4 is 12, then 8, then 4; none of 16.
        assert_eq!(l.take_hot_where(|i| i.0 % 4 == 0), Some(FrameIdx(12)));
        assert_eq!(l.take_hot_where(|i| i.0 % 4 == 0), Some(FrameIdx(8)));
        assert_eq!(l.take_hot_where(|i| i.0 % 16 == 0), None);
        let rest: Vec<u32> = l.blocks(frames).map(|i| i.0).collect();
        assert_eq!(rest, [7, 5, 4, 3]);
        assert_eq!(l.len(), 4);
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
        // The linked list's back (its oldest, the first pushed there), then the array's last.
        assert_eq!(&taken[..3], &[HOT_BLOCKS as u32, HOT_BLOCKS as u32 + 1, 31]);
        assert_eq!(taken.len(), HOT_BLOCKS + 2);
        assert_eq!(l.pop_back(frames), None);
    }
}
