//! The x86_64 platform: booted by QEMU through PVH (`-kernel` with the Xen note), in long mode
//! on its own 4-level tables, printing on COM1 and exiting through `isa-debug-exit`; the
//! kernel's map built with the `x86_64` crate over buddy-sim's frames; `invlpg` for pte-batch's
//! flush tokens; the second CPU through the local APIC; ring-0 measurements on request. Under
//! hardware KVM it runs at native speed in ring 0. The steps themselves are `crate::steps`.

mod acpi;
mod boot;
pub mod console;
mod idt;
mod measure;
mod mmu;
mod regs;
mod smp;
mod svm;

use core::arch::asm;

use buddy_sim::Pfn;
use pte_batch::format::X86_64;
use pte_batch::mm_types::FrameRange;

use crate::steps::{self, DATA_VA, Kernel, LAST_LEVEL_TABLES, NodeMap, PAGE, Platform, Step, fail};
use mmu::{Invlpg, KernelMap};

/// The QEMU PC as the steps see it.
pub struct Machine;

impl Platform for Machine {
    type Format = X86_64;
    const FORMAT: X86_64 = X86_64;
    // Write-back memory: PAT entry 0, no attribute bits.
    const DATA_ATTRS: u64 = 0;
    const CONTIG_FROZEN: bool = true;
    type Tlb = Invlpg;

    fn tlb() -> Invlpg {
        Invlpg {
            flushes: 0,
            full: 0,
        }
    }
    fn flushes(tlb: &Invlpg) -> u64 {
        tlb.flushes
    }
    fn sync() {
        // The MMU's accessed and dirty updates are locked operations, ordered before the
        // access that caused them completes.
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
    fn publish_tables() {
        // The table walker snoops the caches: ordering the stores is enough.
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
    fn flush_all() {
        regs::flush_tlb();
    }
    fn skipped_flush_observable() -> Result<(), &'static str> {
        if under_kvm() {
            Err(
                "under KVM the guest's page tables are shadowed or nested by the hypervisor, which re-reads them",
            )
        } else {
            Ok(())
        }
    }
    unsafe fn start_second_cpu(&mut self) -> Result<(), &'static str> {
        // SAFETY: forwarded: once, with the kernel's map loaded.
        unsafe { smp::start_second_cpu() }
    }
    fn exit(code: u32) -> ! {
        console::exit(code)
    }
    fn now_ns() -> u64 {
        let hz = TSC_HZ.load(core::sync::atomic::Ordering::Relaxed);
        if hz == 0 {
            return 0;
        }
        (u128::from(measure::rdtsc()) * 1_000_000_000 / u128::from(hz)) as u64
    }
}

/// TSC ticks per second, calibrated against the PIT at boot.
static TSC_HZ: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Whether CPUID's hypervisor leaf names KVM ("KVMKVMKVM"); QEMU's TCG does not.
pub fn under_kvm() -> bool {
    let hv = core::arch::x86_64::__cpuid(1).ecx & (1 << 31) != 0;
    if !hv {
        return false;
    }
    let leaf = core::arch::x86_64::__cpuid(0x4000_0000);
    let mut sig = [0u8; 12];
    sig[..4].copy_from_slice(&leaf.ebx.to_le_bytes());
    sig[4..8].copy_from_slice(&leaf.ecx.to_le_bytes());
    sig[8..].copy_from_slice(&leaf.edx.to_le_bytes());
    &sig[..9] == b"KVMKVMKVM"
}

/// `hvm_start_info` (Xen's PVH boot ABI, version 1), as QEMU fills it in.
#[repr(C)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

/// One `hvm_memmap_table_entry`: type 1 is usable RAM.
#[repr(C)]
#[derive(Clone, Copy)]
struct MemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

const START_INFO_MAGIC: u32 = 0x336e_c578;
/// Where the measurements' region may start: past every zone's span.
const MEASURE_START: u64 = steps::NODES as u64 * steps::MAX_RAM;
/// The measurements' region: 1 GiB.
const MEASURE_BYTES: u64 = 1 << 30;
const MAX_RANGES: usize = 16;

unsafe extern "C" {
    static __image_end: u8;
}

/// Lets zero-core use SSE and AVX state in ring 0: CR0.MP without EM, CR4.OSFXSR,
/// OSXMMEXCPT and, when `xsave` is asked for and the CPU has XSAVE, OSXSAVE with XCR0
/// enabling x87, SSE, AVX and, where present, the AVX-512 state. Returns XCR0 (0 without).
///
/// XSAVE is opt-in (the `xsave` word on the kernel command line, `-append xsave`): under the
/// `kvm_pvm` KVM of the development machines, `xgetbv` in the guest ends the run with a KVM
/// "emulation failure", so there the kernel leaves OSXSAVE off and zero-core, seeing no
/// OS-enabled AVX state, does not choose AVX streaming stores.
fn enable_vector_state(xsave_wanted: bool) -> u64 {
    let (mut cr0, mut cr4): (u64, u64);
    // SAFETY: reading control registers has no side effects.
    unsafe {
        asm!("mov {}, cr0", out(reg) cr0, options(nomem, nostack));
        asm!("mov {}, cr4", out(reg) cr4, options(nomem, nostack));
    }
    cr0 = (cr0 & !(1 << 2)) | (1 << 1); // EM off, MP on
    cr4 |= (1 << 9) | (1 << 10); // OSFXSR, OSXMMEXCPT
    let ecx = core::arch::x86_64::__cpuid(1).ecx;
    let xsave = xsave_wanted && ecx & (1 << 26) != 0;
    if xsave {
        cr4 |= 1 << 18; // OSXSAVE
    }
    // SAFETY: enabling FPU/SSE state and XSAVE, which this kernel's code does not rely on
    // being off (it is built soft-float; only zero-core's vector stores use the state).
    unsafe {
        asm!("mov cr0, {}", in(reg) cr0, options(nostack));
        asm!("mov cr4, {}", in(reg) cr4, options(nostack));
    }
    if !xsave {
        return 0;
    }
    // CPUID leaf 0xD sub-leaf 0: the XCR0 bits the CPU supports.
    let supported = core::arch::x86_64::__cpuid_count(0xd, 0);
    let supported = u64::from(supported.eax) | (u64::from(supported.edx) << 32);
    // x87, SSE, AVX, and AVX-512's opmask, ZMM_Hi256 and Hi16_ZMM where all three exist.
    let mut xcr0 = supported & 0b111;
    if supported & 0b1110_0000 == 0b1110_0000 {
        xcr0 |= 0b1110_0000;
    }
    // SAFETY: OSXSAVE is on and `xcr0` holds only supported bits, x87 included.
    unsafe {
        asm!("xsetbv", in("ecx") 0u32, in("eax") xcr0 as u32, in("edx") (xcr0 >> 32) as u32,
            options(nomem, nostack));
    }
    xcr0
}

/// The kernel command line (`-append`), or "" without one or if it is not UTF-8.
fn command_line(info: &StartInfo) -> &'static str {
    if info.cmdline_paddr == 0 {
        return "";
    }
    let p = info.cmdline_paddr as usize as *const u8;
    // SAFETY: QEMU wrote a NUL-terminated string there (identity-mapped); the scan stops at
    // the NUL or after 256 bytes.
    let len = (0..256)
        .find(|&i| unsafe { p.add(i).read() } == 0)
        .unwrap_or(0);
    // SAFETY: `len` bytes from `p` were just read; nothing writes them.
    let bytes = unsafe { core::slice::from_raw_parts(p, len) };
    core::str::from_utf8(bytes).unwrap_or("")
}

#[unsafe(no_mangle)]
extern "C" fn kmain(start_info: u32) -> ! {
    idt::load();
    println!(
        "unikernel-x86_64: booted in long mode, ring 0, {}",
        if under_kvm() {
            "under KVM"
        } else {
            "under TCG (no KVM signature)"
        }
    );
    // SAFETY: QEMU's PVH loader put the start info at this identity-mapped address.
    let info = unsafe { &*(start_info as usize as *const StartInfo) };
    if info.magic != START_INFO_MAGIC || info.version < 1 {
        fail::<Machine>(
            Step::Zone,
            format_args!("no PVH start info with a memory map"),
        );
    }
    let cmdline = command_line(info);
    let measuring = cmdline.split(' ').any(|w| w == "measure");
    let xsave = cmdline.split(' ').any(|w| w == "xsave");
    smp::XSAVE.store(xsave, core::sync::atomic::Ordering::Relaxed);
    let xcr0 = enable_vector_state(xsave);
    let hz = measure::tsc_hz();
    TSC_HZ.store(hz, core::sync::atomic::Ordering::Relaxed);
    println!("timer: TSC at {} MHz (against the PIT)", hz / 1_000_000);
    println!("cpu: SSE on, XCR0 {xcr0:#x} (command line {cmdline:?})");
    // SAFETY: version 1 start info names a memory map of `memmap_entries` entries there.
    let map = unsafe {
        core::slice::from_raw_parts(
            info.memmap_paddr as usize as *const MemmapEntry,
            info.memmap_entries as usize,
        )
    };
    // A zone per NUMA node (ACPI's SRAT; one node spanning RAM from frame 0 without one);
    // the zones get the firmware's usable ranges, less frame 0 and the image (both stay
    // holes), each cut to whole frames.
    let image_end = core::ptr::addr_of!(__image_end) as u64;
    let mut usable = [FrameRange::new(Pfn(0), 0); MAX_RANGES];
    let mut n = 0;
    let mut top = 0;
    // The measurements' region: 1 GiB of RAM past the zone's span, from the largest
    // usable range (the `-m 2G` boot of `cargo xtask report`).
    let mut region: Option<(u64, u64)> = None;
    for e in map {
        if e.kind == 1 {
            let start = e.addr.max(MEASURE_START).next_multiple_of(2 << 20);
            let end = (e.addr + e.size) & !((2 << 20) - 1);
            if end > start && region.is_none_or(|(s, t)| t - s < end - start) {
                region = Some((start, end));
            }
        }
    }
    for e in map {
        println!(
            "memmap: {:#x}..{:#x} type {}",
            e.addr,
            e.addr + e.size,
            e.kind
        );
        if e.kind != 1 || n == MAX_RANGES {
            continue;
        }
        let mut start = e.addr.max(PAGE);
        let end = e.addr + e.size;
        if (start..end).contains(&0x10_0000) {
            start = start.max(image_end);
        }
        let (first, last) = (start.div_ceil(PAGE), end / PAGE);
        // The second CPU's real-mode trampoline stays out of the zone (a hole).
        let trampoline = smp::TRAMPOLINE / PAGE;
        for (a, b) in [
            (first, last.min(trampoline)),
            (first.max(trampoline + 1), last),
        ] {
            if a < b && n < MAX_RANGES {
                usable[n] = FrameRange::new(Pfn(a), b - a);
                n += 1;
                top = top.max(b);
            }
        }
    }
    let nodes = acpi::node_map(info.rsdp_paddr)
        .unwrap_or_else(|e| fail::<Machine>(Step::Zone, format_args!("ACPI: {e}")))
        .unwrap_or_else(|| {
            NodeMap::one_node(FrameRange::new(Pfn(0), top), "no ACPI SRAT: one node")
        });
    let (zone, whole) = steps::make_zones::<Machine>(&nodes, &usable[..n], steps::BOOT_POOL);
    let mut k = Kernel::<Machine>::new(zone);

    // The kernel's map: the x86_64 crate's OffsetPageTable over buddy-sim's frames.
    let boot_cr3 = regs::cr3();
    smp::BOOT_CR3.store(boot_cr3, core::sync::atomic::Ordering::Relaxed);
    let map_top = match region {
        Some((_, end)) if measuring => end.min(4 << 30),
        _ => nodes.ram_top().min(steps::NODES as u64 * steps::MAX_RAM),
    };
    let kmap = KernelMap::build(zone, map_top);
    for t in 0..LAST_LEVEL_TABLES {
        let pa = kmap
            .level1_table(DATA_VA + t as u64 * (2 << 20))
            .unwrap_or_else(|| fail::<Machine>(Step::PageTables, format_args!("no table {t}")));
        // SAFETY: the level-1 table of the kernel's map that maps this 2 MiB of the data
        // region: a zone frame, identity-mapped, used only as that table and accessed
        // atomically by pte-batch; `k.unmap_data` forgets it before `kmap.free` frees it.
        unsafe { steps::set_data_table(t, pa) };
    }
    // SAFETY: the kernel's map identity-maps the image, the stacks and RAM up to `map_top` as
    // the boot map does (plus the data region and the LAPIC), and lives until `kmap.free`,
    // after CR3 holds the boot map again.
    unsafe { regs::set_cr3(kmap.cr3()) };
    println!(
        "x86_64: kernel map at {:#x} with {} table pages from the zone (the x86_64 crate's OffsetPageTable over buddy-sim's alloc_zeroed, unmovable); {LAST_LEVEL_TABLES} level-1 tables handed to pte-batch",
        kmap.cr3(),
        kmap.frames.allocated
    );

    let mut machine = Machine;
    k.run(&mut machine);
    if measuring {
        match region {
            Some((start, end)) if end - start >= MEASURE_BYTES && end <= map_top => {
                // SAFETY: usable RAM past the zone's span (nobody else's), identity-mapped
                // by the kernel's map up to `map_top`.
                let region = unsafe {
                    core::slice::from_raw_parts_mut(
                        start as usize as *mut u8,
                        MEASURE_BYTES as usize,
                    )
                };
                measure::run(&mut k, region);
            }
            _ => println!(
                "MEASURE SKIPPED: no 1 GiB of RAM past {MEASURE_START:#x} (boot with -m 2G)"
            ),
        }
    }

    svm::run(zone);

    k.unmap_data();
    // SAFETY: the boot map, live for the whole run, maps everything the code uses from here
    // on (the data region is unmapped already).
    unsafe { regs::set_cr3(boot_cr3) };
    let tables = kmap.free();
    k.finish(whole, tables)
}
