//! Criterion benches for buddy-sim: seed 003's loop (alloc order 9, split, free the run)
//! with batched `free_contig_range` vs the per-page path, and the buddy_system_allocator
//! peer's whole-run free; and order-0 alloc/free pairs on 1 and 2 threads sharing one zone,
//! each thread on its own CPU's lists vs the zone behind one `spin::Mutex`. The report
//! (`cargo xtask report`) runs the full-size experiments.

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
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            unsafe { z.free_contig_range(0, p, 512) }.unwrap();
        });
    });
    g.bench_function("per_page", |b| {
        b.iter(|| {
            let p = z.alloc_pages(0, o9).unwrap();
            z.split_page(p, o9).unwrap();
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            unsafe { free_contig_range_per_page(&z.cpu(0).unwrap(), p, 512) }.unwrap();
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

/// Order-0 pairs: allocates 16 frames and frees them, `rounds` times, on `cpu` (or on CPU 0
/// under `one_lock`, as a zone behind one mutex is used).
fn pairs(z: &BoxedZone, cpu: usize, rounds: u64, one_lock: Option<&spin::Mutex<()>>) {
    let o0 = Order::new(0).unwrap();
    let mut held = [Pfn(0); 16];
    for _ in 0..rounds {
        for h in &mut held {
            let _guard = one_lock.map(spin::Mutex::lock);
            *h = z
                .alloc_pages(if one_lock.is_some() { 0 } else { cpu }, o0)
                .unwrap();
        }
        for &h in held.iter().rev() {
            let _guard = one_lock.map(spin::Mutex::lock);
            // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
            unsafe { z.free_pages(if one_lock.is_some() { 0 } else { cpu }, h, o0) }.unwrap();
        }
    }
}

fn smp_pairs(c: &mut Criterion) {
    let mut g = c.benchmark_group("smp_order0_pairs");
    g.throughput(Throughput::Elements(16));
    for threads in [1usize, 2] {
        for one_lock in [false, true] {
            let name = if one_lock {
                "one_spin_mutex"
            } else {
                "per_cpu"
            };
            let z: BoxedZone =
                BoxedZone::new_boxed(ZoneConfig::new(Pfn(0), FRAMES).with_cpus(2)).unwrap();
            let lock = spin::Mutex::new(());
            g.bench_function(format!("{name}/{threads}_threads"), |b| {
                b.iter_custom(|iters| {
                    let rounds = iters.div_ceil(threads as u64);
                    let start = std::time::Instant::now();
                    std::thread::scope(|s| {
                        for cpu in 0..threads {
                            let (z, lock) = (&z, &lock);
                            s.spawn(move || pairs(z, cpu, rounds, one_lock.then_some(lock)));
                        }
                    });
                    // `iters` rounds in all, shared by the threads: when they scale, the
                    // time per round falls.
                    start.elapsed()
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, seed_loop, smp_pairs);
criterion_main!(benches);
