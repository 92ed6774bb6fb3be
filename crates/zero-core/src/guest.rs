//! Clearing a rust-vmm guest's memory (feature `vm-memory`): a guest-physical range of a
//! [`vm_memory`] memory map (`GuestMemoryMmap` and any other [`GuestMemoryBackend`]), region
//! by region through each region's host mapping, on one thread or on several at once
//! ([`ParallelClear`] over each piece in turn). A VMM zeroes or prefaults guest RAM this way
//! before the guest runs, or a range the guest gave back (a balloon's pages) before it is
//! handed out again: every page is written, so every page is also faulted in.

extern crate std;

use core::fmt;
use core::num::NonZeroUsize;
use std::vec::Vec;

use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryRegion};

use crate::{Clearer, ParallelClear, Resched, ZeroError, clear_contig_pages_raw};

/// Why a guest range was not cleared. Nothing was written when one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuestClearError {
    /// No region of the memory map holds this guest-physical address (a hole in the range).
    Unmapped(GuestAddress),
    /// The region holding this address has no host mapping to write through.
    NoHostAddress(GuestAddress),
    /// The range or a piece of it is not a whole number of aligned pages; zero-core's error
    /// says which.
    Clear(ZeroError),
}

impl fmt::Display for GuestClearError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Unmapped(a) => write!(f, "guest address {:#x} is in no region", a.0),
            Self::NoHostAddress(a) => {
                write!(
                    f,
                    "the region holding guest address {:#x} has no host mapping",
                    a.0
                )
            }
            Self::Clear(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for GuestClearError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Clear(e) => Some(e),
            _ => None,
        }
    }
}

/// One piece of a guest range inside one region: its host address and length in pages.
#[derive(Clone, Copy, Debug)]
struct Piece {
    host: *mut u8,
    pages: usize,
}

/// The pieces of `[start, start + len)`, one per region it crosses, every one checked
/// (mapped, page-aligned and whole pages in host memory) before anything is written.
fn pieces<M: GuestMemoryBackend + ?Sized>(
    mem: &M,
    start: GuestAddress,
    len: usize,
    clearer: &Clearer,
) -> Result<Vec<Piece>, GuestClearError> {
    if len == 0 {
        return Err(GuestClearError::Clear(ZeroError::ZeroLength));
    }
    let mut out = Vec::new();
    let mut at = start;
    let mut left = len;
    while left > 0 {
        let (region, offset) = mem
            .to_region_addr(at)
            .ok_or(GuestClearError::Unmapped(at))?;
        let in_region = region.len().saturating_sub(offset.0);
        let n = usize::try_from(in_region).map_or(left, |r| r.min(left));
        let host = region
            .get_host_address(offset)
            .map_err(|_| GuestClearError::NoHostAddress(at))?;
        // The clearer's own extent check: page-aligned, whole pages.
        let pages = clearer
            .pages_of(host.addr(), n)
            .map_err(GuestClearError::Clear)?;
        out.push(Piece { host, pages });
        left -= n;
        at = GuestAddress(
            at.0.checked_add(n as u64)
                .ok_or(GuestClearError::Clear(ZeroError::Overflow))?,
        );
    }
    Ok(out)
}

/// Zeroes the guest-physical range `[start, start + len)` of `mem` on this thread: each
/// region's part through its host mapping with [`clear_contig_pages_raw`] (the clearer's
/// policy, batches and `resched` between them). Every piece is checked first: on an error
/// nothing is written.
///
/// # Errors
/// [`GuestClearError::Unmapped`] for a hole, [`GuestClearError::NoHostAddress`] for a region
/// without a host mapping, [`GuestClearError::Clear`] for a range (or a piece of it) that is
/// empty, misaligned or not whole pages.
///
/// # Safety
/// Nothing else (a vCPU, a device, another thread) reads or writes the range during the
/// call: the guest is not running, or the range is not mapped to it. (`vm-memory` leaves
/// aliasing of guest memory to its users.)
pub unsafe fn clear_guest_memory<M: GuestMemoryBackend + ?Sized>(
    mem: &M,
    start: GuestAddress,
    len: usize,
    clearer: &Clearer,
    resched: &mut impl Resched,
) -> Result<(), GuestClearError> {
    for p in pieces(mem, start, len, clearer)? {
        // SAFETY: `pieces` checked that the region maps `p.pages` whole, aligned pages at
        // `p.host`; the caller guarantees no one else accesses them meanwhile.
        unsafe { clear_contig_pages_raw(p.host, p.pages, clearer, resched) }
            .map_err(GuestClearError::Clear)?;
    }
    Ok(())
}

/// [`clear_guest_memory`] on `threads` threads at once: every piece of the range is one
/// [`ParallelClear`] job in chunks of `chunk_pages`, and every thread works on each piece in
/// turn, so a range spanning regions of any sizes keeps every thread busy.
///
/// ```
/// use core::num::NonZeroUsize;
/// use vm_memory::{GuestAddress, GuestMemoryMmap};
/// use zero_core::guest::clear_guest_memory_parallel;
/// use zero_core::{Clearer, PageSize, PreemptModel};
/// # // Miri's mmap does not return page-aligned memory, which clearing requires.
/// # if cfg!(miri) { return Ok(()); }
///
/// // Guest RAM in two regions, as a VMM lays it out around a hole.
/// let mem = GuestMemoryMmap::<()>::from_ranges(&[
///     (GuestAddress(0), 2 << 20),
///     (GuestAddress(2 << 20), 6 << 20),
/// ])?;
/// let clearer = Clearer::detected(PageSize::Size4KiB, PreemptModel::None);
/// let (chunk, threads) = (NonZeroUsize::new(512).unwrap(), NonZeroUsize::new(4).unwrap());
/// // SAFETY: the guest is not running and no device touches its memory.
/// unsafe { clear_guest_memory_parallel(&mem, GuestAddress(0), 8 << 20, &clearer, chunk, threads)? };
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`clear_guest_memory`].
///
/// # Safety
/// As [`clear_guest_memory`].
pub unsafe fn clear_guest_memory_parallel<M: GuestMemoryBackend + ?Sized>(
    mem: &M,
    start: GuestAddress,
    len: usize,
    clearer: &Clearer,
    chunk_pages: NonZeroUsize,
    threads: NonZeroUsize,
) -> Result<(), GuestClearError> {
    let mut jobs = Vec::new();
    for p in pieces(mem, start, len, clearer)? {
        let bytes = p.pages << clearer.config().page_size.shift();
        // SAFETY: `pieces` checked that the region maps `p.pages` pages at `p.host`; the
        // caller guarantees no one else accesses them until this returns, and pieces of
        // distinct regions (or of one region, consecutively) do not overlap.
        let extent = unsafe { core::slice::from_raw_parts_mut(p.host, bytes) };
        jobs.push(
            ParallelClear::new(extent, chunk_pages, clearer).map_err(GuestClearError::Clear)?,
        );
    }
    std::thread::scope(|s| {
        for _ in 0..threads.get() {
            let jobs = &jobs;
            s.spawn(move || {
                for job in jobs {
                    job.work(&mut crate::NoResched);
                }
            });
        }
    });
    Ok(())
}
