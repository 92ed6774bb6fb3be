//! The configuration family: [`ConfigError`].

use crate::types::Order;
use core::fmt;

/// What is wrong with a configuration: of a zone ([`ZoneConfig`](crate::ZoneConfig)), its
/// metadata, a [`Topology`](crate::Topology), a [`NodeSet`](crate::NodeSet), a
/// [`FrameClearer`](crate::FrameClearer) or an adapter's direct map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The zone has no frames.
    NoFrames,
    /// More frames than 32-bit list links index (at most `u32::MAX - 1`), or than a `usize`
    /// counts.
    TooManyFrames(u64),
    /// `start + nr_pages` overflows.
    SpanOverflows,
    /// MAX_ORDER above [`MAX_SUPPORTED_ORDER`](crate::MAX_SUPPORTED_ORDER).
    MaxOrderTooLarge(Order),
    /// The pageblock order is above MAX_ORDER: lower `pageblock_order` too, or set MAX_ORDER
    /// with [`ZoneConfig::with_max_order`](crate::ZoneConfig::with_max_order), which does.
    PageblockAboveMaxOrder {
        /// The pageblock order.
        pageblock: Order,
        /// MAX_ORDER.
        max: Order,
    },
    /// The section size is not a power of two.
    SectionNotPowerOfTwo(u64),
    /// No CPUs.
    NoCpus,
    /// The per-cpu batch is zero.
    ZeroBatch,
    /// `eager_pages` is zero: no frame of an added range would be initialized at once.
    NoEagerPages,
    /// `compaction_proactiveness` above 100.
    Proactiveness(u8),
    /// [`pageblock_reserve`](crate::ZoneConfig::pageblock_reserve) without
    /// [`defrag_mode`](crate::ZoneConfig::defrag_mode): the reserve serves defrag mode's
    /// fallbacks.
    ReserveWithoutDefragMode,
    /// [`pcp_max_order`](crate::ZoneConfig::pcp_max_order) above
    /// [`PCP_MAX_ORDER`](crate::PCP_MAX_ORDER).
    PcpOrderTooLarge(Order),
    /// The frame metadata does not hold one [`Frame`](crate::Frame) per frame.
    FrameMetadata {
        /// Entries needed.
        need: usize,
        /// Entries given.
        got: usize,
    },
    /// The per-cpu metadata does not hold one [`PerCpu`](crate::PerCpu) per CPU.
    CpuMetadata {
        /// Entries needed.
        need: usize,
        /// Entries given.
        got: usize,
    },
    /// The frame metadata would be larger than the address space.
    MetadataTooLarge,
    /// A topology needs 1 to [`MAX_NODES`](crate::MAX_NODES) nodes.
    NodeCount(usize),
    /// The distance table does not hold one entry per pair of nodes.
    DistanceTable {
        /// Entries needed.
        need: usize,
        /// Entries given.
        got: usize,
    },
    /// A node's distance to itself is not 10, or to another node not above 10 (a SLIT Linux
    /// rejects).
    Distance {
        /// The row's node.
        from: u8,
        /// The column's node.
        to: u8,
        /// The distance given.
        distance: u8,
    },
    /// More CPUs than [`MAX_CPUS`](crate::MAX_CPUS).
    TooManyCpus(usize),
    /// More zones than [`MAX_ZONES`](crate::MAX_ZONES), or not one node per zone.
    ZoneNodes {
        /// Zones given.
        zones: usize,
        /// Nodes given for them.
        nodes: usize,
    },
    /// A zone has per-cpu lists for another number of CPUs than the topology has.
    ZoneCpus {
        /// The zone's index.
        zone: u8,
        /// Its CPUs.
        cpus: usize,
        /// The topology's.
        topology: usize,
    },
    /// A zone names a node the topology does not have.
    ZoneNode {
        /// The zone's index.
        zone: u8,
        /// Its node.
        node: u8,
    },
    /// Two zones span the same frames.
    ZonesOverlap {
        /// The first zone's index.
        first: u8,
        /// The second zone's index.
        second: u8,
    },
    /// A direct map's offset is not a multiple of 4 KiB.
    DirectMapOffset(usize),
    /// A zone's frame has no address in a direct map at this offset: past the address
    /// space.
    DirectMapRange {
        /// The direct map's offset.
        offset: usize,
        /// The zone's last frame.
        last: u64,
    },
    /// A clearer's page size is not 4 KiB (a frame's).
    ClearPageSize,
    /// A [`Topology`](crate::Topology) puts a CPU on a node it does not have.
    CpuNode {
        /// The CPU.
        cpu: usize,
        /// The node named.
        node: u8,
    },
    /// A clearer's policy names a strategy this CPU cannot execute.
    ClearStrategy,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NoFrames => write!(f, "the zone has no frames"),
            Self::TooManyFrames(n) => write!(f, "{n} frames: more than 32-bit list links index"),
            Self::SpanOverflows => write!(f, "start + nr_pages overflows"),
            Self::MaxOrderTooLarge(o) => write!(f, "MAX_ORDER {o} above MAX_SUPPORTED_ORDER"),
            Self::PageblockAboveMaxOrder { pageblock, max } => write!(
                f,
                "pageblock order {pageblock} above MAX_ORDER {max}: lower pageblock_order too, \
                 or set MAX_ORDER with ZoneConfig::with_max_order, which does"
            ),
            Self::SectionNotPowerOfTwo(n) => write!(f, "section size {n} is not a power of two"),
            Self::NoCpus => write!(f, "no CPUs"),
            Self::ZeroBatch => write!(f, "per-cpu batch is zero"),
            Self::NoEagerPages => {
                write!(f, "no frame of an added range would be initialized at once")
            }
            Self::Proactiveness(p) => write!(f, "compaction proactiveness {p} above 100"),
            Self::ReserveWithoutDefragMode => {
                f.write_str("a pageblock reserve outside defrag mode")
            }
            Self::PcpOrderTooLarge(o) => write!(
                f,
                "per-cpu lists up to order {o}, above PCP_MAX_ORDER {}",
                crate::PCP_MAX_ORDER
            ),
            Self::FrameMetadata { need, got } => {
                write!(f, "frame metadata: {got} entries for {need} frames")
            }
            Self::CpuMetadata { need, got } => {
                write!(f, "per-cpu metadata: {got} entries for {need} CPUs")
            }
            Self::MetadataTooLarge => write!(f, "frame metadata larger than the address space"),
            Self::NodeCount(n) => write!(f, "{n} nodes: a topology needs 1 to MAX_NODES"),
            Self::DistanceTable { need, got } => {
                write!(
                    f,
                    "distance table of {got} entries for {need} pairs of nodes"
                )
            }
            Self::Distance { from, to, distance } => write!(
                f,
                "distance {distance} from node {from} to node {to}: 10 to itself, above 10 \
                 to another"
            ),
            Self::TooManyCpus(n) => write!(f, "{n} CPUs: more than MAX_CPUS"),
            Self::ZoneNodes { zones, nodes } => write!(
                f,
                "{zones} zones and {nodes} nodes for them: one node per zone, at most \
                 MAX_ZONES zones"
            ),
            Self::ZoneCpus {
                zone,
                cpus,
                topology,
            } => write!(
                f,
                "zone {zone} has lists for {cpus} CPUs, the topology {topology}"
            ),
            Self::ZonesOverlap { first, second } => {
                write!(f, "zones {first} and {second} span the same frames")
            }
            Self::DirectMapOffset(o) => {
                write!(f, "direct map offset {o:#x} is not a multiple of 4 KiB")
            }
            Self::DirectMapRange { offset, last } => write!(
                f,
                "frame {last:#x} has no address in a direct map at offset {offset:#x}"
            ),
            Self::ClearPageSize => write!(f, "frames are 4 KiB: the clearer's page size must be"),
            Self::CpuNode { cpu, node } => write!(
                f,
                "CPU {cpu} is on node {node}, which the topology does not have"
            ),
            Self::ZoneNode { zone, node } => write!(
                f,
                "zone {zone} is on node {node}, which the topology does not have"
            ),
            Self::ClearStrategy => {
                write!(
                    f,
                    "the clearer's policy names a strategy this CPU cannot execute"
                )
            }
        }
    }
}

impl core::error::Error for ConfigError {}
