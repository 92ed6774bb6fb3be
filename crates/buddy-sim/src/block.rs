//! Owned allocations: a [`Block`] frees what it holds when dropped, as `Box` does, and
//! converts to and from the raw frame number ([`Block::into_raw`], [`Block::from_raw`]) for a
//! kernel that keeps frames in page tables.

use crate::types::FrameIdx;
use crate::zone::per_cpu_set::PerCpuSet;
use core::cell::Cell;
use core::fmt;
use core::mem::ManuallyDrop;

use crate::error::alloc::AllocError;
use crate::error::free::FreeError;
use crate::frame::{Frame, FrameState};
use crate::migratetype::MigrateType;
use crate::request::{AllocRequest, Holding};
use crate::sync::spin_loop;
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
    F: AsRef<[Frame]>,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    cpu: Cpu<'z, F, P, R, A>,
    /// Where the frames were last seen (a movable block's move changes it).
    pfn: Cell<Pfn>,
    holding: Holding,
}

impl<'z, F, P, R, A, C> Cpu<'z, F, P, R, A, C>
where
    F: AsRef<[Frame]>,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Allocates what `request` asks for on this CPU, as [`Cpu::alloc_raw`] does, as a
    /// [`Block`] that frees it when dropped.
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
        let holding = request.holding();
        let pfn = self.alloc_raw(request)?;
        Ok(Block {
            cpu: self.without_clearer(),
            pfn: Cell::new(pfn),
            holding,
        })
    }
}

impl<'z, F, P, R, A> Block<'z, F, P, R, A>
where
    F: AsRef<[Frame]>,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// The first frame. For a movable block, where it is now (found by its key after a
    /// move: O(frames) then, once).
    #[must_use]
    pub fn pfn(&self) -> Pfn {
        self.locate().unwrap_or(self.pfn.get())
    }

    /// The frames held.
    #[must_use]
    pub fn frames(&self) -> FrameRange {
        FrameRange::new(self.pfn(), self.holding.pages())
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
    /// [`Holding`] says) or makes a block of it again with [`Block::from_raw`]. A movable
    /// block's frame number changes when it moves: the caller keeps it where its
    /// [`Migrate`](crate::Migrate) callback updates it.
    #[must_use = "the frames stay allocated: free them, or make a block of them again"]
    pub fn into_raw(self) -> Pfn {
        let pfn = self.pfn();
        let _ = ManuallyDrop::new(self);
        pfn
    }

    /// The block of what [`Block::into_raw`] (or a raw allocation) gave: the frames from
    /// `pfn` as `holding` says, freed through `cpu` on drop.
    ///
    /// # Safety
    /// The caller owns what it hands over: the allocation at `pfn` is `holding` (a block of
    /// that order with the one reference the caller holds; a run of pages the caller holds
    /// one reference to each of; frozen pages it owns), nobody else frees it, and nothing
    /// accesses its memory once the block is dropped (the zone may clear it or hand it to
    /// anyone). For a [`LocalCpu`](crate::LocalCpu), `cpu`'s contract covers the block.
    #[allow(unsafe_code)]
    pub const unsafe fn from_raw(cpu: Cpu<'z, F, P, R, A>, pfn: Pfn, holding: Holding) -> Self {
        Self {
            cpu,
            pfn: Cell::new(pfn),
            holding,
        }
    }

    /// A movable block's first frame now: where it was last seen, or after a move the
    /// allocated movable block of its order and key. `None` while it is between places (a
    /// move in progress), when several blocks share its order and key, or for other
    /// holdings.
    fn locate(&self) -> Option<Pfn> {
        let Holding::Movable { order, key } = self.holding else {
            return None;
        };
        let zone = self.cpu.zone;
        let m = zone.map();
        let is_it = |idx: FrameIdx| {
            let f = m.frame(idx);
            let w = f.load();
            w.state() == FrameState::Allocated
                && w.order() == order.get()
                && w.mt() == MigrateType::Movable as u8
                && f.key() == key
        };
        if m.index(self.pfn.get()).is_ok_and(is_it) {
            return Some(self.pfn.get());
        }
        // Moved: the one allocated movable block of its order and key. Two with the key
        // cannot be told apart: the block is then lost (leaked on drop), never taken for
        // the other.
        let mut found = zone.blocks().filter(|&(idx, _)| is_it(idx));
        let (idx, _) = found.next()?;
        if found.next().is_some() {
            return None;
        }
        self.pfn.set(m.pfn(idx));
        Some(m.pfn(idx))
    }

    /// Frees what the block holds.
    #[allow(unsafe_code)]
    fn release(&self) -> Result<(), FreeError> {
        let pfn = self.pfn.get();
        // SAFETY: the block owns what it holds (made by an allocation, or handed over to
        // `from_raw` under its contract) and is being dropped: nothing uses it after this.
        unsafe {
            match self.holding {
                Holding::Block(order) | Holding::Movable { order, .. } => {
                    self.cpu.free_pages(pfn, order)
                }
                Holding::Pages(n) => self.cpu.free_contig_range(pfn, n),
                Holding::FrozenPages(n) => self.cpu.free_contig_frozen_range(pfn, n),
            }
        }
    }
}

impl<F, P, R, A> Drop for Block<'_, F, P, R, A>
where
    F: AsRef<[Frame]>,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    fn drop(&mut self) {
        loop {
            // A move keeps the source allocated (frozen) until the target holds the key, so
            // a movable block is always found; if it is not, it was freed behind the block's
            // back (a broken `from_raw` contract), and freeing nothing is all that is left.
            if matches!(self.holding, Holding::Movable { .. }) && self.locate().is_none() {
                return;
            }
            match self.release() {
                // A movable block being moved right now: wait for the move to end.
                Err(FreeError::Frozen(_)) => spin_loop(),
                _ => return,
            }
        }
    }
}

impl<F, P, R, A> fmt::Debug for Block<'_, F, P, R, A>
where
    F: AsRef<[Frame]>,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Block")
            .field("pfn", &self.pfn.get())
            .field("holding", &self.holding)
            .field("cpu", &self.cpu.id())
            .finish()
    }
}
