//! Free page reporting's plain values and the embedder's interface: the registration
//! ([`PageReporting`]), the blocks handed over ([`ReportedBlock`]), the device side
//! ([`ReportSink`]) and the counts ([`ReportStats`]). What the zone does with them is the
//! `reporting` module.

use crate::types::Order;
use mm_types::Pfn;

/// A free page reporting registration: which blocks are reported, how many per round, and
/// what the device's discard leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageReporting {
    order: Order,
    capacity: usize,
    discard_zeroes: bool,
}

impl PageReporting {
    /// The most blocks one round hands to the sink (Linux's `PAGE_REPORTING_CAPACITY`).
    pub const MAX_CAPACITY: usize = 32;

    /// Reports free blocks of `order` and above, [`MAX_CAPACITY`](Self::MAX_CAPACITY) per
    /// round, not known zero afterwards.
    #[must_use]
    pub const fn new(order: Order) -> Self {
        Self {
            order,
            capacity: Self::MAX_CAPACITY,
            discard_zeroes: false,
        }
    }

    /// The same registration with `capacity` blocks per round (1..=32).
    #[must_use]
    pub const fn with_capacity(self, capacity: usize) -> Self {
        Self { capacity, ..self }
    }

    /// The same registration whose device's discard zeroes the memory (it reads zero on
    /// its next touch: anonymous backing, `MADV_DONTNEED`, no page poisoning), so that
    /// reported blocks go back known zero.
    #[must_use]
    pub const fn discard_zeroes(self, zeroes: bool) -> Self {
        Self {
            discard_zeroes: zeroes,
            ..self
        }
    }

    /// The smallest order reported.
    #[must_use]
    pub const fn order(&self) -> Order {
        self.order
    }

    /// Blocks per round.
    #[must_use]
    pub const fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether reported blocks go back known zero.
    #[must_use]
    pub const fn zeroes(&self) -> bool {
        self.discard_zeroes
    }
}

/// One block handed to the sink: `2^order` frames from `pfn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportedBlock {
    /// Its first frame.
    pub pfn: Pfn,
    /// Its order.
    pub order: Order,
}

impl ReportedBlock {
    /// Its length in frames.
    #[must_use]
    pub const fn pages(&self) -> u64 {
        self.order.pages()
    }
}

/// The device side of free page reporting: the driver's `report` (virtio-balloon's
/// reporting virtqueue, a VMM's `madvise(MADV_DONTNEED)`). Any
/// `FnMut(&[ReportedBlock]) -> bool` is one.
pub trait ReportSink {
    /// Hands `blocks` to the device; true once it has discarded them (they may be touched
    /// again afterwards), false if it failed (they go back unmarked). Called with no zone
    /// lock held; the blocks are nobody's until it returns.
    fn report(&mut self, blocks: &[ReportedBlock]) -> bool;
}

impl<F: FnMut(&[ReportedBlock]) -> bool> ReportSink for F {
    fn report(&mut self, blocks: &[ReportedBlock]) -> bool {
        self(blocks)
    }
}

/// Free page reporting's counts, in frames unless named otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportStats {
    /// Free now and marked reported.
    pub reported_free: u64,
    /// Reported in all (the sink accepted them).
    pub reported: u64,
    /// Rounds the sink accepted.
    pub reports: u64,
    /// Rounds the sink refused.
    pub rejected: u64,
    /// Reported frames taken back into use (allocated, or a compaction target) while marked.
    pub reused: u64,
}

impl ReportStats {
    pub(crate) const ZERO: Self = Self {
        reported_free: 0,
        reported: 0,
        reports: 0,
        rejected: 0,
        reused: 0,
    };
}
