//! The `x86_64` crate's frame-allocator traits over a zone (feature `x86_64`): what the
//! `x86_64` crate's `OffsetPageTable::map_to` and a kernel's own paging code ask for. 4 KiB
//! frames are order 0, 2 MiB frames order 9 and 1 GiB frames order 18 (a zone whose
//! `max_order` is below 18 has no 1 GiB frames: `allocate_frame` returns `None` and
//! [`X86FrameAllocator::last_error`] says why). Unlike an adapter that maps every failure to
//! `None`, this one keeps the zone's error.
#![allow(unsafe_code)]

use crate::error::buddy::BuddyError;
use crate::frame_storage::FrameStorage;
use crate::types::Order;
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;
use x86_64::PhysAddr;
use x86_64::structures::paging::{
    FrameAllocator, FrameDeallocator, PageSize, PhysFrame, Size1GiB, Size2MiB, Size4KiB,
};

/// Frames are 4 KiB on x86_64: frame `n` starts at physical address `n << 12`.
const FRAME: mm_types::PageSize = mm_types::PageSize::Size4KiB;

/// A zone as the `x86_64` crate's [`FrameAllocator`] and [`FrameDeallocator`] for 4 KiB,
/// 2 MiB and 1 GiB frames, allocating and freeing on one CPU's lists (make one per CPU: it
/// holds a shared reference to the zone, which is `Sync`).
///
/// ```
/// use buddy_sim::{BoxedZone, Order, Pfn, X86FrameAllocator, ZoneConfig};
/// use x86_64::structures::paging::{FrameAllocator, FrameDeallocator, PhysFrame, Size2MiB, Size4KiB};
///
/// // 8 MiB of frames from physical address 16 MiB.
/// let zone = BoxedZone::new_boxed(ZoneConfig::new(Pfn(0x1000), 2048))?;
/// let mut frames = X86FrameAllocator::new(&zone, 0);
/// let page: PhysFrame<Size4KiB> = frames.allocate_frame().expect("a 4 KiB frame");
/// let huge: PhysFrame<Size2MiB> = frames.allocate_frame().expect("a 2 MiB frame");
/// assert_eq!(huge.start_address().as_u64() % (2 << 20), 0);
/// // SAFETY: both frames were just allocated here and are not in use.
/// unsafe {
///     frames.deallocate_frame(page);
///     frames.deallocate_frame(huge);
/// }
/// assert_eq!(frames.last_error(), None);
/// // Freeing a frame twice changes nothing and is reported, not ignored.
/// unsafe { frames.deallocate_frame(page) };
/// assert!(matches!(frames.last_error(), Some(buddy_sim::BuddyError::DoubleFree(_))));
/// // No 1 GiB frame in an 8 MiB zone whose largest order is 10.
/// let none: Option<PhysFrame<x86_64::structures::paging::Size1GiB>> = frames.allocate_frame();
/// assert!(none.is_none());
/// assert!(matches!(frames.last_error(), Some(buddy_sim::BuddyError::OrderTooLarge { .. })));
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
#[derive(Debug)]
pub struct X86FrameAllocator<'z, F, P, R: RawMutex> {
    zone: &'z Zone<F, P, R>,
    cpu: usize,
    last_error: Option<BuddyError>,
}

impl<'z, F, P, R> X86FrameAllocator<'z, F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// The allocator of CPU `cpu` (its per-cpu lists) over `zone`.
    #[must_use]
    pub fn new(zone: &'z Zone<F, P, R>, cpu: usize) -> Self {
        Self {
            zone,
            cpu,
            last_error: None,
        }
    }

    /// Why the last `allocate_frame` returned `None` or the last `deallocate_frame` freed
    /// nothing (the traits have no room for an error); `None` after a call that succeeded.
    #[must_use]
    pub fn last_error(&self) -> Option<BuddyError> {
        self.last_error
    }

    /// The zone's order for frames of `S`.
    fn order<S: PageSize>() -> Result<Order, BuddyError> {
        let shift = S::SIZE.trailing_zeros() - FRAME.shift();
        Ok(Order::new(
            u8::try_from(shift).map_err(|_| BuddyError::Overflow)?,
        )?)
    }

    fn record<T>(&mut self, r: Result<T, BuddyError>) -> Option<T> {
        match r {
            Ok(v) => {
                self.last_error = None;
                Some(v)
            }
            Err(e) => {
                self.last_error = Some(e);
                None
            }
        }
    }

    fn allocate<S: PageSize>(&mut self) -> Option<PhysFrame<S>> {
        let r = Self::order::<S>().and_then(|order| {
            let pfn = self.zone.alloc_pages(self.cpu, order)?;
            frame_of::<S>(pfn).inspect_err(|_| {
                // Not nameable: give it back untouched, so nothing leaks.
                // SAFETY: just allocated by this call and handed to nobody.
                let _ = unsafe { self.zone.free_pages(self.cpu, pfn, order) };
            })
        });
        self.record(r)
    }

    /// # Safety
    /// `frame` is one this allocator handed out at this size, not freed since, and unused
    /// from now on ([`Zone::free_pages`]).
    unsafe fn deallocate<S: PageSize>(&mut self, frame: PhysFrame<S>) {
        let pfn = Pfn::containing(mm_types::PhysAddr(frame.start_address().as_u64()), FRAME);
        // SAFETY: the caller's contract.
        let r = Self::order::<S>().and_then(|order| {
            // SAFETY: the caller's contract.
            unsafe { self.zone.free_pages(self.cpu, pfn, order) }.map_err(BuddyError::from)
        });
        self.record(r);
    }
}

/// The `x86_64` frame starting at `pfn`.
fn frame_of<S: PageSize>(pfn: Pfn) -> Result<PhysFrame<S>, BuddyError> {
    let addr = pfn
        .start_address(FRAME)
        .and_then(|a| PhysAddr::try_new(a.0).ok())
        .ok_or(BuddyError::NotAddressable(pfn))?;
    PhysFrame::from_start_address(addr).map_err(|_| BuddyError::NotAddressable(pfn))
}

macro_rules! frame_traits {
    ($($size:ty),*) => {$(
        // SAFETY: every frame returned comes from `Zone::alloc_pages`, which hands out a free
        // block once (its frames leave the free lists under their CPU's or the zone's lock
        // before it returns), so no frame is returned twice until it is freed again.
        unsafe impl<F, P, R> FrameAllocator<$size> for X86FrameAllocator<'_, F, P, R>
        where
            F: FrameStorage,
            P: PerCpuSet<R>,
            R: RawMutex,
        {
            fn allocate_frame(&mut self) -> Option<PhysFrame<$size>> {
                self.allocate()
            }
        }

        impl<F, P, R> FrameDeallocator<$size> for X86FrameAllocator<'_, F, P, R>
        where
            F: FrameStorage,
            P: PerCpuSet<R>,
            R: RawMutex,
        {
            /// Frees `frame` on this CPU's lists. A frame the zone did not hand out at this
            /// size, or already free, is not freed: [`X86FrameAllocator::last_error`] says
            /// why and the zone is unchanged.
            ///
            /// # Safety
            /// The trait's contract (the frame is unused), and the zone's for a free
            /// ([`Zone::free_pages`]): it is a frame this allocator handed out at this size
            /// and did not free since. A frame the zone can tell is wrong (free already, not
            /// a block head of this order) is an error, not corruption.
            unsafe fn deallocate_frame(&mut self, frame: PhysFrame<$size>) {
                // SAFETY: the caller's contract.
                unsafe { self.deallocate(frame) };
            }
        }
    )*};
}

frame_traits!(Size4KiB, Size2MiB, Size1GiB);

#[cfg(all(test, feature = "alloc", feature = "spin"))]
mod tests {
    use super::*;
    use crate::boxed::BoxedZone;
    use crate::zone::config::ZoneConfig;

    /// Not under Miri: a zone of half a million frames takes minutes to set up there.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn gigabyte_frames_are_order_18() {
        let mut cfg = ZoneConfig::new(Pfn(1 << 18), 1 << 19);
        cfg.max_order = Order::new(18).expect("supported");
        cfg.section_pages = 1 << 19;
        let zone = BoxedZone::new_boxed(cfg).expect("a valid zone");
        let mut frames = X86FrameAllocator::new(&zone, 0);
        let gig: PhysFrame<Size1GiB> = frames.allocate_frame().expect("a 1 GiB frame");
        assert_eq!(gig.start_address().as_u64() % (1 << 30), 0);
        let again: Option<PhysFrame<Size1GiB>> = frames.allocate_frame();
        let other = again.expect("the second 1 GiB frame");
        assert_ne!(gig, other);
        let none: Option<PhysFrame<Size1GiB>> = frames.allocate_frame();
        assert!(none.is_none());
        assert!(matches!(
            frames.last_error(),
            Some(BuddyError::OutOfMemory(_))
        ));
        // SAFETY: both frames were allocated above and are unused.
        unsafe {
            frames.deallocate_frame(gig);
            frames.deallocate_frame(other);
        }
        assert_eq!(frames.last_error(), None);
        zone.drain_all();
        assert_eq!(zone.buddy_pages(), 1 << 19);
    }

    #[test]
    fn wrong_size_frees_nothing() {
        let zone: BoxedZone =
            BoxedZone::new_boxed(ZoneConfig::new(Pfn(0x1000), 2048)).expect("a valid zone");
        let mut frames = X86FrameAllocator::new(&zone, 0);
        let huge: PhysFrame<Size2MiB> = frames.allocate_frame().expect("a 2 MiB frame");
        let head = PhysFrame::<Size4KiB>::containing_address(huge.start_address());
        // SAFETY: the test checks the zone refuses it; nothing uses the frame.
        unsafe { frames.deallocate_frame(head) };
        assert!(matches!(
            frames.last_error(),
            Some(BuddyError::OrderMismatch { .. })
        ));
        // SAFETY: allocated above, unused.
        unsafe { frames.deallocate_frame(huge) };
        assert_eq!(frames.last_error(), None);
    }
}
