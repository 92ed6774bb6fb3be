//! An aging walk in the shape of MGLRU's page-table walker (`walk_pte_range`): over a range of
//! a table, find each present entry's folio, batch the entries that map it, test-and-clear the
//! access flag per batch, and report each folio as young or old.

use crate::sync::Entry;
use core::ops::Range;

use crate::batch::{Folios, FpbFlags, folio_pte_batch};
use crate::flush::{FlushToken, TlbFlush};
use crate::format::PteFormat;
use crate::table::{PteError, PteTable};
use mm_types::FrameRange;

/// What an aging walk did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgingStats {
    /// Present entries walked over.
    pub entries: u64,
    /// Folios seen (a folio mapped by adjacent batches counts once).
    pub folios: u64,
    /// Of those, folios with at least one young entry.
    pub young_folios: u64,
    /// Young-clear calls made (batches; one per entry for the per-entry walk).
    pub batches: u64,
    /// Entries rewritten by a compare-and-swap.
    pub entry_updates: u64,
    /// TLB range invalidations requested.
    pub flushes: u64,
    /// Pages those invalidations covered.
    pub flushed_pages: u64,
}

impl core::ops::AddAssign for AgingStats {
    fn add_assign(&mut self, rhs: Self) {
        self.entries += rhs.entries;
        self.folios += rhs.folios;
        self.young_folios += rhs.young_folios;
        self.batches += rhs.batches;
        self.entry_updates += rhs.entry_updates;
        self.flushes += rhs.flushes;
        self.flushed_pages += rhs.flushed_pages;
    }
}

/// Folds the young results of consecutive batches (or entries) of one folio into one report
/// per folio, and counts. Shared by the batched walk and the per-entry reference walk.
pub(crate) struct Tally<V: FnMut(FrameRange, bool)> {
    current: Option<(FrameRange, bool)>,
    pub(crate) stats: AgingStats,
    on_folio: V,
}

impl<V: FnMut(FrameRange, bool)> Tally<V> {
    pub(crate) fn new(on_folio: V) -> Self {
        Self {
            current: None,
            stats: AgingStats::default(),
            on_folio,
        }
    }

    /// Records that `entries` entries of `folio` were walked and whether they were young.
    pub(crate) fn record(&mut self, folio: FrameRange, entries: usize, young: bool) {
        self.stats.entries += entries as u64;
        match &mut self.current {
            Some((f, y)) if *f == folio => *y |= young,
            _ => {
                self.emit();
                self.current = Some((folio, young));
            }
        }
    }

    /// Passes a clear's flush token to `tlb`, counting the invalidation; returns its young.
    pub(crate) fn flush(&mut self, token: FlushToken, tlb: &mut impl TlbFlush) -> bool {
        if let Some(range) = token.range() {
            self.stats.flushes += 1;
            self.stats.flushed_pages += range.pages;
        }
        token.flush(tlb)
    }

    fn emit(&mut self) {
        if let Some((folio, young)) = self.current.take() {
            self.stats.folios += 1;
            self.stats.young_folios += u64::from(young);
            (self.on_folio)(folio, young);
        }
    }

    pub(crate) fn finish(mut self) -> AgingStats {
        self.emit();
        self.stats
    }
}

/// The folio of the present entry `pte` at `index`, and how many entries from `index` (at
/// most `end - index`) can belong to it; `None` for a frame that is not in a folio.
pub(crate) fn folio_at<F: PteFormat>(
    f: F,
    pte: u64,
    index: usize,
    end: usize,
    folios: &impl Folios,
) -> Result<Option<(FrameRange, usize)>, PteError> {
    let pfn = f.pfn(pte);
    let Some(folio) = folios.folio_of(pfn) else {
        return Ok(None);
    };
    if !folio.contains(pfn) {
        return Err(PteError::BadFolio { pfn });
    }
    let left_in_folio = folio.pages - (pfn.0 - folio.start.0);
    let max_nr = usize::try_from(left_in_folio).map_or(end - index, |n| n.min(end - index));
    Ok(Some((folio, max_nr)))
}

/// Ages entries `range` of `table`: per folio batch ([`folio_pte_batch`] with `flags`), one
/// [`clear_flush_young_ptes`](PteTable::clear_flush_young_ptes) whose invalidate goes to
/// `tlb`. Calls `on_folio(folio, young)` once per folio in walk order and returns the counts.
/// Entries that are empty or map no folio are skipped.
///
/// With [`FpbFlags::IGNORE_CONT`] a folio whose last block was unfolded is still one batch.
///
/// # Errors
/// [`PteError::OutOfRange`] if `range` is empty or leaves the table (nothing is changed
/// then); [`PteError::BadFolio`] if `folios` gives an entry a folio that does not contain its
/// frame (the folios aged before it stay aged).
pub fn age_range<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    range: Range<usize>,
    folios: &impl Folios,
    flags: FpbFlags,
    tlb: &mut impl TlbFlush,
    on_folio: impl FnMut(FrameRange, bool),
) -> Result<AgingStats, PteError> {
    let range = table.check_span(range)?;
    let f = table.format();
    let mut tally = Tally::new(on_folio);
    let mut i = range.start;
    while i < range.end {
        let pte = table.raw(i)?;
        let found = if f.is_present(pte) {
            folio_at(f, pte, i, range.end, folios)?
        } else {
            None
        };
        let Some((folio, max_nr)) = found else {
            i += 1;
            continue;
        };
        let batch = folio_pte_batch(table, i, max_nr, flags)?;
        let cleared = table.clear_young_counted(i, batch.nr)?;
        tally.stats.batches += 1;
        tally.stats.entry_updates += cleared.updates as u64;
        let young = tally.flush(table.token_for(&cleared), tlb);
        tally.record(folio, batch.nr, young);
        i += batch.nr;
    }
    Ok(tally.finish())
}
