//! The per-CPU handle: [`Zone::cpu`] checks a CPU number once and gives a [`Cpu`] that
//! carries the calls that run on that CPU (allocation, frees, drains); [`Zone::local_cpu`]
//! gives the same calls reaching the CPU's lists without their lock ([`LocalCpu`]).

use crate::frame_storage::FrameStorage;
use crate::zone::per_cpu_set::PerCpuSet;
use core::fmt;
use core::marker::PhantomData;

use crate::error::NoSuchCpu;
use crate::frame::Frame;
use crate::memory::{Clearing, FrameClearer, FrameMemory, ZeroFrames};
use crate::request::{HandleCleared, SelfCleared};
use crate::sync::DefaultRawMutex;
use crate::zone::Zone;
use crate::zone::pcp::{CpuLists, PerCpu};
use lock_api::RawMutex;

/// How a [`Cpu`] handle reaches its CPU's per-cpu lists: [`Locked`] or [`Local`]. Sealed.
pub trait Access: sealed::Sealed {
    /// Whether the lists are reached without their lock.
    #[doc(hidden)]
    const LOCAL: bool;
}

/// A [`Cpu`] handle that takes its CPU's list lock for each call: `Send` and `Sync`, usable
/// from any thread (two threads naming one CPU share its lists correctly).
#[derive(Clone, Copy, Debug, Default)]
pub struct Locked;

/// A [`Cpu`] handle that reaches its CPU's lists without their lock, as Linux's
/// `local_lock` does ([`Zone::local_cpu`]): neither `Send` nor `Sync`, so it stays on the
/// thread (and, by its contract, the CPU) that made it. Moving a [`LocalCpu`], or a block
/// that borrows one, to another thread is a compile error that names this marker's field,
/// `PhantomData<*const ()>` ("cannot be sent between threads safely"): another thread would
/// reach the lists unlocked while this one does. Make a handle on each CPU instead, or use
/// [`Locked`] handles, which are `Send` and `Sync`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Local(PhantomData<*const ()>);

impl Access for Locked {
    const LOCAL: bool = false;
}

impl Access for Local {
    const LOCAL: bool = true;
}

/// A [`Cpu`] handle with no clearer: it takes the requests that need none
/// ([`SelfCleared`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoClearer;

/// A [`Cpu`] handle made [`with_clearer`](Cpu::with_clearer): it also takes
/// [`zeroed`](crate::AllocRequest::zeroed) requests ([`HandleCleared`]), clearing them
/// through its clearer.
#[derive(Clone, Copy, Debug, Default)]
pub struct WithClearer;

/// Whether a request cleared by `Self` ([`SelfCleared`], [`HandleCleared`]) is served by a
/// handle whose clearer is `C` ([`NoClearer`], [`WithClearer`]). Sealed.
#[diagnostic::on_unimplemented(
    message = "a zeroed request needs a clearer, and this CPU handle has none",
    label = "`AllocRequest::zeroed()` clears through the handle's clearer",
    note = "make the handle with `cpu.with_clearer(&clearer)`, or name the clearer in the \
            request: `.zeroed_with(&clearer)`"
)]
pub trait ServedBy<C>: sealed::Sealed {}

impl ServedBy<NoClearer> for SelfCleared {}
impl ServedBy<WithClearer> for SelfCleared {}
impl ServedBy<WithClearer> for HandleCleared {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Locked {}
    impl Sealed for super::Local {}
    impl Sealed for super::SelfCleared {}
    impl Sealed for super::HandleCleared {}
}

/// The calls of one CPU on a zone: made by [`Zone::cpu`], which checks the CPU number once;
/// every call through the handle then runs on that CPU's per-cpu lists. `A` says how the
/// lists are reached: [`Locked`] (the default: under their lock) or [`Local`]
/// ([`LocalCpu`], without it); `C` whether it has a clearer for
/// [`zeroed`](crate::AllocRequest::zeroed) requests: [`NoClearer`] (the default) or
/// [`WithClearer`] ([`Cpu::with_clearer`]).
pub struct Cpu<'z, F, P, R, A = Locked, C = NoClearer> {
    pub(crate) zone: &'z Zone<F, P, R>,
    pub(crate) pcp: &'z PerCpu<R>,
    id: usize,
    /// The clearer of its [`zeroed`](crate::AllocRequest::zeroed) requests
    /// ([`Cpu::with_clearer`]), and whether it checks blocks known zero: `Some` exactly when
    /// `C` is [`WithClearer`].
    clearer: Option<(&'z (dyn ZeroFrames + Sync + 'z), bool)>,
    _access: PhantomData<(A, C)>,
}

/// A [`Cpu`] handle whose calls reach the CPU's lists without their lock
/// ([`Zone::local_cpu`]).
pub type LocalCpu<'z, F, P, R> = Cpu<'z, F, P, R, Local>;

/// A CPU handle on a [`StaticZone`](crate::StaticZone) (`StaticCpu<'_, 1024, 2>` in a
/// helper's signature, for `Cpu<'_, [Frame; 1024], [PerCpu; 2], DefaultRawMutex>`).
pub type StaticCpu<'z, const FRAMES: usize, const CPUS: usize, R = DefaultRawMutex> =
    Cpu<'z, [Frame; FRAMES], [PerCpu<R>; CPUS], R>;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// The calls of CPU `id`, under its list lock: `zone.cpu(id)?.alloc(request)`.
    ///
    /// # Errors
    /// [`NoSuchCpu`] when the zone has no CPU `id`.
    #[inline]
    pub fn cpu(&self, id: usize) -> Result<Cpu<'_, F, P, R>, NoSuchCpu> {
        self.cpu_with(id)
    }

    /// The calls of CPU `id`, reaching its per-cpu lists without their lock, as Linux's
    /// `local_lock` does: an allocation served from the CPU's list, and a free onto it, then
    /// execute no atomic read-modify-write for the list (a free still drops its reference by
    /// compare-and-swap, which other CPUs can race). The zone lock is taken as before for
    /// refills and drains, and the allocation slow path, compaction and contiguous
    /// allocation drain only this CPU's lists (never another CPU's).
    ///
    /// Debug builds still take the list's lock, with `try_lock`, and panic when it is held:
    /// a broken contract shows there instead of corrupting the lists.
    ///
    /// # Errors
    /// [`NoSuchCpu`] when the zone has no CPU `id`.
    ///
    /// # Safety
    /// While the handle, or a [`Block`](crate::Block) it handed out, lives:
    /// - every call through it (and the drop of such a block) runs on CPU `id` with
    ///   interrupts and preemption disabled for the whole call (an interrupt handler that
    ///   allocates must not interrupt one);
    /// - nothing else reaches CPU `id`'s lists during such a call: no call through another
    ///   handle for `id`, and the calls that visit every CPU's lists or drain other CPUs'
    ///   (`Zone::drain_all`, `Zone::counters`, `Zone::reset_counters`,
    ///   `Zone::zeroed_pages`, `Zone::free_pages_total`, `Zone::check`,
    ///   `Zone::alloc_pages_at`, and the slow paths, compaction and contiguous allocation of
    ///   a [`Locked`] handle) only while no other CPU is inside the zone (at boot, or with
    ///   the others stopped). In practice every CPU of a zone uses [`LocalCpu`] handles, or
    ///   none does.
    #[allow(unsafe_code)]
    #[inline]
    pub unsafe fn local_cpu(&self, id: usize) -> Result<LocalCpu<'_, F, P, R>, NoSuchCpu> {
        self.cpu_with(id)
    }

    #[inline]
    fn cpu_with<A: Access>(&self, id: usize) -> Result<Cpu<'_, F, P, R, A>, NoSuchCpu> {
        let pcp = self.pcps.slots().get(id).ok_or(NoSuchCpu(id))?;
        Ok(self.handle(pcp, id))
    }

    /// [`Zone::cpu`] of CPU `id` whose lists, `pcp`, the caller looked up before (an
    /// adapter made for one CPU): no look-up.
    #[cfg_attr(not(feature = "axallocator"), allow(dead_code))]
    #[inline(always)]
    pub(crate) const fn cpu_of<'z>(&'z self, pcp: &'z PerCpu<R>, id: usize) -> Cpu<'z, F, P, R> {
        self.handle(pcp, id)
    }

    /// [`Zone::local_cpu`] of CPU `id` whose lists, `pcp`, the caller kept from the per-cpu
    /// metadata it made the zone with: no look-up, no bounds check (an allocator that keeps
    /// one slot per CPU keeps its lists there).
    ///
    /// # Safety
    /// As [`Zone::local_cpu`]; and `pcp` is this zone's entry for CPU `id` (entry `id` of the
    /// per-cpu metadata the zone was made with): the handle's calls change `pcp`'s lists as
    /// this zone's, with this zone's frames.
    #[allow(unsafe_code)]
    #[inline(always)]
    pub const unsafe fn local_cpu_of<'z>(
        &'z self,
        pcp: &'z PerCpu<R>,
        id: usize,
    ) -> LocalCpu<'z, F, P, R> {
        self.handle(pcp, id)
    }

    #[inline(always)]
    const fn handle<'z, A: Access>(&'z self, pcp: &'z PerCpu<R>, id: usize) -> Cpu<'z, F, P, R, A> {
        Cpu {
            zone: self,
            pcp,
            id,
            clearer: None,
            _access: PhantomData,
        }
    }
}

impl<'z, F, P, R, A, C> Cpu<'z, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// The CPU's number.
    #[must_use]
    pub const fn id(&self) -> usize {
        self.id
    }

    /// The zone.
    #[must_use]
    pub const fn zone(&self) -> &'z Zone<F, P, R> {
        self.zone
    }

    /// Frames on this CPU's per-cpu lists.
    #[must_use]
    pub fn pcp_pages(&self) -> u64 {
        Zone::<F, P, R>::reach_pcp(self.lists()).count.pages
    }

    /// Returns all of this CPU's per-cpu blocks to the buddy.
    pub fn drain(&self) {
        self.zone.drain(self.lists(), u64::MAX);
    }

    /// This CPU's high mark in frames: a free past it drains a batch to the buddy.
    /// [`ZoneConfig::pcp_high`](crate::ZoneConfig::pcp_high), or more where the zone tunes
    /// the marks ([`ZoneConfig::pcp_high_max`](crate::ZoneConfig::pcp_high_max)).
    #[must_use]
    pub fn pcp_high(&self) -> u64 {
        let high = Zone::<F, P, R>::reach_pcp(self.lists()).high;
        high.frames(&self.zone.cfg)
    }

    /// Lowers this CPU's tuned high mark by an eighth of it, at least a frame (not below
    /// [`ZoneConfig::pcp_high`](crate::ZoneConfig::pcp_high), nor below its lists' frames
    /// less 32 batches) and drains what its lists hold past the new mark: Linux's
    /// `decay_pcp_high`, which `vmstat_update` runs on each CPU every second, so that the
    /// frames a burst left on the lists go back to the buddy once the burst is over. Call it
    /// from a periodic timer on the CPU; in a zone whose marks are not tuned it only drains
    /// what a refill left past the mark. Whether the mark is still above `pcp_high` or
    /// frames were drained (Linux: more to do at the next tick).
    pub fn decay_pcp_high(&self) -> bool {
        self.zone.decay_pcp_high(self.lists())
    }

    /// The same handle, clearing the frames of its [`zeroed`](crate::AllocRequest::zeroed)
    /// requests through `clearer` (made once at boot, as a kernel sets up its direct map):
    /// `cpu.alloc(AllocRequest::page().zeroed())` then names nothing more.
    ///
    /// ```
    /// use buddy_sim::{AllocRequest, FrameClearer, Pfn, StaticZone};
    /// #[repr(C, align(4096))]
    /// struct Frame([u8; 4096]);
    /// static ZONE: StaticZone<16, 1> = StaticZone::new_static_at(Pfn(0));
    /// let zone = &ZONE;
    /// let mut ram: Vec<Frame> = (0..16).map(|_| Frame([0xa5; 4096])).collect();
    /// // SAFETY: frame `p` is `ram[p]`, which nothing else uses while the zone runs.
    /// let clearer = unsafe { FrameClearer::direct_map(Pfn(0), ram.as_mut_ptr().cast()) }?;
    /// let cpu = zone.cpu(0)?.with_clearer(&clearer);
    /// let page = cpu.alloc(AllocRequest::page().zeroed())?;
    /// let frame = &ram[page.pfn().0 as usize];
    /// assert!(frame.0.iter().all(|&b| b == 0));
    /// # drop(page);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    #[must_use]
    pub fn with_clearer<'c, M: FrameMemory + Sync + 'c>(
        self,
        clearer: &'c FrameClearer<M>,
    ) -> Cpu<'c, F, P, R, A, WithClearer>
    where
        'z: 'c,
    {
        Cpu {
            zone: self.zone,
            pcp: self.pcp,
            id: self.id,
            clearer: Some((clearer, clearer.verifies())),
            _access: PhantomData,
        }
    }

    /// The same handle without its clearer (what a [`Block`](crate::Block) keeps to free
    /// itself).
    #[inline]
    pub(crate) const fn without_clearer(&self) -> Cpu<'z, F, P, R, A> {
        Cpu {
            zone: self.zone,
            pcp: self.pcp,
            id: self.id,
            clearer: None,
            _access: PhantomData,
        }
    }

    /// How this handle clears a zeroed request that names no clearer.
    #[inline(always)]
    pub(crate) fn clearing(&self) -> Option<Clearing<'z>> {
        self.clearer
            .map(|(clearer, verify)| Clearing { clearer, verify })
    }

    /// The lists the handle's calls run on.
    #[inline]
    pub(crate) fn lists(&self) -> CpuLists<'z, R> {
        CpuLists {
            pcp: self.pcp,
            local: A::LOCAL,
        }
    }
}

impl<F, P, R, A, C> Clone for Cpu<'_, F, P, R, A, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F, P, R, A, C> Copy for Cpu<'_, F, P, R, A, C> {}

impl<F, P, R, A: Access, C> fmt::Debug for Cpu<'_, F, P, R, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cpu")
            .field("id", &self.id)
            .field("local", &A::LOCAL)
            .field("clearer", &self.clearer.is_some())
            .finish_non_exhaustive()
    }
}
