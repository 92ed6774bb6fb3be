//! The arm64 kernel that runs the three crates against a live (emulated) MMU:
//! buddy-sim hands out every frame, zero-core zeroes them, pte-batch builds contpte-mapped
//! page tables and ages them while the MMU sets access and dirty bits on its own.
//!
//! Booted by `qemu-system-aarch64 -M virt -cpu max -m 128M -semihosting -kernel unikernel` at
//! EL1; prints over the PL011 UART and exits through semihosting with 0 on success or the
//! number of the step that failed. See the repository README, section "Embedding".

mod boot;
pub mod console;
mod mmu;

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use buddy_sim::{Frame, OffsetMap, Order, PerCpu, Pfn, Zone, ZoneConfig, ZoneTables};
use pte_batch::format::Arm64;
use pte_batch::mm_types::{FrameRange, PageRange, PageSize, VirtAddr};
use pte_batch::{Access, AgingStats, FpbFlags, Prot, PteFormat, PteTable, TlbFlush, age_range};
use spin::{Mutex, Once};
use zero_core::{ClearConfig, NoResched, Policy, PreemptModel};

use mmu::{DATA_VA, El1Tlb, RAM_SIZE, RAM_START};

/// Exit codes: the step that failed.
#[derive(Clone, Copy, Debug)]
#[repr(u32)]
enum Step {
    Zone = 2,
    Zeroing = 3,
    Mapping = 4,
    Aging = 6,
    Refault = 7,
    NegativeControl = 8,
    Free = 9,
    PageTables = 13,
    Smp = 10,
    Exception = 11,
    Panic = 12,
}

fn fail(step: Step, what: core::fmt::Arguments<'_>) -> ! {
    println!("FAIL {step:?} (exit {}): {what}", step as u32);
    console::exit(step as u32)
}

const PAGE: u64 = PageSize::Size4KiB.bytes() as u64;
/// Level-3 tables of the data region (2 MiB each).
const DATA_TABLES: usize = 2;
const DATA_PAGES: usize = 512 * DATA_TABLES;
/// The data region is one order-10 block (4 MiB), split into order-0 pages.
const DATA_ORDER: u8 = 10;
const MAX_FRAMES: usize = (RAM_SIZE / PAGE) as usize;
const MAX_FOLIOS: usize = 128;

/// CPUs the zone has per-cpu lists for (the `-smp 2` boot starts the second).
const CPUS: usize = 2;

/// The zone's metadata: plain statics (all zero, so in .bss), no `static mut`.
static FRAMES: [Frame; MAX_FRAMES] = [const { Frame::new() }; MAX_FRAMES];
static PCPS: [PerCpu; CPUS] = [const { PerCpu::new() }; CPUS];

type KernelZone = Zone<&'static [Frame], &'static [PerCpu]>;

/// The zone every core allocates from, set up once by the boot core.
static ZONE: Once<KernelZone> = Once::new();

/// Physical addresses of the data region's level-3 tables (0: none), for the fault handler:
/// tables aarch64-paging built, found by walking its map.
static DATA_L3: [AtomicU64; DATA_TABLES] = [const { AtomicU64::new(0) }; DATA_TABLES];
/// Access-flag / permission faults the kernel resolved in software (no FEAT_HAFDBS).
static SOFT_FAULTS: AtomicU64 = AtomicU64::new(0);
/// Whether the range TLBI may be used by the fault handler.
static TLBI_RANGE: AtomicBool = AtomicBool::new(false);

/// The live level-3 table `t` of the data region, as pte-batch sees it.
fn data_table(t: usize) -> Option<PteTable<'static, Arm64>> {
    let pa = DATA_L3.get(t)?.load(Ordering::Acquire);
    if pa == 0 {
        return None;
    }
    // SAFETY: `pa` is a level-3 table of the kernel's map (a zeroed frame from the zone,
    // identity-mapped), used only as this table until step 8 clears DATA_L3[t] before the map
    // frees it; the MMU, aarch64-paging and this kernel access it only atomically.
    let entries: &'static [AtomicU64; 512] = unsafe { &*(pa as *const [AtomicU64; 512]) };
    PteTable::new(
        Arm64::G4K,
        VirtAddr(DATA_VA + t as u64 * (2 << 20)),
        entries,
    )
    .ok()
}

/// The data page `g` (0..DATA_PAGES) as (table, entry).
fn locate(g: usize) -> (PteTable<'static, Arm64>, usize) {
    match data_table(g / 512) {
        Some(t) => (t, g % 512),
        None => fail(Step::Mapping, format_args!("no level-3 table for page {g}")),
    }
}

fn page_ptr(g: usize) -> *mut u64 {
    (DATA_VA + g as u64 * PAGE) as *mut u64
}

/// One access through the MMU: a load, or a store of `g`'s marker.
fn touch(g: usize, write: bool) {
    let p = page_ptr(g);
    // SAFETY: page g of the data region is mapped (read-write, DBM) to a frame this kernel
    // owns; a volatile access so the MMU really sees it.
    unsafe {
        if write {
            core::ptr::write_volatile(p, 0x5eed_0000 + g as u64);
        } else {
            let _ = core::ptr::read_volatile(p);
        }
    }
}

/// The synchronous exception handler: resolves access-flag faults and write faults on
/// dirty-managed pages of the data region in software (Linux's `handle_pte_fault` with
/// `ptep_set_access_flags`, block-wide for a contpte entry) on CPUs without FEAT_HAFDBS.
/// Anything else is fatal.
#[unsafe(no_mangle)]
extern "C" fn el1_sync(esr: u64, far: u64) {
    let ec = esr >> 26;
    let dfsc = esr & 0x3f;
    let write = esr & (1 << 6) != 0;
    let in_data = far.wrapping_sub(DATA_VA) < DATA_PAGES as u64 * PAGE;
    // Data abort at EL1: access-flag fault or permission fault, level 3.
    if ec == 0x25 && in_data && (dfsc == 0x0b || (dfsc == 0x0f && write)) {
        let (table, index) = locate(((far - DATA_VA) / PAGE) as usize);
        let access = if write { Access::Write } else { Access::Read };
        let f = table.format();
        let cont = table.raw(index).is_ok_and(|e| f.is_cont(e));
        let picks = if cont { f.cont_ptes() } else { 1 };
        for pick in 0..picks {
            if let Err(e) = table.hw_access(index, access, pick) {
                fail(Step::Exception, format_args!("fault at {far:#x}: {e}"));
            }
        }
        let start = if cont { index - index % picks } else { index };
        let mut tlb = El1Tlb {
            range: TLBI_RANGE.load(Ordering::Relaxed),
            flushes: 0,
        };
        let va = table.va_of(start).unwrap_or(VirtAddr(far));
        tlb.flush_range(PageRange::new(va, picks as u64, PageSize::Size4KiB));
        SOFT_FAULTS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    fail(Step::Exception, format_args!("ESR {esr:#x} FAR {far:#x}"));
}

#[unsafe(no_mangle)]
extern "C" fn unexpected_exception(esr: u64, far: u64, elr: u64) -> ! {
    fail(
        Step::Exception,
        format_args!("unexpected exception: ESR {esr:#x} FAR {far:#x} ELR {elr:#x}"),
    )
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    fail(Step::Panic, format_args!("{info}"))
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
    /// Table 0: 32 folios of 64 KiB (contpte). Table 1: a 128 KiB folio whose last page is
    /// unmapped later (a contpte block and an unfolded tail), 14 folios of 64 KiB (contpte),
    /// 64 folios of 16 KiB (never contpte).
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

/// Allocates a block of `order` on `cpu` and zeroes it with zero-core, checking every word
/// (the block is filled with a pattern first, so the check means something).
fn alloc_zeroed(zone: &KernelZone, cpu: usize, order: u8, clear: &ClearConfig) -> u64 {
    let o = Order::new(order).unwrap_or_else(|e| fail(Step::Zone, format_args!("{e}")));
    let pfn = zone
        .alloc_pages(cpu, o)
        .unwrap_or_else(|e| {
            fail(
                Step::Zone,
                format_args!("cpu {cpu}: alloc order {order}: {e}"),
            )
        })
        .0;
    let pages = 1usize << order;
    let bytes = pages * PAGE as usize;
    let p = (pfn * PAGE) as *mut u8;
    // SAFETY: the zone just handed these frames to this core; they are identity-mapped
    // normal memory and nobody else uses them.
    unsafe {
        core::ptr::write_bytes(p, 0xA5, bytes);
        zero_core::clear_contig_pages_raw(p, pages, clear, &mut NoResched)
            .unwrap_or_else(|e| fail(Step::Zeroing, format_args!("{e}")));
    }
    for w in 0..bytes / 8 {
        // SAFETY: within the block zeroed above.
        let v = unsafe { core::ptr::read_volatile(p.cast::<u64>().add(w)) };
        if v != 0 {
            fail(
                Step::Zeroing,
                format_args!("cpu {cpu}: pfn {pfn:#x} word {w} reads {v:#x}"),
            );
        }
    }
    pfn
}

/// The page the test unmaps: the last page of table 1's 128 KiB folio.
const UNMAPPED_PAGE: usize = 512 + 31;

struct Kernel {
    zone: &'static KernelZone,
    clear: ClearConfig,
    frames: u64,
    data_pfn: u64,
    layout: Layout,
    tlb: El1Tlb,
}

impl Kernel {
    /// Allocates a block of `order` on the boot core, zeroed and checked.
    fn alloc_zeroed(&mut self, order: u8) -> u64 {
        let pfn = alloc_zeroed(self.zone, 0, order, &self.clear);
        self.frames += 1 << order;
        pfn
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

    /// Maps the folios of table `t` (clean, writable through DBM, old).
    fn map_table(&mut self, t: usize) {
        let prot = Prot {
            write: true,
            attrs: mmu::DATA_ATTRS,
            ..Prot::default()
        };
        let table = data_table(t).unwrap_or_else(|| fail(Step::Mapping, format_args!("table")));
        for (first, pages) in self.layout.iter().filter(|(g, _)| g / 512 == t) {
            table
                .set_ptes(first % 512, Pfn(self.data_pfn + first as u64), pages, prot)
                .unwrap_or_else(|e| fail(Step::Mapping, format_args!("{e}")));
        }
    }

    /// One aging pass over the data region; returns which folios were young.
    fn age(&mut self, tlb: &mut impl TlbFlush) -> ([bool; MAX_FOLIOS], AgingStats) {
        mmu::sync();
        let mut young = [false; MAX_FOLIOS];
        let mut stats = AgingStats::default();
        for t in 0..DATA_TABLES {
            let table = locate(t * 512).0;
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
            .unwrap_or_else(|e| fail(Step::Aging, format_args!("{e}")));
        }
        (young, stats)
    }
}

/// A `TlbFlush` that invalidates nothing: the negative control.
struct SkippedFlush(u64);

impl TlbFlush for SkippedFlush {
    fn flush_range(&mut self, _: PageRange) {
        self.0 += 1;
    }
}

fn current_el() -> u64 {
    let el: u64;
    // SAFETY: reading CurrentEL has no side effects.
    unsafe { core::arch::asm!("mrs {}, currentel", out(reg) el, options(nomem, nostack)) };
    (el >> 2) & 3
}

unsafe extern "C" {
    static __image_end: u8;
    static __stack1_top: u8;
}

#[unsafe(no_mangle)]
extern "C" fn kmain() -> ! {
    println!("unikernel: booted at EL{}", current_el());
    // 4. (first) The MMU: the boot identity map (aarch64-paging, tables from a static pool),
    // hardware access/dirty management if present.
    let feat = mmu::features();
    let mut boot_map = mmu::new_map(mmu::BootTables::take());
    mmu::map_identity(&mut boot_map)
        .unwrap_or_else(|e| fail(Step::PageTables, format_args!("boot map: {e}")));
    let boot_regs = mmu::registers(feat, boot_map.root_address());
    mmu::enable(&boot_regs);
    boot_map.mark_active();
    BOOT_TTBR0.store(boot_regs.ttbr0, Ordering::Relaxed);
    TLBI_RANGE.store(feat.tlbi_range, Ordering::Relaxed);
    let mode = match feat.hafdbs {
        0 => "none: access flag and dirty state in software (fault handler)",
        1 => "access flag only: dirty state in software",
        _ => "access flag and dirty state",
    };
    println!("mmu: on, 4 KiB granule; hardware management: {mode}");
    println!(
        "tlb: {}",
        if feat.tlbi_range {
            "FEAT_TLBIRANGE range invalidates"
        } else {
            "per-page invalidates (no FEAT_TLBIRANGE)"
        }
    );

    // 2. The zone spans all RAM; the memory map gives it everything past the image (the
    // image's frames stay reserved: a hole at the start of the zone).
    let image_end = core::ptr::addr_of!(__image_end) as u64;
    let (ram_pfn, end_pfn) = (RAM_START / PAGE, (RAM_START + RAM_SIZE) / PAGE);
    let start_pfn = image_end.div_ceil(PAGE);
    let nr = end_pfn - start_pfn;
    let cfg = ZoneConfig::new(Pfn(ram_pfn), end_pfn - ram_pfn).with_cpus(CPUS);
    let zone = ZONE.call_once(|| {
        let zone = Zone::new_empty(cfg, &FRAMES[..], &PCPS[..])
            .unwrap_or_else(|e| fail(Step::Zone, format_args!("{e}")));
        zone.add_memory(Pfn(start_pfn), nr)
            .unwrap_or_else(|e| fail(Step::Zone, format_args!("{e}")));
        zone
    });
    let whole = zone.buddy_blocks_per_order();
    println!(
        "buddy-sim: zone of {} frames from pfn {ram_pfn:#x}, {nr} usable past the image ({} MiB), {CPUS} CPUs",
        cfg.nr_pages,
        (nr * PAGE) >> 20
    );

    // 3. zero-core zeroes every frame taken from the zone.
    let policy = Policy::detect();
    println!(
        "zero-core: policy picks {} for 4 KiB, {} for 4 MiB",
        policy.choose(4096, false).name(),
        policy.choose(4 << 20, false).name()
    );
    let mut k = Kernel {
        zone,
        clear: ClearConfig::new(PageSize::Size4KiB, PreemptModel::None),
        frames: 0,
        data_pfn: 0,
        layout: Layout::new(),
        tlb: El1Tlb {
            range: feat.tlbi_range,
            flushes: 0,
        },
    };

    // 4. The kernel's map, built with aarch64-paging: the same identity map, and the data
    // region's level-3 tables, every table page from the zone and zeroed by zero-core.
    // SAFETY: RAM is identity-mapped (the boot map, and this map once it is live), and the
    // zone's frames belong to whoever the zone hands them to.
    let identity = unsafe { OffsetMap::new(0) };
    let tables = ZoneTables::new(zone, 0, identity)
        .unwrap_or_else(|e| fail(Step::PageTables, format_args!("{e}")));
    let mut map = mmu::new_map(tables);
    let built = mmu::map_identity(&mut map)
        .and_then(|()| mmu::map_data_tables(&mut map, DATA_PAGES * PAGE as usize));
    built.unwrap_or_else(|e| fail(Step::PageTables, format_args!("kernel map: {e}")));
    let mut found = 0;
    mmu::data_tables(&map, DATA_PAGES * PAGE as usize, |va, pa| {
        let t = ((va - DATA_VA) >> 21) as usize;
        if let Some(l3) = DATA_L3.get(t) {
            l3.store(pa, Ordering::Release);
            found += 1;
        }
    })
    .unwrap_or_else(|e| fail(Step::PageTables, format_args!("walk: {e}")));
    for t in 0..DATA_TABLES {
        let empty = data_table(t).is_some_and(|table| (0..512).all(|i| table.raw(i) == Ok(0)));
        if !empty {
            fail(
                Step::PageTables,
                format_args!("level-3 table {t} missing or not zero"),
            );
        }
    }
    let regs = mmu::registers(feat, map.root_address());
    mmu::publish_tables();
    mmu::switch(regs.ttbr0);
    boot_map.mark_inactive();
    map.mark_active();
    println!(
        "aarch64-paging: kernel map at {:#x} with {} table pages from the zone, zeroed by zero-core; {found} level-3 tables handed to pte-batch",
        regs.ttbr0,
        map.translation().tables()
    );
    k.data_pfn = k.alloc_zeroed(DATA_ORDER);
    let data_order =
        Order::new(DATA_ORDER).unwrap_or_else(|e| fail(Step::Zone, format_args!("{e}")));
    k.zone
        .split_page(Pfn(k.data_pfn), data_order)
        .unwrap_or_else(|e| fail(Step::Zone, format_args!("{e}")));
    for t in 0..DATA_TABLES {
        k.map_table(t);
    }
    let (t1, i1) = locate(UNMAPPED_PAGE);
    let gone = t1
        .unmap_ptes(i1, 1, &mut k.tlb)
        .unwrap_or_else(|e| fail(Step::Mapping, format_args!("{e}")));
    if gone.pages != 1 || k.tlb.flushes != 2 {
        fail(
            Step::Mapping,
            format_args!("unmap: {gone:?}, {} flushes", k.tlb.flushes),
        );
    }
    mmu::publish_tables();
    let cont = (0..DATA_PAGES)
        .filter(|&g| g != UNMAPPED_PAGE)
        .filter(|&g| {
            let (t, i) = locate(g);
            t.raw(i).is_ok_and(|e| Arm64::G4K.is_cont(e))
        })
        .count();
    println!(
        "pte-batch: {} folios over {} pages, {cont} entries contpte, page {UNMAPPED_PAGE} unmapped (its block unfolded)",
        k.layout.len, DATA_PAGES
    );

    // 5. Touch a pseudo-random third of the folios, one page each, reading or writing.
    let mut touched: [Option<(usize, bool)>; MAX_FOLIOS] = [None; MAX_FOLIOS];
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for (i, (first, pages)) in k.layout.iter().enumerate() {
        if !rng.next().is_multiple_of(3) {
            continue;
        }
        let mut g = first + (rng.next() as usize) % pages;
        if g == UNMAPPED_PAGE {
            g -= 1;
        }
        touched[i] = Some((g, rng.next().is_multiple_of(2)));
    }
    let touch_all = |touched: &[Option<(usize, bool)>]| {
        for &(g, write) in touched.iter().flatten() {
            touch(g, write);
        }
    };
    touch_all(&touched);
    let n_touched = touched.iter().flatten().count();
    let n_written = touched.iter().flatten().filter(|t| t.1).count();
    println!("touched {n_touched} folios ({n_written} written)");

    // 6. Age: the young folios must be exactly the touched ones; written pages stay dirty.
    let mut tlb = El1Tlb {
        range: feat.tlbi_range,
        flushes: 0,
    };
    let (young, stats) = k.age(&mut tlb);
    for (i, y) in young.iter().enumerate().take(k.layout.len) {
        if *y != touched[i].is_some() {
            fail(
                Step::Aging,
                format_args!("folio {i}: young {y}, touched {:?}", touched[i]),
            );
        }
    }
    for &(g, write) in touched.iter().flatten() {
        let (t, i) = locate(g);
        let pte = t
            .get(i)
            .unwrap_or_else(|e| fail(Step::Aging, format_args!("{e}")));
        if Arm64::G4K.is_young(pte) {
            fail(
                Step::Aging,
                format_args!("page {g} still young after aging"),
            );
        }
        if write && !Arm64::G4K.is_dirty(pte) {
            fail(
                Step::Aging,
                format_args!("page {g}: the write's dirty state was lost"),
            );
        }
    }
    println!(
        "aging: {} young of {} folios, as touched; {} batches, {} entry updates, {} range invalidates",
        stats.young_folios, stats.folios, stats.batches, stats.entry_updates, tlb.flushes
    );

    // 7. Touch again: the flushed translations are walked again and the MMU sets AF again.
    touch_all(&touched);
    mmu::sync();
    for &(g, _) in touched.iter().flatten() {
        let (t, i) = locate(g);
        if !t.get(i).is_ok_and(|e| Arm64::G4K.is_young(e)) {
            fail(
                Step::Refault,
                format_args!("page {g}: no access flag after the flush"),
            );
        }
    }
    println!("re-touch: every touched page young again");
    // The negative control: age without invalidating; the TLB keeps the old translations.
    let mut skipped = SkippedFlush(0);
    let _ = k.age(&mut skipped);
    touch_all(&touched);
    mmu::sync();
    let stale = touched
        .iter()
        .flatten()
        .filter(|&&(g, _)| {
            let (t, i) = locate(g);
            !t.get(i).is_ok_and(|e| Arm64::G4K.is_young(e))
        })
        .count();
    if stale == 0 {
        fail(
            Step::NegativeControl,
            format_args!("skipping {} flushes went unnoticed", skipped.0),
        );
    }
    println!(
        "negative control: with {} flushes skipped, {stale} of {n_touched} re-touched pages stayed old (detected)",
        skipped.0
    );
    mmu::flush_all();

    // With a second core: it writes every page of table 0 while this core ages it; then
    // both allocate, zero and free through the zone at once, freeing each other's blocks.
    let second_core = smp_step(&mut k, &regs);
    smp_alloc_step(second_core);

    // 8. Give everything back: unmap, free the tables and the data run, the zone is whole.
    // Back on the boot map, the kernel's map is dropped: aarch64-paging frees every table
    // page to the zone through ZoneTables.
    for (t, l3) in DATA_L3.iter().enumerate() {
        let table = locate(t * 512).0;
        let _ = table
            .unmap_ptes(0, 512, &mut k.tlb)
            .unwrap_or_else(|e| fail(Step::Free, format_args!("{e}")));
        l3.store(0, Ordering::Release);
    }
    mmu::switch(boot_regs.ttbr0);
    mmu::flush_all();
    map.mark_inactive();
    boot_map.mark_active();
    let tables = map.translation().tables();
    drop(map);
    k.zone
        .free_contig_range(0, Pfn(k.data_pfn), DATA_PAGES as u64)
        .unwrap_or_else(|e| fail(Step::Free, format_args!("{e}")));
    k.zone.drain_all();
    if let Err(c) = k.zone.check() {
        fail(Step::Free, format_args!("zone corrupt: {c:?}"));
    }
    if k.zone.buddy_blocks_per_order() != whole || k.zone.leaked_pages() != 0 {
        fail(Step::Free, format_args!("the zone is not whole again"));
    }
    println!(
        "buddy-sim: free_contig_range gave the {DATA_PAGES}-page run back, aarch64-paging its {tables} table pages; zone whole"
    );

    // 9. Summary.
    println!(
        "summary: frames {} zeroed, folios {}, young found {}, entry updates {}, flushes {} (+{} unfold/unmap), software faults {}",
        k.frames,
        k.layout.len,
        stats.young_folios,
        stats.entry_updates,
        tlb.flushes,
        k.tlb.flushes,
        SOFT_FAULTS.load(Ordering::Relaxed)
    );
    println!("PASS");
    console::exit(0)
}

/// The second core's boot context (cleaned to memory before CPU_ON).
static mut SECONDARY: mmu::SecondaryBoot = mmu::SecondaryBoot {
    stack_top: 0,
    mair: 0,
    tcr: 0,
    ttbr0: 0,
    sctlr: 0,
};
/// TTBR0 of the boot map, which the second core returns to before the kernel's map is freed.
static BOOT_TTBR0: AtomicU64 = AtomicU64::new(0);
static SMP_GO: AtomicBool = AtomicBool::new(false);
static SMP_WRITTEN: AtomicUsize = AtomicUsize::new(0);
/// Aging passes core 0 has started.
static SMP_PASSES: AtomicU64 = AtomicU64::new(0);

/// PSCI `CPU_ON` through `hvc` (the virt machine's conduit at EL1): returns PSCI's result.
fn cpu_on(mpidr: u64, entry: u64, context: u64) -> i64 {
    let mut x0: u64 = 0xC400_0003;
    // SAFETY: a PSCI call; QEMU's firmware interface starts the core at `entry` at EL1.
    unsafe {
        core::arch::asm!("hvc #0", inout("x0") x0, in("x1") mpidr, in("x2") entry, in("x3") context,
            options(nostack));
    }
    x0 as i64
}

/// Starts core 1 and ages table 0 while it writes; returns whether core 1 runs.
fn smp_step(k: &mut Kernel, regs: &mmu::SecondaryBoot) -> bool {
    // Fresh, clean and old mappings for table 0.
    let table = locate(0).0;
    let _ = table
        .unmap_ptes(0, 512, &mut k.tlb)
        .unwrap_or_else(|e| fail(Step::Smp, format_args!("{e}")));
    k.map_table(0);
    mmu::publish_tables();
    let ctx = mmu::SecondaryBoot {
        stack_top: core::ptr::addr_of!(__stack1_top) as u64,
        ..*regs
    };
    // SAFETY: written once, before the second core starts; it reads it with its MMU off,
    // hence the clean to the point of coherency.
    let ctx_ptr = unsafe {
        let p = core::ptr::addr_of_mut!(SECONDARY);
        p.write(ctx);
        p
    };
    mmu::clean_to_poc(ctx_ptr, core::mem::size_of::<mmu::SecondaryBoot>());
    let r = cpu_on(1, boot::secondary_entry as *const () as u64, ctx_ptr as u64);
    if r != 0 {
        println!("smp: no second core (PSCI CPU_ON returned {r}); concurrent step skipped");
        return false;
    }
    SMP_GO.store(true, Ordering::Release);
    let mut tlb = El1Tlb {
        range: k.tlb.range,
        flushes: 0,
    };
    let mut passes = 0u64;
    let mut young_seen = 0u64;
    while SMP_WRITTEN.load(Ordering::Acquire) < 512 {
        passes += 1;
        SMP_PASSES.store(passes, Ordering::Release);
        young_seen += k.age(&mut tlb).1.young_folios;
    }
    if young_seen == 0 {
        fail(
            Step::Smp,
            format_args!("no pass saw a concurrent write as young"),
        );
    }
    mmu::sync();
    for g in 0..512 {
        let (t, i) = locate(g);
        let pte = t
            .get(i)
            .unwrap_or_else(|e| fail(Step::Smp, format_args!("{e}")));
        if !Arm64::G4K.is_dirty(pte) {
            fail(
                Step::Smp,
                format_args!("page {g}: a concurrent write's dirty state was lost"),
            );
        }
        // SAFETY: page g is mapped; the second core finished writing it (Acquire above).
        let v = unsafe { core::ptr::read_volatile(page_ptr(g)) };
        if v != 0x5eed_0000 + g as u64 {
            fail(Step::Smp, format_args!("page {g} reads {v:#x}"));
        }
    }
    println!(
        "smp: core 1 wrote all 512 pages of table 0 while core 0 aged it ({passes} passes, {young_seen} young folios seen): no dirty state lost"
    );
    true
}

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

/// One core's share of the SMP allocation step: each round allocates a block (orders 0-4,
/// 2 MiB every 16th round) on this core's lists, zeroes and checks it through zero-core,
/// stamps it, and either frees it or hands it to the other core; then frees what the other
/// core handed over, after checking its stamp (a block handed out twice would show).
fn alloc_rounds(cpu: usize) {
    let zone = ZONE
        .get()
        .unwrap_or_else(|| fail(Step::Smp, format_args!("no zone")));
    let clear = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ cpu as u64);
    for round in 0..ALLOC_ROUNDS {
        let order = if round % 16 == 15 {
            9
        } else {
            (rng.next() % 5) as u8
        };
        let pfn = alloc_zeroed(zone, cpu, order, &clear);
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
            free_block_of(zone, cpu, pfn, order);
            FREED_OWN[cpu].fetch_add(1 << order, Ordering::Relaxed);
        }
        free_mail(zone, cpu);
    }
}

/// Frees every block in `cpu`'s mailbox on `cpu`, checking each one's stamp first.
fn free_mail(zone: &KernelZone, cpu: usize) {
    let mut mine = MAILBOX[cpu].lock();
    let len = mine.len;
    for &(pfn, order, stamp) in &mine.blocks[..len] {
        // SAFETY: the other core handed this block over and no longer touches it.
        let v = unsafe { ((pfn * PAGE) as *const u64).read_volatile() };
        if v != stamp {
            fail(
                Step::Smp,
                format_args!("cpu {cpu}: block {pfn:#x} reads {v:#x}, not the stamp {stamp:#x}"),
            );
        }
        free_block_of(zone, cpu, pfn, order);
        FREED_REMOTE[cpu].fetch_add(1 << order, Ordering::Relaxed);
    }
    mine.len = 0;
}

fn free_block_of(zone: &KernelZone, cpu: usize, pfn: u64, order: u8) {
    let o = Order::new(order).unwrap_or_else(|e| fail(Step::Smp, format_args!("{e}")));
    zone.free_pages(cpu, Pfn(pfn), o)
        .unwrap_or_else(|e| fail(Step::Smp, format_args!("cpu {cpu}: free {pfn:#x}: {e}")));
}

/// Both cores allocate and free at once (core 0 alone without a second core); at the end
/// every block is freed and every page accounted for.
fn smp_alloc_step(second_core: bool) {
    ALLOC_GO.store(true, Ordering::Release);
    alloc_rounds(0);
    if second_core {
        while !ALLOC_DONE.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
    let zone = ZONE
        .get()
        .unwrap_or_else(|| fail(Step::Smp, format_args!("no zone")));
    // What is still in a mailbox goes back from core 0: core 1's blocks as remote frees,
    // core 0's own (handed to core 1, which has stopped) as its own.
    free_mail(zone, 0);
    let mut leftover = MAILBOX[1].lock();
    for &(pfn, order, _) in &leftover.blocks[..leftover.len] {
        free_block_of(zone, 0, pfn, order);
        FREED_OWN[0].fetch_add(1 << order, Ordering::Relaxed);
    }
    leftover.len = 0;
    let get = |a: &[AtomicU64; CPUS], c: usize| a[c].load(Ordering::Relaxed);
    let total: u64 = (0..CPUS).map(|c| get(&ALLOCATED, c)).sum();
    let freed: u64 = (0..CPUS)
        .map(|c| get(&FREED_OWN, c) + get(&FREED_REMOTE, c))
        .sum();
    if total != freed {
        fail(
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
}

#[unsafe(no_mangle)]
extern "C" fn secondary_main() -> ! {
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
            touch(g, true);
        }
        SMP_WRITTEN.fetch_add(8, Ordering::Release);
    }
    while !ALLOC_GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    alloc_rounds(1);
    // Off the kernel's map before core 0 frees its tables.
    mmu::switch(BOOT_TTBR0.load(Ordering::Relaxed));
    ALLOC_DONE.store(true, Ordering::Release);
    loop {
        // SAFETY: wait for an event; nothing else to do.
        unsafe { core::arch::asm!("wfe", options(nomem, nostack)) };
    }
}
