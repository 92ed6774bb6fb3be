//! The memory map's bookkeeping under the zone lock: the ranges added so far (for the overlap
//! check of `add_memory`) and the ranges whose frames are not initialized yet (deferred
//! init's work list).

use crate::types::FrameIdx;
use core::ops::Range;

/// Frames [`Zone::init_deferred`](crate::Zone::init_deferred) initializes per zone-lock hand-over: one default memory
/// section (128 MiB of 4 KiB frames).
pub const DEFERRED_CHUNK_PAGES: u64 = 1 << 15;
/// Disjoint ranges the zone remembers for the overlap check of `add_memory`.
pub const MAX_ADDED_RANGES: usize = 32;
/// Deferred ranges the zone can hold at once; a range past that is initialized at once.
pub const MAX_DEFERRED_RANGES: usize = 8;

/// The index ranges added so far, merged: exact while it never overflowed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AddedRanges {
    ranges: [(FrameIdx, FrameIdx); MAX_ADDED_RANGES],
    len: usize,
    /// Every range added is in `ranges`.
    exact: bool,
}

impl AddedRanges {
    pub(crate) const EMPTY: Self = Self {
        ranges: [(FrameIdx::FIRST, FrameIdx::FIRST); MAX_ADDED_RANGES],
        len: 0,
        exact: true,
    };

    /// The table holding `[start, end)` alone.
    #[cfg(not(loom))]
    pub(crate) const fn one(start: FrameIdx, end: FrameIdx) -> Self {
        let mut t = Self::EMPTY;
        t.ranges[0] = (start, end);
        t.len = 1;
        t
    }

    /// The first index of `r` inside a recorded range; `Ok(None)` when `r` overlaps no
    /// range added, `Err(())` when that is not known (the table overflowed and `r` overlaps
    /// none it holds).
    pub(crate) fn overlap(&self, r: &Range<FrameIdx>) -> Result<Option<FrameIdx>, ()> {
        let first = self.ranges[..self.len]
            .iter()
            .filter(|&&(s, e)| s < r.end && r.start < e)
            .map(|&(s, _)| s.max(r.start))
            .min();
        match first {
            Some(i) => Ok(Some(i)),
            None if self.exact => Ok(None),
            None => Err(()),
        }
    }

    /// Records `r`, which overlaps no range recorded, merging it with adjacent ones; false
    /// when the table is full (it is not exact from then on).
    pub(crate) fn insert(&mut self, r: Range<FrameIdx>) -> bool {
        let (mut s, mut e) = (r.start, r.end);
        let mut kept = 0;
        for i in 0..self.len {
            let (a, b) = self.ranges[i];
            if b == s || a == e {
                s = s.min(a);
                e = e.max(b);
            } else {
                self.ranges[kept] = (a, b);
                kept += 1;
            }
        }
        if kept == MAX_ADDED_RANGES {
            // Nothing merged and no room: keep what is recorded, which stays true.
            self.exact = false;
            return false;
        }
        self.len = kept;
        self.ranges[self.len] = (s, e);
        self.len += 1;
        true
    }
}

impl AddedRanges {
    /// Forgets `r` (memory taken offline), cutting the recorded ranges it overlaps; false,
    /// with nothing changed, when a cut would need a slot the full table does not have.
    pub(crate) fn remove(&mut self, r: &Range<FrameIdx>) -> bool {
        let overlapping = |&&(s, e): &&(FrameIdx, FrameIdx)| s < r.end && r.start < e;
        let pieces: usize = self.ranges[..self.len]
            .iter()
            .filter(overlapping)
            .map(|&(s, e)| usize::from(s < r.start) + usize::from(r.end < e))
            .sum();
        let dropped = self.ranges[..self.len].iter().filter(overlapping).count();
        if self.len - dropped + pieces > MAX_ADDED_RANGES {
            return false;
        }
        let mut kept = [(FrameIdx::FIRST, FrameIdx::FIRST); MAX_ADDED_RANGES];
        let mut n = 0;
        for &(s, e) in &self.ranges[..self.len] {
            let pieces = if s < r.end && r.start < e {
                [(s, r.start), (r.end, e)]
            } else {
                [(s, e), (FrameIdx::FIRST, FrameIdx::FIRST)]
            };
            for (a, b) in pieces.into_iter().filter(|(a, b)| a < b) {
                kept[n] = (a, b);
                n += 1;
            }
        }
        self.ranges = kept;
        self.len = n;
        true
    }
}

/// Ranges added but not initialized yet, oldest first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeferredRanges {
    /// `(start index, end index, known zero)`.
    ranges: [(FrameIdx, FrameIdx, bool); MAX_DEFERRED_RANGES],
    len: usize,
    /// Frames in them.
    pub(crate) pages: u64,
    /// Chunks taken off by an `init_deferred` that has not freed them into the buddy yet.
    pub(crate) in_flight: u32,
    /// Chunks freed into the buddy so far: a caller that saw a count and then failed to
    /// allocate knows from a newer count that memory came in meanwhile.
    pub(crate) completed: u64,
}

impl DeferredRanges {
    pub(crate) const EMPTY: Self = Self {
        ranges: [(FrameIdx::FIRST, FrameIdx::FIRST, false); MAX_DEFERRED_RANGES],
        len: 0,
        pages: 0,
        in_flight: 0,
        completed: 0,
    };

    /// `[start, end)` deferred, known zero or not, and nothing else.
    #[cfg(not(loom))]
    pub(crate) const fn one(start: FrameIdx, end: FrameIdx, zeroed: bool) -> Self {
        let mut t = Self::EMPTY;
        t.ranges[0] = (start, end, zeroed);
        t.len = 1;
        t.pages = (end.0 - start.0) as u64;
        t
    }

    /// Records `r` for later; false (nothing recorded) when the table is full.
    pub(crate) fn push(&mut self, r: Range<FrameIdx>, zeroed: bool) -> bool {
        if self.len == MAX_DEFERRED_RANGES || r.is_empty() {
            return r.is_empty();
        }
        self.ranges[self.len] = (r.start, r.end, zeroed);
        self.len += 1;
        self.pages += u64::from(r.end - r.start);
        true
    }

    /// Takes up to `max` frames from the front of the oldest range, ending on a
    /// `DEFERRED_CHUNK_PAGES` boundary where it can so that chunks stay aligned.
    pub(crate) fn pop(&mut self, max: u64) -> Option<(Range<FrameIdx>, bool)> {
        if self.len == 0 {
            return None;
        }
        let (s, e, zeroed) = self.ranges[0];
        let chunk = DEFERRED_CHUNK_PAGES as u32;
        let boundary = FrameIdx((s.0 / chunk).saturating_add(1).saturating_mul(chunk));
        let cap = u32::try_from(max.clamp(1, u64::from(chunk))).unwrap_or(chunk);
        let end = e.min(boundary).min(FrameIdx(s.0.saturating_add(cap)));
        if end == e {
            self.ranges.copy_within(1..self.len, 0);
            self.len -= 1;
        } else {
            self.ranges[0].0 = end;
        }
        self.pages -= u64::from(end - s);
        self.in_flight += 1;
        Some((s..end, zeroed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(range: Range<u32>) -> Range<FrameIdx> {
        FrameIdx(range.start)..FrameIdx(range.end)
    }

    fn recorded(a: &AddedRanges) -> std::vec::Vec<(u32, u32)> {
        a.ranges[..a.len].iter().map(|&(s, e)| (s.0, e.0)).collect()
    }

    #[test]
    fn added_ranges_merge_and_overflow_to_unknown() {
        let mut a = AddedRanges::EMPTY;
        a.insert(r(10..20));
        a.insert(r(20..30));
        a.insert(r(0..10));
        assert_eq!(a.len, 1);
        assert_eq!(a.overlap(&r(25..40)), Ok(Some(FrameIdx(25))));
        assert_eq!(a.overlap(&r(30..40)), Ok(None));
        for i in 0..MAX_ADDED_RANGES as u32 - 1 {
            assert!(a.insert(r(100 + 2 * i..101 + 2 * i)));
        }
        assert!(!a.insert(r(1000..1001)));
        assert_eq!(a.overlap(&r(30..40)), Err(()));
        // What is recorded still answers.
        assert_eq!(a.overlap(&r(0..40)), Ok(Some(FrameIdx(0))));
    }

    #[test]
    fn removing_a_range_cuts_what_it_overlaps() {
        let mut a = AddedRanges::EMPTY;
        a.insert(r(0..100));
        a.insert(r(200..300));
        assert!(a.remove(&r(50..60)));
        assert_eq!(recorded(&a), [(0, 50), (60, 100), (200, 300)]);
        assert!(a.remove(&r(40..250)));
        assert_eq!(recorded(&a), [(0, 40), (250, 300)]);
        assert_eq!(a.overlap(&r(40..250)), Ok(None));
        // A cut that needs a slot the full table does not have: refused, nothing changed.
        let mut full = AddedRanges::EMPTY;
        for i in 0..MAX_ADDED_RANGES as u32 {
            assert!(full.insert(r(10 * i..10 * i + 5)));
        }
        let before = (full.ranges, full.len);
        assert!(!full.remove(&r(1..2)));
        assert_eq!((full.ranges, full.len), before);
        // Removing a whole range frees its slot.
        assert!(full.remove(&r(0..5)));
        assert!(full.remove(&r(11..12)));
    }

    #[test]
    fn deferred_chunks_end_on_chunk_boundaries() {
        let c = DEFERRED_CHUNK_PAGES as u32;
        let mut d = DeferredRanges::EMPTY;
        assert!(d.push(r(5..3 * c + 7), true));
        assert_eq!(d.pages, u64::from(3 * c + 2));
        assert_eq!(d.pop(u64::MAX), Some((r(5..c), true)));
        assert_eq!(d.pop(10), Some((r(c..c + 10), true)));
        assert_eq!(d.pop(u64::MAX), Some((r(c + 10..2 * c), true)));
        assert_eq!(d.pop(u64::MAX), Some((r(2 * c..3 * c), true)));
        assert_eq!(d.pop(u64::MAX), Some((r(3 * c..3 * c + 7), true)));
        assert_eq!(d.pop(u64::MAX), None);
        assert_eq!(d.pages, 0);
        for i in 0..MAX_DEFERRED_RANGES as u32 {
            assert!(d.push(r(i * 10..i * 10 + 5), false));
        }
        assert!(!d.push(r(1000..1001), false));
    }
}
