//! Starting the second CPU through the local APIC: the boot CPU copies a real-mode trampoline
//! to a low frame the memory map keeps out of the zone (as Linux reserves its real-mode
//! trampoline), fills in CR3 (the kernel's map), a stack and the
//! Rust entry, and sends INIT and two STARTUP IPIs. The trampoline enters protected mode, then
//! long mode on the kernel's map, and calls [`x86_secondary_main`].

use core::arch::global_asm;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::regs::{self, lapic_read, lapic_write};
use super::{Machine, measure};
use crate::steps;

/// The frame the trampoline runs from (real mode: below 1 MiB, 4 KiB aligned; the STARTUP
/// vector is its page number).
pub const TRAMPOLINE: u64 = 0x8000;

global_asm!(
    r#"
.section .rodata
.global ap_trampoline_start, ap_trampoline_end, ap_cr3, ap_stack, ap_entry
.code16
ap_trampoline_start:
    cli
    cld
    xor ax, ax
    mov ds, ax
    lgdt [AP_GDT_PTR]
    mov eax, cr0
    or eax, 1
    mov cr0, eax
    // ljmpl 0x18, ap_protected (32-bit offset far jump)
    .byte 0x66, 0xea
    .long 0x8000 + ap_protected - ap_trampoline_start
    .word 0x18
.code32
ap_protected:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    mov eax, cr4
    or eax, 1 << 5
    mov cr4, eax
    mov eax, dword ptr [AP_CR3]
    mov cr3, eax
    mov ecx, 0xc0000080
    rdmsr
    or eax, (1 << 8) | (1 << 11)
    wrmsr
    mov eax, cr0
    or eax, (1 << 31) | (1 << 16)
    mov cr0, eax
    // ljmp 0x08, ap_long
    .byte 0xea
    .long 0x8000 + ap_long - ap_trampoline_start
    .word 0x08
.code64
ap_long:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    mov rsp, qword ptr [AP_STACK]
    mov rax, qword ptr [AP_ENTRY]
    call rax
2:  hlt
    jmp 2b
.p2align 3
ap_gdt:
    .quad 0
    .quad 0x00af9a000000ffff    // 0x08: 64-bit code
    .quad 0x00cf92000000ffff    // 0x10: data
    .quad 0x00cf9a000000ffff    // 0x18: 32-bit code
ap_gdt_ptr:
    .word 4 * 8 - 1
    .long 0x8000 + ap_gdt - ap_trampoline_start
.p2align 3
ap_cr3: .quad 0
ap_stack: .quad 0
ap_entry: .quad 0
ap_trampoline_end:
// Where the copy at 0x8000 holds each field.
.set AP_GDT_PTR, 0x8000 + (ap_gdt_ptr - ap_trampoline_start)
.set AP_CR3, 0x8000 + (ap_cr3 - ap_trampoline_start)
.set AP_STACK, 0x8000 + (ap_stack - ap_trampoline_start)
.set AP_ENTRY, 0x8000 + (ap_entry - ap_trampoline_start)
.code64
"#
);

unsafe extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
    static ap_cr3: u8;
    static ap_stack: u8;
    static ap_entry: u8;
    static __stack1_top: u8;
}

/// The second CPU has reached Rust.
static AP_ALIVE: AtomicBool = AtomicBool::new(false);
/// CR3 of the boot map, which the second CPU returns to before the kernel's map is freed.
pub static BOOT_CR3: AtomicU64 = AtomicU64::new(0);
/// Whether the boot CPU enabled XSAVE state (the second CPU does the same).
pub static XSAVE: AtomicBool = AtomicBool::new(false);

const ICR_LOW: u64 = 0x300;
const ICR_HIGH: u64 = 0x310;

/// Busy-waits `us` microseconds on the TSC.
fn delay_us(hz: u64, us: u64) {
    let end = measure::rdtsc() + hz / 1_000_000 * us;
    while measure::rdtsc() < end {
        core::hint::spin_loop();
    }
}

/// Sends `low` to the CPU with APIC ID `apic` and waits until the APIC has delivered it.
///
/// # Safety
/// The kernel's map (which maps the local APIC) is loaded.
unsafe fn send_ipi(apic: u32, low: u32) {
    // SAFETY: the caller guarantees the local APIC is mapped; ICR high and low are its
    // interrupt command registers.
    unsafe {
        lapic_write(ICR_HIGH, apic << 24);
        lapic_write(ICR_LOW, low);
        while lapic_read(ICR_LOW) & (1 << 12) != 0 {
            core::hint::spin_loop();
        }
    }
}

/// Starts the CPU with APIC ID 1 on the kernel's map (current CR3). `Err` if it does not
/// reach Rust within a second (no second CPU: a `-smp 1` boot).
///
/// # Errors
/// Why there is no second CPU.
///
/// # Safety
/// Called once, with the kernel's map loaded (it maps the local APIC, and the second CPU
/// starts on the current CR3), before the steps that share the zone with the second CPU.
pub unsafe fn start_second_cpu() -> Result<(), &'static str> {
    let start = core::ptr::addr_of!(ap_trampoline_start);
    let len = core::ptr::addr_of!(ap_trampoline_end) as usize - start as usize;
    let dst = TRAMPOLINE as *mut u8;
    let field =
        |sym: *const u8| (TRAMPOLINE as usize + (sym as usize - start as usize)) as *mut u64;
    // SAFETY: the frame is kept out of the zone for this, identity-mapped, and holds the
    // trampoline (a few hundred bytes) and its three fields, which nothing else uses.
    unsafe {
        core::ptr::copy_nonoverlapping(start, dst, len);
        field(core::ptr::addr_of!(ap_cr3)).write_volatile(regs::cr3());
        field(core::ptr::addr_of!(ap_stack))
            .write_volatile(core::ptr::addr_of!(__stack1_top) as u64);
        field(core::ptr::addr_of!(ap_entry)).write_volatile(x86_secondary_main as *const () as u64);
    }
    let hz = super::TSC_HZ.load(Ordering::Relaxed).max(1_000_000);
    // INIT, then two STARTUP IPIs with the trampoline's page as the vector.
    // SAFETY: the caller guarantees the kernel's map is loaded.
    unsafe { send_ipi(1, 0x4500) };
    delay_us(hz, 10_000);
    let vector = (TRAMPOLINE >> 12) as u32;
    for _ in 0..2 {
        // SAFETY: as above.
        unsafe { send_ipi(1, 0x4600 | vector) };
        delay_us(hz, 200);
    }
    let end = measure::rdtsc() + hz;
    while !AP_ALIVE.load(Ordering::Acquire) {
        if measure::rdtsc() > end {
            return Err("no CPU answered INIT-SIPI-SIPI within a second");
        }
        core::hint::spin_loop();
    }
    Ok(())
}

/// The second CPU's Rust entry: its own vector state and IDT, then the shared steps; it goes
/// back to the boot map before core 0 frees the kernel's.
extern "C" fn x86_secondary_main() -> ! {
    super::enable_vector_state(XSAVE.load(Ordering::Relaxed));
    super::idt::load();
    AP_ALIVE.store(true, Ordering::Release);
    let leave_map = || {
        // SAFETY: the boot map is live for the whole run and maps the image and the stacks as
        // the kernel's map does.
        unsafe { regs::set_cr3(BOOT_CR3.load(Ordering::Relaxed)) }
    };
    // SAFETY: this is the second CPU, which `start_second_cpu` started on the kernel's map
    // (its trampoline loads the boot CPU's CR3 of that moment).
    unsafe { steps::secondary::<Machine>(leave_map) }
}
