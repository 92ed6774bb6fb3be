//! The entries a table is made of. The public entry type is always core's `AtomicU64`; the
//! table is generic over [`Entry`] so that the loom models (`cfg(loom)`) can build tables of
//! loom's atomics, which the model checker sees, without the public type changing with the
//! cfg. `Entry` is sealed: core's `AtomicU64` (and loom's, under `cfg(loom)`) are the only
//! implementations.

use core::sync::atomic::Ordering;

/// One page-table entry as the table accesses it: every access is `Relaxed` (the MMU updates
/// entries with its own atomics; publication to other CPUs is the TLB flush's business).
pub trait Entry: sealed::Sealed + Sync {
    /// The entry's value.
    fn load(&self) -> u64;
    /// Writes `value`.
    fn store(&self, value: u64);
    /// Writes `value`, returning the value before.
    fn swap(&self, value: u64) -> u64;
    /// Replaces `current` with `new` if the entry still holds `current`; may fail spuriously.
    ///
    /// # Errors
    /// The value found instead of `current` (or `current` itself on a spurious failure).
    fn compare_exchange_weak(&self, current: u64, new: u64) -> Result<u64, u64>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for core::sync::atomic::AtomicU64 {}
    #[cfg(loom)]
    impl Sealed for loom::sync::atomic::AtomicU64 {}
}

// `#[inline]`: these are non-generic, so without it callers in other crates (which
// instantiate the generic table code) could not inline them (41% more instructions per aging
// pass, measured with callgrind).
macro_rules! entry {
    ($atomic:ty) => {
        impl Entry for $atomic {
            #[inline]
            fn load(&self) -> u64 {
                <$atomic>::load(self, Ordering::Relaxed)
            }
            #[inline]
            fn store(&self, value: u64) {
                <$atomic>::store(self, value, Ordering::Relaxed);
            }
            #[inline]
            fn swap(&self, value: u64) -> u64 {
                <$atomic>::swap(self, value, Ordering::Relaxed)
            }
            #[inline]
            fn compare_exchange_weak(&self, current: u64, new: u64) -> Result<u64, u64> {
                <$atomic>::compare_exchange_weak(
                    self,
                    current,
                    new,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
            }
        }
    };
}

entry!(core::sync::atomic::AtomicU64);
#[cfg(loom)]
entry!(loom::sync::atomic::AtomicU64);
