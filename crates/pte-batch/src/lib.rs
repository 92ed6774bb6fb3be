//! Batched, contpte-aware test-and-clear of the access ("young") flag over page tables of
//! atomic entries, for working-set estimation, never losing a concurrent hardware update.
//!
//! - [`format`]: entry formats, with the bits from the arch crates' host-portable modules. At
//!   stage 1 [`Arm64`] for each granule (`CONT_PTES` 16 / 128 / 32) and [`X86_64`]; at stage
//!   2, a hypervisor's tables for its guests, [`Arm64Stage2`] for each granule, and Intel
//!   [`Ept`] and AMD [`Npt`] with 4 KiB, 2 MiB and 1 GiB leaves. Flush ranges are typed by
//!   stage ([`Stage1`], [`Stage2`]), so a stage-1 `TLBI VALE1IS` cannot receive a guest's
//!   physical range.
//! - [`PteTable`]: one page-table page of atomic entries and its base address: `set_ptes`
//!   folding full aligned blocks into contpte blocks, unfolding on a partial change (one range
//!   invalidate), the contpte-aware `ptep_get`, and a model of the MMU's access-flag and dirty
//!   updates ([`PteTable::hw_access`]).
//! - Young clearing: [`PteTable::ptep_test_and_clear_young`] and the batched
//!   [`PteTable::test_and_clear_young_ptes`] (block-aligned, one compare-and-swap loop per
//!   entry); [`PteTable::clear_flush_young_ptes`] returns a `#[must_use]` [`FlushToken`] with
//!   the one range to invalidate, consumed by a [`TlbFlush`].
//! - [`folio_pte_batch`] with [`FpbFlags`], including [`FpbFlags::IGNORE_CONT`], so a folio
//!   mixing contpte and non-contpte runs is one batch (a question left open in the review of arm64's `test_and_clear_young_ptes()`).
//! - [`age_range`]: an MGLRU-shaped aging walk; [`age_batches`]: the same walk with KVM's
//!   three operations ([`YoungOp`]: test, clear without a flush, clear and flush), reporting
//!   each batch's (guest-physical) pages; [`reference`](mod@reference) holds the per-entry
//!   versions of all of the above.
//! - [`WorkingSet`]: per-run idle ages over aging passes, in caller storage, reported as bins
//!   of idle time and the pages idle past a threshold; [`IdleAges`]: the same estimate with
//!   one age per slot (a page or a leaf), dense, O(1) per batch where runs cost a merge.
#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

mod aging;
mod batch;
mod flush;
pub mod format;
pub mod idle_ages;
#[cfg(all(test, loom))]
mod loom_tests;
pub mod reference;
mod sync;
mod table;
pub mod working_set;
mod young;

pub use aging::{AgingStats, YoungOp, age_batches, age_range};
pub use batch::{Folios, FpbFlags, PteBatch, folio_pte_batch};
pub use flush::{CountingFlush, FlushToken, Stage1, Stage2, TlbFlush, TranslationStage};
pub use format::{Access, Arm64, Arm64Stage2, Ept, Fault, LeafSize, Npt, Prot, PteFormat, X86_64};
pub use idle_ages::{AgesPass, IdleAges};
pub use table::{PteError, PteTable, Unmapped};
pub use working_set::{IdleRun, Pass, PassStats, WorkingSet, WorkingSetError};

/// The atomic type a table's entries are made of: core's, whatever the cfg.
pub use core::sync::atomic::AtomicU64;
/// The shared vocabulary (page sizes, frame numbers, addresses, ranges) the signatures use.
pub use mm_types;
pub use sync::Entry;
