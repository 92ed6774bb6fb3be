//! Which CPU a call runs on, so that each CPU allocates from its own per-cpu page lists.
//!
//! The allocator asks a [`CpuId`], a type parameter of
//! [`GlobalAllocator`](crate::GlobalAllocator): its answer inlines into the page path (no
//! call through a pointer, which kept the path's state in callee-saved registers, 20-24
//! instructions a call). The default, [`PerCpuRegister`], reads ArceOS's per-CPU data.
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

use core::marker::PhantomData;

use crate::lock::IrqOff;
use crate::magazine::ExclusiveCpu;

/// Proof that interrupts and preemption are off on the CPU that holds it, for as long as it
/// lives, in a kernel build: the task cannot move to another CPU, and no interrupt handler
/// runs on this one. A kernel build is one for `target_os = "none"` (`kernel_guard` masks
/// them) or, with the feature `std-compat`, for a musl target (the allocator masks them
/// itself). Elsewhere (a program under an OS, as the tests are) it proves nothing: the
/// thread may move between CPUs at any time. Only this crate makes one, around its call to
/// [`CpuId::cpu_id`]: code outside it cannot claim interrupts are off.
///
/// ```compile_fail,E0451
/// let pinned = axalloc_buddy::Pinned { _irq: core::marker::PhantomData };
/// ```
pub struct Pinned<'a> {
    /// Borrowed from the guard that keeps them off; neither `Send` nor `Sync`.
    _irq: PhantomData<(&'a (), *const ())>,
}

impl<'a> Pinned<'a> {
    /// The proof `irq` gives while it is borrowed.
    #[inline(always)]
    pub(crate) fn new(_irq: &'a IrqOff) -> Self {
        Self { _irq: PhantomData }
    }
}

/// Which CPU a call runs on: the answer picks that CPU's page lists and slabs.
///
/// A wrong answer costs speed, not correctness: every CPU's lists are behind their own
/// lock, and an answer at or past the allocator's CPU count picks CPU 0's. It is a type (a
/// unit struct, a function item, a closure without state or a function pointer), copied
/// into each zone, so that a kernel's answer inlines into the page path (a function
/// pointer's is a call through it).
///
/// ```
/// use axalloc_buddy::{CpuId, GlobalAllocator, Pinned};
///
/// /// The CPU from the kernel's own per-CPU data (here: one CPU).
/// #[derive(Clone, Copy)]
/// struct KernelCpu;
///
/// impl CpuId for KernelCpu {
///     #[inline(always)]
///     fn cpu_id(&self, _pinned: &Pinned<'_>) -> usize {
///         0
///     }
/// }
///
/// static ALLOCATOR: GlobalAllocator<KernelCpu> = GlobalAllocator::with_cpu_id(KernelCpu);
/// assert_eq!(ALLOCATOR.region_count(), 0);
/// ```
pub trait CpuId: Copy + 'static {
    /// The index of the CPU this call runs on, below the allocator's CPU count; asked with
    /// interrupts and preemption off (`pinned`), so the answer stays true until the call
    /// holds that CPU's lock.
    fn cpu_id(&self, pinned: &Pinned<'_>) -> usize;

    /// The CPU this call runs on as one it runs on alone ([`ExclusiveCpu`], made under
    /// `unsafe`), where the implementation can promise that: a page call then takes a
    /// block from that CPU's magazine, and frees one into it, with no lock and no atomic
    /// read-modify-write (past an empty or a full magazine, the call takes the CPU's lists
    /// under its lock; while the zone debugs, with page_owner say, the magazines give their
    /// blocks back and stay empty). `None`, the default: every page call takes its CPU's
    /// lock.
    /// Asked with interrupts and preemption off (`pinned`) before [`CpuId::cpu_id`]; an id
    /// at or past the allocator's CPU count takes the locked path.
    #[inline(always)]
    fn exclusive_cpu<'a>(&self, pinned: &'a Pinned<'_>) -> Option<ExclusiveCpu<'a>> {
        let _ = pinned;
        None
    }
}

/// A function (item, pointer or closure without state) that answers the CPU id.
impl<F: Fn() -> usize + Copy + 'static> CpuId for F {
    #[inline(always)]
    fn cpu_id(&self, _pinned: &Pinned<'_>) -> usize {
        self()
    }
}

/// The CPU from ArceOS's per-CPU data register (features `percpu02`, `percpu04`, in a
/// kernel build); CPU 0 where there is none to read: the default [`CpuId`] of
/// [`GlobalAllocator`](crate::GlobalAllocator).
#[derive(Clone, Copy, Debug, Default)]
pub struct PerCpuRegister;

impl CpuId for PerCpuRegister {
    #[inline(always)]
    fn cpu_id(&self, pinned: &Pinned<'_>) -> usize {
        this_cpu(pinned)
    }

    /// In a kernel build, the CPU's own index from its per-CPU register: interrupts and
    /// preemption are off for the whole call (`pinned`), and no other CPU has that index.
    /// `None` where the register cannot tell (not set up yet, or no register to read).
    #[inline(always)]
    fn exclusive_cpu<'a>(&self, pinned: &'a Pinned<'_>) -> Option<ExclusiveCpu<'a>> {
        exclusive_cpu(pinned)
    }
}

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

/// The CPU this call runs on, below the CPUs ArceOS has per-CPU data for; 0 where it
/// cannot tell. Asked only with more than one CPU (the slot look-up answers one CPU
/// without reading anything), with interrupts and preemption off (`_pinned`, held until
/// the caller has the CPU's lock), on a CPU whose per-CPU register is set (the promise of
/// [`GlobalAllocator::try_init`](crate::GlobalAllocator::try_init)'s caller).
#[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
#[inline(always)]
fn this_cpu(_pinned: &Pinned<'_>) -> usize {
    // SAFETY: interrupts and preemption are off (`_pinned`): the task stays on this CPU
    // between this read and the use of its answer.
    let known = unsafe { AXALLOC_BUDDY_CPU.read_current_raw() };
    if known != usize::MAX {
        return known;
    }
    // SAFETY: interrupts and preemption are off (`_pinned`).
    unsafe { cpu_from_register(cpu_count()) }.unwrap_or(0)
}

/// [`this_cpu`] as an [`ExclusiveCpu`]: only an index the register gave (never the
/// fallback to CPU 0).
#[cfg(all(target_os = "none", any(feature = "percpu02", feature = "percpu04")))]
#[inline(always)]
fn exclusive_cpu<'a>(pinned: &'a Pinned<'_>) -> Option<ExclusiveCpu<'a>> {
    // SAFETY: interrupts and preemption are off (`pinned`): the task stays on this CPU
    // between this read and the use of its answer.
    let known = unsafe { AXALLOC_BUDDY_CPU.read_current_raw() };
    let id = if known != usize::MAX {
        known
    } else {
        // SAFETY: as above.
        unsafe { cpu_from_register(cpu_count()) }?
    };
    // SAFETY: a kernel build: `pinned` keeps interrupts and preemption off on this CPU for
    // the whole allocator call, so nothing else runs on it meanwhile; and `id` is this
    // CPU's own index, worked out from its own per-CPU register (or kept from that in its
    // own per-CPU area), which no other CPU's register gives.
    Some(unsafe { ExclusiveCpu::new(id, pinned) })
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
unsafe fn cpu_from_register(cpus: usize) -> Option<usize> {
    let reg = percpu::read_percpu_reg();
    if reg == 0 {
        // Per-CPU data not set up yet (`percpu` 0.4 panics on a look-up then).
        return None;
    }
    let base = percpu::percpu_area_base(0);
    let stride = percpu::percpu_area_base(1).wrapping_sub(base);
    if stride == 0 {
        return None;
    }
    let id = reg.wrapping_sub(base) / stride;
    if id >= cpus {
        return None;
    }
    // SAFETY: interrupts and preemption are off (the caller's promise), and the register is
    // set (not 0): the write goes to this CPU's own area, which no other CPU writes.
    unsafe { AXALLOC_BUDDY_CPU.write_current_raw(id) };
    Some(id)
}

/// The CPU this call runs on: without a per-CPU register to read (a build outside a kernel,
/// or without `percpu02`/`percpu04`), CPU 0 (tests and embedders name CPUs with
/// [`GlobalAllocator::with_cpu_id`](crate::GlobalAllocator::with_cpu_id)).
#[cfg(not(all(target_os = "none", any(feature = "percpu02", feature = "percpu04"))))]
#[inline(always)]
fn this_cpu(_pinned: &Pinned<'_>) -> usize {
    0
}

/// Without a per-CPU register to read, no CPU id is exclusive: calls on every CPU (or
/// thread) share CPU 0's lists, under its lock.
#[cfg(not(all(target_os = "none", any(feature = "percpu02", feature = "percpu04"))))]
#[inline(always)]
fn exclusive_cpu<'a>(_pinned: &'a Pinned<'_>) -> Option<ExclusiveCpu<'a>> {
    None
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
