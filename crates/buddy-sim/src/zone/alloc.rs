//! Allocation: from the CPU's per-cpu list (refilled from the buddy in a batch when empty) or
//! straight from the buddy, with the slow path that drains every CPU's lists and retries.

use crate::contents::Contents;
use crate::error::alloc::AllocError;
use crate::error::contig::ContigError;
use crate::events::{PageAlloc, PcpRefill, ZoneEvents};
use crate::frame::Word;
use crate::frame_storage::FrameStorage;
use crate::migratetype::MigrateType;
use crate::request::{HeadTag, MigrateCallback, Pin, SlowPath};
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::config::Fallback;
use crate::zone::direct_reclaim::ReclaimRounds;
use crate::zone::pcp::CpuLists;
use crate::zone::pcp::PcpLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// A block of `2^order` frames of kind `mt` on `cpu`'s lists ([`Cpu::alloc_raw`](crate::Cpu::alloc_raw)'s
    /// path for a block), taking the block `prefer` would rather have, its head given `tag`;
    /// returns its index and whether it is known zero (its head is `Allocated` either way).
    #[inline(always)]
    pub(crate) fn alloc_preferring(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
        tag: HeadTag,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        self.alloc_with(cpu, order, (prefer, mt, tag), &mut SlowPath::none())
    }

    /// [`Zone::alloc_preferring`] whose slow path may call `hooks` (direct reclaim and
    /// compaction); first, whether fault injection fails it.
    #[inline(always)]
    pub(crate) fn alloc_with(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        how: (Prefer, MigrateType, HeadTag),
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        if self.debugging() {
            return self.alloc_attempt_debugged(cpu, order, how, true, hooks);
        }
        self.alloc_unchecked(cpu, order, how, hooks)
    }

    /// [`Zone::alloc_with`] without fault injection.
    #[inline(always)]
    pub(crate) fn alloc_unchecked(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        (prefer, mt, tag): (Prefer, MigrateType, HeadTag),
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        // The common case, inline: a per-cpu order served from (or refilled into) the CPU's
        // list. Everything else, and every error, takes the general path.
        let (idx, contents) = match self.alloc_from_cpu_list(cpu, order, prefer, mt) {
            Some(taken) => taken,
            None => self.alloc_slow(cpu, order, prefer, mt, hooks)?,
        };
        self.mark_allocated(cpu, idx, order, mt, tag);
        Ok((idx, contents))
    }

    /// [`Zone::alloc_with`], or with `slow_path` false one attempt without it (no
    /// drain, no merge, no deferred memory, no callbacks): a node set's first pass over its
    /// zones, which takes a free block from a farther zone before it drains a nearer one
    /// (Linux's `get_page_from_freelist` before `__alloc_pages_slowpath`).
    #[inline(always)]
    pub(crate) fn alloc_attempt(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        (prefer, mt, tag): (Prefer, MigrateType, HeadTag),
        slow_path: bool,
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        if self.debugging() {
            return self.alloc_attempt_debugged(cpu, order, (prefer, mt, tag), slow_path, hooks);
        }
        self.alloc_attempt_unchecked(cpu, order, (prefer, mt, tag), slow_path, hooks)
    }

    /// [`Zone::alloc_attempt`] (and, with `slow_path`, [`Zone::alloc_with`]) while
    /// debugging: fault injection first, the owner recorded after.
    #[cold]
    #[inline(never)]
    fn alloc_attempt_debugged(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        how: (Prefer, MigrateType, HeadTag),
        slow_path: bool,
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        if self.injects_failure(order, how.1) {
            return Err(AllocError::OutOfMemory(order));
        }
        // A movable block is pinned while its poison is checked, so that nothing moves it.
        let tag = how.2.pinned_while_allocating(how.1);
        let taken =
            self.alloc_attempt_unchecked(cpu, order, (how.0, how.1, tag), slow_path, hooks)?;
        self.allocated_debugged(Some(cpu), taken.0, order, how.1);
        if tag != how.2 {
            self.allocated(taken.0, tag);
        }
        Ok(taken)
    }

    /// [`Zone::alloc_attempt`] without the debugging features.
    #[inline(always)]
    fn alloc_attempt_unchecked(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        (prefer, mt, tag): (Prefer, MigrateType, HeadTag),
        slow_path: bool,
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        if slow_path {
            return self.alloc_unchecked(cpu, order, (prefer, mt, tag), hooks);
        }
        // The common case, inline (as in `alloc_unchecked`): a per-cpu order from the CPU's
        // list. Everything else, and every error, out of line.
        if let Some((idx, contents)) = self.alloc_from_cpu_list(cpu, order, prefer, mt) {
            self.mark_allocated(cpu, idx, order, mt, tag);
            return Ok((idx, contents));
        }
        self.alloc_attempt_off_list(cpu, order, (prefer, mt, tag))
    }

    /// [`Zone::alloc_attempt_unchecked`] without the slow path, past the CPU's list: an
    /// order without a per-cpu list from the buddy, or an error.
    #[inline(never)]
    fn alloc_attempt_off_list(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        (prefer, mt, tag): (Prefer, MigrateType, HeadTag),
    ) -> Result<(FrameIdx, Contents), AllocError> {
        self.check_order(order)?;
        self.check_kind(mt)?;
        let (idx, contents) = self.alloc_fast(cpu, order, prefer, mt, self.cfg.fallback(), true)?;
        self.mark_allocated(cpu, idx, order, mt, tag);
        Ok((idx, contents))
    }

    /// The common case of every allocation: a per-cpu order taken from `pcp`'s list (refilled
    /// from the buddy when empty); `None` for any other order, an empty zone, or a kind a
    /// movable-only zone refuses.
    #[inline(always)]
    fn alloc_from_cpu_list(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
    ) -> Option<(FrameIdx, Contents)> {
        let list = self.cfg.pcp_list(order, mt)?;
        if order > self.cfg.max_order || (self.cfg.movable_only && mt != MigrateType::Movable) {
            return None;
        }
        self.take_from_list(pcp, list, order, prefer, mt, self.cfg.fallback())
    }

    /// Marks the block taken at `idx` on `cpu`'s lists allocated as `mt`, its head given
    /// `tag`'s key and references (a pinned head has two), its owner recorded.
    #[inline(always)]
    fn mark_allocated(
        &self,
        cpu: CpuLists<'_, R>,
        idx: FrameIdx,
        order: Order,
        mt: MigrateType,
        tag: HeadTag,
    ) {
        self.events().page_alloc(&PageAlloc {
            pfn: self.map().pfn(idx),
            order,
            kind: mt,
            cpu: self.cpu_number(cpu),
            percpu: self.cfg.pcp_list(order, mt).is_some(),
        });
        let head = self.map().frame(idx);
        // The key first: whoever sees the allocated word sees the key. A movable block's
        // key is what compaction hands its callback: always written (0 included), never
        // the free list's links left in the head's key fields.
        if tag.key != 0 || mt == MigrateType::Movable {
            head.set_key(tag.key);
        }
        // The pin with the word: no mover ever sees the block with one reference while the
        // call still works on it.
        head.store(Word::allocated_as(order.get(), mt).with_refcount(tag.refcount()));
    }

    /// Drops the pin a movable block carried while its allocation worked on it
    /// ([`Pin::WhileAllocating`]): it may move from now on. Its first frame, for the caller.
    #[inline(always)]
    pub(crate) fn allocated(&self, idx: FrameIdx, tag: HeadTag) -> Pfn {
        if tag.pin == Pin::WhileAllocating {
            self.unpin(idx);
        }
        self.map().pfn(idx)
    }

    /// Drops a pin of the allocated head at `idx`, whose caller holds it and another
    /// reference: the count stays above zero.
    #[cold]
    fn unpin(&self, idx: FrameIdx) {
        let frame = self.map().frame(idx);
        let mut w = frame.load();
        loop {
            debug_assert!(
                w.is_live() && w.refcount() >= 2,
                "unpinning an unpinned head"
            );
            match frame.cas(w, w.with_refcount(w.refcount().saturating_sub(1))) {
                Ok(()) => return,
                Err(now) => w = now,
            }
        }
    }

    /// [`AllocError::MovableOnly`] for a block of a kind other than movable from a
    /// movable-only zone.
    #[inline]
    pub(crate) fn check_kind(&self, mt: MigrateType) -> Result<(), AllocError> {
        if self.cfg.movable_only && mt != MigrateType::Movable {
            return Err(AllocError::MovableOnly(mt));
        }
        Ok(())
    }

    /// [`Zone::alloc_with`] past its fast path: the checks, the buddy for an order without
    /// a per-cpu list, and the slow path (`__alloc_pages_slowpath`): drain every reachable
    /// per-cpu list, merge the buddies kept apart by their knowledge of zero, initialize
    /// deferred memory; then rounds of direct reclaim and compaction through `hooks`; in
    /// defrag mode, last, the fallback that fragments a pageblock.
    #[inline(never)]
    fn alloc_slow(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        self.check_order(order)?;
        self.check_kind(mt)?;
        let fallback = self.cfg.fallback();
        let first = self.alloc_fast(pcp, order, prefer, mt, fallback, true);
        if !oom(&first) {
            return first;
        }
        self.drain_reachable(pcp);
        let mut retry = self.alloc_fast(pcp, order, prefer, mt, fallback, false);
        // Then: merge the buddies that stayed apart for their knowledge of zero.
        if oom(&retry) && self.lock_zone().merge_mixed(self.map()) {
            retry = self.alloc_fast(pcp, order, prefer, mt, fallback, false);
        }
        // Then: initialize deferred memory, a chunk at a time (`deferred_grow_zone`), or
        // wait for the chunks another CPU is initializing.
        while oom(&retry) {
            let seen = self.deferred_generation();
            retry = self.alloc_fast(pcp, order, prefer, mt, fallback, false);
            if !oom(&retry) || !self.grow_from_deferred(seen) {
                break;
            }
        }
        if oom(&retry) && (hooks.reclaim.is_some() || hooks.compact.is_some()) {
            retry = self.reclaim_and_compact(pcp, order, (prefer, mt, fallback), hooks);
        }
        // Defrag mode's last resort: what reclaim and compaction could not prevent, one
        // block straight from the buddy (a per-cpu batch would take dozens), claiming a
        // movable pageblock whole rather than stealing from it. Not for whole pageblocks,
        // whose fallback fragments nothing (and may not take the reserve), nor for movable
        // memory, which reclaim can always make (`ZoneConfig::defrag_mode`).
        if oom(&retry)
            && fallback == Fallback::WholePageblocks
            && order < self.cfg.pageblock_order
            && mt != MigrateType::Movable
        {
            let mut free = self.lock_zone();
            retry = free
                .rmqueue(self.map(), order, prefer, mt, Fallback::Claiming)
                .map(|(idx, zeroed)| (idx, Contents::of(zeroed)))
                .ok_or(AllocError::OutOfMemory(order));
            if retry.is_ok() {
                free.stats().pgalloc += order.pages();
            }
            if let Ok((_, contents)) = retry
                && prefer == Prefer::Zeroed
            {
                free.stats()
                    .count_zeroed_alloc(contents.known_zero(), order.pages());
            }
        }
        match self.refused {
            // A static zone whose configuration was refused: that is why.
            Some(e) if oom(&retry) => Err(e.into()),
            _ => retry,
        }
    }

    /// The slow path's rounds of direct reclaim and direct compaction (Linux's
    /// `__alloc_pages_direct_reclaim` and `__alloc_pages_direct_compact` with
    /// `should_reclaim_retry`): each round asks `hooks.reclaim` for the larger of 32 frames
    /// (`SWAP_CLUSTER_MAX`) and the block (a pageblock in defrag mode), drains, tries; then
    /// compacts towards the block's order (the pageblock order in defrag mode, where
    /// compaction makes the whole free pageblock the fallback may take), tries; until the
    /// allocation succeeds, a round makes no progress (compaction moved nothing, or without
    /// compaction reclaim freed nothing), or 16 rounds; one round for an order above 3
    /// (`PAGE_ALLOC_COSTLY_ORDER`, as Linux without `__GFP_RETRY_MAYFAIL`).
    #[cold]
    fn reclaim_and_compact(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        (prefer, mt, fallback): (Prefer, MigrateType, Fallback),
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        let goal = fallback.lowest_order(order, self.cfg.pageblock_order);
        let mut retry = Err(AllocError::OutOfMemory(order));
        let mut rounds = ReclaimRounds::of(Some(order));
        loop {
            let mut reclaimed = false;
            if let Some(reclaim) = hooks.reclaim.as_deref_mut() {
                reclaimed = reclaim.reclaim(ReclaimRounds::ask(goal.pages())) > 0;
                self.drain_reachable(pcp);
                retry = self.alloc_fast(pcp, order, prefer, mt, fallback, false);
                if !oom(&retry) {
                    return retry;
                }
            }
            // Without compaction, reclaim is the progress; with it, compaction is (reclaim
            // only feeds it: freed pages scattered over pageblocks make no block).
            let progress = match hooks.compact.as_deref_mut() {
                Some(migrate) if goal > Order::ZERO => {
                    let done =
                        self.compact_direct(pcp, (order, goal), &mut MigrateCallback(migrate));
                    retry = self.alloc_fast(pcp, order, prefer, mt, fallback, false);
                    if !oom(&retry) {
                        return retry;
                    }
                    done.moved_pages > 0
                }
                _ => reclaimed,
            };
            if !rounds.another(progress) {
                break;
            }
        }
        retry
    }

    /// One allocation attempt without draining other lists: from the CPU's list for a
    /// per-cpu order ([`Zone::take_from_list`]), else from the buddy, falling back to other
    /// types as `fallback` allows. With `list_tried` (just after
    /// [`Zone::alloc_from_cpu_list`] found nothing) a per-cpu order is out of memory
    /// without taking both locks again. The block's head is not marked allocated yet.
    fn alloc_fast(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
        fallback: Fallback,
        list_tried: bool,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        let oom = AllocError::OutOfMemory(order);
        match self.cfg.pcp_list(order, mt) {
            Some(_) if list_tried => Err(oom),
            Some(list) => self
                .take_from_list(pcp, list, order, prefer, mt, fallback)
                .ok_or(oom),
            None => self.take_from_buddy(order, prefer, mt, fallback),
        }
    }

    /// A block of `order` (an order without a per-cpu list) straight from the buddy under
    /// the zone lock, falling back to other types as `fallback` allows, counted there; with
    /// a pageblock reserve, a request of whole pageblocks only while it leaves the reserve.
    /// The block's head is not marked allocated yet.
    #[inline(always)]
    pub(crate) fn take_from_buddy(
        &self,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        let mut free = self.lock_zone();
        let taken = if self.cfg.pageblock_reserve && order >= self.cfg.pageblock_order {
            free.rmqueue_leaving_reserve(self.map(), order, prefer, mt, fallback)
        } else {
            free.rmqueue(self.map(), order, prefer, mt, fallback)
        }
        .ok_or(AllocError::OutOfMemory(order))?;
        free.stats().pgalloc += order.pages();
        if prefer == Prefer::Zeroed {
            free.stats().count_zeroed_alloc(taken.1, order.pages());
        }
        Ok((taken.0, Contents::of(taken.1)))
    }

    /// A block from `pcp`'s `list` under its lock, as `prefer` says: a zeroed allocation
    /// takes a block known zero from the list, else one from the buddy (moving the rest of a
    /// batch of them to the list), else what a plain allocation takes; a plain allocation
    /// the list's front, refilled from the buddy first if the list is empty. The block's
    /// head is not marked allocated yet.
    #[inline(always)]
    fn take_from_list(
        &self,
        pcp: CpuLists<'_, R>,
        list: usize,
        order: Order,
        prefer: Prefer,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Option<(FrameIdx, Contents)> {
        let mut lists = self.lock_pcp(pcp);
        if prefer == Prefer::Zeroed {
            return self.take_zeroed_from_list(pcp, &mut lists, list, order, mt, fallback);
        }
        let (idx, zeroed) = self.pop_refilled(pcp, &mut lists, (list, order), fallback)?;
        Some((idx, Contents::of(zeroed)))
    }

    /// The front of `lists`' `list` of `order` for a plain allocation, the list refilled
    /// from the buddy first if it is empty (a batch of `ZoneConfig::pcp_blocks`, falling
    /// back as `fallback` allows): Linux's `rmqueue_pcplist`. The caller holds the lists'
    /// lock; returns the block and whether it is known zero, `None` when the refill found
    /// nothing.
    #[inline(always)]
    pub(super) fn pop_refilled(
        &self,
        pcp: CpuLists<'_, R>,
        lists: &mut PcpLists,
        (list, order): (usize, Order),
        fallback: Fallback,
    ) -> Option<(FrameIdx, bool)> {
        // A plain pop takes any block the list has: `None` only from an empty list.
        if let Some(taken) = lists.pop(self.map(), list, order, Prefer::Unzeroed) {
            return Some(taken);
        }
        self.refill(
            pcp,
            lists,
            list,
            (order, Prefer::Unzeroed, fallback),
            self.cfg.pcp_blocks(order),
        );
        lists.pop(self.map(), list, order, Prefer::Unzeroed)
    }

    /// [`Zone::take_from_list`] for a zeroed allocation, under the list's lock: a block known
    /// zero from the list, else one from the buddy with the rest of a batch of them for the
    /// list, else what a plain allocation takes.
    #[inline(always)]
    fn take_zeroed_from_list(
        &self,
        cpu: CpuLists<'_, R>,
        lists: &mut PcpLists,
        list: usize,
        order: Order,
        mt: MigrateType,
        fallback: Fallback,
    ) -> Option<(FrameIdx, Contents)> {
        let m = self.map();
        // A block known zero from the list (the only kind a zeroed pop takes), else from
        // the buddy with the rest of a batch for the list.
        let taken = match lists.pop(m, list, order, Prefer::Zeroed) {
            Some((idx, _)) => Some(idx),
            None => self.take_zeroed_from_buddy(cpu, lists, list, (order, mt, fallback)),
        };
        let taken = match taken {
            Some(idx) => (idx, Contents::KnownZero),
            None => {
                let (idx, _) = self.pop_refilled(cpu, lists, (list, order), fallback)?;
                (idx, lists.contents(m, idx, order))
            }
        };
        lists
            .stats
            .count_zeroed_alloc(taken.1.known_zero(), order.pages());
        Some(taken)
    }

    /// [`Zone::take_zeroed_from_list`] when the list has no block known zero: one from the
    /// buddy for this call and, where one block holds them, the list's after it, then a
    /// refill of the rest of a batch; `None` when the buddy has none. Out of line: most
    /// zeroed allocations find one on the list.
    #[inline(never)]
    fn take_zeroed_from_buddy(
        &self,
        cpu: CpuLists<'_, R>,
        lists: &mut PcpLists,
        list: usize,
        (order, mt, fallback): (Order, MigrateType, Fallback),
    ) -> Option<FrameIdx> {
        let m = self.map();
        let mut free = self.lock_zone();
        let batch = self.cfg.pcp_zeroed_blocks(order);
        let (idx, n) = free.rmqueue_zeroed_run(m, order, mt, fallback, batch)?;
        // Straight from the buddy, not through the list: counted here.
        free.stats().pgalloc += order.pages();
        self.events().pcp_refill(&PcpRefill {
            cpu: self.cpu_number(cpu),
            order,
            blocks: batch - 1,
        });
        let next = idx + (1u32 << order.get());
        lists.push_zeroed_run(m, list, (next, order, n - 1));
        if n < batch {
            lists.refill(
                m,
                &mut free,
                list,
                (order, Prefer::Zeroed, fallback),
                batch - n,
            );
        } else {
            // One block held the whole batch (most often): nothing left to take, but a
            // refill all the same.
            lists.count_refill(m, &free);
        }
        Some(idx)
    }

    /// Refills `lists`' `list` with `blocks` blocks of `order` from the buddy, under the
    /// zone lock (every few allocations of a high order: not cold).
    #[inline]
    fn refill(
        &self,
        cpu: CpuLists<'_, R>,
        lists: &mut PcpLists,
        list: usize,
        how: (Order, Prefer, Fallback),
        blocks: u64,
    ) {
        let mut free = self.lock_zone();
        self.events().pcp_refill(&PcpRefill {
            cpu: self.cpu_number(cpu),
            order: how.0,
            blocks,
        });
        lists.refill(self.map(), &mut free, list, how, blocks);
    }

    /// Allocates the specific block `[pfn, pfn + 2^order)` if it lies wholly inside one block
    /// that is free in the buddy, splitting that block around it: for reserved ranges,
    /// taking a bad frame off the buddy, or replaying an allocation. Where part of the range
    /// sits on per-cpu lists, the lists of each CPU holding some of it are drained back to
    /// the buddy first (the blocks merge there) and the block is taken then.
    ///
    /// # Errors
    /// [`ContigError::OrderTooLarge`], [`ContigError::Misaligned`], [`ContigError::OutOfZone`],
    /// [`ContigError::NotInBuddy`] when some of the range is allocated, leaked or a hole, or
    /// on a per-cpu list no drain could empty.
    /// On an error nothing is allocated; lists drained before it stay drained.
    ///
    /// It drains other CPUs' lists under their locks: not while [`LocalCpu`](crate::LocalCpu)
    /// handles are in use.
    pub fn alloc_pages_at(&self, pfn: Pfn, order: Order) -> Result<(), ContigError> {
        self.alloc_pages_at_as(pfn, order, MigrateType::Unmovable)
    }

    /// [`Zone::alloc_pages_at`] for an allocation of kind `mt`.
    pub(crate) fn alloc_pages_at_as(
        &self,
        pfn: Pfn,
        order: Order,
        mt: MigrateType,
    ) -> Result<(), ContigError> {
        self.check_order(order)?;
        if !order.aligns(pfn) {
            return Err(ContigError::Misaligned { pfn, order });
        }
        let m = self.map();
        let idx = m.index(pfn)?;
        let mut taken = self.lock_zone().take_block_at(m, idx, order);
        if matches!(taken, Err(ContigError::NotInBuddy(_))) && self.drain_cpus_holding(idx, order) {
            taken = self.lock_zone().take_block_at(m, idx, order);
        }
        taken?;
        if self.debugging() {
            self.record_owner(None, idx, order, mt);
        }
        if mt == MigrateType::Movable {
            // No key: not the free list's links left in the head.
            m.frame(idx).set_key(0);
        }
        m.frame(idx).store(Word::allocated_as(order.get(), mt));
        Ok(())
    }

    /// Drains the lists of every CPU that holds a block overlapping `[idx, idx + 2^order)`;
    /// whether any did.
    #[cold]
    fn drain_cpus_holding(&self, idx: FrameIdx, order: Order) -> bool {
        let m = self.map();
        let (start, end) = (u64::from(idx), u64::from(idx) + order.pages());
        let mut drained = false;
        for pcp in self.pcps.slots() {
            let pcp = CpuLists { pcp, local: false };
            let overlaps = |i: FrameIdx| {
                let block_end = u64::from(i) + (1u64 << m.frame(i).load().order());
                u64::from(i) < end && start < block_end
            };
            let holds = self.lock_pcp(pcp).lists.all_blocks(m.frames).any(overlaps);
            if holds {
                self.drain(pcp, u64::MAX);
                drained = true;
            }
        }
        drained
    }
}

/// Whether an attempt ran out of memory (what the slow path's next step may fix).
fn oom<T>(r: &Result<T, AllocError>) -> bool {
    matches!(r, Err(AllocError::OutOfMemory(_)))
}
