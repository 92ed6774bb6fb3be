//! The family of contiguous ranges and migration: [`ContigError`].

use crate::error::buddy::BuddyError;
use crate::types::Order;
use core::fmt;
use mm_types::Pfn;

/// Why a contiguous range could not be taken, or a block not moved: `alloc_contig_range`,
/// `alloc_contig_frozen_range`, `offline_range` (which takes a range out of the zone the
/// same way), `alloc_pages_at`, `compact`, [`Migration::copy`](crate::Migration::copy).
/// Nothing is allocated or taken offline when one is returned (what it may have changed:
/// [`BuddyError`](crate::BuddyError)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContigError {
    /// No CPU with this index.
    BadCpu(usize),
    /// A frame outside the zone.
    OutOfZone(Pfn),
    /// `pfn + nr` overflows.
    Overflow,
    /// An order above the zone's MAX_ORDER (or above [`crate::MAX_SUPPORTED_ORDER`]).
    OrderTooLarge {
        /// The order asked for.
        order: u8,
        /// The largest allowed.
        max: u8,
    },
    /// A request for zero frames ([`Order::covering`], [`AllocRequest::frames`](crate::AllocRequest::frames)).
    ZeroPages,
    /// `alloc_contig_range`: the frame is in the way: allocated and not movable (or pinned,
    /// or its move was refused), or a free block another CPU holds on its per-cpu list, or
    /// in a pageblock another contiguous allocation has isolated. Nothing is allocated.
    Busy(Pfn),
    /// The frame is not usable memory: a hole in the memory map, or a range not yet added.
    Hole(Pfn),
    /// The frame does not start a naturally aligned block of the order asked for.
    Misaligned {
        /// The frame.
        pfn: Pfn,
        /// The order.
        order: Order,
    },
    /// The frame was leaked after a failed free-time check (hwpoison); it cannot be used.
    LeakedPage(Pfn),
    /// No free block large enough.
    OutOfMemory(Order),
    /// `offline_range`: the zone's table of added ranges has no room for the two pieces the
    /// range would cut a recorded range into ([`MAX_ADDED_RANGES`](crate::MAX_ADDED_RANGES)).
    /// Nothing is offlined.
    RangesFull,
    /// The block is not wholly free in the buddy (it is allocated, leaked, or on a per-cpu
    /// list: drain first).
    NotInBuddy(Pfn),
    /// An adapter cannot reach the frame: its physical address does not fit the
    /// architecture's physical address space (52 bits on x86_64), or the embedder's
    /// `FrameMemory` does not map it.
    NotAddressable(Pfn),
    /// `reserve_cma`: the frame is in a CMA reservation already. Nothing is reserved.
    InCma(Pfn),
    /// A [`NodeSet`](crate::NodeSet) call named a node the topology does not have.
    BadNode(u32),
    /// The frames lie in no zone of the node named, or (`offline_range`) in more than one
    /// zone: the frame is the first outside the zone the range starts in.
    NotInNode {
        /// The first frame of the range that is not where it should be.
        pfn: Pfn,
        /// The node named (or the node of the range's first frame).
        node: u32,
    },
}

impl From<ContigError> for BuddyError {
    fn from(e: ContigError) -> Self {
        match e {
            ContigError::BadCpu(x) => Self::BadCpu(x),
            ContigError::OutOfZone(x) => Self::OutOfZone(x),
            ContigError::Overflow => Self::Overflow,
            ContigError::OrderTooLarge { order, max } => Self::OrderTooLarge { order, max },
            ContigError::ZeroPages => Self::ZeroPages,
            ContigError::Busy(x) => Self::Busy(x),
            ContigError::Hole(x) => Self::Hole(x),
            ContigError::Misaligned { pfn, order } => Self::Misaligned { pfn, order },
            ContigError::LeakedPage(x) => Self::LeakedPage(x),
            ContigError::OutOfMemory(x) => Self::OutOfMemory(x),
            ContigError::RangesFull => Self::RangesFull,
            ContigError::NotInBuddy(x) => Self::NotInBuddy(x),
            ContigError::NotAddressable(x) => Self::NotAddressable(x),
            ContigError::InCma(x) => Self::InCma(x),
            ContigError::BadNode(x) => Self::BadNode(x),
            ContigError::NotInNode { pfn, node } => Self::NotInNode { pfn, node },
        }
    }
}

impl fmt::Display for ContigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&BuddyError::from(*self), f)
    }
}

impl core::error::Error for ContigError {}
