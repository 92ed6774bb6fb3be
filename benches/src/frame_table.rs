//! Zones whose frame metadata lies in huge pages, as a kernel maps its frame table: Linux's
//! vmemmap uses 2 MiB mappings on x86_64 and arm64, and a unikernel's or hypervisor's frame
//! array lives in its direct map, mapped with 2 MiB or 1 GiB pages.
//!
//! In 4 KiB pages a zone's metadata costs a TLB miss for nearly every block head an
//! allocation reads once the blocks held span more than the TLB covers, which no kernel
//! pays: 2 MiB `alloc_zeroed` from a full pool took 236 ns with 4 KiB metadata pages and
//! 139 ns with huge ones, plain `alloc_pages` 84 and 76 (a 3 GiB zone, 18 MiB of
//! metadata). For a benchmark, which pages a heap allocation gets can also depend on what
//! the process allocated and freed before: glibc serves a large allocation from a fresh
//! mapping or from its heap, whose pages may already be faulted in, in either size.

use crate::must;
use buddy_sim::{BoxedZone, Frame, PerCpu, Zone, ZoneConfig};

/// The base page size the advice is given in.
const PAGE: usize = 4096;

/// A zone of `cfg` whose frames are all usable and free ([`Zone::new`]), its frame metadata
/// in memory advised for huge pages before any of it is touched (a range glibc handed back
/// already faulted in is dropped first, so that it faults in again as huge pages).
///
/// # Panics
/// If the metadata cannot be allocated, or `cfg` is not a valid zone.
#[allow(unsafe_code)]
#[must_use]
pub fn zone_in_huge_pages(cfg: ZoneConfig) -> BoxedZone {
    let n = usize::try_from(cfg.nr_pages).unwrap_or_else(|e| panic!("frames: {e}"));
    let layout = std::alloc::Layout::array::<Frame>(n).unwrap_or_else(|e| panic!("layout: {e}"));
    assert!(layout.size() > 0, "a zone of no frames");
    // SAFETY: a layout of `n > 0` frames, not zero-sized.
    let ptr = unsafe { std::alloc::alloc(layout) }.cast::<Frame>();
    assert!(!ptr.is_null(), "frame metadata: out of memory");
    // The whole pages inside the allocation: the metadata's own bytes, none of the
    // allocator's bookkeeping around them.
    let start = ptr.addr().next_multiple_of(PAGE);
    let end = (ptr.addr() + layout.size()) & !(PAGE - 1);
    if end > start {
        let inner = ptr.with_addr(start).cast::<libc::c_void>();
        // SAFETY: advice on whole pages of this allocation, which this function owns and
        // has not written: MADV_DONTNEED drops what the pages held (private anonymous
        // memory reads back zero), MADV_HUGEPAGE changes no contents. Advice refused (no
        // THP) leaves 4 KiB pages, which only slows the benchmark.
        unsafe {
            libc::madvise(inner, end - start, libc::MADV_DONTNEED);
            libc::madvise(inner, end - start, libc::MADV_HUGEPAGE);
        }
    }
    // SAFETY: `ptr` points to `layout.size()` bytes of this allocation; all-zero bytes are a
    // valid `Frame` (`Frame::new()` is all zero), written here, after the advice, so that
    // the pages fault in huge.
    unsafe { ptr.cast::<u8>().write_bytes(0, layout.size()) };
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `n` frames, all
    // initialized above.
    let frames = unsafe { Vec::from_raw_parts(ptr, n, n) };
    let pcps = (0..cfg.cpus).map(|_| PerCpu::new()).collect();
    must(Zone::new(cfg, frames, pcps))
}

#[cfg(test)]
mod tests {
    use super::zone_in_huge_pages;
    use buddy_sim::{Pfn, ZoneConfig};

    #[test]
    fn the_zone_is_whole_and_free_wherever_its_metadata_came_from() {
        // Twice: the second metadata may be the first's memory, handed back by glibc
        // already written, which the advice drops before the zone is made.
        for _ in 0..2 {
            let zone = zone_in_huge_pages(ZoneConfig::new(Pfn(1 << 20), 1 << 12));
            assert_eq!(zone.free_pages_total(), 1 << 12);
            zone.check().unwrap();
        }
    }
}
