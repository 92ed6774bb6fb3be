//! Grouping by mobility (Linux's migratetypes), the plain values: the kind of an allocation
//! and the type of a pageblock ([`MigrateType`]), and a pageblock's bits as one of its frames
//! stores them ([`Pageblock`]). What the zone does with them (fallback, claiming, isolation)
//! is the zone core's `pageblock` module.

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

/// Free-list index of a CMA reservation's free blocks (Linux's `MIGRATE_CMA`), after the
/// three types: only movable allocations take from it.
pub(crate) const CMA: u8 = 3;
/// Free-list index of an isolated pageblock's free blocks, after the lists allocations take
/// from.
pub(crate) const ISOLATE: u8 = 4;
/// Free lists per order: the three types, CMA reservations and the isolated blocks.
pub(crate) const LIST_TYPES: usize = 5;
/// The pageblock bit that marks it isolated.
const ISOLATED: u32 = 1 << 2;
/// The pageblock bit that says its type was set (all-zero metadata has none).
pub(crate) const INITIALIZED: u32 = 1 << 3;
/// The pageblock bit that puts it in a CMA reservation (its type is then movable).
const RESERVED_CMA: u32 = 1 << 4;

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

/// A pageblock's type, isolation and CMA reservation, as stored in one of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pageblock {
    pub(crate) mt: MigrateType,
    pub(crate) isolated: bool,
    /// In a CMA reservation (`MIGRATE_CMA`): its type is movable, its free blocks go on the
    /// CMA lists, no fallback claims it, and isolating it keeps the reservation.
    pub(crate) cma: bool,
}

impl Pageblock {
    /// A pageblock of type `mt`, neither isolated nor reserved.
    pub(crate) const fn of(mt: MigrateType) -> Self {
        Self {
            mt,
            isolated: false,
            cma: false,
        }
    }

    pub(crate) fn from_bits(bits: u32) -> Self {
        Self {
            mt: MigrateType::from_index((bits & 3) as u8).unwrap_or(MigrateType::Unmovable),
            isolated: bits & ISOLATED != 0,
            cma: bits & RESERVED_CMA != 0,
        }
    }

    pub(crate) const fn bits(self) -> u32 {
        self.mt as u32
            | INITIALIZED
            | if self.isolated { ISOLATED } else { 0 }
            | if self.cma { RESERVED_CMA } else { 0 }
    }

    /// The free-list index of the free blocks of the pageblock whose bits are `bits`
    /// (what a free reads, without making the pageblock): the isolated lists, a CMA
    /// reservation's, or its type's.
    #[inline(always)]
    pub(crate) const fn list_of_bits(bits: u32) -> u8 {
        if bits & ISOLATED != 0 {
            ISOLATE
        } else if bits & RESERVED_CMA != 0 {
            CMA
        } else {
            match (bits & 3) as u8 {
                // Not a type: read as unmovable, as `from_bits` does.
                3 => MigrateType::Unmovable as u8,
                mt => mt,
            }
        }
    }

    /// The free-list index of its free blocks.
    pub(crate) const fn list(self) -> u8 {
        Self::list_of_bits(self.bits())
    }
}
