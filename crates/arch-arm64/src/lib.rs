//! arm64 facts and instructions, and nothing else: the unsafe leaf under `zero-core` and
//! `pte-batch` on aarch64.
//!
//! What this crate owns (DESIGN.md), filled by the arm64 extent-clearing issue:
//! `DCZID_EL0` / `ID_AA64ISAR2_EL1` register definitions and FEAT_MOPS detection; the clearing
//! primitives (`dc zva`, `stnp` pairs, MOPS `SETP/SETM/SETE` and the non-temporal
//! `SETPN/SETMN/SETEN`); barriers and EL1 TLB maintenance; and the host-portable descriptor
//! facts (bit positions, `Granule`, `CONT_PTES`) that `pte-batch` uses.
//!
//! It exports nothing yet: no API is promised before it is real.
#![doc = include_str!("../README.md")]
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]
