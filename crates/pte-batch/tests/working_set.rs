//! The working-set estimator against a naive per-page model over passes whose layouts
//! change between them (folios split, fold, unmap and appear), its errors leaving the
//! estimate unchanged, and a guest's idle set through real stage-2 tables.

mod common;

use std::collections::BTreeMap;

use common::{BASE, config, lookup, map, storage, table};
use proptest::prelude::*;
use pte_batch::mm_types::{FrameRange, PageRange, PageSize, VirtAddr};
use pte_batch::{
    Access, Arm64Stage2, CountingFlush, Ept, FpbFlags, IdleAges, IdleRun, Prot, PteFormat,
    WorkingSet, WorkingSetError, YoungOp, age_batches,
};

/// One batch of a pass: a gap of unmapped pages before it, its pages, young.
type Batch = (u64, u64, bool);

fn passes() -> impl Strategy<Value = Vec<Vec<Batch>>> {
    let (batches, passes) = if cfg!(miri) { (6, 3) } else { (24, 8) };
    let batch = (
        prop_oneof![Just(0u64), 0u64..4],
        prop_oneof![1u64..=2, 1u64..=16],
        any::<bool>(),
    );
    prop::collection::vec(prop::collection::vec(batch, 0..batches), 1..passes)
}

fn range(first: u64, pages: u64) -> PageRange {
    PageRange::new(VirtAddr(first << 12), pages, PageSize::Size4KiB)
}

/// The definition, page by page: a batch's age is 0 if young, else one more than the
/// youngest tracked page it covers (1 if none); pages no batch covers are forgotten.
fn naive_pass(ages: &BTreeMap<u64, u32>, pass: &[Batch]) -> BTreeMap<u64, u32> {
    let mut next = BTreeMap::new();
    let mut at = 0;
    for &(gap, pages, young) in pass {
        at += gap;
        let youngest = ages.range(at..at + pages).map(|(_, &a)| a).min();
        let age = if young {
            0
        } else {
            youngest.map_or(1, |a| a + 1)
        };
        next.extend((at..at + pages).map(|p| (p, age)));
        at += pages;
    }
    next
}

fn per_page(ws: &WorkingSet<'_>) -> BTreeMap<u64, u32> {
    ws.runs()
        .iter()
        .flat_map(|r| (r.first_page()..r.first_page() + r.pages()).map(move |p| (p, r.age())))
        .collect()
}

fn run_pass(ws: &mut WorkingSet<'_>, pass: &[Batch]) -> Result<(), WorkingSetError> {
    let mut p = ws.pass();
    let mut at = 0;
    for &(gap, pages, young) in pass {
        at += gap;
        p.observe(range(at, pages), young)?;
        at += pages;
    }
    p.finish().map(drop)
}

/// [`run_pass`] for the dense estimator, batches in `order` (any order is allowed there).
fn run_ages_pass(
    ages: &mut IdleAges<'_>,
    pass: &[Batch],
    reversed: bool,
) -> Result<(), WorkingSetError> {
    let mut at = 0;
    let mut batches = Vec::new();
    for &(gap, pages, young) in pass {
        at += gap;
        batches.push((range(at, pages), young));
        at += pages;
    }
    if reversed {
        batches.reverse();
    }
    let mut p = ages.pass();
    for (r, young) in batches {
        p.observe(r, young)?;
    }
    p.finish()
}

proptest! {
    #![proptest_config(config())]

    /// The dense estimator with one page per slot is the same model as the runs: per page,
    /// the same ages, idle pages, ranges and bins, whatever the order of the batches.
    #[test]
    fn idle_ages_match_the_per_page_model(passes in passes(), edges in prop::collection::btree_set(0u32..10, 0..4), reversed in any::<bool>()) {
        // As many slots as the longest pass reaches.
        let reach = passes.iter().map(|p| p.iter().map(|&(gap, pages, _)| gap + pages).sum::<u64>()).max().unwrap_or(0);
        let mut storage = vec![0u8; 2 * (reach as usize).max(1)];
        let mut ages = IdleAges::new(&mut storage, VirtAddr(0), PageSize::Size4KiB, 1).unwrap();
        let mut model = BTreeMap::new();
        for pass in &passes {
            run_ages_pass(&mut ages, pass, reversed).unwrap();
            model = naive_pass(&model, pass);
            let got: BTreeMap<u64, u32> = ages.ages().map(|(a, age)| (a.0 >> 12, age)).collect();
            prop_assert_eq!(&got, &model);
            for min_age in 0..4 {
                let idle = model.values().filter(|&&a| a >= min_age).count() as u64;
                prop_assert_eq!(ages.idle_pages(min_age), idle);
                prop_assert_eq!(ages.idle_ranges(min_age).map(|r| r.pages).sum::<u64>(), idle);
            }
            let edges: Vec<u32> = edges.iter().copied().collect();
            let mut bins = vec![0; edges.len() + 1];
            ages.bins(&edges, &mut bins).unwrap();
            for (k, &count) in bins.iter().enumerate() {
                let lo = if k == 0 { 0 } else { edges[k - 1] };
                let hi = edges.get(k).copied().unwrap_or(u32::MAX);
                let want = model.values().filter(|&&a| a >= lo && (k == edges.len() || a < hi)).count();
                prop_assert_eq!(count, want as u64, "bin {}", k);
            }
        }
        prop_assert_eq!(ages.passes(), passes.len() as u64);
    }

    #[test]
    fn estimator_matches_the_per_page_model(passes in passes(), edges in prop::collection::btree_set(0u32..10, 0..4)) {
        let mut slots = vec![IdleRun::EMPTY; 2 * 24];
        let mut ws = WorkingSet::new(&mut slots).unwrap();
        let mut model = BTreeMap::new();
        for pass in &passes {
            run_pass(&mut ws, pass).unwrap();
            model = naive_pass(&model, pass);
            prop_assert_eq!(per_page(&ws), model.clone());
            // Runs are sorted, disjoint, non-empty and maximal.
            for w in ws.runs().windows(2) {
                prop_assert!(w[0].first_page() + w[0].pages() <= w[1].first_page());
                prop_assert!(w[0].first_page() + w[0].pages() < w[1].first_page() || w[0].age() != w[1].age());
            }
            for min_age in 0..4 {
                let idle = model.values().filter(|&&a| a >= min_age).count() as u64;
                prop_assert_eq!(ws.idle_pages(min_age), idle);
                prop_assert_eq!(ws.idle_ranges(min_age).map(|r| r.pages).sum::<u64>(), idle);
            }
            let edges: Vec<u32> = edges.iter().copied().collect();
            let mut bins = vec![0; edges.len() + 1];
            ws.bins(&edges, &mut bins).unwrap();
            for (k, &count) in bins.iter().enumerate() {
                let lo = if k == 0 { 0 } else { edges[k - 1] };
                let hi = edges.get(k).copied().unwrap_or(u32::MAX);
                let want = model.values().filter(|&&a| a >= lo && (k == edges.len() || a < hi)).count();
                prop_assert_eq!(count, want as u64, "bin {}", k);
            }
        }
        prop_assert_eq!(ws.passes(), passes.len() as u64);
    }

    #[test]
    fn a_failed_pass_changes_nothing(passes in passes(), cap in 1usize..6) {
        let mut slots = vec![IdleRun::EMPTY; 2 * cap];
        let mut ws = WorkingSet::new(&mut slots).unwrap();
        for pass in &passes {
            let before: Vec<IdleRun> = ws.runs().to_vec();
            let done = ws.passes();
            match run_pass(&mut ws, pass) {
                Ok(()) => prop_assert!(ws.runs().len() <= cap),
                Err(e) => {
                    prop_assert_eq!(e, WorkingSetError::Capacity { capacity: cap });
                    prop_assert_eq!(ws.runs(), &before[..]);
                    prop_assert_eq!(ws.passes(), done);
                }
            }
        }
    }
}

#[test]
fn bad_input_is_an_error_and_spoils_only_the_pass() {
    assert_eq!(
        WorkingSet::new(&mut [IdleRun::EMPTY]).err(),
        Some(WorkingSetError::StorageTooSmall { len: 1 })
    );
    let mut slots = [IdleRun::EMPTY; 8];
    let mut ws = WorkingSet::new(&mut slots).unwrap();
    run_pass(&mut ws, &[(0, 4, true)]).unwrap();
    let kept = ws.runs().to_vec();
    let bad = [
        (
            range(8, 0),
            WorkingSetError::BadRange {
                start: VirtAddr(8 << 12),
            },
        ),
        (
            PageRange::new(VirtAddr(0x1001), 1, PageSize::Size4KiB),
            WorkingSetError::BadRange {
                start: VirtAddr(0x1001),
            },
        ),
        (
            PageRange::new(VirtAddr(!0xfff), 2, PageSize::Size4KiB),
            WorkingSetError::BadRange {
                start: VirtAddr(!0xfff),
            },
        ),
        (
            PageRange::new(VirtAddr(1 << 16), 1, PageSize::Size64KiB),
            WorkingSetError::MixedPageSizes {
                expected: PageSize::Size4KiB,
                found: PageSize::Size64KiB,
            },
        ),
        (
            range(1, 1),
            WorkingSetError::OutOfOrder {
                start: VirtAddr(1 << 12),
            },
        ),
    ];
    for (r, err) in bad {
        let mut p = ws.pass();
        p.observe(range(1, 2), false).unwrap();
        assert_eq!(p.observe(r, false), Err(err), "{r:?}");
        // Spoiled: later batches and the finish return the first error.
        assert_eq!(p.observe(range(100, 1), false), Err(err));
        assert_eq!(p.finish(), Err(err));
        assert_eq!(ws.runs(), &kept[..]);
    }
    let mut out = [0; 2];
    assert!(ws.bins(&[2, 2], &mut [0; 3]).is_err());
    assert!(ws.bins(&[2], &mut [0; 3]).is_err());
    ws.bins(&[1], &mut out).unwrap();
    assert_eq!(out, [4, 0]);
}

/// A guest's memory through real stage-2 tables: after a phase that touches a set of pages
/// and an aging pass, the pages idle for a pass are exactly the mapped pages it did not
/// touch, and a batch is one run however many pages it maps.
fn guest_phases<F: PteFormat>(f: F, folio_entries: usize) {
    let len = 64;
    let (entries, entries2, entries3) = (storage(len), storage(len), storage(len));
    // The same guest three times: runs fed by age_batches, one age per entry by age_table,
    // one age per page by age_table.
    let t = table(f, &entries);
    let t2 = table(f, &entries2);
    let t3 = table(f, &entries3);
    let step = t.frames_per_entry();
    let rw = Prot {
        write: true,
        ..Prot::default()
    };
    let folios: Vec<FrameRange> = (0..len / folio_entries)
        .filter(|n| n % 5 != 3) // a few holes: unmapped guest memory
        .map(|n| {
            let i = n * folio_entries;
            let pfn = (1 << 20) + (i as u64) * step;
            map(&t2, i, pfn, folio_entries, rw);
            map(&t3, i, pfn, folio_entries, rw);
            let mut folio = map(&t, i, pfn, folio_entries, rw);
            folio.pages *= step;
            folio
        })
        .collect();
    let mut slots = vec![IdleRun::EMPTY; 2 * len];
    let mut ws = WorkingSet::new(&mut slots).unwrap();
    let mut age_storage = vec![0u8; 2 * len];
    let mut ages = IdleAges::new(&mut age_storage, t2.base(), f.page_size(), step).unwrap();
    let mut fine_storage = vec![0u8; 2 * len * step as usize];
    let mut fine = IdleAges::new(&mut fine_storage, t3.base(), f.page_size(), 1).unwrap();
    let phases: [&[usize]; 3] = [&[0, 1, 2, 20, 40], &[1, 40, 41, 63], &[]];
    for touched in phases {
        for &i in touched {
            let _ = t.hw_access(i, Access::Write, i);
            let _ = t2.hw_access(i, Access::Write, i);
            let _ = t3.hw_access(i, Access::Write, i);
        }
        let mut pass = ws.pass();
        let mut tlb = CountingFlush::default();
        let stats = age_batches(
            &t,
            0..len,
            &lookup(&folios),
            FpbFlags::NONE,
            YoungOp::ClearFlush,
            &mut tlb,
            |r, y| {
                pass.observe(r, y).unwrap();
            },
        )
        .unwrap();
        pass.finish().unwrap();
        let mut pass = ages.pass();
        let mut tlb2 = CountingFlush::default();
        let stats2 = pass
            .age_table(
                &t2,
                0..len,
                &lookup(&folios),
                (FpbFlags::NONE, YoungOp::ClearFlush),
                &mut tlb2,
            )
            .unwrap();
        pass.finish().unwrap();
        assert_eq!((stats, tlb), (stats2, tlb2), "the same walk");
        // Per slot (an entry), the age of the run holding it, and the same pages tracked.
        for (addr, age) in ages.ages() {
            let page = addr.0 >> 12;
            let run = ws
                .runs()
                .iter()
                .find(|r| r.first_page() <= page && page < r.first_page() + r.pages());
            assert_eq!(run.map(IdleRun::age), Some(age), "{touched:?}");
        }
        assert_eq!(ages.tracked_pages(), ws.tracked_pages());
        // A page per slot where entries map more: age_table falls back to observe per batch,
        // and the ages per page are the same (natively: a slot per page of 2 MiB leaves is
        // 32 Ki slots, minutes under Miri).
        if !cfg!(miri) {
            let mut pass = fine.pass();
            let mut tlb3 = CountingFlush::default();
            pass.age_table(
                &t3,
                0..len,
                &lookup(&folios),
                (FpbFlags::NONE, YoungOp::ClearFlush),
                &mut tlb3,
            )
            .unwrap();
            pass.finish().unwrap();
            for min_age in 0..4 {
                assert_eq!(
                    fine.idle_pages(min_age),
                    ws.idle_pages(min_age),
                    "{touched:?}"
                );
            }
        }
        // The folios the phase touched are young; every other mapped folio is idle.
        let folio_of = |i: usize| i / folio_entries;
        let touched_folios: std::collections::BTreeSet<usize> = touched
            .iter()
            .copied()
            .filter(|&i| t.raw(i).is_ok_and(|e| f.is_present(e)))
            .map(folio_of)
            .collect();
        let mapped_pages = folios.len() as u64 * folio_entries as u64 * step;
        let young_pages = touched_folios.len() as u64 * folio_entries as u64 * step;
        assert_eq!(ws.tracked_pages(), mapped_pages);
        assert_eq!(ws.idle_pages(1), mapped_pages - young_pages, "{touched:?}");
        for r in ws.idle_ranges(1) {
            let i = ((r.start.0 - BASE.0) >> f.entry_shift()) as usize;
            assert!(!touched_folios.contains(&folio_of(i)));
        }
    }
    // Two idle phases for every folio the second phase did not touch.
    let twice_idle = ws.idle_pages(2);
    assert!(twice_idle > 0 && twice_idle < ws.tracked_pages());
}

#[test]
fn guest_idle_set_is_what_the_guest_did_not_touch() {
    guest_phases(Arm64Stage2::G4K, 1);
    guest_phases(Arm64Stage2::G4K, 16);
    guest_phases(Ept::L2M, 1);
    guest_phases(Ept::L4K, 4);
}

/// The three layout changes by name: a folio that splits keeps its age in every part, one
/// that folds is as young as its youngest part, and unmapped pages are forgotten.
#[test]
fn split_fold_and_unmap() {
    let mut slots = [IdleRun::EMPTY; 64];
    let mut ws = WorkingSet::new(&mut slots).unwrap();
    let ages = |ws: &WorkingSet<'_>| per_page(ws).into_values().collect::<Vec<u32>>();
    // One 16-page folio, idle.
    run_pass(&mut ws, &[(0, 16, false)]).unwrap();
    assert_eq!(ages(&ws), [1; 16]);
    // Split into pages; page 3 was used.
    let split: Vec<Batch> = (0..16).map(|p| (0, 1, p == 3)).collect();
    run_pass(&mut ws, &split).unwrap();
    let mut want = [2; 16];
    want[3] = 0;
    assert_eq!(ages(&ws), want);
    // Folded back into one idle folio: as recently used as page 3.
    run_pass(&mut ws, &[(0, 16, false)]).unwrap();
    assert_eq!(ages(&ws), [1; 16]);
    assert_eq!(ws.runs().len(), 1);
    // Pages 8..16 unmapped: only 0..8 reported, and only they are tracked.
    run_pass(&mut ws, &[(0, 8, false)]).unwrap();
    assert_eq!((ws.tracked_pages(), ws.idle_pages(2)), (8, 8));
}
