//! Memory that goes away at run time (Linux's `offline_pages`): a host takes memory back
//! from a guest (virtio-mem unplug, ballooning by blocks), or retires a failing DIMM.
//!
//! [`Zone::offline_range`] is [`Zone::alloc_contig_range`]'s five steps with another end:
//! isolate the pageblocks, drain the per-cpu lists, migrate the movable allocations out
//! through the embedder's [`Migrate`] callback, and then, instead of handing the frames to a
//! caller, make every one of them a hole again: reserved, no longer counted as usable memory
//! ([`Zone::present_pages`]) and forgotten by the table of added ranges, so that
//! [`Zone::add_memory`] (or [`Zone::add_zeroed_memory`], for memory the embedder knows reads
//! zero when it comes back) brings it back online. Pages leaked by hwpoison go with the rest:
//! that is how a failing DIMM leaves. An unmovable or pinned allocation, a move the callback
//! refuses, or no room outside for a movable block fails the whole offline, and the isolation
//! is undone (blocks already moved stay where they went: their owners saw the moves).
//!
//! Known-zero state does not survive: an offlined frame is a hole, and memory added again is
//! not known zero unless the caller says so.

use crate::error::contig::ContigError;
use crate::frame_storage::FrameStorage;
use crate::migrate::Migrate;
use crate::mobility::contig_alloc::Take;
use crate::zone::Zone;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Initializes every deferred frame, and waits for the chunks other CPUs are
    /// initializing.
    fn init_all_deferred(&self) {
        while self.init_deferred(u64::MAX) > 0 {}
        while self.lock_zone().deferred().in_flight > 0 {
            crate::sync::spin_loop();
        }
    }
}

#[cfg(all(test, feature = "alloc", feature = "spin", feature = "testing"))]
// The tests free pages they allocated from zones that no clearer or migration writes.
#[allow(unsafe_code)]
mod tests {
    use crate::boxed::BoxedZone;
    use crate::error::contig::ContigError;
    use crate::frame::FrameState;
    use crate::migrate::Migration;
    use crate::migratetype::MigrateType;
    use crate::types::Order;
    use crate::zone::config::ZoneConfig;
    use mm_types::Pfn;
    use std::vec::Vec;

    const START: Pfn = Pfn(0x1000);

    fn o(order: u8) -> Order {
        Order::new(order).unwrap()
    }

    /// `pages` frames in pageblocks of 16, MAX_ORDER 6 (blocks of 64), two CPUs.
    fn config(pages: u64) -> ZoneConfig {
        ZoneConfig {
            cpus: 2,
            pageblock_order: o(4),
            ..ZoneConfig::new(START, pages).with_max_order(o(6))
        }
    }

    fn zone(pages: u64) -> BoxedZone {
        BoxedZone::new_boxed(config(pages)).unwrap()
    }

    fn refuse(_: &Migration) -> bool {
        false
    }

    #[test]
    fn an_offlined_range_is_never_handed_out_and_comes_back_online() {
        let z = zone(256);
        let range = Pfn(START.0 + 64);
        assert_eq!(z.offline_range(0, range, 96, &mut refuse), Ok(0));
        z.check().unwrap();
        assert_eq!(z.present_pages(), 256 - 96);
        assert_eq!(z.frame(range).unwrap().state, FrameState::Reserved);
        // Every frame the zone still has, allocated: none from the range.
        let mut got = Vec::new();
        while let Ok(p) = z.alloc_pages(1, Order::ZERO) {
            assert!(!(range.0..range.0 + 96).contains(&p.0), "{p} handed out");
            got.push(p);
        }
        assert_eq!(got.len() as u64, 256 - 96);
        // Offline twice: a hole now.
        assert_eq!(
            z.offline_range(0, range, 1, &mut refuse),
            Err(ContigError::Hole(range))
        );
        for p in got {
            // SAFETY: this test's zone and pages; nothing writes a frame.
            unsafe { z.free_pages(1, p, Order::ZERO) }.unwrap();
        }
        z.add_memory(range, 96).unwrap();
        z.drain_all();
        z.check().unwrap();
        assert_eq!(z.present_pages(), 256);
        assert_eq!(
            z.buddy_blocks_per_order()[6],
            4,
            "the zone is not whole again"
        );
    }

    #[test]
    fn an_unmovable_page_in_the_way_fails_the_offline_and_undoes_the_isolation() {
        let z = zone(64);
        let p = z.alloc_pages(0, Order::ZERO).unwrap();
        let before = crate::testing::Snapshot::of(&z);
        let types: Vec<_> = (0..4)
            .map(|b| z.pageblock_type(Pfn(START.0 + 16 * b)).unwrap())
            .collect();
        let err = z.offline_range(0, START, 64, &mut refuse);
        assert_eq!(err, Err(ContigError::Busy(p)));
        z.check().unwrap();
        assert_eq!(crate::testing::Snapshot::of(&z), before);
        for (b, t) in types.into_iter().enumerate() {
            assert_eq!(z.pageblock_type(Pfn(START.0 + 16 * b as u64)).unwrap(), t);
        }
        assert_eq!(z.present_pages(), 64);
    }

    #[test]
    fn movable_pages_move_out_and_a_refused_move_fails_the_offline() {
        let z = zone(128);
        let pages: Vec<Pfn> = (0..8)
            .map(|k| z.alloc_movable(0, o(1), k).unwrap())
            .collect();
        let first = pages.iter().min().copied().unwrap();
        let range = Pfn(first.0 & !15);
        let inside = |p: Pfn| (range.0..range.0 + 32).contains(&p.0);
        assert_eq!(
            z.offline_range(1, range, 32, &mut refuse),
            Err(ContigError::Busy(first))
        );
        assert_eq!(z.present_pages(), 128);
        let mut moves = Vec::new();
        let mut accept = |m: &Migration| {
            assert_eq!(m.order, o(1));
            moves.push((m.key, m.from, m.to));
            true
        };
        let moved = z.offline_range(1, range, 32, &mut accept).unwrap();
        let in_range = pages.iter().filter(|&&p| inside(p)).count();
        assert!(in_range > 0);
        assert_eq!((moved, moves.len()), (2 * in_range as u64, in_range));
        for &(key, from, to) in &moves {
            assert_eq!(pages[key as usize], from);
            assert!(!inside(to));
            assert_eq!(z.frame(to).unwrap().state, FrameState::Allocated);
            assert_eq!(z.pageblock_type(to).unwrap().0, MigrateType::Movable);
        }
        z.check().unwrap();
        assert_eq!(z.present_pages(), 96);
    }

    #[test]
    fn a_poisoned_page_leaves_with_its_range() {
        let z = zone(64);
        let p = z.alloc_pages(0, Order::ZERO).unwrap();
        z.mark_hwpoison(p).unwrap();
        // The free leaks it (the free-time check finds the poison).
        // SAFETY: this test's page; nothing writes a frame.
        unsafe { z.free_pages(0, p, Order::ZERO) }.unwrap();
        assert_eq!(z.leaked_pages(), 1);
        let block = Pfn(p.0 & !15);
        assert_eq!(z.offline_range(0, block, 16, &mut refuse), Ok(0));
        assert_eq!(z.leaked_pages(), 0);
        z.check().unwrap();
        z.add_memory(block, 16).unwrap();
        z.drain_all();
        z.check().unwrap();
        assert_eq!(z.buddy_blocks_per_order()[6], 1);
    }

    #[test]
    fn deferred_memory_is_initialized_before_it_goes_offline() {
        let cfg = ZoneConfig {
            eager_pages: 16,
            ..config(256)
        };
        let z = BoxedZone::new_boxed(cfg).unwrap();
        assert!(z.deferred_pages() > 0);
        let range = Pfn(START.0 + 128);
        assert_eq!(z.offline_range(0, range, 64, &mut refuse), Ok(0));
        assert_eq!(z.deferred_pages(), 0);
        assert_eq!(z.present_pages(), 192);
        z.check().unwrap();
    }
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Takes the usable frames `[pfn, pfn + nr)` offline (Linux's `offline_pages`), moving
    /// the movable allocations in the range out through `migrate` (see the module docs):
    /// afterwards no allocation can hand out a frame of the range, and every frame of it
    /// reads as [`FrameState::Reserved`](crate::FrameState::Reserved) until
    /// [`Zone::add_memory`] brings it back. Deferred memory is initialized first (all of it:
    /// an offline is rare, and a deferred frame cannot be told from a hole). Other CPUs may
    /// allocate and free meanwhile; allocations never see the range once its pageblocks are
    /// isolated. Returns the frames migrated.
    ///
    /// # Errors
    /// [`ContigError::Busy`] for a frame that is allocated and not movable, pinned, refused by
    /// `migrate`, on another CPU's per-cpu list (through a `LocalCpu`), or in a pageblock a
    /// contiguous allocation or another offline has isolated; [`ContigError::Hole`] for a
    /// frame that is not usable memory (offline already, never added);
    /// [`ContigError::OutOfMemory`] when a movable block finds no free block outside the
    /// range; [`ContigError::RangesFull`] when the table of added ranges cannot record the
    /// cut; [`ContigError::ZeroPages`], [`ContigError::OutOfZone`], [`ContigError::Overflow`].
    /// Nothing is offlined then and the pageblocks are as they were;
    /// what a failed offline may have changed (drained per-cpu lists, deferred frames
    /// initialized, blocks moved before a later one failed) is listed at [`BuddyError`](crate::BuddyError).
    pub fn offline_range(
        &self,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<u64, ContigError> {
        let zone = self.zone;
        zone.map().range(pfn, nr)?;
        zone.init_all_deferred();
        zone.contig_range(self.lists(), pfn, nr, Take::Offline, migrate)
    }
}
