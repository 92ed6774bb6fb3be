//! Measuring the policy on the running CPU, the way Linux picks its xor and RAID-6 routines
//! by timing them at boot: [`Policy::calibrate`].
//!
//! What is measured: which temporal strategy clears fastest across cache-resident and
//! mid-sized extents (the one whose worst ratio to the fastest at any of them is smallest, or
//! two split by extent size where that is better by more than 5%: [`Policy::small`]),
//! which streaming strategy clears memory that is out of the caches fastest, from which
//! extent size on the streaming one beats the temporal one at that size and every larger
//! size measured (the streaming threshold), and the same on memory out of the caches (the
//! cold threshold). What is read from CPUID: only which strategies this CPU can execute
//! ([`Strategy::is_available`]).

use crate::{Policy, Strategy, VectorUse, backend};

/// A monotonic time source for [`Policy::calibrate`]: nanoseconds since any fixed origin (a
/// TSC scaled by its frequency, a timer counter, `std::time::Instant`). Any `FnMut() -> u64`
/// is one.
pub trait Clock {
    /// The current time in nanoseconds.
    fn now_ns(&mut self) -> u64;
}

impl<F: FnMut() -> u64> Clock for F {
    fn now_ns(&mut self) -> u64 {
        self()
    }
}

/// A clock coarser than this (nanoseconds per step) cannot time the extents in a few
/// milliseconds: calibration keeps the detected policy.
pub const MAX_CLOCK_RESOLUTION_NS: u64 = 10_000;

/// The smallest scratch buffer calibration measures with (after aligning it to 4 KiB).
pub const MIN_SCRATCH_BYTES: usize = 1 << 20;

/// Each timed sample repeats its clear until it lasts this many clock steps, and at least
/// [`MIN_SAMPLE_NS`], so the clock's granularity is under 1% of it.
const SAMPLE_STEPS: u64 = 100;
/// See [`SAMPLE_STEPS`]. 20 µs: a 4 KiB extent is cleared a hundred times or more per
/// sample, as a caller clearing pages one after another does; an extent of megabytes once.
const MIN_SAMPLE_NS: u64 = 20_000;
/// Streaming must be faster than temporal by more than this (percent) to be chosen (within
/// it either choice is within 5% of the other, and temporal leaves the data cached), and a
/// temporal strategy faster than the detected one by more than this to replace it.
const STREAMING_MARGIN_PCT: u64 = 5;
/// Samples per measurement, taken round-robin over the candidates (so a slow moment of the
/// machine costs every candidate alike); the fastest counts (noise only ever adds time).
const SAMPLES: usize = 2;
/// From this extent on, one sample after the warm-up: a clear of megabytes lasts hundreds of
/// microseconds, far past the clock's step and small interruptions, and these samples are
/// what calibration spends its time on.
const LARGE_EXTENT: usize = 4 << 20;
/// From [`LARGE_EXTENT`] on, the temporal candidates timed are this many, the fastest at
/// the extent before, and the incumbent ([`Candidates::temporal_by_extent`]): the extent
/// that stands for the L3 decides between the leaders. Timing all five at 8 MiB took 4.8
/// of the 11 ms a calibration took on an Intel Xeon (family 6 model 0xa7), where every
/// other extent together took 2 ms.
const LARGE_EXTENT_CANDIDATES: usize = 2;
/// The extents the temporal strategies are chosen at: a page, 256 KiB (in every L2), 1 MiB
/// (the size of a large L2), 2 MiB (a huge page, past most L2s) and 8 MiB (in most L3s).
/// Where the fastest at the small ones is not the fastest at the large ones (AVX-512 stores
/// against `rep stosb` on AMD Zen 5), the policy takes one below a threshold among them and
/// the other from it on.
const TEMPORAL_EXTENTS: [usize; 5] = [4 << 10, 256 << 10, 1 << 20, 2 << 20, 8 << 20];
/// The extent the streaming strategy is chosen at, taken out of the caches before each
/// sample: streaming is for memory the caches do not hold, and cold is how the candidates
/// differ there (CLZERO looks faster than it is on a cache-resident extent). 1 MiB: every
/// line comes from memory, and a sample lasts about 100 µs.
const STREAMING_EXTENT: usize = 1 << 20;
/// The smallest extent the threshold is searched from (streaming never wins below: it does
/// not keep the data in the cache); then powers of four up to the scratch buffer: 512 KiB,
/// 2 MiB and 8 MiB in a 16 MiB buffer. The search measures the largest first, three
/// clears of it (a warm-up and one sample of each strategy), most of calibration's time.
const SMALLEST_EXTENT: usize = 512 << 10;
/// At most this many extent sizes (512 KiB to 512 GiB).
const MAX_EXTENTS: usize = 11;
/// The extents the cold threshold is searched among: a page, a 64 KiB folio, and 256 KiB
/// (past which a cold clear costs the same per byte: every line comes from memory).
const COLD_EXTENTS: [usize; 3] = [4 << 10, 64 << 10, 256 << 10];
/// The region a cold sample clears, extent after extent, after taking it out of the caches.
const COLD_REGION: usize = 256 << 10;
/// Cold samples per candidate and extent, round-robin; the fastest counts.
const COLD_SAMPLES: usize = 2;

/// What [`Policy::calibrate`] measured and chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// The policy to use: measured, or [`Policy::detect`]'s when measuring was not possible.
    pub policy: Policy,
    /// Whether it was measured, and if not why.
    pub outcome: CalibrationOutcome,
    /// The smallest step of the clock seen, in nanoseconds (0 if it never advanced).
    pub clock_resolution_ns: u64,
    /// How long calibration took by the clock, in nanoseconds.
    pub elapsed_ns: u64,
    /// The largest extent measured, in bytes (0 when nothing was measured).
    pub largest_extent: usize,
}

/// Whether [`Policy::calibrate`] measured the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CalibrationOutcome {
    /// Every choice was measured. When streaming never won up to the largest extent
    /// measured, the threshold is the detected one or twice the largest extent, whichever
    /// is larger (it may still win past the scratch buffer's size).
    Measured,
    /// The clock steps more coarsely than [`MAX_CLOCK_RESOLUTION_NS`]: detected policy.
    CoarseClock,
    /// The clock did not advance: detected policy.
    StoppedClock,
    /// The scratch buffer holds less than [`MIN_SCRATCH_BYTES`] once aligned: detected policy.
    ScratchTooSmall,
}

impl Policy {
    /// [`Policy::calibrate_with`] assuming [`VectorUse::TARGET_DEFAULT`].
    pub fn calibrate(scratch: &mut [u8], clock: &mut impl Clock) -> Calibration {
        Self::calibrate_with(VectorUse::TARGET_DEFAULT, scratch, clock)
    }

    /// Measures the fastest temporal and streaming strategies among those `vectors`
    /// permits, the streaming threshold and the cold threshold, on the running CPU, clearing
    /// `scratch` with each candidate (it is left zeroed) and timing it with `clock`. Falls
    /// back to [`Policy::detect_with`] (and says why in [`Calibration::outcome`]) when the
    /// clock is too coarse or stopped, or `scratch` too small.
    ///
    /// The scratch buffer should be pre-faulted (page faults would be timed); 16 MiB is
    /// enough, and calibration then takes a few milliseconds (the report prints how
    /// long, and how often ten calibrations agree). The temporal strategies are timed at
    /// 4 KiB, 256 KiB, 1 MiB, 2 MiB and 8 MiB, cache-warm, fastest of two samples of at
    /// least 20 µs (one from 4 MiB on, of the two fastest at the extent before and the
    /// detected one), and split by extent size where no one of them is within 5% of the
    /// best at every size ([`Policy::small`]);
    /// the streaming one on 1 MiB taken out of the caches first. The threshold is searched
    /// among extent sizes from 512 KiB up to the buffer's size, by powers of four, from the
    /// largest down while streaming keeps winning; where it does not win at the largest, the
    /// threshold is the larger of the detected one and twice the largest. The cold threshold
    /// is searched the same way among 4 KiB, 64 KiB and 256 KiB extents of a 256 KiB region
    /// taken out of the caches before each sample (`clflushopt`/`clflush`, `dc civac`),
    /// cleared extent after extent as faults clear them; there streaming keeps an extent
    /// unless temporal is more than 5% faster at it (it saves a read per line); where
    /// temporal wins cold at 256 KiB, cold extents stream only from the streaming
    /// threshold. Without cache maintenance (the portable backend, Miri) the cold threshold
    /// is the detected one.
    pub fn calibrate_with(
        vectors: VectorUse,
        scratch: &mut [u8],
        clock: &mut impl Clock,
    ) -> Calibration {
        let detected = Policy::detect_with(vectors);
        let start = clock.now_ns();
        let fallback = |outcome, clock_resolution_ns, clock: &mut dyn Clock| Calibration {
            policy: detected,
            outcome,
            clock_resolution_ns,
            elapsed_ns: clock.now_ns().saturating_sub(start),
            largest_extent: 0,
        };
        let Some(resolution) = resolution(clock) else {
            return fallback(CalibrationOutcome::StoppedClock, 0, clock);
        };
        if resolution > MAX_CLOCK_RESOLUTION_NS {
            return fallback(CalibrationOutcome::CoarseClock, resolution, clock);
        }
        let offset = scratch.as_ptr().align_offset(4096).min(scratch.len());
        let buf = &mut scratch[offset..];
        if buf.len() < MIN_SCRATCH_BYTES {
            return fallback(CalibrationOutcome::ScratchTooSmall, resolution, clock);
        }
        let mut extents = [0usize; MAX_EXTENTS];
        let mut count = 0;
        let mut size = SMALLEST_EXTENT;
        while size <= buf.len() && count < MAX_EXTENTS {
            extents[count] = size;
            count += 1;
            match size.checked_mul(4) {
                Some(next) => size = next,
                None => break,
            }
        }
        let extents = &extents[..count];
        let largest = extents[count - 1];
        let mut timer = Timer {
            clock,
            min_sample_ns: (resolution * SAMPLE_STEPS).max(MIN_SAMPLE_NS),
        };

        let permitted = |s: &Strategy| vectors.permits(*s);
        let temporal_candidates = Candidates::new(
            Strategy::available()
                .filter(permitted)
                .filter(|s| !s.is_non_temporal() && s.is_extent()),
        );
        let temporal =
            temporal_candidates.temporal_by_extent(&mut timer, buf, &TEMPORAL_EXTENTS, detected);
        let temporal_at = |n: usize| temporal.temporal_for(n);
        let streaming = Candidates::new(
            Strategy::available()
                .filter(permitted)
                .filter(|s| s.is_non_temporal()),
        )
        .coldest(&mut timer, &mut buf[..STREAMING_EXTENT.min(largest)]);
        // From the largest extent down, while streaming keeps winning: the threshold is the
        // smallest extent from which it wins at every larger one, so the first loss ends
        // the search (where streaming loses at the largest, one extent is measured).
        let threshold = streaming.map_or(usize::MAX, |streaming| {
            let fallback = detected
                .streaming_threshold()
                .max(largest.saturating_mul(2));
            threshold_from(extents, fallback, |n| {
                let pair = Candidates::new([temporal_at(n), streaming].into_iter());
                let c = pair.costs(&mut timer, &mut buf[..n], |_, _| true);
                wins(c[0], c[1])
            })
        });
        // Cold memory: from which extent on streaming beats temporal when every line starts
        // out of the caches (as for memory not touched in a while); where the backend cannot
        // evict (or under Miri), the detected threshold.
        let cold_threshold = match streaming {
            Some(streaming) if backend::evict(&buf[..0]) => {
                let region = &mut buf[..COLD_REGION];
                // Out of the caches streaming saves a read per line, so it keeps an extent
                // unless temporal beats it there by more than the margin.
                threshold_from(&COLD_EXTENTS, usize::MAX, |n| {
                    let pair = Candidates::new([temporal_at(n), streaming].into_iter());
                    let c = pair.cold_costs(&mut timer, region, n);
                    !wins(c[1], c[0])
                })
            }
            _ => detected.cold_threshold(),
        };
        // Every clear above wrote zeros over a prefix: with a streaming strategy the threshold
        // search cleared the largest extent (it measures that one first), else the temporal
        // search the largest of its extents the buffer holds, if it had a candidate (the
        // cold search's region lies inside either); zero the rest too, as documented.
        let cleared = if streaming.is_some() {
            largest
        } else if temporal_candidates.strategies().is_empty() {
            0
        } else {
            let held = TEMPORAL_EXTENTS.iter().filter(|&&n| n <= buf.len());
            held.max().copied().unwrap_or(0)
        };
        // The rest in whole pages with the temporal strategy, the last partial page with
        // `write_bytes` (any length). Not streaming: ending on vector streaming stores made
        // the next calibration on the same CPU pick vector temporal stores over `rep stosb`
        // in most runs (Intel Xeon), where it picks `rep stosb` in nearly every one otherwise.
        let rest = &mut buf[cleared..];
        let (pages, tail) = rest.split_at_mut(rest.len() & !4095);
        if !pages.is_empty() {
            clear_with(temporal.temporal(), pages);
        }
        let _ = Strategy::Portable.clear(tail);
        Calibration {
            policy: temporal
                .with_streaming(streaming)
                .with_streaming_threshold(threshold)
                .with_cold_threshold(cold_threshold),
            outcome: CalibrationOutcome::Measured,
            clock_resolution_ns: resolution,
            elapsed_ns: timer.clock.now_ns().saturating_sub(start),
            largest_extent: largest,
        }
    }
}

/// The strategies competing for one choice (at most every strategy there is).
struct Candidates {
    list: [Strategy; Strategy::ALL.len()],
    len: usize,
}

impl Candidates {
    fn new(strategies: impl Iterator<Item = Strategy>) -> Self {
        let mut c = Self {
            list: [Strategy::Portable; Strategy::ALL.len()],
            len: 0,
        };
        for s in strategies.take(Strategy::ALL.len()) {
            c.list[c.len] = s;
            c.len += 1;
        }
        c
    }

    fn strategies(&self) -> &[Strategy] {
        &self.list[..self.len]
    }

    /// Nanoseconds per GiB of each candidate `timed` says (by index and strategy) over
    /// `buf`, in the candidates' order, `u64::MAX` for the others: one untimed clear with
    /// each temporal candidate timed first (so an extent that fits a cache is measured
    /// cache-resident, as it is when cleared again and again), then [`SAMPLES`] rounds
    /// timing each once (one from [`LARGE_EXTENT`] on), the fastest sample of each counting.
    fn costs<C: Clock>(
        &self,
        timer: &mut Timer<'_, C>,
        buf: &mut [u8],
        timed: impl Fn(usize, Strategy) -> bool,
    ) -> [u64; Strategy::ALL.len()] {
        let mut best = [u64::MAX; Strategy::ALL.len()];
        // Asked once per candidate, for the warm-up and every sample alike.
        let chosen: [bool; Strategy::ALL.len()] =
            core::array::from_fn(|i| self.strategies().get(i).is_some_and(|&s| timed(i, s)));
        let picked = || {
            self.strategies()
                .iter()
                .enumerate()
                .filter(|&(i, _)| chosen[i])
        };
        // Warm the caches for the temporal candidates (streaming stores bypass them).
        for (_, &s) in picked().filter(|(_, s)| !s.is_non_temporal()) {
            clear_with(s, buf);
        }
        let samples = if buf.len() >= LARGE_EXTENT {
            1
        } else {
            SAMPLES
        };
        for _ in 0..samples {
            for (i, &s) in picked() {
                best[i] = best[i].min(timer.ns_per_gib(s, buf));
            }
        }
        best
    }

    /// Nanoseconds per GiB of each candidate clearing `region` in extents of `extent` bytes
    /// with the region out of the caches at the start ([`Timer::cold_ns_per_gib`]), fastest
    /// of [`COLD_SAMPLES`] taken round-robin.
    fn cold_costs<C: Clock>(
        &self,
        timer: &mut Timer<'_, C>,
        region: &mut [u8],
        extent: usize,
    ) -> [u64; Strategy::ALL.len()] {
        let mut best = [u64::MAX; Strategy::ALL.len()];
        for _ in 0..COLD_SAMPLES {
            for (b, &s) in best.iter_mut().zip(self.strategies()) {
                *b = (*b).min(timer.cold_ns_per_gib(s, region, extent));
            }
        }
        best
    }

    /// The candidate that clears `buf`, out of the caches, fastest (as one extent).
    fn coldest<C: Clock>(&self, timer: &mut Timer<'_, C>, buf: &mut [u8]) -> Option<Strategy> {
        let costs = self.cold_costs(timer, buf, buf.len());
        let cost_of = |s: Strategy| {
            let i = self.strategies().iter().position(|&x| x == s).unwrap_or(0);
            costs[i]
        };
        fastest(self.strategies().iter().copied(), cost_of)
    }

    /// `policy` with the temporal strategies measured for extents of every size in `sizes`
    /// (those the buffer holds, ascending): one strategy, the candidate whose worst ratio to
    /// the fastest candidate at any size is smallest (the one that is never far from the
    /// best); or, where that worst ratio is more than [`STREAMING_MARGIN_PCT`] worse than
    /// the best split's, one below a size of `sizes` ([`Policy::small`]) and another from it
    /// on, each the one whose worst ratio on its side is smallest, the split the one whose
    /// worse side is best. `policy`'s temporal strategy, if a candidate, is kept (everywhere,
    /// or from the split on) unless another is better there by more than the margin: the
    /// detected temporal strategy stays where a vector one only ties it, since warm samples
    /// cannot show what each does to cold memory (`rep stosb` has cleared cold 4 KiB pages
    /// 1.4x faster than AVX2 stores that tied it warm). `policy` as it is without candidates.
    fn temporal_by_extent<C: Clock>(
        &self,
        timer: &mut Timer<'_, C>,
        buf: &mut [u8],
        sizes: &[usize],
        policy: Policy,
    ) -> Policy {
        // Per size held, per candidate: its ratio to the fastest, in thousandths.
        let mut ratios = [[0u64; Strategy::ALL.len()]; TEMPORAL_EXTENTS.len()];
        let len = buf.len();
        let held = sizes
            .iter()
            .copied()
            .filter(|&n| n <= len)
            .take(ratios.len());
        let mut measured = [0usize; TEMPORAL_EXTENTS.len()];
        let mut count = 0;
        let incumbent = policy.temporal();
        for n in held {
            // A clear of megabytes lasts hundreds of microseconds, each candidate's twice
            // (its warm-up and its sample): from `LARGE_EXTENT` on, only the
            // `LARGE_EXTENT_CANDIDATES` fastest at the size before are timed, and the
            // incumbent; the others count as infinitely slow there.
            let previous = ratios[..count].last().copied();
            let timed = |i: usize, s: Strategy| match previous {
                Some(r) if n >= LARGE_EXTENT => {
                    s == incumbent || among_fastest(&r[..self.len], i, LARGE_EXTENT_CANDIDATES)
                }
                _ => true,
            };
            let costs = self.costs(timer, &mut buf[..n], timed);
            let fastest = costs[..self.len].iter().copied().min().unwrap_or(u64::MAX);
            for (r, &c) in ratios[count].iter_mut().zip(&costs[..self.len]) {
                let ratio = u128::from(c) * 1000 / u128::from(fastest.max(1));
                *r = u64::try_from(ratio).unwrap_or(u64::MAX);
            }
            measured[count] = n;
            count += 1;
        }
        match split_choice(self.strategies(), &ratios[..count], Some(policy.temporal())) {
            Some(choice) => policy
                .with_temporal(choice.large)
                .with_small(choice.small, choice.large_from.map_or(0, |i| measured[i])),
            None => policy,
        }
    }
}

/// Whether candidate `i` is among the `k` cheapest of `costs` (the first of equals ahead).
fn among_fastest(costs: &[u64], i: usize, k: usize) -> bool {
    let Some(&c) = costs.get(i) else {
        return false;
    };
    let ahead = costs
        .iter()
        .enumerate()
        .filter(|&(j, &x)| x < c || (x == c && j < i))
        .count();
    ahead < k
}

/// The candidates [`split_choice`] picked: `small` for the sizes before index `large_from`
/// and `large` from it on, or `large` everywhere (`large_from` `None`, `small` the same).
#[derive(Debug, PartialEq, Eq)]
struct Split {
    small: Strategy,
    large: Strategy,
    large_from: Option<usize>,
}

/// Chooses among `candidates` from `ratios` (per size, ascending, each candidate's cost over
/// the fastest's in thousandths, in `candidates`' order), as
/// [`Candidates::temporal_by_extent`] says; `None` without candidates.
fn split_choice(
    candidates: &[Strategy],
    ratios: &[[u64; Strategy::ALL.len()]],
    incumbent: Option<Strategy>,
) -> Option<Split> {
    // The candidate whose worst ratio over `sizes` is smallest (`incumbent` kept unless
    // beaten by more than the margin), and that worst ratio.
    let best_over = |sizes: &[[u64; Strategy::ALL.len()]], incumbent: Option<Strategy>| {
        let worst_of = |s: Strategy| {
            let i = candidates.iter().position(|&x| x == s).unwrap_or(0);
            sizes.iter().map(|r| r[i]).max().unwrap_or(0)
        };
        let best = fastest(candidates.iter().copied(), worst_of)?;
        let kept = match incumbent.filter(|s| candidates.contains(s)) {
            Some(kept) if !beats(worst_of(best), worst_of(kept)) => kept,
            _ => best,
        };
        Some((kept, worst_of(kept)))
    };
    let (single, single_worst) = best_over(ratios, incumbent)?;
    let mut best_split: Option<(Split, u64)> = None;
    for i in 1..ratios.len() {
        let (Some((small, below)), Some((large, above))) = (
            best_over(&ratios[..i], None),
            best_over(&ratios[i..], incumbent),
        ) else {
            continue;
        };
        let worst = below.max(above);
        if small != large && best_split.as_ref().is_none_or(|(_, w)| worst < *w) {
            let split = Split {
                small,
                large,
                large_from: Some(i),
            };
            best_split = Some((split, worst));
        }
    }
    Some(match best_split {
        Some((split, worst)) if beats(worst, single_worst) => split,
        _ => Split {
            small: single,
            large: single,
            large_from: None,
        },
    })
}

/// Clock steps [`resolution`] takes the smallest of: a read the host preempts lengthens one
/// step, a coarse clock every one, so that a busy machine (or an emulator) does not pass
/// for a coarse clock.
const RESOLUTION_STEPS: usize = 16;

/// The smallest positive step of the clock over [`RESOLUTION_STEPS`] steps; `None` if it
/// does not advance within 100 000 reads.
fn resolution(clock: &mut impl Clock) -> Option<u64> {
    let mut best = u64::MAX;
    let mut last = clock.now_ns();
    for _ in 0..RESOLUTION_STEPS {
        let mut reads = 0u32;
        let next = loop {
            let now = clock.now_ns();
            if now > last {
                break now;
            }
            reads += 1;
            if reads == 100_000 {
                return None;
            }
        };
        best = best.min(next - last);
        last = next;
    }
    Some(best)
}

struct Timer<'c, C: Clock> {
    clock: &'c mut C,
    min_sample_ns: u64,
}

impl<C: Clock> Timer<'_, C> {
    /// Nanoseconds per GiB cleared with `s` over `buf`, in one sample that repeats the clear
    /// until it lasts the minimum sample time.
    fn ns_per_gib(&mut self, s: Strategy, buf: &mut [u8]) -> u64 {
        let t0 = self.clock.now_ns();
        let mut reps = 0u64;
        let elapsed = loop {
            clear_with(s, buf);
            reps += 1;
            let elapsed = self.clock.now_ns().saturating_sub(t0);
            if elapsed >= self.min_sample_ns || reps >= 1 << 16 {
                break elapsed;
            }
        };
        let bytes = (buf.len() as u64).saturating_mul(reps).max(1);
        let per_gib = u128::from(elapsed) * (1u128 << 30) / u128::from(bytes);
        u64::try_from(per_gib).unwrap_or(u64::MAX)
    }
}

impl<C: Clock> Timer<'_, C> {
    /// Nanoseconds per GiB cleared with `s` over `region` in extents of `extent` bytes, one
    /// call each as faults make them, with the region taken out of the caches first
    /// (untimed): one sample.
    fn cold_ns_per_gib(&mut self, s: Strategy, region: &mut [u8], extent: usize) -> u64 {
        backend::evict(region);
        let t0 = self.clock.now_ns();
        for chunk in region.chunks_exact_mut(extent) {
            clear_with(s, chunk);
        }
        let elapsed = self.clock.now_ns().saturating_sub(t0);
        let per_gib = u128::from(elapsed) * (1u128 << 30) / (region.len().max(1) as u128);
        u64::try_from(per_gib).unwrap_or(u64::MAX)
    }
}

/// Clears `buf` with `s`'s primitive alone, as a validated clearer does (no availability or
/// geometry check per call, which would weigh on the 4 KiB samples), then its fence.
/// `s` comes from [`Strategy::available`] and `buf` is page-aligned whole pages, which meets
/// every strategy's alignment and granule.
fn clear_with(s: Strategy, buf: &mut [u8]) {
    debug_assert!(s.is_available() && buf.as_ptr().addr().is_multiple_of(4096));
    // SAFETY: `buf` is an exclusive borrow, so writable and unshared; `s` is available (the
    // candidates are filtered through `Strategy::available`), and each primitive checks its
    // own alignment and length, falling back to plain stores.
    unsafe { crate::backend::clear(s, buf.as_mut_ptr(), buf.len()) };
    s.fence();
}

/// The candidate with the smallest cost (the first of equals).
fn fastest(
    candidates: impl Iterator<Item = Strategy>,
    mut cost: impl FnMut(Strategy) -> u64,
) -> Option<Strategy> {
    let mut best: Option<(Strategy, u64)> = None;
    for s in candidates {
        let c = cost(s);
        if best.is_none_or(|(_, b)| c < b) {
            best = Some((s, c));
        }
    }
    best.map(|(s, _)| s)
}

/// Whether streaming (cost `streaming`) beats temporal (cost `temporal`) by more than
/// [`STREAMING_MARGIN_PCT`].
fn wins(temporal: u64, streaming: u64) -> bool {
    beats(streaming, temporal)
}

/// Whether cost `a` is lower than cost `b` by more than [`STREAMING_MARGIN_PCT`].
fn beats(a: u64, b: u64) -> bool {
    u128::from(a) * u128::from(100 + STREAMING_MARGIN_PCT) < u128::from(b) * 100
}

/// The smallest of `extents` (ascending) from which streaming wins at it and at every larger
/// one, asking `wins_at` from the largest down and stopping at the first loss; `fallback`
/// when it loses at the largest.
fn threshold_from(
    extents: &[usize],
    fallback: usize,
    mut wins_at: impl FnMut(usize) -> bool,
) -> usize {
    let mut threshold = None;
    for &n in extents.iter().rev() {
        if !wins_at(n) {
            break;
        }
        threshold = Some(n);
    }
    threshold.unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// `threshold_from` over precomputed (temporal, streaming) costs, and which extents
    /// it asked about.
    fn threshold(extents: &[usize], costs: &[(u64, u64)], fallback: usize) -> (usize, Vec<usize>) {
        let mut asked = Vec::new();
        let t = threshold_from(extents, fallback, |n| {
            asked.push(n);
            let i = extents.iter().position(|&e| e == n).unwrap();
            wins(costs[i].0, costs[i].1)
        });
        (t, asked)
    }

    #[test]
    fn threshold_is_where_streaming_wins_from_then_on() {
        let extents = [1, 4, 16, 64];
        // Streaming wins at 4 by noise, loses at 16, wins from 64: threshold 64, and 4 and
        // 1 are never measured.
        assert_eq!(
            threshold(&extents, &[(1, 2), (2, 1), (1, 2), (2, 1)], 1000),
            (64, vec![64, 16])
        );
        // Faster by 5% or less is not enough.
        assert_eq!(
            threshold(&extents, &[(2, 1), (2, 1), (105, 100), (2, 1)], 1000).0,
            64
        );
        assert_eq!(
            threshold(&extents, &[(2, 1), (2, 1), (2, 1), (2, 1)], 1000),
            (1, vec![64, 16, 4, 1])
        );
        // Never wins at the largest: the fallback, after one measurement.
        assert_eq!(
            threshold(&extents, &[(2, 1), (2, 1), (2, 1), (1, 2)], 1000),
            (1000, vec![64])
        );
        assert_eq!(threshold(&[], &[], 7), (7, vec![]));
    }

    /// Ratios (thousandths of the fastest) of two candidates at five sizes, as
    /// `temporal_by_extent` measures them.
    fn ratios(rows: [(u64, u64); 5]) -> [[u64; Strategy::ALL.len()]; 5] {
        rows.map(|(a, b)| {
            let mut r = [0; Strategy::ALL.len()];
            r[0] = a;
            r[1] = b;
            r
        })
    }

    #[test]
    fn temporal_strategies_split_by_extent_where_neither_is_near_the_best_everywhere() {
        let pair = [Strategy::RepStosb, Strategy::Avx512Stores];
        // As measured on an AMD Zen 5: AVX-512 stores 1.8x `rep stosb` at 4 KiB, `rep
        // stosb` 1.3x the stores at 8 MiB.
        let zen5 = ratios([
            (1760, 1000),
            (1160, 1000),
            (1000, 1130),
            (1000, 1050),
            (1000, 1340),
        ]);
        let chosen = split_choice(&pair, &zen5, Some(Strategy::RepStosb));
        assert_eq!(
            chosen,
            Some(Split {
                small: Strategy::Avx512Stores,
                large: Strategy::RepStosb,
                large_from: Some(2),
            })
        );
        // Where one is within 5% of the best at every size, no split, and the incumbent
        // stays where it is within 5% of the best single one.
        let ties = ratios([
            (1040, 1000),
            (1000, 1010),
            (1000, 1030),
            (1020, 1000),
            (1000, 1000),
        ]);
        let single = |s| {
            Some(Split {
                small: s,
                large: s,
                large_from: None,
            })
        };
        assert_eq!(
            split_choice(&pair, &ties, Some(Strategy::RepStosb)),
            single(Strategy::RepStosb)
        );
        assert_eq!(
            split_choice(&pair, &ties, Some(Strategy::Avx512Stores)),
            single(Strategy::Avx512Stores)
        );
        // A split better than the best single strategy by 5% or less is not taken.
        let near = ratios([
            (1000, 1100),
            (1000, 1100),
            (1040, 1000),
            (1040, 1000),
            (1040, 1000),
        ]);
        assert_eq!(split_choice(&pair, &near, None), single(Strategy::RepStosb));
        // One fastest everywhere: that one, whatever the incumbent.
        let one = ratios([
            (1000, 1300),
            (1000, 1200),
            (1000, 1100),
            (1000, 1200),
            (1000, 1500),
        ]);
        assert_eq!(
            split_choice(&pair, &one, Some(Strategy::Avx512Stores)),
            single(Strategy::RepStosb)
        );
        // Fewer sizes measured (a small buffer), and no candidates.
        assert_eq!(
            split_choice(&pair, &zen5[..1], None),
            single(Strategy::Avx512Stores)
        );
        assert_eq!(split_choice(&[], &zen5, None), None);
    }

    #[test]
    fn only_the_fastest_candidates_are_timed_at_large_extents_and_the_others_lose_there() {
        // The two cheapest at the extent before, the first of equals ahead.
        let before = [1050, 1000, 1810, 1050, 1360];
        let two: Vec<usize> = (0..6).filter(|&i| among_fastest(&before, i, 2)).collect();
        assert_eq!(two, [0, 1]);
        assert!(among_fastest(&before, 4, 5) && !among_fastest(&before, 4, 3));
        // A candidate not timed at the last size counts as infinitely slow there: never the
        // strategy for it, alone or as a split's large side; still one for the sizes before.
        let three = [
            Strategy::RepStosb,
            Strategy::RepStosq,
            Strategy::Avx512Stores,
        ];
        let row = |r: [u64; 3]| {
            let mut all = [0; Strategy::ALL.len()];
            all[..3].copy_from_slice(&r);
            all
        };
        let measured = [
            row([1300, 1300, 1000]),
            row([1200, 1200, 1000]),
            row([1000, 1050, 1200]),
            row([1000, 1020, 1150]),
            row([1000, 1010, u64::MAX]),
        ];
        assert_eq!(
            split_choice(&three, &measured, Some(Strategy::RepStosb)),
            Some(Split {
                small: Strategy::Avx512Stores,
                large: Strategy::RepStosb,
                large_from: Some(2),
            })
        );
        let untimed_best_before = [row([1080, 1000, 1200]), row([1000, u64::MAX, 1300])];
        assert_eq!(
            split_choice(&three, &untimed_best_before, None),
            Some(Split {
                small: Strategy::RepStosq,
                large: Strategy::RepStosb,
                large_from: Some(1),
            })
        );
    }

    #[test]
    fn fastest_takes_the_cheapest_first_of_equals() {
        let all = [Strategy::RepStosb, Strategy::RepStosq, Strategy::Movnti];
        let cost = |s| match s {
            Strategy::RepStosb => 5,
            _ => 3,
        };
        assert_eq!(fastest(all.into_iter(), cost), Some(Strategy::RepStosq));
        assert_eq!(fastest(core::iter::empty(), cost), None);
    }

    #[test]
    fn coarse_clock_keeps_the_detected_policy() {
        let mut t = 0u64;
        let mut jiffies = || {
            t += 4_000_000; // a 250 Hz tick
            t
        };
        let mut scratch = [0u8; 8192];
        let c = Policy::calibrate(&mut scratch, &mut jiffies);
        assert_eq!(c.outcome, CalibrationOutcome::CoarseClock);
        assert_eq!(c.policy, Policy::detect());
        assert_eq!(c.clock_resolution_ns, 4_000_000);
    }

    #[test]
    fn a_fine_clock_read_late_a_few_times_is_no_coarse_clock() {
        // A 100 ns clock whose first steps were stretched past the coarse mark (the reads
        // preempted): its resolution is its finest step, and the calibration goes on (to the
        // scratch check here).
        let mut t = 0u64;
        let mut steps = 0u32;
        let mut preempted = || {
            steps += 1;
            t += if steps <= 6 { 20_000 } else { 100 };
            t
        };
        let c = Policy::calibrate(&mut [0u8; 64], &mut preempted);
        assert_eq!(c.outcome, CalibrationOutcome::ScratchTooSmall);
        assert_eq!(c.clock_resolution_ns, 100);
    }

    #[test]
    fn stopped_clock_keeps_the_detected_policy() {
        let c = Policy::calibrate(&mut [0u8; 64], &mut || 7u64);
        assert_eq!(c.outcome, CalibrationOutcome::StoppedClock);
        assert_eq!(c.policy, Policy::detect());
    }

    #[test]
    fn small_scratch_keeps_the_detected_policy() {
        let mut t = 0u64;
        let mut fine = || {
            t += 10;
            t
        };
        // One byte short of the minimum wherever the buffer starts: aligning can only
        // shorten it.
        let mut scratch = std::vec![0xA5u8; MIN_SCRATCH_BYTES];
        let c = Policy::calibrate(&mut scratch[1..], &mut fine);
        assert_eq!(c.outcome, CalibrationOutcome::ScratchTooSmall);
        assert_eq!(c.policy, Policy::detect());
        // A byte of every page (any clear would cover whole pages; every byte is slow under
        // Miri).
        assert!(
            scratch.iter().step_by(4096).all(|&b| b == 0xA5),
            "nothing written"
        );
    }

    /// The smallest scratch buffer (an odd length past it) is left zeroed whichever
    /// strategies the CPU has: under Miri, with no candidate but the portable one, nothing
    /// is measured and every byte is cleared at the end.
    #[test]
    fn the_smallest_scratch_is_left_zeroed() {
        let len = MIN_SCRATCH_BYTES + 4096 + 3;
        let mut scratch = std::vec![0xA5u8; len];
        // A 100 ns clock that advances per read (Miri's own clock is too coarse).
        let mut t = 0u64;
        let mut fine = || {
            t += 100;
            t
        };
        let c = Policy::calibrate(&mut scratch, &mut fine);
        assert_eq!(c.outcome, CalibrationOutcome::Measured);
        let offset = scratch.as_ptr().align_offset(4096);
        // Every byte natively; under Miri, where each costs, one in 61.
        let step = if cfg!(miri) { 61 } else { 1 };
        assert!(scratch[offset..].iter().step_by(step).all(|&b| b == 0));
        assert_eq!(scratch[len - 1], 0);
        assert!(scratch[..offset].iter().all(|&b| b == 0xA5));
    }

    /// Calibration on this CPU with a real clock: a policy it can execute, and the scratch
    /// left zeroed (an odd length, so the tail past the largest extent is cleared too).
    /// Not under Miri: it clears hundreds of MiB.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn measured_policy_is_executable_and_scratch_is_zeroed() {
        let len = (16 << 20) + 4096 + 3;
        let mut scratch = std::vec![0xA5u8; len];
        let origin = std::time::Instant::now();
        let c = Policy::calibrate(&mut scratch, &mut || {
            u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
        });
        assert_eq!(c.outcome, CalibrationOutcome::Measured);
        assert_eq!(c.policy.validate(), Ok(()));
        assert!(!c.policy.temporal().is_non_temporal());
        assert!(c.policy.streaming().is_none_or(Strategy::is_non_temporal));
        assert!(c.largest_extent >= MIN_SCRATCH_BYTES && c.largest_extent <= len);
        let offset = scratch.as_ptr().align_offset(4096);
        assert!(scratch[offset..].iter().all(|&b| b == 0));
        assert!(scratch[..offset].iter().all(|&b| b == 0xA5));
        std::println!("calibrated: {c:?}");
    }
}
