//! One CPU's per-cpu lists: on each, the most recently freed blocks in an array on top (an
//! allocation pops one, a free pushes one, and neither touches another frame's links), the
//! rest in a linked list of frames below it, known-zero blocks at its back: in a small array
//! of their own while it has room (a zeroed allocation pops one there without reading a
//! frame, and a zeroed refill's batch goes there without a link written), else at the
//! linked list's back.
//!
//! Linux keeps its per-cpu lists linked through `struct page` alone; a block freed and
//! allocated again at once (a page-table page, a task stack) then writes the links of the
//! list's old head as well as its own. The arrays hold such blocks by index in the CPU's own
//! cache lines, so the common pair costs an array push and pop. The order-0 lists' arrays are
//! deep enough for a burst of page-table pages (a 1 GiB mapping's 512), the other lists'
//! for a few task stacks.

use crate::types::{FrameIdx, Order};
use crate::zone::config::{PCP_LISTS, PCP_SLOTS};
use crate::zone::list::List;
use crate::zone::map::Frames;

/// Blocks each per-cpu list of an order above 0 keeps in its array: the blocks a burst of
/// stack allocations frees and takes again. More go on the linked list.
#[cfg(not(loom))]
pub(crate) const HOT_BLOCKS: usize = 32;
/// Under loom, whose models hold a few blocks and run each thread on a coroutine stack of
/// 32 KiB (a CPU's lists are built on it), smaller arrays, as tokio's loom builds shrink
/// its run queues: the same code, which the models then also take past a full array.
#[cfg(loom)]
pub(crate) const HOT_BLOCKS: usize = 8;

/// Known-zero blocks each per-cpu list keeps in an array of its own: a zeroed refill's
/// largest batch of the pageblock order's blocks (`ZoneConfig::pcp_zeroed_blocks`: 16, the
/// first for the allocation that refills). More go on the linked list's back.
#[cfg(not(loom))]
pub(crate) const ZEROED_BLOCKS: usize = 16;
/// Under loom: as [`HOT_BLOCKS`].
#[cfg(loom)]
pub(crate) const ZEROED_BLOCKS: usize = 8;

// The array's lengths fit a byte.
const _: () = assert!(ZEROED_BLOCKS <= u8::MAX as usize);

/// Pages each order-0 per-cpu list keeps in its array: a page-table build of 1 GiB of 4 KiB
/// mappings (512 pages) frees and takes them again without a link written.
#[cfg(not(loom))]
pub(crate) const HOT_PAGES: usize = 512;
/// Under loom: as [`HOT_BLOCKS`].
#[cfg(loom)]
pub(crate) const HOT_PAGES: usize = 16;

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

/// A CPU's per-cpu lists, each in three parts: the array of its recently freed blocks not
/// known zero, the array of its known-zero blocks, and its linked list (known-zero blocks at
/// its back). A plain allocation takes the first array's last block, else the linked list's
/// front, else the known-zero array's last; a zeroed one the known-zero array's last, else
/// the linked list's back if it is known zero; a drain the linked list's back (its
/// known-zero and oldest blocks), else the known-zero array's last, else the first array's
/// last. Every call names its list by number (`list < PCP_LISTS`, as `ZoneConfig::pcp_list`
/// gives them).
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct PcpListSet {
    /// List `l`'s array is `hot[start..start + hot_len[l]]`, the last one freed last
    /// ([`hot_range`]). The lengths first (`repr(C)`): every call reads one.
    hot_len: [u32; PCP_LISTS],
    cold: [List; PCP_LISTS],
    hot: [FrameIdx; HOT_POOL],
    /// List `l`'s known-zero array is `zeroed[l][..zeroed_len[l]]`, the last pushed last.
    /// After the fields every call uses, which keep their places: only zeroed allocations,
    /// refills and drains read these.
    zeroed_len: [u8; PCP_LISTS],
    zeroed: [[FrameIdx; ZEROED_BLOCKS]; PCP_LISTS],
}

impl PcpListSet {
    pub(crate) const EMPTY: Self = Self {
        hot_len: [0; PCP_LISTS],
        cold: [List::EMPTY; PCP_LISTS],
        hot: [FrameIdx(0); HOT_POOL],
        zeroed_len: [0; PCP_LISTS],
        zeroed: [[FrameIdx(0); ZEROED_BLOCKS]; PCP_LISTS],
    };

    /// Blocks on `list`.
    #[inline]
    pub(crate) const fn len(&self, list: usize) -> u32 {
        self.hot_len[list] + self.zeroed_len[list] as u32 + self.cold[list].len()
    }

    /// The blocks in `list`'s array, the last freed last.
    #[inline]
    pub(crate) fn hot(&self, list: usize) -> &[FrameIdx] {
        let (start, _) = hot_range(list);
        &self.hot[start..start + self.hot_len[list] as usize]
    }

    /// The blocks in `list`'s known-zero array, the last pushed last.
    #[inline]
    pub(crate) fn zeroed(&self, list: usize) -> &[FrameIdx] {
        &self.zeroed[list][..usize::from(self.zeroed_len[list])]
    }

    /// The linked part of `list`.
    pub(crate) const fn cold(&self, list: usize) -> &List {
        &self.cold[list]
    }

    /// Every block on `list` (read under the lists' lock): its array's, the last freed
    /// first, its known-zero array's, the last pushed first, then its linked list front to
    /// back.
    pub(crate) fn blocks<'a>(
        &'a self,
        frames: Frames<'a>,
        list: usize,
    ) -> impl Iterator<Item = FrameIdx> + 'a {
        self.hot(list)
            .iter()
            .rev()
            .chain(self.zeroed(list).iter().rev())
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

    /// Adds the free block `idx` to `list`: to the array of its kind (known zero or not)
    /// while it has room, else to the linked list where its knowledge puts it
    /// ([`List::push`]).
    #[inline(always)]
    pub(crate) fn push(&mut self, frames: Frames<'_>, list: usize, idx: FrameIdx, zeroed: bool) {
        let arrayed = if zeroed {
            self.push_zeroed(list, idx)
        } else {
            self.push_hot(list, idx)
        };
        if !arrayed {
            self.cold[list].push(frames, idx, zeroed);
        }
    }

    /// Adds the free block `idx`, known zero, to `list`'s known-zero array if it has room:
    /// `false`, with nothing changed, if it is full.
    #[inline(always)]
    fn push_zeroed(&mut self, list: usize, idx: FrameIdx) -> bool {
        let n = usize::from(self.zeroed_len[list]);
        let Some(slot) = self.zeroed[list].get_mut(n) else {
            return false;
        };
        *slot = idx;
        self.zeroed_len[list] += 1;
        true
    }

    /// Adds as many of the `n` free blocks known zero `idx`, `idx + step`, ... (a run, in
    /// that order) to `list`'s known-zero array as it has room for, the first of them
    /// first, calling `each` with each one it adds; returns how many it added.
    #[inline(always)]
    pub(crate) fn push_zeroed_run(
        &mut self,
        list: usize,
        (idx, step, n): (FrameIdx, u32, u64),
        mut each: impl FnMut(FrameIdx),
    ) -> u64 {
        let len = usize::from(self.zeroed_len[list]);
        let Some(room) = self.zeroed[list].get_mut(len..) else {
            return 0;
        };
        let took = room.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        let mut at = idx;
        for slot in &mut room[..took] {
            *slot = at;
            each(at);
            // At most the run's end, a frame index of the zone: no overflow.
            at += step;
        }
        // `took <= ZEROED_BLOCKS`, which fits a byte.
        self.zeroed_len[list] += took as u8;
        took as u64
    }

    /// Takes the last block of `list`'s known-zero array, if it has one.
    #[inline(always)]
    pub(crate) fn pop_zeroed(&mut self, list: usize) -> Option<FrameIdx> {
        let n = self.zeroed_len[list].checked_sub(1)?;
        self.zeroed_len[list] = n;
        Some(self.zeroed[list][usize::from(n)])
    }

    /// Adds the free block `idx`, not known zero, to `list`'s array if it has room:
    /// `false`, with nothing changed, if it is full.
    #[inline(always)]
    pub(crate) fn push_hot(&mut self, list: usize, idx: FrameIdx) -> bool {
        let (start, cap) = hot_range(list);
        let n = self.hot_len[list] as usize;
        if n >= cap {
            return false;
        }
        self.hot[start + n] = idx;
        self.hot_len[list] += 1;
        true
    }

    /// Blocks in `list`'s array.
    #[inline(always)]
    pub(crate) fn hot_len(&self, list: usize) -> u32 {
        self.hot_len[list]
    }

    /// Reverses the blocks `list`'s array gained since it held `from`: blocks pushed in the
    /// order they were taken then come off its top in that order, as Linux's `rmqueue_bulk`
    /// queues a batch at a list's tail for allocations to take from its head.
    #[inline]
    pub(crate) fn reverse_hot_since(&mut self, list: usize, from: u32) {
        let (start, _) = hot_range(list);
        // Swapped from both ends inward: a refill gains a few blocks (two of a 2 MiB
        // block's order), where the slice's `reverse` sets up for long ones.
        let mut lo = start + from as usize;
        let mut hi = start + self.hot_len[list] as usize;
        while lo + 1 < hi {
            hi -= 1;
            self.hot.swap(lo, hi);
            lo += 1;
        }
    }

    /// Takes the last block of `list`'s array, if it has one.
    #[inline(always)]
    pub(crate) fn pop_hot(&mut self, list: usize) -> Option<FrameIdx> {
        let n = self.hot_len[list].checked_sub(1)?;
        self.hot_len[list] = n;
        let (start, _) = hot_range(list);
        Some(self.hot[start + n as usize])
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
        let last = start + self.hot_len[list].checked_sub(1)? as usize;
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
        self.hot_len[list] -= 1;
        Some(idx)
    }

    /// Takes the most recently freed block of `list`: the array's last, else the linked
    /// list's front, else the known-zero array's last.
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
    /// blocks (those the known-zero array had no room for).
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
    /// known-zero blocks, which can merge in the buddy, then its oldest), else the
    /// known-zero array's last, else the array's last.
    #[inline]
    fn pop_back(&mut self, frames: Frames<'_>, list: usize) -> Option<FrameIdx> {
        if self.cold[list].is_empty() {
            return match self.pop_zeroed(list) {
                Some(idx) => Some(idx),
                None => self.pop_hot(list),
            };
        }
        self.cold[list].pop_back(frames)
    }

    /// Takes what a drain returns to the buddy first ([`PcpListSet::pop_back`]), and from
    /// the linked list, with at most `max` blocks in all, the run of blocks in front of it
    /// there ([`List::pop_back_run`]: one relink). Returns the run's lowest block, its
    /// length in blocks and its `kind`.
    #[inline]
    pub(crate) fn pop_back_run(
        &mut self,
        frames: Frames<'_>,
        list: usize,
        max: u32,
        kind: impl Fn(FrameIdx) -> (Order, bool),
    ) -> Option<(FrameIdx, u32, (Order, bool))> {
        if max > 1 && !self.cold[list].is_empty() {
            return self.cold[list].pop_back_run(frames, max, kind);
        }
        let idx = self.pop_back(frames, list)?;
        Some((idx, 1, kind(idx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use std::boxed::Box;
    use std::vec;
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
            // A known-zero block goes to its own array while it has room.
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

    /// A run of known-zero blocks fills the known-zero array's room in one pass, in run
    /// order, handing each block it adds to the caller (which writes its head), and leaves
    /// the rest to the caller, as the list's other pushes would.
    #[test]
    fn a_known_zero_run_fills_the_room_left_in_its_array() {
        let mut l = Box::new(PcpListSet::EMPTY);
        let first = ZEROED_BLOCKS as u32 * 8;
        l.push_zeroed(PAIRS, FrameIdx(first));
        let mut handed = Vec::new();
        let run = (FrameIdx(0), 8, ZEROED_BLOCKS as u64 + 3);
        let took = l.push_zeroed_run(PAIRS, run, |idx| handed.push(idx.0));
        assert_eq!(took, ZEROED_BLOCKS as u64 - 1);
        let added: Vec<u32> = (0..ZEROED_BLOCKS as u32 - 1).map(|k| k * 8).collect();
        assert_eq!(handed, added);
        let arrayed: Vec<u32> = l.zeroed(PAIRS).iter().map(|i| i.0).collect();
        assert_eq!(arrayed[0], first);
        assert_eq!(arrayed[1..], added[..]);
        // The array full: nothing more, and nothing handed.
        assert_eq!(
            l.push_zeroed_run(PAIRS, (FrameIdx(first + 8), 8, 2), |_| unreachable!()),
            0
        );
        assert_eq!(l.len(PAIRS), ZEROED_BLOCKS as u32);
        assert_eq!(l.zeroed(OTHER).len(), 0);
    }

    #[test]
    fn known_zero_blocks_fill_their_own_array_then_go_to_the_linked_back() {
        let z = ZEROED_BLOCKS as u32;
        let f = frames(HOT_BLOCKS + ZEROED_BLOCKS + 8);
        let frames = map(&f);
        let mut l = Box::new(PcpListSet::EMPTY);
        // A full array of blocks not known zero leaves the known-zero array's room alone.
        for i in 0..HOT_BLOCKS as u32 {
            l.push(frames, PAIRS, FrameIdx(i), false);
        }
        let h = HOT_BLOCKS as u32;
        for i in h..h + z + 2 {
            l.push(frames, PAIRS, FrameIdx(i), true);
        }
        assert_eq!(l.zeroed(PAIRS).len(), ZEROED_BLOCKS);
        assert_eq!(l.zeroed(PAIRS)[0], FrameIdx(h));
        // The two past its room went to the linked list's back.
        assert_eq!(l.cold(PAIRS).len(), 2);
        assert_eq!(l.cold_back(PAIRS), Some(FrameIdx(h + z + 1)));
        assert_eq!(l.len(PAIRS), h + z + 2);
        // Another list's known-zero array is its own.
        l.push(frames, OTHER, FrameIdx(h + z + 4), true);
        assert_eq!(l.zeroed(OTHER), &[FrameIdx(h + z + 4)]);
        assert_eq!(l.len(PAIRS), h + z + 2);
        // The known-zero array gives the last pushed first.
        assert_eq!(l.pop_zeroed(PAIRS), Some(FrameIdx(h + z - 1)));
        // A plain allocation takes the array of blocks not known zero, then the linked
        // list's front (its known-zero blocks last), then the known-zero array.
        let listed: Vec<u32> = l.blocks(frames, PAIRS).map(|i| i.0).collect();
        let mut taken = Vec::new();
        while let Some(i) = l.pop_front(frames, PAIRS) {
            taken.push(i.0);
        }
        assert_eq!(taken.len(), HOT_BLOCKS + ZEROED_BLOCKS + 1);
        assert_eq!(taken[0], h - 1);
        assert_eq!(
            &taken[HOT_BLOCKS..HOT_BLOCKS + 3],
            &[h + z, h + z + 1, h + z - 2]
        );
        assert_eq!(taken.last(), Some(&h));
        // `blocks` lists them as a plain allocation would not: the arrays first.
        assert_eq!(listed[HOT_BLOCKS], h + z - 2);
        assert_eq!(&listed[listed.len() - 2..], &[h + z, h + z + 1]);
        assert_eq!(l.len(PAIRS), 0);
        assert_eq!(l.len(OTHER), 1);
    }

    #[test]
    fn a_drain_takes_the_linked_back_then_the_known_zero_array_then_the_last_freed() {
        let f = frames(HOT_BLOCKS + 8);
        let frames = map(&f);
        let mut l = Box::new(PcpListSet::EMPTY);
        let h = HOT_BLOCKS as u32;
        for i in 0..h + 2 {
            l.push(frames, PAIRS, FrameIdx(i), false);
        }
        l.push(frames, PAIRS, FrameIdx(h + 2), true);
        l.push(frames, PAIRS, FrameIdx(h + 3), true);
        let mut taken = Vec::new();
        // One block a call (`max` 1), whatever its kind.
        while let Some((i, n, _)) = l.pop_back_run(frames, PAIRS, 1, |_| (Order(1), false)) {
            assert_eq!(n, 1);
            taken.push(i.0);
        }
        // The linked list's back (its oldest, the first pushed there), then the known-zero
        // array's last pushed, then the array from its last freed down.
        assert_eq!(&taken[..5], &[h, h + 1, h + 3, h + 2, h - 1]);
        assert_eq!(taken.len(), HOT_BLOCKS + 4);
        assert_eq!(taken.last(), Some(&0));
        assert_eq!(l.len(PAIRS), 0);
    }

    /// The blocks on `list`'s linked part, front to back, and its length as counted.
    fn cold_blocks(l: &PcpListSet, frames: Frames<'_>, list: usize) -> (Vec<u32>, u32) {
        let blocks = l.cold(list).blocks(frames).map(|i| i.0).collect();
        (blocks, l.cold(list).len())
    }

    #[test]
    fn a_drain_takes_a_run_off_the_linked_back_with_one_relink() {
        let f = frames(HOT_BLOCKS + 200);
        let frames = map(&f);
        let mut l = Box::new(PcpListSet::EMPTY);
        let h = 120 + HOT_BLOCKS as u32;
        // The array full of blocks elsewhere, so that the rest go to the linked list.
        for i in 0..HOT_BLOCKS as u32 {
            l.push(frames, PAIRS, FrameIdx(120 + i), false);
        }
        // Blocks of order 1 freed in ascending order (each pushed at the front), then one
        // apart from them, then three freed descending, then four whose second half is of
        // another kind.
        for i in [0, 2, 4, 6, 8, 10, 12, 14, 40, 20, 18, 16, 96, 98, 100, 102] {
            l.push(frames, PAIRS, FrameIdx(i), false);
        }
        let kind = |i: FrameIdx| (Order(1), (100..120).contains(&i.0));
        let run = |l: &mut PcpListSet, max| {
            l.pop_back_run(frames, PAIRS, max, kind)
                .map(|(i, n, k)| (i.0, n, k))
        };
        // At most `max` blocks; then the rest of the run, which ends where the next block
        // does not follow it.
        assert_eq!(run(&mut l, 3), Some((0, 3, (Order(1), false))));
        for i in [0, 2, 4] {
            let frame = frames.at(i);
            assert_eq!(
                (frame.prev_raw(), frame.next_raw()),
                (0, 0),
                "{i}: links cleared"
            );
        }
        assert_eq!(
            cold_blocks(&l, frames, PAIRS),
            (vec![102, 100, 98, 96, 16, 18, 20, 40, 14, 12, 10, 8, 6], 13)
        );
        assert_eq!(frames.at(6).next_raw(), 0, "the new back links to nothing");
        assert_eq!(run(&mut l, 100), Some((6, 5, (Order(1), false))));
        assert_eq!(run(&mut l, 100), Some((40, 1, (Order(1), false))));
        // Descending: the second block sets the direction.
        assert_eq!(run(&mut l, 100), Some((16, 3, (Order(1), false))));
        // A block of another kind ends the run and starts the next.
        assert_eq!(run(&mut l, 100), Some((96, 2, (Order(1), false))));
        assert_eq!(cold_blocks(&l, frames, PAIRS), (vec![102, 100], 2));
        assert_eq!(run(&mut l, 100), Some((100, 2, (Order(1), true))));
        assert_eq!(cold_blocks(&l, frames, PAIRS), (vec![], 0));
        assert_eq!(l.cold(PAIRS).head(), None);
        // The linked list empty: the array's last, one block whatever `max`.
        assert_eq!(run(&mut l, 100), Some((h - 1, 1, (Order(1), false))));
        for i in 0..200 {
            let frame = frames.at(i);
            if i < 120 || i >= h as usize {
                assert_eq!((frame.prev_raw(), frame.next_raw()), (0, 0), "{i}");
            }
        }
        assert_eq!(l.len(PAIRS), HOT_BLOCKS as u32 - 1);
    }
}
