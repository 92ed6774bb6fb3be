//! The base page size.

/// A base page size: 4 KiB (x86_64, arm64), 16 KiB and 64 KiB (arm64 translation granules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PageSize {
    /// 4 KiB.
    Size4KiB,
    /// 16 KiB.
    Size16KiB,
    /// 64 KiB.
    Size64KiB,
}

impl PageSize {
    /// Every page size, smallest first.
    pub const ALL: [Self; 3] = [Self::Size4KiB, Self::Size16KiB, Self::Size64KiB];

    /// log2 of the size in bytes: 12, 14 or 16.
    #[must_use]
    #[inline]
    pub const fn shift(self) -> u32 {
        match self {
            Self::Size4KiB => 12,
            Self::Size16KiB => 14,
            Self::Size64KiB => 16,
        }
    }

    /// The size in bytes.
    #[must_use]
    #[inline]
    pub const fn bytes(self) -> usize {
        1 << self.shift()
    }

    /// The page size whose log2 is `shift`, if there is one.
    #[must_use]
    pub const fn from_shift(shift: u32) -> Option<Self> {
        match shift {
            12 => Some(Self::Size4KiB),
            14 => Some(Self::Size16KiB),
            16 => Some(Self::Size64KiB),
            _ => None,
        }
    }

    /// Bytes `offset` within a page of this size (`addr mod size`).
    #[must_use]
    #[inline]
    pub(crate) const fn offset(self, addr: u64) -> u64 {
        addr & ((1 << self.shift()) - 1)
    }
}

impl core::fmt::Display for PageSize {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} KiB", self.bytes() >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_and_bytes_agree() {
        for s in PageSize::ALL {
            assert_eq!(s.bytes(), 1 << s.shift());
            assert_eq!(PageSize::from_shift(s.shift()), Some(s));
        }
        assert_eq!(PageSize::from_shift(13), None);
        assert_eq!(PageSize::Size64KiB.offset(0x1_2345), 0x2345);
    }
}
