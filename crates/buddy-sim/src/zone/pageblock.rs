//! Grouping by mobility (Linux's migratetypes): every pageblock has a type, every allocation
//! says which kind it is, and the free lists are kept per type so that unmovable and movable
//! allocations fill different pageblocks. An allocation that finds nothing of its type falls
//! back to the other types in Linux's order, claiming a whole pageblock for its own type when
//! the block it takes is large or the pageblock is mostly free or alike
//! (`try_to_claim_block`), else taking one block without changing any type (a steal); in
//! defrag mode only whole free pageblocks (`ALLOC_NOFRAGMENT`). The rules themselves are the
//! buddy's (`FreeArea::rmqueue_claim`, `rmqueue_steal`, `try_claim`).
//!
//! A pageblock can also be *isolated* (for `alloc_contig_range`): its free blocks sit on
//! lists of their own that no allocation takes from, and frees into it skip the per-cpu
//! lists. Isolation is a bit beside the type (as in Linux 6.16), so undoing it restores the
//! type the pageblock had.
//!
//! Invariants (checked by [`Zone::check`](crate::Zone::check)): a free block in the buddy is
//! on the lists of its pageblock's type (the isolated lists if the pageblock is isolated),
//! and a free block of the pageblock order or above spans pageblocks of one type.

use crate::error::contig::ContigError;
use crate::frame::Frame;
use crate::frame::Word;
use crate::migratetype::{MigrateType, Pageblock};
use crate::types::{FrameIdx, Order, PageblockIdx};
use crate::zone::map::FrameMap;
use core::ops::Range;
use mm_types::Pfn;

/// How many frames before a pageblock's last the frame holding its bits is
/// ([`FrameMap::pageblock_bits_index`]), in a pageblock of more frames: the low bits of
/// its offset in the pageblock that are 0, the others 1.
const BITS_BEFORE_END: u64 = 3;

impl<'a> FrameMap<'a> {
    /// Frames per pageblock.
    #[inline]
    pub(crate) fn pageblock_pages(self) -> u32 {
        1 << self.cfg.pageblock_order.get()
    }

    /// The pageblock of frame `idx`, named by its first frame (or the zone's first for the
    /// pageblock the zone starts in).
    #[inline(always)]
    pub(crate) fn pageblock_index(self, idx: FrameIdx) -> PageblockIdx {
        // The frame's offset in its pageblock (its pfn modulo the pageblock's size, a power
        // of two that fits a u32: the low bits suffice), taken off its index: the pageblock's
        // first frame, or the zone's first where the pageblock begins before the zone.
        let within = (self.cfg.start.0 as u32).wrapping_add(idx.0) & self.pageblock_mask;
        PageblockIdx(FrameIdx(idx.0.saturating_sub(within)))
    }

    /// The frame that stores the type of the pageblock holding frame `idx`
    /// ([`FrameMap::pageblock_bits_index`]).
    #[inline(always)]
    pub(crate) fn pageblock_bits_frame(self, idx: FrameIdx) -> &'a Frame {
        self.pageblock_bits_frame_of(self.pfn(idx))
    }

    /// [`FrameMap::pageblock_bits_frame`] of the zone's frame `pfn` (for a caller that has
    /// the pfn: no index to add the zone's start to). Callers pass only pfns of the zone;
    /// another gets some frame of the zone, never a panic.
    #[inline(always)]
    pub(crate) fn pageblock_bits_frame_of(self, pfn: Pfn) -> &'a Frame {
        let mask = u64::from(self.pageblock_mask);
        let last = pfn.0 | mask;
        // The last's offset bits, the lowest cleared: its frame 3 before, or the first of
        // a pageblock of 4 frames or fewer (a mask of 2^k - 1 keeps the bits it has). Wraps
        // past the frames for a frame below the zone: the zone's edges decide.
        let i = (last & !(mask & BITS_BEFORE_END)).wrapping_sub(self.cfg.start.0);
        match usize::try_from(i).ok().and_then(|i| self.frames.get(i)) {
            Some(frame) => frame,
            None => self.frames.at(self.pageblock_bits_index_at_an_edge(last)),
        }
    }

    /// The index of the frame that stores the type of the pageblock holding the zone's
    /// frame `pfn`: the pageblock's frame [`BITS_BEFORE_END`] before its last (its first,
    /// in a pageblock of 4 frames or fewer). Where the zone does not span that frame, the
    /// zone's first frame for the pageblock the zone starts inside, its last for the one it
    /// ends inside. Callers pass only pfns of the zone; another gets some frame of the
    /// zone, never a panic.
    ///
    /// Which frame matters to the cache, not to the allocator. Every free reads the bits,
    /// and every allocation of a block writes its head's word. The frame holding the bits
    /// shares a cache line with the words of the frames from the one before it to the third
    /// after it (frames are 24 bytes, wherever the array starts). Here those are heads of
    /// blocks of at most 4 frames inside the same pageblock. Not its first frame, which
    /// heads every aligned block of the pageblock, of every order; nor its last, whose line
    /// holds the next pageblock's first frame wherever the array does not start a cache
    /// line at a pageblock's first frame (most placements): a CPU freeing a huge page there
    /// pulled the line from the CPU allocating and freeing the next one, and two CPUs doing
    /// so ran at half the speed of one. Linux keeps the bits in an array of their own (the
    /// usemap) for the same reason.
    pub(crate) fn pageblock_bits_index(self, pfn: Pfn) -> usize {
        self.frames.position(self.pageblock_bits_frame_of(pfn))
    }

    /// [`FrameMap::pageblock_bits_index`] of the pageblock ending at pfn `last`, whose bits
    /// frame the zone does not span: the zone's first frame if the zone starts inside the
    /// pageblock past that frame (and spans its end), else the zone's last (the zone ends
    /// inside the pageblock; a refused static zone spans no frame, and none of it is asked
    /// about).
    #[inline(always)]
    fn pageblock_bits_index_at_an_edge(self, last: u64) -> usize {
        let len = self.frames.len();
        if last.wrapping_sub(self.cfg.start.0) < len as u64 {
            0
        } else {
            len.wrapping_sub(1)
        }
    }

    /// The pageblock of frame `idx`: its type and isolation.
    #[inline]
    pub(crate) fn pageblock(self, idx: FrameIdx) -> Pageblock {
        Pageblock::from_bits(self.pageblock_bits_frame(idx).pageblock_bits())
    }

    /// The free-list index a block freed at `idx` goes to (every free asks: read from the
    /// pageblock's bits directly).
    #[inline(always)]
    pub(crate) fn free_list_of(self, idx: FrameIdx) -> u8 {
        Pageblock::list_of_bits(self.pageblock_bits_frame(idx).pageblock_bits())
    }

    /// The pageblocks that `frames` overlaps, each as its index range cut to the zone.
    pub(crate) fn pageblocks(
        self,
        frames: Range<FrameIdx>,
    ) -> impl Iterator<Item = Range<FrameIdx>> {
        let mut at = frames.start;
        core::iter::from_fn(move || {
            let block = (at < frames.end).then(|| self.pageblock_range(at))?;
            at = block.end;
            Some(block)
        })
    }

    /// The block heads from `from` up to `end`, each with its word: a walk that steps over
    /// each block (a reserved frame or a tail, read where a head was expected, steps one
    /// frame). Without a lock the words are a moment's guesses; the step uses the word read,
    /// so a caller may change the block it was given before the walk goes on.
    pub(crate) fn heads(
        self,
        from: FrameIdx,
        end: FrameIdx,
    ) -> impl Iterator<Item = (FrameIdx, Word)> {
        let mut at = from;
        core::iter::from_fn(move || {
            let i = (at < end).then_some(at)?;
            let w = self.frame(i).load();
            let step = 1u32 << w.order().min(crate::types::MAX_SUPPORTED_ORDER);
            at = FrameIdx(i.0.saturating_add(step));
            Some((i, w))
        })
    }

    /// The index range of the pageblock holding `idx`, cut to the zone.
    pub(crate) fn pageblock_range(self, idx: FrameIdx) -> Range<FrameIdx> {
        let start = self.pageblock_index(idx).first();
        let aligned = self.pfn(idx).0 & !(u64::from(self.pageblock_pages()) - 1);
        // Saturating: a zone may end at the top of the pfn space, where the pageblock's end
        // does not fit a pfn (the zone's end, which does, cuts it).
        let end_pfn = aligned.saturating_add(u64::from(self.pageblock_pages()));
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        start..FrameIdx((end_pfn.min(zone_end) - self.cfg.start.0) as u32)
    }
}

/// Sets every pageblock of the block at `idx` (of `order`, at least the pageblock order) to
/// `mt`, not isolated; under the zone lock, the block on no list.
pub(crate) fn set_pageblocks(m: FrameMap<'_>, idx: FrameIdx, order: Order, mt: MigrateType) {
    let bits = Pageblock::of(mt).bits();
    let (pages, stride) = (order.pages(), m.pageblock_pages());
    let end = idx + pages as u32;
    // A free block of the pageblock order or above lies in the zone, pfn-aligned: each of
    // its pageblocks is whole, and their bits frames are a pageblock apart. A stride over
    // the frames then, with no bits frame worked out per pageblock (a 1 GiB claim sets 512).
    let first = m.pageblock_bits_index(m.pfn(idx));
    let last = m.pageblock_bits_index(m.pfn(end - 1));
    let span = (pages / u64::from(stride)).saturating_sub(1) * u64::from(stride);
    if last >= first && (last - first) as u64 == span {
        let frames = m.frames.slice(first..last + 1);
        let mut at = 0;
        while let Some(frame) = frames.get(at) {
            frame.set_pageblock_bits(bits);
            at += stride as usize;
        }
        return;
    }
    let mut i = idx;
    while i < end {
        m.pageblock_bits_frame(i).set_pageblock_bits(bits);
        i += stride;
    }
}

/// Pageblocks a fallback claimed for another type ([`FreeArea::try_claim`]): the block of
/// the pageblock order or above it claimed whole, or the one pageblock of a smaller block,
/// the type they had and the type that claimed them. What
/// [`FreeArea::unclaim_pageblocks`] gives back when the allocation that claimed them is
/// undone (a refused migration's target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageblockClaim {
    /// The frames claimed: `start..end` (a range is not `Copy`).
    pub(crate) start: FrameIdx,
    pub(crate) end: FrameIdx,
    pub(crate) was: MigrateType,
    pub(crate) by: MigrateType,
}

impl PageblockClaim {
    /// The claim for `by` of the free block at `idx` of `order`, taken from `was`'s lists.
    pub(crate) fn of(
        m: FrameMap<'_>,
        idx: FrameIdx,
        order: Order,
        was: MigrateType,
        by: MigrateType,
    ) -> Self {
        let frames = if order >= m.cfg.pageblock_order {
            idx..idx + order.pages() as u32
        } else {
            m.pageblock_range(idx)
        };
        Self {
            start: frames.start,
            end: frames.end,
            was,
            by,
        }
    }
}

/// The indices of the pageblocks that cover the frames `pages` (from [`FrameMap::range`]), cut
/// to the zone.
///
/// # Errors
/// [`ContigError::ZeroPages`] for an empty range.
pub(crate) fn pageblocks_covering(
    m: FrameMap<'_>,
    pages: Range<FrameIdx>,
) -> Result<Range<FrameIdx>, ContigError> {
    if pages.is_empty() {
        return Err(ContigError::ZeroPages);
    }
    Ok(m.pageblock_index(pages.start).first()..m.pageblock_range(pages.end - 1).end)
}

#[cfg(test)]
mod tests {
    use crate::types::FrameIdx;
    use crate::{DefaultRawMutex, Frame, PerCpu, Zone, ZoneConfig};
    use mm_types::Pfn;
    use std::vec::Vec;

    /// Each pageblock's bits live in one frame of it, a different one for each pageblock:
    /// three before its last, or the zone's first or last frame for a pageblock the zone
    /// starts or ends inside past that frame; never the first frame of a whole pageblock,
    /// which heads its aligned blocks.
    #[test]
    fn a_pageblock_keeps_its_bits_in_a_frame_of_its_own() {
        let zones = [
            (0x1000, 4 * 512),
            (0x1000 - 40, 3 * 512 + 100),
            (0x1000 - 2, 512 + 2),
            (0x1000 - 1, 2),
            (7, 300),
            (0x2000 + 3, 509),
        ];
        for (start, frames) in zones {
            let cfg = ZoneConfig::new(Pfn(start), frames);
            let storage: Vec<Frame> = (0..frames).map(|_| Frame::new()).collect();
            let z = Zone::new_empty(cfg, storage, [PerCpu::<DefaultRawMutex>::new()]).unwrap();
            let m = z.map();
            let mut holders = Vec::new();
            let in_zone = |pfn: u64| (start..start + frames).contains(&pfn);
            for i in (0..frames as u32).map(FrameIdx) {
                let range = m.pageblock_range(i);
                let holder = m.pageblock_bits_index(m.pfn(i));
                let base = m.pfn(i).0 & !511;
                let expected = if in_zone(base + 508) {
                    base + 508 - start
                } else if in_zone(base + 511) {
                    0
                } else {
                    frames - 1
                };
                assert_eq!(
                    holder as u64, expected,
                    "zone {start:#x}+{frames}, frame {i:?}"
                );
                assert!(range.contains(&FrameIdx(holder as u32)), "frame {i:?}");
                if range.end.0 - range.start.0 == m.pageblock_pages() {
                    assert_ne!(holder, range.start.get());
                }
                if i == range.start {
                    holders.push(holder);
                }
            }
            // Ascending with the pageblocks: no two share a frame.
            assert!(
                holders.windows(2).all(|w| w[0] < w[1]),
                "zone {start:#x}+{frames}: {holders:?}"
            );
        }
    }

    /// Wherever the frames start in memory (any multiple of 8 bytes past a cache line), the
    /// cache line that holds a whole pageblock's bits holds no word of a frame outside the
    /// pageblock, nor of its first frame: a CPU freeing into one pageblock does not pull
    /// the line another writes a huge page's head in.
    #[test]
    fn a_pageblocks_bits_share_no_cache_line_with_another_pageblocks_heads() {
        const LINE: usize = 64;
        let (word_at, bits_at) = crate::frame::WORD_AND_PAGEBLOCK_AT;
        let frames: u64 = 4 * 512;
        let storage: Vec<Frame> = (0..frames + 8).map(|_| Frame::new()).collect();
        for skip in 0..8 {
            let slice = &storage[skip..skip + frames as usize];
            let z = Zone::new_empty(
                ZoneConfig::new(Pfn(0x1000), frames),
                slice,
                [PerCpu::<DefaultRawMutex>::new()],
            )
            .unwrap();
            let m = z.map();
            let line = |f: &Frame, at: usize| (core::ptr::from_ref(f) as usize + at) / LINE;
            for pageblock in 0..4u32 {
                let first = FrameIdx(pageblock * 512);
                let bits = line(m.pageblock_bits_frame(first), bits_at);
                let outside = [first.0.checked_sub(1), Some(first.0), Some(first.0 + 512)];
                for g in outside
                    .into_iter()
                    .flatten()
                    .filter(|&g| u64::from(g) < frames)
                {
                    assert_ne!(
                        line(m.frame(FrameIdx(g)), word_at),
                        bits,
                        "frames from byte {} of a line, pageblock {pageblock}, frame {g}",
                        (slice.as_ptr() as usize) % LINE
                    );
                }
            }
        }
    }
}
