//! Clearing a `vm-memory` guest's memory: a range across regions reads zero, the pages
//! around it keep their bytes, and a range with a hole, a misaligned start or no pages is
//! refused with nothing written. (Guest memory is `mmap`ed: not under Miri.)
#![cfg(not(miri))]

use core::num::NonZeroUsize;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};
use zero_core::guest::{GuestClearError, clear_guest_memory, clear_guest_memory_parallel};
use zero_core::{ClearConfig, CountingResched, PageSize, PreemptModel, ZeroError};

#[path = "support/bytes.rs"]
mod bytes;
use bytes::all_bytes_are;

const PAGE: usize = 4096;
const MIB: usize = 1 << 20;

/// Two adjacent regions, [0, 1 MiB) and [1 MiB, 3 MiB), then a hole, then [4 MiB, 5 MiB);
/// every byte 0xA5.
fn guest() -> GuestMemoryMmap {
    let mem = GuestMemoryMmap::from_ranges(&[
        (GuestAddress(0), MIB),
        (GuestAddress(MIB as u64), 2 * MIB),
        (GuestAddress(4 * MIB as u64), MIB),
    ])
    .unwrap();
    for (start, len) in [(0, 3 * MIB), (4 * MIB, MIB)] {
        mem.write_slice(&vec![0xA5; len], GuestAddress(start as u64))
            .unwrap();
    }
    mem
}

fn bytes(mem: &GuestMemoryMmap, start: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    mem.read_slice(&mut v, GuestAddress(start as u64)).unwrap();
    v
}

/// Clears `[start, start + len)` with `parallel` or not, and checks exactly it reads zero.
fn clears_exactly(parallel: bool, start: usize, len: usize) {
    let mem = guest();
    let clearer = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
        .validate()
        .unwrap();
    // SAFETY: nothing else touches this guest's memory.
    let r = unsafe {
        if parallel {
            clear_guest_memory_parallel(
                &mem,
                GuestAddress(start as u64),
                len,
                &clearer,
                NonZeroUsize::new(16).unwrap(),
                NonZeroUsize::new(3).unwrap(),
            )
        } else {
            clear_guest_memory(
                &mem,
                GuestAddress(start as u64),
                len,
                &clearer,
                &mut CountingResched::new(),
            )
        }
    };
    assert_eq!(r, Ok(()));
    assert!(all_bytes_are(&bytes(&mem, start, len), 0));
    let before = bytes(&mem, 0, start);
    let after = bytes(&mem, start + len, 3 * MIB - start - len);
    assert!(
        all_bytes_are(&before, 0xA5) && all_bytes_are(&after, 0xA5),
        "outside the range"
    );
}

#[test]
fn a_range_across_regions_reads_zero_and_nothing_around_it_changes() {
    for parallel in [false, true] {
        clears_exactly(parallel, PAGE, 3 * MIB - 2 * PAGE);
        clears_exactly(parallel, MIB - 3 * PAGE, 5 * PAGE);
        clears_exactly(parallel, 2 * MIB, PAGE);
    }
}

#[test]
fn holes_misalignment_and_empty_ranges_are_refused_unwritten() {
    let clearer = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
        .validate()
        .unwrap();
    let cases = [
        // Into the hole after 3 MiB.
        (
            2 * MIB,
            2 * MIB,
            GuestClearError::Unmapped(GuestAddress(3 * MIB as u64)),
        ),
        // Past the end.
        (
            5 * MIB,
            PAGE,
            GuestClearError::Unmapped(GuestAddress(5 * MIB as u64)),
        ),
        (0, 0, GuestClearError::Clear(ZeroError::ZeroLength)),
    ];
    for parallel in [false, true] {
        for &(start, len, want) in &cases {
            let mem = guest();
            // SAFETY: nothing else touches this guest's memory.
            let r = unsafe {
                if parallel {
                    let one = NonZeroUsize::MIN;
                    clear_guest_memory_parallel(
                        &mem,
                        GuestAddress(start as u64),
                        len,
                        &clearer,
                        one,
                        one,
                    )
                } else {
                    let mut r = CountingResched::new();
                    clear_guest_memory(&mem, GuestAddress(start as u64), len, &clearer, &mut r)
                }
            };
            assert_eq!(r, Err(want));
            assert!(all_bytes_are(&bytes(&mem, 0, 3 * MIB), 0xA5), "written");
        }
        // A start inside a page, or a length of part of a page.
        let mem = guest();
        for (start, len) in [(100, PAGE), (0, PAGE + 1)] {
            let mut r = CountingResched::new();
            // SAFETY: as above.
            let e = unsafe { clear_guest_memory(&mem, GuestAddress(start), len, &clearer, &mut r) };
            assert!(
                matches!(
                    e,
                    Err(GuestClearError::Clear(
                        ZeroError::Misaligned { .. } | ZeroError::NotPageMultiple { .. }
                    ))
                ),
                "{e:?}"
            );
        }
        assert!(all_bytes_are(&bytes(&mem, 0, 3 * MIB), 0xA5), "written");
    }
}
