//! [`NodeModel`]: a [`BoxedNodeSet`] driven beside a frame-by-frame model of what each node
//! holds, which says where every allocation must land (the fallback order computed again from
//! the distance table), what an offline must answer, and what each node's counts must be.

use alloc::vec::Vec;

use crate::boxed::BoxedNodeSet;
use crate::error::buddy::BuddyError;
use crate::frame::FrameState;
use crate::migrate::Migration;
use crate::migratetype::MigrateType;
use crate::testing::outcome::any;
use crate::types::NodePolicy;
use crate::types::{NodeId, Order};
use mm_types::Pfn;

/// One step for [`NodeModel`]. Indices (slots, zones, nodes) are taken modulo what exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeOp {
    /// Allocate (movable or unmovable) under a policy: 0 the CPU's node, 1 preferred, 2 bound
    /// (modulo 3), naming `node` for the last two.
    Alloc {
        /// CPU (may be out of range: an error).
        cpu: usize,
        /// Order (may exceed MAX_ORDER: an error).
        order: u8,
        /// Policy kind, modulo 3.
        policy: u8,
        /// Node for a preferred or bound policy (may be out of range: an error).
        node: u8,
        /// A movable allocation.
        movable: bool,
    },
    /// Free a recorded allocation.
    Free {
        /// CPU.
        cpu: usize,
        /// Allocation slot.
        slot: usize,
    },
    /// Offline `len` frames from `offset` into zone `zone`'s span (movable blocks move;
    /// the callback refuses when `refuse`).
    Offline {
        /// CPU.
        cpu: usize,
        /// Zone index.
        zone: usize,
        /// Offset from the zone's first frame.
        offset: u64,
        /// Frames.
        len: u64,
        /// The migrate callback refuses every move.
        refuse: bool,
    },
    /// Bring a recorded offlined range back online.
    Online {
        /// Offlined range slot.
        slot: usize,
        /// Declared zero.
        zeroed: bool,
    },
}

/// How [`NodeModel`] found the node set to disagree with the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeDivergence {
    /// The set answered other than the model says.
    Result {
        /// The operation.
        op: NodeOp,
        /// The set's answer.
        got: Result<(), BuddyError>,
        /// What the model expected.
        want: Result<(), BuddyError>,
    },
    /// An allocation landed on another node than the fallback order says.
    WrongNode {
        /// The frame handed out.
        pfn: Pfn,
        /// Its node.
        got: NodeId,
        /// The node the model expected.
        want: NodeId,
    },
    /// A frame handed out that is held already, offline, or not in any zone.
    BadFrame(Pfn),
    /// A zone failed its check.
    Corrupt(crate::zone::check::Corruption),
    /// A node's counts differ from the model's.
    Counts {
        /// The node.
        node: NodeId,
        /// What [`crate::NodeSet::node_stats`] said: present, free.
        got: (u64, u64),
        /// The model's present and free frames.
        want: (u64, u64),
    },
    /// A migration the callback was asked for names a block the model does not hold there.
    BadMigration(Migration),
    /// A failed offline left frames of the range offline or pageblocks isolated.
    NotUndone(Pfn),
    /// An operation failed and changed a zone beyond what its docs allow (an allocation
    /// that ran out of memory, an offline that moved nothing): the zone's index and the
    /// first difference from before the operation.
    ChangedOnError {
        /// The zone, in the set's order.
        zone: usize,
        /// The first difference.
        difference: crate::testing::snapshot::SnapshotDifference,
    },
}

/// An allocation the model holds: first frame, order, movable.
#[derive(Clone, Copy, Debug)]
struct Held {
    pfn: Pfn,
    order: Order,
    movable: bool,
}

/// Allocations and offlined ranges the model remembers.
const SLOTS: usize = 64;

/// A node set and its model: see the module docs. The set's zones hold no memory (no
/// clearer, and the migrate callback copies nothing): the model is frame numbers only.
pub struct NodeModel {
    /// The node set under test.
    pub set: BoxedNodeSet,
    held: Vec<Option<Held>>,
    offline: Vec<(Pfn, u64)>,
    /// Usable frames per node.
    present: Vec<u64>,
}

impl NodeModel {
    /// The model of `set`, whose zones are as built (nothing allocated yet, no deferred
    /// memory: every zone's `eager_pages` covers its ranges).
    #[must_use]
    pub fn new(set: BoxedNodeSet) -> Self {
        let nodes = set.topology().nodes();
        let mut present = alloc::vec![0; nodes];
        for z in set.zones() {
            present[usize::from(z.node().0)] += z.present_pages();
        }
        Self {
            set,
            held: Vec::new(),
            offline: Vec::new(),
            present,
        }
    }

    /// The model's own fallback order for `first`: by distance, then node number.
    fn fallback(&self, first: NodeId) -> Vec<NodeId> {
        let t = self.set.topology();
        let mut nodes: Vec<NodeId> = (0..t.nodes() as u8).map(NodeId).collect();
        nodes.sort_by_key(|&n| (t.distance(first, n).unwrap_or(u8::MAX), n));
        nodes
    }

    /// Whether `node` has a free block of `order` or above, every zone drained and merged.
    fn has_block(&self, node: NodeId, order: Order) -> bool {
        self.set.zones().filter(|z| z.node() == node).any(|z| {
            z.buddy_blocks_per_order()
                .iter()
                .enumerate()
                .any(|(o, &c)| o >= usize::from(order.get()) && c > 0)
        })
    }

    /// Every zone's [`Snapshot`](crate::testing::snapshot::Snapshot), in the set's order.
    fn snapshots(&self) -> Vec<crate::testing::snapshot::Snapshot> {
        self.set
            .zones()
            .map(crate::testing::snapshot::Snapshot::of)
            .collect()
    }

    /// The first zone that differs from `before`, after a failed operation.
    fn unchanged(
        &self,
        before: &[crate::testing::snapshot::Snapshot],
    ) -> Result<(), NodeDivergence> {
        for (zone, (was, z)) in before.iter().zip(self.set.zones()).enumerate() {
            if let Some(difference) = was.difference(&crate::testing::snapshot::Snapshot::of(z)) {
                return Err(NodeDivergence::ChangedOnError { zone, difference });
            }
        }
        Ok(())
    }

    fn held_at(&self, pfn: Pfn) -> Option<usize> {
        self.held
            .iter()
            .position(|h| h.is_some_and(|h| (h.pfn.0..h.pfn.0 + h.order.pages()).contains(&pfn.0)))
    }

    /// Applies one operation to the set and the model, and checks every zone and every
    /// node's counts.
    ///
    /// # Errors
    /// The first [`NodeDivergence`] found.
    pub fn apply(&mut self, op: NodeOp) -> Result<(), NodeDivergence> {
        match op {
            NodeOp::Alloc {
                cpu,
                order,
                policy,
                node,
                movable,
            } => self.alloc(op, cpu, order, policy, node, movable)?,
            NodeOp::Free { cpu, slot } => self.free(op, cpu, slot)?,
            NodeOp::Offline {
                cpu,
                zone,
                offset,
                len,
                refuse,
            } => self.offline(op, cpu, zone, offset, len, refuse)?,
            NodeOp::Online { slot, zeroed } => {
                if !self.offline.is_empty() {
                    let (pfn, nr) = self.offline.remove(slot % self.offline.len());
                    let got = self.set.online_range(pfn, nr, zeroed);
                    expect(op, got, Ok(()))?;
                    let n = self
                        .set
                        .zone_of(pfn)
                        .map_err(|_| NodeDivergence::BadFrame(pfn))?
                        .node();
                    self.present[usize::from(n.0)] += nr;
                }
            }
        }
        self.check()
    }

    fn alloc(
        &mut self,
        op: NodeOp,
        cpu: usize,
        order: u8,
        policy: u8,
        node: u8,
        movable: bool,
    ) -> Result<(), NodeDivergence> {
        for z in self.set.zones() {
            z.drain_all();
            z.merge_free_blocks();
        }
        // What a failed allocation may change (draining, merging the pairs kept apart for
        // their knowledge of zero) is done: it must change nothing else.
        let before = self.snapshots();
        let t = self.set.topology();
        let policy = match policy % 3 {
            0 => NodePolicy::Local,
            1 => NodePolicy::Preferred(NodeId(node)),
            _ => NodePolicy::Bind(NodeId(node)),
        };
        let first = match policy {
            NodePolicy::Local => t.node_of_cpu(cpu).ok(),
            NodePolicy::Preferred(n) | NodePolicy::Bind(n) => {
                (usize::from(n.0) < t.nodes()).then_some(n)
            }
        };
        let max = self.set.zones().map(|z| z.config().max_order).max();
        let want_err = if cpu >= t.cpus() {
            Some(BuddyError::BadCpu(cpu))
        } else if first.is_none() {
            Some(BuddyError::BadNode(u32::from(node)))
        } else {
            None
        };
        // Where the allocation will be recorded: its key, for the migrate callback.
        let target = if self.held.len() < SLOTS {
            Some(self.held.len())
        } else {
            self.held.iter().position(Option::is_none)
        };
        let key = target.map_or(u64::MAX, |t| t as u64);
        let order_ok = Order::new(order).map_err(BuddyError::from);
        // Where it must land, from the zones as they are before it.
        let want = match (first, order_ok) {
            (Some(first), Ok(o)) => {
                let mut candidates = self.fallback(first);
                if matches!(policy, NodePolicy::Bind(_)) {
                    candidates.truncate(1);
                }
                candidates.into_iter().find(|&n| self.has_block(n, o))
            }
            _ => None,
        };
        let got = order_ok.and_then(|o| {
            if movable {
                any(self.set.alloc_movable(cpu, o, key, policy))
            } else {
                any(self.set.alloc_pages(cpu, o, policy))
            }
        });
        if got.is_err() {
            self.unchanged(&before)?;
        }
        let (Some(_), Ok(o)) = (first, order_ok) else {
            // Bad input: the set must refuse it (the order error first when the order is
            // not even one).
            let want = match order_ok {
                Err(e) => e,
                Ok(_) => want_err.unwrap_or(BuddyError::Overflow),
            };
            return expect(op, got.map(|_| ()), Err(want));
        };
        if let Some(e) = want_err {
            return expect(op, got.map(|_| ()), Err(e));
        }
        if max.is_some_and(|m| o > m) {
            // Every zone refuses the order; which zone's maximum names it is the first tried.
            return match got {
                Err(BuddyError::OrderTooLarge { .. }) => Ok(()),
                other => expect(
                    op,
                    other.map(|_| ()),
                    Err(BuddyError::OrderTooLarge {
                        order,
                        max: max.map_or(0, Order::get),
                    }),
                ),
            };
        }
        match (got, want) {
            (Ok(pfn), Some(want)) => {
                let z = self
                    .set
                    .zone_of(pfn)
                    .map_err(|_| NodeDivergence::BadFrame(pfn))?;
                let n = z.node();
                if n != want {
                    return Err(NodeDivergence::WrongNode { pfn, got: n, want });
                }
                let covers = |p: Pfn| (pfn.0..pfn.0 + o.pages()).contains(&p.0);
                let clashes = self.held.iter().flatten().any(|h| {
                    covers(h.pfn) || (h.pfn.0..h.pfn.0 + h.order.pages()).contains(&pfn.0)
                }) || self
                    .offline
                    .iter()
                    .any(|&(s, nr)| s.0 < pfn.0 + o.pages() && pfn.0 < s.0 + nr);
                let allocated = z.frame(pfn).is_ok_and(|f| f.state == FrameState::Allocated);
                if clashes || !allocated {
                    return Err(NodeDivergence::BadFrame(pfn));
                }
                let h = Some(Held {
                    pfn,
                    order: o,
                    movable,
                });
                match target {
                    Some(t) if t == self.held.len() => self.held.push(h),
                    Some(t) => self.held[t] = h,
                    None => {
                        // Every slot in use: give this one back at once.
                        // SAFETY: `NodeModel`'s set is its own and no clearer or migration
                        // writes its frames.
                        #[allow(unsafe_code)]
                        let freed = unsafe { self.set.free_pages(cpu, pfn, o) };
                        expect(op, freed, Ok(()))?;
                    }
                }
                Ok(())
            }
            (got, None) => expect(op, got.map(|_| ()), Err(BuddyError::OutOfMemory(o))),
            (Err(e), Some(_)) => expect(op, Err(e), Ok(())),
        }
    }

    fn free(&mut self, op: NodeOp, cpu: usize, slot: usize) -> Result<(), NodeDivergence> {
        if self.held.is_empty() {
            return Ok(());
        }
        let i = slot % self.held.len();
        let Some(h) = self.held[i].take() else {
            return Ok(());
        };
        let cpu = cpu % self.set.topology().cpus().max(1);
        // SAFETY: the model holds the block and no clearer or migration writes its frames.
        #[allow(unsafe_code)]
        let got = unsafe { self.set.free_pages(cpu, h.pfn, h.order) };
        expect(op, got, Ok(()))
    }

    fn offline(
        &mut self,
        op: NodeOp,
        cpu: usize,
        zone: usize,
        offset: u64,
        len: u64,
        refuse: bool,
    ) -> Result<(), NodeDivergence> {
        let zones: Vec<_> = self.set.zones().map(|z| (z.node(), *z.config())).collect();
        if zones.is_empty() {
            return Ok(());
        }
        let (node, cfg) = zones[zone % zones.len()];
        let cpu = cpu % self.set.topology().cpus().max(1);
        let start = Pfn(cfg.start.0 + offset % cfg.nr_pages);
        let len = len % (cfg.nr_pages + 1);
        // Past the top of the pfn space, `u64::MAX` (an overflow, whatever the zone).
        let end = start.0.checked_add(len);
        // What the model says: a zone boundary, a hole, then an unmovable block, first frame
        // first; a movable block is moved (or, refused, in the way).
        let zone_end = cfg.start.0 + cfg.nr_pages;
        let z = self
            .set
            .zone_of(start)
            .map_err(|_| NodeDivergence::BadFrame(start))?;
        let mut want: Result<u64, BuddyError> = Ok(0);
        // A movable block must move (or be refused): a target is taken first, so running
        // out of room outside the range is an answer too.
        let mut must_move = false;
        if len == 0 {
            want = Err(BuddyError::ZeroPages);
        } else if end.is_none() {
            want = Err(BuddyError::Overflow);
        } else if end.is_some_and(|end| end > zone_end) {
            want = Err(BuddyError::NotInNode {
                pfn: Pfn(zone_end),
                node: u32::from(node.0),
            });
        } else {
            // Holes and unmovable blocks stop it before anything moves; then a refused
            // move stops it at the first movable block.
            let mut moved = 0;
            let mut first_movable = None;
            for p in start.0..end.unwrap_or(u64::MAX) {
                let state = z.frame(Pfn(p)).map(|f| f.state);
                if state == Ok(FrameState::Reserved) {
                    want = Err(BuddyError::Hole(Pfn(p)));
                    break;
                }
                if let Some(h) = self.held_at(Pfn(p)).and_then(|i| self.held[i]) {
                    if !h.movable {
                        want = Err(BuddyError::Busy(Pfn(p)));
                        break;
                    }
                    if p == h.pfn.0.max(start.0) {
                        moved += h.order.pages();
                        first_movable = first_movable.or(Some(Pfn(p)));
                    }
                }
            }
            must_move = want.is_ok() && moved > 0;
            want = match (want, first_movable) {
                (Ok(_), Some(at)) if refuse => Err(BuddyError::Busy(at)),
                (Ok(_), _) => Ok(moved),
                (e, _) => e,
            };
        }
        // An offline drains the per-cpu lists first: done, so that a failed one that moved
        // nothing must change nothing at all (the set's zones defer no memory).
        for z in self.set.zones() {
            z.drain_all();
        }
        let before = self.snapshots();
        let mut held = core::mem::take(&mut self.held);
        let mut bad = None;
        let mut moved_any = false;
        let mut follow = |m: &Migration| {
            if refuse {
                return false;
            }
            match held.get_mut(m.key as usize) {
                Some(Some(h)) if h.pfn == m.from && h.movable && h.order == m.order => {
                    h.pfn = m.to;
                    moved_any = true;
                    true
                }
                _ => {
                    bad = Some(*m);
                    false
                }
            }
        };
        let got = self.set.offline_range(cpu, start, len, &mut follow);
        self.held = held;
        if let Some(m) = bad {
            return Err(NodeDivergence::BadMigration(m));
        }
        if got.is_err() && !moved_any {
            self.unchanged(&before)?;
        }
        match (any(got), want) {
            (Ok(moved), Ok(want_moved)) if moved == want_moved => {
                self.offline.push((start, len));
                if self.offline.len() > SLOTS {
                    // Forget the oldest: it stays offline.
                    self.offline.remove(0);
                }
                self.present[usize::from(node.0)] -= len;
                Ok(())
            }
            // No room outside the range for a movable block: only when one had to move.
            (Err(BuddyError::OutOfMemory(_)), _) if must_move => self.undone(start, len),
            (Err(e), Err(w)) if e == w => self.undone(start, len),
            (got, want) => expect(op, got.map(|_| ()), want.map(|_| ())),
        }
    }

    /// After a failed offline: no pageblock of the range isolated, no frame of it made a
    /// hole by the offline.
    fn undone(&self, start: Pfn, len: u64) -> Result<(), NodeDivergence> {
        let Ok(z) = self.set.zone_of(start) else {
            return Ok(());
        };
        for p in start.0..start.0.saturating_add(len) {
            let pfn = Pfn(p);
            match z.pageblock_type(pfn) {
                Ok((_, true)) => return Err(NodeDivergence::NotUndone(pfn)),
                Ok(_) => {}
                Err(_) => return Ok(()),
            }
            let was_offline = self
                .offline
                .iter()
                .any(|&(s, nr)| (s.0..s.0 + nr).contains(&p));
            if z.frame(pfn).is_ok_and(|f| f.state == FrameState::Reserved) && !was_offline {
                // A hole of the memory map is reserved too: only a held or free frame that
                // became one is a fault, and the model knows no held frame is reserved.
                if self.held_at(pfn).is_some() {
                    return Err(NodeDivergence::NotUndone(pfn));
                }
            }
        }
        Ok(())
    }

    /// Every zone's check, and every node's present and free frames against the model.
    fn check(&self) -> Result<(), NodeDivergence> {
        for z in self.set.zones() {
            z.check().map_err(NodeDivergence::Corrupt)?;
        }
        for n in 0..self.set.topology().nodes() {
            let node = NodeId(n as u8);
            let held: u64 = self
                .held
                .iter()
                .flatten()
                .filter(|h| self.set.zone_of(h.pfn).is_ok_and(|z| z.node() == node))
                .map(|h| h.order.pages())
                .sum();
            let s = self
                .set
                .node_stats(node)
                .map_err(|_| NodeDivergence::BadFrame(Pfn(0)))?;
            let want = (self.present[n], self.present[n] - held);
            if (s.present, s.free) != want {
                return Err(NodeDivergence::Counts {
                    node,
                    got: (s.present, s.free),
                    want,
                });
            }
            let typed: u64 = s.free_by_type.iter().sum();
            if typed > s.free || s.free_by_type[MigrateType::Movable as usize] > s.free {
                return Err(NodeDivergence::Counts {
                    node,
                    got: (typed, s.free),
                    want,
                });
            }
        }
        Ok(())
    }

    /// Frees everything the model holds and brings every recorded range back online; each
    /// zone must then be consistent and hold no allocation.
    ///
    /// # Errors
    /// The first [`NodeDivergence`] found.
    pub fn finish(&mut self) -> Result<(), NodeDivergence> {
        for slot in 0..self.held.len() {
            self.free(NodeOp::Free { cpu: 0, slot }, 0, slot)?;
        }
        while !self.offline.is_empty() {
            self.apply(NodeOp::Online {
                slot: 0,
                zeroed: false,
            })?;
        }
        for z in self.set.zones() {
            z.drain_all();
        }
        self.check()
    }
}

fn expect(
    op: NodeOp,
    got: Result<(), impl Into<BuddyError>>,
    want: Result<(), BuddyError>,
) -> Result<(), NodeDivergence> {
    let got = any(got);
    if got == want {
        Ok(())
    } else {
        Err(NodeDivergence::Result { op, got, want })
    }
}
