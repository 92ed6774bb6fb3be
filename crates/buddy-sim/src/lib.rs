//! A buddy frame allocator over page frame numbers, for unikernels and hypervisors.
//!
//! What this crate owns (DESIGN.md), filled by the buddy-sim issue: typed `Pfn` and `Order`,
//! free areas and per-cpu lists, refcounts and sections, and `free_contig_range`, which frees
//! a run of order-0 pages as the fewest naturally aligned power-of-two blocks instead of page
//! by page; errors instead of corruption on bad input; a per-page `reference` path.
//!
//! It exports nothing yet: no API is promised before it is real.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
