//! What memory is used for: ArceOS's accounting of pages and heap bytes by kind.

use core::fmt;
use strum::{IntoStaticStr, VariantArray};

/// What an allocation is for (ArceOS's `UsageKind`): every page allocation names one, and
/// [`Usages`] counts the bytes held per kind.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, VariantArray, IntoStaticStr)]
pub enum UsageKind {
    /// The kernel's Rust heap (the byte allocator's memory).
    RustHeap,
    /// Virtual memory, most often a user address space's pages.
    VirtMem,
    /// A file system's page cache.
    PageCache,
    /// Page-table pages.
    PageTable,
    /// Kernel task stacks.
    TaskStack,
    /// Memory handed to devices for DMA.
    Dma,
    /// Pages held by a [`GlobalPage`](crate::GlobalPage).
    Global,
}

/// The bytes a wrapping sum of counts says are held: the sum taken as a signed number, 0
/// below zero (a count caught between two CPUs' changes, or a free the accounting never
/// saw).
pub(crate) fn held(sum: usize) -> usize {
    if sum.cast_signed() < 0 { 0 } else { sum }
}

/// Bytes held per [`UsageKind`], as [`GlobalAllocator::usages`](crate::GlobalAllocator::usages)
/// reads them.
#[derive(Clone, Copy)]
pub struct Usages([usize; UsageKind::VARIANTS.len()]);

impl Usages {
    /// The bytes held per kind that the per-CPU `counts` add up to (each kind's sum taken
    /// as a signed number: a run allocated on one CPU and freed on another leaves +n on the
    /// first and -n on the second; a sum below zero, which only a free the accounting never
    /// saw could make, reads 0).
    pub(crate) fn summing(counts: impl IntoIterator<Item = UsageCounts>) -> Self {
        let mut sum = [0usize; UsageKind::VARIANTS.len()];
        for c in counts {
            for (s, n) in sum.iter_mut().zip(c.0) {
                *s = s.wrapping_add(n);
            }
        }
        Self(sum.map(held))
    }

    /// The bytes held per kind, `bytes[kind as usize]`.
    #[cfg(feature = "page-owner")]
    pub(crate) fn from_bytes(bytes: [usize; UsageKind::VARIANTS.len()]) -> Self {
        Self(bytes)
    }

    /// The bytes held for `kind`.
    #[must_use]
    pub fn get(&self, kind: UsageKind) -> usize {
        self.0[kind as usize]
    }
}

/// One CPU's change of the bytes held per [`UsageKind`], kept under that CPU's lock: the
/// page calls count without a lock of their own (Linux's per-CPU `vmstat` differentials).
/// Each count wraps: only the sum over every CPU is meaningful ([`Usages::summing`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UsageCounts([usize; UsageKind::VARIANTS.len()]);

impl UsageCounts {
    /// No change.
    pub(crate) const fn new() -> Self {
        Self([0; UsageKind::VARIANTS.len()])
    }

    /// The change for `kind`.
    pub(crate) fn get(&self, kind: UsageKind) -> usize {
        self.0[kind as usize]
    }

    /// The same counts with `kind`'s at zero.
    pub(crate) fn without(mut self, kind: UsageKind) -> Self {
        self.0[kind as usize] = 0;
        self
    }

    /// These counts and `other`'s, kind by kind.
    pub(crate) fn plus(mut self, other: Self) -> Self {
        for (n, m) in self.0.iter_mut().zip(other.0) {
            *n = n.wrapping_add(m);
        }
        self
    }

    /// `bytes` more held for `kind`.
    #[inline]
    pub(crate) fn add(&mut self, kind: UsageKind, bytes: usize) {
        let n = &mut self.0[kind as usize];
        *n = n.wrapping_add(bytes);
    }

    /// `bytes` fewer held for `kind`.
    #[inline]
    pub(crate) fn sub(&mut self, kind: UsageKind, bytes: usize) {
        let n = &mut self.0[kind as usize];
        *n = n.wrapping_sub(bytes);
    }
}

impl fmt::Debug for Usages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Usages");
        for &kind in UsageKind::VARIANTS {
            d.field(kind.into(), &self.get(kind));
        }
        d.finish()
    }
}
