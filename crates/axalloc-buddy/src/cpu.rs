//! Which CPU a call runs on, so that each CPU allocates from its own per-cpu page lists.
//!
//! ArceOS keeps each CPU's per-CPU data area at `base + id * stride` and its address in a
//! register (`GS_BASE` on x86_64, `TPIDR_EL1` on arm64), which the `percpu` crate reads
//! (feature `percpu02` or `percpu04`, the major the kernel uses). The CPU id follows from the
//! two, worked out once per CPU and kept in a per-CPU variable of this crate's, which later
//! calls read as Linux reads `smp_processor_id()` (x86_64's register is read with `rdmsr`
//! outside Linux targets, tens of cycles, and the id then takes a division). Before the
//! register is set up (it reads 0), on a single-CPU build (where the areas collapse to one)
//! or without either feature, the answer is CPU 0. A wrong answer costs speed, not
//! correctness: every CPU's lists are behind their own lock.

use crate::lock::IrqOff;

#[cfg(all(target_os = "none", feature = "percpu04"))]
use percpu04 as percpu;

#[cfg(all(target_os = "none", feature = "percpu02", not(feature = "percpu04")))]
use percpu02 as percpu;

/// This CPU's index, once a call on it has worked it out from the per-CPU register
/// ([`cpu_from_register`]); `usize::MAX` until then (ArceOS copies this value into every
/// CPU's per-CPU area). Read with one `gs`-relative load on x86_64 (two instructions on
/// arm64), where the register's own answer costs an `rdmsr` (x86_64) and a division.
#[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
#[percpu::def_percpu]
static AXALLOC_BUDDY_CPU: usize = usize::MAX;

/// The CPU this call runs on, below `cpus`; 0 where it cannot tell. Asked only with more
/// than one CPU (the slot look-up answers one CPU without reading anything), with
/// interrupts and preemption off (`_irq`, held until the caller has the CPU's lock), on a
/// CPU whose per-CPU register is set (the promise of
/// [`GlobalAllocator::try_init`](crate::GlobalAllocator::try_init)'s caller).
#[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
#[inline(always)]
pub(crate) fn this_cpu(cpus: usize, _irq: &IrqOff) -> usize {
    // SAFETY: interrupts and preemption are off (`_irq`): the task stays on this CPU between
    // this read and the use of its answer.
    let known = unsafe { AXALLOC_BUDDY_CPU.read_current_raw() };
    if known < cpus {
        return known;
    }
    // SAFETY: interrupts and preemption are off (`_irq`).
    unsafe { cpu_from_register(cpus) }
}

/// [`this_cpu`] on a CPU's first call: its index from the per-CPU register (the area's base
/// less CPU 0's, over the areas' stride), kept in [`AXALLOC_BUDDY_CPU`] for the next calls
/// once the register is set.
///
/// # Safety
/// Interrupts and preemption are off on this CPU (the task stays on it until it returns).
/// (Not shown an `IrqOff`: a reference to it would keep the guard in memory on the fast
/// path, a store a call. Inlined: as a call, the callers kept their state on the stack for
/// it, two instructions more on every page free.)
#[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
#[inline(always)]
unsafe fn cpu_from_register(cpus: usize) -> usize {
    let reg = percpu::read_percpu_reg();
    if reg == 0 {
        // Per-CPU data not set up yet (`percpu` 0.4 panics on a look-up then).
        return 0;
    }
    let base = percpu::percpu_area_base(0);
    let stride = percpu::percpu_area_base(1).wrapping_sub(base);
    if stride == 0 {
        return 0;
    }
    let id = reg.wrapping_sub(base) / stride;
    if id >= cpus {
        return 0;
    }
    // SAFETY: interrupts and preemption are off (the caller's promise), and the register is
    // set (not 0): the write goes to this CPU's own area, which no other CPU writes.
    unsafe { AXALLOC_BUDDY_CPU.write_current_raw(id) };
    id
}

/// The CPU this call runs on: without a per-CPU register to read (a build outside a kernel,
/// or without `percpu02`/`percpu04`), CPU 0 (tests and embedders name CPUs with
/// [`GlobalAllocator::with_cpu_id`](crate::GlobalAllocator::with_cpu_id)).
#[cfg(not(all(target_os = "none", any(feature = "percpu02", feature = "percpu04"))))]
pub(crate) fn this_cpu(_cpus: usize, _irq: &IrqOff) -> usize {
    0
}

/// The CPUs ArceOS reserves per-CPU data for (its `MAX_CPU_NUM`).
#[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
pub(crate) fn cpu_count() -> usize {
    percpu::percpu_area_num().max(1)
}

/// One CPU without a per-CPU register to read
/// ([`GlobalAllocator::try_init_for_cpus`](crate::GlobalAllocator::try_init_for_cpus) names
/// more).
#[cfg(not(all(target_os = "none", any(feature = "percpu02", feature = "percpu04"))))]
pub(crate) fn cpu_count() -> usize {
    1
}
