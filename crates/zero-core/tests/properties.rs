//! The optimized clearing paths against the page-at-a-time reference and the kernel's plans,
//! over arbitrary page counts, page sizes, preemption models, batch overrides, strategies and
//! fault offsets, with guard bytes on both sides of every buffer.

use core::num::NonZeroUsize;
use proptest::prelude::*;
use zero_core::plan::{ChunkPlan, FaultRanges, TargetLastOrder};
use zero_core::{
    ClearConfig, Clearer, CountingResched, FolioOrder, Locality, PageSize, ParallelClear, Policy,
    PreemptModel, Strategy as Clear, Temperature, ZeroError, clear_contig_pages, folio_zero_user,
    reference,
};

#[path = "support/bytes.rs"]
mod bytes;
use bytes::all_bytes_are;

const POISON: u8 = 0xA5;

fn config() -> ProptestConfig {
    if cfg!(miri) {
        // Miri runs a case in seconds; isolation hides PROPTEST_CASES and getcwd.
        ProptestConfig {
            cases: 4,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    } else {
        ProptestConfig::default()
    }
}

/// Largest page count tried: small under Miri, where every byte checked costs.
const MAX_PAGES: usize = if cfg!(miri) { 5 } else { 40 };

/// A page-aligned region of `npages` pages with at least one poisoned page of guard bytes
/// on each side.
struct Guarded {
    backing: Vec<u8>,
    start: usize,
    len: usize,
}

impl Guarded {
    fn new(npages: usize, page: PageSize) -> Self {
        let p = page.bytes();
        let backing = vec![POISON; (npages + 3) * p];
        let start = backing.as_ptr().align_offset(p) + p;
        Self {
            backing,
            start,
            len: npages * p,
        }
    }

    fn region(&mut self) -> &mut [u8] {
        &mut self.backing[self.start..self.start + self.len]
    }

    /// Every byte inside zero, every byte outside still poison.
    fn check(&self) -> Result<(), TestCaseError> {
        let (inside, end) = (
            &self.backing[self.start..self.start + self.len],
            self.start + self.len,
        );
        prop_assert!(all_bytes_are(inside, 0), "a byte in range is not zero");
        prop_assert!(
            all_bytes_are(&self.backing[..self.start], POISON)
                && all_bytes_are(&self.backing[end..], POISON),
            "a guard byte changed"
        );
        Ok(())
    }

    fn untouched(&self) -> bool {
        all_bytes_are(&self.backing, POISON)
    }
}

fn page_size() -> impl proptest::strategy::Strategy<Value = PageSize> {
    if cfg!(miri) {
        Just(PageSize::Size4KiB).boxed()
    } else {
        prop::sample::select(PageSize::ALL.to_vec()).boxed()
    }
}

fn preempt() -> impl proptest::strategy::Strategy<Value = PreemptModel> {
    prop::sample::select(PreemptModel::ALL.to_vec())
}

/// A fixed available strategy, or the detected policy with small random thresholds and
/// fault radius so that temporal and streaming extents mix, with or without a strategy of
/// its own for small extents (any available one, below a random size).
fn policy() -> impl proptest::strategy::Strategy<Value = Policy> {
    let available: Vec<_> = Clear::available().collect();
    let thresholds = (0usize..200_000, 0usize..200_000, 0usize..6).prop_map(|(t, c, r)| {
        Policy::detect()
            .with_streaming_threshold(t)
            .with_cold_threshold(c)
            .with_fault_radius(r)
    });
    prop_oneof![
        prop::sample::select(available.clone()).prop_map(Policy::fixed),
        thresholds.clone(),
        (thresholds, prop::sample::select(available), 0usize..200_000)
            .prop_map(|(p, small, below)| p.with_small(small, below)),
    ]
}

fn temperature() -> impl proptest::strategy::Strategy<Value = Temperature> {
    prop::sample::select(vec![
        Temperature::Unknown,
        Temperature::Hot,
        Temperature::Cold,
    ])
}

fn batch() -> impl proptest::strategy::Strategy<Value = Option<NonZeroUsize>> {
    prop::option::of((1usize..=2 * MAX_PAGES).prop_map(|n| NonZeroUsize::new(n).unwrap()))
}

fn clear_config() -> impl proptest::strategy::Strategy<Value = ClearConfig> {
    (page_size(), preempt(), policy(), batch(), temperature()).prop_map(|(ps, pm, pol, b, t)| {
        let cfg = ClearConfig::new(ps, pm).with_policy(pol).with_memory(t);
        match b {
            Some(b) => cfg.with_batch_pages(b),
            None => cfg,
        }
    })
}

/// The chunks `clear_contig` runs for `pages`, checked: consecutive, exact cover of the
/// range in ascending order, none larger than the unit the model allows.
fn checked_chunks(
    clearer: &Clearer,
    pages: core::ops::Range<usize>,
    locality: Locality,
) -> Result<Vec<core::ops::Range<usize>>, TestCaseError> {
    let cfg = clearer.config();
    let (plan, strategy) = clearer.plan(pages.clone(), locality);
    let bytes = pages.len().saturating_mul(cfg.page_size.bytes());
    prop_assert_eq!(
        strategy,
        cfg.policy.choose(bytes, locality),
        "the clearer's strategy is not the policy's"
    );
    let chunks: Vec<_> = plan.collect();
    let mut next = pages.start;
    let batch = cfg.batch_for(strategy).get();
    for c in &chunks {
        prop_assert_eq!(c.start, next, "chunks not consecutive");
        prop_assert!(!c.is_empty(), "empty chunk");
        if !cfg.preempt.is_preemptible() {
            prop_assert!(
                c.len() <= batch,
                "chunk {:?} larger than batch {}",
                c,
                batch
            );
        }
        next = c.end;
    }
    prop_assert_eq!(
        next,
        pages.end.max(pages.start),
        "chunks do not cover the range"
    );
    if cfg.preempt.is_preemptible() {
        prop_assert!(chunks.len() <= 1, "preemptible model cut the range");
    }
    Ok(chunks)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn clear_contig_pages_zeroes_exactly_the_range(npages in 1..=MAX_PAGES, cfg in clear_config()) {
        let clearer = cfg.validate().unwrap();
        let mut g = Guarded::new(npages, cfg.page_size);
        let mut resched = CountingResched::new();
        clear_contig_pages(g.region(), &clearer, &mut resched).unwrap();
        g.check()?;
        let chunks = checked_chunks(&clearer, 0..npages, clearer.config().memory.locality(false))?;
        prop_assert_eq!(resched.calls(), chunks.len(), "cond_resched not once per chunk");
    }

    #[test]
    fn clear_contig_pages_matches_the_reference(npages in 1..=MAX_PAGES, cfg in clear_config()) {
        let mut optimized = Guarded::new(npages, cfg.page_size);
        let mut naive = Guarded::new(npages, cfg.page_size);
        clear_contig_pages(optimized.region(), &cfg.validate().unwrap(), &mut CountingResched::new()).unwrap();
        let mut per_page = CountingResched::new();
        reference::clear_pages_one_by_one(naive.region(), cfg.page_size, cfg.policy.temporal(), &mut per_page).unwrap();
        prop_assert_eq!(optimized.region(), naive.region());
        prop_assert_eq!(per_page.calls(), npages);
        optimized.check()?;
    }

    #[test]
    fn folio_zero_user_clears_in_the_kernel_order(
        npages in 1..=MAX_PAGES,
        fault_frac in 0.0f64..1.0,
        cfg in clear_config(),
        target_last in any::<bool>(),
    ) {
        let cfg = if target_last { cfg.with_folio_order(FolioOrder::TargetLast) } else { cfg };
        let clearer = cfg.validate().unwrap();
        let len = npages * cfg.page_size.bytes();
        let fault_offset = ((len as f64 * fault_frac) as usize).min(len - 1);
        let fault = fault_offset / cfg.page_size.bytes();
        let mut g = Guarded::new(npages, cfg.page_size);
        let mut resched = CountingResched::new();
        folio_zero_user(g.region(), fault_offset, &clearer, &mut resched).unwrap();
        g.check()?;

        let mut expected = Vec::new();
        let mut order = Vec::new();
        let mut chunks = 0;
        if target_last {
            reference::target_last_order(npages, fault, |p| expected.push(p));
            order.extend(TargetLastOrder::new(npages, fault).unwrap());
            chunks = npages;
        } else {
            let radius = clearer.config().policy.fault_radius();
            reference::neighbourhood_last_order(npages, fault, radius, |p| expected.push(p));
            for (range, hot) in FaultRanges::new(npages, fault, radius).unwrap().in_order() {
                let locality = if hot { Locality::TouchedNext } else { clearer.config().memory.locality(true) };
                for c in checked_chunks(&clearer, range, locality)? {
                    order.extend(c);
                    chunks += 1;
                }
            }
        }
        prop_assert_eq!(&order, &expected, "pages not cleared in the kernel's order");
        if target_last {
            prop_assert_eq!(order.last().copied(), Some(fault), "target not last");
        } else {
            let hot = FaultRanges::new(npages, fault, clearer.config().policy.fault_radius()).unwrap().neighbourhood;
            prop_assert!(order[order.len() - hot.len()..].contains(&fault), "fault not in the last range");
        }
        prop_assert_eq!(resched.calls(), chunks, "cond_resched not once per chunk");
    }

    #[test]
    fn parallel_clear_zeroes_exactly_the_range(
        npages in 1..=MAX_PAGES,
        chunk in 1usize..8,
        workers in 1usize..4,
        cfg in clear_config(),
    ) {
        let mut g = Guarded::new(npages, cfg.page_size);
        let chunk = NonZeroUsize::new(chunk).unwrap();
        let job = ParallelClear::new(g.region(), chunk, &cfg.validate().unwrap()).unwrap();
        let done: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers).map(|_| s.spawn(|| job.work(&mut CountingResched::new()))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        prop_assert_eq!(done, npages.div_ceil(chunk.get()), "chunks not cleared exactly once");
        g.check()?;
    }

    #[test]
    fn target_last_order_is_a_permutation_ending_at_the_target(n in 1usize..300, t_frac in 0.0f64..1.0) {
        let t = ((n as f64 * t_frac) as usize).min(n - 1);
        let order: Vec<_> = TargetLastOrder::new(n, t).unwrap().collect();
        prop_assert_eq!(order.last().copied(), Some(t));
        let mut sorted = order.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn fault_neighbourhood_is_last_and_within_radius(n in 1usize..10_000, f_frac in 0.0f64..1.0, radius in 0usize..40) {
        let f = ((n as f64 * f_frac) as usize).min(n - 1);
        let r = FaultRanges::new(n, f, radius).unwrap();
        prop_assert!(r.neighbourhood.contains(&f));
        prop_assert!(r.neighbourhood.len() <= 2 * radius + 1);
        prop_assert!(r.neighbourhood.start == f.saturating_sub(radius));
        prop_assert!(r.neighbourhood.end == (f + radius + 1).min(n));
        prop_assert_eq!(r.left.end, r.neighbourhood.start);
        prop_assert_eq!(r.neighbourhood.end, r.right.start);
        prop_assert_eq!((r.left.start, r.right.end), (0, n));
    }

    #[test]
    fn chunk_plan_is_an_exact_cover(start in 0usize..1000, len in 0usize..5000, unit in 1usize..700) {
        let unit = NonZeroUsize::new(unit).unwrap();
        let plan = ChunkPlan::new(start..start + len, unit);
        prop_assert_eq!(plan.len(), len.div_ceil(unit.get()));
        let mut next = start;
        for c in plan {
            prop_assert_eq!(c.start, next);
            prop_assert!(!c.is_empty() && c.len() <= unit.get());
            next = c.end;
        }
        prop_assert_eq!(next, start + len);
    }

    #[test]
    fn bad_geometry_is_an_error_and_writes_nothing(
        npages in 1..=MAX_PAGES,
        cfg in clear_config(),
        skew in 1usize..4096,
        fault_past in 0usize..4096,
    ) {
        let p = cfg.page_size.bytes();
        let cfg = cfg.validate().unwrap();
        let mut g = Guarded::new(npages, cfg.page_size());
        let start = g.start;
        let mut r = CountingResched::new();
        // Misaligned start.
        let e = clear_contig_pages(&mut g.backing[start + skew..start + skew + p], &cfg, &mut r);
        prop_assert!(matches!(e, Err(ZeroError::Misaligned { .. })), "{:?}", e);
        // Not a whole number of pages.
        let e = clear_contig_pages(&mut g.backing[start..start + npages * p - skew.min(p - 1)], &cfg, &mut r);
        prop_assert!(matches!(e, Err(ZeroError::NotPageMultiple { .. })), "{:?}", e);
        // Empty.
        let e = clear_contig_pages(&mut g.backing[start..start], &cfg, &mut r);
        prop_assert_eq!(e, Err(ZeroError::ZeroLength));
        // Fault outside the folio.
        let e = folio_zero_user(g.region(), npages * p + fault_past, &cfg, &mut r);
        // In bytes, as documented.
        prop_assert_eq!(
            e,
            Err(ZeroError::FaultOutsideFolio { offset: npages * p + fault_past, len: npages * p })
        );
        prop_assert!(g.untouched(), "an error path wrote memory");
        prop_assert_eq!(r.calls(), 0);
    }
}

#[test]
fn unavailable_strategy_is_refused_once() {
    for s in Clear::ALL.into_iter().filter(|s| !s.is_available()) {
        let cfg =
            ClearConfig::new(PageSize::Size4KiB, PreemptModel::None).with_policy(Policy::fixed(s));
        assert_eq!(cfg.validate(), Err(ZeroError::StrategyUnavailable(s)));
        let streaming = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
            .with_policy(Policy::detect().with_streaming(Some(s)));
        assert_eq!(streaming.validate(), Err(ZeroError::StrategyUnavailable(s)));
    }
}

#[test]
fn raw_overflow_is_an_error() {
    let cfg = Clearer::detected(PageSize::Size64KiB, PreemptModel::None);
    let dst = core::ptr::null_mut::<u8>().wrapping_add(1 << 16);
    // SAFETY: both calls fail validation before touching memory.
    let e = unsafe {
        zero_core::clear_contig_pages_raw(dst, usize::MAX / 2, &cfg, &mut CountingResched::new())
    };
    assert_eq!(e, Err(ZeroError::Overflow));
    // SAFETY: as above.
    let e = unsafe { zero_core::clear_contig_pages_raw(dst, 0, &cfg, &mut CountingResched::new()) };
    assert_eq!(e, Err(ZeroError::ZeroLength));
}

#[test]
fn one_gib_batches_match_the_kernel() {
    // 1 GiB of 4 KiB pages under PREEMPT_NONE with rep stosb: 32 batches of 32 MiB.
    // With this CPU's extent strategy (rep stosb on x86_64); the portable one under Miri.
    let extent = Clear::available().find(|s| s.is_extent() && !s.is_non_temporal());
    let cfg = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
        .with_policy(Policy::fixed(extent.unwrap_or(Clear::Portable)));
    let clearer = cfg.validate().unwrap();
    let (plan, _) = clearer.plan(0..262_144, Locality::Unknown);
    assert_eq!(plan.len(), if extent.is_some() { 32 } else { 262_144 });
    let full = ClearConfig {
        preempt: PreemptModel::Full,
        ..cfg
    };
    assert_eq!(
        full.validate()
            .unwrap()
            .plan(0..262_144, Locality::Unknown)
            .0
            .len(),
        1
    );
    // The portable strategy models the generic per-page loop: one page per batch.
    let portable = clearer.with_policy(Policy::fixed(Clear::Portable)).unwrap();
    assert_eq!(portable.plan(0..512, Locality::Unknown).0.len(), 512);
}
