//! The memsets a clear is compared with: glibc's (what `core::ptr::write_bytes` calls in a
//! hosted program) and compiler-builtins' (what it calls in a `no_std` x86_64 kernel, built by
//! `build.rs` for `x86_64-unknown-none` and linked under a private name).

/// A function that zeroes `len` bytes at `dst`.
pub type ZeroFn = unsafe fn(dst: *mut u8, len: usize);

/// glibc's memset with 0, through `core::ptr::write_bytes`.
///
/// # Safety
/// `dst..dst + len` writable and not aliased.
pub unsafe fn glibc_zero(dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::write_bytes(dst, 0, len) }
}

#[cfg(builtins_memset)]
unsafe extern "C" {
    /// compiler-builtins' memset with 0, from `builtins/zero.rs`.
    fn zc_builtins_zero(dst: *mut u8, len: usize);
}

#[cfg(builtins_memset)]
unsafe fn builtins_zero(dst: *mut u8, len: usize) {
    // SAFETY: the caller's contract; the function only writes that range.
    unsafe { zc_builtins_zero(dst, len) }
}

/// compiler-builtins' memset with 0, or why `build.rs` could not build it here.
///
/// # Errors
/// The reason the peer is missing (another architecture, a missing target or tool).
pub fn compiler_builtins_zero() -> Result<ZeroFn, String> {
    #[cfg(builtins_memset)]
    return Ok(builtins_zero);
    #[cfg(not(builtins_memset))]
    return Err(env!("BENCHES_BUILTINS_MEMSET").to_string());
}
