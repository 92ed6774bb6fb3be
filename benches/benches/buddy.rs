//! Criterion benches for buddy-sim: seed 003's loop (alloc order 9, split, free the run)
//! with batched `free_contig_range` vs the per-page path, and the buddy_system_allocator
//! peer's whole-run free. The report (`cargo xtask report`) runs the full-size experiment.

use buddy_sim::reference::free_contig_range_per_page;
use buddy_sim::{BoxedZone, Order, Pfn, ZoneConfig};
use buddy_system_allocator::FrameAllocator;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const FRAMES: u64 = 1 << 16;

fn seed_loop(c: &mut Criterion) {
    let o9 = Order::new(9).unwrap();
    let mut g = c.benchmark_group("alloc_split_free_order9");
    g.throughput(Throughput::Elements(512));
    let z = BoxedZone::new_boxed(ZoneConfig::new(Pfn(0), FRAMES)).unwrap();
    g.bench_function("batched_free_contig_range", |b| {
        b.iter(|| {
            let p = z.alloc_pages(0, o9).unwrap();
            z.split_page(p, o9).unwrap();
            z.free_contig_range(0, p, 512).unwrap();
        });
    });
    g.bench_function("per_page", |b| {
        b.iter(|| {
            let p = z.alloc_pages(0, o9).unwrap();
            z.split_page(p, o9).unwrap();
            free_contig_range_per_page(&z, 0, p, 512).unwrap();
        });
    });
    let mut peer = FrameAllocator::<11>::new();
    peer.add_frame(0, FRAMES as usize);
    g.bench_function("buddy_system_allocator_whole_run", |b| {
        b.iter(|| {
            let p = peer.alloc(512).unwrap();
            peer.dealloc(p, 512);
        });
    });
    g.finish();
}

criterion_group!(benches, seed_loop);
criterion_main!(benches);
