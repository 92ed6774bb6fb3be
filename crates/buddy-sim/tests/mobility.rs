//! Grouping by mobility, compaction and contiguous allocation, over a zone backed by memory:
//! every allocation's frames carry a stamp (its name and page), the embedder's migrate
//! callback copies blocks through the same memory, and after every step the stamps must be
//! where the owners' tables say (data moves with its block, and only movable blocks move),
//! and `check()` must pass. Then the migratetype rules one by one: fallback order, claiming,
//! isolation, the frozen variants.
//!
//! The frees are `unsafe`: each frees what the model holds (its tables say so) and uses its
//! memory no more.

mod common;
use common::Before;
use common::TestZone;

use buddy_sim::FreeError;
use buddy_sim::{AllocError, ContigError};
use std::collections::BTreeMap;

use buddy_sim::{
    AllocRequest, CmaArea, CompactReason, CompactStats, CompactWork, FrameMemory, FrameState,
    MigrateType, Migration, OffsetMap, Order, Pfn, ZoneConfig,
};
use proptest::prelude::*;
use std::cell::RefCell;

const START: u64 = 0x400;
const PAGE: usize = 4096;

#[repr(C, align(4096))]
struct Page([u8; PAGE]);

/// A zone of `nr` frames from `START` (pageblocks of 16 frames, MAX_ORDER 6) with a buffer
/// as its memory.
struct World {
    zone: TestZone,
    _ram: Vec<Page>,
    memory: OffsetMap,
    /// Movable allocations by key: where each one is now.
    movable: BTreeMap<u64, (Pfn, Order)>,
    /// Unmovable and reclaimable allocations: never moved.
    fixed: Vec<(u64, Pfn, Order)>,
    /// Contiguous allocations: first frame, frames, frozen.
    contig: Vec<(u64, Pfn, u64, bool)>,
    next: u64,
    /// Keys the callback refuses to move (multiples of this; 0: none).
    refuse_every: u64,
    /// The zone's CMA reservation, if it made one.
    cma: Option<CmaArea>,
}

impl World {
    fn new(nr: u64, cpus: usize) -> Self {
        Self::configured(nr, cpus, |cfg| cfg)
    }

    /// [`World::new`] with its configuration changed by `tweak`.
    fn configured(nr: u64, cpus: usize, tweak: impl FnOnce(ZoneConfig) -> ZoneConfig) -> Self {
        let mut ram: Vec<Page> = (0..nr).map(|_| Page([0xEE; PAGE])).collect();
        let first = ram.as_mut_ptr().cast();
        // SAFETY: frame START + i is ram[i], alive as long as the world; the zone and the
        // blocks' owners (this model) are all that touch it.
        let memory = unsafe { OffsetMap::with_frame_at(Pfn(START), first) }.unwrap();
        let cfg = tweak(ZoneConfig {
            pageblock_order: Order::new(4).unwrap(),
            ..ZoneConfig::new(Pfn(START), nr)
                .with_max_order(Order::new(6).unwrap())
                .with_cpus(cpus)
        });
        Self {
            zone: common::zone(cfg).unwrap(),
            _ram: ram,
            memory,
            movable: BTreeMap::new(),
            fixed: Vec::new(),
            contig: Vec::new(),
            next: 1,
            refuse_every: 0,
            cma: None,
        }
    }

    fn page_ptr(&self, pfn: Pfn) -> *mut u64 {
        self.memory.frame_ptr(pfn).unwrap().as_ptr().cast()
    }

    /// Writes `name`'s stamp into the `pages` frames from `pfn`.
    fn stamp(&self, name: u64, pfn: Pfn, pages: u64) {
        for i in 0..pages {
            // SAFETY: the model holds these frames (just allocated).
            unsafe {
                self.page_ptr(Pfn(pfn.0 + i)).write(name);
                self.page_ptr(Pfn(pfn.0 + i)).add(1).write(i);
            }
        }
    }

    /// Whether the `pages` frames from `pfn` carry `name`'s stamp.
    fn stamped(&self, name: u64, pfn: Pfn, pages: u64) -> bool {
        (0..pages).all(|i| {
            // SAFETY: the model holds these frames.
            unsafe {
                self.page_ptr(Pfn(pfn.0 + i)).read() == name
                    && self.page_ptr(Pfn(pfn.0 + i)).add(1).read() == i
            }
        })
    }

    fn name(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The callback: refuses some keys, else checks the move is of a block the model holds
    /// where it thinks, copies it and repoints the model's table.
    fn mover(
        memory: &OffsetMap,
        movable: &mut BTreeMap<u64, (Pfn, Order)>,
        refuse_every: u64,
    ) -> impl FnMut(&Migration) -> bool {
        move |m: &Migration| {
            if refuse_every != 0 && m.key.is_multiple_of(refuse_every) {
                return false;
            }
            assert_eq!(
                movable.get(&m.key),
                Some(&(m.from, m.order)),
                "asked to move {m:?}, which is not a movable block the model holds there"
            );
            // SAFETY: the model is the block's only user and writes nothing while it moves.
            unsafe { m.copy(memory) }.unwrap();
            movable.insert(m.key, (m.to, m.order));
            true
        }
    }

    fn compact(&mut self, order: Order) -> CompactStats {
        let mut mover = Self::mover(&self.memory, &mut self.movable, self.refuse_every);
        self.zone.compact(0, order, &mut mover).unwrap()
    }

    fn compact_some(&mut self, budget: u64) -> CompactStats {
        let mut mover = Self::mover(&self.memory, &mut self.movable, self.refuse_every);
        self.zone.compact_some(0, budget, &mut mover).unwrap()
    }

    fn contig_range(&mut self, pfn: Pfn, nr: u64, frozen: bool) -> Result<(), ContigError> {
        let r = {
            let mut mover = Self::mover(&self.memory, &mut self.movable, self.refuse_every);
            if frozen {
                self.zone.alloc_contig_frozen_range(0, pfn, nr, &mut mover)
            } else {
                self.zone.alloc_contig_range(0, pfn, nr, &mut mover)
            }
        };
        if r.is_ok() {
            let name = self.name();
            self.stamp(name, pfn, nr);
            self.contig.push((name, pfn, nr, frozen));
        }
        r
    }

    fn contig_pages(&mut self, nr: u64, align: Order, frozen: bool) -> Result<Pfn, AllocError> {
        let r = {
            let mut mover = Self::mover(&self.memory, &mut self.movable, self.refuse_every);
            let request = AllocRequest::frames(nr)
                .aligned(align)
                .contiguous(&mut mover);
            let request = if frozen { request.frozen() } else { request };
            self.zone.cpu(0)?.alloc_raw(request)
        };
        if let Ok(pfn) = r {
            assert!(align.aligns(pfn));
            let name = self.name();
            self.stamp(name, pfn, nr);
            self.contig.push((name, pfn, nr, frozen));
        }
        r
    }

    /// Reserves `nr` frames for CMA anywhere, moving what is in the way.
    fn reserve_cma(&mut self, nr: u64) -> Result<CmaArea, AllocError> {
        let area = {
            let mut mover = Self::mover(&self.memory, &mut self.movable, self.refuse_every);
            self.zone.reserve_cma(0, nr, Order::ZERO, &mut mover)?
        };
        self.cma = Some(area);
        Ok(area)
    }

    /// A run of `nr` frames aligned to `align` from the reservation (`cma_alloc`).
    fn cma_alloc(&mut self, nr: u64, align: Order) -> Result<Pfn, AllocError> {
        let area = self.cma.expect("a reservation");
        let r = {
            let mut mover = Self::mover(&self.memory, &mut self.movable, self.refuse_every);
            let request = AllocRequest::frames(nr)
                .aligned(align)
                .contiguous(&mut mover)
                .from_cma(area);
            self.zone.cpu(0)?.alloc_raw(request)
        };
        if let Ok(pfn) = r {
            assert!(area.contains(pfn, nr) && align.aligns(pfn));
            let name = self.name();
            self.stamp(name, pfn, nr);
            self.contig.push((name, pfn, nr, false));
        }
        r
    }

    /// Whether any of the `nr` frames from `pfn` lies in the reservation.
    fn in_cma(&self, pfn: Pfn, nr: u64) -> bool {
        self.cma
            .is_some_and(|a| pfn.0 < a.base().0 + a.pages() && a.base().0 < pfn.0 + nr)
    }

    fn alloc(&mut self, cpu: usize, order: Order, mt: MigrateType) -> Option<Pfn> {
        let name = self.name();
        let pfn = match mt {
            MigrateType::Movable => self.zone.alloc_movable(cpu, order, name).ok()?,
            _ => self
                .zone
                .cpu(cpu)
                .ok()?
                .alloc_raw(AllocRequest::order(order).kind(mt))
                .ok()?,
        };
        self.stamp(name, pfn, order.pages());
        match mt {
            MigrateType::Movable => {
                self.movable.insert(name, (pfn, order));
            }
            _ => self.fixed.push((name, pfn, order)),
        }
        Some(pfn)
    }

    /// An allocation whose slow path may reclaim and compact: reclaim frees the oldest
    /// movable blocks the model holds (its page cache, least recently allocated first),
    /// compaction moves blocks through the model's callback. Returns the block and what
    /// reclaim was asked for, call by call.
    fn alloc_hooked(
        &mut self,
        cpu: usize,
        order: Order,
        mt: MigrateType,
    ) -> (Option<Pfn>, Vec<u64>) {
        let name = self.name();
        let movable = RefCell::new(std::mem::take(&mut self.movable));
        let asks = RefCell::new(Vec::new());
        let (zone, memory, refuse) = (&self.zone, &self.memory, self.refuse_every);
        let mut mover = |m: &Migration| Self::mover(memory, &mut movable.borrow_mut(), refuse)(m);
        let mut reclaim = |pages: u64| {
            asks.borrow_mut().push(pages);
            let mut freed = 0;
            while freed < pages {
                let Some((key, (pfn, order))) = movable.borrow_mut().pop_first() else {
                    break;
                };
                let _ = key;
                // SAFETY: the model held the block and forgot it just now.
                unsafe { zone.free_pages(cpu, pfn, order) }.unwrap();
                freed += order.pages();
            }
            freed
        };
        let request = match mt {
            MigrateType::Movable => AllocRequest::order(order).movable(name),
            _ => AllocRequest::order(order).kind(mt),
        };
        let request = request.reclaim(&mut reclaim).compact(&mut mover);
        let got = zone.cpu(cpu).unwrap().alloc_raw(request).ok();
        self.movable = movable.into_inner();
        if let Some(pfn) = got {
            self.stamp(name, pfn, order.pages());
            match mt {
                MigrateType::Movable => {
                    self.movable.insert(name, (pfn, order));
                }
                _ => self.fixed.push((name, pfn, order)),
            }
        }
        (got, asks.into_inner())
    }

    /// Background compaction of at most `budget` frames, reclaiming nothing.
    fn compact_work(&mut self, budget: u64) -> CompactWork {
        let mut mover = Self::mover(&self.memory, &mut self.movable, self.refuse_every);
        self.zone
            .compact_work(0, budget, &mut mover, &mut |_| 0)
            .unwrap()
    }

    /// Frees the `k`-th held allocation (of all kinds, in a fixed order).
    fn free(&mut self, cpu: usize, k: usize) {
        let total = self.movable.len() + self.fixed.len() + self.contig.len();
        if total == 0 {
            return;
        }
        let k = k % total;
        if k < self.movable.len() {
            let key = *self.movable.keys().nth(k).unwrap();
            let (pfn, order) = self.movable.remove(&key).unwrap();
            // SAFETY: the model holds the block and uses it no more.
            unsafe { self.zone.free_pages(cpu, pfn, order) }.unwrap();
        } else if k < self.movable.len() + self.fixed.len() {
            let (_, pfn, order) = self.fixed.swap_remove(k - self.movable.len());
            // SAFETY: as above.
            unsafe { self.zone.free_pages(cpu, pfn, order) }.unwrap();
        } else {
            let (_, pfn, nr, frozen) = self
                .contig
                .swap_remove(k - self.movable.len() - self.fixed.len());
            // SAFETY: as above.
            let r = unsafe {
                if frozen {
                    self.zone.free_contig_frozen_range(cpu, pfn, nr)
                } else {
                    self.zone.free_contig_range(cpu, pfn, nr)
                }
            };
            r.unwrap();
        }
    }

    /// "A CMA block is always returnable": with everything outside the reservation freed
    /// (so that its borrowers have somewhere to go) and its runs given back, the whole
    /// reservation comes back as one run, its movable borrowers migrated out with their
    /// data. Then that run is freed again.
    fn take_whole_reservation(&mut self) {
        let Some(area) = self.cma else { return };
        self.refuse_every = 0;
        let outside: Vec<u64> = self
            .movable
            .iter()
            .filter(|(_, (pfn, order))| !self.in_cma(*pfn, order.pages()))
            .map(|(&k, _)| k)
            .collect();
        for key in outside {
            let (pfn, order) = self.movable.remove(&key).unwrap();
            // SAFETY: the model held the block and forgot it just now.
            unsafe { self.zone.free_pages(0, pfn, order) }.unwrap();
        }
        while !self.fixed.is_empty() || !self.contig.is_empty() {
            self.free(0, self.movable.len());
        }
        let pfn = self
            .cma_alloc(area.pages(), Order::ZERO)
            .expect("the whole reservation comes back");
        assert_eq!(pfn, area.base());
        self.verify();
        assert!(
            self.movable
                .values()
                .all(|&(p, o)| !self.in_cma(p, o.pages()))
        );
        self.free(0, self.movable.len());
        self.zone.check().unwrap();
    }

    /// Everything the model holds is where its tables say, stamped, and of its kind; the
    /// zone's invariants hold.
    fn verify(&self) {
        self.zone.check().unwrap();
        for (&key, &(pfn, order)) in &self.movable {
            let f = self.zone.frame(pfn).unwrap();
            assert_eq!(
                (f.state, f.order, f.refcount, f.migratetype),
                (
                    FrameState::Allocated,
                    order.get(),
                    1,
                    Some(MigrateType::Movable)
                ),
                "movable block {key} at {pfn}"
            );
            assert!(
                self.stamped(key, pfn, order.pages()),
                "block {key} lost its data"
            );
        }
        for &(name, pfn, order) in &self.fixed {
            assert!(
                !self.in_cma(pfn, order.pages()),
                "unmovable or reclaimable block {name} at {pfn} in the CMA reservation"
            );
            assert_eq!(self.zone.frame(pfn).unwrap().state, FrameState::Allocated);
            assert!(
                self.stamped(name, pfn, order.pages()),
                "fixed block {name} changed"
            );
        }
        for &(name, pfn, nr, frozen) in &self.contig {
            for i in 0..nr {
                let f = self.zone.frame(Pfn(pfn.0 + i)).unwrap();
                assert_eq!(
                    (f.state, f.order, f.frozen),
                    (FrameState::Allocated, 0, frozen)
                );
                assert_eq!(f.refcount, u32::from(!frozen));
            }
            assert!(self.stamped(name, pfn, nr), "contiguous run {name} changed");
        }
    }

    fn free_everything(mut self) {
        while self.movable.len() + self.fixed.len() + self.contig.len() > 0 {
            self.free(0, 0);
        }
        self.zone.drain_all();
        self.zone.check().unwrap();
        assert_eq!(self.zone.buddy_pages(), self.zone.present_pages());
    }
}

#[derive(Clone, Debug)]
enum Step {
    Alloc { cpu: usize, order: u8, mt: u8 },
    Free { cpu: usize, k: usize },
    Compact { order: u8 },
    CompactSome { budget: u64 },
    ContigRange { offset: u64, len: u64, frozen: bool },
    ContigPages { len: u64, align: u8, frozen: bool },
    Refuse { every: u64 },
    AllocHooked { cpu: usize, order: u8, mt: u8 },
    CompactWork { budget: u64 },
    CmaAlloc { len: u64, align: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0usize..2, 0u8..4, 0u8..3).prop_map(|(cpu, order, mt)| Step::Alloc { cpu, order, mt }),
        5 => (0usize..2, any::<usize>()).prop_map(|(cpu, k)| Step::Free { cpu, k }),
        1 => (0u8..7).prop_map(|order| Step::Compact { order }),
        1 => (1u64..40).prop_map(|budget| Step::CompactSome { budget }),
        1 => (0u64..256, 1u64..40, any::<bool>()).prop_map(|(offset, len, frozen)| Step::ContigRange { offset, len, frozen }),
        1 => (1u64..40, 0u8..6, any::<bool>()).prop_map(|(len, align, frozen)| Step::ContigPages { len, align, frozen }),
        1 => (0u64..4).prop_map(|every| Step::Refuse { every }),
        2 => (0usize..2, 0u8..5, 0u8..3).prop_map(|(cpu, order, mt)| Step::AllocHooked { cpu, order, mt }),
        1 => (1u64..40).prop_map(|budget| Step::CompactWork { budget }),
        1 => (1u64..40, 0u8..6).prop_map(|(len, align)| Step::CmaAlloc { len, align }),
    ]
}

proptest! {
    #![proptest_config(common::proptest_config(4))]

    /// Random churn of every kind of allocation, compaction and contiguous allocation: the
    /// data of every block stays with it, only movable blocks move, every operation leaves
    /// the zone consistent, and everything freed leaves the zone whole.
    #[test]
    fn data_moves_with_movable_blocks_and_only_they_move(
        steps in proptest::collection::vec(step(), 1..if cfg!(miri) { 12 } else { 120 }),
        defrag in any::<bool>(),
        movable_only in any::<bool>(),
        cma in any::<bool>(),
        holes in proptest::option::of(2usize..9),
    ) {
        let mut w = World::configured(256, 2, |cfg| {
            let cfg = cfg.with_defrag_mode(defrag);
            if movable_only { cfg.movable_only() } else { cfg }
        });
        if cma {
            // Four pageblocks of the sixteen.
            w.reserve_cma(64).unwrap();
        }
        // A zone full of movable pages with every n-th freed: no free pageblock, the free
        // memory in holes of movable pageblocks, where the fallbacks of other kinds go last.
        if let Some(every) = holes {
            while w.alloc(0, Order::ZERO, MigrateType::Movable).is_some() {}
            let keys: Vec<u64> = w.movable.keys().copied().step_by(every).collect();
            for key in keys {
                let (pfn, order) = w.movable.remove(&key).unwrap();
                // SAFETY: the model held the page and forgot it just now.
                unsafe { w.zone.free_pages(0, pfn, order) }.unwrap();
            }
        }
        for s in steps {
            match s {
                Step::Alloc { cpu, order, mt } => {
                    w.alloc(cpu, Order::new(order).unwrap(), MigrateType::ALL[usize::from(mt)]);
                }
                Step::Free { cpu, k } => w.free(cpu, k),
                Step::Compact { order } => {
                    let order = Order::new(order).unwrap();
                    let stats = w.compact(order);
                    // A free block any allocation can take: a CMA reservation's do not count.
                    let has = MigrateType::ALL.into_iter().any(|mt| {
                        w.zone.buddy_blocks_of_type(mt)[usize::from(order.get())..]
                            .iter()
                            .any(|&n| n > 0)
                    });
                    prop_assert_eq!(stats.success, has);
                }
                Step::CompactSome { budget } => {
                    let stats = w.compact_some(budget);
                    prop_assert!(stats.moved_pages <= budget + 8);
                }
                Step::ContigRange { offset, len, frozen } => {
                    let before = w.zone.free_pages_total();
                    let r = w.contig_range(Pfn(START + offset), len, frozen);
                    w.zone.drain_all();
                    match r {
                        Ok(()) => {}
                        Err(ContigError::Busy(_) | ContigError::OutOfMemory(_) | ContigError::OutOfZone(_)) => {
                            // Nothing allocated: what is free is as before (moves keep it).
                            prop_assert_eq!(w.zone.free_pages_total(), before);
                        }
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Step::ContigPages { len, align, frozen } => {
                    let _ = w.contig_pages(len, Order::new(align).unwrap(), frozen);
                }
                Step::Refuse { every } => w.refuse_every = every,
                Step::AllocHooked { cpu, order, mt } => {
                    let _ = w.alloc_hooked(cpu, Order::new(order).unwrap(), MigrateType::ALL[usize::from(mt)]);
                }
                Step::CmaAlloc { len, align } => {
                    if w.cma.is_some() {
                        let _ = w.cma_alloc(len, Order::new(align).unwrap());
                    }
                }
                Step::CompactWork { budget } => {
                    let done = w.compact_work(budget);
                    prop_assert!(done.stats.moved_pages <= budget + 8);
                    if done.reason.is_none() {
                        prop_assert_eq!(done.stats, CompactStats::default());
                    }
                }
            }
            w.verify();
            // Defrag mode never leaves an unmovable or reclaimable block in a movable
            // pageblock: its last resort claims the pageblock instead of stealing from it.
            if defrag {
                for &(name, pfn, _) in &w.fixed {
                    let (mt, _) = w.zone.pageblock_type(pfn).unwrap();
                    prop_assert!(mt != MigrateType::Movable, "block {} at {} in a movable pageblock", name, pfn);
                }
            }
            // A movable-only zone holds movable blocks and contiguous runs, nothing else:
            // every pageblock stays movable and can be emptied.
            if movable_only {
                prop_assert!(w.fixed.is_empty());
                for pb in (0..256).step_by(16) {
                    let (mt, _) = w.zone.pageblock_type(Pfn(START + pb)).unwrap();
                    prop_assert_eq!(mt, MigrateType::Movable);
                }
            }
        }
        w.take_whole_reservation();
        w.free_everything();
    }
}

/// A fresh zone is movable throughout; the first unmovable allocation claims the largest
/// free block whole, and later ones stay in the pageblocks it claimed.
#[test]
fn unmovable_allocations_claim_pageblocks_and_stay_together() {
    let w = World::new(256, 1);
    let pb = |pfn| w.zone.pageblock_type(pfn).unwrap();
    assert!(
        (0..256)
            .step_by(16)
            .all(|i| pb(Pfn(START + i)) == (MigrateType::Movable, false))
    );
    let first = w.zone.alloc_pages(0, Order::ZERO).unwrap();
    assert_eq!(pb(first), (MigrateType::Unmovable, false));
    let claimed = (0..256)
        .step_by(16)
        .filter(|&i| pb(Pfn(START + i)).0 == MigrateType::Unmovable)
        .count();
    // The largest free block (order 6: four pageblocks) changed type whole.
    assert_eq!(claimed, 4);
    for _ in 0..40 {
        let p = w.zone.alloc_pages(0, Order::ZERO).unwrap();
        assert_eq!(
            pb(p).0,
            MigrateType::Unmovable,
            "{p} left the claimed pageblocks"
        );
    }
    // Movable allocations keep to movable pageblocks while those have room.
    for _ in 0..40 {
        let p = w.zone.alloc_movable(0, Order::ZERO, 7).unwrap();
        assert_eq!(pb(p).0, MigrateType::Movable);
    }
    // The free blocks per type add up to the buddy's, and the claimed pageblocks still hold
    // unmovable free blocks for the next unmovable allocations.
    w.zone.drain_all();
    let per_type = MigrateType::ALL.map(|t| w.zone.buddy_blocks_of_type(t));
    for (o, &n) in w.zone.buddy_blocks_per_order().iter().enumerate() {
        assert_eq!(per_type.iter().map(|b| b[o]).sum::<u32>(), n, "order {o}");
    }
    assert!(
        per_type[MigrateType::Unmovable as usize]
            .iter()
            .any(|&n| n > 0)
    );
    w.zone.check().unwrap();
}

/// A small movable allocation with no movable memory left takes a block of another type
/// without claiming its pageblock (Linux: only large or unmovable fallbacks claim).
#[test]
fn a_small_movable_fallback_does_not_claim() {
    let w = World::new(64, 1);
    // Unmovable allocations take all but one frame (the first claims the whole zone).
    let held: Vec<_> = (0..=5)
        .rev()
        .map(|o| {
            let o = Order::new(o).unwrap();
            (w.zone.alloc_pages(0, o).unwrap(), o)
        })
        .collect();
    let types: Vec<_> = (0..64)
        .step_by(16)
        .map(|i| w.zone.pageblock_type(Pfn(START + i)).unwrap().0)
        .collect();
    assert!(
        types.iter().all(|&t| t == MigrateType::Unmovable),
        "{types:?}"
    );
    let small = w.zone.alloc_movable(0, Order::ZERO, 9).unwrap();
    assert_eq!(
        w.zone.frame(small).unwrap().migratetype,
        Some(MigrateType::Movable)
    );
    assert_eq!(
        w.zone.pageblock_type(small).unwrap().0,
        MigrateType::Unmovable
    );
    // SAFETY: allocated above, no longer used.
    unsafe {
        w.zone.free_pages(0, small, Order::ZERO).unwrap();
        for (p, o) in held {
            w.zone.free_pages(0, p, o).unwrap();
        }
    }
    w.zone.check().unwrap();
}

/// Compaction makes a free block of the pageblock order out of a zone whose pageblocks all
/// hold a movable page, moving only movable pages and their data with them; the unmovable
/// page stays.
#[test]
fn compaction_rebuilds_a_pageblock_and_moves_data() {
    let mut w = World::new(128, 1);
    // One movable page in every pageblock, the rest free: no free pageblock.
    let o0 = Order::ZERO;
    while w.alloc(0, o0, MigrateType::Movable).is_some() {}
    // Free everything but the eight kept pages.
    let keep: Vec<u64> = w
        .movable
        .iter()
        .filter(|(_, (p, _))| (p.0 - START) % 16 == 3)
        .map(|(&k, _)| k)
        .collect();
    assert_eq!(keep.len(), 8);
    let drop: Vec<u64> = w
        .movable
        .keys()
        .copied()
        .filter(|k| !keep.contains(k))
        .collect();
    for k in drop {
        let (p, o) = w.movable.remove(&k).unwrap();
        // SAFETY: held by the model, no longer used.
        unsafe { w.zone.free_pages(0, p, o) }.unwrap();
    }
    w.zone.drain_all();
    let pb = w.zone.config().pageblock_order;
    assert_eq!(
        w.zone.buddy_blocks_per_order()[usize::from(pb.get())..]
            .iter()
            .sum::<u32>(),
        0
    );
    let stats = w.compact(pb);
    assert!(stats.success, "{stats:?}");
    assert!(stats.moved_pages > 0 && stats.moved_pages <= 8, "{stats:?}");
    w.verify();
    w.free_everything();
}

/// `alloc_contig_range` moves the movable pages out of the range (the callback sees the
/// range isolated meanwhile), refuses an unmovable page, and undoes everything on failure.
#[test]
fn contiguous_ranges_migrate_movable_pages_and_refuse_unmovable_ones() {
    let mut w = World::new(128, 1);
    let o0 = Order::ZERO;
    let movable = w.alloc(0, o0, MigrateType::Movable).unwrap();
    let range = Pfn(movable.0 & !15);
    let zone_free = w.zone.free_pages_total();
    // Seen from inside the callback: the range's pageblock is isolated.
    {
        let zone = &w.zone;
        let memory = &w.memory;
        let movable_map = &mut w.movable;
        let mut saw_isolated = false;
        let mut mover = |m: &Migration| {
            saw_isolated |= zone.pageblock_type(m.from).unwrap().1;
            // SAFETY: the model is the block's only user.
            unsafe { m.copy(memory) }.unwrap();
            movable_map.insert(m.key, (m.to, m.order));
            true
        };
        zone.alloc_contig_range(0, range, 16, &mut mover).unwrap();
        assert!(saw_isolated);
    }
    assert!(!w.zone.pageblock_type(range).unwrap().1, "isolation undone");
    let (moved_to, _) = *w.movable.values().next().unwrap();
    assert!(moved_to.0 < range.0 || moved_to.0 >= range.0 + 16);
    w.verify();
    assert_eq!(w.zone.free_pages_total(), zone_free - 16);
    // SAFETY: the run is the model's, unused.
    unsafe { w.zone.free_contig_range(0, range, 16) }.unwrap();
    // An unmovable page in the way: refused, nothing changes.
    let pinned = w.alloc(0, o0, MigrateType::Unmovable).unwrap();
    let around = Pfn(pinned.0 & !15);
    let before = w.zone.free_pages_total();
    assert_eq!(
        w.contig_range(around, 16, false),
        Err(ContigError::Busy(pinned))
    );
    assert_eq!(w.zone.free_pages_total(), before);
    assert!(!w.zone.pageblock_type(around).unwrap().1);
    w.verify();
    w.free_everything();
}

/// The frozen variants hand pages out without a reference count; a free of them as plain
/// pages fails, and `free_contig_frozen_range` is all or nothing.
#[test]
fn frozen_pages_are_freed_only_as_frozen_pages() {
    let mut w = World::new(64, 1);
    let pfn = w.contig_pages(20, Order::new(2).unwrap(), true).unwrap();
    let f = w.zone.frame(pfn).unwrap();
    assert!(f.frozen && f.refcount == 0);
    // SAFETY: the model holds the run; these calls fail and free nothing (checked).
    unsafe {
        assert_eq!(
            w.zone.free_pages(0, pfn, Order::ZERO),
            Err(FreeError::Frozen(pfn))
        );
        assert_eq!(
            w.zone.free_contig_range(0, pfn, 2),
            Err(FreeError::Frozen(pfn))
        );
        // One page past the run: not frozen, so nothing is freed.
        let past = Pfn(pfn.0 + 20);
        assert!(w.zone.free_contig_frozen_range(0, pfn, 21).is_err());
        assert!(
            w.zone.frame(pfn).unwrap().frozen,
            "a failed free kept its claims"
        );
        assert_ne!(w.zone.frame(past).unwrap().state, FrameState::Tail);
    }
    w.verify();
    let plain = w.contig_pages(5, Order::ZERO, false).unwrap();
    // SAFETY: the model holds it.
    unsafe {
        assert_eq!(
            w.zone.free_contig_frozen_range(0, plain, 5),
            Err(FreeError::NotFrozen(plain))
        );
    }
    w.verify();
    w.free_everything();
}

/// A zone of 64 frames (four pageblocks of 16) filled with movable pages, three of every
/// four freed again: every pageblock a quarter free, none free enough for an unmovable
/// fallback to claim (Linux's rule: half of it free or alike).
fn quarter_free(tweak: impl FnOnce(ZoneConfig) -> ZoneConfig) -> World {
    let mut w = World::configured(64, 1, tweak);
    for _ in 0..64 {
        w.alloc(0, Order::ZERO, MigrateType::Movable).unwrap();
    }
    let every_fourth: Vec<u64> = w
        .movable
        .iter()
        .filter(|(_, (pfn, _))| pfn.0 % 4 == 0)
        .map(|(&k, _)| k)
        .collect();
    for key in every_fourth {
        let (pfn, order) = w.movable.remove(&key).unwrap();
        // SAFETY: the model held the block and forgot it just now.
        unsafe { w.zone.free_pages(0, pfn, order) }.unwrap();
    }
    w.zone.drain_all();
    assert_eq!(w.zone.buddy_pages(), 16);
    assert_eq!(w.zone.fragmentation().free_in_pageblocks, 0);
    w.zone.reset_counters();
    w
}

#[test]
fn without_a_claimable_pageblock_an_unmovable_fallback_steals_and_boosts() {
    let mut w = quarter_free(|cfg| cfg);
    let pfn = w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
    let f = w.zone.fragmentation();
    assert_eq!(
        (
            f.fallbacks.unmovable_steals,
            f.fallbacks.claims,
            f.fallbacks.boosts
        ),
        (1, 0, 1)
    );
    // The page sits in a movable pageblock it did not claim, and the boost asks for one.
    assert_eq!(w.zone.pageblock_type(pfn).unwrap().0, MigrateType::Movable);
    assert_eq!(f.boost, 16);
    // Background compaction works the boost off: it cannot make a free pageblock from 15
    // free frames, but its scanners met, so the boost is spent.
    let done = w.compact_work(u64::MAX);
    assert_eq!(done.reason, Some(CompactReason::Boost));
    assert!(!done.stats.success);
    assert_eq!(done.boost_left, 0);
    w.verify();
    // Then the score (no free pageblock: 100%) is above the proactive mark (90%).
    assert_eq!(
        w.compact_work(u64::MAX).reason,
        Some(CompactReason::Proactive)
    );
    w.verify();
}

#[test]
fn defrag_mode_compacts_a_whole_pageblock_before_it_would_steal() {
    // Without callbacks, defrag mode still falls back, last, but claims the movable
    // pageblock it takes from instead of stealing out of it: the page sits in a pageblock
    // of its own type (Linux's last resort would steal, leaving it in a movable one).
    let mut w = quarter_free(|cfg| cfg.with_defrag_mode(true));
    let pfn = w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
    let f = w.zone.fragmentation();
    assert_eq!(
        (
            f.fallbacks.unmovable_steals,
            f.fallbacks.steals_from_movable
        ),
        (0, 0)
    );
    assert_eq!(f.fallbacks.claims, 1);
    assert_eq!(
        w.zone.pageblock_type(pfn).unwrap().0,
        MigrateType::Unmovable
    );
    w.verify();
    // With a compaction callback, the slow path empties a pageblock (16 frames free: the
    // twelve movable pages of one move into the other three's holes) and the allocation
    // claims it whole.
    let mut w = quarter_free(|cfg| cfg.with_defrag_mode(true));
    let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Unmovable);
    let pfn = got.expect("compaction made a free pageblock");
    assert!(
        asks.iter().all(|&n| n >= 16),
        "reclaim asked for a pageblock: {asks:?}"
    );
    let f = w.zone.fragmentation();
    assert_eq!((f.fallbacks.unmovable_steals, f.fallbacks.claims), (0, 1));
    assert_eq!(
        w.zone.pageblock_type(pfn).unwrap().0,
        MigrateType::Unmovable
    );
    w.verify();
    // The same request outside defrag mode steals at once: the callbacks are for failure.
    let mut w = quarter_free(|cfg| cfg);
    let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Unmovable);
    assert!(got.is_some() && asks.is_empty());
    assert_eq!(w.zone.fragmentation().fallbacks.unmovable_steals, 1);
}

/// In defrag mode a movable allocation has no last resort: with free memory only in an
/// unmovable pageblock it fails and changes nothing, where outside defrag mode it steals.
/// An unmovable allocation still takes that memory, from its own lists.
#[test]
fn defrag_mode_leaves_the_free_memory_of_unmovable_pageblocks_to_unmovable_allocations() {
    let holes = |defrag: bool| {
        let mut w = World::configured(64, 1, |cfg| cfg.with_defrag_mode(defrag));
        let pages: Vec<Pfn> = (0..64)
            .map(|_| w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap())
            .collect();
        // Four holes, all in the first pageblock (16 frames): no free pageblock anywhere.
        for &pfn in pages.iter().filter(|p| p.0 - START < 16).take(4) {
            w.fixed.retain(|&(_, at, _)| at != pfn);
            // SAFETY: the model held the page and forgot it just now.
            unsafe { w.zone.free_pages(0, pfn, Order::ZERO) }.unwrap();
        }
        w.zone.drain_all();
        w
    };
    let mut w = holes(true);
    let before = Before::of(&w.zone);
    let fallbacks = w.zone.fragmentation().fallbacks;
    let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Movable);
    assert_eq!(got, None);
    // The slow path asked for a pageblock's worth of reclaim (none to give) first.
    assert!(
        !asks.is_empty() && asks.iter().all(|&n| n >= 16),
        "{asks:?}"
    );
    before.assert_unchanged(&w.zone);
    assert_eq!(w.zone.fragmentation().fallbacks, fallbacks);
    let pfn = w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
    assert!(pfn.0 - START < 16);
    w.verify();
    // Outside defrag mode the movable page steals a hole.
    let mut w = holes(false);
    assert!(w.alloc(0, Order::ZERO, MigrateType::Movable).is_some());
    assert_eq!(w.zone.fragmentation().fallbacks.movable_steals, 1);
    w.verify();
}

#[test]
fn a_full_zone_reclaims_before_it_fails() {
    for defrag in [false, true] {
        let mut w = World::configured(64, 1, |cfg| cfg.with_defrag_mode(defrag));
        for _ in 0..64 {
            w.alloc(0, Order::ZERO, MigrateType::Movable).unwrap();
        }
        assert!(w.alloc(0, Order::ZERO, MigrateType::Unmovable).is_none());
        // Reclaim is asked for SWAP_CLUSTER_MAX (32) frames, which frees two whole
        // pageblocks of the oldest pages: the allocation claims one, stealing nothing.
        let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Unmovable);
        assert!(got.is_some(), "defrag {defrag}");
        assert_eq!(asks, [32], "defrag {defrag}");
        let f = w.zone.fragmentation();
        assert_eq!(f.fallbacks.unmovable_steals, 0, "defrag {defrag}");
        w.verify();
        // With nothing left to reclaim or move, the allocation fails.
        let mut w = World::configured(64, 1, |cfg| cfg.with_defrag_mode(defrag));
        for _ in 0..64 {
            w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
        }
        let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Unmovable);
        assert_eq!((got, asks), (None, vec![32]), "defrag {defrag}");
    }
}

/// A zone of 128 frames (eight pageblocks of 16; its min watermark is one pageblock) in
/// defrag mode, with or without the pageblock reserve, its free pageblocks taken as huge
/// pages (movable, the pageblock order) while they last.
fn huge_pages_taken(reserve: bool) -> (World, usize) {
    let mut w = World::configured(128, 1, |cfg| cfg.with_pageblock_reserve(reserve));
    assert_eq!(w.zone.fragmentation().watermarks.min, 16);
    let pageblock = Order::new(4).unwrap();
    let mut huge = 0;
    while w.alloc(0, pageblock, MigrateType::Movable).is_some() {
        huge += 1;
    }
    (w, huge)
}

#[test]
fn a_pageblock_reserve_keeps_a_free_pageblock_from_huge_pages_for_an_unmovable_fallback() {
    // Defrag mode as Linux's: huge pages take every pageblock, and an unmovable page
    // finds none.
    let (mut w, huge) = huge_pages_taken(false);
    assert_eq!(huge, 8);
    assert!(w.alloc(0, Order::ZERO, MigrateType::Unmovable).is_none());
    w.verify();
    // With the reserve the eighth request fails and changes nothing: the last free
    // pageblock is the min watermark's worth.
    let (mut w, huge) = huge_pages_taken(true);
    assert_eq!(huge, 7);
    let pageblock = Order::new(4).unwrap();
    let before = Before::of(&w.zone);
    let refused = w
        .zone
        .cpu(0)
        .unwrap()
        .alloc_raw(AllocRequest::order(pageblock).movable(u64::MAX));
    assert_eq!(refused, Err(AllocError::OutOfMemory(pageblock)));
    before.assert_unchanged(&w.zone);
    // The reserve is the unmovable fallback's: it claims the pageblock whole.
    let pfn = w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
    let f = w.zone.fragmentation();
    assert_eq!((f.fallbacks.claims, f.fallbacks.unmovable_steals), (1, 0));
    assert_eq!(
        w.zone.pageblock_type(pfn).unwrap().0,
        MigrateType::Unmovable
    );
    w.verify();
}

#[test]
fn with_a_pageblock_reserve_a_huge_page_compacts_until_the_reserve_is_free_too() {
    // Movable pages in every frame but every fourth: 32 frames free, none in a free
    // pageblock. A huge page needs its pageblock and the reserve's: direct compaction
    // empties two pageblocks (24 movable pages into the holes of the other six).
    let mut w = World::configured(128, 1, |cfg| cfg.with_pageblock_reserve(true));
    for _ in 0..128 {
        w.alloc(0, Order::ZERO, MigrateType::Movable).unwrap();
    }
    let kept: Vec<u64> = w
        .movable
        .iter()
        .filter(|(_, (pfn, _))| pfn.0 % 4 == 0)
        .map(|(&k, _)| k)
        .collect();
    for key in kept {
        let (pfn, order) = w.movable.remove(&key).unwrap();
        // SAFETY: the model held the block and forgot it just now.
        unsafe { w.zone.free_pages(0, pfn, order) }.unwrap();
    }
    w.zone.drain_all();
    assert_eq!(w.zone.fragmentation().free_in_pageblocks, 0);
    let pageblock = Order::new(4).unwrap();
    let mut mover = World::mover(&w.memory, &mut w.movable, 0);
    let got = w.zone.cpu(0).unwrap().alloc_raw(
        AllocRequest::order(pageblock)
            .movable(u64::MAX)
            .compact(&mut mover),
    );
    assert!(got.is_ok(), "{got:?}");
    // What is left free is the reserve, a whole pageblock.
    assert_eq!(w.zone.fragmentation().free_in_pageblocks, 16);
    w.zone.check().unwrap();
}

#[test]
fn a_cma_reservation_is_no_pageblock_reserve_but_huge_pages_may_take_it() {
    // 256 frames (sixteen pageblocks; the min watermark is two), four of them a CMA
    // reservation. Huge pages take the reservation and the other pageblocks but the two
    // the reserve keeps: CMA blocks do not count for it (no fallback can claim them).
    let mut w = World::configured(256, 1, |cfg| cfg.with_pageblock_reserve(true));
    assert_eq!(w.zone.fragmentation().watermarks.min, 32);
    let area = w.reserve_cma(64).unwrap();
    let pageblock = Order::new(4).unwrap();
    let mut in_cma = 0;
    let mut huge = 0;
    while let Some(pfn) = w.alloc(0, pageblock, MigrateType::Movable) {
        huge += 1;
        in_cma += u64::from(area.contains(pfn, 16));
    }
    assert_eq!((huge, in_cma), (14, 4));
    assert_eq!(w.zone.fragmentation().free_in_pageblocks, 32);
    // Both reserved pageblocks go to unmovable fallbacks, claimed whole.
    for _ in 0..2 {
        let mut first = None;
        for _ in 0..16 {
            let pfn = w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
            first.get_or_insert(pfn);
        }
        assert_eq!(
            w.zone.pageblock_type(first.unwrap()).unwrap().0,
            MigrateType::Unmovable
        );
    }
    assert_eq!(w.zone.fragmentation().fallbacks.unmovable_steals, 0);
    w.verify();
}

/// 64 frames (four pageblocks of 16) in defrag mode, with or without the pageblock reserve:
/// a reclaimable pageblock and three movable ones, four frames free in the first and four
/// in the last, no pageblock free.
fn reclaimable_and_movable_holes(reserve: bool) -> World {
    let mut w = World::configured(64, 1, |cfg| {
        cfg.with_defrag_mode(true).with_pageblock_reserve(reserve)
    });
    for _ in 0..16 {
        w.alloc(0, Order::ZERO, MigrateType::Reclaimable).unwrap();
    }
    for _ in 0..48 {
        w.alloc(0, Order::ZERO, MigrateType::Movable).unwrap();
    }
    assert_eq!(w.zone.free_pages_total(), 0);
    // Four frames of the reclaimable pageblock and four of the last movable one freed.
    let reclaimable: Vec<usize> = (0..w.fixed.len()).rev().take(4).collect();
    for k in reclaimable {
        let (_, pfn, order) = w.fixed.swap_remove(k);
        assert_eq!(
            w.zone.pageblock_type(pfn).unwrap().0,
            MigrateType::Reclaimable
        );
        // SAFETY: the model held the block and forgot it just now.
        unsafe { w.zone.free_pages(0, pfn, order) }.unwrap();
    }
    for _ in 0..4 {
        let (_, (pfn, order)) = w.movable.pop_last().unwrap();
        // SAFETY: as above.
        unsafe { w.zone.free_pages(0, pfn, order) }.unwrap();
    }
    w.zone.drain_all();
    assert_eq!(w.zone.buddy_pages(), 8);
    assert_eq!(w.zone.fragmentation().free_in_pageblocks, 0);
    w.zone.reset_counters();
    w
}

#[test]
fn with_a_pageblock_reserve_unmovable_pages_take_reclaimable_holes_never_movable_ones() {
    // With the reserve: the unmovable pages take the reclaimable pageblock's four free
    // frames at once (no reclaim, no compaction: a steal between the two pins no pageblock
    // a huge page could have), then, with only movable holes left, reclaim and compaction
    // run before anything else.
    let mut w = reclaimable_and_movable_holes(true);
    for _ in 0..4 {
        let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Unmovable);
        let pfn = got.unwrap();
        assert!(asks.is_empty(), "reclaim asked for {asks:?}");
        assert_eq!(
            w.zone.pageblock_type(pfn).unwrap().0,
            MigrateType::Reclaimable
        );
    }
    let f = w.zone.fragmentation().fallbacks;
    assert_eq!((f.unmovable_steals, f.steals_from_movable), (4, 0));
    let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Unmovable);
    assert!(got.is_some() && !asks.is_empty(), "{got:?} {asks:?}");
    assert_eq!(w.zone.fragmentation().fallbacks.steals_from_movable, 0);
    w.verify();
    // Defrag mode alone (Linux's) takes no single page from another type before reclaim
    // and compaction have had their turn.
    let mut w = reclaimable_and_movable_holes(false);
    let (got, asks) = w.alloc_hooked(0, Order::ZERO, MigrateType::Unmovable);
    assert!(got.is_some() && !asks.is_empty(), "{got:?} {asks:?}");
    w.verify();
}

#[test]
fn a_pageblock_reserve_is_defrag_modes() {
    use buddy_sim::ConfigError;
    let cfg = ZoneConfig::new(Pfn(START), 128);
    assert!(cfg.with_pageblock_reserve(true).defrag_mode);
    let without = ZoneConfig {
        pageblock_reserve: true,
        ..cfg
    };
    assert_eq!(
        without.validate(),
        Err(ConfigError::ReserveWithoutDefragMode)
    );
    assert!(common::zone(without).is_err());
}

#[test]
fn a_movable_only_zone_refuses_other_kinds_and_changes_nothing() {
    let mut w = World::configured(64, 1, ZoneConfig::movable_only);
    w.alloc(0, Order::ZERO, MigrateType::Movable).unwrap();
    let before = Before::of(&w.zone);
    for mt in [MigrateType::Unmovable, MigrateType::Reclaimable] {
        for order in [0, 3, 5] {
            let r = w
                .zone
                .cpu(0)
                .unwrap()
                .alloc_raw(AllocRequest::order(Order::new(order).unwrap()).kind(mt));
            assert_eq!(r, Err(AllocError::MovableOnly(mt)));
        }
    }
    // Frozen blocks are unmovable: refused too, their lists never refilled.
    for order in [0, 3, 5] {
        let r = w
            .zone
            .cpu(0)
            .unwrap()
            .alloc_frozen_pages(Order::new(order).unwrap());
        assert_eq!(r, Err(AllocError::MovableOnly(MigrateType::Unmovable)));
    }
    before.assert_unchanged(&w.zone);
    // Contiguous runs are what the region is for: movable pages move out of their way.
    w.contig_pages(32, Order::new(5).unwrap(), false).unwrap();
    w.verify();
}

/// A zone of 256 frames with frames 64..128 (four pageblocks) reserved for CMA.
fn with_reservation() -> World {
    let mut w = World::new(256, 1);
    let area = {
        let mut mover = World::mover(&w.memory, &mut w.movable, 0);
        w.zone
            .reserve_cma_at(0, Pfn(START + 64), 64, &mut mover)
            .unwrap()
    };
    assert_eq!((area.base(), area.pages()), (Pfn(START + 64), 64));
    w.cma = Some(area);
    w.zone.check().unwrap();
    w
}

#[test]
fn a_cma_reservation_lends_its_memory_to_movable_allocations_only() {
    let mut w = with_reservation();
    let stats = w.zone.stats();
    assert_eq!((stats.cma_reserved, stats.cma_free), (64, 64));
    // Unmovable and reclaimable allocations fill everything but the reservation, and then
    // fail: no fallback reaches it.
    let mut taken = 0;
    while w
        .alloc(
            0,
            Order::ZERO,
            [MigrateType::Unmovable, MigrateType::Reclaimable][taken % 2],
        )
        .is_some()
    {
        taken += 1;
    }
    assert_eq!(taken, 192);
    assert_eq!(w.zone.stats().cma_free, 64);
    w.verify();
    // A contiguous run outside the reservation finds nothing: its frames are its owner's.
    assert!(matches!(
        w.contig_pages(16, Order::ZERO, false),
        Err(AllocError::OutOfMemory(_))
    ));
    // Movable allocations borrow it.
    for _ in 0..8 {
        let pfn = w
            .alloc(0, Order::new(3).unwrap(), MigrateType::Movable)
            .unwrap();
        assert!(w.in_cma(pfn, 8));
    }
    assert_eq!(w.zone.stats().cma_free, 0);
    // The owner's run needs its borrowers moved, and nothing outside is free: it fails,
    // moving nothing.
    let before = Before::of(&w.zone);
    assert!(matches!(
        w.cma_alloc(64, Order::ZERO),
        Err(AllocError::OutOfMemory(_))
    ));
    before.assert_unchanged(&w.zone);
    // With room outside, the borrowers move out (data and all) and the run comes back.
    while !w.fixed.is_empty() {
        w.free(0, w.movable.len());
    }
    let pfn = w.cma_alloc(64, Order::new(6).unwrap()).unwrap();
    assert_eq!(pfn, Pfn(START + 64));
    w.verify();
    assert!(w.movable.values().all(|&(p, o)| !w.in_cma(p, o.pages())));
    // Freed, it is the reservation's again.
    w.free(0, w.movable.len() + w.fixed.len());
    w.zone.drain_all();
    assert_eq!(w.zone.stats().cma_free, 64);
    w.verify();
    w.free_everything();
}

#[test]
fn movable_allocations_use_the_reservation_first_once_it_holds_most_free_memory() {
    let mut w = with_reservation();
    // 64 of 256 free frames are in the reservation: movable allocations take their own
    // pageblocks first.
    let pfn = w
        .alloc(0, Order::new(4).unwrap(), MigrateType::Movable)
        .unwrap();
    assert!(!w.in_cma(pfn, 16));
    // Fill all but 32 frames outside: the reservation holds 64 of 96 free frames, over
    // half, and the next movable allocation is served from it (Linux's balance).
    while w.zone.free_pages_total() - 64 > 32 {
        w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
    }
    let pfn = w
        .alloc(0, Order::new(4).unwrap(), MigrateType::Movable)
        .unwrap();
    assert!(w.in_cma(pfn, 16));
    w.verify();
    w.free_everything();
}

#[test]
fn a_reservation_is_made_around_movable_pages_and_refused_around_pinned_ones() {
    let mut w = World::new(256, 1);
    for _ in 0..32 {
        w.alloc(0, Order::ZERO, MigrateType::Movable).unwrap();
    }
    // The movable pages at the zone's bottom move out of the way.
    let area = w.reserve_cma(32).unwrap();
    assert_eq!(area.pages(), 32);
    w.verify();
    assert!(w.movable.values().all(|&(p, o)| !w.in_cma(p, o.pages())));
    // An unmovable page in the way refuses a reservation at that frame, changing nothing;
    // so does a frame already reserved, and a range that is not whole pageblocks.
    let pinned = w.alloc(0, Order::ZERO, MigrateType::Unmovable).unwrap();
    let at = Pfn(pinned.0 & !15);
    let before = Before::of(&w.zone);
    let mut refuse = |_: &Migration| false;
    assert_eq!(
        w.zone.reserve_cma_at(0, at, 16, &mut refuse),
        Err(ContigError::Busy(pinned))
    );
    assert_eq!(
        w.zone.reserve_cma_at(0, area.base(), 16, &mut refuse),
        Err(ContigError::InCma(area.base()))
    );
    assert_eq!(
        w.zone.reserve_cma_at(0, Pfn(START + 192), 8, &mut refuse),
        Err(ContigError::Misaligned {
            pfn: Pfn(START + 200),
            order: Order::new(4).unwrap()
        })
    );
    before.assert_unchanged(&w.zone);
    // Lengths the zone cannot hold, up to the end of the pfn space, and a range outside it.
    for nr in [0, 4096, u64::MAX - 3, u64::MAX] {
        let r = w.zone.reserve_cma(0, nr, Order::ZERO, &mut refuse);
        assert!(
            matches!(r, Err(AllocError::ZeroPages | AllocError::OutOfMemory(_))),
            "{nr}: {r:?}"
        );
    }
    assert_eq!(
        w.zone
            .reserve_cma_at(0, Pfn(u64::MAX - 15), 16, &mut refuse),
        Err(ContigError::Overflow)
    );
    assert_eq!(
        w.zone
            .reserve_cma_at(0, Pfn(u64::MAX - 31), 16, &mut refuse),
        Err(ContigError::OutOfZone(Pfn(u64::MAX - 31)))
    );
    before.assert_unchanged(&w.zone);
    // A request naming an area that is not a reservation of this zone, or naming one
    // without being contiguous, is refused.
    let other = common::zone(ZoneConfig {
        pageblock_order: Order::new(4).unwrap(),
        ..ZoneConfig::new(Pfn(START + 4096), 64).with_max_order(Order::new(6).unwrap())
    })
    .unwrap();
    let theirs = other.reserve_cma(0, 16, Order::ZERO, &mut refuse).unwrap();
    let r = w.zone.cpu(0).unwrap().alloc_raw(
        AllocRequest::frames(4)
            .contiguous(&mut refuse)
            .from_cma(theirs),
    );
    assert_eq!(r, Err(AllocError::NotCma(theirs.base())));
    let r = w
        .zone
        .cpu(0)
        .unwrap()
        .alloc_raw(AllocRequest::frames(4).from_cma(area));
    assert_eq!(
        r,
        Err(AllocError::Conflict(
            buddy_sim::RequestConflict::CmaWithoutContiguous
        ))
    );
    before.assert_unchanged(&w.zone);
    w.free_everything();
}
