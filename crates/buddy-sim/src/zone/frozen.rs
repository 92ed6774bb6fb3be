//! Frozen blocks: an unmovable block handed out with no reference count, its caller its
//! only owner until it frees it (Linux's `alloc_frozen_pages` and `free_frozen_pages`,
//! which its page-table and slab allocations use), most often one page. Nobody can take a
//! reference to a frozen block, so its free needs no compare-and-swap: a check of the
//! head's word and the per-cpu list's push. Both calls take one lock, the CPU's list lock
//! (none for a [`LocalCpu`](crate::LocalCpu) handle), and on the common path read or write
//! only the list's array and the block's head.

use crate::error::alloc::AllocError;
use crate::error::free::FreeError;
use crate::events::{PageAlloc, PageFree, ZoneEvents};
use crate::frame::Word;
use crate::frame_storage::FrameStorage;
use crate::migratetype::{MigrateType, Pageblock};
use crate::request::{HeadTag, SlowPath};
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::map::FrameMap;
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

/// Whether a frozen allocation from a CPU's list refills the list from the buddy when it is
/// empty (`Cpu::alloc_frozen_pages`), or takes what the list holds alone
/// (`Cpu::alloc_frozen_pages_listed`, which changes nothing when it has none).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Refill {
    /// A refill's first block when the whole list is empty.
    WhenEmpty,
    /// The list's blocks alone.
    Never,
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// [`Cpu::alloc_frozen_pages`] on `pcp`'s lists.
    #[inline(always)]
    pub(crate) fn alloc_frozen_on(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
    ) -> Result<FrameIdx, AllocError> {
        if self.debugging() {
            return self.alloc_frozen_debugged(pcp, order, None);
        }
        let idx = self.take_unmovable(pcp, order)?;
        self.mark_frozen(idx, order);
        Ok(idx)
    }

    /// Marks the block of `order` at `idx`, which the caller took, allocated frozen: its
    /// head's word, what every free of a frozen block checks.
    #[inline(always)]
    fn mark_frozen(&self, idx: FrameIdx, order: Order) {
        self.map().frame(idx).store(Word::frozen_block(order.get()));
    }

    /// [`Zone::alloc_frozen_on`] (`align` `None`) or [`Zone::alloc_frozen_aligned_on`]
    /// while debugging: fault injection first, the owner recorded after.
    #[cold]
    #[inline(never)]
    fn alloc_frozen_debugged(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        align: Option<Order>,
    ) -> Result<FrameIdx, AllocError> {
        if self.injects_failure(order, MigrateType::Unmovable) {
            return Err(AllocError::OutOfMemory(order));
        }
        let idx = match align {
            None => self.take_unmovable(pcp, order)?,
            Some(align) => self.take_unmovable_aligned(pcp, order, align)?,
        };
        self.allocated_debugged(Some(pcp), idx, order, MigrateType::Unmovable);
        self.mark_frozen(idx, order);
        Ok(idx)
    }

    /// An unmovable block of `order` for the caller to mark, its allocation told to the
    /// event hook once: the front of `pcp`'s list for it (its array, then its linked part,
    /// else a refill's first block; order 0 always has a list: folded away for it), a block
    /// straight from the buddy for an order without a list, else through the slow path
    /// (which drains and retries, or marks a block allocated with a reference, for the
    /// caller to overwrite, and tells the hook).
    #[inline(always)]
    fn take_unmovable(&self, pcp: CpuLists<'_, R>, order: Order) -> Result<FrameIdx, AllocError> {
        if let Some(idx) = self.take_unmovable_listed(pcp, order, Refill::WhenEmpty) {
            return Ok(idx);
        }
        // An order without a list (a heap's larger runs, a huge page): straight from the
        // buddy while it has a block, without the layers of the general path.
        if self.cfg.pcp_list(order, MigrateType::Unmovable).is_none()
            && self.check_order(order).is_ok()
            && self.check_kind(MigrateType::Unmovable).is_ok()
            && let Ok((idx, _)) = self.take_from_buddy(
                order,
                Prefer::Unzeroed,
                MigrateType::Unmovable,
                self.cfg.fallback(),
            )
        {
            self.frozen_allocated(pcp, idx, order);
            return Ok(idx);
        }
        self.take_unmovable_slow(pcp, order)
    }

    /// The front of `pcp`'s unmovable list for `order` (its array, then its linked part, or
    /// with [`Refill::WhenEmpty`] a refill's first block where the whole list is empty), its
    /// allocation told to the event hook; `None` when there is none or the order has no
    /// list.
    #[inline(always)]
    fn take_unmovable_listed(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        refill: Refill,
    ) -> Option<FrameIdx> {
        let list = self.cfg.pcp_list(order, MigrateType::Unmovable)?;
        let Some(idx) = self.lock_pcp(pcp).pop_hot(list, order) else {
            return self.take_unmovable_linked(pcp, (order, list), refill);
        };
        self.frozen_allocated(pcp, idx, order);
        Some(idx)
    }

    /// [`Zone::take_unmovable_listed`] when `list`'s array is empty: the front of its
    /// linked part, or with [`Refill::WhenEmpty`] where the whole list is empty the first
    /// block of a refill from the buddy ([`Zone::pop_refilled`], as a plain allocation's),
    /// under the lists' lock taken again; out of line so that the array's pop carries none
    /// of it. `None` when there is none: the refill found nothing (the slow path's to drain
    /// and retry), or the zone serves movable allocations only, whose unmovable lists
    /// nothing refills.
    #[inline(never)]
    fn take_unmovable_linked(
        &self,
        pcp: CpuLists<'_, R>,
        (order, list): (Order, usize),
        refill: Refill,
    ) -> Option<FrameIdx> {
        let mut lists = self.lock_pcp(pcp);
        let (idx, _) = if refill == Refill::WhenEmpty && !self.cfg.movable_only {
            self.pop_refilled(pcp, &mut lists, (list, order), self.cfg.fallback())
        } else {
            lists.pop(self.map(), list, order, Prefer::Unzeroed)
        }?;
        drop(lists);
        self.frozen_allocated(pcp, idx, order);
        Some(idx)
    }

    /// [`Zone::take_unmovable`] when the list is empty: the allocation paths (a refill, or
    /// the slow path), out of line so that the list's pop carries none of them.
    #[inline(never)]
    fn take_unmovable_slow(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
    ) -> Result<FrameIdx, AllocError> {
        let how = (Prefer::Unzeroed, MigrateType::Unmovable, HeadTag::NONE);
        Ok(self
            .alloc_unchecked(pcp, order, how, &mut SlowPath::none())?
            .0)
    }

    /// A frozen unmovable block of `order` aligned to `align` (above `order`) on `pcp`'s
    /// lists: the most recently freed aligned block of its list's array if one is there,
    /// else a block of the alignment's order, its head kept and the blocks past it (one of
    /// each order from `order` up) freed, to the lists where the next such call finds an
    /// aligned one.
    pub(crate) fn alloc_frozen_aligned_on(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        align: Order,
    ) -> Result<FrameIdx, AllocError> {
        if self.debugging() {
            return self.alloc_frozen_debugged(pcp, order, Some(align));
        }
        let idx = self.take_unmovable_aligned(pcp, order, align)?;
        self.mark_frozen(idx, order);
        Ok(idx)
    }

    /// An unmovable block of `order` aligned to `align` for the caller to mark, its
    /// allocation told to the event hook (as [`Zone::take_unmovable`]): the most recently
    /// freed aligned block of its list's array, else a block of the alignment's order with
    /// the blocks past it freed.
    fn take_unmovable_aligned(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        align: Order,
    ) -> Result<FrameIdx, AllocError> {
        if let Some(idx) = self.take_unmovable_aligned_listed(pcp, order, align) {
            return Ok(idx);
        }
        let idx = self.take_unmovable(pcp, align)?;
        // The pieces past the block are this call's alone, their frames tails: each goes to
        // its list (or the buddy) as the free of a block of its order does.
        for piece in order.get()..align.get() {
            self.free_block(pcp, idx + (1u32 << piece), Order(piece), 0);
        }
        Ok(idx)
    }

    /// The most recently freed block of `pcp`'s unmovable list for `order` aligned to
    /// `align`, from its array, its allocation told to the event hook; `None` when the
    /// array holds none or the order has no list.
    #[inline(always)]
    fn take_unmovable_aligned_listed(
        &self,
        pcp: CpuLists<'_, R>,
        order: Order,
        align: Order,
    ) -> Option<FrameIdx> {
        let list = self.cfg.pcp_list(order, MigrateType::Unmovable)?;
        let (start, mask) = (self.cfg.start.0, align.pages().wrapping_sub(1));
        let aligned = |idx: FrameIdx| start.wrapping_add(u64::from(idx.0)) & mask == 0;
        let idx = self.lock_pcp(pcp).take_hot_where(list, order, aligned)?;
        self.frozen_allocated(pcp, idx, order);
        Some(idx)
    }

    /// The event of a frozen block allocated at `idx`.
    #[inline(always)]
    fn frozen_allocated(&self, pcp: CpuLists<'_, R>, idx: FrameIdx, order: Order) {
        let mt = MigrateType::Unmovable;
        self.events().page_alloc(&PageAlloc {
            pfn: self.map().pfn(idx),
            order,
            kind: mt,
            cpu: self.cpu_number(pcp),
            percpu: self.cfg.pcp_list(order, mt).is_some(),
        });
    }

    /// [`Cpu::free_frozen_pages`] on `pcp`'s lists.
    ///
    /// # Safety
    /// As [`Cpu::free_frozen_pages`].
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn free_frozen_on(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        order: Order,
    ) -> Result<(), FreeError> {
        let m = self.map();
        let idx = m.index(pfn)?;
        if m.frame(idx).load() != Word::frozen_block(order.get()) {
            return Err(self.not_frozen_block(idx, order));
        }
        // The caller owns the block whole (no reference count to drop): the free writes its
        // head when it puts the block on a list.
        match self.frozen_free_list(m, pfn, order) {
            Some(list) => self.free_to_pcp_list(m, pcp, (idx, order), list, 1),
            None => self.free_block_elsewhere(pcp, idx, order),
        }
        Ok(())
    }

    /// The list the frozen block of `order` at `pfn` (a frame of the zone) goes to at once
    /// when it is freed: its order's unmovable list, for an unmovable pageblock neither
    /// isolated nor reserved for CMA and an order with a list (the common case); `None`
    /// for a block that goes elsewhere.
    #[inline(always)]
    fn frozen_free_list(&self, m: FrameMap<'_>, pfn: Pfn, order: Order) -> Option<usize> {
        let list = self.cfg.pcp_list(order, MigrateType::Unmovable)?;
        let pageblock = m.pageblock_bits_frame_of(pfn).pageblock_bits();
        (pageblock == const { Pageblock::of(MigrateType::Unmovable).bits() }).then_some(list)
    }

    /// [`Cpu::free_frozen_pages_listed`] on `pcp`'s lists.
    ///
    /// # Safety
    /// As [`Cpu::free_frozen_pages`].
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn free_frozen_listed_on(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        order: Order,
    ) -> bool {
        if self.debugging() {
            return false;
        }
        let m = self.map();
        let Ok(idx) = m.index(pfn) else {
            return false;
        };
        // A frozen block of this order (nothing to report) that goes to a list at once, as
        // `free_frozen_on` puts it.
        if m.frame(idx).load() != Word::frozen_block(order.get()) {
            return false;
        }
        let Some(list) = self.frozen_free_list(m, pfn, order) else {
            return false;
        };
        let mut lists = self.lock_pcp(pcp);
        // No drain past the high mark to follow, and room in the array: no link to write.
        if lists
            .high
            .passed_by(&self.cfg, lists.count.pages + order.pages())
            || !lists.push_freed_hot(m, list, idx, order)
        {
            return false;
        }
        self.count_pcp_free(&mut lists, (list, order), 1);
        drop(lists);
        self.events().page_free(&PageFree {
            pfn,
            order,
            cpu: self.cpu_number(pcp),
            percpu: true,
        });
        true
    }

    /// [`Zone::free_block`] of a frozen block that goes elsewhere than its order's
    /// unmovable list (a block of another pageblock type, of an isolated pageblock, of an
    /// order without a list), out of line.
    #[inline(never)]
    fn free_block_elsewhere(&self, pcp: CpuLists<'_, R>, idx: FrameIdx, order: Order) {
        self.free_block(pcp, idx, order, 1);
    }

    /// Why the frame at `idx` is not the head of a frozen block of `order`.
    #[cold]
    fn not_frozen_block(&self, idx: FrameIdx, order: Order) -> FreeError {
        let m = self.map();
        let w = m.frame(idx).load();
        if w.is_frozen_block() {
            return FreeError::OrderMismatch {
                pfn: m.pfn(idx),
                given: order,
                allocated: Order(w.order()),
            };
        }
        if w.is_live() && w.order() == order.get() {
            return FreeError::NotFrozen(m.pfn(idx));
        }
        self.not_frozen(idx)
    }

    /// Splits the frozen block of `order` at `pfn` ([`Cpu::alloc_frozen_pages`]) into
    /// `2^order` frozen pages, each freed alone from then on ([`Cpu::free_frozen_page`], or
    /// as a run, [`Cpu::free_contig_frozen_range`]): [`Zone::split_page`] for a block with
    /// no reference count (StarryOS's `split_pages`, a huge page's memory mapped as 4 KiB
    /// pages). page_owner's record is split with it: each page owned as the block was.
    /// Metadata only.
    ///
    /// ```
    /// use buddy_sim::{Order, Pfn, StaticZone};
    /// static ZONE: StaticZone<64, 1> = StaticZone::new_static_at(Pfn(0));
    /// let cpu = ZONE.cpu(0)?;
    /// let block = cpu.alloc_frozen_pages(Order::new(2)?)?;
    /// // SAFETY: the block is this code's alone, split and freed by it alone.
    /// unsafe {
    ///     ZONE.split_frozen_pages(block, Order::new(2)?)?;
    ///     for i in 0..4 {
    ///         cpu.free_frozen_page(Pfn(block.0 + i))?;
    ///     }
    /// }
    /// assert_eq!(ZONE.free_pages_total(), 64);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// # Errors
    /// Nothing changes on an error: as [`Cpu::free_frozen_pages`] for a frame that is not
    /// the head of a frozen block of `order` ([`FreeError::NotFrozen`],
    /// [`FreeError::OrderMismatch`], [`FreeError::CompoundPage`],
    /// [`FreeError::DoubleFree`], [`FreeError::OutOfZone`], ...).
    ///
    /// # Safety
    /// The caller owns the block (it came from [`Cpu::alloc_frozen_pages`] and was not freed
    /// since), and no other call frees or splits it while this one runs: its frames are
    /// written without a compare-and-swap, as its free reads them.
    #[allow(unsafe_code)]
    pub unsafe fn split_frozen_pages(&self, pfn: Pfn, order: Order) -> Result<(), FreeError> {
        let m = self.map();
        let idx = m.index(pfn)?;
        if m.frame(idx).load() != Word::frozen_block(order.get()) {
            return Err(self.not_frozen_block(idx, order));
        }
        // SAFETY: a frozen block of `order` (read above) the caller owns, split by no
        // other call meanwhile: this function's contract.
        unsafe { self.split_frozen_block(idx, order) };
        Ok(())
    }

    /// [`Zone::split_frozen_pages`] of the frozen block of `order` at `idx`, unchecked. The
    /// head first, as `split_page` changes it first.
    ///
    /// # Safety
    /// The block at `idx` is a frozen block of `order` (its head's word says so) that the
    /// caller owns, and no other call frees or splits it while this one runs.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn split_frozen_block(&self, idx: FrameIdx, order: Order) {
        let m = self.map();
        let end = idx + order.pages() as u32;
        m.frame(idx).store(Word::FROZEN_PAGE);
        self.split_owner(idx, FrameIdx::span(idx, end).map(|i| (i, Order::ZERO)));
        for frame in m.frames_in(idx + 1..end) {
            frame.store(Word::FROZEN_PAGE);
        }
    }

    /// Makes the unmovable block of `order` at `pfn`, which the caller has just allocated
    /// with its one reference and handed to nobody, a frozen block (as
    /// [`Cpu::alloc_frozen_pages`] hands one out). A block in any other state is left as it
    /// is.
    #[cfg_attr(
        not(any(feature = "axallocator", feature = "testing")),
        allow(dead_code)
    )]
    pub(crate) fn freeze_fresh_block(&self, pfn: Pfn, order: Order) {
        let m = self.map();
        if let Ok(idx) = m.index(pfn) {
            let fresh = Word::allocated(order.get());
            let _ = m.frame(idx).cas(fresh, Word::frozen_block(order.get()));
        }
    }

    /// Marks the frozen block of `order` at `pfn`, which its owner keeps in a cache of its
    /// own to hand out again without the zone (a per-CPU array of free pages in front of the
    /// zone, reached without a lock), [`FrameState::Cached`](crate::FrameState::Cached):
    /// allocated as far as the zone knows (its counts, [`Zone::check`], compaction and
    /// contiguous allocation, which find it busy), and refused by every free and reference
    /// ([`FreeError::DoubleFree`]) until [`Zone::uncache_frozen`] takes it out. A block
    /// freed twice, the first time into such a cache, is then reported as one freed twice
    /// onto a list is. One load and one store of the block's head.
    ///
    /// `false`, with nothing changed, for anything but the head of a frozen block of
    /// `order` (a block the zone did not hand out so, one cached already, a frame outside
    /// the zone), and while the zone debugs (its allocation- and free-time checks see every
    /// block then).
    ///
    /// ```
    /// use buddy_sim::{FrameState, Order, Pfn, StaticZone};
    /// static ZONE: StaticZone<4096, 1> = StaticZone::new_static_at(Pfn(0));
    /// let page = ZONE.cpu(0)?.alloc_frozen_page()?;
    /// // SAFETY: the page is this code's alone, unused from here on but through its cache.
    /// assert!(unsafe { ZONE.cache_frozen(page, Order::ZERO) });
    /// assert_eq!(ZONE.frame(page)?.state, FrameState::Cached);
    /// assert!(!unsafe { ZONE.cache_frozen(page, Order::ZERO) }); // cached already
    /// // SAFETY: this code's cache holds the page.
    /// assert!(unsafe { ZONE.uncache_frozen(page, Order::ZERO) });
    /// // SAFETY: the page is this code's alone and unused from here on.
    /// unsafe { ZONE.cpu(0)?.free_frozen_pages(page, Order::ZERO) }?;
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// # Safety
    /// The block is the caller's: handed out frozen of `order` ([`Cpu::alloc_frozen_pages`]),
    /// not freed, and not used from here on but by the cache's next hand-out; no other call
    /// frees, splits or caches it while this one runs (a load then a store, not a
    /// compare-and-swap, as a frozen block's free is).
    #[inline(always)]
    #[allow(unsafe_code)]
    pub unsafe fn cache_frozen(&self, pfn: Pfn, order: Order) -> bool {
        let (frozen, cached) = (
            Word::frozen_block(order.get()),
            Word::cached_block(order.get()),
        );
        !self.debugging() && self.rewrite_head(pfn, frozen, cached)
    }

    /// Takes the block of `order` at `pfn` out of its owner's cache
    /// ([`Zone::cache_frozen`]): a frozen block of `order` again, the caller's to hand out
    /// or free. `false`, with nothing changed, for anything but the head of a cached block
    /// of `order`.
    ///
    /// # Safety
    /// The caller's cache holds the block (it cached it and has not taken it out since), and
    /// no other call takes it out while this one runs.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub unsafe fn uncache_frozen(&self, pfn: Pfn, order: Order) -> bool {
        let (cached, frozen) = (
            Word::cached_block(order.get()),
            Word::frozen_block(order.get()),
        );
        self.rewrite_head(pfn, cached, frozen)
    }

    /// Rewrites the word of the frame at `pfn` from `from` to `to`, with a load and a store
    /// (the caller owns the block): whether it was `from` (`false`, nothing changed,
    /// otherwise, or for a frame outside the zone).
    #[inline(always)]
    fn rewrite_head(&self, pfn: Pfn, from: Word, to: Word) -> bool {
        // A frame past the zone's pages (but among its frames) heads no block: its word is
        // not `from`.
        let Some(head) = self.map().frame_of(pfn) else {
            return false;
        };
        if head.load() != from {
            return false;
        }
        head.store(to);
        true
    }
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// One unmovable order-0 page with no reference count (Linux's
    /// `alloc_frozen_pages(GFP_KERNEL, 0)`): a page-table page, a slab's page, a stack's
    /// page, whose caller owns it whole. From this CPU's list (the page freed last, first),
    /// refilled from the buddy in a batch when empty; with the allocation slow path of
    /// [`AllocRequest::page`](crate::AllocRequest::page) when memory is short. Not known to
    /// read zero. Freed with [`Cpu::free_frozen_page`] (or, as one page of a run, with
    /// [`Cpu::free_contig_frozen_range`]); [`Zone::get_page`] and [`Cpu::put_page`] refuse
    /// it.
    ///
    /// ```
    /// use buddy_sim::{Pfn, StaticZone};
    /// static ZONE: StaticZone<64, 1> = StaticZone::new_static_at(Pfn(0));
    /// let cpu = ZONE.cpu(0)?;
    /// let table = cpu.alloc_frozen_page()?;
    /// assert_eq!(ZONE.free_pages_total(), 63);
    /// // SAFETY: the page is this code's alone and unused from here on.
    /// unsafe { cpu.free_frozen_page(table) }?;
    /// assert_eq!(ZONE.free_pages_total(), 64);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// # Errors
    /// As an [`AllocRequest::page`](crate::AllocRequest::page) allocation:
    /// [`AllocError::OutOfMemory`], [`AllocError::MovableOnly`] in a movable-only zone.
    #[inline(always)]
    pub fn alloc_frozen_page(&self) -> Result<Pfn, AllocError> {
        self.alloc_frozen_pages(Order::ZERO)
    }

    /// [`Cpu::alloc_frozen_page`] from this CPU's list alone: `None`, with nothing changed,
    /// when the list is empty (no refill from the buddy, no slow path), and while the zone
    /// debugs (fault injection, page_owner and poisoning take [`Cpu::alloc_frozen_page`]).
    /// For an embedder with several zones that takes a page from a zone's list before it
    /// decides which zone's refill and slow path to run, as Linux's zonelist passes over a
    /// zone short of pages before any slow path.
    #[inline(always)]
    pub fn alloc_frozen_page_listed(&self) -> Option<Pfn> {
        self.alloc_frozen_pages_listed(Order::ZERO)
    }

    /// [`Cpu::alloc_frozen_pages`] from this CPU's list for `order` alone, as
    /// [`Cpu::alloc_frozen_page_listed`] for a page: `None`, with nothing changed, when the
    /// order has no list or its list is empty (no refill, no slow path), and while the zone
    /// debugs. For an embedder's fast path for small blocks (a task stack, a heap's small
    /// run) that leaves everything else to [`Cpu::alloc_frozen_pages`].
    ///
    /// ```
    /// use buddy_sim::{Order, Pfn, StaticZone};
    /// static ZONE: StaticZone<4096, 1> = StaticZone::new_static_at(Pfn(0));
    /// let cpu = ZONE.cpu(0)?;
    /// let order = Order::new(2)?;
    /// assert_eq!(cpu.alloc_frozen_pages_listed(order), None); // nothing on the list yet
    /// let stack = cpu.alloc_frozen_pages(order)?;
    /// // SAFETY: the block is this code's alone and unused from here on.
    /// unsafe { cpu.free_frozen_pages(stack, order) }?;
    /// assert_eq!(cpu.alloc_frozen_pages_listed(order), Some(stack)); // the block just freed
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    #[inline(always)]
    pub fn alloc_frozen_pages_listed(&self, order: Order) -> Option<Pfn> {
        self.frozen_listed(order, |zone, pcp| {
            zone.take_unmovable_listed(pcp, order, Refill::Never)
        })
    }

    /// [`Cpu::alloc_frozen_pages_listed`] of a block aligned to `2^align` frames (a 16 KiB
    /// buffer on a 64 KiB boundary, a DMA ring): the most recently freed block of this
    /// CPU's list for `order` that starts so aligned, from the list's array. `None`, with
    /// nothing changed, when the array holds none (no refill, no split), when the order has
    /// no list, and while the zone debugs. For an embedder's fast path for aligned buffers
    /// that leaves everything else to its general path, which splits a block of the
    /// alignment's order and leaves the pieces past the buffer on the lists.
    ///
    /// ```
    /// use buddy_sim::{Order, Pfn, StaticZone};
    /// static ZONE: StaticZone<4096, 1> = StaticZone::new_static_at(Pfn(0));
    /// let cpu = ZONE.cpu(0)?;
    /// let (order, align) = (Order::new(2)?, Order::new(4)?);
    /// let buffer = cpu.alloc_frozen_pages(order)?;
    /// assert_eq!(buffer.0 % 16, 0); // the first block of a fresh zone: aligned to 16 frames
    /// // SAFETY: the block is this code's alone and unused from here on.
    /// unsafe { cpu.free_frozen_pages(buffer, order) }?;
    /// assert_eq!(cpu.alloc_frozen_aligned_listed(order, align), Some(buffer));
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    #[inline(always)]
    pub fn alloc_frozen_aligned_listed(&self, order: Order, align: Order) -> Option<Pfn> {
        self.frozen_listed(order, |zone, pcp| {
            zone.take_unmovable_aligned_listed(pcp, order, align)
        })
    }

    /// A frozen block of `order` that `take` finds on this CPU's lists alone, marked
    /// frozen; `None`, with nothing changed, when it finds none or while the zone debugs
    /// (its allocation-time checks take the general paths).
    #[inline(always)]
    fn frozen_listed(
        &self,
        order: Order,
        take: impl FnOnce(&Zone<F, P, R>, CpuLists<'_, R>) -> Option<FrameIdx>,
    ) -> Option<Pfn> {
        let (zone, pcp) = (self.zone, self.lists());
        if zone.debugging() {
            return None;
        }
        let idx = take(zone, pcp)?;
        zone.mark_frozen(idx, order);
        Some(zone.map().pfn(idx))
    }

    /// Frees the frozen page at `pfn` (Linux's `free_frozen_pages(page, 0)`) to this CPU's
    /// list (draining a batch past its high mark), or to the buddy if its pageblock is
    /// isolated. No compare-and-swap: a frozen page has no reference another CPU could drop.
    ///
    /// # Errors
    /// Nothing changes on an error: [`FreeError::NotFrozen`] for a page allocated with a
    /// reference count, [`FreeError::OrderMismatch`] for a frozen block of a higher order,
    /// [`FreeError::CompoundPage`] for another block or a page of one,
    /// [`FreeError::DoubleFree`] for a free frame, [`FreeError::Hole`],
    /// [`FreeError::OutOfZone`], and the other errors of a frame that is not allocated.
    ///
    /// # Safety
    /// The page came from [`Cpu::alloc_frozen_page`] (or is a page of a frozen contiguous
    /// run), is freed once, by one call, and not accessed after: the zone hands it to the
    /// next allocation on any CPU. A second free after this one returns is reported
    /// ([`FreeError::DoubleFree`]) while the page is still free; two frees at once are not.
    #[inline]
    #[allow(unsafe_code)]
    pub unsafe fn free_frozen_page(&self, pfn: Pfn) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.free_frozen_pages(pfn, Order::ZERO) }
    }

    /// An unmovable block of `2^order` frames with no reference count (Linux's
    /// `alloc_frozen_pages(GFP_KERNEL, order)`): a task stack, a heap's run, whose caller
    /// owns it whole. From this CPU's list for an order that has one (the block freed last,
    /// first), else as [`AllocRequest::order`](crate::AllocRequest::order) allocates; not
    /// known to read zero. Freed whole with [`Cpu::free_frozen_pages`], or split into frozen
    /// pages first ([`Zone::split_frozen_pages`]); [`Zone::get_page`],
    /// [`Zone::split_page`] and [`Cpu::free_pages`] refuse it.
    ///
    /// ```
    /// use buddy_sim::{Order, Pfn, StaticZone};
    /// static ZONE: StaticZone<64, 1> = StaticZone::new_static_at(Pfn(0));
    /// let cpu = ZONE.cpu(0)?;
    /// let order = Order::new(2)?;
    /// let stack = cpu.alloc_frozen_pages(order)?;
    /// assert_eq!(ZONE.free_pages_total(), 60);
    /// // SAFETY: the block is this code's alone and unused from here on.
    /// unsafe { cpu.free_frozen_pages(stack, order) }?;
    /// assert_eq!(ZONE.free_pages_total(), 64);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// # Errors
    /// As an [`AllocRequest::order`](crate::AllocRequest::order) allocation:
    /// [`AllocError::OrderTooLarge`], [`AllocError::OutOfMemory`],
    /// [`AllocError::MovableOnly`] in a movable-only zone.
    #[inline(always)]
    pub fn alloc_frozen_pages(&self, order: Order) -> Result<Pfn, AllocError> {
        let idx = self.zone.alloc_frozen_on(self.lists(), order)?;
        Ok(self.zone.map().pfn(idx))
    }

    /// [`Cpu::alloc_frozen_pages`] of a block aligned to `2^align` frames, above its size
    /// (a 16 KiB buffer on a 64 KiB boundary).
    ///
    /// # Errors
    /// As [`Cpu::alloc_frozen_pages`] of order `align`.
    #[inline]
    #[cfg_attr(not(feature = "axallocator"), allow(dead_code))]
    pub(crate) fn alloc_frozen_aligned(
        &self,
        order: Order,
        align: Order,
    ) -> Result<Pfn, AllocError> {
        let idx = self
            .zone
            .alloc_frozen_aligned_on(self.lists(), order, align)?;
        Ok(self.zone.map().pfn(idx))
    }

    /// [`Cpu::free_frozen_pages`] onto this CPU's list for `order` alone: `true` when the
    /// block went into the list's array with nothing else to do; `false`, with nothing
    /// changed, for a free that needs more (a drain past the high mark, a full array, a
    /// block of another list or for the buddy, an error to report) and while the zone
    /// debugs (its free-time checks take [`Cpu::free_frozen_pages`]). For an embedder's
    /// fast path that leaves every other free to [`Cpu::free_frozen_pages`], as
    /// [`Cpu::alloc_frozen_pages_listed`] leaves every other allocation.
    ///
    /// ```
    /// use buddy_sim::{Order, Pfn, StaticZone};
    /// static ZONE: StaticZone<4096, 1> = StaticZone::new_static_at(Pfn(0));
    /// let cpu = ZONE.cpu(0)?;
    /// let table = cpu.alloc_frozen_page()?;
    /// // SAFETY: the page is this code's alone and unused from here on.
    /// assert!(unsafe { cpu.free_frozen_pages_listed(table, Order::ZERO) });
    /// assert_eq!(cpu.alloc_frozen_page_listed(), Some(table)); // the page just freed
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// # Safety
    /// As [`Cpu::free_frozen_pages`]; after `false` the block is still the caller's.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub unsafe fn free_frozen_pages_listed(&self, pfn: Pfn, order: Order) -> bool {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.zone.free_frozen_listed_on(self.lists(), pfn, order) }
    }

    /// Frees the frozen block of `2^order` frames at `pfn` (Linux's
    /// `free_frozen_pages(page, order)`) to this CPU's list for its order (draining a batch
    /// past its high mark), or to the buddy for an order without one or an isolated
    /// pageblock. No compare-and-swap: a frozen block has no reference another CPU could
    /// drop.
    ///
    /// # Errors
    /// Nothing changes on an error: [`FreeError::OrderMismatch`] for a frozen block of
    /// another order, [`FreeError::NotFrozen`] for a block of this order allocated with a
    /// reference count, [`FreeError::CompoundPage`] for a frame inside a block,
    /// [`FreeError::DoubleFree`] for a free frame, [`FreeError::Hole`],
    /// [`FreeError::OutOfZone`], and the other errors of a frame that is not allocated.
    ///
    /// # Safety
    /// The block came from [`Cpu::alloc_frozen_pages`] of this `order` (or is a frozen page
    /// of a contiguous run, for order 0), is freed once, by one call, and not accessed
    /// after: the zone hands it to the next allocation on any CPU. A second free after this
    /// one returns is reported ([`FreeError::DoubleFree`]) while the block is still free;
    /// two frees at once are not.
    #[inline]
    #[allow(unsafe_code)]
    pub unsafe fn free_frozen_pages(&self, pfn: Pfn, order: Order) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.zone.free_frozen_on(self.lists(), pfn, order) }
    }
}
