//! The memset a `no_std` x86_64 kernel links: built by `benches/build.rs` for
//! `x86_64-unknown-none`, where `core::ptr::write_bytes` becomes a call to compiler-builtins'
//! `memset` (its `mem` feature is on for that target). Only `zc_builtins_zero` stays global
//! in the object the report links, so the host's own `memset` (glibc's) is untouched.
#![no_std]

/// Zeroes `len` bytes at `dst` with compiler-builtins' `memset`.
///
/// # Safety
/// `dst..dst + len` must be writable and not aliased.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn zc_builtins_zero(dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { core::ptr::write_bytes(dst, 0, len) }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
