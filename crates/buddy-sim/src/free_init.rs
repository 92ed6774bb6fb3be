//! What a zone writes into the blocks freed to it, as Linux's debugging options do:
//! `init_on_free` clears every block a caller frees before it goes back, so no data outlives
//! its owner in free memory, and here (beyond Linux) it goes back known zero, so that a
//! zeroed allocation that takes it clears nothing; page poisoning (`page_poison=1`) writes
//! [`PAGE_POISON`] over every free block and checks, on allocation, that the block still
//! reads it: a byte that differs was written after its block was freed (a use after free),
//! and the zone names the first one ([`Zone::poison_corruption`]). Both write through the
//! embedder's memory ([`FrameClearer`]): `init_on_free` with zero-core's policy for the
//! block's size, poisoning with a `memset` (zero-core clears, it does not fill).

use core::fmt;

use crate::debugging::{DEBUG_INIT_ON_FREE, DEBUG_POISON};
use crate::events::PerCpuSet;
use crate::frame::Frame;
use crate::memory::{FrameClearer, OffsetMap};
use crate::sync::Mutex;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use lock_api::RawMutex;
use mm_types::Pfn;
use zero_core::NoResched;

/// The byte page poisoning writes over free memory (Linux's `PAGE_POISON`).
pub const PAGE_POISON: u8 = 0xaa;

/// A use after free that page poisoning found: the first block handed out since poisoning
/// was on whose bytes did not all read [`PAGE_POISON`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoisonCorruption {
    /// The block's first frame.
    pub pfn: Pfn,
    /// Its order.
    pub order: Order,
    /// The offset of the first byte that differs, from the block's first byte.
    pub offset: u64,
    /// What that byte read.
    pub found: u8,
    /// Blocks found corrupted so far, this one included.
    pub blocks: u64,
}

impl fmt::Display for PoisonCorruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pagealloc: memory corruption: byte {:#x} of the order-{} block at pfn {:#x} reads {:#04x}, not {PAGE_POISON:#04x} ({} corrupted blocks)",
            self.offset,
            self.order.get(),
            self.pfn.0,
            self.found,
            self.blocks
        )
    }
}

/// Why [`Zone::set_page_poison`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoisonError {
    /// Frames were added to the zone already: poisoning must be on before the first (as
    /// Linux's `page_poison=1` is a boot option), so that every free block reads the
    /// poison.
    MemoryAdded,
    /// `init_on_free` is on: a freed block is either cleared or poisoned.
    InitOnFree,
}

impl fmt::Display for PoisonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MemoryAdded => "page poisoning must be on before memory is added to the zone",
            Self::InitOnFree => {
                "init_on_free is on: a freed block is cleared or poisoned, not both"
            }
        })
    }
}

impl core::error::Error for PoisonError {}

/// What a free writes, and through which memory.
#[derive(Clone, Copy, Debug)]
enum FreeInit {
    Zero,
    Poison,
}

/// A zone's free-time writes: the mode and clearer under a lock of their own (frees look
/// only while the zone's debugging switch has one of their bits set), and the first
/// corruption found.
pub(crate) struct FreeTimeInit<R> {
    mode: Mutex<R, Option<(FreeInit, FrameClearer<OffsetMap>)>>,
    corruption: Mutex<R, Option<PoisonCorruption>>,
}

impl<R: RawMutex> FreeTimeInit<R> {
    /// Off.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            mode: Mutex::new(None),
            corruption: Mutex::new(None),
        }
    }

    /// Off.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            mode: Mutex::new(None),
            corruption: Mutex::new(None),
        }
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Turns `init_on_free` on, clearing through `clearer` (whose memory maps every frame of
    /// the zone), or with `None` off (page poisoning, if on, stays on). While on, every
    /// block freed through the zone's frees (`free_pages`, `put_page`, the frozen and
    /// contiguous frees, `vfree`) and every block compaction moves out of is cleared before
    /// it is free again, and is free known zero ([`Zone::zeroed_pages`] counts it). A block
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
    /// every block freed (as [`Zone::set_init_on_free`] lists them) is filled with
    /// [`PAGE_POISON`], and every block a CPU allocates is checked to read it still; the
    /// first that does not is kept ([`Zone::poison_corruption`]) and handed out as usual,
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
