//! Batched, contpte-aware test-and-clear of the access ("young") flag over page tables of
//! atomic entries, for working-set estimation.
//!
//! What this crate owns (DESIGN.md), filled by the pte-batch issue: PTE formats (arm64 4K/16K/
//! 64K granules, x86_64), tables of atomics, contiguous-PTE blocks, `folio_pte_batch`,
//! `ptep_test_and_clear_young` and the batched `test_and_clear_young_ptes`, with a CAS loop per
//! entry so a concurrent hardware dirty update is never lost.
//!
//! It exports nothing yet: no API is promised before it is real.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
