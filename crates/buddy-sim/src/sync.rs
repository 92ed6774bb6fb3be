//! What crosses CPUs: atomics and locks. loom's under `cfg(loom)`, so the model checker sees
//! every access (tokio's `src/loom` shim); `core`'s atomics and `lock_api` locks otherwise.
//!
//! A `lock_api::RawMutex` needs a `const INIT`, which loom's atomics cannot give, so under
//! loom the lock is `loom::sync::Mutex` and the zone's lock type parameter is only carried.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use core::ops::DerefMut;
use lock_api::RawMutex;

/// A lock owning `T`, over the raw lock `R` the embedder chose.
pub(crate) struct Mutex<R, T> {
    #[cfg(not(loom))]
    inner: lock_api::Mutex<R, T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
    #[cfg(loom)]
    _raw: core::marker::PhantomData<R>,
}

impl<R: RawMutex, T> Mutex<R, T> {
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        Self {
            inner: lock_api::Mutex::new(value),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Self {
            inner: loom::sync::Mutex::new(value),
            _raw: core::marker::PhantomData,
        }
    }

    /// Takes the lock (spinning or blocking as `R` does) until the guard drops.
    pub(crate) fn lock(&self) -> impl DerefMut<Target = T> + '_ {
        #[cfg(not(loom))]
        return self.inner.lock();
        #[cfg(loom)]
        return self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}
