//! Steps 5 to 7 (touch, age, refault and the negative control) and the timed aging and
//! free passes the x86_64 kernel's measurements run.

use super::*;

use buddy_sim::Order;
use pte_batch::mm_types::PageRange;
use pte_batch::{AgingStats, FpbFlags, PteFormat, TlbFlush, age_range};

/// A `TlbFlush` that invalidates nothing: the negative control.
pub(super) struct SkippedFlush(u64);

impl TlbFlush for SkippedFlush {
    fn flush_range(&mut self, _: PageRange) {
        self.0 += 1;
    }
}

impl<P: Platform> Kernel<P> {
    /// One aging pass over the data region; returns which folios were young. A format that
    /// does not flush for young clearing (x86: Linux skips it, the TLB ages out) gets one
    /// invalidation of each table's range here, so that the next access is seen.
    pub(super) fn age(&mut self, tlb: &mut impl TlbFlush) -> ([bool; MAX_FOLIOS], AgingStats) {
        P::sync();
        let mut young = [false; MAX_FOLIOS];
        let mut stats = AgingStats::default();
        for t in 0..DATA_TABLES {
            let table = locate::<P>(t * 512).0;
            let lookup = self.lookup();
            let base = self.data_pfn;
            let layout = &self.layout;
            stats += age_range(
                &table,
                0..512,
                &lookup,
                FpbFlags::IGNORE_CONT,
                tlb,
                |f, y| {
                    if let Some(i) = layout.folio_of_page((f.start.0 - base) as usize) {
                        young[i] |= y;
                    }
                },
            )
            .unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("{e}")));
            if !P::FORMAT.flushes_young() {
                let range = PageRange::new(table.base(), 512, P::FORMAT.page_size());
                tlb.flush_range(range);
            }
        }
        (young, stats)
    }

    /// Step 5: Touch a pseudo-random third of the folios, one page each, reading or writing.
    pub(super) fn touch_some(&self) -> [Option<(usize, bool)>; MAX_FOLIOS] {
        let mut touched: [Option<(usize, bool)>; MAX_FOLIOS] = [None; MAX_FOLIOS];
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for (i, (first, pages)) in self.layout.iter().enumerate() {
            if !rng.next().is_multiple_of(3) {
                continue;
            }
            let mut g = first + (rng.next() as usize) % pages;
            if g == UNMAPPED_PAGE {
                g -= 1;
            }
            touched[i] = Some((g, rng.next().is_multiple_of(2)));
        }
        // SAFETY: step 4 mapped every data page but UNMAPPED_PAGE, which is never picked.
        unsafe { touch_all(&touched) };
        let n_touched = touched.iter().flatten().count();
        let n_written = touched.iter().flatten().filter(|t| t.1).count();
        println!("touched {n_touched} folios ({n_written} written)");
        touched
    }

    /// Step 6: Age: the young folios must be exactly the touched ones; written pages stay dirty.
    pub(super) fn age_exactly(&mut self, touched: &[Option<(usize, bool)>; MAX_FOLIOS]) {
        let mut tlb = P::tlb();
        let t0 = P::now_ns();
        let (young, stats) = self.age(&mut tlb);
        let pass_ns = P::now_ns().saturating_sub(t0);
        for (i, y) in young.iter().enumerate().take(self.layout.len) {
            if *y != touched[i].is_some() {
                fail::<P>(
                    Step::Aging,
                    format_args!("folio {i}: young {y}, touched {:?}", touched[i]),
                );
            }
        }
        for &(g, write) in touched.iter().flatten() {
            let (t, i) = locate::<P>(g);
            let pte = t
                .get(i)
                .unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("{e}")));
            if P::FORMAT.is_young(pte) {
                fail::<P>(
                    Step::Aging,
                    format_args!("page {g} still young after aging"),
                );
            }
            if write && !P::FORMAT.is_dirty(pte) {
                fail::<P>(
                    Step::Aging,
                    format_args!("page {g}: the write's dirty state was lost"),
                );
            }
        }
        self.aging_flushes = P::flushes(&tlb);
        println!(
            "aging: {} young of {} folios, as touched; {} batches, {} entry updates, {} range invalidates, {} us",
            stats.young_folios,
            stats.folios,
            stats.batches,
            stats.entry_updates,
            self.aging_flushes,
            pass_ns / 1000
        );
        self.stats = stats;
    }

    /// Step 7: Touch again: the flushed translations are walked again and the MMU sets the access
    /// flag again. Then the negative control: age without invalidating, and the TLB keeps the
    /// old translations.
    pub(super) fn refault_and_control(&mut self, touched: &[Option<(usize, bool)>; MAX_FOLIOS]) {
        // SAFETY: the pages step 5 touched, still mapped.
        unsafe { touch_all(touched) };
        P::sync();
        for &(g, _) in touched.iter().flatten() {
            let (t, i) = locate::<P>(g);
            if !t.get(i).is_ok_and(|e| P::FORMAT.is_young(e)) {
                fail::<P>(
                    Step::Refault,
                    format_args!("page {g}: no access flag after the flush"),
                );
            }
        }
        println!("re-touch: every touched page young again");
        let mut skipped = SkippedFlush(0);
        let _ = self.age(&mut skipped);
        // SAFETY: as above: aging changes no mapping.
        unsafe { touch_all(touched) };
        P::sync();
        let stale = touched
            .iter()
            .flatten()
            .filter(|&&(g, _)| {
                let (t, i) = locate::<P>(g);
                !t.get(i).is_ok_and(|e| P::FORMAT.is_young(e))
            })
            .count();
        let n_touched = touched.iter().flatten().count();
        if stale == 0 {
            match P::skipped_flush_observable() {
                Ok(()) => fail::<P>(
                    Step::NegativeControl,
                    format_args!("skipping {} flushes went unnoticed", skipped.0),
                ),
                Err(why) => {
                    println!(
                        "negative control: not observable here ({why}): with {} flushes skipped every re-touched page was young again",
                        skipped.0
                    );
                    P::flush_all();
                    return;
                }
            }
        }
        println!(
            "negative control: with {} flushes skipped, {stale} of {n_touched} re-touched pages stayed old (detected)",
            skipped.0
        );
        P::flush_all();
    }

    /// For the measurements (the x86_64 kernel's, under KVM): `rounds` timed aging passes over the whole data region with
    /// every mapped page young (made young untimed before each pass: a full flush, then a read
    /// of every page), batched and per-entry alternately; `sample(batched, ticks)` gets each
    /// pass's `now()` difference.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))]
    pub fn time_aging(
        &mut self,
        rounds: usize,
        now: impl Fn() -> u64,
        mut sample: impl FnMut(bool, u64),
    ) {
        if !self.data_mapped {
            fail::<P>(
                Step::Mapping,
                format_args!("time_aging: the data region is not mapped"),
            );
        }
        let mut tlb = P::tlb();
        for _ in 0..rounds {
            for batched in [true, false] {
                P::flush_all();
                for g in (0..DATA_PAGES).filter(|&g| g != UNMAPPED_PAGE) {
                    // SAFETY: the data region is mapped (checked above), but UNMAPPED_PAGE.
                    unsafe { touch(g, false) };
                }
                P::sync();
                let lookup = self.lookup();
                let t0 = now();
                for t in 0..DATA_TABLES {
                    let table = locate::<P>(t * 512).0;
                    let r = if batched {
                        age_range(
                            &table,
                            0..512,
                            &lookup,
                            FpbFlags::IGNORE_CONT,
                            &mut tlb,
                            |_, _| {},
                        )
                    } else {
                        pte_batch::reference::age_range(
                            &table,
                            0..512,
                            &lookup,
                            &mut tlb,
                            |_, _| {},
                        )
                    };
                    r.unwrap_or_else(|e| fail::<P>(Step::Aging, format_args!("{e}")));
                }
                sample(batched, now().wrapping_sub(t0));
            }
        }
    }

    /// For the measurements: `rounds` timed frees of a 512-page run (an order-9 block split
    /// into order-0 pages), with `free_contig_range` and page by page alternately;
    /// `sample(batched, ticks)` gets each free's `now()` difference.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))]
    pub fn time_free(
        &self,
        rounds: usize,
        now: impl Fn() -> u64,
        mut sample: impl FnMut(bool, u64),
    ) {
        let order = Order::new(9).unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
        let cpu = self
            .zone
            .cpu(0)
            .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
        for _ in 0..rounds {
            for batched in [true, false] {
                let pfn = self
                    .zone
                    .alloc_pages(0, order)
                    .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
                self.zone
                    .split_page(pfn, order)
                    .unwrap_or_else(|e| fail::<P>(Step::Zone, format_args!("{e}")));
                let t0 = now();
                // SAFETY: allocated and split just above, never used.
                let r = unsafe {
                    if batched {
                        self.zone.free_contig_range(0, pfn, 512)
                    } else {
                        buddy_sim::reference::free_contig_range_per_page(&cpu, pfn, 512)
                    }
                };
                sample(batched, now().wrapping_sub(t0));
                r.unwrap_or_else(|e| fail::<P>(Step::Free, format_args!("{e}")));
            }
        }
    }
}
