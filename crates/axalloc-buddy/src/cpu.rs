//! Which CPU a call runs on, so that each CPU allocates from its own per-cpu page lists.
//!
//! ArceOS keeps each CPU's per-CPU data area at `base + id * stride` and its address in a
//! register (`GS_BASE` on x86_64, `TPIDR_EL1` on arm64), which the `percpu` crate reads.
//! The CPU id follows from the two. Before the register is set up (or on a single-CPU build,
//! where the areas collapse to one), the answer is CPU 0. A wrong answer costs speed, not
//! correctness: every CPU's lists are behind their own lock.

/// The CPU this call runs on, below `cpus`; 0 where it cannot tell.
#[cfg(target_os = "none")]
pub(crate) fn this_cpu(cpus: usize) -> usize {
    let base = percpu::percpu_area_base(0);
    let stride = percpu::percpu_area_base(1).wrapping_sub(base);
    if stride == 0 {
        return 0;
    }
    let id = percpu::read_percpu_reg().wrapping_sub(base) / stride;
    if id < cpus { id } else { 0 }
}

/// The CPU this call runs on: outside a kernel build there is no per-CPU register to read,
/// so CPU 0 (tests name CPUs with [`GlobalAllocator::with_cpu_id`](crate::GlobalAllocator::with_cpu_id)).
#[cfg(not(target_os = "none"))]
pub(crate) fn this_cpu(_cpus: usize) -> usize {
    0
}
