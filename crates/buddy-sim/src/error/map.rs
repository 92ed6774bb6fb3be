//! The memory map's family: [`MapError`].

use crate::error::buddy::BuddyError;
use crate::error::config::ConfigError;
use core::fmt;
use mm_types::Pfn;

/// Why a change to the memory map, or a look-up in it, failed: `add_memory`,
/// `add_memory_bytes`, `add_zeroed_memory` (on a zone or a node set), a node set's
/// `online_range`, `zone_of`, `node_stats`, `init_deferred` and its topology's look-ups, a
/// zone's `frame` and `pageblock_type`. Nothing is added when one is returned. (Taking
/// memory offline moves what is in the way: [`ContigError`](crate::ContigError).)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MapError {
    /// The zone's configuration, refused by [`Zone::new`](crate::Zone::new) (and
    /// `BoxedZone::new_boxed`), or when the zone was built at compile time (a
    /// [`StaticZone`](crate::StaticZone) then spans no frames); the [`ConfigError`] says
    /// what is wrong.
    Config(ConfigError),
    /// A frame outside the zone.
    OutOfZone(Pfn),
    /// `pfn + nr` overflows.
    Overflow,
    /// A range of zero frames.
    ZeroPages,
    /// `add_memory`: the frame is usable memory already.
    AlreadyAdded(Pfn),
    /// A [`NodeSet`](crate::NodeSet) call named a node the topology does not have.
    BadNode(u32),
    /// The frames lie in no zone of the node named: the frame is the first outside the zone
    /// the range starts in.
    NotInNode {
        /// The first frame of the range that is not where it should be.
        pfn: Pfn,
        /// The node named (or the node of the range's first frame).
        node: u32,
    },
}

impl From<MapError> for BuddyError {
    fn from(e: MapError) -> Self {
        match e {
            MapError::Config(x) => Self::Config(x),
            MapError::OutOfZone(x) => Self::OutOfZone(x),
            MapError::Overflow => Self::Overflow,
            MapError::ZeroPages => Self::ZeroPages,
            MapError::AlreadyAdded(x) => Self::AlreadyAdded(x),
            MapError::BadNode(x) => Self::BadNode(x),
            MapError::NotInNode { pfn, node } => Self::NotInNode { pfn, node },
        }
    }
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&BuddyError::from(*self), f)
    }
}

impl core::error::Error for MapError {}
