//! A zone's frames with their geometry: pfn <-> index arithmetic and block lookups.

use core::marker::PhantomData;
use core::ops::Range;
use core::ptr::NonNull;

use crate::error::PfnError;
use crate::error::free::FreeError;
use crate::frame::{Frame, FrameState, TailStores, Word};
use crate::types::{FrameIdx, Order};
use crate::zone::config::ZoneConfig;
use mm_types::Pfn;

/// A zone's frames, `&'a [Frame]` kept as a pointer and a length. Handing a slice
/// reference to a function makes Miri's Stacked Borrows retag it, which visits every frame of
/// the zone: with the list and map helpers taking one on every call, the allocator's tests ran
/// for many minutes under Miri. This is retagged only where a frame is reached (24 bytes).
#[derive(Clone, Copy)]
pub(crate) struct Frames<'a> {
    ptr: NonNull<Frame>,
    len: usize,
    _slice: PhantomData<&'a [Frame]>,
}

// SAFETY: `Frames<'a>` is a `&'a [Frame]` (it reads the frames only as one would), and
// `&[Frame]` is `Send` and `Sync` because `Frame` is `Sync`.
#[allow(unsafe_code)]
unsafe impl Send for Frames<'_> {}
// SAFETY: as for `Send`.
#[allow(unsafe_code)]
unsafe impl Sync for Frames<'_> {}

impl<'a> Frames<'a> {
    /// The frames `frames` points to. Takes a pointer, not the slice reference itself: a
    /// reference argument would be retagged frame by frame under Miri on every call.
    ///
    /// # Safety
    /// `frames` points to frames valid for shared access for `'a`, as a `&'a [Frame]` is (it
    /// comes from one, or from a [`FrameStorage`](crate::FrameStorage) borrowed for `'a`).
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) const unsafe fn from_slice_ptr(frames: *const [Frame]) -> Self {
        Self {
            // SAFETY: a pointer valid for access as a slice is not null.
            ptr: unsafe { NonNull::new_unchecked(frames.cast::<Frame>().cast_mut()) },
            len: frames.len(),
            _slice: PhantomData,
        }
    }

    #[inline]
    pub(crate) const fn len(self) -> usize {
        self.len
    }

    /// Frame `idx`, or `None` past the end.
    #[inline]
    pub(crate) fn get(self, idx: usize) -> Option<&'a Frame> {
        (idx < self.len).then(|| self.at(idx))
    }

    /// Frame `idx`, which the caller knows to be in the zone (an index from the zone's own
    /// lists and arithmetic); panics past the end, as indexing the slice does.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn at(self, idx: usize) -> &'a Frame {
        if idx >= self.len {
            past_the_end(idx, self.len);
        }
        // SAFETY: `idx < len`, so the frame lies in the slice `from_slice_ptr` took, which is
        // borrowed (shared) for `'a`.
        unsafe { self.ptr.add(idx).as_ref() }
    }

    /// The index of `frame`, one of these frames.
    #[inline]
    pub(crate) fn position(self, frame: &Frame) -> usize {
        (core::ptr::from_ref(frame).addr() - self.ptr.as_ptr().addr()) / size_of::<Frame>()
    }

    /// The frames `range`, which the caller knows to be in the zone (panics otherwise, as
    /// slicing does).
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn slice(self, range: Range<usize>) -> &'a [Frame] {
        if range.start > range.end || range.end > self.len {
            past_the_end(range.end, self.len);
        }
        // SAFETY: `range` lies in the slice `from_slice_ptr` took, which is borrowed (shared)
        // for `'a`.
        unsafe {
            core::slice::from_raw_parts(self.ptr.add(range.start).as_ptr(), range.end - range.start)
        }
    }
}

/// The out-of-line panic of [`Frames::at`] and [`Frames::slice`], as slice indexing has.
#[cold]
#[inline(never)]
#[track_caller]
fn past_the_end(end: usize, len: usize) -> ! {
    panic!("frame index {end} past the zone's {len} frames")
}

/// The frames of a zone and the configuration that places them.
#[derive(Clone, Copy)]
pub(crate) struct FrameMap<'a> {
    pub(crate) cfg: &'a ZoneConfig,
    /// [`ZoneConfig::pageblock_mask`], as the zone worked it out.
    pub(crate) pageblock_mask: u32,
    pub(crate) frames: Frames<'a>,
}

impl<'a> FrameMap<'a> {
    #[inline]
    pub(crate) fn frame(self, idx: FrameIdx) -> &'a Frame {
        self.frames.at(idx.get())
    }

    /// The frame of `pfn` among the zone's frames, with one bound test and no panic; `None`
    /// past them. A validated zone's frames are its pages; a static zone refused for the
    /// count of its frames may have more, which no block ever covered.
    #[inline(always)]
    pub(crate) fn frame_of(self, pfn: Pfn) -> Option<&'a Frame> {
        let off = usize::try_from(pfn.0.wrapping_sub(self.cfg.start.0)).ok()?;
        self.frames.get(off)
    }

    /// The frames `pages`, which the caller knows to be in the zone (panics otherwise, as
    /// slicing does).
    #[inline]
    pub(crate) fn frames_in(self, pages: Range<FrameIdx>) -> &'a [Frame] {
        self.frames.slice(pages.start.get()..pages.end.get())
    }

    /// Writes the frames of `blocks` (each a head and its order, free memory being
    /// initialized) after each head as tails ([`TailStores`]); the frame that holds a
    /// pageblock's bits ([`FrameMap::pageblock_bits_index`]) keeps them. Heads are left as
    /// they are.
    pub(crate) fn init_tails(self, blocks: impl IntoIterator<Item = (Pfn, Order)>) {
        let mut stores = TailStores::new();
        for (head, order) in blocks {
            let h = self.index_of(head);
            let tails = h + 1..h + order.pages() as u32;
            for block in self.pageblocks(tails.clone()) {
                // Inside the zone (an index from the zone's own arithmetic): fits a u32.
                let holder = FrameIdx(self.pageblock_bits_index(self.pfn(block.start)) as u32);
                let (start, end) = (block.start.max(tails.start), block.end.min(tails.end));
                for frame in self.frames_in(start..holder.max(start).min(end)) {
                    stores.whole(frame);
                }
                if (start..end).contains(&holder) {
                    stores.keeping_pageblock(self.frame(holder));
                }
                for frame in self.frames_in((holder + 1).max(start).min(end)..end) {
                    stores.whole(frame);
                }
            }
        }
    }

    /// The index of `pfn`, if the zone spans it.
    #[inline]
    pub(crate) fn index(self, pfn: Pfn) -> Result<FrameIdx, PfnError> {
        match pfn.0.checked_sub(self.cfg.start.0) {
            // Below the zone's size, which a validated configuration keeps within u32.
            Some(off) if off < self.cfg.nr_pages => Ok(FrameIdx(off as u32)),
            _ => Err(PfnError::OutOfZone(pfn)),
        }
    }

    /// The indices of `[pfn, pfn + nr)`, which must lie inside the zone; empty for `nr == 0`
    /// wherever `pfn` is.
    #[inline]
    pub(crate) fn range(self, pfn: Pfn, nr: u64) -> Result<Range<FrameIdx>, PfnError> {
        let end = pfn.checked_add(nr).ok_or(PfnError::Overflow)?;
        if nr == 0 {
            return Ok(FrameIdx::FIRST..FrameIdx::FIRST);
        }
        let first = self.index(pfn)?;
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        if end.0 > zone_end {
            return Err(PfnError::OutOfZone(Pfn(zone_end)));
        }
        Ok(first..first + nr as u32)
    }

    #[inline]
    pub(crate) fn pfn(self, idx: FrameIdx) -> Pfn {
        Pfn(self.cfg.start.0 + u64::from(idx.0))
    }

    /// The index of a frame the caller knows to be inside the zone (one the zone's own
    /// arithmetic made from an index: a block from `decompose` over a range it checked).
    #[inline]
    pub(crate) fn index_of(self, pfn: Pfn) -> FrameIdx {
        debug_assert!(self.index(pfn).is_ok(), "frame {pfn} outside the zone");
        FrameIdx((pfn.0 - self.cfg.start.0) as u32)
    }

    /// The index where the memory section of frame `idx` ends (the zone's end at most).
    #[inline]
    pub(crate) fn section_end(self, idx: FrameIdx) -> FrameIdx {
        let pfn = self.pfn(idx).0;
        let end = (pfn | (self.cfg.section_pages - 1)).saturating_add(1);
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        FrameIdx((end.min(zone_end) - self.cfg.start.0) as u32)
    }

    /// The index of `idx`'s buddy at `order`, if the zone spans it.
    #[inline]
    pub(crate) fn buddy(self, idx: FrameIdx, order: Order) -> Option<FrameIdx> {
        self.index(order.buddy_of(self.pfn(idx))).ok()
    }

    /// The head of the block holding `idx`: the first head met aligning down whose block
    /// covers `idx`. Without a lock this is a guess (blocks change under it), good only for
    /// naming what is wrong with a request.
    pub(crate) fn block_head(self, idx: FrameIdx) -> Option<(FrameIdx, Word)> {
        let pfn = self.pfn(idx);
        for o in 0..=self.cfg.max_order.get() {
            let head = Pfn(pfn.0 & !(Order(o).pages() - 1));
            let Ok(h) = self.index(head) else { break };
            let w = self.frame(h).load();
            if w.state() != FrameState::Tail {
                return (w.order() >= o).then_some((h, w));
            }
        }
        None
    }

    /// What is wrong with freeing or referencing frame `idx`, whose word is `w`, as if it
    /// were an allocated block's head.
    pub(crate) fn not_allocated(self, idx: FrameIdx, w: Word) -> FreeError {
        let pfn = self.pfn(idx);
        match w.state() {
            FrameState::Reserved => FreeError::Hole(pfn),
            FrameState::Leaked => FreeError::LeakedPage(pfn),
            FrameState::Allocated if w.frozen() => FreeError::Frozen(pfn),
            FrameState::Buddy
            | FrameState::Pcp
            | FrameState::Freeing
            | FrameState::Zeroing
            | FrameState::Reporting
            | FrameState::Cached
            | FrameState::Allocated => FreeError::DoubleFree(pfn),
            FrameState::Tail => match self.block_head(idx).map(|(_, hw)| hw.state()) {
                Some(FrameState::Allocated) => FreeError::CompoundPage(pfn),
                _ => FreeError::DoubleFree(pfn),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::decompose::decompose;
    use crate::frame::{Frame, FrameState};
    use crate::types::FrameIdx;
    use crate::{DefaultRawMutex, PerCpu, Zone, ZoneConfig};
    use mm_types::Pfn;
    use std::vec::Vec;

    /// Initializing blocks writes every frame after each head as a tail with no links and
    /// no pageblock bits, keeps the bits in the frame that holds them, and leaves the heads
    /// and everything outside the blocks as they were: streaming stores on x86_64, atomic
    /// stores under Miri.
    #[test]
    fn init_tails_writes_whole_tails_and_keeps_pageblock_bits() {
        // Starts inside a pageblock and ends inside one (the zone's last frame holds that
        // one's bits), spanning several whole ones.
        let cfg = ZoneConfig::new(Pfn(0x1000 - 40), 3 * 512 + 100);
        let frames: Vec<Frame> = (0..cfg.nr_pages).map(|_| Frame::new()).collect();
        let z = Zone::new_empty(cfg, frames, [PerCpu::<DefaultRawMutex>::new()]).unwrap();
        let m = z.map();
        let n = cfg.nr_pages as u32;
        let holds_bits = |i: FrameIdx| m.pageblock_bits_index(m.pfn(i)) == i.get();
        for i in (0..n).map(FrameIdx) {
            // Links left over from earlier use; bits where a pageblock keeps them.
            m.frame(i).set_key(0x1234_5678_9abc_def0);
            if holds_bits(i) {
                m.frame(i).set_pageblock_bits(2);
            }
        }
        // Blocks over frames 3..n-5 (the zone's first and last frames left alone).
        let blocks = || decompose(m.pfn(FrameIdx(3)), u64::from(n - 8), cfg.max_order).unwrap();
        m.init_tails(blocks());
        let heads: Vec<u32> = blocks().map(|(pfn, _)| m.index_of(pfn).0).collect();
        assert!(heads.len() > 3);
        for i in (0..n).map(FrameIdx) {
            let f = m.frame(i);
            let inside = (3..n - 5).contains(&i.0) && !heads.contains(&i.0);
            let bits = if holds_bits(i) { 2 } else { 0 };
            if inside {
                assert_eq!(f.info().state, FrameState::Tail, "frame {}", i.0);
                assert_eq!(f.key(), 0, "frame {}", i.0);
            } else {
                assert_eq!(f.info().state, FrameState::Reserved, "frame {}", i.0);
                assert_eq!(f.key(), 0x1234_5678_9abc_def0, "frame {}", i.0);
            }
            assert_eq!(f.pageblock_bits(), bits, "frame {}", i.0);
        }
    }
}
