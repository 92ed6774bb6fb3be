//! The arm64 platform: booted by `qemu-system-aarch64 -M virt -cpu max -m 128M -semihosting
//! -kernel unikernel` at EL1 (with `virtualization=on` at EL2, where it runs as a hypervisor
//! instead: `hyp`); the PL011 UART and semihosting's exit; identity maps built with
//! aarch64-paging (the kernel's from zone frames through buddy-sim's `ZoneTables`); the EL1
//! fault handler that manages access and dirty state in software on CPUs without
//! FEAT_HAFDBS; PSCI `CPU_ON` for the second core. The steps themselves are `crate::steps`.

mod balloon;
mod boot;
pub mod console;
mod dtb;
mod hyp;
mod mmu;

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use buddy_sim::{OffsetMap, Pfn, ZoneTables};
use pte_batch::format::Arm64;
use pte_batch::mm_types::{FrameRange, PageRange, PageSize, VirtAddr};
use pte_batch::{Access, PteFormat, TlbFlush};

use crate::steps::{self, DATA_VA, Kernel, LAST_LEVEL_TABLES, PAGE, Platform, Step, fail, locate};

/// Bytes of the data region.
/// The data region's and the movable region's 2 MiB each, one level-3 table apiece.
const DATA_BYTES: usize = LAST_LEVEL_TABLES << 21;
use mmu::{El1Tlb, RAM_START};

/// Access-flag / permission faults the kernel resolved in software (no FEAT_HAFDBS).
static SOFT_FAULTS: AtomicU64 = AtomicU64::new(0);
/// Whether range TLBIs may be used (FEAT_TLBIRANGE).
static TLBI_RANGE: AtomicBool = AtomicBool::new(false);
/// TTBR0 of the boot map, which the second core returns to before the kernel's map is freed.
static BOOT_TTBR0: AtomicU64 = AtomicU64::new(0);

/// The virt machine as the steps see it.
pub struct Machine {
    /// The registers the second core turns its MMU on with (the kernel's map).
    regs: mmu::SecondaryBoot,
}

impl Platform for Machine {
    type Format = Arm64;
    const FORMAT: Arm64 = Arm64::G4K;
    const DATA_ATTRS: u64 = mmu::DATA_ATTRS;
    const CONTIG_FROZEN: bool = false;
    type Tlb = El1Tlb;

    fn tlb() -> El1Tlb {
        El1Tlb {
            range: TLBI_RANGE.load(Ordering::Relaxed),
            flushes: 0,
        }
    }
    fn flushes(tlb: &El1Tlb) -> u64 {
        tlb.flushes
    }
    fn sync() {
        mmu::sync();
    }
    fn publish_tables() {
        mmu::publish_tables();
    }
    fn flush_all() {
        mmu::flush_all();
    }
    fn skipped_flush_observable() -> Result<(), &'static str> {
        Ok(())
    }
    unsafe fn start_second_cpu(&mut self) -> Result<(), &'static str> {
        let ctx = mmu::SecondaryBoot {
            stack_top: core::ptr::addr_of!(__stack1_top) as u64,
            ..self.regs
        };
        // SAFETY: written once, before the second core starts; it reads it with its MMU off,
        // hence the clean to the point of coherency.
        let ctx_ptr = unsafe {
            let p = core::ptr::addr_of_mut!(SECONDARY);
            p.write(ctx);
            p
        };
        // SAFETY: SECONDARY is a static of the image, which every map identity-maps.
        unsafe { mmu::clean_to_poc(ctx_ptr, core::mem::size_of::<mmu::SecondaryBoot>()) };
        // SAFETY: `secondary_entry` is the image's entry for a second core, which sets up its
        // stack and MMU from the context cleaned above and never returns.
        let started =
            unsafe { cpu_on(1, boot::secondary_entry as *const () as u64, ctx_ptr as u64) };
        match started {
            0 => Ok(()),
            -2 => Err("PSCI CPU_ON: invalid parameters, no such core"),
            _ => Err("PSCI CPU_ON refused"),
        }
    }
    fn exit(code: u32) -> ! {
        console::exit(code)
    }
    fn now_ns() -> u64 {
        let (count, freq): (u64, u64);
        // SAFETY: the generic timer's virtual count and frequency are readable at EL1 and
        // have no side effects.
        unsafe {
            core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) count, options(nomem, nostack));
            core::arch::asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack));
        }
        if freq == 0 {
            return 0;
        }
        (u128::from(count) * 1_000_000_000 / u128::from(freq)) as u64
    }
}

/// The synchronous exception handler: resolves access-flag faults and write faults on
/// dirty-managed pages of the data and movable regions in software (Linux's `handle_pte_fault` with
/// `ptep_set_access_flags`, block-wide for a contpte entry) on CPUs without FEAT_HAFDBS.
/// Anything else is fatal.
#[unsafe(no_mangle)]
extern "C" fn el1_sync(esr: u64, far: u64) {
    let ec = esr >> 26;
    let dfsc = esr & 0x3f;
    let write = esr & (1 << 6) != 0;
    let in_data = far.wrapping_sub(DATA_VA) < DATA_BYTES as u64;
    // Data abort at EL1: access-flag fault or permission fault, level 3.
    if ec == 0x25 && in_data && (dfsc == 0x0b || (dfsc == 0x0f && write)) {
        let (table, index) = locate::<Machine>(((far - DATA_VA) / PAGE) as usize);
        let access = if write { Access::Write } else { Access::Read };
        let f = table.format();
        let cont = table.raw(index).is_ok_and(|e| f.is_cont(e));
        let picks = if cont { f.cont_ptes() } else { 1 };
        for pick in 0..picks {
            if let Err(e) = table.hw_access(index, access, pick) {
                fail::<Machine>(Step::Exception, format_args!("fault at {far:#x}: {e}"));
            }
        }
        let start = if cont { index - index % picks } else { index };
        let mut tlb = Machine::tlb();
        let va = table.va_of(start).unwrap_or(VirtAddr(far));
        tlb.flush_range(PageRange::new(va, picks as u64, PageSize::Size4KiB));
        SOFT_FAULTS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    fail::<Machine>(Step::Exception, format_args!("ESR {esr:#x} FAR {far:#x}"));
}

#[unsafe(no_mangle)]
extern "C" fn unexpected_exception(esr: u64, far: u64, elr: u64) -> ! {
    fail::<Machine>(
        Step::Exception,
        format_args!("unexpected exception: ESR {esr:#x} FAR {far:#x} ELR {elr:#x}"),
    )
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
    // The MMU: the boot identity map (aarch64-paging, tables from a static pool), hardware
    // access/dirty management if present.
    let feat = mmu::features();
    let mut boot_map = mmu::new_map(mmu::BootTables::take());
    // The boot map reaches node 0's RAM (the device tree, the image, the stacks); the
    // kernel's map all RAM the device tree names.
    mmu::map_identity(&mut boot_map, RAM_START + steps::MAX_RAM)
        .unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("boot map: {e}")));
    let boot_regs = mmu::registers(feat, boot_map.root_address());
    // SAFETY: at EL1 with the MMU off; the boot map (tables in a static pool, live for the
    // whole run) identity-maps the image, the stacks and the UART; registers for this CPU.
    unsafe { mmu::enable(&boot_regs) };
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

    // A zone per NUMA node of the device tree, each spanning its node's RAM; the zones get
    // everything past the image (the device tree and the image stay reserved: a hole at the
    // start of node 0's zone).
    let nodes = dtb::node_map()
        .unwrap_or_else(|e| fail::<Machine>(Step::Zone, format_args!("device tree: {e}")));
    let image_end_pfn = (core::ptr::addr_of!(__image_end) as u64).div_ceil(PAGE);
    let mut usable = [FrameRange::new(Pfn(0), 0); steps::NODES];
    for (n, u) in usable.iter_mut().enumerate().take(nodes.nodes()) {
        let span = nodes.span(n);
        let (start, end) = (span.start.0.max(image_end_pfn), span.start.0 + span.pages);
        if start < end {
            *u = FrameRange::new(Pfn(start), end - start);
        }
    }
    let ram_top = nodes.ram_top();
    if current_el() == 2 {
        // The hypervisor: on the boot map, the known-zero pool left to the second CPU.
        let (zone, whole) = steps::make_zones::<Machine>(&nodes, &usable, 0);
        let mut machine = Machine { regs: boot_regs };
        hyp::run(&mut machine, zone, whole);
    }
    let (zone, whole) = steps::make_zones::<Machine>(&nodes, &usable, steps::BOOT_POOL);
    let mut k = Kernel::<Machine>::new(zone);

    // The kernel's map, built with aarch64-paging: the same identity map, and the data
    // region's level-3 tables, every table page a zeroed allocation from the zone.
    // SAFETY: RAM is identity-mapped (the boot map, and this map once it is live), and the
    // zone's frames belong to whoever the zone hands them to.
    let identity = unsafe { OffsetMap::new(0) };
    let tables = ZoneTables::new(zone, 0, identity)
        .unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("{e}")));
    let mut map = mmu::new_map(tables);
    let built = mmu::map_identity(&mut map, ram_top)
        .and_then(|()| mmu::map_data_tables(&mut map, DATA_BYTES));
    built.unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("kernel map: {e}")));
    let mut found = 0;
    mmu::data_tables(&map, DATA_BYTES, |va, pa| {
        // SAFETY: a level-3 table of the kernel's map (a zeroed zone frame, identity-mapped),
        // used only as that table and accessed atomically by pte-batch; `k.unmap_data`
        // forgets it before dropping the map frees it.
        unsafe { steps::set_data_table(((va - DATA_VA) >> 21) as usize, pa) };
        found += 1;
    })
    .unwrap_or_else(|e| fail::<Machine>(Step::PageTables, format_args!("walk: {e}")));
    for t in 0..LAST_LEVEL_TABLES {
        let empty = steps::data_table::<Machine>(t)
            .is_some_and(|table| (0..512).all(|i| table.raw(i) == Ok(0)));
        if !empty {
            fail::<Machine>(
                Step::PageTables,
                format_args!("level-3 table {t} missing or not zero"),
            );
        }
    }
    let regs = mmu::registers(feat, map.root_address());
    mmu::publish_tables();
    // SAFETY: the kernel's map identity-maps the image, the stacks and the UART as the boot
    // map does (plus the data region), and is dropped only after the switch back below.
    unsafe { mmu::switch(regs.ttbr0) };
    boot_map.mark_inactive();
    map.mark_active();
    println!(
        "aarch64-paging: kernel map at {:#x} with {} table pages from the zone's alloc_zeroed (unmovable); {found} level-3 tables handed to pte-batch",
        regs.ttbr0,
        map.translation().tables()
    );

    let mut machine = Machine { regs };
    k.run(&mut machine);
    // Free page reporting to QEMU's virtio-balloon, where the machine has one.
    match balloon::Balloon::find() {
        Ok(mut device) => {
            println!(
                "balloon: virtio-balloon with free page reporting found through the device tree"
            );
            let mut sample = |what: &str| {
                println!("balloon: sample {what}");
                console::wait_for_byte(5)
            };
            steps::reporting_step::<Machine>(k.zone, &mut device, &mut sample);
        }
        Err(why) => println!("balloon: none ({why})"),
    }

    // Back on the boot map, the kernel's map is dropped: aarch64-paging frees every table
    // page to the zone through ZoneTables.
    k.unmap_data();
    // SAFETY: the boot map, live for the whole run, maps everything the code uses from here.
    unsafe { mmu::switch(boot_regs.ttbr0) };
    // The switch dropped this core's entries; the second core left the map before
    // ALLOC_DONE, but its entries may linger in the inner-shareable TLBs: drop them all.
    mmu::flush_all();
    map.mark_inactive();
    boot_map.mark_active();
    let tables = map.translation().tables();
    drop(map);
    println!(
        "software faults: {} (access flag and dirty state managed by the fault handler)",
        SOFT_FAULTS.load(Ordering::Relaxed)
    );
    k.finish(whole, tables)
}

/// The second core's boot context (cleaned to memory before CPU_ON).
static mut SECONDARY: mmu::SecondaryBoot = mmu::SecondaryBoot {
    stack_top: 0,
    mair: 0,
    tcr: 0,
    ttbr0: 0,
    sctlr: 0,
};

/// PSCI `CPU_ON` (the virt machine's conduit: `hvc` at EL1, `smc` at EL2): returns PSCI's
/// result.
///
/// # Safety
/// `entry` is code of the image that a core may start at EL1 with its MMU off and
/// `context` in x0 (the boot stub), and `context` is what that code expects there.
unsafe fn cpu_on(mpidr: u64, entry: u64, context: u64) -> i64 {
    let mut x0: u64 = 0xC400_0003;
    // SAFETY: a PSCI call; QEMU's firmware interface starts the core at `entry` at the
    // caller's exception level. Its conduit is `hvc` for a kernel at EL1 and `smc` at EL2
    // (`virtualization=on`, where `hvc` is the hypervisor's own).
    unsafe {
        if current_el() == 2 {
            core::arch::asm!("smc #0", inout("x0") x0, in("x1") mpidr, in("x2") entry, in("x3") context,
                options(nostack));
        } else {
            core::arch::asm!("hvc #0", inout("x0") x0, in("x1") mpidr, in("x2") entry, in("x3") context,
                options(nostack));
        }
    }
    x0 as i64
}

#[unsafe(no_mangle)]
extern "C" fn secondary_main() -> ! {
    if current_el() == 2 {
        hyp::secondary();
    }
    // Off the kernel's map before core 0 frees its tables.
    let leave_map = || {
        // SAFETY: the boot map is live for the whole run and maps the image and the stacks
        // as the kernel's map does.
        unsafe { mmu::switch(BOOT_TTBR0.load(Ordering::Relaxed)) }
    };
    // SAFETY: this is the second core, which `start_second_cpu` started on the kernel's map.
    unsafe { steps::secondary::<Machine>(leave_map) }
}
