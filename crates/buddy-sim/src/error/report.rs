//! The family of free page reporting: [`ReportError`].

use crate::types::Order;
use core::fmt;

/// Why a free page reporting call was refused
/// ([`Zone::register_page_reporting`](crate::Zone::register_page_reporting),
/// [`Zone::report_free_pages`](crate::Zone::report_free_pages)). A refused registration
/// changes nothing; a refused report returns every block it took as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReportError {
    /// No free page reporting is registered on the zone.
    NotRegistered,
    /// A registration is already in place (Linux allows one device per system).
    AlreadyRegistered,
    /// The reporting order is above the zone's MAX_ORDER.
    OrderTooLarge {
        /// The order asked for.
        order: Order,
        /// The zone's MAX_ORDER.
        max: Order,
    },
    /// The capacity is 0 or above
    /// [`PageReporting::MAX_CAPACITY`](crate::PageReporting::MAX_CAPACITY).
    Capacity(usize),
    /// The sink refused the blocks (the device failed): they went back unmarked.
    Rejected,
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRegistered => f.write_str("no free page reporting registered"),
            Self::AlreadyRegistered => f.write_str("free page reporting is already registered"),
            Self::OrderTooLarge { order, max } => {
                write!(
                    f,
                    "reporting order {} above MAX_ORDER {}",
                    order.get(),
                    max.get()
                )
            }
            Self::Capacity(n) => write!(f, "reporting capacity {n} outside 1..=32"),
            Self::Rejected => f.write_str("the sink refused the reported blocks"),
        }
    }
}

impl core::error::Error for ReportError {}
