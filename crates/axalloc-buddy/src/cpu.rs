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

/// Where the per-CPU areas lie: CPU 0's area and the bytes from one CPU's to the next's,
/// fixed when the kernel is linked, read from `percpu` once (each read is a call) the first
/// time the per-CPU register is set, so that a page call then reads only the register.
#[derive(Debug, Default)]
pub(crate) struct PercpuAreas {
    #[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
    base: core::sync::atomic::AtomicUsize,
    /// 0 until read.
    #[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
    stride: core::sync::atomic::AtomicUsize,
}

impl PercpuAreas {
    /// The CPU this call runs on, below `cpus`; 0 where it cannot tell.
    #[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
    #[inline]
    pub(crate) fn this_cpu(&self, cpus: usize) -> usize {
        use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
        if cpus <= 1 {
            return 0;
        }
        let reg = percpu::read_percpu_reg();
        if reg == 0 {
            // Per-CPU data not set up yet (`percpu` 0.4 panics on a look-up then).
            return 0;
        }
        let mut stride = self.stride.load(Acquire);
        let base = if stride == 0 {
            let base = percpu::percpu_area_base(0);
            stride = percpu::percpu_area_base(1).wrapping_sub(base);
            if stride == 0 {
                return 0;
            }
            self.base.store(base, Relaxed);
            // Published after the base: whoever reads the stride reads this base.
            self.stride.store(stride, Release);
            base
        } else {
            self.base.load(Relaxed)
        };
        let id = reg.wrapping_sub(base) / stride;
        if id < cpus { id } else { 0 }
    }

    /// CPU 0: without a per-CPU register to read (a build outside a kernel, or without
    /// `percpu02`/`percpu04`), every call is CPU 0's (tests and embedders name CPUs with
    /// [`GlobalAllocator::with_cpu_id`](crate::GlobalAllocator::with_cpu_id)).
    #[cfg(not(all(target_os = "none", any(feature = "percpu02", feature = "percpu04"))))]
    #[inline]
    pub(crate) fn this_cpu(&self, _cpus: usize) -> usize {
        0
    }
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
