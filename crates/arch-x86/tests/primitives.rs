//! Every clearing primitive, at every length from 0 to 3 pages plus odd tails and every start
//! alignment, placed against `PROT_NONE` guard pages on both sides: every byte in range reads
//! back zero and no byte outside changes (an overrun into a guard page faults the test). The
//! primitives take any range: where theirs is not met (misaligned, not whole units, shorter
//! than one line) they clear with plain stores, so those ranges are exercised too; a line
//! loop started with a zero count would run 2^64 times and fault in the guard page.
#![cfg(all(target_arch = "x86_64", not(miri)))]

#[path = "support/bytes.rs"]
mod bytes;
#[path = "support/guarded.rs"]
mod guarded;

use arch_x86::clear;
use arch_x86::cpu;
use guarded::exercise;

const FENCE: &dyn Fn() = &clear::sfence;

#[test]
fn rep_stosb() {
    exercise(
        "rep stosb",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction.
            unsafe { clear::rep_stosb(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn rep_stosq() {
    exercise(
        "rep stosq",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction.
            unsafe { clear::rep_stosq(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn unrolled_stores() {
    exercise(
        "unrolled stores",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction.
            unsafe { clear::unrolled_stores(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn movnti() {
    exercise(
        "movnti",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction.
            unsafe { clear::movnti(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn avx2_stream() {
    if !cpu::features().avx2 {
        println!("avx2 stream: skipped, this CPU (or its OS) has no usable AVX2");
        return;
    }
    exercise(
        "avx2 stream",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction.
            unsafe { clear::avx2_stream(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn avx512_stream() {
    if !cpu::features().avx512f {
        println!("avx512 stream: skipped, this CPU (or its OS) has no usable AVX-512F");
        return;
    }
    exercise(
        "avx512 stream",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction.
            unsafe { clear::avx512_stream(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn clzero() {
    if !cpu::features().clzero {
        println!(
            "clzero: skipped, this CPU has no CLZERO (AMD only; QEMU's TCG does not emulate it)"
        );
        return;
    }
    exercise(
        "clzero",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction.
            unsafe { clear::clzero(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn avx2_stores() {
    if !cpu::features().avx2 {
        println!("avx2 stores: skipped, this CPU (or its OS) has no usable AVX2");
        return;
    }
    exercise(
        "avx2 stores",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction; a test thread may use vector registers.
            unsafe { clear::avx2_stores(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn avx512_stores() {
    if !cpu::features().avx512f {
        println!("avx512 stores: skipped, this CPU (or its OS) has no usable AVX-512F");
        return;
    }
    exercise(
        "avx512 stores",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping, on a CPU that
            // has the instruction; a test thread may use vector registers.
            unsafe { clear::avx512_stores(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

/// Flushing the caches changes no byte, whatever the range's alignment and length (a partial
/// first and last line included).
#[test]
fn flush_lines_keeps_the_data() {
    let data: Vec<u8> = (0..3 * 4096 + 17).map(|i| (i * 7 + 3) as u8).collect();
    for (start, end) in [(0, data.len()), (5, 70), (63, 64), (1, 1), (100, 4000)] {
        clear::flush_lines(&data[start..end]);
        assert!(
            data.iter()
                .enumerate()
                .all(|(i, &b)| b == (i * 7 + 3) as u8)
        );
    }
}
