//! The "observability" section: what the tools a kernel engineer debugs memory with cost on
//! the call kernels make most, one page taken and given back on CPU 0 of a two-CPU zone.
//! Callgrind instructions per pair (exact), for a zone with no event hook, with a hook that
//! implements nothing (it must cost nothing: equal counts), with a hook that counts pages
//! allocated and freed into per-CPU arrays as a kernel's statistics would (at most 5%),
//! with page_owner recording every block, and with fault injection armed but failing
//! nothing (probability 0).

use crate::count::{self, Workload};
use crate::measure::{Estimate, Verdict};
use crate::report::ratio_text;
use crate::{Cell, Section, SectionContext, Table, must};
use buddy_sim::events::{PageAlloc, PageFree, ZoneEvents};
use buddy_sim::{
    AllocRequest, FailPageAlloc, Frame, Order, OwnerRecord, PerCpu, Pfn, Zone, ZoneConfig,
};
use buddy_sim::{PerCpuSet, WithEvents};
use std::sync::atomic::{AtomicU64, Ordering};

/// The observability section.
pub struct Observability;

/// Frames of the zones measured.
const FRAMES: u64 = 1 << 16;

/// A hook that implements nothing.
struct Silent;

impl ZoneEvents for Silent {}

/// The CPUs of every zone here.
const CPUS: usize = 2;

/// A hook counting frames allocated and freed per CPU, as Linux's per-CPU vmstat counters.
struct PerCpuCounts {
    alloc: [AtomicU64; CPUS],
    free: [AtomicU64; CPUS],
}

impl ZoneEvents for PerCpuCounts {
    #[inline]
    fn page_alloc(&self, e: &PageAlloc<'_>) {
        // A zone of `CPUS` CPUs numbers them below `CPUS`: the remainder is the number,
        // and an index the compiler knows is in bounds (no check, as `this_cpu_add`).
        self.alloc[e.cpu.get() % CPUS].fetch_add(e.order.pages(), Ordering::Relaxed);
    }

    #[inline]
    fn page_free(&self, e: &PageFree<'_>) {
        self.free[e.cpu.get() % CPUS].fetch_add(e.order.pages(), Ordering::Relaxed);
    }
}

static COUNTS: PerCpuCounts = PerCpuCounts {
    alloc: [const { AtomicU64::new(0) }; CPUS],
    free: [const { AtomicU64::new(0) }; CPUS],
};

/// A two-CPU zone of [`FRAMES`] frames whose per-CPU storage is `pcps`.
fn zone<P: PerCpuSet<buddy_sim::DefaultRawMutex>>(pcps: P) -> Zone<Vec<Frame>, P> {
    let cfg = ZoneConfig::new(Pfn(0x10_0000), FRAMES).with_cpus(CPUS);
    let frames = (0..FRAMES).map(|_| Frame::new()).collect();
    let z = must(Zone::new_empty(cfg, frames, pcps));
    must(z.add_memory(cfg.start, FRAMES));
    z
}

fn slots() -> Vec<PerCpu> {
    (0..CPUS).map(|_| PerCpu::new()).collect()
}

/// `n` page pairs on CPU 0 of `z`, each counted.
fn pairs<P: PerCpuSet<buddy_sim::DefaultRawMutex>>(z: &Zone<Vec<Frame>, P>, n: u32) {
    let cpu = must(z.cpu(0));
    for _ in 0..n {
        count::counted(&mut || {
            let pfn = must(cpu.alloc_raw(AllocRequest::page()));
            // SAFETY: the page was just allocated and nothing wrote it; freed once.
            must(unsafe { cpu.free_pages(pfn, Order::ZERO) });
        });
    }
}

/// Frames of the zone `init_on_free` clears, each backed by memory.
const BACKED_FRAMES: u64 = 8192;

/// A page of the memory behind the `init_on_free` zone.
#[repr(C, align(4096))]
struct Page([u8; 4096]);

/// `n` page pairs on a zone whose frees clear the page (`init_on_free`), or with `poison`
/// fill it with the poison and allocations check it (page poisoning).
fn free_init_pairs(n: u32, poison: bool) {
    let mut ram: Vec<Page> = (0..BACKED_FRAMES).map(|_| Page([0; 4096])).collect();
    let start = Pfn(0x10_0000);
    // SAFETY: frame `start + i` is `ram[i]`, which only the zone (clearing the pages freed)
    // reaches while this function runs; `ram` outlives the zone.
    let clearer =
        must(unsafe { buddy_sim::FrameClearer::direct_map(start, ram.as_mut_ptr().cast()) });
    let cfg = ZoneConfig::new(start, BACKED_FRAMES).with_cpus(CPUS);
    let frames = (0..BACKED_FRAMES).map(|_| Frame::new()).collect();
    let z = must(Zone::new_empty(cfg, frames, slots()));
    if poison && let Err(e) = z.set_page_poison(clearer) {
        panic!("page poisoning: {e}");
    }
    must(z.add_memory(start, BACKED_FRAMES));
    if !poison {
        z.set_init_on_free(Some(clearer));
    }
    pairs(&z, n);
    assert_eq!(z.poison_corruption(), None, "nothing wrote a freed page");
    drop(z);
    drop(ram);
}

/// The workloads callgrind counts, in the table's order.
pub const COUNTED: [Workload; 7] = [
    Workload {
        name: "events-none",
        ops: 2000,
        run: |n| pairs(&zone(slots()), n),
    },
    Workload {
        name: "events-silent",
        ops: 2000,
        run: |n| pairs(&zone(WithEvents::new(slots(), Silent)), n),
    },
    Workload {
        name: "events-counting",
        ops: 2000,
        run: |n| pairs(&zone(WithEvents::new(slots(), &COUNTS)), n),
    },
    Workload {
        name: "page-owner",
        ops: 2000,
        run: |n| {
            let z = zone(slots());
            let records: &'static [OwnerRecord] =
                Vec::leak((0..FRAMES).map(|_| OwnerRecord::new()).collect());
            must_owner(z.enable_page_owner(records));
            pairs(&z, n);
        },
    },
    Workload {
        name: "fail-page-alloc-armed",
        ops: 2000,
        run: |n| {
            let z = zone(slots());
            z.set_fail_page_alloc(Some(FailPageAlloc::new(1).probability(0)));
            pairs(&z, n);
        },
    },
    Workload {
        name: "init-on-free",
        ops: 2000,
        run: |n| free_init_pairs(n, false),
    },
    Workload {
        name: "page-poison",
        ops: 2000,
        run: |n| free_init_pairs(n, true),
    },
];

fn must_owner(r: Result<(), buddy_sim::page_owner::PageOwnerError>) {
    if let Err(e) = r {
        panic!("page_owner: {e}");
    }
}

/// What each row is, in words.
const ROWS: [&str; 7] = [
    "no event hook (plain per-CPU storage)",
    "a hook that implements nothing",
    "a hook counting pages into per-CPU arrays",
    "page_owner recording every block",
    "fail_page_alloc armed, probability 0",
    "init_on_free: each freed page cleared (zero-core's policy for 4 KiB)",
    "page poisoning: each freed page filled, each allocated page checked",
];

impl Section for Observability {
    fn name(&self) -> &'static str {
        "observability"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        COUNTED.len() as u64
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let mut counts = Vec::new();
        for (w, what) in COUNTED.iter().zip(ROWS) {
            ctx.step(format!("observability: counting {what} under callgrind"));
            counts.push(count::per_op(*w));
        }
        let mut table = Table::new(
            "observability-cost",
            "What the debugging tools cost on one page taken and given back (callgrind)",
            &[
                "zone",
                "instructions per pair",
                "over no hook",
                "target",
                "verdict",
            ],
        );
        let base = counts[0].clone();
        for (i, (what, count)) in ROWS.iter().zip(&counts).enumerate() {
            let measured = base.clone().and_then(|b| Ok((b, count.clone()?)));
            let (b, c) = match measured {
                Ok(bc) => bc,
                Err(why) => {
                    table.row(vec![
                        Cell::text(*what),
                        Cell::text(format!("not counted: {why}")),
                        Cell::text("—"),
                        Cell::text("—"),
                        Cell::text("—"),
                    ]);
                    continue;
                }
            };
            let ratio = Estimate::exact(c / b);
            let goal = match i {
                // The same code: equal counts, to callgrind's exactness.
                1 => Some(("= no hook", Verdict::met_if((c - b).abs() < 0.005))),
                2 => Some(("<= 1.05x", ratio.judge(1.05, false))),
                _ => None,
            };
            if i == 2 {
                ctx.headline(
                    "order-0 pair with a counting event hook over none (instructions, callgrind)",
                    ratio,
                );
            }
            table.row(vec![
                Cell::text(*what),
                Cell::num(c, 2, ""),
                Cell::text(ratio_text(ratio)),
                Cell::text(goal.map_or("—", |g| g.0)),
                goal.map_or_else(|| Cell::text("—"), |g| Cell::verdict(g.1)),
            ]);
        }
        table.note(
            "Each row: a two-CPU zone of 256 MiB, one page allocated and freed on CPU 0 \
             through a locked Cpu handle, 2000 and 4000 pairs counted by callgrind and the \
             difference divided (what runs once cancels out); exact, the same on every run \
             of the same binary. The hook is carried by the zone's per-CPU storage \
             (WithEvents): a zone given plain storage has NoEvents, whose empty methods \
             compile away, and a hook that implements nothing compiles to the same code. \
             The counting hook adds an atomic add per event on the CPU's own counter line \
             (relaxed; a per-CPU array as a kernel keeps its vmstat deltas). page_owner \
             writes the block's record on allocation and clears it on free; fault injection \
             armed takes its lock and draws a number on every allocation.",
        );
        table.note(
            "init_on_free clears the freed page through zero-core's policy for 4 KiB (the \
             detected strategy; on x86 `rep stosb`, which callgrind counts as one \
             instruction per byte stored: its row is the cost of the clear's 4096 stores), \
             on a zone of 32 MiB backed by memory; the freed page goes back known zero, so a \
             zeroed allocation that takes it clears nothing. Page poisoning fills the \
             freed page with 0xaa (a memset: zero-core clears, it does not fill) and \
             compares the page with the pattern when it is handed out again (memcmp, a \
             frame at a time); the two rows are the cost of writing, and of writing and \
             reading, 4 KiB per pair.",
        );
        table.note("Floor: the no-hook row is the allocator's own work; the ratios are over it.");
        vec![table]
    }
}
