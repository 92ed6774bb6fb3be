//! The allocator's lock: a spin lock taken with interrupts and preemption off on the CPU
//! that holds it.
//!
//! Not `kspin::SpinNoIrq`: without its `smp` feature it only masks interrupts, and whether
//! that feature is on is decided by the kernel's build for *its* `kspin` version, which need
//! not be this crate's (ArceOS's main line uses kspin 0.2, its 0.3.0-preview crates 0.1). A
//! heap lock that does not lock on an SMP kernel corrupts the heap; this one always locks.

use core::ops::{Deref, DerefMut};
use kernel_guard::NoPreemptIrqSave;
use spin::{Mutex, MutexGuard};

/// `T` behind a spin lock held with interrupts and preemption off.
pub(crate) struct IrqSpin<T>(Mutex<T>);

/// The lock held: `T` reachable, interrupts and preemption off until it drops.
pub(crate) struct IrqSpinGuard<'a, T> {
    // Fields drop in order: the lock is released before interrupts come back.
    data: MutexGuard<'a, T>,
    _irq: NoPreemptIrqSave,
}

impl<T> IrqSpin<T> {
    /// `value`, unlocked.
    pub(crate) const fn new(value: T) -> Self {
        Self(Mutex::new(value))
    }

    /// Masks interrupts and preemption on this CPU, then spins for the lock: an interrupt
    /// handler on this CPU can then never wait for a lock this CPU holds.
    #[inline(always)]
    pub(crate) fn lock(&self) -> IrqSpinGuard<'_, T> {
        Self::lock_masked(NoPreemptIrqSave::new(), || self)
    }

    /// Spins for the lock `which` picks with interrupts and preemption already off (`irq`):
    /// `which` runs on the CPU that takes the lock (the choice of a per-CPU lock by CPU id).
    #[inline(always)]
    pub(crate) fn lock_masked<'a>(
        irq: NoPreemptIrqSave,
        which: impl FnOnce() -> &'a Self,
    ) -> IrqSpinGuard<'a, T> {
        IrqSpinGuard {
            data: which().0.lock(),
            _irq: irq,
        }
    }
}

/// Locks every one of `locks`, in order, with interrupts and preemption off throughout; runs
/// `f` on the value of the one at the index `at` gives (called with them off; the last, past
/// the end); unlocks them in
/// reverse order. `None` if there are no locks. A caller that holds one of these locks
/// must not call it (it would wait for itself); one that holds none cannot deadlock with
/// callers that take one lock each.
pub(crate) fn with_all<T, R>(
    locks: &[IrqSpin<T>],
    at: impl FnOnce() -> usize,
    f: impl FnOnce(&mut T) -> R,
) -> Option<R> {
    let _irq = NoPreemptIrqSave::new();
    let at = at().min(locks.len().checked_sub(1)?);
    let mut target = None;
    for (i, lock) in locks.iter().enumerate() {
        let data = MutexGuard::leak(lock.0.lock());
        if i == at {
            target = Some(data);
        }
    }
    let r = target.map(f);
    for lock in locks.iter().rev() {
        // SAFETY: this call locked it above and leaked its guard; the one reference that
        // guard gave (to `f`) is dead now that `f` returned.
        unsafe { lock.0.force_unlock() };
    }
    r
}

impl<T> Deref for IrqSpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T> DerefMut for IrqSpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.data
    }
}
