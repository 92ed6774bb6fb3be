//! The zone's zeroed operations with real memory: a zone of up to 64 frames backed by a
//! buffer, memory added in pieces (some declared zero), and arbitrary allocations, zeroed
//! allocations (with and without a fault offset), huge-page faults (a zeroed block of the
//! pageblock order, or the page with `thp_fault_fallback`), frees, background zeroing, drains and
//! deferred initialization, against the per-page zero reference (`ZeroedModel`): known-zero
//! blocks read zero, zeroed allocations do, held pages are never touched, no block is handed
//! out twice; the full check every [`CHECK_INTERVAL`] operations and at the end. Its zones
//! start low in the pfn space: a frame near the top has no byte address (its physical
//! address does not fit 64 bits), so zeroed allocation there can only fail; `buddy_ops` and
//! `smp_ops` place zones at the top.
#![no_main]

use arbitrary::Arbitrary;
use buddy_sim::testing::{Op, ZeroedModel};
use buddy_sim::zero_core::PreemptModel;
use buddy_sim::{Order, Pfn, ZoneConfig};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    start: u16,
    nr_pages: u8,
    max_order: u8,
    cpus: u8,
    high: u8,
    batch: u8,
    eager: u8,
    /// Memory added before the operations: (offset, length, declared zero).
    pieces: Vec<(u8, u8, bool)>,
    ops: Vec<ZeroOp>,
}

#[derive(Arbitrary, Debug)]
enum ZeroOp {
    Alloc(u8, u8),
    AllocZeroed(u8, u8, Option<u32>),
    HugeFault(u8, u16, u8),
    Free(u8, u8),
    ZeroSome(u8),
    Report(u8, bool),
    DrainCpu(u8),
    DecayPcpHigh(u8),
    DrainAll,
    AddMemory(u8, u8, bool),
    InitDeferred(u8),
}

/// The most frames a zone has (each backed by 4 KiB of memory, built for every input).
const MAX_FRAMES: u8 = 64;
/// The model's full check (every known-zero block read, every held page's marker) runs
/// every this many operations, and at the end.
const CHECK_INTERVAL: usize = 16;

impl ZeroOp {
    fn op(&self) -> Op {
        // Up to three CPUs; index 3 is out of range for some zones.
        let cpu = |c: &u8| usize::from(*c % 4);
        match *self {
            Self::Alloc(c, o) => Op::Alloc {
                cpu: cpu(&c),
                order: o % 8,
            },
            Self::AllocZeroed(c, o, fault) => Op::AllocZeroed {
                cpu: cpu(&c),
                order: o % 8,
                fault: fault.map(|f| u64::from(f % (1 << 20))),
            },
            Self::HugeFault(c, offset, mt) => Op::HugeFault {
                cpu: cpu(&c),
                offset: u64::from(offset),
                mt,
            },
            Self::Free(c, s) => Op::FreePages {
                cpu: cpu(&c),
                slot: usize::from(s),
            },
            Self::ZeroSome(b) => Op::ZeroSome {
                budget: u64::from(b % 96),
            },
            Self::Report(b, accept) => Op::Report {
                budget: u64::from(b % 96),
                accept,
            },
            Self::DrainCpu(c) => Op::DrainCpu { cpu: cpu(&c) },
            Self::DecayPcpHigh(c) => Op::DecayPcpHigh { cpu: cpu(&c) },
            Self::DrainAll => Op::DrainAll,
            Self::AddMemory(off, len, zeroed) => Op::AddMemory {
                offset: u64::from(off % MAX_FRAMES),
                len: u64::from(len % MAX_FRAMES),
                zeroed,
            },
            Self::InitDeferred(b) => Op::InitDeferred {
                budget: u64::from(b),
            },
        }
    }
}

fuzz_target!(|input: Input| {
    let max_order = input.max_order % 7;
    let cfg = ZoneConfig {
        max_order: Order::new(max_order).unwrap(),
        pageblock_order: Order::new(max_order.min(3)).unwrap(),
        cpus: usize::from(input.cpus % 3) + 1,
        pcp_high: u64::from(input.high % 64),
        // The high bits: a bound for tuned marks (below the mark: not tuned).
        pcp_high_max: u64::from(input.high >> 6) << 5,
        pcp_batch: u64::from(input.batch % 16) + 1,
        eager_pages: u64::from(input.eager % MAX_FRAMES) + 1,
        ..ZoneConfig::new(
            Pfn(u64::from(input.start)),
            u64::from(input.nr_pages % MAX_FRAMES) + 1,
        )
    };
    let mut model = ZeroedModel::new(cfg, PreemptModel::None)
        .unwrap()
        .with_check_interval(CHECK_INTERVAL);
    for &(offset, len, zeroed) in input.pieces.iter().take(4) {
        let op = Op::AddMemory {
            offset: u64::from(offset % MAX_FRAMES),
            len: u64::from(len % MAX_FRAMES),
            zeroed,
        };
        if let Err(d) = model.apply(op) {
            panic!("{op:?}: {d:?}");
        }
    }
    for op in input.ops.iter().take(128) {
        if let Err(d) = model.apply(op.op()) {
            panic!("{op:?}: {d:?}");
        }
    }
    if let Err(d) = model.check() {
        panic!("final check: {d:?}");
    }
});
