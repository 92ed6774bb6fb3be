//! A CPU's magazines: for each listed order, an array of free blocks that only the CPU that
//! owns it pushes and pops, with no lock and no atomic read-modify-write (Bonwick's
//! magazines, in front of the zone's per-cpu lists as Linux's `pcp` lists are in front of
//! its buddy). A page call whose CPU id is exclusive ([`ExclusiveCpu`]) takes a block from
//! its CPU's magazine and frees one into it; past an empty or a full magazine it takes the
//! CPU's lists under its slot lock, as without one (a refill or a flush in batches would
//! move each block of a burst twice, through the magazine and the lists).
//!
//! The same CPU keeps an object magazine for each of the heap's slab size classes: free
//! objects of its own slabs, which the slabs count handed out. A small object's allocation
//! pops one and its free pushes one; past an empty or a full magazine the call moves a
//! batch between the magazine and the slabs under the CPU's slot lock (an object is a few
//! stores to move, where a lock a call cost more: the heap's workloads ran 1.2x-1.6x faster
//! with batches than with a lock a call).
//!
//! The protocol:
//! - a magazine's blocks and objects are written and read by its owner alone, under the
//!   promise of [`ExclusiveCpu`] that no other execution context holds the same CPU id
//!   meanwhile;
//! - the counts (blocks per order, objects per class, the usage change per kind, the bytes
//!   the objects were asked for) are atomics the owner writes
//!   with a load and a store (plain moves: it is their only writer) and anyone reads
//!   (statistics, relaxed);
//! - another CPU that wants the blocks back (an allocation about to fail) sets the drain
//!   request, which the owner honours at its next call (its objects: at its next timer tick
//!   or object call past a magazine): only the owner ever takes a block or an object out.
//!
//! The blocks are the zone's frozen blocks, marked cached in the frame table
//! ([`Zone::cache_frozen`](buddy_sim::Zone::cache_frozen)) while a magazine holds them: a
//! second free of a block waiting here is refused and reported, as one of a block on a
//! free list is.

use crate::frames::PCP_MAX_ORDER;
use crate::slab::{CLASSES, Class};
use crate::usage::{UsageCounts, UsageKind};
use buddy_sim::Order;
use core::ptr::NonNull;
use strum::VariantArray;

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// `core`'s `UnsafeCell` with loom's interface (tokio's shim): loom's own under `cfg(loom)`,
/// which records every access and reports two at once.
#[cfg(not(loom))]
#[derive(Debug)]
struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// The orders a CPU keeps magazines for: the listed orders (runs up to 256 KiB).
pub(crate) const ORDERS: usize = PCP_MAX_ORDER.get() as usize + 1;

/// Pages order 0's magazine holds at least.
const LEAST_PAGES: usize = 32;

/// Slots of order 0's array: the most its magazine can hold (a burst of 512 page-table
/// pages, 2 MiB, that a kernel takes and then frees, fits).
pub(crate) const ORDER0_SLOTS: usize = 512;

/// Slots of a larger order's array: the most its magazine can hold (32 task stacks of 64
/// pages, spawned together and exiting together, fit).
const LARGE_SLOTS: usize = 32;

/// Slots of order `order`'s array.
#[inline(always)]
const fn slots(order: usize) -> usize {
    if order == 0 {
        ORDER0_SLOTS
    } else {
        LARGE_SLOTS
    }
}

/// Objects a CPU's magazine of one slab size class holds at most.
pub(crate) const OBJECT_SLOTS: usize = 32;

/// Objects a refill moves from the CPU's slabs into an object magazine, and a flush moves
/// back, under one lock: half a magazine.
pub(crate) const OBJECT_BATCH: usize = OBJECT_SLOTS / 2;

/// Where each order's array starts in a CPU's slots, and (last) their end.
const BASES: [usize; ORDERS + 1] = {
    let mut bases = [0; ORDERS + 1];
    let mut o = 0;
    while o < ORDERS {
        bases[o + 1] = bases[o] + slots(o);
        o += 1;
    }
    bases
};

/// Where order `order`'s array starts in a CPU's slots (`order` below [`ORDERS`]).
#[inline(always)]
fn base(order: usize) -> usize {
    BASES[order.min(ORDERS)]
}

/// Slots of every order's array.
const ALL_SLOTS: usize = BASES[ORDERS];

/// Blocks each order's magazine holds at most in a region of `frames` frames with `cpus`
/// CPUs: a 32nd of the region per CPU, in blocks of the order, at most the order's slots
/// and at least 32 pages for order 0, one block for a larger order. A CPU's magazines then
/// hold at most about a 32nd of the region per order (the most, 17.75 MiB, from 256 MiB of
/// region a CPU up), as its per-cpu lists hold up to an eighth of it.
#[must_use]
pub(crate) const fn capacities(frames: usize, cpus: usize) -> [usize; ORDERS] {
    let share = frames / 32 / if cpus == 0 { 1 } else { cpus };
    let mut capacities = [0; ORDERS];
    let mut o = 0;
    while o < ORDERS {
        let least = if o == 0 { LEAST_PAGES } else { 1 };
        let blocks = share >> o;
        capacities[o] = if blocks < least {
            least
        } else if blocks > slots(o) {
            slots(o)
        } else {
            blocks
        };
        o += 1;
    }
    capacities
}

/// A CPU id that the call holding it runs on alone, for as long as it lives: no other
/// thread, CPU, or interrupt or signal handler holds the same id of the same allocator
/// meanwhile. A [`CpuId`](crate::CpuId) hands one out
/// ([`CpuId::exclusive_cpu`](crate::CpuId::exclusive_cpu)) only where it can promise that,
/// under `unsafe`.
///
/// ```compile_fail,E0451
/// let cpu = axalloc_buddy::ExclusiveCpu { id: 0, _pinned: core::marker::PhantomData };
/// ```
pub struct ExclusiveCpu<'a> {
    id: usize,
    /// Borrowed from the call's [`Pinned`](crate::Pinned); neither `Send` nor `Sync`.
    _pinned: core::marker::PhantomData<(&'a (), *const ())>,
}

impl<'a> ExclusiveCpu<'a> {
    /// CPU `id`, which the allocator call that shows `pinned` runs on alone.
    ///
    /// # Safety
    /// While the returned value lives (at most as long as the borrow of `pinned`: the
    /// allocator call that asked), no other execution context holds an `ExclusiveCpu` of
    /// the same `id` for the same allocator: no other CPU or thread, and no interrupt,
    /// exception or signal handler that interrupts this one and calls that allocator. In a
    /// kernel build `pinned` keeps interrupts and preemption off on this CPU, and the id of
    /// the CPU itself (exact, not a fallback that two CPUs may share) meets this; elsewhere
    /// the implementation must make sure of it itself (an id each thread claims for itself,
    /// and no allocation from a signal handler, say). An id that passes from one thread to
    /// another passes with release and acquire ordering (a lock's hand-over), so that its
    /// next holder sees what the last one did.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn new(id: usize, pinned: &'a crate::Pinned<'_>) -> Self {
        let _ = pinned;
        Self {
            id,
            _pinned: core::marker::PhantomData,
        }
    }

    /// The CPU's id.
    #[inline(always)]
    #[must_use]
    pub const fn id(&self) -> usize {
        self.id
    }
}

/// One CPU's magazines, on cache lines of their own.
#[repr(align(128))]
pub(crate) struct Magazines {
    /// Blocks held per order: written by the owner alone, read by anyone.
    held: [AtomicUsize; ORDERS],
    /// The owner's change of the bytes handed out per [`UsageKind`] (wrapping, as a slot's
    /// [`UsageCounts`]): written by the owner alone, read by anyone.
    usage: [AtomicUsize; UsageKind::VARIANTS.len()],
    /// Another CPU wants the blocks back: the owner gives them back at its next call.
    drain: AtomicBool,
    /// Another CPU wants the objects back: the owner gives them back at its next timer tick
    /// or the next object call past its magazine.
    drain_objects: AtomicBool,
    /// Blocks each order's magazine holds at most (at most its slots; fixed at `new`).
    capacity: [usize; ORDERS],
    /// Each order's blocks (their addresses): the first `held[order]` of its array, which
    /// starts at `base(order)`.
    blocks: UnsafeCell<[usize; ALL_SLOTS]>,
    /// Objects held per slab size class: written by the owner alone, read by anyone.
    objects_held: [AtomicUsize; CLASSES],
    /// Bytes the objects handed out from the object magazines were asked for, less those of
    /// the objects freed into them (wrapping, as the slabs' own count): written by the owner
    /// alone, read by anyone.
    objects_requested: AtomicUsize,
    /// Each class's objects, free objects of the owner's slabs that the slabs count handed
    /// out: the first `objects_held[class]` of its array.
    objects: UnsafeCell<[[*mut u8; OBJECT_SLOTS]; CLASSES]>,
}

// SAFETY: the blocks are reached only through `OwnMagazines`, by the execution context that
// holds the CPU's exclusive id, one at a time (`ExclusiveCpu`'s promise); everything else is
// atomics.
unsafe impl Sync for Magazines {}

impl Magazines {
    /// Empty magazines, each order's holding at most its entry of `capacity` blocks (at
    /// most its slots).
    pub(crate) fn new(capacity: [usize; ORDERS]) -> Self {
        Self {
            held: core::array::from_fn(|_| AtomicUsize::new(0)),
            usage: core::array::from_fn(|_| AtomicUsize::new(0)),
            drain: AtomicBool::new(false),
            drain_objects: AtomicBool::new(false),
            capacity: core::array::from_fn(|o| capacity[o].min(slots(o))),
            blocks: UnsafeCell::new([0; ALL_SLOTS]),
            objects_held: core::array::from_fn(|_| AtomicUsize::new(0)),
            objects_requested: AtomicUsize::new(0),
            objects: UnsafeCell::new([[core::ptr::null_mut(); OBJECT_SLOTS]; CLASSES]),
        }
    }

    /// Blocks the magazine of `order` holds at most.
    #[inline(always)]
    fn capacity(&self, order: usize) -> usize {
        self.capacity.get(order).copied().unwrap_or(0)
    }

    /// Blocks of `order` held (relaxed: a count that may be a call behind on another CPU).
    #[inline(always)]
    pub(crate) fn held(&self, order: usize) -> usize {
        self.held.get(order).map_or(0, |h| h.load(Relaxed))
    }

    /// Pages held, every order.
    pub(crate) fn pages(&self) -> u64 {
        (0..ORDERS).map(|o| (self.held(o) as u64) << o).sum()
    }

    /// Objects of `class` held (relaxed: a count that may be a call behind on another CPU).
    pub(crate) fn cached_objects(&self, class: Class) -> usize {
        self.objects_held
            .get(class.index())
            .map_or(0, |h| h.load(Relaxed))
    }

    /// Bytes the objects handed out from the object magazines were asked for, less those of
    /// the objects freed into them (wrapping).
    pub(crate) fn objects_requested(&self) -> usize {
        self.objects_requested.load(Relaxed)
    }

    /// The owner's change of the bytes handed out per kind.
    pub(crate) fn usage(&self) -> UsageCounts {
        let mut counts = UsageCounts::new();
        for &kind in UsageKind::VARIANTS {
            counts.add(kind, self.usage[kind as usize].load(Relaxed));
        }
        counts
    }

    /// Whether the object magazines hold an object.
    pub(crate) fn holds_objects(&self) -> bool {
        self.objects_held.iter().any(|h| h.load(Relaxed) > 0)
    }

    /// Asks the owner to give its blocks back at its next call.
    pub(crate) fn request_drain(&self) {
        request(&self.drain);
    }

    /// Asks the owner to give its objects back at its next timer tick or object call past a
    /// magazine.
    pub(crate) fn request_object_drain(&self) {
        request(&self.drain_objects);
    }
}

/// Sets `flag` (a request that others set and its owner alone clears), with no store when it
/// is set already.
fn request(flag: &AtomicBool) {
    if !flag.load(Relaxed) {
        flag.store(true, Relaxed);
    }
}

/// A CPU's magazines in the hands of the call that holds the CPU's exclusive id: the one
/// way to their blocks.
pub(crate) struct OwnMagazines<'a> {
    cpu: ExclusiveCpu<'a>,
    magazines: &'a Magazines,
}

impl<'a> OwnMagazines<'a> {
    /// `magazines`, reached as CPU `cpu`'s.
    ///
    /// # Safety
    /// `magazines` are CPU `cpu`'s, of the allocator whose [`CpuId`](crate::CpuId) gave
    /// `cpu` (no other CPU id reaches them).
    #[inline(always)]
    pub(crate) const unsafe fn new(cpu: ExclusiveCpu<'a>, magazines: &'a Magazines) -> Self {
        Self { cpu, magazines }
    }

    /// The CPU's id.
    #[inline(always)]
    pub(crate) const fn id(&self) -> usize {
        self.cpu.id()
    }

    /// The magazines, for what anyone may read.
    #[inline(always)]
    pub(crate) const fn magazines(&self) -> &'a Magazines {
        self.magazines
    }

    /// `f` on the blocks.
    #[inline(always)]
    fn with_blocks<R>(&self, f: impl FnOnce(&mut [usize; ALL_SLOTS]) -> R) -> R {
        // SAFETY: only the execution context that holds CPU `cpu`'s exclusive id reaches
        // these blocks (`ExclusiveCpu`'s promise, and `new`'s that they are that CPU's), and
        // the reference lives for this call alone.
        self.magazines.blocks.with_mut(|b| f(unsafe { &mut *b }))
    }

    /// The last block of `order` pushed (its address; its frame still marked cached: the
    /// caller takes it out); `None` when the magazine for `order` is empty.
    #[inline(always)]
    pub(crate) fn pop(&self, order: Order) -> Option<usize> {
        self.pop_if(order, || true)
    }

    /// [`OwnMagazines::pop`] unless another CPU asked for the blocks back or `busy` (asked
    /// only when the magazine holds a block) says the caller must leave them: `None`,
    /// nothing changed, then as for an empty magazine.
    #[inline(always)]
    pub(crate) fn pop_unless(&self, order: Order, busy: impl FnOnce() -> bool) -> Option<usize> {
        self.pop_if(order, || !self.drain_asked() && !busy())
    }

    /// The last block of `order` pushed if the magazine holds one and `go` (asked only
    /// then) says yes; `None`, nothing changed, otherwise.
    #[inline(always)]
    fn pop_if(&self, order: Order, go: impl FnOnce() -> bool) -> Option<usize> {
        let o = order.get() as usize;
        let held = self.magazines.held.get(o)?;
        let n = held.load(Relaxed).checked_sub(1)?;
        if !go() {
            return None;
        }
        let at = self.with_blocks(|b| b.get(base(o) + n).copied())?;
        held.store(n, Relaxed);
        Some(at)
    }

    /// The last block of `order` pushed that starts at a multiple of `align` bytes (a power
    /// of two), taken out of the array (the blocks above it move down); `None` when the
    /// magazine for `order` holds none.
    #[inline(always)]
    pub(crate) fn pop_aligned(&self, order: Order, align: usize) -> Option<usize> {
        let o = order.get() as usize;
        let held = self.magazines.held.get(o)?;
        let n = held.load(Relaxed);
        let at = self.with_blocks(|b| {
            let blocks = b.get_mut(base(o)..base(o) + n)?;
            let i = blocks
                .iter()
                .rposition(|&at| at & align.wrapping_sub(1) == 0)?;
            let at = blocks[i];
            blocks.copy_within(i + 1.., i);
            Some(at)
        })?;
        held.store(n - 1, Relaxed);
        Some(at)
    }

    /// Pushes the block of `order` at `at` if the magazine for `order` has room and
    /// `admit` (asked only then: the caller marks the block cached there) says yes:
    /// whether it was pushed (`false`: nothing changed but what `admit` did).
    #[inline(always)]
    pub(crate) fn push_if(&self, at: usize, order: Order, admit: impl FnOnce() -> bool) -> bool {
        let o = order.get() as usize;
        let Some(held) = self.magazines.held.get(o) else {
            return false;
        };
        let n = held.load(Relaxed);
        if n >= self.magazines.capacity(o) {
            return false;
        }
        let pushed = self.with_blocks(|b| match b.get_mut(base(o) + n) {
            Some(slot) if admit() => {
                *slot = at;
                true
            }
            _ => false,
        });
        if pushed {
            held.store(n + 1, Relaxed);
        }
        pushed
    }

    /// `f` on the objects.
    #[inline(always)]
    fn with_objects<R>(&self, f: impl FnOnce(&mut [[*mut u8; OBJECT_SLOTS]; CLASSES]) -> R) -> R {
        // SAFETY: as in `with_blocks`.
        self.magazines.objects.with_mut(|o| f(unsafe { &mut *o }))
    }

    /// The last object of `class` pushed, handed out for a request of `bytes` bytes (the
    /// bytes counted); `None` when the magazine for `class` is empty.
    #[inline(always)]
    pub(crate) fn pop_object(&self, class: Class, bytes: usize) -> Option<NonNull<u8>> {
        let c = class.index();
        let held = self.magazines.objects_held.get(c)?;
        let n = held.load(Relaxed).checked_sub(1)?;
        let object = self.with_objects(|o| o.get(c)?.get(n).copied().and_then(NonNull::new))?;
        held.store(n, Relaxed);
        self.count_requested(bytes, true);
        Some(object)
    }

    /// Pushes `object`, freed by a caller that asked for `bytes` bytes (the bytes
    /// uncounted), a free object of one of the owner's slabs of `class` (which counts it
    /// handed out), if the magazine for `class` has room: whether it did.
    #[inline(always)]
    pub(crate) fn push_object(&self, class: Class, object: NonNull<u8>, bytes: usize) -> bool {
        let pushed = self.fill_objects(class, 1, || Some(object)) == 1;
        if pushed {
            self.count_requested(bytes, false);
        }
        pushed
    }

    /// Pushes objects `next` gives (free objects of the owner's slabs of `class`, which count
    /// them handed out), asking it for one while the magazine for `class` has room, at most
    /// `most` times and until it gives none: how many it pushed.
    #[inline(always)]
    pub(crate) fn fill_objects(
        &self,
        class: Class,
        most: usize,
        mut next: impl FnMut() -> Option<NonNull<u8>>,
    ) -> usize {
        let c = class.index();
        let Some(held) = self.magazines.objects_held.get(c) else {
            return 0;
        };
        let n = held.load(Relaxed);
        let pushed = self.with_objects(|o| {
            let Some(room) = o.get_mut(c).and_then(|slots| slots.get_mut(n..)) else {
                return 0;
            };
            let mut pushed = 0;
            for slot in room.iter_mut().take(most) {
                let Some(object) = next() else { break };
                *slot = object.as_ptr();
                pushed += 1;
            }
            pushed
        });
        held.store(n + pushed, Relaxed);
        pushed
    }

    /// Takes up to `most` objects of `class` out of its magazine, the oldest first, each
    /// handed to `f`.
    pub(crate) fn drain_objects(&self, class: Class, most: usize, mut f: impl FnMut(NonNull<u8>)) {
        let c = class.index();
        let Some(held) = self.magazines.objects_held.get(c) else {
            return;
        };
        let n = held.load(Relaxed);
        let taken = self.with_objects(|o| {
            let Some(objects) = o.get_mut(c).and_then(|slots| slots.get_mut(..n)) else {
                return 0;
            };
            let taken = most.min(n);
            for object in objects.iter().take(taken).filter_map(|&o| NonNull::new(o)) {
                f(object);
            }
            objects.copy_within(taken.., 0);
            taken
        });
        held.store(n - taken, Relaxed);
    }

    /// Whether the magazine for `class` holds as many objects as it can.
    #[inline(always)]
    pub(crate) fn objects_full(&self, class: Class) -> bool {
        self.magazines.cached_objects(class) >= OBJECT_SLOTS
    }

    /// Counts an object asked for as `bytes` bytes handed out (`out`) from the object
    /// magazines, or freed into them: a load and a store, the owner being the count's only
    /// writer.
    #[inline(always)]
    fn count_requested(&self, bytes: usize, out: bool) {
        let n = &self.magazines.objects_requested;
        let v = n.load(Relaxed);
        n.store(
            if out {
                v.wrapping_add(bytes)
            } else {
                v.wrapping_sub(bytes)
            },
            Relaxed,
        );
    }

    /// Counts a block of `order` handed out for `kind` (`out`), or given back: a load and a
    /// store, the owner being the count's only writer.
    #[inline(always)]
    pub(crate) fn count(&self, kind: UsageKind, order: Order, out: bool) {
        let bytes = PAGE << order.get();
        let n = &self.magazines.usage[kind as usize];
        let v = n.load(Relaxed);
        let v = if out {
            v.wrapping_add(bytes)
        } else {
            v.wrapping_sub(bytes)
        };
        n.store(v, Relaxed);
    }

    /// Whether the magazine for `order` holds no block.
    #[inline(always)]
    pub(crate) fn is_empty(&self, order: Order) -> bool {
        self.magazines.held(order.get() as usize) == 0
    }

    /// Whether another CPU asked for the blocks back (left as it is: the call that honours
    /// it takes it).
    #[inline(always)]
    pub(crate) fn drain_asked(&self) -> bool {
        self.magazines.drain.load(Relaxed)
    }

    /// Whether another CPU asked for the blocks back (cleared by reading it, so that one
    /// request is honoured once).
    #[inline(always)]
    pub(crate) fn take_drain_request(&self) -> bool {
        take(&self.magazines.drain)
    }

    /// Whether another CPU asked for the objects back (cleared by reading it, as
    /// [`OwnMagazines::take_drain_request`]).
    #[inline(always)]
    pub(crate) fn take_object_drain_request(&self) -> bool {
        take(&self.magazines.drain_objects)
    }
}

/// Whether `flag` (a request that others set and its owner alone clears) was set, cleared:
/// a load and, when set, a store (another CPU's request made meanwhile is the same request).
#[inline(always)]
fn take(flag: &AtomicBool) -> bool {
    if flag.load(Relaxed) {
        flag.store(false, Relaxed);
        return true;
    }
    false
}

/// Bytes per page.
const PAGE: usize = crate::frames::PAGE;
