//! The x86_64 CPU registers the kernel's MMU and SMP code share: CR3 (the page-table root)
//! and the local APIC's memory-mapped registers.

use core::arch::asm;

/// The local APIC's registers (identity-mapped, uncached, by the kernel's map).
pub const LAPIC: u64 = 0xfee0_0000;

/// Reads CR3.
pub fn cr3() -> u64 {
    let v: u64;
    // SAFETY: reading CR3 has no side effects.
    unsafe { asm!("mov {}, cr3", out(reg) v, options(nomem, nostack)) };
    v
}

/// Loads CR3 (which also invalidates every non-global translation).
///
/// # Safety
/// `v` is the root of a live map (its tables stay allocated while it is loaded) that maps
/// the image, the stacks, the IDT's handlers and every memory the code reaches afterwards
/// at the same addresses and with the same attributes as the current one.
pub unsafe fn set_cr3(v: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { asm!("mov cr3, {}", in(reg) v, options(nostack)) };
}

/// Reloads CR3 with its own value: drops every non-global translation this CPU cached.
pub fn flush_tlb() {
    // SAFETY: the current root, which maps everything the code uses as it does now.
    unsafe { set_cr3(cr3()) };
}

/// Writes `v` to the local APIC register at offset `reg`.
///
/// # Safety
/// The kernel's map, which maps the local APIC uncached, is loaded (CR3), and `reg` is a
/// writable register's offset.
pub unsafe fn lapic_write(reg: u64, v: u32) {
    // SAFETY: the caller guarantees the register is mapped (uncached) and writable.
    unsafe { core::ptr::write_volatile((LAPIC + reg) as *mut u32, v) };
}

/// Reads the local APIC register at offset `reg`.
///
/// # Safety
/// As [`lapic_write`], for a readable register.
pub unsafe fn lapic_read(reg: u64) -> u32 {
    // SAFETY: as `lapic_write`.
    unsafe { core::ptr::read_volatile((LAPIC + reg) as *const u32) }
}
