//! Frames at addresses: frame `pfn` reached at `pfn * 4 KiB + offset`, a kernel's direct map
//! (offset 0 for an identity map). The ArceOS adapters' one conversion between the
//! addresses their interfaces speak and the zone's frame numbers.

// Each adapter uses a part of it.
#![cfg_attr(
    not(all(feature = "axallocator", feature = "page_table_multiarch")),
    allow(dead_code)
)]

use crate::error::config::ConfigError;
use crate::types::Order;
use mm_types::Pfn;

/// The frame size ArceOS's interfaces assume (`PAGE_SIZE_4K`).
pub(crate) const PAGE: usize = 4096;

/// Frames at their physical addresses: frame `pfn` at `pfn * 4 KiB`.
pub(crate) const PHYSICAL: DirectMap = DirectMap { offset: 0 };

/// Frame `pfn` at address `pfn * 4 KiB + offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirectMap {
    offset: usize,
}

impl DirectMap {
    /// The map at `offset`.
    ///
    /// # Errors
    /// [`ConfigError::DirectMapOffset`] if `offset` is not a multiple of 4 KiB.
    pub(crate) const fn new(offset: usize) -> Result<Self, ConfigError> {
        if offset.is_multiple_of(PAGE) {
            Ok(Self { offset })
        } else {
            Err(ConfigError::DirectMapOffset(offset))
        }
    }

    /// The frame at page-aligned address `addr`, if the map reaches one there.
    #[inline]
    pub(crate) fn pfn_at(self, addr: usize) -> Option<Pfn> {
        let pa = addr.checked_sub(self.offset)?;
        pa.is_multiple_of(PAGE).then_some(Pfn((pa / PAGE) as u64))
    }

    /// The address of frame `pfn`, if it has one.
    #[inline]
    pub(crate) fn addr_of(self, pfn: Pfn) -> Option<usize> {
        usize::try_from(pfn.0)
            .ok()?
            .checked_mul(PAGE)?
            .checked_add(self.offset)
    }

    /// The address of frame `pfn`, a frame of a range whose last frame has an address
    /// ([`DirectMap::addr_of`]; for any other frame, a wrapped number, not its address).
    #[inline(always)]
    pub(crate) const fn addr_in(self, pfn: Pfn) -> usize {
        (pfn.0 as usize)
            .wrapping_mul(PAGE)
            .wrapping_add(self.offset)
    }

    /// The order of a block whose address is aligned to `align` bytes (at least a page):
    /// `align` must be a power of two and the offset a multiple of it (else frame alignment
    /// is not address alignment).
    #[inline]
    pub(crate) fn align_order(self, align: usize) -> Option<Order> {
        if !align.is_power_of_two() || !self.offset.is_multiple_of(align.max(PAGE)) {
            return None;
        }
        let log = (align.max(PAGE) / PAGE).trailing_zeros();
        u8::try_from(log).ok().and_then(|o| Order::new(o).ok())
    }
}
