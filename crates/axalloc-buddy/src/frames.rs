//! The page allocator: a buddy-sim zone over the memory ArceOS hands to `global_init`, whose
//! metadata lives at the head of that memory (as Linux's `mem_map` lives in RAM): one
//! [`Frame`] per 4 KiB frame, one [`PerCpu`] list set per CPU, the zone, and one
//! [`AxPageAllocator`] per CPU behind an interrupt-disabling lock.
//!
//! Frames are numbered by their virtual address (`vaddr / 4 KiB`): alignment requests are
//! about the addresses ArceOS receives, and no physical-to-virtual offset is needed.

use crate::cpu::{CpuId, Pinned};
use crate::lock::{IrqOff, IrqSpin, IrqSpinGuard};
use crate::magazine::{Magazines, OwnMagazines, capacities};
use crate::owner::OwnerTag;
use crate::slab::{Class, Owner, SlabBytes, Slabs};
use crate::usage::{UsageCounts, UsageKind};
use axallocator::PageAllocator;
use buddy_sim::{
    AxPageAllocator, BuddyError, ConfigError, DefaultRawMutex, Frame, FrameClearer, LocalCpu,
    OffsetMap, Order, PerCpu, Pfn, Zone, ZoneConfig,
};
use core::alloc::{Layout, LayoutError};
use core::fmt;
use core::num::NonZeroUsize;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use log::warn;

/// Bytes per frame.
pub(crate) const PAGE: usize = 4096;

/// The largest order the per-cpu lists hold ([`ZoneConfig::pcp_max_order`], see
/// [`zone_config`]): runs up to 256 KiB.
pub(crate) const PCP_MAX_ORDER: Order = match Order::new(6) {
    Ok(order) => order,
    Err(_) => panic!("order 6 is an order"),
};

/// Whether blocks of `order` are a CPU list's (see [`zone_config`]).
#[inline(always)]
pub(crate) const fn is_listed(order: Order) -> bool {
    order.get() <= PCP_MAX_ORDER.get()
}

/// A request of `num_pages` pages aligned to `align` bytes that one block serves whole: the
/// block's order, and the order of frames it must start aligned to where that is above the
/// block's own. A power of two of pages aligned to a power of two of at least a page (frames
/// are numbered by their address, so a block of `2^k` pages starts at a multiple of its
/// size). `None` otherwise.
#[inline(always)]
fn block_of(num_pages: usize, align: usize) -> Option<(Order, Option<Order>)> {
    block_up_to(Order::MAX_SUPPORTED, num_pages, align)
}

/// [`block_of`] a request a block from a CPU's list serves: up to the lists' largest order.
#[inline(always)]
pub(crate) fn listed_block(num_pages: usize, align: usize) -> Option<(Order, Option<Order>)> {
    block_up_to(PCP_MAX_ORDER, num_pages, align)
}

/// The order of a block of `num_pages` pages, if that is a power of two of at most
/// `largest` order: the bound is tested first (0 wraps above it), then the single bit.
#[inline(always)]
pub(crate) fn order_up_to(largest: Order, num_pages: usize) -> Option<Order> {
    let below = num_pages.wrapping_sub(1);
    if below >= largest.pages() as usize || num_pages & below != 0 {
        return None;
    }
    Order::new(num_pages.trailing_zeros() as u8).ok()
}

/// [`block_of`] a block of at most `largest` order. The size is tested first against the
/// bound, and an alignment up to the block's size (the common request) needs no order of
/// its own: a task stack's allocation takes 10 fewer instructions than with
/// `is_power_of_two` of both and two checked orders (callgrind).
#[inline(always)]
fn block_up_to(largest: Order, num_pages: usize, align: usize) -> Option<(Order, Option<Order>)> {
    let order = order_up_to(largest, num_pages)?;
    // A power of two of at least a page (0 is below one).
    if align < PAGE || align & (align - 1) != 0 {
        return None;
    }
    // At most the block's size.
    if align / PAGE <= num_pages {
        return Some((order, None));
    }
    let align = Order::new((align / PAGE).trailing_zeros() as u8).ok()?;
    Some((order, Some(align)))
}

/// The order of [`block_of`] a request above the lists' orders, aligned to at most its size:
/// a block the buddy serves whole (a heap's growth). A larger alignment is the general
/// path's, which splits a block of the alignment's order.
#[inline(always)]
pub(crate) fn unlisted_block(num_pages: usize, align: usize) -> Option<Order> {
    match block_of(num_pages, align)? {
        (order, None) if !is_listed(order) => Some(order),
        _ => None,
    }
}

/// The frame at address `pos`, if `pos` is a page's start (frames are numbered by their
/// address).
#[inline(always)]
fn pfn_of(pos: usize) -> Option<Pfn> {
    pos.is_multiple_of(PAGE).then_some(Pfn((pos / PAGE) as u64))
}

/// The configuration the page allocator gives its zone of `frames` frames from `first`,
/// for `cpus` CPUs (what [`global_init`](crate::global_init) builds; validate it before
/// use, as a region may be too small for it):
/// - blocks up to the largest that fits the region, as buddy-slab-allocator's and TLSF's:
///   a heap growth of 32 MiB is one block, not a search of the free memory;
/// - per-cpu lists up to order 6, so that runs up to 256 KiB (ArceOS's task stack) take
///   the CPU's list, not the zone lock and a split and merge through every order;
/// - lists sized for the kernel's only zone rather than by Linux's small-zone rule (a
///   128 MiB zone would get batches of 7 and a high mark of 452 frames): a page-table build
///   of 512 pages then stays on the lists instead of refilling and draining every 7 pages.
///   At most an eighth of the memory sits on all lists together, and a batch is at most a
///   quarter of the high mark (Linux's ratio), so a tiny zone keeps Linux's sizes;
/// - each CPU's high mark tuned as Linux 6.7 tunes it ([`ZoneConfig::pcp_high_max`]), up to
///   an eighth of the memory per CPU: a burst of task stacks larger than the fixed mark
///   (32 of 64 pages are 2048 frames) stays on the CPU's list after its second round
///   instead of draining to the buddy and refilling every two stacks. The mark grows only
///   while the zone's free memory is above its high watermark and shrinks when a free finds
///   it below; every list is drained before an allocation fails.
#[must_use]
pub fn zone_config(first: Pfn, frames: u64, cpus: usize) -> ZoneConfig {
    let max_order = Order::floor_log2(frames, Order::MAX_SUPPORTED);
    let mut cfg = ZoneConfig::new(first, frames)
        .with_cpus(cpus)
        .with_max_order(max_order)
        .with_pcp_max_order(PCP_MAX_ORDER);
    let eighth_per_cpu = frames / 8 / cpus.max(1) as u64;
    cfg.pcp_high = cfg.pcp_high.max(eighth_per_cpu.min(1024));
    cfg.pcp_batch = cfg
        .pcp_batch
        .max((cfg.pcp_high / 4).min(buddy_sim::LINUX_PCP_BATCH));
    cfg.pcp_high_max = buddy_sim::pcp_high_max_for(frames, cpus, cfg.pcp_batch);
    cfg
}

/// The zone under the page allocator, its metadata in the memory it manages.
pub type PageZone = Zone<&'static [Frame], &'static [PerCpu<DefaultRawMutex>], DefaultRawMutex>;

/// A CPU's lists of a [`PageZone`], reached without their lock ([`Frames::local_lists`]).
type LocalLists =
    LocalCpu<'static, &'static [Frame], &'static [PerCpu<DefaultRawMutex>], DefaultRawMutex>;

/// One CPU's page allocator over the zone.
pub(crate) type CpuPages =
    AxPageAllocator<'static, &'static [Frame], &'static [PerCpu<DefaultRawMutex>], DefaultRawMutex>;

/// What one CPU's lock protects: its page allocator, its slabs of the heap's small objects
/// and its change of the usage counts, so that a page call, or a small object's, takes one
/// lock. Aligned so that two CPUs' slots (and their locks) never share a cache line, as the
/// zone's per-cpu lists do not.
#[repr(align(128))]
pub(crate) struct CpuSlot {
    /// The CPU whose lists these are.
    id: usize,
    /// Its lists: entry `id` of the zone's per-cpu metadata.
    lists: &'static PerCpu<DefaultRawMutex>,
    pub(crate) pages: CpuPages,
    pub(crate) usage: UsageCounts,
    /// The slabs this CPU made, and the bytes their objects handed out were asked for (the
    /// first region's slots' only: the heap's are there).
    pub(crate) slabs: Slabs,
}

impl CpuSlot {
    /// The CPU whose lists these are.
    pub(crate) fn id(&self) -> usize {
        self.id
    }
}

/// Why the memory given at initialization cannot hold a page allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitError {
    /// The allocator was initialized before: ArceOS initializes it once.
    AlreadyInitialized,
    /// Past the metadata (`metadata` bytes), the region has fewer than `need` whole pages.
    TooSmall {
        /// The region's size in bytes.
        size: usize,
        /// Bytes its metadata takes.
        metadata: usize,
        /// Free pages the allocator needs past the metadata.
        need: usize,
    },
    /// The region ends past the end of the address space.
    Overflow,
    /// The region overlaps one given to the heap before
    /// ([`GlobalAllocator::add_memory`](crate::GlobalAllocator::add_memory)).
    Overlap,
    /// No CPU to allocate for (a CPU count of 0).
    NoCpus,
    /// The zone refused its configuration.
    Config(ConfigError),
    /// The zone refused the memory or a CPU.
    Zone(BuddyError),
    /// The zone has no run for the heap's first 32 KiB.
    FirstHeap,
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AlreadyInitialized => write!(f, "the page allocator is already initialized"),
            Self::TooSmall {
                size,
                metadata,
                need,
            } => write!(
                f,
                "{size} bytes leave fewer than {need} pages past {metadata} bytes of metadata"
            ),
            Self::Overflow => write!(f, "the region ends past the end of the address space"),
            Self::Overlap => write!(f, "the region overlaps one given to the heap before"),
            Self::NoCpus => write!(f, "no CPU to allocate for"),
            Self::Config(e) => write!(f, "zone configuration: {e}"),
            Self::Zone(e) => write!(f, "zone: {e}"),
            Self::FirstHeap => write!(f, "no pages for the first heap"),
        }
    }
}

impl core::error::Error for InitError {}

impl From<LayoutError> for InitError {
    fn from(_: LayoutError) -> Self {
        Self::Overflow
    }
}

/// Pages the allocator needs past its metadata: the first heap (32 KiB, 8 pages, as ArceOS's
/// axalloc requires) as one aligned block, which any 15 consecutive free pages hold.
pub(crate) const MIN_PAGES: usize = 16;

/// Where each piece of metadata starts, in bytes from the region's first page.
struct Head {
    pcps: usize,
    zone: usize,
    cpus: usize,
    magazines: usize,
    /// Bytes of the whole head.
    size: usize,
}

impl Head {
    /// The head of a region of `frames` frames for `cpus` CPUs.
    fn of(frames: usize, cpus: usize) -> Result<Self, InitError> {
        let head = Layout::array::<Frame>(frames)?;
        let (head, pcps) = head.extend(Layout::array::<PerCpu<DefaultRawMutex>>(cpus)?)?;
        let (head, zone) = head.extend(Layout::new::<PageZone>())?;
        let (head, slots) = head.extend(Layout::array::<IrqSpin<CpuSlot>>(cpus)?)?;
        let (head, magazines) = head.extend(Layout::array::<Magazines>(cpus)?)?;
        // Every piece is aligned relative to the head's start; the head starts on a page, so
        // they are aligned in memory too (no piece asks for more than a page).
        debug_assert!(head.align() <= PAGE);
        Ok(Self {
            pcps,
            zone,
            cpus: slots,
            magazines,
            size: head.size(),
        })
    }
}

/// The page allocator: the zone, each CPU's allocator over it, and the clearer of zeroed
/// pages, asking `C` which CPU a call runs on.
pub(crate) struct Frames<C> {
    zone: &'static PageZone,
    cpus: &'static [IrqSpin<CpuSlot>],
    /// `cpus[0]` (`carve` refuses 0 CPUs).
    cpu0: &'static IrqSpin<CpuSlot>,
    /// Each CPU's magazines, for a [`CpuId`] that gives exclusive ids
    /// ([`CpuId::exclusive_cpu`]): entry `id` is CPU `id`'s.
    magazines: &'static [Magazines],
    clearer: FrameClearer<OffsetMap>,
    /// Which CPU a call runs on.
    cpu_id: C,
    /// The whole region the allocator was given, `[start, end)`, metadata included.
    region: (usize, usize),
    /// Whether all of the region lies below 4 GiB in physical memory.
    dma32: bool,
    /// Whether a page call found no free page here (its slow path included) and no run
    /// was given back or taken here since: page calls take what the CPU's list holds and
    /// otherwise try the other regions first, as Linux's zonelist passes over a zone below
    /// its watermark before any zone's slow path (a hint; a call that finds nothing
    /// elsewhere tries every region again, drained).
    exhausted: AtomicBool,
}

impl<C: CpuId> Frames<C> {
    /// A page allocator over the whole pages of `[start, start + size)` for `cpus` CPUs, its
    /// metadata at the head of that memory, the rest free; `dma32` says whether all of it
    /// lies below 4 GiB in physical memory.
    ///
    /// # Errors
    /// [`InitError`] says what the region lacks; nothing is written then.
    ///
    /// # Safety
    /// `[start, start + size)` is memory that nothing else uses, readable and writable at
    /// these addresses, for as long as the allocator or anything it handed out is used.
    pub(crate) unsafe fn carve(
        start: usize,
        size: usize,
        cpus: usize,
        cpu_id: C,
        dma32: bool,
    ) -> Result<Self, InitError> {
        if cpus == 0 {
            return Err(InitError::NoCpus);
        }
        let region_end = start.checked_add(size).ok_or(InitError::Overflow)?;
        let end = region_end / PAGE * PAGE;
        let first = start
            .checked_next_multiple_of(PAGE)
            .ok_or(InitError::Overflow)?;
        let frames = end.saturating_sub(first) / PAGE;
        let head = Head::of(frames, cpus)?;
        let free_from = first
            .checked_add(head.size)
            .and_then(|h| h.checked_next_multiple_of(PAGE))
            .ok_or(InitError::Overflow)?;
        let free = end.saturating_sub(free_from) / PAGE;
        if free < MIN_PAGES {
            return Err(InitError::TooSmall {
                size,
                metadata: head.size,
                need: MIN_PAGES,
            });
        }
        let cfg = zone_config(Pfn((first / PAGE) as u64), frames as u64, cpus);
        cfg.validate().map_err(InitError::Config)?;
        let at = first as *mut u8;
        // SAFETY: the caller gives this memory to the allocator while it is used; `Head::of`
        // laid the pieces out inside its first `head.size` bytes (below `free_from <= end`),
        // each aligned for its type (the region's first byte is page-aligned). Each piece
        // is written whole before a reference to it is made. The references are `'static`
        // because the allocator lives in a `static` in a kernel; an allocator over memory
        // that ends (a test's) is dropped before it, and uses none of them after.
        unsafe {
            let frame_at = at.cast::<Frame>();
            for i in 0..frames {
                frame_at.add(i).write(Frame::new());
            }
            let frame_slice: &'static [Frame] = core::slice::from_raw_parts(frame_at, frames);
            let pcp_at = at.add(head.pcps).cast::<PerCpu<DefaultRawMutex>>();
            for i in 0..cpus {
                pcp_at.add(i).write(PerCpu::new());
            }
            let pcps: &'static [PerCpu<DefaultRawMutex>] =
                core::slice::from_raw_parts(pcp_at, cpus);
            let zone = Zone::new_empty(cfg, frame_slice, pcps).map_err(InitError::Config)?;
            let zone_at = at.add(head.zone).cast::<PageZone>();
            zone_at.write(zone);
            let zone: &'static PageZone = &*zone_at;
            zone.add_memory(Pfn((free_from / PAGE) as u64), free as u64)
                .map_err(|e| InitError::Zone(e.into()))?;
            let cpu_at = at.add(head.cpus).cast::<IrqSpin<CpuSlot>>();
            for (cpu, lists) in pcps.iter().enumerate() {
                // SAFETY (of `new`): the allocator frees only what its caller hands back
                // through `GlobalAllocator::dealloc_pages`, an `unsafe fn` whose contract is
                // this one's (pages it allocated, given back once, not used after).
                // SAFETY (of `cpu_local`): CPU `cpu`'s lists are reached only through this
                // allocator, and it only under slot `cpu`'s lock (with interrupts off on the
                // CPU that holds it), or with every slot's lock held (`every_cpu`): no two
                // calls reach them at once, and no call visits every CPU's lists while
                // another is inside one (the zone is not handed out but through
                // `GlobalAllocator::zone`, an `unsafe fn` with that contract).
                let pages = AxPageAllocator::new(zone, cpu, 0)
                    .map_err(InitError::Zone)?
                    .cpu_local();
                cpu_at.add(cpu).write(IrqSpin::new(CpuSlot {
                    id: cpu,
                    lists,
                    pages,
                    usage: UsageCounts::new(),
                    slabs: Slabs::new(),
                }));
            }
            let cpu_pages: &'static [IrqSpin<CpuSlot>] = core::slice::from_raw_parts(cpu_at, cpus);
            let magazine_at = at.add(head.magazines).cast::<Magazines>();
            for i in 0..cpus {
                magazine_at
                    .add(i)
                    .write(Magazines::new(capacities(frames, cpus)));
            }
            let magazines: &'static [Magazines] = core::slice::from_raw_parts(magazine_at, cpus);
            // `cpus` is at least 1 (checked above): slot 0 was written.
            let cpu0 = &*cpu_at;
            // SAFETY (of `OffsetMap::new`): frame `pfn` is the page at `pfn * 4 KiB` (frames
            // are numbered by address), which the zone hands to one owner at a time.
            let clearer = FrameClearer::detected(OffsetMap::new(0));
            Ok(Self {
                zone,
                cpus: cpu_pages,
                cpu0,
                magazines,
                clearer,
                cpu_id,
                region: (start, region_end),
                dma32,
                exhausted: AtomicBool::new(false),
            })
        }
    }

    /// Whether a page call found no free page here and no run came back or was taken since.
    #[inline(always)]
    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// Records that a page call found no free page here (`true`), or that the region has
    /// pages again (`false`: a run given back, or a call that found one).
    #[inline(always)]
    pub(crate) fn set_exhausted(&self, exhausted: bool) {
        // A load first: the common free, in a region never exhausted, writes nothing to
        // this cache line that every CPU reads.
        if self.exhausted() != exhausted {
            self.exhausted.store(exhausted, Ordering::Relaxed);
        }
    }

    /// The whole region the allocator was given, `[start, end)`, metadata included.
    pub(crate) fn region(&self) -> (usize, usize) {
        self.region
    }

    /// Whether `vaddr` lies in the region.
    #[inline]
    pub(crate) fn holds(&self, vaddr: usize) -> bool {
        self.region.0 <= vaddr && vaddr < self.region.1
    }

    /// Whether all of the region lies below 4 GiB in physical memory.
    pub(crate) fn dma32(&self) -> bool {
        self.dma32
    }

    /// The zone. Its per-cpu lists are the slots' alone: a call that visits them (a
    /// drain, `free_pages_total`, `check`) must run while no page call does.
    pub(crate) fn zone(&self) -> &'static PageZone {
        self.zone
    }

    /// Free frames: the buddy's, and each CPU's lists' read under that CPU's slot lock and
    /// its magazines'.
    pub(crate) fn free_pages(&self) -> u64 {
        let listed: u64 = (0..self.cpus.len())
            .filter_map(|cpu| self.pcp_pages(cpu))
            .sum();
        self.zone.buddy_pages() + listed
    }

    /// Frames on CPU `cpu`'s per-cpu lists, read under its slot lock, and in its magazines;
    /// `None` past the CPUs.
    pub(crate) fn pcp_pages(&self, cpu: usize) -> Option<u64> {
        let slot = self.cpus.get(cpu)?.lock();
        // The slot lock held: no call is inside this CPU's lists.
        let pages = self.zone.pcp_pages(cpu).ok();
        drop(slot);
        let cached = self.magazines.get(cpu).map_or(0, Magazines::pages);
        pages.map(|p| p + cached)
    }

    /// [`Cpu::decay_pcp_high`](buddy_sim::Cpu::decay_pcp_high) on the lists of the CPU this
    /// call runs on, under its slot's lock: whether there is more to do at the next tick.
    pub(crate) fn decay_lists(&self) -> bool {
        self.honour_drain_request();
        let cpu = self.this_cpu();
        // SAFETY: as in `take_on_slot`.
        let lists = unsafe { self.local_lists(&cpu) };
        lists.decay_pcp_high()
    }

    /// `f` on the slot of the CPU this call runs on, with every CPU's slot locked (in CPU
    /// order; a page call holds one slot lock and waits for no other): for the calls that
    /// reach other CPUs' lists (taking a run at a fixed address drains the lists that hold
    /// part of it).
    pub(crate) fn every_cpu<T>(&self, f: impl FnOnce(&mut CpuSlot) -> T) -> Option<T> {
        self.give_back_magazines();
        crate::lock::with_all(self.cpus, |irq| self.cpu_index(irq), f)
    }

    /// Returns every CPU's per-cpu lists to the buddy, every slot held (Linux's
    /// `drain_all_pages`, which an allocation's slow path runs before it gives up: the pages
    /// other CPUs keep on their lists may complete the block it wants). Whether the lists
    /// held any page; with one CPU, `false` at once (the zone's slow path drained its lists
    /// already).
    pub(crate) fn drain_every_cpu(&self) -> bool {
        // The calling CPU's magazines too (which the zone's slow path did not see).
        let flushed = self.give_back_magazines();
        if self.cpus.len() <= 1 {
            return flushed;
        }
        let zone = self.zone;
        let drained = crate::lock::with_all(
            self.cpus,
            |irq| self.cpu_index(irq),
            |_| {
                // Every slot's lock held: no call is inside any CPU's lists.
                let held = (0..self.cpus.len()).any(|c| zone.pcp_pages(c).is_ok_and(|n| n > 0));
                zone.drain_all();
                held
            },
        );
        drained.unwrap_or(false) | flushed
    }

    /// The CPUs the zone has lists for.
    pub(crate) fn cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Bytes of a block of the zone's largest order.
    pub(crate) fn largest_block_bytes(&self) -> usize {
        PAGE << self.zone.config().max_order.get()
    }

    /// CPU `cpu`'s slot, locked with interrupts and preemption off (a free of a small
    /// object takes the lock of the CPU whose slab holds it); `None` past the CPUs.
    #[inline(always)]
    pub(crate) fn lock_cpu(&self, cpu: usize) -> Option<IrqSpinGuard<'_, CpuSlot>> {
        Some(self.cpus.get(cpu)?.lock())
    }

    /// What every CPU's slabs hold, one CPU's lock at a time.
    pub(crate) fn slab_bytes(&self) -> SlabBytes {
        let mut sum = SlabBytes::NONE;
        self.each_cpu_slabs(|slabs, magazines| {
            let cached = Class::all()
                .map(|class| magazines.cached_objects(class) * class.bytes())
                .sum();
            sum = sum
                + slabs
                    .bytes()
                    .with_cached(cached, magazines.objects_requested());
        });
        sum
    }

    /// `f` on every CPU's slabs and its magazines (whose objects the slabs count handed
    /// out), one CPU's lock at a time.
    pub(crate) fn each_cpu_slabs(&self, mut f: impl FnMut(&Slabs, &Magazines)) {
        for (cpu, magazines) in self.cpus.iter().zip(self.magazines) {
            f(&cpu.lock().slabs, magazines);
        }
    }

    /// Each CPU's change of the usage counts, one CPU's lock at a time. (The heap's pages
    /// included, which page calls count under [`UsageKind::RustHeap`] with no test on the
    /// fast path: the heap tells its blocks' from its slabs' and its byte allocator's.)
    pub(crate) fn usage_counts(&self) -> impl Iterator<Item = UsageCounts> + '_ {
        self.cpus
            .iter()
            .zip(self.magazines)
            .map(|(cpu, magazines)| cpu.lock().usage.plus(magazines.usage()))
    }

    /// The clearer of zeroed pages (zero-core's detected policy).
    pub(crate) fn clearer(&self) -> &FrameClearer<OffsetMap> {
        &self.clearer
    }

    /// A block of `order` for `kind` from the calling CPU's lists (the zone's frozen block,
    /// as `AxPageAllocator` hands out a block's worth of pages: its free takes it back),
    /// starting aligned to `2^align` frames where `align` is given (above `order`),
    /// counted, recorded with `tag` (page_owner); `None` when the CPU's list for the order
    /// has none (so aligned): with no alignment asked, past a refill of the list and the
    /// slow path, unless the region is exhausted; otherwise at once, changing nothing (the
    /// general path then splits, looks further and records why). With an exclusive CPU id,
    /// from the CPU's magazine for the order when it holds such a block (frees fill it).
    #[inline(always)]
    pub(crate) fn alloc_block(
        &self,
        order: Order,
        align: Option<Order>,
        kind: UsageKind,
        tag: OwnerTag,
    ) -> Option<NonZeroUsize> {
        // The magazine's pop alone inline, the rest a call away whose answer is this one's
        // (one register: a tail call), so that the pop saves no registers for the lists'
        // path.
        if align.is_none()
            && let Some(at) = self.pop_magazine(order, kind).and_then(NonZeroUsize::new)
        {
            return Some(at);
        }
        self.alloc_past_magazine(order, align, kind, tag)
    }

    /// [`Frames::alloc_block`] past the magazine's pop: an aligned block from the magazine,
    /// a drain or debugging honoured, else the CPU's lists under its slot.
    #[inline(never)]
    fn alloc_past_magazine(
        &self,
        order: Order,
        align: Option<Order>,
        kind: UsageKind,
        tag: OwnerTag,
    ) -> Option<NonZeroUsize> {
        let irq = IrqOff::new();
        let mut known = None;
        if let Some(own) = self.exclusive(&Pinned::new(&irq)) {
            if let Some(at) = self.pop_cached(&own, order, align, kind) {
                return NonZeroUsize::new(at);
            }
            // An empty magazine is filled by frees alone: the call takes the lists' block,
            // as without a magazine (a refill from the lists would move each block of a
            // burst twice: 512 pages taken then freed cost 359 instructions a pair that
            // way, against 179 without magazines and 193 now, callgrind).
            known = Some(own.id());
        }
        let taken = self.take_on_slot_masked(
            (irq, known),
            order,
            kind,
            tag,
            #[inline(always)]
            |lists| match align {
                None => lists.alloc_frozen_pages_listed(order),
                Some(align) => lists.alloc_frozen_aligned_listed(order, align),
            },
        );
        // Nothing taken: the slot was let go before the refill, which takes it again, so
        // that the list's pop keeps nothing for after a call.
        if taken.is_none() && align.is_none() {
            return self
                .refill_list(order, kind, tag)
                .and_then(NonZeroUsize::new);
        }
        taken.and_then(NonZeroUsize::new)
    }

    /// A block of `order` above the listed orders ([`unlisted_block`]) from the zone under
    /// the calling CPU's slot (the list of the pageblock order's blocks, else the buddy under
    /// the zone lock), counted for `kind`: its address. `None`, changing nothing, when the
    /// region is [exhausted](Frames::exhausted) or the zone has no such block: the general
    /// path then looks further (other regions, every CPU's lists drained) and records why.
    #[inline(always)]
    pub(crate) fn alloc_unlisted_block(
        &self,
        order: Order,
        kind: UsageKind,
        tag: OwnerTag,
    ) -> Option<usize> {
        if self.exhausted() {
            return None;
        }
        self.take_on_slot(order, kind, tag, |lists| {
            lists.alloc_frozen_pages(order).ok()
        })
    }

    /// [`Frames::alloc_block`] of a block of `order` past the calling CPU's list, with no
    /// alignment asked: a refill of the list and the slow path, unless the region is
    /// [exhausted](Frames::exhausted); out of line, so that the list's pop carries none of
    /// it. A page none of those has marks the region exhausted; a larger block none has says
    /// nothing of pages (the general path decides).
    #[cold]
    #[inline(never)]
    fn refill_list(&self, order: Order, kind: UsageKind, tag: OwnerTag) -> Option<usize> {
        if self.exhausted() {
            return None;
        }
        let at = self.take_on_slot(order, kind, tag, |lists| {
            lists.alloc_frozen_pages(order).ok()
        });
        if order == Order::ZERO {
            self.set_exhausted(at.is_none());
        }
        at
    }

    /// What `take` takes from the calling CPU's lists (a frozen block of `order`), under
    /// the CPU's slot, recorded with `tag` (page_owner) and counted for `kind`: its address.
    /// The slot is let go before this returns.
    #[inline(always)]
    fn take_on_slot(
        &self,
        order: Order,
        kind: UsageKind,
        tag: OwnerTag,
        take: impl FnOnce(&LocalLists) -> Option<Pfn>,
    ) -> Option<usize> {
        self.take_on_slot_masked((IrqOff::new(), None), order, kind, tag, take)
    }

    /// [`Frames::take_on_slot`] with interrupts and preemption already off (`irq`, which
    /// the slot's guard keeps until it drops), on the slot of the CPU `known` names if it
    /// names one (the calling CPU's, asked already).
    #[inline(always)]
    fn take_on_slot_masked(
        &self,
        (irq, known): (IrqOff, Option<usize>),
        order: Order,
        kind: UsageKind,
        tag: OwnerTag,
        take: impl FnOnce(&LocalLists) -> Option<Pfn>,
    ) -> Option<usize> {
        let mut cpu = IrqSpin::lock_masked(irq, |irq| self.slot_of(irq, known));
        tag.set(self.zone, cpu.id);
        // SAFETY: `cpu` is this allocator's slot, its lock held until the call ends.
        let lists = unsafe { self.local_lists(&cpu) };
        let pfn = take(&lists)?;
        cpu.usage.add(kind, PAGE << order.get());
        // Frames are numbered by their address: the frame's number times its size is its
        // address, which the region holds.
        Some(pfn.0 as usize * PAGE)
    }

    /// Gives back the block of `order` at `pos`, one of this region's, handed out whole (a
    /// page alone, or a block's worth of pages up to the listed orders), and uncounts it
    /// for `kind`; a block the zone refuses there (part of a run, a block of another order,
    /// or not allocated) through [`Frames::give_back`], which frees or reports it.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`](crate::GlobalAllocator::dealloc_pages).
    #[inline(always)]
    pub(crate) unsafe fn free_block(&self, pos: usize, order: Order, kind: UsageKind) {
        let Some(pfn) = pfn_of(pos) else {
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.give_back(pos, order.pages() as usize, kind) };
        };
        if !is_listed(order) {
            // `free_unlisted_block`'s (`dealloc_pages` sends those orders there). The test
            // also tells the listed path below that the order is a list's, though both
            // callers pass one: without it a two-page alloc + free took 228 instructions
            // instead of 219 (callgrind).
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.free_to_zone(pos, pfn, order, kind) };
        }
        // The magazine's push alone inline, the rest a call away (as `alloc_block`).
        // SAFETY: the caller's promise, passed on.
        if unsafe { self.push_cached(pos, pfn, order, kind) } {
            return;
        }
        // Not an exclusive CPU, a full magazine, or not a frozen block of `order` handed out
        // whole: the lists' free says what it is (and the general free frees or reports
        // it).
        // SAFETY: the caller's promise, passed on.
        unsafe { self.free_past_magazine(pos, order, kind) }
    }

    /// [`Frames::free_block`] of a listed block at `pos` (a whole page's address) its CPU's
    /// magazine did not take: onto the CPU's list under its slot, else through the zone's
    /// whole free.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`](crate::GlobalAllocator::dealloc_pages).
    #[inline(never)]
    unsafe fn free_past_magazine(&self, pos: usize, order: Order, kind: UsageKind) {
        // The frame's number again from the address (`free_block` found it a whole page's),
        // so that the magazine's push keeps one value less live past its tests.
        let Some(pfn) = pfn_of(pos) else {
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.give_back(pos, order.pages() as usize, kind) };
        };
        let cpu = IrqSpin::lock_masked(IrqOff::new(), |irq| self.slot(irq));
        // SAFETY: as in `take_on_slot`.
        let lists = unsafe { self.local_lists(&cpu) };
        // SAFETY: the caller's promise (a block this allocator handed out, given back once,
        // not used after); on `false` nothing changed and the block is still the caller's.
        if !unsafe { lists.free_frozen_pages_listed(pfn, order) } {
            // Not a push onto the list's array alone: the slot is let go, and the free
            // that may drain, or refuse, takes it again.
            drop(cpu);
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.free_to_zone(pos, pfn, order, kind) };
        }
        Self::uncount(cpu, order, kind);
    }

    /// [`Frames::free_block`] of a block above the listed orders ([`unlisted_block`]'s),
    /// the zone's whole free at once under one lock (a listed attempt first would take it
    /// twice); anything but such a block handed out whole through [`Frames::give_back`].
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`](crate::GlobalAllocator::dealloc_pages).
    #[inline(always)]
    pub(crate) unsafe fn free_unlisted_block(&self, pos: usize, order: Order, kind: UsageKind) {
        match pfn_of(pos) {
            // SAFETY: the caller's promise, passed on.
            Some(pfn) => unsafe { self.free_to_zone(pos, pfn, order, kind) },
            // SAFETY: the caller's promise, passed on.
            None => unsafe { self.give_back(pos, order.pages() as usize, kind) },
        }
    }

    /// [`Frames::free_block`] of a block (frame `pfn`, at `pos`) its list's array does not
    /// take at once (every block above the listed orders): the zone's whole free (to the
    /// list with a drain past its high mark, or to the buddy), out of line; one the zone
    /// refuses through [`Frames::give_back`].
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`](crate::GlobalAllocator::dealloc_pages).
    #[inline(never)]
    unsafe fn free_to_zone(&self, pos: usize, pfn: Pfn, order: Order, kind: UsageKind) {
        let cpu = self.this_cpu();
        // SAFETY: as in `take_on_slot`.
        let lists = unsafe { self.local_lists(&cpu) };
        // SAFETY: the caller's promise (a block this allocator handed out, given back once,
        // not used after); `free_frozen_pages` frees only a frozen block of this order and
        // changes nothing otherwise.
        if unsafe { lists.free_frozen_pages(pfn, order) }.is_err() {
            drop(cpu);
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.give_back(pos, order.pages() as usize, kind) };
        }
        self.freed(cpu, order, kind);
    }

    /// The general free of this region: the `num_pages` pages from `pos` (a run or any part
    /// of one, or a block the fast paths did not free), uncounted for `kind`; a run the
    /// page allocator refuses changes nothing and is logged with why. Out of line.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`](crate::GlobalAllocator::dealloc_pages).
    #[inline(never)]
    pub(crate) unsafe fn give_back(&self, pos: usize, num_pages: usize, kind: UsageKind) {
        let mut cpu = self.this_cpu();
        cpu.pages.dealloc_pages(pos, num_pages);
        match cpu.pages.last_error() {
            None => {
                cpu.usage.sub(kind, num_pages.wrapping_mul(PAGE));
                self.set_exhausted(false);
            }
            Some(e) => {
                drop(cpu);
                warn!("dealloc_pages({pos:#x}, {num_pages}): {e}, nothing freed");
            }
        }
    }

    /// The end of a free of a block of `order` through the zone on `cpu`'s slot (held): its
    /// bytes uncounted for `kind` and the slot let go ([`Frames::uncount`]). A page is on
    /// this CPU's list, where the next one-page call finds it whether or not the region is
    /// marked exhausted: nothing to clear for it. A block may have gone to the buddy, where
    /// only a refill finds it: the region has pages again.
    #[inline(always)]
    fn freed(&self, cpu: IrqSpinGuard<'_, CpuSlot>, order: Order, kind: UsageKind) {
        Self::uncount(cpu, order, kind);
        if order != Order::ZERO {
            self.set_exhausted(false);
        }
    }

    /// The end of a free of a block of `order` onto `cpu`'s list (the slot held): its bytes
    /// uncounted for `kind` and the slot let go. Nothing to clear of the region's mark: the
    /// block waits on the list for its order, where the next call for that order finds it
    /// whether or not the region is marked exhausted, and a one-page call finds it only
    /// once the general path drains the lists, which clears the mark when it takes a page
    /// (7 fewer instructions a task stack's free, callgrind: no reach for the region after
    /// the slot).
    #[inline(always)]
    fn uncount(mut cpu: IrqSpinGuard<'_, CpuSlot>, order: Order, kind: UsageKind) {
        cpu.usage.sub(kind, PAGE << order.get());
    }

    /// The calling CPU's magazines, reached as its own, if the [`CpuId`] gives an exclusive
    /// id ([`CpuId::exclusive_cpu`]) within the CPUs.
    #[inline(always)]
    pub(crate) fn exclusive<'a>(&'a self, pinned: &'a Pinned<'_>) -> Option<OwnMagazines<'a>> {
        let cpu = self.cpu_id.exclusive_cpu(pinned)?;
        let magazines = self.magazines.get(cpu.id())?;
        // SAFETY: entry `id` of this allocator's magazines is CPU `id`'s, and `cpu` came
        // from this allocator's `CpuId`.
        Some(unsafe { OwnMagazines::new(cpu, magazines) })
    }

    /// An object of `class` from the calling CPU's object magazine for it, counted as asked
    /// for as `bytes` bytes; `None` when its CPU id is not exclusive or the magazine is
    /// empty (the caller takes one from the CPU's slabs under its slot).
    #[inline(always)]
    pub(crate) fn pop_object(&self, class: Class, bytes: usize) -> Option<NonNull<u8>> {
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        let own = self.exclusive(&pinned)?;
        own.pop_object(class, bytes)
    }

    /// Frees `object` (of `class`, asked for as `bytes` bytes) into the calling CPU's object
    /// magazine for its class if its CPU id is exclusive, the object's slab is that CPU's,
    /// and the magazine has room: whether it did (`false`: nothing changed).
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc`](crate::GlobalAllocator::dealloc) for an object of
    /// `class`, which this region's slots' slabs served.
    #[inline(always)]
    pub(crate) unsafe fn push_object(
        &self,
        class: Class,
        object: NonNull<u8>,
        bytes: usize,
    ) -> bool {
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        let Some(own) = self.exclusive(&pinned) else {
            return false;
        };
        // SAFETY: the caller's promise: the object is handed out, so its slab lives.
        if unsafe { Slabs::owner_of(class, object) } != Ok(Owner::Cpu(own.id())) {
            return false;
        }
        own.push_object(class, object, bytes)
    }

    /// A block of `order` from the calling CPU's magazine for it when nothing else is to be
    /// done: its CPU id exclusive, a block there, no drain asked and the zone not debugging;
    /// taken out of the cache and counted for `kind`. `None`, nothing changed, otherwise
    /// ([`Frames::alloc_past_magazine`] does the rest).
    #[inline(always)]
    fn pop_magazine(&self, order: Order, kind: UsageKind) -> Option<usize> {
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        let own = self.exclusive(&pinned)?;
        let at = own.pop_unless(order, || self.zone.debugging())?;
        self.take_out(&own, at, order, kind)
    }

    /// A block of `order` from the CPU's magazine for it (the last freed there, or the last
    /// that starts aligned to `2^align` frames where `align` is given), taken out of the
    /// cache and counted for `kind`; `None` when the magazine has none, or when another CPU
    /// asked for the blocks back or the zone debugs (page_owner, fault injection, poisoning:
    /// it records and checks every block it hands out, and refuses to cache one): they go
    /// back to the lists first.
    #[inline(always)]
    fn pop_cached(
        &self,
        own: &OwnMagazines<'_>,
        order: Order,
        align: Option<Order>,
        kind: UsageKind,
    ) -> Option<usize> {
        // An empty magazine first (a burst larger than it: task stacks), with nothing to
        // give back.
        if own.is_empty(order) {
            return None;
        }
        if own.take_drain_request() | self.zone.debugging() {
            self.flush_magazines(own);
            return None;
        }
        let at = match align {
            None => own.pop(order)?,
            Some(align) => own.pop_aligned(order, PAGE << align.get())?,
        };
        self.take_out(own, at, order, kind)
    }

    /// The block of `order` at `at`, just popped from `own`'s magazine, taken out of the
    /// cache and counted for `kind`: its address, `None` if its frame was not marked cached
    /// (nothing but a corrupted frame table unmarks it: such a block is not handed out).
    #[inline(always)]
    fn take_out(
        &self,
        own: &OwnMagazines<'_>,
        at: usize,
        order: Order,
        kind: UsageKind,
    ) -> Option<usize> {
        // SAFETY: the magazine held the block, marked cached by its push: the cache was
        // its owner's, this call's.
        if !unsafe { self.zone.uncache_frozen(Pfn((at / PAGE) as u64), order) } {
            return None;
        }
        own.count(kind, order, true);
        Some(at)
    }

    /// Frees the block of `order` at `pos` (frame `pfn`) into the calling CPU's magazine
    /// for it, if its CPU id is exclusive, marked cached and uncounted for `kind`: whether
    /// it was taken (`false`, nothing changed: no exclusive id, or a full magazine, whose
    /// block goes to the lists as without one, or not a frozen block of `order`, which the
    /// lists' free frees or refuses). A drain another CPU asked for is honoured here.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`](crate::GlobalAllocator::dealloc_pages) for the
    /// block.
    #[inline(always)]
    unsafe fn push_cached(&self, pos: usize, pfn: Pfn, order: Order, kind: UsageKind) -> bool {
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        let Some(own) = self.exclusive(&pinned) else {
            return false;
        };
        // Marked cached only once the magazine has room: out of the cache on `false`, the
        // block is still the caller's.
        // SAFETY: the caller's promise: a block this allocator handed out, given back once
        // and not used after (on `false`, nothing changed and it is still the caller's).
        if !own.push_if(pos, order, || unsafe { self.zone.cache_frozen(pfn, order) }) {
            return false;
        }
        own.count(kind, order, false);
        if own.drain_asked() {
            // Out of line, asking for the magazines anew: this call keeps nothing for it.
            self.honour_drain_request();
        }
        true
    }

    /// `f` on the CPU's lists, under its slot.
    fn on_own_lists(&self, own: &OwnMagazines<'_>, f: impl FnOnce(&LocalLists)) {
        if let Some(slot) = self.cpus.get(own.id()) {
            let slot = slot.lock();
            // SAFETY: `slot` is this allocator's slot, its lock held while `f` runs.
            f(&unsafe { self.local_lists(&slot) });
        }
    }

    /// Frees the frozen block of `order` at `pfn` to `lists` (a drain past their high mark
    /// included).
    ///
    /// # Safety
    /// The block is a frozen block of `order` of this zone's, the caller's alone, freed once.
    unsafe fn free_to_lists(lists: &LocalLists, pfn: Pfn, order: Order) {
        // SAFETY: the caller's promise.
        unsafe {
            if !lists.free_frozen_pages_listed(pfn, order) {
                let _ = lists.free_frozen_pages(pfn, order);
            }
        }
    }

    /// Gives every block of the CPU's magazines back to its lists, under its slot taken once
    /// (a drain past the lists' high marks included).
    #[cold]
    #[inline(never)]
    fn flush_magazines(&self, own: &OwnMagazines<'_>) {
        if own.magazines().pages() == 0 {
            return;
        }
        self.on_own_lists(own, |lists| {
            for o in 0..crate::magazine::ORDERS {
                let Ok(order) = Order::new(o as u8) else {
                    break;
                };
                while let Some(at) = own.pop(order) {
                    let pfn = Pfn((at / PAGE) as u64);
                    // SAFETY: the magazine held the block, cached by its push; out of the
                    // cache it is this call's alone.
                    unsafe {
                        if self.zone.uncache_frozen(pfn, order) {
                            Self::free_to_lists(lists, pfn, order);
                        }
                    }
                }
            }
        });
        self.set_exhausted(false);
    }

    /// Gives the calling CPU's magazines back to its lists, if its id is exclusive, and asks
    /// every other CPU whose magazines hold a block for them (only a magazine's owner
    /// reaches its blocks: they come back at that CPU's next call): whether the calling
    /// CPU's held a block.
    fn give_back_magazines(&self) -> bool {
        for magazines in self.magazines {
            if magazines.pages() > 0 {
                magazines.request_drain();
            }
            if magazines.holds_objects() {
                magazines.request_object_drain();
            }
        }
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        let Some(own) = self.exclusive(&pinned) else {
            return false;
        };
        // Its own request, just made, is honoured here.
        let _ = own.take_drain_request();
        let held = own.magazines().pages() > 0;
        self.flush_magazines(&own);
        held
    }

    /// Honours a request of another CPU for the calling CPU's magazines (a tick's
    /// [`Frames::decay_lists`], a free into a magazine).
    #[cold]
    #[inline(never)]
    fn honour_drain_request(&self) {
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        if let Some(own) = self.exclusive(&pinned)
            && own.take_drain_request()
        {
            self.flush_magazines(&own);
        }
    }

    /// The lists of the CPU whose slot is `cpu`, reached without their lock and with no
    /// look-up (the slot keeps them).
    ///
    /// # Safety
    /// `cpu` is one of this allocator's slots, its lock held (interrupts and preemption off
    /// on this CPU) for as long as the handle is used, and the handle is used for this call
    /// alone.
    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn local_lists(&self, cpu: &CpuSlot) -> LocalLists {
        // SAFETY: `local_cpu`'s contract is `carve`'s (`cpu_local`): CPU `cpu.id`'s lists are
        // reached only under its slot's lock, held here by the caller, with interrupts and
        // preemption off, or with every slot's lock held; and `cpu.lists` is entry `cpu.id`
        // of the per-cpu metadata `carve` made the zone with.
        unsafe { self.zone.local_cpu_of(cpu.lists, cpu.id) }
    }

    /// The page allocator of the CPU this call runs on, locked with interrupts and
    /// preemption off: while it is held, no interrupt handler on this CPU enters the zone,
    /// so the zone's own spin locks are never wanted by a handler of a CPU that holds one.
    #[inline(always)]
    pub(crate) fn this_cpu(&self) -> IrqSpinGuard<'_, CpuSlot> {
        // The CPU is asked with interrupts and preemption off: the answer stays true while
        // its lock is taken and held.
        let irq = crate::lock::IrqOff::new();
        IrqSpin::lock_masked(irq, |irq| self.slot(irq))
    }

    /// The slot of CPU `known`, if it names one, else the calling CPU's ([`Frames::slot`]).
    #[inline(always)]
    fn slot_of(&self, irq: &IrqOff, known: Option<usize>) -> &IrqSpin<CpuSlot> {
        match known.and_then(|cpu| self.cpus.get(cpu)) {
            Some(slot) => slot,
            None => self.slot(irq),
        }
    }

    /// The slot of the CPU this call runs on ([`Frames::cpu_index`]'s), asked with
    /// interrupts and preemption off (`irq`).
    #[inline(always)]
    fn slot(&self, irq: &IrqOff) -> &IrqSpin<CpuSlot> {
        // One CPU: its slot, with no look-up at all (the common single-CPU kernel).
        if self.cpus.len() > 1
            && let Some(slot) = self.cpus.get(self.asked_cpu(irq))
        {
            return slot;
        }
        self.cpu0
    }

    /// The index of the slot of the CPU this call runs on: a CPU the zone has no lists for
    /// (an embedder's id out of range) uses CPU 0's, slower, never wrong; with one CPU,
    /// CPU 0's, asking nothing. (`carve` refuses a CPU count of 0: there is a CPU 0.)
    /// Asked with interrupts and preemption off (`irq`).
    #[inline(always)]
    fn cpu_index(&self, irq: &IrqOff) -> usize {
        let id = self.asked_cpu(irq);
        if id < self.cpus.len() { id } else { 0 }
    }

    /// The [`CpuId`]'s answer to "which CPU", perhaps out of range; 0 with one CPU, asking
    /// nothing. Asked with interrupts and preemption off (`irq`): the answer stays true
    /// while the caller holds them off.
    #[inline(always)]
    fn asked_cpu(&self, irq: &IrqOff) -> usize {
        if self.cpus.len() <= 1 {
            return 0;
        }
        self.cpu_id.cpu_id(&Pinned::new(irq))
    }
}

#[cfg(test)]
mod tests {
    use super::{PAGE, PCP_MAX_ORDER, listed_block, unlisted_block};
    use buddy_sim::Order;

    fn o(k: u8) -> Order {
        Order::new(k).unwrap()
    }

    #[test]
    fn unlisted_blocks_are_the_larger_powers_of_two_aligned_to_at_most_their_size() {
        let first = 2 << PCP_MAX_ORDER.get();
        assert_eq!(
            unlisted_block(first, PAGE),
            Some(o(PCP_MAX_ORDER.get() + 1))
        );
        assert_eq!(
            unlisted_block(first, first * PAGE),
            Some(o(PCP_MAX_ORDER.get() + 1))
        );
        assert_eq!(unlisted_block(8192, PAGE), Some(o(13)));
        // A listed block, an alignment above the size (the general path splits a block of
        // the alignment's order), not a power of two, an alignment below a page.
        for (pages, align) in [
            (first / 2, PAGE),
            (first, 2 * first * PAGE),
            (first + 1, PAGE),
            (first, PAGE / 2),
            (0, PAGE),
        ] {
            assert_eq!(
                unlisted_block(pages, align),
                None,
                "{pages} pages, {align:#x}"
            );
        }
    }

    #[test]
    fn listed_blocks_are_small_powers_of_two_aligned_to_a_page_or_more() {
        // Aligned to at most its size: no alignment of its own to look for.
        assert_eq!(listed_block(1, PAGE), Some((o(0), None)));
        assert_eq!(listed_block(4, PAGE), Some((o(2), None)));
        assert_eq!(listed_block(4, 4 * PAGE), Some((o(2), None)));
        // Above it: the alignment's order.
        assert_eq!(listed_block(4, 16 * PAGE), Some((o(2), Some(o(4)))));
        assert_eq!(listed_block(1, 2 << 20), Some((o(0), Some(o(9)))));
        let largest = 1 << PCP_MAX_ORDER.get();
        assert_eq!(listed_block(largest, PAGE), Some((PCP_MAX_ORDER, None)));
        // Not a list's: too large, not a power of two, an alignment below a page or not a
        // power of two, or past any order.
        for (pages, align) in [
            (largest * 2, PAGE),
            (0, PAGE),
            (3, PAGE),
            (1, PAGE / 2),
            (1, 0),
            (1, 3 * PAGE),
            (1, 1 << 63),
        ] {
            assert_eq!(
                listed_block(pages, align),
                None,
                "{pages} pages, {align:#x}"
            );
        }
    }
}
