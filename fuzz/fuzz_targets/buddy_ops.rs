//! Arbitrary zones (up to four CPUs, memory maps with holes) and operation sequences from
//! every CPU run on two zones in lockstep: batched `free_contig_range` on one, the per-page
//! reference on the other; results compared after every operation, `check()` every
//! [`CHECK_INTERVAL`] operations, and both zones identical after the final drain. The
//! operations include typed allocations (migratetypes, pageblock claims), contiguous
//! allocations (`alloc_contig_pages` checked against a search of every candidate), offline,
//! the frozen variant's batched and per-page frees, and fault injection (`fail_page_alloc`,
//! seeded alike on both zones); around every failed operation the
//! whole zone is compared with what it was; half the zones end at the top of the pfn space.
//! Some start full of movable pages with holes, so that defrag mode's last resort runs.
//! (Zeroed allocation with real memory is `zeroed_ops`'; several CPUs' programs
//! interleaved, `smp_ops`'.)
#![no_main]

use arbitrary::Arbitrary;
use buddy_sim::testing::{Lockstep, Op};
use buddy_sim::{FailPageAlloc, Frame, MigrateType, Order, PerCpu, Pfn, Zone, ZoneConfig};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    start: u16,
    /// The zone ends `start` frames below the top of the pfn space instead of starting at
    /// `start`: every frame-number computation near `u64::MAX`.
    at_top: bool,
    nr_pages: u16,
    max_order: u8,
    pageblock_order: u8,
    section_log: u8,
    cpus: u8,
    high: u16,
    batch: u8,
    /// Frames of each added range initialized at once (the rest deferred).
    eager: u16,
    /// Holes in the memory map: (offset, length) pairs, the rest is usable.
    holes: Vec<(u16, u8)>,
    /// Linux's defrag mode (with or without the pageblock reserve), a movable-only zone, and
    /// the compaction proactiveness.
    defrag: bool,
    pageblock_reserve: bool,
    /// Before the operations, the zone filled with movable pages and every `fill`-th of the
    /// last ones freed (2..=5; 0 and 1: not filled): free memory only in holes of movable
    /// pageblocks, where defrag mode's last resort claims a pageblock.
    fill: u8,
    movable_only: bool,
    proactiveness: u8,
    ops: Vec<ArbOp>,
}

#[derive(Arbitrary, Debug)]
enum ArbOp {
    Alloc(u8, u8),
    Split(u8),
    Get(u8, u16),
    Put(u8, u8, u16),
    Poison(u8, u16),
    FreeRun(u8, u8, u16, u16),
    FreeRaw(u8, u16, u16),
    FreePages(u8, u8),
    AllocFrozen(u8, u8),
    FreeFrozen(u8, u8),
    DrainCpu(u8),
    DecayPcpHigh(u8),
    DrainAll,
    AddMemory(u16, u16),
    AllocZeroed(u8, u8, Option<u32>),
    ZeroSome(u16),
    AddZeroedMemory(u16, u16),
    InitDeferred(u16),
    AllocTyped(u8, u8, u8),
    AllocContig(u8, u16, u16, bool),
    AllocContigPages(u8, u16, u8, bool),
    Offline(u8, u16, u16),
    FreeContig(u8, u8, u16, u16),
    AllocHooked(u8, u8, u8),
    CompactWork(u8, u16),
    ReserveCma(u8, u16, u8),
    AllocCma(u8, u8, u16, u8),
    Report(u16, bool),
    /// Fault injection's attributes; `None` disarms it.
    FailPageAlloc(Option<ArbFail>),
    SplitFrozen(u8, u8),
}

/// Fault injection's attributes, as the fuzzer picks them.
#[derive(Arbitrary, Debug)]
struct ArbFail {
    seed: u64,
    probability: u8,
    interval: u8,
    /// `None`: no limit.
    times: Option<u8>,
    space: u8,
    min_order: u8,
    /// 0..=2: that kind only; 3 and above: every kind.
    kind: u8,
}

impl ArbOp {
    /// The operation both harnesses get (each applies those it models).
    fn op(&self) -> Op {
        // Up to four CPUs; index 4 is out of range for every zone (an error on both paths).
        let cpu = |c: &u8| usize::from(*c % 5);
        match self {
            Self::Alloc(c, o) => Op::Alloc {
                cpu: cpu(c),
                order: o % 12,
            },
            Self::AllocTyped(c, o, mt) => Op::AllocTyped {
                cpu: cpu(c),
                order: o % 12,
                mt: *mt,
            },
            Self::AllocContig(c, off, len, frozen) => Op::AllocContig {
                cpu: cpu(c),
                offset: u64::from(*off),
                len: u64::from(*len % 1024),
                frozen: *frozen,
            },
            Self::AllocContigPages(c, len, align, frozen) => Op::AllocContigPages {
                cpu: cpu(c),
                len: u64::from(*len % 1024),
                align: align % 12,
                frozen: *frozen,
            },
            Self::Offline(c, off, len) => Op::Offline {
                cpu: cpu(c),
                offset: u64::from(*off),
                len: u64::from(*len % 1024),
            },
            Self::ReserveCma(c, off, len) => Op::ReserveCma {
                cpu: cpu(c),
                offset: u64::from(*off),
                len: u64::from(*len % 8),
            },
            Self::AllocCma(c, area, len, align) => Op::AllocCma {
                cpu: cpu(c),
                area: usize::from(*area),
                len: u64::from(*len % 1024),
                align: align % 12,
            },
            Self::FreeContig(c, s, off, len) => Op::FreeContig {
                cpu: cpu(c),
                slot: usize::from(*s),
                offset: u64::from(*off),
                len: u64::from(*len),
            },
            Self::Split(s) => Op::Split {
                slot: usize::from(*s),
            },
            Self::Get(s, p) => Op::Get {
                slot: usize::from(*s),
                page: u64::from(*p),
            },
            Self::Put(c, s, p) => Op::Put {
                cpu: cpu(c),
                slot: usize::from(*s),
                page: u64::from(*p),
            },
            Self::Poison(s, p) => Op::Poison {
                slot: usize::from(*s),
                page: u64::from(*p),
            },
            Self::FreeRun(c, s, off, len) => Op::FreeRun {
                cpu: cpu(c),
                slot: usize::from(*s),
                offset: u64::from(*off),
                len: u64::from(*len),
            },
            Self::FreeRaw(c, off, len) => Op::FreeRaw {
                cpu: cpu(c),
                offset: u64::from(*off),
                len: u64::from(*len % 512),
            },
            Self::FreePages(c, s) => Op::FreePages {
                cpu: cpu(c),
                slot: usize::from(*s),
            },
            Self::AllocFrozen(c, o) => Op::AllocFrozen {
                cpu: cpu(c),
                order: o % 12,
            },
            Self::FreeFrozen(c, s) => Op::FreeFrozen {
                cpu: cpu(c),
                slot: usize::from(*s),
            },
            Self::SplitFrozen(c, s) => Op::SplitFrozen {
                cpu: cpu(c),
                slot: usize::from(*s),
            },
            Self::DrainCpu(c) => Op::DrainCpu { cpu: cpu(c) },
            Self::DecayPcpHigh(c) => Op::DecayPcpHigh { cpu: cpu(c) },
            Self::DrainAll => Op::DrainAll,
            Self::AddMemory(off, len) | Self::AddZeroedMemory(off, len) => Op::AddMemory {
                offset: u64::from(*off),
                len: u64::from(*len % 256),
                zeroed: matches!(self, Self::AddZeroedMemory(..)),
            },
            Self::AllocZeroed(c, o, fault) => Op::AllocZeroed {
                cpu: cpu(c),
                order: o % 12,
                fault: fault.map(u64::from),
            },
            Self::ZeroSome(b) => Op::ZeroSome {
                budget: u64::from(*b % 512),
            },
            Self::Report(b, accept) => Op::Report {
                budget: u64::from(*b),
                accept: *accept,
            },
            Self::InitDeferred(b) => Op::InitDeferred {
                budget: u64::from(*b % 512),
            },
            Self::AllocHooked(c, o, mt) => Op::AllocHooked {
                cpu: cpu(c),
                order: o % 12,
                mt: *mt,
            },
            Self::CompactWork(c, b) => Op::CompactWork {
                cpu: cpu(c),
                budget: u64::from(*b % 512),
            },
            Self::FailPageAlloc(attr) => Op::FailPageAlloc(attr.as_ref().map(|a| {
                let attr = FailPageAlloc::new(a.seed)
                    .probability(a.probability % 101)
                    .interval(u64::from(a.interval % 8))
                    .space(u64::from(a.space))
                    .min_order(Order::new(a.min_order % 12).unwrap());
                let attr = match a.times {
                    Some(t) => attr.times(u64::from(t % 16)),
                    None => attr,
                };
                match a.kind {
                    k @ 0..=2 => attr.only(MigrateType::ALL[usize::from(k)]),
                    _ => attr,
                }
            })),
        }
    }
}

/// The usable ranges of `[0, n)` around `holes` (`(start, end)`, any order, overlapping
/// or not): `(first, frames)`, ascending. Linear in the holes, not in the frames.
fn ranges(n: usize, holes: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut holes = holes.to_vec();
    holes.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for (start, end) in holes {
        if start > at {
            out.push((at, start - at));
        }
        at = at.max(end);
    }
    if n > at {
        out.push((at, n - at));
    }
    out
}

type VecZone = Zone<Vec<Frame>, Vec<PerCpu>>;

/// Both harnesses check every invariant every this many operations, and at the end (each
/// operation's results are compared every time).
const CHECK_INTERVAL: usize = 64;
/// The largest zone (frames): large enough for blocks of order 10 (the order-9 runs
/// `free_contig_range` was batched for), small enough that a zone reaches its corner cases
/// (full, fragmented) in few operations. (At most 256 frames doubled the executions per
/// second, but no block above order 8 could exist.)
const MAX_FRAMES: u16 = 1024;

/// The zone's frames: up to [`MAX_FRAMES`], halved zero to three times by the top two bits,
/// so that most zones are small (every run builds and checks its zone frame by frame) and
/// every size up to the largest still occurs.
fn zone_frames(bits: u16) -> u64 {
    (u64::from(bits % MAX_FRAMES) >> (bits >> 14)) + 1
}

fuzz_target!(|input: Input| {
    let max_order = input.max_order % 11;
    let nr_pages = zone_frames(input.nr_pages);
    let start = if input.at_top {
        u64::MAX - nr_pages - u64::from(input.start)
    } else {
        u64::from(input.start)
    };
    let cfg = ZoneConfig {
        max_order: Order::new(max_order).unwrap(),
        pageblock_order: Order::new(input.pageblock_order % (max_order + 1)).unwrap(),
        section_pages: 1 << (input.section_log % 13),
        cpus: usize::from(input.cpus % 4) + 1,
        pcp_high: u64::from(input.high % 1024),
        // The high bits: a bound for tuned marks (below the mark: not tuned).
        pcp_high_max: u64::from(input.high >> 10) << 6,
        pcp_batch: u64::from(input.batch % 64) + 1,
        // Linux's per-cpu orders (0..=3), or up to 8.
        pcp_max_order: Order::new(3 + input.batch % 6).unwrap(),
        eager_pages: u64::from(input.eager % 1024) + 1,
        defrag_mode: input.defrag,
        pageblock_reserve: input.defrag && input.pageblock_reserve,
        movable_only: input.movable_only,
        compaction_proactiveness: input.proactiveness % 101,
        ..ZoneConfig::new(Pfn(start), nr_pages)
    };
    let n = cfg.nr_pages as usize;
    let holes: Vec<(usize, usize)> = input
        .holes
        .iter()
        .take(4)
        .map(|&(off, len)| {
            let off = usize::from(off) % n;
            (off, (off + usize::from(len)).min(n))
        })
        .collect();
    let usable = ranges(n, &holes);
    let zone = || -> VecZone {
        let frames = (0..n).map(|_| Frame::new()).collect();
        let pcps = (0..cfg.cpus).map(|_| PerCpu::new()).collect();
        let z = Zone::new_empty(cfg, frames, pcps).unwrap();
        for &(start, len) in &usable {
            z.add_memory(Pfn(cfg.start.0 + start as u64), len as u64)
                .unwrap();
        }
        z
    };
    // SAFETY: the harness's zones are its own and have no memory behind them.
    let mut model = unsafe { Lockstep::new(zone(), zone()) }.with_check_interval(CHECK_INTERVAL);
    if let every @ 2..=5 = input.fill {
        let fill = (0..cfg.nr_pages).map(|_| Op::AllocTyped {
            cpu: 0,
            order: 0,
            mt: 1,
        });
        let holes = (0..64)
            .step_by(usize::from(every))
            .map(|slot| Op::FreePages { cpu: 0, slot });
        for op in fill.chain(holes) {
            if let Err(d) = model.apply(op) {
                panic!("{op:?}: {d:?}");
            }
        }
    }
    for op in input.ops.iter().take(256) {
        if let Err(d) = model.apply(op.op()) {
            panic!("{op:?}: {d:?}");
        }
    }
    if let Err(d) = model.finish() {
        panic!("finish: {d:?}");
    }
});
