//! The exception vectors 0-31: each stub records its vector (and a 0 where the CPU pushes no
//! error code) and calls Rust, which prints the vector, error code, RIP and CR2 and ends the
//! run with the `Exception` step. The kernel never runs with interrupts on.

use core::arch::{asm, global_asm};

use super::Machine;
use crate::steps::{Step, fail};

global_asm!(
    r#"
.section .text
.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
exception_\v:
.if (\v == 8) || ((\v >= 10) && (\v <= 14)) || (\v == 17) || (\v == 21) || (\v == 29) || (\v == 30)
.else
    push 0
.endif
    push \v
    jmp exception_common
.endr
exception_common:
    mov rdi, [rsp]
    mov rsi, [rsp + 8]
    mov rdx, [rsp + 16]
    and rsp, -16
    call x86_exception
2:  hlt
    jmp 2b

.section .rodata
.p2align 3
.global exception_stubs
exception_stubs:
.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .quad exception_\v
.endr
"#
);

unsafe extern "C" {
    static exception_stubs: [u64; 32];
}

/// One 16-byte interrupt gate.
#[derive(Clone, Copy)]
#[repr(C)]
struct Gate {
    low: u64,
    high: u64,
}

/// The descriptor table (static, so it outlives `lidt`).
static IDT: spin::Once<[Gate; 32]> = spin::Once::new();

/// Loads an IDT whose 32 exception gates lead to [`x86_exception`].
pub fn load() {
    let idt = IDT.call_once(|| {
        // SAFETY: the table of stub addresses the assembly above defines.
        let stubs = unsafe { &*core::ptr::addr_of!(exception_stubs) };
        let mut idt = [Gate { low: 0, high: 0 }; 32];
        for (gate, &addr) in idt.iter_mut().zip(stubs) {
            // Offset 15:0, selector 0x08, present 64-bit interrupt gate (0x8e), offset 31:16;
            // then offset 63:32.
            gate.low =
                (addr & 0xffff) | (0x08 << 16) | (0x8e << 40) | ((addr >> 16) & 0xffff) << 48;
            gate.high = addr >> 32;
        }
        idt
    });
    let pointer: [u16; 5] = {
        let base = idt.as_ptr() as u64;
        let limit = (core::mem::size_of::<[Gate; 32]>() - 1) as u16;
        [
            limit,
            base as u16,
            (base >> 16) as u16,
            (base >> 32) as u16,
            (base >> 48) as u16,
        ]
    };
    // SAFETY: the pointer names a static table of valid gates for the kernel's code segment.
    unsafe { asm!("lidt [{}]", in(reg) pointer.as_ptr(), options(readonly, nostack)) };
}

#[unsafe(no_mangle)]
extern "C" fn x86_exception(vector: u64, error: u64, rip: u64) -> ! {
    let cr2: u64;
    // SAFETY: reading CR2 has no side effects.
    unsafe { asm!("mov {}, cr2", out(reg) cr2, options(nomem, nostack)) };
    fail::<Machine>(
        Step::Exception,
        format_args!("exception {vector}, error code {error:#x}, RIP {rip:#x}, CR2 {cr2:#x}"),
    )
}
