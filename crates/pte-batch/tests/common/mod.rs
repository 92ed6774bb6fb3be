//! Building tables for the tests: storage, a table over it, folios laid out along it.

#![allow(dead_code)] // each test file uses a different part

use proptest::test_runner::Config as ProptestConfig;
use pte_batch::mm_types::{FrameRange, Pfn, VirtAddr};
use pte_batch::{AtomicU64, CountingFlush, Prot, PteFormat, PteTable};

/// Where every test table starts: aligned for every granule's blocks.
pub const BASE: VirtAddr = VirtAddr(1 << 40);

/// Zeroed entries for a table of `len`.
pub fn storage(len: usize) -> Vec<AtomicU64> {
    (0..len).map(|_| AtomicU64::new(0)).collect()
}

/// A table of format `f` over `entries`, at [`BASE`].
pub fn table<F: PteFormat>(f: F, entries: &[AtomicU64]) -> PteTable<'_, F> {
    PteTable::new(f, BASE, entries).expect("test tables are well formed")
}

/// Read-write, clean, old: what a fresh file mapping looks like.
pub const RW: Prot = Prot {
    write: true,
    young: false,
    dirty: false,
    user: true,
    exec: false,
    attrs: 0,
};

/// Maps a folio of `nr` pages at `index`, from frame `pfn`, and returns it.
pub fn map<F: PteFormat>(
    t: &PteTable<'_, F>,
    index: usize,
    pfn: u64,
    nr: usize,
    prot: Prot,
) -> FrameRange {
    t.set_ptes(index, Pfn(pfn), nr, prot)
        .expect("mapping empty entries");
    FrameRange::new(Pfn(pfn), nr as u64)
}

/// Folio look-up over a list.
pub fn lookup(folios: &[FrameRange]) -> impl Fn(Pfn) -> Option<FrameRange> + '_ {
    |pfn| folios.iter().copied().find(|f| f.contains(pfn))
}

/// Every raw entry.
pub fn snapshot<F: PteFormat>(t: &PteTable<'_, F>) -> Vec<u64> {
    (0..t.len()).map(|i| t.raw(i).unwrap()).collect()
}

/// A flush counter.
pub fn tlb() -> CountingFlush {
    CountingFlush::default()
}

/// proptest's configuration: the default cases (more with `PROPTEST_CASES`), 4 under Miri.
pub fn config() -> ProptestConfig {
    if cfg!(miri) {
        ProptestConfig {
            cases: 4,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    } else {
        ProptestConfig::default()
    }
}
