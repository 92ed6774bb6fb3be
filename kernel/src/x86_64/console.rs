//! The 16550 UART at COM1 (output only) and QEMU's `isa-debug-exit` device.

use core::fmt;

/// COM1's data register; the line status register is 5 above it.
const COM1: u16 = 0x3f8;
/// Line status: the transmit holding register is empty.
const LSR_THRE: u8 = 1 << 5;
/// `-device isa-debug-exit,iobase=0xf4,iosize=0x04`: QEMU exits with `(value << 1) | 1`.
const DEBUG_EXIT: u16 = 0xf4;

/// A writer to COM1.
pub struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        crate::write_crlf(s, put);
        Ok(())
    }
}

fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: a port read of the UART's registers, which has no effect on memory.
    unsafe { core::arch::asm!("in al, dx", out("al") v, in("dx") port, options(nomem, nostack)) };
    v
}

fn outb(port: u16, v: u8) {
    // SAFETY: a port write to the UART, which has no effect on memory.
    unsafe { core::arch::asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack)) };
}

fn put(b: u8) {
    while inb(COM1 + 5) & LSR_THRE == 0 {}
    outb(COM1, b);
}

/// Ends the run through `isa-debug-exit`: QEMU exits with `(code << 1) | 1`, so 1 for
/// success (code 0) and `2 * step + 1` for the number of a failed step.
pub fn exit(code: u32) -> ! {
    loop {
        // SAFETY: a port write to QEMU's exit device; without the device nothing happens and
        // the loop halts.
        unsafe {
            core::arch::asm!("out dx, eax", in("dx") DEBUG_EXIT, in("eax") code, options(nomem, nostack));
            core::arch::asm!("cli; hlt", options(nomem, nostack));
        }
    }
}
