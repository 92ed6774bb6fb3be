//! Memory added in large ranges becomes usable in steps, as Linux's `deferred_init_memmap`
//! does for struct pages: [`Zone::add_memory`] initializes the first
//! [`ZoneConfig::eager_pages`](crate::ZoneConfig::eager_pages) frames of a range at once (what allocation needs first) and records the rest; any CPU then
//! initializes it a section at a time with [`Zone::init_deferred`] (several CPUs in
//! parallel: only the hand-over of each section takes the zone lock), and the allocation slow
//! path does so before it reports that memory is out. A deferred frame reads as reserved
//! until its section is initialized.
//!
//! The zone remembers the ranges it was given (merged, up to [`MAX_ADDED_RANGES`]) so that
//! adding a range checks overlap against them instead of reading every frame; past that many
//! disjoint ranges it reads the frames of a range that overlaps none it holds, and
//! initializes such a range at once (only a recorded range is ever deferred, so a deferred
//! frame, or one being initialized, is always found by the table).

use core::ops::Range;

use crate::decompose::decompose;
use crate::frame::{Frame, Word};
use crate::pcp::PerCpu;
use crate::zone::Zone;
use lock_api::RawMutex;

/// The default [`ZoneConfig::eager_pages`](crate::ZoneConfig::eager_pages): frames of a
/// range [`Zone::add_memory`] initializes before it returns (1 GiB of 4 KiB frames); the
/// rest of a larger range is deferred.
pub const EAGER_PAGES: u64 = 1 << 18;
/// Frames [`Zone::init_deferred`] initializes per zone-lock hand-over: one default memory
/// section (128 MiB of 4 KiB frames).
pub const DEFERRED_CHUNK_PAGES: u64 = 1 << 15;
/// Disjoint ranges the zone remembers for the overlap check of `add_memory`.
pub const MAX_ADDED_RANGES: usize = 32;
/// Deferred ranges the zone can hold at once; a range past that is initialized at once.
pub const MAX_DEFERRED_RANGES: usize = 8;

/// The index ranges added so far, merged: exact while it never overflowed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AddedRanges {
    ranges: [(u32, u32); MAX_ADDED_RANGES],
    len: usize,
    /// Every range added is in `ranges`.
    exact: bool,
}

impl AddedRanges {
    pub(crate) const EMPTY: Self = Self {
        ranges: [(0, 0); MAX_ADDED_RANGES],
        len: 0,
        exact: true,
    };

    /// The table holding `[start, end)` alone.
    #[cfg(not(loom))]
    pub(crate) const fn one(start: u32, end: u32) -> Self {
        let mut t = Self::EMPTY;
        t.ranges[0] = (start, end);
        t.len = 1;
        t
    }

    /// The first index of `r` inside a recorded range; `Ok(None)` when `r` overlaps no
    /// range added, `Err(())` when that is not known (the table overflowed and `r` overlaps
    /// none it holds).
    pub(crate) fn overlap(&self, r: &Range<u32>) -> Result<Option<u32>, ()> {
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
    pub(crate) fn insert(&mut self, r: Range<u32>) -> bool {
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
    pub(crate) fn remove(&mut self, r: &Range<u32>) -> bool {
        let overlapping = |&&(s, e): &&(u32, u32)| s < r.end && r.start < e;
        let pieces: usize = self.ranges[..self.len]
            .iter()
            .filter(overlapping)
            .map(|&(s, e)| usize::from(s < r.start) + usize::from(r.end < e))
            .sum();
        let dropped = self.ranges[..self.len].iter().filter(overlapping).count();
        if self.len - dropped + pieces > MAX_ADDED_RANGES {
            return false;
        }
        let mut kept = [(0, 0); MAX_ADDED_RANGES];
        let mut n = 0;
        for &(s, e) in &self.ranges[..self.len] {
            let pieces = if s < r.end && r.start < e {
                [(s, r.start), (r.end, e)]
            } else {
                [(s, e), (0, 0)]
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
    ranges: [(u32, u32, bool); MAX_DEFERRED_RANGES],
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
        ranges: [(0, 0, false); MAX_DEFERRED_RANGES],
        len: 0,
        pages: 0,
        in_flight: 0,
        completed: 0,
    };

    /// `[start, end)` deferred, known zero or not, and nothing else.
    #[cfg(not(loom))]
    pub(crate) const fn one(start: u32, end: u32, zeroed: bool) -> Self {
        let mut t = Self::EMPTY;
        t.ranges[0] = (start, end, zeroed);
        t.len = 1;
        t.pages = (end - start) as u64;
        t
    }

    /// Records `r` for later; false (nothing recorded) when the table is full.
    pub(crate) fn push(&mut self, r: Range<u32>, zeroed: bool) -> bool {
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
    pub(crate) fn pop(&mut self, max: u64) -> Option<(Range<u32>, bool)> {
        if self.len == 0 {
            return None;
        }
        let (s, e, zeroed) = self.ranges[0];
        let chunk = DEFERRED_CHUNK_PAGES as u32;
        let boundary = (s / chunk).saturating_add(1).saturating_mul(chunk);
        let cap = u32::try_from(max.clamp(1, u64::from(chunk))).unwrap_or(chunk);
        let end = e.min(boundary).min(s.saturating_add(cap));
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

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
    R: RawMutex,
{
    /// Initializes up to `max_pages` frames of deferred memory (at least one chunk when
    /// there is any), a chunk of up to [`DEFERRED_CHUNK_PAGES`] frames at a time: the chunk
    /// is taken off the deferred list under the zone lock, its frames written outside it,
    /// and its blocks freed into the buddy under it again. Call it from an idle loop or a
    /// housekeeping core, or from every CPU at boot to initialize a large machine in
    /// parallel. Returns how many frames it initialized (0: none was deferred).
    pub fn init_deferred(&self, max_pages: u64) -> u64 {
        let m = self.map();
        let mut done = 0u64;
        while done < max_pages.max(1) {
            let Some((chunk, zeroed)) = self.lock_zone().deferred.pop(max_pages - done) else {
                break;
            };
            // The chunk's frames are reserved and off every list: this call alone writes them
            // (others read them only to name an error).
            let blocks = decompose(
                m.pfn(chunk.start),
                u64::from(chunk.end - chunk.start),
                self.cfg.max_order,
            );
            for (head, order) in blocks.into_iter().flatten() {
                let h = m.index_of(head);
                for t in h + 1..h + order.pages() as u32 {
                    m.frame(t).store(Word::TAIL);
                }
            }
            let mut free = self.lock_zone();
            free.init_pageblocks(m, chunk.clone());
            let blocks = decompose(
                m.pfn(chunk.start),
                u64::from(chunk.end - chunk.start),
                self.cfg.max_order,
            );
            for (head, order) in blocks.into_iter().flatten() {
                free.free_one_page(m, m.index_of(head), order, zeroed);
            }
            free.present += u64::from(chunk.end - chunk.start);
            free.deferred.in_flight -= 1;
            free.deferred.completed += 1;
            done += u64::from(chunk.end - chunk.start);
        }
        done
    }

    /// Frames added but not initialized yet ([`Zone::init_deferred`]).
    pub fn deferred_pages(&self) -> u64 {
        self.free.lock().deferred.pages
    }

    /// How many deferred chunks were initialized so far (for [`Zone::grow_from_deferred`]).
    pub(crate) fn deferred_generation(&self) -> u64 {
        self.lock_zone().deferred.completed
    }

    /// The allocation slow path's last resort, after an attempt that failed having seen
    /// `seen` ([`Zone::deferred_generation`]) before it: initializes a chunk of deferred
    /// memory, or waits for another CPU that is initializing the last ones. True when memory
    /// came in since `seen` (the caller tries again), false when none is left to come.
    pub(crate) fn grow_from_deferred(&self, seen: u64) -> bool {
        loop {
            if self.init_deferred(DEFERRED_CHUNK_PAGES) > 0 {
                return true;
            }
            let free = self.lock_zone();
            if free.deferred.completed != seen {
                return true;
            }
            if free.deferred.in_flight == 0 {
                return false;
            }
            drop(free);
            crate::sync::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_ranges_merge_and_overflow_to_unknown() {
        let mut a = AddedRanges::EMPTY;
        a.insert(10..20);
        a.insert(20..30);
        a.insert(0..10);
        assert_eq!(a.len, 1);
        assert_eq!(a.overlap(&(25..40)), Ok(Some(25)));
        assert_eq!(a.overlap(&(30..40)), Ok(None));
        for i in 0..MAX_ADDED_RANGES as u32 - 1 {
            assert!(a.insert(100 + 2 * i..101 + 2 * i));
        }
        assert!(!a.insert(1000..1001));
        assert_eq!(a.overlap(&(30..40)), Err(()));
        // What is recorded still answers.
        assert_eq!(a.overlap(&(0..40)), Ok(Some(0)));
    }

    #[test]
    fn removing_a_range_cuts_what_it_overlaps() {
        let mut a = AddedRanges::EMPTY;
        a.insert(0..100);
        a.insert(200..300);
        assert!(a.remove(&(50..60)));
        assert_eq!(&a.ranges[..a.len], &[(0, 50), (60, 100), (200, 300)]);
        assert!(a.remove(&(40..250)));
        assert_eq!(&a.ranges[..a.len], &[(0, 40), (250, 300)]);
        assert_eq!(a.overlap(&(40..250)), Ok(None));
        // A cut that needs a slot the full table does not have: refused, nothing changed.
        let mut full = AddedRanges::EMPTY;
        for i in 0..MAX_ADDED_RANGES as u32 {
            assert!(full.insert(10 * i..10 * i + 5));
        }
        let before = (full.ranges, full.len);
        assert!(!full.remove(&(1..2)));
        assert_eq!((full.ranges, full.len), before);
        // Removing a whole range frees its slot.
        assert!(full.remove(&(0..5)));
        assert!(full.remove(&(11..12)));
    }

    #[test]
    fn deferred_chunks_end_on_chunk_boundaries() {
        let c = DEFERRED_CHUNK_PAGES as u32;
        let mut d = DeferredRanges::EMPTY;
        assert!(d.push(5..3 * c + 7, true));
        assert_eq!(d.pages, u64::from(3 * c + 2));
        assert_eq!(d.pop(u64::MAX), Some((5..c, true)));
        assert_eq!(d.pop(10), Some((c..c + 10, true)));
        assert_eq!(d.pop(u64::MAX), Some((c + 10..2 * c, true)));
        assert_eq!(d.pop(u64::MAX), Some((2 * c..3 * c, true)));
        assert_eq!(d.pop(u64::MAX), Some((3 * c..3 * c + 7, true)));
        assert_eq!(d.pop(u64::MAX), None);
        assert_eq!(d.pages, 0);
        for i in 0..MAX_DEFERRED_RANGES as u32 {
            assert!(d.push(i * 10..i * 10 + 5, false));
        }
        assert!(!d.push(1000..1001, false));
    }
}
