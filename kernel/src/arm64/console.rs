//! The PL011 UART of `-M virt` (output only) and the semihosting exit.

use core::fmt;

/// The PL011's data register; the flag register is 0x18 above it.
const UART: usize = 0x0900_0000;
const FR_TXFF: u32 = 1 << 5;

/// A writer to the UART.
pub struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        crate::write_crlf(s, put);
        Ok(())
    }
}

fn put(b: u8) {
    // SAFETY: the PL011 registers of the virt machine, identity-mapped as device memory
    // (or accessed with the MMU off); volatile, word-sized accesses as the device expects.
    unsafe {
        while core::ptr::read_volatile((UART + 0x18) as *const u32) & FR_TXFF != 0 {}
        core::ptr::write_volatile(UART as *mut u32, u32::from(b));
    }
}

/// Ends the run through semihosting `SYS_EXIT`: QEMU exits with `code`.
pub fn exit(code: u32) -> ! {
    // ADP_Stopped_ApplicationExit and the exit code (the AArch64 parameter block).
    let block: [u64; 2] = [0x20026, u64::from(code)];
    loop {
        // SAFETY: semihosting call 0x18 (SYS_EXIT) with a valid parameter block; QEMU runs
        // with -semihosting, so `hlt #0xf000` is the semihosting trap, not a halt.
        unsafe {
            core::arch::asm!("hlt #0xf000", in("x0") 0x18u64, in("x1") block.as_ptr(), options(nostack));
        }
    }
}
