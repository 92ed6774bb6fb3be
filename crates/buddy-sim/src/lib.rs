//! A buddy frame allocator over page frame numbers that every CPU of an SMP kernel shares,
//! for unikernels and hypervisors, whose [`Zone::free_contig_range`] frees a run of order-0
//! pages as the fewest naturally aligned power-of-two blocks instead of page by page (Linux
//! 2026).
//!
//! - [`Zone`]: shared through `&self` (`Sync`). Per-cpu lists for orders 0..=3 (or up to 8) and
//!   the pageblock order, each CPU's under its own lock, refilled from and drained to the buddy
//!   in batches under the zone lock; free areas per order with intrusive O(1) lists; buddy
//!   merging up to MAX_ORDER; refcounts by compare-and-swap; memory maps with holes
//!   ([`Zone::add_memory`]); hwpoison leaks; `vmalloc`/`vfree`; and [`Zone::check`].
//!   Both locks are a [`lock_api::RawMutex`] of the embedder's choice (`spin`'s by default).
//! - Calling it: [`Zone::cpu`] checks a CPU number once and gives a [`Cpu`] handle
//!   ([`Zone::local_cpu`]: a [`LocalCpu`] that reaches the CPU's lists without their lock);
//!   every allocation is one [`AllocRequest`] handed to [`Cpu::alloc`] (an owned [`Block`]
//!   that frees on drop) or [`Cpu::alloc_raw`] (the first frame number, freed with the
//!   `unsafe` frees); a [`StaticZone`] is built at compile time for a `static`.
//! - Zeroed frames on demand: a [`zeroed`](AllocRequest::zeroed) request hands out frames
//!   that read zero, preferring free blocks the zone knows are zero and clearing others
//!   through zero-core; [`Zone::zero_some`] clears free blocks from an idle CPU, outside the
//!   zone lock, to refill that pool. The embedder says how frames are reached
//!   ([`FrameMemory`]) and how they are cleared ([`FrameClearer`]).
//! - Huge pages after long churn: pageblocks and allocations typed by mobility
//!   ([`MigrateType`], [`AllocRequest::movable`]), compaction through the embedder's
//!   [`Migrate`] callback ([`Cpu::compact`], [`Cpu::compact_some`]), and contiguous
//!   allocation of any length ([`Cpu::alloc_contig_range`], a
//!   [`contiguous`](AllocRequest::contiguous) request, the frozen variants and
//!   [`Cpu::free_contig_frozen_range`]); Linux's repair machinery: a request's slow-path
//!   callbacks ([`AllocRequest::reclaim`], [`AllocRequest::compact`]), defrag mode and
//!   watermark boosting ([`ZoneConfig::defrag_mode`], [`Zone::fragmentation`]), background
//!   compaction ([`Cpu::compact_work`]); beyond Linux, a reserve of free pageblocks kept from
//!   huge pages for unmovable fallbacks ([`ZoneConfig::pageblock_reserve`]); for gigantic
//!   pages at run time, movable-only zones ([`ZoneConfig::movable_only`]) and CMA
//!   reservations ([`Cpu::reserve_cma`], a [`from_cma`](AllocRequest::from_cma) request).
//! - NUMA: a [`NodeSet`] of zones under a [`Topology`], routing each request along the
//!   zones of the nodes its [`NodePolicy`] allows, nearest first.
//! - The raw frees are `unsafe`: a zone writes the memory it holds free, so a free of what
//!   the caller does not hold could make it write memory in use (the crate README explains
//!   the choice).
//! - [`decompose`]: the pure chunking of a run into aligned blocks.
//! - [`mod@reference`]: the per-page path the kernel used before, and a brute-force cover;
//!   `testing` (feature `testing`): the harnesses that run a zone beside them.
//!
//! Metadata lives in caller-provided storage (one [`Frame`] per frame, one [`PerCpu`] per
//! CPU; both can be plain `static`s, or a whole [`StaticZone`]): no allocation. Bad input
//! returns the error of the operation's family ([`AllocError`], [`FreeError`], [`MapError`],
//! [`ContigError`], [`ConfigError`]; [`BuddyError`] holds them all, for `?`) and leaves the
//! zone as it was.
//!
//! One file per concern, on floors that import only downwards (checked mechanically from the
//! source: no import circle, no import through the crate root):
//! - plain types and the embedder's interfaces: `types` (orders, nodes, policies, and the
//!   zone-relative frame and pageblock indices the zone makes from a checked frame number),
//!   `migratetype`, `frame` (the frame word), `error`, `memory` (`FrameMemory`, the
//!   `FrameClearer`), `migrate` (the `Migrate` callback), `reclaim` (the `Reclaim` callback),
//!   `request` (`AllocRequest`),
//!   `decompose`, `sync` (atomics and locks, loom's under `cfg(loom)`);
//! - `zone/`, the core: `config`, `map`, `list`, `counters`, `ranges`, `buddy` (`FreeArea`,
//!   what the zone lock protects), `pageblock`, `pcp`, the `Zone` itself, `cpu` (the per-CPU
//!   handle), `alloc` and `refs` (the allocation and free paths), `contig`
//!   (`free_contig_range`), `stats`, `check`;
//! - features over the core: `mobility/` (`compaction`, `contig_alloc`: contiguous
//!   allocation, `hotplug`: offline), `zeroed` (zeroed allocation and background zeroing),
//!   `exact` (runs of any length), `deferred` (deferred init), `vmalloc`;
//! - the handle's entry points: `allocate` (`Cpu::alloc_raw`), `block` (owned blocks),
//!   `named` (the zone's one-line calls that name a CPU);
//! - `node` (NUMA) over the zones;
//! - around them: `boxed` (heap-allocated zones), `reference`, `adapters/` (one file per
//!   foreign trait: `x86_64`, `aarch64-paging`, ArceOS's `axallocator` and
//!   `page_table_multiarch`, each behind its feature) and `testing/` (the harnesses).
#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
// No unsafe but in `memory` (the two blocks that reach a frame's bytes through the
// embedder's `FrameMemory` promise, for zero-core to clear or to read back),
// `Migration::copy` (the same promise, for a migration's copy), the frees (`unsafe fn`s:
// their callers promise they hold what they free) and their calls inside the crate (an owned
// `Block`'s drop among them, and `Block::from_raw`, whose caller hands over what it frees), the
// CPU-local lists (`Zone::local_cpu`, whose contract lets `Zone::reach_pcp` reach a CPU's
// lists through `sync::Mutex::lock_exclusive` without their lock, and
// `AxPageAllocator::cpu_local`, whose caller makes that contract once for the adapter's
// calls), `NoMemory`'s
// `FrameMemory` impl (no value exists), metadata known to be
// zero (`Zone::new_empty_zeroed`, and `BoxedZone`'s zeroed allocation of it), the ecosystem
// adapters' trait impls (the `x86_64` feature's `unsafe impl` of an unsafe trait and the
// `aarch64-paging` feature's `unsafe fn`, neither performing an unsafe operation), and the
// zero reference model's and loom models' buffers standing in for physical memory.
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

// The vector storage of frame metadata for this crate's own tests and harnesses too.
#[cfg(any(feature = "alloc", feature = "testing", test, loom))]
extern crate alloc;
#[cfg(any(test, loom, feature = "testing"))]
extern crate std;

mod adapters;
mod allocate;
mod block;
#[cfg(feature = "alloc")]
mod boxed;
mod cma;
mod contents;
mod debugging;
mod decompose;
mod deferred;
mod error;
pub mod events;
mod exact;
mod fail_page_alloc;
mod frame;
mod frame_storage;
mod free_init;
mod huge_fault;
#[cfg(all(test, loom))]
#[path = "testing/loom.rs"]
mod loom_tests;
mod memory;
mod migrate;
mod migratetype;
mod mobility;
mod named;
mod node;
mod owner_record;
pub mod page_owner;
mod reclaim;
pub mod reference;
mod report_sink;
mod reporting;
mod request;
mod sync;
#[cfg(feature = "testing")]
pub mod testing;
mod types;
mod vmalloc;
pub mod vmstat;
mod zeroed;
mod zone;

#[cfg(feature = "axallocator")]
pub use adapters::ax_pages::AxPageAllocator;
#[cfg(feature = "page_table_multiarch")]
pub use adapters::ax_paging::{AxPagingHandler, AxPagingZone};
#[cfg(feature = "aarch64-paging")]
pub use adapters::paging_tables::ZoneTables;
#[cfg(feature = "x86_64")]
pub use adapters::x86_64_frames::X86FrameAllocator;
pub use block::Block;
#[cfg(feature = "alloc")]
pub use boxed::{BoxedCpu, BoxedNodeSet, BoxedZone};
pub use cma::CmaArea;
pub use decompose::{Decompose, decompose};
pub use error::NoSuchCpu;
pub use error::alloc::AllocError;
pub use error::buddy::BuddyError;
pub use error::config::ConfigError;
pub use error::contig::ContigError;
pub use error::free::FreeError;
pub use error::map::MapError;
pub use error::report::ReportError;
pub use error::request::RequestConflict;
pub use fail_page_alloc::FailPageAlloc;
pub use frame::{Frame, FrameInfo, FrameState};
pub use frame_storage::FrameStorage;
pub use free_init::{PAGE_POISON, PoisonCorruption, PoisonError};
pub use huge_fault::FaultFolio;
pub use lock_api;
pub use memory::{FrameClearer, FrameMemory, NoMemory, OffsetMap};
pub use migrate::{Migrate, Migration};
pub use migratetype::MigrateType;
/// The shared vocabulary (page sizes, frame numbers, addresses, ranges) the signatures use.
pub use mm_types;
/// A page frame number, from the shared vocabulary.
pub use mm_types::Pfn;
pub use mobility::compaction::{CompactReason, CompactStats, CompactWork};
pub use node::{
    LOCAL_DISTANCE, MAX_CPUS, MAX_NODES, MAX_ZONES, NodeSet, REMOTE_DISTANCE, Topology,
};
pub use page_owner::OwnerRecord;
pub use reclaim::Reclaim;
pub use report_sink::{PageReporting, ReportSink, ReportStats, ReportedBlock};
pub use request::{AllocRequest, HandleCleared, Holding, SelfCleared};
pub use sync::DefaultRawMutex;
pub use types::{MAX_SUPPORTED_ORDER, NodeId, NodePolicy, Order, OrderError};
pub use vmalloc::VmArea;
#[cfg(feature = "alloc")]
pub use vmalloc::VmAreaBuf;
/// The page clearing the zone's zeroed allocations and background zeroing use.
pub use zero_core;
pub use zone::check::Corruption;
pub use zone::config::{EAGER_PAGES, PAGE_ALLOC_COSTLY_ORDER, PCP_MAX_ORDER};
pub use zone::config::{
    LINUX_PCP_BATCH, Watermarks, ZoneConfig, pcp_batch_for, pcp_high_for, pcp_high_max_for,
};
pub use zone::counters::{FallbackCounts, OpCounters};
pub use zone::cpu::{
    Access, Cpu, Local, LocalCpu, Locked, NoClearer, ServedBy, StaticCpu, WithClearer,
};
pub use zone::direct_reclaim::{reclaim_and_retry, with_direct_reclaim};
pub use zone::pcp::PerCpu;
pub use zone::per_cpu_set::{PerCpuSet, WithEvents};
pub use zone::ranges::{DEFERRED_CHUNK_PAGES, MAX_ADDED_RANGES, MAX_DEFERRED_RANGES};
pub use zone::stats::{FragmentationStats, MemoryStats};
pub use zone::{AddedMemory, FreeWhere, StaticZone, Zone};
