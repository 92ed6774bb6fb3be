//! A working-set estimator with one idle age per slot of memory, dense: what the aging walk
//! feeds it costs O(1) per batch of one slot (a load, a compare, a store), where
//! [`WorkingSet`](crate::WorkingSet)'s runs cost a merge step. The choice between them is a
//! trade of storage for time:
//!
//! - [`WorkingSet`](crate::WorkingSet) keeps one run per stretch of equal age: little
//!   storage where memory is mapped in large folios, but a merge per batch, which costs as
//!   much as aging a batch of one entry (single 4 KiB pages, 2 MiB or 1 GiB leaves).
//! - [`IdleAges`] keeps one byte per slot of a fixed size (a page, or a leaf: `slot_pages`
//!   pages) of the tracked space, twice: 2 MiB for 4 GiB of 4 KiB pages, 4 KiB for 4 GiB of
//!   2 MiB leaves. A batch sets the age of the slots it covers; a pass starts by clearing the
//!   half it writes (`memset`).
//!
//! The ages mean the same in both: 0 if the batch was young, else one more than the
//! youngest slot it covers had (1 for a slot not tracked before). A slot that several
//! batches of one pass cover (pages smaller than the slot) takes the youngest of their ages;
//! a slot no batch of the pass covers is forgotten. Ages saturate at [`MAX_AGE`].

use crate::aging::{Tally, walk};
use crate::batch::{Folios, FpbFlags};
use crate::flush::TlbFlush;
use crate::format::PteFormat;
use crate::sync::Entry;
use crate::table::{PteError, PteTable};
use crate::working_set::fill_bins;
use crate::{AgingStats, WorkingSetError, YoungOp, age_batches};
use core::ops::Range;
use mm_types::{PageRange, PageSize, VirtAddr};

/// The largest idle age kept: passes past it count as this many.
pub const MAX_AGE: u32 = 254;

/// A slot no pass has reported (or the last one did not).
const UNTRACKED: u8 = u8::MAX;

/// Records a batch of `entries` (young or not) in a table's slots: `kept` the last pass's
/// ages of the table's slots, `built` this pass's (the walk's entries lie inside the table,
/// so inside both slices).
#[inline(always)]
fn record(kept: &[u8], built: &mut [u8], entries: Range<usize>, young: bool) {
    if entries.len() == 1
        && let (Some(&old), Some(new)) = (kept.get(entries.start), built.get_mut(entries.start))
    {
        let age = if young { 0 } else { older(old) };
        *new = (*new).min(age);
        return;
    }
    let (Some(old), Some(new)) = (kept.get(entries.clone()), built.get_mut(entries)) else {
        return;
    };
    let age = if young {
        0
    } else {
        older(old.iter().copied().min().unwrap_or(UNTRACKED))
    };
    for slot in new {
        *slot = (*slot).min(age);
    }
}

/// The age of an idle batch whose youngest slot had `age`: one more, at most [`MAX_AGE`];
/// 1 for a slot not tracked. A table lookup: one load where the arithmetic takes a few
/// compares, once per batch of the walk.
#[inline(always)]
fn older(age: u8) -> u8 {
    OLDER[age as usize]
}

/// [`older`] for every age byte.
const OLDER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut a = 0;
    while a < 256 {
        t[a] = if a == UNTRACKED as usize {
            1
        } else if a as u32 >= MAX_AGE {
            MAX_AGE as u8
        } else {
            a as u8 + 1
        };
        a += 1;
    }
    t
};

/// Idle ages, one per slot of `slot_pages` pages from a base address, in storage the caller
/// supplies (`[0u8; 2 * slots]`): half holds the last pass's ages, the other half is where
/// the next pass writes, so a pass that fails leaves the estimate as it was. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct IdleAges<'a> {
    storage: &'a mut [u8],
    /// Whether the high half holds the kept ages.
    high: bool,
    base: u64,
    page_size: PageSize,
    /// log2 of the bytes a slot covers.
    slot_shift: u32,
    passes: u64,
}

impl<'a> IdleAges<'a> {
    /// An empty estimate over `storage.len() / 2` slots of `slot_pages` pages of `page_size`
    /// each, the first at `base`. Nothing is tracked until a pass finishes.
    ///
    /// # Errors
    /// [`WorkingSetError::StorageTooSmall`] for fewer than two bytes of storage;
    /// [`WorkingSetError::BadSlot`] if `slot_pages` is not a power of two, `base` is not
    /// aligned to a slot, or the slots end past the address space.
    pub fn new(
        storage: &'a mut [u8],
        base: VirtAddr,
        page_size: PageSize,
        slot_pages: u64,
    ) -> Result<Self, WorkingSetError> {
        if storage.len() < 2 {
            return Err(WorkingSetError::StorageTooSmall { len: storage.len() });
        }
        let bad = WorkingSetError::BadSlot { base, slot_pages };
        if !slot_pages.is_power_of_two() {
            return Err(bad);
        }
        let slot_shift = page_size.shift() + slot_pages.trailing_zeros();
        let slots = (storage.len() / 2) as u64;
        let span = 1u64
            .checked_shl(slot_shift)
            .filter(|_| slot_shift < 64)
            .and_then(|slot| slot.checked_mul(slots));
        let aligned = slot_shift < 64 && base.0 & ((1u64 << slot_shift) - 1) == 0;
        if !aligned || span.and_then(|s| base.0.checked_add(s)).is_none() {
            return Err(bad);
        }
        storage.fill(UNTRACKED);
        Ok(Self {
            storage,
            high: false,
            base: base.0,
            page_size,
            slot_shift,
            passes: 0,
        })
    }

    /// Slots the estimate covers.
    #[must_use]
    pub fn slots(&self) -> usize {
        self.storage.len() / 2
    }

    /// Pages one slot covers.
    #[must_use]
    pub fn slot_pages(&self) -> u64 {
        1 << (self.slot_shift - self.page_size.shift())
    }

    /// Passes completed.
    #[must_use]
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// The kept ages, one per slot (`u8::MAX`: not tracked).
    fn kept(&self) -> &[u8] {
        let n = self.slots();
        if self.high {
            &self.storage[n..2 * n]
        } else {
            &self.storage[..n]
        }
    }

    /// The idle age of each tracked slot: `(slot's first address, age)`, in address order.
    pub fn ages(&self) -> impl Iterator<Item = (VirtAddr, u32)> + '_ {
        let (base, shift) = (self.base, self.slot_shift);
        self.kept()
            .iter()
            .enumerate()
            .filter(|(_, a)| **a != UNTRACKED)
            .map(move |(i, &a)| (VirtAddr(base + ((i as u64) << shift)), u32::from(a)))
    }

    /// Pages tracked: every slot the last pass reported, whole.
    #[must_use]
    pub fn tracked_pages(&self) -> u64 {
        self.idle_pages(0)
    }

    /// Pages idle for at least `min_age` passes.
    #[must_use]
    pub fn idle_pages(&self, min_age: u32) -> u64 {
        let slots = self
            .kept()
            .iter()
            .filter(|&&a| a != UNTRACKED && u32::from(a) >= min_age)
            .count() as u64;
        slots * self.slot_pages()
    }

    /// The slots idle for at least `min_age` passes, as page ranges (adjacent slots idle past
    /// the threshold come as one range, whatever their ages).
    pub fn idle_ranges(&self, min_age: u32) -> impl Iterator<Item = PageRange> + '_ {
        let kept = self.kept();
        let idle = move |i: usize| kept[i] != UNTRACKED && u32::from(kept[i]) >= min_age;
        let (base, shift, size, per_slot) = (
            self.base,
            self.slot_shift,
            self.page_size,
            self.slot_pages(),
        );
        let mut i = 0;
        core::iter::from_fn(move || {
            while i < kept.len() && !idle(i) {
                i += 1;
            }
            let start = i;
            while i < kept.len() && idle(i) {
                i += 1;
            }
            (i > start).then(|| {
                PageRange::new(
                    VirtAddr(base + ((start as u64) << shift)),
                    (i - start) as u64 * per_slot,
                    size,
                )
            })
        })
    }

    /// The working set as bins of idle age, as [`WorkingSet::bins`](crate::WorkingSet::bins).
    ///
    /// # Errors
    /// [`WorkingSetError::BadBins`] unless `edges` increase strictly and
    /// `out.len() == edges.len() + 1`; `out` is untouched then.
    pub fn bins(&self, edges: &[u32], out: &mut [u64]) -> Result<(), WorkingSetError> {
        let per_slot = self.slot_pages();
        let slots = self.kept().iter().filter(|&&a| a != UNTRACKED);
        fill_bins(edges, out, slots.map(|&a| (u32::from(a), per_slot)))
    }

    /// Starts a pass: report every batch of one aging walk over the tracked space with
    /// [`AgesPass::observe`], in any order, then [`AgesPass::finish`]. Dropping the pass
    /// unfinished leaves the estimate as it was.
    pub fn pass(&mut self) -> AgesPass<'_> {
        let n = self.slots();
        let (low, high) = self.storage.split_at_mut(n);
        let (kept, built) = if self.high {
            (&high[..n], low)
        } else {
            (&low[..n], &mut high[..n])
        };
        built.fill(UNTRACKED);
        let page_shift = self.page_size.shift();
        AgesPass {
            kept,
            built,
            high: &mut self.high,
            passes: &mut self.passes,
            base: self.base,
            page_size: self.page_size,
            slot_shift: self.slot_shift,
            slot_mask: (1 << self.slot_shift) - 1,
            slot_pages: 1 << (self.slot_shift - page_shift),
            // new() checked that the slots end inside the address space.
            span: (n as u64) << self.slot_shift,
            error: None,
        }
    }
}

/// One aging pass being written into an [`IdleAges`].
#[derive(Debug)]
#[must_use = "a pass changes nothing until it is finished"]
pub struct AgesPass<'w> {
    kept: &'w [u8],
    built: &'w mut [u8],
    high: &'w mut bool,
    passes: &'w mut u64,
    base: u64,
    page_size: PageSize,
    slot_shift: u32,
    /// Derived once per pass for [`AgesPass::observe`]'s common case: the slot size less
    /// one, pages per slot, and the bytes the slots span.
    slot_mask: u64,
    slot_pages: u64,
    span: u64,
    error: Option<WorkingSetError>,
}

impl AgesPass<'_> {
    /// Records one batch of the walk: `range` (its pages) and whether it was young.
    ///
    /// # Errors
    /// [`WorkingSetError::MixedPageSizes`] for a page size other than the estimate's;
    /// [`WorkingSetError::BadRange`] for an empty or unaligned batch, or one ending past the
    /// address space; [`WorkingSetError::OutsideTracked`] for one the slots do not cover.
    /// The pass is spoiled then (every later call and [`finish`](Self::finish) return the
    /// first error, and the estimate stays as it was).
    #[inline]
    pub fn observe(&mut self, range: PageRange, young: bool) -> Result<(), WorkingSetError> {
        // The common batch, checked in one go: exactly one slot (a page, or a whole leaf) of
        // pages of the estimate's size, aligned, inside the slots, in a pass not spoiled.
        let offset = range.start.0.wrapping_sub(self.base);
        if self.error.is_none()
            && range.size == self.page_size
            && range.pages == self.slot_pages
            && offset & self.slot_mask == 0
            && offset < self.span
        {
            let i = (offset >> self.slot_shift) as usize;
            if let (Some(&old), Some(new)) = (self.kept.get(i), self.built.get_mut(i)) {
                let age = if young { 0 } else { older(old) };
                *new = (*new).min(age);
                return Ok(());
            }
        }
        self.observe_general(range, young)
    }

    /// Ages entries `range` of `table` as [`age_batches`] does and records every batch in
    /// this pass: by entry, with no address made or checked per batch, where the table's
    /// entries are slots (an entry maps one slot of the estimate's page size, and the table
    /// lies inside the slots); through [`observe`](Self::observe) otherwise (a batch the
    /// slots do not cover spoils the pass, as there). One call per table of the walk.
    ///
    /// # Errors
    /// As [`age_batches`]: the walk's errors (the batches before the error are recorded).
    pub fn age_table<F: PteFormat, E: Entry>(
        &mut self,
        table: &PteTable<'_, F, E>,
        range: Range<usize>,
        folios: &impl Folios,
        (flags, op): (FpbFlags, YoungOp),
        tlb: &mut impl TlbFlush<F::Stage>,
    ) -> Result<AgingStats, PteError> {
        let f = table.format();
        let offset = table.base().0.wrapping_sub(self.base);
        let first = offset >> self.slot_shift;
        let by_entry = self.error.is_none()
            && f.page_size() == self.page_size
            && f.entry_shift() == self.slot_shift
            && table.base().0 >= self.base
            && offset & self.slot_mask == 0
            && first
                .checked_add(table.len() as u64)
                .is_some_and(|end| end <= self.kept.len() as u64);
        if !by_entry {
            return age_batches(table, range, folios, flags, op, tlb, |pages, young| {
                // An error spoils the pass; finish() returns it.
                let _ = self.observe(pages, young);
            });
        }
        let first = first as usize;
        let slots = first..first + table.len();
        let (kept, built) = (&self.kept[slots.clone()], &mut self.built[slots]);
        let mut tally = Tally::new(|_, _| {});
        walk(
            table,
            range,
            folios,
            flags,
            op,
            tlb,
            &mut tally,
            |tally, folio, entries, young| {
                tally.record_batch(folio, young);
                record(kept, built, entries, young);
            },
        )?;
        Ok(tally.finish())
    }

    /// [`AgesPass::observe`] past its common case.
    fn observe_general(&mut self, range: PageRange, young: bool) -> Result<(), WorkingSetError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let result = self.observe_checked(range, young);
        if let Err(e) = result {
            self.error = Some(e);
        }
        result
    }

    /// Any batch: checked, then the youngest of the slots it covers.
    fn observe_checked(&mut self, range: PageRange, young: bool) -> Result<(), WorkingSetError> {
        if range.size != self.page_size {
            return Err(WorkingSetError::MixedPageSizes {
                expected: self.page_size,
                found: range.size,
            });
        }
        let start = range.start;
        let page_mask = range.size.bytes() as u64 - 1;
        let bytes = range.pages.checked_shl(range.size.shift());
        let end = bytes.and_then(|b| start.0.checked_add(b));
        let (Some(end), true) = (end, range.pages != 0 && start.0 & page_mask == 0) else {
            return Err(WorkingSetError::BadRange { start });
        };
        let outside = WorkingSetError::OutsideTracked { start };
        let first = start.0.checked_sub(self.base).ok_or(outside)? >> self.slot_shift;
        let last = (end - 1 - self.base) >> self.slot_shift;
        let first = usize::try_from(first).map_err(|_| outside)?;
        let last = usize::try_from(last).map_err(|_| outside)?;
        let slots = first..last.checked_add(1).ok_or(outside)?;
        let (Some(old), Some(new)) = (self.kept.get(slots.clone()), self.built.get_mut(slots))
        else {
            return Err(outside);
        };
        let age = if young {
            0
        } else {
            // The youngest slot the batch covers, one pass older.
            older(old.iter().copied().min().unwrap_or(UNTRACKED))
        };
        for slot in new {
            *slot = (*slot).min(age);
        }
        Ok(())
    }

    /// Ends the pass: the ages written replace the estimate.
    ///
    /// # Errors
    /// The first error [`observe`](Self::observe) returned; the estimate is unchanged then.
    pub fn finish(self) -> Result<(), WorkingSetError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        *self.high = !*self.high;
        *self.passes += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    const P: PageSize = PageSize::Size4KiB;

    fn page(i: u64, n: u64) -> PageRange {
        PageRange::new(VirtAddr(0x10_0000 + i * 4096), n, P)
    }

    #[test]
    fn ages_count_idle_passes_and_forget_what_a_pass_misses() {
        let mut storage = vec![0u8; 2 * 8];
        let mut ages = IdleAges::new(&mut storage, VirtAddr(0x10_0000), P, 1).unwrap();
        for pass in 0..3 {
            let mut p = ages.pass();
            for i in 0..8 {
                // Page 0 is young every pass; page 7 is reported only in the first.
                if i == 7 && pass > 0 {
                    continue;
                }
                p.observe(page(i, 1), i == 0).unwrap();
            }
            p.finish().unwrap();
        }
        let got: Vec<u32> = ages.ages().map(|(_, a)| a).collect();
        assert_eq!(got, [0, 3, 3, 3, 3, 3, 3]);
        assert_eq!(ages.tracked_pages(), 7);
        assert_eq!(ages.idle_pages(3), 6);
        let ranges: Vec<_> = ages.idle_ranges(1).collect();
        assert_eq!(ranges, [page(1, 6)]);
        let mut out = [0u64; 3];
        ages.bins(&[1, 3], &mut out).unwrap();
        assert_eq!(out, [1, 0, 6]);
        assert_eq!(ages.passes(), 3);
    }

    #[test]
    fn a_batch_takes_the_youngest_slot_it_covers_and_a_slot_the_youngest_batch() {
        // Slots of 4 pages: a 2-page young batch makes the whole slot young; a 16-page idle
        // batch over four slots takes the youngest of them, plus one.
        let mut storage = vec![0u8; 2 * 4];
        let mut ages = IdleAges::new(&mut storage, VirtAddr(0x10_0000), P, 4).unwrap();
        let mut p = ages.pass();
        p.observe(page(0, 2), true).unwrap();
        p.observe(page(2, 2), false).unwrap();
        p.observe(page(4, 12), false).unwrap();
        p.finish().unwrap();
        let got: Vec<u32> = ages.ages().map(|(_, a)| a).collect();
        assert_eq!(got, [0, 1, 1, 1]);
        let mut p = ages.pass();
        p.observe(page(0, 16), false).unwrap();
        p.finish().unwrap();
        let got: Vec<u32> = ages.ages().map(|(_, a)| a).collect();
        assert_eq!(got, [1, 1, 1, 1]);
        assert_eq!(ages.tracked_pages(), 16);
    }

    #[test]
    fn ages_saturate() {
        let mut storage = vec![0u8; 2];
        let mut ages = IdleAges::new(&mut storage, VirtAddr(0), P, 1).unwrap();
        for _ in 0..300 {
            let mut p = ages.pass();
            p.observe(PageRange::new(VirtAddr(0), 1, P), false).unwrap();
            p.finish().unwrap();
        }
        assert_eq!(ages.ages().next().map(|(_, a)| a), Some(MAX_AGE));
    }

    #[test]
    fn bad_input_is_refused_and_a_spoiled_pass_changes_nothing() {
        let mut tiny = [0u8; 1];
        assert_eq!(
            IdleAges::new(&mut tiny, VirtAddr(0), P, 1).err(),
            Some(WorkingSetError::StorageTooSmall { len: 1 })
        );
        let mut storage = vec![0u8; 2 * 4];
        for (base, slot_pages) in [(VirtAddr(0), 3), (VirtAddr(4096), 2), (VirtAddr(!0xfff), 1)] {
            assert_eq!(
                IdleAges::new(&mut storage, base, P, slot_pages).err(),
                Some(WorkingSetError::BadSlot { base, slot_pages })
            );
        }
        assert!(IdleAges::new(&mut storage, VirtAddr(0), P, 1 << 60).is_err());
        let mut ages = IdleAges::new(&mut storage, VirtAddr(0x10_0000), P, 1).unwrap();
        let mut p = ages.pass();
        p.observe(page(0, 4), true).unwrap();
        p.finish().unwrap();
        let before: Vec<_> = ages.ages().collect();
        for (range, err) in [
            (
                page(3, 2),
                WorkingSetError::OutsideTracked {
                    start: page(3, 2).start,
                },
            ),
            (
                PageRange::new(VirtAddr(0), 1, P),
                WorkingSetError::OutsideTracked { start: VirtAddr(0) },
            ),
            (
                page(0, 0),
                WorkingSetError::BadRange {
                    start: page(0, 0).start,
                },
            ),
            (
                PageRange::new(VirtAddr(0x10_0001), 1, P),
                WorkingSetError::BadRange {
                    start: VirtAddr(0x10_0001),
                },
            ),
            (
                PageRange::new(VirtAddr(!0xfff), 2, P),
                WorkingSetError::BadRange {
                    start: VirtAddr(!0xfff),
                },
            ),
            (
                PageRange::new(VirtAddr(0x10_0000), 1, PageSize::Size16KiB),
                WorkingSetError::MixedPageSizes {
                    expected: P,
                    found: PageSize::Size16KiB,
                },
            ),
        ] {
            let mut p = ages.pass();
            p.observe(page(0, 1), false).unwrap();
            assert_eq!(p.observe(range, false), Err(err));
            assert_eq!(p.observe(page(1, 1), false), Err(err));
            assert_eq!(p.finish(), Err(err));
            assert_eq!(ages.ages().collect::<Vec<_>>(), before);
        }
        let mut out = [0u64; 2];
        assert_eq!(
            ages.bins(&[2, 1], &mut out[..1]).err(),
            Some(WorkingSetError::BadBins { edges: 2, out: 1 })
        );
    }
}
