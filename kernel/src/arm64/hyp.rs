//! The kernel as a hypervisor (`-M virt,virtualization=on`, entered at EL2): it runs a small
//! guest at EL1 whose memory it maps at stage 2 on demand, and ages that memory with
//! pte-batch between the guest's phases, as KVM does for a host's reclaim.
//!
//! - The host runs in the EL2&0 regime (`HCR_EL2.E2H`, set by the boot code) on the boot
//!   identity map; the guest runs at EL1 with its stage 1 off (`HCR_EL2.DC`: its accesses are
//!   normal write-back memory), so its addresses are IPAs.
//! - Stage 2 (4 KiB granule, 32-bit IPA space, walks from level 1) is built from zone frames
//!   (`alloc_zeroed`): the guest's code page is mapped up front, read and execute only; its
//!   RAM (one level-3 table, 2 MiB at [`GUEST_RAM`]) is not. Each stage-2 translation fault in
//!   it is handled here by taking a zeroed frame and mapping it with pte-batch
//!   ([`Arm64Stage2`]), so a guest's first touch never sees old data. The second CPU fills
//!   the zone's known-zero pool with `zero_some` meanwhile.
//! - `VTCR_EL2.HA/HD`: the MMU sets AF and, on a write through a DBM descriptor, the S2AP
//!   write permission (the dirty state) itself.
//! - Between phases the guest exits with `hvc`; the hypervisor ages stage 2 with
//!   `age_batches` (KVM's clear_flush_young; the flush is `TLBI IPAS2E1IS` then
//!   `VMALLE1IS`), feeds a [`WorkingSet`], and checks that the idle set is exactly the pages
//!   the phase did not touch and that every page written is dirty.
//! - The negative control skips the stage-2 invalidation once: the guest's next accesses
//!   hit the stale TLB entries, the MMU sets no access flag, and aging must find the
//!   touched pages idle.
//! - Teardown unmaps every page (one invalidation), frees the frames and the tables, drops
//!   the VMID's translations, and checks the zone is whole.
//!
//! The world switch keeps `HCR_EL2` and `VTTBR_EL2` constant for the whole run, as a
//! single-guest hypervisor may: only the general-purpose registers, `ELR_EL2` and
//! `SPSR_EL2` change hands.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arch_arm64::stage2 as s2;
use buddy_sim::{FrameClearer, OffsetMap, Pfn};
use pte_batch::format::Arm64Stage2;
use pte_batch::mm_types::{PageRange, VirtAddr};
use pte_batch::{Prot, PteTable, Stage2, TlbFlush, WorkingSet};

use super::Machine;

#[cfg(linux_guest)]
#[path = "linux_guest.rs"]
mod linux_guest;
use crate::steps::{
    self, GUEST_PAGES, GUEST_RAM, Guest, GuestExit, GuestRam, KernelZone, PAGE, Platform, Step,
    Touch, fail,
};

/// The guest's VMID.
const VMID: u64 = 1;

/// `HCR_EL2` while the hypervisor runs: E2H (the host in the EL2&0 regime), RW (an AArch64
/// EL1), VM (stage 2 on for EL1&0), DC (the guest's stage 1 off, its accesses cacheable).
const HCR: u64 = (1 << 34) | (1 << 31) | (1 << 12) | 1;

/// `SPSR_EL2` of a guest entry: EL1 with its own stack pointer, every interrupt masked.
const GUEST_SPSR: u64 = 0x3c5;

/// `SCTLR_EL1` of the guest: its RES1 bits, MMU and caches off.
const GUEST_SCTLR: u64 = 0x30D0_0800;

/// The stage-2 memory attributes of guest RAM and code: normal write-back, inner shareable.
const S2_ATTRS: u64 = s2::MEMATTR_NORMAL_WB | s2::SH_INNER;

/// A table descriptor (levels 0-2): valid, table.
const TABLE: u64 = 0b11;

/// The stage-2 format the tables use.
const FORMAT: Arm64Stage2 = Arm64Stage2::G4K;

/// The guest's registers while it is out: x0-x30, `ELR_EL2`, `SPSR_EL2` (the layout the
/// world switch assumes).
#[repr(C)]
struct Vcpu {
    regs: [u64; 31],
    elr: u64,
    spsr: u64,
}

unsafe extern "C" {
    /// Enters the guest with the registers of `vcpu` and returns, at its next exit to EL2,
    /// `ESR_EL2`, with the guest's registers saved back into `vcpu`.
    fn __guest_enter(vcpu: *mut Vcpu) -> u64;
    /// The guest's code (`.guest_text`).
    fn guest_main();
    static hyp_vectors: u8;
    static __guest_start: u8;
    static __guest_end: u8;
}

core::arch::global_asm!(
    r#"
.section .text, "ax"
// x0: the Vcpu. Saves the host's callee-saved registers and the Vcpu pointer on the host
// stack (SP_EL2, which an exit from the guest finds unchanged), loads the guest's registers
// and enters it.
.global __guest_enter
__guest_enter:
    sub     sp, sp, #112
    stp     x19, x20, [sp, #0]
    stp     x21, x22, [sp, #16]
    stp     x23, x24, [sp, #32]
    stp     x25, x26, [sp, #48]
    stp     x27, x28, [sp, #64]
    stp     x29, x30, [sp, #80]
    str     x0, [sp, #96]
    ldr     x1, [x0, #248]
    msr     elr_el2, x1
    ldr     x1, [x0, #256]
    msr     spsr_el2, x1
    ldp     x2, x3, [x0, #16]
    ldp     x4, x5, [x0, #32]
    ldp     x6, x7, [x0, #48]
    ldp     x8, x9, [x0, #64]
    ldp     x10, x11, [x0, #80]
    ldp     x12, x13, [x0, #96]
    ldp     x14, x15, [x0, #112]
    ldp     x16, x17, [x0, #128]
    ldp     x18, x19, [x0, #144]
    ldp     x20, x21, [x0, #160]
    ldp     x22, x23, [x0, #176]
    ldp     x24, x25, [x0, #192]
    ldp     x26, x27, [x0, #208]
    ldp     x28, x29, [x0, #224]
    ldr     x30, [x0, #240]
    ldp     x0, x1, [x0, #0]
    eret

// An exit from the guest (a synchronous exception from EL1): saves its registers into the
// Vcpu the host stack names, restores the host's and returns from __guest_enter with
// ESR_EL2.
guest_exit:
    sub     sp, sp, #16
    stp     x0, x1, [sp]
    ldr     x0, [sp, #(16 + 96)]
    stp     x2, x3, [x0, #16]
    stp     x4, x5, [x0, #32]
    stp     x6, x7, [x0, #48]
    stp     x8, x9, [x0, #64]
    stp     x10, x11, [x0, #80]
    stp     x12, x13, [x0, #96]
    stp     x14, x15, [x0, #112]
    stp     x16, x17, [x0, #128]
    stp     x18, x19, [x0, #144]
    stp     x20, x21, [x0, #160]
    stp     x22, x23, [x0, #176]
    stp     x24, x25, [x0, #192]
    stp     x26, x27, [x0, #208]
    stp     x28, x29, [x0, #224]
    str     x30, [x0, #240]
    ldp     x2, x3, [sp]
    stp     x2, x3, [x0, #0]
    add     sp, sp, #16
    mrs     x1, elr_el2
    str     x1, [x0, #248]
    mrs     x1, spsr_el2
    str     x1, [x0, #256]
    ldp     x19, x20, [sp, #0]
    ldp     x21, x22, [sp, #16]
    ldp     x23, x24, [sp, #32]
    ldp     x25, x26, [sp, #48]
    ldp     x27, x28, [sp, #64]
    ldp     x29, x30, [sp, #80]
    add     sp, sp, #112
    mrs     x0, esr_el2
    ret

hyp_unexpected:
    mrs     x0, esr_el2
    mrs     x1, far_el2
    mrs     x2, elr_el2
    bl      hyp_unexpected_exception
1:  b       1b

.section .text.vectors, "ax"
.balign 2048
.global hyp_vectors
hyp_vectors:
    .rept 8                         // the host's own exceptions (current EL): fatal
    .balign 0x80
    b       hyp_unexpected
    .endr
    .balign 0x80                    // lower EL, AArch64, synchronous: a guest exit
    b       guest_exit
    .rept 7
    .balign 0x80
    b       hyp_unexpected
    .endr

// The guest, mapped at stage 2 on its own page. Each entry is a command from the
// hypervisor: x0 the IPA of the first page, x1 how many pages, x2 the stride in bytes, x3
// whether to write. For each page it reads the first word, which must be 0 (never written)
// or the page's own address (its stamp), and if writing stores the stamp; then `hvc #0`.
// A page holding anything else (old data) ends the command with `hvc #1`, x0 its address.
.section .guest_text, "ax"
.balign 4096
.global guest_main
guest_main:
    cbz     x1, 3f
2:  ldr     x4, [x0]
    cbz     x4, 4f
    cmp     x4, x0
    b.ne    5f
4:  cbz     x3, 6f
    str     x0, [x0]
6:  add     x0, x0, x2
    subs    x1, x1, #1
    b.ne    2b
3:  hvc     #0
    b       guest_main
5:  hvc     #1
    b       guest_main
"#
);

#[unsafe(no_mangle)]
extern "C" fn hyp_unexpected_exception(esr: u64, far: u64, elr: u64) -> ! {
    fail::<Machine>(
        Step::Exception,
        format_args!("hypervisor: unexpected exception ESR {esr:#x} FAR {far:#x} ELR {elr:#x}"),
    )
}

/// Stage-2 TLB maintenance for pte-batch's tokens: `TLBI IPAS2E1IS` per page, then
/// `VMALLE1IS` (arch-arm64's `flush_ipa_range`), or nothing for the negative control.
struct S2Tlb {
    skip: bool,
    flushes: u64,
}

impl TlbFlush<Stage2> for S2Tlb {
    fn flush_range(&mut self, range: PageRange) {
        self.flushes += 1;
        if !self.skip {
            // SAFETY: at EL2 (E2H set, TGE clear), with VTTBR_EL2 holding the guest's VMID;
            // the descriptors were written before the token was made.
            unsafe { arch_arm64::tlb::flush_ipa_range(range) };
        }
    }
}

/// The guest's stage-2 tables: frames from the zone, reached through the identity map.
struct Stage2Tables {
    /// Level-1 root, level 2 of the code's GiB and of the RAM's, level 3 of the code and
    /// of the RAM.
    frames: [u64; 5],
}

impl Stage2Tables {
    const ROOT: usize = 0;
    const CODE_L3: usize = 3;
    const RAM_L3: usize = 4;

    /// Builds the tables (every frame a zeroed allocation) and maps the guest's code page
    /// at its own address, read and execute only.
    fn build(zone: &KernelZone, clearer: &FrameClearer<OffsetMap>) -> Self {
        let frames =
            core::array::from_fn(|_| steps::alloc_zeroed::<Machine>(zone, 0, 0, clearer).0);
        let t = Self { frames };
        let code = core::ptr::addr_of!(__guest_start) as u64;
        let descriptor = |frame: u64| (frame * PAGE) | TABLE;
        // SAFETY: the five frames are this hypervisor's, zeroed and identity-mapped; only
        // the stage-2 walker reads them besides this code.
        unsafe {
            t.word(Self::ROOT, l1_index(code))
                .store(descriptor(t.frames[1]), Ordering::Relaxed);
            t.word(1, l2_index(code))
                .store(descriptor(t.frames[Self::CODE_L3]), Ordering::Relaxed);
            t.word(Self::ROOT, l1_index(GUEST_RAM))
                .store(descriptor(t.frames[2]), Ordering::Relaxed);
            t.word(2, l2_index(GUEST_RAM))
                .store(descriptor(t.frames[Self::RAM_L3]), Ordering::Relaxed);
        }
        let code_table = t.leaf(Self::CODE_L3, code & !((2 << 20) - 1));
        let guest_code = Prot {
            exec: true,
            young: true,
            attrs: S2_ATTRS,
            ..Prot::default()
        };
        let index = ((code >> 12) & 511) as usize;
        let pages = (core::ptr::addr_of!(__guest_end) as u64 - code).div_ceil(PAGE) as usize;
        code_table
            .set_ptes(index, Pfn(code / PAGE), pages, guest_code)
            .unwrap_or_else(|e| fail::<Machine>(Step::Mapping, format_args!("guest code: {e}")));
        t
    }

    /// Word `i` of table `which`.
    ///
    /// # Safety
    /// `i < 512`; the table's frame is allocated to this hypervisor and identity-mapped.
    unsafe fn word(&self, which: usize, i: usize) -> &AtomicU64 {
        // SAFETY: the caller's; a table frame is 512 aligned words, used only atomically.
        unsafe { &*((self.frames[which] * PAGE) as *const AtomicU64).add(i) }
    }

    /// The level-3 table `which` as pte-batch's table of stage-2 entries mapping `base`.
    fn leaf(&self, which: usize, base: u64) -> PteTable<'_, Arm64Stage2> {
        // SAFETY: a level-3 table frame of these tables (zeroed, identity-mapped), accessed
        // only atomically (here and by the walker); the borrow of `self` ends before `free`
        // (which consumes it) returns the frame to the zone.
        let entries = unsafe {
            core::slice::from_raw_parts(
                (self.frames[which] * PAGE) as *const pte_batch::AtomicU64,
                512,
            )
        };
        PteTable::new(FORMAT, VirtAddr(base), entries)
            .unwrap_or_else(|e| fail::<Machine>(Step::Mapping, format_args!("stage-2 table: {e}")))
    }

    /// `VTTBR_EL2`: the root and the VMID.
    fn vttbr(&self) -> u64 {
        (self.frames[Self::ROOT] * PAGE) | (VMID << 48)
    }

    /// Gives every table frame back to the zone.
    fn free(self, zone: &KernelZone) {
        for frame in self.frames {
            // SAFETY: the table frames were allocated for this stage 2, which no guest or
            // walk uses any more (the VMID was flushed).
            unsafe { steps::free_block::<Machine>(zone, 0, frame, 0, Step::Free) };
        }
    }
}

fn l1_index(ipa: u64) -> usize {
    ((ipa >> 30) & 3) as usize
}

fn l2_index(ipa: u64) -> usize {
    ((ipa >> 21) & 511) as usize
}

/// The one guest vCPU: only the boot core touches it.
struct VcpuCell(UnsafeCell<Vcpu>);

// SAFETY: only the boot core runs the guest.
unsafe impl Sync for VcpuCell {}

static VCPU: VcpuCell = VcpuCell(UnsafeCell::new(Vcpu {
    regs: [0; 31],
    elr: 0,
    spsr: GUEST_SPSR,
}));

/// The second CPU zeroes in the background until this is set.
static HYP_STOP: AtomicBool = AtomicBool::new(false);
/// The second CPU stopped touching the zone.
static HYP_SECOND_DONE: AtomicBool = AtomicBool::new(false);
/// Frames the second CPU zeroed.
static HYP_ZEROED: AtomicU64 = AtomicU64::new(0);

/// The second CPU's part: fill the known-zero pool while the guest runs.
pub fn secondary() -> ! {
    let (zone, clearer) = (steps::zone::<Machine>(), steps::clearer());
    while !HYP_STOP.load(Ordering::Acquire) {
        let n = steps::zero_in_background::<Machine>(zone, 64, &clearer);
        HYP_ZEROED.fetch_add(n, Ordering::Relaxed);
        if n == 0 {
            core::hint::spin_loop();
        }
    }
    HYP_SECOND_DONE.store(true, Ordering::Release);
    loop {
        // SAFETY: waits for an event; nothing else (the core has no more work, and under
        // `-icount` a sleeping core leaves the instructions to the one running the guest).
        unsafe { core::arch::asm!("wfe", options(nomem, nostack)) };
    }
}

/// The guest as the shared steps drive it: the vCPU and the world switch.
struct El1Guest;

impl Guest for El1Guest {
    fn enter(&mut self, command: Option<Touch>) -> GuestExit {
        // SAFETY: only the boot core uses the vCPU, and not while the guest runs.
        let vcpu = unsafe { &mut *VCPU.0.get() };
        if let Some(t) = command {
            vcpu.regs[0] = t.first_ipa();
            vcpu.regs[1] = t.count as u64;
            vcpu.regs[2] = t.stride_bytes();
            vcpu.regs[3] = u64::from(t.write);
        }
        // SAFETY: stage 2 and the guest's registers are set up (`run`); the guest runs with
        // every interrupt masked and leaves only through the vectors' guest exit.
        let esr = unsafe { __guest_enter(vcpu) };
        let (ec, iss) = (esr >> 26, esr & 0x1ff_ffff);
        match ec {
            // HVC #0: the command is done; HVC #1: the guest saw old data.
            0x16 if iss & 0xffff == 0 => GuestExit::Done,
            0x16 => GuestExit::OldData(vcpu.regs[0]),
            // A data abort from the guest, a stage-2 translation fault at any level.
            0x24 if (iss & 0x3c) == 0x04 => {
                let hpfar: u64;
                // SAFETY: HPFAR_EL2 holds the faulting IPA of this stage-2 fault.
                unsafe {
                    core::arch::asm!("mrs {}, hpfar_el2", out(reg) hpfar, options(nomem, nostack));
                }
                GuestExit::Fault(((hpfar >> 4) & ((1 << 40) - 1)) << 12)
            }
            _ => GuestExit::Other(esr, vcpu.elr),
        }
    }
}

/// Runs the hypervisor: stage 2, the guest's phases with aging and checks, the negative
/// control, teardown; then the zone check and the exit.
pub fn run(machine: &mut Machine, zone: &'static KernelZone, whole: steps::Blocks) -> ! {
    let clearer = steps::clearer();
    // SAFETY: hyp_vectors is the image's EL2 vector table; at EL2 with E2H, VBAR_EL2.
    unsafe {
        core::arch::asm!("msr vbar_el2, {}", "isb", in(reg) core::ptr::addr_of!(hyp_vectors), options(nostack));
    }
    // SAFETY: the second core starts on the boot map, which stays live for the whole run.
    let second = unsafe { machine.start_second_cpu() };
    println!(
        "hypervisor: EL2 (E2H), guest at EL1 with its MMU off; second CPU {}",
        match second {
            Ok(()) => "zeroing in the background",
            Err(e) => e,
        }
    );
    let tables = Stage2Tables::build(zone, &clearer);
    let mut ram = GuestRam::new(tables.leaf(Stage2Tables::RAM_L3, GUEST_RAM), S2_ATTRS);
    // VTCR_EL2: T0SZ 32 (4 GiB of IPA), SL0 1 (walks from level 1), write-back inner
    // shareable walks, 4 KiB granule, 36-bit PA, HA and HD; bit 31 RES1.
    let vtcr: u64 =
        32 | 1 << 6 | 1 << 8 | 1 << 10 | 3 << 12 | 1 << 16 | 1 << 21 | 1 << 22 | 1 << 31;
    // SAFETY: at EL2; stage 2 for the guest's VMID, whose tables were just published; the
    // host's own regime (EL2&0) is unaffected by VM and DC; the VMID's stale entries (none
    // yet) are dropped before the first entry.
    unsafe {
        core::arch::asm!(
            "dsb ishst",
            "msr vtcr_el2, {vtcr}",
            "msr vttbr_el2, {vttbr}",
            "msr hcr_el2, {hcr}",
            "msr s3_5_c1_c0_0, {sctlr}", // SCTLR_EL12: the guest's SCTLR_EL1
            "isb",
            vtcr = in(reg) vtcr,
            vttbr = in(reg) tables.vttbr(),
            hcr = in(reg) HCR,
            sctlr = in(reg) GUEST_SCTLR,
            options(nostack),
        );
        arch_arm64::tlb::flush_vmid();
    }
    // SAFETY: only the boot core uses the vCPU.
    unsafe { (*VCPU.0.get()).elr = guest_main as *const () as u64 };
    println!(
        "stage 2: tables from the zone's alloc_zeroed at {:#x}, VTCR_EL2.HA/HD set; guest RAM at IPA {GUEST_RAM:#x}, {GUEST_PAGES} pages, none mapped",
        tables.vttbr() & !(0xffff << 48)
    );

    let mut storage = steps::working_set_storage();
    let mut ws = WorkingSet::new(&mut storage)
        .unwrap_or_else(|e| fail::<Machine>(Step::Aging, format_args!("{e}")));
    let mut tlb = S2Tlb {
        skip: false,
        flushes: 0,
    };
    let pool_before = zone.zeroed_pages();
    let publish = super::mmu::publish_tables;
    ram.phases::<Machine>(&mut El1Guest, &mut ws, &mut tlb, zone, &clearer, publish);
    negative_control(&mut ram, &mut ws, &mut tlb, zone, &clearer);

    let faults = ram.faults;
    ram.tear_down::<Machine>(&mut tlb, zone);
    tables.free(zone);
    // SAFETY: at EL2 with the guest's VMID current: its translations go with its tables.
    unsafe { arch_arm64::tlb::flush_vmid() };
    // The guest nobody here wrote starts once the second CPU has zeroed enough for its RAM
    // in the background (or two seconds passed).
    #[cfg(linux_guest)]
    if second.is_ok() {
        let need = linux_guest::ram_pages();
        let until = Machine::now_ns() + 2_000_000_000;
        while zone.zeroed_pages() < need && Machine::now_ns() < until {
            core::hint::spin_loop();
        }
    }
    HYP_STOP.store(true, Ordering::Release);
    if second.is_ok() {
        while !HYP_SECOND_DONE.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
    println!(
        "hypervisor: {faults} stage-2 faults served with zeroed frames ({pool_before} known zero in the pool before, second CPU zeroed {} in the background), {} stage-2 invalidations; torn down",
        HYP_ZEROED.load(Ordering::Relaxed),
        tlb.flushes
    );
    #[cfg(linux_guest)]
    linux_guest::run(zone, &clearer);
    steps::check_whole::<Machine>(zone, whole);
    println!("buddy-sim: guest frames and stage-2 tables given back; zone whole");
    println!("PASS");
    Machine::exit(0)
}

/// The negative control: the guest reads a few pages, the hypervisor ages them without the
/// stage-2 invalidation, the guest reads them again through its stale TLB entries, and the
/// next aging pass must find them idle (the MMU set no access flag). Then the same with the
/// invalidation finds them young.
fn negative_control(
    ram: &mut GuestRam<'_, Arm64Stage2>,
    ws: &mut WorkingSet<'_>,
    tlb: &mut S2Tlb,
    zone: &KernelZone,
    clearer: &FrameClearer<OffsetMap>,
) {
    let reads = Touch::new(0, 8, 1, false);
    // The guest reads the pages, then a pass ages them (with or without the invalidation);
    // returns how many of them the pass found young.
    let mut read_and_age = |skip: bool| {
        ram.run::<Machine>(
            &mut El1Guest,
            reads,
            zone,
            clearer,
            super::mmu::publish_tables,
        );
        tlb.skip = skip;
        ram.age::<Machine>(ws, tlb);
        tlb.skip = false;
        GuestRam::<Arm64Stage2>::young_of(ws, reads)
    };
    read_and_age(true);
    let stale = read_and_age(false);
    if stale != 0 {
        fail::<Machine>(
            Step::NegativeControl,
            format_args!("a skipped stage-2 invalidation went unnoticed: {stale} of 8 pages young"),
        );
    }
    // The pass above flushed what it found young (nothing): drop the stale entries.
    // SAFETY: at EL2 with the guest's VMID current.
    unsafe { arch_arm64::tlb::flush_vmid() };
    let young = read_and_age(false);
    if young != 8 {
        fail::<Machine>(
            Step::NegativeControl,
            format_args!("after a full invalidation only {young} of 8 re-read pages were young"),
        );
    }
    println!(
        "negative control: aging without the stage-2 invalidation left 8 of 8 re-read pages idle (detected); with it, 8 of 8 young"
    );
}
