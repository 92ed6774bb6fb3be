//! NUMA nodes: the zones of a host's memory grouped by node, with the distances between
//! nodes (as ACPI's SLIT gives them), an allocation that asks for memory near a CPU and
//! falls back in distance order (Linux's zonelists), per-node counts, background work per
//! node, and memory hotplug both ways across nodes and sections.
//!
//! - [`Topology`]: how many nodes, the distance table, and each CPU's node; the fallback
//!   order of every node is computed once, nearest first (the node itself, then increasing
//!   distance, ties to the lower node number: Linux's `build_zonelists` without its load
//!   spreading).
//! - [`NodeSet`]: the zones (one or more per node, each with its own per-cpu lists and
//!   metadata in caller storage, disjoint in frame numbers) and the topology. An allocation
//!   names a [`NodePolicy`]; it tries each zone in the fallback order without the slow path
//!   first (a free block one node away before draining the CPUs' lists here), then each
//!   again with it, as Linux's `get_page_from_freelist` and `__alloc_pages_slowpath` do.
//!   Frees go to the zone that spans the frame. Shared through `&self` from every CPU.
//! - Hotplug: [`NodeSet::add_memory`] splits a range over the node's zones (a node's memory
//!   may span several zones and sections) and adds all of it or none;
//!   [`NodeSet::offline_range`] takes a range out ([`Zone::offline_range`]: isolate, migrate
//!   movable allocations out, refuse what cannot move, make the range holes) and
//!   [`NodeSet::online_range`] brings it back. Hotplug calls are serialized by the set's
//!   hotplug lock (Linux's `mem_hotplug_lock`); allocations and frees never take it.

use crate::frame_storage::FrameStorage;
use crate::zone::per_cpu_set::PerCpuSet;
use core::marker::PhantomData;

use crate::block::Block;
use crate::cma::CmaArea;
use crate::error::alloc::AllocError;
use crate::error::config::ConfigError;
use crate::error::contig::ContigError;
use crate::error::free::FreeError;
use crate::error::map::MapError;
use crate::error::{NoSuchCpu, NoSuchNode, PfnError};
use crate::memory::{FrameClearer, FrameMemory};
use crate::migrate::Migrate;
use crate::mobility::compaction::CompactStats;
use crate::request::{AllocRequest, ReschedPoint, SlowPath, lies_below};
use crate::sync::DefaultRawMutex;
use crate::sync::Mutex;
use crate::types::NodeId;
use crate::types::NodePolicy;
use crate::types::Order;
use crate::zeroed::Zeroing;
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::stats::MemoryStats;
use lock_api::RawMutex;
use mm_types::Pfn;
use zero_core::Resched;

/// The most nodes a [`Topology`] describes.
pub const MAX_NODES: usize = 32;
/// The most CPUs a [`Topology`] maps to nodes.
pub const MAX_CPUS: usize = 512;
/// The most zones a [`NodeSet`] holds.
pub const MAX_ZONES: usize = 64;
/// A node's distance to itself in a SLIT (ACPI's `LOCAL_DISTANCE`).
pub const LOCAL_DISTANCE: u8 = 10;
/// The distance [`Topology::uniform`] gives between two nodes (Linux's `REMOTE_DISTANCE`,
/// what it assumes without a SLIT).
pub const REMOTE_DISTANCE: u8 = 20;

/// The nodes, their distances and each CPU's node: what firmware describes (ACPI SRAT and
/// SLIT, a device tree's `numa-node-id` and `distance-map`). Fixed-size, `no_std`, built
/// once at boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    nodes: usize,
    distance: [[u8; MAX_NODES]; MAX_NODES],
    /// Each node's fallback order, nearest first (the node itself first).
    fallback: [[u8; MAX_NODES]; MAX_NODES],
    cpus: usize,
    cpu_node: [u8; MAX_CPUS],
}

impl Topology {
    /// `nodes` nodes with the `nodes x nodes` distance table `distance` (row-major, a SLIT's
    /// entries: row `a`, column `b` is the distance from `a` to `b`), and CPU `c` on node
    /// `cpu_node[c]`.
    ///
    /// # Errors
    /// For no node or more than [`MAX_NODES`], a table of another
    /// size, a diagonal entry other than [`LOCAL_DISTANCE`] or another entry not above it (a
    /// SLIT Linux rejects), more than [`MAX_CPUS`] CPUs ([`ConfigError::NodeCount`],
    /// [`ConfigError::DistanceTable`], [`ConfigError::Distance`], [`ConfigError::TooManyCpus`]);
    /// [`ConfigError::CpuNode`] for a CPU on a node past `nodes`.
    pub fn new(nodes: usize, distance: &[u8], cpu_node: &[NodeId]) -> Result<Self, ConfigError> {
        if nodes == 0 || nodes > MAX_NODES {
            return Err(ConfigError::NodeCount(nodes));
        }
        if distance.len() != nodes * nodes {
            return Err(ConfigError::DistanceTable {
                need: nodes * nodes,
                got: distance.len(),
            });
        }
        if cpu_node.len() > MAX_CPUS {
            return Err(ConfigError::TooManyCpus(cpu_node.len()));
        }
        let mut t = Self {
            nodes,
            distance: [[0; MAX_NODES]; MAX_NODES],
            fallback: [[0; MAX_NODES]; MAX_NODES],
            cpus: cpu_node.len(),
            cpu_node: [0; MAX_CPUS],
        };
        for (a, row) in distance.chunks_exact(nodes).enumerate() {
            for (b, &d) in row.iter().enumerate() {
                if (a == b) != (d == LOCAL_DISTANCE) || d < LOCAL_DISTANCE {
                    // Both below MAX_NODES, which fits a u8.
                    return Err(ConfigError::Distance {
                        from: a as u8,
                        to: b as u8,
                        distance: d,
                    });
                }
                t.distance[a][b] = d;
            }
        }
        for (c, &n) in cpu_node.iter().enumerate() {
            if n.index() >= nodes {
                return Err(ConfigError::CpuNode { cpu: c, node: n.0 });
            }
            t.cpu_node[c] = n.0;
        }
        for a in 0..nodes {
            let mut order = [0u8; MAX_NODES];
            for (i, slot) in order.iter_mut().enumerate().take(nodes) {
                *slot = i as u8;
            }
            // Nearest first; the node itself is the only one at LOCAL_DISTANCE.
            order[..nodes].sort_unstable_by_key(|&b| (t.distance[a][b as usize], b));
            t.fallback[a] = order;
        }
        Ok(t)
    }

    /// `nodes` nodes, each [`REMOTE_DISTANCE`] from every other (no SLIT), CPU `c` on node
    /// `cpu_node[c]`.
    ///
    /// # Errors
    /// As [`Topology::new`].
    pub fn uniform(nodes: usize, cpu_node: &[NodeId]) -> Result<Self, ConfigError> {
        let mut d = [REMOTE_DISTANCE; MAX_NODES * MAX_NODES];
        let n = nodes.min(MAX_NODES);
        for a in 0..n {
            d[a * n + a] = LOCAL_DISTANCE;
        }
        Self::new(
            nodes,
            &d[..nodes.saturating_mul(nodes).min(d.len())],
            cpu_node,
        )
    }

    /// The number of nodes.
    pub const fn nodes(&self) -> usize {
        self.nodes
    }

    /// The number of CPUs.
    pub const fn cpus(&self) -> usize {
        self.cpus
    }

    /// The distance from `a` to `b`.
    ///
    /// # Errors
    /// [`MapError::BadNode`].
    pub fn distance(&self, a: NodeId, b: NodeId) -> Result<u8, MapError> {
        self.check(a)?;
        self.check(b)?;
        Ok(self.distance[a.index()][b.index()])
    }

    /// The node of `cpu`.
    ///
    /// # Errors
    /// [`NoSuchCpu`].
    pub fn node_of_cpu(&self, cpu: usize) -> Result<NodeId, NoSuchCpu> {
        if cpu < self.cpus {
            Ok(NodeId(self.cpu_node[cpu]))
        } else {
            Err(NoSuchCpu(cpu))
        }
    }

    /// Every node in `node`'s fallback order: `node` itself, then the others nearest first
    /// (ties to the lower number).
    ///
    /// # Errors
    /// [`MapError::BadNode`].
    pub fn fallback(&self, node: NodeId) -> Result<impl Iterator<Item = NodeId> + '_, MapError> {
        self.check(node)?;
        Ok(self.fallback[node.index()][..self.nodes]
            .iter()
            .map(|&n| NodeId(n)))
    }

    fn check(&self, node: NodeId) -> Result<(), NoSuchNode> {
        if node.index() < self.nodes {
            Ok(())
        } else {
            Err(NoSuchNode(node.0))
        }
    }
}

/// The zones of a host's memory, grouped by node, shared by every CPU through `&self`
/// (see the module docs). `Z` holds the zones (a slice, an array, a vector); each zone's
/// metadata is its own caller storage, as for a lone [`Zone`].
///
/// With the `alloc` feature (the zones' metadata in vectors):
///
#[cfg_attr(feature = "alloc", doc = "```")]
#[cfg_attr(not(feature = "alloc"), doc = "```ignore")]
/// use buddy_sim::{BoxedNodeSet, BoxedZone, NodeId, NodePolicy, Order, Pfn, Topology, ZoneConfig};
///
/// // Two nodes 20 apart (a SLIT), CPU 0 on node 0 and CPU 1 on node 1, 4 MiB each.
/// let topology = Topology::new(2, &[10, 20, 20, 10], &[NodeId(0), NodeId(1)])?;
/// let zone = |start, frames, node| {
///     BoxedZone::new_boxed(ZoneConfig::new(Pfn(start), frames).with_cpus(2).with_node(NodeId(node)))
/// };
/// let zones = vec![zone(0x1000, 1024, 0)?, zone(0x1400, 1024, 1)?];
/// let set = BoxedNodeSet::new(topology, zones)?;
///
/// let p = set.alloc_pages(1, Order::ZERO, NodePolicy::Local)?;
/// assert_eq!(set.zone_of(p)?.node(), NodeId(1));
/// let block = set.alloc_pages(1, Order::new(10)?, NodePolicy::Bind(NodeId(0)))?;
/// assert_eq!(set.node_stats(NodeId(0))?.free, 0);
/// // SAFETY: the blocks are this example's, and it uses them no more.
/// unsafe {
///     set.free_pages(1, p, Order::ZERO)?;
///     set.free_pages(1, block, Order::new(10)?)?;
/// }
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
pub struct NodeSet<Z, F, P, R = DefaultRawMutex> {
    topology: Topology,
    zones: Z,
    /// Each zone's span `(first frame, frames)` and index, in the order of their first
    /// frames: what [`NodeSet::zone_of`]'s binary search reads (one table, not the zones).
    by_start: [(u64, u64, u8); MAX_ZONES],
    /// Each node's zones in fallback order, worked out once.
    zonelists: Zonelists,
    hotplug: Mutex<R, ()>,
    _zone: PhantomData<fn() -> (F, P)>,
}

/// Linux's `node_zonelists`: for each node, the indices of every zone in its fallback
/// order (its own zones first, then the nearest node's, ...; each node's in the order the
/// set was given them), worked out once so that an allocation walks a slice.
struct Zonelists {
    /// Node `n`'s list: `zones[n][..len]`, every zone once (each zone is on one node, and
    /// the fallback order names every node).
    zones: [[u8; MAX_ZONES]; MAX_NODES],
    /// Zones in the set: each list's length.
    len: u8,
    /// How many of each list's first zones are the node's own (the list a bound policy
    /// walks).
    own: [u8; MAX_NODES],
}

impl Zonelists {
    /// The lists of `zones`, each on the node its configuration names (which `topology`
    /// has: checked), at most [`MAX_ZONES`] of them.
    fn new<F, P, R>(topology: &Topology, zones: &[Zone<F, P, R>]) -> Self {
        let mut lists = Self {
            zones: [[0; MAX_ZONES]; MAX_NODES],
            // At most MAX_ZONES (64) zones: the count fits a u8.
            len: zones.len() as u8,
            own: [0; MAX_NODES],
        };
        for first in 0..topology.nodes {
            let list = &mut lists.zones[first];
            let mut at = 0;
            for (k, &node) in topology.fallback[first][..topology.nodes]
                .iter()
                .enumerate()
            {
                for (i, z) in zones.iter().enumerate() {
                    if z.cfg.node.0 == node {
                        // Each zone is listed once: at most MAX_ZONES of them, whose
                        // indices fit a u8.
                        list[at] = i as u8;
                        at += 1;
                    }
                }
                if k == 0 {
                    lists.own[first] = at as u8;
                }
            }
        }
        lists
    }

    /// The zones an allocation whose first node is `first` may take from: every zone in
    /// fallback order, or with `own_only` the node's own.
    #[inline(always)]
    fn of(&self, first: NodeId, own_only: bool) -> &[u8] {
        let n = if own_only {
            self.own[first.index()]
        } else {
            self.len
        };
        &self.zones[first.index()][..usize::from(n)]
    }
}

impl<Z, F, P, R> NodeSet<Z, F, P, R>
where
    Z: AsRef<[Zone<F, P, R>]>,
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// The zones `zones`, each on the node its configuration names
    /// ([`ZoneConfig::with_node`](crate::ZoneConfig::with_node)), under `topology`.
    ///
    /// # Errors
    /// [`ConfigError::ZoneNodes`] for more than [`MAX_ZONES`] zones,
    /// [`ConfigError::ZonesOverlap`] for zones whose frames overlap, [`ConfigError::ZoneCpus`]
    /// for a zone with another number of CPUs than the topology, [`ConfigError::ZoneNode`]
    /// for a node the topology does not have.
    pub fn new(topology: Topology, zones: Z) -> Result<Self, ConfigError> {
        let zs = zones.as_ref();
        if zs.len() > MAX_ZONES {
            return Err(ConfigError::ZoneNodes {
                zones: zs.len(),
                nodes: MAX_ZONES,
            });
        }
        for (i, z) in zs.iter().enumerate() {
            let node = z.node();
            if topology.check(node).is_err() {
                // At most MAX_ZONES (64) zones: the index fits a u8.
                return Err(ConfigError::ZoneNode {
                    zone: i as u8,
                    node: node.0,
                });
            }
            let cpus = z.config().cpus;
            if cpus != topology.cpus() {
                return Err(ConfigError::ZoneCpus {
                    // At most MAX_ZONES (64) zones.
                    zone: i as u8,
                    cpus,
                    topology: topology.cpus(),
                });
            }
        }
        let mut by_start = [(0, 0, 0); MAX_ZONES];
        for (k, (slot, z)) in by_start.iter_mut().zip(zs).enumerate() {
            // At most MAX_ZONES (64) zones: the index fits a u8.
            *slot = (z.span().start.0, z.span().pages, k as u8);
        }
        by_start[..zs.len()].sort_unstable();
        for pair in by_start[..zs.len()].windows(2) {
            let ((start, pages, a), (next, _, b)) = (pair[0], pair[1]);
            // A zone's configuration was checked: its span does not overflow.
            if start + pages > next {
                let (first, second) = (a.min(b), a.max(b));
                return Err(ConfigError::ZonesOverlap { first, second });
            }
        }
        let zonelists = Zonelists::new(&topology, zs);
        Ok(Self {
            topology,
            zones,
            by_start,
            zonelists,
            hotplug: Mutex::new(()),
            _zone: PhantomData,
        })
    }

    /// The topology.
    pub const fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Every zone, in the order the set was given them.
    pub fn zones(&self) -> impl Iterator<Item = &Zone<F, P, R>> + '_ {
        self.zones.as_ref().iter()
    }

    /// The zones of `node`, in the order the set was given them.
    fn zones_of(&self, node: NodeId) -> impl Iterator<Item = &Zone<F, P, R>> + '_ {
        self.zones().filter(move |z| z.node() == node)
    }

    /// The zones an allocation whose first node is `first` may take from under `policy`, in
    /// fallback order (Linux's zonelist): the zones of the nearest allowed node first, each
    /// node's in the order the set was given them; with their indices.
    #[inline]
    fn zonelist(
        &self,
        first: NodeId,
        policy: NodePolicy,
    ) -> impl Iterator<Item = (usize, &Zone<F, P, R>)> + '_ {
        let own_only = matches!(policy, NodePolicy::Bind(_));
        let zones = self.zones.as_ref();
        self.zonelists
            .of(first, own_only)
            .iter()
            .filter_map(move |&i| Some((usize::from(i), zones.get(usize::from(i))?)))
    }

    /// The zone spanning `pfn`, found by binary search over the zones' spans: for the
    /// operations the set does not route itself (`put_page`, `free_contig_range`,
    /// `alloc_contig_range`, ...). Its node is [`Zone::node`].
    ///
    /// # Errors
    /// [`MapError::OutOfZone`] when no zone spans it.
    #[inline]
    pub fn zone_of(&self, pfn: Pfn) -> Result<&Zone<F, P, R>, MapError> {
        Ok(self.zone_at(pfn)?)
    }

    /// [`NodeSet::zone_of`], in the words of whichever family asks.
    #[inline]
    fn zone_at(&self, pfn: Pfn) -> Result<&Zone<F, P, R>, PfnError> {
        let zones = self.zones.as_ref();
        let spans = &self.by_start[..zones.len()];
        // The last zone starting at or below `pfn`, if it spans `pfn`.
        let after = spans.partition_point(|&(start, _, _)| start <= pfn.0);
        let found = after
            .checked_sub(1)
            .map(|k| spans[k])
            .filter(|&(start, pages, _)| pfn.0 - start < pages);
        match found {
            Some((_, _, i)) => Ok(&zones[usize::from(i)]),
            None => Err(PfnError::OutOfZone(pfn)),
        }
    }

    /// The node an allocation under `policy` on `cpu` tries first.
    #[inline]
    fn first_node(&self, cpu: usize, policy: NodePolicy) -> Result<NodeId, AllocError> {
        match policy {
            NodePolicy::Local => Ok(self.topology.node_of_cpu(cpu)?),
            NodePolicy::Preferred(n) | NodePolicy::Bind(n) => {
                self.topology.check(n)?;
                Ok(n)
            }
        }
    }

    /// Runs `attempt` over the zones `policy` allows on `cpu`, in zonelist order: every zone
    /// without the slow path, then every zone with it; the first success, else the last
    /// out-of-memory error. Any other error ends the search.
    #[inline(always)]
    fn allocate<'a, T>(
        &'a self,
        cpu: usize,
        order: Order,
        policy: NodePolicy,
        mut attempt: impl FnMut(&'a Zone<F, P, R>, bool) -> Result<T, AllocError>,
    ) -> Result<T, AllocError> {
        if cpu >= self.topology.cpus() {
            return Err(AllocError::BadCpu(cpu));
        }
        let first = self.first_node(cpu, policy)?;
        // The common case: the first zone of the first node has a block at hand.
        let tried = self
            .zonelists
            .of(first, true)
            .first()
            .map(|&i| usize::from(i));
        if let Some(zone) = tried.and_then(|i| self.zones.as_ref().get(i)) {
            match attempt(zone, false) {
                Err(AllocError::OutOfMemory(_) | AllocError::MovableOnly(_)) => {}
                done => return done,
            }
        }
        self.allocate_slow(first, order, policy, tried, attempt)
    }

    /// [`NodeSet::allocate`] past its first attempt (on zone `tried`): both passes over the
    /// zonelist, the first skipping that zone.
    #[inline(never)]
    fn allocate_slow<'a, T>(
        &'a self,
        first: NodeId,
        order: Order,
        policy: NodePolicy,
        tried: Option<usize>,
        mut attempt: impl FnMut(&'a Zone<F, P, R>, bool) -> Result<T, AllocError>,
    ) -> Result<T, AllocError> {
        let mut last = AllocError::OutOfMemory(order);
        for slow_path in [false, true] {
            for (i, zone) in self.zonelist(first, policy) {
                if !slow_path && Some(i) == tried {
                    continue;
                }
                match attempt(zone, slow_path) {
                    Err(e @ AllocError::OutOfMemory(_)) => last = e,
                    // A movable-only zone is not in the zonelist of other kinds.
                    Err(AllocError::MovableOnly(_)) => {}
                    done => return done,
                }
            }
        }
        Err(last)
    }

    /// Allocates what `request` asks for on CPU `cpu` from the nearest zone its
    /// [`policy`](AllocRequest::policy) allows that has it, as
    /// [`Cpu::alloc_raw`](crate::Cpu::alloc_raw) does in one zone. A block (zeroed or not) is
    /// tried in every allowed zone without the slow path first, nearest first, then in each
    /// with it; a run is tried in each zone in turn. A zeroed request names its clearer
    /// ([`AllocRequest::zeroed_with`]), which must reach every zone's memory: a node set has
    /// no handle to clear through, so an [`AllocRequest::zeroed`] request
    /// ([`HandleCleared`](crate::HandleCleared)) does not compile here. Free what it returns
    /// to the set ([`NodeSet::free_pages`]) or to the zone that spans it
    /// ([`NodeSet::zone_of`]).
    ///
    #[cfg_attr(feature = "alloc", doc = "```compile_fail,E0308")]
    #[cfg_attr(not(feature = "alloc"), doc = "```ignore")]
    /// use buddy_sim::{AllocRequest, BoxedNodeSet, BoxedZone, NodeId, Pfn, Topology, ZoneConfig};
    /// let topology = Topology::new(1, &[10], &[NodeId(0)])?;
    /// let zones = vec![BoxedZone::new_boxed(ZoneConfig::new(Pfn(0x1000), 64))?];
    /// let set = BoxedNodeSet::new(topology, zones)?;
    /// let page = set.alloc_raw(0, AllocRequest::page().zeroed())?; // no clearer to clear with
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// # Errors
    /// [`AllocError::BadCpu`], [`AllocError::BadNode`]; [`AllocError::OutOfMemory`] when no
    /// zone the policy allows has it (after each zone's slow path); as
    /// [`Cpu::alloc_raw`](crate::Cpu::alloc_raw).
    #[inline(always)]
    pub fn alloc_raw(&self, cpu: usize, request: AllocRequest<'_>) -> Result<Pfn, AllocError> {
        // The common case, inline: a plain block, only its frame number carried back.
        if request.is_block() && !request.zeroed && !request.has_slow_path() {
            let (order, mt, tag) = (request.order, request.mt, request.tag());
            return self.allocate(
                cpu,
                order,
                request.policy,
                #[inline(always)]
                |z, slow| {
                    let how = (Prefer::Unzeroed, mt, tag);
                    let (idx, _) =
                        z.alloc_attempt(z.pcp(cpu)?, order, how, slow, &mut SlowPath::none())?;
                    Ok(z.map().pfn(idx))
                },
            );
        }
        self.alloc_in(cpu, request).map(|(_, pfn)| pfn)
    }

    /// [`NodeSet::alloc_raw`] as a [`Block`] that frees it, to its zone, when dropped.
    ///
    /// # Errors
    /// As [`NodeSet::alloc_raw`].
    pub fn alloc(
        &self,
        cpu: usize,
        request: AllocRequest<'_>,
    ) -> Result<Block<'_, F, P, R>, AllocError> {
        let request = request.owned();
        let holding = request.holding();
        let (zone, pfn) = self.alloc_in(cpu, request)?;
        // SAFETY: this call allocated what `holding` describes at `pfn` in `zone` and hands
        // it to nobody else.
        #[allow(unsafe_code)]
        Ok(unsafe { Block::from_raw(zone.cpu(cpu)?, pfn, holding) })
    }

    /// [`NodeSet::alloc_raw`], with the zone it came from.
    #[inline(never)]
    fn alloc_in(
        &self,
        cpu: usize,
        mut request: AllocRequest<'_>,
    ) -> Result<(&Zone<F, P, R>, Pfn), AllocError> {
        // The common cases, inline: a block, plain or zeroed.
        if !request.is_block() {
            return self.alloc_run_in(cpu, request);
        }
        let (order, policy, mt, tag) = (request.order, request.policy, request.mt, request.tag());
        // A node set has no handle: a zeroed request names its clearer.
        let clearing = request.clearing(None);
        let prefer = match clearing {
            Some(_) => Prefer::Zeroed,
            None => Prefer::Unzeroed,
        };
        let fault = request.fault;
        let below = request.below;
        let mut hooks = SlowPath::of(&mut request.reclaim, &mut request.compact);
        let (zone, idx, contents) = self.allocate(cpu, order, policy, |z, slow| {
            if !lies_below(z.span(), below) {
                return Err(AllocError::OutOfMemory(order));
            }
            if prefer == Prefer::Zeroed {
                z.check_fault(order, fault)?;
            }
            let how = (prefer, mt, tag);
            let (idx, contents) = z.alloc_attempt(z.pcp(cpu)?, order, how, slow, &mut hooks)?;
            Ok((z, idx, contents))
        })?;
        if let Some(clearing) = clearing {
            let zeroing = Zeroing {
                clearing,
                fault,
                resched: ReschedPoint(&mut request.resched),
            };
            // The CPU was valid for the allocation just made.
            let pcp = zone.pcp(cpu)?;
            zone.make_allocation_zero(pcp, (idx, order, tag), order.pages(), contents, zeroing)?;
        }
        Ok((zone, zone.allocated(idx, tag)))
    }

    /// [`NodeSet::alloc_in`] of a run (each allowed zone in turn, with everything a zone
    /// tries), or of a request whose options conflict.
    #[inline(never)]
    fn alloc_run_in(
        &self,
        cpu: usize,
        mut request: AllocRequest<'_>,
    ) -> Result<(&Zone<F, P, R>, Pfn), AllocError> {
        request.check()?;
        let clearing = request.clearing(None);
        if let Some(area) = request.cma {
            let z = self
                .zone_at(area.base())
                .map_err(|_| AllocError::NotCma(area.base()))?;
            if !request.allows(z.span()) {
                return Err(AllocError::OutOfMemory(request.order));
            }
            let pcp = z.pcp(cpu)?;
            return z.alloc_run(pcp, &mut request, clearing).map(|pfn| (z, pfn));
        }
        let (order, policy) = (request.order, request.policy);
        self.allocate(cpu, order, policy, |z, slow| {
            if !slow || !request.allows(z.span()) {
                return Err(AllocError::OutOfMemory(order));
            }
            let pcp = z.pcp(cpu)?;
            z.alloc_run(pcp, &mut request, clearing).map(|pfn| (z, pfn))
        })
    }

    /// An unmovable block of `2^order` frames under `policy`:
    /// `self.alloc_raw(cpu, AllocRequest::order(order).policy(policy))`.
    ///
    /// # Errors
    /// As [`NodeSet::alloc_raw`].
    #[inline]
    pub fn alloc_pages(
        &self,
        cpu: usize,
        order: Order,
        policy: NodePolicy,
    ) -> Result<Pfn, AllocError> {
        self.alloc_raw(cpu, AllocRequest::order(order).policy(policy))
    }

    /// A movable block with `key` under `policy`:
    /// `self.alloc_raw(cpu, AllocRequest::order(order).movable(key).policy(policy))`.
    ///
    /// # Errors
    /// As [`NodeSet::alloc_raw`].
    #[inline]
    pub fn alloc_movable(
        &self,
        cpu: usize,
        order: Order,
        key: u64,
        policy: NodePolicy,
    ) -> Result<Pfn, AllocError> {
        self.alloc_raw(cpu, AllocRequest::order(order).movable(key).policy(policy))
    }

    /// Frees a block to the zone that spans it ([`Zone::free_pages`]).
    ///
    /// # Errors
    /// [`FreeError::OutOfZone`] when no zone spans `pfn`; else as [`Zone::free_pages`].
    ///
    /// # Safety
    /// As [`Zone::free_pages`].
    #[allow(unsafe_code)]
    #[inline]
    pub unsafe fn free_pages(&self, cpu: usize, pfn: Pfn, order: Order) -> Result<(), FreeError> {
        let zone = self.zone_at(pfn)?;
        // SAFETY: the caller's promise, passed on.
        unsafe { zone.free_pages(cpu, pfn, order) }
    }

    /// `node`'s memory now: the sum of its zones' ([`Zone::stats`]).
    ///
    /// # Errors
    /// [`MapError::BadNode`].
    pub fn node_stats(&self, node: NodeId) -> Result<MemoryStats, MapError> {
        self.topology.check(node)?;
        Ok(self.zones_of(node).map(Zone::stats).sum())
    }

    /// Background zeroing of `node`'s zones ([`Zone::zero_some`]), at most `budget` frames in
    /// all, zone after zone: for an idle CPU of that node. Returns the frames cleared.
    ///
    /// # Errors
    /// [`AllocError::BadNode`]; as [`Zone::zero_some`].
    pub fn zero_some<M: FrameMemory>(
        &self,
        node: NodeId,
        budget: u64,
        clearer: &FrameClearer<M>,
        resched: &mut impl Resched,
    ) -> Result<u64, AllocError> {
        self.topology.check(node)?;
        let mut cleared = 0;
        for z in self.zones_of(node) {
            cleared += z.zero_some(budget - cleared, clearer, resched)?;
            if cleared >= budget {
                break;
            }
        }
        Ok(cleared)
    }

    /// Registers free page reporting on every zone of the set (one device reports all of a
    /// guest's memory): all of them or, on error, none.
    ///
    /// # Errors
    /// As [`Zone::register_page_reporting`], for the first zone that refuses.
    pub fn register_page_reporting(
        &self,
        reporting: crate::report_sink::PageReporting,
    ) -> Result<(), crate::error::report::ReportError> {
        for (done, z) in self.zones().enumerate() {
            if let Err(e) = z.register_page_reporting(reporting) {
                for z in self.zones().take(done) {
                    z.unregister_page_reporting();
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Free page reporting over every zone of the set ([`Zone::report_free_pages`]), zone
    /// after zone, until `budget` frames are reported. Returns the frames reported.
    ///
    /// # Errors
    /// As [`Zone::report_free_pages`] (the zones before the one that failed stay reported).
    pub fn report_free_pages(
        &self,
        budget: u64,
        sink: &mut impl crate::report_sink::ReportSink,
    ) -> Result<u64, crate::error::report::ReportError> {
        let mut reported = 0;
        for z in self.zones() {
            if reported >= budget {
                break;
            }
            reported += z.report_free_pages(budget - reported, sink)?;
        }
        Ok(reported)
    }

    /// Compacts `node`'s zones ([`Zone::compact`]) until one has a free block of `order`.
    /// Returns what they did together.
    ///
    /// # Errors
    /// [`ContigError::BadNode`]; as [`Zone::compact`].
    pub fn compact(
        &self,
        node: NodeId,
        cpu: usize,
        order: Order,
        migrate: &mut impl Migrate,
    ) -> Result<CompactStats, ContigError> {
        self.topology.check(node)?;
        let mut all = CompactStats::default();
        for z in self.zones_of(node) {
            all += z.compact(cpu, order, migrate)?;
            if all.success {
                break;
            }
        }
        Ok(all)
    }

    /// Reserves `nr` frames for CMA on `node` ([`Zone::reserve_cma`], Linux's
    /// `hugetlb_cma=` reserves one area per node): in the first of the node's zones, in the
    /// order the set was given them, that can. Runs [`from_cma`](AllocRequest::from_cma)
    /// the area come from that zone.
    ///
    /// # Errors
    /// [`AllocError::BadNode`]; as [`Zone::reserve_cma`] (the last zone's error).
    pub fn reserve_cma(
        &self,
        node: NodeId,
        cpu: usize,
        nr: u64,
        align: Order,
        migrate: &mut impl Migrate,
    ) -> Result<CmaArea, AllocError> {
        self.topology.check(node)?;
        let mut last = AllocError::OutOfMemory(Order::covering(nr).unwrap_or(Order::ZERO));
        for z in self.zones_of(node) {
            match z.reserve_cma(cpu, nr, align, migrate) {
                Ok(area) => return Ok(area),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Proactive compaction of `node`'s zones ([`Zone::compact_some`]), at most `budget`
    /// frames moved in all. Returns what they did together.
    ///
    /// # Errors
    /// [`ContigError::BadNode`]; as [`Zone::compact_some`].
    pub fn compact_some(
        &self,
        node: NodeId,
        cpu: usize,
        budget: u64,
        migrate: &mut impl Migrate,
    ) -> Result<CompactStats, ContigError> {
        self.topology.check(node)?;
        let mut all = CompactStats::default();
        for z in self.zones_of(node) {
            all += z.compact_some(cpu, budget - all.moved_pages, migrate)?;
            if all.moved_pages >= budget {
                break;
            }
        }
        Ok(all)
    }

    /// Initializes up to `budget` deferred frames of `node`'s zones
    /// ([`Zone::init_deferred`]), for the node's own CPUs at boot. Returns how many.
    ///
    /// # Errors
    /// [`MapError::BadNode`].
    pub fn init_deferred(&self, node: NodeId, budget: u64) -> Result<u64, MapError> {
        self.topology.check(node)?;
        let mut done = 0;
        for z in self.zones_of(node) {
            if done >= budget {
                break;
            }
            done += z.init_deferred(budget - done);
        }
        Ok(done)
    }

    /// Adds the reserved frames `[pfn, pfn + nr)` to `node` as usable memory (memory
    /// hot-add: ACPI, virtio-mem), split over the node's zones that span them
    /// ([`Zone::add_memory`] for each piece). All or nothing.
    ///
    /// # Errors
    /// [`MapError::BadNode`]; [`MapError::NotInNode`] for the first frame no zone of
    /// `node` spans; [`MapError::ZeroPages`], [`MapError::Overflow`]; as
    /// [`Zone::add_memory`] for any piece. Nothing is added then.
    pub fn add_memory(&self, node: NodeId, pfn: Pfn, nr: u64) -> Result<(), MapError> {
        self.add_memory_as(node, pfn, nr, false)
    }

    /// [`NodeSet::add_memory`] for memory the embedder knows reads zero
    /// ([`Zone::add_zeroed_memory`]).
    ///
    /// # Errors
    /// As [`NodeSet::add_memory`].
    pub fn add_zeroed_memory(&self, node: NodeId, pfn: Pfn, nr: u64) -> Result<(), MapError> {
        self.add_memory_as(node, pfn, nr, true)
    }

    fn add_memory_as(&self, node: NodeId, pfn: Pfn, nr: u64, zeroed: bool) -> Result<(), MapError> {
        self.topology.check(node)?;
        if nr == 0 {
            return Err(MapError::ZeroPages);
        }
        let end = pfn.checked_add(nr).ok_or(MapError::Overflow)?.0;
        let _hotplug = self.hotplug.lock();
        // Every piece checked before any is added.
        for (z, s, n) in self.pieces(node, pfn.0, end)? {
            z.addable(Pfn(s), n)?;
        }
        for (z, s, n) in self.pieces(node, pfn.0, end)? {
            z.add_memory_as(Pfn(s), n, zeroed)?;
        }
        Ok(())
    }

    /// `[start, end)` cut at the zones of `node` that span it: `(zone, first frame,
    /// frames)`, in frame order.
    fn pieces(
        &self,
        node: NodeId,
        start: u64,
        end: u64,
    ) -> Result<impl Iterator<Item = Piece<'_, F, P, R>> + '_, MapError> {
        let mut at = start;
        while at < end {
            let z = self.zone_of_node(node, at)?;
            at = end_of(z).min(end);
        }
        let mut at = start;
        Ok(core::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let z = self.zone_of_node(node, at).ok()?;
            let piece_end = end_of(z).min(end);
            let piece = (z, at, piece_end - at);
            at = piece_end;
            Some(piece)
        }))
    }

    fn zone_of_node(&self, node: NodeId, pfn: u64) -> Result<&Zone<F, P, R>, MapError> {
        self.zones_of(node)
            .find(|z| z.span().contains(Pfn(pfn)))
            .ok_or(MapError::NotInNode {
                pfn: Pfn(pfn),
                node: u32::from(node.0),
            })
    }

    /// Takes `[pfn, pfn + nr)` offline ([`Zone::offline_range`]): the range must lie in one
    /// zone (as Linux's `offline_pages` requires). Returns the frames migrated.
    ///
    /// # Errors
    /// [`ContigError::OutOfZone`] when no zone spans `pfn`; [`ContigError::NotInNode`] for the
    /// first frame past that zone; as [`Zone::offline_range`]. Nothing is offlined then.
    pub fn offline_range(
        &self,
        cpu: usize,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<u64, ContigError> {
        let zone = self.zone_at(pfn)?;
        let end = pfn.checked_add(nr).ok_or(ContigError::Overflow)?.0;
        let zone_end = end_of(zone);
        if end > zone_end {
            return Err(ContigError::NotInNode {
                pfn: Pfn(zone_end),
                node: u32::from(zone.node().0),
            });
        }
        let _hotplug = self.hotplug.lock();
        zone.offline_range(cpu, pfn, nr, migrate)
    }

    /// Brings `[pfn, pfn + nr)` back online after [`NodeSet::offline_range`], into the node
    /// of the zone spanning `pfn` (any of that node's zones spanning the rest). Its frames
    /// are not known zero unless `known_zero` (the embedder cleared them, or a hypervisor
    /// gave them back zeroed).
    ///
    /// # Errors
    /// [`MapError::OutOfZone`] when no zone spans `pfn`; as [`NodeSet::add_memory`].
    pub fn online_range(&self, pfn: Pfn, nr: u64, known_zero: bool) -> Result<(), MapError> {
        let node = self.zone_of(pfn)?.node();
        self.add_memory_as(node, pfn, nr, known_zero)
    }
}

/// A piece of a range in one zone: the zone, its first frame, its frames.
type Piece<'a, F, P, R> = (&'a Zone<F, P, R>, u64, u64);

/// The frame after the last a zone spans (its configuration was checked: no overflow).
fn end_of<F: FrameStorage, P: PerCpuSet<R>, R: RawMutex>(z: &Zone<F, P, R>) -> u64 {
    let span = z.span();
    span.start.0 + span.pages
}

impl<Z, F, P, R> core::fmt::Debug for NodeSet<Z, F, P, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NodeSet")
            .field("topology", &self.topology)
            .finish_non_exhaustive()
    }
}
