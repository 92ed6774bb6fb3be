//! Criterion benches for pte-batch: one aging pass over 256 MiB of 64 KiB folios, batched vs
//! per-entry, for arm64 (4 KiB granule, contpte) and x86. The report (`cargo xtask report`)
//! runs seed 002's full-size scenario.

use benches::young::{Scenario, Touch};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use pte_batch::format::Arm64;
use pte_batch::{FpbFlags, PteFormat, X86_64};

const BYTES: u64 = 256 << 20;

fn aging<F: PteFormat>(c: &mut Criterion, name: &str, f: F) {
    let s = Scenario::new(f, BYTES, 16, false, Touch::RandomPage);
    let mut g = c.benchmark_group(format!("aging_256MiB_{name}"));
    g.throughput(Throughput::Elements(BYTES >> f.page_size().shift()));
    g.bench_function("batched", |b| {
        b.iter_batched(
            || s.touch(),
            |()| s.age_batched(FpbFlags::NONE),
            BatchSize::PerIteration,
        );
    });
    g.bench_function("per_entry", |b| {
        b.iter_batched(
            || s.touch(),
            |()| s.age_per_entry(),
            BatchSize::PerIteration,
        );
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    aging(c, "arm64_4k", Arm64::G4K);
    aging(c, "x86_64", X86_64);
}

criterion_group!(young, benches);
criterion_main!(young);
