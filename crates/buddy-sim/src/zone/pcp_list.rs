//! One CPU's per-cpu lists: on each, the most recently freed blocks in an array on top (an
//! allocation pops one, a free pushes one, and neither touches another frame's links), the
//! rest in a linked list of frames below it, and known-zero blocks at its back: in the same
//! array, from its other end, while it has room (a zeroed allocation pops one there, and a
//! zeroed refill's batch goes there without a link written), else at the linked list's back.
//!
//! Linux keeps its per-cpu lists linked through `struct page` alone; a block freed and
//! allocated again at once (a page-table page, a task stack) then writes the links of the
//! list's old head as well as its own. The arrays hold such blocks by index in the CPU's own
//! cache lines, so the common pair costs an array push and pop. The order-0 lists' arrays are
//! deep enough for a burst of page-table pages (a 1 GiB mapping's 512), the other lists'
//! for a few task stacks.

use crate::types::FrameIdx;
use crate::zone::config::{PCP_LISTS, PCP_SLOTS};
use crate::zone::list::List;
use crate::zone::map::Frames;

/// Blocks each per-cpu list of an order above 0 keeps in its array: the blocks a burst of
/// stack allocations frees and takes again. More go on the linked list.
pub(crate) const HOT_BLOCKS: usize = 32;

/// Pages each order-0 per-cpu list keeps in its array: a page-table build of 1 GiB of 4 KiB
/// mappings (512 pages) frees and takes them again without a link written.
pub(crate) const HOT_PAGES: usize = 512;

/// Array entries of one migratetype's lists: its order-0 list's, then the other slots'.
const HOT_PER_TYPE: usize = HOT_PAGES + (PCP_SLOTS - 1) * HOT_BLOCKS;

// One bit per list in a drain's mask (`PcpLists::maybe_nonempty`).
const _: () = assert!(PCP_LISTS <= 32);

/// Array entries of all of a CPU's lists.
const HOT_POOL: usize = HOT_PER_TYPE * (PCP_LISTS / PCP_SLOTS);

/// Where each list's array starts in the pool, and its capacity: a list's order-0 slot
/// first in its migratetype's share, then the other slots' (a table, so that a list named
/// at run time costs a load, not a division).
const HOT_RANGES: [(u16, u16); PCP_LISTS] = {
    let mut ranges = [(0, 0); PCP_LISTS];
    let mut list = 0;
    while list < PCP_LISTS {
        let (mt, slot) = (list / PCP_SLOTS, list % PCP_SLOTS);
        let base = mt * HOT_PER_TYPE;
        let (start, cap) = if slot == 0 {
            (base, HOT_PAGES)
        } else {
            (base + HOT_PAGES + (slot - 1) * HOT_BLOCKS, HOT_BLOCKS)
        };
        ranges[list] = (start as u16, cap as u16);
        list += 1;
    }
    ranges
};

// The pool's indices fit the table's entries.
const _: () = assert!(HOT_POOL <= u16::MAX as usize);

/// Where list `list`'s array starts in the pool, and its capacity.
#[inline(always)]
const fn hot_range(list: usize) -> (usize, usize) {
    let (start, cap) = HOT_RANGES[list];
    (start as usize, cap as usize)
}

/// Where one list's two kinds of blocks end in its array, as indices into the pool (an
/// empty list's: its array's start and end).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct ArrayEnds {
    /// One past its last block not known zero (they fill the array from its start).
    hot_end: u16,
    /// Its first known-zero block (they fill the array from its end down), never below
    /// `hot_end`: a push onto the array compares the two.
    zeroed_from: u16,
}

/// Every list's [`ArrayEnds`] while it is empty.
const EMPTY_ENDS: [ArrayEnds; PCP_LISTS] = {
    let mut ends = [ArrayEnds {
        hot_end: 0,
        zeroed_from: 0,
    }; PCP_LISTS];
    let mut list = 0;
    while list < PCP_LISTS {
        let (start, cap) = HOT_RANGES[list];
        ends[list] = ArrayEnds {
            hot_end: start,
            zeroed_from: start + cap,
        };
        list += 1;
    }
    ends
};

/// A CPU's per-cpu lists, each in three parts: its array's recently freed blocks not known
/// zero, its array's known-zero blocks (at the array's other end), and its linked list
/// (known-zero blocks at its back). A plain allocation takes the array's last freed block,
/// else the linked list's front, else a known-zero block from the array; a zeroed one a
/// known-zero block from the array, else the linked list's back if it is known zero; a
/// drain the linked list's back (its known-zero and oldest blocks), else the array's
/// known-zero blocks, else its last freed one. Every call names its list by number
/// (`list < PCP_LISTS`, as `ZoneConfig::pcp_list` gives them).
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct PcpListSet {
    /// List `l`'s array is `hot[start..start + cap]` ([`hot_range`]): its blocks not known
    /// zero are `hot[start..ends[l].hot_end]`, the last one freed last, and its known-zero
    /// ones `hot[ends[l].zeroed_from..start + cap]`, the next to be taken first. The ends
    /// first (`repr(C)`): every call reads one.
    ends: [ArrayEnds; PCP_LISTS],
    cold: [List; PCP_LISTS],
    hot: [FrameIdx; HOT_POOL],
}

impl PcpListSet {
    pub(crate) const EMPTY: Self = Self {
        ends: EMPTY_ENDS,
        cold: [List::EMPTY; PCP_LISTS],
        hot: [FrameIdx(0); HOT_POOL],
    };

    /// Blocks on `list`.
    #[inline]
    pub(crate) const fn len(&self, list: usize) -> u32 {
        let (e, (start, cap)) = (self.ends[list], HOT_RANGES[list]);
        (e.hot_end - start + (start + cap - e.zeroed_from)) as u32 + self.cold[list].len()
    }

    /// The blocks in `list`'s array not known zero, the last freed last.
    #[inline]
    pub(crate) fn hot(&self, list: usize) -> &[FrameIdx] {
        let (start, _) = hot_range(list);
        &self.hot[start..usize::from(self.ends[list].hot_end)]
    }

    /// The known-zero blocks in `list`'s array, the next a zeroed allocation takes first.
    #[inline]
    pub(crate) fn zeroed(&self, list: usize) -> &[FrameIdx] {
        let (start, cap) = hot_range(list);
        &self.hot[usize::from(self.ends[list].zeroed_from)..start + cap]
    }

    /// The linked part of `list`.
    pub(crate) const fn cold(&self, list: usize) -> &List {
        &self.cold[list]
    }

    /// Every block on `list` (read under the lists' lock): its array's blocks not known
    /// zero, the last freed first, its array's known-zero blocks, the next taken first, then
    /// its linked list front to back.
    pub(crate) fn blocks<'a>(
        &'a self,
        frames: Frames<'a>,
        list: usize,
    ) -> impl Iterator<Item = FrameIdx> + 'a {
        self.hot(list)
            .iter()
            .rev()
            .chain(self.zeroed(list))
            .copied()
            .chain(self.cold[list].blocks(frames))
    }

    /// Every block on every list.
    pub(crate) fn all_blocks<'a>(
        &'a self,
        frames: Frames<'a>,
    ) -> impl Iterator<Item = FrameIdx> + 'a {
        (0..PCP_LISTS).flat_map(move |list| self.blocks(frames, list))
    }

    /// Adds the free block `idx` to `list`: to the array while it has room (a known-zero
    /// block at its known-zero end), else to the linked list where its knowledge puts it
    /// ([`List::push`]).
    #[inline(always)]
    pub(crate) fn push(&mut self, frames: Frames<'_>, list: usize, idx: FrameIdx, zeroed: bool) {
        let pushed = if zeroed {
            self.push_zeroed(list, idx)
        } else {
            self.push_hot(list, idx)
        };
        if !pushed {
            self.cold[list].push(frames, idx, zeroed);
        }
    }

    /// Adds the free block `idx`, not known zero, to `list`'s array if it has room:
    /// `false`, with nothing changed, if it is full.
    #[inline(always)]
    pub(crate) fn push_hot(&mut self, list: usize, idx: FrameIdx) -> bool {
        let e = &mut self.ends[list];
        if e.hot_end >= e.zeroed_from {
            return false;
        }
        self.hot[usize::from(e.hot_end)] = idx;
        e.hot_end += 1;
        true
    }

    /// Adds the free block `idx`, known zero, to `list`'s array at its known-zero end if
    /// it has room (the next a zeroed allocation takes): `false`, with nothing changed, if
    /// it is full.
    #[inline(always)]
    fn push_zeroed(&mut self, list: usize, idx: FrameIdx) -> bool {
        let e = &mut self.ends[list];
        if e.zeroed_from <= e.hot_end {
            return false;
        }
        e.zeroed_from -= 1;
        self.hot[usize::from(e.zeroed_from)] = idx;
        true
    }

    /// Takes the known-zero block of `list`'s array pushed last, if it has one.
    #[inline(always)]
    pub(crate) fn pop_zeroed(&mut self, list: usize) -> Option<FrameIdx> {
        let (start, cap) = hot_range(list);
        let e = &mut self.ends[list];
        let at = usize::from(e.zeroed_from);
        if at >= start + cap {
            return None;
        }
        e.zeroed_from += 1;
        Some(self.hot[at])
    }

    /// Blocks in `list`'s array not known zero.
    #[inline(always)]
    pub(crate) fn hot_len(&self, list: usize) -> u32 {
        self.hot(list).len() as u32
    }

    /// Reverses the blocks `list`'s array gained since it held `from` not known zero:
    /// blocks pushed in the order they were taken then come off its top in that order, as
    /// Linux's `rmqueue_bulk` queues a batch at a list's tail for allocations to take from
    /// its head.
    #[inline]
    pub(crate) fn reverse_hot_since(&mut self, list: usize, from: u32) {
        let (start, _) = hot_range(list);
        // Swapped from both ends inward: a refill gains a few blocks (two of a 2 MiB
        // block's order), where the slice's `reverse` sets up for long ones.
        let mut lo = start + from as usize;
        let mut hi = usize::from(self.ends[list].hot_end);
        while lo + 1 < hi {
            hi -= 1;
            self.hot.swap(lo, hi);
            lo += 1;
        }
    }

    /// Takes the last block of `list`'s array not known zero, if it has one.
    #[inline(always)]
    pub(crate) fn pop_hot(&mut self, list: usize) -> Option<FrameIdx> {
        let (start, _) = hot_range(list);
        let e = &mut self.ends[list];
        if usize::from(e.hot_end) <= start {
            return None;
        }
        e.hot_end -= 1;
        Some(self.hot[usize::from(e.hot_end)])
    }

    /// Takes the most recently freed block of `list`'s array that `wanted` accepts (an
    /// aligned one), if any: the blocks above it move down, keeping the array's order. At
    /// most the array's length in looks, none at another frame.
    #[inline]
    pub(crate) fn take_hot_where(
        &mut self,
        list: usize,
        wanted: impl Fn(FrameIdx) -> bool,
    ) -> Option<FrameIdx> {
        let (start, _) = hot_range(list);
        let last = usize::from(self.ends[list].hot_end)
            .checked_sub(1)
            .filter(|&last| last >= start)?;
        // Most often the last freed block fits: no search, nothing above it to move.
        let at = if wanted(self.hot[last]) {
            last
        } else {
            start + self.hot[start..last].iter().rposition(|&idx| wanted(idx))?
        };
        let idx = self.hot[at];
        if at < last {
            self.hot.copy_within(at + 1..=last, at);
        }
        self.ends[list].hot_end -= 1;
        Some(idx)
    }

    /// Takes the most recently freed block of `list`: the array's last not known zero, else
    /// the linked list's front, else the array's last known-zero one.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self, frames: Frames<'_>, list: usize) -> Option<FrameIdx> {
        // Matches, not `Option::or_else`: LLVM kept that as a call on every allocation.
        match self.pop_hot(list) {
            Some(idx) => Some(idx),
            None => match self.cold[list].pop_front(frames) {
                Some(idx) => Some(idx),
                None => self.pop_zeroed(list),
            },
        }
    }

    /// The back of `list`'s linked part, if it has one: where it keeps its known-zero
    /// blocks (those the array had no room for).
    #[inline]
    pub(crate) fn cold_back(&self, list: usize) -> Option<FrameIdx> {
        self.cold[list].tail()
    }

    /// Takes the back of `list`'s linked part, if it has one.
    #[inline]
    pub(crate) fn pop_cold_back(&mut self, frames: Frames<'_>, list: usize) -> Option<FrameIdx> {
        self.cold[list].pop_back(frames)
    }

    /// Takes the block a drain returns to the buddy first: the linked list's back (its
    /// known-zero blocks, which can merge in the buddy, then its oldest), else a known-zero
    /// block of the array, else the array's last freed block.
    #[inline]
    pub(crate) fn pop_back(&mut self, frames: Frames<'_>, list: usize) -> Option<FrameIdx> {
        if self.cold[list].is_empty() {
            return match self.pop_zeroed(list) {
                Some(idx) => Some(idx),
                None => self.pop_hot(list),
            };
        }
        self.cold[list].pop_back(frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use std::boxed::Box;
    use std::vec::Vec;

    fn frames(n: usize) -> Vec<Frame> {
        (0..n).map(|_| Frame::new()).collect()
    }

    #[allow(unsafe_code)]
    fn map(f: &[Frame]) -> Frames<'_> {
        // SAFETY: the pointer comes from a shared reference to the slice.
        unsafe { Frames::from_slice_ptr(f) }
    }

    /// An order-0 list and an order-1 list of the same migratetype, and one of another.
    const PAGES: usize = PCP_SLOTS;
    const PAIRS: usize = PCP_SLOTS + 1;
    const OTHER: usize = 0;

    #[test]
    fn the_arrays_tile_the_pool_without_overlap() {
        let mut used = Vec::new();
        for list in 0..PCP_LISTS {
            let (start, cap) = hot_range(list);
            let want = if list % PCP_SLOTS == 0 {
                HOT_PAGES
            } else {
                HOT_BLOCKS
            };
            assert_eq!(cap, want, "list {list}");
            used.extend(start..start + cap);
        }
        used.sort_unstable();
        assert_eq!(used, (0..HOT_POOL).collect::<Vec<_>>());
    }

    #[test]
    fn the_array_fills_first_then_the_linked_list_takes_the_rest() {
        for (list, cap) in [(PAIRS, HOT_BLOCKS), (PAGES, HOT_PAGES)] {
            let f = frames(cap + 40);
            let frames = map(&f);
            let mut l = Box::new(PcpListSet::EMPTY);
            for i in 0..cap as u32 + 4 {
                l.push(frames, list, FrameIdx(i), false);
            }
            assert_eq!(l.hot(list).len(), cap);
            assert_eq!(l.cold(list).len(), 4);
            assert_eq!(l.len(list), cap as u32 + 4);
            // Another list shares no entry with it.
            l.push(frames, OTHER, FrameIdx(cap as u32 + 30), false);
            assert_eq!(l.hot(OTHER), &[FrameIdx(cap as u32 + 30)]);
            assert_eq!(l.len(list), cap as u32 + 4);
            // A known-zero block goes to the array's other end while it has room.
            l.push(frames, OTHER, FrameIdx(cap as u32 + 39), true);
            assert_eq!((l.hot(OTHER).len(), l.cold(OTHER).len()), (1, 0));
            assert_eq!(l.zeroed(OTHER), &[FrameIdx(cap as u32 + 39)]);
            // Front: the array, last freed first; then the linked list's front.
            let front: Vec<u32> = l.blocks(frames, list).map(|i| i.0).collect();
            let mut taken = Vec::new();
            while let Some(i) = l.pop_front(frames, list) {
                taken.push(i.0);
            }
            assert_eq!(taken, front);
            assert_eq!(taken[0], cap as u32 - 1);
            assert_eq!(taken[cap], cap as u32 + 3);
            assert_eq!(l.len(list), 0);
            assert_eq!(l.len(OTHER), 2);
        }
    }

    #[test]
    fn a_block_taken_from_inside_the_array_keeps_the_others_in_order() {
        let f = frames(16);
        let frames = map(&f);
        let mut l = Box::new(PcpListSet::EMPTY);
        for i in [3, 4, 8, 5, 12, 7] {
            l.push(frames, PAIRS, FrameIdx(i), false);
        }
        l.push(frames, PAGES, FrameIdx(0), false);
        // The most recently freed multiple of 4 is 12, then 8, then 4; none of 16.
        assert_eq!(
            l.take_hot_where(PAIRS, |i| i.0 % 4 == 0),
            Some(FrameIdx(12))
        );
        assert_eq!(l.take_hot_where(PAIRS, |i| i.0 % 4 == 0), Some(FrameIdx(8)));
        assert_eq!(l.take_hot_where(PAIRS, |i| i.0 % 16 == 0), None);
        let rest: Vec<u32> = l.blocks(frames, PAIRS).map(|i| i.0).collect();
        assert_eq!(rest, [7, 5, 4, 3]);
        assert_eq!(l.len(PAIRS), 4);
        // The last freed fits: taken off the end.
        assert_eq!(l.take_hot_where(PAIRS, |i| i.0 % 7 == 0), Some(FrameIdx(7)));
        let rest: Vec<u32> = l.blocks(frames, PAIRS).map(|i| i.0).collect();
        assert_eq!(rest, [5, 4, 3]);
        // An empty list has none.
        assert_eq!(l.take_hot_where(OTHER, |_| true), None);
        // The list before it in the pool is untouched.
        assert_eq!(l.hot(PAGES), &[FrameIdx(0)]);
    }

    #[test]
    fn known_zero_blocks_share_the_array_from_its_other_end_then_go_to_the_linked_back() {
        let f = frames(HOT_BLOCKS + 8);
        let frames = map(&f);
        let mut l = Box::new(PcpListSet::EMPTY);
        let dirty = HOT_BLOCKS as u32 - 2;
        for i in 0..dirty {
            l.push(frames, PAIRS, FrameIdx(i), false);
        }
        // Two known-zero blocks fill the array; the next two go to the linked list's back.
        for i in dirty..dirty + 4 {
            l.push(frames, PAIRS, FrameIdx(i), true);
        }
        assert_eq!(l.zeroed(PAIRS), &[FrameIdx(dirty + 1), FrameIdx(dirty)]);
        assert_eq!(l.cold(PAIRS).len(), 2);
        assert_eq!(l.cold_back(PAIRS), Some(FrameIdx(dirty + 3)));
        // A full array: a block not known zero goes to the linked list's front.
        l.push(frames, PAIRS, FrameIdx(dirty + 4), false);
        assert_eq!(l.hot(PAIRS).len(), dirty as usize);
        assert_eq!(l.cold(PAIRS).head(), Some(FrameIdx(dirty + 4)));
        assert_eq!(l.len(PAIRS), HOT_BLOCKS as u32 + 3);
        // The known-zero end gives the last pushed first, and makes room for the other end.
        assert_eq!(l.pop_zeroed(PAIRS), Some(FrameIdx(dirty + 1)));
        assert!(l.push_hot(PAIRS, FrameIdx(dirty + 5)));
        assert!(!l.push_hot(PAIRS, FrameIdx(dirty + 6)));
        assert_eq!(l.pop_zeroed(PAIRS), Some(FrameIdx(dirty)));
        assert_eq!(l.pop_zeroed(PAIRS), None);
        // A plain allocation takes the array's blocks not known zero, then the linked
        // list's front (its known-zero blocks last); a known-zero block of the array after
        // them all.
        l.push(frames, PAIRS, FrameIdx(dirty + 7), true);
        let mut taken = Vec::new();
        while let Some(i) = l.pop_front(frames, PAIRS) {
            taken.push(i.0);
        }
        assert_eq!(taken.len(), HOT_BLOCKS + 3);
        assert_eq!(&taken[..2], &[dirty + 5, dirty - 1]);
        assert_eq!(
            &taken[taken.len() - 4..],
            &[dirty + 4, dirty + 2, dirty + 3, dirty + 7]
        );
    }

    #[test]
    fn a_drain_takes_the_linked_back_then_the_known_zero_end_then_the_last_freed() {
        let f = frames(HOT_BLOCKS + 8);
        let frames = map(&f);
        let mut l = Box::new(PcpListSet::EMPTY);
        for i in 0..HOT_BLOCKS as u32 {
            l.push(frames, PAIRS, FrameIdx(i), false);
        }
        l.push(frames, PAIRS, FrameIdx(HOT_BLOCKS as u32), false);
        l.push(frames, PAIRS, FrameIdx(HOT_BLOCKS as u32 + 1), true);
        // Room at the known-zero end once a block leaves the array.
        assert_eq!(l.pop_hot(PAIRS), Some(FrameIdx(HOT_BLOCKS as u32 - 1)));
        l.push(frames, PAIRS, FrameIdx(HOT_BLOCKS as u32 + 2), true);
        let mut taken = Vec::new();
        while let Some(i) = l.pop_back(frames, PAIRS) {
            taken.push(i.0);
        }
        let h = HOT_BLOCKS as u32;
        // The linked list's back (known zero, then the oldest), the array's known-zero
        // block, then the array from its last freed down.
        assert_eq!(&taken[..4], &[h + 1, h, h + 2, h - 2]);
        assert_eq!(taken.len(), HOT_BLOCKS + 2);
        assert_eq!(taken.last(), Some(&0));
        assert_eq!(l.len(PAIRS), 0);
    }
}
