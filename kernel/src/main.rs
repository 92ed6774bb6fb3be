//! Bare-metal kernels that run zero-core, buddy-sim and pte-batch against a live MMU: an arm64
//! one under `qemu-system-aarch64` (emulated) and an x86_64 one under QEMU with KVM (native
//! speed) where the host has it. See the repository README, section "Embedding".
//!
//! One crate, built for `aarch64-unknown-none` or `x86_64-unknown-none`: the target picks the
//! platform module (boot, MMU, console and the steps that run there).
#![no_std]
#![no_main]

/// Prints a line on the platform's console.
macro_rules! println {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::platform::console::Console, $($arg)*);
    }};
}

/// Prints on the platform's console, without a newline.
#[cfg_attr(target_arch = "aarch64", allow(unused_macros))]
macro_rules! print {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = write!($crate::platform::console::Console, $($arg)*);
    }};
}

/// Sends `s` to a serial device byte by byte through `put`, each newline as CR LF.
fn write_crlf(s: &str, put: fn(u8)) {
    for b in s.bytes() {
        if b == b'\n' {
            put(b'\r');
        }
        put(b);
    }
}

#[cfg(target_arch = "aarch64")]
#[path = "arm64/mod.rs"]
mod platform;

#[cfg(target_arch = "x86_64")]
#[path = "x86_64/mod.rs"]
mod platform;

mod steps;

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    steps::fail::<platform::Machine>(steps::Step::Panic, format_args!("{info}"))
}
