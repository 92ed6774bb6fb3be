//! MGLRU-style working-set estimation over one arm64 page-table page (4 KiB granule): map
//! 64 KiB contpte folios, let the "MMU" touch some of them, then age the range in batches and
//! compare with the per-entry walk the kernel used before: the same young folios, 16 times
//! fewer compare-and-swaps, the same invalidates.
//!
//! `cargo run --example aging`

use pte_batch::format::Arm64;
use pte_batch::mm_types::{FrameRange, Pfn, VirtAddr};
use pte_batch::{
    Access, AtomicU64, CountingFlush, FpbFlags, Prot, PteError, PteTable, age_range, reference,
};

const FOLIO_PAGES: usize = 16;

fn main() -> Result<(), PteError> {
    let entries: Vec<AtomicU64> = (0..512).map(|_| AtomicU64::new(0)).collect();
    let table = PteTable::new(Arm64::G4K, VirtAddr(0x40_0000_0000), &entries)?;
    let rw = Prot {
        write: true,
        ..Prot::default()
    };
    // 32 folios of 64 KiB, frames from 0x1000; set_ptes folds each into one contpte block.
    let folios: Vec<FrameRange> = (0..512 / FOLIO_PAGES)
        .map(|i| FrameRange::new(Pfn(0x1000 + (i * FOLIO_PAGES) as u64), FOLIO_PAGES as u64))
        .collect();
    for (i, f) in folios.iter().enumerate() {
        table.set_ptes(i * FOLIO_PAGES, f.start, FOLIO_PAGES, rw)?;
    }
    let lookup = |pfn| {
        folios
            .iter()
            .copied()
            .find(|f: &FrameRange| f.contains(pfn))
    };

    for (walk, batched) in [("batched", true), ("per-entry", false)] {
        // Every third folio is touched, on some page of it (a write every other time).
        for i in (0..folios.len()).step_by(3) {
            let access = if i % 2 == 0 {
                Access::Write
            } else {
                Access::Read
            };
            table.hw_access(i * FOLIO_PAGES + i % FOLIO_PAGES, access, i)?;
        }
        let mut tlb = CountingFlush::default();
        let stats = if batched {
            age_range(&table, 0..512, &lookup, FpbFlags::NONE, &mut tlb, |_, _| {})?
        } else {
            reference::age_range(&table, 0..512, &lookup, &mut tlb, |_, _| {})?
        };
        println!(
            "{walk:>9}: {} of {} folios young, {} entry updates, {} invalidates",
            stats.young_folios, stats.folios, stats.entry_updates, tlb.flushes
        );
        assert_eq!(stats.young_folios, folios.len().div_ceil(3) as u64);
    }
    Ok(())
}
