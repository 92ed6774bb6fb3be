//! Every clearing primitive, at every length and alignment it allows from 0 to 3 pages plus
//! odd tails, placed against `PROT_NONE` guard pages on both sides: every byte in range reads
//! back zero and no byte outside changes (an overrun into a guard page faults the test).
#![cfg(all(target_arch = "x86_64", not(miri)))]

use arch_x86::clear::{self, AVX2_ALIGN, AVX512_ALIGN, CLZERO_ALIGN, LINE_MULTIPLE, WORD_ALIGN};
use arch_x86::cpu;

const PAGE: usize = 4096;
const POISON: u8 = 0xA5;
/// Room for 3 pages, a tail and the largest misalignment.
const USABLE_PAGES: usize = 5;

/// An anonymous mapping of `USABLE_PAGES` pages with a `PROT_NONE` page on each side.
struct Guarded {
    base: *mut u8,
}

impl Guarded {
    fn new() -> Self {
        let total = (USABLE_PAGES + 2) * PAGE;
        // SAFETY: a fresh private anonymous mapping; we own it until Drop.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base.cast::<u8>();
        // SAFETY: both pages lie inside the mapping just made.
        unsafe {
            assert_eq!(libc::mprotect(base.cast(), PAGE, libc::PROT_NONE), 0);
            let tail = base.add((USABLE_PAGES + 1) * PAGE);
            assert_eq!(libc::mprotect(tail.cast(), PAGE, libc::PROT_NONE), 0);
        }
        Self { base }
    }

    fn usable(&mut self) -> &mut [u8] {
        // SAFETY: the middle USABLE_PAGES pages are mapped read/write and owned by self.
        unsafe { core::slice::from_raw_parts_mut(self.base.add(PAGE), USABLE_PAGES * PAGE) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in new().
        unsafe { libc::munmap(self.base.cast(), (USABLE_PAGES + 2) * PAGE) };
    }
}

type Primitive = unsafe fn(*mut u8, usize);

/// Clears `[offset, offset + len)` of a poisoned usable area and checks every byte.
fn check_one(area: &mut Guarded, name: &str, clear: Primitive, offset: usize, len: usize) {
    let usable = area.usable();
    usable.fill(POISON);
    let end = offset + len;
    assert!(end <= usable.len());
    // SAFETY: the range lies inside the usable pages; the caller of check_one passes only
    // alignments and lengths the primitive allows, on a CPU that has it.
    unsafe { clear(usable.as_mut_ptr().add(offset), len) };
    clear::sfence();
    if let Some(i) = usable[offset..end].iter().position(|&b| b != 0) {
        panic!(
            "{name}: offset {offset} len {len}: byte {} not zero",
            offset + i
        );
    }
    let outside = usable[..offset].iter().chain(&usable[end..]);
    assert!(
        outside.into_iter().all(|&b| b == POISON),
        "{name}: offset {offset} len {len}: a byte outside the range changed"
    );
}

/// Lengths from 0 to 3 pages, plus tails, that are multiples of `multiple`.
fn lengths(multiple: usize) -> Vec<usize> {
    let tails = [0, 1, 7, 8, 63, 64, 65, 128, 4032, 4095];
    let mut out = Vec::new();
    for pages in 0..=3 {
        for tail in tails {
            let len = pages * PAGE + tail;
            if len.is_multiple_of(multiple) && !out.contains(&len) {
                out.push(len);
            }
        }
    }
    out
}

fn exercise(name: &str, clear: Primitive, align: usize, multiple: usize) {
    let mut area = Guarded::new();
    let span = USABLE_PAGES * PAGE;
    let mut cases = 0;
    for len in lengths(multiple) {
        // Every allowed misalignment within a line, and a few within the page.
        let offsets = (0..128).step_by(align).chain([PAGE - align.max(64), PAGE]);
        for offset in offsets {
            check_one(&mut area, name, clear, offset, len);
            cases += 1;
        }
        // Flush against the trailing guard page: an overrun faults.
        let start = span - len;
        if start.is_multiple_of(align) {
            check_one(&mut area, name, clear, start, len);
            cases += 1;
        }
    }
    println!("{name}: {cases} guarded cases passed");
}

#[test]
fn rep_stosb() {
    exercise("rep stosb", clear::rep_stosb, 1, 1);
}

#[test]
fn rep_stosq() {
    exercise("rep stosq", clear::rep_stosq, 8, 8);
}

#[test]
fn unrolled_stores() {
    exercise(
        "unrolled stores",
        clear::unrolled_stores,
        WORD_ALIGN,
        LINE_MULTIPLE,
    );
}

#[test]
fn movnti() {
    exercise("movnti", clear::movnti, WORD_ALIGN, LINE_MULTIPLE);
}

#[test]
fn avx2_stream() {
    if !cpu::features().avx2 {
        println!("avx2 stream: skipped, this CPU (or its OS) has no usable AVX2");
        return;
    }
    exercise("avx2 stream", avx2, AVX2_ALIGN, LINE_MULTIPLE);
}

#[test]
fn avx512_stream() {
    if !cpu::features().avx512f {
        println!("avx512 stream: skipped, this CPU (or its OS) has no usable AVX-512F");
        return;
    }
    exercise("avx512 stream", avx512, AVX512_ALIGN, LINE_MULTIPLE);
}

#[test]
fn clzero() {
    if !cpu::features().clzero {
        println!(
            "clzero: skipped, this CPU has no CLZERO (AMD only; QEMU's TCG does not emulate it)"
        );
        return;
    }
    exercise("clzero", clear::clzero, CLZERO_ALIGN, LINE_MULTIPLE);
}

/// # Safety
/// As [`clear::avx2_stream`]; only called after the AVX2 check above.
unsafe fn avx2(dst: *mut u8, len: usize) {
    // SAFETY: forwarded contract; exercise() is reached only when AVX2 is usable.
    unsafe { clear::avx2_stream(dst, len) }
}

/// # Safety
/// As [`clear::avx512_stream`]; only called after the AVX-512F check above.
unsafe fn avx512(dst: *mut u8, len: usize) {
    // SAFETY: forwarded contract; exercise() is reached only when AVX-512F is usable.
    unsafe { clear::avx512_stream(dst, len) }
}
