//! The batched paths against the per-entry reference over arbitrary tables, for every format:
//! arm64 stage 1 and stage 2 in all three granules, x86-64, and EPT and NPT with 4 KiB, 2 MiB
//! and 1 GiB leaves: same young results, same final tables, nothing outside the expanded range
//! touched, dirty state never changed, the access flag cleared exactly on the expanded range.

mod common;

use common::{config, lookup, snapshot, storage, table, tlb};
use proptest::prelude::*;
use pte_batch::format::{Arm64, Arm64Stage2, Ept, Npt};
use pte_batch::mm_types::{FrameRange, Pfn};
use pte_batch::{
    Access, AtomicU64, FpbFlags, Prot, PteFormat, PteTable, X86_64, YoungOp, age_batches,
    age_range, folio_pte_batch, reference,
};

/// One folio of the layout: a gap before it, its size, whether its frames are block aligned
/// like its addresses, and its protection.
#[derive(Clone, Debug)]
struct FolioSpec {
    gap: usize,
    size: usize,
    aligned: bool,
    prot: Prot,
}

/// A table to build: format, folios, then hardware accesses and partial unmaps.
#[derive(Clone, Debug)]
struct Spec {
    format: u8,
    blocks: usize,
    folios: Vec<FolioSpec>,
    accesses: Vec<(usize, bool, usize)>,
    unmaps: Vec<(usize, usize)>,
}

fn folio_spec() -> impl Strategy<Value = FolioSpec> {
    let size = prop_oneof![1usize..=4, Just(0), Just(1000), 1usize..=300];
    (0usize..4, size, any::<bool>(), any::<[bool; 5]>()).prop_map(
        |(gap, size, aligned, [write, young, dirty, user, exec])| FolioSpec {
            gap,
            size,
            aligned,
            prot: Prot {
                write,
                young,
                dirty,
                user,
                exec,
                attrs: 0,
            },
        },
    )
}

fn spec() -> impl Strategy<Value = Spec> {
    let max = if cfg!(miri) { 3 } else { 12 };
    (
        0u8..FORMATS,
        1usize..=4,
        prop::collection::vec(folio_spec(), 1..max),
        prop::collection::vec((any::<usize>(), any::<bool>(), any::<usize>()), 0..max * 4),
        prop::collection::vec((any::<usize>(), 1usize..4), 0..3),
    )
        .prop_map(|(format, blocks, folios, accesses, unmaps)| Spec {
            format,
            blocks,
            folios,
            accesses,
            unmaps,
        })
}

/// Table length for a format: `blocks` blocks, at least 32 entries, within a table page.
fn len_of<F: PteFormat>(f: F, blocks: usize) -> usize {
    let cont = f.cont_ptes();
    let per_block = if cont == 1 { 32 } else { cont };
    let cap = if cfg!(miri) { 256 } else { f.ptes_per_table() };
    (per_block * blocks).min(cap.max(cont))
}

/// Builds the table `spec` describes into `t` (whose entries are empty) and returns its folios.
fn build<F: PteFormat>(t: &PteTable<'_, F>, spec: &Spec) -> Vec<FrameRange> {
    let f = t.format();
    let cont = f.cont_ptes() as u64;
    let size_of = |s: usize| match s {
        0 => f.cont_ptes(),
        1000 => 2 * f.cont_ptes(),
        s => s,
    };
    let mut folios = Vec::new();
    let mut at = 0usize;
    for (n, fs) in spec.folios.iter().enumerate() {
        at += fs.gap;
        let size = size_of(fs.size).min(t.len().saturating_sub(at));
        if size == 0 {
            break;
        }
        // Frames far apart per folio, congruent to the address modulo a block if aligned;
        // a leaf larger than a frame maps `step` of them from a frame aligned to it.
        let step = t.frames_per_entry();
        let entry = (n as u64 + 1) * 4096 * cont + at as u64 + u64::from(!fs.aligned);
        let pfn = Pfn(entry * step);
        t.set_ptes(at, pfn, size, fs.prot).unwrap();
        folios.push(FrameRange::new(pfn, size as u64 * step));
        at += size;
    }
    for &(i, write, pick) in &spec.accesses {
        let access = if write { Access::Write } else { Access::Read };
        // Faults (empty entries, writes to read-only pages) change nothing.
        let _ = t.hw_access(i % t.len(), access, pick);
    }
    for &(i, nr) in &spec.unmaps {
        let i = i % t.len();
        let _ = t.unmap_ptes(i, nr.min(t.len() - i), &mut tlb()).unwrap();
    }
    folios
}

/// Two copies of the table `spec` describes (storage for each) and its folios.
fn twins<F: PteFormat>(f: F, spec: &Spec) -> (Vec<AtomicU64>, Vec<AtomicU64>, Vec<FrameRange>) {
    let len = len_of(f, spec.blocks);
    let (sa, sb) = (storage(len), storage(len));
    let folios = build(&table(f, &sa), spec);
    build(&table(f, &sb), spec);
    (sa, sb, folios)
}

/// Present entries from a folio, for picking batches.
fn batch_starts<F: PteFormat>(t: &PteTable<'_, F>, folios: &[FrameRange]) -> Vec<(usize, usize)> {
    let f = t.format();
    (0..t.len())
        .filter_map(|i| {
            let e = t.raw(i).unwrap();
            let folio = folios
                .iter()
                .find(|fo| f.is_present(e) && fo.contains(f.pfn(e)))?;
            let left = ((folio.start.0 + folio.pages - f.pfn(e).0) / t.frames_per_entry()) as usize;
            Some((i, left.min(t.len() - i)))
        })
        .collect()
}

fn flags_of(bits: u8) -> FpbFlags {
    [
        FpbFlags::RESPECT_DIRTY,
        FpbFlags::RESPECT_WRITE,
        FpbFlags::MERGE_YOUNG_DIRTY,
        FpbFlags::IGNORE_CONT,
    ]
    .into_iter()
    .enumerate()
    .filter(|(n, _)| bits & (1 << n) != 0)
    .fold(FpbFlags::NONE, |acc, (_, flag)| acc | flag)
}

/// The batch property: pick a batch as a caller would (folio_pte_batch from a present entry,
/// then any prefix), clear it batched on one copy and per entry on another.
fn check_batch<F: PteFormat>(f: F, spec: &Spec, pick: usize, prefix: usize, flags: u8) {
    let (sa, sb, folios) = twins(f, spec);
    let (a, b) = (table(f, &sa), table(f, &sb));
    let len = a.len();
    let before = snapshot(&a);
    assert_eq!(before, snapshot(&b));
    let starts = batch_starts(&a, &folios);
    if starts.is_empty() {
        return;
    }
    let (index, max_nr) = starts[pick % starts.len()];
    let flags = flags_of(flags);
    let batch = folio_pte_batch(&a, index, max_nr, flags).unwrap();
    // folio_pte_batch with its contpte hint agrees with comparing every entry.
    assert_eq!(
        batch,
        reference::folio_pte_batch(&a, index, max_nr, flags).unwrap()
    );
    let nr = 1 + prefix % batch.nr;
    let expanded = a.young_range(index, nr).unwrap();
    assert!(expanded.start <= index && index + nr <= expanded.end);
    let dirty_before: Vec<bool> = (0..len).map(|i| f.is_dirty(a.get(i).unwrap())).collect();

    let token = a.clear_flush_young_ptes(index, nr).unwrap();
    let mut per_entry_flushes = tlb();
    let young_ref =
        reference::clear_flush_young_ptes(&b, index, nr, &mut per_entry_flushes).unwrap();
    assert_eq!(token.young(), young_ref);
    let young_expected = expanded.clone().any(|i| f.is_young(before[i]));
    assert_eq!(token.young(), young_expected);
    // One invalidate covering the expanded range, only when young and the format flushes.
    match token.range() {
        Some(r) => {
            assert!(token.young() && f.flushes_young());
            assert_eq!(
                (r.start, r.pages),
                (
                    a.va_of(expanded.start).unwrap(),
                    expanded.len() as u64 * a.frames_per_entry()
                )
            );
            assert!(per_entry_flushes.flushes >= 1);
        }
        None => assert!(!token.young() || !f.flushes_young()),
    }
    let _ = token.skip_flush();

    let after = snapshot(&a);
    assert_eq!(
        after,
        snapshot(&b),
        "batched and per-entry final tables differ"
    );
    for i in 0..len {
        if expanded.contains(&i) {
            assert_eq!(after[i], f.mkold(before[i]), "entry {i} in {expanded:?}");
        } else {
            assert_eq!(
                after[i], before[i],
                "entry {i} outside {expanded:?} changed"
            );
        }
        assert_eq!(
            f.is_dirty(a.get(i).unwrap()),
            dirty_before[i],
            "dirty of {i}"
        );
    }
}

/// The walk property: the batched aging walk and the per-entry one report the same folios as
/// young, leave the same table, and the batched one never does more entry updates.
fn check_walk<F: PteFormat>(f: F, spec: &Spec, from: usize, flags: u8) {
    let (sa, sb, folios) = twins(f, spec);
    let (a, b) = (table(f, &sa), table(f, &sb));
    let len = a.len();
    let start = from % len;
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    let flags = flags_of(flags);
    let stats_a = age_range(
        &a,
        start..len,
        &lookup(&folios),
        flags,
        &mut tlb(),
        |fo, y| {
            seen_a.push((fo, y));
        },
    )
    .unwrap();
    let stats_b = reference::age_range(&b, start..len, &lookup(&folios), &mut tlb(), |fo, y| {
        seen_b.push((fo, y));
    })
    .unwrap();
    assert_eq!(seen_a, seen_b);
    assert_eq!(snapshot(&a), snapshot(&b));
    assert_eq!(
        (stats_a.folios, stats_a.young_folios),
        (stats_b.folios, stats_b.young_folios)
    );
    assert_eq!(stats_a.entries, stats_b.entries);
    assert!(stats_a.entry_updates <= stats_b.entry_updates);
    assert!(stats_a.batches <= stats_b.batches);
    for i in start..len {
        assert!(
            !f.is_young(a.raw(i).unwrap()),
            "entry {i} still young after aging"
        );
    }
}

/// KVM's aging, batched against per entry, for one of the three operations: the batches
/// cover exactly the entries the per-entry walk reports, each batch is young exactly when
/// one of its entries was reported young, the tables end equal, and a test writes nothing.
fn check_kvm<F: PteFormat>(f: F, spec: &Spec, from: usize, flags: u8, op: u8) {
    let op = [YoungOp::Test, YoungOp::Clear, YoungOp::ClearFlush][usize::from(op % 3)];
    let (sa, sb, folios) = twins(f, spec);
    let (a, b) = (table(f, &sa), table(f, &sb));
    let len = a.len();
    let before = snapshot(&a);
    let start = from % len;
    let (mut batches, mut entries) = (Vec::new(), Vec::new());
    let (mut tlb_a, mut tlb_b) = (tlb(), tlb());
    let flags = flags_of(flags);
    let stats_a = age_batches(
        &a,
        start..len,
        &lookup(&folios),
        flags,
        op,
        &mut tlb_a,
        |r, y| {
            batches.push((r, y));
        },
    )
    .unwrap();
    let stats_b =
        reference::age_batches(&b, start..len, &lookup(&folios), op, &mut tlb_b, |r, y| {
            entries.push((r, y));
        })
        .unwrap();
    assert_eq!(
        snapshot(&a),
        snapshot(&b),
        "batched and per-entry final tables differ"
    );
    assert_eq!(
        (stats_a.entries, stats_a.folios),
        (stats_b.entries, stats_b.folios)
    );
    assert!(stats_a.batches <= stats_b.batches);
    let mut per_entry = entries.iter().peekable();
    for (range, young) in batches {
        let end = range.end().unwrap();
        let mut any = false;
        let mut pages = 0;
        while let Some((r, y)) = per_entry.next_if(|(r, _)| r.start < end) {
            assert!(r.start >= range.start, "{r:?} outside the batches");
            any |= y;
            pages += r.pages;
        }
        assert_eq!(pages, range.pages, "batch {range:?} and the entries in it");
        assert_eq!(young, any, "batch {range:?}");
    }
    assert!(per_entry.next().is_none(), "entries outside every batch");
    match op {
        YoungOp::Test => assert_eq!(snapshot(&a), before, "a test wrote"),
        YoungOp::Clear => assert_eq!((tlb_a.flushes, tlb_b.flushes), (0, 0)),
        YoungOp::ClearFlush => {
            assert_eq!(tlb_a.flushes > 0, tlb_b.flushes > 0);
            assert!(tlb_a.flushes == 0 || f.flushes_young());
        }
    }
}

/// Formats [`for_format!`] picks from.
const FORMATS: u8 = 13;

macro_rules! for_format {
    ($id:expr, $check:ident($($arg:expr),*)) => {
        match $id {
            0 => $check(Arm64::G4K, $($arg),*),
            1 => $check(Arm64::G16K, $($arg),*),
            2 => $check(Arm64::G64K, $($arg),*),
            3 => $check(Arm64Stage2::G4K, $($arg),*),
            4 => $check(Arm64Stage2::G16K, $($arg),*),
            5 => $check(Arm64Stage2::G64K, $($arg),*),
            6 => $check(Ept::L4K, $($arg),*),
            7 => $check(Ept::L2M, $($arg),*),
            8 => $check(Ept::L1G, $($arg),*),
            9 => $check(Npt::L4K, $($arg),*),
            10 => $check(Npt::L2M, $($arg),*),
            11 => $check(Npt::L1G, $($arg),*),
            _ => $check(X86_64, $($arg),*),
        }
    };
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn batched_clear_matches_per_entry(
        spec in spec(), pick in any::<usize>(), prefix in any::<usize>(), flags in 0u8..16,
    ) {
        for_format!(spec.format, check_batch(&spec, pick, prefix, flags));
    }

    #[test]
    fn batched_kvm_aging_matches_per_entry(
        spec in spec(), from in 0usize..64, flags in 0u8..16, op in 0u8..3,
    ) {
        for_format!(spec.format, check_kvm(&spec, from, flags, op));
    }

    #[test]
    fn batched_aging_matches_per_entry(spec in spec(), from in 0usize..64, flags in 0u8..16) {
        for_format!(spec.format, check_walk(&spec, from, flags));
    }
}
