//! Which CPU a call runs on, so that each CPU allocates from its own per-cpu page lists.
//!
//! ArceOS keeps each CPU's per-CPU data area at `base + id * stride` and its address in a
//! register (`GS_BASE` on x86_64, `TPIDR_EL1` on arm64), which the `percpu` crate reads
//! (feature `percpu02` or `percpu04`, the major the kernel uses). The CPU id follows from the
//! two. Before the register is set up (it reads 0), on a single-CPU build (where the areas
//! collapse to one) or without either feature, the answer is CPU 0. A wrong answer costs
//! speed, not correctness: every CPU's lists are behind their own lock.

#[cfg(all(target_os = "none", feature = "percpu04"))]
use percpu04 as percpu;

#[cfg(all(target_os = "none", feature = "percpu02", not(feature = "percpu04")))]
use percpu02 as percpu;

/// The CPU this call runs on, below `cpus`; 0 where it cannot tell. Asked only with more
/// than one CPU (the slot look-up answers one CPU without reading the register, which on
/// x86_64 `percpu` reads with `rdmsr`).
#[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
#[inline(always)]
pub(crate) fn this_cpu(cpus: usize) -> usize {
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
    if id < cpus { id } else { 0 }
}

/// The CPU this call runs on: without a per-CPU register to read (a build outside a kernel,
/// or without `percpu02`/`percpu04`), CPU 0 (tests and embedders name CPUs with
/// [`GlobalAllocator::with_cpu_id`](crate::GlobalAllocator::with_cpu_id)).
#[cfg(not(all(target_os = "none", any(feature = "percpu02", feature = "percpu04"))))]
pub(crate) fn this_cpu(_cpus: usize) -> usize {
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
