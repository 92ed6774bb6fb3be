//! Freeing runs of order-0 pages: `free_contig_range` (batched in Linux 2026) and the claim /
//! commit protocol it shares with `vfree`.
//!
//! A free of many pages must be all or nothing, also when another CPU frees some of the same
//! pages at the same moment. So it goes in two passes:
//! 1. **claim**: for each page, atomically check that it is a live order-0 page and, if the
//!    reference being dropped is its last, take the page: straight to `Tail` in the common
//!    case (no flags: it will be a tail of a freed block or a block head), else `Freeing`,
//!    which keeps its flags. A page that fails ends the pass, and the claims made so far are
//!    undone: the zone is as before. Pages with other references are only checked here; the
//!    reference the call drops keeps them live until pass 2.
//! 2. **commit**: drop the reference of each page not taken in pass 1 (taking it now if that
//!    was the last), check each taken page (`free_pages_prepare`: poisoned pages are leaked),
//!    gather them into runs that never cross a section boundary, and free each run as the
//!    fewest aligned blocks. Nothing in this pass can fail. When pass 1 made every page a
//!    tail (one reference each, no flags: the common case), the whole range is that run and
//!    this pass reads nothing.
//!
//! Two CPUs freeing the same range claim its first page in turn: one takes it, the other
//! fails there, having changed nothing.

use crate::decompose::decompose;
use crate::error::free::FreeError;
use crate::frame::{Frame, FrameState, Word};
use crate::frame_storage::FrameStorage;
use crate::types::FrameIdx;
use crate::zone::Zone;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use core::ops::Range;
use lock_api::RawMutex;
use mm_types::Pfn;

/// What pass 2 made of one page.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Taken {
    /// This call's: a tail of the run being freed.
    Page,
    /// This call's, but poisoned: leaked for good (it ends a run).
    Leaked,
    /// Others still hold it; only this call's reference was dropped (it ends a run).
    Kept,
}

/// What a claim requires of a page beyond being a live, allocated order-0 page.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Any reference (`free_contig_range`).
    Any,
    /// The reference `vmalloc` handed out and no `vfree` has released (the claim releases
    /// the mark, so a page named twice fails the second time).
    Vmalloc,
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// [`Cpu::free_contig_range`] on `pcp`'s lists.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn free_contig_range_on(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        nr: u64,
    ) -> Result<(), FreeError> {
        let pages = self.map().range(pfn, nr)?;
        if self.claim(pages.clone(), Claim::Any)? {
            self.commit_tails(pcp, pages);
        } else {
            self.commit(pcp, pages);
        }
        Ok(())
    }

    /// [`Cpu::free_contig_frozen_range`] on `pcp`'s lists.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn free_contig_frozen_range_on(
        &self,
        pcp: CpuLists<'_, R>,
        pfn: Pfn,
        nr: u64,
    ) -> Result<(), FreeError> {
        let m = self.map();
        let pages = m.range(pfn, nr)?;
        let frames = m.frames_in(pages.clone());
        let claimed = frames
            .iter()
            .take_while(|f| f.cas(Word::FROZEN_PAGE, Word::TAIL).is_ok())
            .count();
        if claimed < frames.len() {
            for f in &frames[..claimed] {
                f.store(Word::FROZEN_PAGE);
            }
            // claimed < frames.len() = pages.len(), a u32.
            return Err(self.not_frozen(pages.start + claimed as u32));
        }
        self.commit_tails(pcp, pages);
        Ok(())
    }

    /// What is wrong with freeing page `i` as a frozen page.
    pub(crate) fn not_frozen(&self, i: FrameIdx) -> FreeError {
        let m = self.map();
        let w = m.frame(i).load();
        match w {
            _ if w == Word::FROZEN_PAGE => FreeError::Frozen(m.pfn(i)),
            _ if w.is_live() && w.order() == 0 => FreeError::NotFrozen(m.pfn(i)),
            _ if w.is_live() || w.frozen() => FreeError::CompoundPage(m.pfn(i)),
            _ => m.not_allocated(i, w),
        }
    }

    /// Pass 1 over `pages`; on an error, the pages claimed so far are given back. Returns
    /// whether every page became a tail at once (the common case: pass 2 has nothing to
    /// read).
    pub(crate) fn claim(&self, pages: Range<FrameIdx>, kind: Claim) -> Result<bool, FreeError> {
        let frames = self.map().frames_in(pages.clone());
        let mut all_tails = true;
        let mut k = 0;
        while k < frames.len() {
            // The common case, one compare-and-swap a page: split pages with one reference
            // and no flags become tails at once (pass 2 then only reads them).
            if kind == Claim::Any {
                k += claim_sole_references(&frames[k..]);
                if k == frames.len() {
                    break;
                }
            }
            // k < frames.len() = pages.len(), which is a u32.
            let i = pages.start + k as u32;
            if let Err(e) = self.claim_page(i, &frames[k], kind) {
                self.unclaim(pages.start..i, kind);
                return Err(e);
            }
            all_tails = false;
            k += 1;
        }
        Ok(all_tails)
    }

    /// Checks `pages` as pass 1 would, changing nothing: what the per-page reference path
    /// does before its first `put_page`.
    pub(crate) fn check_claimable(&self, pages: Range<FrameIdx>) -> Result<(), FreeError> {
        let frames = self.map().frames_in(pages.clone());
        for (i, frame) in FrameIdx::each(pages).zip(frames) {
            self.claimable(i, frame.load())?;
        }
        Ok(())
    }

    /// Whether page `i`, whose word is `w`, may be freed by a multi-page free: a live
    /// order-0 page; else the error that says what it is.
    fn claimable(&self, i: FrameIdx, w: Word) -> Result<(), FreeError> {
        let m = self.map();
        if !w.is_live() {
            return Err(m.not_allocated(i, w));
        }
        if w.order() != 0 {
            return Err(FreeError::CompoundPage(m.pfn(i)));
        }
        Ok(())
    }

    fn claim_page(&self, i: FrameIdx, frame: &Frame, kind: Claim) -> Result<(), FreeError> {
        let mut w = frame.load();
        loop {
            self.claimable(i, w)?;
            let claimed = match kind {
                Claim::Vmalloc if !w.vmalloc() => {
                    return Err(FreeError::NotVmalloc(self.map().pfn(i)));
                }
                // The word keeps its flags, so that an undo can restore it.
                _ if w.refcount() == 1 => w.freeing(),
                Claim::Vmalloc => w.with_vmalloc(false),
                Claim::Any => return Ok(()),
            };
            match frame.cas(w, claimed) {
                Ok(()) => return Ok(()),
                Err(now) => w = now,
            }
        }
    }

    /// Undoes pass 1 over `pages`, all of which it claimed.
    pub(crate) fn unclaim(&self, pages: Range<FrameIdx>, kind: Claim) {
        let m = self.map();
        for i in FrameIdx::each(pages) {
            let frame = m.frame(i);
            let mut w = frame.load();
            // Taken by this call (every page here was live when claimed, and the pages left
            // live keep this call's reference): nobody else writes these.
            if w == Word::TAIL {
                frame.store(Word::allocated(0));
                continue;
            }
            if w.is_freeing() {
                frame.store(w.with_state(FrameState::Allocated).with_refcount(1));
                continue;
            }
            // Still referenced elsewhere; only a vmalloc claim changed it (its mark). The
            // reference this call holds keeps it live meanwhile.
            while kind == Claim::Vmalloc && w.is_live() {
                match frame.cas(w, w.with_vmalloc(true)) {
                    Ok(()) => break,
                    Err(now) => w = now,
                }
            }
        }
    }

    /// Pass 2 over claimed `pages`: frees them; nothing here can fail.
    pub(crate) fn commit(&self, pcp: CpuLists<'_, R>, pages: Range<FrameIdx>) {
        let m = self.map();
        let mut prepares = 0u64;
        let mut i = pages.start;
        while i < pages.end {
            // A run starts at a taken page and goes on over the taken pages that follow, up
            // to the end of its section: runs never cross a section boundary.
            let first = self.take(i);
            i += 1;
            if first != Taken::Page {
                prepares += u64::from(first == Taken::Leaked);
                continue;
            }
            let (start, end) = (i - 1, pages.end.min(m.section_end(i - 1)));
            // The pages pass 1 made tails, read only; then the page that ends the run.
            let frames = m.frames_in(i..end);
            // At most end - i pages, which fits in a u32.
            let tails = frames.iter().take_while(|f| f.load() == Word::TAIL).count() as u32;
            let mut len = 1 + tails;
            i += tails;
            while i < end {
                let page = self.take(i);
                i += 1;
                if page != Taken::Page {
                    prepares += u64::from(page == Taken::Leaked);
                    break;
                }
                len += 1;
            }
            prepares += u64::from(len);
            self.free_run(pcp, start, len, &mut prepares);
        }
        self.count_leaked(prepares);
    }

    /// Pass 2 over `pages` when pass 1 made every one a tail: nobody else writes a tail, so
    /// they are one run, freed a section at a time, each page's free-time check passed.
    pub(crate) fn commit_tails(&self, pcp: CpuLists<'_, R>, pages: Range<FrameIdx>) {
        let m = self.map();
        let mut i = pages.start;
        while i < pages.end {
            let end = pages.end.min(m.section_end(i));
            let mut prepares = u64::from(end - i);
            self.free_run(pcp, i, end - i, &mut prepares);
            i = end;
        }
    }

    /// Takes page `i` for pass 2. A page pass 1 claimed is this call's already; any other has
    /// others' references too, and this call drops its own (taking the page if that was the
    /// last after all). Each page taken gets its free-time check.
    #[inline]
    fn take(&self, i: FrameIdx) -> Taken {
        let frame = self.map().frame(i);
        let w = frame.load();
        // The common case, read only: a page pass 1 claimed straight to a tail.
        if w == Word::TAIL {
            return Taken::Page;
        }
        let w = if w.is_freeing() {
            w
        } else {
            match self.drop_reference(i) {
                Some(w) => w,
                None => return Taken::Kept,
            }
        };
        if self.prepare(i, w) {
            frame.store(Word::TAIL);
            Taken::Page
        } else {
            Taken::Leaked
        }
    }

    /// Drops the reference this call holds to a page with others; returns its word if that
    /// was the last one after all (the others let go meanwhile), the page now this call's.
    fn drop_reference(&self, i: FrameIdx) -> Option<Word> {
        let frame = self.map().frame(i);
        let mut w = frame.load();
        // Not live: someone else dropped this call's reference (their double free).
        while w.is_live() {
            let dropped = w.without_a_reference();
            match frame.cas(w, dropped) {
                Ok(()) => return (w.refcount() == 1).then_some(dropped),
                Err(now) => w = now,
            }
        }
        None
    }

    /// `free_prepared_contig_range`: frees the run of `len` taken pages (all tails now) from
    /// `start` as aligned blocks; the first block's lock also counts the free-time checks so
    /// far.
    fn free_run(&self, pcp: CpuLists<'_, R>, start: FrameIdx, len: u32, prepares: &mut u64) {
        if len == 0 {
            return;
        }
        let m = self.map();
        // The run lies inside the zone, so pfn + len cannot overflow.
        let blocks = decompose(m.pfn(start), u64::from(len), self.cfg.max_order);
        for (pfn, order) in blocks.into_iter().flatten() {
            self.free_block(pcp, m.index_of(pfn), order, core::mem::take(prepares));
        }
    }
}

/// Pass 1's common case over `frames`: each page with one reference and no flags becomes a
/// tail by one compare-and-swap, in order, up to the first page that is anything else.
/// Returns how many were claimed. Out of line and register-only, so the loop is its
/// compare-and-swaps and nothing between them.
#[inline(never)]
fn claim_sole_references(frames: &[Frame]) -> usize {
    frames
        .iter()
        .take_while(|f| f.cas(Word::allocated(0), Word::TAIL).is_ok())
        .count()
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Frees a run of order-0 pages (`__free_contig_range`, 2026): drops one reference per
    /// page; pages that reach zero and pass the free-time check are gathered into runs (never
    /// across a section boundary), and each run is freed as the fewest naturally aligned
    /// blocks ([`decompose`]), each to a per-cpu list or the buddy as one unit. Pages still
    /// referenced stay allocated; poisoned pages are leaked.
    ///
    /// Every page is checked before any is freed: on an error the zone is as it was, also
    /// when another CPU frees some of the same pages at the same time (of two CPUs freeing
    /// the same run, exactly one succeeds).
    ///
    /// # Errors
    /// [`FreeError::CompoundPage`] if a page belongs to an unsplit high-order block (the
    /// kernel warns and frees nothing), [`FreeError::DoubleFree`],
    /// [`FreeError::LeakedPage`], [`FreeError::Hole`], [`FreeError::OutOfZone`],
    /// [`FreeError::Overflow`].
    ///
    /// # Safety
    /// As [`Cpu::free_pages`], for each page: the caller holds the reference it drops, and
    /// once a page's last one is gone nothing accesses its memory.
    #[allow(unsafe_code)]
    pub unsafe fn free_contig_range(&self, pfn: Pfn, nr: u64) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.zone.free_contig_range_on(self.lists(), pfn, nr) }
    }

    /// Frees a run of frozen order-0 pages ([`Zone::alloc_contig_frozen_range`]) as the
    /// fewest naturally aligned blocks (`free_contig_frozen_range`, whose batching is the
    /// third patch of the 2026 series): each page is claimed by one compare-and-swap (no
    /// reference count to drop), then the run is freed a section at a time as
    /// [`Zone::free_contig_range`] frees its runs. All or nothing: a page that is not frozen
    /// fails the call and the pages claimed before it are given back.
    ///
    /// # Errors
    /// [`FreeError::NotFrozen`] for a page with a reference count (or
    /// [`FreeError::CompoundPage`] for a frame of a larger allocation),
    /// [`FreeError::DoubleFree`], [`FreeError::LeakedPage`], [`FreeError::Hole`],
    /// [`FreeError::OutOfZone`], [`FreeError::Overflow`];
    /// nothing is freed then.
    ///
    /// # Safety
    /// The caller owns the frozen pages (they came from a frozen contiguous allocation it
    /// made, and nobody else frees them), and nothing accesses their memory after this call:
    /// the zone may clear them or hand them to anyone.
    #[allow(unsafe_code)]
    pub unsafe fn free_contig_frozen_range(&self, pfn: Pfn, nr: u64) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.zone.free_contig_frozen_range_on(self.lists(), pfn, nr) }
    }
}
