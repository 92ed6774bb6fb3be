//! Per-cpu lists (the kernel's per-cpu pages): each CPU's free blocks of orders 0..=3 (up
//! to 8: `ZoneConfig::pcp_max_order`) and the pageblock order, under that CPU's own lock. A
//! CPU takes only its own lock on the fast path; the zone lock is taken inside it (never the
//! other way round) to refill a list from the buddy or drain blocks back in batches.

use core::fmt;

use crate::contents::Contents;
use crate::decompose::decompose;
use crate::frame::{FrameState, Word};
use crate::migratetype::MigrateType;
use crate::sync::DefaultRawMutex;
use crate::sync::{AtomicU32, AtomicU64, Mutex};
use crate::types::{FrameIdx, Order};
use crate::zone::buddy::{FreeArea, Prefer};
use crate::zone::config::{Fallback, PCP_LISTS, PCP_SLOTS, ZoneConfig};
use crate::zone::counters::LockStats;
use crate::zone::list::FreeCount;
use crate::zone::map::FrameMap;
use crate::zone::pcp_high::HighMark;
use crate::zone::pcp_list::PcpListSet;
use lock_api::RawMutex;

/// One CPU's free lists and their lock. Callers provide a slice of these, one per CPU (a
/// `static` array works: `[const { PerCpu::new() }; CPUS]`). Aligned so that two CPUs' lists never
/// share a cache line.
#[repr(align(128))]
pub struct PerCpu<R = DefaultRawMutex> {
    pub(crate) lists: Mutex<R, PcpLists>,
    /// What this CPU is doing, as page_owner records it
    /// ([`Zone::set_owner_tag`](crate::Zone::set_owner_tag)).
    pub(crate) owner_tag: AtomicU64,
    /// The CPU's number: its index in the zone's per-CPU storage, set when the zone is
    /// built (what the event hook is told).
    pub(crate) cpu: AtomicU32,
}

/// Everything a per-cpu lock protects. In this order (`repr(C)`): the lock's counts
/// (acquisitions, and those of refills, drains and zeroed allocations), the counters every
/// call writes, what the counts of work follow from (a free writes one of them), then the
/// lists (their lengths first, the arrays last), so that a pop or a push touches the lock's
/// line, the counters', the array's entry and little else.
#[repr(C)]
pub(crate) struct PcpLists {
    pub(crate) stats: LockStats,
    /// Frames on these lists, and of those in blocks known zero.
    pub(crate) count: FreeCount,
    /// This CPU's high mark: a free past it drains a batch.
    pub(crate) high: HighMark,
    /// The list a drain takes from next (round robin, as `free_pcppages_bulk`).
    drain_cursor: usize,
    /// Bit `l` set for every list `l` that is not empty, and perhaps for some that are: a
    /// push sets its list's bit, a drain clears the bit of a list it finds empty (an
    /// allocation leaves it), so that a drain finds its next list in one step.
    maybe_nonempty: u32,
    /// Frames freed to these lists since the last allocation from them, halved by each
    /// allocation (Linux's `pcp->free_count`): a run of frees drains in larger batches.
    pub(crate) recent_frees: u64,
    /// Blocks above the costly order freed to these lists, modulo [`FREED_CLOCK`]: the clock
    /// [`PcpLists::push_freed`] stamps them with, which tells an allocation how long ago
    /// this CPU freed the block it takes ([`Contents::FreedHere`]).
    freed_clock: u16,
    /// What the lists' counts of list operations, frees and free-time checks follow from.
    pub(crate) flows: PcpFlows,
    pub(crate) lists: PcpListSet,
}

/// The word of the head of a block of `order` on per-cpu list `list`, known zero or not,
/// stamped `stamp` (0: none).
#[inline(always)]
fn listed_word(list: usize, order: Order, zeroed: bool, stamp: u16) -> Word {
    let mt = (list / PCP_SLOTS) as u8;
    Word::free(FrameState::Pcp, order.get(), zeroed, mt).with_freed_at(stamp)
}

/// The period of [`PcpLists`]' free clock; a stamp is the clock with [`FREED_HERE`] set.
const FREED_CLOCK: u16 = 1 << 11;
/// The bit of a stamp that says the block was freed here (a word's 12 stamp bits are 0 for
/// a block taken from the buddy).
const FREED_HERE: u16 = FREED_CLOCK;

/// What a CPU's counts of list operations, frees and free-time checks are worked out from
/// when they are read ([`PcpLists::work`]), so that an allocation from the lists counts
/// nothing and a free one count (its block, by list): every list operation is a push (a
/// refill's or a free's) or the pop of a block pushed since or on the lists when the counts
/// started, so the pops are those blocks less the ones on the lists now.
#[derive(Clone, Copy)]
pub(crate) struct PcpFlows {
    /// Blocks freed onto each list.
    freed: [u64; PCP_LISTS],
    /// Free-time checks of those frees beyond one each (a contiguous run's first block
    /// carries its run's checks, its other blocks none): a wrapping count, of which the
    /// checks are `freed + extra_prepares`.
    extra_prepares: u64,
    /// Blocks refills pushed onto the lists.
    refilled: u64,
    /// Blocks on the lists when the counts started.
    at_start: u64,
}

/// What a CPU's lists did since their counts started ([`PcpLists::work`]).
pub(crate) struct PcpWork {
    /// Pushes and pops.
    pub(crate) list_ops: u64,
    /// Free-time checks of the blocks freed onto the lists.
    pub(crate) prepares: u64,
    /// Frames freed onto the lists.
    pub(crate) pgfree: u64,
}

impl PcpFlows {
    /// Counts starting with `blocks` blocks on the lists.
    const fn starting_with(blocks: u64) -> Self {
        Self {
            freed: [0; PCP_LISTS],
            extra_prepares: 0,
            refilled: 0,
            at_start: blocks,
        }
    }

    /// Counts a block freed onto `list` after `prepares` free-time checks.
    #[inline(always)]
    pub(crate) fn count_free(&mut self, list: usize, prepares: u64) {
        if let Some(n) = self.freed.get_mut(list) {
            *n = n.wrapping_add(1);
        }
        if prepares != 1 {
            self.extra_prepares = self.extra_prepares.wrapping_add(prepares.wrapping_sub(1));
        }
    }
}

impl PcpLists {
    const EMPTY: Self = Self {
        flows: PcpFlows::starting_with(0),
        lists: PcpListSet::EMPTY,
        count: FreeCount::NONE,
        drain_cursor: 0,
        maybe_nonempty: 0,
        recent_frees: 0,
        high: HighMark::FIXED,
        freed_clock: 0,
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
        self.push_stamped(m, list, (idx, order), zeroed, 0);
    }

    /// [`PcpLists::push_freed`] into `list`'s array alone, if it has room: `false`, with
    /// nothing changed, if it has none (a push onto its linked part writes links).
    #[inline(always)]
    pub(crate) fn push_freed_hot(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        idx: FrameIdx,
        order: Order,
    ) -> bool {
        if !self.lists.push_hot(list, idx) {
            return false;
        }
        let stamp = self.free_stamp(m, order);
        m.frame(idx).store(listed_word(list, order, false, stamp));
        self.pushed(list, (order, 1), false);
        true
    }

    /// [`PcpLists::push`] of a block this CPU just freed: stamped with the free clock
    /// (blocks of the pageblock order's lists only, the orders above the zone's
    /// `pcp_max_order`; smaller ones are cleared with temporal stores whatever their
    /// temperature).
    #[inline(always)]
    pub(crate) fn push_freed(&mut self, m: FrameMap<'_>, list: usize, idx: FrameIdx, order: Order) {
        let stamp = self.free_stamp(m, order);
        self.push_stamped(m, list, (idx, order), false, stamp);
    }

    /// The stamp of a block of `order` this CPU frees now ([`PcpLists::push_freed`]'s), the
    /// clock advanced for it; 0 for an order that is not stamped.
    #[inline(always)]
    fn free_stamp(&mut self, m: FrameMap<'_>, order: Order) -> u16 {
        if order.get() > m.cfg.pcp_max_order.get() {
            self.freed_clock = (self.freed_clock + 1) % FREED_CLOCK;
            FREED_HERE | self.freed_clock
        } else {
            0
        }
    }

    /// [`PcpLists::push`] with the head's word stamped `stamp` (0: none), in one store.
    #[inline(always)]
    fn push_stamped(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        (idx, order): (FrameIdx, Order),
        zeroed: bool,
        stamp: u16,
    ) {
        m.frame(idx).store(listed_word(list, order, zeroed, stamp));
        self.lists.push(m.frames, list, idx, zeroed);
        self.pushed(list, (order, 1), zeroed);
    }

    /// The counts of pushes of `n` blocks of `order` onto `list`.
    #[inline(always)]
    fn pushed(&mut self, list: usize, (order, n): (Order, u64), zeroed: bool) {
        self.maybe_nonempty |= 1 << list;
        self.count.add_blocks(order, n, zeroed);
    }

    /// What the lists know of the bytes of the block of `order` at `idx`, just taken off
    /// them ([`PcpLists::pop`]: its head still reads as it did on the list).
    #[inline]
    pub(crate) fn contents(&self, m: FrameMap<'_>, idx: FrameIdx, order: Order) -> Contents {
        let w = m.frame(idx).load();
        let at = w.freed_at();
        if w.zeroed() || at & FREED_HERE == 0 {
            return Contents::of(w.zeroed());
        }
        // Stamped blocks are all of one order (the pageblock order's lists): the clock's
        // steps since this one's stamp are blocks of its size.
        let age = self.freed_clock.wrapping_sub(at) % FREED_CLOCK;
        Contents::FreedHere {
            since: u64::from(age) * order.pages(),
        }
    }

    /// Takes a block of `list` for an allocation as `prefer` says: the front (the most
    /// recently freed, one not known zero if the list has any), or for [`Prefer::Zeroed`]
    /// the back if it is known zero and nothing otherwise. The caller owns it; returns
    /// whether it is known zero (the rest of what the lists know of it:
    /// [`PcpLists::contents`], before the caller writes its head).
    #[inline(always)]
    pub(crate) fn pop(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        order: Order,
        prefer: Prefer,
    ) -> Option<(FrameIdx, bool)> {
        let idx = match prefer {
            Prefer::Unzeroed => self.lists.pop_front(m.frames, list)?,
            Prefer::Zeroed => return self.pop_zeroed(m, list, order),
        };
        let zeroed = m.frame(idx).load().zeroed();
        self.took(order, zeroed);
        Some((idx, zeroed))
    }

    /// [`PcpLists::pop`] for [`Prefer::Zeroed`]: a block from `list`'s known-zero array
    /// (no frame read), else from its linked part's back if that one is known zero.
    #[inline(always)]
    fn pop_zeroed(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        order: Order,
    ) -> Option<(FrameIdx, bool)> {
        let l = &mut self.lists;
        let idx = match l.pop_zeroed(list) {
            Some(idx) => idx,
            None if m.frame(l.cold_back(list)?).load().zeroed() => {
                l.pop_cold_back(m.frames, list)?
            }
            None => return None,
        };
        self.took(order, true);
        Some((idx, true))
    }

    /// The bookkeeping of a block of `order` (known zero or not) just taken off `list` for
    /// an allocation.
    #[inline(always)]
    fn took(&mut self, order: Order, zeroed: bool) {
        self.count.sub(order, zeroed);
        self.recent_frees >>= 1;
    }

    /// Takes the most recently freed block of `list` from its array, if it has one: a
    /// block not known zero, which the caller now owns ([`PcpLists::pop`] without reading
    /// the block's frame).
    #[inline(always)]
    pub(crate) fn pop_hot(&mut self, list: usize, order: Order) -> Option<FrameIdx> {
        let idx = self.lists.pop_hot(list)?;
        self.took(order, false);
        Some(idx)
    }

    /// Takes the most recently freed block of `list`'s array that `wanted` accepts (an
    /// aligned one): a block not known zero, which the caller now owns.
    #[inline]
    pub(crate) fn take_hot_where(
        &mut self,
        list: usize,
        order: Order,
        wanted: impl Fn(FrameIdx) -> bool,
    ) -> Option<FrameIdx> {
        let idx = self.lists.take_hot_where(list, wanted)?;
        self.took(order, false);
        Some(idx)
    }

    /// `rmqueue_bulk`: moves up to `blocks` blocks of `order` for allocations of the list's
    /// type from the buddy to `list`: any blocks (falling back to other types as an
    /// allocation does), or for [`Prefer::Zeroed`] only blocks known zero; both as runs,
    /// several at a time where one buddy block holds them ([`FreeArea::rmqueue_run`],
    /// [`FreeArea::rmqueue_zeroed_run`]). The caller holds this CPU's lock and passes the
    /// zone lock's data.
    ///
    /// Allocations then take the blocks that went to the list's array in the order they
    /// were taken, ascending where they came out of one buddy block, as Linux's do: the
    /// next refill's blocks follow on where this one's ended, so a run of allocations takes
    /// consecutive blocks, and freed in that order they come back to a drain as long runs,
    /// each merged once ([`PcpLists::drain`]), not as one run per batch.
    ///
    /// In a zone that tunes the high marks ([`ZoneConfig::pcp_high_max`]) a refill also
    /// raises this CPU's mark by a batch while the buddy is at or above its high watermark.
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
        self.count_refill(m, free);
        // Nothing to take (a full zone, which a node set's first pass tries before the next
        // node's): no look at every order of every fallback type's lists.
        if free.holds_less_than(order) {
            return;
        }
        let before = self.lists.hot_len(list);
        match prefer {
            Prefer::Unzeroed => self.refill_runs(m, list, (order, blocks), |most| {
                free.rmqueue_run(m, order, mt, fallback, most)
            }),
            Prefer::Zeroed => self.refill_zeroed(m, free, list, (order, mt, fallback), blocks),
        }
        self.lists.reverse_hot_since(list, before);
    }

    /// What every refill does, whatever it takes: in a zone that tunes the high marks,
    /// raises this CPU's mark by a batch while the buddy is at or above its high watermark
    /// ([`HighMark::refilled`]).
    #[inline(always)]
    pub(crate) fn count_refill(&mut self, m: FrameMap<'_>, free: &FreeArea) {
        self.high.refilled(m.cfg, || free.below_high_watermark());
    }

    /// [`PcpLists::refill`]'s loop for blocks known zero, out of line (a zeroed
    /// allocation's refill is rarer than a plain one's).
    #[inline(never)]
    fn refill_zeroed(
        &mut self,
        m: FrameMap<'_>,
        free: &mut FreeArea,
        list: usize,
        (order, mt, fallback): (Order, MigrateType, Fallback),
        blocks: u64,
    ) {
        self.refill_runs(m, list, (order, blocks), |most| {
            let (idx, n) = free.rmqueue_zeroed_run(m, order, mt, fallback, most)?;
            Some((idx, true, n))
        });
    }

    /// [`PcpLists::refill`]'s loop: runs from `take` (given how many blocks are still
    /// wanted: a run's first block, whether it is known zero, its number of blocks) until
    /// `blocks` blocks of `order` are on `list` or `take` has none.
    #[inline(always)]
    fn refill_runs(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        (order, blocks): (Order, u64),
        mut take: impl FnMut(u64) -> Option<(FrameIdx, bool, u64)>,
    ) {
        let mut taken = 0;
        while taken < blocks {
            let Some((idx, zeroed, n)) = take(blocks - taken) else {
                break;
            };
            self.push_run(m, list, (idx, order, n), zeroed);
            taken += n;
        }
    }

    /// Pushes the `n` blocks of `order` from `idx` up, which the caller took off the buddy
    /// (known zero if `zeroed`), lowest first (as one block after another would be),
    /// counted as refilled. Always inline: out of line, the loop around its call (a
    /// refill's) cost 20 instructions more an order-3 alloc + free (callgrind).
    #[inline(always)]
    pub(crate) fn push_run(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        (idx, order, n): (FrameIdx, Order, u64),
        zeroed: bool,
    ) {
        self.link_run(m, list, (idx, order, n), zeroed);
        self.count_run(list, (order, n), zeroed);
    }

    /// [`PcpLists::push_run`]'s pushes, block by block, leaving the counts to the caller.
    #[inline(always)]
    fn link_run(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        (idx, order, n): (FrameIdx, Order, u64),
        zeroed: bool,
    ) {
        let word = listed_word(list, order, zeroed, 0);
        let mut at = idx;
        for _ in 0..n {
            m.frame(at).store(word);
            self.lists.push(m.frames, list, at, zeroed);
            // At most the run's end, a frame index of the zone: no overflow.
            at += 1u32 << order.get();
        }
    }

    /// [`PcpLists::push_run`] of blocks known zero (a zeroed allocation's batch): as many as
    /// the list's known-zero array has room for go there in one pass, which writes their
    /// heads too; the rest, the array full, on the linked list's back.
    #[inline(always)]
    pub(crate) fn push_zeroed_run(
        &mut self,
        m: FrameMap<'_>,
        list: usize,
        (idx, order, n): (FrameIdx, Order, u64),
    ) {
        let word = listed_word(list, order, true, 0);
        let step = 1u32 << order.get();
        let head = |at: FrameIdx| m.frame(at).store(word);
        let arrayed = self.lists.push_zeroed_run(list, (idx, step, n), head);
        if arrayed < n {
            // At most the run's end, a frame index of the zone: no overflow.
            let rest = idx + arrayed as u32 * step;
            self.link_run(m, list, (rest, order, n - arrayed), true);
        }
        self.count_run(list, (order, n), true);
    }

    /// Counts the run of `n` blocks of `order` pushed on `list` as refilled, once for the run.
    #[inline(always)]
    fn count_run(&mut self, list: usize, (order, n): (Order, u64), zeroed: bool) {
        self.pushed(list, (order, n), zeroed);
        self.stats.refilled += n * order.pages();
        self.flows.refilled = self.flows.refilled.wrapping_add(n);
    }

    /// Blocks on the lists.
    fn blocks(&self) -> u64 {
        (0..PCP_LISTS).map(|l| u64::from(self.lists.len(l))).sum()
    }

    /// Starts the counts afresh (the blocks on the lists count as come on, as
    /// [`LockStats::restarted`]).
    pub(crate) fn restart_counts(&mut self) {
        self.stats = LockStats::restarted(self.count.pages);
        self.flows = PcpFlows::starting_with(self.blocks());
    }

    /// What the lists did since their counts started, in `cfg`'s zone (which order each
    /// list holds). The counts wrap past `u64::MAX` rather than panic.
    pub(crate) fn work(&self, cfg: &ZoneConfig) -> PcpWork {
        let f = &self.flows;
        let (freed, pgfree) =
            f.freed
                .iter()
                .enumerate()
                .fold((0u64, 0u64), |(n, pages), (list, &k)| {
                    let order = u32::from(cfg.pcp_list_order(list).get());
                    (n.wrapping_add(k), pages.wrapping_add(k.wrapping_shl(order)))
                });
        // Every block now on the lists was there at the start or pushed since: the pops
        // are the rest.
        let pushes = f.refilled.wrapping_add(freed);
        let pops = f
            .at_start
            .wrapping_add(pushes)
            .saturating_sub(self.blocks());
        PcpWork {
            list_ops: pushes.wrapping_add(pops),
            prepares: freed.wrapping_add(f.extra_prepares),
            pgfree,
        }
    }

    /// `free_pcppages_bulk`: returns at least `pages` frames (or all) to the buddy from the
    /// lists' backs (blocks known zero first, which can merge there, then the oldest): from
    /// the next non-empty list in turn, until the batch is done or the list is
    /// empty. The caller holds this CPU's lock and the zone lock.
    ///
    /// Blocks of one order that come off a list one after another at consecutive frames,
    /// ascending or descending (blocks freed in ascending order, as a split block's pages
    /// or a run of allocations are) go back as a run: as its fewest aligned blocks, each
    /// freed once and merged from its order up, instead of block by block through every
    /// merge below it. The zone ends the same either way (a block of at most the pageblock
    /// order lies in one pageblock, a larger one is freed pageblock by pageblock, and
    /// merging does not depend on the order of the frees). Such a run on the linked list
    /// comes off it in one step ([`PcpListSet::pop_back_run`]): one relink for the run, a
    /// look at each block's link and word, not an unlink per block.
    pub(crate) fn drain(&mut self, m: FrameMap<'_>, free: &mut FreeArea, pages: u64) {
        let mut drained = 0;
        let mut run = BlockRun::NONE;
        while drained < pages && self.count.pages > 0 {
            // The next list after the cursor that may hold blocks, round robin.
            let after = self.maybe_nonempty & !(u32::MAX >> (31 - self.drain_cursor));
            let list = match (after, self.maybe_nonempty) {
                (0, 0) => break,
                (0, all) => all.trailing_zeros() as usize,
                (next, _) => next.trailing_zeros() as usize,
            };
            self.drain_cursor = list;
            let list_order = m.cfg.pcp_list_order(list).get();
            while drained < pages {
                // The blocks still to drain, at least one (a run's blocks are of the list's
                // order, as every block on it).
                let rest = pages - drained;
                let max = u32::try_from(((rest - 1) >> list_order) + 1).unwrap_or(u32::MAX);
                let kind = |idx| {
                    let w = m.frame(idx).load();
                    (Order(w.order()), w.zeroed())
                };
                let Some((idx, n, (order, zeroed))) =
                    self.lists.pop_back_run(m.frames, list, max, kind)
                else {
                    // Found empty (its last block taken by an allocation, or this drain).
                    self.maybe_nonempty &= !(1 << list);
                    break;
                };
                let blocks = u64::from(n);
                self.count.sub_blocks(order, blocks, zeroed);
                self.stats.drained += blocks * order.pages();
                drained += blocks * order.pages();
                if run.extend(idx, order, n, zeroed) {
                    continue;
                }
                run.free(m, free);
                run = BlockRun::at(idx, order, n, zeroed);
            }
        }
        run.free(m, free);
    }
}

/// Blocks of one order a drain took off a list at consecutive frames, not yet freed.
#[derive(Clone, Copy)]
struct BlockRun {
    first: FrameIdx,
    /// Frames, a multiple of the order's pages.
    pages: u32,
    order: Order,
    zeroed: bool,
}

impl BlockRun {
    const NONE: Self = Self {
        first: FrameIdx(0),
        pages: 0,
        order: Order(0),
        zeroed: false,
    };

    /// The run of the `n` blocks of `order` from `first` (a run taken off a list).
    fn at(first: FrameIdx, order: Order, n: u32, zeroed: bool) -> Self {
        Self {
            first,
            pages: n << order.get(),
            order,
            zeroed,
        }
    }

    /// Adds the `n` blocks from `idx` (of `order`, known zero or not) to the run if they
    /// have the run's order and knowledge and start just past its end or end just before
    /// its start (a list's array gives blocks back newest first, so blocks freed in
    /// ascending order come off it descending); whether it did.
    #[inline]
    fn extend(&mut self, idx: FrameIdx, order: Order, n: u32, zeroed: bool) -> bool {
        if self.pages == 0 || order != self.order || zeroed != self.zeroed {
            return false;
        }
        let size = n << order.get();
        if Some(idx.0) == self.first.0.checked_add(self.pages) {
            self.pages += size;
            return true;
        }
        if idx.0.checked_add(size) == Some(self.first.0) {
            self.first = idx;
            self.pages += size;
            return true;
        }
        false
    }

    /// Frees the run to the buddy as its fewest aligned blocks (`decompose`; each at least
    /// the run's order, which aligns every block of it): the heads of the run's blocks
    /// inside each become tails, and the block is freed at its order.
    fn free(&mut self, m: FrameMap<'_>, free: &mut FreeArea) {
        let step = self.order.pages() as u32;
        if self.pages == 0 {
            return;
        }
        if self.pages == step {
            // One block: as it is.
            free.free_one_page(m, self.first, self.order, self.zeroed);
            *self = Self::NONE;
            return;
        }
        // The run's frames are the zone's, so its end does not overflow; were it to, the
        // blocks would go back one by one.
        match decompose(m.pfn(self.first), u64::from(self.pages), m.cfg.max_order) {
            Ok(blocks) => {
                for (pfn, order) in blocks {
                    let head = m.index_of(pfn);
                    let mut inner = head + step;
                    while inner < head + order.pages() as u32 {
                        m.frame(inner).store(Word::TAIL);
                        inner += step;
                    }
                    free.free_one_page(m, head, order, self.zeroed);
                }
            }
            Err(_) => {
                let mut block = self.first;
                while block < self.first + self.pages {
                    free.free_one_page(m, block, self.order, self.zeroed);
                    block += step;
                }
            }
        }
        *self = Self::NONE;
    }
}

impl<R: RawMutex> PerCpu<R> {
    /// Empty lists, unlocked.
    #[cfg(not(loom))]
    #[must_use]
    pub const fn new() -> Self {
        Self {
            lists: Mutex::new(PcpLists::EMPTY),
            owner_tag: AtomicU64::new(0),
            cpu: AtomicU32::new(0),
        }
    }

    /// Empty lists, unlocked.
    #[cfg(loom)]
    #[must_use]
    pub fn new() -> Self {
        Self {
            lists: Mutex::new(PcpLists::EMPTY),
            owner_tag: AtomicU64::new(0),
            cpu: AtomicU32::new(0),
        }
    }

    /// Empties the lists of CPU `cpu` (when a zone starts on this storage).
    pub(crate) fn reset(&self, cpu: u32) {
        *self.lists.lock() = PcpLists::EMPTY;
        self.owner_tag.store(0, crate::sync::Ordering::Relaxed);
        self.cpu.store(cpu, crate::sync::Ordering::Relaxed);
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    #[allow(unsafe_code)]
    fn a_large_block_this_cpu_freed_comes_back_with_its_age_and_nothing_else_does() {
        use crate::migratetype::MigrateType;
        use crate::request::HeadTag;
        use crate::types::Order;
        use crate::zone::StaticZone;
        use crate::zone::buddy::Prefer;
        use crate::zone::config::ZoneConfig;
        use mm_types::Pfn;

        const START: Pfn = Pfn(0x1_0000);
        // Room on the per-cpu lists for the three 2 MiB blocks; the zone no larger than
        // they need (each frame costs under Miri, in the zone's set-up and its checks).
        static ZONE: StaticZone<2048, 2> =
            StaticZone::new_static(ZoneConfig::new(START, 2048).with_cpus(2).with_pcp(2048, 64));
        let (zone, order, mt) = (&ZONE, Order(9), MigrateType::Movable);
        let cpu = zone.cpu(0).unwrap();
        let take_of = |order| {
            let (idx, c) = zone
                .alloc_preferring(cpu.lists(), order, Prefer::Zeroed, mt, HeadTag::NONE)
                .unwrap();
            (zone.map().pfn(idx), c)
        };
        let take = || take_of(order);
        // SAFETY: each block freed below was allocated by this test and is freed once.
        let free = |pfn| unsafe { cpu.free_pages(pfn, order) }.unwrap();
        // From the buddy (through a refill of the list): nothing known.
        let [(a, ca), (b, cb), (c, cc)] = [take(), take(), take()];
        assert_eq!([ca, cb, cc], [Contents::Unknown; 3]);
        // Freed in the order a, b, c: taken back c, b, a, each `since` the blocks after it.
        for pfn in [a, b, c] {
            free(pfn);
        }
        zone.check().unwrap();
        assert_eq!(take(), (c, Contents::FreedHere { since: 0 }));
        assert_eq!(take(), (b, Contents::FreedHere { since: 512 }));
        assert_eq!(take(), (a, Contents::FreedHere { since: 1024 }));
        // Freed on another CPU: no evidence for this one once it is back in the buddy.
        let other = zone.cpu(1).unwrap();
        // SAFETY: as above.
        unsafe { other.free_pages(a, order) }.unwrap();
        other.drain();
        let (_, after_drain) = take();
        assert_eq!(after_drain, Contents::Unknown);
        // Order 0 carries no stamp.
        let (p, _) = take_of(Order::ZERO);
        // SAFETY: as above.
        unsafe { cpu.free_pages(p, Order::ZERO) }.unwrap();
        let (_, small) = take_of(Order::ZERO);
        assert_eq!(small, Contents::Unknown);
        zone.check().unwrap();
    }

    #[test]
    #[allow(unsafe_code)]
    fn allocations_take_consecutive_blocks_ascending_across_refills() {
        use crate::request::AllocRequest;
        use crate::types::Order;
        use crate::zone::StaticZone;
        use crate::zone::config::ZoneConfig;
        use mm_types::Pfn;
        use std::boxed::Box;
        use std::vec::Vec;

        // A fresh zone: each refill's blocks come out of one buddy block and the next
        // refill's follow on where they ended, so allocations take consecutive blocks.
        for order in [Order(0), Order(1), Order(3)] {
            let cfg = ZoneConfig::new(Pfn(0x4000), 1024).with_pcp(512, 16);
            let zone: Box<StaticZone<1024, 1>> = Box::new(StaticZone::new_static(cfg));
            let cpu = zone.cpu(0).unwrap();
            let calls = 3 * zone.cfg.pcp_blocks(order) + 1;
            assert!(zone.cfg.pcp_blocks(order) > 1);
            let taken: Vec<Pfn> = (0..calls)
                .map(|_| cpu.alloc_raw(AllocRequest::order(order)).unwrap())
                .collect();
            for pair in taken.windows(2) {
                assert_eq!(
                    pair[1].0,
                    pair[0].0 + order.pages(),
                    "order {order:?}: {taken:?}"
                );
            }
            for pfn in taken {
                // SAFETY: allocated above, freed once.
                unsafe { cpu.free_pages(pfn, order) }.unwrap();
            }
            zone.drain_all();
            zone.check().unwrap();
        }
    }

    #[test]
    #[allow(unsafe_code)]
    #[cfg(feature = "testing")]
    fn a_drain_taking_runs_off_a_list_leaves_the_zone_as_one_block_a_drain_does() {
        use crate::request::AllocRequest;
        use crate::testing::Snapshot;
        use crate::types::Order;
        use crate::zone::StaticZone;
        use crate::zone::config::ZoneConfig;
        use mm_types::Pfn;
        use std::boxed::Box;
        use std::vec::Vec;

        // Past the order-0 list's array (512 pages), so that most blocks go on its linked
        // list.
        const FRAMES: usize = 1024;
        // Under Miri, where each frame's call costs, the order-1 list alone (past its array
        // too).
        let orders: &[Order] = if cfg!(miri) {
            &[Order(1)]
        } else {
            &[Order(0), Order(1), Order(3)]
        };
        for &order in orders {
            let zones: [Box<StaticZone<FRAMES, 1>>; 2] = core::array::from_fn(|_| {
                let cfg = ZoneConfig::new(Pfn(0x8000), FRAMES as u64).with_pcp(1024, 16);
                Box::new(StaticZone::new_static(cfg))
            });
            for zone in &zones {
                let cpu = zone.cpu(0).unwrap();
                let blocks = (FRAMES as u64 - 256) >> order.get();
                let taken: Vec<Pfn> = (0..blocks)
                    .map(|_| cpu.alloc_raw(AllocRequest::order(order)).unwrap())
                    .collect();
                // Runs of every shape on the list: ascending, descending, broken by gaps,
                // and the first half's other blocks last.
                let (half, rest) = taken.split_at(taken.len() / 2);
                let evens = half.iter().step_by(2);
                let odds = half.iter().skip(1).step_by(2);
                for &pfn in evens.chain(rest.iter().rev()).chain(odds) {
                    // SAFETY: allocated above, freed once.
                    unsafe { cpu.free_pages(pfn, order) }.unwrap();
                }
                assert_eq!(
                    cpu.pcp_pages(),
                    blocks << order.get(),
                    "nothing drained yet"
                );
            }
            // One whole drain, and a drain of a block at a time (at most one page asked
            // for: a run of one block).
            zones[0].drain_all();
            let lists = zones[1].cpu(0).unwrap().lists();
            while zones[1].cpu(0).unwrap().pcp_pages() > 0 {
                zones[1].drain(lists, 1);
            }
            for zone in &zones {
                zone.check().unwrap();
            }
            assert_eq!(
                Snapshot::of(&*zones[0]),
                Snapshot::of(&*zones[1]),
                "order {order:?}"
            );
            assert_eq!(zones[0].cpu(0).unwrap().pcp_pages(), 0);
        }
    }

    #[allow(unsafe_code)]
    mod refill_runs {
        use super::*;
        use crate::request::AllocRequest;
        use crate::zone::StaticZone;
        use crate::zone::config::{PCP_LISTS, ZoneConfig};
        use mm_types::Pfn;
        use proptest::prelude::*;
        use std::boxed::Box;
        use std::vec::Vec;

        const FRAMES: u64 = 1024;
        type TestZone = StaticZone<{ FRAMES as usize }, 1>;

        /// How a zone is set up: its first `zeroed` frames added as known zero, the rest not;
        /// in defrag mode or not; 64 frames at `cma` reserved for CMA; then `ops`.
        #[derive(Clone, Debug)]
        struct Setup {
            zeroed: u64,
            defrag_mode: bool,
            cma: Option<u64>,
            /// On CPU 0: (kind, order, whether to free the allocation `n` allocations back).
            ops: Vec<(u8, u8, Option<usize>)>,
        }

        fn setup() -> impl Strategy<Value = Setup> {
            (
                0u64..=FRAMES,
                any::<bool>(),
                proptest::option::of(0u64..FRAMES / 64),
                proptest::collection::vec(
                    (0u8..3, 0u8..=5, proptest::option::of(0usize..8)),
                    0..40,
                ),
            )
                .prop_map(|(zeroed, defrag_mode, cma, ops)| Setup {
                    zeroed,
                    defrag_mode,
                    cma: cma.map(|c| c * 64),
                    ops,
                })
        }

        /// A zone of `FRAMES` frames, pageblocks of 16, set up as `how` says, every per-cpu
        /// list drained.
        fn zone(how: &Setup) -> Box<TestZone> {
            let cfg = ZoneConfig {
                pageblock_order: Order(4),
                defrag_mode: how.defrag_mode,
                ..ZoneConfig::new(Pfn(0), FRAMES)
            };
            let zone = Box::new(TestZone::new_static_empty(cfg));
            let zeroed = how.zeroed;
            if zeroed > 0 {
                zone.add_zeroed_memory(Pfn(0), zeroed).unwrap();
            }
            if zeroed < FRAMES {
                zone.add_memory(Pfn(zeroed), FRAMES - zeroed).unwrap();
            }
            if let Some(at) = how.cma {
                zone.reserve_cma_at(0, Pfn(at), 64, &mut |_: &_| false)
                    .unwrap();
            }
            let ops = &how.ops;
            let cpu = zone.cpu(0).unwrap();
            let mut held: Vec<Option<(Pfn, Order)>> = Vec::new();
            for &(kind, order, free) in ops {
                let request =
                    AllocRequest::order(Order(order)).kind(MigrateType::ALL[kind as usize]);
                held.push(cpu.alloc_raw(request).ok().map(|pfn| (pfn, Order(order))));
                let back = free.and_then(|n| held.len().checked_sub(n + 1));
                if let Some((pfn, order)) = back.and_then(|i| held[i].take()) {
                    // SAFETY: allocated above, freed once (taken out of `held`).
                    unsafe { cpu.free_pages(pfn, order) }.unwrap();
                }
            }
            zone.drain_all();
            zone
        }

        /// A zone's free blocks and frames: every frame's word, the blocks on each buddy
        /// free list and on each of CPU 0's lists in list order, and that CPU's counts.
        #[derive(Debug, PartialEq, Eq)]
        struct State {
            words: Vec<u64>,
            buddy: Vec<Vec<FrameIdx>>,
            pcp: Vec<Vec<FrameIdx>>,
            count: FreeCount,
        }

        fn state(zone: &TestZone) -> State {
            let m = zone.map();
            let words = (0..FRAMES as u32)
                .map(|i| m.frame(FrameIdx(i)).load().bits())
                .collect();
            let free = zone.lock_zone();
            let buddy = free
                .lists()
                .iter()
                .flatten()
                .map(|l| l.blocks(m.frames).collect())
                .collect();
            drop(free);
            let lists = TestZone::reach_pcp(zone.pcp(0).unwrap());
            let pcp = (0..PCP_LISTS)
                .map(|l| lists.lists.blocks(m.frames, l).collect())
                .collect();
            State {
                words,
                buddy,
                pcp,
                count: lists.count,
            }
        }

        proptest! {
            // Under Miri a case takes seconds: a few of them (and no failure file, which
            // isolation cannot reach).
            #![proptest_config(if cfg!(miri) {
                ProptestConfig { cases: 2, failure_persistence: None, ..ProptestConfig::default() }
            } else {
                ProptestConfig::default()
            })]

            /// A refill that takes its blocks as runs out of one block leaves the zone exactly
            /// as taking them one at a time does, plain or known zero: the same blocks on the
            /// per-cpu list in the same order, the same free lists, every frame's word the
            /// same.
            #[test]
            fn a_refill_by_runs_takes_what_one_block_at_a_time_takes(
                how in setup(),
                order in prop_oneof![0u8..=3, Just(4u8)],
                kind in 0u8..3,
                blocks in 1u64..=70,
                prefer in prop_oneof![Just(Prefer::Unzeroed), Just(Prefer::Zeroed)],
            ) {
                let (runs, single) = (zone(&how), zone(&how));
                let (order, mt) = (Order(order), MigrateType::ALL[kind as usize]);
                let list = runs.cfg.pcp_list(order, mt).unwrap();
                let fallback = runs.cfg.fallback();
                {
                    let m = runs.map();
                    let mut lists = TestZone::reach_pcp(runs.pcp(0).unwrap());
                    let mut free = runs.lock_zone();
                    lists.refill(m, &mut free, list, (order, prefer, fallback), blocks);
                }
                {
                    let m = single.map();
                    let mut lists = TestZone::reach_pcp(single.pcp(0).unwrap());
                    let mut free = single.lock_zone();
                    let before = lists.lists.hot_len(list);
                    for _ in 0..blocks {
                        let taken = match prefer {
                            Prefer::Unzeroed => free.rmqueue(m, order, prefer, mt, fallback),
                            Prefer::Zeroed => free
                                .rmqueue_zeroed(m, order, mt, fallback)
                                .map(|idx| (idx, true)),
                        };
                        let Some((idx, zeroed)) = taken else {
                            break;
                        };
                        lists.push(m, list, idx, order, zeroed);
                    }
                    lists.lists.reverse_hot_since(list, before);
                }
                prop_assert_eq!(state(&runs), state(&single));
                runs.check().unwrap();
            }
        }
    }
}
