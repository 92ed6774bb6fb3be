//! The second CPU's steps: concurrent writes while core 0 ages, both cores allocating from
//! the one zone, and background zeroing on the second CPU while core 0 takes zeroed blocks.

use super::*;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use pte_batch::PteFormat;
use spin::Mutex;

pub(super) static SMP_GO: AtomicBool = AtomicBool::new(false);

pub(super) static SMP_WRITTEN: AtomicUsize = AtomicUsize::new(0);

/// Aging passes core 0 has started.
pub(super) static SMP_PASSES: AtomicU64 = AtomicU64::new(0);

/// Blocks one core hands the other to free: `(pfn, order, stamp)`.
pub(super) struct Mailbox {
    blocks: [(u64, u8, u64); 16],
    len: usize,
}

pub(super) static MAILBOX: [Mutex<Mailbox>; CPUS] = [const {
    Mutex::new(Mailbox {
        blocks: [(0, 0, 0); 16],
        len: 0,
    })
}; CPUS];

pub(super) static ALLOC_GO: AtomicBool = AtomicBool::new(false);

/// Core 1 finished its allocation rounds (and now zeroes in the background).
pub(super) static ROUNDS_DONE: AtomicBool = AtomicBool::new(false);

/// Core 0 is done with zeroed allocations: core 1 stops zeroing.
pub(super) static ZERO_STOP: AtomicBool = AtomicBool::new(false);

/// Frames core 1 cleared in the background.
pub(super) static ZEROED_BY_SECOND: AtomicU64 = AtomicU64::new(0);

/// Core 1 left the kernel's map: core 0 may free its tables.
pub(super) static ALLOC_DONE: AtomicBool = AtomicBool::new(false);

/// Per core: pages allocated, pages of its own freed, pages of the other core's freed.
pub(super) static ALLOCATED: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];

pub(super) static FREED_OWN: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];

pub(super) static FREED_REMOTE: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];

pub(super) const ALLOC_ROUNDS: u64 = 64;

/// The stamp `cpu` writes into the first word of the block it allocated in `round`.
pub(super) fn stamp(cpu: usize, round: u64) -> u64 {
    0x57a3_0000_0000_0000 | (cpu as u64) << 32 | round
}

/// One core's share of the SMP allocation step: each round allocates a zeroed block (orders
/// 0-4, 2 MiB every 16th round) on this core's lists and checks it,
/// stamps it, and either frees it or hands it to the other core; then frees what the other
/// core handed over, after checking its stamp (a block handed out twice would show).
pub(super) fn alloc_rounds<P: Platform>(cpu: usize) {
    let zone = zone::<P>();
    let clearer = clearer();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ cpu as u64);
    for round in 0..ALLOC_ROUNDS {
        let order = if round % 16 == 15 {
            9
        } else {
            (rng.next() % 5) as u8
        };
        let pfn = alloc_zeroed::<P>(zone, cpu, order, &clearer).0;
        ALLOCATED[cpu].fetch_add(1 << order, Ordering::Relaxed);
        let first = (pfn * PAGE) as *mut u64;
        // SAFETY: this core's freshly allocated block, identity-mapped.
        unsafe { first.write_volatile(stamp(cpu, round)) };
        let handed = round % 2 == 0 && {
            let mut other = MAILBOX[1 - cpu].lock();
            let len = other.len;
            let room = len < other.blocks.len();
            if room {
                other.blocks[len] = (pfn, order, stamp(cpu, round));
                other.len += 1;
            }
            room
        };
        if !handed {
            // SAFETY: this core's block, not handed over: nobody else has it.
            unsafe { free_block_of::<P>(zone, cpu, pfn, order) };
            FREED_OWN[cpu].fetch_add(1 << order, Ordering::Relaxed);
        }
        free_mail::<P>(zone, cpu);
    }
}

/// Frees every block in `cpu`'s mailbox on `cpu`, checking each one's stamp first.
pub(super) fn free_mail<P: Platform>(zone: &KernelZone, cpu: usize) {
    let mut mine = MAILBOX[cpu].lock();
    let len = mine.len;
    for &(pfn, order, stamp) in &mine.blocks[..len] {
        // SAFETY: the other core handed this block over and no longer touches it.
        let v = unsafe { ((pfn * PAGE) as *const u64).read_volatile() };
        if v != stamp {
            fail::<P>(
                Step::Smp,
                format_args!("cpu {cpu}: block {pfn:#x} reads {v:#x}, not the stamp {stamp:#x}"),
            );
        }
        // SAFETY: handed over by the other core, which no longer touches it.
        unsafe { free_block_of::<P>(zone, cpu, pfn, order) };
        FREED_REMOTE[cpu].fetch_add(1 << order, Ordering::Relaxed);
    }
    mine.len = 0;
}

/// Frees a block of the SMP step on `cpu`.
///
/// # Safety
/// As [`free_block`].
pub(super) unsafe fn free_block_of<P: Platform>(
    zone: &KernelZone,
    cpu: usize,
    pfn: u64,
    order: u8,
) {
    // SAFETY: the caller's contract.
    unsafe { free_block::<P>(zone, cpu, pfn, order, Step::Smp) };
}

/// Both cores allocate and free at once (core 0 alone without a second core); at the end
/// every block is freed and every page accounted for.
pub(super) fn smp_alloc_step<P: Platform>(second_core: bool) {
    ALLOC_GO.store(true, Ordering::Release);
    alloc_rounds::<P>(0);
    if second_core {
        while !ROUNDS_DONE.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
    let zone = zone::<P>();
    // What is still in a mailbox goes back from core 0: core 1's blocks as remote frees,
    // core 0's own (handed to core 1, which has stopped) as its own.
    free_mail::<P>(zone, 0);
    let mut leftover = MAILBOX[1].lock();
    for &(pfn, order, _) in &leftover.blocks[..leftover.len] {
        // SAFETY: left in core 1's mailbox by core 0, which handed it over; core 1 stopped.
        unsafe { free_block_of::<P>(zone, 0, pfn, order) };
        FREED_OWN[0].fetch_add(1 << order, Ordering::Relaxed);
    }
    leftover.len = 0;
    let get = |a: &[AtomicU64; CPUS], c: usize| a[c].load(Ordering::Relaxed);
    let total: u64 = (0..CPUS).map(|c| get(&ALLOCATED, c)).sum();
    let freed: u64 = (0..CPUS)
        .map(|c| get(&FREED_OWN, c) + get(&FREED_REMOTE, c))
        .sum();
    if total != freed {
        fail::<P>(
            Step::Smp,
            format_args!("{total} pages allocated, {freed} freed"),
        );
    }
    for c in 0..CPUS {
        println!(
            "smp: core {c} allocated {} pages and freed {} of its own and {} of the other core's",
            get(&ALLOCATED, c),
            get(&FREED_OWN, c),
            get(&FREED_REMOTE, c)
        );
    }
    if second_core {
        println!(
            "smp: both cores allocated, zeroed and freed through one zone at once: every page accounted for"
        );
    }
    zeroing_step::<P>(second_core);
    if second_core {
        ZERO_STOP.store(true, Ordering::Release);
        while !ALLOC_DONE.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
    }
}

/// Core 0 takes zeroed blocks (and writes and frees them) while core 1 runs background
/// zeroing; at the end core 1 must have cleared something, and every block core 0 got was
/// either known zero or cleared on the way (both checked word by word).
pub(super) fn zeroing_step<P: Platform>(second_core: bool) {
    let zone = zone::<P>();
    let clearer = clearer();
    let before = zone.counters();
    let mut rng = Rng(0x5eed_2e20);
    for round in 0..ALLOC_ROUNDS {
        let order = if round % 8 == 7 {
            9
        } else {
            (rng.next() % 4) as u8
        };
        let pfn = alloc_zeroed::<P>(zone, 0, order, &clearer);
        // SAFETY: this core's block, identity-mapped: the caller writes what it got.
        unsafe { ((pfn.0 * PAGE) as *mut u64).write_volatile(stamp(0, round)) };
        // SAFETY: allocated just above by this core, used no more.
        unsafe { free_block_of::<P>(zone, 0, pfn.0, order) };
    }
    if second_core {
        while ZEROED_BY_SECOND.load(Ordering::Acquire) == 0 {
            core::hint::spin_loop();
        }
    }
    let after = zone.counters();
    let (hits, cleared) = (
        after.zeroed_hits - before.zeroed_hits,
        after.cleared_on_alloc - before.cleared_on_alloc,
    );
    println!(
        "buddy-sim: core 0 took {ALLOC_ROUNDS} zeroed blocks, {hits} known zero, {cleared} frames cleared on the way; core 1 zeroed {} frames in the background meanwhile",
        ZEROED_BY_SECOND.load(Ordering::Acquire)
    );
}

/// The second CPU's part, once its platform has it running on the kernel's map: writes the
/// pages of table 0 while core 0 ages them, allocates and frees beside core 0 (and
/// node-local, for the node step), then zeroes
/// free frames in the background while core 0 takes zeroed blocks;
/// `leave_map` runs before core 0 may free the map's tables.
///
/// # Safety
/// Called once, on the second CPU, running on the kernel's map (the data region mapped as
/// core 0 maps it).
pub unsafe fn secondary<P: Platform>(leave_map: impl FnOnce()) -> ! {
    while !SMP_GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    // Eight pages per aging pass, back to front (against the walk's direction): each batch
    // of writes lands while core 0 is clearing, whatever the host's scheduling.
    let mut seen = 0;
    for chunk in (0..64usize).rev() {
        loop {
            let passes = SMP_PASSES.load(Ordering::Acquire);
            if passes > seen {
                seen = passes;
                break;
            }
            core::hint::spin_loop();
        }
        for g in (chunk * 8..chunk * 8 + 8).rev() {
            // SAFETY: the caller runs this core on the kernel's map, and core 0 set SMP_GO
            // with table 0's pages mapped, which stay mapped until core 0 has seen every
            // write (SMP_WRITTEN).
            unsafe { touch(g, true) };
        }
        SMP_WRITTEN.fetch_add(8, Ordering::Release);
    }
    while !ALLOC_GO.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    alloc_rounds::<P>(1);
    super::numa::local_allocations::<P>(1);
    ROUNDS_DONE.store(true, Ordering::Release);
    // The idle loop: background zeroing, until core 0 has taken its zeroed blocks.
    let (zone, clearer) = (zone::<P>(), clearer());
    while !ZERO_STOP.load(Ordering::Acquire) {
        let n = zero_in_background::<P>(zone, ZERO_STEP, &clearer);
        ZEROED_BY_SECOND.fetch_add(n, Ordering::Release);
    }
    leave_map();
    ALLOC_DONE.store(true, Ordering::Release);
    loop {
        core::hint::spin_loop();
    }
}

impl<P: Platform> Kernel<P> {
    /// With a second CPU: it writes every page of table 0 while this CPU ages it; no dirty
    /// state may be lost. Returns whether the second CPU runs.
    pub(super) fn smp_step(&mut self, platform: &mut P) -> bool {
        // Fresh, clean and old mappings for table 0.
        let table = locate::<P>(0).0;
        let _ = table
            .unmap_ptes(0, 512, &mut self.tlb)
            .unwrap_or_else(|e| fail::<P>(Step::Smp, format_args!("{e}")));
        self.map_table(0);
        P::publish_tables();
        if self.smp_tried {
            fail::<P>(
                Step::Smp,
                format_args!("the second CPU was started already"),
            );
        }
        self.smp_tried = true;
        // SAFETY: once per kernel (checked just above); on the kernel's map, since the data
        // tables just mapped are the live map's (`set_data_table`'s contract).
        if let Err(why) = unsafe { platform.start_second_cpu() } {
            println!("smp: no second core ({why}); concurrent step skipped");
            return false;
        }
        SMP_GO.store(true, Ordering::Release);
        let mut tlb = P::tlb();
        let mut passes = 0u64;
        let mut young_seen = 0u64;
        while SMP_WRITTEN.load(Ordering::Acquire) < 512 {
            passes += 1;
            SMP_PASSES.store(passes, Ordering::Release);
            young_seen += self.age(&mut tlb).1.young_folios;
        }
        if young_seen == 0 {
            fail::<P>(
                Step::Smp,
                format_args!("no pass saw a concurrent write as young"),
            );
        }
        P::sync();
        for g in 0..512 {
            let (t, i) = locate::<P>(g);
            let pte = t
                .get(i)
                .unwrap_or_else(|e| fail::<P>(Step::Smp, format_args!("{e}")));
            if !P::FORMAT.is_dirty(pte) {
                fail::<P>(
                    Step::Smp,
                    format_args!("page {g}: a concurrent write's dirty state was lost"),
                );
            }
            // SAFETY: page g is mapped; the second core finished writing it (Acquire above).
            let v = unsafe { core::ptr::read_volatile(page_ptr(g)) };
            if v != 0x5eed_0000 + g as u64 {
                fail::<P>(Step::Smp, format_args!("page {g} reads {v:#x}"));
            }
        }
        println!(
            "smp: core 1 wrote all 512 pages of table 0 while core 0 aged it ({passes} passes, {young_seen} young folios seen): no dirty state lost"
        );
        true
    }
}
