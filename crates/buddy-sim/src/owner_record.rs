//! page_owner's records, in storage the embedder provides ([`OwnerRecord`], one per frame),
//! and the zone's page_owner state; what the zone does with them is `page_owner`'s.

use core::fmt;

use crate::migratetype::MigrateType;
use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use crate::types::Order;
use mm_types::Pfn;

/// One frame's page_owner record: empty, or the allocation of the block it heads.
#[derive(Debug)]
pub struct OwnerRecord {
    /// Bit 63: allocated; bits 0..8 the order, 8..10 the kind, 16..32 the CPU.
    meta: AtomicU64,
    tag: AtomicU64,
    seq: AtomicU64,
}

/// The meta word's "allocated" bit.
const LIVE: u64 = 1 << 63;
/// The CPU of an allocation made for no CPU in particular (`alloc_pages_at`).
pub const NO_CPU: u16 = u16::MAX;

impl OwnerRecord {
    /// An empty record.
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new() -> Self {
        Self {
            meta: AtomicU64::new(0),
            tag: AtomicU64::new(0),
            seq: AtomicU64::new(0),
        }
    }

    /// An empty record.
    #[cfg(loom)]
    #[must_use]
    pub fn new() -> Self {
        Self {
            meta: AtomicU64::new(0),
            tag: AtomicU64::new(0),
            seq: AtomicU64::new(0),
        }
    }

    pub(crate) fn set(&self, order: Order, mt: MigrateType, cpu: u16, tag: u64, seq: u64) {
        self.publish(order, mt, (cpu, tag, seq), Ordering::Release);
    }

    /// Writes the fields, then publishes them with the meta word stored with `publish`
    /// (`Release`: a reader that sees the record live sees its fields; the loom model's
    /// negative control passes `Relaxed`).
    pub(crate) fn publish(
        &self,
        order: Order,
        mt: MigrateType,
        (cpu, tag, seq): (u16, u64, u64),
        publish: Ordering,
    ) {
        self.tag.store(tag, Ordering::Relaxed);
        self.seq.store(seq, Ordering::Relaxed);
        let meta = LIVE | u64::from(order.get()) | (mt as u64) << 8 | u64::from(cpu) << 16;
        self.meta.store(meta, publish);
    }

    pub(crate) fn clear(&self) {
        self.meta.store(0, Ordering::Release);
    }

    /// Records in `to` this record's allocation, with `order` if given (a piece of a split
    /// block; `to` may be this record), else with its own (the block moved); `to` is left as
    /// it was if this record is empty.
    pub(crate) fn copy_to(&self, to: &Self, order: Option<Order>) {
        let meta = self.meta.load(Ordering::Acquire);
        if meta & LIVE == 0 {
            return;
        }
        let order = order.unwrap_or(Order((meta & 0xff) as u8));
        let cpu = (meta >> 16) as u16;
        let kind = MigrateType::ALL[((meta >> 8) & 3) as usize % 3];
        let fields = (
            cpu,
            self.tag.load(Ordering::Relaxed),
            self.seq.load(Ordering::Relaxed),
        );
        to.publish(order, kind, fields, Ordering::Release);
    }

    /// The allocation recorded, if any, as the block at `pfn`.
    pub(crate) fn read(&self, pfn: Pfn) -> Option<OwnedBlock> {
        let meta = self.meta.load(Ordering::Acquire);
        if meta & LIVE == 0 {
            return None;
        }
        Some(OwnedBlock {
            pfn,
            order: Order((meta & 0xff) as u8),
            kind: MigrateType::ALL[((meta >> 8) & 3) as usize % 3],
            cpu: (meta >> 16) as u16,
            tag: self.tag.load(Ordering::Relaxed),
            seq: self.seq.load(Ordering::Relaxed),
        })
    }
}

impl Default for OwnerRecord {
    fn default() -> Self {
        Self::new()
    }
}

/// A block allocated, as its page_owner record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnedBlock {
    /// Its first frame.
    pub pfn: Pfn,
    /// Its order.
    pub order: Order,
    /// Its kind.
    pub kind: MigrateType,
    /// The CPU that allocated it ([`NO_CPU`] for none in particular).
    pub cpu: u16,
    /// That CPU's owner tag then ([`Zone::set_owner_tag`](crate::Zone::set_owner_tag)).
    pub tag: u64,
    /// Its place in the zone's allocation order (see [`Zone::owner_mark`](crate::Zone::owner_mark)).
    pub seq: u64,
}

/// Why [`Zone::enable_page_owner`](crate::Zone::enable_page_owner) refused a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageOwnerError {
    /// The table has fewer records than the zone spans frames.
    TooShort {
        /// Records given.
        records: usize,
        /// Frames the zone spans.
        frames: u64,
    },
    /// The zone already records owners (into the table it was given first).
    AlreadyEnabled,
}

impl fmt::Display for PageOwnerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { records, frames } => write!(
                f,
                "a page_owner table of {records} records for a zone of {frames} frames"
            ),
            Self::AlreadyEnabled => f.write_str("page_owner is already enabled on this zone"),
        }
    }
}

impl core::error::Error for PageOwnerError {}

/// A zone's page_owner state: the table (null until enabled) and the sequence counter.
pub(crate) struct PageOwnerState {
    pub(crate) table: AtomicPtr<OwnerRecord>,
    pub(crate) seq: AtomicU64,
}

impl PageOwnerState {
    /// Off.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            table: AtomicPtr::new(core::ptr::null_mut()),
            seq: AtomicU64::new(0),
        }
    }

    /// Off.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            table: AtomicPtr::new(core::ptr::null_mut()),
            seq: AtomicU64::new(0),
        }
    }
}
