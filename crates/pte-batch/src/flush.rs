//! TLB invalidation as a value: the range a young clear or an unfold must invalidate, a
//! `#[must_use]` token carrying it to the caller, and the [`TlbFlush`] trait that performs it.
//! A range is an [`mm_types::PageRange`]: the pages' start address, count and size.
//!
//! Which TLB entries a range names depends on the stage of translation the table belongs to,
//! and the type says it: a [`Stage1`] range is virtual addresses (arm64 `TLBI VALE1IS`, x86
//! `INVLPG`), a [`Stage2`] range is a guest's physical addresses (arm64 `TLBI IPAS2E1IS`
//! then `VMALLE1IS`; x86 invalidates a whole EPT or NPT context). A stage-1 flusher cannot be
//! handed a stage-2 token.

use core::marker::PhantomData;
use mm_types::PageRange;

/// A stage of address translation: [`Stage1`] or [`Stage2`]. Sealed.
pub trait TranslationStage: sealed::Sealed + Copy + core::fmt::Debug + Default + 'static {
    /// 1 or 2.
    const NUMBER: u8;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Stage1 {}
    impl Sealed for super::Stage2 {}
}

/// The first stage: a process's or a guest kernel's tables, virtual to (intermediate)
/// physical; a flush range is virtual addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stage1;

/// The second stage: a hypervisor's tables for a guest (arm64 stage 2, Intel EPT, AMD NPT),
/// guest-physical (IPA, GPA) to host-physical; a flush range is guest-physical addresses,
/// carried in the range's address field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stage2;

impl TranslationStage for Stage1 {
    const NUMBER: u8 = 1;
}

impl TranslationStage for Stage2 {
    const NUMBER: u8 = 2;
}

/// Performs TLB invalidations of stage `S`: arch-arm64's EL1 `TLBI` (stage 1) or its EL2
/// `TLBI IPAS2E1IS` (stage 2) in a kernel, a counter in a model.
pub trait TlbFlush<S: TranslationStage = Stage1> {
    /// Invalidates every cached translation of `range` (and, at stage 2, every combined
    /// stage-1-and-2 translation that used it).
    fn flush_range(&mut self, range: PageRange);
}

/// The result of a flushing young clear: whether any entry was young and the one range the
/// caller must invalidate (none when nothing was young, or where the architecture does not
/// flush for young clearing), at stage `S`.
///
/// Dropping it unused is a compiler warning: a young entry may still be cached by the TLB,
/// and the MMU will not set its access flag again until the translation is refetched.
#[must_use = "hand the token to a TlbFlush (FlushToken::flush): the cleared entries may still be cached"]
#[derive(Debug, PartialEq, Eq)]
pub struct FlushToken<S: TranslationStage = Stage1> {
    young: bool,
    range: Option<PageRange>,
    stage: PhantomData<S>,
}

impl<S: TranslationStage> FlushToken<S> {
    pub(crate) const fn new(young: bool, range: Option<PageRange>) -> Self {
        Self {
            young,
            range,
            stage: PhantomData,
        }
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

    /// The stage of translation the range belongs to: 1 or 2.
    #[must_use]
    pub const fn stage(&self) -> u8 {
        S::NUMBER
    }

    /// Invalidates the range through `tlb` (nothing if there is none); returns [`young`](Self::young).
    pub fn flush(self, tlb: &mut impl TlbFlush<S>) -> bool {
        if let Some(range) = self.range {
            tlb.flush_range(range);
        }
        self.young
    }

    /// Drops the invalidation on purpose and returns [`young`](Self::young). Only right where
    /// something else invalidates the range later (a full flush, an ASID or VMID roll-over);
    /// the bare-metal example uses it as its negative control.
    #[must_use]
    pub const fn skip_flush(self) -> bool {
        self.young
    }
}

/// A [`TlbFlush`] that only counts, at either stage, for models and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountingFlush {
    /// Range invalidations performed.
    pub flushes: u64,
    /// Pages they covered.
    pub pages: u64,
}

impl<S: TranslationStage> TlbFlush<S> for CountingFlush {
    fn flush_range(&mut self, range: PageRange) {
        self.flushes += 1;
        self.pages += range.pages;
    }
}
