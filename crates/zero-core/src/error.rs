use crate::Strategy;
use core::fmt;

/// What was wrong with a request to clear memory. Nothing was written when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZeroError {
    /// The extent or folio has no pages.
    ZeroLength,
    /// The start address is not aligned to the page size.
    Misaligned {
        /// The address given.
        addr: usize,
        /// The alignment required.
        align: usize,
    },
    /// The length is not a whole number of pages.
    NotPageMultiple {
        /// The length given, in bytes.
        len: usize,
        /// The page size, in bytes.
        page_size: usize,
    },
    /// The length is not a whole number of the strategy's granule ([`Strategy::granule`]:
    /// the unit its instruction writes, such as DC ZVA's block), for [`Strategy::clear`].
    NotGranuleMultiple {
        /// The length given, in bytes.
        len: usize,
        /// The strategy's granule, in bytes.
        granule: usize,
    },
    /// A page count times the page size, or an address plus a length, overflows `usize`.
    Overflow,
    /// The fault offset lies outside the folio (the clearing entry points, in bytes).
    FaultOutsideFolio {
        /// The fault offset given, in bytes from the folio's start.
        offset: usize,
        /// The folio's length in bytes.
        len: usize,
    },
    /// The fault's page lies outside the folio (the page-granular planners, in pages).
    FaultPageOutsideFolio {
        /// The fault's page given, counted from the folio's first page.
        page: usize,
        /// The folio's length in pages.
        pages: usize,
    },
    /// The policy names a strategy this CPU cannot execute.
    StrategyUnavailable(Strategy),
}

impl fmt::Display for ZeroError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ZeroLength => f.write_str("nothing to clear: zero pages"),
            Self::Misaligned { addr, align } => {
                write!(f, "address {addr:#x} is not aligned to {align:#x}")
            }
            Self::NotPageMultiple { len, page_size } => {
                write!(
                    f,
                    "length {len} is not a multiple of the page size {page_size}"
                )
            }
            Self::Overflow => f.write_str("address or length arithmetic overflows"),
            Self::NotGranuleMultiple { len, granule } => {
                write!(
                    f,
                    "length {len} is not a multiple of the strategy's {granule}-byte granule"
                )
            }
            Self::FaultOutsideFolio { offset, len } => {
                write!(f, "fault offset {offset} is outside the {len}-byte folio")
            }
            Self::FaultPageOutsideFolio { page, pages } => {
                write!(f, "fault page {page} is outside the {pages}-page folio")
            }
            Self::StrategyUnavailable(s) => {
                write!(f, "strategy {} is not available on this CPU", s.name())
            }
        }
    }
}

impl core::error::Error for ZeroError {}
