//! The pure plans of zero-core under arbitrary input: chunk plans, fault ranges and the
//! target-last order never panic, and each is an exact cover in the reference order.
#![no_main]

use arbitrary::Arbitrary;
use core::num::NonZeroUsize;
use libfuzzer_sys::fuzz_target;
use zero_core::plan::{ChunkPlan, FAULT_RADIUS, FaultRanges, TargetLastOrder};
use zero_core::{
    PageSize, PreemptModel, batch_pages_for_latency, non_preempt_batch_pages, reference,
};

#[derive(Arbitrary, Debug)]
struct Input {
    npages: usize,
    fault: usize,
    start: usize,
    batch: Option<NonZeroUsize>,
    model: u8,
    page_size: u8,
    extent: bool,
    bandwidth: u64,
    latency_ns: u64,
}

/// Orders are materialised only up to this many pages, and plans followed for this many
/// chunks, to keep each run fast (tens of microseconds): the arithmetic is the same past
/// them, and the huge and overflowing cases are still planned, their first chunks checked.
const MAX_ORDER_PAGES: usize = 1 << 10;
const MAX_CHUNKS: usize = 1 << 10;

fuzz_target!(|input: Input| {
    let model = PreemptModel::ALL[usize::from(input.model) % PreemptModel::ALL.len()];
    let page_size = PageSize::ALL[usize::from(input.page_size) % PageSize::ALL.len()];
    let batch = input
        .batch
        .unwrap_or(non_preempt_batch_pages(page_size, input.extent));
    // The latency batch is the most pages that fit the byte budget, and at least one.
    let pages = batch_pages_for_latency(page_size, input.bandwidth, input.latency_ns).get() as u128;
    let budget = u128::from(input.bandwidth) * u128::from(input.latency_ns) / 1_000_000_000;
    let page = page_size.bytes() as u128;
    assert!(pages == 1 || pages * page <= budget, "batch over budget");
    assert!(
        pages == usize::MAX as u128 || (pages + 1) * page > budget,
        "batch not maximal"
    );

    // Chunk plan over an arbitrary (possibly huge, possibly reversed) range.
    let end = input.start.saturating_add(input.npages);
    let plan = ChunkPlan::for_clear(input.start..end, model, batch);
    let expected = plan.len();
    let (mut next, mut count) = (input.start, 0usize);
    for chunk in plan.take(MAX_CHUNKS) {
        assert_eq!(chunk.start, next);
        assert!(!chunk.is_empty());
        assert!(model.is_preemptible() || chunk.len() <= batch.get());
        next = chunk.end;
        count += 1;
    }
    if count < MAX_CHUNKS {
        assert_eq!(next, end);
        assert_eq!(count, expected);
    }

    // Fault ranges and orders: errors for bad input, exact covers otherwise.
    let n = input.npages;
    // Any radius: an exact cover around the fault, never a panic.
    if let Ok(r) = FaultRanges::new(n, input.fault, input.start) {
        assert!(r.neighbourhood.contains(&input.fault));
        assert_eq!(
            (r.left.start, r.left.end, r.right.start, r.right.end),
            (0, r.neighbourhood.start, r.neighbourhood.end, n)
        );
    }
    match FaultRanges::new(n, input.fault, FAULT_RADIUS) {
        Err(_) => assert!(n == 0 || input.fault >= n),
        Ok(r) => {
            assert!(r.neighbourhood.contains(&input.fault));
            assert_eq!(
                (r.left.start, r.left.end, r.right.start, r.right.end),
                (0, r.neighbourhood.start, r.neighbourhood.end, n)
            );
            if n <= MAX_ORDER_PAGES {
                let mut want = Vec::new();
                reference::neighbourhood_last_order(n, input.fault, FAULT_RADIUS, |p| want.push(p));
                let got: Vec<usize> = r
                    .in_order()
                    .into_iter()
                    .flat_map(|(range, _)| range)
                    .collect();
                assert_eq!(got, want);
            }
        }
    }
    match TargetLastOrder::new(n, input.fault) {
        Err(_) => assert!(n == 0 || input.fault >= n),
        Ok(order) if n <= MAX_ORDER_PAGES => {
            let got: Vec<usize> = order.collect();
            let mut want = Vec::new();
            reference::target_last_order(n, input.fault, |p| want.push(p));
            assert_eq!(got, want);
            assert_eq!(got.last(), Some(&input.fault));
            let mut seen = vec![false; n];
            for p in got {
                assert!(!std::mem::replace(&mut seen[p], true), "page {p} twice");
            }
        }
        Ok(_) => {}
    }
});
