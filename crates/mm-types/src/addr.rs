//! Frame numbers and addresses.

use crate::PageSize;
use core::fmt;

/// A page frame number: a physical address divided by the page size.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pfn(pub u64);

/// A physical address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PhysAddr(pub u64);

/// A virtual address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct VirtAddr(pub u64);

impl Pfn {
    /// The frame `n` frames after this one, or `None` on overflow.
    #[must_use]
    #[inline]
    pub const fn checked_add(self, n: u64) -> Option<Self> {
        match self.0.checked_add(n) {
            Some(p) => Some(Self(p)),
            None => None,
        }
    }

    /// The frame of `size` that holds `addr`.
    #[must_use]
    #[inline]
    pub const fn containing(addr: PhysAddr, size: PageSize) -> Self {
        Self(addr.0 >> size.shift())
    }

    /// The physical address where the frame starts, or `None` if it does not fit in 64 bits.
    #[must_use]
    #[inline]
    pub const fn start_address(self, size: PageSize) -> Option<PhysAddr> {
        if self.0 > u64::MAX >> size.shift() {
            return None;
        }
        Some(PhysAddr(self.0 << size.shift()))
    }
}

/// The methods physical and virtual addresses share.
macro_rules! address {
    ($t:ident) => {
        impl $t {
            /// The address `bytes` further on, or `None` on overflow.
            #[must_use]
            #[inline]
            pub const fn checked_add(self, bytes: u64) -> Option<Self> {
                match self.0.checked_add(bytes) {
                    Some(a) => Some(Self(a)),
                    None => None,
                }
            }

            /// Whether the address is a multiple of `size`.
            #[must_use]
            #[inline]
            pub const fn is_aligned(self, size: PageSize) -> bool {
                size.offset(self.0) == 0
            }

            /// The start of the page of `size` that holds the address.
            #[must_use]
            #[inline]
            pub const fn align_down(self, size: PageSize) -> Self {
                Self(self.0 - size.offset(self.0))
            }

            /// The start of the first page of `size` at or after the address, or `None`
            /// where that is past the end of the 64-bit space.
            #[must_use]
            #[inline]
            pub const fn align_up(self, size: PageSize) -> Option<Self> {
                match size.offset(self.0) {
                    0 => Some(self),
                    off => match self.0.checked_add(size.bytes() as u64 - off) {
                        Some(a) => Some(Self(a)),
                        None => None,
                    },
                }
            }

            /// The address as a `usize` (a pointer's width), or `None` where it does not fit.
            #[must_use]
            #[inline]
            pub const fn as_usize(self) -> Option<usize> {
                if self.0 > usize::MAX as u64 {
                    return None;
                }
                Some(self.0 as usize)
            }
        }
    };
}

/// `Debug` as `Name(0x..)` and `Display` as `0x..`.
macro_rules! hex_fmt {
    ($t:ident) => {
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($t), "({:#x})"), self.0)
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}

address!(PhysAddr);
address!(VirtAddr);
hex_fmt!(Pfn);
hex_fmt!(PhysAddr);
hex_fmt!(VirtAddr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_are_checked() {
        let s = PageSize::Size16KiB;
        assert_eq!(Pfn::containing(PhysAddr(0x8000_7fff), s), Pfn(0x2_0001));
        assert_eq!(Pfn(0x2_0001).start_address(s), Some(PhysAddr(0x8000_4000)));
        assert_eq!(Pfn(u64::MAX >> 13).start_address(s), None);
        assert_eq!(Pfn(u64::MAX).checked_add(1), None);
        assert_eq!(VirtAddr(u64::MAX).checked_add(1), None);
        assert_eq!(
            VirtAddr(0x1_2345).align_down(PageSize::Size4KiB),
            VirtAddr(0x1_2000)
        );
        assert_eq!(
            PhysAddr(0x1_2345).align_up(PageSize::Size4KiB),
            Some(PhysAddr(0x1_3000))
        );
        assert_eq!(
            PhysAddr(0x1_2000).align_up(PageSize::Size4KiB),
            Some(PhysAddr(0x1_2000))
        );
        assert_eq!(PhysAddr(u64::MAX).align_up(PageSize::Size4KiB), None);
        assert_eq!(
            PhysAddr(u64::MAX - 0xfff).align_up(PageSize::Size4KiB),
            Some(PhysAddr(u64::MAX - 0xfff))
        );
        assert!(PhysAddr(0x1_0000).is_aligned(PageSize::Size64KiB));
        assert!(!PhysAddr(0x1_1000).is_aligned(PageSize::Size16KiB));
        let p = Pfn(0x10);
        assert_eq!(std::format!("{p:?} {p}"), "Pfn(0x10) 0x10");
    }
}
