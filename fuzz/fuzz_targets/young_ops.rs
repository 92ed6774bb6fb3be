//! Arbitrary tables of every format (arm64 stage 1 and 2 in three granules, x86-64, EPT and
//! NPT with three leaf sizes) and operation sequences (map, unmap, write-protect, hardware
//! accesses, batched young clears, aging walks, KVM's aging operations) on two tables in
//! lockstep: the batched paths on one, the per-entry reference on the other. After every
//! operation both tables are identical and every contpte block is well formed.
#![no_main]

use arbitrary::Arbitrary;
use core::sync::atomic::Ordering::Relaxed;
use libfuzzer_sys::fuzz_target;
use pte_batch::format::{Arm64, Arm64Stage2, Ept, Npt};
use pte_batch::mm_types::{FrameRange, Pfn, VirtAddr};
use pte_batch::{
    Access, AtomicU64, CountingFlush, FpbFlags, Prot, PteFormat, PteTable, X86_64, age_batches,
    age_range, folio_pte_batch, reference,
};

#[derive(Arbitrary, Debug)]
struct Input {
    format: u8,
    blocks: u8,
    ops: Vec<YoungOp>,
}

#[derive(Arbitrary, Debug)]
enum YoungOp {
    Map {
        index: u16,
        nr: u16,
        aligned: bool,
        prot: u8,
    },
    Unmap {
        index: u16,
        nr: u8,
    },
    Wrprotect {
        index: u16,
        nr: u8,
    },
    Access {
        index: u16,
        write: bool,
        pick: u8,
    },
    Clear {
        index: u16,
        prefix: u16,
        flags: u8,
    },
    Age {
        start: u16,
        flags: u8,
    },
    Kvm {
        start: u16,
        flags: u8,
        op: u8,
    },
}

fn flags_of(bits: u8) -> FpbFlags {
    let all = [
        FpbFlags::RESPECT_DIRTY,
        FpbFlags::RESPECT_WRITE,
        FpbFlags::MERGE_YOUNG_DIRTY,
        FpbFlags::IGNORE_CONT,
    ];
    (0..4)
        .filter(|n| bits & (1 << n) != 0)
        .fold(FpbFlags::NONE, |acc, n| acc | all[n])
}

fn snapshot<F: PteFormat>(t: &PteTable<'_, F>) -> Vec<u64> {
    (0..t.len()).map(|i| t.raw(i).unwrap()).collect()
}

/// Every contpte entry sits in a block of contpte entries mapping consecutive, block-aligned
/// frames with equal attributes up to the access flag and dirty state.
fn check_blocks<F: PteFormat>(t: &PteTable<'_, F>) {
    let f = t.format();
    let cont = f.cont_ptes();
    if cont == 1 {
        return;
    }
    let e = snapshot(t);
    for start in (0..e.len()).step_by(cont) {
        let block = &e[start..start + cont];
        if !block.iter().any(|&p| f.is_cont(p)) {
            continue;
        }
        let key = |p: u64| f.mkclean(f.mkold(f.with_pfn(p, Pfn(0))));
        assert_eq!(
            f.pfn(block[0]).0 % cont as u64,
            0,
            "block {start} misaligned"
        );
        for (n, &p) in block.iter().enumerate() {
            assert!(f.is_cont(p) && f.is_present(p), "block {start} entry {n}");
            assert_eq!(Some(f.pfn(p)), f.pfn(block[0]).checked_add(n as u64));
            assert_eq!(key(p), key(block[0]));
        }
    }
}

fn run<F: PteFormat>(f: F, input: &Input) {
    let cont = f.cont_ptes();
    let per_block = if cont == 1 { 32 } else { cont };
    let len = (per_block * (1 + usize::from(input.blocks % 4))).min(f.ptes_per_table());
    let base = VirtAddr(1 << 40);
    let (sa, sb): (Vec<AtomicU64>, Vec<AtomicU64>) = (
        (0..len).map(|_| AtomicU64::new(0)).collect(),
        (0..len).map(|_| AtomicU64::new(0)).collect(),
    );
    let a = PteTable::new(f, base, &sa).unwrap();
    let b = PteTable::new(f, base, &sb).unwrap();
    let mut folios: Vec<FrameRange> = Vec::new();
    let (mut ta, mut tb) = (CountingFlush::default(), CountingFlush::default());
    for (n, op) in input.ops.iter().enumerate().take(64) {
        let at = |i: u16| usize::from(i) % len;
        match *op {
            YoungOp::Map {
                index,
                nr,
                aligned,
                prot,
            } => {
                let index = at(index);
                let nr = 1 + usize::from(nr) % (len - index);
                // Frames unique to this folio, block aligned like the address if `aligned`; a
                // leaf larger than a frame maps `step` of them from a frame aligned to it.
                let step = a.frames_per_entry();
                let shift = if step > 1 { 10 } else { 20 };
                let entry = ((n as u64 + 1) << shift) + index as u64 + u64::from(!aligned);
                let pfn = Pfn(entry * step);
                let bit = |k: u8| prot & (1 << k) != 0;
                let prot = Prot {
                    write: bit(0),
                    young: bit(1),
                    dirty: bit(2),
                    user: bit(3),
                    exec: bit(4),
                    attrs: 0,
                };
                let ra = a.set_ptes(index, pfn, nr, prot);
                assert_eq!(ra, b.set_ptes(index, pfn, nr, prot));
                if ra.is_ok() {
                    folios.push(FrameRange::new(pfn, nr as u64 * step));
                }
            }
            YoungOp::Unmap { index, nr } => {
                let index = at(index);
                let nr = 1 + usize::from(nr) % (len - index);
                let ua = a.unmap_ptes(index, nr, &mut ta).unwrap();
                assert_eq!(ua, b.unmap_ptes(index, nr, &mut tb).unwrap());
            }
            YoungOp::Wrprotect { index, nr } => {
                let index = at(index);
                let nr = 1 + usize::from(nr) % (len - index);
                a.wrprotect_ptes(index, nr, &mut ta).unwrap();
                b.wrprotect_ptes(index, nr, &mut tb).unwrap();
            }
            YoungOp::Access { index, write, pick } => {
                let access = if write { Access::Write } else { Access::Read };
                let (index, pick) = (at(index), usize::from(pick));
                assert_eq!(
                    a.hw_access(index, access, pick),
                    b.hw_access(index, access, pick)
                );
            }
            YoungOp::Clear {
                index,
                prefix,
                flags,
            } => {
                let index = at(index);
                let pte = a.raw(index).unwrap();
                let Some(folio) = folios
                    .iter()
                    .find(|fo| f.is_present(pte) && fo.contains(f.pfn(pte)))
                else {
                    continue;
                };
                let left =
                    ((folio.start.0 + folio.pages - f.pfn(pte).0) / a.frames_per_entry()) as usize;
                let max_nr = left.min(len - index);
                let flags = flags_of(flags);
                let batch = folio_pte_batch(&a, index, max_nr, flags).unwrap();
                assert_eq!(
                    batch,
                    reference::folio_pte_batch(&a, index, max_nr, flags).unwrap()
                );
                let nr = 1 + usize::from(prefix) % batch.nr;
                let expanded = a.young_range(index, nr).unwrap();
                let before = snapshot(&a);
                let young = a.test_and_clear_young_ptes(index, nr).unwrap();
                assert_eq!(
                    young,
                    reference::test_and_clear_young_ptes(&b, index, nr).unwrap()
                );
                assert_eq!(young, expanded.clone().any(|i| f.is_young(before[i])));
                for (i, (&old, new)) in before
                    .iter()
                    .zip(sa.iter().map(|e| e.load(Relaxed)))
                    .enumerate()
                {
                    let want = if expanded.contains(&i) {
                        f.mkold(old)
                    } else {
                        old
                    };
                    assert_eq!(new, want, "entry {i}");
                }
            }
            YoungOp::Age { start, flags } => {
                let start = at(start);
                let lookup = |pfn| folios.iter().copied().find(|fo| fo.contains(pfn));
                let (mut ya, mut yb) = (Vec::new(), Vec::new());
                let sa = age_range(
                    &a,
                    start..len,
                    &lookup,
                    flags_of(flags),
                    &mut ta,
                    |fo, y| ya.push((fo, y)),
                )
                .unwrap();
                let sb = reference::age_range(&b, start..len, &lookup, &mut tb, |fo, y| {
                    yb.push((fo, y))
                })
                .unwrap();
                assert_eq!(ya, yb);
                assert_eq!(sa.young_folios, sb.young_folios);
                assert!(sa.entry_updates <= sb.entry_updates);
            }
            YoungOp::Kvm { start, flags, op } => {
                let start = at(start);
                let op = [
                    pte_batch::YoungOp::Test,
                    pte_batch::YoungOp::Clear,
                    pte_batch::YoungOp::ClearFlush,
                ][usize::from(op % 3)];
                let lookup = |pfn| folios.iter().copied().find(|fo| fo.contains(pfn));
                let (mut batches, mut entries) = (Vec::new(), Vec::new());
                let before = snapshot(&a);
                age_batches(
                    &a,
                    start..len,
                    &lookup,
                    flags_of(flags),
                    op,
                    &mut ta,
                    |r, y| batches.push((r, y)),
                )
                .unwrap();
                reference::age_batches(&b, start..len, &lookup, op, &mut tb, |r, y| {
                    entries.push((r, y))
                })
                .unwrap();
                // Each batch is young exactly when an entry in it was, and covers exactly
                // the entries the per-entry walk reported.
                let mut per_entry = entries.iter().peekable();
                for (r, young) in batches {
                    let end = r.end().unwrap();
                    let (mut any, mut pages) = (false, 0);
                    while let Some((e, y)) = per_entry.next_if(|(e, _)| e.start < end) {
                        assert!(e.start >= r.start);
                        any |= y;
                        pages += e.pages;
                    }
                    assert_eq!((young, pages), (any, r.pages), "batch {r:?}");
                }
                assert!(per_entry.next().is_none());
                if op == pte_batch::YoungOp::Test {
                    assert_eq!(snapshot(&a), before, "a test wrote");
                }
            }
        }
        // The storage directly: every operation compares both tables whole.
        let differs = sa
            .iter()
            .zip(&sb)
            .position(|(x, y)| x.load(Relaxed) != y.load(Relaxed));
        assert!(differs.is_none(), "after {op:?}: entry {differs:?} differs");
        if n % BLOCK_CHECK_INTERVAL == BLOCK_CHECK_INTERVAL - 1 {
            check_blocks(&a);
        }
    }
    check_blocks(&a);
}

/// The contpte block invariants are checked every this many operations and at the end (the
/// two tables are compared after every operation).
const BLOCK_CHECK_INTERVAL: usize = 8;

fuzz_target!(|input: Input| {
    match input.format % 13 {
        0 => run(Arm64::G4K, &input),
        1 => run(Arm64::G16K, &input),
        2 => run(Arm64::G64K, &input),
        3 => run(Arm64Stage2::G4K, &input),
        4 => run(Arm64Stage2::G16K, &input),
        5 => run(Arm64Stage2::G64K, &input),
        6 => run(Ept::L4K, &input),
        7 => run(Ept::L2M, &input),
        8 => run(Ept::L1G, &input),
        9 => run(Npt::L4K, &input),
        10 => run(Npt::L2M, &input),
        11 => run(Npt::L1G, &input),
        _ => run(X86_64, &input),
    }
});
