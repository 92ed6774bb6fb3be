//! ArceOS's `axalloc` interface as its repository's main line has it (0.2.0), implemented
//! by `axalloc-buddy`: the same allocator as the 0.3 interface, its page calls without the
//! usage kind (counted as [`UsageKind::VirtMem`]), and ArceOS's safe signatures for the calls
//! `axalloc-buddy` makes `unsafe fn` (under ArceOS's contract: see `../axalloc`).
#![no_std]

use axalloc_buddy::UsageKind;
use axalloc_buddy::axallocator::AllocResult;
use core::alloc::Layout;
use core::ptr::NonNull;

pub use axalloc_buddy::{DefaultByteAllocator, GlobalPage};

/// ArceOS's `global_init`: see [`axalloc_buddy::global_init`].
pub fn global_init(start_vaddr: usize, size: usize) {
    // SAFETY: ArceOS's contract: its runtime passes a free region of RAM, mapped readable
    // and writable, that nothing else uses for the rest of the kernel's life.
    unsafe { axalloc_buddy::global_init(start_vaddr, size) }
}

/// ArceOS's `global_add_memory`: see [`axalloc_buddy::global_add_memory`].
pub fn global_add_memory(start_vaddr: usize, size: usize) -> AllocResult {
    // SAFETY: as `global_init`, for every free region after the first.
    unsafe { axalloc_buddy::global_add_memory(start_vaddr, size) }
}

/// What the page calls of this interface count their pages as (it names no kind).
const KIND: UsageKind = UsageKind::VirtMem;

/// ArceOS's global allocator, the 0.2 interface over [`axalloc_buddy::GlobalAllocator`].
#[repr(transparent)]
pub struct GlobalAllocator(axalloc_buddy::GlobalAllocator);

/// The global allocator.
pub fn global_allocator() -> &'static GlobalAllocator {
    let inner: *const axalloc_buddy::GlobalAllocator = axalloc_buddy::global_allocator();
    // SAFETY: `GlobalAllocator` is a `repr(transparent)` wrapper of the type `inner` points
    // to, so the pointer is valid for it, with the same `'static` lifetime.
    unsafe { &*inner.cast::<GlobalAllocator>() }
}

impl GlobalAllocator {
    /// The allocator's name.
    pub const fn name(&self) -> &'static str {
        self.0.name()
    }

    /// See [`axalloc_buddy::GlobalAllocator::init`].
    pub fn init(&self, start_vaddr: usize, size: usize) {
        // SAFETY: ArceOS's contract for `global_init`, above.
        unsafe { self.0.init(start_vaddr, size) }
    }

    /// See [`axalloc_buddy::GlobalAllocator::add_memory`].
    pub fn add_memory(&self, start_vaddr: usize, size: usize) -> AllocResult {
        // SAFETY: ArceOS's contract for `global_add_memory`, above.
        unsafe { self.0.add_memory(start_vaddr, size) }
    }

    /// See [`axalloc_buddy::GlobalAllocator::alloc`].
    #[inline]
    pub fn alloc(&self, layout: Layout) -> AllocResult<NonNull<u8>> {
        self.0.alloc(layout)
    }

    /// See [`axalloc_buddy::GlobalAllocator::dealloc`].
    #[inline]
    pub fn dealloc(&self, pos: NonNull<u8>, layout: Layout) {
        // SAFETY: ArceOS's contract: it gives back what it allocated with `layout`, once.
        unsafe { self.0.dealloc(pos, layout) }
    }

    /// See [`axalloc_buddy::GlobalAllocator::alloc_pages`].
    #[inline]
    pub fn alloc_pages(&self, num_pages: usize, align_pow2: usize) -> AllocResult<usize> {
        self.0.alloc_pages(num_pages, align_pow2, KIND)
    }

    /// See [`axalloc_buddy::GlobalAllocator::alloc_pages_at`].
    pub fn alloc_pages_at(
        &self,
        start: usize,
        num_pages: usize,
        align_pow2: usize,
    ) -> AllocResult<usize> {
        self.0.alloc_pages_at(start, num_pages, align_pow2, KIND)
    }

    /// See [`axalloc_buddy::GlobalAllocator::dealloc_pages`].
    #[inline]
    pub fn dealloc_pages(&self, pos: usize, num_pages: usize) {
        // SAFETY: ArceOS's contract: it gives back pages it allocated, once, unused after.
        unsafe { self.0.dealloc_pages(pos, num_pages, KIND) }
    }

    /// Bytes the heap has handed out.
    pub fn used_bytes(&self) -> usize {
        self.0.used_bytes()
    }

    /// Bytes the heap has free without growing.
    pub fn available_bytes(&self) -> usize {
        self.0.available_bytes()
    }

    /// Pages not free in the zone.
    pub fn used_pages(&self) -> usize {
        self.0.used_pages()
    }

    /// Pages free in the zone.
    pub fn available_pages(&self) -> usize {
        self.0.available_pages()
    }
}
