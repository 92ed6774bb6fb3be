//! The translation regime: a 39-bit, 4 KiB-granule identity map of the UART and of RAM in
//! 2 MiB blocks (statically allocated level-1/level-2 tables), a level-2 table for the data
//! region whose level-3 tables come from the buddy zone, and the system registers that turn it
//! on, with hardware access-flag and dirty management where the CPU has it.

use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};

use aarch64_cpu::registers::{MAIR_EL1, SCTLR_EL1, TCR_EL1};
use arch_arm64::descriptor::{self as d, Granule};
use arch_arm64::tlb::{self, Sync};
use pte_batch::{FlushRange, TlbFlush};

/// Where QEMU's RAM starts, and how much the run gives it (`-m 128M`).
pub const RAM_START: u64 = 0x4000_0000;
/// RAM size; the xtask stage passes the same to QEMU.
pub const RAM_SIZE: u64 = 128 << 20;
/// Virtual base of the data region (level-1 entry 4).
pub const DATA_VA: u64 = 4 << 30;

/// MAIR_EL1 attribute indices: 0 is device memory, 1 normal write-back memory ([`mair`]).
const ATTR_DEVICE: u64 = 0;
const ATTR_NORMAL: u64 = 1;

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
/// Inner shareable, for bits [9:8] of a descriptor.
pub const SH_INNER: u64 = 0b11 << 8;
/// AttrIndx of normal write-back memory, for bits [4:2] of a descriptor.
pub const NORMAL: u64 = ATTR_NORMAL << 2;

/// One translation table page.
#[repr(C, align(4096))]
pub struct Table(pub [AtomicU64; 512]);

impl Table {
    const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; 512])
    }
}

static L1: Table = Table::new();
static L2_LOW: Table = Table::new();
static L2_RAM: Table = Table::new();
/// The level-2 table of the data region: entry `i` points at the level-3 table for
/// `DATA_VA + i * 2 MiB`.
pub static L2_DATA: Table = Table::new();

const TABLE: u64 = 0b11;
const BLOCK: u64 = 0b01;

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

fn addr(t: &Table) -> u64 {
    core::ptr::from_ref(t) as u64
}

/// Builds the identity map and returns the register values that enable it.
pub fn build(feat: MmuFeatures) -> SecondaryBoot {
    let r = Ordering::Relaxed;
    L1.0[0].store(addr(&L2_LOW) | TABLE, r);
    L1.0[1].store(addr(&L2_RAM) | TABLE, r);
    L1.0[(DATA_VA >> 30) as usize].store(addr(&L2_DATA) | TABLE, r);
    // The UART's 2 MiB, device memory, never executable.
    let uart = 0x0900_0000u64;
    L2_LOW.0[(uart >> 21) as usize].store(
        uart | BLOCK | (ATTR_DEVICE << 2) | d::AF | d::PXN | d::UXN,
        r,
    );
    // RAM, normal write-back memory, in 2 MiB blocks (the image, the zone's frames and the
    // level-3 tables are all reached through this map).
    for i in 0..RAM_SIZE >> 21 {
        let pa = RAM_START + (i << 21);
        L2_RAM.0[i as usize].store(pa | BLOCK | NORMAL | SH_INNER | d::AF | d::UXN, r);
    }
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
        ttbr0: addr(&L1),
        sctlr,
    }
}

/// Turns the MMU on with `regs` on this core.
pub fn enable(regs: &SecondaryBoot) {
    // SAFETY: the tables identity-map the image, the stack and the UART with the attributes
    // the code already assumes, so execution continues at the same addresses.
    unsafe {
        asm!(
            "dsb ish",
            "msr mair_el1, {mair}",
            "msr tcr_el1, {tcr}",
            "msr ttbr0_el1, {ttbr0}",
            "isb",
            "tlbi vmalle1",
            "dsb nsh",
            "isb",
            "msr sctlr_el1, {sctlr}",
            "isb",
            mair = in(reg) regs.mair,
            tcr = in(reg) regs.tcr,
            ttbr0 = in(reg) regs.ttbr0,
            sctlr = in(reg) regs.sctlr,
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
pub fn clean_to_poc<T>(p: *const T, len: usize) {
    let start = p as usize & !63;
    let end = p as usize + len;
    for line in (start..end).step_by(64) {
        // SAFETY: cache maintenance by VA on memory we own; no data changes.
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
    fn flush_range(&mut self, r: FlushRange) {
        let pages = r.pages as u64;
        // SAFETY: the kernel runs at EL1; range TLBI only where the CPU has FEAT_TLBIRANGE.
        unsafe {
            if self.range {
                tlb::flush_range(r.va, pages, 0, Granule::Size4KiB, Sync::Wait);
            } else {
                tlb::flush_range_per_page(r.va, pages, 0, Granule::Size4KiB, Sync::Wait);
            }
            asm!("isb", options(nostack));
        }
        self.flushes += 1;
    }
}
