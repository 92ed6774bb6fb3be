//! Several CPUs' programs interleaved deterministically: each CPU has its own program
//! (allocations of every kind, frees of its own blocks, blocks handed to another CPU and
//! freed there, drains of its lists), and the input's schedule picks which CPU runs its next
//! operation; then the rest run round robin. One zone, and an owner per frame: no frame is
//! handed out while held, every frame a CPU frees is one it holds, `check()` every
//! [`CHECK_INTERVAL`] steps; at the end everything is freed and the zone must be whole (every
//! frame free, the same free blocks per order as at the start).
#![no_main]

use arbitrary::Arbitrary;
use buddy_sim::AllocError;
use buddy_sim::{AllocRequest, Frame, Order, PerCpu, Pfn, Zone, ZoneConfig};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    start: u16,
    /// The zone ends `start` frames below the top of the pfn space instead of starting at
    /// `start`.
    at_top: bool,
    nr_pages: u16,
    cpus: u8,
    high: u16,
    batch: u8,
    programs: [Vec<CpuOp>; 4],
    schedule: Vec<u8>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum CpuOp {
    /// `alloc_pages` of an order.
    Alloc(u8),
    /// `alloc_pages_exact` of a page count.
    AllocExact(u8),
    /// `vmalloc`-free: split one held block and free it as a run (`free_contig_range`).
    SplitAndFreeRun(u8),
    /// Free one held allocation.
    Free(u8),
    /// Hand one held allocation to another CPU's mailbox.
    HandOff(u8, u8),
    /// Free everything in this CPU's mailbox.
    FreeMail,
    /// Drain this CPU's lists.
    Drain,
}

/// What a CPU holds: a block (`free_pages` of its order) or a run of split pages.
#[derive(Clone, Copy, Debug)]
enum Held {
    Block(Pfn, Order),
    Run(Pfn, u64),
}

impl Held {
    fn range(self) -> (u64, u64) {
        match self {
            Self::Block(p, o) => (p.0, o.pages()),
            Self::Run(p, n) => (p.0, n),
        }
    }
}

/// The largest zone (frames): orders up to 10 exist.
const MAX_FRAMES: u16 = 1024;

/// The zone's frames: up to [`MAX_FRAMES`], halved zero to three times by the top two bits,
/// so that most zones are small (every run builds and checks its zone frame by frame) and
/// every size up to the largest still occurs.
fn zone_frames(bits: u16) -> u64 {
    (u64::from(bits % MAX_FRAMES) >> (bits >> 14)) + 1
}
/// `check()` every this many steps (and at the end).
const CHECK_INTERVAL: usize = 32;

type VecZone = Zone<Vec<Frame>, Vec<PerCpu>>;

struct World {
    zone: VecZone,
    start: u64,
    /// The CPU holding each frame (or in whose mailbox it is), if any.
    owner: Vec<Option<u8>>,
    held: Vec<Vec<Held>>,
    mail: Vec<Vec<Held>>,
}

impl World {
    fn take(&mut self, cpu: usize, h: Held) {
        let (p, n) = h.range();
        for f in p..p + n {
            let slot = &mut self.owner[(f - self.start) as usize];
            assert!(
                slot.is_none(),
                "frame {f:#x} handed out to cpu {cpu} while cpu {slot:?} holds it"
            );
            *slot = Some(cpu as u8);
        }
        self.held[cpu].push(h);
    }

    fn release(&mut self, h: Held) {
        let (p, n) = h.range();
        for f in p..p + n {
            self.owner[(f - self.start) as usize] = None;
        }
    }

    fn free(&mut self, cpu: usize, h: Held) {
        // SAFETY: the target holds `h` (its owner table says so) and never touches memory.
        unsafe {
            match h {
                Held::Block(p, o) => self.zone.free_pages(cpu, p, o).unwrap(),
                Held::Run(p, n) => self.zone.free_contig_range(cpu, p, n).unwrap(),
            }
        }
        self.release(h);
    }

    fn step(&mut self, cpu: usize, op: CpuOp) {
        let cpus = self.held.len();
        match op {
            CpuOp::Alloc(o) => {
                let order = Order::new(o % 11).unwrap();
                if let Ok(p) = self.zone.alloc_pages(cpu, order) {
                    self.take(cpu, Held::Block(p, order));
                }
            }
            CpuOp::AllocExact(n) => {
                let pages = u64::from(n % 64) + 1;
                let run = self
                    .zone
                    .cpu(cpu)
                    .map_err(AllocError::from)
                    .and_then(|c| c.alloc_raw(AllocRequest::frames(pages)));
                if let Ok(p) = run {
                    self.take(cpu, Held::Run(p, pages));
                }
            }
            CpuOp::SplitAndFreeRun(i) => {
                let mut blocks = self.held[cpu]
                    .iter()
                    .enumerate()
                    .filter_map(|(k, h)| match *h {
                        Held::Block(p, o) => Some((k, p, o)),
                        Held::Run(..) => None,
                    });
                let count = blocks.clone().count();
                if let Some((k, p, o)) = blocks.nth(usize::from(i) % count.max(1)) {
                    self.held[cpu].swap_remove(k);
                    self.zone.split_page(p, o).unwrap();
                    self.free(cpu, Held::Run(p, o.pages()));
                }
            }
            CpuOp::Free(i) => {
                if !self.held[cpu].is_empty() {
                    let k = usize::from(i) % self.held[cpu].len();
                    let h = self.held[cpu].swap_remove(k);
                    self.free(cpu, h);
                }
            }
            CpuOp::HandOff(i, to) => {
                if !self.held[cpu].is_empty() {
                    let k = usize::from(i) % self.held[cpu].len();
                    let h = self.held[cpu].swap_remove(k);
                    let to = usize::from(to) % cpus;
                    let (p, n) = h.range();
                    for f in p..p + n {
                        self.owner[(f - self.start) as usize] = Some(to as u8);
                    }
                    self.mail[to].push(h);
                }
            }
            CpuOp::FreeMail => {
                for h in std::mem::take(&mut self.mail[cpu]) {
                    self.free(cpu, h);
                }
            }
            CpuOp::Drain => self.zone.cpu(cpu).unwrap().drain(),
        }
    }
}

fuzz_target!(|input: Input| {
    let cpus = usize::from(input.cpus % 3) + 2;
    let nr_pages = zone_frames(input.nr_pages);
    let start = if input.at_top {
        u64::MAX - nr_pages - u64::from(input.start)
    } else {
        u64::from(input.start)
    };
    let cfg = ZoneConfig {
        pcp_high: u64::from(input.high % 512),
        pcp_batch: u64::from(input.batch % 32) + 1,
        ..ZoneConfig::new(Pfn(start), nr_pages).with_cpus(cpus)
    };
    let n = cfg.nr_pages as usize;
    let frames = (0..n).map(|_| Frame::new()).collect();
    let pcps = (0..cpus).map(|_| PerCpu::new()).collect();
    let zone = Zone::new(cfg, frames, pcps).unwrap();
    let whole: Vec<_> = zone.free_blocks().collect();
    let mut w = World {
        zone,
        start: cfg.start.0,
        owner: vec![None; n],
        held: vec![Vec::new(); cpus],
        mail: vec![Vec::new(); cpus],
    };
    let programs: Vec<&[CpuOp]> = input.programs[..cpus]
        .iter()
        .map(|p| &p[..p.len().min(64)])
        .collect();
    let mut pc = vec![0usize; cpus];
    let mut steps = 0usize;
    // The schedule, then round robin until every program has run out.
    let picks = input
        .schedule
        .iter()
        .map(|&b| usize::from(b) % cpus)
        .chain((0..cpus).cycle().take(64 * cpus));
    for cpu in picks {
        let Some(&op) = programs[cpu].get(pc[cpu]) else {
            continue;
        };
        pc[cpu] += 1;
        w.step(cpu, op);
        steps += 1;
        if steps.is_multiple_of(CHECK_INTERVAL) {
            w.zone.check().unwrap();
        }
    }
    w.zone.check().unwrap();
    // Everything back: held blocks and runs, then the mailboxes.
    for cpu in 0..cpus {
        for h in std::mem::take(&mut w.held[cpu]) {
            w.free(cpu, h);
        }
        w.step(cpu, CpuOp::FreeMail);
    }
    assert!(w.owner.iter().all(Option::is_none));
    w.zone.drain_all();
    w.zone.check().unwrap();
    assert_eq!(w.zone.free_pages_total(), w.zone.present_pages());
    assert_eq!(
        w.zone.free_blocks().collect::<Vec<_>>(),
        whole,
        "not whole again"
    );
});
