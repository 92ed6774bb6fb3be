//! The family of frees and references: [`FreeError`].

use crate::error::buddy::BuddyError;
use crate::types::Order;
use core::fmt;
use mm_types::Pfn;

/// Why a free or a reference operation was refused: `free_pages`, `put_page`,
/// `free_contig_range`, `free_contig_frozen_range`, `vfree`, `get_page`, `split_page`,
/// `mark_hwpoison`. Nothing is freed when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FreeError {
    /// No CPU with this index.
    BadCpu(usize),
    /// A frame outside the zone.
    OutOfZone(Pfn),
    /// `pfn + nr` overflows.
    Overflow,
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
    /// The block is frozen: a page of `alloc_contig_frozen_range` (free it with
    /// `free_contig_frozen_range`), or a movable block compaction is moving at this instant
    /// (try again).
    Frozen(Pfn),
    /// `free_contig_frozen_range`: the page is allocated with a reference count, not frozen.
    NotFrozen(Pfn),
    /// `vfree`: the page is not one that `vmalloc` handed out, or `vfree` already released
    /// it (or the area names it twice).
    NotVmalloc(Pfn),
    /// The frame is not usable memory: a hole in the memory map, or a range not yet added.
    Hole(Pfn),
}

impl From<FreeError> for BuddyError {
    fn from(e: FreeError) -> Self {
        match e {
            FreeError::BadCpu(x) => Self::BadCpu(x),
            FreeError::OutOfZone(x) => Self::OutOfZone(x),
            FreeError::Overflow => Self::Overflow,
            FreeError::DoubleFree(x) => Self::DoubleFree(x),
            FreeError::LeakedPage(x) => Self::LeakedPage(x),
            FreeError::CompoundPage(x) => Self::CompoundPage(x),
            FreeError::OrderMismatch {
                pfn,
                given,
                allocated,
            } => Self::OrderMismatch {
                pfn,
                given,
                allocated,
            },
            FreeError::Shared(x) => Self::Shared(x),
            FreeError::RefcountOverflow(x) => Self::RefcountOverflow(x),
            FreeError::Frozen(x) => Self::Frozen(x),
            FreeError::NotFrozen(x) => Self::NotFrozen(x),
            FreeError::NotVmalloc(x) => Self::NotVmalloc(x),
            FreeError::Hole(x) => Self::Hole(x),
        }
    }
}

impl fmt::Display for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&BuddyError::from(*self), f)
    }
}

impl core::error::Error for FreeError {}
