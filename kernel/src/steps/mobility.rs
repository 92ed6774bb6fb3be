//! Mobility: movable data under the kernel's own mappings, moved by compaction and by a
//! contiguous allocation.
//!
//! The page tables and the data region are long-lived unmovable allocations (the zone's
//! `alloc_zeroed`). This step fills the rest of the zone with movable pages
//! (`alloc_movable`, keyed by the slot of the movable region that will map them), keeps one
//! in every few spread over the whole zone, mapped at [`MOVABLE_VA`] through the platform's
//! last-level table [`MOVABLE_TABLE`] and stamped word by word, and gives the rest back: no
//! free 2 MiB block is left. Then `compact` must make one, and `alloc_contig_pages` must take
//! an aligned 2 MiB block (frozen where [`Platform::CONTIG_FROZEN`]), both moving pages
//! through [`MovingMap`]: it unmaps the page (flushing the TLB), copies it, and maps the copy
//! at the same address. Every page must read back its stamps through the moved mapping. The
//! fill also borrowed node 0's CMA reservation (made at boot, `hugetlb_cma=`): `cma_alloc` (a
//! run [`from_cma`](AllocRequest::from_cma) the reservation) must take it back whole, moving
//! the mapped pages inside it the same way.

use super::*;
use buddy_sim::AllocError;
use buddy_sim::page_owner::TopOwners;
use buddy_sim::vmstat::{BuddyInfo, PageTypeInfo};
use core::sync::atomic::{AtomicU64, Ordering};

use buddy_sim::{AllocRequest, BuddyError, Migrate, MigrateType, Migration, Order, Pfn};
use pte_batch::{Prot, PteFormat, PteTable};

/// Pages of the movable region: one last-level table's worth.
const SLOTS: usize = 512;

/// The key of a fill page that is never mapped (given back before anything moves).
const UNMAPPED: u64 = u64::MAX;

/// Virtual base of the movable region: the 2 MiB after the data region.
pub const MOVABLE_VA: u64 = DATA_VA + (MOVABLE_TABLE as u64) * (2 << 20);

/// The frame each slot of the movable region maps (0: none).
static SLOT_PFN: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// The fill's pages to give back: a bit per frame of the zone's span.
static FILLED: [AtomicU64; MAX_FRAMES.div_ceil(64)] =
    [const { AtomicU64::new(0) }; MAX_FRAMES.div_ceil(64)];

/// Word `w` of slot `slot`'s page, as stamped.
fn stamp(slot: usize, w: usize) -> u64 {
    0x6d0b_0000_0000_0000 | (slot as u64) << 16 | w as u64
}

fn slot_ptr(slot: usize) -> *mut u64 {
    (MOVABLE_VA + slot as u64 * PAGE) as *mut u64
}

/// The kernel's [`Migrate`]: moves a page of the movable region, repointing its mapping.
struct MovingMap<'t, P: Platform> {
    table: PteTable<'t, P::Format>,
    tlb: P::Tlb,
    memory: OffsetMap,
    prot: Prot,
    moved: u64,
}

impl<P: Platform> Migrate for MovingMap<'_, P> {
    fn migrate(&mut self, m: &Migration) -> bool {
        // Only the movable region's pages, where the table says they are; anything else is
        // refused (the zone then leaves it where it is).
        let slot = match usize::try_from(m.key) {
            Ok(s) if s < SLOTS => s,
            _ => return false,
        };
        if m.order != Order::ZERO || SLOT_PFN[slot].load(Ordering::Relaxed) != m.from.0 {
            return false;
        }
        // Linux's order: the old mapping goes first (and its TLB entries), so nothing writes
        // the source while it is copied; then the copy, then the new mapping.
        if self.table.unmap_ptes(slot, 1, &mut self.tlb).is_err() {
            return false;
        }
        // SAFETY: `memory` is the identity map of all RAM; the source's only mapping is gone
        // (flushed above) and this kernel writes its pages only through that mapping, so
        // nothing writes the source meanwhile.
        let copied = unsafe { m.copy(&self.memory) };
        let to = if copied.is_ok() { m.to } else { m.from };
        if self.table.set_ptes(slot, to, 1, self.prot).is_err() || copied.is_err() {
            return false;
        }
        P::publish_tables();
        SLOT_PFN[slot].store(to.0, Ordering::Relaxed);
        self.moved += 1;
        true
    }
}

/// The frame each kept page of the movable zone is at, by key: what its migrate callback
/// repoints.
static ZONE_MOVABLE_PFN: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// The movable zone's [`Migrate`]: its kept pages are mapped only by the identity map, so a
/// move is a copy and a new entry in [`ZONE_MOVABLE_PFN`].
struct CopyingMover {
    memory: OffsetMap,
    moved: u64,
}

impl Migrate for CopyingMover {
    fn migrate(&mut self, m: &Migration) -> bool {
        let slot = match usize::try_from(m.key) {
            Ok(s) if s < SLOTS => s,
            _ => return false,
        };
        if m.order != Order::ZERO || ZONE_MOVABLE_PFN[slot].load(Ordering::Relaxed) != m.from.0 {
            return false;
        }
        // SAFETY: `memory` is the identity map of all RAM; the page is this step's, which
        // writes it only before and reads it only after this call.
        if unsafe { m.copy(&self.memory) }.is_err() {
            return false;
        }
        ZONE_MOVABLE_PFN[slot].store(m.to.0, Ordering::Relaxed);
        self.moved += 1;
        true
    }
}

/// Word `w` of the movable zone's kept page `slot`, through the identity map.
fn zone_movable_word(slot: usize, w: usize) -> *mut u64 {
    let pfn = ZONE_MOVABLE_PFN[slot].load(Ordering::Relaxed);
    (pfn * PAGE + w as u64 * 8) as *mut u64
}

/// Fills `zone` with movable pages until a movable allocation fails, keeping [`SLOTS`] of
/// them spread evenly over the allocations (gaps of the pages taken over [`SLOTS`], rounded
/// down or up, so that blocks handed out alternately get kept pages alike) under their
/// slots' keys, their frames in `kept_at`; then gives the others back and drains the lists,
/// leaving the kept pages scattered over the movable pageblocks. Returns the pages taken and
/// kept. A first fill, given back at once, counts what movable pages can take: in defrag
/// mode not the free frames in holes of unmovable and reclaimable pageblocks, which are
/// theirs.
fn fill_and_keep<P: Platform>(zone: &KernelZone, kept_at: &[AtomicU64; SLOTS]) -> (u64, usize) {
    zone.drain_all();
    let (movable, _) = fill::<P>(zone, None, kept_at);
    fill::<P>(zone, Some(movable.max(1)), kept_at)
}

/// One fill of [`fill_and_keep`]: movable pages until an allocation fails, [`SLOTS`] of
/// `pages` kept where `pages` is given (none without), the others given back. Returns the
/// pages taken and kept.
fn fill<P: Platform>(
    zone: &KernelZone,
    pages: Option<u64>,
    kept_at: &[AtomicU64; SLOTS],
) -> (u64, usize) {
    let base = zone.config().start.0;
    let (mut taken, mut kept) = (0u64, 0usize);
    loop {
        // The `k`-th kept page is the first taken at or past `k / SLOTS` of `pages`.
        let keep = kept < SLOTS && pages.is_some_and(|n| taken * SLOTS as u64 / n >= kept as u64);
        let key = if keep { kept as u64 } else { UNMAPPED };
        let pfn = match zone.alloc_movable(0, Order::ZERO, key) {
            Ok(pfn) => pfn,
            Err(AllocError::OutOfMemory(_)) => break,
            Err(e) => fail::<P>(Step::Mobility, format_args!("{e}")),
        };
        taken += 1;
        if keep {
            kept_at[kept].store(pfn.0, Ordering::Relaxed);
            kept += 1;
        } else {
            let i = (pfn.0 - base) as usize;
            FILLED[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
        }
    }
    for (w, word) in FILLED.iter().enumerate() {
        let mut bits = word.swap(0, Ordering::Relaxed);
        while bits != 0 {
            let pfn = base + (w * 64) as u64 + u64::from(bits.trailing_zeros());
            bits &= bits - 1;
            // SAFETY: allocated by the fill above, never mapped or written.
            unsafe { free_block::<P>(zone, 0, pfn, 0, Step::Mobility) };
        }
    }
    zone.drain_all();
    (taken, kept)
}

impl<P: Platform> Kernel<P> {
    /// The mobility step (see the module docs); ends with the movable region unmapped, its
    /// table forgotten and its pages given back; then the movable zone's part
    /// ([`Kernel::movable_zone_step`]).
    pub(super) fn mobility_step(&mut self) {
        let zone = self.zone;
        let fail_on = |e: BuddyError| -> ! { fail::<P>(Step::Mobility, format_args!("{e}")) };
        let pageblock = zone.config().pageblock_order;
        let block_pages = pageblock.pages();
        let table = data_table::<P>(MOVABLE_TABLE).unwrap_or_else(|| {
            fail::<P>(
                Step::Mobility,
                format_args!("no last-level table for the movable region"),
            )
        });
        let prot = Prot {
            write: true,
            attrs: P::DATA_ATTRS,
            ..Prot::default()
        };

        let (taken, kept) = fill_and_keep::<P>(zone, &SLOT_PFN);
        let blocks = |z: &KernelZone| -> u32 {
            z.buddy_blocks_per_order()[usize::from(pageblock.get())..]
                .iter()
                .sum()
        };
        if kept != SLOTS || blocks(zone) != 0 {
            fail::<P>(
                Step::Mobility,
                format_args!(
                    "the fill kept {kept} pages of {taken}, {} free blocks of 2 MiB or more left",
                    blocks(zone)
                ),
            );
        }
        // Map and stamp the kept pages.
        for (slot, pfn) in SLOT_PFN.iter().enumerate() {
            table
                .set_ptes(slot, Pfn(pfn.load(Ordering::Relaxed)), 1, prot)
                .unwrap_or_else(|e| fail::<P>(Step::Mobility, format_args!("{e}")));
        }
        P::publish_tables();
        for slot in 0..SLOTS {
            for w in 0..(PAGE / 8) as usize {
                // SAFETY: slot's page is mapped read-write just above, to a page of ours.
                unsafe { slot_ptr(slot).add(w).write_volatile(stamp(slot, w)) };
            }
        }
        let movable_blocks = self.pageblocks_holding_slots(MigrateType::Movable);
        println!(
            "mobility: {kept} movable pages of {taken} kept, mapped at {MOVABLE_VA:#x}, spread over {movable_blocks} movable pageblocks; no free 2 MiB block left (tables and data region unmovable)"
        );

        // SAFETY: the identity map of all RAM, as `clearer`'s.
        let memory = unsafe { OffsetMap::new(0) };
        let mut mover = MovingMap::<P> {
            table,
            tlb: P::tlb(),
            memory,
            prot,
            moved: 0,
        };
        let stats = zone
            .compact(0, pageblock, &mut mover)
            .unwrap_or_else(|e| fail_on(e.into()));
        if !stats.success || stats.moved_pages != mover.moved || blocks(zone) == 0 {
            fail::<P>(
                Step::Mobility,
                format_args!("compaction: {stats:?}, {} moves seen", mover.moved),
            );
        }
        self.check_slots();
        println!(
            "compaction: moved {} pages ({} refused) for a free 2 MiB block; every page read back through its repointed mapping ({} invalidations)",
            stats.moved_pages,
            stats.refused,
            P::flushes(&mover.tlb)
        );

        // Two 2 MiB blocks by alloc_contig_pages, held together, then given back: the first
        // finds compaction's block (or one as good), the second must move pages out of its way.
        let (how, free) = if P::CONTIG_FROZEN {
            ("frozen ", "free_contig_frozen_range")
        } else {
            ("", "free_contig_range")
        };
        let mut contig_blocks = [(Pfn(0), 0u64); 2];
        for t in &mut contig_blocks {
            let before = mover.moved;
            let request = AllocRequest::frames(block_pages)
                .aligned(pageblock)
                .contiguous(&mut mover);
            let request = if P::CONTIG_FROZEN {
                request.frozen()
            } else {
                request
            };
            let contig = zone
                .cpu(0)
                .map_err(AllocError::from)
                .and_then(|cpu| cpu.alloc_raw(request))
                .unwrap_or_else(|e| fail_on(e.into()));
            if !contig.0.is_multiple_of(block_pages) {
                fail::<P>(
                    Step::Mobility,
                    format_args!("alloc_contig_pages: {contig} is not pageblock-aligned"),
                );
            }
            *t = (contig, mover.moved - before);
        }
        if contig_blocks[1].1 == 0 {
            fail::<P>(
                Step::Mobility,
                format_args!("the second alloc_contig_pages moved nothing: {contig_blocks:?}"),
            );
        }
        self.check_slots();
        for (contig, _) in contig_blocks {
            // SAFETY: a block allocated just above, never mapped or written.
            let freed = unsafe {
                if P::CONTIG_FROZEN {
                    zone.free_contig_frozen_range(0, contig, block_pages)
                } else {
                    zone.free_contig_range(0, contig, block_pages)
                }
            };
            freed.unwrap_or_else(|e| fail_on(e.into()));
        }
        let [(a, moved_a), (b, moved_b)] = contig_blocks;
        println!(
            "alloc_contig_pages: {how}2 MiB blocks at pfn {a} ({moved_a} pages migrated out of its way) and {b} ({moved_b} migrated); every page read back; given back with {free}"
        );

        self.cma_part(&mut mover);

        // Teardown: unmap, forget the table, give the pages back.
        let gone = mover
            .table
            .unmap_ptes(0, SLOTS, &mut self.tlb)
            .unwrap_or_else(|e| fail::<P>(Step::Mobility, format_args!("{e}")));
        if gone.pages != SLOTS {
            fail::<P>(Step::Mobility, format_args!("unmapped {gone:?}"));
        }
        forget_data_table(MOVABLE_TABLE);
        for pfn in &SLOT_PFN {
            let pfn = pfn.swap(0, Ordering::Relaxed);
            // SAFETY: the fill's kept page (wherever it moved), unmapped just above.
            unsafe { free_block::<P>(zone, 0, pfn, 0, Step::Mobility) };
        }
        self.movable_zone_step();
        // What a kernel engineer reads after it: Linux's /proc/buddyinfo and
        // /proc/pagetypeinfo of the zones, in Linux's formats.
        println!("buddyinfo after the mobility step:");
        print!("{}", BuddyInfo(zone));
        if let Some(movable) = movable_zone() {
            print!("{}", BuddyInfo(movable));
        }
        println!("pagetypeinfo after the mobility step:");
        print!("{}", PageTypeInfo(zone));
        println!("page_owner: top owners after the mobility step:");
        print!("{}", TopOwners::of(zone));
    }

    /// The movable zone (`ZONE_MOVABLE`): churned full of movable pages with one in every
    /// few kept (stamped word by word) and the rest given back, it refuses an unmovable
    /// page, and then gives the largest naturally aligned block it can (aligned past
    /// MAX_ORDER: a gigantic page's shape) by migrating the kept pages out of its way.
    /// Every kept page must read back its stamps where it moved; everything goes back.
    fn movable_zone_step(&mut self) {
        let Some(mz) = movable_zone() else {
            println!("movable zone: none (node 0 has no 16 MiB of usable memory at its top)");
            return;
        };
        let fail_on =
            |e: BuddyError| -> ! { fail::<P>(Step::Mobility, format_args!("movable zone: {e}")) };
        let (taken, kept) = fill_and_keep::<P>(mz, &ZONE_MOVABLE_PFN);
        for slot in 0..kept {
            for w in 0..(PAGE / 8) as usize {
                // SAFETY: the slot's page is this step's, identity-mapped.
                unsafe { zone_movable_word(slot, w).write_volatile(stamp(slot, w)) };
            }
        }
        if !matches!(
            mz.alloc_pages(0, Order::ZERO),
            Err(AllocError::MovableOnly(_))
        ) {
            fail::<P>(
                Step::Mobility,
                format_args!("movable zone: an unmovable page was not refused"),
            );
        }
        // The largest naturally aligned block, from the whole zone down.
        // SAFETY: the identity map of all RAM, as `clearer`'s.
        let memory = unsafe { OffsetMap::new(0) };
        let mut mover = CopyingMover { memory, moved: 0 };
        let largest = (0..=buddy_sim::MAX_SUPPORTED_ORDER)
            .rev()
            .filter_map(|o| Order::new(o).ok())
            .filter(|o| o.pages() <= MOVABLE_PAGES)
            .find_map(|o| {
                let request = AllocRequest::frames(o.pages())
                    .aligned(o)
                    .contiguous(&mut mover);
                mz.cpu(0).ok()?.alloc_raw(request).ok().map(|pfn| (pfn, o))
            });
        let Some((run, order)) = largest else {
            fail::<P>(
                Step::Mobility,
                format_args!("movable zone: no block at all"),
            );
        };
        let want = MOVABLE_PAGES / 2;
        if order.pages() < want || mover.moved == 0 || !order.aligns(run) {
            fail::<P>(
                Step::Mobility,
                format_args!(
                    "movable zone: largest block {} pages at {run} after {} moves, want {want}",
                    order.pages(),
                    mover.moved
                ),
            );
        }
        for slot in 0..kept {
            for w in 0..(PAGE / 8) as usize {
                // SAFETY: the slot's page, wherever it moved, identity-mapped.
                let v = unsafe { zone_movable_word(slot, w).read_volatile() };
                if v != stamp(slot, w) {
                    fail::<P>(
                        Step::Mobility,
                        format_args!("movable zone: slot {slot} word {w} reads {v:#x}"),
                    );
                }
            }
        }
        // SAFETY: the run was allocated just above and never written.
        unsafe { mz.free_contig_range(0, run, order.pages()) }
            .unwrap_or_else(|e| fail_on(e.into()));
        for pfn in &ZONE_MOVABLE_PFN[..kept] {
            let pfn = pfn.swap(0, Ordering::Relaxed);
            // SAFETY: a kept page, read for the last time above.
            unsafe { free_block::<P>(mz, 0, pfn, 0, Step::Mobility) };
        }
        mz.drain_all();
        if mz.buddy_pages() != mz.present_pages() {
            fail::<P>(
                Step::Mobility,
                format_args!(
                    "movable zone: {} of {} frames free at the end",
                    mz.buddy_pages(),
                    mz.present_pages()
                ),
            );
        }
        println!(
            "movable zone: {kept} movable pages kept of {taken}; an unmovable page refused; the largest aligned block, {} MiB (order {}, aligned past MAX_ORDER {}), taken after migrating {} pages out of its way; every page read back; the zone whole again",
            (order.pages() * PAGE) >> 20,
            order.get(),
            mz.config().max_order.get(),
            mover.moved
        );
    }

    /// The CMA reservation's part (`cma_alloc`): the fill borrowed the reservation's
    /// memory, some of the movable region's pages among it; a run of the whole reservation
    /// [`from_cma`](AllocRequest::from_cma) takes it back, migrating those pages out under
    /// their mappings, which must then read back; the run goes back to the reservation.
    fn cma_part(&mut self, mover: &mut MovingMap<'_, P>) {
        let Some(area) = cma_area() else {
            fail::<P>(Step::Mobility, format_args!("no CMA reservation"));
        };
        let zone = self.zone;
        let inside = SLOT_PFN
            .iter()
            .filter(|p| area.contains(Pfn(p.load(Ordering::Relaxed)), 1))
            .count() as u64;
        let before = mover.moved;
        let request = AllocRequest::frames(area.pages())
            .contiguous(mover)
            .from_cma(area);
        let run = zone
            .cpu(0)
            .map_err(AllocError::from)
            .and_then(|cpu| cpu.alloc_raw(request))
            .unwrap_or_else(|e| fail::<P>(Step::Mobility, format_args!("cma_alloc: {e}")));
        let moved = mover.moved - before;
        let still = SLOT_PFN
            .iter()
            .filter(|p| area.contains(Pfn(p.load(Ordering::Relaxed)), 1))
            .count();
        if run != area.base() || inside == 0 || moved < inside || still != 0 {
            fail::<P>(
                Step::Mobility,
                format_args!(
                    "cma_alloc: run at {run} of the reservation at {}, {inside} mapped pages inside before, {moved} moved, {still} inside after",
                    area.base()
                ),
            );
        }
        self.check_slots();
        // SAFETY: the run was allocated just above and never written.
        unsafe { zone.free_contig_range(0, run, area.pages()) }
            .unwrap_or_else(|e| fail::<P>(Step::Mobility, format_args!("{e}")));
        println!(
            "cma_alloc: the whole {} MiB reservation taken back after migrating {moved} pages ({inside} mapped pages of the movable region borrowed it); every page read back; given back to the reservation",
            (area.pages() * PAGE) >> 20
        );
    }

    /// Every slot reads back its stamps through its mapping, which maps the frame
    /// [`SLOT_PFN`] records.
    fn check_slots(&self) {
        let table = data_table::<P>(MOVABLE_TABLE)
            .unwrap_or_else(|| fail::<P>(Step::Mobility, format_args!("movable table gone")));
        for (slot, pfn) in SLOT_PFN.iter().enumerate() {
            let pfn = pfn.load(Ordering::Relaxed);
            let mapped = table.raw(slot).map(|e| P::FORMAT.pfn(e).0);
            if mapped != Ok(pfn) {
                fail::<P>(
                    Step::Mobility,
                    format_args!("slot {slot}: maps {mapped:?}, moved to {pfn:#x}"),
                );
            }
            for w in 0..(PAGE / 8) as usize {
                // SAFETY: slot's page is mapped read-write to a page of ours.
                let v = unsafe { slot_ptr(slot).add(w).read_volatile() };
                if v != stamp(slot, w) {
                    fail::<P>(
                        Step::Mobility,
                        format_args!("slot {slot} (pfn {pfn:#x}) word {w} reads {v:#x}"),
                    );
                }
            }
        }
    }

    /// Pageblocks of type `mt` holding a page of the movable region.
    fn pageblocks_holding_slots(&self, mt: MigrateType) -> u32 {
        let cfg = self.zone.config();
        let shift = cfg.pageblock_order.get();
        let first = cfg.start.0 >> shift;
        // The zone spans at most MAX_RAM: 64 pageblocks of 2 MiB, 65 when not aligned.
        let mut seen = [0u64; 2];
        for pfn in SLOT_PFN.iter().map(|p| p.load(Ordering::Relaxed)) {
            let b = ((pfn >> shift) - first) as usize;
            if self.zone.pageblock_type(Pfn(pfn)).is_ok_and(|t| t.0 == mt) && b < 128 {
                seen[b / 64] |= 1 << (b % 64);
            }
        }
        seen.iter().map(|w| w.count_ones()).sum()
    }
}
