//! References to allocated blocks: `get_page`, `put_page` / `free_pages` (freeing at the
//! last reference), `split_page`, `mark_hwpoison`, and draining per-cpu lists.
//!
//! An allocated head's word changes by compare-and-swap only, so two CPUs dropping the last
//! reference at once cannot both free the block: one sees the count already at zero and
//! gets [`FreeError::DoubleFree`], changing nothing.

use crate::decompose::decompose;
use crate::error::free::FreeError;
use crate::frame::{FrameState, Word};
use crate::frame_storage::FrameStorage;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Changes the word of the allocated block head at `pfn` (of `order`, if given) to what
    /// `change` makes of it, atomically; returns the frame's index and the word it replaced.
    /// A frame that is not such a head gets the error that says what it is instead.
    pub(crate) fn update_head(
        &self,
        pfn: Pfn,
        order: Option<Order>,
        change: impl Fn(Word) -> Result<Word, FreeError>,
    ) -> Result<(FrameIdx, Word), FreeError> {
        let m = self.map();
        let idx = m.index(pfn)?;
        let frame = m.frame(idx);
        let mut w = frame.load();
        loop {
            if !w.is_live() {
                return Err(m.not_allocated(idx, w));
            }
            if let Some(given) = order
                && given.get() != w.order()
            {
                return Err(FreeError::OrderMismatch {
                    pfn,
                    given,
                    allocated: Order(w.order()),
                });
            }
            match frame.cas(w, change(w)?) {
                Ok(()) => return Ok((idx, w)),
                Err(now) => w = now,
            }
        }
    }

    /// [`Cpu::free_pages`] on `pcp`'s lists.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn free_pages_on(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        order: Order,
    ) -> Result<(), FreeError> {
        self.put(pcp, pfn, Some(order))
    }

    /// The common case of a free, inline: the only reference to a block (of `order`, if
    /// given) with no flags, so that its free-time check passes, dropped by one
    /// compare-and-swap, and the block freed. False, with nothing changed, for anything else
    /// (another reference, a flag, a bad frame, a lost race): the general path decides.
    #[inline(always)]
    fn free_if_last(&self, pcp: CpuLists<'_, R>, pfn: Pfn, order: Option<Order>) -> bool {
        let m = self.map();
        let Ok(idx) = m.index(pfn) else {
            return false;
        };
        let frame = m.frame(idx);
        let w = frame.load();
        let order = order.map_or(w.order(), Order::get);
        if w.ignoring_mt() == Word::allocated(order) && frame.cas(w, w.freeing()).is_ok() {
            self.free_block_in(m, pcp, (idx, Order(order)), 1);
            return true;
        }
        false
    }

    /// Drops one reference to the block at `pfn` (of `order`, if given), freeing it when it
    /// was the last: every free, its common case inline.
    #[inline(always)]
    fn put(&self, pcp: CpuLists<'_, R>, pfn: Pfn, order: Option<Order>) -> Result<(), FreeError> {
        if self.free_if_last(pcp, pfn, order) {
            return Ok(());
        }
        self.put_slow(pcp, pfn, order)
    }

    /// [`Zone::put`] past its common case.
    #[inline(never)]
    fn put_slow(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        order: Option<Order>,
    ) -> Result<(), FreeError> {
        let (idx, old) = self.update_head(pfn, order, |w| Ok(w.without_a_reference()))?;
        if old.refcount() == 1 {
            self.release(pcp, idx, old);
        }
        Ok(())
    }

    /// Drops the `n` references the caller holds to the block at `pfn` of `order` at once
    /// (a pinned block's allocation and pin: never one without the other, so that nothing
    /// sees it with one reference and moves it), freeing it when they were the last.
    ///
    /// # Errors
    /// As [`Zone::free_pages`]; [`FreeError::DoubleFree`] if the block has fewer than `n`
    /// references (one was dropped behind the caller's back).
    ///
    /// # Safety
    /// As [`Cpu::free_pages`], for all `n` references.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn put_refs(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        order: Order,
        n: u32,
    ) -> Result<(), FreeError> {
        let (idx, old) = self.update_head(pfn, Some(order), |w| match w.refcount() {
            r if r > n => Ok(w.with_refcount(r - n)),
            r if r == n => Ok(w.freeing()),
            _ => Err(FreeError::DoubleFree(pfn)),
        })?;
        if old.refcount() == n {
            self.release(pcp, idx, old);
        }
        Ok(())
    }

    /// The free of a block whose last reference the caller dropped (`old` is its word
    /// before that), after its free-time check.
    fn release(&self, pcp: CpuLists<'_, R>, idx: FrameIdx, old: Word) {
        if self.prepare(idx, old) {
            self.free_block(pcp, idx, Order(old.order()), 1);
        } else {
            self.count_leaked(1);
        }
    }

    /// `free_pages_prepare`: the free-time check of a block whose last reference a call
    /// dropped (`w`: its word then, flags included). A poisoned page is leaked for good and
    /// fails the check.
    #[inline]
    pub(crate) fn prepare(&self, idx: FrameIdx, w: Word) -> bool {
        if w.poisoned() {
            self.map()
                .frame(idx)
                .store(Word::new(FrameState::Leaked, 0));
        }
        !w.poisoned()
    }

    /// Takes one more reference to the allocated block at `pfn`.
    ///
    /// # Errors
    /// As [`Zone::free_pages`] for a frame that is not an allocated block's head, and
    /// [`FreeError::RefcountOverflow`].
    pub fn get_page(&self, pfn: Pfn) -> Result<(), FreeError> {
        self.update_head(pfn, None, |w| {
            let n = w.refcount().checked_add(1);
            n.map(|n| w.with_refcount(n))
                .ok_or(FreeError::RefcountOverflow(pfn))
        })
        .map(drop)
    }

    /// Splits the allocated block at `pfn` of `order` into `2^order` order-0 pages with one
    /// reference each (`split_page`).
    ///
    /// # Errors
    /// As [`Zone::free_pages`], and [`FreeError::Shared`] if the block has more than one
    /// reference.
    pub fn split_page(&self, pfn: Pfn, order: Order) -> Result<(), FreeError> {
        let (idx, w) = self.update_head(pfn, Some(order), |w| match w.refcount() {
            1 => Ok(w.with_order(0)),
            _ => Err(FreeError::Shared(pfn)),
        })?;
        // The caller holds the only reference: the tails are its own, of the block's kind.
        let tails = idx + 1..idx + order.pages() as u32;
        self.split_owner(
            idx,
            FrameIdx::span(idx, idx + order.pages() as u32).map(|i| (i, Order::ZERO)),
        );
        let page = Word::allocated(0).with_mt(w.mt());
        for frame in self.map().frames_in(tails) {
            frame.store(page);
        }
        Ok(())
    }

    /// Splits the allocated block at `pfn` of `order`, whose only reference the caller
    /// holds, into the fewest naturally aligned blocks of which `[pfn, pfn + at)` is a union
    /// (the blocks of `[pfn, pfn + at)`, then those of the rest), each allocated with one
    /// reference, of the block's kind: what `free_pages` frees block by block. As
    /// `split_page` (to which `at` = 1 comes closest), the head changes by compare-and-swap
    /// and the other heads are written after it.
    ///
    /// # Errors
    /// As [`Zone::split_page`]; [`FreeError::OutOfZone`] if `at` is not inside the block.
    #[cfg_attr(not(feature = "axallocator"), allow(dead_code))]
    pub(crate) fn split_block_at(&self, pfn: Pfn, order: Order, at: u64) -> Result<(), FreeError> {
        if at == 0 || at >= order.pages() {
            return Err(FreeError::OutOfZone(Pfn(pfn.0.saturating_add(at))));
        }
        let pieces =
            |from: u64, n: u64| decompose(Pfn(pfn.0 + from), n, order).into_iter().flatten();
        let first = pieces(0, at).next().map_or(order, |(_, o)| o);
        let (idx, w) = self.update_head(pfn, Some(order), |w| match w.refcount() {
            1 => Ok(w.with_order(first.get())),
            _ => Err(FreeError::Shared(pfn)),
        })?;
        // The caller holds the only reference: every frame of the block is its own.
        let m = self.map();
        self.split_owner(
            idx,
            pieces(0, at)
                .chain(pieces(at, order.pages() - at))
                .map(|(head, o)| (idx + (head.0 - pfn.0) as u32, o)),
        );
        for (head, o) in pieces(0, at).skip(1).chain(pieces(at, order.pages() - at)) {
            let i = idx + (head.0 - pfn.0) as u32;
            m.frame(i).store(Word::allocated(o.get()).with_mt(w.mt()));
        }
        Ok(())
    }

    /// Marks the allocated order-0 page at `pfn` hardware-poisoned: freeing it later fails
    /// the free-time check and leaks it.
    ///
    /// # Errors
    /// As [`Zone::put_page`]; [`FreeError::CompoundPage`] for a block above order 0.
    pub fn mark_hwpoison(&self, pfn: Pfn) -> Result<(), FreeError> {
        self.update_head(pfn, None, |w| match w.order() {
            0 => Ok(w.with_poison()),
            _ => Err(FreeError::CompoundPage(pfn)),
        })
        .map(drop)
    }

    /// Returns every CPU's per-cpu blocks to the buddy, one CPU's lock at a time (other
    /// CPUs keep allocating meanwhile).
    pub fn drain_all(&self) {
        for pcp in self.pcps.slots() {
            self.drain(CpuLists { pcp, local: false }, u64::MAX);
        }
    }
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Drops one reference to the block at `pfn` allocated at `order` and frees it when
    /// none is left (`__free_pages`).
    ///
    /// # Errors
    /// [`FreeError::DoubleFree`], [`FreeError::OrderMismatch`],
    /// [`FreeError::CompoundPage`] (a frame inside a block), [`FreeError::LeakedPage`],
    /// [`FreeError::Hole`], [`FreeError::OutOfZone`].
    ///
    /// # Safety
    /// The caller holds the reference it drops (one that its allocation or a `get_page` gave
    /// it and that it has not dropped before), and once the last reference is gone nothing
    /// accesses the block's memory: the zone may clear it (`zero_some`, `alloc_zeroed`),
    /// hand it to a migration's target, or to any CPU's next allocation. A free of what the
    /// caller does not hold is reported as an error where the zone can tell (a double free,
    /// a frame in no allocation), but not always: the block may be someone else's by then.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub unsafe fn free_pages(&self, pfn: Pfn, order: Order) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.zone.free_pages_on(self.lists(), pfn, order) }
    }

    /// Drops one reference to the allocated block at `pfn`; at zero the block is checked
    /// (`free_pages_prepare`: a poisoned page is leaked) and freed.
    ///
    /// # Errors
    /// As [`Zone::free_pages`].
    ///
    /// # Safety
    /// As [`Cpu::free_pages`]: the caller holds the reference it drops, and once the last
    /// one is gone nothing accesses the block's memory.
    #[allow(unsafe_code)]
    pub unsafe fn put_page(&self, pfn: Pfn) -> Result<(), FreeError> {
        self.zone.put(self.lists(), pfn, None)
    }
}
