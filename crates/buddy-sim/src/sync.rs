//! What crosses CPUs: atomics and locks. loom's under `cfg(loom)`, so the model checker sees
//! every access (tokio's `src/loom` shim); `core`'s atomics and `lock_api` locks otherwise.
//!
//! A `lock_api::RawMutex` needs a `const INIT`, which loom's atomics cannot give, so under
//! loom the lock is `loom::sync::Mutex` and the zone's lock type parameter is only carried.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// A busy-wait step: `core::hint::spin_loop`, or a yield to the model checker under loom.
#[cfg(not(loom))]
pub(crate) use core::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;

use core::ops::{Deref, DerefMut};
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

/// Access to a [`Mutex`]'s value: through its lock, or (CPU-local lists in a release build)
/// without one.
pub(crate) enum Guard<'a, R: RawMutex, T> {
    #[cfg(not(loom))]
    Locked(lock_api::MutexGuard<'a, R, T>),
    #[cfg(loom)]
    Locked(loom::sync::MutexGuard<'a, T>, core::marker::PhantomData<R>),
    #[cfg(all(not(loom), not(debug_assertions)))]
    Unlocked(&'a mut T),
}

impl<R: RawMutex, T> Deref for Guard<'_, R, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        match self {
            #[cfg(not(loom))]
            Self::Locked(g) => g,
            #[cfg(loom)]
            Self::Locked(g, _) => g,
            #[cfg(all(not(loom), not(debug_assertions)))]
            Self::Unlocked(v) => v,
        }
    }
}

impl<R: RawMutex, T> DerefMut for Guard<'_, R, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        match self {
            #[cfg(not(loom))]
            Self::Locked(g) => g,
            #[cfg(loom)]
            Self::Locked(g, _) => g,
            #[cfg(all(not(loom), not(debug_assertions)))]
            Self::Unlocked(v) => v,
        }
    }
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
    #[inline]
    pub(crate) fn lock(&self) -> Guard<'_, R, T> {
        #[cfg(not(loom))]
        return Guard::Locked(self.inner.lock());
        #[cfg(loom)]
        return Guard::Locked(
            self.inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            core::marker::PhantomData,
        );
    }

    /// Takes the lock if it is free now.
    #[inline]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn try_lock(&self) -> Option<Guard<'_, R, T>> {
        #[cfg(not(loom))]
        return self.inner.try_lock().map(Guard::Locked);
        #[cfg(loom)]
        return self
            .inner
            .try_lock()
            .ok()
            .map(|g| Guard::Locked(g, core::marker::PhantomData));
    }

    /// The value without taking the lock: no atomic instruction in a release build. Debug
    /// builds and loom models take the lock with `try_lock` instead and panic when another
    /// context holds it, so that a broken contract shows.
    ///
    /// # Safety
    /// Nobody else accesses the value (locked or not) until the guard drops.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn lock_exclusive(&self) -> Guard<'_, R, T> {
        #[cfg(all(not(loom), not(debug_assertions)))]
        // SAFETY: the caller guarantees exclusive access for the guard's lifetime, which
        // borrows `self`.
        return Guard::Unlocked(unsafe { &mut *self.inner.data_ptr() });
        #[cfg(all(not(loom), debug_assertions))]
        return match self.inner.try_lock() {
            Some(g) => Guard::Locked(g),
            None => contract_broken(),
        };
        #[cfg(loom)]
        return match self.inner.try_lock() {
            Ok(g) => Guard::Locked(g, core::marker::PhantomData),
            Err(_) => contract_broken(),
        };
    }
}

#[cfg(any(loom, debug_assertions))]
#[cold]
fn contract_broken() -> ! {
    panic!(
        "two contexts used one CPU's per-cpu lists at once: the contract of \
         Zone::local_cpu is broken"
    )
}

/// The raw lock a [`Zone`](crate::Zone) and its [`PerCpu`](crate::PerCpu) lists use unless told otherwise: `spin`'s
/// spinning mutex (feature `spin`, on by default). A kernel that takes the allocator from
/// interrupt context names its own IRQ-safe [`lock_api::RawMutex`] instead.
#[cfg(feature = "spin")]
pub type DefaultRawMutex = spin::Mutex<()>;

/// Without the `spin` feature there is no default lock: this type implements no
/// [`lock_api::RawMutex`], so a zone must name its lock type.
#[cfg(not(feature = "spin"))]
#[derive(Debug)]
pub enum DefaultRawMutex {}

/// `T` on cache lines of its own: aligned to, and padded out to, 128 bytes (two 64-byte
/// lines, as adjacent-line prefetchers fetch them), so that a lock another CPU spins on
/// or writes through shares no line with data read without it.
#[repr(align(128))]
pub(crate) struct OwnLines<T>(pub(crate) T);

impl<T> Deref for OwnLines<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}
