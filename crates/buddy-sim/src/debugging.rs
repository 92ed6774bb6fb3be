//! The zone's debugging switch: one word that says which debugging features are on (fault
//! injection, page_owner, `init_on_free`, page poisoning), so that every allocation and
//! every free reads one word for all of them and, while it is zero, does nothing else for
//! them; and the zone's entry points of fault injection, `init_on_free` and page
//! poisoning. Each feature's state and values are in its own module (`fail_page_alloc`,
//! `free_init`); page_owner's are `page_owner`'s.

use crate::fail_page_alloc::FailPageAlloc;
use crate::frame_storage::FrameStorage;
use crate::free_init::{FreeInit, PAGE_POISON, PoisonCorruption, PoisonError};
use crate::memory::{FrameClearer, OffsetMap};
use crate::migratetype::MigrateType;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use core::sync::atomic::Ordering;
use lock_api::RawMutex;
use mm_types::Pfn;
use zero_core::NoResched;

/// Fault injection is armed ([`Zone::set_fail_page_alloc`](crate::Zone::set_fail_page_alloc)).
pub(crate) const DEBUG_FAULT: u32 = 1;
/// page_owner records owners ([`Zone::enable_page_owner`](crate::Zone::enable_page_owner)).
pub(crate) const DEBUG_OWNER: u32 = 1 << 1;
/// Frees clear what they free ([`Zone::set_init_on_free`](crate::Zone::set_init_on_free)).
pub(crate) const DEBUG_INIT_ON_FREE: u32 = 1 << 2;
/// Frees poison what they free, allocations check it ([`Zone::set_page_poison`](crate::Zone::set_page_poison)).
pub(crate) const DEBUG_POISON: u32 = 1 << 3;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Whether any debugging feature is on (page_owner, fault injection, poisoning,
    /// init_on_free): the zone then wants every allocation and free through its checked
    /// paths, and a cache of blocks in front of it ([`Zone::cache_frozen`]) gives its blocks
    /// back. A relaxed load: turning one on is not ordered with allocations on other CPUs,
    /// as Linux's debugfs writes are not.
    #[inline(always)]
    pub fn debugging(&self) -> bool {
        self.debug.load(Ordering::Relaxed) != 0
    }

    /// Whether debugging feature `bit` is on.
    #[inline]
    pub(crate) fn debugging_with(&self, bit: u32) -> bool {
        self.debug.load(Ordering::Relaxed) & bit != 0
    }

    /// Turns debugging feature `bit` on or off.
    pub(crate) fn set_debugging(&self, bit: u32, on: bool) {
        if on {
            self.debug.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.debug.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// What an allocation does while debugging once it has the block of `order` at `idx`:
    /// its owner recorded, and with page poisoning the poison checked.
    pub(crate) fn allocated_debugged(
        &self,
        cpu: Option<CpuLists<'_, R>>,
        idx: FrameIdx,
        order: Order,
        mt: MigrateType,
    ) {
        self.record_owner(cpu, idx, order, mt);
        if self.debugging_with(DEBUG_POISON) {
            self.check_poison(idx, order);
        }
    }

    /// What a free does while debugging, before the block of `order` at `idx` goes back:
    /// its owner record cleared, and with `init_on_free` the block cleared; whether it is
    /// zero now.
    #[cold]
    #[inline(never)]
    pub(crate) fn free_debugged(&self, idx: FrameIdx, order: Order) -> bool {
        self.clear_owner(idx, order);
        self.init_freed(idx, order)
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Arms fault injection with `attr` (its counts start afresh), or with `None` disarms
    /// it. While armed, a block allocation it picks fails with
    /// [`AllocError::OutOfMemory`](crate::AllocError::OutOfMemory), as one that found no
    /// memory does, before it touches anything: the zone reads exactly as before the call.
    /// It decides at each attempt on the zone: block allocations of every kind (frozen,
    /// zeroed, exact runs' blocks, `vmalloc`'s pages), and a [`NodeSet`](crate::NodeSet)'s
    /// attempt on this zone (its first pass and its slow path are two attempts). Contiguous
    /// runs (`alloc_contig_pages` and the rest), as in Linux, never fail on purpose.
    pub fn set_fail_page_alloc(&self, attr: Option<FailPageAlloc>) {
        self.fault.arm(attr);
        self.set_debugging(DEBUG_FAULT, attr.is_some());
    }

    /// Whether fault injection fails a valid allocation of `order` of kind `mt` on purpose
    /// now: an order the zone serves and a kind it takes (else the call fails for what is
    /// wrong with it, as without fault injection). Called while debugging only.
    #[inline]
    pub(crate) fn injects_failure(&self, order: Order, mt: MigrateType) -> bool {
        self.debugging_with(DEBUG_FAULT)
            && order <= self.cfg.max_order
            && self.check_kind(mt).is_ok()
            && self.fault.decide(order, mt)
    }

    /// Failures fault injection has injected since the zone was built (arming it again does
    /// not reset this count).
    pub fn injected_failures(&self) -> u64 {
        self.fault.injected()
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Turns `init_on_free` on, clearing through `clearer` (whose memory maps every frame of
    /// the zone), or with `None` off (page poisoning, if on, stays on). While on, every
    /// block freed through the zone's frees (`free_pages`, `put_page`, the frozen and
    /// contiguous frees, `vfree`) and every block compaction moves out of is cleared before
    /// it is free again, and is free known zero ([`Zone::zeroed_pages`](crate::Zone::zeroed_pages) counts it). A block
    /// that cannot be reached through the clearer's memory, or fails to clear, goes back as
    /// not known zero. Turning it on turns page poisoning off.
    ///
    /// ```
    /// use buddy_sim::{FrameClearer, Order, Pfn, StaticZone};
    /// const START: Pfn = Pfn(0x8_0000);
    /// #[repr(C, align(4096))]
    /// struct Page([u8; 4096]);
    /// static ZONE: StaticZone<16, 1> = StaticZone::new_static_at(START);
    /// let mut ram: Vec<Page> = (0..16).map(|_| Page([0xa5; 4096])).collect();
    /// // SAFETY: frame `START + i` is `ram[i]`, which nothing else uses while the zone runs.
    /// let clearer = unsafe { FrameClearer::direct_map(START, ram.as_mut_ptr().cast()) }?;
    /// ZONE.set_init_on_free(Some(clearer));
    /// let page = ZONE.alloc_pages(0, Order::ZERO)?;
    /// assert_eq!(ZONE.zeroed_pages(), 0);
    /// // SAFETY: allocated above, freed once, not used after.
    /// unsafe { ZONE.free_pages(0, page, Order::ZERO) }?;
    /// assert_eq!(ZONE.zeroed_pages(), 1);
    /// let i = (page.0 - START.0) as usize;
    /// assert!(ram[i].0.iter().all(|&b| b == 0));
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    pub fn set_init_on_free(&self, clearer: Option<FrameClearer<OffsetMap>>) {
        let mut mode = self.free_init.mode.lock();
        match clearer {
            Some(c) => *mode = Some((FreeInit::Zero, c)),
            None if matches!(*mode, Some((FreeInit::Zero, _))) => *mode = None,
            None => {}
        }
        self.set_debugging(DEBUG_POISON, false);
        self.set_debugging(DEBUG_INIT_ON_FREE, clearer.is_some());
    }

    /// Turns page poisoning on, writing and checking through `clearer` (whose memory maps
    /// every frame of the zone), for good: every block added to the zone from now on and
    /// every block freed (as [`Zone::set_init_on_free`](crate::Zone::set_init_on_free) lists them) is filled with
    /// [`PAGE_POISON`], and every block a CPU allocates is checked to read it still; the
    /// first that does not is kept ([`Zone::poison_corruption`](crate::Zone::poison_corruption)) and handed out as usual,
    /// as Linux reports and goes on. While on, nothing is known zero (zeroed allocations
    /// clear what they take), background zeroing clears nothing and free page reporting
    /// reports nothing (a discarded block would read zero, not the poison).
    ///
    /// ```
    /// use buddy_sim::{FrameClearer, Order, Pfn, StaticZone, ZoneConfig};
    /// const START: Pfn = Pfn(0x8_0000);
    /// #[repr(C, align(4096))]
    /// struct Page([u8; 4096]);
    /// static ZONE: StaticZone<16, 1> = StaticZone::new_static_empty(ZoneConfig::new(START, 16));
    /// let mut ram: Vec<Page> = (0..16).map(|_| Page([0; 4096])).collect();
    /// let base = ram.as_mut_ptr().cast::<u8>();
    /// // SAFETY: frame `START + i` is `ram[i]`, which only the zone and its owners use.
    /// let clearer = unsafe { FrameClearer::direct_map(START, base) }?;
    /// ZONE.set_page_poison(clearer)?;
    /// ZONE.add_memory(START, 16)?;
    /// let block = ZONE.alloc_pages(0, Order::new(4)?)?; // the whole zone
    /// // SAFETY: allocated above, freed once.
    /// unsafe { ZONE.free_pages(0, block, Order::new(4)?) }?;
    /// // A use after free: byte 100 of frame 3 is written after the block was freed.
    /// unsafe { base.add(3 * 4096 + 100).write(7) };
    /// assert_eq!(ZONE.poison_corruption(), None);
    /// let again = ZONE.alloc_pages(0, Order::new(4)?)?;
    /// let found = ZONE.poison_corruption().unwrap();
    /// assert_eq!((found.pfn, found.offset, found.found), (again, 3 * 4096 + 100, 7));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`PoisonError::MemoryAdded`] once frames were added, [`PoisonError::InitOnFree`]
    /// while `init_on_free` is on; nothing changes then.
    pub fn set_page_poison(&self, clearer: FrameClearer<OffsetMap>) -> Result<(), PoisonError> {
        // The zone lock first, then the mode's: the order `add_memory` takes them in.
        let free = self.lock_zone();
        let mut mode = self.free_init.mode.lock();
        if matches!(*mode, Some((FreeInit::Zero, _))) {
            return Err(PoisonError::InitOnFree);
        }
        if free.present() > 0 || free.deferred().pages > 0 || free.count().pages > 0 {
            return Err(PoisonError::MemoryAdded);
        }
        *mode = Some((FreeInit::Poison, clearer));
        self.set_debugging(DEBUG_POISON, true);
        Ok(())
    }

    /// The first use after free page poisoning found, and how many corrupted blocks so far.
    pub fn poison_corruption(&self) -> Option<PoisonCorruption> {
        *self.free_init.corruption.lock()
    }

    /// Whether page poisoning is on.
    #[inline]
    pub(crate) fn poisoning(&self) -> bool {
        self.debugging_with(DEBUG_POISON)
    }

    /// The clearer of the free-time writes in force.
    fn free_init_mode(&self) -> Option<(FreeInit, FrameClearer<OffsetMap>)> {
        *self.free_init.mode.lock()
    }

    /// What a free writes into the block of `order` at `idx`, which it just gave the zone
    /// (nobody else reaches it): `init_on_free` clears it, poisoning fills it; whether it
    /// is zero now. Called while debugging only.
    pub(crate) fn init_freed(&self, idx: FrameIdx, order: Order) -> bool {
        if !self.debugging_with(DEBUG_INIT_ON_FREE | DEBUG_POISON) {
            return false;
        }
        let pfn = self.map().pfn(idx);
        // The block is the zone's (a free handed it over; the `FrameMemory` contract lets
        // the zone write a free block), mapped contiguously from its first frame.
        match self.free_init_mode() {
            Some((FreeInit::Zero, c)) => c
                .clear_run(pfn, order.pages(), None, &mut NoResched)
                .is_ok(),
            Some((FreeInit::Poison, c)) => {
                let _ = c.fill(pfn, order, PAGE_POISON);
                false
            }
            None => false,
        }
    }

    /// Poisons the block of `order` at `pfn`, just added to the zone (its frames the
    /// zone's), while poisoning is on.
    pub(crate) fn poison_added(&self, pfn: Pfn, order: Order) {
        if let Some((FreeInit::Poison, c)) = self.free_init_mode() {
            let _ = c.fill(pfn, order, PAGE_POISON);
        }
    }

    /// Checks the block of `order` at `idx`, just taken for a caller, against the poison
    /// (poisoning on), keeping the first corruption found.
    pub(crate) fn check_poison(&self, idx: FrameIdx, order: Order) {
        let Some((FreeInit::Poison, c)) = self.free_init_mode() else {
            return;
        };
        let pfn = self.map().pfn(idx);
        if let Ok(Some((offset, found))) = c.first_difference(pfn, order, PAGE_POISON) {
            let mut kept = self.free_init.corruption.lock();
            let blocks = kept.map_or(0, |k| k.blocks) + 1;
            let first = kept.map_or(
                PoisonCorruption {
                    pfn,
                    order,
                    offset,
                    found,
                    blocks,
                },
                |k| k,
            );
            *kept = Some(PoisonCorruption { blocks, ..first });
        }
    }
}
