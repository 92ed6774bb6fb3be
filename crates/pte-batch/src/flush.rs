//! TLB invalidation as a value: the range a young clear or an unfold must invalidate, a
//! `#[must_use]` token carrying it to the caller, and the [`TlbFlush`] trait that performs it.
//! A range is an [`mm_types::PageRange`]: the pages' start address, count and size.

use mm_types::PageRange;

/// Performs TLB invalidations: arch-arm64's EL1 `TLBI` in a kernel, a counter in a model.
pub trait TlbFlush {
    /// Invalidates every cached translation of `range`.
    fn flush_range(&mut self, range: PageRange);
}

/// The result of a flushing young clear: whether any entry was young and the one range the
/// caller must invalidate (none when nothing was young, or on x86, which never flushes for
/// young clearing).
///
/// Dropping it unused is a compiler warning: a young entry may still be cached by the TLB,
/// and the MMU will not set its access flag again until the translation is refetched.
#[must_use = "hand the token to a TlbFlush (FlushToken::flush): the cleared entries may still be cached"]
#[derive(Debug, PartialEq, Eq)]
pub struct FlushToken {
    young: bool,
    range: Option<PageRange>,
}

impl FlushToken {
    pub(crate) const fn new(young: bool, range: Option<PageRange>) -> Self {
        Self { young, range }
    }

    /// Whether any entry of the expanded range was young.
    #[must_use]
    pub const fn young(&self) -> bool {
        self.young
    }

    /// The range to invalidate, if any.
    #[must_use]
    pub const fn range(&self) -> Option<PageRange> {
        self.range
    }

    /// Invalidates the range through `tlb` (nothing if there is none); returns [`young`](Self::young).
    pub fn flush(self, tlb: &mut impl TlbFlush) -> bool {
        if let Some(range) = self.range {
            tlb.flush_range(range);
        }
        self.young
    }

    /// Drops the invalidation on purpose and returns [`young`](Self::young). Only right where
    /// something else invalidates the range later (a full flush, an ASID roll-over); the
    /// bare-metal example uses it as its negative control.
    #[must_use]
    pub const fn skip_flush(self) -> bool {
        self.young
    }
}

/// A [`TlbFlush`] that only counts, for models and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountingFlush {
    /// Range invalidations performed.
    pub flushes: u64,
    /// Pages they covered.
    pub pages: u64,
}

impl TlbFlush for CountingFlush {
    fn flush_range(&mut self, range: PageRange) {
        self.flushes += 1;
        self.pages += range.pages;
    }
}
