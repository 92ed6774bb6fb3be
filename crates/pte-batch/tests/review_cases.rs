//! The review questions of arm64's `test_and_clear_young_ptes()` and the kernel's edge cases, as explicit tests.

mod common;

use common::{BASE, RW, lookup, map, snapshot, storage, table, tlb};
use pte_batch::format::Arm64;
use pte_batch::mm_types::{FrameRange, PageRange, PageSize, Pfn, VirtAddr};
use pte_batch::{
    Access, FpbFlags, Prot, PteError, PteFormat, X86_64, age_range, folio_pte_batch, reference,
};

const F: Arm64 = Arm64::G4K;

/// The address `off` bytes past [`BASE`].
fn at(off: u64) -> VirtAddr {
    VirtAddr(BASE.0 + off)
}

fn young_entries<P: PteFormat>(t: &pte_batch::PteTable<'_, P>) -> Vec<usize> {
    (0..t.len())
        .filter(|&i| t.format().is_young(t.raw(i).unwrap()))
        .collect()
}

#[test]
fn a_64_entries_spanning_four_blocks() {
    let s = storage(512);
    let t = table(F, &s);
    map(&t, 64, 1024, 64, RW);
    for i in 64..128 {
        assert!(F.is_cont(t.raw(i).unwrap()), "entry {i} folded");
    }
    // An access to the last page lands on the first entry of its block.
    assert_eq!(t.hw_access(127, Access::Write, 0).unwrap(), 112);
    assert_eq!(young_entries(&t), vec![112]);
    let token = t.clear_flush_young_ptes(64, 64).unwrap();
    assert_eq!(
        token.range(),
        Some(PageRange::new(at(64 << 12), 64, PageSize::Size4KiB))
    );
    let mut flushes = tlb();
    assert!(token.flush(&mut flushes));
    assert_eq!(flushes.flushes, 1);
    assert!(young_entries(&t).is_empty());
    // The write is still recorded: ptep_get of any entry of that block reads dirty.
    assert!(F.is_dirty(t.get(120).unwrap()));
    assert!(!F.is_dirty(t.get(100).unwrap()));
    // Nothing young now: no flush.
    let token = t.clear_flush_young_ptes(64, 64).unwrap();
    assert_eq!(token.range(), None);
    assert!(!token.skip_flush());
}

#[test]
fn ranges_starting_and_ending_mid_block_expand_to_whole_blocks() {
    let s = storage(512);
    let t = table(F, &s);
    map(&t, 0, 0, 64, RW);
    assert_eq!(t.young_range(5, 40).unwrap(), 0..48);
    assert_eq!(t.young_range(20, 10).unwrap(), 16..32);
    assert_eq!(t.young_range(16, 16).unwrap(), 16..32);
    // Accesses recorded anywhere in the two end blocks are found and cleared.
    t.hw_access(1, Access::Read, 15).unwrap(); // entry 15
    t.hw_access(47, Access::Read, 0).unwrap(); // entry 32
    t.hw_access(50, Access::Read, 0).unwrap(); // entry 48, outside
    assert!(t.test_and_clear_young_ptes(5, 40).unwrap());
    assert_eq!(young_entries(&t), vec![48]);
}

#[test]
fn b_first_entry_not_cont_followed_by_cont_ones() {
    let s = storage(512);
    let t = table(F, &s);
    // A 32-page folio at entry 8 whose frames are aligned like its addresses: entries 8..16
    // and 32..40 cover their blocks in part (no CONT), 16..32 is a full block (CONT).
    let folio = map(&t, 8, 1032, 32, RW);
    let cont: Vec<bool> = (8..40).map(|i| F.is_cont(t.raw(i).unwrap())).collect();
    assert!(cont[..8].iter().all(|c| !c) && cont[8..24].iter().all(|&c| c));
    assert!(cont[24..].iter().all(|c| !c));
    // The kernel's folio_pte_batch splits it where CONT changes; IGNORE_CONT does not.
    let nr = |i, flags| folio_pte_batch(&t, i, 40 - i, flags).unwrap().nr;
    assert_eq!(
        [
            nr(8, FpbFlags::NONE),
            nr(16, FpbFlags::NONE),
            nr(32, FpbFlags::NONE)
        ],
        [8, 16, 8]
    );
    assert_eq!(nr(8, FpbFlags::IGNORE_CONT), 32);
    // One call over the mixed batch finds an access the MMU recorded on any block entry.
    t.hw_access(16, Access::Read, 9).unwrap(); // entry 25
    assert_eq!(t.young_range(8, 32).unwrap(), 8..40);
    assert_eq!(t.young_range(8, 12).unwrap(), 8..32);
    assert!(t.test_and_clear_young_ptes(8, 12).unwrap());
    assert!(young_entries(&t).is_empty());
    // And the whole folio ages as one batch with IGNORE_CONT.
    t.hw_access(39, Access::Read, 0).unwrap();
    let folios = [folio];
    let mut seen = Vec::new();
    let stats = age_range(
        &t,
        0..512,
        &lookup(&folios),
        FpbFlags::IGNORE_CONT,
        &mut tlb(),
        |f, y| seen.push((f, y)),
    )
    .unwrap();
    assert_eq!(seen, vec![(folio, true)]);
    assert_eq!(
        (stats.batches, stats.entry_updates, stats.flushes),
        (1, 32, 1)
    );
}

#[test]
fn nr_1_with_and_without_cont() {
    let s = storage(512);
    let t = table(F, &s);
    let young = Prot { young: true, ..RW };
    map(&t, 0, 0, 16, young); // one CONT block
    map(&t, 16, 100, 4, young); // frames not block aligned: no CONT
    assert!(F.is_cont(t.raw(0).unwrap()) && !F.is_cont(t.raw(16).unwrap()));
    // Without CONT: that entry only.
    assert!(t.ptep_test_and_clear_young(17).unwrap());
    assert_eq!(
        young_entries(&t),
        [(0..17).collect::<Vec<_>>(), vec![18, 19]].concat()
    );
    assert!(!t.ptep_test_and_clear_young(17).unwrap());
    // With CONT: the whole block, whichever entry is named.
    assert!(t.ptep_test_and_clear_young(9).unwrap());
    assert_eq!(young_entries(&t), vec![16, 18, 19]);
    let token = t.ptep_clear_flush_young(18).unwrap();
    assert_eq!(
        token.range().map(|r| (r.start, r.pages)),
        Some((at(18 << 12), 1))
    );
    assert!(token.skip_flush());
}

#[test]
fn unfolding_carries_young_and_dirty_and_costs_one_invalidate() {
    let s = storage(512);
    let t = table(F, &s);
    map(&t, 32, 2048, 16, RW);
    t.hw_access(40, Access::Write, 3).unwrap(); // dirties entry 35 only
    let mut flushes = tlb();
    let unmapped = t.unmap_ptes(32, 1, &mut flushes).unwrap();
    assert_eq!(unmapped.pages, 1);
    // The unmapped entry had the block's access and dirty state carried onto it.
    assert!(unmapped.young && unmapped.dirty);
    // One invalidate for the unfold, one for the unmap.
    assert_eq!((flushes.flushes, flushes.pages), (2, 17));
    for i in 33..48 {
        let e = t.raw(i).unwrap();
        assert!(
            !F.is_cont(e) && F.is_young(e) && F.is_dirty(e),
            "entry {i}: {e:#x}"
        );
        assert_eq!(F.pfn(e), Pfn(2048 + (i as u64 - 32)));
    }
    assert_eq!(t.raw(32).unwrap(), 0);
}

#[test]
fn wrprotect_keeps_whole_blocks_folded_and_dirty_state() {
    let s = storage(512);
    let t = table(F, &s);
    map(&t, 0, 0, 32, RW);
    t.hw_access(0, Access::Write, 5).unwrap();
    let mut flushes = tlb();
    t.wrprotect_ptes(0, 16, &mut flushes).unwrap();
    assert_eq!(flushes.flushes, 1);
    for i in 0..16 {
        let e = t.raw(i).unwrap();
        assert!(F.is_cont(e) && !F.is_writable(e));
    }
    assert!(F.is_dirty(t.get(0).unwrap()));
    assert!(t.hw_access(3, Access::Write, 0).is_err());
    // A part of a block: unfold first (one more invalidate), then protect.
    t.wrprotect_ptes(20, 2, &mut flushes).unwrap();
    assert_eq!(flushes.flushes, 3);
    assert!(!F.is_cont(t.raw(16).unwrap()) && F.is_writable(t.raw(16).unwrap()));
    assert!(!F.is_writable(t.raw(21).unwrap()));
}

#[test]
fn clearing_never_loses_dirty() {
    let s = storage(512);
    let t = table(F, &s);
    map(&t, 0, 0, 48, RW);
    for (i, pick) in [(0, 0), (17, 4), (33, 15)] {
        t.hw_access(i, Access::Write, pick).unwrap();
    }
    let dirty_before: Vec<bool> = (0..48).map(|i| F.is_dirty(t.get(i).unwrap())).collect();
    assert!(t.test_and_clear_young_ptes(0, 48).unwrap());
    let dirty_after: Vec<bool> = (0..48).map(|i| F.is_dirty(t.get(i).unwrap())).collect();
    assert_eq!(dirty_before, dirty_after);
}

/// From the review (David Hildenbrand): after unmapping the last page of a large folio, the rest
/// should age in a single operation. Per-entry, kernel batching, and IGNORE_CONT.
#[test]
fn unmapping_the_last_page_of_a_large_folio() {
    let s = storage(512);
    let t = table(F, &s);
    // A 2 MiB folio (32 contpte blocks) filling the table.
    let folio = map(&t, 0, 512, 512, RW);
    assert_eq!(t.unmap_ptes(511, 1, &mut tlb()).unwrap().pages, 1);
    let folios = [folio];
    let touch = |t: &pte_batch::PteTable<'_, Arm64>| {
        t.hw_access(0, Access::Read, 0).unwrap();
        t.hw_access(500, Access::Read, 0).unwrap();
    };
    let mut runs = Vec::new();
    for flags in [FpbFlags::NONE, FpbFlags::IGNORE_CONT] {
        touch(&t);
        let mut flushes = tlb();
        let stats =
            age_range(&t, 0..512, &lookup(&folios), flags, &mut flushes, |_, _| {}).unwrap();
        assert_eq!(
            (stats.folios, stats.young_folios, stats.entries),
            (1, 1, 511)
        );
        assert_eq!(flushes.flushes, stats.flushes);
        runs.push(stats);
    }
    touch(&t);
    let per_entry =
        reference::age_range(&t, 0..512, &lookup(&folios), &mut tlb(), |_, _| {}).unwrap();
    // Kernel batching: the CONT run and the unfolded tail are two batches, two invalidates.
    assert_eq!(
        (runs[0].batches, runs[0].flushes, runs[0].entry_updates),
        (2, 2, 511)
    );
    // IGNORE_CONT: one batch, one invalidate, same entry updates.
    assert_eq!(
        (runs[1].batches, runs[1].flushes, runs[1].entry_updates),
        (1, 1, 511)
    );
    // Per entry: 496 x 16 for the blocks plus 15, and one invalidate per young call.
    assert_eq!(
        (per_entry.batches, per_entry.entry_updates),
        (511, 496 * 16 + 15)
    );
    assert_eq!(per_entry.flushes, 2);

    // A 64 KiB folio: its one block unfolds, leaving 15 non-CONT entries, one batch either way.
    let s = storage(512);
    let t = table(F, &s);
    let folio = map(&t, 0, 16, 16, RW);
    assert_eq!(t.unmap_ptes(15, 1, &mut tlb()).unwrap().pages, 1);
    let folios = [folio];
    for flags in [FpbFlags::NONE, FpbFlags::IGNORE_CONT] {
        t.hw_access(3, Access::Read, 0).unwrap();
        let stats = age_range(&t, 0..512, &lookup(&folios), flags, &mut tlb(), |_, _| {}).unwrap();
        assert_eq!(
            (stats.batches, stats.flushes, stats.entry_updates),
            (1, 1, 15)
        );
    }
}

#[test]
fn x86_batches_are_per_entry_and_never_flush() {
    let s = storage(512);
    let t = table(X86_64, &s);
    map(&t, 10, 77, 20, RW);
    assert_eq!(folio_pte_batch(&t, 10, 20, FpbFlags::NONE).unwrap().nr, 20);
    t.hw_access(12, Access::Write, 0).unwrap();
    assert_eq!(t.young_range(10, 20).unwrap(), 10..30);
    let token = t.clear_flush_young_ptes(10, 20).unwrap();
    assert!(token.young() && token.range().is_none());
    assert!(token.skip_flush());
    assert!(X86_64.is_dirty(t.raw(12).unwrap()));
    // Unmapping does invalidate.
    let mut flushes = tlb();
    assert!(t.unmap_ptes(10, 20, &mut flushes).unwrap().dirty);
    assert_eq!(flushes.flushes, 1);
}

#[test]
fn folio_pte_batch_respects_what_it_is_told() {
    let s = storage(512);
    let t = table(F, &s);
    map(&t, 0, 0, 8, RW);
    t.hw_access(2, Access::Write, 0).unwrap();
    let batch = |flags| folio_pte_batch(&t, 0, 8, flags).unwrap();
    assert_eq!(batch(FpbFlags::NONE).nr, 8);
    assert_eq!(batch(FpbFlags::RESPECT_DIRTY).nr, 2);
    let merged = batch(FpbFlags::MERGE_YOUNG_DIRTY);
    assert!(F.is_young(merged.pte) && F.is_dirty(merged.pte));
    assert!(!F.is_young(batch(FpbFlags::NONE).pte));
    t.wrprotect_ptes(5, 1, &mut tlb()).unwrap();
    assert_eq!(batch(FpbFlags::NONE).nr, 8);
    assert_eq!(batch(FpbFlags::RESPECT_WRITE).nr, 5);
    // max_nr bounds it; a hole or a frame jump ends it.
    assert_eq!(folio_pte_batch(&t, 0, 3, FpbFlags::NONE).unwrap().nr, 3);
    map(&t, 8, 9, 4, RW);
    assert_eq!(folio_pte_batch(&t, 0, 12, FpbFlags::NONE).unwrap().nr, 8);
    assert_eq!(
        folio_pte_batch(&t, 12, 1, FpbFlags::NONE),
        Err(PteError::NotPresent { index: 12 })
    );
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let s = storage(512);
    assert_eq!(
        pte_batch::PteTable::new(F, BASE, &s[..0]).unwrap_err(),
        PteError::BadTableLength { len: 0 }
    );
    assert!(pte_batch::PteTable::new(F, BASE, &s[..15]).is_err());
    assert!(pte_batch::PteTable::new(F, at(4096), &s).is_err());
    assert!(pte_batch::PteTable::new(F, VirtAddr(!0xffff_u64), &s[..16]).is_ok());
    assert!(pte_batch::PteTable::new(F, VirtAddr(!0xffff_u64), &s[..32]).is_err());
    let big = storage(513);
    assert!(pte_batch::PteTable::new(F, BASE, &big).is_err());
    let t = table(F, &s);
    assert!(t.set_ptes(500, Pfn(0), 13, RW).is_err());
    assert!(t.set_ptes(0, Pfn(u64::MAX), 2, RW).is_err());
    assert!(t.set_ptes(0, F.max_pfn(), 2, RW).is_err());
    assert!(t.set_ptes(0, Pfn(0), 1, Prot { attrs: 1, ..RW }).is_err());
    map(&t, 0, 0, 4, RW);
    assert_eq!(
        t.set_ptes(2, Pfn(0), 4, RW),
        Err(PteError::AlreadyMapped { index: 2 })
    );
    // Low frames at a high index: no block folds, nothing underflows.
    map(&t, 405, 3, 40, RW);
    assert!((405..445).all(|i| !F.is_cont(t.raw(i).unwrap())));
    assert_eq!(t.unmap_ptes(405, 40, &mut tlb()).unwrap().pages, 40);
    assert!(t.test_and_clear_young_ptes(0, 0).is_err());
    assert!(t.test_and_clear_young_ptes(usize::MAX, 2).is_err());
    assert!(t.index_of(VirtAddr(BASE.0 - 1)).is_err() && t.index_of(at(512 << 12)).is_err());
    assert_eq!(t.index_of(at((3 << 12) + 5)).unwrap(), 3);
    assert!(matches!(
        t.hw_access(100, Access::Read, 0),
        Err(PteError::Fault { index: 100, .. })
    ));
    assert!(t.hw_access_va(at(4096), Access::Write, 0).is_ok());
    let ro = Prot { write: false, ..RW };
    map(&t, 16, 16, 1, ro);
    assert!(t.hw_access(16, Access::Write, 0).is_err());
    let liar = |_| Some(FrameRange::new(Pfn(1000), 1));
    assert_eq!(
        age_range(&t, 0..512, &liar, FpbFlags::NONE, &mut tlb(), |_, _| {}),
        Err(PteError::BadFolio { pfn: Pfn(0) })
    );
    assert!(age_range(&t, 5..5, &liar, FpbFlags::NONE, &mut tlb(), |_, _| {}).is_err());
    assert_eq!(snapshot(&t).iter().filter(|&&e| e != 0).count(), 5);
}
