//! The PL011 UART of `-M virt` (output, and input polled with a timeout) and the semihosting
//! exit.

use core::fmt;

/// The PL011's data register; the flag register is 0x18 above it.
const UART: usize = 0x0900_0000;
const FR_TXFF: u32 = 1 << 5;
const FR_RXFE: u32 = 1 << 4;

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

/// Waits for a byte from the UART (the host's answer on QEMU's stdin) for at most
/// `seconds` of the generic timer; returns whether one came.
pub fn wait_for_byte(seconds: u64) -> bool {
    let (freq, start): (u64, u64);
    // SAFETY: reads of the generic timer's frequency and virtual count, which EL1 may read.
    unsafe {
        core::arch::asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack));
        core::arch::asm!("isb; mrs {}, cntvct_el0", out(reg) start, options(nomem, nostack));
    }
    loop {
        // SAFETY: the PL011's flag and data registers, as in `put`.
        unsafe {
            if core::ptr::read_volatile((UART + 0x18) as *const u32) & FR_RXFE == 0 {
                let _ = core::ptr::read_volatile(UART as *const u32);
                return true;
            }
        }
        let now: u64;
        // SAFETY: as above.
        unsafe {
            core::arch::asm!("isb; mrs {}, cntvct_el0", out(reg) now, options(nomem, nostack))
        };
        if now.wrapping_sub(start) > seconds.saturating_mul(freq) {
            return false;
        }
        core::hint::spin_loop();
    }
}
