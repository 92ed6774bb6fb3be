//! Criterion benches for zero-core: extent vs page-at-a-time clearing, each strategy vs
//! `ptr::write_bytes`, and folio orders. Small sizes, so `cargo bench` stays short; the
//! report (`cargo xtask report`) runs the seed-sized experiments.

use benches::measure::Region;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use zero_core::{
    ClearConfig, CountingResched, FolioOrder, PageSize, Policy, PreemptModel, Strategy,
    clear_contig_pages, folio_zero_user, reference,
};

const MIB: usize = 1 << 20;

fn extent_vs_pages(c: &mut Criterion) {
    let mut region = Region::new(64 * MIB);
    let temporal = Policy::detect().temporal();
    let mut g = c.benchmark_group("extent_vs_page_at_a_time");
    for size in [2 * MIB, 64 * MIB] {
        let buf = &mut region.as_mut_slice()[..size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(BenchmarkId::new("page_at_a_time", size), |b| {
            b.iter(|| {
                reference::clear_pages_one_by_one(
                    black_box(&mut *buf),
                    PageSize::Size4KiB,
                    temporal,
                    &mut CountingResched::new(),
                )
            });
        });
        let cfg = ClearConfig::new(PageSize::Size4KiB, PreemptModel::Full)
            .with_policy(Policy::fixed(temporal))
            .validate()
            .expect("the detected temporal strategy is available");
        g.bench_function(BenchmarkId::new("whole_extent", size), |b| {
            b.iter(|| clear_contig_pages(black_box(&mut *buf), &cfg, &mut CountingResched::new()));
        });
    }
    g.finish();
}

fn strategies(c: &mut Criterion) {
    let mut region = Region::new(8 * MIB);
    let mut g = c.benchmark_group("strategies");
    for size in [4096, 2 * MIB, 8 * MIB] {
        let buf = &mut region.as_mut_slice()[..size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(BenchmarkId::new("write_bytes", size), |b| {
            // SAFETY: write_bytes over exactly the borrowed slice.
            b.iter(|| unsafe { std::ptr::write_bytes(black_box(buf.as_mut_ptr()), 0, buf.len()) });
        });
        for s in Strategy::available() {
            let cfg = ClearConfig::new(PageSize::Size4KiB, PreemptModel::Full)
                .with_policy(Policy::fixed(s))
                .validate()
                .expect("an available strategy");
            g.bench_function(BenchmarkId::new(s.name().replace(' ', "_"), size), |b| {
                b.iter(|| {
                    clear_contig_pages(black_box(&mut *buf), &cfg, &mut CountingResched::new())
                });
            });
        }
    }
    g.finish();
}

fn folio_orders(c: &mut Criterion) {
    let mut region = Region::new(2 * MIB);
    let buf = region.as_mut_slice();
    let mut g = c.benchmark_group("folio_zero_user_2MiB");
    g.throughput(Throughput::Bytes(buf.len() as u64));
    for (name, order) in [
        ("neighbourhood_last", FolioOrder::NeighbourhoodLast),
        ("target_last", FolioOrder::TargetLast),
    ] {
        let cfg = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
            .with_folio_order(order)
            .validate()
            .expect("the detected policy is available");
        g.bench_function(name, |b| {
            b.iter(|| {
                folio_zero_user(
                    black_box(&mut *buf),
                    300 * 4096,
                    &cfg,
                    &mut CountingResched::new(),
                )
            });
        });
    }
    g.finish();
}

criterion_group!(benches, extent_vs_pages, strategies, folio_orders);
criterion_main!(benches);
