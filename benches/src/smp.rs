//! The "SMP scaling" section: aggregate throughput of several threads sharing one frame
//! allocator, for buddy-sim (each thread on its own CPU's lists), buddy-sim's zone behind one
//! `spin::Mutex` (what a kernel gets by wrapping a single-threaded allocator), and
//! `buddy_system_allocator`'s `LockedFrameAllocator` (the same, in that crate).
//!
//! Threads are pinned one per core (round robin past the core count, the first core moving
//! from run to run) and start together behind a barrier; a run's time is from the first
//! start to the last finish. A control gives each thread a private zone: the machine's own
//! ceiling for the shared allocators.

use crate::arceos::{Locked, SlabPages};
use crate::count;
use crate::measure::{Budget, Estimate, Samples, allowed_cpus, pin_current_thread, round_order};
use crate::report::ratio_text;
use crate::{Cell, Plot, Section, SectionContext, Table, must, order};
use buddy_sim::{BoxedZone, Pfn, ZoneConfig};
use buddy_system_allocator::LockedFrameAllocator;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The SMP scaling section.
pub struct SmpScaling;

/// Frames in each allocator: 1 GiB of 4 KiB frames.
const FRAMES: u64 = 1 << 18;
/// Blocks a thread holds at once in the alloc/free workloads (a small working set, freed
/// newest first, as a kernel's short-lived allocations are).
const HELD: usize = 16;

/// A frame allocator several threads share.
trait Shared: Sync {
    fn alloc(&self, cpu: usize, order: u8) -> u64;
    fn free(&self, cpu: usize, pfn: u64, order: u8);
    /// One iteration of the loop the free_contig_range patch measures: allocate 512 frames, split, free the run (the
    /// peer, which has no split pages, frees the 512 frames as one block).
    fn split_and_free_iteration(&self, cpu: usize);
}

fn split_and_free_iteration(z: &BoxedZone, cpu: usize) {
    let o9 = order(9);
    let p = must(z.alloc_pages(cpu, o9));
    must(z.split_page(p, o9));
    // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
    must(unsafe { z.free_contig_range(cpu, p, 512) });
}

impl Shared for BoxedZone {
    fn alloc(&self, cpu: usize, o: u8) -> u64 {
        must(self.alloc_pages(cpu, order(o))).0
    }
    fn free(&self, cpu: usize, pfn: u64, o: u8) {
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        must(unsafe { self.free_pages(cpu, Pfn(pfn), order(o)) });
    }
    fn split_and_free_iteration(&self, cpu: usize) {
        split_and_free_iteration(self, cpu);
    }
}

/// buddy-sim's zone (one CPU's lists) behind one lock, taken for every call.
struct OneLock(spin::Mutex<BoxedZone>);

impl Shared for OneLock {
    fn alloc(&self, _: usize, o: u8) -> u64 {
        self.0.lock().alloc(0, o)
    }
    fn free(&self, _: usize, pfn: u64, o: u8) {
        self.0.lock().free(0, pfn, o);
    }
    fn split_and_free_iteration(&self, _: usize) {
        let o9 = order(9);
        let p = must(self.0.lock().alloc_pages(0, o9));
        must(self.0.lock().split_page(p, o9));
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses its memory.
        must(unsafe { self.0.lock().free_contig_range(0, p, 512) });
    }
}

/// The ceiling: one private zone per thread, nothing shared at all.
struct Private(Vec<BoxedZone>);

impl Shared for Private {
    fn alloc(&self, cpu: usize, o: u8) -> u64 {
        self.0[cpu].alloc(0, o)
    }
    fn free(&self, cpu: usize, pfn: u64, o: u8) {
        self.0[cpu].free(0, pfn, o);
    }
    fn split_and_free_iteration(&self, cpu: usize) {
        split_and_free_iteration(&self.0[cpu], 0);
    }
}

struct Peer(LockedFrameAllocator<11>);

impl Shared for Peer {
    fn alloc(&self, _: usize, o: u8) -> u64 {
        let p = self.0.lock().alloc(1 << o);
        p.unwrap_or_else(|| panic!("peer out of frames")) as u64
    }
    fn free(&self, _: usize, pfn: u64, o: u8) {
        self.0.lock().dealloc(pfn as usize, 1 << o);
    }
    fn split_and_free_iteration(&self, cpu: usize) {
        let p = self.alloc(cpu, 9);
        self.free(cpu, p, 9);
    }
}

/// CPU ids the threads claim, one thread per id at a time ([`on_cpu`]): a claimed id is
/// exclusive, as a CPU is to the code that runs on it with interrupts off.
static CLAIMS: [AtomicBool; 64] = [const { AtomicBool::new(false) }; 64];

/// The bit of [`CPU`]'s value that says the thread holds the claim of its id.
const CLAIMED: usize = 1 << (usize::BITS - 1);

thread_local! {
    /// The CPU the drop-in's calls on this thread run on (its [`ThreadCpu`] answer), with
    /// [`CLAIMED`] while the thread holds its claim.
    static CPU: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Gives the thread's claim back when the thread ends.
    static RELEASE: Release = const { Release };
}

/// Gives back the claim of the thread's CPU id when it drops (a thread's end).
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        release_cpu();
    }
}

/// The drop-in's [`CpuId`](axalloc_buddy::CpuId): the thread's CPU, read inline at each
/// call, as a kernel's per-CPU data read inlines (ArceOS's `ax-alloc` through ax-percpu);
/// exclusive while the thread holds its claim ([`on_cpu`]), so that the page calls take
/// the CPU's magazines as a kernel's do.
#[derive(Clone, Copy)]
pub(crate) struct ThreadCpu;

impl axalloc_buddy::CpuId for ThreadCpu {
    #[inline(always)]
    fn cpu_id(&self, _pinned: &axalloc_buddy::Pinned<'_>) -> usize {
        thread_cpu()
    }

    #[inline(always)]
    fn exclusive_cpu<'a>(
        &self,
        pinned: &'a axalloc_buddy::Pinned<'_>,
    ) -> Option<axalloc_buddy::ExclusiveCpu<'a>> {
        let cpu = CPU.with(std::cell::Cell::get);
        if cpu & CLAIMED == 0 {
            return None;
        }
        // SAFETY: the thread holds the claim of this id ([`CLAIMS`]): no other thread takes
        // it until this one gives it back, between allocator calls, with release ordering
        // that the next claim's acquire pairs with; no signal handler allocates.
        Some(unsafe { axalloc_buddy::ExclusiveCpu::new(cpu & !CLAIMED, pinned) })
    }
}

/// ArceOS's global allocator on buddy-sim (`axalloc-buddy`, the drop-in), over memory of
/// its own: each thread a CPU of its own, page calls as ArceOS's page-table code makes them.
pub(crate) struct DropIn {
    pub(crate) a: axalloc_buddy::GlobalAllocator<ThreadCpu>,
    /// Keeps the allocator's memory (metadata at its head, then the pages) alive.
    memory: crate::arceos::Memory,
}

impl crate::arceos::OverMemory for DropIn {
    fn memory(&mut self) -> &mut crate::arceos::Memory {
        &mut self.memory
    }
}

impl DropIn {
    /// The drop-in over 1 GiB of its own ([`Memory`](crate::arceos::Memory)), with page
    /// lists for `cpus` CPUs.
    pub(crate) fn new(cpus: usize) -> Self {
        // The frames and room for their metadata (24 bytes a frame, under FRAMES / 32 + 2
        // pages); `Memory` adds the alignment.
        let bytes = (FRAMES as usize + FRAMES as usize / 32 + 2) * PAGE;
        let mut memory = crate::arceos::Memory::new(bytes);
        let a = axalloc_buddy::GlobalAllocator::with_cpu_id(ThreadCpu);
        let (start, bytes) = memory.region();
        // SAFETY: the memory is the allocator's alone and outlives it (both are fields of
        // this value, the allocator dropped first: it has no drop of its own).
        unsafe { a.try_init_for_cpus(start, bytes, cpus) }
            .unwrap_or_else(|e| panic!("drop-in: {e}"));
        Self { a, memory }
    }
}

/// The drop-in's page path as callgrind counts it, on CPU 0 of a drop-in for two CPUs, the
/// calls ArceOS's page-table code makes: `n` page-table pages, each taken and given back inside [`count::counted`];
/// and rounds of 512 taken then freed, on the drop-in and on ArceOS's bitmap behind its
/// lock (the `bench` app's page-table workload).
pub const COUNTED: [count::Workload; 3] = [
    count::Workload {
        name: "dropin-page-pair",
        ops: 1000,
        run: |n| {
            // Two CPUs' lists: the CPU id asked as an SMP kernel asks it.
            let a = DropIn::new(2);
            for _ in 0..n {
                count::counted(&mut || {
                    let pfn = a.alloc(0, 0);
                    a.free(0, pfn, 0);
                });
            }
        },
    },
    count::Workload {
        name: "dropin-page-tables",
        ops: 20,
        run: |n| page_table_rounds(&DropIn::new(2), n),
    },
    count::Workload {
        name: "bitmap-page-tables",
        ops: 20,
        run: |n| page_table_rounds(&bitmap(), n),
    },
];

/// `n` times, each counted: 512 page-table pages taken, then freed (the shape of the ArceOS
/// `bench` app's page-table workload, booted under QEMU).
fn page_table_rounds(a: &dyn Shared, n: u32) {
    let mut held = [0u64; 512];
    for _ in 0..n {
        count::counted(&mut || {
            for h in &mut held {
                *h = a.alloc(0, 0);
            }
            for &h in &held {
                a.free(0, h, 0);
            }
        });
    }
}

/// The CPU the calls on this thread run on.
#[inline(always)]
fn thread_cpu() -> usize {
    CPU.with(std::cell::Cell::get) & !CLAIMED
}

/// Makes the calling thread's drop-in calls run on CPU `cpu`'s lists, giving back the id it
/// held: through the CPU's magazines if the thread gets the id's claim (no other thread
/// holds it), under its lock otherwise.
pub(crate) fn on_cpu(cpu: usize) {
    release_cpu();
    let claimed = CLAIMS
        .get(cpu)
        .is_some_and(|c| !c.swap(true, Ordering::Acquire));
    CPU.with(|c| c.set(if claimed { cpu | CLAIMED } else { cpu }));
    if claimed {
        // Registers the claim's release at the thread's end.
        RELEASE.with(|_| {});
    }
}

/// Gives back the claim of the calling thread's CPU id, if it holds one (before it waits
/// for threads that take that id); its calls then run on CPU 0's lists, under their lock.
pub(crate) fn release_cpu() {
    let cpu = CPU.with(|c| c.replace(0));
    if cpu & CLAIMED != 0
        && let Some(claim) = CLAIMS.get(cpu & !CLAIMED)
    {
        claim.store(false, Ordering::Release);
    }
}

/// Bytes of a page.
const PAGE: usize = 4096;
/// Frames ArceOS's bitmap allocator holds at most (axallocator 0.2's `BitAlloc64K`).
const BITMAP_FRAMES: usize = 1 << 16;

impl Shared for DropIn {
    fn alloc(&self, cpu: usize, o: u8) -> u64 {
        debug_assert_eq!(
            thread_cpu(),
            cpu,
            "the thread's CPU is set once, by `on_cpu`"
        );
        let pages = 1 << o;
        let kind = axalloc_buddy::UsageKind::PageTable;
        let at = self.a.alloc_pages(pages, pages * PAGE, kind);
        (at.unwrap_or_else(|e| panic!("drop-in: {e:?}")) / PAGE) as u64
    }
    fn free(&self, cpu: usize, pfn: u64, o: u8) {
        debug_assert_eq!(
            thread_cpu(),
            cpu,
            "the thread's CPU is set once, by `on_cpu`"
        );
        let kind = axalloc_buddy::UsageKind::PageTable;
        // SAFETY: the benchmark frees what it allocated, once, and no longer uses it.
        unsafe { self.a.dealloc_pages(pfn as usize * PAGE, 1 << o, kind) };
    }
    fn split_and_free_iteration(&self, cpu: usize) {
        // A 2 MiB run, given back in one call (the drop-in keeps it as a block).
        let pfn = self.alloc(cpu, 9);
        self.free(cpu, pfn, 9);
    }
}

/// A page allocator behind one lock for every CPU, as ArceOS's `axalloc` holds it: its own
/// bitmap (axallocator's `BitmapPageAllocator`), or ax-alloc 0.9's buddy-slab-allocator.
/// An allocation it refuses (none of the workloads comes near its memory) is counted in
/// [`REFUSED`] under its kind and skipped, not a failure of the run.
struct OneLockPages<L> {
    pages: L,
    kind: Kind,
}

/// Allocations each one-lock allocator refused during the report's run, by [`Kind`].
static REFUSED: [AtomicU64; KINDS.len()] = [const { AtomicU64::new(0) }; KINDS.len()];

/// What a refused allocation hands its workload: a position its free skips.
const REFUSED_PFN: u64 = u64::MAX;

/// ArceOS's bitmap allocator behind its lock. Positions only (nothing is written): from 1
/// GiB, where the bitmap's base alignment (1 GiB) puts its first frame, as many frames as
/// it holds (256 MiB: the workloads hold at most a few thousand frames at once).
fn bitmap() -> OneLockPages<spin::Mutex<axallocator::BitmapPageAllocator<PAGE>>> {
    use axallocator::BaseAllocator;
    let mut b = axallocator::BitmapPageAllocator::<PAGE>::new();
    b.init(1 << 30, BITMAP_FRAMES * PAGE);
    OneLockPages {
        pages: spin::Mutex::new(b),
        kind: Kind::Bitmap,
    }
}

impl<L: Locked + Send + Sync> Shared for OneLockPages<L> {
    fn alloc(&self, _: usize, o: u8) -> u64 {
        let pages = 1 << o;
        match self.pages.alloc(pages, pages * PAGE) {
            Some(at) => (at / PAGE) as u64,
            None => {
                REFUSED[self.kind as usize].fetch_add(1, Ordering::Relaxed);
                REFUSED_PFN
            }
        }
    }
    fn free(&self, _: usize, pfn: u64, o: u8) {
        if pfn != REFUSED_PFN {
            self.pages.dealloc(pfn as usize * PAGE, 1 << o);
        }
    }
    fn split_and_free_iteration(&self, cpu: usize) {
        let pfn = self.alloc(cpu, 9);
        self.free(cpu, pfn, 9);
    }
}

/// The allocators compared; each indexes [`KINDS`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    PerCpu,
    OneLock,
    Peer,
    DropIn,
    Bitmap,
    BuddySlab,
    Private,
}

/// Every [`Kind`], in its order, with its name in the table.
const KINDS: [(Kind, &str); 7] = [
    (Kind::PerCpu, "buddy-sim, per-CPU lists"),
    (Kind::OneLock, "buddy-sim behind one spin::Mutex"),
    (Kind::Peer, "buddy_system_allocator, locked"),
    (
        Kind::DropIn,
        "axalloc-buddy (ArceOS drop-in), a CPU per thread",
    ),
    (Kind::Bitmap, "ArceOS bitmap behind one lock"),
    (
        Kind::BuddySlab,
        "buddy-slab-allocator 0.6 behind one lock (ax-alloc 0.9)",
    ),
    (Kind::Private, "control: a private zone per thread"),
];

fn build(kind: Kind, threads: usize) -> Box<dyn Shared> {
    let zone = |cpus| {
        BoxedZone::new_boxed(ZoneConfig::new(Pfn(0), FRAMES).with_cpus(cpus))
            .unwrap_or_else(|e| panic!("zone: {e}"))
    };
    match kind {
        Kind::PerCpu => Box::new(zone(threads)),
        Kind::OneLock => Box::new(OneLock(spin::Mutex::new(zone(1)))),
        Kind::Private => Box::new(Private((0..threads).map(|_| zone(1)).collect())),
        // At least two CPUs' lists, as a kernel booted with two has (and ArceOS's 2-CPU boots
        // measure one CPU alone on): one thread then asks for its CPU as each of two does
        // (a one-CPU drop-in asks nothing).
        Kind::DropIn => Box::new(DropIn::new(threads.max(2))),
        Kind::Bitmap => Box::new(bitmap()),
        Kind::BuddySlab => Box::new(OneLockPages {
            pages: SlabPages::new(),
            kind: Kind::BuddySlab,
        }),
        Kind::Peer => {
            let p = LockedFrameAllocator::<11>::new();
            p.lock().add_frame(0, FRAMES as usize);
            Box::new(Peer(p))
        }
    }
}

/// A per-thread workload: name, what it counts, operations per round, and one round.
struct Workload {
    name: &'static str,
    unit: &'static str,
    /// Whether the SMP goal is judged on this workload (the per-CPU fast path).
    goal: bool,
    ops_per_round: u64,
    rounds: fn(quick: bool) -> u64,
    round: fn(&dyn Shared, usize),
}

fn alloc_free_round(a: &dyn Shared, cpu: usize, o: u8) {
    let mut held = [0u64; HELD];
    for h in &mut held {
        *h = a.alloc(cpu, o);
    }
    for &h in held.iter().rev() {
        a.free(cpu, h, o);
    }
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "order-0 alloc/free pairs",
        unit: "M pairs/s",
        goal: true,
        ops_per_round: HELD as u64,
        rounds: |quick| if quick { 2_000 } else { 20_000 },
        round: |a, cpu| alloc_free_round(a, cpu, 0),
    },
    Workload {
        name: "order-3 alloc/free pairs",
        unit: "M pairs/s",
        goal: false,
        ops_per_round: HELD as u64,
        rounds: |quick| if quick { 1_000 } else { 10_000 },
        round: |a, cpu| alloc_free_round(a, cpu, 3),
    },
    Workload {
        name: "free_contig_range() loop",
        unit: "M iterations/s",
        goal: false,
        ops_per_round: 1,
        rounds: |quick| if quick { 500 } else { 5_000 },
        round: |a, cpu| a.split_and_free_iteration(cpu),
    },
];

/// One run: `threads` threads each doing `rounds` rounds, thread `i` pinned to the allowed
/// CPU `(i + first_core) % allowed.len()`; the time from the first thread's start to the last
/// one's end.
fn run_once(
    w: &Workload,
    kind: Kind,
    threads: usize,
    rounds: u64,
    allowed: &[usize],
    first_core: usize,
) -> Duration {
    let a = build(kind, threads);
    let start = Barrier::new(threads);
    // The threads take CPU ids 0.., which this thread gives back.
    release_cpu();
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|cpu| {
                let (a, start) = (&*a, &start);
                s.spawn(move || {
                    pin_current_thread(allowed[(cpu + first_core) % allowed.len()]);
                    // The drop-in's CPU id for this thread, set once as a kernel sets a
                    // CPU's per-CPU register.
                    on_cpu(cpu);
                    (w.round)(a, cpu); // warm-up: first refills, page faults on metadata
                    start.wait();
                    let t0 = Instant::now();
                    for _ in 0..rounds {
                        (w.round)(a, cpu);
                    }
                    (t0, Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = spans.iter().map(|s| s.0).min().unwrap_or_else(Instant::now);
    let last = spans.iter().map(|s| s.1).max().unwrap_or(first);
    last.duration_since(first).max(Duration::from_nanos(1))
}

/// 1, 2, 4, ... and the core count itself. Always 1 and 2 first (2 even on one core, where
/// the lock-wrapped allocators' contention shows too): the goal compares those two.
fn thread_counts(cores: usize) -> Vec<usize> {
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
        .take_while(|&n| n <= cores.max(2))
        .collect();
    if !v.contains(&cores) && cores > 1 {
        v.push(cores);
    }
    v
}

/// Rounds at least for the goal's workload (outside `--quick`).
const GOAL_ROUNDS: usize = 60;

/// The index of 2 threads in [`thread_counts`].
const TWO_THREADS: usize = 1;

/// Throughput at `counts[ci]` (`threads` threads) over one thread, round by round: each
/// thread does the same work, so it is `threads` times the time ratio.
fn scaling(per_count: &[Samples], ci: usize, threads: usize) -> Estimate {
    per_count[ci]
        .speedup_over(&per_count[0])
        .map(|r| r * threads as f64)
}

fn cores() -> usize {
    allowed_cpus().len()
}

impl Section for SmpScaling {
    fn name(&self) -> &'static str {
        "smp scaling"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        WORKLOADS.len() as u64
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let (t, goal_times) = scaling_table(ctx);
        vec![t, goals_table(ctx, &goal_times)]
    }
}

/// Throughput at every thread count, every workload and allocator; and the goal workload's
/// samples, `[kind][thread count]`.
fn scaling_table(ctx: &SectionContext) -> (Table, Vec<Vec<Samples>>) {
    let cores = cores();
    let counts = thread_counts(cores);
    let allowed = allowed_cpus();
    let budget = Budget::cell(ctx.quick, 4.0);
    let mut columns = vec!["workload".to_string(), "allocator".to_string()];
    columns.extend(
        counts
            .iter()
            .map(|t| format!("{t} thread{}", if *t == 1 { "" } else { "s" })),
    );
    let most = counts.last().copied().unwrap_or(1);
    columns.push(format!("scaling 1→{most} threads"));
    let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "smp-scaling",
        "SMP scaling: aggregate throughput of threads sharing one frame allocator",
        &cols,
    );
    // The goal workload's samples, [kind][thread count].
    let mut goal_times = Vec::new();
    for w in &WORKLOADS {
        let rounds = (w.rounds)(ctx.quick);
        ctx.step(format!("smp: {}", w.name));
        // The goal's interval: 10 rounds put its bounds at the 2nd and 9th ratios, so one
        // round that the host's other tenants slowed moves the verdict; 60 put them near the
        // 23rd and 38th (about 25 s more).
        let mut budget = budget;
        if w.goal && !ctx.quick {
            budget.min_rounds = budget.min_rounds.max(GOAL_ROUNDS);
        }
        // times[kind][thread count]: one duration per round.
        let mut times = vec![vec![Vec::new(); counts.len()]; KINDS.len()];
        budget.run(|round| {
            // Every thread count and allocator once per round, the allocators' order
            // shuffled each round, so drift hits all alike and round r of each cell ran
            // side by side; the cores take turns too: one slow vCPU must not always hold
            // the one-thread baseline.
            for (ci, &threads) in counts.iter().enumerate() {
                for ki in round_order(round, KINDS.len()) {
                    times[ki][ci].push(run_once(w, KINDS[ki].0, threads, rounds, &allowed, round));
                }
            }
        });
        let times: Vec<Vec<Samples>> = times
            .into_iter()
            .map(|per_count| per_count.into_iter().map(Samples::from_durations).collect())
            .collect();
        for ((_, name), per_count) in KINDS.iter().zip(&times) {
            let mut row = vec![
                Cell::text(format!("{} ({})", w.name, w.unit)),
                Cell::text(*name),
            ];
            row.extend(counts.iter().zip(per_count).map(|(&threads, d)| {
                let ops = threads as u64 * rounds * w.ops_per_round;
                Cell::estimate(d.rate(ops as f64).map(|r| r / 1e6), 2, "")
            }));
            row.push(Cell::ratio_ci(scaling(per_count, counts.len() - 1, most)));
            t.row(row);
        }
        if w.goal {
            goal_times = times;
        }
    }
    let refused: Vec<String> = KINDS
        .iter()
        .filter_map(|&(kind, name)| {
            let n = REFUSED[kind as usize].load(Ordering::Relaxed);
            (n > 0).then(|| format!("{name}: {n}"))
        })
        .collect();
    if !refused.is_empty() {
        t.note(format!(
            "Allocations refused while the allocator held far more free memory than the \
             workload takes (each skipped, its round still timed): {}.",
            refused.join("; ")
        ));
    }
    t.note(format!(
        "Millions of operations per second, all threads together (median ± the half-width \
         of its 95% interval), every thread count and allocator once per round, the \
         allocators taking turns. Each thread is pinned to its own core ({cores} here; past \
         that, round robin; the first core changes round by round) and, for buddy-sim, uses \
         its own CPU number. Scaling is the median over rounds of the round's ratio (at least {GOAL_ROUNDS} rounds for the goal's workload, order-0 pairs, outside `--quick`; at least 10 for the others). Alloc/free pairs: each thread allocates {HELD} blocks and frees them newest \
         first, again and again. free_contig_range() loop: alloc order 9, split_page, \
         free_contig_range (buddy_system_allocator, which has no split pages, allocates and \
         frees 512 frames as one block). Zones of {} Ki frames, MAX_ORDER 10. \
         The ArceOS rows make the calls ArceOS makes: axalloc-buddy's \
         `GlobalAllocator::alloc_pages(1 << order, its size, PageTable)` and `dealloc_pages` \
         (each thread a CPU of its own through its `CpuId`, a thread-local read, the drop-in built for at least \
         two CPUs as a 2-CPU kernel is, one thread alone included; its 'free_contig_range() \
         loop' row allocates and frees a 512-page run), and axallocator's `BitmapPageAllocator` \
         behind one spin lock, as ArceOS's own `axalloc` holds it for every CPU, and \
         buddy-slab-allocator 0.6.1's `BuddyAllocator` behind one, as ax-alloc 0.9 holds it \
         (over 128 MiB of its own). \
         \"scaling\" divides the highest thread count's throughput by one thread's. The \
         control row gives each thread a zone of its own, so nothing at all is shared: its \
         scaling is what this machine allows (two vCPUs of a shared host need not give \
         twice the throughput), the ceiling for the shared allocators.",
        FRAMES >> 10
    ));
    t.plot = Some(
        Plot::new(
            "allocator, workload",
            "million operations per second (median, 95% interval)",
            (2..2 + counts.len()).collect(),
        )
        .log()
        .labelled_by(vec![1, 0]),
    );
    (t, goal_times)
}

/// The SMP goal from the goal workload's samples, `[kind][thread count]`.
fn goals_table(ctx: &SectionContext, goal_times: &[Vec<Samples>]) -> Table {
    let mut goals = Table::new(
        "smp-goals",
        "SMP goal, measured",
        &["goal", "measured (median [95% interval])", "verdict"],
    );
    let of = |k: Kind| &goal_times[k as usize];
    let (ours, ceiling) = (
        scaling(of(Kind::PerCpu), TWO_THREADS, 2),
        scaling(of(Kind::Private), TWO_THREADS, 2),
    );
    // Shared zone over private zones at 2 threads: same work, so a time ratio.
    let share = of(Kind::PerCpu)[TWO_THREADS].speedup_over(&of(Kind::Private)[TWO_THREADS]);
    ctx.headline(
        "order-0 alloc/free pairs, buddy-sim: 2 threads over 1 (shared zone)",
        ours,
    );
    ctx.headline(
        "order-0 alloc/free pairs, control: 2 threads over 1 (private zones)",
        ceiling,
    );
    let (drop_in, bitmap, buddy_slab) = (
        scaling(of(Kind::DropIn), TWO_THREADS, 2),
        scaling(of(Kind::Bitmap), TWO_THREADS, 2),
        scaling(of(Kind::BuddySlab), TWO_THREADS, 2),
    );
    ctx.headline(
        "page-table pages through the ArceOS drop-in: 2 CPUs over 1",
        drop_in,
    );
    goals.row(vec![
        Cell::text(
            "page-table pages through the ArceOS drop-in (axalloc-buddy) at 2 threads >= 1.8x \
             its 1-thread throughput",
        ),
        Cell::text(format!(
            "{} (ArceOS's bitmap behind its one lock: {}; buddy-slab-allocator behind one \
             lock, as ax-alloc 0.9 holds it: {})",
            ratio_text(drop_in),
            ratio_text(bitmap),
            ratio_text(buddy_slab)
        )),
        Cell::verdict(drop_in.judge(1.8, true)),
    ]);
    goals.row(vec![
        Cell::text("buddy-sim order-0 pairs at 2 threads >= 1.8x its 1-thread throughput"),
        Cell::text(format!(
            "{} (private zones, nothing shared: {})",
            ratio_text(ours),
            ratio_text(ceiling)
        )),
        Cell::verdict(ours.judge(1.8, true)),
    ]);
    goals.note(format!(
        "What sharing costs: at 2 threads, buddy-sim's one shared zone delivered {:.0}% of \
         the throughput of private zones that share nothing, in the same rounds. The ratio \
         to one thread also depends on the machine: the private zones themselves reached \
         {}, and one-thread figures on these shared 2-vCPU hosts move by up to 2x from run \
         to run.",
        100.0 * share.median,
        ratio_text(ceiling)
    ));
    goals.note("Goals are reported, never asserted in tests: these machines are shared.");
    goals
}
