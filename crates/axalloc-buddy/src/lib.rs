//! ArceOS's global memory allocator, `axalloc`'s interface call for call, on
//! [buddy-sim](buddy_sim): an ArceOS kernel switches to it with one `[patch]` line (the
//! README says how).
//!
//! - **Pages** ([`GlobalAllocator::alloc_pages`]): a buddy-sim zone over each region of
//!   memory ArceOS gives ([`global_init`], then [`global_add_memory`] for every other one,
//!   holes between them), its frame table at the head of that region (24 bytes per 4 KiB
//!   frame, sized by the memory, not by a feature); regions below 4 GiB in physical memory
//!   serve [`GlobalAllocator::alloc_dma32_pages`]. Each CPU allocates from its own per-CPU
//!   lists, under its own interrupt-disabling lock, not one global lock; with an exclusive
//!   CPU id ([`CpuId::exclusive_cpu`], ArceOS's per-CPU register's), a page or a small block
//!   from the CPU's magazine, with no lock at all ([`ExclusiveCpu`]). Runs of any length
//!   (past the zone's largest block too: ArceOS's heap grows by doubling), any power-of-two
//!   alignment, freed whole or in parts as the fewest aligned blocks, and fixed-address runs
//!   ([`GlobalAllocator::alloc_pages_at`]).
//! - **Zeroed pages** ([`GlobalPage::alloc_zero`], [`GlobalAllocator::alloc_zeroed_pages`]):
//!   blocks the zone knows are zero, else cleared with zero-core's strategy for the CPU
//!   (`rep stosb`, AVX stores, `dc zva`, ...; [`GlobalAllocator::clear_strategy`]), printed
//!   in the boot log.
//! - **The Rust heap** ([`GlobalAllocator::alloc`]): objects up to 2 KiB from slabs (a
//!   page of the zone's, four past 512-byte objects, holding objects of one size class, as
//!   Linux's `kmalloc` caches), each CPU's own under its own lock (a free takes the lock of
//!   the CPU whose slab holds the object), requests up to 256 KiB past them as blocks of
//!   pages of their own (Linux's `kmalloc_large`, from the CPU's page magazine), larger
//!   ones from axallocator's byte allocator ([`DefaultByteAllocator`]: TLSF, slab or buddy
//!   by feature, as in ArceOS), growing with pages from the zone.
//!
//! `axalloc`'s modes `level-1` (no page allocator), `hv` (AxVisor's allocator) and
//! `tracking` (allocation backtraces) are not provided.
//!
//! ```
//! use axalloc_buddy::{GlobalAllocator, UsageKind};
//!
//! // 4 MiB of memory for the allocator (a kernel passes its free RAM); it outlives the
//! // allocator, declared before it.
//! let mut region = vec![0u8; 4 << 20];
//! let allocator = GlobalAllocator::new();
//! // SAFETY: the region is the allocator's alone while the allocator is used.
//! unsafe { allocator.try_init(region.as_mut_ptr() as usize, region.len())? };
//!
//! let table = allocator.alloc_zeroed_pages(1, 4096, UsageKind::PageTable).expect("a page");
//! let stack = allocator.alloc_pages(4, 16 * 1024, UsageKind::VirtMem).expect("16 KiB");
//! assert_eq!(stack % (16 * 1024), 0);
//! // SAFETY: runs this allocator handed out, each given back once and not used after.
//! unsafe {
//!     allocator.dealloc_pages(stack + 4096, 3, UsageKind::VirtMem); // the top three pages
//!     allocator.dealloc_pages(stack, 1, UsageKind::VirtMem);
//!     allocator.dealloc_pages(table, 1, UsageKind::PageTable);
//! }
//! assert_eq!(allocator.usages().get(UsageKind::VirtMem), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

mod byte;
mod cpu;
mod frames;
mod global;
mod lock;
#[cfg(all(test, loom))]
mod loom_tests;
mod magazine;
mod owner;
mod page;
mod slab;
mod slabinfo;
mod usage;

pub use axallocator;
pub use buddy_sim;
pub use byte::DefaultByteAllocator;
pub use cpu::{CpuId, PerCpuRegister, Pinned};
pub use frames::{InitError, PageZone, zone_config};
pub use global::{GlobalAllocator, MAX_ADDED_REGIONS, MAX_REGIONS};
pub use magazine::ExclusiveCpu;
#[cfg(feature = "page-owner")]
pub use owner::OwnedRun;
pub use page::GlobalPage;
pub use slabinfo::{SlabClassInfo, SlabInfo};
pub use usage::{UsageKind, Usages};

/// The global allocator, registered as the Rust heap of a kernel build with the
/// `global-allocator` feature (a kernel with a heap of its own uses the page calls alone).
#[cfg_attr(
    all(feature = "global-allocator", target_os = "none", not(test)),
    global_allocator
)]
static GLOBAL_ALLOCATOR: GlobalAllocator = GlobalAllocator::new();

/// The global allocator.
#[must_use]
pub fn global_allocator() -> &'static GlobalAllocator {
    &GLOBAL_ALLOCATOR
}

/// Gives the global allocator its memory, `[start_vaddr, start_vaddr + size)`: ArceOS calls
/// it once, before any allocation, with its largest free region
/// ([`GlobalAllocator::init`]).
///
/// # Safety
/// The region is memory that nothing else uses, readable and writable for the rest of the
/// kernel's life: the allocator writes its metadata there at once; the per-CPU registers as
/// [`GlobalAllocator::try_init`] says. A caller without
/// `unsafe` cannot name memory for it to write:
///
/// ```compile_fail,E0133
/// #![forbid(unsafe_code)]
/// axalloc_buddy::global_init(0x10_0000_0000, 4 << 20);
/// ```
pub unsafe fn global_init(start_vaddr: usize, size: usize) {
    // ArceOS's log line (its tests look for it).
    log::debug!(
        "initialize global allocator at: [{start_vaddr:#x}, {:#x})",
        start_vaddr.wrapping_add(size)
    );
    // SAFETY: the caller's contract, `GlobalAllocator::init`'s.
    unsafe { GLOBAL_ALLOCATOR.init(start_vaddr, size) };
}

/// Gives the global allocator another region (ArceOS calls it for every free region after
/// the first): a zone of its own, holes between them ([`GlobalAllocator::add_memory`]).
///
/// # Errors
/// As [`GlobalAllocator::add_memory`]: `MemoryOverlap` for a region that overlaps one the
/// allocator holds already.
///
/// # Safety
/// The region is memory that nothing else uses, readable and writable for the rest of the
/// kernel's life; the per-CPU registers as [`GlobalAllocator::try_init`] says.
pub unsafe fn global_add_memory(start_vaddr: usize, size: usize) -> axallocator::AllocResult {
    log::debug!(
        "add a memory region to global allocator: [{start_vaddr:#x}, {:#x})",
        start_vaddr.wrapping_add(size)
    );
    // SAFETY: the caller's contract, `GlobalAllocator::add_memory`'s.
    unsafe { GLOBAL_ALLOCATOR.add_memory(start_vaddr, size) }
}
