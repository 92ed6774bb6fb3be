//! What every kernel does with the three crates, once, over a [`Platform`]: take frames from
//! buddy-sim, zero them with zero-core, map folios with pte-batch, let the MMU set access and
//! dirty bits, age, flush, refault, run the negative control, share the zone with a second
//! CPU, unmap, free, and check the zone is whole. A platform module holds only boot, MMU and
//! platform code: it builds the zone's memory map and the page tables, hands the data
//! region's last-level tables over ([`set_data_table`]), and calls [`run`] and [`finish`].

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use buddy_sim::{Frame, FrameClearer, OffsetMap, Order, PerCpu, Pfn, Zone, ZoneConfig};
use pte_batch::mm_types::{FrameRange, PageRange, PageSize, VirtAddr};
use pte_batch::{AgingStats, FpbFlags, Prot, PteFormat, PteTable, TlbFlush, age_range};
use spin::{Mutex, Once};
use zero_core::{NoResched, Policy};

/// Frames the boot CPU zeroes in the background before the steps start (8 MiB: the data
/// region and every table page find the pool full).
const BOOT_POOL: u64 = 2048;
/// Frames per background-zeroing call of the second CPU.
const ZERO_STEP: u64 = 512;

/// What the shared steps need from an architecture and its machine: the MMU's entry format,
/// the TLB flush, barriers, the second CPU, a clock and the exit (the console is the crate's
/// `println!`; each platform builds its own page tables and hands the data region's
/// last-level tables over with [`set_data_table`]).
pub trait Platform {
    /// The MMU's last-level entry format.
    type Format: PteFormat;
    /// The format's value (its granule).
    const FORMAT: Self::Format;
    /// Memory attributes of a data page, for `Prot::attrs` (normal write-back memory).
    const DATA_ATTRS: u64;
    /// Consumes flush tokens with this CPU's TLB invalidation.
    type Tlb: TlbFlush;

    /// A flush consumer, counting from zero.
    fn tlb() -> Self::Tlb;
    /// Range invalidations `tlb` performed.
    fn flushes(tlb: &Self::Tlb) -> u64;
    /// Waits until the MMU's access and dirty updates of earlier accesses are visible.
    fn sync();
    /// Makes new table entries visible to the table walker.
    fn publish_tables();
    /// Invalidates every cached translation.
    fn flush_all();
    /// `Err` with the reason where a skipped TLB flush cannot be observed (a hypervisor that
    /// virtualizes the MMU with shadow tables re-reads the guest's entries itself), so the
    /// negative control reports instead of failing.
    ///
    /// # Errors
    /// Why a skipped flush is invisible on this machine.
    fn skipped_flush_observable() -> Result<(), &'static str>;
    /// Starts the second CPU, which calls [`secondary`]; `Err` says why there is none.
    ///
    /// # Errors
    /// Why the second CPU does not run (not present, or the firmware refused).
    ///
    /// # Safety
    /// Called once, on the boot CPU running on the kernel's map (which the second CPU starts
    /// on), with the data region mapped.
    unsafe fn start_second_cpu(&mut self) -> Result<(), &'static str>;
    /// Ends the run with `code` (0: success, else the failed step).
    fn exit(code: u32) -> !;
    /// Nanoseconds on a monotonic clock (arm64's generic timer, x86's TSC), for the timings
    /// the kernels print; never asserted on.
    fn now_ns() -> u64;
}

/// Exit codes: the step that failed.
#[derive(Clone, Copy, Debug)]
#[repr(u32)]
pub enum Step {
    /// Building or using the zone.
    Zone = 2,
    /// A frame did not read zero after zero-core cleared it.
    Zeroing = 3,
    /// pte-batch refused a mapping, or a table is missing.
    Mapping = 4,
    /// Aging did not report exactly the touched folios, or lost a dirty bit.
    Aging = 6,
    /// A page touched after the flush was not young again.
    Refault = 7,
    /// Skipping the flush went unnoticed.
    NegativeControl = 8,
    /// The zone is not whole after everything was freed.
    Free = 9,
    /// The second CPU's steps.
    Smp = 10,
    /// An exception the kernel does not handle.
    Exception = 11,
    /// A panic.
    Panic = 12,
    /// Building the page tables.
    PageTables = 13,
}

/// The kernel on platform `P` stopped at `step`: print why and exit with the step's number.
pub fn fail<P: Platform>(step: Step, what: core::fmt::Arguments<'_>) -> ! {
    println!("FAIL {step:?} (exit {}): {what}", step as u32);
    P::exit(step as u32)
}

/// 4 KiB pages everywhere.
pub const PAGE: u64 = PageSize::Size4KiB.bytes() as u64;
/// Last-level tables of the data region (2 MiB each).
pub const DATA_TABLES: usize = 2;
/// Pages of the data region.
pub const DATA_PAGES: usize = 512 * DATA_TABLES;
/// Virtual base of the data region: the fifth GiB, outside every identity map.
pub const DATA_VA: u64 = 4 << 30;
/// The data region is one order-10 block (4 MiB), split into order-0 pages.
const DATA_ORDER: u8 = 10;
/// The most RAM a zone spans (the runs give QEMU `-m 128M`).
pub const MAX_RAM: u64 = 128 << 20;
const MAX_FRAMES: usize = (MAX_RAM / PAGE) as usize;
const MAX_FOLIOS: usize = 128;

/// CPUs the zone has per-cpu lists for (the `-smp 2` boots start the second).
pub const CPUS: usize = 2;

/// The zone's metadata: plain statics (all zero, so in .bss), no `static mut`.
static FRAMES: [Frame; MAX_FRAMES] = [const { Frame::new() }; MAX_FRAMES];
static PCPS: [PerCpu; CPUS] = [const { PerCpu::new() }; CPUS];

/// The zone type of both kernels.
pub type KernelZone = Zone<&'static [Frame], &'static [PerCpu]>;

/// The zone every core allocates from, set up once by the boot core.
static ZONE: Once<KernelZone> = Once::new();

/// Physical addresses of the data region's last-level tables (0: none).
static DATA_TABLE_PA: [AtomicU64; DATA_TABLES] = [const { AtomicU64::new(0) }; DATA_TABLES];

/// Builds the zone over `span` (all RAM, holes included) and adds `usable` ranges (the
/// firmware's memory map past the image); returns it and its free blocks per order, the
/// "whole" [`finish`] compares with.
pub fn make_zone<P: Platform>(
    span: FrameRange,
    usable: &[FrameRange],
) -> (
    &'static KernelZone,
    [u32; buddy_sim::MAX_SUPPORTED_ORDER as usize + 1],
) {
    let cfg = ZoneConfig::new(span.start, span.pages).with_cpus(CPUS);
    let zone = ZONE.call_once(|| {
        let frames = usize::try_from(span.pages)
            .ok()
            .and_then(|n| FRAMES.get(..n))
            .unwrap_or_else(|| {
                fail::<P>(
                    Step::Zone,
                    format_args!("{span:?} spans more than {MAX_RAM} bytes"),
                )
            });
        let zone = Zone::new_empty(cfg, frames, &PCPS[..])
            .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
        for r in usable {
            zone.add_memory(r.start, r.pages)
                .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{r:?}: {e}")));
        }
        zone
    });
    let usable_pages: u64 = usable.iter().map(|r| r.pages).sum();
    println!(
        "buddy-sim: zone of {} frames from pfn {}, {usable_pages} usable in {} ranges ({} MiB), {CPUS} CPUs",
        cfg.nr_pages,
        span.start,
        usable.len(),
        (usable_pages * PAGE) >> 20
    );
    // The boot CPU, idle until the steps start, fills the zeroed pool: the page tables and
    // the data region are zeroed allocations that find it full.
    let pooled = zero_in_background::<P>(zone, BOOT_POOL, &clearer());
    println!(
        "buddy-sim: zero_some put {pooled} frames in the zeroed pool before the steps ({} known zero)",
        zone.zeroed_pages()
    );
    (zone, zone.buddy_blocks_per_order())
}

/// The zone, once [`make_zone`] has run.
pub fn zone<P: Platform>() -> &'static KernelZone {
    ZONE.get()
        .unwrap_or_else(|| fail::<P>(Step::Zone, format_args!("no zone")))
}

/// Records the physical address of the data region's last-level table `t`, which maps
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

/// Forgets the data region's last-level table `t` (before its frame is freed): the steps no
/// longer reach it.
pub fn forget_data_table(t: usize) {
    if let Some(slot) = DATA_TABLE_PA.get(t) {
        slot.store(0, Ordering::Release);
    }
}

/// The live last-level table `t` of the data region, as pte-batch sees it.
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

/// The data page `g` (0..DATA_PAGES) as (table, entry).
pub fn locate<P: Platform>(g: usize) -> (PteTable<'static, P::Format>, usize) {
    match data_table::<P>(g / 512) {
        Some(t) => (t, g % 512),
        None => fail::<P>(
            Step::Mapping,
            format_args!("no last-level table for page {g}"),
        ),
    }
}

fn page_ptr(g: usize) -> *mut u64 {
    (DATA_VA + g as u64 * PAGE) as *mut u64
}

/// One access through the MMU: a load, or a store of `g`'s marker.
///
/// # Safety
/// Data page `g` is mapped read-write to a frame of the data region (between
/// [`Kernel::run`]'s mapping step and [`Kernel::unmap_data`], and not the unmapped page), and
/// nothing but these markers is stored in it.
unsafe fn touch(g: usize, write: bool) {
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
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The folios of the data region, by first page, in address order.
struct Layout {
    folios: [(usize, usize); MAX_FOLIOS],
    len: usize,
}

impl Layout {
    /// Table 0: 32 folios of 64 KiB (contpte on arm64). Table 1: a 128 KiB folio whose last
    /// page is unmapped later (a contpte block and an unfolded tail on arm64), 14 folios of
    /// 64 KiB, 64 folios of 16 KiB (never contpte).
    fn new() -> Self {
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

    fn iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.folios[..self.len].iter().copied()
    }

    /// The folio index of data page `g`.
    fn folio_of_page(&self, g: usize) -> Option<usize> {
        self.iter()
            .position(|(first, pages)| (first..first + pages).contains(&g))
    }
}

/// How both kernels reach and clear frames: the identity map and zero-core's detected
/// policy. (No debug check: [`alloc_zeroed`] reads every block it hands out anyway.)
pub fn clearer() -> FrameClearer<OffsetMap> {
    // SAFETY: both kernels identity-map every frame the zone spans as normal memory, and a
    // frame's bytes are touched only by whoever the zone handed it to (or by the zone while
    // it is free).
    FrameClearer::detected(unsafe { OffsetMap::new(0) })
}

/// A zeroed block of `order` on `cpu` from the zone's `alloc_zeroed` (known zero, or cleared
/// by zero-core), every word checked.
pub fn alloc_zeroed<P: Platform>(
    zone: &KernelZone,
    cpu: usize,
    order: u8,
    clearer: &FrameClearer<OffsetMap>,
) -> Pfn {
    let o = Order::new(order).unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
    let pfn = zone
        .alloc_zeroed(cpu, o, clearer, None, &mut NoResched)
        .unwrap_or_else(|e| {
            fail::<P>(
                Step::Zeroing,
                format_args!("cpu {cpu}: alloc_zeroed order {order}: {e}"),
            )
        });
    let words = (o.pages() * PAGE / 8) as usize;
    let p = (pfn.0 * PAGE) as *const u64;
    for w in 0..words {
        // SAFETY: the zone just handed this identity-mapped block to this core.
        let v = unsafe { core::ptr::read_volatile(p.add(w)) };
        if v != 0 {
            fail::<P>(
                Step::Zeroing,
                format_args!("cpu {cpu}: pfn {pfn} word {w} reads {v:#x}"),
            );
        }
    }
    pfn
}

/// Background zeroing on `cpu`'s behalf until `frames` more frames are known zero or none
/// is left to clear; returns the frames cleared.
pub fn zero_in_background<P: Platform>(
    zone: &KernelZone,
    frames: u64,
    clearer: &FrameClearer<OffsetMap>,
) -> u64 {
    zone.zero_some(frames, clearer, &mut NoResched)
        .unwrap_or_else(|e| fail::<P>(Step::Zeroing, format_args!("zero_some: {e}")))
}

/// The page the run unmaps: the last page of table 1's 128 KiB folio.
const UNMAPPED_PAGE: usize = 512 + 31;

/// The state the steps share.
pub struct Kernel<P: Platform> {
    /// The zone.
    pub zone: &'static KernelZone,
    clearer: FrameClearer<OffsetMap>,
    /// Frames of the data region (zeroed allocations).
    pub frames: u64,
    data_pfn: u64,
    /// The data region is mapped: from step 4 until [`Kernel::unmap_data`].
    data_mapped: bool,
    layout: Layout,
    /// Flushes of unfolds and unmaps.
    pub tlb: P::Tlb,
    stats: AgingStats,
    aging_flushes: u64,
    /// The second CPU runs.
    pub second_cpu: bool,
    /// `start_second_cpu` was called (it may be called once).
    smp_tried: bool,
}

/// A `TlbFlush` that invalidates nothing: the negative control.
struct SkippedFlush(u64);

impl TlbFlush for SkippedFlush {
    fn flush_range(&mut self, _: PageRange) {
        self.0 += 1;
    }
}

impl<P: Platform> Kernel<P> {
    /// The kernel's state over `zone`, clearing through the detected policy.
    pub fn new(zone: &'static KernelZone) -> Self {
        let policy = Policy::detect();
        println!(
            "zero-core: policy picks {} for 4 KiB, {} for 4 MiB, {} for 1 GiB",
            policy.choose(4096, false).name(),
            policy.choose(4 << 20, false).name(),
            policy.choose(1 << 30, false).name()
        );
        Self {
            zone,
            clearer: clearer(),
            frames: 0,
            data_pfn: 0,
            data_mapped: false,
            layout: Layout::new(),
            tlb: P::tlb(),
            stats: AgingStats::default(),
            aging_flushes: 0,
            second_cpu: false,
            smp_tried: false,
        }
    }

    fn lookup(&self) -> impl Fn(Pfn) -> Option<FrameRange> + '_ {
        let base = self.data_pfn;
        move |pfn| {
            let g = usize::try_from(pfn.0.checked_sub(base)?).ok()?;
            let i = self.layout.folio_of_page(g)?;
            let (first, pages) = self.layout.folios[i];
            Some(FrameRange::new(Pfn(base + first as u64), pages as u64))
        }
    }

    /// Maps the folios of table `t` (clean, writable, old).
    fn map_table(&mut self, t: usize) {
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

    /// One aging pass over the data region; returns which folios were young. A format that
    /// does not flush for young clearing (x86: Linux skips it, the TLB ages out) gets one
    /// invalidation of each table's range here, so that the next access is seen.
    fn age(&mut self, tlb: &mut impl TlbFlush) -> ([bool; MAX_FOLIOS], AgingStats) {
        P::sync();
        let mut young = [false; MAX_FOLIOS];
        let mut stats = AgingStats::default();
        for t in 0..DATA_TABLES {
            let table = locate::<P>(t * 512).0;
            let lookup = self.lookup();
            let base = self.data_pfn;
            let layout = &self.layout;
            stats += age_range(
                &table,
                0..512,
                &lookup,
                FpbFlags::IGNORE_CONT,
                tlb,
                |f, y| {
                    if let Some(i) = layout.folio_of_page((f.start.0 - base) as usize) {
                        young[i] |= y;
                    }
                },
            )
            .unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("{e}")));
            if !P::FORMAT.flushes_young() {
                let range = PageRange::new(table.base(), 512, P::FORMAT.page_size());
                tlb.flush_range(range);
            }
        }
        (young, stats)
    }

    /// Steps 4 to 7 and the SMP steps: the data region mapped, touched, aged, refaulted, the
    /// negative control, and (with a second CPU) concurrent writes and allocation.
    pub fn run(&mut self, platform: &mut P) {
        self.map_data();
        let touched = self.touch_some();
        self.age_exactly(&touched);
        self.refault_and_control(&touched);
        self.second_cpu = self.smp_step(platform);
        smp_alloc_step::<P>(self.second_cpu);
    }

    /// Step 4: The data region: frames from the zone (zeroed), folios mapped by pte-batch.
    fn map_data(&mut self) {
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

    /// Step 5: Touch a pseudo-random third of the folios, one page each, reading or writing.
    fn touch_some(&self) -> [Option<(usize, bool)>; MAX_FOLIOS] {
        let mut touched: [Option<(usize, bool)>; MAX_FOLIOS] = [None; MAX_FOLIOS];
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for (i, (first, pages)) in self.layout.iter().enumerate() {
            if !rng.next().is_multiple_of(3) {
                continue;
            }
            let mut g = first + (rng.next() as usize) % pages;
            if g == UNMAPPED_PAGE {
                g -= 1;
            }
            touched[i] = Some((g, rng.next().is_multiple_of(2)));
        }
        // SAFETY: step 4 mapped every data page but UNMAPPED_PAGE, which is never picked.
        unsafe { touch_all(&touched) };
        let n_touched = touched.iter().flatten().count();
        let n_written = touched.iter().flatten().filter(|t| t.1).count();
        println!("touched {n_touched} folios ({n_written} written)");
        touched
    }

    /// Step 6: Age: the young folios must be exactly the touched ones; written pages stay dirty.
    fn age_exactly(&mut self, touched: &[Option<(usize, bool)>; MAX_FOLIOS]) {
        let mut tlb = P::tlb();
        let t0 = P::now_ns();
        let (young, stats) = self.age(&mut tlb);
        let pass_ns = P::now_ns().saturating_sub(t0);
        for (i, y) in young.iter().enumerate().take(self.layout.len) {
            if *y != touched[i].is_some() {
                fail::<P>(
                    Step::Aging,
                    format_args!("folio {i}: young {y}, touched {:?}", touched[i]),
                );
            }
        }
        for &(g, write) in touched.iter().flatten() {
            let (t, i) = locate::<P>(g);
            let pte = t
                .get(i)
                .unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("{e}")));
            if P::FORMAT.is_young(pte) {
                fail::<P>(
                    Step::Aging,
                    format_args!("page {g} still young after aging"),
                );
            }
            if write && !P::FORMAT.is_dirty(pte) {
                fail::<P>(
                    Step::Aging,
                    format_args!("page {g}: the write's dirty state was lost"),
                );
            }
        }
        self.aging_flushes = P::flushes(&tlb);
        println!(
            "aging: {} young of {} folios, as touched; {} batches, {} entry updates, {} range invalidates, {} us",
            stats.young_folios,
            stats.folios,
            stats.batches,
            stats.entry_updates,
            self.aging_flushes,
            pass_ns / 1000
        );
        self.stats = stats;
    }

    /// Step 7: Touch again: the flushed translations are walked again and the MMU sets the access
    /// flag again. Then the negative control: age without invalidating, and the TLB keeps the
    /// old translations.
    fn refault_and_control(&mut self, touched: &[Option<(usize, bool)>; MAX_FOLIOS]) {
        // SAFETY: the pages step 5 touched, still mapped.
        unsafe { touch_all(touched) };
        P::sync();
        for &(g, _) in touched.iter().flatten() {
            let (t, i) = locate::<P>(g);
            if !t.get(i).is_ok_and(|e| P::FORMAT.is_young(e)) {
                fail::<P>(
                    Step::Refault,
                    format_args!("page {g}: no access flag after the flush"),
                );
            }
        }
        println!("re-touch: every touched page young again");
        let mut skipped = SkippedFlush(0);
        let _ = self.age(&mut skipped);
        // SAFETY: as above: aging changes no mapping.
        unsafe { touch_all(touched) };
        P::sync();
        let stale = touched
            .iter()
            .flatten()
            .filter(|&&(g, _)| {
                let (t, i) = locate::<P>(g);
                !t.get(i).is_ok_and(|e| P::FORMAT.is_young(e))
            })
            .count();
        let n_touched = touched.iter().flatten().count();
        if stale == 0 {
            match P::skipped_flush_observable() {
                Ok(()) => fail::<P>(
                    Step::NegativeControl,
                    format_args!("skipping {} flushes went unnoticed", skipped.0),
                ),
                Err(why) => {
                    println!(
                        "negative control: not observable here ({why}): with {} flushes skipped every re-touched page was young again",
                        skipped.0
                    );
                    P::flush_all();
                    return;
                }
            }
        }
        println!(
            "negative control: with {} flushes skipped, {stale} of {n_touched} re-touched pages stayed old (detected)",
            skipped.0
        );
        P::flush_all();
    }

    /// With a second CPU: it writes every page of table 0 while this CPU ages it; no dirty
    /// state may be lost. Returns whether the second CPU runs.
    fn smp_step(&mut self, platform: &mut P) -> bool {
        // Fresh, clean and old mappings for table 0.
        let table = locate::<P>(0).0;
        let _ = table
            .unmap_ptes(0, 512, &mut self.tlb)
            .unwrap_or_else(|e| fail::<P>(Step::Smp, format_args!("{e}")));
        self.map_table(0);
        P::publish_tables();
        if self.smp_tried {
            fail::<P>(
                Step::Smp,
                format_args!("the second CPU was started already"),
            );
        }
        self.smp_tried = true;
        // SAFETY: once per kernel (checked just above); on the kernel's map, since the data
        // tables just mapped are the live map's (`set_data_table`'s contract).
        if let Err(why) = unsafe { platform.start_second_cpu() } {
            println!("smp: no second core ({why}); concurrent step skipped");
            return false;
        }
        SMP_GO.store(true, Ordering::Release);
        let mut tlb = P::tlb();
        let mut passes = 0u64;
        let mut young_seen = 0u64;
        while SMP_WRITTEN.load(Ordering::Acquire) < 512 {
            passes += 1;
            SMP_PASSES.store(passes, Ordering::Release);
            young_seen += self.age(&mut tlb).1.young_folios;
        }
        if young_seen == 0 {
            fail::<P>(
                Step::Smp,
                format_args!("no pass saw a concurrent write as young"),
            );
        }
        P::sync();
        for g in 0..512 {
            let (t, i) = locate::<P>(g);
            let pte = t
                .get(i)
                .unwrap_or_else(|e| fail::<P>(Step::Smp, format_args!("{e}")));
            if !P::FORMAT.is_dirty(pte) {
                fail::<P>(
                    Step::Smp,
                    format_args!("page {g}: a concurrent write's dirty state was lost"),
                );
            }
            // SAFETY: page g is mapped; the second core finished writing it (Acquire above).
            let v = unsafe { core::ptr::read_volatile(page_ptr(g)) };
            if v != 0x5eed_0000 + g as u64 {
                fail::<P>(Step::Smp, format_args!("page {g} reads {v:#x}"));
            }
        }
        println!(
            "smp: core 1 wrote all 512 pages of table 0 while core 0 aged it ({passes} passes, {young_seen} young folios seen): no dirty state lost"
        );
        true
    }

    /// For the measurements (the x86_64 kernel's, under KVM): `rounds` timed aging passes over the whole data region with
    /// every mapped page young (made young untimed before each pass: a full flush, then a read
    /// of every page), batched and per-entry alternately; `sample(batched, ticks)` gets each
    /// pass's `now()` difference.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))]
    pub fn time_aging(
        &mut self,
        rounds: usize,
        now: impl Fn() -> u64,
        mut sample: impl FnMut(bool, u64),
    ) {
        if !self.data_mapped {
            fail::<P>(
                Step::Mapping,
                format_args!("time_aging: the data region is not mapped"),
            );
        }
        let mut tlb = P::tlb();
        for _ in 0..rounds {
            for batched in [true, false] {
                P::flush_all();
                for g in (0..DATA_PAGES).filter(|&g| g != UNMAPPED_PAGE) {
                    // SAFETY: the data region is mapped (checked above), but UNMAPPED_PAGE.
                    unsafe { touch(g, false) };
                }
                P::sync();
                let lookup = self.lookup();
                let t0 = now();
                for t in 0..DATA_TABLES {
                    let table = locate::<P>(t * 512).0;
                    let r = if batched {
                        age_range(
                            &table,
                            0..512,
                            &lookup,
                            FpbFlags::IGNORE_CONT,
                            &mut tlb,
                            |_, _| {},
                        )
                    } else {
                        pte_batch::reference::age_range(
                            &table,
                            0..512,
                            &lookup,
                            &mut tlb,
                            |_, _| {},
                        )
                    };
                    r.unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("{e}")));
                }
                sample(batched, now().wrapping_sub(t0));
            }
        }
    }

    /// For the measurements: `rounds` timed frees of a 512-page run (an order-9 block split
    /// into order-0 pages), with `free_contig_range` and page by page alternately;
    /// `sample(batched, ticks)` gets each free's `now()` difference.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))]
    pub fn time_free(
        &self,
        rounds: usize,
        now: impl Fn() -> u64,
        mut sample: impl FnMut(bool, u64),
    ) {
        let order = Order::new(9).unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
        for _ in 0..rounds {
            for batched in [true, false] {
                let pfn = self
                    .zone
                    .alloc_pages(0, order)
                    .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
                self.zone
                    .split_page(pfn, order)
                    .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
                let t0 = now();
                let r = if batched {
                    self.zone.free_contig_range(0, pfn, 512)
                } else {
                    buddy_sim::reference::free_contig_range_per_page(self.zone, 0, pfn, 512)
                };
                sample(batched, now().wrapping_sub(t0));
                r.unwrap_or_else(|e| fail::<P>(Step::Free, format_args!("{e}")));
            }
        }
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

    /// Step 8: Gives the data run back and checks the zone is whole (the platform has freed its
    /// tables); prints the summary and ends the run.
    pub fn finish(
        self,
        whole: [u32; buddy_sim::MAX_SUPPORTED_ORDER as usize + 1],
        tables: u64,
    ) -> ! {
        self.zone
            .free_contig_range(0, Pfn(self.data_pfn), DATA_PAGES as u64)
            .unwrap_or_else(|e| fail::<P>(Step::Free, format_args!("{e}")));
        self.zone.drain_all();
        // Blocks known zero and others stay apart: merge them, and the free blocks are the
        // zone's first ones again.
        self.zone.merge_free_blocks();
        if let Err(c) = self.zone.check() {
            fail::<P>(Step::Free, format_args!("zone corrupt: {c:?}"));
        }
        if self.zone.buddy_blocks_per_order() != whole || self.zone.leaked_pages() != 0 {
            fail::<P>(Step::Free, format_args!("the zone is not whole again"));
        }
        println!(
            "buddy-sim: free_contig_range gave the {DATA_PAGES}-page run back, the page tables their {tables} table pages; zone whole"
        );
        println!(
            "summary: frames {} zeroed, folios {}, young found {}, entry updates {}, flushes {} (+{} unfold/unmap)",
            self.frames,
            self.layout.len,
            self.stats.young_folios,
            self.stats.entry_updates,
            self.aging_flushes,
            P::flushes(&self.tlb),
        );
        println!("PASS");
        P::exit(0)
    }
}

/// Touches every page of `touched`.
///
/// # Safety
/// As [`touch`], for every page of `touched`.
unsafe fn touch_all(touched: &[Option<(usize, bool)>]) {
    for &(g, write) in touched.iter().flatten() {
        // SAFETY: forwarded from the caller.
        unsafe { touch(g, write) };
    }
}

static SMP_GO: AtomicBool = AtomicBool::new(false);
static SMP_WRITTEN: AtomicUsize = AtomicUsize::new(0);
/// Aging passes core 0 has started.
static SMP_PASSES: AtomicU64 = AtomicU64::new(0);

/// Blocks one core hands the other to free: `(pfn, order, stamp)`.
struct Mailbox {
    blocks: [(u64, u8, u64); 16],
    len: usize,
}

static MAILBOX: [Mutex<Mailbox>; CPUS] = [const {
    Mutex::new(Mailbox {
        blocks: [(0, 0, 0); 16],
        len: 0,
    })
}; CPUS];
static ALLOC_GO: AtomicBool = AtomicBool::new(false);
/// Core 1 finished its allocation rounds (and now zeroes in the background).
static ROUNDS_DONE: AtomicBool = AtomicBool::new(false);
/// Core 0 is done with zeroed allocations: core 1 stops zeroing.
static ZERO_STOP: AtomicBool = AtomicBool::new(false);
/// Frames core 1 cleared in the background.
static ZEROED_BY_SECOND: AtomicU64 = AtomicU64::new(0);
/// Core 1 left the kernel's map: core 0 may free its tables.
static ALLOC_DONE: AtomicBool = AtomicBool::new(false);
/// Per core: pages allocated, pages of its own freed, pages of the other core's freed.
static ALLOCATED: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];
static FREED_OWN: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];
static FREED_REMOTE: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];
const ALLOC_ROUNDS: u64 = 64;

/// The stamp `cpu` writes into the first word of the block it allocated in `round`.
fn stamp(cpu: usize, round: u64) -> u64 {
    0x57a3_0000_0000_0000 | (cpu as u64) << 32 | round
}

/// One core's share of the SMP allocation step: each round allocates a zeroed block (orders
/// 0-4, 2 MiB every 16th round) on this core's lists and checks it,
/// stamps it, and either frees it or hands it to the other core; then frees what the other
/// core handed over, after checking its stamp (a block handed out twice would show).
fn alloc_rounds<P: Platform>(cpu: usize) {
    let zone = zone::<P>();
    let clearer = clearer();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ cpu as u64);
    for round in 0..ALLOC_ROUNDS {
        let order = if round % 16 == 15 {
            9
        } else {
            (rng.next() % 5) as u8
        };
        let pfn = alloc_zeroed::<P>(zone, cpu, order, &clearer).0;
        ALLOCATED[cpu].fetch_add(1 << order, Ordering::Relaxed);
        let first = (pfn * PAGE) as *mut u64;
        // SAFETY: this core's freshly allocated block, identity-mapped.
        unsafe { first.write_volatile(stamp(cpu, round)) };
        let handed = round % 2 == 0 && {
            let mut other = MAILBOX[1 - cpu].lock();
            let len = other.len;
            let room = len < other.blocks.len();
            if room {
                other.blocks[len] = (pfn, order, stamp(cpu, round));
                other.len += 1;
            }
            room
        };
        if !handed {
            free_block_of::<P>(zone, cpu, pfn, order);
            FREED_OWN[cpu].fetch_add(1 << order, Ordering::Relaxed);
        }
        free_mail::<P>(zone, cpu);
    }
}

/// Frees every block in `cpu`'s mailbox on `cpu`, checking each one's stamp first.
fn free_mail<P: Platform>(zone: &KernelZone, cpu: usize) {
    let mut mine = MAILBOX[cpu].lock();
    let len = mine.len;
    for &(pfn, order, stamp) in &mine.blocks[..len] {
        // SAFETY: the other core handed this block over and no longer touches it.
        let v = unsafe { ((pfn * PAGE) as *const u64).read_volatile() };
        if v != stamp {
            fail::<P>(
                Step::Smp,
                format_args!("cpu {cpu}: block {pfn:#x} reads {v:#x}, not the stamp {stamp:#x}"),
            );
        }
        free_block_of::<P>(zone, cpu, pfn, order);
        FREED_REMOTE[cpu].fetch_add(1 << order, Ordering::Relaxed);
    }
    mine.len = 0;
}

fn free_block_of<P: Platform>(zone: &KernelZone, cpu: usize, pfn: u64, order: u8) {
    let o = Order::new(order).unwrap_or_else(|e| fail::<P>(Step::Smp, format_args!("{e}")));
    zone.free_pages(cpu, Pfn(pfn), o)
        .unwrap_or_else(|e| fail::<P>(Step::Smp, format_args!("cpu {cpu}: free {pfn:#x}: {e}")));
}

/// Both cores allocate and free at once (core 0 alone without a second core); at the end
/// every block is freed and every page accounted for.
fn smp_alloc_step<P: Platform>(second_core: bool) {
    ALLOC_GO.store(true, Ordering::Release);
    alloc_rounds::<P>(0);
    if second_core {
        while !ROUNDS_DONE.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
    let zone = zone::<P>();
    // What is still in a mailbox goes back from core 0: core 1's blocks as remote frees,
    // core 0's own (handed to core 1, which has stopped) as its own.
    free_mail::<P>(zone, 0);
    let mut leftover = MAILBOX[1].lock();
    for &(pfn, order, _) in &leftover.blocks[..leftover.len] {
        free_block_of::<P>(zone, 0, pfn, order);
        FREED_OWN[0].fetch_add(1 << order, Ordering::Relaxed);
    }
    leftover.len = 0;
    let get = |a: &[AtomicU64; CPUS], c: usize| a[c].load(Ordering::Relaxed);
    let total: u64 = (0..CPUS).map(|c| get(&ALLOCATED, c)).sum();
    let freed: u64 = (0..CPUS)
        .map(|c| get(&FREED_OWN, c) + get(&FREED_REMOTE, c))
        .sum();
    if total != freed {
        fail::<P>(
            Step::Smp,
            format_args!("{total} pages allocated, {freed} freed"),
        );
    }
    for c in 0..CPUS {
        println!(
            "smp: core {c} allocated {} pages and freed {} of its own and {} of the other core's",
            get(&ALLOCATED, c),
            get(&FREED_OWN, c),
            get(&FREED_REMOTE, c)
        );
    }
    if second_core {
        println!(
            "smp: both cores allocated, zeroed and freed through one zone at once: every page accounted for"
        );
    }
    zeroing_step::<P>(second_core);
    if second_core {
        ZERO_STOP.store(true, Ordering::Release);
        while !ALLOC_DONE.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
}

/// Core 0 takes zeroed blocks (and writes and frees them) while core 1 runs background
/// zeroing; at the end core 1 must have cleared something, and every block core 0 got was
/// either known zero or cleared on the way (both checked word by word).
fn zeroing_step<P: Platform>(second_core: bool) {
    let zone = zone::<P>();
    let clearer = clearer();
    let before = zone.counters();
    let mut rng = Rng(0x5eed_2e20);
    for round in 0..ALLOC_ROUNDS {
        let order = if round % 8 == 7 {
            9
        } else {
            (rng.next() % 4) as u8
        };
        let pfn = alloc_zeroed::<P>(zone, 0, order, &clearer);
        // SAFETY: this core's block, identity-mapped: the caller writes what it got.
        unsafe { ((pfn.0 * PAGE) as *mut u64).write_volatile(stamp(0, round)) };
        free_block_of::<P>(zone, 0, pfn.0, order);
    }
    if second_core {
        while ZEROED_BY_SECOND.load(Ordering::Acquire) == 0 {
            core::hint::spin_loop();
        }
    }
    let after = zone.counters();
    let (hits, cleared) = (
        after.zeroed_hits - before.zeroed_hits,
        after.cleared_on_alloc - before.cleared_on_alloc,
    );
    println!(
        "buddy-sim: core 0 took {ALLOC_ROUNDS} zeroed blocks, {hits} known zero, {cleared} frames cleared on the way; core 1 zeroed {} frames in the background meanwhile",
        ZEROED_BY_SECOND.load(Ordering::Acquire)
    );
}

/// The second CPU's part, once its platform has it running on the kernel's map: writes the
/// pages of table 0 while core 0 ages them, allocates and frees beside core 0, then zeroes
/// free frames in the background while core 0 takes zeroed blocks;
/// `leave_map` runs before core 0 may free the map's tables.
///
/// # Safety
/// Called once, on the second CPU, running on the kernel's map (the data region mapped as
/// core 0 maps it).
// The x86_64 platform starts no second CPU yet.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub unsafe fn secondary<P: Platform>(leave_map: impl FnOnce()) -> ! {
    while !SMP_GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    // Eight pages per aging pass, back to front (against the walk's direction): each batch
    // of writes lands while core 0 is clearing, whatever the host's scheduling.
    let mut seen = 0;
    for chunk in (0..64usize).rev() {
        loop {
            let passes = SMP_PASSES.load(Ordering::Acquire);
            if passes > seen {
                seen = passes;
                break;
            }
            core::hint::spin_loop();
        }
        for g in (chunk * 8..chunk * 8 + 8).rev() {
            // SAFETY: the caller runs this core on the kernel's map, and core 0 set SMP_GO
            // with table 0's pages mapped, which stay mapped until core 0 has seen every
            // write (SMP_WRITTEN).
            unsafe { touch(g, true) };
        }
        SMP_WRITTEN.fetch_add(8, Ordering::Release);
    }
    while !ALLOC_GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    alloc_rounds::<P>(1);
    ROUNDS_DONE.store(true, Ordering::Release);
    // The idle loop: background zeroing, until core 0 has taken its zeroed blocks.
    let (zone, clearer) = (zone::<P>(), clearer());
    while !ZERO_STOP.load(Ordering::Acquire) {
        let n = zero_in_background::<P>(zone, ZERO_STEP, &clearer);
        ZEROED_BY_SECOND.fetch_add(n, Ordering::Release);
    }
    leave_map();
    ALLOC_DONE.store(true, Ordering::Release);
    loop {
        core::hint::spin_loop();
    }
}
