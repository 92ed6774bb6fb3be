//! Ranges of frames and of pages.

use crate::{PageSize, Pfn, VirtAddr};

/// Physically contiguous frames: `pages` frames from `start` (a folio, one run of a `vmalloc`
/// area, a range `free_contig_range` frees).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameRange {
    /// The first frame.
    pub start: Pfn,
    /// How many frames.
    pub pages: u64,
}

impl FrameRange {
    /// `pages` frames from `start`.
    #[must_use]
    #[inline]
    pub const fn new(start: Pfn, pages: u64) -> Self {
        Self { start, pages }
    }

    /// The frame just past the range, or `None` if that overflows.
    #[must_use]
    #[inline]
    pub const fn end(&self) -> Option<Pfn> {
        self.start.checked_add(self.pages)
    }

    /// Whether `pfn` is one of the range's frames.
    #[must_use]
    #[inline]
    pub const fn contains(&self, pfn: Pfn) -> bool {
        match pfn.0.checked_sub(self.start.0) {
            Some(off) => off < self.pages,
            None => false,
        }
    }

    /// Whether the range has no frames.
    #[must_use]
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.pages == 0
    }
}

/// Virtually contiguous pages of one size: `pages` pages of `size` from `start` (a TLB flush
/// range).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageRange {
    /// The address of the first page.
    pub start: VirtAddr,
    /// How many pages.
    pub pages: u64,
    /// Their size.
    pub size: PageSize,
}

impl PageRange {
    /// `pages` pages of `size` from `start`.
    #[must_use]
    #[inline]
    pub const fn new(start: VirtAddr, pages: u64, size: PageSize) -> Self {
        Self { start, pages, size }
    }

    /// The length in bytes, or `None` if it does not fit in 64 bits.
    #[must_use]
    #[inline]
    pub const fn bytes(&self) -> Option<u64> {
        self.pages.checked_mul(self.size.bytes() as u64)
    }

    /// The address just past the range, or `None` if that overflows.
    #[must_use]
    #[inline]
    pub const fn end(&self) -> Option<VirtAddr> {
        match self.bytes() {
            Some(b) => self.start.checked_add(b),
            None => None,
        }
    }

    /// Whether `va` lies in the range.
    #[must_use]
    #[inline]
    pub const fn contains(&self, va: VirtAddr) -> bool {
        match (va.0.checked_sub(self.start.0), self.bytes()) {
            (Some(off), Some(len)) => off < len,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Whether the range has no pages.
    #[must_use]
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.pages == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_range_edges() {
        let r = FrameRange::new(Pfn(10), 4);
        assert!(!r.contains(Pfn(9)) && r.contains(Pfn(10)) && r.contains(Pfn(13)));
        assert!(!r.contains(Pfn(14)));
        assert_eq!(r.end(), Some(Pfn(14)));
        assert_eq!(FrameRange::new(Pfn(u64::MAX), 1).end(), None);
        assert!(FrameRange::new(Pfn(3), 0).is_empty());
    }

    #[test]
    fn page_range_edges() {
        let r = PageRange::new(VirtAddr(0x10_0000), 3, PageSize::Size16KiB);
        assert_eq!(r.bytes(), Some(48 << 10));
        assert_eq!(r.end(), Some(VirtAddr(0x10_c000)));
        assert!(r.contains(VirtAddr(0x10_bfff)) && !r.contains(VirtAddr(0x10_c000)));
        assert!(!r.contains(VirtAddr(0xf_ffff)));
        let huge = PageRange::new(VirtAddr(1), u64::MAX, PageSize::Size64KiB);
        assert_eq!(huge.bytes(), None);
        assert!(huge.contains(VirtAddr(u64::MAX)));
    }
}
