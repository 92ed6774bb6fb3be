//! One page-table page of atomic entries: mapping folios (`set_ptes`, folding full aligned
//! blocks into contpte blocks), unmapping and write-protecting (unfolding a block first when
//! only part of it changes), the contpte-aware `ptep_get`, and a model of the MMU's hardware
//! access-flag and dirty updates.
//!
//! Software changes to the table (`set_ptes`, `unmap_ptes`, `wrprotect_ptes`, the young
//! clears) must be serialized by the caller, as the kernel's page-table lock does; hardware
//! updates ([`PteTable::hw_access`]) run concurrently with all of them. Every write that can
//! race a hardware update is an atomic read-modify-write, so no hardware update is lost.

use core::ops::Range;

use crate::flush::TlbFlush;
use crate::format::{Access, Fault, Prot, PteFormat};
use crate::sync::Entry;
use core::sync::atomic::AtomicU64;
use mm_types::{PageRange, Pfn, VirtAddr};

/// What was wrong with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PteError {
    /// The format's contiguous block is not a power of two no larger than a table, or its
    /// entry shift is below its page size's or above 40 (a 1 TiB leaf).
    BadFormat {
        /// The format's entries per contiguous block.
        cont_ptes: usize,
    },
    /// The entry slice is empty, longer than one page-table page, or not a whole number of
    /// contiguous blocks.
    BadTableLength {
        /// Entries given.
        len: usize,
    },
    /// The base address is not aligned to a contiguous block, or the table's span overflows
    /// the address space.
    BadBase {
        /// The base address given.
        base: VirtAddr,
    },
    /// `index..index + nr` is empty or leaves the table.
    OutOfRange {
        /// First entry asked for.
        index: usize,
        /// Entries asked for.
        nr: usize,
        /// Entries in the table.
        len: usize,
    },
    /// The address is not mapped by this table (outside it, or not page aligned where that
    /// matters).
    BadAddress {
        /// The address given.
        va: VirtAddr,
    },
    /// The entry at `index` maps nothing, and the call needs it to.
    NotPresent {
        /// The entry.
        index: usize,
    },
    /// `set_ptes` found a present entry at `index`: map over empty entries only.
    AlreadyMapped {
        /// The entry.
        index: usize,
    },
    /// The frames do not fit the format's frame field, or `Prot::attrs` overlaps bits the
    /// format owns.
    BadMapping {
        /// First frame asked for.
        pfn: Pfn,
    },
    /// A folio lookup returned a folio that does not contain the frame it was asked about.
    BadFolio {
        /// The frame looked up.
        pfn: Pfn,
    },
    /// The modelled MMU refused an access.
    Fault {
        /// The entry the access went through.
        index: usize,
        /// Why.
        fault: Fault,
    },
}

impl core::fmt::Display for PteError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::BadFormat { cont_ptes } => write!(
                f,
                "a format with {cont_ptes}-entry contiguous blocks: need a power-of-two block \
                 no larger than a table, and entries no smaller than a page"
            ),
            Self::BadTableLength { len } => write!(
                f,
                "a table of {len} entries: need 1..=ptes_per_table, whole contiguous blocks"
            ),
            Self::BadBase { base } => write!(
                f,
                "base {base} is not block aligned or the table's span overflows"
            ),
            Self::OutOfRange { index, nr, len } => {
                write!(
                    f,
                    "entries {index}+{nr} are empty or leave a table of {len}"
                )
            }
            Self::BadAddress { va } => write!(f, "address {va} is not mapped by this table"),
            Self::NotPresent { index } => write!(f, "entry {index} is not present"),
            Self::AlreadyMapped { index } => write!(f, "entry {index} is already present"),
            Self::BadMapping { pfn } => write!(
                f,
                "frames from {pfn} do not fit the frame field, or attrs overlap owned bits"
            ),
            Self::BadFolio { pfn } => {
                write!(
                    f,
                    "the folio lookup for pfn {pfn} returned a folio without it"
                )
            }
            Self::Fault { index, fault } => {
                write!(f, "the MMU faulted at entry {index}: {fault:?}")
            }
        }
    }
}

impl core::error::Error for PteError {}

/// What [`PteTable::unmap_ptes`] took away: the caller must act on `dirty` (write the data
/// back) and may use `young` as a last access hint.
#[must_use = "a dirty page must be written back"]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unmapped {
    /// Present entries cleared.
    pub pages: usize,
    /// Whether any of them (or its contiguous block) was young.
    pub young: bool,
    /// Whether any of them (or its contiguous block) was dirty.
    pub dirty: bool,
}

/// One page-table page (or a block-aligned part of one) of atomic 64-bit entries, and the
/// virtual address its first entry maps.
#[derive(Debug)]
pub struct PteTable<'a, F: PteFormat, E: Entry = AtomicU64> {
    format: F,
    base: VirtAddr,
    entries: &'a [E],
}

impl<'a, F: PteFormat, E: Entry> PteTable<'a, F, E> {
    /// A table over `entries`, whose entry 0 maps virtual address `base`.
    ///
    /// `entries` may be a kernel's live page-table page (a `&[AtomicU64; N]` over its frame)
    /// or memory a model owns. Its length must be at least one contiguous block, at most
    /// [`PteFormat::ptes_per_table`], and a whole number of blocks; `base` must be aligned
    /// to a block's span, and the table's span must fit the address space.
    ///
    /// # Errors
    /// [`PteError::BadFormat`] for a format of the caller's own with a bad contiguous block; [`PteError::BadTableLength`] or
    /// [`PteError::BadBase`] for the geometry.
    pub fn new(format: F, base: VirtAddr, entries: &'a [E]) -> Result<Self, PteError> {
        let len = entries.len();
        let cont = format.cont_ptes();
        if !cont.is_power_of_two() || cont > format.ptes_per_table() {
            return Err(PteError::BadFormat { cont_ptes: cont });
        }
        if len == 0 || len > format.ptes_per_table() || !len.is_multiple_of(cont) {
            return Err(PteError::BadTableLength { len });
        }
        let shift = format.entry_shift();
        let page_shift = format.page_size().shift();
        if shift < page_shift || shift > 40 {
            return Err(PteError::BadFormat { cont_ptes: cont });
        }
        let block_span = (cont as u64) << shift;
        let span = (len as u64) << shift;
        if !base.0.is_multiple_of(block_span) || base.checked_add(span - 1).is_none() {
            return Err(PteError::BadBase { base });
        }
        Ok(Self {
            format,
            base,
            entries,
        })
    }

    /// The entry format.
    #[must_use]
    pub fn format(&self) -> F {
        self.format
    }

    /// The virtual address entry 0 maps.
    #[must_use]
    pub fn base(&self) -> VirtAddr {
        self.base
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Always false: a table has at least one block.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The virtual address entry `index` maps, if `index` is in the table.
    #[must_use]
    pub fn va_of(&self, index: usize) -> Option<VirtAddr> {
        (index < self.len()).then(|| VirtAddr(self.base.0 + self.offset_of(index)))
    }

    /// Bytes from the base to the page of entry `index` (inside the span `new` checked).
    fn offset_of(&self, index: usize) -> u64 {
        (index as u64) << self.format.entry_shift()
    }

    /// The entry mapping virtual address `va` (any byte of the page).
    ///
    /// # Errors
    /// [`PteError::BadAddress`] if `va` lies outside the table's span.
    pub fn index_of(&self, va: VirtAddr) -> Result<usize, PteError> {
        let index =
            va.0.checked_sub(self.base.0)
                .map(|off| off >> self.format.entry_shift())
                .filter(|&i| i < self.len() as u64)
                .ok_or(PteError::BadAddress { va })?;
        Ok(index as usize)
    }

    /// Checks that `index..index + nr` is a non-empty range inside the table.
    pub(crate) fn check_range(&self, index: usize, nr: usize) -> Result<Range<usize>, PteError> {
        let len = self.len();
        match index.checked_add(nr) {
            Some(end) if nr > 0 && end <= len => Ok(index..end),
            _ => Err(PteError::OutOfRange { index, nr, len }),
        }
    }

    /// Checks that `range` is a non-empty range inside the table.
    pub(crate) fn check_span(&self, range: Range<usize>) -> Result<Range<usize>, PteError> {
        self.check_range(range.start, range.end.saturating_sub(range.start))
    }

    /// The raw entry `index`, which must be present.
    pub(crate) fn present(&self, index: usize) -> Result<u64, PteError> {
        let pte = self.raw(index)?;
        if self.format.is_present(pte) {
            Ok(pte)
        } else {
            Err(PteError::NotPresent { index })
        }
    }

    /// The atomic behind entry `index`, which the caller has range-checked.
    pub(crate) fn slot(&self, index: usize) -> &E {
        &self.entries[index]
    }

    /// The first entry of the contiguous block holding `index`.
    pub(crate) fn block_start(&self, index: usize) -> usize {
        index - index % self.format.cont_ptes()
    }

    /// The raw entry, as the MMU sees it (the kernel's `__ptep_get`).
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index` is outside the table.
    pub fn raw(&self, index: usize) -> Result<u64, PteError> {
        self.check_range(index, 1)?;
        Ok(self.slot(index).load())
    }

    /// The entry as software must see it (the kernel's `ptep_get`): for a contpte entry, the
    /// access flag and dirty state of the whole block ORed in, since the MMU may have set
    /// them on any entry of the block.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index` is outside the table.
    pub fn get(&self, index: usize) -> Result<u64, PteError> {
        let pte = self.raw(index)?;
        Ok(self.gather(index, pte))
    }

    /// `pte` (entry `index`) with its block's access flag and dirty state ORed in.
    pub(crate) fn gather(&self, index: usize, mut pte: u64) -> u64 {
        let f = self.format;
        if !f.is_cont(pte) {
            return pte;
        }
        let start = self.block_start(index);
        for slot in &self.entries[start..start + f.cont_ptes()] {
            let other = slot.load();
            if f.is_young(other) {
                pte = f.mkyoung(pte);
            }
            if f.is_dirty(other) {
                pte = f.mkdirty(pte);
            }
        }
        pte
    }

    /// The range covering entries `range`, for a TLB invalidate: in pages of the granule, so a
    /// 2 MiB leaf of 4 KiB frames is 512 of them.
    pub(crate) fn flush_range_of(&self, range: Range<usize>) -> PageRange {
        PageRange::new(
            VirtAddr(self.base.0 + self.offset_of(range.start)),
            range.len() as u64 * self.frames_per_entry(),
            self.format.page_size(),
        )
    }

    /// Frames (of the format's page size) one entry maps: 1 for page entries, 512 for a
    /// 2 MiB leaf of 4 KiB frames; consecutive entries of one folio map frames this far
    /// apart. From the entry and page shifts [`new`](Self::new) checked.
    #[must_use]
    pub fn frames_per_entry(&self) -> u64 {
        1 << (self.format.entry_shift() - self.format.page_size().shift())
    }

    /// The frame entry `index` maps in a run that maps `first` at entry `start`, or `None`
    /// past the frame numbers.
    pub(crate) fn frame_at(&self, first: Pfn, start: usize, index: usize) -> Option<Pfn> {
        let step = self.frames_per_entry();
        ((index - start) as u64)
            .checked_mul(step)
            .and_then(|off| first.checked_add(off))
    }

    /// Maps `nr` consecutive frames from `pfn` (one folio) at entries `index..index + nr`
    /// with `prot` (the kernel's `set_ptes`). Every contiguous block the range covers fully,
    /// whose first entry and first frame are both block aligned, gets the contiguous hint
    /// (arm64's `contpte_set_ptes`).
    ///
    /// The entries must be empty: remapping goes through [`unmap_ptes`](Self::unmap_ptes).
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if the range is empty or leaves the table;
    /// [`PteError::BadMapping`] if the frames overflow or `pfn`/`prot` do not fit the format;
    /// [`PteError::AlreadyMapped`] naming the first entry that is not empty. Nothing is
    /// written then.
    pub fn set_ptes(&self, index: usize, pfn: Pfn, nr: usize, prot: Prot) -> Result<(), PteError> {
        let range = self.check_range(index, nr)?;
        let f = self.format;
        let bad = PteError::BadMapping { pfn };
        let last_pfn = self.frame_at(pfn, index, range.end - 1).ok_or(bad)?;
        if last_pfn > f.max_pfn() {
            return Err(bad);
        }
        let template = f.mk_pte(pfn, prot).ok_or(bad)?;
        if let Some(i) = range.clone().find(|&i| f.is_present(self.raw_unchecked(i))) {
            return Err(PteError::AlreadyMapped { index: i });
        }
        let cont = f.cont_ptes();
        let step = self.frames_per_entry();
        // `pfn` in entries (mk_pte refused a frame not aligned to its leaf).
        let first_entry = pfn.0 / step;
        for i in range.clone() {
            // Inside the frame field: the last entry's frame was checked above.
            let page_pfn = pfn.0 + (i - index) as u64 * step;
            let start = self.block_start(i);
            // The block lies inside the range (so its first frame is at least `pfn`) and
            // its first frame is block aligned.
            let folds = cont > 1
                && start >= index
                && start + cont <= range.end
                && (first_entry + (start - index) as u64).is_multiple_of(cont as u64);
            let pte = f.with_pfn(template, Pfn(page_pfn));
            let pte = if folds { f.mkcont(pte) } else { pte };
            self.slot(i).store(pte);
        }
        Ok(())
    }

    /// Entry `index` of a range the caller checked ([`check_span`](Self::check_span)).
    pub(crate) fn raw_unchecked(&self, index: usize) -> u64 {
        self.slot(index).load()
    }

    /// Unfolds the contiguous block holding `index` if it is one (arm64's
    /// `contpte_convert`): clears every entry collecting the access flag and dirty state,
    /// invalidates the block's range once, and rewrites the entries without the hint, each
    /// carrying what was collected. Returns whether it unfolded.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index` is outside the table.
    pub fn unfold(
        &self,
        index: usize,
        tlb: &mut impl TlbFlush<F::Stage>,
    ) -> Result<bool, PteError> {
        let pte = self.raw(index)?;
        let f = self.format;
        if !f.is_cont(pte) {
            return Ok(false);
        }
        let start = self.block_start(index);
        let block = start..start + f.cont_ptes();
        let (mut young, mut dirty) = (false, false);
        for slot in &self.entries[block.clone()] {
            // An atomic exchange: a concurrent hardware update lands before it (and is
            // collected here) or faults on the cleared entry.
            let old = slot.swap(0);
            young |= f.is_young(old);
            dirty |= f.is_dirty(old);
        }
        tlb.flush_range(self.flush_range_of(block.clone()));
        // A block maps block-aligned frames; wrapping only matters for a block someone else
        // wrote wrongly, and with_pfn keeps the result inside the frame field.
        let step = self.frames_per_entry();
        let block_pfn = f.pfn(pte).0.wrapping_sub((index - start) as u64 * step);
        for i in block {
            let page_pfn = Pfn(block_pfn.wrapping_add((i - start) as u64 * step));
            let mut new = f.mknoncont(f.with_pfn(pte, page_pfn));
            new = if young { f.mkyoung(new) } else { f.mkold(new) };
            new = if dirty {
                f.mkdirty(new)
            } else {
                f.mkclean(new)
            };
            self.slot(i).store(new);
        }
        Ok(true)
    }

    /// Unfolds the blocks at either end of `range` that `range` covers only in part.
    fn unfold_partial_ends(
        &self,
        range: Range<usize>,
        tlb: &mut impl TlbFlush<F::Stage>,
    ) -> Result<(), PteError> {
        let cont = self.format.cont_ptes();
        if cont == 1 {
            return Ok(());
        }
        for end in [range.start, range.end - 1] {
            let start = self.block_start(end);
            if start < range.start || start + cont > range.end {
                self.unfold(end, tlb)?;
            }
        }
        Ok(())
    }

    /// Clears entries `index..index + nr` (the kernel's `clear_ptes` / `get_and_clear_full_ptes`),
    /// unfolding first any block the range covers only in part, and invalidates the range
    /// once if anything was present. Empty entries in the range are allowed.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if the range is empty or leaves the table; nothing is changed
    /// then.
    pub fn unmap_ptes(
        &self,
        index: usize,
        nr: usize,
        tlb: &mut impl TlbFlush<F::Stage>,
    ) -> Result<Unmapped, PteError> {
        let range = self.check_range(index, nr)?;
        self.unfold_partial_ends(range.clone(), tlb)?;
        let f = self.format;
        let mut out = Unmapped::default();
        for slot in &self.entries[range.clone()] {
            let old = slot.swap(0);
            if f.is_present(old) {
                out.pages += 1;
                out.young |= f.is_young(old);
                out.dirty |= f.is_dirty(old);
            }
        }
        if out.pages > 0 {
            tlb.flush_range(self.flush_range_of(range));
        }
        Ok(out)
    }

    /// Makes entries `index..index + nr` read-only (the kernel's `wrprotect_ptes`), keeping
    /// a hardware dirty state as software dirty; unfolds first any block covered only in
    /// part (a whole block changes uniformly and stays folded), and invalidates the range
    /// once if an entry changed. Each entry changes by a compare-and-swap loop, so a write
    /// the MMU records meanwhile is kept.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if the range is empty or leaves the table; nothing is changed
    /// then.
    pub fn wrprotect_ptes(
        &self,
        index: usize,
        nr: usize,
        tlb: &mut impl TlbFlush<F::Stage>,
    ) -> Result<(), PteError> {
        let range = self.check_range(index, nr)?;
        self.unfold_partial_ends(range.clone(), tlb)?;
        let f = self.format;
        let mut changed = false;
        for slot in &self.entries[range.clone()] {
            let mut old = slot.load();
            while f.is_present(old) && f.wrprotect(old) != old {
                match slot.compare_exchange_weak(old, f.wrprotect(old)) {
                    Ok(_) => {
                        changed = true;
                        break;
                    }
                    Err(current) => old = current,
                }
            }
        }
        if changed {
            tlb.flush_range(self.flush_range_of(range));
        }
        Ok(())
    }

    /// The MMU's side: an access through entry `index` sets the access flag (and, for a
    /// write to a dirty-managed entry, the dirty state) by an atomic read-modify-write, as
    /// FEAT_HAFDBS hardware and x86 page walkers do.
    ///
    /// For a contpte entry the TLB may have filled from any entry of the block, so the update
    /// lands on entry `pick % CONT_PTES` of the block; `pick` is ignored otherwise. Returns
    /// the entry that was updated.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index` is outside the table; [`PteError::Fault`] with the
    /// MMU's fault (not present, or a write the entry does not permit), the entry unchanged.
    pub fn hw_access(&self, index: usize, access: Access, pick: usize) -> Result<usize, PteError> {
        let pte = self.raw(index)?;
        let f = self.format;
        let target = if f.is_cont(pte) {
            self.block_start(index) + pick % f.cont_ptes()
        } else {
            index
        };
        let slot = self.slot(target);
        let mut old = slot.load();
        loop {
            let new = f
                .hardware_update(old, access)
                .map_err(|fault| PteError::Fault {
                    index: target,
                    fault,
                })?;
            if new == old {
                return Ok(target);
            }
            match slot.compare_exchange_weak(old, new) {
                Ok(_) => return Ok(target),
                Err(current) => old = current,
            }
        }
    }

    /// [`hw_access`](Self::hw_access) by virtual address.
    ///
    /// # Errors
    /// [`PteError::BadAddress`] if `va` lies outside the table; otherwise as
    /// [`hw_access`](Self::hw_access).
    pub fn hw_access_va(
        &self,
        va: VirtAddr,
        access: Access,
        pick: usize,
    ) -> Result<usize, PteError> {
        self.hw_access(self.index_of(va)?, access, pick)
    }
}
