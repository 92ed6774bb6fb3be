//! The global allocator: ArceOS's two levels, a byte allocator for the Rust heap that grows
//! by whole pages from the page allocator, and the page allocator (buddy-sim) for everything
//! that wants pages.

use crate::byte::{DefaultByteAllocator, NAME};
use crate::cpu::{CpuId, PerCpuRegister, Pinned, cpu_count};
use crate::frames::{
    Frames, InitError, PAGE, PCP_MAX_ORDER, listed_block, order_up_to, unlisted_block,
};
use crate::lock::{IrqOff, IrqSpin};
use crate::magazine::{OBJECT_BATCH, OwnMagazines};
use crate::owner::{OwnerTag, Owners};
use crate::slab::{
    Class, FreeSlab, LARGEST, Owner, SlabBytes, SlabError, SlabOwners, Slabs, Source,
};
use crate::slabinfo::SlabInfo;
use crate::usage::{UsageCounts, UsageKind, Usages, held};
use axallocator::{AllocError, AllocResult, BaseAllocator, ByteAllocator, PageAllocator};
use buddy_sim::Order;
use core::alloc::{GlobalAlloc, Layout};
use core::num::NonZeroUsize;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use log::{debug, error, info, warn};
use spin::Once;

/// The heap's first size, taken from the page allocator at initialization (ArceOS's).
const FIRST_HEAP: usize = 32 * 1024;

/// The largest growth by doubling (Linux's MAX_ORDER block, 4 MiB): past it the heap grows
/// by what a request needs, so that a large vector's growth does not take twice its size
/// (the zone's largest block covers its memory: doubling up to it would hand the heap half
/// of a small machine at once).
const HEAP_DOUBLING_LIMIT: usize = 4 << 20;

/// Bytes of pages the heap needs to serve `layout` from new memory, in whole pages: the
/// object, a sixteenth more (TLSF serves a request from a free block of the size class
/// above it, at most 1/32 larger), its alignment and the byte allocator's own headers (a
/// page covers them).
fn heap_growth_for(layout: Layout) -> Option<usize> {
    let size = layout.size();
    let bytes = size
        .checked_add(size / 16)?
        .checked_add(layout.align())?
        .checked_add(PAGE)?;
    bytes.checked_next_multiple_of(PAGE)
}

/// The pages a heap allocation of `layout` takes as one block of the zone, as Linux's
/// `kmalloc_large` takes them: a request past the slabs' largest class (2 KiB) up to the CPU
/// lists' largest block (256 KiB), its size rounded up to a power of two of pages, aligned
/// to a page or more. `(pages, alignment)` for [`GlobalAllocator::alloc_pages`]; `None`
/// for any other request (the slabs', or the byte allocator's).
#[inline(always)]
fn heap_block_of(layout: Layout) -> Option<(usize, usize)> {
    if layout.size() <= LARGEST {
        return None;
    }
    let pages = layout.size().div_ceil(PAGE).checked_next_power_of_two()?;
    let align = layout.align().max(PAGE);
    listed_block(pages, align)?;
    Some((pages, align))
}

/// Regions given to the heap from outside the zones ([`GlobalAllocator::add_memory`] of a
/// region too small for a zone, or before `init`) that the allocator remembers, to refuse one
/// that overlaps them.
pub const MAX_ADDED_REGIONS: usize = 64;

/// Regions of memory the page allocator manages, each a zone of its own with its metadata at
/// its head: the one [`GlobalAllocator::init`] gives, and every one
/// [`GlobalAllocator::add_memory`] gives after it (a region that crosses 4 GiB in physical
/// memory counts twice: it is split there, so that DMA32 allocations have zones of their own).
pub const MAX_REGIONS: usize = 16;

/// The first physical address past DMA32 memory (what a device with 32 address bits reaches).
const DMA32_END: u64 = 1 << 32;

/// The least memory on each side of 4 GiB for which a region that crosses it is cut in two
/// there: a smaller part is not worth a zone's metadata.
const MIN_DMA32_SPLIT: usize = 4 << 20;

/// A page call's request: `num_pages` pages aligned to `align` bytes, plain or zeroed.
#[derive(Clone, Copy)]
enum Want {
    Pages(usize, usize),
    Zeroed(usize, usize),
}

/// The heap: the slabs of its small objects, its byte allocator for the rest, and whether
/// that has memory yet (axallocator's slab allocator panics on every call before its
/// `init`, so no call reaches it before then).
struct Heap {
    slabs: Slabs,
    bytes: DefaultByteAllocator,
    ready: bool,
    /// Bytes given to it (axallocator's slab allocator does not count all of them).
    given: usize,
    /// Bytes of those taken from the zone as pages (its first 32 KiB and its growths),
    /// which the page calls count for [`UsageKind::RustHeap`].
    from_zone: usize,
    /// The byte allocator's bytes handed out, as [`UsageKind::RustHeap`] (the slabs count
    /// their objects' themselves).
    usage: UsageCounts,
    /// The regions given from outside the zone, `[start, end)`: the first `added` entries.
    regions: [(usize, usize); MAX_ADDED_REGIONS],
    added: usize,
}

impl Heap {
    /// No memory yet.
    const fn new() -> Self {
        Self {
            slabs: Slabs::new(),
            bytes: DefaultByteAllocator::new(),
            ready: false,
            given: 0,
            from_zone: 0,
            usage: UsageCounts::new(),
            regions: [(0, 0); MAX_ADDED_REGIONS],
            added: 0,
        }
    }

    /// Whether `[start, end)` overlaps a region given from outside the zones.
    fn overlaps_added(&self, start: usize, end: usize) -> bool {
        self.regions[..self.added]
            .iter()
            .any(|&(s, e)| s < end && start < e)
    }

    /// Gives the heap `[start, start + size)` from outside the zones (the caller checked that
    /// it overlaps nothing the allocator holds).
    ///
    /// # Errors
    /// `InvalidParam` for a region that ends past the address space or holds no whole page;
    /// `NoMemory` when [`MAX_ADDED_REGIONS`] regions were given already.
    fn add(&mut self, start: usize, size: usize) -> AllocResult {
        let end = start.checked_add(size).ok_or(AllocError::InvalidParam)?;
        if self.added == MAX_ADDED_REGIONS {
            return Err(AllocError::NoMemory);
        }
        self.give(start, size)?;
        self.regions[self.added] = (start, end);
        self.added += 1;
        Ok(())
    }

    /// Gives the byte allocator the whole pages of `[start, start + size)`: its first
    /// memory (`init`, a multiple of 32 KiB), or more. Whole pages, and a first region of
    /// whole 32 KiB, because axallocator's slab allocator asserts them (a panic inside the
    /// allocator otherwise); TLSF and the buddy byte allocator take any region.
    ///
    /// # Errors
    /// `InvalidParam` if no whole page (no 32 KiB for a first region) is inside; the byte
    /// allocator's error.
    fn give(&mut self, start: usize, size: usize) -> AllocResult {
        let first = start.checked_next_multiple_of(PAGE);
        let end = start.checked_add(size).map(|e| e / PAGE * PAGE);
        let (Some(first), Some(end)) = (first, end) else {
            return Err(AllocError::InvalidParam);
        };
        let mut len = end.saturating_sub(first);
        if !self.ready {
            len = len / FIRST_HEAP * FIRST_HEAP;
        }
        if len == 0 {
            return Err(AllocError::InvalidParam);
        }
        if self.ready {
            self.bytes.add_memory(first, len)?;
        } else {
            self.bytes.init(first, len);
            self.ready = true;
        }
        self.given = self.given.saturating_add(len);
        Ok(())
    }

    /// [`Heap::give`] of pages the zone handed out for the heap (counted for
    /// [`UsageKind::RustHeap`] by the page calls): counted as the heap's from the zone, even
    /// where the byte allocator refuses them (they stay the heap's, unused).
    ///
    /// # Errors
    /// As [`Heap::give`].
    fn give_pages(&mut self, start: usize, size: usize) -> AllocResult {
        self.from_zone = self.from_zone.wrapping_add(size);
        self.give(start, size)
    }

    #[inline(always)]
    fn alloc(&mut self, layout: Layout) -> AllocResult<NonNull<u8>> {
        if !self.ready {
            return Err(AllocError::NoMemory);
        }
        self.bytes.alloc(layout)
    }

    #[inline(always)]
    fn dealloc(&mut self, pos: NonNull<u8>, layout: Layout) {
        if self.ready {
            self.bytes.dealloc(pos, layout);
        }
    }

    /// Bytes the byte allocator holds, handed out and free.
    fn total(&self) -> usize {
        self.given
    }

    /// Bytes handed out: the objects of all slabs (`slabs`: these and the CPUs'), and the
    /// byte allocator's blocks but for the blocks it gave the slabs.
    fn used(&self, slabs: SlabBytes) -> usize {
        let bytes = if self.ready {
            self.bytes
                .used_bytes()
                .saturating_sub(slabs.slabs(Source::Heap))
        } else {
            0
        };
        bytes + slabs.in_use()
    }

    /// Bytes free without growing: the byte allocator's, and the free objects of all slabs
    /// (`slabs`: these and the CPUs').
    fn available(&self, slabs: SlabBytes) -> usize {
        let bytes = if self.ready {
            self.bytes.available_bytes()
        } else {
            0
        };
        bytes + slabs.free()
    }
}

/// ArceOS's global allocator on buddy-sim: the Rust heap ([`GlobalAllocator::alloc`], a
/// byte allocator that grows with pages from the zones) and pages
/// ([`GlobalAllocator::alloc_pages`]) from per-CPU lists, any run length and alignment, from
/// every region of memory the kernel gives it (a zone each, holes between them).
///
/// It is ArceOS's `axalloc::GlobalAllocator`, call for call, but for the calls whose
/// contract their types cannot check (`init`, `add_memory`, `dealloc`, `dealloc_pages`: they
/// write to or hand out memory the caller names): ArceOS declares them safe, this crate
/// makes them `unsafe fn` with their contract under `# Safety`. The package an ArceOS build
/// patches in (`axalloc`, not published) wraps them with ArceOS's safe signatures and
/// ArceOS's contract.
///
/// `C` answers which CPU a call runs on ([`CpuId`]): by default ArceOS's per-CPU data
/// register ([`PerCpuRegister`]); [`GlobalAllocator::with_cpu_id`] names another.
pub struct GlobalAllocator<C = PerCpuRegister> {
    balloc: IrqSpin<Heap>,
    /// The page allocator of each region, in the order they were given: `init`'s first.
    regions: [Once<Frames<C>>; MAX_REGIONS],
    /// Leading slots of `regions` that are set (written under `balloc`'s lock, after the
    /// slot).
    published: AtomicUsize,
    /// Which CPU a call runs on.
    cpu_id: C,
    /// The kernel's address translation, for DMA32 memory (none: addresses are physical).
    virt_to_phys: Option<fn(usize) -> usize>,
    /// page_owner's state (feature `page-owner`; empty without it).
    owners: Owners,
}

impl Default for GlobalAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl GlobalAllocator {
    /// An allocator with no memory yet, asking ArceOS's per-CPU data register which CPU a
    /// call runs on; [`GlobalAllocator::init`] gives it its memory.
    #[must_use]
    pub const fn new() -> Self {
        Self::with_cpu_id(PerCpuRegister)
    }
}

impl<C: CpuId> GlobalAllocator<C> {
    /// [`GlobalAllocator::new`], each call asking `cpu_id` which CPU it runs on (instead of
    /// ArceOS's per-CPU data register): for a kernel with its own CPU numbering, or a test.
    /// It is asked with interrupts and preemption off on the CPU that asks, and its answer
    /// picks that CPU's lists (an answer out of range, CPU 0's). A unit struct or a
    /// function item inlines into the page path; a function pointer (`fn() -> usize`) is
    /// called through it at each call.
    #[must_use]
    pub const fn with_cpu_id(cpu_id: C) -> Self {
        Self {
            balloc: IrqSpin::new(Heap::new()),
            regions: [const { Once::new() }; MAX_REGIONS],
            published: AtomicUsize::new(0),
            cpu_id,
            virt_to_phys: None,
            owners: Owners::new(),
        }
    }

    /// page_owner's state.
    #[cfg(feature = "page-owner")]
    pub(crate) fn owners(&self) -> &Owners {
        &self.owners
    }

    /// This allocator, finding the physical address of memory it is given with
    /// `virt_to_phys` (the kernel's linear map), for [`GlobalAllocator::alloc_dma32_pages`].
    /// Without it, addresses are taken as physical.
    #[must_use]
    pub const fn translating(mut self, virt_to_phys: fn(usize) -> usize) -> Self {
        self.virt_to_phys = Some(virt_to_phys);
        self
    }

    /// The physical address of `vaddr`.
    fn phys(&self, vaddr: usize) -> u64 {
        self.virt_to_phys.map_or(vaddr, |f| f(vaddr)) as u64
    }

    /// The page allocator of every region given so far, `init`'s first.
    pub(crate) fn regions(&self) -> impl Iterator<Item = &Frames<C>> + '_ {
        let n = self.published.load(Ordering::Acquire).min(MAX_REGIONS);
        self.regions[..n].iter().filter_map(Once::get)
    }

    /// The page allocator of `init`'s region.
    #[inline(always)]
    fn first(&self) -> Option<&Frames<C>> {
        self.regions[0].get()
    }

    /// The region whose memory holds `vaddr`.
    #[inline]
    fn region_of(&self, vaddr: usize) -> Option<&Frames<C>> {
        match self.first() {
            Some(f) if f.holds(vaddr) => Some(f),
            Some(_) => self.regions().skip(1).find(|f| f.holds(vaddr)),
            None => None,
        }
    }

    /// Regions of memory the page allocator manages (a zone each): 0 before `init`.
    pub fn region_count(&self) -> usize {
        self.regions().count()
    }

    /// Whether `[start, end)` overlaps a region the allocator holds, in a zone or the heap's.
    fn overlaps(&self, heap: &Heap, start: usize, end: usize) -> bool {
        let in_zone = self.regions().any(|f| {
            let (s, e) = f.region();
            s < end && start < e
        });
        in_zone || heap.overlaps_added(start, end)
    }

    /// `[start, start + size)` cut at the physical 4 GiB line where it crosses it and both
    /// parts hold at least [`MIN_DMA32_SPLIT`] bytes: the parts that become zones of their
    /// own, the first one always (the second may be empty).
    fn dma32_parts(&self, start: usize, size: usize) -> [(usize, usize); 2] {
        let first = self.phys(start);
        let whole = [(start, size), (0, 0)];
        if first >= DMA32_END {
            return whole;
        }
        let below = usize::try_from(DMA32_END - first).unwrap_or(usize::MAX);
        if below >= size || below < MIN_DMA32_SPLIT || size - below < MIN_DMA32_SPLIT {
            return whole;
        }
        [(start, below), (start + below, size - below)]
    }

    /// The heap's byte allocator's name, as ArceOS's axalloc gives it (`"TLSF"`,
    /// `"slab"`, `"buddy"`): ArceOS's boot log prints `use TLSF allocator.` and its tests
    /// expect that line. The page allocator introduces itself on the next line of the log
    /// (`buddy-sim: N frames ...`, at `init`).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        NAME
    }

    /// Gives the allocator `[start_vaddr, start_vaddr + size)`: its metadata at the head,
    /// the rest to the page allocator, 32 KiB of it to the heap. A region it cannot use is
    /// logged and leaves the allocator empty (every allocation then fails): see
    /// [`GlobalAllocator::try_init`] for the error.
    ///
    /// # Safety
    /// As [`GlobalAllocator::try_init`]: the region is memory that nothing else uses,
    /// readable and writable, for as long as the allocator or anything it handed out is
    /// used (ArceOS's contract for `global_init`).
    pub unsafe fn init(&self, start_vaddr: usize, size: usize) {
        // SAFETY: the caller's contract, `try_init`'s.
        if let Err(e) = unsafe { self.try_init(start_vaddr, size) } {
            error!("buddy-sim page allocator over [{start_vaddr:#x}, +{size:#x}): {e}");
        }
    }

    /// [`GlobalAllocator::init`], saying why a region cannot be used, with one set of page
    /// lists per CPU that ArceOS reserves per-CPU data for (one outside a kernel build).
    ///
    /// # Errors
    /// [`InitError`]: the region is too small for its metadata and a first heap, ends past
    /// the address space, overlaps a region given to the heap before
    /// ([`GlobalAllocator::add_memory`]), or the allocator was initialized before. The
    /// region is checked before anything is written to it.
    ///
    /// # Safety
    /// `[start_vaddr, start_vaddr + size)` is memory that nothing else uses, readable and
    /// writable, for as long as the allocator or anything it handed out is used. In a kernel
    /// build (`target_os = "none"`) with feature `percpu02` or `percpu04`, lists for more than
    /// one CPU and no [`GlobalAllocator::with_cpu_id`], each CPU's per-CPU register (the
    /// `percpu` crate's) is set before that CPU calls the allocator, as ArceOS sets it
    /// first thing on each CPU: a call reads the allocator's per-CPU variable through it.
    pub unsafe fn try_init(&self, start_vaddr: usize, size: usize) -> Result<(), InitError> {
        // SAFETY: the caller's contract.
        unsafe { self.try_init_for_cpus(start_vaddr, size, cpu_count()) }
    }

    /// [`GlobalAllocator::try_init`] with page lists for `cpus` CPUs.
    ///
    /// # Errors
    /// As [`GlobalAllocator::try_init`]; [`InitError::NoCpus`] for `cpus == 0`.
    ///
    /// # Safety
    /// As [`GlobalAllocator::try_init`].
    pub unsafe fn try_init_for_cpus(
        &self,
        start_vaddr: usize,
        size: usize,
        cpus: usize,
    ) -> Result<(), InitError> {
        let end = start_vaddr.checked_add(size).ok_or(InitError::Overflow)?;
        let heap = self.balloc.lock();
        if heap.overlaps_added(start_vaddr, end) {
            return Err(InitError::Overlap);
        }
        // The part below 4 GiB of a region that crosses it is a region of its own.
        let [(start_vaddr, size), rest] = self.dma32_parts(start_vaddr, size);
        let dma32 = self.is_dma32(start_vaddr, size);
        let mut fresh = false;
        let frames = self.regions[0].try_call_once(|| {
            fresh = true;
            // SAFETY: the caller's contract: the region is the allocator's while it is used.
            unsafe { Frames::carve(start_vaddr, size, cpus, self.cpu_id, dma32) }
        })?;
        if !fresh {
            return Err(InitError::AlreadyInitialized);
        }
        self.published.store(1, Ordering::Release);
        drop(heap);
        self.record_owners_in(frames);
        info!(
            "buddy-sim: {} frames in [{start_vaddr:#x}, +{size:#x}), {} free, {} CPUs; zeroed pages cleared with {}",
            frames.zone().span().pages,
            frames.free_pages(),
            frames.cpus(),
            self.clear_strategy().unwrap_or("-"),
        );
        if rest.1 != 0 {
            // SAFETY: the caller's contract covers the whole region.
            if let Err(e) = unsafe { self.add_memory(rest.0, rest.1) } {
                warn!("[{:#x}, +{:#x}) above 4 GiB: {e:?}", rest.0, rest.1);
            }
        }
        let heap = self
            .alloc_pages(FIRST_HEAP / PAGE, PAGE, UsageKind::RustHeap)
            .map_err(|_| InitError::FirstHeap)?;
        self.balloc
            .lock()
            .give_pages(heap, FIRST_HEAP)
            .map_err(|_| InitError::FirstHeap)?;
        Ok(())
    }

    /// Gives a region's zone its page_owner table if page_owner is on (feature
    /// `page-owner`; nothing without it). A region without room for one is logged and
    /// records nothing.
    fn record_owners_in(&self, frames: &Frames<C>) {
        #[cfg(feature = "page-owner")]
        if let Err(e) = self.owner_table_for_new(frames) {
            warn!("page_owner: no room for a region's records: {e:?}");
        }
        #[cfg(not(feature = "page-owner"))]
        let _ = frames;
    }

    /// Whether all of `[start, start + size)` lies below 4 GiB in physical memory.
    fn is_dma32(&self, start: usize, size: usize) -> bool {
        let last = start.saturating_add(size.saturating_sub(1));
        self.phys(last) < DMA32_END
    }

    /// Gives the allocator another region, `[start_vaddr, start_vaddr + size)`, with holes
    /// between it and the others: after `init`, a zone of its own for the page allocator
    /// (its metadata at its head; cut in two where it crosses 4 GiB in physical memory), or
    /// the heap's memory where it is too small for a zone (or all [`MAX_REGIONS`] are
    /// taken). Before `init`, the heap's first memory (its whole 32 KiB), as ArceOS's
    /// axalloc gives it.
    ///
    /// # Errors
    /// `MemoryOverlap` for a region that overlaps one the allocator holds; `InvalidParam` for
    /// a region without a whole page (or that ends past the address space); `NoMemory` when
    /// it would go to the heap and [`MAX_ADDED_REGIONS`] regions were given to it already.
    /// Nothing changes then.
    ///
    /// # Safety
    /// The region is memory that nothing else uses, readable and writable, for as long as
    /// the allocator or anything it handed out is used (ArceOS's contract for
    /// `global_add_memory`); the per-CPU registers as [`GlobalAllocator::try_init`] says.
    pub unsafe fn add_memory(&self, start_vaddr: usize, size: usize) -> AllocResult {
        self.add_region(start_vaddr, size, true)
    }

    /// Gives the whole pages of `[start_vaddr, start_vaddr + size)` to the heap's byte
    /// allocator, not to the page allocator: what ArceOS's 0.3 line does with every region
    /// after the first (before `init`, it becomes the heap's first memory).
    ///
    /// # Errors
    /// `MemoryOverlap` for a region that overlaps one the allocator holds; `InvalidParam` for
    /// a region without a whole page (or that ends past the address space); `NoMemory` when
    /// [`MAX_ADDED_REGIONS`] regions were given to the heap already. Nothing changes then.
    ///
    /// # Safety
    /// As [`GlobalAllocator::add_memory`].
    pub unsafe fn add_heap_memory(&self, start_vaddr: usize, size: usize) -> AllocResult {
        self.add_region(start_vaddr, size, false)
    }

    /// [`GlobalAllocator::add_memory`] (`zones`), or [`GlobalAllocator::add_heap_memory`].
    fn add_region(&self, start_vaddr: usize, size: usize, zones: bool) -> AllocResult {
        let end = start_vaddr
            .checked_add(size)
            .ok_or(AllocError::InvalidParam)?;
        let mut heap = self.balloc.lock();
        if self.overlaps(&heap, start_vaddr, end) {
            return Err(AllocError::MemoryOverlap);
        }
        let Some(cpus) = self.first().map(Frames::cpus).filter(|_| zones) else {
            return heap.add(start_vaddr, size);
        };
        let mut taken = Err(AllocError::InvalidParam);
        let first_new = self.published.load(Ordering::Relaxed);
        for (start, len) in self.dma32_parts(start_vaddr, size) {
            if len == 0 {
                continue;
            }
            let slot = self.published.load(Ordering::Relaxed);
            let dma32 = self.is_dma32(start, len);
            let zone = match self.regions.get(slot) {
                // SAFETY: the contract of `add_memory`, this function's only caller with
                // `zones`; the slot is unset (slots are set in order, under the heap's lock,
                // which this call holds).
                Some(r) => r.try_call_once(|| unsafe {
                    Frames::carve(start, len, cpus, self.cpu_id, dma32)
                }),
                None => Err(InitError::AlreadyInitialized),
            };
            match zone {
                Ok(frames) => {
                    info!(
                        "buddy-sim: region {slot}: {} frames in [{start:#x}, +{len:#x}){}",
                        frames.zone().span().pages,
                        if dma32 { ", DMA32" } else { "" }
                    );
                    self.published.store(slot + 1, Ordering::Release);
                    taken = Ok(());
                }
                // Too small for a zone's metadata and pages, or no slot left: the heap's.
                Err(_) => match heap.add(start, len) {
                    Ok(()) => taken = Ok(()),
                    Err(e) if taken.is_err() => taken = Err(e),
                    Err(_) => {}
                },
            }
        }
        drop(heap);
        for frames in self.regions().skip(first_new) {
            self.record_owners_in(frames);
        }
        taken
    }

    /// `layout.size()` bytes aligned to `layout.align()` from the heap. A small object (up
    /// to 2 KiB, aligned to at most 16) is one of its size class (16, 32, 48, 64, 80, 96,
    /// 128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 1024, 1280, 1536 or 2048 bytes)
    /// from a slab: a page (four pages past 512 bytes) of objects of that class alone from
    /// the zone (from the byte allocator when the zone has none), one of the calling CPU's
    /// slabs, under its lock (the one its page calls take), once the zone has CPUs; with
    /// no memory left for a slab, a free object of another CPU's. A request past 2 KiB up
    /// to 256 KiB, once the zone exists, is a block of pages of its own, its size rounded
    /// up to a power of two of pages (Linux's `kmalloc_large`: a 5000-byte request holds
    /// two pages, counted whole for [`UsageKind::RustHeap`]), from the calling CPU's
    /// magazine or lists as [`GlobalAllocator::alloc_pages`] takes it, without the heap's
    /// lock. Anything else comes from the byte allocator, under the heap's one lock, which
    /// grows with pages from the zone when it has no room. For a request up to 4 MiB
    /// (Linux's largest block), by doubling as ArceOS's axalloc does (the heap's size or the
    /// request's, to a power of two, up to 4 MiB), halving on failure down to what the
    /// request needs; a larger request gets a run of exactly what it needs (its size,
    /// alignment and the byte allocator's headers: a 32 MiB vector takes 32 MiB and a page,
    /// where doubling would take 64 MiB, which a 128 MiB machine cannot give twice).
    ///
    /// # Errors
    /// `NoMemory` when neither the heap nor the zone has room (for a block of pages: when
    /// the zones have no such block, whatever room the byte allocator has).
    #[inline]
    pub fn alloc(&self, layout: Layout) -> AllocResult<NonNull<u8>> {
        let class = Class::of(layout);
        // A small object, once the zone has CPUs: from this CPU's object magazine, else
        // from its slabs under its slot.
        if let Some(class) = class
            && let Some(frames) = self.first()
        {
            if let Some(object) = frames.pop_object(class, layout.size()) {
                return Ok(object);
            }
            return self.alloc_object(frames, class, layout);
        }
        self.alloc_past_slabs(class, layout)
    }

    /// [`GlobalAllocator::alloc`] of anything but a small object once the zone has CPUs,
    /// out of line: a large request's block of pages ([`heap_block_of`]), from this CPU's
    /// magazine or lists, once the zone exists, counted for [`UsageKind::RustHeap`] (the
    /// heap counts those pages its own: [`GlobalAllocator::heap_block_bytes`]); else the
    /// heap's ([`GlobalAllocator::alloc_on_heap`]).
    #[inline(never)]
    fn alloc_past_slabs(&self, class: Option<Class>, layout: Layout) -> AllocResult<NonNull<u8>> {
        if let Some((pages, align)) = heap_block_of(layout)
            && self.first().is_some()
        {
            let at = self.alloc_pages(pages, align, UsageKind::RustHeap)?;
            // Frames are numbered by their address: the block's address is a pointer to
            // it, never null (a region's first page holds its metadata).
            return NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(at))
                .ok_or(AllocError::NoMemory);
        }
        self.alloc_on_heap(class, layout)
    }

    /// An object of `class` for `layout` past the CPU's object magazine: from its slabs
    /// under its slot, a batch more moved into the magazine meanwhile when its CPU id is
    /// exclusive (so that the next calls take no lock); with no free object there, from a
    /// new slab ([`GlobalAllocator::alloc_cpu_slab`]).
    #[inline(never)]
    fn alloc_object(
        &self,
        frames: &Frames<C>,
        class: Class,
        layout: Layout,
    ) -> AllocResult<NonNull<u8>> {
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        let own = frames.exclusive(&pinned);
        if let Some(own) = &own {
            self.honour_object_drain_request(frames, own);
        }
        let mut cpu = frames.this_cpu();
        if let Some(object) = cpu.slabs.alloc(class, layout.size()) {
            if let Some(own) = own
                && own.id() == cpu.id()
            {
                own.fill_objects(class, OBJECT_BATCH, || cpu.slabs.alloc(class, 0));
            }
            return Ok(object);
        }
        drop(cpu);
        self.alloc_cpu_slab(frames, class, layout)
    }

    /// [`GlobalAllocator::alloc`] under the heap's lock: a large request from the byte
    /// allocator, a small one (before the zone has CPUs) from the heap's own slabs.
    #[inline(always)]
    fn alloc_on_heap(&self, class: Option<Class>, layout: Layout) -> AllocResult<NonNull<u8>> {
        let mut balloc = self.balloc.lock();
        let Some(class) = class else {
            let ptr = self.alloc_bytes(&mut balloc, layout)?;
            balloc.usage.add(UsageKind::RustHeap, layout.size());
            return Ok(ptr);
        };
        match balloc.slabs.alloc(class, layout.size()) {
            Some(object) => Ok(object),
            None => self.alloc_slab(&mut balloc, class, layout),
        }
    }

    /// A block for a slab of `class`: pages from the zone, else a block of the byte
    /// allocator (grown if it must be) under `balloc`, the heap's lock, taken here if the
    /// caller does not hold it.
    fn slab_block(
        &self,
        balloc: Option<&mut Heap>,
        class: Class,
    ) -> AllocResult<(NonNull<u8>, Source)> {
        let bytes = class.slab_bytes();
        // Frames are numbered by their address: the run's address is a pointer to it (as
        // the page calls' callers use it), never null (a region's first page holds its
        // metadata).
        let run = self
            .alloc_pages(bytes / PAGE, bytes, UsageKind::RustHeap)
            .ok()
            .and_then(|at| NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(at)));
        if let Some(at) = run {
            return Ok((at, Source::Zone));
        }
        let at = match balloc {
            Some(balloc) => self.alloc_bytes(balloc, class.slab_layout())?,
            None => self.alloc_bytes(&mut self.balloc.lock(), class.slab_layout())?,
        };
        Ok((at, Source::Heap))
    }

    /// An object of `class` for `layout` when this CPU's slabs of the class have no free
    /// one: a new slab ([`GlobalAllocator::slab_block`], no slot held meanwhile) for the
    /// slabs of the CPU the call runs on then; with no memory for one, a free object of a
    /// slab of the heap's own or of another CPU's ([`GlobalAllocator::alloc_elsewhere`]).
    #[cold]
    #[inline(never)]
    fn alloc_cpu_slab(
        &self,
        frames: &Frames<C>,
        class: Class,
        layout: Layout,
    ) -> AllocResult<NonNull<u8>> {
        let (at, source) = match self.slab_block(None, class) {
            Ok(block) => block,
            Err(e) => return self.alloc_elsewhere(frames, class, layout).ok_or(e),
        };
        let mut cpu = frames.this_cpu();
        let owner = Owner::Cpu(cpu.id());
        // SAFETY: a run of the zone or a block of the byte allocator just handed out, of
        // the slab's size and alignment, used by nothing else until the slabs give it back
        // (`dealloc`).
        unsafe { cpu.slabs.add(class, at, source, owner) };
        cpu.slabs
            .alloc(class, layout.size())
            .ok_or(AllocError::NoMemory)
    }

    /// An object of `class` for `layout` from any slab with a free one, when the calling
    /// CPU's have none and no memory is left for another: the heap's own slabs (under its
    /// lock), then each CPU's (under that CPU's slot, one at a time), as SLUB takes a partial
    /// slab from its node's list before it gives up. The object stays its slab's: its free
    /// goes to the slab's owner, whose slabs count it.
    #[cold]
    #[inline(never)]
    fn alloc_elsewhere(
        &self,
        frames: &Frames<C>,
        class: Class,
        layout: Layout,
    ) -> Option<NonNull<u8>> {
        core::iter::once(Owner::Heap)
            .chain((0..frames.cpus()).map(Owner::Cpu))
            .find_map(|owner| self.with_slabs(owner, |slabs| slabs.alloc(class, layout.size()))?)
    }

    /// An object of `class` for `layout` when no slab of the heap's own has a free one
    /// (before the zone has CPUs): a new slab for the heap's own, `balloc` held.
    #[cold]
    #[inline(never)]
    fn alloc_slab(
        &self,
        balloc: &mut Heap,
        class: Class,
        layout: Layout,
    ) -> AllocResult<NonNull<u8>> {
        let (at, source) = self.slab_block(Some(&mut *balloc), class)?;
        // SAFETY: a run of the zone or a block of the byte allocator just handed out, of
        // the slab's size and alignment, used by nothing else until the slabs give it back
        // (`dealloc`).
        unsafe { balloc.slabs.add(class, at, source, Owner::Heap) };
        balloc
            .slabs
            .alloc(class, layout.size())
            .ok_or(AllocError::NoMemory)
    }

    /// `layout` from the byte allocator, grown first if it has no room.
    #[inline(always)]
    fn alloc_bytes(&self, balloc: &mut Heap, layout: Layout) -> AllocResult<NonNull<u8>> {
        match balloc.alloc(layout) {
            Ok(ptr) => Ok(ptr),
            Err(_) => self.grow_and_alloc(balloc, layout),
        }
    }

    /// [`GlobalAllocator::alloc`] when the heap has no room: grown until the request fits.
    #[inline(never)]
    fn grow_and_alloc(&self, balloc: &mut Heap, layout: Layout) -> AllocResult<NonNull<u8>> {
        let mut need = heap_growth_for(layout).ok_or(AllocError::NoMemory)?;
        loop {
            let block = self
                .first()
                .map_or(PAGE, Frames::largest_block_bytes)
                .min(HEAP_DOUBLING_LIMIT);
            let mut grow = if need > block {
                need
            } else {
                balloc.total().clamp(need, block).next_power_of_two()
            };
            let heap = loop {
                match self.alloc_pages(grow / PAGE, PAGE, UsageKind::RustHeap) {
                    Ok(at) => break at,
                    Err(e) if grow == need => return Err(e),
                    Err(_) => grow = (grow / 2).max(need),
                }
            };
            // ArceOS's log line (its tests look for it).
            debug!("expand heap memory: [{heap:#x}, {:#x})", heap + grow);
            balloc.give_pages(heap, grow)?;
            if let Ok(ptr) = balloc.alloc(layout) {
                return Ok(ptr);
            }
            // The byte allocator still does not fit the request in what it was given (a
            // buddy byte allocator wants the block aligned to its size): the next growth is
            // twice as large.
            need = need.checked_mul(2).ok_or(AllocError::NoMemory)?;
        }
    }

    /// Gives back `pos`, allocated by [`GlobalAllocator::alloc`] with `layout`: a small
    /// object to its slab, under the lock of the CPU whose slab it is, whichever CPU calls
    /// (a slab left with no object handed out goes back to where its block came from,
    /// unless it is its class's only empty one on that CPU), a large request's block of
    /// pages to the calling CPU's magazine or lists, anything else to the byte allocator.
    ///
    /// # Safety
    /// `pos` came from [`GlobalAllocator::alloc`] of this allocator with this `layout`, is
    /// given back once and not used after (ArceOS's contract).
    #[inline]
    pub unsafe fn dealloc(&self, pos: NonNull<u8>, layout: Layout) {
        let Some(class) = Class::of(layout) else {
            // SAFETY: the caller's promise: `alloc` served this layout past the slabs.
            return unsafe { self.dealloc_past_slabs(pos, layout) };
        };
        // An object of this CPU's slabs into its object magazine, with no lock.
        if let Some(frames) = self.first() {
            // SAFETY: the caller's promise: `alloc` served this layout from a slab of its
            // class, one of the first region's slots' or the heap's, and the object is not
            // freed yet.
            if unsafe { frames.push_object(class, pos, layout.size()) } {
                return;
            }
        }
        // SAFETY: as just said.
        unsafe { self.dealloc_object(class, pos, layout) }
    }

    /// [`GlobalAllocator::dealloc`] of an object (of `class`) its CPU's object magazine did
    /// not take: one of this CPU's slabs whose magazine is full goes in once a batch of the
    /// magazine's objects went back to their slabs; any other to its slab, under the lock of
    /// the CPU whose slab holds it.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc`], for an object of `class`.
    #[inline(never)]
    unsafe fn dealloc_object(&self, class: Class, pos: NonNull<u8>, layout: Layout) {
        if let Some(frames) = self.first() {
            let irq = IrqOff::new();
            let pinned = Pinned::new(&irq);
            let own = frames.exclusive(&pinned);
            if let Some(own) = &own {
                self.honour_object_drain_request(frames, own);
            }
            if let Some(own) = own
                && own.objects_full(class)
                // SAFETY: the caller's promise: the object is handed out, so its slab lives.
                && unsafe { Slabs::owner_of(class, pos) } == Ok(Owner::Cpu(own.id()))
            {
                self.flush_objects(frames, &own, (class, OBJECT_BATCH), false);
                if own.push_object(class, pos, layout.size()) {
                    return;
                }
            }
        }
        // SAFETY: the caller's promise: `alloc` served this layout from a slab of its
        // class, one of this allocator's slabs, and the object is not freed yet.
        match unsafe { Slabs::free_to_owner(self, class, pos, layout.size()) } {
            Ok(None) => {}
            Ok(Some(slab)) => self.give_back_slab(slab),
            Err(e) => Self::refused_object(pos, layout, e),
        }
    }

    /// Gives up to `most` (at most [`OBJECT_BATCH`]) objects of `class` of `own`'s object
    /// magazine back to their slabs, the CPU's, under its slot taken once; the slabs they
    /// empty go back where their blocks came from once it is let go, but with
    /// `heap_locked` (the caller may hold the heap's lock: a page call the heap's growth
    /// makes) those of the byte allocator's, which stay the CPU's slabs, empty (giving
    /// them back would wait for that lock, and frees no page). Whether it gave any.
    fn flush_objects(
        &self,
        frames: &Frames<C>,
        own: &OwnMagazines<'_>,
        (class, most): (Class, usize),
        heap_locked: bool,
    ) -> bool {
        let mut emptied: [Option<FreeSlab>; OBJECT_BATCH] = [const { None }; OBJECT_BATCH];
        let (mut flushed, mut slabs) = (0, 0);
        if let Some(mut cpu) = frames.lock_cpu(own.id()) {
            let owner = Owner::Cpu(cpu.id());
            own.drain_objects(class, most.min(OBJECT_BATCH), |object| {
                flushed += 1;
                // SAFETY: the magazine held it: a free object of this CPU's slab of `class`
                // that the slab counts handed out (asked for as 0 bytes: the magazine
                // counted its bytes), freed to it once, here.
                match unsafe { cpu.slabs.free(class, object, 0) } {
                    Ok(Some(slab)) if heap_locked && slab.source == Source::Heap => {
                        // SAFETY: the block of the slab just emptied, of the slab's size and
                        // alignment, every object free: nothing else uses it.
                        unsafe { cpu.slabs.add(class, slab.at, Source::Heap, owner) };
                    }
                    // At most one slab an object, and at most `OBJECT_BATCH` objects: a
                    // place for each.
                    Ok(Some(slab)) => {
                        if let Some(place) = emptied.get_mut(slabs) {
                            *place = Some(slab);
                            slabs += 1;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => error!("object magazine's {object:p}: {e:?}, nothing freed"),
                }
            });
        }
        for slab in emptied.iter_mut().take(slabs).filter_map(Option::take) {
            self.give_back_slab(slab);
        }
        flushed > 0
    }

    /// Gives every object of the calling CPU's object magazines back to their slabs (a page
    /// allocation about to fail, which may run under the heap's lock: the slabs they empty
    /// go back to the zone, the byte allocator's stay; [`GlobalAllocator::flush_objects`]):
    /// whether there was one.
    fn flush_own_objects(&self) -> bool {
        let Some(frames) = self.first() else {
            return false;
        };
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        let Some(own) = frames.exclusive(&pinned) else {
            return false;
        };
        self.flush_every_object(frames, &own, true)
    }

    /// Gives every object of `own`'s object magazines back to their slabs, as
    /// [`GlobalAllocator::flush_objects`] with `heap_locked`: whether there was one.
    fn flush_every_object(
        &self,
        frames: &Frames<C>,
        own: &OwnMagazines<'_>,
        heap_locked: bool,
    ) -> bool {
        let mut flushed = false;
        for class in Class::all() {
            while self.flush_objects(frames, own, (class, OBJECT_BATCH), heap_locked) {
                flushed = true;
            }
        }
        flushed
    }

    /// Honours another CPU's request for `own`'s objects (an allocation about to fail
    /// there): every object back to its slabs, the slabs they empty back where their blocks
    /// came from. The caller holds no lock of the allocator's.
    fn honour_object_drain_request(&self, frames: &Frames<C>, own: &OwnMagazines<'_>) {
        if own.take_object_drain_request() {
            self.flush_every_object(frames, own, false);
        }
    }

    /// [`GlobalAllocator::dealloc`] of what [`GlobalAllocator::alloc_past_slabs`] handed
    /// out, out of line: a large request's block of pages, which its layout names and a
    /// region holds (a large request before `init` took the byte allocator's memory, which
    /// no region holds); else a block of the byte allocator.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc`], for a layout the slabs' classes do not serve.
    #[inline(never)]
    unsafe fn dealloc_past_slabs(&self, pos: NonNull<u8>, layout: Layout) {
        let at = pos.as_ptr().addr();
        if let Some((pages, _)) = heap_block_of(layout)
            && self.region_of(at).is_some()
        {
            // SAFETY: the caller's promise: `alloc_past_slabs` handed out this block of
            // `pages` pages for this layout, given back once.
            return unsafe { self.dealloc_pages(at, pages, UsageKind::RustHeap) };
        }
        // SAFETY: the caller's promise: the byte allocator served this layout.
        unsafe { self.dealloc_bytes(pos, layout) }
    }

    /// [`GlobalAllocator::dealloc`] of a block of the byte allocator, under the heap's lock.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc`], for a layout above the slabs' classes.
    #[inline(always)]
    unsafe fn dealloc_bytes(&self, pos: NonNull<u8>, layout: Layout) {
        let mut balloc = self.balloc.lock();
        balloc.usage.sub(UsageKind::RustHeap, layout.size());
        balloc.dealloc(pos, layout);
    }

    /// `f` on the heap's own slabs, under its lock. Out of line: a free of a CPU's object
    /// carries none of it.
    #[inline(never)]
    fn with_heap_slabs<R>(&self, f: impl FnOnce(&mut Slabs) -> R) -> R {
        f(&mut self.balloc.lock().slabs)
    }

    /// Gives back the block of a slab with no object handed out to where it came from (no
    /// lock held: a page call takes its CPU's slot, a block of the byte allocator the
    /// heap's lock).
    #[cold]
    #[inline(never)]
    fn give_back_slab(&self, slab: FreeSlab) {
        match slab.source {
            // SAFETY: a run the zone handed out to the slabs (`slab_block`'s, of the slab's
            // pages), which no longer use it.
            Source::Zone => unsafe {
                let pages = slab.class.slab_bytes() / PAGE;
                self.dealloc_pages(slab.at.as_ptr().addr(), pages, UsageKind::RustHeap);
            },
            Source::Heap => self
                .balloc
                .lock()
                .dealloc(slab.at, slab.class.slab_layout()),
        }
    }

    /// Logs a free of a small object that its slab refused (the caller broke
    /// [`GlobalAllocator::dealloc`]'s contract): nothing was freed.
    #[cold]
    #[inline(never)]
    fn refused_object(pos: NonNull<u8>, layout: Layout, e: SlabError) {
        error!("dealloc({pos:p}, {layout:?}): {e:?}, nothing freed");
    }

    /// `num_pages` contiguous pages aligned to `align_pow2` bytes (a power of two, at least
    /// 4 KiB), from the calling CPU's lists where the run is small, else the zone's blocks
    /// or, past its largest block, any free run (as ArceOS's bitmap allocator finds one).
    ///
    /// # Errors
    /// `NoMemory` when the zone has no such run (or before `init`); `InvalidParam` for an
    /// alignment that is not a power of two.
    #[inline]
    pub fn alloc_pages(
        &self,
        num_pages: usize,
        align_pow2: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        // One page (a page table's), the call a kernel makes most, on a path of its own; a
        // small block's worth of pages (a task stack, a heap's small run, a DMA buffer
        // aligned above its size) from the CPU's list on another; anything else, or nothing
        // there, out of line (a larger block, a heap's growth, from the zone first, then the
        // general path). Each out of line, so that none carries the others' registers.
        // One owner tag per call (page_owner's sequence number, taken once).
        let tag = self.owners.tag(kind);
        if num_pages == 1 && align_pow2 == PAGE {
            if let Some(at) = self.alloc_one_page(kind, tag) {
                return Ok(at.get());
            }
        } else if let Some((order, align)) = listed_block(num_pages, align_pow2)
            && let Some(at) = match align {
                None => self.alloc_one_block(order, kind, tag),
                Some(align) => self.alloc_aligned_block(order, align, kind, tag),
            }
        {
            return Ok(at.get());
        }
        self.take_pages((kind, tag), num_pages, align_pow2)
    }

    /// One page from the first region's CPU list (its zone's frozen page), counted for
    /// `kind`; `None` when that list and its refill have none, or before `init`.
    #[inline(never)]
    fn alloc_one_page(&self, kind: UsageKind, tag: OwnerTag) -> Option<NonZeroUsize> {
        self.first()?.alloc_block(Order::ZERO, None, kind, tag)
    }

    /// One block of `order` from the first region's CPU list for it (its zone's frozen
    /// block), counted for `kind`; `None` when that list and its refill have none, or
    /// before `init`.
    #[inline(never)]
    fn alloc_one_block(
        &self,
        order: Order,
        kind: UsageKind,
        tag: OwnerTag,
    ) -> Option<NonZeroUsize> {
        self.first()?.alloc_block(order, None, kind, tag)
    }

    /// One block of `order` starting aligned to `2^align` frames (above its size: a DMA
    /// buffer) from the first region's CPU list for its order, counted for `kind`; `None`
    /// when that list has none so aligned (no split: the general path's, which leaves the
    /// pieces past the block on the lists), or before `init`.
    #[inline(never)]
    fn alloc_aligned_block(
        &self,
        order: Order,
        align: Order,
        kind: UsageKind,
        tag: OwnerTag,
    ) -> Option<NonZeroUsize> {
        self.first()?.alloc_block(order, Some(align), kind, tag)
    }

    /// [`GlobalAllocator::alloc_pages`] of anything but one page or a listed block (or of
    /// one the fast paths did not find), out of line with its request's kind folded in: a
    /// block above the listed orders (a heap's growth) from the zone, else the general
    /// path. The block's test here, not in `alloc_pages`, leaves the code of the listed
    /// paths as it was (with the test there, one page and small blocks ran 4% slower on the
    /// same instructions).
    #[inline(never)]
    fn take_pages(
        &self,
        (kind, tag): (UsageKind, OwnerTag),
        num_pages: usize,
        align_pow2: usize,
    ) -> AllocResult<usize> {
        // The first region's block; `None` when it has none (the general path looks
        // further), or before `init`.
        if let Some(order) = unlisted_block(num_pages, align_pow2)
            && let Some(at) = self
                .first()
                .and_then(|frames| frames.alloc_unlisted_block(order, kind, tag))
        {
            return Ok(at);
        }
        self.take_general((kind, tag), num_pages, align_pow2)
    }

    /// [`GlobalAllocator::take_pages`] through the general path, out of line: its frame is
    /// large, and a block above the listed orders does not need it.
    #[inline(never)]
    fn take_general(
        &self,
        kind: (UsageKind, OwnerTag),
        num_pages: usize,
        align_pow2: usize,
    ) -> AllocResult<usize> {
        self.take(kind, Want::Pages(num_pages, align_pow2), false)
    }

    /// [`GlobalAllocator::alloc_pages`] from memory below 4 GiB in physical addresses, for a
    /// device that reaches only that far (the regions below it, or the part below it of one
    /// that crosses it).
    ///
    /// # Errors
    /// As [`GlobalAllocator::alloc_pages`]; `NoMemory` also when no region is below 4 GiB.
    pub fn alloc_dma32_pages(
        &self,
        num_pages: usize,
        align_pow2: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        let tag = self.owners.tag(kind);
        self.take((kind, tag), Want::Pages(num_pages, align_pow2), true)
    }

    /// [`GlobalAllocator::alloc_pages`] of pages that read zero: blocks the zone knows are
    /// zero if it has them, else cleared with zero-core's strategy for this CPU
    /// ([`GlobalAllocator::clear_strategy`]).
    ///
    /// # Errors
    /// As [`GlobalAllocator::alloc_pages`].
    pub fn alloc_zeroed_pages(
        &self,
        num_pages: usize,
        align_pow2: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        let tag = self.owners.tag(kind);
        self.take((kind, tag), Want::Zeroed(num_pages, align_pow2), false)
    }

    /// Takes exactly the `num_pages` pages from `start` (aligned to `align_pow2`), all or
    /// nothing. Pages on any CPU's lists are taken from there, and those in the calling
    /// CPU's magazines; a page in another CPU's magazine is that CPU's to give back, which
    /// this call asks it to do at its next call ([`CpuId::exclusive_cpu`]).
    ///
    /// # Errors
    /// `NoMemory` if a page of the run is not free (or before `init`), or waits in another
    /// CPU's magazine; `InvalidParam` for a misaligned `start` or a run outside the zone.
    pub fn alloc_pages_at(
        &self,
        start: usize,
        num_pages: usize,
        align_pow2: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        let frames = self.region_of(start).ok_or(AllocError::NoMemory)?;
        // The run may lie partly on other CPUs' lists, which the zone drains: every slot held.
        let tag = self.owners.tag(kind);
        frames
            .every_cpu(|cpu| {
                tag.set(frames.zone(), cpu.id());
                let at = cpu.pages.alloc_pages_at(start, num_pages, align_pow2)?;
                cpu.usage.add(kind, num_pages.wrapping_mul(PAGE));
                Ok(at)
            })
            .unwrap_or(Err(AllocError::NoMemory))
    }

    /// Splits the block that starts at `pos` (a run of `2^k` pages aligned to its size, as
    /// a 2 MiB huge page is) into order-0 pages, each freed alone from then on: what
    /// splitting a transparent huge page needs (StarryOS's `split_pages`). Any page of a
    /// run can be freed alone without it ([`GlobalAllocator::dealloc_pages`] splits what it
    /// must); after it, such frees split nothing. Returns the pages the block held.
    /// Metadata only: no byte moves ([`buddy_sim::AxPageAllocator::split_pages`]).
    ///
    /// # Errors
    /// `InvalidParam` if `pos` is not the first page of an allocated block of this
    /// allocator; `NotAllocated` for a free one. Nothing changes then.
    ///
    /// # Safety
    /// The caller owns the run at `pos` (handed out by this allocator, not given back), and
    /// no other call gives back or splits it while this one runs: a block handed out
    /// frozen (a block's worth of pages) is rewritten without a compare-and-swap, as its
    /// free reads it.
    #[allow(unsafe_code)]
    pub unsafe fn split_pages(&self, pos: usize) -> AllocResult<usize> {
        let frames = self.region_of(pos).ok_or(AllocError::InvalidParam)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { frames.this_cpu().pages.split_pages(pos) }
    }

    /// Gives back the `num_pages` pages from `pos`: a run from
    /// [`GlobalAllocator::alloc_pages`] or any part of one, as the fewest aligned blocks. A
    /// run the zone did not hand out (or handed back already) changes nothing and is logged.
    ///
    /// # Safety
    /// The pages came from this allocator's page calls, are given back once and not used
    /// after (ArceOS's contract): the zone cannot tell a run its caller still uses from one
    /// it gave up, and hands freed pages to the next caller.
    ///
    /// ```compile_fail,E0133
    /// # use axalloc_buddy::{GlobalAllocator, UsageKind};
    /// fn give_back(a: &GlobalAllocator, run: usize) {
    ///     a.dealloc_pages(run, 1, UsageKind::VirtMem); // not without `unsafe`
    /// }
    /// ```
    #[inline]
    pub unsafe fn dealloc_pages(&self, pos: usize, num_pages: usize, kind: UsageKind) {
        // One page or one block of the first region, handed out whole, on a path of its
        // own (as `alloc_pages`); each ends in the general path if it cannot free the run,
        // so that this part is only a choice of calls (no frame to keep across them).
        if num_pages == 1 {
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.free_one_page(pos, kind) };
        }
        // A listed block to the CPU's list; a larger one (a heap's growth) straight to the
        // zone.
        if let Some(order) = order_up_to(PCP_MAX_ORDER, num_pages) {
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.free_one_block(pos, order, kind) };
        }
        if let Some(order) = order_up_to(Order::MAX_SUPPORTED, num_pages) {
            // SAFETY: the caller's promise, passed on.
            return unsafe { self.free_unlisted_block(pos, order, kind) };
        }
        // SAFETY: the caller's promise, passed on.
        unsafe { self.give_back(pos, num_pages, kind) }
    }

    /// Gives back the page at `pos`: on its own path if it is a page of the first region
    /// handed out alone, through [`GlobalAllocator::give_back`] (which records and logs why)
    /// otherwise. Out of line with its order known, so that the call a kernel makes most
    /// carries nothing of a block's.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`].
    #[inline(never)]
    unsafe fn free_one_page(&self, pos: usize, kind: UsageKind) {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            self.in_first(pos, Order::ZERO, kind, |frames| {
                frames.free_block(pos, Order::ZERO, kind)
            });
        }
    }

    /// [`GlobalAllocator::free_one_page`] of a block of `order` handed out whole.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`].
    #[inline(never)]
    unsafe fn free_one_block(&self, pos: usize, order: Order, kind: UsageKind) {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            self.in_first(pos, order, kind, |frames| {
                frames.free_block(pos, order, kind)
            });
        }
    }

    /// [`GlobalAllocator::free_one_block`] of a block above the listed orders (what
    /// `take_pages` takes from the zone): the zone's whole free at once, without the listed
    /// path's registers.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`].
    #[inline(never)]
    unsafe fn free_unlisted_block(&self, pos: usize, order: Order, kind: UsageKind) {
        // SAFETY: the caller's promise, passed on.
        unsafe {
            self.in_first(pos, order, kind, |frames| {
                frames.free_unlisted_block(pos, order, kind)
            });
        }
    }

    /// `free` of the first region if `pos` is one of its pages (a block of it handed out
    /// whole is given back there, and `free` takes anything else to the region's general
    /// free); otherwise the block of `order` at `pos` through [`GlobalAllocator::give_back`].
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`] for the block of `order` at `pos`.
    #[inline(always)]
    unsafe fn in_first(
        &self,
        pos: usize,
        order: Order,
        kind: UsageKind,
        free: impl FnOnce(&Frames<C>),
    ) {
        match self.first() {
            Some(frames) if frames.holds(pos) => free(frames),
            // SAFETY: the caller's promise, passed on.
            _ => unsafe { self.give_back(pos, order.pages() as usize, kind) },
        }
    }

    /// [`GlobalAllocator::dealloc_pages`] of any run (and of a page its fast path did not
    /// free, to record and log why), out of line.
    ///
    /// # Safety
    /// As [`GlobalAllocator::dealloc_pages`].
    #[inline(never)]
    unsafe fn give_back(&self, pos: usize, num_pages: usize, kind: UsageKind) {
        match self.region_of(pos) {
            // SAFETY: the caller's promise, passed on.
            Some(frames) => unsafe { frames.give_back(pos, num_pages, kind) },
            None => warn!("dealloc_pages({pos:#x}, {num_pages}): in no region of the allocator"),
        }
    }

    /// What `want` asks for, counted for `kind` (the heap's pages count as its bytes, in
    /// `alloc`), from the calling CPU's page allocator of each region in turn (`init`'s
    /// first; below 4 GiB only, for `dma32`) until one has it: first the regions not
    /// [exhausted](Frames::exhausted), then, if none has it, every region with every CPU's
    /// lists drained.
    #[inline(always)]
    fn take(&self, kind: (UsageKind, OwnerTag), want: Want, dma32: bool) -> AllocResult<usize> {
        let first = self.first().ok_or(AllocError::NoMemory)?;
        if !first.exhausted() && (!dma32 || first.dma32()) {
            match Self::take_in(first, kind, want) {
                Err(AllocError::NoMemory) => {}
                done => return done,
            }
        }
        self.take_elsewhere(kind, want, dma32)
    }

    /// [`GlobalAllocator::take`] from the regions after the first, and then, with every
    /// CPU's lists drained, from every region again: out of line, so that the common call
    /// (the first region has the pages) carries none of it.
    #[inline(never)]
    fn take_elsewhere(
        &self,
        kind: (UsageKind, OwnerTag),
        want: Want,
        dma32: bool,
    ) -> AllocResult<usize> {
        let others = self.regions().skip(1).filter(|f| !f.exhausted());
        let result = Self::take_from(others, kind, want, dma32);
        if !matches!(result, Err(AllocError::NoMemory)) {
            return result;
        }
        // Pages other CPUs keep on their lists may complete the run (Linux drains every
        // CPU's lists before an allocation fails), and a region passed over as exhausted
        // may have pages again: drained, every region is tried again.
        let mut drained = self.flush_own_objects();
        let mut passed_over = false;
        for frames in self.regions().filter(|f| !dma32 || f.dma32()) {
            drained |= frames.drain_every_cpu();
            passed_over |= frames.exhausted();
        }
        if !drained && !passed_over {
            return result;
        }
        Self::take_from(self.regions(), kind, want, dma32)
    }

    /// `want` from the first of `regions` (below 4 GiB only, for `dma32`) that has it.
    fn take_from<'a>(
        regions: impl Iterator<Item = &'a Frames<C>>,
        kind: (UsageKind, OwnerTag),
        want: Want,
        dma32: bool,
    ) -> AllocResult<usize> {
        let mut result = Err(AllocError::NoMemory);
        for frames in regions.filter(|f| !dma32 || f.dma32()) {
            result = Self::take_in(frames, kind, want);
            if !matches!(result, Err(AllocError::NoMemory)) {
                // Taken, or refused for a reason other than memory: another region cannot
                // do better.
                break;
            }
        }
        result
    }

    /// `want` from the calling CPU's page allocator of `frames`, counted for `kind` when it
    /// is taken, its blocks recorded with `tag` (page_owner).
    #[inline(always)]
    fn take_in(
        frames: &Frames<C>,
        (kind, tag): (UsageKind, OwnerTag),
        want: Want,
    ) -> AllocResult<usize> {
        let mut cpu = frames.this_cpu();
        tag.set(frames.zone(), cpu.id());
        let taken = match want {
            Want::Pages(n, align) => cpu.pages.alloc_pages(n, align).map(|at| (at, n)),
            Want::Zeroed(n, align) => cpu
                .pages
                .alloc_zeroed_pages(n, align, frames.clearer())
                .map(|at| (at, n)),
        };
        match taken {
            Ok((at, pages)) => {
                cpu.usage.add(kind, pages.wrapping_mul(PAGE));
                drop(cpu);
                frames.set_exhausted(false);
                Ok(at)
            }
            Err(AllocError::NoMemory) => {
                drop(cpu);
                // No run is no page only when nothing at all is free (a run needs more).
                if frames.free_pages() == 0 {
                    frames.set_exhausted(true);
                }
                Err(AllocError::NoMemory)
            }
            Err(e) => Err(e),
        }
    }

    /// Bytes the heap has handed out: its slabs' objects (each its class's size), its large
    /// requests' blocks of pages (each whole), and what the byte allocator counts handed
    /// out, but for the blocks it gave the slabs.
    pub fn used_bytes(&self) -> usize {
        let heap = self.balloc.lock();
        let slabs = self.slab_bytes(&heap);
        let blocks = Self::heap_block_bytes(&heap, slabs, self.cpu_usage());
        heap.used(slabs).saturating_add(blocks)
    }

    /// Bytes the heap has free without growing: the byte allocator's, and the free objects
    /// of its slabs.
    pub fn available_bytes(&self) -> usize {
        let heap = self.balloc.lock();
        heap.available(self.slab_bytes(&heap))
    }

    /// The heap's slabs per size class, every CPU's and the heap's own (Linux's
    /// `/proc/slabinfo`; `Display` prints it in Linux's format), one CPU's lock at a time
    /// (each class's counts as they stood when that lock was held).
    pub fn slab_info(&self) -> SlabInfo {
        let mut info = SlabInfo::NONE;
        let mut add = |slabs: &Slabs, cached: &dyn Fn(Class) -> usize| {
            for class in Class::all() {
                info.add(class, slabs.class_counts(class).less_cached(cached(class)));
            }
        };
        add(&self.balloc.lock().slabs, &|_| 0);
        if let Some(frames) = self.first() {
            frames.each_cpu_slabs(|slabs, magazines| add(slabs, &|c| magazines.cached_objects(c)));
        }
        info
    }

    /// What every slab holds: the heap's own (`heap`, whose lock the caller holds) and the
    /// CPUs' (none before `init`; each CPU's slot taken in turn under the heap's lock, the
    /// order a heap growth takes them in).
    fn slab_bytes(&self, heap: &Heap) -> SlabBytes {
        let cpus = self.first().map_or(SlabBytes::NONE, Frames::slab_bytes);
        heap.slabs.bytes() + cpus
    }

    /// Bytes the heap holds, handed out or not: its byte allocator's first 32 KiB and
    /// every growth from the zone (kept for good, as ArceOS's axalloc keeps them), the
    /// regions [`GlobalAllocator::add_memory`] gave it, the pages of its slabs from the
    /// zone, and its large requests' blocks of pages.
    pub fn heap_bytes(&self) -> usize {
        let heap = self.balloc.lock();
        let slabs = self.slab_bytes(&heap);
        let blocks = Self::heap_block_bytes(&heap, slabs, self.cpu_usage());
        (heap.total() + slabs.slabs(Source::Zone)).saturating_add(blocks)
    }

    /// Every CPU's change of the usage counts in every region, summed (each CPU's read
    /// under its lock in turn).
    fn cpu_usage(&self) -> UsageCounts {
        self.regions()
            .flat_map(Frames::usage_counts)
            .fold(UsageCounts::new(), UsageCounts::plus)
    }

    /// Bytes of the blocks of pages that large heap requests hold ([`heap_block_of`]'s):
    /// the pages the CPUs' page calls count for [`UsageKind::RustHeap`] (`cpus`,
    /// [`GlobalAllocator::cpu_usage`]), less those of the slabs (`slabs`, read under the
    /// heap's lock with `heap`) and of the byte allocator's memory from the zone (pages a
    /// caller of [`GlobalAllocator::alloc_pages`] asks for under that kind itself count as
    /// the heap's too).
    fn heap_block_bytes(heap: &Heap, slabs: SlabBytes, cpus: UsageCounts) -> usize {
        held(
            cpus.get(UsageKind::RustHeap)
                .wrapping_sub(slabs.slabs(Source::Zone))
                .wrapping_sub(heap.from_zone),
        )
    }

    /// Pages not free in the zones (the heap's included; 0 before `init`).
    pub fn used_pages(&self) -> usize {
        let used: u64 = self
            .regions()
            .map(|f| f.zone().present_pages().saturating_sub(f.free_pages()))
            .sum();
        usize::try_from(used).unwrap_or(usize::MAX)
    }

    /// Pages free in the zones, per-CPU lists included (0 before `init`).
    pub fn available_pages(&self) -> usize {
        let free: u64 = self.regions().map(Frames::free_pages).sum();
        usize::try_from(free).unwrap_or(usize::MAX)
    }

    /// Bytes held per [`UsageKind`].
    pub fn usages(&self) -> Usages {
        let heap = self.balloc.lock();
        let mut usage = heap.usage;
        let slabs = self.slab_bytes(&heap);
        // The CPUs' counts read once: their heap pages are the heap's blocks here, the
        // other kinds as they are.
        let cpus = self.cpu_usage();
        usage.add(UsageKind::RustHeap, slabs.requested());
        usage.add(
            UsageKind::RustHeap,
            Self::heap_block_bytes(&heap, slabs, cpus),
        );
        drop(heap);
        Usages::summing([usage, cpus.without(UsageKind::RustHeap)])
    }

    /// zero-core's strategy for one 4 KiB page on this CPU (`"rep stosb"`, `"dc zva"`, ...),
    /// with which [`GlobalAllocator::alloc_zeroed_pages`] clears; `None` before `init`.
    pub fn clear_strategy(&self) -> Option<&'static str> {
        let frames = self.first()?;
        let config = frames.clearer().clearer().config();
        Some(
            config
                .policy
                .choose(PAGE, buddy_sim::zero_core::Locality::TouchedNext)
                .name(),
        )
    }

    /// Lowers the calling CPU's high marks in every region by an eighth (at least a frame),
    /// draining what its lists hold past them (Linux's `decay_pcp_high`, from
    /// `vmstat_update` each second): the marks rise after bursts that overran the lists
    /// ([`zone_config`](crate::zone_config)), and a kernel that calls this from each CPU's
    /// timer tick gets the frames a burst left on the lists back into the buddy once the
    /// burst is over. Without it the marks come down only when memory runs short, and every
    /// list is drained before an allocation fails. It also gives back the calling CPU's page
    /// and object magazines when another CPU asked for them (an allocation about to fail
    /// there). Whether there is more to do at the next tick; `false` before `init`.
    pub fn decay_cpu_lists(&self) -> bool {
        // Objects another CPU asked for first: the slabs they empty go back to the lists.
        if let Some(frames) = self.first() {
            let irq = IrqOff::new();
            let pinned = Pinned::new(&irq);
            if let Some(own) = frames.exclusive(&pinned) {
                self.honour_object_drain_request(frames, &own);
            }
        }
        self.regions().fold(false, |more, f| f.decay_lists() | more)
    }

    /// Frames on CPU `cpu`'s per-cpu lists in every region (read under that CPU's lock of
    /// each); `None` before `init` or past the CPUs.
    pub fn pcp_pages(&self, cpu: usize) -> Option<u64> {
        let mut regions = self.regions().peekable();
        regions.peek()?;
        regions.map(|f| f.pcp_pages(cpu)).sum()
    }

    /// The zone of the region `init` gave, for statistics and checks
    /// ([`Zone::check`](buddy_sim::Zone::check)); `None` before `init`
    /// ([`GlobalAllocator::zones`] for every region's).
    ///
    /// # Safety
    /// The allocator's page calls reach each CPU's per-cpu lists without the zone's list
    /// lock (under the allocator's own lock of that CPU: one lock a call). While the
    /// returned zone is used for anything that reaches the per-cpu lists (an allocation or
    /// free through it, `drain_all`, `check`, `free_pages_total`, `pcp_pages`, `counters`),
    /// no page call of this allocator runs: at boot, in a test between calls, or with the
    /// other CPUs stopped. The buddy's own statistics (`buddy_pages`,
    /// `buddy_blocks_per_order`, `config`) take the zone lock and are safe at any time.
    pub unsafe fn zone(&self) -> Option<&'static crate::PageZone> {
        self.first().map(Frames::zone)
    }

    /// The zone of every region, `init`'s first.
    ///
    /// # Safety
    /// As [`GlobalAllocator::zone`], for each of them.
    pub unsafe fn zones(&self) -> impl Iterator<Item = &'static crate::PageZone> + '_ {
        self.regions().map(Frames::zone)
    }
}

/// A CPU's slabs are its slot's (the first region's, whose slots the small-object calls
/// take), under the slot's lock; the heap's own, under the heap's lock.
impl<C: CpuId> SlabOwners for GlobalAllocator<C> {
    #[inline(always)]
    fn with_slabs<R>(&self, owner: Owner, f: impl FnOnce(&mut Slabs) -> R) -> Option<R> {
        match owner {
            Owner::Cpu(cpu) => Some(f(&mut self.first()?.lock_cpu(cpu)?.slabs)),
            Owner::Heap => Some(self.with_heap_slabs(f)),
        }
    }
}

// SAFETY: `alloc` returns memory of `layout` from the heap that no other allocation
// overlaps, or diverges through `handle_alloc_error`; `dealloc` hands the byte allocator
// only what `GlobalAlloc`'s caller guarantees came from `alloc` with this layout.
unsafe impl<C: CpuId> GlobalAlloc for GlobalAllocator<C> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match Self::alloc(self, layout) {
            Ok(ptr) => ptr.as_ptr(),
            Err(_) => alloc::alloc::handle_alloc_error(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(ptr) = NonNull::new(ptr) {
            // SAFETY: `GlobalAlloc::dealloc`'s caller guarantees `ptr` came from `alloc` of
            // this allocator with `layout` and is not used after.
            unsafe { Self::dealloc(self, ptr, layout) };
        }
    }
}
