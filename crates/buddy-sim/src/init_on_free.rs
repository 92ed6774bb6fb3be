//! Linux's `init_on_free`: every block a caller frees is cleared before it goes back, so no
//! data outlives its owner in free memory, and here (beyond Linux) it goes back known zero,
//! so that a zeroed allocation that takes it clears nothing. Cleared through zero-core's
//! policy for the block's size ([`FrameClearer`]). Off until
//! [`Zone::set_init_on_free`] gives the zone a clearer.

use crate::debugging::DEBUG_INIT_ON_FREE;
use crate::events::PerCpuSet;
use crate::frame::Frame;
use crate::memory::{FrameClearer, OffsetMap};
use crate::sync::Mutex;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use lock_api::RawMutex;
use zero_core::NoResched;

/// A zone's `init_on_free` state: the clearer under a lock of its own (frees look at it
/// only while the zone's debugging switch has [`DEBUG_INIT_ON_FREE`] set).
pub(crate) struct InitOnFree<R> {
    clearer: Mutex<R, Option<FrameClearer<OffsetMap>>>,
}

impl<R: RawMutex> InitOnFree<R> {
    /// Off.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            clearer: Mutex::new(None),
        }
    }

    /// Off.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            clearer: Mutex::new(None),
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
    /// the zone), or with `None` off. While on, every block freed through the zone's frees
    /// (`free_pages`, `put_page`, the frozen and contiguous frees, `vfree`) and every block
    /// compaction moves out of is cleared before it is free again, and is free known zero
    /// ([`Zone::zeroed_pages`] counts it). A block that cannot be reached through the
    /// clearer's memory, or fails to clear, goes back as not known zero.
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
        let mut c = self.init_on_free.clearer.lock();
        *c = clearer;
        self.set_debugging(DEBUG_INIT_ON_FREE, clearer.is_some());
    }

    /// With `init_on_free` on, clears the block of `order` at `idx`, which a free just gave
    /// the zone (nobody else reaches it); whether it is zero now. Called while debugging
    /// only.
    pub(crate) fn init_freed(&self, idx: FrameIdx, order: Order) -> bool {
        if !self.debugging_with(DEBUG_INIT_ON_FREE) {
            return false;
        }
        let Some(clearer) = *self.init_on_free.clearer.lock() else {
            return false;
        };
        let pfn = self.map().pfn(idx);
        // The block is the zone's (a free handed it over; the `FrameMemory` contract lets
        // the zone write a free block), mapped contiguously from its first frame.
        clearer
            .clear_run(pfn, order.pages(), None, &mut NoResched)
            .is_ok()
    }
}
