//! The translation regime: 39-bit, 4 KiB-granule identity maps of the UART and of RAM (2 MiB
//! blocks) built with aarch64-paging, and the system registers that turn them on, with
//! hardware access-flag and dirty management where the CPU has it.
//!
//! Two maps, one layout ([`map_identity`]): the boot map, whose few tables are a static pool
//! (the MMU is off while it is built, so nothing may be cleared with `DC ZVA` or MOPS yet),
//! and the kernel's map, built once the MMU is on, whose tables come from the buddy zone
//! through buddy-sim's `ZoneTables` (zeroed by zero-core) and which adds the data region's
//! level-3 tables for pte-batch.

use core::arch::asm;
use core::cell::UnsafeCell;
use core::ptr::NonNull;

use aarch64_cpu::registers::{MAIR_EL1, SCTLR_EL1, TCR_EL1};
use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, PageTable, Translation, VaRange};
use aarch64_paging::{MapError, Mapping};
use arch_arm64::tlb::{self, Sync};
use pte_batch::TlbFlush;
use pte_batch::mm_types::PageRange;

use crate::steps::DATA_VA;

/// Where QEMU's RAM starts (its size, and its nodes, come from the device tree).
pub const RAM_START: u64 = 0x4000_0000;
/// The PL011 UART's 2 MiB block.
const UART: u64 = 0x0900_0000;
/// The 2 MiB block of QEMU virt's virtio-mmio slots (`0x0a00_0000`, 32 of 512 bytes).
const VIRTIO_MMIO: u64 = 0x0a00_0000;
/// The root table's level: 39-bit addresses (T0SZ 25) start at level 1.
const ROOT_LEVEL: usize = 1;

/// MAIR_EL1: attribute 0 Device-nGnRnE, attribute 1 normal memory, inner and outer
/// write-back non-transient with read and write allocation.
fn mair() -> u64 {
    (MAIR_EL1::Attr0_Device::nonGathering_nonReordering_noEarlyWriteAck
        + MAIR_EL1::Attr1_Normal_Outer::WriteBack_NonTransient_ReadWriteAlloc
        + MAIR_EL1::Attr1_Normal_Inner::WriteBack_NonTransient_ReadWriteAlloc)
        .value
}

/// SCTLR_EL1 bits that are RES1 in ARMv8.0 (11, 20, 22, 23, 28, 29), which aarch64-cpu does
/// not name.
const SCTLR_RES1: u64 = 0x30D0_0800;

/// Device memory (MAIR attribute 0), never executable.
const DEVICE: El1Attributes = El1Attributes::ATTRIBUTE_INDEX_0
    .union(El1Attributes::VALID)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::PXN)
    .union(El1Attributes::UXN);
/// Normal write-back memory (MAIR attribute 1), inner shareable, not executable at EL0.
const RAM: El1Attributes = El1Attributes::ATTRIBUTE_INDEX_1
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::VALID)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::UXN);
/// A data page's memory attributes, for pte-batch's `Prot::attrs`: normal write-back memory,
/// inner shareable (pte-batch adds the valid, access, permission and contiguous bits).
pub const DATA_ATTRS: u64 = El1Attributes::ATTRIBUTE_INDEX_1
    .union(El1Attributes::INNER_SHAREABLE)
    .bits() as u64;

/// A page map of the kernel's translation regime.
pub type KernelMapping<T> = Mapping<T, El1And0>;

/// A new, empty map (ASID 0, lower VA range, root at level 1) over `tables`.
pub fn new_map<T: Translation<El1Attributes>>(tables: T) -> KernelMapping<T> {
    Mapping::with_asid_and_va_range(tables, 0, ROOT_LEVEL, El1And0, VaRange::Lower)
}

/// Identity-maps the UART and the virtio-mmio slots (device memory) and RAM from [`RAM_START`] to `ram_end` (normal
/// memory, 2 MiB blocks: the image, the zones' frames and every table are reached through
/// it).
///
/// # Errors
/// aarch64-paging's, for a range the map cannot hold.
pub fn map_identity<T: Translation<El1Attributes>>(
    map: &mut KernelMapping<T>,
    ram_end: u64,
) -> Result<(), MapError> {
    for device in [UART as usize, VIRTIO_MMIO as usize] {
        map.map_range(
            &MemoryRegion::new(device, device + (2 << 20)),
            PhysicalAddress(device),
            DEVICE,
            Constraints::empty(),
        )?;
    }
    let ram = RAM_START as usize;
    map.map_range(
        &MemoryRegion::new(ram, ram_end.next_multiple_of(2 << 20) as usize),
        PhysicalAddress(ram),
        RAM,
        Constraints::empty(),
    )
}

/// The data region `DATA_VA..DATA_VA + bytes`: level-3 tables with every entry empty (no block
/// mappings), for pte-batch to fill.
///
/// aarch64-paging leaves a range alone that an empty entry above already describes (an
/// all-zero entry "maps" an all-zero unmapping), so the tables are made with a software flag
/// in their invalid entries, which a second pass clears.
///
/// # Errors
/// aarch64-paging's, for a range the map cannot hold.
pub fn map_data_tables<T: Translation<El1Attributes>>(
    map: &mut KernelMapping<T>,
    bytes: usize,
) -> Result<(), MapError> {
    let va = DATA_VA as usize;
    let region = MemoryRegion::new(va, va + bytes);
    map.map_range(
        &region,
        PhysicalAddress(0),
        El1Attributes::SWFLAG_1,
        Constraints::NO_BLOCK_MAPPINGS,
    )?;
    map.modify_range(&region, &|_, d| {
        if d.level() == 3 {
            d.set(PhysicalAddress(0), El1Attributes::empty())
        } else {
            Ok(())
        }
    })
}

/// Calls `found(va, table)` for each level-3 table of `DATA_VA..DATA_VA + bytes`, with the
/// virtual address its first entry maps: aarch64-paging walks to every last-level entry, and
/// the first entry of each 2 MiB is the first word of its table page.
///
/// # Errors
/// aarch64-paging's, for a range the map cannot hold.
pub fn data_tables<T: Translation<El1Attributes>>(
    map: &KernelMapping<T>,
    bytes: usize,
    mut found: impl FnMut(u64, u64),
) -> Result<(), MapError> {
    let va = DATA_VA as usize;
    map.walk_range(&MemoryRegion::new(va, va + bytes), &mut |mr, d, level| {
        if level == 3 && mr.start().0 % (2 << 20) == 0 {
            found(mr.start().0 as u64, core::ptr::from_ref(d) as u64);
        }
        Ok(())
    })
}

/// Table pages of the boot map: root, the UART's level 2 and RAM's level 2.
const BOOT_TABLES: usize = 3;

/// The boot map's tables: in .bss, so zero before the first instruction of Rust runs.
struct BootPool(UnsafeCell<[PageTable<El1Attributes>; BOOT_TABLES]>);

// SAFETY: only the boot core touches the pool, through the one `BootTables` it makes, before
// the second core starts; the MMU only reads it.
unsafe impl core::marker::Sync for BootPool {}

static BOOT_POOL: BootPool = BootPool(UnsafeCell::new([PageTable::EMPTY; BOOT_TABLES]));

/// aarch64-paging's `Translation` over the static pool, for the boot map (identity: the
/// pool's addresses are physical).
pub struct BootTables {
    used: usize,
}

impl BootTables {
    /// The pool's translation. Call once: the tables it hands out are the pool's pages.
    pub fn take() -> Self {
        Self { used: 0 }
    }
}

impl Translation<El1Attributes> for BootTables {
    fn allocate_table(&mut self) -> (NonNull<PageTable<El1Attributes>>, PhysicalAddress) {
        let pool = BOOT_POOL.0.get().cast::<PageTable<El1Attributes>>();
        if self.used == BOOT_TABLES {
            panic!("the boot map needs more than {BOOT_TABLES} tables");
        }
        // SAFETY: `used < BOOT_TABLES`, so the page is inside the pool; `take` is called once
        // and each page is handed out once.
        let table = unsafe { pool.add(self.used) };
        self.used += 1;
        let table = NonNull::new(table).unwrap_or_else(|| panic!("the pool is not at 0"));
        (table, PhysicalAddress(table.as_ptr() as usize))
    }

    unsafe fn deallocate_table(&mut self, _: NonNull<PageTable<El1Attributes>>) {
        // The boot map lives as long as the kernel: its pages are never reused.
    }

    fn physical_to_virtual(&self, pa: PhysicalAddress) -> NonNull<PageTable<El1Attributes>> {
        NonNull::new(pa.0 as *mut PageTable<El1Attributes>)
            .unwrap_or_else(|| panic!("a table at physical address 0"))
    }
}

/// What the CPU offers the translation regime.
#[derive(Clone, Copy, Debug)]
pub struct MmuFeatures {
    /// ID_AA64MMFR1_EL1.HAFDBS: 0 none, 1 access flag, 2 access flag and dirty state.
    pub hafdbs: u64,
    /// FEAT_TLBIRANGE (ID_AA64ISAR0_EL1.TLB == 2).
    pub tlbi_range: bool,
}

/// Reads the ID registers.
pub fn features() -> MmuFeatures {
    let (mmfr1, isar0): (u64, u64);
    // SAFETY: ID registers are readable at EL1 and have no side effects.
    unsafe {
        asm!("mrs {}, id_aa64mmfr1_el1", out(reg) mmfr1, options(nomem, nostack));
        asm!("mrs {}, id_aa64isar0_el1", out(reg) isar0, options(nomem, nostack));
    }
    MmuFeatures {
        hafdbs: mmfr1 & 0xf,
        tlbi_range: (isar0 >> 56) & 0xf == 2,
    }
}

/// The register values the boot core and the second core load.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct SecondaryBoot {
    /// Stack top of the second core.
    pub stack_top: u64,
    /// MAIR_EL1.
    pub mair: u64,
    /// TCR_EL1.
    pub tcr: u64,
    /// TTBR0_EL1.
    pub ttbr0: u64,
    /// SCTLR_EL1.
    pub sctlr: u64,
}

/// The register values that turn on the map whose root is at `root` (TTBR0_EL1).
pub fn registers(feat: MmuFeatures, root: PhysicalAddress) -> SecondaryBoot {
    // T0SZ 25 (39-bit VA, walks start at level 1), inner/outer write-back walks, inner
    // shareable, 4 KiB granule, no TTBR1 walks (EPD1), 36-bit PA; HA and HD turn on hardware
    // access-flag and dirty management where HAFDBS has them.
    let mut tcr = TCR_EL1::T0SZ.val(25)
        + TCR_EL1::IRGN0::WriteBack_ReadAlloc_WriteAlloc_Cacheable
        + TCR_EL1::ORGN0::WriteBack_ReadAlloc_WriteAlloc_Cacheable
        + TCR_EL1::SH0::Inner
        + TCR_EL1::TG0::KiB_4
        + TCR_EL1::EPD1::DisableTTBR1Walks
        + TCR_EL1::IPS::Bits_36;
    if feat.hafdbs >= 1 {
        tcr += TCR_EL1::HA::Enable;
    }
    if feat.hafdbs >= 2 {
        tcr += TCR_EL1::HD::Enable;
    }
    let tcr = tcr.value;
    // The MMU, data and instruction caches on.
    let sctlr = SCTLR_RES1
        | (SCTLR_EL1::M::Enable + SCTLR_EL1::C::Cacheable + SCTLR_EL1::I::Cacheable).value;
    SecondaryBoot {
        stack_top: 0,
        mair: mair(),
        tcr,
        ttbr0: root.0 as u64,
        sctlr,
    }
}

/// Turns the MMU on with `regs` on this core.
///
/// # Safety
/// At EL1 with the MMU off; `regs.ttbr0` is the root of a live map (its tables stay
/// allocated while it is in use) that identity-maps the image, this core's stack, the UART
/// and every memory the code reaches afterwards with the attributes it assumes, and the
/// other registers are [`registers`]' for this CPU's features.
pub unsafe fn enable(regs: &SecondaryBoot) {
    // SAFETY: the caller guarantees the map and registers; the TLBI drops whatever this core
    // cached before, and execution continues at the same addresses.
    unsafe {
        asm!(
            "dsb ish",
            "msr mair_el1, {mair}",
            "msr tcr_el1, {tcr}",
            "msr ttbr0_el1, {ttbr0}",
            "isb",
            "bl flush_local_tlb",
            "msr sctlr_el1, {sctlr}",
            "isb",
            mair = in(reg) regs.mair,
            tcr = in(reg) regs.tcr,
            ttbr0 = in(reg) regs.ttbr0,
            sctlr = in(reg) regs.sctlr,
            out("x1") _,
            out("x30") _,
            options(nostack),
        );
    }
}

/// Moves this core (MMU on) to the map whose root is at `ttbr0`, and drops every EL1
/// translation this core cached (`tlbi vmalle1`, local: other cores keep theirs).
///
/// # Safety
/// `ttbr0` is the root of a live map (its tables stay allocated while any core uses it)
/// that maps the image, the stacks, the UART and every memory the code reaches afterwards
/// at the same addresses and with the same attributes as the current one.
pub unsafe fn switch(ttbr0: u64) {
    // SAFETY: the caller guarantees the new map; the local TLBI after the write drops this
    // core's entries of the old map, so none of them is used once it is freed.
    unsafe {
        asm!(
            "dsb ish",
            "msr ttbr0_el1, {}",
            "isb",
            "bl flush_local_tlb",
            in(reg) ttbr0,
            out("x1") _,
            out("x30") _,
            options(nostack),
        );
    }
}

/// Makes new translation-table entries visible to the table walker.
pub fn publish_tables() {
    // SAFETY: barriers only.
    unsafe { asm!("dsb ishst", "isb", options(nostack)) };
}

/// `dsb ish; isb`: every access before it (and the MMU's updates from it) complete.
pub fn sync() {
    // SAFETY: barriers only.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
}

/// Invalidates every EL1 translation (used to reset after the negative control).
pub fn flush_all() {
    // SAFETY: at EL1; TLBI only drops cached translations.
    unsafe {
        asm!(
            "dsb ishst",
            "tlbi vmalle1is",
            "dsb ish",
            "isb",
            options(nostack)
        )
    };
}

/// Cleans `len` bytes from `p` to the point of coherency, for a core whose MMU is off.
///
/// # Safety
/// `p..p + len` is mapped in the current map (a `dc cvac` of an unmapped address faults).
pub unsafe fn clean_to_poc<T>(p: *const T, len: usize) {
    let start = p as usize & !63;
    let end = (p as usize).saturating_add(len);
    for line in (start..end).step_by(64) {
        // SAFETY: the caller guarantees the lines are mapped; a clean changes no data.
        unsafe { asm!("dc cvac, {}", in(reg) line, options(nostack)) };
    }
    // SAFETY: barrier only.
    unsafe { asm!("dsb ish", options(nostack)) };
}

/// Consumes pte-batch's flush tokens with EL1 TLB invalidation: one FEAT_TLBIRANGE range
/// operation where the CPU has it, else one `TLBI VALE1IS` per page; then `isb`.
pub struct El1Tlb {
    /// Use `TLBI RVALE1IS`.
    pub range: bool,
    /// Range invalidations done.
    pub flushes: u64,
}

impl TlbFlush for El1Tlb {
    fn flush_range(&mut self, r: PageRange) {
        // SAFETY: the kernel runs at EL1; range TLBI only where the CPU has FEAT_TLBIRANGE.
        unsafe {
            if self.range {
                tlb::flush_range(r, 0, Sync::Wait);
            } else {
                tlb::flush_range_per_page(r, 0, Sync::Wait);
            }
            asm!("isb", options(nostack));
        }
        self.flushes += 1;
    }
}
