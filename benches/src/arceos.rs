//! The "ArceOS" section: ArceOS's page allocator interface (`axallocator`'s
//! `PageAllocator`, what its global allocator and page-table handlers call) served by
//! ArceOS's own `BitmapPageAllocator` and by buddy-sim's `AxPageAllocator`, on the same
//! work, side by side, on this host (the allocators' own cost: neither touches the pages).
//!
//! - Page tables: one page at a time, allocated and freed in pairs (a page-table page per
//!   mapping change).
//! - Heap growth: ArceOS's byte allocator asks for runs that double (8 pages, 16, ... 8192:
//!   32 KiB to 32 MiB), then gives them all back.
//! - Churn: a fixed random sequence of 20 000 calls (seeded): runs of 1 to 512 pages aligned
//!   to 4 KiB, 64 KiB or 2 MiB, frees of whole runs or of their upper or lower half, as a
//!   kernel's stacks, DMA buffers and huge-page-backed regions come and go.
//!
//! Each row also counts results that break the alignment asked for: what an allocator does
//! wrong is part of what it costs.
//!
//! The second table is ArceOS itself: `cargo xtask report` builds ArceOS from its published
//! crates on each allocator (ArceOS's own `axalloc`, and `axalloc-buddy` patched in), boots
//! the `bench` app under QEMU with `-icount shift=0` (the guest's clock counts instructions,
//! 1 ns each, so TCG's speed does not enter) a few times per architecture, then with two
//! CPUs by the wall clock (page-table pages on each CPU alone and on both at once: the third
//! table), and leaves the output in the file named by `ZC_ARCEOS_LOG` (first line
//! `UNAVAILABLE: why` if it could not).

use axallocator::{BaseAllocator, BitmapPageAllocator, PageAllocator};
use buddy_sim::{AxPageAllocator, BoxedZone, DefaultRawMutex, Frame, PerCpu, Pfn};

use crate::capture;
use crate::count::{self, Workload};
use crate::measure::{Budget, Candidate, Estimate, Samples, Verdict};
use crate::{Cell, Section, SectionContext, Table, must};

/// The ArceOS section.
pub struct Arceos;

/// The bytes of a page.
const PAGE: usize = 4096;
/// Where the region starts: 1 GiB (the bitmap allocator aligns its base down to 1 GiB).
const BASE: usize = 1 << 30;
/// The region: 128 MiB.
const PAGES: usize = 1 << 15;
/// Page-table pairs per round.
const PAIRS: usize = 20_000;
/// Calls in the churn sequence.
const CHURN: usize = 20_000;

type Ours = AxPageAllocator<'static, Vec<Frame>, Vec<PerCpu>, DefaultRawMutex>;

/// A call of the churn sequence.
#[derive(Clone, Copy)]
enum Call {
    /// Allocate `pages` aligned to `align` bytes.
    Alloc { pages: usize, align: usize },
    /// Free the run in slot `slot` (modulo those held): all of it, or (`half`) its upper
    /// half, then later its lower half.
    Free { slot: usize, half: bool },
}

/// The churn sequence: the same calls for both allocators, from a fixed seed.
fn churn_calls() -> Vec<Call> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..CHURN)
        .map(|_| {
            let r = next();
            if r % 5 < 3 {
                let pages = [1, 1, 1, 2, 4, 8, 16, 64, 512][(r >> 8) as usize % 9];
                let align = [PAGE, PAGE, PAGE, 16 * PAGE, 512 * PAGE][(r >> 16) as usize % 5];
                Call::Alloc { pages, align }
            } else {
                Call::Free {
                    slot: (r >> 8) as usize,
                    half: (r >> 20) % 4 == 0,
                }
            }
        })
        .collect()
}

/// Both allocators over the same region, and what each round works with.
struct Pair {
    bitmap: spin::Mutex<BitmapPageAllocator<PAGE>>,
    ours: spin::Mutex<Ours>,
    /// The same, reaching CPU 0's lists without their lock: the spin lock around it
    /// serializes every call, as ArceOS's global allocator lock does.
    local: spin::Mutex<Ours>,
    calls: Vec<Call>,
    /// Runs held during a round: (position, pages).
    held: Vec<(usize, usize)>,
    /// buddy-slab-allocator's page allocator, over memory of its own.
    slab: SlabPages,
    /// TLSF (rlsf through axallocator's `TlsfByteAllocator`) handing out pages.
    tlsf: TlsfPages,
    /// ax-alloc 0.9.2's own global allocator, TLSF backend.
    ax_alloc: AxAllocTlsf,
    /// The floor: the lock and a list pop or push per call.
    floor: FloorPages,
    /// Results that broke the alignment asked for, per allocator ([`ALLOCATORS`]' order).
    misaligned: [u64; ALLOCATORS.len()],
}

/// Memory of `bytes` bytes aligned to [`REGION_ALIGN`] that lives as long as the value (the
/// peers that keep their metadata in the memory they manage write to it). Fresh memory of
/// the process: its pages are faulted in as they are first touched, unless
/// [`Memory::fault_in`] touched them all first.
pub(crate) struct Memory(Vec<u64>);

/// The alignment of each peer's region: 2 MiB, as a kernel's memory map gives its regions;
/// buddy-slab-allocator's `GlobalAllocator` also starts its heap, after its metadata, on
/// such a boundary ([`SlabPages::new`] places it so).
pub(crate) const REGION_ALIGN: usize = 2 << 20;

impl Memory {
    pub(crate) fn new(bytes: usize) -> Self {
        Self(vec![0u64; (bytes + REGION_ALIGN).div_ceil(8)])
    }

    /// Faults every page in, as a kernel's memory is resident: a first-touch fault inside
    /// a timed call is this host's work, not the allocator's, and falls unevenly (in every
    /// round on an allocator that hands out pages it has not touched before, in the first
    /// round only on one that reuses the same few). For tables that time an allocator over
    /// the same memory round after round; a table that builds an allocator per round warms
    /// it up instead (a gigabyte faulted in per round would dwarf the calls).
    pub(crate) fn fault_in(&mut self) {
        for page in self.0.chunks_mut(PAGE / 8) {
            // A write, not a read (a read of a fresh page maps the shared zero page), and
            // volatile: the compiler knows the zeroed allocation reads zero and could drop
            // a plain store of zero.
            // The chunks are a page long but start where the vector does: each one's first
            // word lies in a page of its own, and every page holds one of them.
            // SAFETY: the first word of a chunk of this memory, borrowed mutably here.
            unsafe { core::ptr::write_volatile(page.as_mut_ptr(), 0) };
        }
    }

    /// The start aligned to [`REGION_ALIGN`], and `bytes` from there (what `new` was asked).
    pub(crate) fn region(&mut self) -> (usize, usize) {
        let start = self.0.as_mut_ptr() as usize;
        let aligned = start.next_multiple_of(REGION_ALIGN);
        (aligned, self.0.len() * 8 - REGION_ALIGN)
    }
}

/// An allocator over [`Memory`] of its own.
pub(crate) trait OverMemory: Sized {
    /// Its memory.
    fn memory(&mut self) -> &mut Memory;

    /// The allocator with every page of its memory faulted in ([`Memory::fault_in`]).
    #[must_use]
    fn resident(mut self) -> Self {
        self.memory().fault_in();
        self
    }
}

impl OverMemory for SlabPages {
    fn memory(&mut self) -> &mut Memory {
        &mut self.memory
    }
}

impl OverMemory for TlsfPages {
    fn memory(&mut self) -> &mut Memory {
        &mut self.memory
    }
}

impl OverMemory for AxAllocTlsf {
    fn memory(&mut self) -> &mut Memory {
        &mut self.memory
    }
}

/// buddy-slab-allocator 0.6's `BuddyAllocator` (the page allocator under its `GlobalAllocator`,
/// which ArceOS's tgoskits line uses), standalone, behind a spin lock as its docs ask: a
/// run of n pages is a block of the order covering n, freed whole.
pub(crate) struct SlabPages {
    a: spin::Mutex<buddy_slab_allocator::BuddyAllocator<PAGE>>,
    memory: Memory,
}

impl SlabPages {
    /// The allocator over [`PAGES`] pages of memory of its own, its heap (the pages after
    /// its metadata) starting on a [`REGION_ALIGN`] boundary, where its own
    /// `GlobalAllocator` (ax-alloc 0.9's, over a kernel's memory region) starts it.
    /// `BuddyAllocator::init` starts the heap at the first page past the metadata, and the
    /// buddy checks an alignment against the heap's first page: a heap at an odd page
    /// refuses every run of two pages or more aligned to more than a page, whatever memory
    /// is free.
    pub(crate) fn new() -> Self {
        type Buddy = buddy_slab_allocator::BuddyAllocator<PAGE>;
        let len = PAGES * PAGE + Buddy::required_meta_size(PAGES * PAGE);
        // Room for the region to start up to one alignment later.
        let mut memory = Memory::new(len + REGION_ALIGN);
        let (aligned, _) = memory.region();
        let init = |start: usize| {
            let mut a = Buddy::new();
            // SAFETY: `[start, start + len)` lies in this value's memory, used by nothing
            // else, which lives as long as the allocator (both fields of this value); an
            // allocator made over it before is dropped unused.
            unsafe { a.init(core::slice::from_raw_parts_mut(start as *mut u8, len)) }
                .unwrap_or_else(|e| panic!("buddy-slab-allocator init: {e:?}"));
            let heap = a
                .section(0)
                .unwrap_or_else(|| panic!("buddy-slab-allocator: no section after its init"))
                .start;
            (a, heap)
        };
        // Where the heap starts past a region's start (its section and metadata, to a
        // page), then the region that puts it on the next boundary.
        let before = init(aligned).1 - aligned;
        assert!(before < REGION_ALIGN, "metadata of {before} bytes");
        let (a, heap) = init(aligned + REGION_ALIGN - before);
        assert_eq!(
            heap % REGION_ALIGN,
            0,
            "the heap on a {REGION_ALIGN}-byte boundary"
        );
        Self {
            a: spin::Mutex::new(a),
            memory,
        }
    }
}

impl Locked for SlabPages {
    fn alloc(&self, pages: usize, align: usize) -> Option<usize> {
        self.a.lock().alloc_pages(pages, align).ok()
    }

    fn dealloc(&self, pos: usize, pages: usize) {
        self.a.lock().dealloc_pages(pos, pages);
    }
}

/// TLSF handing out pages as ArceOS's `ax-alloc` 0.9 builds it (rlsf 0.2, first and second
/// level 28 and 32, axallocator's `TlsfByteAllocator`): a run of n pages is an n-page block
/// aligned to what was asked, freed whole.
pub(crate) struct TlsfPages {
    a: spin::Mutex<axallocator::TlsfByteAllocator>,
    memory: Memory,
}

impl TlsfPages {
    pub(crate) fn new() -> Self {
        use axallocator::BaseAllocator;
        let mut memory = Memory::new(PAGES * PAGE);
        let (start, len) = memory.region();
        let mut a = axallocator::TlsfByteAllocator::new();
        a.init(start, len);
        Self {
            a: spin::Mutex::new(a),
            memory,
        }
    }

    /// The layout of a run of `pages` pages aligned to a page (the workloads TLSF runs).
    fn layout(pages: usize) -> core::alloc::Layout {
        core::alloc::Layout::from_size_align(pages * PAGE, PAGE).expect("a run's layout")
    }
}

impl TlsfPages {
    /// `layout` from the TLSF heap (ax-alloc 0.9's TLSF backend serves its heap so).
    pub(crate) fn byte_alloc(&self, layout: core::alloc::Layout) -> core::ptr::NonNull<u8> {
        use axallocator::ByteAllocator;
        self.a
            .lock()
            .alloc(layout)
            .unwrap_or_else(|e| panic!("TLSF: {e:?}"))
    }

    /// Gives back `p`.
    ///
    /// # Safety
    /// `p` came from [`TlsfPages::byte_alloc`] with `layout` and is freed once.
    pub(crate) unsafe fn byte_dealloc(
        &self,
        p: core::ptr::NonNull<u8>,
        layout: core::alloc::Layout,
    ) {
        use axallocator::ByteAllocator;
        self.a.lock().dealloc(p, layout);
    }
}

impl Locked for TlsfPages {
    fn alloc(&self, pages: usize, align: usize) -> Option<usize> {
        use axallocator::ByteAllocator;
        let layout = core::alloc::Layout::from_size_align(pages * PAGE, align).ok()?;
        self.a
            .lock()
            .alloc(layout)
            .ok()
            .map(|p| p.as_ptr() as usize)
    }

    fn dealloc(&self, pos: usize, pages: usize) {
        use axallocator::ByteAllocator;
        let p = core::ptr::NonNull::new(pos as *mut u8).expect("an allocated run");
        self.a.lock().dealloc(p, Self::layout(pages));
    }
}

/// ax-alloc 0.9.2's own `GlobalAllocator` with its TLSF backend (rlsf 0.2, first and
/// second level 28 and 32), as ArceOS's tgoskits line builds it, over memory of its own: a
/// page call is its `alloc_pages`/`dealloc_pages` (TLSF blocks, page-aligned or aligned as
/// asked), a heap call its `alloc`/`dealloc`. No lock around it: ArceOS calls it as its
/// global allocator, and it takes its own locks (`ax-sync` spin locks, on the host the
/// test-and-set lock of the "ArceOS today" section's `SpinOps`): three a call, the TLSF's,
/// the TLSF's again for its byte count, and its usage counts'.
pub(crate) struct AxAllocTlsf {
    pub(crate) a: ax_alloc::GlobalAllocator,
    memory: Memory,
}

impl AxAllocTlsf {
    pub(crate) fn new() -> Self {
        let mut memory = Memory::new(PAGES * PAGE);
        let (start, len) = memory.region();
        let a = ax_alloc::GlobalAllocator::new();
        a.init(start, len)
            .unwrap_or_else(|e| panic!("ax-alloc init: {e:?}"));
        Self { a, memory }
    }
}

impl Locked for AxAllocTlsf {
    fn alloc(&self, pages: usize, align: usize) -> Option<usize> {
        self.a
            .alloc_pages(pages, align, ax_alloc::UsageKind::Global)
            .ok()
    }

    fn dealloc(&self, pos: usize, pages: usize) {
        self.a
            .dealloc_pages(pos, pages, ax_alloc::UsageKind::Global);
    }
}

/// The floor under every allocator of the table: the same spin lock per call, and a pop or
/// push of a list of free runs of the size asked, carved in advance and aligned to their
/// size (a list per power of two: no search, split, merge, check or count). An allocator
/// that serves the same calls behind that lock cannot cost less, so a peer's time over the
/// floor's bounds the ratio any allocator can reach over that peer.
pub(crate) struct FloorPages {
    a: spin::Mutex<SizeLists>,
}

/// Free runs by size: `free[k]` holds runs of `2^k` pages.
struct SizeLists {
    free: [Vec<usize>; SIZES],
}

/// Run sizes of the floor's lists: `2^0` pages to the region's size.
const SIZES: usize = PAGES.trailing_zeros() as usize + 1;

impl FloorPages {
    /// Lists holding what the table's workloads take at once: 64 single pages, and a run of
    /// each size from 8 pages to a quarter of the region (a heap-growth round).
    fn new() -> Self {
        let mut free: [Vec<usize>; SIZES] = core::array::from_fn(|_| Vec::with_capacity(64));
        // Disjoint and aligned to its size, each run: `2^k` pages at `2^(k+1)` pages from
        // the base (never touched: positions only, as the other allocators' here).
        for (k, list) in free.iter_mut().enumerate().skip(3) {
            list.push(BASE + (PAGE << (k + 1)));
        }
        free[0].extend((0..64).map(|i| BASE + PAGE * (4 + i)));
        Self {
            a: spin::Mutex::new(SizeLists { free }),
        }
    }
}

impl Locked for FloorPages {
    fn alloc(&self, pages: usize, align: usize) -> Option<usize> {
        if !pages.is_power_of_two() || align > pages * PAGE {
            return None;
        }
        let k = pages.trailing_zeros() as usize;
        self.a.lock().free.get_mut(k)?.pop()
    }

    fn dealloc(&self, pos: usize, pages: usize) {
        let k = pages.trailing_zeros() as usize;
        if let Some(list) = self.a.lock().free.get_mut(k) {
            list.push(pos);
        }
    }
}

fn pair() -> Pair {
    let zone = || -> &'static BoxedZone {
        // The configuration axalloc-buddy gives its zone over this region.
        let cfg = axalloc_buddy::zone_config(Pfn((BASE / PAGE) as u64), PAGES as u64, 2);
        Box::leak(Box::new(must(BoxedZone::new_boxed_empty(cfg))))
    };
    // SAFETY: the workloads free only runs they allocated, once each; no page is touched.
    let mut ours = must(unsafe { AxPageAllocator::new(zone(), 0, 0) });
    ours.init(BASE, PAGES * PAGE);
    // SAFETY: as above; the zone is this allocator's alone and each call runs under the
    // spin lock around it, one at a time.
    let mut local = unsafe { must(AxPageAllocator::new(zone(), 0, 0)).cpu_local() };
    local.init(BASE, PAGES * PAGE);
    let mut bitmap = BitmapPageAllocator::<PAGE>::new();
    bitmap.init(BASE, PAGES * PAGE);
    Pair {
        bitmap: spin::Mutex::new(bitmap),
        ours: spin::Mutex::new(ours),
        local: spin::Mutex::new(local),
        calls: churn_calls(),
        held: Vec::with_capacity(CHURN),
        slab: SlabPages::new().resident(),
        tlsf: TlsfPages::new().resident(),
        ax_alloc: AxAllocTlsf::new().resident(),
        floor: FloorPages::new(),
        misaligned: [0; ALLOCATORS.len()],
    }
}

/// An allocator behind a spin lock, each call under it, as ArceOS's global allocator holds
/// its page allocator (`SpinNoIrq`, without the interrupt masking a host cannot do).
pub(crate) trait Locked {
    /// `pages` pages aligned to `align` bytes: their position, or `None`.
    fn alloc(&self, pages: usize, align: usize) -> Option<usize>;
    /// Gives back the `pages` pages at `pos`, allocated by [`Locked::alloc`].
    fn dealloc(&self, pos: usize, pages: usize);
}

impl<A: PageAllocator> Locked for spin::Mutex<A> {
    fn alloc(&self, pages: usize, align: usize) -> Option<usize> {
        self.lock().alloc_pages(pages, align).ok()
    }

    fn dealloc(&self, pos: usize, pages: usize) {
        self.lock().dealloc_pages(pos, pages);
    }
}

/// `a` as ArceOS reaches its page allocator: through a call the compiler cannot inline into
/// the caller's loop, the size and alignment arriving at run time (axalloc 0.3's and
/// ax-alloc 0.9's `alloc_pages`, which the kernel's page-table and heap code call, are not
/// `#[inline]`: the page allocator inside them sees its arguments in registers). Every
/// allocator of the table is timed and counted through it. Inlined into the workload with
/// constant arguments instead, an allocator's size and alignment checks fold away, more of
/// them for the peers (whose whole page path inlines) than for buddy-sim (whose paths
/// other than one page are out of line): the CHANGELOG gives the figures.
fn opaque(a: &dyn Locked) -> &dyn Locked {
    std::hint::black_box(a)
}

fn page_tables(a: &dyn Locked, _: &mut Vec<(usize, usize)>, _: &[Call]) -> u64 {
    for _ in 0..PAIRS {
        let pos = a.alloc(1, PAGE).expect("a page-table page");
        a.dealloc(pos, 1);
    }
    0
}

fn heap_growth(a: &dyn Locked, held: &mut Vec<(usize, usize)>, _: &[Call]) -> u64 {
    let mut pages = 8;
    while pages <= PAGES / 4 {
        held.push((a.alloc(pages, PAGE).expect("a heap run"), pages));
        pages *= 2;
    }
    for (pos, n) in held.drain(..) {
        a.dealloc(pos, n);
    }
    0
}

/// Replays `calls`; returns the results that broke the alignment asked for.
fn churn(a: &dyn Locked, held: &mut Vec<(usize, usize)>, calls: &[Call]) -> u64 {
    let mut misaligned = 0;
    for &call in calls {
        match call {
            Call::Alloc { pages, align } => {
                if let Some(pos) = a.alloc(pages, align) {
                    misaligned += u64::from(pos % align != 0);
                    held.push((pos, pages));
                }
            }
            Call::Free { .. } if held.is_empty() => {}
            Call::Free { slot, half } => {
                let i = slot % held.len();
                let (pos, n) = held[i];
                if half && n > 1 {
                    let lower = n / 2;
                    a.dealloc(pos + lower * PAGE, n - lower);
                    held[i] = (pos, lower);
                } else {
                    a.dealloc(pos, n);
                    held.swap_remove(i);
                }
            }
        }
    }
    for (pos, n) in held.drain(..) {
        a.dealloc(pos, n);
    }
    misaligned
}

/// A workload: runs on an allocator with a scratch list and the churn calls, returns the
/// results it saw misaligned.
macro_rules! workload {
    ($work:ident) => {
        [
            Box::new(|p: &mut Pair| {
                p.misaligned[0] = $work(opaque(&p.bitmap), &mut p.held, &p.calls);
            }) as Candidate<'static, Pair>,
            Box::new(|p: &mut Pair| {
                p.misaligned[1] = $work(opaque(&p.ours), &mut p.held, &p.calls);
            }),
            Box::new(|p: &mut Pair| {
                p.misaligned[2] = $work(opaque(&p.local), &mut p.held, &p.calls);
            }),
            Box::new(|p: &mut Pair| {
                p.misaligned[3] = $work(opaque(&p.slab), &mut p.held, &p.calls);
            }),
            Box::new(|p: &mut Pair| {
                p.misaligned[4] = $work(opaque(&p.tlsf), &mut p.held, &p.calls);
            }),
            Box::new(|p: &mut Pair| {
                p.misaligned[5] = $work(opaque(&p.ax_alloc), &mut p.held, &p.calls);
            }),
            Box::new(|p: &mut Pair| {
                p.misaligned[6] = $work(opaque(&p.floor), &mut p.held, &p.calls);
            }),
        ]
    };
}

/// Allocators that run every workload: the peers that free only whole runs (a block of
/// buddy-slab-allocator, a TLSF block) and the floor run all but the churn, whose partial
/// frees they cannot do.
const PARTIAL_FREES: usize = 3;

/// The goal against the page allocators of ArceOS's tgoskits line.
const PEER_GOAL: f64 = 1.5;

/// The host table, and the goal table against the peers.
fn table(ctx: &SectionContext) -> (Table, Table) {
    let mut t = Table::new(
        "arceos-pages",
        "ArceOS's PageAllocator interface: its BitmapPageAllocator, buddy-sim's AxPageAllocator and the page allocators of ArceOS's ax-alloc 0.9 on the same work, ns per call (median [95% CI] over rounds), ratio per round (median [95% CI]; above 1: the row's allocator faster than the bitmap), results misaligned",
        &[
            "workload",
            "allocator",
            "ns per call",
            "bitmap ÷ this allocator (time)",
            "misaligned results",
        ],
    );
    let mut goals = Table::new(
        "arceos-peers",
        "buddy-sim against ax-alloc 0.9's page allocators (buddy-slab-allocator, TLSF), measured side by side in the table above",
        &[
            "workload",
            "buddy-sim ÷ peer (time, median [95% CI])",
            "goal",
            "verdict",
            "peer ÷ floor: the most any allocator behind the lock reaches",
        ],
    );
    let mut p = pair();
    let works: [(&str, [Candidate<'static, Pair>; ALLOCATORS.len()], f64); 3] = [
        (
            "page tables: 1 page, alloc + free",
            workload!(page_tables),
            (2 * PAIRS) as f64,
        ),
        (
            "heap growth: runs of 8 to 8192 pages, doubling, then freed",
            workload!(heap_growth),
            (2 * 11) as f64,
        ),
        (
            "churn: 20 000 calls, 1-512 pages, 4 KiB-2 MiB aligned, partial frees",
            workload!(churn),
            CHURN as f64,
        ),
    ];
    for (w, (name, pair_of, calls)) in works.into_iter().enumerate() {
        ctx.step(format!("arceos: {name}"));
        let churn = w == 2;
        let mut candidates: Vec<Candidate<'static, Pair>> = pair_of.into_iter().collect();
        if churn {
            candidates.truncate(PARTIAL_FREES);
        }
        let budget = Budget::cell(ctx.quick, 3.0);
        let s = Samples::interleaved(budget, &mut p, &mut candidates);
        for (i, allocator) in ALLOCATORS.into_iter().enumerate() {
            if i >= s.len() {
                t.row(vec![
                    Cell::text(name),
                    Cell::text(allocator),
                    Cell::text(if i == FLOOR {
                        "— (runs of the heap-growth sizes only)"
                    } else {
                        "— (frees whole runs only)"
                    }),
                    Cell::text("—"),
                    Cell::text("—"),
                ]);
                continue;
            }
            let ns = s[i].seconds().map(|x| x * 1e9 / calls);
            let ratio = if i > 0 {
                Cell::ratio_ci(s[i].speedup_over(&s[0]))
            } else {
                Cell::text("—")
            };
            t.row(vec![
                Cell::text(name),
                Cell::text(allocator),
                Cell::estimate(ns, 1, ""),
                ratio,
                Cell::num(p.misaligned[i] as f64, 0, ""),
            ]);
        }
        for peer in PARTIAL_FREES..s.len().min(FLOOR) {
            // A peer's time over the floor's, round by round: no allocator serving these
            // calls behind this lock can beat the peer by more.
            let bound = s[FLOOR].speedup_over(&s[peer]);
            for ours in [1, 2] {
                let e = s[ours].speedup_over(&s[peer]);
                goals.row(vec![
                    Cell::text(format!(
                        "{name}: {} over {}",
                        ALLOCATORS[ours], ALLOCATORS[peer]
                    )),
                    Cell::ratio_ci(e),
                    Cell::text(format!(">= {PEER_GOAL}x")),
                    Cell::verdict(e.judge(PEER_GOAL, true)),
                    Cell::ratio_ci(bound),
                ]);
            }
        }
        p.misaligned = [0; ALLOCATORS.len()];
    }
    assert_eq!(p.ours.lock().used_pages(), 0, "every run given back");
    assert_eq!(p.local.lock().used_pages(), 0, "every run given back");
    t.note(
        "128 MiB at physical 1 GiB, identity-mapped, no page touched (the peers, which write \
         their metadata into their memory, each over 128 MiB of its own, resident: every page \
         faulted in before the first round): the allocators' own work, \
         each allocator behind a spin lock taken per call as ArceOS's global allocator holds \
         its page allocator; the CPU-local row's allocator relies on that lock instead of its \
         per-cpu list's own (`AxPageAllocator::cpu_local`, `Zone::local_cpu`'s contract). \
         Every allocator is called as ArceOS's global allocator calls its page allocator \
         (axalloc 0.3's and ax-alloc 0.9's `alloc_pages` are not `#[inline]`): an out-of-line \
         call, the size and alignment arriving at run time (the same in the instruction \
         counts below). Inlined into the benchmark's loop with constant arguments, an \
         allocator's size and alignment checks would fold away, most of them for the peers, \
         whose whole page path inlines: a call no kernel makes. \
         The bitmap allocator (axallocator 0.2, ArceOS's default page allocator) searches a \
         bitmap of the whole region; buddy-sim holds a run as the fewest aligned blocks (a block \
         of the covering order split at the run's end, or, past its largest block, the blocks \
         of the free memory a search found), a head per block, and splits a block into pages \
         only where a free takes part of it. \
         Misaligned results: returned positions not a multiple of the alignment asked for (the \
         bitmap allocator ignores the alignment of 1-page requests, axallocator 0.2.0); \
         counted in the last round. This is the host-side half of the comparison; the next \
         table is ArceOS booted on each. The zone's largest block covers the region \
         (order 15 here, as axalloc-buddy sets it), as buddy-slab-allocator (up to order 20) \
         and TLSF serve any run as one block. buddy-slab-allocator 0.6.1's `BuddyAllocator` \
         and ax-alloc 0.9's TLSF (rlsf 0.2 through axallocator's `TlsfByteAllocator`, \
         first/second level 28/32) each over 128 MiB of memory of their own (both write \
         their metadata into it), behind a spin lock; a run is one block of theirs, freed \
         whole, so they do not run the churn, whose frees take parts of runs. The ax-alloc \
         0.9.2 row is that crate itself, from the registry with its `tlsf` feature: its \
         `GlobalAllocator`'s `alloc_pages`/`dealloc_pages`, no lock around them (ArceOS calls \
         it as its global allocator), each taking its own `ax-sync` spin locks three times \
         (its TLSF's, the TLSF's again for its byte count, its usage counts'; on the host the \
         test-and-set lock of the ArceOS today section's `SpinOps`): the TLSF row above is \
         the same allocator behind the one lock this table gives every other. The floor row \
         (`FloorPages`) is no allocator: behind the same lock, a list of free runs per \
         power of two, carved in advance, so each call is the lock and a pop or push. No \
         allocator serving these calls behind this lock costs less.",
    );
    goals.note(
        "Each ratio divides the peer's time per round by buddy-sim's in the same round \
         (interleaved); above 1: buddy-sim faster. Page tables are the calls ArceOS makes \
         most; heap growth its byte allocator's refills. The last column divides the peer's \
         time by the floor's (the table above): the ratio an allocator that did nothing but \
         the lock and a list pop or push would reach over that peer. Where it is below the \
         goal, the goal cannot be met by any allocator behind one lock per call, as \
         ArceOS's global allocator holds its page allocator and this table measures it. \
         Against ax-alloc 0.9.2 as released (its three locks a call) the floor column is \
         what that lock discipline leaves for an allocator with one. Past that lock: \
         axalloc-buddy's drop-in, which replaces ax-alloc and its lock, takes a page from its \
         CPU's magazine with no lock at all (the ArceOS today section, whose one-page rows \
         judge the same 1.5x goal against these peers behind one lock).",
    );
    (t, goals)
}

/// The environment variable naming the captured `bench` runs.
pub const QEMU_LOG_ENV: &str = "ZC_ARCEOS_LOG";

/// `bench` lines by (architecture, workload): per call, one per line (a boot prints one
/// per workload, or one per round), for (ArceOS's allocator, buddy-sim). Guest instructions
/// where the boot calibrated its clock (a `bench clock:` line: the guest's ns times the
/// instructions it reads as one), else the guest's nanoseconds.
type QemuRuns = Vec<((String, String), (Vec<f64>, Vec<f64>))>;

/// Parses the captured runs booted with `cpus` CPUs (a run that names none had one; see the
/// module docs).
///
/// # Errors
/// The `UNAVAILABLE` reason, or a log without a run of `cpus` CPUs.
pub fn parse_qemu(log: &str, cpus: usize) -> Result<QemuRuns, String> {
    let mut runs: QemuRuns = Vec::new();
    let mut current: Option<(String, bool)> = None;
    // The current boot's instructions per guest ns (1 until its clock line says otherwise).
    let mut scale = 1.0;
    for line in capture::available(log)?.lines() {
        if let Some(fields) = line.strip_prefix("ARCEOS RUN ") {
            let arch = capture::field(fields, "arch").ok_or("a run without arch=")?;
            let ours = capture::field(fields, "allocator").ok_or("a run without allocator=")?
                == "buddy-sim";
            let booted = capture::field(fields, "cpus").map_or(Ok(1), str::parse::<usize>);
            let booted = booted.map_err(|e| format!("a run's cpus=: {e}"))?;
            current = (booted == cpus).then_some((arch.to_string(), ours));
            scale = 1.0;
        } else if let Some(rest) = line.strip_prefix("bench ") {
            if let Some(per_ns) = capture::instructions_per_ns(rest) {
                scale = per_ns;
            } else if let (Some((arch, ours)), Some((work, ns))) =
                (&current, capture::per_call(rest))
            {
                let (bitmap, buddy) = capture::entry(
                    &mut runs,
                    (arch.clone(), work.to_string()),
                    Default::default,
                );
                let value = ns * scale;
                if *ours {
                    buddy.push(value);
                } else {
                    bitmap.push(value);
                }
            }
        }
    }
    if runs.is_empty() {
        return Err(format!(
            "the log holds no bench line of a boot with {cpus} CPU(s)"
        ));
    }
    Ok(runs)
}

/// The allocators of a [`Pair`], by index: the bitmap, buddy-sim (locked, then with CPU-local
/// lists), the peers of ax-alloc 0.9 (its two page allocators behind one lock, then
/// ax-alloc 0.9.2's own global allocator), and the floor last.
const ALLOCATORS: [&str; 7] = [
    "BitmapPageAllocator (ArceOS)",
    "AxPageAllocator (buddy-sim)",
    "AxPageAllocator, CPU-local lists (buddy-sim)",
    "buddy-slab-allocator 0.6 BuddyAllocator (ax-alloc 0.9)",
    "TLSF, rlsf 0.2 (ax-alloc 0.9's TlsfByteAllocator)",
    "ax-alloc 0.9.2's GlobalAllocator, TLSF backend: its own code and locks",
    "floor: the lock + a pop or push of a list per run size (FloorPages)",
];

/// The index of [`FloorPages`] in [`ALLOCATORS`], the last: the peers are those from
/// [`PARTIAL_FREES`] up to it.
const FLOOR: usize = ALLOCATORS.len() - 1;

/// `n` operations of `work` on allocator `which` of a fresh [`Pair`], each inside
/// [`count::counted`]: one operation is one call of `work` (a page-table pair: `PAIRS`
/// pairs run as one, so callgrind divides by them below; a heap-growth round).
fn count_work(n: u32, which: usize, work: fn(&dyn Locked, &mut Vec<(usize, usize)>)) {
    let mut p = pair();
    let Pair {
        bitmap,
        ours,
        local,
        slab,
        tlsf,
        ax_alloc,
        floor,
        held,
        ..
    } = &mut p;
    let a: &dyn Locked = match which {
        0 => &*bitmap,
        1 => &*ours,
        2 => &*local,
        3 => &*slab,
        4 => &*tlsf,
        5 => &*ax_alloc,
        _ => &*floor,
    };
    count_calls(n, a, held, work);
}

/// `n` operations of `work` on `a`, each inside [`count::counted`], called through
/// [`opaque`] as the table times them.
fn count_calls(
    n: u32,
    a: &dyn Locked,
    held: &mut Vec<(usize, usize)>,
    work: fn(&dyn Locked, &mut Vec<(usize, usize)>),
) {
    for _ in 0..n {
        count::counted(&mut || work(opaque(a), held));
    }
}

/// One page-table page allocated and freed.
fn one_page_pair(a: &dyn Locked, _: &mut Vec<(usize, usize)>) {
    let pos = a.alloc(1, PAGE).expect("a page-table page");
    a.dealloc(pos, 1);
}

/// One heap-growth round: 11 runs taken, then given back (22 calls).
fn one_heap_round(a: &dyn Locked, held: &mut Vec<(usize, usize)>) {
    heap_growth(a, held, &[]);
}

/// Calls in one heap-growth round.
const HEAP_CALLS: f64 = 22.0;

/// The counted workloads of each `(name, ops, work)`, on each allocator of a [`Pair`]:
/// `NAME-bitmap`, `NAME-buddy`, `NAME-buddy-local`, `NAME-buddy-slab`, `NAME-tlsf`,
/// `NAME-ax-alloc`, `NAME-floor` (a `Workload` runs a plain `fn`, so one per allocator).
macro_rules! counted {
    ($(($name:literal, $ops:literal, $work:ident)),+ $(,)?) => {
        [$(
            Workload { name: concat!($name, "-bitmap"), ops: $ops, run: |n| count_work(n, 0, $work) },
            Workload { name: concat!($name, "-buddy"), ops: $ops, run: |n| count_work(n, 1, $work) },
            Workload { name: concat!($name, "-buddy-local"), ops: $ops, run: |n| count_work(n, 2, $work) },
            Workload { name: concat!($name, "-buddy-slab"), ops: $ops, run: |n| count_work(n, 3, $work) },
            Workload { name: concat!($name, "-tlsf"), ops: $ops, run: |n| count_work(n, 4, $work) },
            Workload { name: concat!($name, "-ax-alloc"), ops: $ops, run: |n| count_work(n, 5, $work) },
            Workload { name: concat!($name, "-floor"), ops: $ops, run: |n| count_work(n, 6, $work) },
        )+]
    };
}

/// The instruction-counted workloads: a page-table pair and a heap-growth round on each
/// allocator.
pub const COUNTED: [Workload; 2 * ALLOCATORS.len()] = counted!(
    ("arceos-page", 2000, one_page_pair),
    ("arceos-heap", 10, one_heap_round),
);

/// The drop-in's page-table pair counted as [`COUNTED`] counts the table's allocators (the
/// same pair through the same out-of-line call): axalloc-buddy's `GlobalAllocator` on CPU 0
/// of a drop-in built for two, its calls `alloc_pages(1, 4096)` and `dealloc_pages`, its own
/// slot lock instead of the table's spin lock.
pub const DROP_IN_COUNTED: Workload = Workload {
    name: "arceos-page-dropin",
    ops: 2000,
    run: |n| {
        let a =
            crate::arceos_today::Ours(crate::smp::DropIn::new(crate::arceos_today::DROP_IN_CPUS));
        count_calls(n, &a, &mut Vec::new(), one_page_pair);
    },
};

/// The host table's calls counted by callgrind: exact, the same on every run of the same
/// binary, so a change of a few percent is a change of the code.
fn counted_table() -> Table {
    let mut t = Table::new(
        "arceos-instructions",
        "ArceOS's PageAllocator interface, instructions per call (callgrind, exact): a page-table page's alloc + free as two calls, a heap-growth round as 22",
        &[
            "workload",
            "allocator",
            "instructions per call",
            "bitmap ÷ this allocator (instructions)",
        ],
    );
    for (w, (name, per_op)) in [
        ("page tables: 1 page, alloc + free", 2.0),
        (
            "heap growth: runs of 8 to 8192 pages, doubling, then freed",
            HEAP_CALLS,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let n = ALLOCATORS.len();
        let counts: Vec<Result<f64, String>> = (0..n)
            .map(|i| count::per_op(COUNTED[n * w + i]).map(|c| c / per_op))
            .collect();
        for (i, c) in counts.iter().enumerate() {
            let ratio = match (&counts[0], c) {
                (_, Err(_)) => Cell::text("—"),
                (Ok(bitmap), Ok(ours)) if i > 0 => Cell::ratio(bitmap / ours),
                _ => Cell::text("—"),
            };
            t.row(vec![
                Cell::text(name),
                Cell::text(ALLOCATORS[i]),
                match c {
                    Ok(c) => Cell::num(*c, 0, ""),
                    Err(e) => Cell::text(format!("not counted: {e}")),
                },
                ratio,
            ]);
        }
        if w == 0 {
            // The drop-in's own page path: its CPU id, its slot lock (in place of the
            // table's spin lock), the AxPageAllocator call and the usage counts; inlined
            // into the caller with its constants (as ArceOS reaches both: the `axalloc`
            // package's `alloc_pages` through `Deref`, its `dealloc_pages` wrapper, both
            // `#[inline]`), then called as the table's allocators are.
            for (how, w) in [
                (
                    "the drop-in, as ArceOS calls it: CPU id, slot lock, usage",
                    crate::smp::COUNTED[0],
                ),
                (
                    "the drop-in called out of line, its arguments at run time",
                    DROP_IN_COUNTED,
                ),
            ] {
                let drop_in = count::per_op(w).map(|c| c / 2.0);
                t.row(vec![
                    Cell::text("page tables: 1 page, alloc + free"),
                    Cell::text(format!("axalloc-buddy's GlobalAllocator ({how})")),
                    match &drop_in {
                        Ok(c) => Cell::num(*c, 0, ""),
                        Err(e) => Cell::text(format!("not counted: {e}")),
                    },
                    match (&counts[0], drop_in) {
                        (Ok(b), Ok(d)) => Cell::ratio(b / d),
                        _ => Cell::text("—"),
                    },
                ]);
            }
        }
    }
    t.note(
        "The same allocators and calls as the table above, each call counted by `valgrind \
         --tool=callgrind` in a run of N and one of 2N operations, the difference divided by \
         N. Per run, buddy-sim writes a head and frees it with one compare-and-swap per \
         block (a run of n pages is at most about 2 log2(n) blocks); the bitmap flips a bit \
         per page, so its runs cost in proportion to their length and buddy-sim's to the \
         logarithm. One page: a per-cpu list's pop and push of a frozen page (no reference \
         count) against the bitmap's search of its words; the floor's row is the lock and a \
         list pop and push alone. The drop-in's rows make \
         the same calls on CPU 0 of a drop-in built for two (`alloc_pages(1, 4096)` and \
         `dealloc_pages`; the harness's thread-local CPU id included), its own slot lock \
         instead of the table's spin lock: first both calls inlined into the caller with \
         their constant size and alignment, as ArceOS reaches the drop-in's (`#[inline]`: \
         the `axalloc` package's `alloc_pages` through its `Deref`, its `dealloc_pages` \
         wrapper), where axalloc 0.3's and ax-alloc 0.9's `alloc_pages` (not `#[inline]`) \
         call the allocators above out of line with them at run time; then through the \
         table's own out-of-line call, for the same call on both sides.",
    );
    t
}

/// The goal of two CPUs taking page-table pages at once: their throughput over one CPU's.
const SMP_GOAL: f64 = 1.8;

/// The `bench` workload the two-CPU boots run, and its lines' suffixes: CPU 0 alone, CPU 1
/// alone, both at once (the wall time until the last is done), and each CPU's own calls
/// while both ran.
const SMP_WORK: &str = "page-table pages (alloc + free of 1 page)";
const SMP_ALONE: &str = ", one CPU alone";
const SMP_CPU1_ALONE: &str = ", CPU 1 alone";
const SMP_AT_ONCE: &str = ", every CPU at once";
const SMP_OWN: [&str; 2] = [
    ", every CPU at once, CPU 0's own calls",
    ", every CPU at once, CPU 1's own calls",
];
/// The control the two-CPU boots time round by round beside [`SMP_WORK`], with the same
/// suffixes (CPU 0 alone, both at once): each CPU writing and reading an array of its own,
/// no allocator called.
const SMP_CONTROL: &str = "control (a private array, no allocator)";

/// The verdict on a scaling of `scaling` against [`SMP_GOAL`], given the control of the
/// same boot (`None` where it did not run): the control's scaling (its median) and the
/// allocator's scaling over it per round. A scaling short of the goal is inconclusive, not
/// unmet, where the control fell short of the goal too and the allocator kept all it
/// allowed (its ratio to the control not clearly below 1): the host did not give the two
/// vCPU threads the CPUs to show it.
fn smp_verdict(scaling: Estimate, control: Option<(f64, Estimate)>) -> Verdict {
    match scaling.judge(SMP_GOAL, true) {
        Verdict::NotMet
            if control.is_some_and(|(allowed, kept)| allowed < SMP_GOAL && kept.hi >= 1.0) =>
        {
            Verdict::Inconclusive
        }
        verdict => verdict,
    }
}

/// ArceOS booted with two CPUs on each allocator under QEMU (TCG, wall clock): one CPU
/// taking page-table pages alone, then both at once, round after round.
fn qemu_smp_table(log: &Result<String, String>) -> Table {
    let mut t = Table::new(
        "arceos-qemu-smp",
        "ArceOS booted with 2 CPUs under QEMU (TCG, no -icount: wall clock): page-table pages through the whole axalloc, one CPU alone and both CPUs at once, ns per call over all calls (median [95% CI] over rounds), and the throughput of both over one (per-round ratio)",
        &[
            "arch",
            "allocator",
            "one CPU alone",
            "CPU 1 alone",
            "both CPUs at once",
            "at once: CPU 0's own calls",
            "at once: CPU 1's own calls",
            "2 CPUs over 1 (throughput)",
            "÷ the control's 2 CPUs over 1 (per round)",
            "goal",
            "verdict",
        ],
    );
    let mut rounds = 0;
    match log.clone().and_then(|l| parse_qemu(&l, 2)) {
        Ok(runs) => {
            let work = |arch: &str, work: &str, suffix: &str| {
                runs.iter()
                    .find(|((a, w), _)| a == arch && *w == format!("{work}{suffix}"))
                    .map(|(_, v)| v.clone())
            };
            let of = |arch: &str, suffix: &str| work(arch, SMP_WORK, suffix);
            // The control's rounds, each boot's beside its allocator's (none in a log from
            // a `bench` app without it).
            let control =
                |arch: &str, suffix: &str| work(arch, SMP_CONTROL, suffix).unwrap_or_default();
            let mut archs: Vec<&str> = runs.iter().map(|((a, _), _)| a.as_str()).collect();
            archs.dedup();
            for arch in archs {
                let (Some(alone), Some(at_once)) = (of(arch, SMP_ALONE), of(arch, SMP_AT_ONCE))
                else {
                    t.note(format!("{arch}: a boot without both parallel lines."));
                    continue;
                };
                // The per-CPU lines, where the boot printed them (`pick` chooses the
                // allocator's values): an estimate, or a dash.
                type Pick = fn(&(Vec<f64>, Vec<f64>)) -> &Vec<f64>;
                let per_cpu = |suffix: &str, pick: Pick| {
                    of(arch, suffix)
                        .filter(|v| !pick(v).is_empty())
                        .map_or_else(
                            || Cell::text("—"),
                            |v| Cell::estimate(Estimate::of(pick(&v).iter().copied()), 0, ""),
                        )
                };
                let bitmap: Pick = |v| &v.0;
                let buddy: Pick = |v| &v.1;
                let (control_alone, control_at_once) =
                    (control(arch, SMP_ALONE), control(arch, SMP_AT_ONCE));
                // Round i's scaling: its line of one CPU alone over its line of both at once
                // (in order).
                let scalings = |alone: &[f64], at_once: &[f64]| -> Vec<f64> {
                    alone.iter().zip(at_once).map(|(a, b)| a / b).collect()
                };
                // The control's scaling in axalloc-buddy's boot, where it ran.
                let allowed_median = {
                    let c = scalings(&control_alone.1, &control_at_once.1);
                    (!c.is_empty()).then(|| Estimate::of(c).median)
                };
                let allocators = [
                    (
                        "ArceOS's axalloc (bitmap, one lock)",
                        &alone.0,
                        &at_once.0,
                        bitmap,
                        false,
                    ),
                    ("axalloc-buddy", &alone.1, &at_once.1, buddy, true),
                ];
                for (name, alone, at_once, pick, judged) in allocators {
                    rounds = rounds.max(alone.len());
                    let per_round = scalings(alone, at_once);
                    let scaling = Estimate::of(per_round.iter().copied());
                    // Over the control of the same boot and round.
                    let allowed = scalings(pick(&control_alone), pick(&control_at_once));
                    let kept = (allowed.len() == per_round.len() && !allowed.is_empty())
                        .then(|| Estimate::of(per_round.iter().zip(&allowed).map(|(s, c)| s / c)));
                    let control = allowed_median.zip(kept);
                    t.row(vec![
                        Cell::text(arch),
                        Cell::text(name),
                        Cell::estimate(Estimate::of(alone.iter().copied()), 0, ""),
                        per_cpu(SMP_CPU1_ALONE, pick),
                        Cell::estimate(Estimate::of(at_once.iter().copied()), 0, ""),
                        per_cpu(SMP_OWN[0], pick),
                        per_cpu(SMP_OWN[1], pick),
                        Cell::ratio_ci(scaling),
                        kept.map_or_else(|| Cell::text("—"), Cell::ratio_ci),
                        Cell::text(if judged {
                            format!(">= {SMP_GOAL}x")
                        } else {
                            "shown beside".into()
                        }),
                        if judged {
                            Cell::verdict(smp_verdict(scaling, control))
                        } else {
                            Cell::text("—")
                        },
                    ]);
                }
                // The control of axalloc-buddy's boot, where it ran.
                let (alone, at_once) = (&control_alone.1, &control_at_once.1);
                if !alone.is_empty() && alone.len() == at_once.len() {
                    let estimate =
                        |v: &[f64]| Cell::estimate(Estimate::of(v.iter().copied()), 2, "");
                    t.row(vec![
                        Cell::text(arch),
                        Cell::text(format!("{SMP_CONTROL}, axalloc-buddy's boot")),
                        estimate(alone),
                        Cell::text("—"),
                        estimate(at_once),
                        Cell::text("—"),
                        Cell::text("—"),
                        Cell::ratio_ci(Estimate::of(scalings(alone, at_once))),
                        Cell::text("—"),
                        Cell::text("what QEMU and this host allowed"),
                        Cell::text("—"),
                    ]);
                }
            }
        }
        Err(why) => t.note(format!("Not measured: {why}.")),
    }
    t.note(format!(
        "The `bench` app booted with 2 CPUs and \
         128 MiB, without -icount (which runs the CPUs one at a time): one task pinned to each \
         CPU (ArceOS's affinity call, checked against the CPU id), started together, each \
         taking 512 page-table pages and freeing them, 500 times; first on CPU 0 alone, then \
         on CPU 1 alone, then on both at once, 5 rounds per boot ({rounds} rounds per row in \
         all). ns per call divides the wall time until the last CPU is done by all CPUs' \
         calls; the ratio per round is one CPU's time per call over both CPUs' (2 would be \
         perfect scaling). Each CPU's own calls: its own task's time while both ran, over its \
         own calls. Where the CPUs slow each other (a lock, a shared line), both CPUs' own \
         calls are slower than alone; where one CPU's are and the other's are not, what \
         slowed is that CPU's vCPU thread: QEMU's emulation of it (its software TLB) or this \
         host's scheduling of it. Measured for aarch64 on QEMU 10.0.2, with a probe on its \
         victim-TLB hit path in a boot by hand: CPU 1's vCPU thread swapped entries with its \
         victim TLB about 9 million times in the boot, CPU 0's about 2 000. CPU 1's software \
         TLB had shrunk to at most 128 entries (QEMU resizes it by use), direct-mapped by \
         virtual page: the top pages of CPU 1's task stack (a 256 KiB block, aligned to its \
         size as the drop-in hands such a block out) and two pages of the drop-in's metadata \
         past the frame map, where the CPUs' slots and page magazines lie, took the same \
         entries, so each call evicted one for the other. Which pages collide depends on the \
         kernel's size and the memory's layout (one page more of kernel data moved CPU 1 \
         alone by 30% in another boot): CPU 1's figures and the row's verdict move with it. \
         The control: each round, before the page-table pages, \
         each CPU writes and then reads 512 words of an array of its own (on its task's \
         stack) 64 times per 512 pages' worth, alone and both at once, no allocator called \
         (ns per call: per word's store or load): the scaling QEMU and this host allowed two \
         CPUs that share nothing, in that boot and round. The column beside divides each \
         round's scaling by its boot's control's in the same round: 1 is all the scaling \
         there was to have. A scaling short of the goal is judged inconclusive, not unmet, \
         where the control of the same boot scaled less than the goal as well (its median) \
         and the allocator kept all the control's scaling (the ratio's interval reaching 1): \
         the host did not give the two vCPU threads the CPUs to show it. Wall time under \
         TCG is neither the \
         hardware's time nor free of this host: QEMU's own threads share its CPUs, and on a \
         host with 2 CPUs the two vCPU threads rarely both run uncontended (the host-thread \
         table of the SMP section measures the same calls natively). buddy-slab-allocator \
         is not an allocator of this ArceOS line (0.3.0-preview.3): it is measured beside \
         the drop-in on host threads."
    ));
    t
}

/// The one-page goal through the drop-in: its guest instructions against ArceOS's bitmap
/// on both architectures (QEMU `-icount`), and its host instructions (callgrind).
fn one_page_goal_table(log: &Result<String, String>) -> Table {
    const WORK: &str = "page-table pages (alloc + free of 1 page)";
    const GOAL: f64 = 1.0;
    const STRETCH: f64 = 1.5;
    let mut t = Table::new(
        "arceos-one-page-goal",
        "One page alloc + free through axalloc-buddy against ArceOS's bitmap allocator",
        &["where", "bitmap ÷ axalloc-buddy", "goal", "verdict"],
    );
    let judge = |r: f64, target: f64| Verdict::met_if(r >= target).as_str();
    let verdict = |r: f64| {
        let (v, stretch) = (judge(r, GOAL), judge(r, STRETCH));
        format!("{v} (stretch {STRETCH}x: {stretch})")
    };
    let goal = format!(">= {GOAL}x (stretch {STRETCH}x)");
    match log.clone().and_then(|l| parse_qemu(&l, 1)) {
        Ok(runs) => {
            for ((arch, work), (bitmap, buddy)) in runs.iter().filter(|((_, w), _)| w == WORK) {
                let (b, o) = (Estimate::of(bitmap.clone()), Estimate::of(buddy.clone()));
                let r = b.median / o.median;
                t.row(vec![
                    Cell::text(format!(
                        "{arch} guest under QEMU -icount: {work} (instructions, {:.0} / {:.0})",
                        b.median, o.median
                    )),
                    Cell::ratio(r),
                    Cell::text(goal.clone()),
                    Cell::text(verdict(r)),
                ]);
            }
        }
        Err(e) => t.row(vec![
            Cell::text("guests under QEMU"),
            Cell::text(format!("not measured: {e}")),
            Cell::text(goal.clone()),
            Cell::text("—"),
        ]),
    }
    let bitmap = count::per_op(COUNTED[0]).map(|c| c / 2.0);
    let drop_in = count::per_op(crate::smp::COUNTED[0]).map(|c| c / 2.0);
    match (bitmap, drop_in) {
        (Ok(b), Ok(d)) => t.row(vec![
            Cell::text(format!(
                "host (callgrind, instructions per call, {b:.0} / {d:.0}; the drop-in for two CPUs)"
            )),
            Cell::ratio(b / d),
            Cell::text(goal),
            Cell::text(verdict(b / d)),
        ]),
        (Err(e), _) | (_, Err(e)) => t.row(vec![
            Cell::text("host (callgrind)"),
            Cell::text(format!("not counted: {e}")),
            Cell::text(goal),
            Cell::text("—"),
        ]),
    }
    t.note(
        "The guests are the `bench` app's page-table workload booted on each allocator (the \
         table above: 512 single pages taken then freed, one CPU, instruction counts); the \
         host row the callgrind table's, each reached as ArceOS reaches it: the bitmap \
         behind a spin lock, called out of line with the size and alignment at run time (axalloc \
         0.3's `alloc_pages` is not `#[inline]`), the drop-in's `alloc_pages(1, 4096)` and \
         `dealloc_pages` inlined into the caller (both are `#[inline]`, and ArceOS reaches \
         them so: the `axalloc` package's `alloc_pages` through its `Deref`, its \
         `dealloc_pages` wrapper), on a drop-in built for two CPUs, its CPU id asked as an \
         SMP kernel asks it; the callgrind table also counts the drop-in called out of line \
         as the bitmap is. Host time: the SMP section's one-thread rows.",
    );
    t
}

/// ArceOS booted on each allocator under QEMU: the table of the `bench` runs.
fn qemu_table(log: &Result<String, String>) -> Table {
    let mut t = Table::new(
        "arceos-qemu",
        "ArceOS booted on its own allocator and on buddy-sim (axalloc-buddy) under QEMU -icount shift=0: guest instructions per call (median [min, max] over boots), ratio of medians (above 1: buddy-sim faster)",
        &[
            "workload",
            "arch",
            "ArceOS's axalloc (bitmap)",
            "axalloc-buddy",
            "bitmap ÷ buddy-sim",
        ],
    );
    match log.clone().and_then(|l| parse_qemu(&l, 1)) {
        Ok(runs) => {
            for ((arch, work), (bitmap, buddy)) in runs {
                let (b, o) = (Estimate::of(bitmap), Estimate::of(buddy));
                t.row(vec![
                    Cell::text(work),
                    Cell::text(arch),
                    Cell::estimate(b, 0, ""),
                    Cell::estimate(o, 0, ""),
                    Cell::num(b.median / o.median, 2, "x"),
                ]);
            }
        }
        Err(why) => t.note(format!("Not measured: {why}.")),
    }
    t.note(
        "Each allocator is the whole `axalloc` an ArceOS kernel links (the heap's TLSF byte \
         allocator over it in both), built from ArceOS's published crates 0.3.0-preview.3 and \
         booted with one CPU and 128 MiB; `bench` times its calls with the guest's clock, \
         whose counter under -icount shift=0 advances one tick per guest instruction, and \
         times a loop of 2 000 000 instructions with it first, which turns its figures into \
         instructions (aarch64's clock reads 1 ns an instruction; ArceOS 0.3's x86_64 platform \
         takes the TSC for 4 GHz and reads a quarter of a ns): the figures are instruction \
         counts, the same on every host, blind to cache misses and to how fast an \
         instruction is (TCG runs `rep stosb` one byte an instruction, so a clear with it counts \
         4096 where a vector loop counts 256; real hardware clears 4 KiB with either in about \
         the same time). Page-table pages: 512 single pages taken then freed, 20 times; runs of \
         8..1024 pages taken and freed; random churn: 20 000 calls of 1..24 pages, aligned to \
         4..64 KiB, whole and partial frees; zeroed page: GlobalPage::alloc_zero and its drop.",
    );
    t
}

impl Section for Arceos {
    fn name(&self) -> &'static str {
        "ArceOS"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        4
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let (host, peers) = table(ctx);
        ctx.step("arceos: instructions (callgrind)");
        let log = capture::read(QEMU_LOG_ENV);
        vec![
            host,
            peers,
            counted_table(),
            qemu_table(&log),
            one_page_goal_table(&log),
            qemu_smp_table(&log),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
ARCEOS RUN arch=x86_64 allocator=buddy-sim
bench: TLSF allocator
bench page-table pages (alloc + free of 1 page): 168 ns per call
bench random churn (one call): 386 ns per call
ARCEOS RUN arch=x86_64 allocator=bitmap
bench page-table pages (alloc + free of 1 page): 69 ns per call
bench random churn (one call): 1069 ns per call
ARCEOS RUN arch=x86_64 allocator=buddy-sim
bench page-table pages (alloc + free of 1 page): 170 ns per call
";

    #[test]
    fn runs_group_by_architecture_workload_and_allocator() {
        let runs = parse_qemu(LOG, 1).unwrap();
        assert_eq!(runs.len(), 2);
        let ((arch, work), (bitmap, buddy)) = &runs[0];
        assert_eq!(
            (arch.as_str(), work.as_str()),
            ("x86_64", "page-table pages (alloc + free of 1 page)")
        );
        assert_eq!(
            (bitmap.as_slice(), buddy.as_slice()),
            (&[69.0][..], &[168.0, 170.0][..])
        );
        assert_eq!(runs[1].1, (vec![1069.0], vec![386.0]));
    }

    #[test]
    fn two_cpu_runs_keep_their_rounds_in_order_apart_from_one_cpu_runs() {
        let log = format!(
            "{LOG}\
ARCEOS RUN arch=aarch64 allocator=buddy-sim cpus=2
bench page-table pages (alloc + free of 1 page), one CPU alone: 200 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 105 ns per call
bench page-table pages (alloc + free of 1 page), one CPU alone: 210 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 181 ns per call
ARCEOS RUN arch=aarch64 allocator=bitmap cpus=2
bench page-table pages (alloc + free of 1 page), one CPU alone: 190 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 209 ns per call
"
        );
        let runs = parse_qemu(&log, 2).unwrap();
        let alone = format!("{SMP_WORK}{SMP_ALONE}");
        let at_once = format!("{SMP_WORK}{SMP_AT_ONCE}");
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].0, ("aarch64".to_string(), alone));
        assert_eq!(runs[0].1, (vec![190.0], vec![200.0, 210.0]));
        assert_eq!(runs[1].0, ("aarch64".to_string(), at_once));
        assert_eq!(runs[1].1, (vec![209.0], vec![105.0, 181.0]));
        // The one-CPU runs are still only the first ones.
        assert_eq!(parse_qemu(&log, 1).unwrap().len(), 2);
    }

    /// The shown text of a cell.
    fn shown(c: &Cell) -> &str {
        match c {
            Cell::Text(t) | Cell::Num { text: t, .. } => t,
        }
    }

    /// The shown cells of the row of `t` whose second cell (the allocator) is `name`.
    fn row_named(t: &Table, name: &str) -> Vec<String> {
        let r = t.rows.iter().find(|r| shown(&r[1]) == name).unwrap();
        r.iter().map(|c| shown(c).to_string()).collect()
    }

    #[test]
    fn the_smp_table_shows_each_cpu_alone_and_its_own_calls_at_once() {
        let log = "\
ARCEOS RUN arch=x86_64 allocator=buddy-sim cpus=2
bench page-table pages (alloc + free of 1 page), one CPU alone: 40 ns per call
bench page-table pages (alloc + free of 1 page), CPU 1 alone: 60 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 31 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once, CPU 0's own calls: 41 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once, CPU 1's own calls: 62 ns per call
ARCEOS RUN arch=x86_64 allocator=bitmap cpus=2
bench page-table pages (alloc + free of 1 page), one CPU alone: 90 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 110 ns per call
";
        let t = qemu_smp_table(&Ok(log.to_string()));
        let row = |name: &str| row_named(&t, name);
        let ours = row("axalloc-buddy");
        assert_eq!(&ours[2..6], ["40 ±0%", "60 ±0%", "31 ±0%", "41 ±0%"]);
        assert_eq!(ours[6], "62 ±0%");
        assert!(ours[7].starts_with("1.29x"), "{}", ours[7]);
        // A boot that printed no per-CPU line (the bitmap's here): dashes.
        let bitmap = row("ArceOS's axalloc (bitmap, one lock)");
        assert_eq!(&bitmap[2..7], ["90 ±0%", "—", "110 ±0%", "—", "—"]);
        // No control in these boots: nothing to divide by, no control row.
        assert_eq!((ours[8].as_str(), bitmap[8].as_str()), ("—", "—"));
        assert_eq!(t.rows.len(), 2);
    }

    #[test]
    fn a_scaling_short_of_the_goal_is_inconclusive_where_the_control_was_short_too() {
        let short = Estimate {
            median: 1.5,
            lo: 1.4,
            hi: 1.6,
            n: 10,
        };
        let all = Estimate {
            median: 0.97,
            lo: 0.9,
            hi: 1.02,
            n: 10,
        };
        let less = Estimate {
            median: 0.8,
            lo: 0.75,
            hi: 0.85,
            n: 10,
        };
        assert_eq!(smp_verdict(short, None), Verdict::NotMet);
        // The host allowed the goal: short of it is unmet.
        assert_eq!(smp_verdict(short, Some((1.95, less))), Verdict::NotMet);
        // It did not, and the allocator kept what it allowed: the run cannot tell.
        assert_eq!(smp_verdict(short, Some((1.6, all))), Verdict::Inconclusive);
        // It did not, and the allocator lost some of it even so: unmet.
        assert_eq!(smp_verdict(short, Some((1.6, less))), Verdict::NotMet);
        let met = Estimate {
            median: 1.95,
            lo: 1.9,
            hi: 2.0,
            n: 10,
        };
        assert_eq!(smp_verdict(met, Some((1.5, less))), Verdict::Met);
    }

    #[test]
    fn the_smp_table_divides_each_rounds_scaling_by_its_boots_control() {
        let log = "\
ARCEOS RUN arch=x86_64 allocator=buddy-sim cpus=2
bench control (a private array, no allocator), one CPU alone: 2.000 ns per call
bench control (a private array, no allocator), every CPU at once: 1.250 ns per call
bench page-table pages (alloc + free of 1 page), one CPU alone: 40 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 25 ns per call
bench control (a private array, no allocator), one CPU alone: 2.000 ns per call
bench control (a private array, no allocator), every CPU at once: 1.000 ns per call
bench page-table pages (alloc + free of 1 page), one CPU alone: 40 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 20 ns per call
ARCEOS RUN arch=x86_64 allocator=bitmap cpus=2
bench control (a private array, no allocator), one CPU alone: 2.000 ns per call
bench control (a private array, no allocator), every CPU at once: 1.000 ns per call
bench page-table pages (alloc + free of 1 page), one CPU alone: 90 ns per call
bench page-table pages (alloc + free of 1 page), every CPU at once: 90 ns per call
";
        let t = qemu_smp_table(&Ok(log.to_string()));
        let row = |name: &str| row_named(&t, name);
        // Rounds of 1.6x and 2x, each as much as the control allowed in its round.
        let ours = row("axalloc-buddy");
        assert!(ours[8].starts_with("1.00x"), "{}", ours[8]);
        // The bitmap's one round: 1x where its boot's control had 2x.
        let bitmap = row("ArceOS's axalloc (bitmap, one lock)");
        assert!(bitmap[8].starts_with("0.50x"), "{}", bitmap[8]);
        let control = row("control (a private array, no allocator), axalloc-buddy's boot");
        assert_eq!(&control[2..5], ["2.00 ±0%", "—", "1.12 ±11%"]);
        assert!(control[7].starts_with("1.80x"), "{}", control[7]);
    }

    #[test]
    fn a_boots_clock_line_turns_its_figures_into_instructions() {
        let log = "\
ARCEOS RUN arch=x86_64 allocator=buddy-sim cpus=1
bench clock: 2000000 instructions in 500000 ns
bench page-table pages (alloc + free of 1 page): 45 ns per call
ARCEOS RUN arch=x86_64 allocator=bitmap cpus=1
bench page-table pages (alloc + free of 1 page): 69 ns per call
ARCEOS RUN arch=aarch64 allocator=buddy-sim cpus=1
bench clock: 2000000 instructions in 2000000 ns
bench page-table pages (alloc + free of 1 page): 196 ns per call
";
        let runs = parse_qemu(log, 1).unwrap();
        // Four instructions a ns on the first boot; the next boot (no clock line) keeps ns.
        assert_eq!(runs[0].1, (vec![69.0], vec![180.0]));
        assert_eq!(runs[1].1, (vec![], vec![196.0]));
    }

    #[test]
    fn a_log_without_runs_says_why() {
        assert_eq!(
            parse_qemu("UNAVAILABLE: no QEMU\n", 1).unwrap_err(),
            "no QEMU"
        );
        assert!(parse_qemu("ARCEOS RUN arch=x86_64 allocator=bitmap\nbench: done\n", 1).is_err());
        // Runs of another CPU count are not these.
        assert!(parse_qemu(LOG, 2).is_err());
    }

    #[test]
    fn buddy_slab_allocator_serves_runs_aligned_past_their_size() {
        // Its heap on a 2 MiB boundary, as its own `GlobalAllocator` starts it: at an odd
        // page it refused every run of two pages or more aligned past a page.
        let a = SlabPages::new();
        for (pages, align) in [(4, 2 * PAGE), (4, 16 * PAGE), (1, 512 * PAGE)] {
            let at = a.alloc(pages, align).expect("a run, aligned");
            assert_eq!(at % align, 0, "{pages} pages aligned {align}");
            a.dealloc(at, pages);
        }
    }
}
