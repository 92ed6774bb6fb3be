//! The obvious per-entry definitions, written for clarity and never optimized: the kernel's
//! generic defaults, which loop the per-entry operation over a batch. The tests hold the
//! batched paths to them, and the benchmarks use them as the "before" column.

use crate::sync::Entry;
use core::ops::Range;

use crate::aging::{AgingStats, Tally, YoungOp, folio_at};
use crate::batch::{Folios, FpbFlags, PteBatch, batch_key, merge_young_dirty};
use crate::flush::{FlushToken, TlbFlush};
use crate::format::PteFormat;
use crate::table::{PteError, PteTable};
use mm_types::{FrameRange, PageRange};

/// Linux's arm64 `ptep_test_and_clear_young` (contpte-aware), counted: one entry, or the
/// whole block of a contpte entry, each by the compare-and-swap loop. Returns (young,
/// entries cleared).
fn clear_young_one<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    index: usize,
) -> Result<(bool, Range<usize>), PteError> {
    let f = table.format();
    let pte = table.raw(index)?;
    let entries = if f.is_cont(pte) {
        let start = index - index % f.cont_ptes();
        start..start + f.cont_ptes()
    } else {
        index..index + 1
    };
    let mut young = false;
    for i in entries.clone() {
        young |= table.clear_young_entry(i).0;
    }
    Ok((young, entries))
}

/// `ptep_test_and_clear_young`: clears entry `index`, or its whole block if it is contpte.
///
/// # Errors
/// [`PteError::OutOfRange`] if `index` is outside the table.
pub fn ptep_test_and_clear_young<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    index: usize,
) -> Result<bool, PteError> {
    Ok(clear_young_one(table, index)?.0)
}

/// The generic `test_and_clear_young_ptes`: [`ptep_test_and_clear_young`] on each of the `nr`
/// entries, ORing the results.
///
/// # Errors
/// [`PteError::OutOfRange`] if `index..index + nr` is empty or leaves the table.
pub fn test_and_clear_young_ptes<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    index: usize,
    nr: usize,
) -> Result<bool, PteError> {
    let range = table.check_range(index, nr)?;
    let mut young = false;
    for i in range {
        young |= ptep_test_and_clear_young(table, i)?;
    }
    Ok(young)
}

/// `ptep_clear_flush_young`, per entry: the clear, then an invalidate of what it cleared if
/// anything was young (on a format that flushes for young clearing).
fn clear_flush_young_one<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    index: usize,
) -> Result<(FlushToken<F::Stage>, usize), PteError> {
    let (young, entries) = clear_young_one(table, index)?;
    let flush = young && table.format().flushes_young();
    let updates = entries.len();
    let range = flush.then(|| table.flush_range_of(entries));
    Ok((FlushToken::new(young, range), updates))
}

/// The generic `clear_flush_young_ptes`: the per-entry flushing clear on each of the `nr`
/// entries, each invalidating through `tlb` what it found young.
///
/// # Errors
/// [`PteError::OutOfRange`] if `index..index + nr` is empty or leaves the table.
pub fn clear_flush_young_ptes<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    index: usize,
    nr: usize,
    tlb: &mut impl TlbFlush<F::Stage>,
) -> Result<bool, PteError> {
    let range = table.check_range(index, nr)?;
    let mut young = false;
    for i in range {
        young |= clear_flush_young_one(table, i)?.0.flush(tlb);
    }
    Ok(young)
}

/// `folio_pte_batch` without the contpte hint: compares every entry with the first.
///
/// # Errors
/// As [`crate::folio_pte_batch`].
pub fn folio_pte_batch<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    index: usize,
    max_nr: usize,
    flags: FpbFlags,
) -> Result<PteBatch, PteError> {
    let range = table.check_range(index, max_nr)?;
    let f = table.format();
    let first = table.gather(index, table.present(index)?);
    let mut pte = first;
    let mut nr = 0;
    for i in range {
        let seen = table.get(i)?;
        let same = f.is_present(seen)
            && (nr as u64)
                .checked_mul(table.frames_per_entry())
                .and_then(|off| f.pfn(first).checked_add(off))
                == Some(f.pfn(seen))
            && batch_key(f, seen, flags) == batch_key(f, first, flags);
        if !same {
            break;
        }
        if flags.contains(FpbFlags::MERGE_YOUNG_DIRTY) {
            pte = merge_young_dirty(f, pte, seen);
        }
        nr += 1;
    }
    Ok(PteBatch { nr, pte })
}

/// The aging walk before batching: for every present entry, read it (contpte-aware), look up
/// its folio, and clear it with the per-entry flushing clear.
///
/// # Errors
/// As [`crate::age_range`].
pub fn age_range<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    range: Range<usize>,
    folios: &impl Folios,
    tlb: &mut impl TlbFlush<F::Stage>,
    on_folio: impl FnMut(FrameRange, bool),
) -> Result<AgingStats, PteError> {
    let mut tally = Tally::new(on_folio);
    walk(
        table,
        range,
        folios,
        YoungOp::ClearFlush,
        tlb,
        &mut tally,
        |_, _| {},
    )?;
    Ok(tally.finish())
}

/// KVM's aging before batching: for every present entry that maps a folio, `op` on that
/// entry alone (a contpte entry's block with it), reporting the entry's pages.
///
/// # Errors
/// As [`crate::age_batches`].
pub fn age_batches<F: PteFormat, E: Entry>(
    table: &PteTable<'_, F, E>,
    range: Range<usize>,
    folios: &impl Folios,
    op: YoungOp,
    tlb: &mut impl TlbFlush<F::Stage>,
    on_batch: impl FnMut(PageRange, bool),
) -> Result<AgingStats, PteError> {
    let mut tally = Tally::new(|_, _| {});
    walk(table, range, folios, op, tlb, &mut tally, on_batch)?;
    Ok(tally.finish())
}

/// The per-entry walk both entry points share: `op` on each present entry that maps a folio,
/// counted into `tally`, its pages reported to `on_entry`.
fn walk<F: PteFormat, E: Entry, V: FnMut(FrameRange, bool)>(
    table: &PteTable<'_, F, E>,
    range: Range<usize>,
    folios: &impl Folios,
    op: YoungOp,
    tlb: &mut impl TlbFlush<F::Stage>,
    tally: &mut Tally<V>,
    mut on_entry: impl FnMut(PageRange, bool),
) -> Result<(), PteError> {
    let range = table.check_span(range)?;
    let f = table.format();
    for i in range.clone() {
        let pte = table.get(i)?;
        if !f.is_present(pte) {
            continue;
        }
        let Some((folio, _)) = folio_at(table, pte, folios)? else {
            continue;
        };
        let young = match op {
            YoungOp::Test => f.is_young(pte),
            YoungOp::Clear => ptep_test_and_clear_young(table, i)?,
            YoungOp::ClearFlush => {
                let (token, updates) = clear_flush_young_one(table, i)?;
                tally.stats.entry_updates += updates as u64;
                tally.flush(token, tlb)
            }
        };
        tally.stats.batches += 1;
        tally.record(folio, 1, young);
        on_entry(table.flush_range_of(i..i + 1), young);
    }
    Ok(())
}
