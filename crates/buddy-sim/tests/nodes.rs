//! NUMA nodes: the fallback order, bound and preferred allocations, per-node counts, memory
//! hot-add across zones, offline and online, against `testing::NodeModel` over random
//! topologies and memory maps, and the rules one by one.
//!
//! The frees are `unsafe`: each frees what the test holds, from zones no clearer or
//! migration writes.

mod common;
use common::{TestNodeSet, TestZone};

use buddy_sim::{AllocError, AllocRequest, CmaArea, ContigError, MapError, NoSuchCpu};
use buddy_sim::{
    ConfigError, FrameState, Migration, NodeId, NodePolicy, Order, Pfn, Topology, ZoneConfig,
};

fn o(order: u8) -> Order {
    Order::new(order).unwrap()
}

/// [`zone_on`] node 0.
fn zone(start: u64, nr: u64, cpus: usize, usable: &[(u64, u64)]) -> TestZone {
    zone_on(0, start, nr, cpus, usable)
}

/// A zone on `node` of `nr` frames from `start` (MAX_ORDER 5, pageblocks of 16 frames) for
/// `cpus` CPUs, with the ranges `usable` (offsets, lengths) added.
fn zone_on(node: u8, start: u64, nr: u64, cpus: usize, usable: &[(u64, u64)]) -> TestZone {
    let cfg = ZoneConfig {
        max_order: o(5),
        pageblock_order: o(4),
        section_pages: 64,
        cpus,
        pcp_high: 8,
        pcp_batch: 2,
        ..ZoneConfig::new(Pfn(start), nr).with_node(NodeId(node))
    };
    let z = common::empty_zone(cfg).unwrap();
    for &(off, len) in usable {
        z.add_memory(Pfn(start + off), len).unwrap();
    }
    z
}

/// Nodes with the zones `(node, frames)` laid out one after another from frame 0x1000, all
/// of each usable.
fn node_set(topology: Topology, zones: &[(u8, u64)]) -> TestNodeSet {
    let cpus = topology.cpus();
    let mut at = 0x1000;
    let mut built = Vec::new();
    for &(node, nr) in zones {
        built.push(zone_on(node, at, nr, cpus, &[(0, nr)]));
        at += nr;
    }
    common::node_set(topology, built).unwrap()
}

fn node_of(set: &TestNodeSet, pfn: Pfn) -> NodeId {
    set.zone_of(pfn).unwrap().node()
}

/// Three nodes where node 0 is nearer to node 2 (15) than to node 1 (30).
fn three_nodes() -> Topology {
    #[rustfmt::skip]
    let slit = [
        10, 30, 15,
        30, 10, 20,
        15, 20, 10,
    ];
    Topology::new(3, &slit, &[NodeId(0), NodeId(1), NodeId(2)]).unwrap()
}

#[test]
fn the_fallback_order_is_nearest_first() {
    let t = three_nodes();
    let order = |n| {
        t.fallback(NodeId(n))
            .unwrap()
            .map(|n| n.0)
            .collect::<Vec<_>>()
    };
    assert_eq!(order(0), [0, 2, 1]);
    assert_eq!(order(1), [1, 2, 0]);
    assert_eq!(order(2), [2, 0, 1]);
    assert_eq!(t.distance(NodeId(0), NodeId(2)), Ok(15));
    assert_eq!(t.node_of_cpu(1), Ok(NodeId(1)));
    assert_eq!(t.node_of_cpu(3), Err(NoSuchCpu(3)));
    // Ties go to the lower node number.
    let u = Topology::uniform(4, &[NodeId(3)]).unwrap();
    let order = u
        .fallback(NodeId(2))
        .unwrap()
        .map(|n| n.0)
        .collect::<Vec<_>>();
    assert_eq!(order, [2, 0, 1, 3]);
}

#[test]
fn a_local_allocation_stays_home_until_the_node_is_full_then_goes_nearest_first() {
    let set = node_set(three_nodes(), &[(0, 64), (1, 64), (2, 64)]);
    let mut got = Vec::new();
    for _ in 0..64 {
        let p = set.alloc_pages(0, Order::ZERO, NodePolicy::Local).unwrap();
        assert_eq!(node_of(&set, p), NodeId(0));
        got.push(p);
    }
    // Node 0 full: node 2 (15) before node 1 (30).
    for _ in 0..64 {
        let p = set.alloc_pages(0, Order::ZERO, NodePolicy::Local).unwrap();
        assert_eq!(node_of(&set, p), NodeId(2));
        got.push(p);
    }
    let p = set.alloc_pages(0, Order::ZERO, NodePolicy::Local).unwrap();
    assert_eq!(node_of(&set, p), NodeId(1));
    got.push(p);
    // CPU 1 is on node 1: home first.
    let q = set.alloc_pages(1, Order::ZERO, NodePolicy::Local).unwrap();
    assert_eq!(node_of(&set, q), NodeId(1));
    got.push(q);
    assert_eq!(set.node_stats(NodeId(0)).unwrap().free, 0);
    assert_eq!(set.node_stats(NodeId(1)).unwrap().free, 62);
    for p in got {
        // SAFETY: the test's pages; nothing writes a frame.
        unsafe { set.free_pages(0, p, Order::ZERO) }.unwrap();
    }
    for n in 0..3 {
        let s = set.node_stats(NodeId(n)).unwrap();
        assert_eq!((s.present, s.free), (64, 64));
    }
}

/// Zones given out of node order, two on node 0: an allocation walks its node's zones in
/// the order the set was given them, then the next node's (Linux's zonelist); a bound one
/// its node's zones alone.
#[test]
fn the_zonelist_takes_a_nodes_zones_in_the_order_given_then_the_next_nodes() {
    let set = node_set(three_nodes(), &[(1, 16), (0, 16), (2, 16), (0, 16)]);
    let zone_index = |p: Pfn| ((p.0 - 0x1000) / 16) as usize;
    let mut got = Vec::new();
    let mut take = |cpu, policy, n| {
        let zones: Vec<usize> = (0..n)
            .map(|_| {
                let p = set.alloc_pages(cpu, Order::ZERO, policy).unwrap();
                got.push(p);
                zone_index(p)
            })
            .collect();
        zones
    };
    // Node 0's zones (indices 1 then 3), then node 2's (2), then node 1's (0).
    assert_eq!(take(0, NodePolicy::Local, 16), [1; 16]);
    assert_eq!(take(0, NodePolicy::Bind(NodeId(0)), 16), [3; 16]);
    assert_eq!(take(0, NodePolicy::Local, 16), [2; 16]);
    assert_eq!(take(0, NodePolicy::Local, 1), [0]);
    assert_eq!(
        set.alloc_pages(0, Order::ZERO, NodePolicy::Bind(NodeId(0))),
        Err(AllocError::OutOfMemory(Order::ZERO))
    );
    // CPU 1's node first: node 1, then node 2 (20) before node 0 (30).
    assert_eq!(take(1, NodePolicy::Local, 15), [0; 15]);
    assert_eq!(
        set.alloc_pages(1, Order::ZERO, NodePolicy::Local),
        Err(AllocError::OutOfMemory(Order::ZERO))
    );
    for p in got {
        // SAFETY: the test's pages; nothing writes a frame.
        unsafe { set.free_pages(0, p, Order::ZERO) }.unwrap();
    }
    for n in 0..3 {
        let s = set.node_stats(NodeId(n)).unwrap();
        assert_eq!(s.free, s.present);
    }
}

#[test]
fn a_bound_allocation_never_leaves_its_node_and_a_preferred_one_does() {
    let set = node_set(three_nodes(), &[(0, 32), (1, 32), (2, 32)]);
    let block = set
        .alloc_pages(0, o(5), NodePolicy::Bind(NodeId(1)))
        .unwrap();
    assert_eq!(node_of(&set, block), NodeId(1));
    assert_eq!(
        set.alloc_pages(0, Order::ZERO, NodePolicy::Bind(NodeId(1))),
        Err(AllocError::OutOfMemory(Order::ZERO))
    );
    // Preferred node 1 is full: its nearest, node 2.
    let p = set
        .alloc_movable(0, Order::ZERO, 7, NodePolicy::Preferred(NodeId(1)))
        .unwrap();
    assert_eq!(node_of(&set, p), NodeId(2));
    assert_eq!(
        set.alloc_pages(0, Order::ZERO, NodePolicy::Bind(NodeId(3))),
        Err(AllocError::BadNode(3))
    );
    assert_eq!(
        set.alloc_pages(3, Order::ZERO, NodePolicy::Local),
        Err(AllocError::BadCpu(3))
    );
    assert_eq!(
        set.alloc_pages(0, o(6), NodePolicy::Local),
        Err(AllocError::OrderTooLarge { order: 6, max: 5 })
    );
}

#[test]
fn hot_add_spans_a_nodes_zones_all_or_nothing() {
    let t = Topology::uniform(2, &[NodeId(0), NodeId(1)]).unwrap();
    // Node 1 has two adjacent zones (sections of 64 frames); none of its memory is usable.
    let zones = vec![
        zone(0x1000, 64, 2, &[(0, 64)]),
        zone_on(1, 0x1040, 64, 2, &[]),
        zone_on(1, 0x1080, 64, 2, &[]),
    ];
    let set = common::node_set(t, zones).unwrap();
    assert_eq!(set.node_stats(NodeId(1)).unwrap().present, 0);
    // Into node 0's zone: not node 1's.
    assert_eq!(
        set.add_memory(NodeId(1), Pfn(0x1030), 32),
        Err(MapError::NotInNode {
            pfn: Pfn(0x1030),
            node: 1
        })
    );
    // Past node 1's last zone: refused, nothing added.
    assert_eq!(
        set.add_memory(NodeId(1), Pfn(0x1090), 64),
        Err(MapError::NotInNode {
            pfn: Pfn(0x10c0),
            node: 1
        })
    );
    assert_eq!(set.node_stats(NodeId(1)).unwrap().present, 0);
    set.add_memory(NodeId(1), Pfn(0x1050), 64).unwrap();
    assert_eq!(set.node_stats(NodeId(1)).unwrap().present, 64);
    // Overlapping what is there: refused whole (the first piece would have been new).
    assert_eq!(
        set.add_memory(NodeId(1), Pfn(0x1040), 32),
        Err(MapError::AlreadyAdded(Pfn(0x1050)))
    );
    assert_eq!(set.node_stats(NodeId(1)).unwrap().present, 64);
    set.add_zeroed_memory(NodeId(1), Pfn(0x1040), 16).unwrap();
    let s = set.node_stats(NodeId(1)).unwrap();
    assert_eq!((s.present, s.zeroed), (80, 16));
    for z in set.zones() {
        z.check().unwrap();
    }
}

#[test]
fn offline_moves_movable_data_refuses_what_cannot_move_and_online_brings_it_back() {
    let t = Topology::uniform(2, &[NodeId(0), NodeId(1)]).unwrap();
    let set = node_set(t, &[(0, 128), (1, 128)]);
    let node1 = Pfn(0x1080);
    let mut at: Vec<Pfn> = (0..16)
        .map(|k| {
            set.alloc_movable(1, Order::ZERO, k, NodePolicy::Local)
                .unwrap()
        })
        .collect();
    assert!(at.iter().all(|&p| node_of(&set, p) == NodeId(1)));
    let lowest = *at.iter().min().unwrap();
    let range = Pfn(lowest.0 & !15);
    // Refused moves: nothing changes.
    let mut refuse = |_: &Migration| false;
    assert_eq!(
        set.offline_range(1, range, 32, &mut refuse),
        Err(ContigError::Busy(lowest))
    );
    assert_eq!(set.node_stats(NodeId(1)).unwrap().present, 128);
    let mut follow = |m: &Migration| {
        assert_eq!(at[m.key as usize], m.from);
        at[m.key as usize] = m.to;
        true
    };
    let moved = set.offline_range(1, range, 32, &mut follow).unwrap();
    assert_eq!(moved, 16);
    assert!(at.iter().all(|p| !(range.0..range.0 + 32).contains(&p.0)));
    assert!(at.iter().all(|&p| node_of(&set, p) == NodeId(1)));
    assert_eq!(
        set.zone_of(range).unwrap().frame(range).unwrap().state,
        FrameState::Reserved
    );
    let s = set.node_stats(NodeId(1)).unwrap();
    assert_eq!((s.present, s.free), (96, 80));
    // A range over two zones, and an unmovable page in the way.
    assert_eq!(
        set.offline_range(0, Pfn(0x1070), 32, &mut refuse),
        Err(ContigError::NotInNode {
            pfn: node1,
            node: 0
        })
    );
    let pinned = set.alloc_pages(0, Order::ZERO, NodePolicy::Local).unwrap();
    assert_eq!(
        set.offline_range(0, Pfn(pinned.0 & !15), 16, &mut refuse),
        Err(ContigError::Busy(pinned))
    );
    set.online_range(range, 32, false).unwrap();
    let s = set.node_stats(NodeId(1)).unwrap();
    assert_eq!((s.present, s.free, s.zeroed), (128, 112, 0));
    for p in at {
        // SAFETY: the test's pages; nothing writes a frame.
        unsafe { set.free_pages(1, p, Order::ZERO) }.unwrap();
    }
    // SAFETY: as above.
    unsafe { set.free_pages(0, pinned, Order::ZERO) }.unwrap();
    for z in set.zones() {
        z.drain_all();
        z.check().unwrap();
        assert_eq!(
            z.buddy_blocks_per_order()[5],
            4,
            "the zone is not whole again"
        );
    }
}

#[test]
fn bad_topologies_and_node_sets_are_refused() {
    let ok = [10, 20, 20, 10];
    assert!(Topology::new(2, &ok, &[NodeId(0)]).is_ok());
    assert!(matches!(
        Topology::new(0, &[], &[]),
        Err(ConfigError::NodeCount(0))
    ));
    assert!(matches!(
        Topology::new(2, &ok[..3], &[]),
        Err(ConfigError::DistanceTable { need: 4, got: 3 })
    ));
    assert!(matches!(
        Topology::new(2, &[10, 20, 20, 11], &[]),
        Err(ConfigError::Distance {
            from: 1,
            to: 1,
            distance: 11
        })
    ));
    assert!(matches!(
        Topology::new(2, &[10, 9, 20, 10], &[]),
        Err(ConfigError::Distance {
            from: 0,
            to: 1,
            distance: 9
        })
    ));
    assert_eq!(
        Topology::new(2, &ok, &[NodeId(2)]),
        Err(ConfigError::CpuNode { cpu: 0, node: 2 })
    );
    assert!(matches!(
        Topology::new(33, &[10; 33 * 33], &[]),
        Err(ConfigError::NodeCount(33))
    ));
    let t = Topology::new(2, &ok, &[NodeId(0), NodeId(1)]).unwrap();
    // Overlapping zones (given in either order), another CPU count, a node past the
    // topology.
    let two = || vec![zone(0x1000, 64, 2, &[]), zone_on(1, 0x1020, 64, 2, &[])];
    assert_eq!(
        common::node_set(t.clone(), two()).err(),
        Some(ConfigError::ZonesOverlap {
            first: 0,
            second: 1
        })
    );
    let mut swapped = two();
    swapped.reverse();
    assert_eq!(
        common::node_set(t.clone(), swapped).err(),
        Some(ConfigError::ZonesOverlap {
            first: 0,
            second: 1
        })
    );
    assert_eq!(
        common::node_set(t.clone(), vec![zone(0x1000, 64, 1, &[])]).err(),
        Some(ConfigError::ZoneCpus {
            zone: 0,
            cpus: 1,
            topology: 2
        })
    );
    assert_eq!(
        common::node_set(t, vec![zone_on(5, 0x1000, 64, 2, &[])]).err(),
        Some(ConfigError::ZoneNode { zone: 0, node: 5 })
    );
}

/// The node set against its model over random operations (`testing::NodeModel`, which
/// needs the `alloc` and `testing` features).
#[cfg(all(feature = "alloc", feature = "testing"))]
mod model {
    use super::*;
    use buddy_sim::testing::{NodeModel, NodeOp};
    use proptest::prelude::*;

    /// A random topology: 1 to 4 nodes, distances 11 to 60 (not always symmetric), 1 to 3 CPUs.
    fn topology() -> impl Strategy<Value = Topology> {
        (1usize..=4).prop_flat_map(|nodes| {
            (
                proptest::collection::vec(11u8..=60, nodes * nodes),
                proptest::collection::vec(0..nodes as u8, 1..=3),
            )
                .prop_map(move |(mut d, cpus)| {
                    for a in 0..nodes {
                        d[a * nodes + a] = 10;
                    }
                    let cpus: Vec<NodeId> = cpus.into_iter().map(NodeId).collect();
                    Topology::new(nodes, &d, &cpus).unwrap()
                })
        })
    }

    /// A memory map for `nodes` nodes: each node one or two zones of 64 to 256 frames, in a
    /// random node order, each with up to two holes of whole pageblocks.
    /// Zones as `(node, frames, usable ranges as (offset, frames))`.
    type MemoryMap = Vec<(u8, u64, Vec<(u64, u64)>)>;

    fn memory_map(nodes: usize) -> impl Strategy<Value = MemoryMap> {
        let zone = |node: u8| {
            (
                4u64..=16,
                proptest::collection::vec((0u64..16, 1u64..4), 0..=2),
            )
                .prop_map(move |(blocks, holes)| {
                    let nr = blocks * 16;
                    // Usable: the zone minus the holes (pageblock-aligned), as ranges.
                    let mut usable = vec![true; blocks as usize];
                    for (at, len) in holes {
                        for b in at..(at + len).min(blocks) {
                            usable[b as usize] = false;
                        }
                    }
                    let mut ranges = Vec::new();
                    let mut b = 0;
                    while b < blocks as usize {
                        if usable[b] {
                            let s = b;
                            while b < blocks as usize && usable[b] {
                                b += 1;
                            }
                            ranges.push((s as u64 * 16, (b - s) as u64 * 16));
                        } else {
                            b += 1;
                        }
                    }
                    (node, nr, ranges)
                })
        };
        let per_node: Vec<_> = (0..nodes as u8)
            .map(|n| proptest::collection::vec(zone(n), 1..=2))
            .collect();
        (per_node, any::<prop::sample::Index>()).prop_map(|(zones, rot)| {
            let mut all: Vec<_> = zones.into_iter().flatten().collect();
            let len = all.len();
            all.rotate_left(rot.index(len));
            all
        })
    }

    fn node_op() -> impl Strategy<Value = NodeOp> {
        prop_oneof![
            4 => (0usize..4, 0u8..7, 0u8..3, 0u8..5, any::<bool>()).prop_map(
                |(cpu, order, policy, node, movable)| NodeOp::Alloc { cpu, order, policy, node, movable }
            ),
            3 => (0usize..3, 0usize..64).prop_map(|(cpu, slot)| NodeOp::Free { cpu, slot }),
            1 => (0usize..3, 0usize..8, 0u64..256, 1u64..64, any::<bool>()).prop_map(
                |(cpu, zone, offset, len, refuse)| NodeOp::Offline { cpu, zone, offset, len, refuse }
            ),
            1 => (0usize..8, any::<bool>()).prop_map(|(slot, zeroed)| NodeOp::Online { slot, zeroed }),
        ]
    }

    proptest! {
        #![proptest_config(common::proptest_config(2))]

        /// Random topologies and memory maps, low in the pfn space or at its top: every
        /// allocation lands on the node the fallback order says, offline and online answer as
        /// the model says, and every node's counts match after every step.
        #[test]
        fn nodes_follow_the_model(
            (topology, map) in topology().prop_flat_map(|t| {
                let nodes = t.nodes();
                (Just(t), memory_map(nodes))
            }),
            ops in proptest::collection::vec(node_op(), 1..80),
            at_top in any::<bool>(),
        ) {
            let cpus = topology.cpus();
            // From frame 0x1000, or ending at the top of the pfn space.
            let span: u64 = map.iter().map(|(_, nr, _)| nr + 16).sum();
            let mut at = if at_top { u64::MAX - span } else { 0x1000 };
            let mut zones = Vec::new();
            for (node, nr, usable) in &map {
                zones.push(zone_on(*node, at, *nr, cpus, usable));
                at += nr + 16;
            }
            let set = common::node_set(topology, zones).unwrap();
            let mut model = NodeModel::new(set);
            for op in ops {
                let step = model.apply(op);
                prop_assert!(step.is_ok(), "{op:?}: {step:?}");
            }
            let end = model.finish();
            prop_assert!(end.is_ok(), "{end:?}");
        }
    }
}

/// `movable_node`: each node's memory split into a normal zone and a movable-only one
/// (`ZONE_MOVABLE`). Unmovable and reclaimable blocks never land in a movable zone, even
/// when that is all the free memory left; movable blocks use both; the movable zones stay
/// movable throughout, and a gigantic run (aligned above MAX_ORDER) is taken from one with
/// the movable blocks in its way migrated out.
#[test]
fn movable_zones_take_movable_blocks_only() {
    let t = Topology::uniform(2, &[NodeId(0), NodeId(1)]).unwrap();
    let mut built = Vec::new();
    let mut at = 0x1000;
    for node in 0..2u8 {
        for (movable, nr) in [(false, 64), (true, 128)] {
            let z = zone_on(node, at, nr, 2, &[(0, nr)]);
            let cfg = if movable {
                z.config().movable_only()
            } else {
                *z.config()
            };
            built.push(common::zone(cfg).unwrap());
            at += nr;
        }
    }
    let set = common::node_set(t, built).unwrap();
    let movable_zone = |pfn: Pfn| set.zone_of(pfn).unwrap().config().movable_only;
    // Unmovable pages fill both normal zones (128 frames), then fail: the movable zones'
    // 256 free frames are not theirs.
    let mut unmovable = Vec::new();
    while let Ok(pfn) = set.alloc_pages(0, Order::ZERO, NodePolicy::Local) {
        assert!(
            !movable_zone(pfn),
            "an unmovable page in a movable zone at {pfn}"
        );
        unmovable.push(pfn);
    }
    assert_eq!(unmovable.len(), 128);
    assert_eq!(
        set.alloc_raw(1, AllocRequest::page().reclaimable()),
        Err(AllocError::OutOfMemory(Order::ZERO))
    );
    // Movable blocks still find the movable zones: node 0's, nearest to CPU 0, filled; then
    // every other block freed, so that each 64-frame candidate is half full.
    let mut held = Vec::new();
    for key in 1..=32 {
        let pfn = set
            .alloc_raw(0, AllocRequest::order(o(2)).movable(key))
            .unwrap();
        assert!(movable_zone(pfn) && node_of(&set, pfn) == NodeId(0));
        held.push(pfn);
    }
    held.sort_unstable();
    for pfn in held.iter().step_by(2) {
        // SAFETY: the test's block, never used.
        unsafe { set.free_pages(0, *pfn, o(2)) }.unwrap();
    }
    // A 64-frame run aligned to 64 frames (above MAX_ORDER 5) in node 0's movable zone:
    // the movable blocks in its way move into the other half's holes.
    let mut moved = 0;
    let mut mover = |_: &Migration| {
        moved += 1;
        true
    };
    let run = set
        .alloc_raw(
            0,
            AllocRequest::frames(64)
                .aligned(o(6))
                .contiguous(&mut mover),
        )
        .unwrap();
    assert!(movable_zone(run) && node_of(&set, run) == NodeId(0));
    assert!(
        run.0.is_multiple_of(64) && moved > 0,
        "{run} after {moved} moves"
    );
    for z in set.zones() {
        z.check().unwrap();
        if z.config().movable_only {
            let first = z.config().start.0;
            for pb in (first..first + 128).step_by(16) {
                assert_eq!(
                    z.pageblock_type(Pfn(pb)).unwrap().0,
                    buddy_sim::MigrateType::Movable
                );
            }
        }
    }
}

/// Linux's `hugetlb_cma=`: one CMA reservation per node, made at run time in the node's
/// zones; a gigantic run from each comes from that node's reservation (whatever the CPU
/// and its policy), with the movable blocks that borrowed it migrated out; unmovable blocks
/// never land in either.
#[test]
fn each_node_reserves_for_gigantic_pages_and_serves_them_from_its_reservation() {
    let t = Topology::uniform(2, &[NodeId(0), NodeId(1)]).unwrap();
    let set = node_set(t, &[(0, 128), (1, 128)]);
    let mut refuse = |_: &Migration| false;
    let areas: Vec<CmaArea> = (0..2u8)
        .map(|n| {
            let area = set
                .reserve_cma(NodeId(n), 0, 32, o(5), &mut refuse)
                .unwrap();
            assert_eq!(node_of(&set, area.base()), NodeId(n));
            assert!(area.base().0.is_multiple_of(32) && area.pages() == 32);
            area
        })
        .collect();
    assert_eq!(
        set.reserve_cma(NodeId(2), 0, 32, o(5), &mut refuse),
        Err(AllocError::BadNode(2))
    );
    assert_eq!(set.node_stats(NodeId(1)).unwrap().cma_reserved, 32);
    // Unmovable pages fill everything outside the reservations, then fail.
    let mut unmovable = 0;
    while let Ok(pfn) = set.alloc_pages(0, Order::ZERO, NodePolicy::Local) {
        assert!(areas.iter().all(|a| !a.contains(pfn, 1)), "{pfn}");
        unmovable += 1;
    }
    assert_eq!(unmovable, 256 - 64);
    // Movable blocks borrow the reservations.
    for key in 1..=16 {
        set.alloc_raw(0, AllocRequest::order(o(2)).movable(key))
            .unwrap();
    }
    // Room outside for the borrowers to go to: a pageblock of node 1 freed.
    let node1 = set.zone_of(Pfn(0x1080)).unwrap().config().start.0;
    let first_free = (node1..node1 + 128)
        .map(Pfn)
        .find(|&p| !areas[1].contains(p, 1))
        .unwrap();
    for p in first_free.0..first_free.0 + 32 {
        // SAFETY: the test's page (the unmovable fill took every frame outside the
        // reservations), never used.
        unsafe { set.free_pages(0, Pfn(p), Order::ZERO) }.unwrap();
    }
    let mut moved = 0;
    let mut mover = |_: &Migration| {
        moved += 1;
        true
    };
    // From CPU 0 (node 0) and a policy bound to node 0: the run still comes from node 1's
    // reservation, which the request names.
    let run = set
        .alloc_raw(
            0,
            AllocRequest::frames(32)
                .aligned(o(5))
                .contiguous(&mut mover)
                .from_cma(areas[1])
                .policy(NodePolicy::Bind(NodeId(0))),
        )
        .unwrap();
    assert_eq!(run, areas[1].base());
    assert!(moved > 0, "the borrowers of node 1's reservation moved out");
    for z in set.zones() {
        z.check().unwrap();
    }
}

/// A request limited to frames below a line (DMA32: `below(Pfn(1 << 20))` with 4 KiB
/// frames) takes only zones entirely below it, in the policy's order, the CPU's own node's
/// zone skipped when it lies above; once they are full it fails, taking nothing elsewhere.
#[test]
fn a_dma32_request_takes_only_zones_below_the_line() {
    const DMA32_END: Pfn = Pfn(1 << 20);
    // Node 0 (CPU 0's) above 4 GiB; node 1 with one zone below it and one above.
    let topology = Topology::new(2, &[10, 20, 20, 10], &[NodeId(0), NodeId(1)]).unwrap();
    let zones = vec![
        zone_on(0, 0x10_0000, 64, 2, &[(0, 64)]),
        zone_on(1, 0xf_0000, 64, 2, &[(0, 64)]),
        zone_on(1, 0x20_0000, 64, 2, &[(0, 64)]),
    ];
    let set = common::node_set(topology, zones).unwrap();
    let dma32 = || AllocRequest::page().below(DMA32_END);
    let mut got = Vec::new();
    for _ in 0..64 {
        let p = set.alloc_raw(0, dma32()).unwrap();
        assert!(p.0 < DMA32_END.0, "{p:?}");
        got.push(p);
    }
    // A block of order 3 and a run: the same rule. The failures change no zone.
    let before: Vec<_> = set.zones().map(common::Before::of).collect();
    assert!(matches!(
        set.alloc_raw(0, AllocRequest::order(o(3)).below(DMA32_END)),
        Err(AllocError::OutOfMemory(_))
    ));
    assert!(matches!(
        set.alloc_raw(0, AllocRequest::frames(3).below(DMA32_END)),
        Err(AllocError::OutOfMemory(_))
    ));
    for (zone, before) in set.zones().zip(&before) {
        before.assert_unchanged(zone);
    }
    // An unlimited request still goes home first.
    let home = set.alloc_raw(0, AllocRequest::page()).unwrap();
    assert_eq!(node_of(&set, home), NodeId(0));
    got.push(home);
    // A zone's own handle honours the limit too.
    let low = set.zone_of(Pfn(0xf_0000)).unwrap();
    let high = set.zone_of(Pfn(0x20_0000)).unwrap();
    assert!(matches!(
        high.cpu(0).unwrap().alloc_raw(dma32()),
        Err(AllocError::OutOfMemory(_))
    ));
    assert!(matches!(
        low.cpu(0).unwrap().alloc_raw(dma32()),
        Err(AllocError::OutOfMemory(_))
    ));
    for p in got {
        // SAFETY: the test's pages; nothing writes a frame.
        unsafe { set.free_pages(0, p, Order::ZERO) }.unwrap();
    }
    let p = low.cpu(1).unwrap().alloc_raw(dma32()).unwrap();
    assert!(p.0 < DMA32_END.0);
    // SAFETY: as above.
    unsafe { set.free_pages(1, p, Order::ZERO) }.unwrap();
    for zone in set.zones() {
        zone.check().unwrap();
    }
}
