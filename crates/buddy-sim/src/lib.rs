//! A buddy frame allocator over page frame numbers, for unikernels and hypervisors, whose
//! [`Zone::free_contig_range`] frees a run of order-0 pages as the fewest naturally aligned
//! power-of-two blocks instead of page by page (Linux 2026, seed 003).
//!
//! - [`Zone`]: free areas per order with intrusive O(1) lists, per-cpu lists for orders 0..=3
//!   and the pageblock order (drained in batches past `high`), buddy merging up to MAX_ORDER,
//!   refcounts, sections, hwpoison leaks, `vmalloc`/`vfree`, and [`Zone::check`].
//! - [`decompose`]: the pure chunking of a run into aligned blocks.
//! - [`reference`]: the per-page path the kernel used before, and a brute-force cover.
//!
//! Metadata lives in caller-provided storage (one [`Frame`] per frame, one [`PerCpu`] per
//! CPU): no allocation, no `unsafe`. Bad input returns a [`BuddyError`] and leaves the zone
//! as it was.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(test)]
extern crate std;

mod decompose;
mod error;
mod frame;
pub mod reference;
mod types;
mod zone;

pub use decompose::{Decompose, decompose};
pub use error::BuddyError;
pub use frame::{Frame, FrameState, PerCpu};
pub use types::{MAX_SUPPORTED_ORDER, Order, Pfn};
pub use zone::{Corruption, FreeWhere, OpCounters, VmArea, Zone, ZoneConfig};

/// A zone whose metadata is in vectors.
#[cfg(feature = "alloc")]
pub type BoxedZone = Zone<alloc::vec::Vec<Frame>, alloc::vec::Vec<PerCpu>>;

#[cfg(feature = "alloc")]
impl BoxedZone {
    /// A zone with freshly allocated metadata.
    ///
    /// # Errors
    /// As [`Zone::new`].
    pub fn new_boxed(cfg: ZoneConfig) -> Result<Self, BuddyError> {
        let frames = usize::try_from(cfg.nr_pages)
            .map_err(|_| BuddyError::BadConfig("more frames than fit in memory"))?;
        if frames >= u32::MAX as usize {
            return Err(BuddyError::BadConfig(
                "more frames than 32-bit list links can index",
            ));
        }
        Zone::new(
            cfg,
            alloc::vec![Frame::EMPTY; frames],
            alloc::vec![PerCpu::EMPTY; cfg.cpus],
        )
    }
}
