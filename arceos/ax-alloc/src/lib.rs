//! ArceOS's `ax-alloc` 0.9 interface (today's ArceOS line: `ax-std` 0.7, StarryOS),
//! implemented by `axalloc-buddy`: buddy-sim's zones under ArceOS's global allocator,
//! patched into an ArceOS build in place of ax-alloc's own backends.
//!
//! What it adds to them: pages from per-CPU lists (each CPU under its own lock, found
//! through ArceOS's per-CPU area) instead of one lock over the whole allocator; every memory
//! region the kernel gives managed as a zone of its own, holes between, without a capacity
//! cap; DMA32 pages from the regions below 4 GiB; byte-aligned runs of any length, freed
//! whole or in parts; `alloc_pages_at`; zeroed pages the zone knows are zero.
//!
//! ax-alloc declares safe the calls that write to or hand out memory their caller names
//! (`global_init`, `global_add_memory`, `init`, `add_memory`, `dealloc`, `dealloc_pages`),
//! and StarryOS asks for `split_pages` with the same kind of signature; `axalloc-buddy`
//! makes them `unsafe fn`. This package, which only an ArceOS build uses, wraps them with
//! ax-alloc's safe signatures under ArceOS's contract: its runtime calls `global_init` and
//! `global_add_memory` once per free region of RAM, and its modules give back through
//! `dealloc` and `dealloc_pages` (and split) only what they allocated, once.
#![no_std]

extern crate alloc;

mod page;
mod reclaim;
#[cfg(feature = "tracking")]
pub mod tracking;

use core::alloc::{GlobalAlloc, Layout};
use core::fmt;
use core::ptr::NonNull;

use axalloc_buddy::InitError;
use axalloc_buddy::axallocator::AllocError as InnerError;

pub use axalloc_buddy::{DefaultByteAllocator, UsageKind, Usages};
pub use page::GlobalPage;
pub use reclaim::{PageReclaimFn, register_page_reclaim_fn, try_page_reclaim};

/// Bytes per page.
const PAGE_SIZE: usize = 4096;

/// Why an allocator call failed (ax-alloc's `AllocError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// A size, an alignment or a region the allocator cannot take.
    InvalidParam,
    /// The allocator was initialized before.
    AlreadyInitialized,
    /// The region overlaps one the allocator holds.
    MemoryOverlap,
    /// No memory for the request (after reclaim).
    NoMemory,
    /// The memory was not allocated by this allocator.
    NotAllocated,
    /// The allocator has no memory yet.
    NotInitialized,
    /// No allocation there.
    NotFound,
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidParam => "invalid allocation parameter",
            Self::AlreadyInitialized => "allocator is already initialized",
            Self::MemoryOverlap => "memory region overlaps an existing allocation region",
            Self::NoMemory => "not enough memory",
            Self::NotAllocated => "memory was not allocated by this allocator",
            Self::NotInitialized => "allocator is not initialized",
            Self::NotFound => "allocation was not found",
        })
    }
}

impl core::error::Error for AllocError {}

impl From<InnerError> for AllocError {
    fn from(e: InnerError) -> Self {
        match e {
            InnerError::InvalidParam => Self::InvalidParam,
            InnerError::MemoryOverlap => Self::MemoryOverlap,
            InnerError::NoMemory => Self::NoMemory,
            InnerError::NotAllocated => Self::NotAllocated,
        }
    }
}

impl From<InitError> for AllocError {
    fn from(e: InitError) -> Self {
        match e {
            InitError::AlreadyInitialized => Self::AlreadyInitialized,
            InitError::Overlap => Self::MemoryOverlap,
            InitError::FirstHeap => Self::NoMemory,
            _ => Self::InvalidParam,
        }
    }
}

/// A result with [`AllocError`].
pub type AllocResult<T = ()> = Result<T, AllocError>;

/// The calls every ax-alloc backend provides (ax-alloc's `AllocatorOps`).
pub trait AllocatorOps {
    /// The allocator's name.
    fn name(&self) -> &'static str;
    /// Gives the allocator its first region.
    ///
    /// # Errors
    /// [`AllocError::AlreadyInitialized`], [`AllocError::MemoryOverlap`], or
    /// [`AllocError::InvalidParam`] for a region too small for the allocator.
    fn init(&self, start_vaddr: usize, size: usize) -> AllocResult;
    /// Gives the allocator another region.
    ///
    /// # Errors
    /// [`AllocError::MemoryOverlap`], [`AllocError::InvalidParam`].
    fn add_memory(&self, start_vaddr: usize, size: usize) -> AllocResult;
    /// `layout` from the heap.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`].
    fn alloc(&self, layout: Layout) -> AllocResult<NonNull<u8>>;
    /// Gives back a heap allocation.
    fn dealloc(&self, pos: NonNull<u8>, layout: Layout);
    /// `num_pages` contiguous pages aligned to `align` bytes.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`], [`AllocError::InvalidParam`].
    fn alloc_pages(&self, num_pages: usize, align: usize, kind: UsageKind) -> AllocResult<usize>;
    /// [`AllocatorOps::alloc_pages`] below 4 GiB in physical memory.
    ///
    /// # Errors
    /// As [`AllocatorOps::alloc_pages`].
    fn alloc_dma32_pages(
        &self,
        num_pages: usize,
        align: usize,
        kind: UsageKind,
    ) -> AllocResult<usize>;
    /// The `num_pages` pages from `start`.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`] if one is not free, [`AllocError::InvalidParam`].
    fn alloc_pages_at(
        &self,
        start: usize,
        num_pages: usize,
        align: usize,
        kind: UsageKind,
    ) -> AllocResult<usize>;
    /// Gives back pages.
    fn dealloc_pages(&self, pos: usize, num_pages: usize, kind: UsageKind);
    /// Heap bytes handed out.
    fn used_bytes(&self) -> usize;
    /// Heap bytes free.
    fn available_bytes(&self) -> usize;
    /// Pages not free.
    fn used_pages(&self) -> usize;
    /// Pages free.
    fn available_pages(&self) -> usize;
    /// Bytes held per [`UsageKind`].
    fn usages(&self) -> Usages;
}

/// Which CPU a call runs on, for the allocator: ArceOS's per-CPU area through ax-percpu,
/// read inline in the page path.
#[derive(Clone, Copy, Debug)]
pub struct CurrentCpu;

impl axalloc_buddy::CpuId for CurrentCpu {
    #[inline(always)]
    fn cpu_id(&self, _pinned: &axalloc_buddy::Pinned<'_>) -> usize {
        // SAFETY: `_pinned`: interrupts and preemption are off on this CPU (the allocator's
        // own masking on the `std-compat` target, where `kernel_guard` does nothing).
        unsafe { percpu_index() }
    }

    /// In a kernel build, this CPU's index from ArceOS's per-CPU area, once it is installed:
    /// the page calls then take and free pages through the CPU's magazines, with no lock.
    #[inline(always)]
    fn exclusive_cpu<'a>(
        &self,
        pinned: &'a axalloc_buddy::Pinned<'_>,
    ) -> Option<axalloc_buddy::ExclusiveCpu<'a>> {
        // SAFETY: `pinned`: interrupts and preemption are off on this CPU.
        let id = unsafe { platform::exact_percpu_index() }?;
        // SAFETY: a kernel build: interrupts and preemption stay off on this CPU for the
        // whole allocator call (`pinned`: kernel_guard's masking on bare metal, the
        // allocator's own on `std-compat`), so nothing else runs on it meanwhile; and `id`
        // is this CPU's own index from its own per-CPU area, which no other CPU has.
        Some(unsafe { axalloc_buddy::ExclusiveCpu::new(id, pinned) })
    }
}

/// What the allocator reads from ArceOS in a kernel build: bare metal, or ArceOS's
/// `std-compat` target (AxVisor's `aarch64-unknown-linux-musl`, a kernel too).
#[cfg(any(target_os = "none", all(target_os = "linux", target_env = "musl")))]
mod platform {
    /// The CPU this call runs on, from ArceOS's per-CPU area (0 before it is installed).
    ///
    /// # Safety
    /// Interrupts and preemption are off on this CPU until the answer is used (ax-percpu's
    /// contract: the task cannot migrate).
    #[inline(always)]
    pub(crate) unsafe fn percpu_index() -> usize {
        // SAFETY: the caller's promise.
        unsafe { exact_percpu_index() }.unwrap_or(0)
    }

    /// [`percpu_index`], `None` before ArceOS installs the per-CPU area.
    ///
    /// # Safety
    /// As [`percpu_index`].
    #[inline(always)]
    pub(crate) unsafe fn exact_percpu_index() -> Option<usize> {
        // SAFETY: the caller's promise: the pin cannot migrate.
        unsafe { ax_percpu::with_cpu_pin(|pin| ax_percpu::current_cpu_index(pin).as_usize()) }.ok()
    }

    /// The CPUs ArceOS has per-CPU areas for.
    pub(crate) fn cpu_count() -> usize {
        ax_percpu::layout().map_or(1, |l| l.area_count() as usize)
    }

    /// The physical address of `vaddr`, through ArceOS's linear map.
    pub(crate) fn virt_to_phys(vaddr: usize) -> usize {
        ax_plat::mem::virt_to_phys(vaddr.into()).as_usize()
    }
}

/// Outside a kernel (a build for the host: the tests): one CPU, addresses physical.
#[cfg(not(any(target_os = "none", all(target_os = "linux", target_env = "musl"))))]
mod platform {
    /// CPU 0.
    ///
    /// # Safety
    /// None here; the kernel builds' contract is kept for one signature.
    #[inline(always)]
    pub(crate) unsafe fn percpu_index() -> usize {
        0
    }

    /// No exclusive CPU outside a kernel: threads share CPU 0.
    ///
    /// # Safety
    /// None here; the kernel builds' contract is kept for one signature.
    #[inline(always)]
    pub(crate) unsafe fn exact_percpu_index() -> Option<usize> {
        None
    }

    /// One CPU.
    pub(crate) fn cpu_count() -> usize {
        1
    }

    /// The address itself.
    pub(crate) fn virt_to_phys(vaddr: usize) -> usize {
        vaddr
    }
}

pub(crate) use platform::percpu_index;
use platform::{cpu_count, virt_to_phys};

/// ArceOS's global allocator on buddy-sim: the heap grows with pages from the zones, and
/// every page call takes one CPU's magazine (a page or a small block, no lock) or lock.
pub struct GlobalAllocator(axalloc_buddy::GlobalAllocator<CurrentCpu>);

impl Default for GlobalAllocator {
    fn default() -> Self {
        Self::new()
    }
}

/// The allocator, the kernel's heap on a bare-metal build.
#[cfg_attr(
    all(any(target_os = "none", feature = "global-allocator"), not(test)),
    global_allocator
)]
static GLOBAL_ALLOCATOR: GlobalAllocator = GlobalAllocator::new();

/// The global allocator.
pub fn global_allocator() -> &'static GlobalAllocator {
    &GLOBAL_ALLOCATOR
}

/// Gives the global allocator its first region (ArceOS passes its largest free region).
///
/// # Errors
/// As [`GlobalAllocator::init`].
pub fn global_init(start_vaddr: usize, size: usize) -> AllocResult {
    log::debug!(
        "initialize global allocator at: [{start_vaddr:#x}, {:#x})",
        start_vaddr.wrapping_add(size)
    );
    GLOBAL_ALLOCATOR.init(start_vaddr, size)?;
    log::info!("global allocator initialized");
    Ok(())
}

/// Gives the global allocator every other free region, a zone each.
///
/// # Errors
/// As [`GlobalAllocator::add_memory`].
pub fn global_add_memory(start_vaddr: usize, size: usize) -> AllocResult {
    log::debug!(
        "add a memory region to global allocator: [{start_vaddr:#x}, {:#x})",
        start_vaddr.wrapping_add(size)
    );
    GLOBAL_ALLOCATOR.add_memory(start_vaddr, size)
}

/// ArceOS calls it on each CPU once its per-CPU area is installed. The page lists are
/// already there for every CPU (made at `init`, one set per per-CPU area) and are found
/// through that area on each call: nothing is left to do.
pub fn init_percpu_slab(cpu_id: usize) {
    log::trace!("CPU {cpu_id}: per-CPU page lists ready");
}

impl GlobalAllocator {
    /// An allocator with no memory yet.
    pub const fn new() -> Self {
        Self(axalloc_buddy::GlobalAllocator::with_cpu_id(CurrentCpu).translating(virt_to_phys))
    }

    /// The allocator under this interface, for what ax-alloc does not name (zeroed pages,
    /// per-CPU list counts, the zones).
    pub const fn buddy(&self) -> &axalloc_buddy::GlobalAllocator<CurrentCpu> {
        &self.0
    }

    /// The allocator's name in ArceOS's boot log (`use buddy-sim allocator.`).
    pub const fn name(&self) -> &'static str {
        "buddy-sim"
    }

    /// Gives the allocator its first region, with page lists for each CPU ArceOS has a
    /// per-CPU area for.
    ///
    /// # Errors
    /// [`AllocError::AlreadyInitialized`]; [`AllocError::MemoryOverlap`] for a region that
    /// overlaps one given before; [`AllocError::InvalidParam`] for a region too small for
    /// the allocator's metadata and first heap. Nothing is written then.
    pub fn init(&self, start_vaddr: usize, size: usize) -> AllocResult {
        // SAFETY: ArceOS's contract: its runtime passes a free region of RAM, mapped readable
        // and writable, that nothing else uses for the rest of the kernel's life.
        Ok(unsafe { self.0.try_init_for_cpus(start_vaddr, size, cpu_count()) }?)
    }

    /// Gives the allocator another region: a zone of its own (holes between regions), or
    /// heap memory where it is too small for one.
    ///
    /// # Errors
    /// [`AllocError::MemoryOverlap`]; [`AllocError::InvalidParam`] for a region without a
    /// whole page. Nothing changes then.
    pub fn add_memory(&self, start_vaddr: usize, size: usize) -> AllocResult {
        // SAFETY: as `init`, for every free region after the first.
        Ok(unsafe { self.0.add_memory(start_vaddr, size) }?)
    }

    /// `layout` from the heap, which grows with pages from the zones; on
    /// [`AllocError::NoMemory`], after the registered reclaim ([`try_page_reclaim`]).
    ///
    /// # Errors
    /// [`AllocError::NoMemory`].
    pub fn alloc(&self, layout: Layout) -> AllocResult<NonNull<u8>> {
        match self.heap_alloc(layout) {
            Ok(pos) => Ok(pos),
            Err(e) => self.alloc_reclaiming(layout, e.into()),
        }
    }

    /// The drop-in's allocation of `layout`, out of line: a function of its own, whose
    /// fast path (the CPU's object magazine) needs no stack frame, called from
    /// [`GlobalAllocator::alloc`], which inlines into the global allocator's entry point.
    /// Left to the compiler, the drop-in's code was inlined into `alloc` in some builds,
    /// where it took on the frame the reclaim path needs: 9 more guest instructions an
    /// alloc + free of 64 bytes in the x86_64 guest (QEMU `-icount`).
    #[inline(never)]
    fn heap_alloc(&self, layout: Layout) -> Result<NonNull<u8>, InnerError> {
        self.0.alloc(layout)
    }

    /// [`GlobalAllocator::alloc`] after its first attempt failed with `first`: the
    /// registered reclaim's rounds, each followed by another attempt. Out of line: an
    /// allocation that succeeds never runs it.
    #[cold]
    #[inline(never)]
    fn alloc_reclaiming(&self, layout: Layout, first: AllocError) -> AllocResult<NonNull<u8>> {
        let pages = layout.size().div_ceil(PAGE_SIZE);
        reclaim::reclaiming(pages, Err(first), || Ok(self.heap_alloc(layout)?))
    }

    /// Gives back `pos`, allocated with `layout` ([`GlobalAllocator::alloc`]).
    #[inline]
    pub fn dealloc(&self, pos: NonNull<u8>, layout: Layout) {
        // SAFETY: ArceOS's contract: it gives back what it allocated with `layout`, once.
        unsafe { self.0.dealloc(pos, layout) }
    }

    /// `num_pages` contiguous pages aligned to `align` bytes (a power of two), from this
    /// CPU's lists where the run is small; after the registered reclaim when memory is
    /// short.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`]; [`AllocError::InvalidParam`] for an alignment that is not a
    /// power of two or a run of 0 pages.
    pub fn alloc_pages(
        &self,
        num_pages: usize,
        align: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        let align = align.max(PAGE_SIZE);
        let first = self.0.alloc_pages(num_pages, align, kind);
        reclaim::reclaiming(num_pages, first.map_err(Into::into), move || {
            Ok(self.0.alloc_pages(num_pages, align, kind)?)
        })
    }

    /// [`GlobalAllocator::alloc_pages`] from memory below 4 GiB in physical addresses.
    ///
    /// # Errors
    /// As [`GlobalAllocator::alloc_pages`]; [`AllocError::NoMemory`] when no region lies
    /// below 4 GiB.
    pub fn alloc_dma32_pages(
        &self,
        num_pages: usize,
        align: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        let align = align.max(PAGE_SIZE);
        let first = self.0.alloc_dma32_pages(num_pages, align, kind);
        reclaim::reclaiming(num_pages, first.map_err(Into::into), move || {
            Ok(self.0.alloc_dma32_pages(num_pages, align, kind)?)
        })
    }

    /// Exactly the `num_pages` pages from `start`, all or nothing.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`] if one of them is not free; [`AllocError::InvalidParam`] for
    /// a `start` not aligned to `align` or a run outside the allocator's regions.
    pub fn alloc_pages_at(
        &self,
        start: usize,
        num_pages: usize,
        align: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        Ok(self
            .0
            .alloc_pages_at(start, num_pages, align.max(PAGE_SIZE), kind)?)
    }

    /// Splits the block that starts at `pos` (a run of `2^k` pages aligned to its size: a
    /// 2 MiB huge page) into 4 KiB pages, each freed alone from then on (StarryOS's
    /// transparent huge pages split a 2 MiB mapping so); metadata only. Returns the pages.
    ///
    /// # Errors
    /// [`AllocError::InvalidParam`] if `pos` is not the start of an allocated block;
    /// [`AllocError::NotAllocated`] for a free one. Nothing changes then.
    pub fn split_pages(&self, pos: usize) -> AllocResult<usize> {
        // SAFETY: ArceOS's contract: a kernel splits only blocks it allocated and holds
        // (StarryOS its own huge pages), while no other call frees them.
        Ok(unsafe { self.0.split_pages(pos) }?)
    }

    /// Gives back the `num_pages` pages from `pos`: a run or any part of one. A run the
    /// allocator did not hand out changes nothing and is logged.
    #[inline]
    pub fn dealloc_pages(&self, pos: usize, num_pages: usize, kind: UsageKind) {
        // SAFETY: ArceOS's contract: it gives back pages it allocated, once, unused after.
        unsafe { self.0.dealloc_pages(pos, num_pages, kind) }
    }

    /// Heap bytes handed out.
    pub fn used_bytes(&self) -> usize {
        self.0.used_bytes()
    }

    /// Heap bytes free without growing.
    pub fn available_bytes(&self) -> usize {
        self.0.available_bytes()
    }

    /// Pages not free in the zones.
    pub fn used_pages(&self) -> usize {
        self.0.used_pages()
    }

    /// Pages free in the zones.
    pub fn available_pages(&self) -> usize {
        self.0.available_pages()
    }

    /// Bytes held per [`UsageKind`].
    pub fn usages(&self) -> Usages {
        self.0.usages()
    }
}

impl AllocatorOps for GlobalAllocator {
    fn name(&self) -> &'static str {
        Self::name(self)
    }

    fn init(&self, start_vaddr: usize, size: usize) -> AllocResult {
        Self::init(self, start_vaddr, size)
    }

    fn add_memory(&self, start_vaddr: usize, size: usize) -> AllocResult {
        Self::add_memory(self, start_vaddr, size)
    }

    fn alloc(&self, layout: Layout) -> AllocResult<NonNull<u8>> {
        Self::alloc(self, layout)
    }

    fn dealloc(&self, pos: NonNull<u8>, layout: Layout) {
        Self::dealloc(self, pos, layout);
    }

    fn alloc_pages(&self, num_pages: usize, align: usize, kind: UsageKind) -> AllocResult<usize> {
        Self::alloc_pages(self, num_pages, align, kind)
    }

    fn alloc_dma32_pages(
        &self,
        num_pages: usize,
        align: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        Self::alloc_dma32_pages(self, num_pages, align, kind)
    }

    fn alloc_pages_at(
        &self,
        start: usize,
        num_pages: usize,
        align: usize,
        kind: UsageKind,
    ) -> AllocResult<usize> {
        Self::alloc_pages_at(self, start, num_pages, align, kind)
    }

    fn dealloc_pages(&self, pos: usize, num_pages: usize, kind: UsageKind) {
        Self::dealloc_pages(self, pos, num_pages, kind);
    }

    fn used_bytes(&self) -> usize {
        Self::used_bytes(self)
    }

    fn available_bytes(&self) -> usize {
        Self::available_bytes(self)
    }

    fn used_pages(&self) -> usize {
        Self::used_pages(self)
    }

    fn available_pages(&self) -> usize {
        Self::available_pages(self)
    }

    fn usages(&self) -> Usages {
        Self::usages(self)
    }
}

// SAFETY: `alloc` returns memory of `layout` from the heap that no other allocation
// overlaps, or null; `dealloc` gives the heap only what `GlobalAlloc`'s caller guarantees
// came from `alloc` with this layout.
unsafe impl GlobalAlloc for GlobalAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = Self::alloc(self, layout).map_or(core::ptr::null_mut(), NonNull::as_ptr);
        #[cfg(feature = "tracking")]
        tracking::allocated(ptr, layout);
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(pos) = NonNull::new(ptr) else {
            return;
        };
        #[cfg(feature = "tracking")]
        tracking::freed(ptr);
        Self::dealloc(self, pos, layout);
    }
}
