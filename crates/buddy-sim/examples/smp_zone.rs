//! One zone shared by every core, as an SMP kernel boots it: metadata in statics, a memory
//! map with a hole, then one thread per core allocating, splitting, freeing runs with
//! `free_contig_range` and freeing single pages, each on its own CPU's lists. At the end the
//! zone is whole again and its invariants hold.
//!
//! `cargo run --example smp_zone`

use buddy_sim::{BuddyError, Frame, Order, PerCpu, Pfn, Zone, ZoneConfig};

const FRAMES: usize = 16 * 1024; // 64 MiB of 4 KiB frames
const CPUS: usize = 8;
const BASE: Pfn = Pfn(0x4_0000);

static META: [Frame; FRAMES] = [const { Frame::new() }; FRAMES];
static PCPS: [PerCpu; CPUS] = [const { PerCpu::new() }; CPUS];

fn main() -> Result<(), BuddyError> {
    let cores = std::thread::available_parallelism()
        .map_or(2, usize::from)
        .min(CPUS);
    let cfg = ZoneConfig::new(BASE, FRAMES as u64).with_cpus(cores);
    let zone = Zone::new_empty(cfg, &META[..], &PCPS[..cores])?;
    // The firmware's map: all of it usable but a 1 MiB hole (a device window) at 32 MiB.
    let hole = (8192, 256);
    zone.add_memory(BASE, hole.0)?;
    zone.add_memory(
        Pfn(BASE.0 + hole.0 + hole.1),
        FRAMES as u64 - hole.0 - hole.1,
    )?;
    let usable = zone.buddy_pages();

    let o9 = Order::new(9)?;
    std::thread::scope(|s| {
        let zone = &zone;
        let workers: Vec<_> = (0..cores)
            .map(|cpu| {
                s.spawn(move || -> Result<(), BuddyError> {
                    for _ in 0..200 {
                        // A 2 MiB folio, split and given back as pages in one call...
                        let run = zone.alloc_pages(cpu, o9)?;
                        zone.split_page(run, o9)?;
                        // SAFETY: this thread allocated and split the run and no longer uses it.
                        unsafe { zone.free_contig_range(cpu, run, o9.pages())? };
                        // ...and single pages, the way page tables come and go.
                        let page = zone.alloc_pages(cpu, Order::ZERO)?;
                        // SAFETY: this thread allocated the page and no longer uses it.
                        unsafe { zone.free_pages(cpu, page, Order::ZERO)? };
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a worker panicked"))
    })?;

    zone.drain_all();
    zone.check().expect("the zone's invariants hold");
    assert_eq!(zone.buddy_pages(), usable);
    println!(
        "{cores} CPUs shared one zone of {} usable frames (hole of {} frames kept out): {:?}",
        usable,
        hole.1,
        zone.counters()
    );
    Ok(())
}
