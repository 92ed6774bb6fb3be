//! A whole zone's observable state at one instant, for comparing a zone before and after an
//! operation that failed: what a failed operation may change is listed in its docs and in
//! [`BuddyError`](crate::BuddyError)'s; everything else must read back exactly.

use crate::frame::FrameState;
use crate::frame_storage::FrameStorage;
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;
use std::vec::Vec;

/// Everything a zone's caller can observe, read while no other CPU uses the zone: every
/// frame's metadata word (state, order, references, flags, known zero, the free list or
/// kind), the key of every allocated head, every pageblock's type and isolation, and the
/// counts (free in the buddy, known zero, present, deferred, and free in all, per-cpu lists
/// included). The order of blocks inside one free list is not part of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    start: Pfn,
    /// Per frame: the metadata word, the key (allocated heads; 0 otherwise), the pageblock
    /// bits (in the frame that holds a pageblock's; 0 otherwise).
    frames: Vec<(u64, u64, u32)>,
    counts: Counts,
}

/// A zone's counts, as its accessors give them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    buddy: u64,
    zeroed: u64,
    present: u64,
    deferred: u64,
    free_total: u64,
}

/// Where two [`Snapshot`]s differ first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotDifference {
    /// The zones span different frames.
    Geometry,
    /// A frame's metadata word differs (state, order, references, flags, known zero, list):
    /// the frame and both words.
    Word(Pfn, u64, u64),
    /// An allocated head's key differs.
    Key(Pfn),
    /// A pageblock's type or isolation differs: the frame that holds them and both bit sets.
    Pageblock(Pfn, u32, u32),
    /// The counts differ (free in the buddy, known zero, present, deferred, free in all).
    Counts,
}

impl Snapshot {
    /// The state of `zone` now. Exact only while no other CPU allocates or frees.
    pub fn of<F, P, R>(zone: &Zone<F, P, R>) -> Self
    where
        F: FrameStorage,
        P: PerCpuSet<R>,
        R: RawMutex,
    {
        let mut s = Self {
            start: zone.config().start,
            frames: Vec::new(),
            counts: Counts::default(),
        };
        s.retake(zone);
        s
    }

    /// [`Snapshot::of`] into this snapshot's storage (a harness that takes one around every
    /// operation allocates once).
    pub fn retake<F, P, R>(&mut self, zone: &Zone<F, P, R>)
    where
        F: FrameStorage,
        P: PerCpuSet<R>,
        R: RawMutex,
    {
        self.start = zone.config().start;
        self.frames.clear();
        self.frames.extend(zone.frames_slice().iter().map(|f| {
            let w = f.load();
            let key = if w.state() == FrameState::Allocated {
                f.key()
            } else {
                0
            };
            (w.bits(), key, f.pageblock_bits())
        }));
        self.counts = Counts {
            buddy: zone.buddy_pages(),
            zeroed: zone.zeroed_pages(),
            present: zone.present_pages(),
            deferred: zone.deferred_pages(),
            free_total: zone.free_pages_total(),
        };
    }

    /// Clears the reported mark (free page reporting) from every frame word, for a
    /// comparison of operations that may take it off.
    pub(crate) fn forget_reported_marks(&mut self) {
        for f in &mut self.frames {
            f.0 = crate::frame::Word::without_reported_bits(f.0);
        }
    }

    /// The first difference between `self` (before) and `after`, or `None`.
    #[must_use]
    pub fn difference(&self, after: &Self) -> Option<SnapshotDifference> {
        if self.start != after.start || self.frames.len() != after.frames.len() {
            return Some(SnapshotDifference::Geometry);
        }
        let pfn = |i: usize| Pfn(self.start.0 + i as u64);
        for (i, (a, b)) in self.frames.iter().zip(&after.frames).enumerate() {
            if a.0 != b.0 {
                return Some(SnapshotDifference::Word(pfn(i), a.0, b.0));
            }
            if a.1 != b.1 {
                return Some(SnapshotDifference::Key(pfn(i)));
            }
            if a.2 != b.2 {
                return Some(SnapshotDifference::Pageblock(pfn(i), a.2, b.2));
            }
        }
        (self.counts != after.counts).then_some(SnapshotDifference::Counts)
    }
}
