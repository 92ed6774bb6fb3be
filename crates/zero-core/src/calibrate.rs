//! Measuring the policy on the running CPU, the way Linux picks its xor and RAID-6 routines
//! by timing them at boot: [`Policy::calibrate`].
//!
//! What is measured: which temporal strategy clears fastest (at a cache-resident and a
//! mid-sized extent), which streaming strategy clears fastest at the largest extent the
//! scratch buffer holds, and from which extent size on the streaming one beats the temporal
//! one at that size and every larger size measured (the streaming threshold). What is read
//! from CPUID: only which strategies this CPU can execute ([`Strategy::is_available`]).

use crate::{Policy, Strategy};

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
/// [`MIN_SAMPLE_NS`], so the clock's granularity is under 0.5% of it.
const SAMPLE_STEPS: u64 = 200;
/// See [`SAMPLE_STEPS`]. Two milliseconds: a cache-resident extent is then cleared many
/// times per sample, as a caller clearing extents one after another does. On an AMD EPYC,
/// samples of one or two clears of 1-4 MiB ran up to 30% slower with `rep stos` than long
/// ones (while streaming stores did not change), which put the threshold at 1 MiB instead
/// of the 16 MiB that longer samples and the report's measurements agree on.
const MIN_SAMPLE_NS: u64 = 2_000_000;
/// Streaming must be faster than temporal by more than this (percent) to be chosen: within
/// it either choice is within 5% of the other, and temporal leaves the data cached.
const STREAMING_MARGIN_PCT: u64 = 5;
/// Samples per measurement; the fastest counts (noise only ever adds time).
const SAMPLES: usize = 2;
/// The extent sizes: powers of four from 256 KiB (where streaming never wins: it does not
/// keep the data in the cache) to the scratch buffer.
const SMALLEST_EXTENT: usize = 256 << 10;
/// The cache-resident and mid-sized extents the temporal strategy is chosen at.
const TEMPORAL_EXTENTS: [usize; 2] = [256 << 10, 4 << 20];
/// At most this many extent sizes (256 KiB to 256 GiB).
const MAX_EXTENTS: usize = 11;

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
    /// Measures the fastest temporal and streaming strategies and the streaming threshold on
    /// the running CPU, clearing `scratch` with each candidate (it is left zeroed) and timing
    /// it with `clock`. Falls back to [`Policy::detect`] (and says why in
    /// [`Calibration::outcome`]) when the clock is too coarse or stopped, or `scratch` too
    /// small.
    ///
    /// The scratch buffer should be pre-faulted (page faults would be timed) and, for the
    /// threshold to be found, larger than the last-level cache: the threshold is searched
    /// among extent sizes from 256 KiB up to the buffer's size, by powers of four. Each
    /// extent is timed cache-warm over at least 2 ms, fastest of two samples, so calibration
    /// takes about 100 ms with 64 MiB on an AMD EPYC (the report prints how long it took
    /// here); shorter samples were faster to take but picked a wrong threshold.
    pub fn calibrate(scratch: &mut [u8], clock: &mut impl Clock) -> Calibration {
        let detected = Policy::detect();
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
        // Zero the buffer once (every measurement below then writes zeros over zeros, and
        // the first one is not charged for faults the caller left).
        let _ = detected.temporal().clear(&mut buf[..largest]);

        let temporal = fastest(
            Strategy::available().filter(|s| !s.is_non_temporal() && s.is_extent()),
            |s| {
                TEMPORAL_EXTENTS
                    .iter()
                    .filter(|&&n| n <= largest)
                    .map(|&n| timer.ns_per_gib(s, &mut buf[..n]))
                    .sum()
            },
        )
        .unwrap_or(detected.temporal());
        let streaming = fastest(Strategy::available().filter(|s| s.is_non_temporal()), |s| {
            timer.ns_per_gib(s, &mut buf[..largest])
        });
        let threshold = streaming.map_or(usize::MAX, |streaming| {
            let mut costs = [(0u64, 0u64); MAX_EXTENTS];
            for (cost, &n) in costs.iter_mut().zip(extents) {
                *cost = (
                    timer.ns_per_gib(temporal, &mut buf[..n]),
                    timer.ns_per_gib(streaming, &mut buf[..n]),
                );
            }
            streaming_threshold(extents, &costs[..count], detected.streaming_threshold())
        });
        // Every clear above wrote zeros over a prefix of at most `largest` bytes, the warm-up
        // all of it; zero the rest too, as documented.
        let _ = Strategy::Portable.clear(&mut buf[largest..]);
        Calibration {
            policy: detected
                .with_temporal(temporal)
                .with_streaming(streaming)
                .with_streaming_threshold(threshold),
            outcome: CalibrationOutcome::Measured,
            clock_resolution_ns: resolution,
            elapsed_ns: timer.clock.now_ns().saturating_sub(start),
            largest_extent: largest,
        }
    }
}

/// The smallest positive step of the clock over a few steps; `None` if it does not advance
/// within 100 000 reads.
fn resolution(clock: &mut impl Clock) -> Option<u64> {
    let mut best = u64::MAX;
    let mut last = clock.now_ns();
    for _ in 0..3 {
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
    /// Nanoseconds per GiB cleared with `s` over `buf`: one untimed clear first (so an
    /// extent that fits a cache is measured cache-resident, as it is when cleared again and
    /// again), then the fastest of [`SAMPLES`] samples, each repeating the clear until it
    /// lasts the minimum sample time.
    fn ns_per_gib(&mut self, s: Strategy, buf: &mut [u8]) -> u64 {
        if s.clear(buf).is_err() {
            return u64::MAX;
        }
        let mut best = u64::MAX;
        for _ in 0..SAMPLES {
            let t0 = self.clock.now_ns();
            let mut reps = 0u64;
            let elapsed = loop {
                if s.clear(buf).is_err() {
                    return u64::MAX;
                }
                reps += 1;
                let elapsed = self.clock.now_ns().saturating_sub(t0);
                if elapsed >= self.min_sample_ns || reps >= 1 << 16 {
                    break elapsed;
                }
            };
            let bytes = (buf.len() as u64).saturating_mul(reps).max(1);
            let per_gib = u128::from(elapsed) * (1u128 << 30) / u128::from(bytes);
            best = best.min(u64::try_from(per_gib).unwrap_or(u64::MAX));
        }
        best
    }
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

/// The smallest extent from which streaming costs less than temporal, by more than
/// [`STREAMING_MARGIN_PCT`], at it and at every larger extent measured (`costs[i]` =
/// (temporal, streaming) at `extents[i]`, ascending).
/// When streaming does not win at the largest extent, the larger of `detected` and twice the
/// largest extent.
fn streaming_threshold(extents: &[usize], costs: &[(u64, u64)], detected: usize) -> usize {
    let mut threshold = None;
    for (&n, &(temporal, streaming)) in extents.iter().zip(costs).rev() {
        if u128::from(streaming) * u128::from(100 + STREAMING_MARGIN_PCT)
            < u128::from(temporal) * 100
        {
            threshold = Some(n);
        } else {
            break;
        }
    }
    threshold.unwrap_or_else(|| {
        let largest = extents.last().copied().unwrap_or(0);
        detected.max(largest.saturating_mul(2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_where_streaming_wins_from_then_on() {
        let extents = [1, 4, 16, 64];
        // Streaming wins at 4 by noise, loses at 16, wins from 64: threshold 64.
        assert_eq!(
            streaming_threshold(&extents, &[(1, 2), (2, 1), (1, 2), (2, 1)], 1000),
            64
        );
        // Faster by 5% or less is not enough.
        assert_eq!(
            streaming_threshold(&extents, &[(2, 1), (2, 1), (105, 100), (2, 1)], 1000),
            64
        );
        assert_eq!(
            streaming_threshold(&extents, &[(2, 1), (2, 1), (2, 1), (2, 1)], 1000),
            1
        );
        // Never wins at the largest: the detected threshold, or twice the largest.
        assert_eq!(
            streaming_threshold(&extents, &[(2, 1), (2, 1), (2, 1), (1, 2)], 1000),
            1000
        );
        assert_eq!(
            streaming_threshold(&extents, &[(1, 2), (1, 2), (1, 2), (1, 2)], 10),
            128
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
