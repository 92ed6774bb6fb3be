//! loom models (run with `RUSTFLAGS="--cfg loom"`, tests named `loom_*`): young clearing
//! racing the MMU's hardware access and dirty updates, and a negative control loom must
//! catch: a hardware thread (atomic read-modify-writes, as the MMU does) races the young
//! clear.

use loom::sync::Arc;
use loom::sync::atomic::AtomicBool;
use loom::thread;
use std::vec::Vec;

use crate::aging::{YoungOp, age_batches};
use crate::batch::FpbFlags;
use crate::flush::CountingFlush;
use crate::format::{Access, Arm64, Arm64Stage2, Ept, Npt, Prot, PteFormat, X86_64};
use crate::table::PteTable;
use loom::sync::atomic::{AtomicU64, Ordering};

use mm_types::{FrameRange, Pfn, VirtAddr};

const BASE: VirtAddr = VirtAddr(1 << 30);
const RW: Prot = Prot {
    write: true,
    young: false,
    dirty: false,
    user: false,
    exec: false,
    attrs: 0,
};

/// `len` entries mapping one clean, old folio.
fn mapped<F: PteFormat>(f: F, len: usize) -> Arc<Vec<AtomicU64>> {
    let entries: Vec<AtomicU64> = (0..len).map(|_| AtomicU64::new(0)).collect();
    PteTable::new(f, BASE, &entries)
        .unwrap()
        .set_ptes(0, Pfn(0), len, RW)
        .unwrap();
    Arc::new(entries)
}

/// The MMU writes through entry `index` (landing on `pick` of a block) and then says so;
/// `clear` runs concurrently. Whatever the interleaving: the write's dirty state survives,
/// the access is either reported young or still recorded, and it is reported young if the
/// clearing thread had seen it complete before clearing.
fn race<F: PteFormat + Send + Sync + 'static>(
    f: F,
    len: usize,
    index: usize,
    pick: usize,
    clear: fn(&PteTable<'_, F, AtomicU64>) -> bool,
) {
    loom::model(move || {
        let entries = mapped(f, len);
        let done = Arc::new(AtomicBool::new(false));
        let hw = {
            let (entries, done) = (entries.clone(), done.clone());
            thread::spawn(move || {
                let table = PteTable::new(f, BASE, &entries).unwrap();
                table.hw_access(index, Access::Write, pick).unwrap();
                done.store(true, Ordering::Release);
            })
        };
        let table = PteTable::new(f, BASE, &entries).unwrap();
        let saw_access = done.load(Ordering::Acquire);
        let young = clear(&table);
        hw.join().unwrap();
        if saw_access {
            assert!(
                young,
                "an access completed before the clear was not reported"
            );
        }
        let still_young = f.is_young(table.get(index).unwrap());
        assert!(young || still_young, "the access was lost");
        assert!(
            f.is_dirty(table.get(index).unwrap()),
            "the dirty update was lost"
        );
    });
}

#[test]
fn loom_batched_clear_keeps_hardware_updates_contpte() {
    // One 4 KiB-granule block: the write lands on entry 11, the batch starts mid-block.
    race(Arm64::G4K, 16, 3, 11, |t| {
        t.test_and_clear_young_ptes(2, 5).unwrap()
    });
}

#[test]
fn loom_per_entry_clear_keeps_hardware_updates() {
    race(X86_64, 2, 1, 0, |t| t.ptep_test_and_clear_young(1).unwrap());
    race(X86_64, 2, 1, 0, |t| {
        t.test_and_clear_young_ptes(0, 2).unwrap()
    });
}

#[test]
fn loom_flushing_clear_keeps_hardware_updates() {
    race(Arm64::G4K, 16, 0, 15, |t| {
        let token = t.clear_flush_young_ptes(0, 16).unwrap();
        token.skip_flush()
    });
}

#[test]
fn loom_stage2_batched_clear_keeps_hardware_updates() {
    // A guest's write through stage 2 (S2AP write set by hardware dirty management) while
    // its hypervisor ages a contiguous block.
    race(Arm64Stage2::G4K, 16, 3, 11, |t| {
        t.test_and_clear_young_ptes(2, 5).unwrap()
    });
}

/// A hypervisor's aging walk (KVM's `op`) over the whole table, mapped as one folio: whether
/// any batch was young.
fn age_all<F: PteFormat>(t: &PteTable<'_, F, AtomicU64>, op: YoungOp) -> bool {
    let pages = t.len() as u64 * t.frames_per_entry();
    let folio = |_| Some(FrameRange::new(Pfn(0), pages));
    let mut young = false;
    age_batches(
        t,
        0..t.len(),
        &folio,
        FpbFlags::NONE,
        op,
        &mut CountingFlush::default(),
        |_, y| young |= y,
    )
    .unwrap();
    young
}

#[test]
fn loom_stage2_aging_walk_keeps_hardware_updates() {
    // arm64 stage 2: the clear-and-flush walk over a contiguous block, the guest writing.
    race(Arm64Stage2::G4K, 16, 5, 9, |t| {
        age_all(t, YoungOp::ClearFlush)
    });
    // EPT with 2 MiB leaves and NPT: KVM's clear_young (no flush) walk.
    race(Ept::L2M, 2, 1, 0, |t| age_all(t, YoungOp::Clear));
    race(Npt::L4K, 2, 0, 0, |t| age_all(t, YoungOp::Clear));
}

/// A clear by plain load and store instead of compare-and-swap: it can overwrite the MMU's
/// update, and the model must find the interleaving where it does.
fn load_store_clear<F: PteFormat + Send + Sync + 'static>(format: F) {
    race(format, 1, 0, 0, |t| {
        let f = t.format();
        let slot = t.slot(0);
        let old = slot.load(Ordering::Relaxed);
        slot.store(f.mkold(old), Ordering::Relaxed);
        f.is_young(old)
    });
}

/// The negative control, stage 1.
#[test]
#[should_panic]
fn loom_load_store_clear_loses_a_hardware_update() {
    load_store_clear(X86_64);
}

/// The negative control, stage 2: the lost update is a guest's dirty state.
#[test]
#[should_panic]
fn loom_load_store_clear_loses_a_stage2_dirty_update() {
    load_store_clear(Arm64Stage2::G4K);
}

/// The negative control, EPT: a lost update is the accessed and dirty bits a guest's write
/// set through EPT.
#[test]
#[should_panic]
fn loom_load_store_clear_loses_an_ept_dirty_update() {
    load_store_clear(Ept::L4K);
}
