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
    /// Memory handed to devices for DMA.
    Dma,
    /// Pages held by a [`GlobalPage`](crate::GlobalPage).
    Global,
}

/// Bytes held per [`UsageKind`], as [`GlobalAllocator::usages`](crate::GlobalAllocator::usages)
/// reads them.
#[derive(Clone, Copy)]
pub struct Usages([usize; UsageKind::VARIANTS.len()]);

impl Usages {
    /// Nothing used.
    pub(crate) const fn new() -> Self {
        Self([0; UsageKind::VARIANTS.len()])
    }

    /// `bytes` more held for `kind` (saturating: a count that cannot overflow a `usize` of
    /// addresses).
    pub(crate) fn add(&mut self, kind: UsageKind, bytes: usize) {
        let n = &mut self.0[kind as usize];
        *n = n.saturating_add(bytes);
    }

    /// `bytes` fewer held for `kind` (saturating at zero: a free the accounting never saw
    /// does not wrap the count).
    pub(crate) fn sub(&mut self, kind: UsageKind, bytes: usize) {
        let n = &mut self.0[kind as usize];
        *n = n.saturating_sub(bytes);
    }

    /// The bytes held for `kind`.
    #[must_use]
    pub fn get(&self, kind: UsageKind) -> usize {
        self.0[kind as usize]
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
