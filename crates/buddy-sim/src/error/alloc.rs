//! The allocation family: [`AllocError`].

use crate::error::buddy::BuddyError;
use crate::error::config::ConfigError;
use crate::error::request::RequestConflict;
use crate::migratetype::MigrateType;
use crate::types::Order;
use core::fmt;
use mm_types::Pfn;
use zero_core::ZeroError;

/// Why an allocation failed: [`Cpu::alloc_raw`](crate::Cpu::alloc_raw) and
/// [`Cpu::alloc`](crate::Cpu::alloc), the zone's one-line allocation calls, a node set's
/// allocations, `vmalloc`, and the zeroed pool's background zeroing. Nothing is allocated
/// when one is returned (what it may have changed: [`BuddyError`](crate::BuddyError)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocError {
    /// The zone's configuration, refused when the zone was built at compile time (a
    /// [`StaticZone`](crate::StaticZone) then spans no frames); the [`ConfigError`] says
    /// what is wrong.
    Config(ConfigError),
    /// No CPU with this index.
    BadCpu(usize),
    /// A [`NodeSet`](crate::NodeSet) call named a node the topology does not have.
    BadNode(u32),
    /// An [`AllocRequest`](crate::AllocRequest) whose options do not go together.
    Conflict(RequestConflict),
    /// An order above the zone's MAX_ORDER (or above [`crate::MAX_SUPPORTED_ORDER`]).
    OrderTooLarge {
        /// The order asked for.
        order: u8,
        /// The largest allowed.
        max: u8,
    },
    /// A request for zero frames ([`Order::covering`], [`AllocRequest::frames`](crate::AllocRequest::frames)).
    ZeroPages,
    /// No free block large enough.
    OutOfMemory(Order),
    /// `alloc_zeroed`: the fault offset lies outside the block.
    FaultOutsideBlock {
        /// The order asked for.
        order: Order,
        /// The byte offset given.
        offset: usize,
    },
    /// An adapter cannot reach the frame: its physical address does not fit the
    /// architecture's physical address space (52 bits on x86_64), or the embedder's
    /// `FrameMemory` does not map it.
    NotAddressable(Pfn),
    /// zero-core refused to clear the block; its error says which check failed (with a
    /// [`FrameMemory`](crate::FrameMemory) that keeps its contract, only an address range
    /// that overflows can).
    Clear {
        /// The block's first frame.
        pfn: Pfn,
        /// zero-core's error.
        error: ZeroError,
    },
    /// A block the zone knew to be zero does not read zero (a verifying
    /// [`FrameClearer`](crate::FrameClearer) found it): something wrote it after it was freed.
    StaleZero(Pfn),
    /// `vmalloc`'s run buffer is too small for the runs it allocated.
    RunsFull,
    /// A block of this kind asked of a movable-only zone
    /// ([`ZoneConfig::movable_only`](crate::ZoneConfig::movable_only)), which serves
    /// movable blocks and contiguous runs only.
    MovableOnly(MigrateType),
    /// A run [`from_cma`](crate::AllocRequest::from_cma) an area whose frame is not in a CMA
    /// reservation of the zone (or lies outside it).
    NotCma(Pfn),
}

impl From<AllocError> for BuddyError {
    fn from(e: AllocError) -> Self {
        match e {
            AllocError::Config(x) => Self::Config(x),
            AllocError::BadCpu(x) => Self::BadCpu(x),
            AllocError::BadNode(x) => Self::BadNode(x),
            AllocError::Conflict(x) => Self::Conflict(x),
            AllocError::OrderTooLarge { order, max } => Self::OrderTooLarge { order, max },
            AllocError::ZeroPages => Self::ZeroPages,
            AllocError::OutOfMemory(x) => Self::OutOfMemory(x),
            AllocError::FaultOutsideBlock { order, offset } => {
                Self::FaultOutsideBlock { order, offset }
            }
            AllocError::NotAddressable(x) => Self::NotAddressable(x),
            AllocError::Clear { pfn, error } => Self::Clear { pfn, error },
            AllocError::StaleZero(x) => Self::StaleZero(x),
            AllocError::RunsFull => Self::RunsFull,
            AllocError::MovableOnly(x) => Self::MovableOnly(x),
            AllocError::NotCma(x) => Self::NotCma(x),
        }
    }
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&BuddyError::from(*self), f)
    }
}

impl core::error::Error for AllocError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Clear { error, .. } => Some(error),
            _ => None,
        }
    }
}
