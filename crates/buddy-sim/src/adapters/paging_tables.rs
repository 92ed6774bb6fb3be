//! aarch64-paging's `Translation` over a zone (feature `aarch64-paging`): the translation
//! tables an `aarch64_paging::Mapping` builds are zeroed frames from the zone
//! ([`Zone::alloc_zeroed`]), and go back to the zone when aarch64-paging frees them.
// aarch64-paging's trait declares `deallocate_table` an `unsafe fn`; it performs no unsafe
// operation here.
#![allow(unsafe_code)]

use crate::error::buddy::BuddyError;
use crate::frame_storage::FrameStorage;
use crate::memory::FRAME;
use crate::memory::{FrameClearer, FrameMemory};
use crate::types::Order;
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use aarch64_paging::descriptor::{PagingAttributes, PhysicalAddress};
use aarch64_paging::paging::{PageTable, Translation};
use core::ptr::NonNull;
use lock_api::RawMutex;
use mm_types::Pfn;
use mm_types::PhysAddr;
use zero_core::NoResched;

/// A zone as aarch64-paging's [`Translation`]: each table page is an order-0 frame from
/// [`Zone::alloc_zeroed`] on one CPU (known zero, or cleared by zero-core through the CPU's
/// detected policy) before aarch64-paging writes a descriptor to it, and freed to the zone
/// again when aarch64-paging deallocates it (a `Mapping` dropped, `compact_subtables`).
///
/// ```
/// use aarch64_paging::Mapping;
/// use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
/// use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, VaRange};
/// use buddy_sim::{BoxedZone, OffsetMap, Pfn, ZoneTables, ZoneConfig};
///
/// // 64 frames of "physical memory" from pfn 0x40000 (1 GiB), backed by a buffer here.
/// #[repr(C, align(4096))]
/// struct Page([u8; 4096]);
/// let mut ram: Vec<Page> = (0..64).map(|_| Page([0xA5; 4096])).collect();
/// let base = Pfn(0x40000);
/// // SAFETY: frame base + i is ram[i], which only the zone's owners use from here on.
/// let memory = unsafe { OffsetMap::with_frame_at(base, ram.as_mut_ptr().cast()) }?;
/// let zone = BoxedZone::new_boxed(ZoneConfig::new(base, 64))?;
///
/// let tables = ZoneTables::new(&zone, 0, memory)?;
/// let mut map = Mapping::with_asid_and_va_range(tables, 1, 1, El1And0, VaRange::Lower);
/// let normal = El1Attributes::ATTRIBUTE_INDEX_1
///     | El1Attributes::INNER_SHAREABLE
///     | El1Attributes::VALID
///     | El1Attributes::ACCESSED;
/// // 64 KiB of 4 KiB pages: a level-2 and a level-3 table under the root.
/// map.map_range(
///     &MemoryRegion::new(0x8000_0000, 0x8001_0000),
///     PhysicalAddress(0x4000_0000),
///     normal,
///     Constraints::NO_BLOCK_MAPPINGS,
/// )?;
/// assert_eq!(map.translation().tables(), 3);
/// assert_eq!(zone.buddy_pages() + zone.pcp_pages(0)?, 64 - 3);
/// // Every table page came from the zone and was zeroed before use (the buffer was 0xA5):
/// // the root's only non-zero entry is the table descriptor aarch64-paging wrote, for the
/// // second GiB (entry 2).
/// let root = &ram[(map.root_address().0 - 0x4000_0000) / 4096].0;
/// let entries: Vec<u64> = root.chunks(8).map(|e| u64::from_le_bytes(e.try_into().unwrap())).collect();
/// assert!(entries.iter().enumerate().all(|(i, &e)| (e != 0) == (i == 2)));
///
/// // Dropping the mapping gives every table back: the zone is whole again.
/// drop(map);
/// zone.drain_all();
/// assert_eq!(zone.buddy_pages(), 64);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ZoneTables<'z, M, F, P, R: RawMutex> {
    zone: &'z Zone<F, P, R>,
    cpu: usize,
    clearer: FrameClearer<M>,
    tables: u64,
    last_error: Option<BuddyError>,
}

impl<'z, M, F, P, R> ZoneTables<'z, M, F, P, R>
where
    M: FrameMemory,
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Table pages from `zone` on CPU `cpu`'s lists, reached through `memory` and cleared
    /// with zero-core's detected policy ([`FrameClearer::detected`]).
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`] if the zone has no lists for `cpu`.
    pub fn new(zone: &'z Zone<F, P, R>, cpu: usize, memory: M) -> Result<Self, BuddyError> {
        Self::with_clearer(zone, cpu, FrameClearer::detected(memory))
    }

    /// As [`new`](Self::new), with the frames reached and cleared as `clearer` says (a
    /// calibrated policy, a preemption model, the debug check).
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`] if the zone has no lists for `cpu`.
    pub fn with_clearer(
        zone: &'z Zone<F, P, R>,
        cpu: usize,
        clearer: FrameClearer<M>,
    ) -> Result<Self, BuddyError> {
        zone.pcp_pages(cpu)?;
        Ok(Self {
            zone,
            cpu,
            clearer,
            tables: 0,
            last_error: None,
        })
    }

    /// Table pages allocated and not yet freed.
    #[must_use]
    pub fn tables(&self) -> u64 {
        self.tables
    }

    /// Why the last `deallocate_table` freed nothing (the trait has no room for an error):
    /// a pointer [`FrameMemory::pfn_at`] does not know, or the zone's error. `None` after one
    /// that succeeded.
    #[must_use]
    pub fn last_error(&self) -> Option<BuddyError> {
        self.last_error
    }

    /// The memory map the tables are reached through.
    #[must_use]
    pub fn memory(&self) -> &M {
        self.clearer.memory()
    }

    /// A zeroed table frame, or why there is none.
    fn zeroed_frame(&mut self) -> Result<(Pfn, NonNull<u8>), BuddyError> {
        let pfn =
            self.zone
                .alloc_zeroed(self.cpu, Order::ZERO, &self.clearer, None, &mut NoResched)?;
        // alloc_zeroed reached it through the same map; were it not to now, give it back.
        let Some(ptr) = self.memory().frame_ptr(pfn) else {
            // SAFETY: just allocated by this call and handed to nobody.
            let _ = unsafe { self.zone.free_pages(self.cpu, pfn, Order::ZERO) };
            return Err(BuddyError::NotAddressable(pfn));
        };
        self.tables += 1;
        Ok((pfn, ptr))
    }
}

impl<M, F, P, R, A> Translation<A> for ZoneTables<'_, M, F, P, R>
where
    M: FrameMemory,
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: PagingAttributes,
{
    /// # Panics
    /// If the zone has no free frame or [`FrameMemory`] cannot reach the one it has:
    /// aarch64-paging's `Translation` has no way to report a failed allocation.
    fn allocate_table(&mut self) -> (NonNull<PageTable<A>>, PhysicalAddress) {
        match self.zeroed_frame() {
            Ok((pfn, ptr)) => {
                let pa = pfn.start_address(FRAME).and_then(|a| a.as_usize());
                match pa {
                    Some(pa) => (ptr.cast(), PhysicalAddress(pa)),
                    None => panic!("table frame {pfn} has no physical address in a usize"),
                }
            }
            Err(e) => panic!("aarch64-paging needs a table page: {e}"),
        }
    }

    unsafe fn deallocate_table(&mut self, page_table: NonNull<PageTable<A>>) {
        let r = match self.memory().pfn_at(page_table.cast()) {
            // SAFETY: the trait's contract: `page_table` is a table `allocate_table` returned,
            // not deallocated since and unused from now on.
            Some(pfn) => unsafe {
                self.zone
                    .free_pages(self.cpu, pfn, Order::ZERO)
                    .map_err(BuddyError::from)
            },
            None => Err(BuddyError::NotAFrame {
                addr: page_table.as_ptr().addr(),
            }),
        };
        match r {
            Ok(()) => {
                self.tables -= 1;
                self.last_error = None;
            }
            Err(e) => self.last_error = Some(e),
        }
    }

    /// # Panics
    /// If [`FrameMemory`] does not map the frame of `pa`: aarch64-paging only asks for tables
    /// this translation allocated, which it does map.
    fn physical_to_virtual(&self, pa: PhysicalAddress) -> NonNull<PageTable<A>> {
        let pfn = Pfn::containing(PhysAddr(pa.0 as u64), FRAME);
        match self.memory().frame_ptr(pfn) {
            Some(p) => p.cast(),
            None => panic!("table at {pa} is not mapped by the FrameMemory"),
        }
    }
}
