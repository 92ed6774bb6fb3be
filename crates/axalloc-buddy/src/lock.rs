//! The allocator's lock: a spin lock taken with interrupts and preemption off on the CPU
//! that holds it.
//!
//! Not `kspin::SpinNoIrq`: without its `smp` feature it only masks interrupts, and whether
//! that feature is on is decided by the kernel's build for *its* `kspin` version, which need
//! not be this crate's (ArceOS's main line uses kspin 0.2, its 0.3.0-preview crates 0.1). A
//! heap lock that does not lock on an SMP kernel corrupts the heap; this one always locks.

use core::ops::{Deref, DerefMut};
use spin::{Mutex, MutexGuard};

pub(crate) use irq_off::IrqOff;

/// What the locks hold while they are held: `kernel_guard`'s guard, which masks interrupts
/// and preemption on a bare-metal target (`target_os = "none"`) and is a no-op on any
/// other.
#[cfg(not(all(feature = "std-compat", target_env = "musl", not(miri))))]
mod irq_off {
    pub(crate) use kernel_guard::NoPreemptIrqSave as IrqOff;
}

/// What the locks hold while they are held, in a kernel built for a target that names an
/// OS interface (feature `std-compat`: ArceOS's `std-compat`, as AxVisor builds it for
/// `target_os = "linux"`, `target_env = "musl"`), where `kernel_guard`'s guards are no-ops:
/// the CPU's interrupts masked by the instructions themselves (DAIF.I on aarch64, RFLAGS.IF
/// on x86_64), which also keeps the timer from preempting the holder. Without it a task
/// preempted while it held the heap's lock left another, spinning for it with preemption
/// off, spinning for good (AxVisor's boot hung in about one boot in ten).
#[cfg(all(feature = "std-compat", target_env = "musl", not(miri)))]
mod irq_off {
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    compile_error!("feature std-compat masks interrupts on aarch64 and x86_64 only");

    /// Interrupts masked on this CPU until it drops (not `Send`: it drops where it was
    /// made).
    pub(crate) struct IrqOff(usize, core::marker::PhantomData<*const ()>);

    impl IrqOff {
        /// Masks interrupts on this CPU, keeping what to restore.
        #[inline(always)]
        pub(crate) fn new() -> Self {
            let state: usize;
            // SAFETY: reading the interrupt mask and masking interrupts touch no memory of
            // the program's: what they change is whether this CPU takes interrupts until the
            // guard drops. (Outside a kernel, at EL0 or in ring 3, the CPU refuses them with
            // a fault that ends the process: the feature is for kernels only.)
            #[cfg(target_arch = "aarch64")]
            unsafe {
                core::arch::asm!("mrs {0}, daif", "msr daifset, #2", out(reg) state, options(nostack));
            }
            // SAFETY: as above (the flags pushed are popped at once).
            #[cfg(target_arch = "x86_64")]
            unsafe {
                core::arch::asm!("pushfq", "pop {0}", "cli", out(reg) state);
            }
            Self(state, core::marker::PhantomData)
        }
    }

    impl Drop for IrqOff {
        #[inline(always)]
        fn drop(&mut self) {
            // SAFETY: restores the interrupt mask `new` read on this CPU; no memory of the
            // program's is touched.
            #[cfg(target_arch = "aarch64")]
            unsafe {
                core::arch::asm!("msr daif, {0}", in(reg) self.0, options(nostack));
            }
            // Interrupts come back only if they were on (RFLAGS.IF, bit 9).
            #[cfg(target_arch = "x86_64")]
            if self.0 & (1 << 9) != 0 {
                // SAFETY: as above.
                unsafe { core::arch::asm!("sti", options(nostack)) };
            }
        }
    }
}

/// `T` behind a spin lock held with interrupts and preemption off.
pub(crate) struct IrqSpin<T>(Mutex<T>);

/// The lock held: `T` reachable, interrupts and preemption off until it drops.
pub(crate) struct IrqSpinGuard<'a, T> {
    // Fields drop in order: the lock is released before interrupts come back.
    data: MutexGuard<'a, T>,
    _irq: IrqOff,
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
        Self::lock_masked(IrqOff::new(), |_| self)
    }

    /// Spins for the lock `which` picks with interrupts and preemption already off (`irq`,
    /// which `which` is shown): `which` runs on the CPU that takes the lock (the choice of a
    /// per-CPU lock by CPU id).
    #[inline(always)]
    pub(crate) fn lock_masked<'a>(
        irq: IrqOff,
        which: impl FnOnce(&IrqOff) -> &'a Self,
    ) -> IrqSpinGuard<'a, T> {
        let lock = &which(&irq).0;
        // One attempt inline, the spin out of the way: an uncontended lock (a CPU's own
        // slot, nearly always) costs the compare-and-swap and a branch not taken.
        let data = match lock.try_lock() {
            Some(data) => data,
            None => Self::spin(lock),
        };
        IrqSpinGuard { data, _irq: irq }
    }

    /// [`IrqSpin::lock_masked`] past a first attempt that found the lock held.
    #[cold]
    #[inline(never)]
    fn spin(lock: &Mutex<T>) -> MutexGuard<'_, T> {
        lock.lock()
    }
}

/// Locks every one of `locks`, in order, with interrupts and preemption off throughout; runs
/// `f` on the value of the one at the index `at` gives (called with them off, shown the
/// guard that keeps them off; the last, past the end); unlocks them in
/// reverse order. `None` if there are no locks. A caller that holds one of these locks
/// must not call it (it would wait for itself); one that holds none cannot deadlock with
/// callers that take one lock each.
pub(crate) fn with_all<T, R>(
    locks: &[IrqSpin<T>],
    at: impl FnOnce(&IrqOff) -> usize,
    f: impl FnOnce(&mut T) -> R,
) -> Option<R> {
    let irq = IrqOff::new();
    let at = at(&irq).min(locks.len().checked_sub(1)?);
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
