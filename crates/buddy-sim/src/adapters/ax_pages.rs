//! ArceOS's page-allocator interface over a zone (feature `axallocator`): `axallocator`'s
//! [`BaseAllocator`] and [`PageAllocator`], which ArceOS's global allocator and
//! `page_table_multiarch`'s paging handlers call for page frames. Positions are the
//! addresses the embedder reaches frames at: frame `pfn` at `pfn * 4 KiB + offset` (a
//! kernel's direct map; offset 0 for an identity map).
//!
//! A block's worth of pages (a power of two, however aligned: a page-table page, a task
//! stack) is one frozen block with no reference count, its caller its owner
//! ([`Cpu::alloc_frozen_pages`]): taken from the CPU's list and given back to it with no
//! compare-and-swap. Any other run is held as the fewest naturally aligned blocks, each
//! allocated with one reference: a block of its covering order with the blocks past the run
//! given back, or, larger than the zone's largest block, the blocks of the free memory it
//! was found in. One head is written per block, not a word per page, and a whole run goes
//! back block by block. `dealloc_pages` of a part of a block splits that block into order-0
//! pages first (`split_page`) and frees the part as the fewest aligned blocks
//! ([`Zone::free_contig_range`]); zeroed runs and runs taken at a fixed base are pages from
//! the start.

use super::direct_map::{DirectMap, PAGE};
use crate::decompose::decompose;
use crate::error::NoSuchCpu;
use crate::error::alloc::AllocError as ZoneAllocError;
use crate::error::buddy::BuddyError;
use crate::error::config::ConfigError;
use crate::error::free::FreeError;
use crate::frame::{Frame, FrameState, Word};
use crate::frame_storage::FrameStorage;
use crate::memory::{FrameClearer, FrameMemory, NoMemory};
use crate::migrate::Migration;
use crate::migratetype::MigrateType;
use crate::mobility::contig_alloc::Take;
use crate::request::AllocRequest;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::config::ZoneConfig;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::pcp::PerCpu;
use crate::zone::per_cpu_set::PerCpuSet;
use axallocator::{AllocError, AllocResult, BaseAllocator, PageAllocator};
use core::ops::Range;
use lock_api::RawMutex;
use mm_types::Pfn;

/// `$call` with `$cpu` bound to the handle of the CPU this call runs on: reaching its lists
/// without their lock for a CPU-local allocator, under it otherwise (two handle types, so a
/// macro rather than a closure); `Err` of the CPU number's error if the zone has no such CPU.
/// An allocator for one CPU reaches its lists with no look-up (resolved at construction).
macro_rules! on_cpu {
    ($self:ident, |$cpu:ident| $call:expr) => {{
        match $self.lists() {
            Ok((pcp, id)) => {
                if $self.local {
                    // SAFETY: `AxPageAllocator::cpu_local`'s contract: no other call reaches
                    // this CPU's lists while this one runs.
                    let $cpu = unsafe { $self.zone.local_cpu_of(pcp, id) };
                    $call
                } else {
                    let $cpu = $self.zone.cpu_of(pcp, id);
                    $call
                }
            }
            Err(e) => Err(e.into()),
        }
    }};
}

/// A zone as `axallocator`'s [`PageAllocator`], allocating and freeing on one CPU's lists
/// (make one per CPU: it holds a shared reference to the zone, which is `Sync`).
///
/// `axallocator`'s interface reports no error from `init` and `dealloc_pages`:
/// [`AxPageAllocator::last_error`] keeps the zone's error of the last call instead. (The
/// example below.)
///
/// ```
/// # #[cfg(feature = "alloc")]
/// # fn main() -> Result<(), buddy_sim::BuddyError> {
/// use axallocator::{BaseAllocator, PageAllocator};
/// use buddy_sim::{AxPageAllocator, BoxedZone, Pfn, ZoneConfig};
///
/// // 2 MiB of frames at physical 16 MiB, reached through a direct map at this offset.
/// const DIRECT_MAP: usize = 0xffff_8000_0000_0000;
/// let zone = BoxedZone::new_boxed_empty(ZoneConfig::new(Pfn(0x1000), 512))?;
/// // SAFETY: the example frees only runs it allocated, once each.
/// let mut pages = unsafe { AxPageAllocator::new(&zone, 0, DIRECT_MAP)? };
/// pages.init(DIRECT_MAP + 0x100_0000, 2 << 20);
/// let stack = pages.alloc_pages(4, 4 * 4096).expect("16 KiB, aligned");
/// let fixed = pages.alloc_pages_at(DIRECT_MAP + 0x110_0000, 3, 4096).expect("that range");
/// pages.dealloc_pages(stack + 4096, 3); // the top three pages only
/// assert_eq!(pages.used_pages(), 1 + 3);
/// pages.dealloc_pages(stack, 1);
/// pages.dealloc_pages(fixed, 3);
/// assert_eq!((pages.used_pages(), pages.last_error()), (0, None));
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "alloc"))]
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct AxPageAllocator<'z, F, P, R: RawMutex> {
    zone: &'z Zone<F, P, R>,
    cpu: usize,
    /// CPU `cpu`'s lists in the zone.
    pcp: &'z PerCpu<R>,
    /// The embedder's "which CPU am I on" ([`AxPageAllocator::on_current_cpu`]).
    current_cpu: Option<fn() -> usize>,
    /// Reach the CPU's lists without their lock ([`AxPageAllocator::cpu_local`]).
    local: bool,
    map: DirectMap,
    last_error: Option<BuddyError>,
}

impl<'z, F, P, R> AxPageAllocator<'z, F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Pages of `zone` on `cpu`'s lists, frame `pfn` at position `pfn * 4 KiB + offset`.
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`]; [`BuddyError::Config`] if `offset` is not a multiple of
    /// 4 KiB, or if a frame of the zone has no address at that offset (past the address
    /// space: [`ConfigError::DirectMapRange`]).
    ///
    /// # Safety
    /// `axallocator`'s `dealloc_pages` is a safe call that frees: every run its caller hands
    /// back must be one this allocator handed out (or part of one), not freed before and not
    /// accessed after, as [`Zone::free_contig_range`] requires.
    #[allow(unsafe_code)]
    pub unsafe fn new(
        zone: &'z Zone<F, P, R>,
        cpu: usize,
        offset: usize,
    ) -> Result<Self, BuddyError> {
        let pcp = zone.pcps.slots().get(cpu).ok_or(BuddyError::BadCpu(cpu))?;
        Ok(Self {
            zone,
            cpu,
            pcp,
            current_cpu: None,
            local: false,
            map: direct_map(zone.config(), offset)?,
            last_error: None,
        })
    }

    /// The same allocator, each call on the lists of the CPU `current` names when it runs
    /// (the embedder's CPU id: ArceOS's `this_cpu_id`), so that one global allocator uses
    /// every CPU's per-cpu lists. A CPU the zone has no lists for fails the call
    /// (`BadCpu`). For the lists to be safe from the interrupt handlers of the CPU they
    /// belong to, the zone's lock type `R` is the embedder's interrupt-disabling lock.
    #[must_use]
    pub const fn on_current_cpu(mut self, current: fn() -> usize) -> Self {
        self.current_cpu = Some(current);
        self
    }

    /// The same allocator, reaching the CPU's per-cpu lists without their lock
    /// ([`Zone::local_cpu`]): for an embedder that already serializes every call of this
    /// allocator, as ArceOS's global allocator does under its interrupt-disabling lock.
    ///
    /// # Safety
    /// While a call of this allocator runs, nothing else reaches the lists of the CPU it runs
    /// on: every call of every allocator over this zone runs under one lock that also keeps
    /// interrupt handlers out (or on the CPU it names, with interrupts and preemption
    /// off), and the zone's calls that visit every CPU's lists run only when no such call
    /// is in flight ([`Zone::local_cpu`]'s contract, made once for this allocator).
    #[allow(unsafe_code)]
    #[must_use]
    pub const unsafe fn cpu_local(mut self) -> Self {
        self.local = true;
        self
    }

    /// The CPU this call runs on: the embedder's current CPU, else the one given at
    /// construction.
    fn cpu(&self) -> usize {
        match self.current_cpu {
            Some(current) => current(),
            None => self.cpu,
        }
    }

    /// The lists of the CPU this call runs on, and its number: those of the CPU given at
    /// construction with no look-up, else the embedder's current CPU's (`Err` past the
    /// zone's CPUs).
    #[inline(always)]
    fn lists(&self) -> Result<(&'z PerCpu<R>, usize), NoSuchCpu> {
        match self.current_cpu {
            None => Ok((self.pcp, self.cpu)),
            Some(current) => {
                let id = current();
                let pcp = self.zone.pcps.slots().get(id).ok_or(NoSuchCpu(id))?;
                Ok((pcp, id))
            }
        }
    }

    /// The zone's error of the last call that failed (`None` after a call that succeeded).
    #[must_use]
    pub const fn last_error(&self) -> Option<BuddyError> {
        self.last_error
    }

    /// The frame at page-aligned position `pos`.
    fn pfn_at(&self, pos: usize) -> Option<Pfn> {
        self.map.pfn_at(pos)
    }

    /// The position of frame `pfn`, a frame of the zone (each has one: checked when this
    /// allocator was made).
    #[inline(always)]
    fn pos_of(&self, pfn: Pfn) -> usize {
        self.map.addr_in(pfn)
    }

    /// The order of a block aligned to `align` bytes at a position ([`DirectMap::align_order`]).
    /// As ArceOS's page allocators, an alignment must be a power of two of at least a page
    /// (`InvalidParam` below it, where a byte allocator's alignment was likely meant).
    fn align_order(&self, align: usize) -> AllocResult<Order> {
        if align < PAGE {
            return Err(AllocError::InvalidParam);
        }
        self.map.align_order(align).ok_or(AllocError::InvalidParam)
    }

    /// Records `r`'s error and maps it to `axallocator`'s.
    fn outcome<T, E: Into<BuddyError>>(&mut self, r: Result<T, E>) -> AllocResult<T> {
        let r = r.map_err(Into::into);
        self.last_error = r.as_ref().err().copied();
        r.map_err(|e| match e {
            BuddyError::OutOfMemory(_) | BuddyError::NotInBuddy(_) => AllocError::NoMemory,
            BuddyError::AlreadyAdded(_) => AllocError::MemoryOverlap,
            BuddyError::DoubleFree(_) => AllocError::NotAllocated,
            _ => AllocError::InvalidParam,
        })
    }

    /// The position of an allocation's first frame, its error recorded ([`Self::outcome`]).
    #[inline(always)]
    fn position<E: Into<BuddyError>>(&mut self, r: Result<Pfn, E>) -> AllocResult<usize> {
        let pfn = self.outcome(r)?;
        Ok(self.pos_of(pfn))
    }

    /// Takes exactly the frames `[pfn, pfn + pages)`, each as an order-0 page; all or
    /// nothing.
    #[allow(unsafe_code)]
    fn take_run(&self, pfn: Pfn, pages: u64) -> Result<(), BuddyError> {
        let max = self.zone.config().max_order;
        let mut taken = 0u64;
        for (block, order) in decompose(pfn, pages, max)? {
            let mut took = self
                .zone
                .alloc_pages_at(block, order)
                .map_err(BuddyError::from);
            if took.is_ok() {
                took = self.zone.split_page(block, order).map_err(BuddyError::from);
                if took.is_err() {
                    // Not reached (the block was just taken, with one reference).
                    // SAFETY: this call took the block and hands it to nobody.
                    let _ = unsafe { self.zone.free_pages(self.cpu(), block, order) };
                }
            }
            if let Err(e) = took {
                // Give back the blocks taken before, split into order-0 pages.
                // SAFETY: this call took and split them and hands them to nobody.
                let _ = unsafe { self.zone.free_contig_range(self.cpu(), pfn, taken) };
                return Err(e);
            }
            taken += order.pages();
        }
        Ok(())
    }

    /// [`PageAllocator::alloc_pages`] of frames that read zero when handed out: a block the
    /// zone knows is zero if it has one, else cleared through `clearer` (zero-core's
    /// strategies, [`AllocRequest::zeroed_with`]). Freed as any other run
    /// ([`PageAllocator::dealloc_pages`]).
    ///
    /// # Errors
    /// As [`PageAllocator::alloc_pages`]; `InvalidParam` also when `clearer` cannot reach a
    /// frame of the run (the zone's error is in [`AxPageAllocator::last_error`]).
    pub fn alloc_zeroed_pages<M: FrameMemory>(
        &mut self,
        num_pages: usize,
        align_pow2: usize,
        clearer: &FrameClearer<M>,
    ) -> AllocResult<usize> {
        self.alloc_run(num_pages, align_pow2, Some(clearer))
    }

    /// One page (a page table's, most often): a frozen page ([`Cpu::alloc_frozen_page`]),
    /// from the CPU's list; the allocator's caller owns it whole, and nothing takes a
    /// reference to it.
    #[allow(unsafe_code)]
    #[inline(always)]
    fn alloc_page(&mut self) -> AllocResult<usize> {
        match on_cpu!(self, |cpu| cpu.alloc_frozen_page()) {
            // The common case without `outcome`'s error mapping.
            Ok(pfn) => {
                self.last_error = None;
                Ok(self.pos_of(pfn))
            }
            Err(e) => self.outcome(Err(e)),
        }
    }

    /// Frees the page at `pos` if this allocator handed it out alone (a frozen page, as
    /// `alloc_pages(1, 4096)` hands one out): whether it did. `false` changes nothing and
    /// records nothing (a page of a run, a page not allocated, a position outside the
    /// zone), for [`PageAllocator::dealloc_pages`] to free or report.
    #[allow(unsafe_code)]
    #[inline(always)]
    fn dealloc_page(&mut self, pos: usize) -> bool {
        let Some(pfn) = self.pfn_at(pos) else {
            return false;
        };
        // SAFETY: `AxPageAllocator::new`'s contract: the caller hands back only runs this
        // allocator handed out, once, and no longer uses them; the listed free and
        // `free_frozen_page` check that the frame is a frozen page and change nothing
        // otherwise. The listed free first: a push onto the list's array, no call.
        let freed = on_cpu!(self, |cpu| unsafe {
            if cpu.free_frozen_pages_listed(pfn, Order::ZERO) {
                Ok(())
            } else {
                cpu.free_frozen_page(pfn)
            }
        })
        .is_ok();
        if freed {
            self.last_error = None;
        }
        freed
    }

    /// Splits the block that starts at `pos` (the first block of a run
    /// [`PageAllocator::alloc_pages`] handed out: for a run of `2^k` pages aligned to its
    /// size, the whole run) into `2^k` order-0 pages, each freed alone from then on
    /// (StarryOS's `split_pages`, Linux's [`Zone::split_page`]): what splitting a transparent
    /// huge page into 4 KiB mappings needs. Metadata only; no byte moves. Returns the pages
    /// the block held (1 for a page that is one already). A frozen block's pages become
    /// frozen pages, a block with a reference count pages with one each.
    ///
    /// # Errors
    /// `InvalidParam` if `pos` is not the first frame of an allocated unmovable block of this
    /// zone (a movable block, another user's of the zone that compaction may move by its
    /// head's key, included); `NotAllocated` for a free one. Nothing changes then.
    ///
    /// # Safety
    /// The caller owns the block at `pos` (a run this allocator handed out, not freed), and
    /// no other call frees or splits it while this one runs: a frozen block's head and
    /// pages are written without a compare-and-swap, as its free reads them.
    #[allow(unsafe_code)]
    pub unsafe fn split_pages(&mut self, pos: usize) -> AllocResult<usize> {
        let Some(pfn) = self.pfn_at(pos) else {
            return self.outcome(Err(BuddyError::NotAFrame { addr: pos }));
        };
        let m = self.zone.map();
        let idx = match m.index(pfn) {
            Ok(idx) => idx,
            Err(e) => return self.outcome(Err(FreeError::from(e))),
        };
        let w = m.frame(idx).load();
        match w.state() {
            FrameState::Allocated
                if w.is_frozen_block() || w.mt() == MigrateType::Unmovable as u8 => {}
            FrameState::Buddy | FrameState::Pcp | FrameState::Cached => {
                return self.outcome(Err(FreeError::DoubleFree(pfn)));
            }
            // A page inside a block, a movable block, or no page of this allocator's.
            _ => return self.outcome(Err(BuddyError::NotAFrame { addr: pos })),
        }
        let order = Order(w.order());
        if w.is_frozen_block() {
            // SAFETY: a frozen block (its word says so) the caller owns, split by no other
            // call meanwhile: this function's contract.
            unsafe { self.zone.split_frozen_block(idx, order) };
        } else if order != Order::ZERO {
            let r = self.zone.split_page(pfn, order);
            self.outcome(r)?;
        }
        self.last_error = None;
        Ok(saturating_usize(order.pages()))
    }

    /// One frozen block of `pages` (a power of two) pages aligned to `align` bytes from the
    /// CPU's lists (the allocation fast path, [`Cpu::alloc_frozen_pages`]; an alignment
    /// above the block's size takes an aligned block of the size, or splits one of the
    /// alignment): `Err` without a recorded error when the zone has none at hand, the block
    /// or its alignment is past the zone's largest block, or the alignment is not one a
    /// frame's order gives, for the general path to try or refuse
    /// ([`AxPageAllocator::alloc_run`]).
    #[allow(unsafe_code)]
    #[inline(always)]
    fn alloc_block(&mut self, pages: usize, align: usize) -> Result<usize, ()> {
        let order = Order::new(pages.trailing_zeros() as u8).map_err(drop)?;
        if align < PAGE {
            return Err(());
        }
        let align = self.map.align_order(align).ok_or(())?;
        if order.max(align) > self.zone.config().max_order {
            return Err(());
        }
        let pfn = if align <= order {
            on_cpu!(self, |cpu| cpu.alloc_frozen_pages(order))
        } else {
            on_cpu!(self, |cpu| cpu.alloc_frozen_aligned(order, align))
        }
        .map_err(drop)?;
        self.last_error = None;
        Ok(self.pos_of(pfn))
    }

    /// Frees the block of `pages` (a power of two) pages at `pos` if it is one frozen block
    /// of that size (as [`AxPageAllocator::alloc_block`] hands them out): `false`, changing
    /// nothing, for anything else (a part of a larger block, several blocks, a block with a
    /// reference count, an error), which the general path frees or reports.
    #[allow(unsafe_code)]
    #[inline(always)]
    fn dealloc_block(&mut self, pos: usize, pages: usize) -> bool {
        let Some(pfn) = self.pfn_at(pos) else {
            return false;
        };
        let Ok(order) = Order::new(pages.trailing_zeros() as u8) else {
            return false;
        };
        // SAFETY: `AxPageAllocator::new`'s contract: the caller hands back only runs this
        // allocator handed out, once, and no longer uses them; `free_frozen_pages` checks
        // that the frame heads a frozen block of this order and changes nothing otherwise.
        let freed = on_cpu!(self, |cpu| unsafe { cpu.free_frozen_pages(pfn, order) });
        if freed.is_ok() {
            self.last_error = None;
        }
        freed.is_ok()
    }

    /// [`PageAllocator::dealloc_pages`] of a run, or of one page of a run.
    #[allow(unsafe_code)]
    #[inline(never)]
    fn dealloc_run(&mut self, pos: usize, num_pages: usize) {
        let Some(pfn) = self.pfn_at(pos) else {
            let _ = self.outcome::<(), _>(Err(BuddyError::NotAFrame { addr: pos }));
            return;
        };
        let pages = num_pages as u64;
        // SAFETY: `AxPageAllocator::new`'s contract: the caller hands back only runs this
        // allocator handed out, once, and no longer uses them.
        let r = on_cpu!(self, |cpu| unsafe { cpu.free_run(pfn, pages) });
        let _ = self.outcome(r);
    }

    /// A run of `pages` frames aligned to `align`, held as blocks ([`Cpu::run_as_blocks`]).
    #[allow(unsafe_code)]
    fn alloc_blocks(&mut self, pages: u64, align: Order) -> AllocResult<usize> {
        let r = on_cpu!(self, |cpu| cpu.run_as_blocks(pages, align));
        self.position(r)
    }

    /// `num_pages` frames aligned to `align_pow2` bytes (see [`PageAllocator::alloc_pages`]),
    /// zeroed through `clearer` if one is given.
    #[allow(unsafe_code)]
    #[inline(never)]
    fn alloc_run<M: FrameMemory>(
        &mut self,
        num_pages: usize,
        align_pow2: usize,
        clearer: Option<&FrameClearer<M>>,
    ) -> AllocResult<usize> {
        let align = self.align_order(align_pow2)?;
        let pages = num_pages as u64;
        let max = self.zone.config().max_order;
        if clearer.is_none() && pages > 1 && align <= max {
            return self.alloc_blocks(pages, align);
        }
        let beyond_a_block = Order::covering(pages).is_ok_and(|o| o.max(align) > max);
        let mut move_nothing = |_: &Migration| false;
        let mut request = if pages == 1 && align == Order::ZERO {
            // One zeroed page ([`AxPageAllocator::alloc_page`] takes a plain one): the block
            // path.
            AllocRequest::page()
        } else if beyond_a_block && align <= max {
            AllocRequest::frames(pages)
                .aligned(align)
                .contiguous(&mut move_nothing)
        } else {
            AllocRequest::frames(pages).aligned(align)
        };
        if let Some(clearer) = clearer {
            request = request.zeroed_with(clearer);
        }
        let mut r = on_cpu!(self, |cpu| cpu.alloc_raw(request));
        if let (Err(ZoneAllocError::OutOfMemory(_)), Some(clearer)) = (&r, clearer)
            && pages > 1
            && !beyond_a_block
        {
            // No free block of the covering order: the run from any free memory, as a run
            // past the largest block is found.
            let request = AllocRequest::frames(pages)
                .aligned(align)
                .contiguous(&mut move_nothing)
                .zeroed_with(clearer);
            r = on_cpu!(self, |cpu| cpu.alloc_raw(request));
        }
        if let Ok(pfn) = r
            && pages == 1
            && align == Order::ZERO
        {
            // One zeroed page, held as a page allocated alone is: frozen, so that its free
            // takes the same path.
            self.zone.freeze_fresh_block(pfn, Order::ZERO);
        }
        self.position(r)
    }
}

impl<'z, const FRAMES: usize, const CPUS: usize, R: RawMutex>
    AxPageAllocator<'z, [Frame; FRAMES], [PerCpu<R>; CPUS], R>
{
    /// [`AxPageAllocator::new`] at compile time, for a [`StaticZone`](crate::StaticZone):
    /// the allocator can then live in a `static` (ArceOS's global allocator is built by a
    /// `const fn`), both it and its zone in the kernel image.
    ///
    /// ```
    /// use axallocator::{BaseAllocator, PageAllocator};
    /// use buddy_sim::{AxPageAllocator, DefaultRawMutex, Frame, PerCpu, Pfn, StaticZone};
    ///
    /// static ZONE: StaticZone<512, 1> = StaticZone::new_static_empty(
    ///     buddy_sim::ZoneConfig::new(Pfn(0x1000), 512),
    /// );
    /// type Pages = AxPageAllocator<'static, [Frame; 512], [PerCpu; 1], DefaultRawMutex>;
    /// // SAFETY: the example frees only runs it allocated, once each; the zone's frames, at
    /// // 16 MiB, all have addresses at offset 0.
    /// const PAGES: Pages = match unsafe { AxPageAllocator::new_static(&ZONE, 0, 0) } {
    ///     Ok(pages) => pages,
    ///     Err(_) => panic!("CPU 0 and a page-aligned offset"),
    /// };
    /// let mut pages = PAGES;
    /// pages.init(0x100_0000, 2 << 20);
    /// let run = pages.alloc_pages(3, 4096).expect("3 pages");
    /// pages.dealloc_pages(run, 3);
    /// assert_eq!(pages.used_pages(), 0);
    /// ```
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`] if `cpu` is not below `CPUS`; [`BuddyError::Config`] if
    /// `offset` is not a multiple of 4 KiB.
    ///
    /// # Safety
    /// As [`AxPageAllocator::new`]; and every frame of the zone has an address at `offset`
    /// (`pfn * 4 KiB + offset` stays below `usize::MAX`), which `new` checks and a `const fn`
    /// cannot (it cannot read a `static` zone's span): the positions this allocator hands out
    /// are computed without a check.
    #[allow(unsafe_code)]
    pub const unsafe fn new_static(
        zone: &'z Zone<[Frame; FRAMES], [PerCpu<R>; CPUS], R>,
        cpu: usize,
        offset: usize,
    ) -> Result<Self, BuddyError> {
        if cpu >= CPUS {
            return Err(BuddyError::BadCpu(cpu));
        }
        match DirectMap::new(offset) {
            Ok(map) => Ok(Self {
                zone,
                cpu,
                pcp: &zone.pcps[cpu],
                current_cpu: None,
                local: false,
                map,
                last_error: None,
            }),
            Err(e) => Err(BuddyError::Config(e)),
        }
    }
}

/// The direct map at `offset` for a zone of `cfg`, every frame of whose span it gives an
/// address, so that an allocation's position needs no check.
///
/// # Errors
/// [`ConfigError::DirectMapOffset`] for an offset that is not a multiple of 4 KiB,
/// [`ConfigError::DirectMapRange`] for a zone with a frame past the address space there.
fn direct_map(cfg: &ZoneConfig, offset: usize) -> Result<DirectMap, BuddyError> {
    let map = DirectMap::new(offset)?;
    let Some(span) = cfg.nr_pages.checked_sub(1) else {
        return Ok(map);
    };
    // Past `u64::MAX` (a span no address reaches either), the error names `u64::MAX`.
    let last = cfg.start.0.saturating_add(span);
    match map.addr_of(Pfn(last)) {
        Some(_) => Ok(map),
        None => Err(ConfigError::DirectMapRange { offset, last }.into()),
    }
}

impl<F, P, R> BaseAllocator for AxPageAllocator<'_, F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Adds `[start, start + size)` to the zone ([`BaseAllocator::add_memory`]); a failure
    /// is kept in [`AxPageAllocator::last_error`].
    fn init(&mut self, start: usize, size: usize) {
        let _ = self.add_memory(start, size);
    }

    /// Adds the whole pages of `[start, start + size)` to the zone ([`Zone::add_memory`]); a
    /// failure is kept in [`AxPageAllocator::last_error`] (`Overflow` for a range past the
    /// address space, `NotAFrame` for one below the direct map's offset).
    fn add_memory(&mut self, start: usize, size: usize) -> AllocResult {
        let first = start.div_ceil(PAGE).checked_mul(PAGE);
        let end = start.checked_add(size).map(|e| e / PAGE * PAGE);
        let (Some(first), Some(end)) = (first, end) else {
            return self.outcome(Err(BuddyError::Overflow));
        };
        let Some(pfn) = self.pfn_at(first) else {
            return self.outcome(Err(BuddyError::NotAFrame { addr: first }));
        };
        let pages = (end.saturating_sub(first) / PAGE) as u64;
        let r = self.zone.add_memory(pfn, pages);
        self.outcome(r)
    }
}

impl<F, P, R> PageAllocator for AxPageAllocator<'_, F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    const PAGE_SIZE: usize = PAGE;

    /// `num_pages` frames from a block of the covering order (or of `align_pow2`, if larger),
    /// split at the run's end with the rest given back at once, the run kept as the fewest
    /// aligned blocks (see the module docs). A run larger than the zone's largest block
    /// (ArceOS's heap grows by doubling: 16 MiB, 32 MiB, ...) is found free anywhere in the
    /// zone instead, as the bitmap allocator finds it (as `alloc_contig_pages` does, moving
    /// nothing: ArceOS's pages do not move).
    #[inline(always)]
    fn alloc_pages(&mut self, num_pages: usize, align_pow2: usize) -> AllocResult<usize> {
        if num_pages == 1 && align_pow2 == PAGE {
            return self.alloc_page();
        }
        // A block's worth of pages, however aligned: one frozen block.
        if num_pages.is_power_of_two()
            && let Ok(at) = self.alloc_block(num_pages, align_pow2)
        {
            return Ok(at);
        }
        self.alloc_run::<NoMemory>(num_pages, align_pow2, None)
    }

    /// Frees `num_pages` frames from `pos`, of one run or several: the blocks inside whole,
    /// a block the range takes part of split into pages first (see the module docs); a
    /// failure (a page not allocated, outside the zone) frees nothing and is kept in
    /// [`AxPageAllocator::last_error`].
    #[allow(unsafe_code)]
    #[inline(always)]
    fn dealloc_pages(&mut self, pos: usize, num_pages: usize) {
        // A block's worth of pages at its head: that block, when it is one.
        if num_pages > 1 && num_pages.is_power_of_two() && self.dealloc_block(pos, num_pages) {
            return;
        }
        // One page allocated alone (frozen), the common case, inline.
        if num_pages == 1 && self.dealloc_page(pos) {
            return;
        }
        self.dealloc_run(pos, num_pages);
    }

    /// Takes exactly `[base, base + num_pages * 4 KiB)`, all or nothing: each aligned block
    /// of the run from the buddy ([`Zone::alloc_pages_at`], draining per-cpu lists that
    /// hold part of it), split into order-0 pages.
    fn alloc_pages_at(
        &mut self,
        base: usize,
        num_pages: usize,
        align_pow2: usize,
    ) -> AllocResult<usize> {
        self.align_order(align_pow2)?;
        if num_pages == 0 || !base.is_multiple_of(align_pow2) {
            return Err(AllocError::InvalidParam);
        }
        let pfn = self.pfn_at(base).ok_or(AllocError::InvalidParam)?;
        let r = self.take_run(pfn, num_pages as u64);
        self.outcome(r).map(|()| base)
    }

    /// The zone's usable frames ([`Zone::present_pages`]).
    fn total_pages(&self) -> usize {
        saturating_usize(self.zone.present_pages())
    }

    /// Frames not free ([`Zone::free_pages_total`]).
    fn used_pages(&self) -> usize {
        let free = self.zone.free_pages_total();
        saturating_usize(self.zone.present_pages().saturating_sub(free))
    }

    /// Free frames, per-cpu lists and deferred frames included ([`Zone::free_pages_total`]).
    fn available_pages(&self) -> usize {
        saturating_usize(self.zone.free_pages_total())
    }
}

// The adapter's runs on a CPU handle: held as blocks (`run_as_blocks`), freed whatever
// blocks hold them (`free_run`).
impl<F, P, R, A> Cpu<'_, F, P, R, A>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Allocates a run of `pages` frames aligned to `align` (at most MAX_ORDER) on this CPU,
    /// held as the fewest naturally aligned unmovable blocks with one reference each: a
    /// block of the covering order, split at the run's end with the blocks past it freed;
    /// larger than a block, found anywhere in the zone as `alloc_contig_pages` finds a run
    /// (moving nothing) and taken as the blocks of the free memory there.
    #[allow(unsafe_code)]
    fn run_as_blocks(&self, pages: u64, align: Order) -> Result<Pfn, BuddyError> {
        let zone = self.zone();
        let order = Order::covering(pages)?.max(align);
        let found_free = || {
            let mut move_nothing = |_: &Migration| false;
            let within = None;
            let taken = (pages, align);
            zone.contig_pages(self.lists(), taken, Take::Blocks, within, &mut move_nothing)
        };
        if order > zone.config().max_order {
            return Ok(found_free()?);
        }
        let pfn = match self.alloc_raw(AllocRequest::order(order)) {
            Ok(pfn) => pfn,
            // No free block of the covering order, but the run may still be free memory
            // (as ArceOS's bitmap allocator finds it).
            Err(ZoneAllocError::OutOfMemory(_)) => return Ok(found_free()?),
            Err(e) => return Err(e.into()),
        };
        if pages == order.pages() {
            return Ok(pfn);
        }
        // This call holds the block's only reference: the split cannot fail, nor the frees
        // of the blocks past the run, which it hands to nobody.
        if let Err(e) = zone.split_block_at(pfn, order, pages) {
            // SAFETY: this call allocated the block and hands it to nobody.
            let _ = unsafe { self.free_pages(pfn, order) };
            return Err(e.into());
        }
        for (head, o) in decompose(Pfn(pfn.0 + pages), order.pages() - pages, order)? {
            // SAFETY: as above, for each block past the run.
            unsafe { self.free_pages(head, o) }?;
        }
        Ok(pfn)
    }

    /// Frees `[pfn, pfn + nr)` on this CPU, whatever blocks hold it: a block wholly inside
    /// goes back whole ([`Cpu::free_pages`]); one that reaches past either end is split
    /// into order-0 pages first ([`Zone::split_page`]) and its part freed as the fewest
    /// aligned blocks ([`Cpu::free_contig_range`]). Every block is checked first
    /// (allocated frozen, or with one reference where it is split), so a bad range frees
    /// nothing.
    ///
    /// # Safety
    /// As [`Cpu::free_contig_range`]: the caller holds every frame of the range and uses
    /// none of it after.
    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn free_run(&self, pfn: Pfn, nr: u64) -> Result<(), BuddyError> {
        // One page of a run: an order-0 page (a run's page split before), else the general
        // path splits its block (a frozen one included).
        if nr == 1 {
            // SAFETY: the caller's promise, passed on.
            match unsafe { self.free_pages(pfn, Order::ZERO) } {
                Err(
                    FreeError::CompoundPage(_)
                    | FreeError::OrderMismatch { .. }
                    | FreeError::Frozen(_),
                ) => {}
                done => return done.map_err(BuddyError::from),
            }
        }
        // SAFETY: the caller's promise, passed on.
        unsafe { self.free_blocks_of(pfn, nr) }
    }

    /// [`Cpu::free_run`] past its one-page case.
    ///
    /// # Safety
    /// As [`Cpu::free_run`].
    #[allow(unsafe_code)]
    #[inline(never)]
    unsafe fn free_blocks_of(&self, pfn: Pfn, nr: u64) -> Result<(), BuddyError> {
        let zone = self.zone();
        let m = zone.map();
        let range = m.range(pfn, nr).map_err(FreeError::from)?;
        if range.is_empty() {
            return Ok(());
        }
        let Some((first, _)) = m.block_head(range.start) else {
            return Err(m
                .not_allocated(range.start, m.frame(range.start).load())
                .into());
        };
        // Pass 1: the blocks holding the range, as this caller's frames stand still.
        let mut i = first;
        let mut pages_only = first == range.start;
        let mut frozen = false;
        while i < range.end {
            let w = m.frame(i).load();
            // A block allocated frozen (a page alone, or a block's worth of pages) is the
            // caller's whole, whether the range takes all of it or part.
            let frozen_block = w.is_frozen_block();
            if !frozen_block && (!w.is_live() || w.frozen()) {
                return Err(m.not_allocated(i, w).into());
            }
            let end = i + (1u32 << w.order());
            if frozen_block {
                frozen = true;
            } else if (i < range.start || end > range.end) && w.refcount() != 1 {
                return Err(FreeError::Shared(m.pfn(i)).into());
            }
            pages_only &= w.order() == 0;
            i = end;
        }
        if frozen {
            // The frozen blocks become blocks with this caller's one reference, as a run's
            // blocks are, so that the run's free takes them with the rest (by
            // compare-and-swap: a block another call changed meanwhile stops the free here,
            // the blocks before it left held with a reference).
            let mut i = first;
            while i < range.end {
                let f = m.frame(i);
                let w = f.load();
                if w.is_frozen_block() && f.cas(w, Word::allocated(w.order())).is_err() {
                    return Err(m.not_allocated(i, f.load()).into());
                }
                i += 1u32 << w.order();
            }
        }
        if pages_only {
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.free_contig_range(pfn, nr) }.map_err(BuddyError::from);
        }
        // Pass 2: each block above order 0 inside the range freed whole; the pages, and the
        // parts of blocks split at the range's ends, freed as runs of pages.
        let mut pages = range.start..range.start;
        let mut i = first;
        while i < range.end {
            let w = m.frame(i).load();
            let order = Order(w.order());
            let end = i + (1u32 << w.order());
            let whole = i >= range.start && end <= range.end;
            if whole && order.get() > 0 {
                // SAFETY: the caller's promise, passed on.
                unsafe { self.free_pages_run(pages) }?;
                // SAFETY: as above.
                unsafe { self.free_pages(m.pfn(i), order) }?;
                pages = end..end;
            } else {
                if !whole {
                    zone.split_page(m.pfn(i), order)?;
                }
                pages.end = end.min(range.end);
            }
            i = end;
        }
        // SAFETY: the caller's promise, passed on.
        unsafe { self.free_pages_run(pages) }
    }

    /// Frees the order-0 pages `pages` as the fewest aligned blocks
    /// ([`Cpu::free_contig_range`]).
    ///
    /// # Safety
    /// As [`Cpu::free_contig_range`].
    #[allow(unsafe_code)]
    unsafe fn free_pages_run(&self, pages: Range<FrameIdx>) -> Result<(), BuddyError> {
        if pages.is_empty() {
            return Ok(());
        }
        let m = self.zone().map();
        let len = u64::from(pages.end - pages.start);
        // SAFETY: the caller's promise, passed on.
        unsafe { self.free_contig_range(m.pfn(pages.start), len) }.map_err(BuddyError::from)
    }
}

/// A frame count as `usize`, saturated (a 32-bit target's zone cannot count past it anyway).
fn saturating_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
