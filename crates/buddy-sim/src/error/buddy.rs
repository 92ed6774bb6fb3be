//! Every error of the crate in one type: [`BuddyError`].

use crate::error::config::ConfigError;
use crate::error::request::RequestConflict;
use crate::migratetype::MigrateType;
use crate::types::Order;
use core::fmt;
use mm_types::Pfn;
use zero_core::ZeroError;

/// What was wrong with a request, whichever family of operations made it: every variant of
/// [`AllocError`](crate::AllocError), [`FreeError`](crate::FreeError),
/// [`MapError`](crate::MapError), [`ContigError`](crate::ContigError) and
/// [`NoSuchCpu`](crate::NoSuchCpu), each converting into it with `?`, and [`ConfigError`].
/// The ecosystem adapters, whose calls span families, keep their last error as one.
///
/// What an operation that fails never changes: which frames are allocated and to whom,
/// reference counts, the contents of any allocated frame, and the number of free frames.
/// What it may have changed, only where the operation says so:
/// - a failed allocation (`OutOfMemory`) first drains every CPU's per-cpu
///   lists back to the buddy (Linux's `drain_all_pages`) and merges free buddies that were
///   kept apart because only one of them was known zero, so those blocks are no longer
///   known zero ([`Zone::zeroed_pages`](crate::Zone::zeroed_pages) drops), and initializes
///   deferred frames ([`Zone::init_deferred`](crate::Zone::init_deferred));
/// - `alloc_pages_at` drains the lists of a CPU that held part of the block;
/// - a zeroed allocation frees the block it took again, no longer known zero, when clearing
///   it failed (`Clear`, `NotAddressable`) or it did not read zero (`StaleZero`);
/// - `zero_some` keeps the blocks it cleared before the one that failed as known zero;
/// - `alloc_contig_range`, a [`contiguous`](crate::AllocRequest::contiguous) request and
///   `offline_range` drain the per-cpu lists
///   (`offline_range` also initializes every deferred frame first), and the movable blocks
///   they moved out of a range before it failed stay where they went (their owners' `Migrate`
///   callbacks saw the moves); the isolation is undone, and a move the callback refused
///   leaves its target block as it was (known zero, and the type of its pageblock, included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuddyError {
    /// A configuration (of a zone, its metadata, a topology, a node set, a clearer, a direct
    /// map) that cannot be used; the [`ConfigError`] says what is wrong.
    Config(ConfigError),
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
    /// No CPU with this index.
    BadCpu(usize),
    /// A request for zero frames ([`Order::covering`], [`AllocRequest::frames`](crate::AllocRequest::frames)).
    ZeroPages,
    /// No free block large enough.
    OutOfMemory(Order),
    /// The frame is already free.
    DoubleFree(Pfn),
    /// The frame was leaked after a failed free-time check (hwpoison); it cannot be used.
    LeakedPage(Pfn),
    /// The frame is inside a high-order allocation that was not split: only split order-0
    /// pages belong in `free_contig_range` (the kernel warns and frees nothing).
    CompoundPage(Pfn),
    /// The frame is the head of an allocation of another order.
    OrderMismatch {
        /// The frame.
        pfn: Pfn,
        /// The order given.
        given: Order,
        /// The order allocated.
        allocated: Order,
    },
    /// `split_page` on a block with more than one reference.
    Shared(Pfn),
    /// A reference count would overflow.
    RefcountOverflow(Pfn),
    /// `vmalloc`'s run buffer is too small for the runs it allocated.
    RunsFull,
    /// A block of this kind asked of a movable-only zone.
    MovableOnly(MigrateType),
    /// [`AllocRequest::from_cma`](crate::AllocRequest::from_cma): the frame, inside the area
    /// named, is not in a CMA reservation of the zone (or lies outside it).
    NotCma(Pfn),
    /// `reserve_cma`: the frame is in a CMA reservation already.
    InCma(Pfn),
    /// The frame does not start a naturally aligned block of the order asked for.
    Misaligned {
        /// The frame.
        pfn: Pfn,
        /// The order.
        order: Order,
    },
    /// The block is not wholly free in the buddy (it is allocated, leaked, or on a per-cpu
    /// list: drain first).
    NotInBuddy(Pfn),
    /// The frame is not usable memory: a hole in the memory map, or a range not yet added.
    Hole(Pfn),
    /// `add_memory`: the frame is usable memory already.
    AlreadyAdded(Pfn),
    /// `vfree`: the page is not one that `vmalloc` handed out, or `vfree` already released
    /// it (or the area names it twice).
    NotVmalloc(Pfn),
    /// An adapter cannot reach the frame: its physical address does not fit the
    /// architecture's physical address space (52 bits on x86_64), or the embedder's
    /// `FrameMemory` does not map it.
    NotAddressable(Pfn),
    /// A block the zone knew to be zero does not read zero (a verifying
    /// [`FrameClearer`](crate::FrameClearer) found it): something wrote it after it was freed.
    StaleZero(Pfn),
    /// `alloc_zeroed`: the fault offset lies outside the block.
    FaultOutsideBlock {
        /// The order asked for.
        order: Order,
        /// The byte offset given.
        offset: usize,
    },
    /// zero-core refused to clear the block; its error says which check failed (with a
    /// [`FrameMemory`](crate::FrameMemory) that keeps its contract, only an address range
    /// that overflows can).
    Clear {
        /// The block's first frame.
        pfn: Pfn,
        /// zero-core's error.
        error: ZeroError,
    },
    /// The block is frozen: a page of `alloc_contig_frozen_range` (free it with
    /// `free_contig_frozen_range`), or a movable block compaction is moving at this instant
    /// (try again).
    Frozen(Pfn),
    /// `free_contig_frozen_range`: the page is allocated with a reference count, not frozen.
    NotFrozen(Pfn),
    /// `alloc_contig_range`: the frame is in the way: allocated and not movable (or pinned,
    /// or its move was refused), or a free block another CPU holds on its per-cpu list, or
    /// in a pageblock another contiguous allocation has isolated. Nothing is allocated.
    Busy(Pfn),
    /// `offline_range`: the zone's table of added ranges has no room for the two pieces the
    /// range would cut a recorded range into ([`MAX_ADDED_RANGES`](crate::MAX_ADDED_RANGES)).
    /// Nothing is offlined.
    RangesFull,
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
    /// An [`AllocRequest`](crate::AllocRequest) whose options do not go together.
    Conflict(RequestConflict),
    /// A free page reporting call refused; the [`ReportError`](crate::ReportError) says why.
    Report(crate::error::report::ReportError),
    /// A pointer handed back (aarch64-paging's `deallocate_table`) that the
    /// [`FrameMemory`](crate::FrameMemory) does not map to a frame.
    NotAFrame {
        /// The pointer's address.
        addr: usize,
    },
}

impl fmt::Display for BuddyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Config(e) => write!(f, "bad configuration: {e}"),
            Self::Report(e) => write!(f, "free page reporting: {e}"),
            Self::OutOfZone(p) => write!(f, "frame {p} is outside the zone"),
            Self::Overflow => f.write_str("frame arithmetic overflows"),
            Self::OrderTooLarge { order, max } => {
                write!(f, "order {order} is above the maximum {max}")
            }
            Self::BadCpu(c) => write!(f, "no CPU {c}"),
            Self::ZeroPages => f.write_str("a request for zero frames"),
            Self::OutOfMemory(o) => write!(f, "no free block of order {o} or above"),
            Self::DoubleFree(p) => write!(f, "frame {p} is already free"),
            Self::LeakedPage(p) => write!(f, "frame {p} was leaked (hwpoison) and cannot be freed"),
            Self::CompoundPage(p) => {
                write!(f, "frame {p} belongs to an unsplit high-order allocation")
            }
            Self::OrderMismatch {
                pfn,
                given,
                allocated,
            } => {
                write!(
                    f,
                    "frame {pfn} was allocated at order {allocated}, not {given}"
                )
            }
            Self::Shared(p) => write!(f, "frame {p} has more than one reference"),
            Self::RefcountOverflow(p) => write!(f, "frame {p}'s reference count would overflow"),
            Self::RunsFull => f.write_str("the run buffer given to vmalloc is too small"),
            Self::MovableOnly(mt) => write!(
                f,
                "a {mt:?} allocation from a movable-only zone (it serves movable blocks and \
                 contiguous runs)"
            ),
            Self::NotCma(p) => write!(f, "frame {p} is not in a CMA reservation of the zone"),
            Self::InCma(p) => write!(f, "frame {p} is in a CMA reservation already"),
            Self::Misaligned { pfn, order } => {
                write!(
                    f,
                    "frame {pfn} does not start an aligned block of order {order}"
                )
            }
            Self::NotInBuddy(p) => write!(f, "frame {p} is not free in the buddy"),
            Self::Hole(p) => write!(f, "frame {p} is in a hole of the memory map"),
            Self::AlreadyAdded(p) => write!(f, "frame {p} is usable memory already"),
            Self::NotAddressable(p) => {
                write!(
                    f,
                    "frame {p} cannot be reached: beyond the physical address space or unmapped"
                )
            }
            Self::StaleZero(p) => {
                write!(
                    f,
                    "frame {p} was known zero but does not read zero (written after free)"
                )
            }
            Self::FaultOutsideBlock { order, offset } => {
                write!(
                    f,
                    "fault offset {offset} is outside a block of order {order}"
                )
            }
            Self::NotVmalloc(p) => {
                write!(
                    f,
                    "frame {p} is not a page vmalloc handed out (or vfree released it)"
                )
            }
            Self::Clear { pfn, error } => write!(f, "clearing the block at frame {pfn}: {error}"),
            Self::Frozen(p) => write!(f, "frame {p} is frozen (no reference count)"),
            Self::NotFrozen(p) => write!(f, "frame {p} is not a frozen page"),
            Self::Busy(p) => write!(
                f,
                "frame {p} is in use and cannot be moved out of the range"
            ),
            Self::RangesFull => {
                f.write_str("the zone's table of added ranges cannot record the range split in two")
            }
            Self::BadNode(n) => write!(f, "no node {n}"),
            Self::NotInNode { pfn, node } => {
                write!(
                    f,
                    "frame {pfn} is not in the zone of node {node} the range needs"
                )
            }
            Self::NotAFrame { addr } => {
                write!(f, "address {addr:#x} is not a frame the FrameMemory maps")
            }
            Self::Conflict(c) => write!(f, "allocation request: {c}"),
        }
    }
}

impl core::error::Error for BuddyError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Clear { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<crate::error::report::ReportError> for BuddyError {
    fn from(e: crate::error::report::ReportError) -> Self {
        Self::Report(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    /// Every allocation returns a `Result<Pfn, BuddyError>`: at 32 bytes it comes back in
    /// the same memory as before the configuration errors were typed (40 bytes cost the
    /// order-0 round trip about 10%).
    #[test]
    fn an_error_is_no_larger_than_four_words() {
        assert!(core::mem::size_of::<BuddyError>() <= 32);
        assert!(core::mem::size_of::<Result<mm_types::Pfn, BuddyError>>() <= 32);
    }

    #[test]
    fn a_clearing_error_carries_zero_cores_whole() {
        let error = ZeroError::Overflow;
        let e = BuddyError::Clear { pfn: Pfn(7), error };
        assert_eq!(
            e.to_string(),
            "clearing the block at frame 0x7: address or length arithmetic overflows"
        );
        let source = core::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source, Some(error.to_string()));
        assert!(core::error::Error::source(&BuddyError::Overflow).is_none());
    }
}
