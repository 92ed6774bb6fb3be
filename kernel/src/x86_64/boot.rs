//! The PVH entry (QEMU's `-kernel` with the Xen `PHYS32_ENTRY` note): 32-bit protected mode,
//! paging off, `ebx` = the `hvm_start_info`. It identity-maps the first GiB with 2 MiB pages,
//! enters long mode (PAE, EFER.LME and NXE, CR0.PG and WP), loads a flat 64-bit GDT, zeroes
//! `.bss` and calls `kmain(start_info)` on the boot stack.

core::arch::global_asm!(
    r#"
.section .note.Xen, "a"
.p2align 2
    .long 4                     // name size: "Xen\0"
    .long 4                     // descriptor size
    .long 18                    // XEN_ELFNOTE_PHYS32_ENTRY
    .asciz "Xen"
    .p2align 2
    .long pvh_start
    .p2align 2

.section .boot_tables, "aw", @nobits
.p2align 12
boot_pml4: .skip 4096
boot_pdpt: .skip 4096
boot_pd:   .skip 4096

.section .rodata
.p2align 3
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff    // 0x08: 64-bit code, ring 0
    .quad 0x00cf92000000ffff    // 0x10: data, ring 0
boot_gdt_end:
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .quad boot_gdt

.section .text.boot, "ax"
.code32
.global pvh_start
pvh_start:
    cli
    cld
    mov esi, ebx
    mov edi, offset boot_pml4
    xor eax, eax
    mov ecx, 3 * 1024
    rep stosd
    mov eax, offset boot_pdpt
    or eax, 3
    mov dword ptr [boot_pml4], eax
    mov eax, offset boot_pd
    or eax, 3
    mov dword ptr [boot_pdpt], eax
    mov edi, offset boot_pd
    mov eax, 0x83               // present, writable, 2 MiB page
    mov ecx, 512
2:  mov dword ptr [edi], eax
    mov dword ptr [edi + 4], 0
    add eax, 0x200000
    add edi, 8
    dec ecx
    jnz 2b
    mov eax, cr4
    or eax, 1 << 5              // PAE
    mov cr4, eax
    mov eax, offset boot_pml4
    mov cr3, eax
    mov ecx, 0xc0000080         // EFER: long mode and no-execute
    rdmsr
    or eax, (1 << 8) | (1 << 11)
    wrmsr
    mov eax, cr0
    or eax, (1 << 31) | (1 << 16) | 1   // PG, WP, PE
    mov cr0, eax
    lgdt [boot_gdt_ptr]
    mov eax, offset long_mode
    push 0x08
    push eax
    retf

.code64
long_mode:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    mov fs, ax
    mov gs, ax
    mov rsp, offset __stack0_top
    mov rdi, offset __bss_start
    mov rcx, offset __bss_end
    sub rcx, rdi
    xor eax, eax
    rep stosb
    mov edi, esi
    call kmain
3:  hlt
    jmp 3b
"#
);
