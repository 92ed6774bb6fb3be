/// A base page size: 4 KiB (x86_64, arm64), 16 KiB and 64 KiB (arm64 granules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

    /// log2 of the size in bytes.
    #[must_use]
    pub const fn shift(self) -> u32 {
        match self {
            Self::Size4KiB => 12,
            Self::Size16KiB => 14,
            Self::Size64KiB => 16,
        }
    }

    /// The size in bytes.
    #[must_use]
    pub const fn bytes(self) -> usize {
        1 << self.shift()
    }
}
