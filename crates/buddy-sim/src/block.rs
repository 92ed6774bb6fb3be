//! Owned allocations: a [`Block`] frees what it holds when dropped, as `Box` does, and
//! converts to and from the raw frame number ([`Block::into_raw`], [`Block::from_raw`]) for a
//! kernel that keeps frames in page tables.

use crate::frame_storage::FrameStorage;
use crate::types::Order;
use crate::zone::per_cpu_set::PerCpuSet;
use core::fmt;
use core::mem::ManuallyDrop;

use crate::error::alloc::AllocError;
use crate::error::free::FreeError;
use crate::request::{AllocRequest, Holding};
use crate::zone::cpu::{Access, Cpu, Locked, ServedBy};
use lock_api::RawMutex;
use mm_types::FrameRange;
use mm_types::Pfn;

/// An allocation its owner frees by dropping it: made by [`Cpu::alloc`], freed through the
/// CPU handle that made it. `A` is that handle's [`Access`]: a block from a
/// [`LocalCpu`](crate::LocalCpu) is neither `Send` nor `Sync` and falls under
/// [`Zone::local_cpu`](crate::Zone::local_cpu)'s contract.
///
/// ```
/// use buddy_sim::{AllocRequest, Pfn, StaticZone, ZoneConfig};
/// static ZONE: StaticZone<1024, 1> = StaticZone::new_static(ZoneConfig::new(Pfn(0x1000), 1024));
///
/// let cpu = ZONE.cpu(0)?;
/// let page = cpu.alloc(AllocRequest::page())?;
/// let run = cpu.alloc(AllocRequest::frames(100))?;
/// assert_eq!(run.frames().pages, 100);
/// assert_eq!(ZONE.free_pages_total(), 1024 - 101);
/// drop((page, run));
/// assert_eq!(ZONE.free_pages_total(), 1024);
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
pub struct Block<'z, F, P, R, A = Locked>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    cpu: Cpu<'z, F, P, R, A>,
    pfn: Pfn,
    holding: Holding,
}

impl<'z, F, P, R, A, C> Cpu<'z, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Allocates what `request` asks for on this CPU, as [`Cpu::alloc_raw`] does, as a
    /// [`Block`] that frees it when dropped. A movable block or run is pinned while the
    /// block holds it ([`Holding::Pinned`], [`Holding::PinnedPages`]): it stays grouped with
    /// movable memory, but nothing moves it.
    ///
    /// # Errors
    /// As [`Cpu::alloc_raw`].
    #[inline]
    pub fn alloc<Z>(
        &self,
        request: AllocRequest<'_, Z>,
    ) -> Result<Block<'z, F, P, R, A>, AllocError>
    where
        Z: ServedBy<C>,
    {
        let request = request.owned();
        let holding = request.holding();
        let pfn = self.alloc_raw(request)?;
        Ok(Block {
            cpu: self.without_clearer(),
            pfn,
            holding,
        })
    }
}

impl<'z, F, P, R, A> Block<'z, F, P, R, A>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// The first frame.
    #[must_use]
    pub const fn pfn(&self) -> Pfn {
        self.pfn
    }

    /// The frames held.
    #[must_use]
    pub const fn frames(&self) -> FrameRange {
        FrameRange::new(self.pfn, self.holding.pages())
    }

    /// What the block holds.
    #[must_use]
    pub const fn holding(&self) -> Holding {
        self.holding
    }

    /// The CPU handle that frees it.
    #[must_use]
    pub const fn cpu(&self) -> &Cpu<'z, F, P, R, A> {
        &self.cpu
    }

    /// The first frame, with the block no longer owned: the caller frees it (as
    /// [`Holding`] says) or makes a block of it again with [`Block::from_raw`]. A pinned
    /// movable allocation stays pinned: to let the zone move it, the caller drops the pin
    /// ([`Cpu::put_page`] on each head) and from then on follows its moves through its
    /// [`Migrate`](crate::Migrate) callback.
    #[must_use = "the frames stay allocated: free them, or make a block of them again"]
    pub fn into_raw(self) -> Pfn {
        let pfn = self.pfn;
        let _ = ManuallyDrop::new(self);
        pfn
    }

    /// The block of what [`Block::into_raw`] (or a raw allocation) gave: the frames from
    /// `pfn` as `holding` says, freed through `cpu` on drop.
    ///
    /// # Safety
    /// The caller owns what it hands over: the allocation at `pfn` is `holding` (a block of
    /// that order with the one reference the caller holds; a pinned block, or each page of
    /// a pinned run, with two, the allocation's and the pin, taken while nothing could move
    /// it; a run of pages the caller holds one reference to each of; frozen pages it owns),
    /// nobody else frees it, and nothing accesses its memory once the block is dropped (the
    /// zone may clear it or hand it to anyone). A [`Holding::Block`] or [`Holding::Pages`]
    /// of movable memory must not be moved while the block holds it: its frame number
    /// would then be another's. For a [`LocalCpu`](crate::LocalCpu), `cpu`'s contract
    /// covers the block.
    #[allow(unsafe_code)]
    pub const unsafe fn from_raw(cpu: Cpu<'z, F, P, R, A>, pfn: Pfn, holding: Holding) -> Self {
        Self { cpu, pfn, holding }
    }

    /// Frees what the block holds.
    #[allow(unsafe_code)]
    fn release(&self) -> Result<(), FreeError> {
        let (zone, pcp) = (self.cpu.zone, self.cpu.lists());
        let pfn = self.pfn;
        // SAFETY: the block owns what it holds (made by an allocation, or handed over to
        // `from_raw` under its contract) and is being dropped: nothing uses it after this.
        // A pinned allocation's two references are dropped at once: it never reads as
        // movable with one reference at a frame number the block still frees through.
        unsafe {
            match self.holding {
                Holding::Block(order) => self.cpu.free_pages(pfn, order),
                Holding::Pinned(order) => zone.put_refs(pcp, pfn, order, 2),
                Holding::Pages(n) => self.cpu.free_contig_range(pfn, n),
                Holding::PinnedPages(n) => (0..n).try_for_each(|i| {
                    let page = Pfn(pfn.0.checked_add(i).ok_or(FreeError::Overflow)?);
                    zone.put_refs(pcp, page, Order::ZERO, 2)
                }),
                Holding::FrozenPages(n) => self.cpu.free_contig_frozen_range(pfn, n),
            }
        }
    }
}

impl<F, P, R, A> Drop for Block<'_, F, P, R, A>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    fn drop(&mut self) {
        // An error is a broken `from_raw` contract (what it names was freed behind the
        // block's back): freeing nothing more is all that is left.
        let _ = self.release();
    }
}

impl<F, P, R, A> fmt::Debug for Block<'_, F, P, R, A>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Block")
            .field("pfn", &self.pfn)
            .field("holding", &self.holding)
            .field("cpu", &self.cpu.id())
            .finish()
    }
}
