//! Several CPUs on one zone at once, on real threads: random per-CPU programs run
//! concurrently and then one CPU after another (the sequential reference); every operation
//! must answer the same in both, and what stays allocated, leaked and free must agree.
//! Then every CPU frees the same contested blocks at once: exactly one free of each wins.
//!
//! The frees are `unsafe` (a free of what the caller does not hold could make a zone write
//! memory in use): these zones have no memory behind them, no `FrameClearer` or migration
//! ever writes a frame, so a contested or wrong free can only be the metadata error tested.
// loom atomics work only inside loom::model: these run on the real ones.
#![cfg(not(loom))]

mod common;
use common::TestZone;

use buddy_sim::mm_types::FrameRange;
use buddy_sim::{Order, Pfn, ZoneConfig};
use proptest::prelude::*;
use std::sync::{Barrier, Mutex};

const CPUS: usize = 3;
/// Large enough that no program runs out of memory in any interleaving.
const FRAMES: u64 = if cfg!(miri) { 1 << 11 } else { 1 << 14 };

/// One step of a CPU's program; slots index the blocks this CPU holds (modulo their count).
#[derive(Clone, Copy, Debug)]
enum Step {
    Alloc(u8),
    Split(usize),
    Get(usize),
    Poison(usize),
    /// Free a held block whole (its extra references first).
    Free(usize),
    /// `free_contig_range` of the first half of a split block; the second half stays held.
    FreeHalf(usize),
    /// Hand a held block to another CPU's mailbox; it frees it there later (a remote free).
    Give(usize, usize),
    /// Move whatever the mailbox holds now to the blocks received.
    TakeMail,
    /// Free one block received from another CPU, if any.
    FreeReceived,
    Vmalloc(u64),
    Vfree(usize),
    Drain,
    DrainAll,
}

/// A block a CPU holds: first frame, frames, split into pages, extra references.
#[derive(Clone, Copy, Debug)]
struct Held {
    pfn: Pfn,
    pages: u64,
    split: bool,
    extra: u32,
}

type Mailboxes = Vec<Mutex<Vec<Held>>>;

fn step() -> impl Strategy<Value = Step> {
    let slot = 0usize..16;
    prop_oneof![
        4 => (0u8..6).prop_map(Step::Alloc),
        2 => slot.clone().prop_map(Step::Split),
        1 => slot.clone().prop_map(Step::Get),
        1 => slot.clone().prop_map(Step::Poison),
        3 => slot.clone().prop_map(Step::Free),
        2 => slot.clone().prop_map(Step::FreeHalf),
        2 => (slot.clone(), 0..CPUS).prop_map(|(s, c)| Step::Give(s, c)),
        1 => Just(Step::TakeMail),
        2 => Just(Step::FreeReceived),
        1 => (1u64..40).prop_map(Step::Vmalloc),
        1 => slot.prop_map(Step::Vfree),
        1 => Just(Step::Drain),
        1 => Just(Step::DrainAll),
    ]
}

fn new_zone() -> TestZone {
    common::zone(ZoneConfig {
        cpus: CPUS,
        pcp_high: 64,
        pcp_batch: 8,
        section_pages: 1 << 9,
        ..ZoneConfig::new(Pfn(0x10_0000), FRAMES)
    })
    .unwrap()
}

/// Frees everything a held block still owns.
fn release(z: &TestZone, cpu: usize, h: Held) -> Result<(), buddy_sim::FreeError> {
    if h.split {
        // SAFETY: no memory behind these zones (module docs).
        return unsafe { z.free_contig_range(cpu, h.pfn, h.pages) };
    }
    for _ in 0..h.extra {
        // SAFETY: no memory behind these zones (module docs).
        unsafe { z.put_page(cpu, h.pfn) }?;
    }
    // SAFETY: no memory behind these zones (module docs).
    unsafe {
        z.free_pages(
            cpu,
            h.pfn,
            Order::floor_log2(h.pages, Order::new(20).unwrap()),
        )
    }
}

/// What a CPU's program did: each step's outcome on its own blocks (`true` = Ok), which
/// does not depend on the other CPUs; the blocks it still holds; and the blocks received
/// from other CPUs that it still holds and its frees of received blocks that failed, which
/// depend on when the mail came.
struct Ran {
    outcomes: Vec<bool>,
    held: Vec<Held>,
    received: Vec<Held>,
    remote_failures: usize,
}

/// Runs one CPU's program.
fn run(z: &TestZone, mail: &Mailboxes, cpu: usize, program: &[Step], start: &Barrier) -> Ran {
    start.wait();
    let mut held: Vec<Held> = Vec::new();
    let mut received: Vec<Held> = Vec::new();
    let mut remote_failures = 0;
    let mut vm: Vec<Vec<FrameRange>> = Vec::new();
    let mut outcomes = Vec::new();
    let pick = |held: &Vec<Held>, s: usize| (!held.is_empty()).then(|| s % held.len());
    for &st in program {
        let ok = match st {
            Step::Alloc(o) => {
                let order = Order::new(o).unwrap();
                z.alloc_pages(cpu, order)
                    .map(|pfn| {
                        held.push(Held {
                            pfn,
                            pages: order.pages(),
                            split: false,
                            extra: 0,
                        });
                    })
                    .is_ok()
            }
            Step::Split(s) => match pick(&held, s) {
                Some(i) if !held[i].split && held[i].extra == 0 => {
                    let h = &mut held[i];
                    h.split = true;
                    z.split_page(h.pfn, Order::floor_log2(h.pages, Order::new(20).unwrap()))
                        .is_ok()
                }
                _ => continue,
            },
            Step::Get(s) => match pick(&held, s) {
                Some(i) if !held[i].split => {
                    held[i].extra += 1;
                    z.get_page(held[i].pfn).is_ok()
                }
                _ => continue,
            },
            Step::Poison(s) => match pick(&held, s) {
                Some(i) if held[i].split => z.mark_hwpoison(held[i].pfn).is_ok(),
                _ => continue,
            },
            Step::Free(s) => match pick(&held, s) {
                Some(i) => release(z, cpu, held.swap_remove(i)).is_ok(),
                None => continue,
            },
            Step::FreeHalf(s) => match pick(&held, s) {
                Some(i) if held[i].split && held[i].pages > 1 => {
                    let h = &mut held[i];
                    let half = h.pages / 2;
                    // SAFETY: no memory behind these zones (module docs).
                    let ok = unsafe { z.free_contig_range(cpu, h.pfn, half) }.is_ok();
                    h.pfn = Pfn(h.pfn.0 + half);
                    h.pages -= half;
                    ok
                }
                _ => continue,
            },
            Step::Give(s, to) => match pick(&held, s) {
                Some(i) => {
                    let h = held.swap_remove(i);
                    mail[to].lock().unwrap().push(h);
                    true
                }
                None => continue,
            },
            Step::TakeMail => {
                received.append(&mut mail[cpu].lock().unwrap());
                continue;
            }
            Step::FreeReceived => {
                if let Some(h) = received.pop() {
                    remote_failures += usize::from(release(z, cpu, h).is_err());
                }
                continue;
            }
            Step::Vmalloc(n) => {
                let mut runs = [FrameRange::new(Pfn(0), 0); 64];
                match z.vmalloc(cpu, n, &mut runs) {
                    Ok(area) => {
                        vm.push(area.runs().to_vec());
                        true
                    }
                    Err(_) => false,
                }
            }
            Step::Vfree(s) => {
                if vm.is_empty() {
                    continue;
                }
                let runs = vm.swap_remove(s % vm.len());
                // SAFETY: no memory behind these zones (module docs).
                unsafe { z.vfree(cpu, &buddy_sim::VmArea::from_runs(&runs)) }.is_ok()
            }
            Step::Drain => z.cpu(cpu).map(|c| c.drain()).is_ok(),
            Step::DrainAll => {
                z.drain_all();
                true
            }
        };
        outcomes.push(ok);
    }
    for runs in vm {
        for run in runs {
            held.push(Held {
                pfn: run.start,
                pages: run.pages,
                split: true,
                extra: 0,
            });
        }
    }
    Ran {
        outcomes,
        held,
        received,
        remote_failures,
    }
}

/// Frames allocated and leaked in a quiescent zone.
fn census(z: &TestZone) -> (u64, u64) {
    z.check().unwrap();
    let free: u64 = z.free_blocks().map(|(_, o, _)| o.pages()).sum();
    let leaked = z.leaked_pages();
    (FRAMES - free - leaked, leaked)
}

/// Frames a held block still has allocated (a poisoned page of it counts until freed).
fn pages(blocks: &[Held]) -> u64 {
    blocks.iter().map(|h| h.pages).sum()
}

/// Runs the programs (concurrently or one CPU after another) and checks that the zone holds
/// allocated exactly what they hold; then frees everything. Returns the outcomes of the
/// steps on own blocks and the frames leaked in the end.
fn execute(programs: &[Vec<Step>], concurrent: bool) -> (Vec<Vec<bool>>, u64) {
    let z = new_zone();
    let mail: Mailboxes = (0..CPUS).map(|_| Mutex::new(Vec::new())).collect();
    let results: Vec<Ran> = if concurrent {
        let start = Barrier::new(CPUS);
        std::thread::scope(|s| {
            let handles: Vec<_> = programs
                .iter()
                .enumerate()
                .map(|(cpu, p)| {
                    let (z, mail, start) = (&z, &mail, &start);
                    s.spawn(move || run(z, mail, cpu, p, start))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    } else {
        let alone = Barrier::new(1);
        programs
            .iter()
            .enumerate()
            .map(|(cpu, p)| run(&z, &mail, cpu, p, &alone))
            .collect()
    };
    let (allocated, _) = census(&z);
    let holding: u64 = results
        .iter()
        .map(|r| pages(&r.held) + pages(&r.received))
        .sum::<u64>()
        + mail.iter().map(|m| pages(&m.lock().unwrap())).sum::<u64>();
    assert_eq!(
        allocated, holding,
        "the zone and the programs disagree on what is allocated"
    );
    assert_eq!(
        results.iter().map(|r| r.remote_failures).sum::<usize>(),
        0,
        "a remote free failed"
    );
    let mut outcomes = Vec::new();
    for (cpu, r) in results.into_iter().enumerate() {
        outcomes.push(r.outcomes);
        let mailed = mail[cpu].lock().unwrap().drain(..).collect::<Vec<_>>();
        for h in r.held.into_iter().chain(r.received).chain(mailed) {
            release(&z, cpu, h).unwrap();
        }
    }
    z.drain_all();
    let (allocated, leaked) = census(&z);
    assert_eq!(
        allocated, 0,
        "frames still allocated after everything was freed"
    );
    assert_eq!(z.buddy_pages() + leaked, FRAMES);
    (outcomes, leaked)
}

fn config() -> ProptestConfig {
    // Each case runs every program twice; PROPTEST_CASES raises the default of 64.
    ProptestConfig {
        failure_persistence: None,
        ..common::proptest_config_of(64, 2)
    }
}

proptest! {
    #![proptest_config(config())]

    // Minutes under Miri for little: the crate has no unsafe code; the test below keeps
    // Miri on the locks with real threads.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn concurrent_cpus_agree_with_the_sequential_run(
        programs in prop::collection::vec(
            prop::collection::vec(step(), 1..if cfg!(miri) { 8 } else { 120 }),
            CPUS,
        )
    ) {
        let (seq_outcomes, seq_leaked) = execute(&programs, false);
        let (par_outcomes, par_leaked) = execute(&programs, true);
        prop_assert_eq!(&par_outcomes, &seq_outcomes);
        prop_assert!(par_outcomes.iter().flatten().all(|&ok| ok), "a valid step failed");
        prop_assert_eq!(par_leaked, seq_leaked);
    }
}

/// Every CPU frees every contested block at once, each in its own order: exactly one free
/// of each block succeeds, whether by `put_page`, `free_pages` or `free_contig_range`.
#[test]
fn cpus_freeing_the_same_blocks_at_once_free_each_exactly_once() {
    let rounds = if cfg!(miri) { 1 } else { 50 };
    for round in 0..rounds {
        let z = new_zone();
        let blocks: Vec<(Pfn, Order, bool)> = (0..if cfg!(miri) { 16 } else { 64 })
            .map(|i| {
                let order = Order::new((i % 4) as u8).unwrap();
                let pfn = z.alloc_pages(0, order).unwrap();
                let split = i % 3 == 0 && order.get() > 0;
                if split {
                    z.split_page(pfn, order).unwrap();
                }
                (pfn, order, split)
            })
            .collect();
        let start = Barrier::new(CPUS);
        let wins: Vec<Vec<bool>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..CPUS)
                .map(|cpu| {
                    let (z, blocks, start) = (&z, &blocks, &start);
                    s.spawn(move || {
                        start.wait();
                        let n = blocks.len();
                        let mut won = vec![false; n];
                        for k in 0..n {
                            // An odd stride is a permutation of the blocks (n is a power of two).
                            let i = (k * (2 * cpu + 1) + round) % n;
                            let (pfn, order, split) = blocks[i];
                            won[i] = if split {
                                // SAFETY: no memory behind these zones (module docs).
                                unsafe { z.free_contig_range(cpu, pfn, order.pages()) }.is_ok()
                            } else if cpu % 2 == 0 {
                                // SAFETY: no memory behind these zones (module docs).
                                unsafe { z.free_pages(cpu, pfn, order) }.is_ok()
                            } else {
                                // SAFETY: no memory behind these zones (module docs).
                                unsafe { z.put_page(cpu, pfn) }.is_ok()
                            };
                        }
                        won
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for i in 0..blocks.len() {
            let winners = wins.iter().filter(|w| w[i]).count();
            assert_eq!(winners, 1, "block {:?} freed {winners} times", blocks[i]);
        }
        z.drain_all();
        z.check().unwrap();
        assert_eq!(z.buddy_pages(), FRAMES);
    }
}
