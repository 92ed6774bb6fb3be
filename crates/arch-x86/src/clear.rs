//! The x86_64 clearing primitives: each zeroes `len` bytes at `dst` with one instruction
//! sequence, so a caller can clear a whole extent (many pages) per call.
//!
//! Temporal: [`rep_stosb`], [`rep_stosq`], [`unrolled_stores`], `avx2_stores`,
//! `avx512_stores`; the stored lines stay in the cache, which is what the next reader wants
//! for a small extent. Non-temporal (streaming):
//! [`movnti`], `avx2_stream`, `avx512_stream`, [`clzero`]; they bypass the cache, which
//! wins once the extent is larger than the cache, but they are weakly ordered: **the caller
//! must execute [`sfence`] before the memory is published** to another CPU or to a device.
//! The four vector loops exist only on targets with SSE (not on the soft-float
//! `x86_64-unknown-none`, whose kernels do not save vector state).
//!
//! Each primitive states the alignment and length multiple it needs as a `const`
//! (`*_ALIGN`, `*_MULTIPLE`) and checks them in every build: a range that does not meet them
//! (a misaligned start, a length that is not whole units, `0 < len < 64` for the line loops)
//! is cleared with plain stores (`write_bytes`) instead, so no instruction ever writes
//! outside `dst..dst + len` or loops on a zero count. Under Miri every primitive runs
//! `write_bytes`.

#[cfg(not(miri))]
use core::arch::asm;

/// Bytes a cache line holds on every x86_64 CPU this crate supports (and CLZERO's unit).
pub const LINE: usize = 64;

/// [`rep_stosq`] needs `dst` aligned to 8 and `len` a multiple of 8.
pub const STOSQ_MULTIPLE: usize = 8;
/// [`unrolled_stores`], [`movnti`], the vector loops and [`clzero`] clear whole 64-byte
/// lines: `len` must be a multiple of 64.
pub const LINE_MULTIPLE: usize = LINE;
/// [`unrolled_stores`] and [`movnti`] store 8-byte words: `dst` aligned to 8.
pub const WORD_ALIGN: usize = 8;
/// `avx2_stream` and `avx2_stores` (`vmovntdq`/`vmovdqa ymm`) need `dst` aligned to 32.
pub const AVX2_ALIGN: usize = 32;
/// `avx512_stream`, `avx512_stores` (`vmovntdq`/`vmovdqa64 zmm`) and [`clzero`] need `dst`
/// aligned to 64.
pub const AVX512_ALIGN: usize = 64;
/// [`clzero`] zeroes the whole line holding its address: `dst` aligned to 64.
pub const CLZERO_ALIGN: usize = LINE;

fn aligned(dst: *mut u8, align: usize) -> bool {
    dst.addr().is_multiple_of(align)
}

/// How many whole units of `unit` bytes `len` is, when `dst` is aligned to `align`, `len` a
/// multiple of `unit` and at least one unit; `None` otherwise (the caller then clears with
/// [`plain`]).
fn units(dst: *mut u8, len: usize, align: usize, unit: usize) -> Option<usize> {
    (aligned(dst, align) && len.is_multiple_of(unit) && len >= unit).then_some(len / unit)
}

/// The fallback of every primitive: zeroes `dst..dst + len` with `write_bytes`.
///
/// # Safety
/// `dst..dst + len` valid for writes and not accessed concurrently.
unsafe fn plain(dst: *mut u8, len: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { core::ptr::write_bytes(dst, 0, len) }
}

/// Zeroes `len` bytes at `dst` with `rep stosb` (fast with ERMS; the merged kernel's choice).
///
/// # Safety
/// `dst..dst + len` must be valid for writes and not accessed concurrently. Any alignment and
/// length (including 0) is allowed.
pub unsafe fn rep_stosb(dst: *mut u8, len: usize) {
    #[cfg(not(miri))]
    // SAFETY: the caller guarantees the range is writable; DF is clear per the ABI, so the
    // string store runs upward from dst for exactly len bytes.
    unsafe {
        asm!("rep stosb", inout("rcx") len => _, inout("rdi") dst => _, in("al") 0u8,
            options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    // SAFETY: the caller guarantees the range is writable.
    unsafe {
        core::ptr::write_bytes(dst, 0, len);
    }
}

/// Zeroes `len` bytes at `dst` with `rep stosq`, 8 bytes a step (the kernel's REP_GOOD
/// variant, also the one some hypervisors leave in place).
///
/// # Safety
/// `dst..dst + len` must be valid for writes and not accessed concurrently. With `dst`
/// aligned to 8 and `len` a multiple of [`STOSQ_MULTIPLE`] it runs `rep stosq`; otherwise
/// plain stores (`write_bytes`).
pub unsafe fn rep_stosq(dst: *mut u8, len: usize) {
    let Some(quads) = units(dst, len, STOSQ_MULTIPLE, STOSQ_MULTIPLE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller guarantees the range is writable; `quads` whole quadwords are
    // exactly len bytes from dst; DF is clear per the ABI.
    unsafe {
        asm!("rep stosq", inout("rcx") quads => _, inout("rdi") dst => _, in("rax") 0u64,
            options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    {
        let _ = quads;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Zeroes `len` bytes at `dst` with an unrolled loop of eight 8-byte stores per 64-byte line
/// (the kernel's `clear_page_orig`, for CPUs with neither ERMS nor REP_GOOD).
///
/// # Safety
/// `dst..dst + len` must be valid for writes and not accessed concurrently. Runs the
/// primitive when `dst` is aligned to [`WORD_ALIGN`] and `len` is a non-zero multiple of
/// [`LINE_MULTIPLE`]; otherwise plain stores (`write_bytes`).
pub unsafe fn unrolled_stores(dst: *mut u8, len: usize) {
    let Some(lines) = units(dst, len, WORD_ALIGN, LINE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller guarantees dst..dst + len is writable and `units` checked that it
    // is `lines` >= 1 whole lines from an 8-aligned dst: the loop stores exactly those and
    // stops when rcx, starting at `lines`, reaches zero.
    unsafe {
        asm!(
            "2:",
            "mov qword ptr [rdi], rax",
            "mov qword ptr [rdi + 8], rax",
            "mov qword ptr [rdi + 16], rax",
            "mov qword ptr [rdi + 24], rax",
            "mov qword ptr [rdi + 32], rax",
            "mov qword ptr [rdi + 40], rax",
            "mov qword ptr [rdi + 48], rax",
            "mov qword ptr [rdi + 56], rax",
            "add rdi, 64",
            "dec rcx",
            "jnz 2b",
            inout("rcx") lines => _, inout("rdi") dst => _, in("rax") 0u64,
            options(nostack),
        );
    }
    #[cfg(miri)]
    {
        let _ = lines;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Zeroes `len` bytes at `dst` with `movnti`, eight non-temporal 8-byte stores per line
/// (the 2018 "clear 1G pages with streaming stores" proposal).
///
/// Weakly ordered: execute [`sfence`] before the memory is handed to anyone else.
///
/// # Safety
/// `dst..dst + len` must be valid for writes and not accessed concurrently. Runs the
/// primitive when `dst` is aligned to [`WORD_ALIGN`] and `len` is a non-zero multiple of
/// [`LINE_MULTIPLE`]; otherwise plain stores (`write_bytes`). The caller fences.
pub unsafe fn movnti(dst: *mut u8, len: usize) {
    let Some(lines) = units(dst, len, WORD_ALIGN, LINE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: as for `unrolled_stores`; movnti is SSE2, part of the x86_64 baseline.
    unsafe {
        asm!(
            "2:",
            "movnti qword ptr [rdi], rax",
            "movnti qword ptr [rdi + 8], rax",
            "movnti qword ptr [rdi + 16], rax",
            "movnti qword ptr [rdi + 24], rax",
            "movnti qword ptr [rdi + 32], rax",
            "movnti qword ptr [rdi + 40], rax",
            "movnti qword ptr [rdi + 48], rax",
            "movnti qword ptr [rdi + 56], rax",
            "add rdi, 64",
            "dec rcx",
            "jnz 2b",
            inout("rcx") lines => _, inout("rdi") dst => _, in("rax") 0u64,
            options(nostack),
        );
    }
    #[cfg(miri)]
    {
        let _ = lines;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// The AVX2 line loop: `$store` (`vmovntdq` or `vmovdqa`) of a zeroed YMM register twice per
/// 64-byte line, `$lines` lines from `$dst`, then `vzeroupper` so that SSE code after it pays
/// no transition penalty. The caller checks AVX2, a 32-aligned `$dst` and `$lines >= 1`.
#[cfg(all(target_feature = "sse2", not(miri)))]
macro_rules! ymm_line_loop {
    ($store:literal, $dst:expr, $lines:expr) => {
        asm!(
            "vpxor xmm0, xmm0, xmm0",
            "2:",
            concat!($store, " ymmword ptr [rdi], ymm0"),
            concat!($store, " ymmword ptr [rdi + 32], ymm0"),
            "add rdi, 64",
            "dec rcx",
            "jnz 2b",
            "vzeroupper",
            inout("rcx") $lines => _, inout("rdi") $dst => _,
            // vzeroupper clears the upper halves of ymm0-15: all are clobbered.
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _, options(nostack),
        )
    };
}

/// The AVX-512 line loop: `$store` (`vmovntdq` or `vmovdqa64`) of a zeroed ZMM register once
/// per 64-byte line, `$lines` lines from `$dst`, then `vzeroupper`: four lines per iteration
/// while at least four remain (with one line per iteration a cache-hot 4 KiB page cleared
/// about 7% slower than glibc's memset), then one line per iteration. The caller checks
/// AVX-512F, a 64-aligned `$dst` and `$lines >= 1`.
#[cfg(all(target_feature = "sse2", not(miri)))]
macro_rules! zmm_line_loop {
    ($store:literal, $dst:expr, $lines:expr) => {
        asm!(
            "vpxord zmm0, zmm0, zmm0",
            // rcx: lines left; rdx: lines past the last whole group of four.
            "mov rdx, rcx",
            "and rdx, 3",
            "shr rcx, 2",
            "jz 3f",
            "2:",
            concat!($store, " zmmword ptr [rdi], zmm0"),
            concat!($store, " zmmword ptr [rdi + 64], zmm0"),
            concat!($store, " zmmword ptr [rdi + 128], zmm0"),
            concat!($store, " zmmword ptr [rdi + 192], zmm0"),
            "add rdi, 256",
            "dec rcx",
            "jnz 2b",
            "3:",
            "test rdx, rdx",
            "jz 5f",
            "4:",
            concat!($store, " zmmword ptr [rdi], zmm0"),
            "add rdi, 64",
            "dec rdx",
            "jnz 4b",
            "5:",
            "vzeroupper",
            inout("rcx") $lines => _, inout("rdi") $dst => _, out("rdx") _,
            // vzeroupper clears bits 128 and up of zmm0-15: all are clobbered.
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _, out("zmm14") _, out("zmm15") _, options(nostack),
        )
    };
}

/// Zeroes `len` bytes at `dst` with AVX2 streaming stores (`vmovntdq`, two 32-byte stores per
/// line).
///
/// Weakly ordered: execute [`sfence`] before the memory is handed to anyone else.
///
/// Compiled only where SSE is enabled (hosted targets): a soft-float kernel target such as
/// `x86_64-unknown-none` does not save vector state, so it must not touch vector registers.
///
/// # Safety
/// The CPU must support AVX2 with YMM state enabled (`cpu::features().avx2`).
/// `dst..dst + len` must be valid for writes and not accessed concurrently. Runs the
/// primitive when `dst` is aligned to [`AVX2_ALIGN`] and `len` is a non-zero multiple of
/// [`LINE_MULTIPLE`]; otherwise plain stores (`write_bytes`). The caller fences.
#[cfg(target_feature = "sse2")]
#[target_feature(enable = "avx2")]
pub unsafe fn avx2_stream(dst: *mut u8, len: usize) {
    let Some(lines) = units(dst, len, AVX2_ALIGN, LINE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller checked AVX2; `units` checked that dst is 32-aligned as vmovntdq
    // requires and that the writable range is `lines` >= 1 whole lines, so the loop, from
    // rcx = lines down to zero, stores exactly those.
    unsafe {
        ymm_line_loop!("vmovntdq", dst, lines);
    }
    #[cfg(miri)]
    {
        let _ = lines;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Zeroes `len` bytes at `dst` with AVX-512 streaming stores (`vmovntdq zmm`, one per line).
///
/// Weakly ordered: execute [`sfence`] before the memory is handed to anyone else.
///
/// Compiled only where SSE is enabled, as [`avx2_stream`].
///
/// # Safety
/// The CPU must support AVX-512F with ZMM state enabled (`cpu::features().avx512f`).
/// `dst..dst + len` must be valid for writes and not accessed concurrently. Runs the
/// primitive when `dst` is aligned to [`AVX512_ALIGN`] and `len` is a non-zero multiple of
/// [`LINE_MULTIPLE`]; otherwise plain stores (`write_bytes`). The caller fences.
#[cfg(target_feature = "sse2")]
#[target_feature(enable = "avx512f")]
pub unsafe fn avx512_stream(dst: *mut u8, len: usize) {
    let Some(lines) = units(dst, len, AVX512_ALIGN, LINE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller checked AVX-512F; `units` checked that dst is 64-aligned as
    // vmovntdq zmm requires and that the writable range is `lines` >= 1 whole lines, so the
    // loop stores exactly those: lines / 4 groups of four lines, then lines % 4 single lines.
    unsafe {
        zmm_line_loop!("vmovntdq", dst, lines);
    }
    #[cfg(miri)]
    {
        let _ = lines;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Zeroes `len` bytes at `dst` with AVX2 temporal stores (`vmovdqa ymm`, two per line): the
/// stored lines stay in the cache, like `rep stosb`'s, without its start-up cost on small
/// cache-resident extents (what glibc's memset does below its `rep stosb` threshold).
///
/// Compiled only where SSE is enabled, as [`avx2_stream`].
///
/// # Safety
/// The CPU must support AVX2 with YMM state enabled (`cpu::features().avx2`), and the
/// caller's execution context must allow vector registers (a kernel saves the interrupted
/// context's vector state first). `dst..dst + len` must be valid for writes and not accessed
/// concurrently. Runs the primitive when `dst` is aligned to [`AVX2_ALIGN`] and `len` is a
/// non-zero multiple of [`LINE_MULTIPLE`]; otherwise plain stores (`write_bytes`).
#[cfg(target_feature = "sse2")]
#[target_feature(enable = "avx2")]
pub unsafe fn avx2_stores(dst: *mut u8, len: usize) {
    let Some(lines) = units(dst, len, AVX2_ALIGN, LINE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller checked AVX2; `units` checked that dst is 32-aligned as vmovdqa
    // requires and that the writable range is `lines` >= 1 whole lines, so the loop, from
    // rcx = lines down to zero, stores exactly those.
    unsafe {
        ymm_line_loop!("vmovdqa", dst, lines);
    }
    #[cfg(miri)]
    {
        let _ = lines;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Zeroes `len` bytes at `dst` with AVX-512 temporal stores (`vmovdqa64 zmm`, one per line).
///
/// Compiled only where SSE is enabled, as [`avx2_stream`].
///
/// # Safety
/// The CPU must support AVX-512F with ZMM state enabled (`cpu::features().avx512f`), and the
/// caller's execution context must allow vector registers. `dst..dst + len` must be valid for
/// writes and not accessed concurrently. Runs the primitive when `dst` is aligned to
/// [`AVX512_ALIGN`] and `len` is a non-zero multiple of [`LINE_MULTIPLE`]; otherwise plain
/// stores (`write_bytes`).
#[cfg(target_feature = "sse2")]
#[target_feature(enable = "avx512f")]
pub unsafe fn avx512_stores(dst: *mut u8, len: usize) {
    let Some(lines) = units(dst, len, AVX512_ALIGN, LINE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller checked AVX-512F; `units` checked that dst is 64-aligned as
    // vmovdqa64 zmm requires and that the writable range is `lines` >= 1 whole lines, so the
    // loop stores exactly those: lines / 4 groups of four lines, then lines % 4 single lines.
    unsafe {
        zmm_line_loop!("vmovdqa64", dst, lines);
    }
    #[cfg(miri)]
    {
        let _ = lines;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Zeroes `len` bytes at `dst` with AMD's CLZERO, one 64-byte line per instruction.
///
/// Weakly ordered: execute [`sfence`] before the memory is handed to anyone else.
///
/// # Safety
/// The CPU must support CLZERO (`cpu::features().clzero`). `dst..dst + len` must be valid
/// for writes and not accessed concurrently. Runs the primitive when `dst` is aligned to
/// [`CLZERO_ALIGN`] and `len` is a non-zero multiple of [`LINE_MULTIPLE`]; otherwise plain
/// stores (`write_bytes`). The caller fences.
pub unsafe fn clzero(dst: *mut u8, len: usize) {
    let Some(lines) = units(dst, len, CLZERO_ALIGN, LINE) else {
        // SAFETY: the caller guarantees the range is writable.
        return unsafe { plain(dst, len) };
    };
    #[cfg(not(miri))]
    // SAFETY: the caller checked CLZERO; `units` checked that dst is line-aligned (CLZERO
    // zeroes the whole line holding its address) and the range `lines` >= 1 whole lines, so
    // rax walks exactly those lines, one per instruction, from rcx = lines down to zero.
    unsafe {
        asm!(
            "2:",
            "clzero",
            "add rax, 64",
            "dec rcx",
            "jnz 2b",
            inout("rcx") lines => _, inout("rax") dst => _,
            options(nostack),
        );
    }
    #[cfg(miri)]
    {
        let _ = lines;
        // SAFETY: the caller guarantees the range is writable.
        unsafe { plain(dst, len) }
    }
}

/// Orders every earlier store, non-temporal ones included, before every later store: the
/// fence the streaming primitives leave to their caller.
pub fn sfence() {
    #[cfg(not(miri))]
    // SAFETY: sfence has no operands and no preconditions.
    unsafe {
        asm!("sfence", options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// Writes back and invalidates every cache line holding a byte of `buf` (`clflushopt` each
/// line where the CPU has it, else `clflush`, then `mfence`, which orders both): afterwards
/// the range is in no cache and the next access to each line goes to memory. What makes
/// memory cold for a measurement (a clear of memory not touched in a while). `clflush` is in
/// every x86_64 CPU (SSE2); neither changes data, so a shared borrow is enough.
pub fn flush_lines(buf: &[u8]) {
    #[cfg(not(miri))]
    {
        let start = buf.as_ptr().addr() & !(LINE - 1);
        let end = buf.as_ptr().addr().saturating_add(buf.len());
        let opt = crate::cpu::features().clflushopt;
        let mut line = start;
        while line < end {
            // SAFETY: `line` is in a cache line holding a byte of `buf` (at most LINE - 1
            // bytes before buf's first byte, then stepping by LINE below its end), so it is
            // mapped and readable, which is all either flush needs; neither changes data;
            // `clflushopt` only where CPUID reports it.
            unsafe {
                if opt {
                    asm!("clflushopt [{}]", in(reg) line, options(nostack, preserves_flags));
                } else {
                    asm!("clflush [{}]", in(reg) line, options(nostack, preserves_flags));
                }
            }
            line += LINE;
        }
        // SAFETY: mfence has no operands and no preconditions.
        unsafe { asm!("mfence", options(nostack, preserves_flags)) };
    }
    #[cfg(miri)]
    {
        // Caches are invisible to the abstract machine: nothing to do.
        let _ = buf;
    }
}
