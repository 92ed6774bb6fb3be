//! What a zone writes into the blocks freed to it, as Linux's debugging options do:
//! `init_on_free` clears every block a caller frees before it goes back, so no data outlives
//! its owner in free memory, and here (beyond Linux) it goes back known zero, so that a
//! zeroed allocation that takes it clears nothing; page poisoning (`page_poison=1`) writes
//! [`PAGE_POISON`] over every free block and checks, on allocation, that the block still
//! reads it: a byte that differs was written after its block was freed (a use after free),
//! and the zone names the first one ([`Zone::poison_corruption`](crate::Zone::poison_corruption)). Both write through the
//! embedder's memory ([`FrameClearer`]): `init_on_free` with zero-core's policy for the
//! block's size, poisoning with a `memset` (zero-core clears, it does not fill).

use core::fmt;

use crate::memory::{FrameClearer, OffsetMap};
use crate::sync::Mutex;
use crate::types::Order;
use lock_api::RawMutex;
use mm_types::Pfn;

/// The byte page poisoning writes over free memory (Linux's `PAGE_POISON`).
pub const PAGE_POISON: u8 = 0xaa;

/// A use after free that page poisoning found: the first block handed out since poisoning
/// was on whose bytes did not all read [`PAGE_POISON`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoisonCorruption {
    /// The block's first frame.
    pub pfn: Pfn,
    /// Its order.
    pub order: Order,
    /// The offset of the first byte that differs, from the block's first byte.
    pub offset: u64,
    /// What that byte read.
    pub found: u8,
    /// Blocks found corrupted so far, this one included.
    pub blocks: u64,
}

impl fmt::Display for PoisonCorruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pagealloc: memory corruption: byte {:#x} of the order-{} block at pfn {:#x} reads {:#04x}, not {PAGE_POISON:#04x} ({} corrupted blocks)",
            self.offset,
            self.order.get(),
            self.pfn.0,
            self.found,
            self.blocks
        )
    }
}

/// Why [`Zone::set_page_poison`](crate::Zone::set_page_poison) refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoisonError {
    /// Frames were added to the zone already: poisoning must be on before the first (as
    /// Linux's `page_poison=1` is a boot option), so that every free block reads the
    /// poison.
    MemoryAdded,
    /// `init_on_free` is on: a freed block is either cleared or poisoned.
    InitOnFree,
}

impl fmt::Display for PoisonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MemoryAdded => "page poisoning must be on before memory is added to the zone",
            Self::InitOnFree => {
                "init_on_free is on: a freed block is cleared or poisoned, not both"
            }
        })
    }
}

impl core::error::Error for PoisonError {}

/// What a free writes, and through which memory.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FreeInit {
    /// `init_on_free`: cleared.
    Zero,
    /// Page poisoning: filled with [`PAGE_POISON`].
    Poison,
}

/// A zone's free-time writes: the mode and clearer under a lock of their own (frees look
/// only while the zone's debugging switch has one of their bits set), and the first
/// corruption found.
pub(crate) struct FreeTimeInit<R> {
    pub(crate) mode: Mutex<R, Option<(FreeInit, FrameClearer<OffsetMap>)>>,
    pub(crate) corruption: Mutex<R, Option<PoisonCorruption>>,
}

impl<R: RawMutex> FreeTimeInit<R> {
    /// Off.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            mode: Mutex::new(None),
            corruption: Mutex::new(None),
        }
    }

    /// Off.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            mode: Mutex::new(None),
            corruption: Mutex::new(None),
        }
    }
}
