//! The x86_64 kernel's map, built with the `x86_64` crate's `OffsetPageTable` (offset 0: the
//! tables are reached through the identity map) over zeroed frames from buddy-sim
//! (`alloc_zeroed`, each checked before the crate writes to it; freed through its
//! `X86FrameAllocator`):
//! RAM identity-mapped with 2 MiB pages, and the data region's level-1 tables (every entry
//! empty) for pte-batch. Also CR3, and the TLB flush pte-batch's tokens go to.

use core::arch::asm;

use buddy_sim::{DefaultRawMutex, Frame, FrameClearer, OffsetMap, PerCpu, X86FrameAllocator};
use pte_batch::TlbFlush;
use pte_batch::mm_types::PageRange;
use x86_64::structures::paging::mapper::CleanUp;
use x86_64::structures::paging::{
    FrameAllocator, FrameDeallocator, Mapper, OffsetPageTable, Page, PageTable, PageTableFlags,
    PhysFrame, Size2MiB, Size4KiB,
};
use x86_64::{PhysAddr, VirtAddr};

use super::Machine;
use super::regs::{LAPIC, flush_tlb};
use crate::steps::{self, DATA_VA, KernelZone, LAST_LEVEL_TABLES, Step, fail};

/// Page-table frames on CPU 0: from the zone's `alloc_zeroed` (known zero or cleared by
/// zero-core, checked before the `x86_64` crate sees it), freed through buddy-sim's
/// `X86FrameAllocator`; counts the frames it holds.
pub struct TableFrames {
    frames: X86FrameAllocator<'static, &'static [Frame], &'static [PerCpu], DefaultRawMutex>,
    zone: &'static KernelZone,
    clearer: FrameClearer<OffsetMap>,
    /// Table frames allocated and not yet freed.
    pub live: u64,
    /// Table frames allocated in all.
    pub allocated: u64,
}

impl TableFrames {
    /// Table frames from `zone`.
    pub fn new(zone: &'static KernelZone) -> Self {
        Self {
            frames: X86FrameAllocator::new(zone, 0),
            zone,
            clearer: steps::clearer(),
            live: 0,
            allocated: 0,
        }
    }
}

// SAFETY: every frame comes from the zone, which hands a frame out once until it is freed.
unsafe impl FrameAllocator<Size4KiB> for TableFrames {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        let pfn = steps::alloc_zeroed::<Machine>(self.zone, 0, 0, &self.clearer);
        let frame = PhysFrame::from_start_address(PhysAddr::new(pfn.0 << 12)).ok()?;
        self.live += 1;
        self.allocated += 1;
        Some(frame)
    }
}

impl FrameDeallocator<Size4KiB> for TableFrames {
    unsafe fn deallocate_frame(&mut self, frame: PhysFrame<Size4KiB>) {
        // SAFETY: forwarded: the caller no longer uses the frame.
        unsafe { self.frames.deallocate_frame(frame) };
        match self.frames.last_error() {
            None => self.live -= 1,
            Some(e) => fail::<Machine>(Step::Free, format_args!("table frame: {e}")),
        }
    }
}

/// The kernel's map: its level-4 table and the allocator its tables came from.
pub struct KernelMap {
    map: OffsetPageTable<'static>,
    /// The end of the identity map.
    top: u64,
    pml4: PhysFrame<Size4KiB>,
    /// The table frames.
    pub frames: TableFrames,
}

/// A table reached through the identity map.
///
/// # Safety
/// `pa` is a page-table frame of a live map (read from one of its entries), identity-mapped,
/// that is neither freed nor written through a `&mut` while the reference lives.
unsafe fn table_at<'a>(pa: PhysAddr) -> &'a PageTable {
    // SAFETY: forwarded from the caller.
    unsafe { &*(pa.as_u64() as *const PageTable) }
}

/// Frame 0 as a placeholder mapping (never accessed: unmapped at once).
fn placeholder() -> PhysFrame<Size4KiB> {
    PhysFrame::containing_address(PhysAddr::new(0))
}

impl KernelMap {
    /// RAM up to `top` (a multiple of 2 MiB) identity-mapped with 2 MiB pages, and the data
    /// region's level-1 tables created empty (a placeholder page mapped and unmapped in each).
    pub fn build(zone: &'static KernelZone, top: u64) -> Self {
        let mut frames = TableFrames::new(zone);
        let pml4 = frames
            .allocate_frame()
            .unwrap_or_else(|| fail::<Machine>(Step::PageTables, format_args!("no PML4 frame")));
        // SAFETY: a zeroed frame from the zone, identity-mapped, used only as this table.
        let l4: &'static mut PageTable =
            unsafe { &mut *(pml4.start_address().as_u64() as *mut PageTable) };
        // SAFETY: every table frame is identity-mapped (offset 0) and owned by this map.
        let mut map = unsafe { OffsetPageTable::new(l4, VirtAddr::new(0)) };
        let rw = PageTableFlags::PRESENT | PageTableFlags::WRITABLE;
        for addr in (0..top).step_by(2 << 20) {
            let page = Page::<Size2MiB>::containing_address(VirtAddr::new(addr));
            let frame = PhysFrame::<Size2MiB>::containing_address(PhysAddr::new(addr));
            // SAFETY: an identity mapping of RAM with the attributes the boot map has.
            unsafe { map.map_to(page, frame, rw, &mut frames) }
                .unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("{e:?}")))
                .ignore();
        }
        // The local APIC's registers: uncached, never executable.
        let lapic = Page::<Size4KiB>::containing_address(VirtAddr::new(LAPIC));
        let mmio = rw
            | PageTableFlags::NO_CACHE
            | PageTableFlags::WRITE_THROUGH
            | PageTableFlags::NO_EXECUTE;
        let frame = PhysFrame::containing_address(PhysAddr::new(LAPIC));
        // SAFETY: an identity mapping of the APIC's MMIO page, which is not RAM.
        unsafe { map.map_to(lapic, frame, mmio, &mut frames) }
            .unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("{e:?}")))
            .ignore();
        for t in 0..LAST_LEVEL_TABLES {
            let va = VirtAddr::new(DATA_VA + t as u64 * (2 << 20));
            let page = Page::<Size4KiB>::containing_address(va);
            // SAFETY: the map is not live; the placeholder is unmapped right away.
            unsafe { map.map_to(page, placeholder(), rw, &mut frames) }
                .unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("{e:?}")))
                .ignore();
            map.unmap(page)
                .unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("{e:?}")))
                .1
                .ignore();
        }
        Self {
            map,
            top,
            pml4,
            frames,
        }
    }

    /// The physical address of the level-1 table that maps `va`, walking the map.
    pub fn level1_table(&self, va: u64) -> Option<u64> {
        let va = VirtAddr::new(va);
        let l4 = self.map.level_4_table();
        // SAFETY: both frames come from entries of this map, whose tables are identity-mapped
        // and freed only by `free(self)`; `&self` keeps the map from being changed meanwhile.
        let l3 = unsafe { table_at(l4[va.p4_index()].frame().ok()?.start_address()) };
        // SAFETY: as above.
        let l2 = unsafe { table_at(l3[va.p3_index()].frame().ok()?.start_address()) };
        let l1 = l2[va.p2_index()].frame().ok()?;
        Some(l1.start_address().as_u64())
    }

    /// CR3's value for this map.
    pub fn cr3(&self) -> u64 {
        self.pml4.start_address().as_u64()
    }

    /// Frees every table (the map must no longer be live and the data region unmapped):
    /// unmaps RAM, lets the `x86_64` crate free the empty tables, then the PML4. Returns how
    /// many table frames the map used.
    pub fn free(mut self) -> u64 {
        for addr in (0..self.top).step_by(2 << 20) {
            let page = Page::<Size2MiB>::containing_address(VirtAddr::new(addr));
            self.map
                .unmap(page)
                .unwrap_or_else(|e| fail::<Machine>(Step::Free, format_args!("{e:?}")))
                .1
                .ignore();
        }
        let lapic = Page::<Size4KiB>::containing_address(VirtAddr::new(LAPIC));
        self.map
            .unmap(lapic)
            .unwrap_or_else(|e| fail::<Machine>(Step::Free, format_args!("{e:?}")))
            .1
            .ignore();
        // SAFETY: the map is not live, and every table frame is used once, by this map.
        unsafe { self.map.clean_up(&mut self.frames) };
        // SAFETY: the PML4 is no longer loaded (CR3 holds the boot map) nor referenced.
        unsafe { self.frames.deallocate_frame(self.pml4) };
        if self.frames.live != 0 {
            fail::<Machine>(
                Step::Free,
                format_args!("{} table frames not freed", self.frames.live),
            );
        }
        self.frames.allocated
    }
}

/// Past this many pages a range flush reloads CR3 instead (Linux's
/// `tlb_single_page_flush_ceiling`, 33).
const FULL_FLUSH_PAGES: u64 = 33;

/// Consumes pte-batch's flush tokens with `invlpg` per page, or a full flush (CR3 reload) past
/// [`FULL_FLUSH_PAGES`].
pub struct Invlpg {
    /// Range invalidations done.
    pub flushes: u64,
    /// Of which full flushes.
    pub full: u64,
}

impl TlbFlush for Invlpg {
    fn flush_range(&mut self, r: PageRange) {
        if r.pages > FULL_FLUSH_PAGES {
            flush_tlb();
            self.full += 1;
        } else {
            let step = r.size.bytes() as u64;
            for i in 0..r.pages {
                let va = r.start.0.wrapping_add(i * step);
                // SAFETY: invlpg only drops a cached translation.
                unsafe { asm!("invlpg [{}]", in(reg) va, options(nostack)) };
            }
        }
        self.flushes += 1;
    }
}
