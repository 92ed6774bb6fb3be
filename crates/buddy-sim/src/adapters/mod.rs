//! The traits of other crates, implemented over a zone: one file per foreign interface,
//! each behind the feature named after it (hashbrown's `external_trait_impls`).
//!
//! - `x86_64_frames` (feature `x86_64`): the `x86_64` crate's `FrameAllocator` and
//!   `FrameDeallocator` ([`X86FrameAllocator`](crate::X86FrameAllocator)).
//! - `paging_tables` (feature `aarch64-paging`): aarch64-paging's `Translation`
//!   ([`ZoneTables`](crate::ZoneTables)), whose table pages are zeroed allocations.
//! - `ax_pages` (feature `axallocator`): ArceOS's `BaseAllocator` + `PageAllocator`
//!   ([`AxPageAllocator`](crate::AxPageAllocator)).
//! - `ax_paging` (feature `page_table_multiarch`): ArceOS's page tables' `PagingHandler`
//!   ([`AxPagingHandler`](crate::AxPagingHandler)).
//! - `direct_map`: the address arithmetic the two ArceOS adapters share.

#[cfg(feature = "axallocator")]
pub(crate) mod ax_pages;
#[cfg(feature = "page_table_multiarch")]
pub(crate) mod ax_paging;
#[cfg(any(feature = "axallocator", feature = "page_table_multiarch"))]
mod direct_map;
#[cfg(feature = "aarch64-paging")]
pub(crate) mod paging_tables;
#[cfg(feature = "x86_64")]
pub(crate) mod x86_64_frames;
