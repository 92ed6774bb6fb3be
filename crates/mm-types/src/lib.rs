//! The memory-management vocabulary the workspace's crates share: one page-size type, typed
//! frame numbers and addresses, and ranges of frames and of pages.
//!
//! - [`PageSize`]: the base page size. The arch crates state what their architecture does
//!   with each (arm64's contiguous-block sizes and TLBI encodings in `arch-arm64`).
//! - [`Pfn`], [`PhysAddr`], [`VirtAddr`]: frame numbers and addresses, never a bare `u64`
//!   in a public signature, so one cannot be passed for another.
//! - [`FrameRange`] (physically contiguous frames: folios, `vmalloc` runs, contiguous frees)
//!   and [`PageRange`] (virtually contiguous pages: TLB flush ranges).
//!
//! Arithmetic on caller values is checked: conversions that can overflow return `None`.
#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

mod addr;
mod page;
mod range;

pub use addr::{Pfn, PhysAddr, VirtAddr};
pub use page::PageSize;
pub use range::{FrameRange, PageRange};
