//! The data region: its last-level tables (handed over by the platform), its folio layout,
//! the accesses that let the MMU set access and dirty bits, and mapping and unmapping it
//! (steps 4 and the teardown).

use super::*;
use core::sync::atomic::{AtomicU64, Ordering};

use buddy_sim::{Order, Pfn};
use pte_batch::mm_types::{FrameRange, VirtAddr};
use pte_batch::{Prot, PteFormat, PteTable};

/// Physical addresses of the last-level tables of the data region and, at
/// [`MOVABLE_TABLE`], the movable region's (0: none).
pub(super) static DATA_TABLE_PA: [AtomicU64; LAST_LEVEL_TABLES] =
    [const { AtomicU64::new(0) }; LAST_LEVEL_TABLES];

/// Records the physical address of last-level table `t` (the data region's, or at
/// [`MOVABLE_TABLE`] the movable region's), which maps
/// `DATA_VA + t * 2 MiB`; [`data_table`] and every step after it reach the table there.
///
/// # Safety
/// `pa` is a 4 KiB-aligned frame, identity-mapped as normal memory, used as that last-level
/// table of the live map (the MMU walks it) and as nothing else until
/// [`forget_data_table`]`(t)` runs, which must happen before the frame is freed; while it is
/// recorded, the table is accessed only atomically.
pub unsafe fn set_data_table(t: usize, pa: u64) {
    if let Some(slot) = DATA_TABLE_PA.get(t) {
        slot.store(pa, Ordering::Release);
    }
}

/// Forgets last-level table `t` (before its frame is freed): the steps no
/// longer reach it.
pub fn forget_data_table(t: usize) {
    if let Some(slot) = DATA_TABLE_PA.get(t) {
        slot.store(0, Ordering::Release);
    }
}

/// The live last-level table `t` (see [`set_data_table`]), as pte-batch sees it.
pub fn data_table<P: Platform>(t: usize) -> Option<PteTable<'static, P::Format>> {
    let pa = DATA_TABLE_PA.get(t)?.load(Ordering::Acquire);
    if pa == 0 {
        return None;
    }
    // SAFETY: `pa` was recorded by `set_data_table`, whose contract makes it a last-level
    // table of the live map, identity-mapped, used only as this table and accessed only
    // atomically until `forget_data_table` (which comes before its frame is freed).
    let entries: &'static [AtomicU64; 512] = unsafe { &*(pa as *const [AtomicU64; 512]) };
    let va = VirtAddr(DATA_VA + t as u64 * (2 << 20));
    PteTable::new(P::FORMAT, va, entries).ok()
}

/// Page `g` from [`DATA_VA`] as (table, entry): the data region's (0..DATA_PAGES), then the
/// movable region's.
pub fn locate<P: Platform>(g: usize) -> (PteTable<'static, P::Format>, usize) {
    match data_table::<P>(g / 512) {
        Some(t) => (t, g % 512),
        None => fail::<P>(
            Step::Mapping,
            format_args!("no last-level table for page {g}"),
        ),
    }
}

pub(super) fn page_ptr(g: usize) -> *mut u64 {
    (DATA_VA + g as u64 * PAGE) as *mut u64
}

/// One access through the MMU: a load, or a store of `g`'s marker.
///
/// # Safety
/// Data page `g` is mapped read-write to a frame of the data region (between
/// [`Kernel::run`]'s mapping step and [`Kernel::unmap_data`], and not the unmapped page), and
/// nothing but these markers is stored in it.
pub(super) unsafe fn touch(g: usize, write: bool) {
    let p = page_ptr(g);
    // SAFETY: the caller guarantees page g is mapped read-write to a data frame; a volatile
    // access so the MMU really sees it.
    unsafe {
        if write {
            core::ptr::write_volatile(p, 0x5eed_0000 + g as u64);
        } else {
            let _ = core::ptr::read_volatile(p);
        }
    }
}

/// xorshift64*: the touched set is pseudo-random but the same every run.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The folios of the data region, by first page, in address order.
pub(super) struct Layout {
    pub(super) folios: [(usize, usize); MAX_FOLIOS],
    pub(super) len: usize,
}

impl Layout {
    /// Table 0: 32 folios of 64 KiB (contpte on arm64). Table 1: a 128 KiB folio whose last
    /// page is unmapped later (a contpte block and an unfolded tail on arm64), 14 folios of
    /// 64 KiB, 64 folios of 16 KiB (never contpte).
    pub(super) fn new() -> Self {
        let mut l = Self {
            folios: [(0, 0); MAX_FOLIOS],
            len: 0,
        };
        let mut push = |first: usize, pages: usize, count: usize| {
            for i in 0..count {
                l.folios[l.len] = (first + i * pages, pages);
                l.len += 1;
            }
        };
        push(0, 16, 32);
        push(512, 32, 1);
        push(544, 16, 14);
        push(768, 4, 64);
        l
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.folios[..self.len].iter().copied()
    }

    /// The folio index of data page `g`.
    pub(super) fn folio_of_page(&self, g: usize) -> Option<usize> {
        self.iter()
            .position(|(first, pages)| (first..first + pages).contains(&g))
    }
}

/// The page the run unmaps: the last page of table 1's 128 KiB folio.
pub(super) const UNMAPPED_PAGE: usize = 512 + 31;

/// Touches every page of `touched`.
///
/// # Safety
/// As [`touch`], for every page of `touched`.
pub(super) unsafe fn touch_all(touched: &[Option<(usize, bool)>]) {
    for &(g, write) in touched.iter().flatten() {
        // SAFETY: forwarded from the caller.
        unsafe { touch(g, write) };
    }
}

impl<P: Platform> Kernel<P> {
    pub(super) fn lookup(&self) -> impl Fn(Pfn) -> Option<FrameRange> + '_ {
        let base = self.data_pfn;
        move |pfn| {
            let g = usize::try_from(pfn.0.checked_sub(base)?).ok()?;
            let i = self.layout.folio_of_page(g)?;
            let (first, pages) = self.layout.folios[i];
            Some(FrameRange::new(Pfn(base + first as u64), pages as u64))
        }
    }

    /// Maps the folios of table `t` (clean, writable, old).
    pub(super) fn map_table(&mut self, t: usize) {
        let prot = Prot {
            write: true,
            attrs: P::DATA_ATTRS,
            ..Prot::default()
        };
        let table = locate::<P>(t * 512).0;
        for (first, pages) in self.layout.iter().filter(|(g, _)| g / 512 == t) {
            table
                .set_ptes(first % 512, Pfn(self.data_pfn + first as u64), pages, prot)
                .unwrap_or_else(|e| fail::<P>(Step::Mapping, format_args!("{e}")));
        }
    }

    /// Step 4: The data region: frames from the zone (zeroed), folios mapped by pte-batch.
    pub(super) fn map_data(&mut self) {
        self.data_pfn = alloc_zeroed::<P>(self.zone, 0, DATA_ORDER, &self.clearer).0;
        self.frames += 1 << DATA_ORDER;
        let data_order =
            Order::new(DATA_ORDER).unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
        self.zone
            .split_page(Pfn(self.data_pfn), data_order)
            .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
        for t in 0..DATA_TABLES {
            self.map_table(t);
        }
        self.data_mapped = true;
        let (t1, i1) = locate::<P>(UNMAPPED_PAGE);
        let gone = t1
            .unmap_ptes(i1, 1, &mut self.tlb)
            .unwrap_or_else(|e| fail::<P>(Step::Mapping, format_args!("{e}")));
        // One invalidate for the unmap, and one for the unfold where the format folds.
        let expected = if P::FORMAT.cont_ptes() > 1 { 2 } else { 1 };
        let flushes = P::flushes(&self.tlb);
        if gone.pages != 1 || flushes != expected {
            fail::<P>(
                Step::Mapping,
                format_args!("unmap: {gone:?}, {flushes} flushes"),
            );
        }
        P::publish_tables();
        let cont = (0..DATA_PAGES)
            .filter(|&g| g != UNMAPPED_PAGE)
            .filter(|&g| {
                let (t, i) = locate::<P>(g);
                t.raw(i).is_ok_and(|e| P::FORMAT.is_cont(e))
            })
            .count();
        println!(
            "pte-batch: {} folios over {} pages, {cont} entries contpte, page {UNMAPPED_PAGE} unmapped",
            self.layout.len, DATA_PAGES
        );
    }

    /// Unmaps the data region and forgets its tables (the platform frees them next).
    pub fn unmap_data(&mut self) {
        for t in 0..DATA_TABLES {
            let table = locate::<P>(t * 512).0;
            let _ = table
                .unmap_ptes(0, 512, &mut self.tlb)
                .unwrap_or_else(|e| fail::<P>(Step::Free, format_args!("{e}")));
            forget_data_table(t);
        }
        self.data_mapped = false;
    }
}
