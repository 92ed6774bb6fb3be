//! The x86_64 kernel: booted by QEMU through PVH, in long mode with its own page tables,
//! printing on COM1 and exiting through `isa-debug-exit` with 0 or the number of the step that
//! failed.

mod boot;
pub mod console;

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

#[unsafe(no_mangle)]
extern "C" fn kmain(start_info: u32) -> ! {
    println!("unikernel-x86_64: booted in long mode");
    // SAFETY: QEMU's PVH loader put the start info at this identity-mapped address.
    let info = unsafe { &*(start_info as usize as *const StartInfo) };
    if info.magic != START_INFO_MAGIC || info.version < 1 {
        println!("FAIL: no PVH start info with a memory map");
        console::exit(2)
    }
    // SAFETY: version 1 start info names a memory map of `memmap_entries` entries there.
    let map = unsafe {
        core::slice::from_raw_parts(
            info.memmap_paddr as usize as *const MemmapEntry,
            info.memmap_entries as usize,
        )
    };
    for e in map {
        println!(
            "memmap: {:#x}..{:#x} type {}",
            e.addr,
            e.addr + e.size,
            e.kind
        );
    }
    println!("PASS");
    console::exit(0)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    println!("FAIL: {info}");
    console::exit(12)
}
