//! One value for what an allocation asks: [`AllocRequest`], built fluently and handed to the
//! one allocation entry point of a CPU handle ([`Cpu::alloc`](crate::Cpu::alloc),
//! [`Cpu::alloc_raw`](crate::Cpu::alloc_raw)) or a node set
//! ([`NodeSet::alloc`](crate::NodeSet::alloc)); Linux's `struct alloc_context`, Asterinas's
//! `FrameAllocOptions`.

use core::fmt;
use core::marker::PhantomData;

use crate::cma::CmaArea;
use crate::error::request::RequestConflict;
use crate::memory::{Clearing, FrameClearer, FrameMemory};
use crate::migrate::{Migrate, Migration};
use crate::migratetype::MigrateType;
use crate::reclaim::Reclaim;
use crate::types::NodePolicy;
use crate::types::Order;
use mm_types::{FrameRange, Pfn};
use zero_core::Resched;

/// An allocation request: how much (a block of `2^order` frames, or a run of any number of
/// frames), of which kind (unmovable, reclaimable, movable with its key), zeroed or not (with
/// the clearer, the fault hint and the reschedule point), and for runs whether the zone may
/// move movable blocks out of the way ([`AllocRequest::contiguous`], handing the pages out
/// [`frozen`](AllocRequest::frozen) if asked).
///
/// ```
/// use buddy_sim::{AllocRequest, Order};
/// let page = AllocRequest::page();
/// let huge = AllocRequest::order(Order::new(9)?).movable(7);
/// let run = AllocRequest::frames(300).aligned(Order::new(4)?);
/// # let _ = (page, huge, run);
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
///
/// `Z` says who clears a zeroed request, and so which handles take it: [`SelfCleared`]
/// (the default: not zeroed, or [`zeroed_with`](AllocRequest::zeroed_with) its own clearer;
/// every handle and a node set take it) or [`HandleCleared`] ([`zeroed`](AllocRequest::zeroed):
/// only a handle made [`with_clearer`](crate::Cpu::with_clearer) takes it). A zeroed request
/// that nothing would clear does not compile:
///
/// ```compile_fail,E0277
/// use buddy_sim::{AllocRequest, Pfn, StaticZone};
/// static ZONE: StaticZone<16, 1> = StaticZone::new_static_at(Pfn(0));
/// let cpu = ZONE.cpu(0)?; // no clearer
/// let page = cpu.alloc(AllocRequest::page().zeroed())?;
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
#[must_use = "a request does nothing until it is handed to `alloc`"]
pub struct AllocRequest<'a, Z = SelfCleared> {
    pub(crate) order: Order,
    /// `Some(n)`: a run of `n` order-0 pages rather than one block.
    pub(crate) frames: Option<u64>,
    pub(crate) align: Order,
    pub(crate) mt: MigrateType,
    pub(crate) key: u64,
    /// Every byte reads zero when handed out.
    pub(crate) zeroed: bool,
    /// The clearer named ([`AllocRequest::zeroed_with`]); `None`: the CPU handle's.
    pub(crate) clearer: Option<Clearing<'a>>,
    pub(crate) fault: Option<usize>,
    pub(crate) resched: Option<&'a mut dyn Resched>,
    pub(crate) migrate: Option<&'a mut dyn Migrate>,
    /// Direct reclaim: the slow path's [`Reclaim`] callback.
    pub(crate) reclaim: Option<&'a mut dyn Reclaim>,
    /// Direct compaction: the slow path's [`Migrate`] callback.
    pub(crate) compact: Option<&'a mut dyn Migrate>,
    pub(crate) frozen: bool,
    /// The CMA reservation a contiguous run comes from ([`AllocRequest::from_cma`]).
    pub(crate) cma: Option<CmaArea>,
    pub(crate) policy: NodePolicy,
    /// Only from zones whose frames all lie below this one ([`AllocRequest::below`]).
    pub(crate) below: Option<Pfn>,
    /// Held by a [`Block`](crate::Block): a movable allocation is pinned while it holds it.
    pub(crate) owned: bool,
    /// Who clears it: `zeroed` without `clearer` only for [`HandleCleared`].
    cleared_by: PhantomData<Z>,
}

/// An [`AllocRequest`] that needs no clearer from the handle that serves it: not zeroed, or
/// naming its own ([`AllocRequest::zeroed_with`]).
#[derive(Clone, Copy, Debug)]
pub struct SelfCleared;

/// An [`AllocRequest::zeroed`] request, cleared through the clearer of the handle that
/// serves it ([`Cpu::with_clearer`](crate::Cpu::with_clearer)).
#[derive(Clone, Copy, Debug)]
pub struct HandleCleared;

impl<'a> AllocRequest<'a> {
    /// One naturally aligned block of `2^order` frames, unmovable, not zeroed, from the
    /// calling CPU's node.
    pub const fn order(order: Order) -> Self {
        Self {
            order,
            frames: None,
            align: Order::ZERO,
            mt: MigrateType::Unmovable,
            key: 0,
            zeroed: false,
            clearer: None,
            fault: None,
            resched: None,
            migrate: None,
            reclaim: None,
            compact: None,
            frozen: false,
            cma: None,
            policy: NodePolicy::Local,
            below: None,
            owned: false,
            cleared_by: PhantomData,
        }
    }

    /// One frame: [`AllocRequest::order`] of order 0.
    pub const fn page() -> Self {
        Self::order(Order::ZERO)
    }

    /// A run of `pages` contiguous order-0 pages, each its own allocation with one reference
    /// (Linux's `alloc_pages_exact`; with [`AllocRequest::contiguous`], `alloc_contig_pages`).
    /// From the buddy it is the covering block with the pages past `pages` given back at
    /// once; it starts aligned to [`AllocRequest::aligned`]'s order (and, from the buddy, to
    /// the covering order). Free it with `free_contig_range` (any part of it) or drop its
    /// [`Block`](crate::Block).
    pub const fn frames(pages: u64) -> Self {
        let mut r = Self::order(Order::ZERO);
        r.frames = Some(pages);
        r
    }
}

impl<'a, Z> AllocRequest<'a, Z> {
    /// A run of [`AllocRequest::frames`] starting aligned to `2^align` frames.
    pub const fn aligned(mut self, align: Order) -> Self {
        self.align = align;
        self
    }

    /// Of kind `mt` (movable with key 0 for [`MigrateType::Movable`]: see
    /// [`AllocRequest::movable`]).
    pub const fn kind(mut self, mt: MigrateType) -> Self {
        self.mt = mt;
        self
    }

    /// Reclaimable ([`MigrateType::Reclaimable`]).
    pub const fn reclaimable(self) -> Self {
        self.kind(MigrateType::Reclaimable)
    }

    /// Movable, under the embedder's `key`: compaction and contiguous allocation may move it,
    /// handing `key` to the embedder's [`Migrate`] callback (which copies the block and
    /// repoints its mappings, or refuses). The block's frame number changes when it moves.
    /// Keys need not be distinct; every page of a run carries its run's. A
    /// [`Block`](crate::Block) pins what it holds ([`Holding::Pinned`]): grouped with
    /// movable memory, never moved.
    pub const fn movable(mut self, key: u64) -> Self {
        self.mt = MigrateType::Movable;
        self.key = key;
        self
    }

    /// Zeroed: every byte reads zero when it is handed out, a block known zero if the zone
    /// has one, else cleared (in zero-core's batches) through the clearer of the CPU handle
    /// that allocates ([`Cpu::with_clearer`](crate::Cpu::with_clearer)), made once at boot.
    /// Only such a handle takes the request ([`HandleCleared`]: on another, it does not
    /// compile); [`AllocRequest::zeroed_with`] names the clearer in the request instead (a
    /// node set's zeroed allocations do).
    pub const fn zeroed(self) -> AllocRequest<'a, HandleCleared> {
        let mut r = self.cleared_by::<HandleCleared>();
        r.zeroed = true;
        r
    }

    /// [`AllocRequest::zeroed`], cleared through `clearer` rather than the handle's: any
    /// handle, and a node set, takes it.
    pub fn zeroed_with<M: FrameMemory + 'a>(
        self,
        clearer: &'a FrameClearer<M>,
    ) -> AllocRequest<'a, SelfCleared> {
        let mut r = self.cleared_by::<SelfCleared>();
        r.zeroed = true;
        r.clearer = Some(Clearing::of(clearer));
        r
    }

    /// The same request, cleared by `Y`.
    const fn cleared_by<Y>(self) -> AllocRequest<'a, Y> {
        AllocRequest {
            order: self.order,
            frames: self.frames,
            align: self.align,
            mt: self.mt,
            key: self.key,
            zeroed: self.zeroed,
            clearer: self.clearer,
            fault: self.fault,
            resched: self.resched,
            migrate: self.migrate,
            reclaim: self.reclaim,
            compact: self.compact,
            frozen: self.frozen,
            cma: self.cma,
            policy: self.policy,
            below: self.below,
            owned: self.owned,
            cleared_by: PhantomData,
        }
    }

    /// For a zeroed block: `offset`, a byte offset into it that a fault waits on, whose
    /// neighbourhood is cleared last so that it is cache-hot.
    pub const fn fault_at(mut self, offset: usize) -> Self {
        self.fault = Some(offset);
        self
    }

    /// For a zeroed request: `resched.cond_resched()` before each of zero-core's batches.
    pub fn resched(self, resched: &'a mut dyn Resched) -> Self {
        AllocRequest {
            resched: Some(resched),
            ..self
        }
    }

    /// For a run of [`AllocRequest::frames`] (or a block's frames): search the whole zone
    /// for them as Linux's `alloc_contig_pages` does, moving the movable allocations in the
    /// way out through `migrate`, rather than take them from the buddy's free lists.
    pub fn contiguous(self, migrate: &'a mut dyn Migrate) -> Self {
        AllocRequest {
            migrate: Some(migrate),
            ..self
        }
    }

    /// Direct reclaim: before the allocation fails (or, in
    /// [defrag mode](crate::ZoneConfig::defrag_mode), before it takes part of another type's
    /// pageblock) its slow path asks `reclaim` to free some of the embedder's caches and
    /// tries again, as long as reclaim or compaction makes progress (at most 16 rounds,
    /// Linux's `MAX_RECLAIM_RETRIES`; one for a block above order 3, as Linux's costly
    /// orders without `__GFP_RETRY_MAYFAIL`).
    pub fn reclaim(self, reclaim: &'a mut dyn Reclaim) -> Self {
        AllocRequest {
            reclaim: Some(reclaim),
            ..self
        }
    }

    /// Direct compaction: where the allocation would fail (a block above order 0), or in
    /// [defrag mode](crate::ZoneConfig::defrag_mode) before it takes part of another type's
    /// pageblock (any order: it compacts to the pageblock order then), its slow path
    /// compacts the zone through `migrate` (as [`Cpu::compact`](crate::Cpu::compact),
    /// going on where the zone's last compaction stopped, and deferred after failures as
    /// Linux's `defer_compaction`) and tries again.
    pub fn compact(self, migrate: &'a mut dyn Migrate) -> Self {
        AllocRequest {
            compact: Some(migrate),
            ..self
        }
    }

    /// For a [`contiguous`](AllocRequest::contiguous) run: the pages handed out frozen, with
    /// no reference count (Linux's `alloc_contig_frozen_pages`), freed with
    /// `free_contig_frozen_range` or by dropping the [`Block`](crate::Block).
    pub const fn frozen(mut self) -> Self {
        self.frozen = true;
        self
    }

    /// For a [`contiguous`](AllocRequest::contiguous) run: take it from the CMA reservation
    /// `area` ([`Cpu::reserve_cma`](crate::Cpu::reserve_cma)), moving the movable
    /// allocations that borrowed its memory out (Linux's `cma_alloc`). A contiguous run
    /// without it never takes a reservation's frames: they are their owner's. On a
    /// [`NodeSet`](crate::NodeSet) the run comes from the zone that holds the area, whatever
    /// the policy.
    pub const fn from_cma(mut self, area: CmaArea) -> Self {
        self.cma = Some(area);
        self
    }

    /// On a [`NodeSet`](crate::NodeSet): where to look first, and how far ([`NodePolicy`];
    /// the local node by default). A zone's own calls ignore it.
    pub const fn policy(mut self, policy: NodePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Only from zones whose frames all lie below `end`: memory a device with few address
    /// bits reaches (Linux's `GFP_DMA32` is `below(Pfn(1 << 20))` with 4 KiB frames: under
    /// 4 GiB). A node set tries its zones that qualify, in the policy's order; a zone that
    /// does not qualify fails with [`AllocError::OutOfMemory`](crate::AllocError::OutOfMemory).
    pub const fn below(mut self, end: Pfn) -> Self {
        self.below = Some(end);
        self
    }

    /// Whether a zone spanning `span` may serve the request ([`AllocRequest::below`]).
    #[inline(always)]
    pub(crate) fn allows(&self, span: FrameRange) -> bool {
        lies_below(span, self.below)
    }

    /// The frames the request covers: `2^order` for a block, the run's length otherwise.
    #[must_use]
    pub const fn pages(&self) -> u64 {
        match self.frames {
            Some(n) => n,
            None => self.order.pages(),
        }
    }

    /// One block from the free lists, zeroed or not, of any kind, whose options go together
    /// (the common requests): what [`AllocRequest::check`] would pass and no run. Every
    /// other request goes through `check` first.
    #[inline(always)]
    pub(crate) const fn is_block(&self) -> bool {
        self.frames.is_none()
            && self.migrate.is_none()
            && !self.frozen
            && self.cma.is_none()
            && self.align.get() <= self.order.get()
            && (self.fault.is_none() || self.zeroed)
    }

    /// Whether the request names slow-path callbacks (reclaim, compaction) or limits the
    /// zones ([`AllocRequest::below`]): not one of the common requests, whose paths inline.
    #[inline(always)]
    pub(crate) const fn has_slow_path(&self) -> bool {
        self.reclaim.is_some() || self.compact.is_some() || self.below.is_some()
    }

    /// The request as a [`Block`](crate::Block) makes it: a movable allocation pinned for
    /// as long as the block holds it.
    pub(crate) const fn owned(mut self) -> Self {
        self.owned = true;
        self
    }

    /// What a [`Block`](crate::Block) of this request holds.
    pub(crate) const fn holding(&self) -> Holding {
        let pinned = matches!(self.mt, MigrateType::Movable);
        if self.frozen {
            Holding::FrozenPages(self.pages())
        } else if self.frames.is_some() || self.migrate.is_some() {
            if pinned {
                Holding::PinnedPages(self.pages())
            } else {
                Holding::Pages(self.pages())
            }
        } else if pinned {
            Holding::Pinned(self.order)
        } else {
            Holding::Block(self.order)
        }
    }

    /// What the allocation writes into the block's head: the key, and the pin a movable
    /// block carries while the call works on it (clears it, splits it into a run) or while
    /// a [`Block`](crate::Block) holds it.
    #[inline(always)]
    pub(crate) const fn tag(&self) -> HeadTag {
        let pin = if !matches!(self.mt, MigrateType::Movable) {
            Pin::None
        } else if self.owned {
            Pin::Kept
        } else if self.zeroed || self.frames.is_some() {
            Pin::WhileAllocating
        } else {
            Pin::None
        };
        HeadTag { key: self.key, pin }
    }

    /// How a zeroed request clears: the clearer it names, else `handle`'s; `None` for a
    /// request that is not zeroed. (A zeroed request names no clearer only as
    /// [`HandleCleared`], which only a handle with a clearer takes.)
    #[inline(always)]
    pub(crate) fn clearing<'c>(&self, handle: Option<Clearing<'c>>) -> Option<Clearing<'c>>
    where
        'a: 'c,
    {
        match (self.zeroed, self.clearer) {
            (false, _) => None,
            (true, Some(named)) => Some(named),
            (true, None) => {
                debug_assert!(
                    handle.is_some(),
                    "a HandleCleared request on a plain handle"
                );
                handle
            }
        }
    }

    /// The request's combination of options, checked.
    pub(crate) fn check(&self) -> Result<(), RequestConflict> {
        let conflict = if self.frozen && self.migrate.is_none() {
            Some(RequestConflict::FrozenWithoutContiguous)
        } else if self.cma.is_some() && self.migrate.is_none() {
            Some(RequestConflict::CmaWithoutContiguous)
        } else if self.migrate.is_some() && self.mt != MigrateType::Unmovable {
            Some(RequestConflict::KindWithContiguous)
        } else if self.frames.is_none() && self.align > self.order {
            Some(RequestConflict::AlignedBlock)
        } else if self.fault.is_some() && !self.zeroed {
            Some(RequestConflict::FaultWithoutZeroed)
        } else {
            None
        };
        conflict.map_or(Ok(()), Err)
    }
}

/// Whether every frame of `span` lies below `end` (any span, without one): the zones an
/// [`AllocRequest::below`] request may come from.
#[inline(always)]
pub(crate) fn lies_below(span: FrameRange, end: Option<Pfn>) -> bool {
    end.is_none_or(|end| {
        span.start
            .0
            .checked_add(span.pages)
            .is_some_and(|e| e <= end.0)
    })
}

impl<Z> fmt::Debug for AllocRequest<'_, Z> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AllocRequest")
            .field("order", &self.order)
            .field("frames", &self.frames)
            .field("align", &self.align)
            .field("kind", &self.mt)
            .field("key", &self.key)
            .field("zeroed", &self.zeroed)
            .field("clearer named", &self.clearer.is_some())
            .field("fault", &self.fault)
            .field("below", &self.below)
            .field("contiguous", &self.migrate.is_some())
            .field("reclaim", &self.reclaim.is_some())
            .field("compact", &self.compact.is_some())
            .field("frozen", &self.frozen)
            .field("cma", &self.cma)
            .field("policy", &self.policy)
            .finish()
    }
}

/// A request's optional reschedule point as a [`Resched`].
pub(crate) struct ReschedPoint<'r, 'a>(pub(crate) &'r mut Option<&'a mut dyn Resched>);

impl Resched for ReschedPoint<'_, '_> {
    fn cond_resched(&mut self) {
        if let Some(r) = self.0 {
            r.cond_resched();
        }
    }
}

/// A request's migration callback as a sized [`Migrate`].
pub(crate) struct MigrateCallback<'r, 'a>(pub(crate) &'r mut (dyn Migrate + 'a));

impl Migrate for MigrateCallback<'_, '_> {
    fn migrate(&mut self, m: &Migration) -> bool {
        self.0.migrate(m)
    }
}

/// A request's slow-path callbacks, borrowed for one allocation: direct reclaim and direct
/// compaction.
pub(crate) struct SlowPath<'r, 'a> {
    pub(crate) reclaim: Option<&'r mut (dyn Reclaim + 'a)>,
    pub(crate) compact: Option<&'r mut (dyn Migrate + 'a)>,
}

impl<'r, 'a> SlowPath<'r, 'a> {
    /// No callbacks: the slow path drains, merges and initializes deferred memory only.
    pub(crate) const fn none() -> Self {
        Self {
            reclaim: None,
            compact: None,
        }
    }

    /// The callbacks of a request, borrowed field by field so that its other fields stay
    /// usable.
    pub(crate) fn of(
        reclaim: &'r mut Option<&'a mut dyn Reclaim>,
        compact: &'r mut Option<&'a mut dyn Migrate>,
    ) -> Self {
        Self {
            reclaim: reclaim.as_deref_mut(),
            compact: compact.as_deref_mut(),
        }
    }
}

/// What a [`Block`](crate::Block) holds, and so how it is freed.
///
/// A movable allocation a block holds is pinned: it carries a second reference, so that
/// compaction, contiguous allocation and memory offlining, which move blocks with one
/// reference only, leave it where it is (the block's frame number and whatever the owner
/// built on it stay valid). Movable memory the zone may move is allocated raw
/// ([`Cpu::alloc_raw`](crate::Cpu::alloc_raw)), its owner told of each move through its
/// [`Migrate`](crate::Migrate) callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Holding {
    /// One block of `2^order` frames with one reference (`free_pages`).
    Block(Order),
    /// A movable block of `2^order` frames with two references, its allocation's and its
    /// pin, both dropped at once when it is freed.
    Pinned(Order),
    /// A run of order-0 pages, each with one reference (`free_contig_range`).
    Pages(u64),
    /// A run of movable order-0 pages, each with two references (its allocation's and its
    /// pin), both dropped at once when it is freed.
    PinnedPages(u64),
    /// A run of frozen order-0 pages (`free_contig_frozen_range`).
    FrozenPages(u64),
}

impl Holding {
    /// The frames held.
    #[must_use]
    pub const fn pages(self) -> u64 {
        match self {
            Self::Block(order) | Self::Pinned(order) => order.pages(),
            Self::Pages(n) | Self::PinnedPages(n) | Self::FrozenPages(n) => n,
        }
    }
}

/// Whether an allocation's head carries a second reference, a pin, and for how long. A
/// pinned block is never moved: every mover takes blocks with one reference only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pin {
    /// None: a movable block may move from the moment its head reads allocated.
    None,
    /// While the call works on the block (clears it, splits it into a run, checks its
    /// poison): dropped before it returns.
    WhileAllocating,
    /// For as long as the [`Block`](crate::Block) that asked for it holds it.
    Kept,
}

/// What an allocation writes into a block's head besides its order and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeadTag {
    /// The embedder's key (a movable block's is handed to its [`Migrate`] callback).
    pub(crate) key: u64,
    /// The pin it carries.
    pub(crate) pin: Pin,
}

impl HeadTag {
    /// No key, no pin: the zone's own allocations.
    pub(crate) const NONE: Self = Self {
        key: 0,
        pin: Pin::None,
    };

    /// The references the head starts with: the allocation's, and the pin's if any.
    #[inline(always)]
    pub(crate) const fn refcount(self) -> u32 {
        match self.pin {
            Pin::None => 1,
            Pin::WhileAllocating | Pin::Kept => 2,
        }
    }

    /// The same tag pinned while the call works on a movable block (debugging reads it).
    #[inline]
    pub(crate) const fn pinned_while_allocating(self, mt: MigrateType) -> Self {
        match (mt, self.pin) {
            (MigrateType::Movable, Pin::None) => Self {
                key: self.key,
                pin: Pin::WhileAllocating,
            },
            _ => self,
        }
    }
}
