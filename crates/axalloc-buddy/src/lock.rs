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
    pub(crate) fn lock(&self) -> IrqSpinGuard<'_, T> {
        let irq = NoPreemptIrqSave::new();
        IrqSpinGuard {
            data: self.0.lock(),
            _irq: irq,
        }
    }
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
