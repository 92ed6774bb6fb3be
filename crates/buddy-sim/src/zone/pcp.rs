//! Per-cpu lists (the kernel's per-cpu pages): each CPU's free blocks of orders 0..=3 and the
//! pageblock order, under that CPU's own lock. A CPU takes only its own lock on the fast
//! path; the zone lock is taken inside it (never the other way round) to refill a list from
//! the buddy or drain blocks back in batches.

use core::fmt;

use crate::frame::{FrameState, Word};
use crate::migratetype::MigrateType;
use crate::sync::DefaultRawMutex;
use crate::sync::Mutex;
use crate::types::{FrameIdx, Order};
use crate::zone::buddy::{FreeArea, Prefer};
use crate::zone::config::{Fallback, PCP_LISTS, PCP_SLOTS};
use crate::zone::counters::LockStats;
use crate::zone::list::{FreeCount, List};
use crate::zone::map::FrameMap;
use lock_api::RawMutex;

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
    /// Frames on these lists, and of those in blocks known zero.
    pub(crate) count: FreeCount,
    /// The list a drain takes from next (round robin, as `free_pcppages_bulk`).
    drain_cursor: usize,
    /// Frames freed to these lists since the last allocation from them, halved by each
    /// allocation (Linux's `pcp->free_count`): a run of frees drains in larger batches.
    pub(crate) recent_frees: u64,
    pub(crate) stats: LockStats,
}

impl PcpLists {
    const EMPTY: Self = Self {
        lists: [List::EMPTY; PCP_LISTS],
        count: FreeCount::NONE,
        drain_cursor: 0,
        recent_frees: 0,
        stats: LockStats::ZERO,
    };

    /// Puts the free block at `idx`, which the caller owns, on `list`: at the front, or at
    /// the back if it is known zero (as the buddy's lists keep them).
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        idx: FrameIdx,
        order: Order,
        zeroed: bool,
    ) {
        let mt = (list / PCP_SLOTS) as u8;
        m.frame(idx)
            .store(Word::free(FrameState::Pcp, order.get(), zeroed, mt));
        self.lists[list].push(m.frames, idx, zeroed);
        self.count.add(order, zeroed);
        self.stats.list_ops += 1;
    }

    /// Takes a block of `list` for an allocation as `prefer` says: the front (the most
    /// recently freed, one not known zero if the list has any), or for [`Prefer::Zeroed`]
    /// the back if it is known zero and nothing otherwise. The caller owns it; returns
    /// whether it is known zero.
    #[inline]
    pub(crate) fn pop(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        order: Order,
        prefer: Prefer,
    ) -> Option<(FrameIdx, bool)> {
        let l = &mut self.lists[list];
        let idx = match prefer {
            Prefer::Unzeroed => l.pop_front(m.frames)?,
            Prefer::Zeroed if m.frame(l.tail()?).load().zeroed() => l.pop_back(m.frames)?,
            Prefer::Zeroed => return None,
        };
        let zeroed = m.frame(idx).load().zeroed();
        self.count.sub(order, zeroed);
        self.recent_frees >>= 1;
        self.stats.list_ops += 1;
        Some((idx, zeroed))
    }

    /// `rmqueue_bulk`: moves up to `blocks` blocks of `order` for allocations of the list's
    /// type from the buddy to `list`: any blocks (falling back to other types as an
    /// allocation does), or for [`Prefer::Zeroed`] only blocks known zero of the type. The
    /// caller holds this CPU's lock and passes the zone lock's data.
    #[inline]
    pub(crate) fn refill(
        &mut self,
        m: FrameMap<'_>,
        free: &mut FreeArea,
        list: usize,
        (order, prefer, fallback): (Order, Prefer, Fallback),
        blocks: u64,
    ) {
        let mt = MigrateType::ALL[list / PCP_SLOTS];
        for _ in 0..blocks {
            let taken = match prefer {
                Prefer::Unzeroed => free.rmqueue(m, order, Prefer::Unzeroed, mt, fallback),
                Prefer::Zeroed => free
                    .rmqueue_zeroed(m, order, mt, fallback)
                    .map(|idx| (idx, true)),
            };
            let Some((idx, zeroed)) = taken else {
                break;
            };
            self.push(m, list, idx, order, zeroed);
        }
    }

    /// `free_pcppages_bulk`: returns at least `pages` frames (or all) to the buddy from the
    /// lists' backs (blocks known zero first, which can merge there, then the oldest): from
    /// the next non-empty list in turn, until the batch is done or the list is
    /// empty. The caller holds this CPU's lock and the zone lock.
    pub(crate) fn drain(&mut self, m: FrameMap<'_>, free: &mut FreeArea, pages: u64) {
        let mut drained = 0;
        while drained < pages && self.count.pages > 0 {
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
                let w = m.frame(idx).load();
                let order = Order(w.order());
                self.count.sub(order, w.zeroed());
                self.stats.list_ops += 1;
                drained += order.pages();
                free.free_one_page(m, idx, order, w.zeroed());
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

/// The per-cpu lists a call runs on, and whether it reaches them without their lock.
pub(crate) struct CpuLists<'a, R> {
    pub(crate) pcp: &'a PerCpu<R>,
    pub(crate) local: bool,
}

impl<R> Clone for CpuLists<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for CpuLists<'_, R> {}
