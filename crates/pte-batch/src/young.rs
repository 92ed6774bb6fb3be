//! Test-and-clear of the access flag: per entry (contpte-aware) and batched over the entries of
//! one folio, with block alignment (Linux 2026, arm64's `test_and_clear_young_ptes()`), each entry cleared by a
//! compare-and-swap loop so a concurrent hardware access or dirty update is never lost.

use core::ops::Range;

use crate::flush::FlushToken;
use crate::format::PteFormat;
use crate::sync::Entry;
use crate::table::{PteError, PteTable};

/// What one young clear did, for the callers that count work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cleared {
    /// Whether any entry of the range was young.
    pub(crate) young: bool,
    /// The range of entries cleared (the batch expanded to block boundaries).
    pub(crate) range: Range<usize>,
    /// Entries rewritten (one successful compare-and-swap each).
    pub(crate) updates: usize,
}

impl<F: PteFormat, E: Entry> PteTable<'_, F, E> {
    /// Clears the access flag of entry `index` by a compare-and-swap loop (the kernel's
    /// `__ptep_test_and_clear_young`): returns (was young, rewritten). An empty entry is
    /// left alone.
    pub(crate) fn clear_young_entry(&self, index: usize) -> (bool, bool) {
        self.clear_young_from(index, self.slot(index).load())
    }

    /// [`clear_young_entry`](Self::clear_young_entry) starting from `old`, a value of the
    /// entry the caller just read (the compare-and-swap fails and retries if it is no longer
    /// what the entry holds).
    #[inline]
    pub(crate) fn clear_young_from(&self, index: usize, mut old: u64) -> (bool, bool) {
        let f = self.format();
        let slot = self.slot(index);
        while f.is_present(old) {
            match slot.compare_exchange_weak(old, f.mkold(old)) {
                Ok(_) => return (f.is_young(old), true),
                // The MMU (or a spurious failure) got in between: retry on what is there now.
                Err(current) => old = current,
            }
        }
        (false, false)
    }

    /// The entries a batched clear of `index..index + nr` touches: the batch, with its start
    /// rounded down to a block boundary if its first entry is contpte and its end rounded up if
    /// its last entry is (arm64's `contpte_align_addr_ptep`). Blocks strictly inside a batch
    /// of one folio are covered whole already, so a batch mixing non-contpte and contpte runs
    /// expands correctly too.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index..index + nr` is empty or leaves the table.
    pub fn young_range(&self, index: usize, nr: usize) -> Result<Range<usize>, PteError> {
        Ok(self.expand_young(self.check_range(index, nr)?))
    }

    /// [`young_range`](Self::young_range) of a range the caller has checked.
    pub(crate) fn expand_young(&self, Range { mut start, mut end }: Range<usize>) -> Range<usize> {
        let f = self.format();
        let cont = f.cont_ptes();
        if cont > 1 {
            if f.is_cont(self.slot(end - 1).load()) {
                end = self.block_start(end - 1) + cont;
            }
            if f.is_cont(self.slot(start).load()) {
                start = self.block_start(start);
            }
        }
        start..end
    }

    /// The batched clear of an expanded range ([`expand_young`](Self::expand_young)),
    /// counted.
    pub(crate) fn clear_young_in(&self, range: Range<usize>) -> Cleared {
        let mut young = false;
        let mut updates = 0;
        for i in range.clone() {
            let (was_young, rewritten) = self.clear_young_entry(i);
            young |= was_young;
            updates += usize::from(rewritten);
        }
        Cleared {
            young,
            range,
            updates,
        }
    }

    /// Whether any entry of an expanded range is young (nothing written).
    pub(crate) fn any_young_in(&self, range: Range<usize>) -> bool {
        let f = self.format();
        range.into_iter().any(|i| f.is_young(self.slot(i).load()))
    }

    /// Clears the access flag of entries `index..index + nr`, which map consecutive pages of
    /// one folio (a [`folio_pte_batch`](crate::folio_pte_batch) batch), and returns whether
    /// any was young (the kernel's `test_and_clear_young_ptes`). A contpte block at either end
    /// is cleared whole: the MMU may have recorded an access to any page of it on any of its
    /// entries. A batch may mix non-contpte and contpte runs. No TLB invalidate: see
    /// [`clear_flush_young_ptes`](Self::clear_flush_young_ptes).
    ///
    /// The cost is one compare-and-swap per entry of the expanded range: a 64 KiB contpte folio
    /// (4 KiB granule) costs 16, where a per-entry loop over its 16 entries costs 16 x 16.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index..index + nr` is empty or leaves the table; nothing
    /// is changed then.
    pub fn test_and_clear_young_ptes(&self, index: usize, nr: usize) -> Result<bool, PteError> {
        Ok(self.clear_young_in(self.young_range(index, nr)?).young)
    }

    /// Whether any entry of `index..index + nr` (expanded to the blocks at either end, as
    /// the clear is) is young, writing nothing: KVM's `test_young` over a batch.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index..index + nr` is empty or leaves the table.
    pub fn test_young_ptes(&self, index: usize, nr: usize) -> Result<bool, PteError> {
        Ok(self.any_young_in(self.young_range(index, nr)?))
    }

    /// The per-entry entry point (the kernel's `ptep_test_and_clear_young`): a batch of one,
    /// so a contpte entry clears its whole block.
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index` is outside the table.
    pub fn ptep_test_and_clear_young(&self, index: usize) -> Result<bool, PteError> {
        self.test_and_clear_young_ptes(index, 1)
    }

    /// [`test_and_clear_young_ptes`](Self::test_and_clear_young_ptes), returning the one TLB
    /// invalidate it needs: the whole expanded range if any entry was young on a format that
    /// flushes for young clearing (arm64's `contpte_clear_flush_young_ptes`), nothing
    /// otherwise (nothing young, or x86).
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index..index + nr` is empty or leaves the table; nothing
    /// is changed then.
    pub fn clear_flush_young_ptes(
        &self,
        index: usize,
        nr: usize,
    ) -> Result<FlushToken<F::Stage>, PteError> {
        let cleared = self.clear_young_in(self.young_range(index, nr)?);
        Ok(self.token_for(&cleared))
    }

    /// The per-entry flushing clear (the kernel's `ptep_clear_flush_young`).
    ///
    /// # Errors
    /// [`PteError::OutOfRange`] if `index` is outside the table.
    pub fn ptep_clear_flush_young(&self, index: usize) -> Result<FlushToken<F::Stage>, PteError> {
        self.clear_flush_young_ptes(index, 1)
    }

    /// The flush a clear needs.
    pub(crate) fn token_for(&self, cleared: &Cleared) -> FlushToken<F::Stage> {
        let flush = cleared.young && self.format().flushes_young();
        FlushToken::new(
            cleared.young,
            flush.then(|| self.flush_range_of(cleared.range.clone())),
        )
    }
}
