//! A zone's frames with their geometry: pfn <-> index arithmetic and block lookups.

use core::ops::Range;

use crate::frame::{Frame, FrameState, Word};
use crate::{BuddyError, Order, Pfn, ZoneConfig};

/// The frames of a zone and the configuration that places them.
#[derive(Clone, Copy)]
pub(crate) struct FrameMap<'a> {
    pub(crate) cfg: &'a ZoneConfig,
    pub(crate) frames: &'a [Frame],
}

impl<'a> FrameMap<'a> {
    #[inline]
    pub(crate) fn frame(self, idx: u32) -> &'a Frame {
        &self.frames[idx as usize]
    }

    /// The index of `pfn`, if the zone spans it.
    #[inline]
    pub(crate) fn index(self, pfn: Pfn) -> Result<u32, BuddyError> {
        match pfn.0.checked_sub(self.cfg.start.0) {
            Some(off) if off < self.cfg.nr_pages => Ok(off as u32),
            _ => Err(BuddyError::OutOfZone(pfn)),
        }
    }

    /// The indices of `[pfn, pfn + nr)`, which must lie inside the zone; empty for `nr == 0`
    /// wherever `pfn` is.
    #[inline]
    pub(crate) fn range(self, pfn: Pfn, nr: u64) -> Result<Range<u32>, BuddyError> {
        let end = pfn.checked_add(nr).ok_or(BuddyError::Overflow)?;
        if nr == 0 {
            return Ok(0..0);
        }
        let first = self.index(pfn)?;
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        if end.0 > zone_end {
            return Err(BuddyError::OutOfZone(Pfn(zone_end)));
        }
        Ok(first..first + nr as u32)
    }

    #[inline]
    pub(crate) fn pfn(self, idx: u32) -> Pfn {
        Pfn(self.cfg.start.0 + u64::from(idx))
    }

    /// The index of a frame the caller knows to be inside the zone.
    #[inline]
    pub(crate) fn index_of(self, pfn: Pfn) -> u32 {
        (pfn.0 - self.cfg.start.0) as u32
    }

    /// The index where the memory section of frame `idx` ends (the zone's end at most).
    #[inline]
    pub(crate) fn section_end(self, idx: u32) -> u32 {
        let pfn = self.pfn(idx).0;
        let end = (pfn | (self.cfg.section_pages - 1)).saturating_add(1);
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        (end.min(zone_end) - self.cfg.start.0) as u32
    }

    /// The index of `idx`'s buddy at `order`, if the zone spans it.
    #[inline]
    pub(crate) fn buddy(self, idx: u32, order: Order) -> Option<u32> {
        self.index(order.buddy_of(self.pfn(idx))).ok()
    }

    /// The head of the block holding `idx`: the first head met aligning down whose block
    /// covers `idx`. Without a lock this is a guess (blocks change under it), good only for
    /// naming what is wrong with a request.
    pub(crate) fn block_head(self, idx: u32) -> Option<(u32, Word)> {
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
    pub(crate) fn not_allocated(self, idx: u32, w: Word) -> BuddyError {
        let pfn = self.pfn(idx);
        match w.state() {
            FrameState::Reserved => BuddyError::Hole(pfn),
            FrameState::Leaked => BuddyError::LeakedPage(pfn),
            FrameState::Allocated if w.frozen() => BuddyError::Frozen(pfn),
            FrameState::Buddy
            | FrameState::Pcp
            | FrameState::Freeing
            | FrameState::Zeroing
            | FrameState::Allocated => BuddyError::DoubleFree(pfn),
            FrameState::Tail => match self.block_head(idx).map(|(_, hw)| hw.state()) {
                Some(FrameState::Allocated) => BuddyError::CompoundPage(pfn),
                _ => BuddyError::DoubleFree(pfn),
            },
        }
    }
}
