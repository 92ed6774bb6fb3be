//! Test support shared by the arch crates' primitive tests (included with `#[path]`, beside
//! `bytes.rs` as the test's `bytes` module): an
//! anonymous mapping with a `PROT_NONE` guard page on each side, and a checker that clears a
//! range of a poisoned area and verifies every byte inside is zero and every byte outside is
//! unchanged. An overrun into a guard page faults the test.

pub const PAGE: usize = 4096;
const POISON: u8 = 0xA5;
/// Room for 3 pages, a tail and the largest misalignment.
pub const USABLE_PAGES: usize = 5;

/// The mapping: `USABLE_PAGES` read/write pages between two `PROT_NONE` pages.
pub struct Guarded {
    base: *mut u8,
}

impl Guarded {
    pub fn new() -> Self {
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

    pub fn usable(&mut self) -> &mut [u8] {
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

/// A clearing primitive under test, already bound to its preconditions (CPU feature).
pub type Primitive<'a> = &'a dyn Fn(*mut u8, usize);

/// Clears `[offset, offset + len)` of a poisoned usable area and checks every byte.
fn check_one(
    area: &mut Guarded,
    name: &str,
    clear: Primitive<'_>,
    fence: &dyn Fn(),
    offset: usize,
    len: usize,
) {
    let usable = area.usable();
    usable.fill(POISON);
    let end = offset + len;
    assert!(end <= usable.len());
    // The range lies inside the usable pages; callers pass only alignments and lengths the
    // primitive allows, on a CPU that has it.
    clear(usable.as_mut_ptr().wrapping_add(offset), len);
    fence();
    // `all_bytes_are` compares a page at a time (`memcmp`): the unoptimized test build
    // checks the 40 KiB of each case at memory speed, which matters under qemu-user (tens of
    // thousands of cases per primitive).
    if !crate::bytes::all_bytes_are(&usable[offset..end], 0) {
        let i = usable[offset..end]
            .iter()
            .position(|&b| b != 0)
            .unwrap_or(0);
        panic!(
            "{name}: offset {offset} len {len}: byte {} not zero",
            offset + i
        );
    }
    assert!(
        crate::bytes::all_bytes_are(&usable[..offset], POISON)
            && crate::bytes::all_bytes_are(&usable[end..], POISON),
        "{name}: offset {offset} len {len}: a byte outside the range changed"
    );
}

/// Lengths from 0 to 3 pages, plus tails, that are multiples of `multiple`.
fn lengths(multiple: usize) -> Vec<usize> {
    let tails = [0, 1, 7, 8, 63, 64, 65, 128, 512, 1024, 4032, 4095];
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

/// Runs `clear` at every allowed length (0..=3 pages plus tails) and every allowed
/// misalignment within two lines, near the page end, and flush against the trailing guard.
pub fn exercise(name: &str, clear: Primitive<'_>, fence: &dyn Fn(), align: usize, multiple: usize) {
    let mut area = Guarded::new();
    let span = USABLE_PAGES * PAGE;
    let mut cases = 0;
    for len in lengths(multiple) {
        let offsets = (0..128.max(2 * align))
            .step_by(align)
            .chain([PAGE - align.max(64), PAGE]);
        for offset in offsets {
            check_one(&mut area, name, clear, fence, offset, len);
            cases += 1;
        }
        let start = span - len;
        if start.is_multiple_of(align) {
            check_one(&mut area, name, clear, fence, start, len);
            cases += 1;
        }
    }
    println!("{name}: {cases} guarded cases passed");
}
