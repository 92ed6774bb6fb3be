//! Grouping by mobility (Linux's migratetypes): every pageblock has a type, every allocation
//! says which kind it is, and the free lists are kept per type so that unmovable and movable
//! allocations fill different pageblocks. An allocation that finds nothing of its type falls
//! back to the other types in Linux's order, claiming a whole pageblock for its own type when
//! the block it takes is large or the pageblock is mostly free or alike
//! (`try_to_claim_block`), else taking one block without changing any type.
//!
//! A pageblock can also be *isolated* (for `alloc_contig_range`): its free blocks sit on
//! lists of their own that no allocation takes from, and frees into it skip the per-cpu
//! lists. Isolation is a bit beside the type (as in Linux 6.16), so undoing it restores the
//! type the pageblock had.
//!
//! Invariants (checked by [`Zone::check`](crate::Zone::check)): a free block in the buddy is
//! on the lists of its pageblock's type (the isolated lists if the pageblock is isolated),
//! and a free block of the pageblock order or above spans pageblocks of one type.

use crate::buddy::FreeArea;
use crate::error::BuddyError;
use crate::frame::{FrameState, Word};
use crate::map::FrameMap;
use crate::types::Order;

/// The kind of an allocation, and the type of a pageblock: which allocations it groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MigrateType {
    /// Pinned for its lifetime: kernel tables, DMA buffers, anything whose frame number is
    /// held where the zone cannot repoint it ([`Zone::alloc_pages`](crate::Zone::alloc_pages)).
    Unmovable = 0,
    /// Can be moved by compaction through the embedder's [`Migrate`](crate::Migrate)
    /// callback: guest memory, anonymous memory behind page tables the embedder owns
    /// ([`Zone::alloc_movable`](crate::Zone::alloc_movable)).
    Movable = 1,
    /// Can be dropped and rebuilt on demand (caches): grouped apart from both.
    Reclaimable = 2,
}

/// Free-list index of an isolated pageblock's free blocks (after the three types).
pub(crate) const ISOLATE: u8 = 3;
/// Free lists per order: the three types and the isolated blocks.
pub(crate) const LIST_TYPES: usize = 4;
/// The pageblock bit that marks it isolated.
const ISOLATED: u32 = 1 << 2;
/// The pageblock bit that says its type was set (all-zero metadata has none).
const INITIALIZED: u32 = 1 << 3;

impl MigrateType {
    /// Every type, in index order.
    pub const ALL: [Self; 3] = [Self::Unmovable, Self::Movable, Self::Reclaimable];

    /// The type of list index `i` (`None` for the isolated lists).
    #[must_use]
    pub(crate) const fn from_index(i: u8) -> Option<Self> {
        match i {
            0 => Some(Self::Unmovable),
            1 => Some(Self::Movable),
            2 => Some(Self::Reclaimable),
            _ => None,
        }
    }

    /// Linux's `fallbacks[]`: where an allocation of this type looks when its own lists are
    /// empty, in order.
    #[must_use]
    pub const fn fallbacks(self) -> [Self; 2] {
        match self {
            Self::Unmovable => [Self::Reclaimable, Self::Movable],
            Self::Movable => [Self::Reclaimable, Self::Unmovable],
            Self::Reclaimable => [Self::Unmovable, Self::Movable],
        }
    }

    /// Linux's `should_try_claim_block`: whether an allocation of this type that falls back
    /// to a free block of `order` tries to claim the block's whole pageblock: always for a
    /// block of half a pageblock or more, and for unmovable and reclaimable allocations
    /// (which would otherwise scatter over movable pageblocks); a small movable fallback just
    /// takes its block.
    #[must_use]
    pub const fn claims_on_fallback(self, order: Order, pageblock_order: Order) -> bool {
        order.get() >= pageblock_order.get() / 2 || !matches!(self, Self::Movable)
    }
}

/// A pageblock's type and isolation, as stored in its first frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pageblock {
    pub(crate) mt: MigrateType,
    pub(crate) isolated: bool,
}

impl Pageblock {
    fn from_bits(bits: u32) -> Self {
        Self {
            mt: MigrateType::from_index((bits & 3) as u8).unwrap_or(MigrateType::Unmovable),
            isolated: bits & ISOLATED != 0,
        }
    }

    pub(crate) const fn bits(self) -> u32 {
        self.mt as u32 | INITIALIZED | if self.isolated { ISOLATED } else { 0 }
    }

    /// The free-list index of its free blocks.
    pub(crate) const fn list(self) -> u8 {
        if self.isolated {
            ISOLATE
        } else {
            self.mt as u8
        }
    }
}

impl FrameMap<'_> {
    /// Frames per pageblock.
    #[inline]
    pub(crate) fn pageblock_pages(self) -> u32 {
        1 << self.cfg.pageblock_order.get()
    }

    /// The index of the frame that stores the pageblock of frame `idx` (its first frame, or
    /// the zone's first for the pageblock the zone starts in).
    #[inline]
    pub(crate) fn pageblock_index(self, idx: u32) -> u32 {
        let first = self.pfn(idx).0 & !(u64::from(self.pageblock_pages()) - 1);
        // At least the zone's start, so the difference fits the index.
        (first.max(self.cfg.start.0) - self.cfg.start.0) as u32
    }

    /// The pageblock of frame `idx`.
    #[inline]
    pub(crate) fn pageblock(self, idx: u32) -> Pageblock {
        Pageblock::from_bits(self.frame(self.pageblock_index(idx)).pageblock_bits())
    }

    /// The free-list index a block freed at `idx` goes to.
    #[inline]
    pub(crate) fn free_list_of(self, idx: u32) -> u8 {
        self.pageblock(idx).list()
    }

    /// The pageblocks that `frames` overlaps, each as its index range cut to the zone.
    pub(crate) fn pageblocks(
        self,
        frames: core::ops::Range<u32>,
    ) -> impl Iterator<Item = core::ops::Range<u32>> {
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
    pub(crate) fn heads(self, from: u32, end: u32) -> impl Iterator<Item = (u32, Word)> {
        let mut at = from;
        core::iter::from_fn(move || {
            let i = (at < end).then_some(at)?;
            let w = self.frame(i).load();
            at = i.saturating_add(1 << w.order().min(crate::types::MAX_SUPPORTED_ORDER));
            Some((i, w))
        })
    }

    /// The index range of the pageblock holding `idx`, cut to the zone.
    pub(crate) fn pageblock_range(self, idx: u32) -> core::ops::Range<u32> {
        let start = self.pageblock_index(idx);
        let aligned = self.pfn(idx).0 & !(u64::from(self.pageblock_pages()) - 1);
        // Saturating: a zone may end at the top of the pfn space, where the pageblock's end
        // does not fit a pfn (the zone's end, which does, cuts it).
        let end_pfn = aligned.saturating_add(u64::from(self.pageblock_pages()));
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        start..(end_pfn.min(zone_end) - self.cfg.start.0) as u32
    }
}

/// Sets every pageblock of the block at `idx` (of `order`, at least the pageblock order) to
/// `mt`, not isolated; under the zone lock, the block on no list.
pub(crate) fn set_pageblocks(m: FrameMap<'_>, idx: u32, order: Order, mt: MigrateType) {
    let bits = Pageblock {
        mt,
        isolated: false,
    }
    .bits();
    let end = idx + order.pages() as u32;
    let mut i = idx;
    while i < end {
        m.frame(m.pageblock_index(i)).set_pageblock_bits(bits);
        i += m.pageblock_pages();
    }
}

impl FreeArea {
    /// Makes the pageblocks `range` (frames being added as usable memory) overlaps movable
    /// if nothing set their type before, as Linux's `memmap_init` does: all memory starts
    /// movable, and the other types claim pageblocks as they need them.
    pub(crate) fn init_pageblocks(&mut self, m: FrameMap<'_>, range: core::ops::Range<u32>) {
        let movable = Pageblock {
            mt: MigrateType::Movable,
            isolated: false,
        };
        for block in m.pageblocks(range.clone()) {
            if m.frame(block.start).pageblock_bits() & INITIALIZED == 0 {
                if block.start >= range.start && block.end <= range.end {
                    // Nothing of it was usable before: no free block to move.
                    m.frame(block.start).set_pageblock_bits(movable.bits());
                } else {
                    self.set_pageblock(m, block.start, movable);
                }
            }
        }
    }

    /// Sets the pageblock holding `idx` to `pb` and moves its free buddy blocks to the lists
    /// that go with it (`move_freepages_block`). Blocks on per-cpu lists stay there; they go
    /// to the pageblock's lists when drained. Only for pageblocks below a free block of the
    /// pageblock order or above (those are moved whole by `set_block_type`).
    pub(crate) fn set_pageblock(&mut self, m: FrameMap<'_>, idx: u32, pb: Pageblock) {
        let range = m.pageblock_range(idx);
        m.frame(range.start).set_pageblock_bits(pb.bits());
        let list = pb.list();
        for (i, w) in m.heads(range.start, range.end) {
            if w.state() == FrameState::Buddy && w.mt() != list {
                let order = Order(w.order());
                let zeroed = self.remove(m, i, order);
                self.insert(m, i, order, zeroed, list);
            }
        }
    }

    /// Sets every pageblock of the free block at `idx` (of `order`, at least the pageblock
    /// order) to `mt`, not isolated, and moves the block to that type's list.
    pub(crate) fn set_block_type(
        &mut self,
        m: FrameMap<'_>,
        idx: u32,
        order: Order,
        mt: MigrateType,
    ) {
        set_pageblocks(m, idx, order, mt);
        let zeroed = self.remove(m, idx, order);
        self.insert(m, idx, order, zeroed, mt as u8);
    }

    /// Linux's `try_to_claim_block`, for an allocation of `mt` that falls back to the free
    /// block at `idx` of `order`: a block of the pageblock order or above becomes `mt` whole;
    /// a smaller one's pageblock becomes `mt` if at least half of it is free or allocated as
    /// `mt` already, its free blocks moving with it. Whether the claim was made.
    pub(crate) fn try_claim(
        &mut self,
        m: FrameMap<'_>,
        idx: u32,
        order: Order,
        mt: MigrateType,
    ) -> bool {
        if order >= m.cfg.pageblock_order {
            self.set_block_type(m, idx, order, mt);
            return true;
        }
        let range = m.pageblock_range(idx);
        let (mut free, mut alike) = (0u32, 0u32);
        // Below the pageblock order, so every block here lies inside the pageblock.
        for (_, w) in m.heads(range.start, range.end) {
            let pages = 1u32 << w.order();
            match w.state() {
                FrameState::Buddy | FrameState::Pcp => free += pages,
                FrameState::Allocated if w.mt() == mt as u8 => alike += pages,
                _ => {}
            }
        }
        if free + alike < m.pageblock_pages() / 2 {
            return false;
        }
        self.set_pageblock(
            m,
            idx,
            Pageblock {
                mt,
                isolated: false,
            },
        );
        true
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
    start: u32,
    end: u32,
    was: MigrateType,
    by: MigrateType,
}

impl PageblockClaim {
    /// The claim for `by` of the free block at `idx` of `order`, taken from `was`'s lists.
    pub(crate) fn of(
        m: FrameMap<'_>,
        idx: u32,
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

impl FreeArea {
    /// Gives the pageblocks of `claim` their type back, moving their free blocks with them;
    /// under the zone lock, after the claiming allocation's block was freed again. A
    /// pageblock whose type changed since (to other than the claiming type) is left alone,
    /// and an isolated one stays isolated.
    pub(crate) fn unclaim_pageblocks(&mut self, m: FrameMap<'_>, claim: PageblockClaim) {
        for block in m.pageblocks(claim.start..claim.end) {
            let pb = m.pageblock(block.start);
            if pb.mt != claim.by {
                continue;
            }
            match m.block_head(block.start) {
                // Free and whole across pageblocks: moved as one (its later pageblocks then
                // read as `was` and are passed over).
                Some((head, w))
                    if w.state() == FrameState::Buddy
                        && w.order() >= m.cfg.pageblock_order.get()
                        && !pb.isolated =>
                {
                    self.set_block_type(m, head, Order(w.order()), claim.was);
                }
                _ => self.set_pageblock(
                    m,
                    block.start,
                    Pageblock {
                        mt: claim.was,
                        ..pb
                    },
                ),
            }
        }
    }
}

/// The indices of the pageblocks that cover the frames `pages` (from [`FrameMap::range`]), cut
/// to the zone.
///
/// # Errors
/// [`BuddyError::ZeroPages`] for an empty range.
pub(crate) fn pageblocks_covering(
    m: FrameMap<'_>,
    pages: core::ops::Range<u32>,
) -> Result<core::ops::Range<u32>, BuddyError> {
    if pages.is_empty() {
        return Err(BuddyError::ZeroPages);
    }
    Ok(m.pageblock_index(pages.start)..m.pageblock_range(pages.end - 1).end)
}

#[cfg(feature = "testing")]
impl<F, P, R> crate::zone::Zone<F, P, R>
where
    F: AsRef<[crate::frame::Frame]>,
    P: AsRef<[crate::pcp::PerCpu<R>]>,
    R: lock_api::RawMutex,
{
    /// Gives this zone's pageblocks the types and isolation of `other`'s (a zone of the same
    /// geometry), moving free blocks with them: for harnesses whose second zone replays an
    /// allocation at the address the first chose (`alloc_pages_at` claims nothing).
    pub(crate) fn copy_pageblocks_from<F2, P2, R2>(&self, other: &crate::zone::Zone<F2, P2, R2>)
    where
        F2: AsRef<[crate::frame::Frame]>,
        P2: AsRef<[crate::pcp::PerCpu<R2>]>,
        R2: lock_api::RawMutex,
    {
        let (m, theirs) = (self.map(), other.map());
        let mut free = self.lock_zone();
        // The frame count fits the indices (`ZoneConfig::validate`).
        for block in m.pageblocks(0..m.frames.len() as u32) {
            let bits = theirs.frame(block.start).pageblock_bits();
            if m.frame(block.start).pageblock_bits() != bits {
                free.set_pageblock(m, block.start, Pageblock::from_bits(bits));
                // The exact bits (an uninitialized pageblock of theirs stays so).
                m.frame(block.start).set_pageblock_bits(bits);
            }
        }
    }
}
