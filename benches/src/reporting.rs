//! The "free page reporting" section: a VMM's view of a guest that gives its free memory
//! back. The guest's RAM is a `vm-memory` `GuestMemoryMmap` (one anonymous mapping, as a
//! VMM makes it), a buddy-sim zone manages its frames, and the report sink is what a
//! virtio-balloon device does with a reported range: `madvise(MADV_DONTNEED)` on the host
//! mapping (Firecracker, Cloud Hypervisor and QEMU all discard this way), after which the
//! range reads zero on its next touch, so the registration says the discard zeroes.
//!
//! Measured: the host's resident memory before and after one report of the whole free
//! memory (`mincore`); the report's time against the same ranges' `madvise` alone (the
//! floor: isolation, the sink call and the return are the overhead); `alloc_zeroed` of a
//! reported 2 MiB block against allocating it and clearing it (Linux's behaviour: it clears
//! memory the host just zeroed), alone and with the first touch that follows; and order-0
//! allocation under churn with a reporter running on another CPU against none.

use crate::measure::{Budget, Samples, Verdict, allowed_cpus, pin_current_thread};
use crate::report::ratio_text;
use crate::{Cell, Section, SectionContext, Table, must, order};
use buddy_sim::zero_core::{NoResched, clear_contig_pages};
use buddy_sim::{
    BoxedZone, FrameClearer, OffsetMap, Order, PageReporting, Pfn, ReportedBlock, ZoneConfig,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion};

/// The free page reporting section.
pub struct FreePageReporting;

const PAGE: usize = 4096;
/// The reporting order: 2 MiB blocks (Linux's `page_reporting_order`, the pageblock order).
const REPORT_ORDER: u8 = 9;
/// Linux's `MADV_POPULATE_WRITE` (5.14): faults a range in, writable, without touching it
/// from user space.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// A guest: its memory (one region from guest address 0) and a zone of its frames.
struct Guest {
    _memory: GuestMemoryMmap<()>,
    /// The host address of guest frame 0.
    host: *mut u8,
    bytes: usize,
    zone: BoxedZone,
    clearer: FrameClearer<OffsetMap>,
}

impl Guest {
    /// `bytes` of guest memory and a zone of all of it, reporting registered (2 MiB blocks,
    /// 32 a round, the discard zeroing).
    fn new(bytes: usize) -> Self {
        let memory = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), bytes)])
            .unwrap_or_else(|e| panic!("guest memory of {bytes} bytes: {e}"));
        let host = memory
            .iter()
            .next()
            .and_then(|r| r.get_host_address(vm_memory::MemoryRegionAddress(0)).ok())
            .unwrap_or_else(|| panic!("no host mapping for the guest memory"));
        // SAFETY: guest frame i is host byte i * 4 KiB of the mapping, which lives as long as
        // the guest; the zone's owners (this section) are all that touch it.
        let map = unsafe { OffsetMap::new(host.expose_provenance()) };
        let zone = must(BoxedZone::new_boxed(ZoneConfig::new(
            Pfn(0),
            (bytes / PAGE) as u64,
        )));
        zone.init_deferred(u64::MAX);
        let reporting = PageReporting::new(order(REPORT_ORDER)).discard_zeroes(true);
        must(zone.register_page_reporting(reporting));
        Self {
            _memory: memory,
            host,
            bytes,
            zone,
            clearer: FrameClearer::detected(map),
        }
    }

    /// The host address of guest frame `pfn`.
    fn at(&self, pfn: Pfn) -> *mut u8 {
        self.host.wrapping_add(pfn.0 as usize * PAGE)
    }

    /// Faults every page of the guest memory in on the host (a guest that touched all its
    /// memory once).
    fn fault_in(&self) {
        // SAFETY: advice on the guest's own mapping; it changes no contents.
        let r = unsafe { libc::madvise(self.host.cast(), self.bytes, MADV_POPULATE_WRITE) };
        if r != 0 {
            for i in (0..self.bytes).step_by(PAGE) {
                // SAFETY: a byte of the guest's mapping, which nothing else uses now.
                unsafe { self.host.add(i).write_volatile(1) };
            }
        }
    }

    /// Bytes of the guest memory resident on the host (`mincore`).
    fn resident(&self) -> usize {
        let mut vec = vec![0u8; self.bytes.div_ceil(PAGE)];
        // SAFETY: the range is the guest's mapping; `vec` holds one byte per page of it.
        let r = unsafe { libc::mincore(self.host.cast(), self.bytes, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore failed");
        vec.iter().filter(|&&b| b & 1 != 0).count() * PAGE
    }

    /// Takes every 2 MiB block and frees it again: the reported marks are gone (an
    /// allocation takes them off), as after a guest used its memory.
    fn unreport_all(&self) {
        let o = order(REPORT_ORDER);
        let blocks: Vec<Pfn> = std::iter::from_fn(|| self.zone.alloc_pages(0, o).ok()).collect();
        for pfn in blocks {
            // SAFETY: the section frees what it allocated, once, and no longer uses it.
            must(unsafe { self.zone.free_pages(0, pfn, o) });
        }
        self.zone.drain_all();
    }

    /// The discard a VMM's balloon device does for a reported block.
    fn discard(&self, pfn: Pfn, pages: u64) -> bool {
        // SAFETY: a range of the guest's mapping that the zone handed to the sink: nobody
        // uses it until the sink returns, and it may read zero afterwards.
        unsafe {
            libc::madvise(
                self.at(pfn).cast(),
                pages as usize * PAGE,
                libc::MADV_DONTNEED,
            ) == 0
        }
    }

    /// One report of every free block to a sink that discards each.
    fn report_all(&self) -> u64 {
        let mut sink =
            |blocks: &[ReportedBlock]| blocks.iter().all(|b| self.discard(b.pfn, b.pages()));
        must(self.zone.report_free_pages(u64::MAX, &mut sink))
    }
}

// SAFETY: the raw host address is of a mapping the guest owns; the zone and clearer are Sync.
unsafe impl Sync for Guest {}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// Rounds of `n` candidates, each with an untimed `setup` before its timed `run`, in a
/// shuffled order per round (as [`Samples::interleaved`]).
fn rounds(
    budget: Budget,
    n: usize,
    mut setup: impl FnMut(usize),
    mut run: impl FnMut(usize),
) -> Vec<Samples> {
    let mut all = vec![Vec::new(); n];
    for i in 0..n {
        setup(i);
        run(i);
    }
    budget.run(|round| {
        for i in crate::measure::round_order(round, n) {
            setup(i);
            let t = Instant::now();
            run(i);
            all[i].push(t.elapsed());
        }
    });
    all.into_iter().map(Samples::from_durations).collect()
}

impl Section for FreePageReporting {
    fn name(&self) -> &'static str {
        "free page reporting"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        4
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let bytes = if ctx.quick { 256 << 20 } else { 1 << 30 };
        let guest = Guest::new(bytes);
        let cpus = allowed_cpus();
        if let Some(&cpu) = cpus.first() {
            pin_current_thread(cpu);
        }

        // Resident memory: every page touched, everything free, one report.
        ctx.step("free page reporting: resident memory");
        guest.fault_in();
        let before = guest.resident();
        let reported = guest.report_all();
        let after = guest.resident();
        let stats = guest.zone.page_reporting_stats();
        let mut resident = Table::new(
            "reporting-resident",
            &format!(
                "Host resident memory of a {:.2} GiB guest, every page touched and then free, before and after one report",
                gib(bytes)
            ),
            &[
                "reported",
                "resident before",
                "resident after",
                "drop / reported",
            ],
        );
        let drop_share = (before.saturating_sub(after)) as f64 / (reported as usize * PAGE) as f64;
        resident.row(vec![
            Cell::text(format!(
                "{:.3} GiB in {} rounds",
                gib(reported as usize * PAGE),
                stats.reports
            )),
            Cell::text(format!("{:.3} GiB", gib(before))),
            Cell::text(format!("{:.3} GiB", gib(after))),
            Cell::text(format!("{:.1}%", drop_share * 100.0)),
        ]);
        resident.note(
            "Resident: mincore over the guest's host mapping. The sink is a balloon device's \
             discard, madvise(MADV_DONTNEED) per reported 2 MiB block; the zone then holds the \
             blocks as known zero (the registration says the discard zeroes, as it does for \
             anonymous memory).",
        );

        // The report's cost against the madvise of the same ranges alone.
        ctx.step("free page reporting: cost per GiB");
        let budget = Budget::cell(ctx.quick, 4.0);
        let blocks: Vec<Pfn> = (0..(bytes / PAGE) as u64)
            .step_by(1 << REPORT_ORDER)
            .map(Pfn)
            .collect();
        let samples = rounds(
            budget,
            2,
            |i| {
                if i == 0 {
                    guest.unreport_all();
                }
                guest.fault_in();
            },
            |i| {
                if i == 0 {
                    let n = guest.report_all();
                    assert_eq!(n as usize * PAGE, bytes, "a report of everything free");
                } else {
                    for &pfn in &blocks {
                        assert!(guest.discard(pfn, 1 << REPORT_ORDER));
                    }
                }
            },
        );
        let per_gib = |s: &Samples| s.seconds().map(|x| x * 1e3 / gib(bytes));
        // The report's time over the floor's, round by round.
        let over_floor = samples[1].speedup_over(&samples[0]);
        let mut cost = Table::new(
            "reporting-cost",
            "Reporting every free 2 MiB block against the host's madvise(MADV_DONTNEED) of the same ranges alone (ms per GiB, median ± 95% interval)",
            &["path", "ms per GiB", "over madvise alone"],
        );
        cost.row(vec![
            Cell::text("madvise(MADV_DONTNEED) of each 2 MiB range (the floor)"),
            Cell::estimate(per_gib(&samples[1]), 2, ""),
            Cell::text("1.00x"),
        ]);
        cost.row(vec![
            Cell::text(
                "report_free_pages: isolate 32 blocks, the sink's madvise, return them reported",
            ),
            Cell::estimate(per_gib(&samples[0]), 2, ""),
            Cell::text(ratio_text(over_floor)),
        ]);
        cost.note(
            "Both on the same resident memory (faulted in untimed before every round), one \
             round of each in a shuffled order; the ratio is the median of per-round ratios.",
        );

        // alloc_zeroed of a reported block against allocating and clearing it.
        ctx.step("free page reporting: zeroed allocation of reported memory");
        let o = order(REPORT_ORDER);
        let batch = 32usize;
        let clear = *guest.clearer.clearer();
        let touch = |pfn: Pfn| {
            for k in 0..o.pages() as usize {
                // SAFETY: a page of a block the section holds.
                unsafe { guest.at(pfn).add(k * PAGE).write_volatile(7) };
            }
        };
        let mut held = Vec::with_capacity(batch);
        let zeroed_samples = rounds(
            Budget::cell(ctx.quick, 3.0),
            4,
            |_| {
                // Every block free, reported and discarded: what the guest gets back.
                guest.unreport_all();
                guest.fault_in();
                guest.report_all();
            },
            |i| {
                for _ in 0..batch {
                    let pfn = if i % 2 == 0 {
                        must(
                            guest
                                .zone
                                .alloc_zeroed(0, o, &guest.clearer, None, &mut NoResched),
                        )
                    } else {
                        let pfn = must(guest.zone.alloc_pages(0, o));
                        // SAFETY: the block the section just allocated, in the guest mapping.
                        let bytes = unsafe {
                            std::slice::from_raw_parts_mut(guest.at(pfn), o.pages() as usize * PAGE)
                        };
                        clear_contig_pages(bytes, &clear, &mut NoResched)
                            .unwrap_or_else(|e| panic!("clear: {e}"));
                        pfn
                    };
                    if i >= 2 {
                        touch(pfn);
                    }
                    held.push(pfn);
                }
                for pfn in held.drain(..) {
                    // SAFETY: the section frees what it allocated, once.
                    must(unsafe { guest.zone.free_pages(0, pfn, o) });
                }
            },
        );
        let per_block = |s: &Samples| s.seconds().map(|x| x * 1e6 / batch as f64);
        let alloc_win = zeroed_samples[0].speedup_over(&zeroed_samples[1]);
        let touched_win = zeroed_samples[2].speedup_over(&zeroed_samples[3]);
        let mut zeroed = Table::new(
            "reporting-zeroed",
            "A zeroed 2 MiB block from reported (discarded) memory: buddy-sim's alloc_zeroed, which knows it reads zero, against Linux's behaviour, which clears it again (µs per block, median ± 95% interval)",
            &["path", "µs per block", "buddy-sim's speedup"],
        );
        zeroed.row(vec![
            Cell::text("Linux: allocate + clear (clear_contig_pages)"),
            Cell::estimate(per_block(&zeroed_samples[1]), 2, ""),
            Cell::text("—"),
        ]);
        zeroed.row(vec![
            Cell::text("buddy-sim: alloc_zeroed of a reported block (no clear)"),
            Cell::estimate(per_block(&zeroed_samples[0]), 2, ""),
            Cell::ratio_ci(alloc_win),
        ]);
        zeroed.row(vec![
            Cell::text("Linux, then the first touch of every page"),
            Cell::estimate(per_block(&zeroed_samples[3]), 2, ""),
            Cell::text("—"),
        ]);
        zeroed.row(vec![
            Cell::text("buddy-sim, then the first touch of every page"),
            Cell::estimate(per_block(&zeroed_samples[2]), 2, ""),
            Cell::ratio_ci(touched_win),
        ]);
        zeroed.note(format!(
            "Batches of {batch} blocks; before every round all of the guest's memory is touched, \
             freed and reported (discarded). The clear over discarded memory faults every page \
             in on the host; with the first touch of every page (a guest writing its new \
             memory) that fault moves to the touch, and what stays saved is the clear's writes."
        ));

        // Order-0 allocation during churn, with a reporter on another CPU or none.
        ctx.step("free page reporting: allocation during churn");
        let churn_ops = 20_000usize;
        let window = 8192usize;
        let stop = AtomicBool::new(false);
        let reporter_cpu = cpus.get(1).copied();
        let churn = |seed: u64| {
            let mut held: Vec<Pfn> = Vec::with_capacity(window);
            let mut x = seed | 1;
            for _ in 0..churn_ops {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if held.len() < window && (held.len() < window / 2 || !x.is_multiple_of(3)) {
                    let pfn = must(guest.zone.alloc_pages(0, Order::ZERO));
                    // SAFETY: a page the section just allocated.
                    unsafe { guest.at(pfn).write_volatile(1) };
                    held.push(pfn);
                } else {
                    let i = (x as usize) % held.len();
                    let pfn = held.swap_remove(i);
                    // SAFETY: the section frees what it allocated, once.
                    must(unsafe { guest.zone.free_pages(0, pfn, Order::ZERO) });
                }
            }
            for pfn in held {
                // SAFETY: as above.
                must(unsafe { guest.zone.free_pages(0, pfn, Order::ZERO) });
            }
        };
        let churn_samples = std::thread::scope(|s| {
            let reporter = s.spawn(|| {
                if let Some(cpu) = reporter_cpu {
                    pin_current_thread(cpu);
                }
                let mut sink = |blocks: &[ReportedBlock]| {
                    blocks.iter().all(|b| guest.discard(b.pfn, b.pages()))
                };
                while !stop.load(Ordering::Relaxed) {
                    let _ = guest.zone.report_free_pages(64 << 9, &mut sink);
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            // The reporter runs throughout; the rounds without it unregister the reporting
            // (its calls then return at once) and register it again after.
            let registration = PageReporting::new(order(REPORT_ORDER)).discard_zeroes(true);
            let mut seed = 0u64;
            let out = rounds(
                Budget::cell(ctx.quick, 3.0),
                2,
                |i| {
                    if i == 0 {
                        // Already registered after a round with the reporter: that is fine.
                        let _ = guest.zone.register_page_reporting(registration);
                    } else {
                        guest.zone.unregister_page_reporting();
                    }
                },
                |_| {
                    seed += 0x9E37_79B9;
                    churn(seed);
                },
            );
            stop.store(true, Ordering::Relaxed);
            let _ = reporter.join();
            out
        });
        let slowdown = churn_samples[0].speedup_over(&churn_samples[1]);
        let mut during = Table::new(
            "reporting-churn",
            &format!(
                "Order-0 allocation during churn ({churn_ops} allocations and frees over a window of {window} pages, each page written once): a reporter on {} against none (ns per operation, median ± 95% interval)",
                if reporter_cpu.is_some() {
                    "another CPU"
                } else {
                    "the same CPU (one allowed)"
                }
            ),
            &["reporter", "ns per operation", "speed against no reporter"],
        );
        let per_op = |s: &Samples| s.seconds().map(|x| x * 1e9 / churn_ops as f64);
        during.row(vec![
            Cell::text("none (reporting unregistered)"),
            Cell::estimate(per_op(&churn_samples[1]), 1, ""),
            Cell::text("1.00x"),
        ]);
        during.row(vec![
            Cell::text("report_free_pages of 64 blocks every 200 µs, discarding them"),
            Cell::estimate(per_op(&churn_samples[0]), 1, ""),
            Cell::ratio_ci(slowdown),
        ]);
        during.note(
            "A reported page the churn takes again faults in on the host at its first write: \
             that refault is part of reporting's cost and is in the figure.",
        );

        // Goals.
        let mut goals = Table::new(
            "reporting-goals",
            "Free page reporting goals, measured",
            &["goal", "measured", "verdict"],
        );
        goals.row(vec![
            Cell::text("host resident memory drops by at least 80% of what was reported"),
            Cell::text(format!("{:.1}%", drop_share * 100.0)),
            Cell::verdict(Verdict::met_if(drop_share >= 0.8)),
        ]);
        let cost_ratio = over_floor;
        goals.row(vec![
            Cell::text("reporting 1 GiB of free 2 MiB blocks costs at most 1.5x the madvise of the same ranges alone"),
            Cell::text(ratio_text(cost_ratio)),
            Cell::verdict(cost_ratio.judge(1.5, false)),
        ]);
        goals.row(vec![
            Cell::text("alloc_zeroed of a reported 2 MiB block at least 10x faster than allocating and clearing it"),
            Cell::text(ratio_text(alloc_win)),
            Cell::verdict(alloc_win.judge(10.0, true)),
        ]);
        goals.row(vec![
            Cell::text(
                "no slowdown of order-0 allocation during churn beyond the noise of one run",
            ),
            Cell::text(ratio_text(slowdown)),
            Cell::verdict(Verdict::met_if(slowdown.hi >= 1.0)),
        ]);
        goals.note(
            "The churn goal is met when the interval of per-round ratios reaches 1.0 (no \
             slowdown the run can tell from noise). Goals are reported, never asserted in \
             tests.",
        );
        ctx.headline(
            "alloc_zeroed of a reported 2 MiB block over allocate + clear",
            alloc_win,
        );
        vec![resident, cost, zeroed, during, goals]
    }
}
