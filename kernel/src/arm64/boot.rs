//! Entry points and the exception vector table, in assembly: the boot core's `_start`, the
//! second core's PSCI entry, and the EL1 synchronous-exception path that lets Rust handle
//! access-flag and permission faults (software access/dirty management on CPUs without
//! FEAT_HAFDBS) and return to the faulting instruction. Entered at EL2 (QEMU's
//! `virtualization=on`), both cores switch to the EL2&0 regime first (`el2_host_mode`) and
//! the hypervisor (`super::hyp`) installs its own vectors.

core::arch::global_asm!(
    r#"
.section .text.boot, "ax"
.global _start
_start:
    mrs     x1, mpidr_el1
    and     x1, x1, #0xff
    cbnz    x1, 9f
    ldr     x1, =__stack0_top
    mov     sp, x1
    bl      el2_host_mode
    mov     x1, #(3 << 20)          // CPACR_EL1.FPEN: Rust code uses FP/SIMD registers
    msr     cpacr_el1, x1
    isb
    ldr     x1, =__bss_start        // zero .bss (aligned 8-byte stores: the MMU is off)
    ldr     x2, =__bss_end
1:  cmp     x1, x2
    b.hs    2f
    str     xzr, [x1], #8
    b       1b
2:  ldr     x1, =vectors
    msr     vbar_el1, x1
    isb
    bl      kmain
9:  wfe
    b       9b

// PSCI CPU_ON entry of the second core: x0 = its boot context (see mmu::SecondaryBoot),
// cleaned to memory by the boot core. Turn the MMU on before touching anything cacheable.
.global secondary_entry
secondary_entry:
    ldr     x1, [x0, #0]            // stack top
    mov     sp, x1
    bl      el2_host_mode
    mov     x1, #(3 << 20)
    msr     cpacr_el1, x1
    ldr     x1, =vectors
    msr     vbar_el1, x1
    ldr     x1, [x0, #8]
    msr     mair_el1, x1
    ldr     x1, [x0, #16]
    msr     tcr_el1, x1
    ldr     x1, [x0, #24]
    msr     ttbr0_el1, x1
    isb
    bl      flush_local_tlb
    ldr     x1, [x0, #32]
    msr     sctlr_el1, x1
    isb
    bl      secondary_main
3:  wfe
    b       3b

// Entered at EL2 (`-M virt,virtualization=on`): run the kernel in the EL2&0 regime of the
// virtualization host extensions (HCR_EL2.E2H, with RW for an AArch64 EL1), so that the
// *_EL1 register names used below reach the EL2 registers and the kernel's EL1 code runs
// unchanged; TGE stays clear, so EL1 is the guest's. At EL1: nothing. Clobbers x1.
el2_host_mode:
    mrs     x1, currentel
    cmp     x1, #(2 << 2)
    b.ne    1f
    mov     x1, #(1 << 31)          // HCR_EL2.RW
    orr     x1, x1, #(1 << 34)      // HCR_EL2.E2H
    msr     hcr_el2, x1
    isb
1:  ret

// Drops this core's translations of the regime it runs in: EL1&0 (`tlbi vmalle1`), or at
// EL2 the EL2&0 one (`tlbi alle2`; with TGE clear, `vmalle1` would name the guest's).
// Clobbers x1.
.global flush_local_tlb
flush_local_tlb:
    mrs     x1, currentel
    cmp     x1, #(2 << 2)
    b.eq    1f
    tlbi    vmalle1
    b       2f
1:  tlbi    alle2
2:  dsb     nsh
    isb
    ret

.section .text.vectors, "ax"
.balign 2048
vectors:
    .rept 4                         // current EL with SP_EL0: not used
    .balign 0x80
    b       unexpected_vector
    .endr
    .balign 0x80                    // current EL with SP_ELx, synchronous
    b       el1_sync_entry
    .rept 15
    .balign 0x80
    b       unexpected_vector
    .endr

el1_sync_entry:
    sub     sp, sp, #176
    stp     x0, x1, [sp, #0]
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x29, [sp, #144]
    str     x30, [sp, #160]
    mrs     x0, esr_el1
    mrs     x1, far_el1
    bl      el1_sync           // returns only if the fault was handled: retry the access
    ldp     x0, x1, [sp, #0]
    ldp     x2, x3, [sp, #16]
    ldp     x4, x5, [sp, #32]
    ldp     x6, x7, [sp, #48]
    ldp     x8, x9, [sp, #64]
    ldp     x10, x11, [sp, #80]
    ldp     x12, x13, [sp, #96]
    ldp     x14, x15, [sp, #112]
    ldp     x16, x17, [sp, #128]
    ldp     x18, x29, [sp, #144]
    ldr     x30, [sp, #160]
    add     sp, sp, #176
    eret

unexpected_vector:
    mrs     x0, esr_el1
    mrs     x1, far_el1
    mrs     x2, elr_el1
    bl      unexpected_exception
4:  b       4b
"#
);

unsafe extern "C" {
    /// The second core's PSCI entry point.
    pub fn secondary_entry();
}
