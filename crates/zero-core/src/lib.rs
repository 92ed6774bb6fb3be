//! Clearing page extents fast, as Linux learned to in 2026, for kernels and VMMs written in
//! Rust: one primitive per batch instead of one call per page, batches capped so a
//! cooperative scheduler still gets to run, the faulting page's neighbourhood cleared last so
//! it stays cache-hot, and the primitive picked per CPU and per extent size.
//!
//! - [`clear_contig_pages`]: the chunk loop (`cond_resched` before every chunk; the whole
//!   range in one chunk under a preemptible model, [`non_preempt_batch_pages`] otherwise).
//! - [`folio_zero_user`]: right of the fault's neighbourhood, then left, then the
//!   neighbourhood; or the older target-last order ([`FolioOrder::TargetLast`]).
//! - [`ClearConfig`] and [`Clearer`]: how to clear, checked once ([`ClearConfig::validate`])
//!   so that the clearing functions pay only for the checks of the memory they are given.
//! - [`Strategy`] and [`Policy`]: which instruction clears, chosen by CPU and extent size,
//!   vector registers only where [`VectorUse`] permits. One backend module per architecture
//!   (x86_64, aarch64, portable; Miri runs the portable one) is the single place that maps a
//!   strategy to its instructions.
//! - [`plan`]: the pure chunk and order plans, public so they can be fuzzed.
//! - [`ParallelClear`]: one huge extent cleared by several cores, chunks claimed through an
//!   atomic cursor (loom-checked).
//! - [`reference`](mod@reference): the obvious page-at-a-time definitions the above are checked against.
//!
//! Every entry point validates its input and returns a [`ZeroError`] instead of panicking.
#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

mod backend;
mod calibrate;
mod clear;
mod error;
#[cfg(feature = "vm-memory")]
pub mod guest;
#[cfg(all(test, loom))]
mod loom_tests;
mod parallel;
pub mod plan;
mod policy;
mod preempt;
pub mod reference;
mod strategy;
mod sync;

pub use calibrate::{
    Calibration, CalibrationOutcome, Clock, MAX_CLOCK_RESOLUTION_NS, MIN_SCRATCH_BYTES,
};
pub use clear::{
    ClearConfig, Clearer, FolioOrder, clear_contig_pages, clear_contig_pages_raw, folio_zero_user,
    folio_zero_user_raw,
};
pub use error::ZeroError;
/// The shared vocabulary (page sizes, frame numbers, addresses, ranges) of the crates this
/// one works with.
pub use mm_types;
/// The base page size, from the shared vocabulary.
pub use mm_types::PageSize;
pub use parallel::{ChunkCursor, ParallelClear};
pub use plan::{NON_PREEMPT_BATCH_BYTES, batch_pages_for_latency, non_preempt_batch_pages};
pub use policy::{
    DEFAULT_COLD_THRESHOLD, Locality, MAX_DEFAULT_STREAMING_THRESHOLD, Policy, Temperature,
    VectorUse,
};
pub use preempt::{CountingResched, NoResched, PreemptModel, Resched};
pub use strategy::Strategy;
