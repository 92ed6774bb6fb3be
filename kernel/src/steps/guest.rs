//! What both hypervisors do with a guest, whatever the architecture: run its phases of
//! touches, map a zeroed frame at each second-stage fault in its RAM, age the second stage
//! between phases with pte-batch (KVM's clear_flush_young) into a [`WorkingSet`], and check
//! the idle set and the dirty state against what the guest did. A platform supplies the
//! world switch ([`Guest`]), its second-stage format and TLB maintenance.

use super::*;

use pte_batch::mm_types::FrameRange;
use pte_batch::{
    FpbFlags, IdleRun, Pass, Prot, PteFormat, PteTable, Stage2, TlbFlush, WorkingSet, YoungOp,
    age_batches,
};

/// Guest-physical base of the guest's RAM: the third GiB.
pub const GUEST_RAM: u64 = 0x8000_0000;
/// Pages of guest RAM: one last-level table.
pub const GUEST_PAGES: usize = 512;

/// One command for the guest: pages `first..` every `stride`, `count` of them, written or
/// only read. The guest reads each page's first word, which must be 0 (never written) or the
/// page's own address (its stamp), and stores the stamp if writing.
#[derive(Clone, Copy, Debug)]
pub struct Touch {
    /// The first page (an index into the guest's RAM).
    pub first: usize,
    /// Pages touched.
    pub count: usize,
    /// Pages between two touched ones.
    pub stride: usize,
    /// Whether the pages are written.
    pub write: bool,
}

impl Touch {
    /// A command.
    pub const fn new(first: usize, count: usize, stride: usize, write: bool) -> Self {
        Self {
            first,
            count,
            stride,
            write,
        }
    }

    /// The guest-physical address of the first page.
    pub const fn first_ipa(self) -> u64 {
        GUEST_RAM + self.first as u64 * PAGE
    }

    /// The stride in bytes.
    pub const fn stride_bytes(self) -> u64 {
        self.stride as u64 * PAGE
    }

    fn pages(self) -> impl Iterator<Item = usize> {
        (0..self.count).map(move |k| self.first + k * self.stride)
    }
}

/// The phases: a working set that moves, grows, shrinks and mixes reads and writes.
pub const PHASES: [&[Touch]; 4] = [
    &[Touch::new(0, 96, 1, true)],
    &[Touch::new(0, 32, 2, false), Touch::new(96, 64, 1, true)],
    &[
        Touch::new(16, 16, 1, true),
        Touch::new(120, 20, 3, false),
        Touch::new(300, 8, 1, false),
    ],
    &[Touch::new(100, 4, 1, false)],
];

/// Why the guest left.
#[derive(Clone, Copy, Debug)]
pub enum GuestExit {
    /// The command is done.
    Done,
    /// The guest found old data in the page at this guest-physical address.
    OldData(u64),
    /// A second-stage translation fault at this guest-physical address.
    Fault(u64),
    /// Anything else: the platform's exit code and where.
    Other(u64, u64),
}

/// A platform's world switch into its one guest.
pub trait Guest {
    /// Enters the guest, with `command` in its registers if a new command starts (`None`:
    /// resume after a fault), and returns at its next exit.
    fn enter(&mut self, command: Option<Touch>) -> GuestExit;
}

/// The guest's RAM as the hypervisor tracks it: its second-stage table, which pages are
/// mapped and which were written.
pub struct GuestRam<'t, F: PteFormat<Stage = Stage2>> {
    /// The last-level table mapping [`GUEST_RAM`].
    pub table: PteTable<'t, F>,
    mapped: [bool; GUEST_PAGES],
    written: [bool; GUEST_PAGES],
    /// Second-stage faults served.
    pub faults: u64,
    /// The memory attributes of a guest page (`Prot::attrs`).
    attrs: u64,
}

impl<'t, F: PteFormat<Stage = Stage2>> GuestRam<'t, F> {
    /// The guest's RAM over `table` (empty), pages mapped with `attrs`.
    pub fn new(table: PteTable<'t, F>, attrs: u64) -> Self {
        Self {
            table,
            mapped: [false; GUEST_PAGES],
            written: [false; GUEST_PAGES],
            faults: 0,
            attrs,
        }
    }

    /// Pages mapped.
    pub fn mapped(&self) -> usize {
        self.mapped.iter().filter(|&&m| m).count()
    }

    /// Runs `t` in the guest to its end, mapping a zeroed frame at each fault in its RAM.
    pub fn run<P: Platform>(
        &mut self,
        guest: &mut impl Guest,
        t: Touch,
        zone: &KernelZone,
        clearer: &FrameClearer<OffsetMap>,
        publish: impl Fn(),
    ) {
        let rw = Prot {
            write: true,
            attrs: self.attrs,
            ..Prot::default()
        };
        let mut command = Some(t);
        loop {
            match guest.enter(command.take()) {
                GuestExit::Done => break,
                GuestExit::OldData(ipa) => fail::<P>(
                    Step::Zeroing,
                    format_args!("guest: page at {ipa:#x} held old data"),
                ),
                GuestExit::Fault(ipa) => {
                    let index = ipa.wrapping_sub(GUEST_RAM) / PAGE;
                    if index >= GUEST_PAGES as u64 {
                        fail::<P>(
                            Step::Mapping,
                            format_args!("guest: fault at {ipa:#x} outside its RAM"),
                        );
                    }
                    let frame = alloc_zeroed::<P>(zone, 0, 0, clearer);
                    self.table
                        .set_ptes(index as usize, frame, 1, rw)
                        .unwrap_or_else(|e| {
                            fail::<P>(Step::Mapping, format_args!("guest page {index}: {e}"))
                        });
                    // Invalid to valid needs no invalidation, only the walker seeing it.
                    publish();
                    self.mapped[index as usize] = true;
                    self.faults += 1;
                }
                GuestExit::Other(code, at) => fail::<P>(
                    Step::Exception,
                    format_args!("guest exit {code:#x} at {at:#x}"),
                ),
            }
        }
        for p in t.pages() {
            self.written[p] |= t.write;
        }
    }

    /// One aging pass (KVM's clear_flush_young, invalidations through `tlb`) into `ws`;
    /// returns the pages found young.
    pub fn age<P: Platform>(
        &self,
        ws: &mut WorkingSet<'_>,
        tlb: &mut impl TlbFlush<Stage2>,
    ) -> u64 {
        let mut pass = ws.pass();
        age_table::<P, F>(&self.table, &mut pass, tlb);
        pass.finish()
            .unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("working set: {e}")))
            .young_pages
    }

    /// Which pages of the guest's RAM were idle for the last pass, from the estimate's
    /// idle ranges (one walk over them).
    fn idle_set(ws: &WorkingSet<'_>) -> [bool; GUEST_PAGES] {
        let mut idle = [false; GUEST_PAGES];
        for r in ws.idle_ranges(1) {
            let first = (r.start.0.saturating_sub(GUEST_RAM) / PAGE) as usize;
            let end = (first + r.pages as usize).min(GUEST_PAGES);
            idle[first.min(end)..end].fill(true);
        }
        idle
    }

    /// Checks the estimate after phase `phase` touched `touched`: idle for a pass exactly
    /// the mapped pages it did not touch, dirty exactly the pages ever written.
    fn check<P: Platform>(&self, phase: usize, touched: &[bool; GUEST_PAGES], ws: &WorkingSet<'_>) {
        let f = self.table.format();
        let idle_set = Self::idle_set(ws);
        for (p, &touched) in touched.iter().enumerate() {
            let idle = idle_set[p];
            if idle != (self.mapped[p] && !touched) {
                fail::<P>(
                    Step::Aging,
                    format_args!("phase {phase}: page {p} idle {idle}, touched {touched}"),
                );
            }
            let entry = self.table.get(p).unwrap_or(0);
            let dirty = f.is_present(entry) && f.is_dirty(entry);
            if dirty != self.written[p] {
                fail::<P>(
                    Step::Aging,
                    format_args!(
                        "phase {phase}: page {p} dirty {dirty}, written {}",
                        self.written[p]
                    ),
                );
            }
        }
    }

    /// Runs [`PHASES`], aging after each and checking, and prints a line per phase.
    pub fn phases<P: Platform>(
        &mut self,
        guest: &mut impl Guest,
        ws: &mut WorkingSet<'_>,
        tlb: &mut impl TlbFlush<Stage2>,
        zone: &KernelZone,
        clearer: &FrameClearer<OffsetMap>,
        publish: impl Fn() + Copy,
    ) {
        for (phase, touches) in PHASES.iter().enumerate() {
            let faults = self.faults;
            let mut touched = [false; GUEST_PAGES];
            for &t in *touches {
                self.run::<P>(guest, t, zone, clearer, publish);
                t.pages().for_each(|p| touched[p] = true);
            }
            let young = self.age::<P>(ws, tlb);
            self.check::<P>(phase, &touched, ws);
            println!(
                "guest phase {phase}: {} pages faulted in (zeroed frames), {} mapped; aged: {young} young, idle set {} pages = exactly the pages the phase did not touch; dirty = written",
                self.faults - faults,
                self.mapped(),
                ws.idle_pages(1)
            );
        }
    }

    /// Of `t`'s pages, how many the last pass found young (for arm64's negative control).
    #[cfg(target_arch = "aarch64")]
    pub fn young_of(ws: &WorkingSet<'_>, t: Touch) -> usize {
        let idle = Self::idle_set(ws);
        t.pages().filter(|&p| !idle[p]).count()
    }

    /// Unmaps every page (one invalidation through `tlb`) and gives the frames back; checks
    /// the unmap found every mapped page and a dirty one.
    pub fn tear_down<P: Platform>(self, tlb: &mut impl TlbFlush<Stage2>, zone: &KernelZone) {
        let f = self.table.format();
        let frames: [Option<Pfn>; GUEST_PAGES] = core::array::from_fn(|p| {
            self.table
                .raw(p)
                .ok()
                .filter(|&e| f.is_present(e))
                .map(|e| f.pfn(e))
        });
        let gone = self
            .table
            .unmap_ptes(0, GUEST_PAGES, tlb)
            .unwrap_or_else(|e| fail::<P>(Step::Free, format_args!("unmap: {e}")));
        if !gone.dirty || gone.pages != self.mapped() {
            fail::<P>(Step::Free, format_args!("unmap found {gone:?}"));
        }
        for pfn in frames.into_iter().flatten() {
            // SAFETY: the guest's frames, allocated at its faults and unmapped above (the
            // invalidation done): nothing reaches them any more.
            unsafe { free_block::<P>(zone, 0, pfn.0, 0, Step::Free) };
        }
    }
}

/// One last-level table's part of an aging pass: KVM's clear_flush_young over all of its
/// entries (each page its own folio, so that the pass sees pages, not blocks), every batch
/// observed by `pass`, the invalidations through `tlb`.
pub fn age_table<P: Platform, F: PteFormat<Stage = Stage2>>(
    table: &PteTable<'_, F>,
    pass: &mut Pass<'_>,
    tlb: &mut impl TlbFlush<Stage2>,
) {
    let folio = |pfn: Pfn| Some(FrameRange::new(pfn, 1));
    let walk = age_batches(
        table,
        0..table.len(),
        &folio,
        FpbFlags::NONE,
        YoungOp::ClearFlush,
        tlb,
        |r, y| {
            let _ = pass.observe(r, y);
        },
    );
    walk.unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("aging: {e}")));
}

/// Storage for a [`WorkingSet`] over the guest's RAM: one run per page at most.
pub const fn working_set_storage() -> [IdleRun; 2 * GUEST_PAGES] {
    [IdleRun::EMPTY; 2 * GUEST_PAGES]
}
