//! x86_64 facts and instructions, and nothing else: the unsafe leaf under `zero-core` and
//! `pte-batch`.
//!
//! - [`pte`]: x86_64 page-table entry bits and leaf sizes (host-portable: compiles on every
//!   target); AMD NPT uses the same format at the second stage.
//! - [`ept`]: Intel EPT leaf-entry bits (host-portable).
//! - `cpu` (x86_64 only): feature detection with raw-cpuid, cached once in atomics, and the
//!   cache hierarchy as CPUID reports it.
//! - `clear` (x86_64 only): the clearing primitives (`rep stosb`, `rep stosq`, an unrolled
//!   store loop, `movnti`, AVX2/AVX-512 streaming stores, CLZERO) and `sfence`.
//!
//! Every instruction sits behind `#[cfg(not(miri))]` with a portable fallback, so Miri can run
//! the code above it; under Miri feature detection reports a bare CPU.
#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

/// The shared vocabulary (page sizes, frame numbers, addresses, ranges) the signatures use.
pub use mm_types;

pub mod ept;
pub mod pte;

#[cfg(target_arch = "x86_64")]
pub mod clear;
#[cfg(target_arch = "x86_64")]
pub mod cpu;
