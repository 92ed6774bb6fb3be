//! An aging walk in the shape of MGLRU's page-table walker (`walk_pte_range`): over a range of
//! a table, find each present entry's folio, batch the entries that map it, test-and-clear the
//! access flag per batch, and report each folio as young or old ([`age_range`]); and the same
//! walk with KVM's three operations (test, clear, clear and flush), reporting each batch's
//! addresses ([`age_batches`]), for a hypervisor aging its guests' memory.

use crate::sync::Entry;
use core::ops::Range;

use crate::batch::{Folios, FpbFlags, folio_pte_batch};
use crate::flush::{FlushToken, TlbFlush, TranslationStage};
use crate::format::PteFormat;
use crate::table::{PteError, PteTable};
use mm_types::{FrameRange, PageRange};

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
        self.record_batch(folio, young);
    }

    /// Folds one batch's young result into its folio's (the entries counted already).
    pub(crate) fn record_batch(&mut self, folio: FrameRange, young: bool) {
        match &mut self.current {
            Some((f, y)) if *f == folio => *y |= young,
            _ => {
                self.emit();
                self.current = Some((folio, young));
            }
        }
    }

    /// Passes a clear's flush token to `tlb`, counting the invalidation; returns its young.
    pub(crate) fn flush<S: TranslationStage>(
        &mut self,
        token: FlushToken<S>,
        tlb: &mut impl TlbFlush<S>,
    ) -> bool {
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

/// The folio of the present entry `pte`, and how many of its frames are left from the one
/// `pte` maps (that one included); `None` for a frame that is not in a folio.
pub(crate) fn folio_at<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    pte: u64,
    folios: &impl Folios,
) -> Result<Option<(FrameRange, u64)>, PteError> {
    let pfn = table.format().pfn(pte);
    let Some(folio) = folios.folio_of(pfn) else {
        return Ok(None);
    };
    if !folio.contains(pfn) {
        return Err(PteError::BadFolio { pfn });
    }
    Ok(Some((folio, folio.pages - (pfn.0 - folio.start.0))))
}

/// How many entries from `index` (at most `end - index`) can map `frames_left` frames of one
/// folio, with `shift` = log2 of the frames an entry maps (a power of two, so a shift
/// rather than a division): the last may map a part.
fn entries_for(frames_left: u64, shift: u32, index: usize, end: usize) -> usize {
    let entries = (frames_left >> shift) + u64::from(frames_left & ((1 << shift) - 1) != 0);
    usize::try_from(entries).map_or(end - index, |n| n.min(end - index))
}

/// What an aging walk does to each batch: the three MMU-notifier operations KVM implements
/// on a guest's second-stage tables (and the kernel's own aging on stage 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum YoungOp {
    /// `test_young` (`kvm_test_age_gfn`): whether any entry of the batch is young; nothing
    /// is written.
    Test,
    /// `clear_young` (`kvm_age_gfn` from the notifier that may not flush): clear the access
    /// flag, and never invalidate the TLB, on every format. A translation the TLB still
    /// holds only delays the next access flag; the notifier's contract accepts that.
    Clear,
    /// `clear_flush_young`: clear the access flag and invalidate the cleared range where the
    /// format flushes for young clearing (arm64 at both stages; never on x86, where KVM
    /// elides the flush as Linux does for stage 1).
    ClearFlush,
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
    tlb: &mut impl TlbFlush<F::Stage>,
    on_folio: impl FnMut(FrameRange, bool),
) -> Result<AgingStats, PteError> {
    let mut tally = Tally::new(on_folio);
    walk(
        table,
        range,
        folios,
        flags,
        YoungOp::ClearFlush,
        tlb,
        &mut tally,
        |tally, folio, _, young| tally.record_batch(folio, young),
    )?;
    Ok(tally.finish())
}

/// Ages entries `range` of `table` with KVM's semantics: per folio batch
/// ([`folio_pte_batch`] with `flags`; a contpte block at either end is taken whole), `op`
/// once, and `on_batch(pages, young)` with the addresses the batch maps (guest-physical at
/// stage 2; a 2 MiB leaf is 512 pages of 4 KiB) in walk order. This is the walk a
/// hypervisor runs for `kvm_age_gfn` / `kvm_test_age_gfn` over one table of a guest's
/// second stage, and what a [`WorkingSet`](crate::WorkingSet) pass consumes.
///
/// # Errors
/// As [`age_range`].
#[inline]
pub fn age_batches<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    range: Range<usize>,
    folios: &impl Folios,
    flags: FpbFlags,
    op: YoungOp,
    tlb: &mut impl TlbFlush<F::Stage>,
    mut on_batch: impl FnMut(PageRange, bool),
) -> Result<AgingStats, PteError> {
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
            on_batch(table.flush_range_of(entries), young);
        },
    )?;
    Ok(tally.finish())
}

/// The batched walk every entry point shares: `report(tally, folio, entries, young)` per
/// batch (`entries`: the batch's entries in the table), after counting its entries and
/// updates into `tally`.
#[allow(clippy::too_many_arguments)] // the walk's inputs, each needed, and a private helper
#[inline]
pub(crate) fn walk<F: PteFormat, E: Entry, V: FnMut(FrameRange, bool)>(
    table: &PteTable<'_, F, E>,
    range: Range<usize>,
    folios: &impl Folios,
    flags: FpbFlags,
    op: YoungOp,
    tlb: &mut impl TlbFlush<F::Stage>,
    tally: &mut Tally<V>,
    mut report: impl FnMut(&mut Tally<V>, FrameRange, Range<usize>, bool),
) -> Result<(), PteError> {
    let range = table.check_span(range)?;
    let f = table.format();
    let per_entry = table.frames_per_entry();
    let shift = per_entry.trailing_zeros();
    // Counted in locals and added once: stores to `tally` in the loop would sit in the store
    // buffer ahead of every entry's locked compare-and-swap.
    let (mut batches, mut entries, mut updates) = (0, 0, 0);
    let mut i = range.start;
    while i < range.end {
        let pte = table.raw_unchecked(i);
        let found = if f.is_present(pte) {
            folio_at(table, pte, folios)?
        } else {
            None
        };
        let Some((folio, frames_left)) = found else {
            i += 1;
            continue;
        };
        // A folio with one entry left here (a 2 MiB folio under a 2 MiB leaf, a small
        // folio, the last entry of the table) is a batch of one without comparing entries;
        // if the entry is not in a contiguous block there is nothing to expand either, and it
        // is cleared as the per-entry walk clears it (a batch of one must not cost more than
        // an entry).
        let one = frames_left <= per_entry || i + 1 == range.end;
        if one && !f.is_cont(pte) {
            let young = match op {
                YoungOp::Test => f.is_young(pte),
                YoungOp::Clear | YoungOp::ClearFlush => {
                    let (young, rewritten) = table.clear_young_from(i, pte);
                    updates += u64::from(rewritten);
                    if op == YoungOp::ClearFlush && f.flushes_young() && young {
                        let range = table.flush_range_of(i..i + 1);
                        tally.flush(FlushToken::new(true, Some(range)), tlb)
                    } else {
                        young
                    }
                }
            };
            batches += 1;
            entries += 1;
            report(tally, folio, i..i + 1, young);
            i += 1;
            continue;
        }
        let nr = if one {
            1
        } else {
            let max_nr = entries_for(frames_left, shift, i, range.end);
            folio_pte_batch(table, i, max_nr, flags)?.nr
        };
        // The walk checked the range: expand it to whole blocks and act on it.
        let expanded = table.expand_young(i..i + nr);
        let young = match op {
            YoungOp::Test => table.any_young_in(expanded),
            YoungOp::Clear | YoungOp::ClearFlush => {
                let cleared = table.clear_young_in(expanded);
                updates += cleared.updates as u64;
                let token = table.token_for(&cleared);
                if op == YoungOp::Clear {
                    token.skip_flush()
                } else {
                    tally.flush(token, tlb)
                }
            }
        };
        batches += 1;
        entries += nr as u64;
        report(tally, folio, i..i + nr, young);
        i += nr;
    }
    tally.stats.batches += batches;
    tally.stats.entries += entries;
    tally.stats.entry_updates += updates;
    Ok(())
}
