use core::fmt;
use mm_types::Pfn;

/// The largest order any zone supports (blocks of 2^20 frames).
pub const MAX_SUPPORTED_ORDER: u8 = 20;

/// Why a number of frames or an order is not an [`Order`]; a zone's operations report it as
/// the matching [`BuddyError`](crate::BuddyError) (`ZeroPages`, `OrderTooLarge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderError {
    /// Zero frames: no block holds them.
    ZeroPages,
    /// Above [`MAX_SUPPORTED_ORDER`].
    TooLarge {
        /// The order asked for, or the one the frames would need.
        order: u8,
    },
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroPages => f.write_str("zero frames make no block"),
            Self::TooLarge { order } => {
                write!(
                    f,
                    "order {order} is above the largest supported, {MAX_SUPPORTED_ORDER}"
                )
            }
        }
    }
}

impl core::error::Error for OrderError {}

/// A block order: a block of order `n` is `2^n` frames, naturally aligned.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Order(pub(crate) u8);

impl Order {
    /// Order 0: a single frame.
    pub const ZERO: Self = Self(0);

    /// The largest order a zone supports ([`MAX_SUPPORTED_ORDER`]).
    pub const MAX_SUPPORTED: Self = Self(MAX_SUPPORTED_ORDER);

    /// The order of a 2 MiB block of 4 KiB frames (512 frames; Linux's `HPAGE_PMD_ORDER`
    /// on x86_64 and arm64 with 4 KiB pages): a huge page.
    pub const SIZE_2MIB: Self = Self(9);

    /// The order of a 1 GiB block of 4 KiB frames (262 144 frames; Linux's `PUD_ORDER`): a
    /// gigantic page, above the default MAX_ORDER of a zone (10).
    pub const SIZE_1GIB: Self = Self(18);

    /// An order, if at most [`MAX_SUPPORTED_ORDER`].
    ///
    /// # Errors
    /// [`OrderError::TooLarge`] above that.
    #[inline]
    pub const fn new(order: u8) -> Result<Self, OrderError> {
        if order > MAX_SUPPORTED_ORDER {
            return Err(OrderError::TooLarge { order });
        }
        Ok(Self(order))
    }

    /// The order as a number.
    #[must_use]
    #[inline]
    pub const fn get(self) -> u8 {
        self.0
    }

    /// Frames in a block of this order.
    #[must_use]
    #[inline]
    pub const fn pages(self) -> u64 {
        1 << self.0
    }

    /// The largest order whose block fits in `count` frames, capped at `max` (order 0 for a
    /// count of 0, which fits no block).
    #[must_use]
    #[inline]
    pub const fn floor_log2(count: u64, max: Self) -> Self {
        if count == 0 {
            return Self::ZERO;
        }
        let log = 63 - count.leading_zeros();
        if log >= max.0 as u32 {
            max
        } else {
            Self(log as u8)
        }
    }

    /// The smallest order whose block holds `pages` frames (Linux's `get_order` for a size
    /// in pages): 1 frame is order 0, 3 frames order 2, 512 frames order 9.
    ///
    /// # Errors
    /// [`OrderError::ZeroPages`] for 0 pages; [`OrderError::TooLarge`] (naming the order
    /// `pages` would need) when that is above [`MAX_SUPPORTED_ORDER`].
    #[inline]
    pub const fn covering(pages: u64) -> Result<Self, OrderError> {
        if pages == 0 {
            return Err(OrderError::ZeroPages);
        }
        // ceil(log2(pages)): the bit length of pages - 1 (0 for a single page), at most 64.
        let order = 64 - (pages - 1).leading_zeros();
        if order > MAX_SUPPORTED_ORDER as u32 {
            // At most 64: it fits.
            return Err(OrderError::TooLarge { order: order as u8 });
        }
        Ok(Self(order as u8))
    }

    /// The order of the largest naturally aligned block that starts at `pfn`, capped at `max`
    /// (pfn 0 is aligned to everything, so it gets `max`).
    #[must_use]
    #[inline]
    pub const fn align_of(pfn: Pfn, max: Self) -> Self {
        let tz = pfn.0.trailing_zeros();
        if tz >= max.0 as u32 {
            max
        } else {
            Self(tz as u8)
        }
    }

    /// Whether `pfn` starts a naturally aligned block of this order.
    #[must_use]
    #[inline]
    pub const fn aligns(self, pfn: Pfn) -> bool {
        pfn.0 & (self.pages() - 1) == 0
    }

    /// The buddy of the block of this order at `pfn`: the other half of the block one order
    /// up.
    #[must_use]
    #[inline]
    pub const fn buddy_of(self, pfn: Pfn) -> Pfn {
        Pfn(pfn.0 ^ self.pages())
    }

    /// The next order up.
    #[must_use]
    #[inline]
    pub(crate) const fn up(self) -> Self {
        Self(self.0 + 1)
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where an allocation takes its memory from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodePolicy {
    /// The calling CPU's node first, then the others nearest first (Linux's default).
    Local,
    /// This node first, then the others nearest to it first (`MPOL_PREFERRED`).
    Preferred(NodeId),
    /// This node only (`MPOL_BIND`, `__GFP_THISNODE`): out of memory when it has none.
    Bind(NodeId),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_is_the_smallest_order_that_holds_the_pages() {
        assert_eq!(Order::covering(0), Err(OrderError::ZeroPages));
        assert_eq!(Order::covering(1), Ok(Order(0)));
        assert_eq!(Order::covering(2), Ok(Order(1)));
        assert_eq!(Order::covering(3), Ok(Order(2)));
        assert_eq!(Order::covering(512), Ok(Order(9)));
        assert_eq!(Order::covering(513), Ok(Order(10)));
        assert_eq!(Order::covering(1 << 20), Ok(Order(20)));
        let too_large = |order| Err(OrderError::TooLarge { order });
        assert_eq!(Order::covering((1 << 20) + 1), too_large(21));
        assert_eq!(Order::covering(u64::MAX), too_large(64));
        for pages in 1..=4096u64 {
            let o = Order::covering(pages).unwrap();
            assert!(o.pages() >= pages && (o.0 == 0 || o.pages() / 2 < pages));
        }
    }

    #[test]
    #[inline]
    fn order_arithmetic_is_total() {
        let max = Order(10);
        assert_eq!(Order::floor_log2(0, max), Order::ZERO);
        assert_eq!(Order::floor_log2(1, max), Order::ZERO);
        assert_eq!(Order::floor_log2(1000, max), Order(9));
        assert_eq!(Order::floor_log2(u64::MAX, max), max);
        assert_eq!(Order::align_of(Pfn(0), max), max);
        assert_eq!(Order::align_of(Pfn(0x1004), max), Order(2));
        assert_eq!(Order(2).buddy_of(Pfn(0x1004)), Pfn(0x1000));
        assert!(Order(2).aligns(Pfn(0x1004)) && !Order(3).aligns(Pfn(0x1004)));
        assert!(Order::new(MAX_SUPPORTED_ORDER + 1).is_err());
        assert_eq!(Pfn(u64::MAX).checked_add(1), None);
        assert_eq!(Order::SIZE_2MIB.pages() * 4096, 2 << 20);
        assert_eq!(Order::SIZE_1GIB.pages() * 4096, 1 << 30);
    }
}

/// A frame's index in its zone: its frame number less the zone's first. Made from a frame
/// number only by the zone's checked look-up (`FrameMap::index`), so that each names a frame
/// of its zone; the zone's own arithmetic (a block's buddy and frames, list links) makes the
/// rest. Frame numbers are what the API speaks; indices stay inside the crate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FrameIdx(pub(crate) u32);

impl FrameIdx {
    /// The zone's first frame.
    pub(crate) const FIRST: Self = Self(0);

    /// The index as a number, for the frame array.
    #[inline(always)]
    pub(crate) const fn get(self) -> usize {
        self.0 as usize
    }

    /// The frames `[start, end)`, in order.
    #[inline]
    pub(crate) fn span(start: Self, end: Self) -> impl DoubleEndedIterator<Item = Self> {
        (start.0..end.0).map(Self)
    }

    /// The frames of `range`, in order.
    #[inline]
    pub(crate) fn each(range: core::ops::Range<Self>) -> impl DoubleEndedIterator<Item = Self> {
        Self::span(range.start, range.end)
    }
}

/// A pageblock of a zone, named by the first of its frames in the zone (the zone's first
/// frame for a pageblock the zone starts inside): where its type is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PageblockIdx(pub(crate) FrameIdx);

impl PageblockIdx {
    /// The frame that stores the pageblock's type.
    #[inline(always)]
    pub(crate) const fn first(self) -> FrameIdx {
        self.0
    }
}

/// The frame `n` frames on (inside the zone by the caller's arithmetic).
impl core::ops::Add<u32> for FrameIdx {
    type Output = Self;
    #[inline(always)]
    fn add(self, n: u32) -> Self {
        Self(self.0 + n)
    }
}

impl core::ops::AddAssign<u32> for FrameIdx {
    #[inline(always)]
    fn add_assign(&mut self, n: u32) {
        self.0 += n;
    }
}

/// The frame `n` frames back.
impl core::ops::Sub<u32> for FrameIdx {
    type Output = Self;
    #[inline(always)]
    fn sub(self, n: u32) -> Self {
        Self(self.0 - n)
    }
}

/// Frames from the second to the first.
impl core::ops::Sub for FrameIdx {
    type Output = u32;
    #[inline(always)]
    fn sub(self, start: Self) -> u32 {
        self.0 - start.0
    }
}

impl From<FrameIdx> for u64 {
    #[inline(always)]
    fn from(idx: FrameIdx) -> u64 {
        u64::from(idx.0)
    }
}

/// A NUMA node's number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u8);

impl NodeId {
    /// The node's index into per-node tables.
    pub(crate) const fn index(self) -> usize {
        self.0 as usize
    }
}
