//! ArceOS's `axalloc` interface, implemented by `axalloc-buddy` (buddy-sim's zone under
//! ArceOS's global allocator): patched into an ArceOS build in place of ArceOS's own.
//!
//! ArceOS's interface declares safe the calls that write to or hand out memory their caller
//! names (`global_init`, `global_add_memory`, `init`, `add_memory`, `dealloc`,
//! `dealloc_pages`); `axalloc-buddy` makes them `unsafe fn`. This package, which only an
//! ArceOS build uses, wraps them with ArceOS's safe signatures under ArceOS's contract:
//! ArceOS calls `global_init` and `global_add_memory` once per free region of RAM, from its
//! runtime, and gives back through `dealloc` and `dealloc_pages` only what it allocated, once.
#![no_std]

#[cfg(feature = "level-1")]
compile_error!("axalloc-buddy has no `level-1` mode (a heap without a page allocator)");
#[cfg(feature = "hv")]
compile_error!("axalloc-buddy does not provide AxVisor's allocator (`hv`, `AddrTranslator`)");
#[cfg(feature = "tracking")]
compile_error!("axalloc-buddy does not provide allocation tracking (`tracking`)");

use axalloc_buddy::axallocator::AllocResult;
use core::alloc::Layout;
use core::ptr::NonNull;

pub use axalloc_buddy::{DefaultByteAllocator, GlobalPage, UsageKind, Usages};

/// ArceOS's global allocator: [`axalloc_buddy::GlobalAllocator`] with ArceOS's safe
/// signatures (every other call is the inner allocator's, through `Deref`).
#[repr(transparent)]
pub struct GlobalAllocator(axalloc_buddy::GlobalAllocator);

impl core::ops::Deref for GlobalAllocator {
    type Target = axalloc_buddy::GlobalAllocator;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// The global allocator.
pub fn global_allocator() -> &'static GlobalAllocator {
    let inner: *const axalloc_buddy::GlobalAllocator = axalloc_buddy::global_allocator();
    // SAFETY: `GlobalAllocator` is a `repr(transparent)` wrapper of the type `inner` points
    // to, so the pointer is valid for it, with the same `'static` lifetime.
    unsafe { &*inner.cast::<GlobalAllocator>() }
}

/// ArceOS's `global_init`: see [`axalloc_buddy::global_init`].
pub fn global_init(start_vaddr: usize, size: usize) {
    // SAFETY: ArceOS's contract: its runtime passes a free region of RAM, mapped readable
    // and writable, that nothing else uses for the rest of the kernel's life.
    unsafe { axalloc_buddy::global_init(start_vaddr, size) }
}

/// ArceOS's `global_add_memory`: the heap's memory, as ArceOS's 0.3 line gives it
/// ([`axalloc_buddy::GlobalAllocator::add_heap_memory`]).
pub fn global_add_memory(start_vaddr: usize, size: usize) -> AllocResult {
    // SAFETY: as `global_init`, for every free region after the first.
    unsafe { global_allocator().0.add_heap_memory(start_vaddr, size) }
}

impl GlobalAllocator {
    /// See [`axalloc_buddy::GlobalAllocator::init`].
    pub fn init(&self, start_vaddr: usize, size: usize) {
        // SAFETY: ArceOS's contract for `global_init`, above.
        unsafe { self.0.init(start_vaddr, size) }
    }

    /// The heap's memory, as ArceOS's 0.3 line gives it: see
    /// [`axalloc_buddy::GlobalAllocator::add_heap_memory`].
    pub fn add_memory(&self, start_vaddr: usize, size: usize) -> AllocResult {
        // SAFETY: ArceOS's contract for `global_add_memory`, above.
        unsafe { self.0.add_heap_memory(start_vaddr, size) }
    }

    /// See [`axalloc_buddy::GlobalAllocator::dealloc`].
    #[inline]
    pub fn dealloc(&self, pos: NonNull<u8>, layout: Layout) {
        // SAFETY: ArceOS's contract: it gives back what it allocated with `layout`, once.
        unsafe { self.0.dealloc(pos, layout) }
    }

    /// See [`axalloc_buddy::GlobalAllocator::dealloc_pages`].
    #[inline]
    pub fn dealloc_pages(&self, pos: usize, num_pages: usize, kind: UsageKind) {
        // SAFETY: ArceOS's contract: it gives back pages it allocated, once, unused after.
        unsafe { self.0.dealloc_pages(pos, num_pages, kind) }
    }
}
