//! `folio_pte_batch`: how many consecutive entries from one map consecutive pages of one folio
//! with equal attributes, so the young clear (or an unmap, a fork, ...) handles them in one call.

use crate::format::PteFormat;
use crate::sync::Entry;
use crate::table::{PteError, PteTable};
use mm_types::{FrameRange, Pfn};

/// Finds the folio a frame belongs to (the kernel's `pfn_folio`, a `vmemmap` look-up). A folio
/// is a [`FrameRange`]: physically contiguous frames managed as one unit.
pub trait Folios {
    /// The folio holding `pfn`, or `None` for a frame that is not part of one (a device
    /// page, a frame the walk should skip).
    fn folio_of(&self, pfn: Pfn) -> Option<FrameRange>;
}

impl<T: Fn(Pfn) -> Option<FrameRange>> Folios for T {
    fn folio_of(&self, pfn: Pfn) -> Option<FrameRange> {
        self(pfn)
    }
}

/// Flags for [`folio_pte_batch`] (the kernel's `fpb_t`). By default the access flag, the dirty
/// state and writability are ignored when comparing entries, and the contiguous hint is not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FpbFlags(u8);

impl FpbFlags {
    /// Nothing respected beyond the defaults.
    pub const NONE: Self = Self(0);
    /// Entries with a different dirty state end the batch (`FPB_RESPECT_DIRTY`).
    pub const RESPECT_DIRTY: Self = Self(1);
    /// Entries with different writability end the batch (`FPB_RESPECT_WRITE`).
    pub const RESPECT_WRITE: Self = Self(2);
    /// The returned entry carries the access flag and dirty state of every entry of the
    /// batch (`FPB_MERGE_YOUNG_DIRTY`).
    pub const MERGE_YOUNG_DIRTY: Self = Self(4);
    /// Beyond the kernel: a contpte and a non-contpte entry may share a batch, so what is
    /// left of a folio after one page of it was unmapped (its last block unfolded) is one
    /// batch instead of two (a question raised in the review of arm64's `test_and_clear_young_ptes()`).
    pub const IGNORE_CONT: Self = Self(8);

    /// Whether every flag of `other` is set.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for FpbFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// A batch [`folio_pte_batch`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PteBatch {
    /// Entries in the batch (at least 1).
    pub nr: usize,
    /// The first entry as [`PteTable::get`] reads it, with the whole batch's access flag and
    /// dirty state merged in under [`FpbFlags::MERGE_YOUNG_DIRTY`].
    pub pte: u64,
}

/// `pte` with the bits a batch ignores normalized away: frame, access flag, and per `flags`
/// dirty state, writability and the contiguous hint.
pub(crate) fn batch_key<F: PteFormat>(f: F, pte: u64, flags: FpbFlags) -> u64 {
    let mut key = f.mkold(f.with_pfn(pte, Pfn(0)));
    if !flags.contains(FpbFlags::RESPECT_DIRTY) {
        key = f.mkclean(key);
    }
    if !flags.contains(FpbFlags::RESPECT_WRITE) {
        key = f.wrprotect(key);
        // wrprotect keeps a dirty state as software dirty: drop it again unless respected.
        if !flags.contains(FpbFlags::RESPECT_DIRTY) {
            key = f.mkclean(key);
        }
    }
    if flags.contains(FpbFlags::IGNORE_CONT) {
        key = f.mknoncont(key);
    }
    key
}

/// Counts the entries from `index` (at most `max_nr`) that map consecutive frames from the
/// one at `index` with attributes equal up to what `flags` ignores (the kernel's
/// `folio_pte_batch`). The caller bounds `max_nr` by the folio's end, so the batch stays in
/// one folio. A contpte entry lets the scan skip to the end of its block (`pte_batch_hint`):
/// a block's entries are equal by construction.
///
/// Errors if `index..index + max_nr` leaves the table or the entry at `index` is not present.
///
/// # Errors
/// [`PteError::OutOfRange`] if `index..index + max_nr` is empty or leaves the table;
/// [`PteError::NotPresent`] if the entry at `index` is not present.
pub fn folio_pte_batch<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    index: usize,
    max_nr: usize,
    flags: FpbFlags,
) -> Result<PteBatch, PteError> {
    let range = table.check_range(index, max_nr)?;
    let f = table.format();
    let first = table.present(index)?;
    let merge = flags.contains(FpbFlags::MERGE_YOUNG_DIRTY);
    // Only a respected or merged dirty state needs the block's view of each entry (the
    // kernel's contpte `ptep_get`); otherwise the ignored bits are all the block differs in.
    let view = |i: usize, raw: u64| {
        if merge || flags.contains(FpbFlags::RESPECT_DIRTY) {
            table.gather(i, raw)
        } else {
            raw
        }
    };
    let seen = table.gather(index, first);
    let mut pte = if merge {
        merge_young_dirty(f, seen, seen)
    } else {
        seen
    };
    let key = batch_key(f, view(index, first), flags);
    let first_pfn = f.pfn(first);
    let mut i = index + hint(table, index, first);
    while i < range.end {
        let raw = table.raw(i)?;
        let expected_pfn = table.frame_at(first_pfn, index, i);
        if !f.is_present(raw) || Some(f.pfn(raw)) != expected_pfn {
            break;
        }
        let seen = view(i, raw);
        if batch_key(f, seen, flags) != key {
            break;
        }
        if merge {
            pte = merge_young_dirty(f, pte, seen);
        }
        i += hint(table, i, raw);
    }
    Ok(PteBatch {
        nr: i.min(range.end) - index,
        pte,
    })
}

/// `pte` made young and dirty where `seen` is (`FPB_MERGE_YOUNG_DIRTY`).
pub(crate) fn merge_young_dirty<F: PteFormat>(f: F, mut pte: u64, seen: u64) -> u64 {
    if f.is_young(seen) {
        pte = f.mkyoung(pte);
    }
    if f.is_dirty(seen) {
        pte = f.mkdirty(pte);
    }
    pte
}

/// Entries the scan may step over from `index` (the kernel's `pte_batch_hint`): to the end of
/// the block for a contpte entry, else one.
fn hint<F: PteFormat, E: Entry>(table: &PteTable<'_, F, E>, index: usize, pte: u64) -> usize {
    let f = table.format();
    if f.is_cont(pte) {
        f.cont_ptes() - index % f.cont_ptes()
    } else {
        1
    }
}
