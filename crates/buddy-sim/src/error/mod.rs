//! What can go wrong, one error type per family of operations (as x86_64's `MapToError`,
//! `UnmapError`): [`AllocError`], [`FreeError`], [`MapError`], [`ContigError`] and
//! [`ConfigError`], each listing only what its operations return; and [`BuddyError`], every
//! one of them in one type, for a caller that keeps one error type (each family converts
//! into it with `?`). [`NoSuchCpu`] is what `Zone::cpu` returns, and converts into every
//! family.

pub(crate) mod alloc;
pub(crate) mod buddy;
pub(crate) mod config;
pub(crate) mod contig;
pub(crate) mod free;
pub(crate) mod map;
pub(crate) mod report;
pub(crate) mod request;

use crate::error::alloc::AllocError;
use crate::error::buddy::BuddyError;
use crate::error::config::ConfigError;
use crate::error::contig::ContigError;
use crate::error::free::FreeError;
use crate::error::map::MapError;
use crate::error::request::RequestConflict;
use crate::types::{MAX_SUPPORTED_ORDER, OrderError};
use core::fmt;
use mm_types::Pfn;

/// No CPU with this index: what [`Zone::cpu`](crate::Zone::cpu) and
/// [`Zone::local_cpu`](crate::Zone::local_cpu) return; it converts into every family's
/// `BadCpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoSuchCpu(pub usize);

impl fmt::Display for NoSuchCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&BuddyError::BadCpu(self.0), f)
    }
}

impl core::error::Error for NoSuchCpu {}

/// A frame or range that is not inside the zone: what the zone's frame arithmetic
/// returns, for each family that takes frame numbers to say in its own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PfnError {
    /// A frame outside the zone.
    OutOfZone(Pfn),
    /// `pfn + nr` overflows.
    Overflow,
}

/// A node the topology does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoSuchNode(pub(crate) u8);

/// An order above the zone's MAX_ORDER.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLarge {
    pub(crate) order: u8,
    pub(crate) max: u8,
}

/// `From` conversions of the shared pieces into the families that return them.
macro_rules! conversions {
    ($($family:ident: $($piece:ident),*;)*) => {$($(
        conversions!(@one $family $piece);
    )*)*};
    (@one $family:ident NoSuchCpu) => {
        impl From<NoSuchCpu> for $family {
            fn from(e: NoSuchCpu) -> Self {
                Self::BadCpu(e.0)
            }
        }
    };
    (@one $family:ident PfnError) => {
        impl From<PfnError> for $family {
            fn from(e: PfnError) -> Self {
                match e {
                    PfnError::OutOfZone(pfn) => Self::OutOfZone(pfn),
                    PfnError::Overflow => Self::Overflow,
                }
            }
        }
    };
    (@one $family:ident TooLarge) => {
        impl From<TooLarge> for $family {
            fn from(e: TooLarge) -> Self {
                Self::OrderTooLarge { order: e.order, max: e.max }
            }
        }
    };
    (@one $family:ident NoSuchNode) => {
        impl From<NoSuchNode> for $family {
            fn from(e: NoSuchNode) -> Self {
                Self::BadNode(u32::from(e.0))
            }
        }
    };
    (@one $family:ident OrderError) => {
        impl From<OrderError> for $family {
            fn from(e: OrderError) -> Self {
                match e {
                    OrderError::ZeroPages => Self::ZeroPages,
                    OrderError::TooLarge { order } => Self::OrderTooLarge {
                        order,
                        max: MAX_SUPPORTED_ORDER,
                    },
                }
            }
        }
    };
    (@one $family:ident ConfigError) => {
        impl From<ConfigError> for $family {
            fn from(e: ConfigError) -> Self {
                Self::Config(e)
            }
        }
    };
}

conversions! {
    BuddyError: NoSuchCpu, PfnError, TooLarge, OrderError, NoSuchNode, ConfigError;
    AllocError: NoSuchCpu, TooLarge, OrderError, NoSuchNode, ConfigError;
    FreeError: NoSuchCpu, PfnError;
    MapError: PfnError, NoSuchNode, ConfigError;
    ContigError: NoSuchCpu, PfnError, TooLarge, OrderError, NoSuchNode;
}

impl From<RequestConflict> for AllocError {
    fn from(e: RequestConflict) -> Self {
        Self::Conflict(e)
    }
}
