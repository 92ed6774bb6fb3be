//! Per-cpu lists (the kernel's per-cpu pages): each CPU's free blocks of orders 0..=3 and the
//! pageblock order, under that CPU's own lock. A CPU takes only its own lock on the fast
//! path; the zone lock is taken inside it (never the other way round) to refill a list from
//! the buddy or drain blocks back in batches.

use core::fmt;

use crate::buddy::FreeArea;
use crate::counters::LockStats;
use crate::frame::{FrameState, Word};
use crate::list::List;
use crate::map::FrameMap;
use crate::sync::Mutex;
use crate::{DefaultRawMutex, Order};
use lock_api::RawMutex;

/// Per-cpu lists per CPU: orders 0, 1, 2, 3 (PAGE_ALLOC_COSTLY_ORDER) and the pageblock order.
pub(crate) const PCP_LISTS: usize = 5;

/// One CPU's free lists and their lock. Callers provide a slice of these, one per CPU (a
/// `static` array works: `[const { PerCpu::new() }; CPUS]`). Aligned so that two CPUs' lists never
/// share a cache line.
#[repr(align(128))]
pub struct PerCpu<R = DefaultRawMutex> {
    pub(crate) lists: Mutex<R, PcpLists>,
}

/// Everything a per-cpu lock protects.
pub(crate) struct PcpLists {
    pub(crate) lists: [List; PCP_LISTS],
    /// Frames on these lists.
    pub(crate) pages: u64,
    /// The list a drain takes from next (round robin, as `free_pcppages_bulk`).
    drain_cursor: usize,
    pub(crate) stats: LockStats,
}

impl PcpLists {
    const EMPTY: Self = Self {
        lists: [List::EMPTY; PCP_LISTS],
        pages: 0,
        drain_cursor: 0,
        stats: LockStats::ZERO,
    };

    /// Puts the free block at `idx`, which the caller owns, at the front of `list`.
    #[inline]
    pub(crate) fn push(&mut self, m: FrameMap<'_>, list: usize, idx: u32, order: Order) {
        m.frame(idx).store(Word::new(FrameState::Pcp, order.get()));
        self.lists[list].push_front(m.frames, idx);
        self.pages += order.pages();
        self.stats.list_ops += 1;
    }

    /// Takes the most recently freed block of `list`; the caller owns it.
    #[inline]
    pub(crate) fn pop(&mut self, m: FrameMap<'_>, list: usize, order: Order) -> Option<u32> {
        let idx = self.lists[list].pop_front(m.frames)?;
        self.pages -= order.pages();
        self.stats.list_ops += 1;
        Some(idx)
    }

    /// `rmqueue_bulk`: moves up to `batch` frames' worth of `order` blocks from the buddy
    /// to `list`. The caller holds this CPU's lock and passes the zone lock's data.
    #[inline]
    pub(crate) fn refill(
        &mut self,
        m: FrameMap<'_>,
        free: &mut FreeArea,
        list: usize,
        order: Order,
    ) {
        let blocks = (m.cfg.pcp_batch / order.pages()).max(1);
        for _ in 0..blocks {
            let Some(idx) = free.rmqueue_smallest(m, order) else {
                break;
            };
            self.push(m, list, idx, order);
        }
    }

    /// `free_pcppages_bulk`: returns at least `pages` frames (or all) to the buddy, oldest
    /// first: from the next non-empty list in turn, until the batch is done or the list is
    /// empty. The caller holds this CPU's lock and the zone lock.
    pub(crate) fn drain(&mut self, m: FrameMap<'_>, free: &mut FreeArea, pages: u64) {
        let mut drained = 0;
        while drained < pages && self.pages > 0 {
            let Some(list) = (1..=PCP_LISTS)
                .map(|k| (self.drain_cursor + k) % PCP_LISTS)
                .find(|&l| !self.lists[l].is_empty())
            else {
                break;
            };
            self.drain_cursor = list;
            while drained < pages {
                let Some(idx) = self.lists[list].pop_back(m.frames) else {
                    break;
                };
                let order = Order(m.frame(idx).load().order());
                self.pages -= order.pages();
                self.stats.list_ops += 1;
                drained += order.pages();
                free.free_one_page(m, idx, order);
            }
        }
    }
}

impl<R: RawMutex> PerCpu<R> {
    /// Empty lists, unlocked.
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new() -> Self {
        Self {
            lists: Mutex::new(PcpLists::EMPTY),
        }
    }

    /// Empty lists, unlocked.
    #[cfg(loom)]
    #[must_use]
    pub fn new() -> Self {
        Self {
            lists: Mutex::new(PcpLists::EMPTY),
        }
    }

    /// Empties the lists (when a zone starts on this storage).
    pub(crate) fn reset(&self) {
        *self.lists.lock() = PcpLists::EMPTY;
    }
}

impl<R: RawMutex> Default for PerCpu<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> fmt::Debug for PerCpu<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PerCpu { .. }")
    }
}
