//! arm64 facts and instructions, and nothing else: the unsafe leaf under `zero-core` and
//! `pte-batch`.
//!
//! - [`descriptor`]: page-table descriptor bits, what each translation granule (an
//!   [`mm_types::PageSize`]) means for them (`CONT_PTES`, the output-address field) and the
//!   TLBI operand encodings (host-portable: compiles and is tested on every target).
//! - [`stage2`]: stage-2 descriptor bits (S2AP, XN, hardware dirty as a write permission),
//!   host-portable too.
//! - `regs` (aarch64): `DCZID_EL0` and `ID_AA64ISAR2_EL1`, defined with tock-registers as
//!   aarch64-cpu defines the registers it has.
//! - `cpu` (aarch64): FEAT_MOPS and the DC ZVA block size, detected once and cached.
//! - `clear` (aarch64): `dc zva`, `stnp` pairs, MOPS `SETP/SETM/SETE` and the non-temporal
//!   `SETPN/SETMN/SETEN` (through `.arch_extension mops`, so stable Rust and no global target
//!   feature).
//! - `barrier` and `tlb` (aarch64): `dsb ish`, `dmb ishst`, `isb`, EL1 TLB invalidation, and
//!   a hypervisor's EL2 stage-2 invalidation by IPA and by VMID.
//!
//! Every instruction sits behind `#[cfg(not(miri))]` with a portable fallback.
#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

#[cfg(any(test, feature = "std"))]
extern crate std;

/// The shared vocabulary (page sizes, frame numbers, addresses, ranges) the signatures use.
pub use mm_types;

pub mod descriptor;
pub mod stage2;

#[cfg(target_arch = "aarch64")]
pub mod barrier;
#[cfg(target_arch = "aarch64")]
pub mod clear;
#[cfg(target_arch = "aarch64")]
pub mod cpu;
#[cfg(target_arch = "aarch64")]
pub mod regs;
#[cfg(target_arch = "aarch64")]
pub mod tlb;
