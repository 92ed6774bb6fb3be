//! `page_table_multiarch`'s [`PagingHandler`] over a zone (feature `page_table_multiarch`):
//! the frames of ArceOS's page tables (`X64PageTable`, `A64PageTable`, the RISC-V and
//! LoongArch tables) come from the zone and go back to it.
//!
//! A `PagingHandler` has no `self`: its functions find the zone, the CPU they run on and the
//! direct map through the embedder's [`AxPagingZone`], usually over a `static` zone.

use crate::frame_storage::FrameStorage;
use core::marker::PhantomData;

use super::direct_map::PHYSICAL;
use crate::error::buddy::BuddyError;
use crate::request::AllocRequest;
use crate::zone::Zone;
use crate::zone::pcp::PerCpu;
use lock_api::RawMutex;
use memory_addr::{PhysAddr, VirtAddr};
use page_table_multiarch::PagingHandler;

/// Where [`AxPagingHandler`] finds its zone: implemented by the embedder, once per zone.
///
/// # Safety
/// `PagingHandler::dealloc_frames` is a safe call that frees: the handler must only be used
/// by page tables that hand back frames it allocated for them, once, and no longer use them
/// (`page_table_multiarch`'s tables do), as [`Zone::free_contig_range`] requires.
#[allow(unsafe_code)]
pub unsafe trait AxPagingZone {
    /// The zone's frame metadata.
    type Frames: FrameStorage + 'static;
    /// The zone's per-cpu lists.
    type PerCpus: AsRef<[PerCpu<Self::Lock>]> + 'static;
    /// The zone's lock.
    type Lock: RawMutex + 'static;

    /// The zone table frames come from (and go back to).
    fn zone() -> &'static Zone<Self::Frames, Self::PerCpus, Self::Lock>;

    /// The CPU the caller runs on: whose per-cpu lists it uses.
    fn cpu() -> usize;

    /// Where frames are reached: frame `pfn` at virtual address `pfn * 4 KiB + offset` (a
    /// multiple of 4 KiB; 0 for an identity map).
    fn direct_map_offset() -> usize;

    /// `PagingHandler::dealloc_frames` cannot return an error: the zone's error comes here
    /// (a frame freed twice, an address outside the zone; nothing was freed). Log it, count
    /// it, or stop the kernel.
    fn dealloc_failed(paddr: PhysAddr, frames: usize, error: BuddyError);
}

/// `page_table_multiarch`'s [`PagingHandler`] taking table frames from `Z`'s zone:
/// `alloc_frames(n, align)` is [`AllocRequest::frames`] (exactly `n` order-0
/// pages, the rest of the covering block given back at once), `dealloc_frames` is
/// [`Zone::free_contig_range`] (the run freed as the fewest aligned blocks).
///
/// ```
/// use buddy_sim::{AxPagingHandler, AxPagingZone, BoxedZone, BuddyError, Frame, PerCpu, Pfn, ZoneConfig};
/// use memory_addr::{PhysAddr, VirtAddr};
/// use page_table_multiarch::{MappingFlags, PageSize, x86_64::X64PageTable};
/// use std::sync::OnceLock;
/// use std::sync::atomic::AtomicU64;
///
/// // 64 frames of memory, their physical addresses the offsets into it (atomic words: the
/// // tables write it through the pointers `phys_to_virt` makes).
/// #[repr(C, align(4096))]
/// struct Ram([AtomicU64; 64 * 512]);
/// static RAM: Ram = Ram([const { AtomicU64::new(0) }; 64 * 512]);
/// static ZONE: OnceLock<BoxedZone> = OnceLock::new();
///
/// struct Tables;
/// // SAFETY: only `page_table_multiarch`'s tables use the handler.
/// unsafe impl AxPagingZone for Tables {
///     type Frames = Vec<Frame>;
///     type PerCpus = Vec<PerCpu>;
///     type Lock = buddy_sim::DefaultRawMutex;
///     fn zone() -> &'static BoxedZone {
///         ZONE.get_or_init(|| BoxedZone::new_boxed(ZoneConfig::new(Pfn(0), 64)).unwrap())
///     }
///     fn cpu() -> usize {
///         0
///     }
///     fn direct_map_offset() -> usize {
///         RAM.0.as_ptr().expose_provenance()
///     }
///     fn dealloc_failed(paddr: PhysAddr, frames: usize, error: BuddyError) {
///         panic!("freeing {frames} table frames at {paddr:?}: {error}");
///     }
/// }
///
/// let mut table = X64PageTable::<AxPagingHandler<Tables>>::try_new().unwrap();
/// let va = VirtAddr::from_usize(0x4000_0000);
/// table
///     .cursor()
///     .map(va, PhysAddr::from_usize(0x20_0000), PageSize::Size4K, MappingFlags::READ)
///     .unwrap();
/// assert_eq!(table.query(va).unwrap().0, PhysAddr::from_usize(0x20_0000));
/// // The root and one table per level below it.
/// assert_eq!(Tables::zone().free_pages_total(), 64 - 4);
/// drop(table);
/// assert_eq!(Tables::zone().free_pages_total(), 64);
/// ```
pub struct AxPagingHandler<Z>(PhantomData<Z>);

impl<Z> core::fmt::Debug for AxPagingHandler<Z> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AxPagingHandler")
    }
}

impl<Z: AxPagingZone> PagingHandler for AxPagingHandler<Z> {
    /// `num` frames aligned to `align` bytes, or `None` (no memory, an alignment that is not
    /// a power of two or above the zone's largest block, a bad CPU).
    fn alloc_frames(num: usize, align: usize) -> Option<PhysAddr> {
        let order = PHYSICAL.align_order(align)?;
        let request = AllocRequest::frames(num as u64).aligned(order);
        let pfn = Z::zone().cpu(Z::cpu()).ok()?.alloc_raw(request).ok()?;
        PHYSICAL.addr_of(pfn).map(PhysAddr::from_usize)
    }

    /// Frees `num` frames from `paddr`; an error goes to [`AxPagingZone::dealloc_failed`].
    #[allow(unsafe_code)]
    fn dealloc_frames(paddr: PhysAddr, num: usize) {
        let addr = paddr.as_usize();
        let r = match PHYSICAL.pfn_at(addr) {
            // SAFETY: `AxPagingZone`'s contract: only tables that hand back the frames this
            // handler allocated for them, once, use it.
            Some(pfn) => unsafe {
                Z::zone()
                    .free_contig_range(Z::cpu(), pfn, num as u64)
                    .map_err(BuddyError::from)
            },
            None => Err(BuddyError::NotAFrame { addr }),
        };
        if let Err(e) = r {
            Z::dealloc_failed(paddr, num, e);
        }
    }

    /// `paddr + offset` (wrapping: the tables only ask for frames this handler gave).
    fn phys_to_virt(paddr: PhysAddr) -> VirtAddr {
        VirtAddr::from_usize(paddr.as_usize().wrapping_add(Z::direct_map_offset()))
    }
}
