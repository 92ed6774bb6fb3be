//! Timing and memory helpers shared by the report sections and the criterion benches.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// A pre-faulted, page-aligned anonymous mapping (THP advised), unmapped on drop.
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    /// Maps `len` bytes and touches every page so no fault happens while measuring.
    ///
    /// # Panics
    /// If the mapping fails (the report cannot run without its memory).
    #[must_use]
    pub fn new(len: usize) -> Self {
        // SAFETY: a fresh private anonymous mapping; owned by the Region until drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap of {len} bytes failed");
        // SAFETY: advice on our own mapping; failure only means no huge pages.
        unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
        let mut region = Self {
            ptr: ptr.cast(),
            len,
        };
        region.as_mut_slice().fill(0xA5);
        region
    }

    /// The share of the region the kernel backs with huge pages (`AnonHugePages` of the
    /// mappings that overlap it in `/proc/self/smaps`, over its length, at most 1): where a
    /// kernel maps memory with 2 MiB pages a hosted run gets them only where the host has
    /// free 2 MiB pages to give, and TLB misses on 4 KiB pages move every figure over large
    /// metadata. `None` where smaps cannot be read.
    #[must_use]
    pub fn huge_page_share(&self) -> Option<f64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let (start, end) = (self.ptr as usize, self.ptr as usize + self.len);
        let mut overlaps = false;
        let mut huge_kib = 0u64;
        for line in smaps.lines() {
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            if let Some((lo, hi)) = first.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                // A mapping's header line: "start-end perms offset ...".
                overlaps = lo < end && start < hi;
            } else if overlaps && first == "AnonHugePages:" {
                huge_kib += words.next()?.parse::<u64>().ok()?;
            }
        }
        Some((huge_kib as f64 * 1024.0 / self.len as f64).min(1.0))
    }

    /// The whole region.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is len bytes, readable and writable, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in new().
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Memory the kernel says is available, in bytes (`MemAvailable`).
#[must_use]
pub fn mem_available() -> Option<u64> {
    meminfo("MemAvailable:")
}

/// A `/proc/meminfo` field in bytes.
#[must_use]
pub fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One thing to measure, run on a target it borrows (see [`Samples::interleaved`]).
pub type Candidate<'a, T> = Box<dyn FnMut(&mut T) + 'a>;

/// How long one cell is measured: rounds until both `min_rounds` ran and `time` is spent,
/// or `max_rounds` ran, whichever comes first. A time budget instead of a fixed count gives
/// fast cells many samples (a narrow interval) and keeps slow ones bounded.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// At least this many rounds (from 6 on a 95% interval exists; from 10 on it excludes the
    /// extreme samples).
    pub min_rounds: usize,
    /// At most this many rounds.
    pub max_rounds: usize,
    /// Keep going until this much time is spent.
    pub time: Duration,
}

impl Budget {
    /// The default cell budget: 10 to 60 rounds over about `seconds` (a fifth of that with
    /// `--quick`, 3 to 5 rounds).
    #[must_use]
    pub fn cell(quick: bool, seconds: f64) -> Self {
        if quick {
            Self {
                min_rounds: 3,
                max_rounds: 5,
                time: Duration::from_secs_f64(seconds / 5.0),
            }
        } else {
            Self {
                min_rounds: 10,
                max_rounds: 60,
                time: Duration::from_secs_f64(seconds),
            }
        }
    }

    /// Calls `round(i)` for `i = 0, 1, ...` until the budget is spent; returns how many ran.
    pub fn run(&self, mut round: impl FnMut(usize)) -> usize {
        let start = Instant::now();
        let mut n = 0;
        while n < self.max_rounds.max(1) && (n < self.min_rounds || start.elapsed() < self.time) {
            round(n);
            n += 1;
        }
        n
    }
}

/// Pins the calling thread to `cpu`; false when the kernel refuses (an unpinned run is still a
/// run, so callers go on).
pub fn pin_current_thread(cpu: usize) -> bool {
    run_current_thread_on([cpu])
}

/// Lets the calling thread run on `cpus` alone; false when one is past `CPU_SETSIZE` or
/// the kernel refuses.
fn run_current_thread_on(cpus: impl IntoIterator<Item = usize>) -> bool {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it (each cpu is
    // checked below CPU_SETSIZE first); sched_setaffinity only reads the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in cpus {
            if cpu >= libc::CPU_SETSIZE as usize {
                return false;
            }
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Lets the calling thread run on every CPU of [`allowed_cpus`] again (a process it starts
/// inherits its mask: pinned, the process's threads would all share its one CPU). Whether
/// the kernel took the mask.
pub fn unpin_current_thread() -> bool {
    run_current_thread_on(allowed_cpus())
}

/// The CPUs this process may run on, in order: read once, on the first call (make it before
/// pinning any thread: a pinned thread's own mask is its one CPU).
#[must_use]
pub fn allowed_cpus() -> Vec<usize> {
    static ALLOWED: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    ALLOWED
        .get_or_init(|| {
            // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills the set we own;
            // CPU_ISSET reads inside it.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0
                {
                    return vec![0];
                }
                (0..libc::CPU_SETSIZE as usize)
                    .filter(|&c| libc::CPU_ISSET(c, &set))
                    .collect()
            }
        })
        .clone()
}

/// The CPU the measuring thread is pinned to: the last one allowed (CPU 0 takes most of the
/// machine's interrupts).
#[must_use]
pub fn measuring_cpu() -> usize {
    allowed_cpus().last().copied().unwrap_or(0)
}

/// A median with its 95% confidence interval (distribution-free, from order statistics: the
/// interval between the k-th smallest and k-th largest sample, k from the binomial
/// distribution, so it needs no assumption about the shape of the noise).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The sample median.
    #[serde(deserialize_with = "crate::report::float_or_null")]
    pub median: f64,
    /// Lower end of the interval.
    #[serde(deserialize_with = "crate::report::float_or_null")]
    pub lo: f64,
    /// Upper end of the interval.
    #[serde(deserialize_with = "crate::report::float_or_null")]
    pub hi: f64,
    /// How many samples it rests on (below 6 the interval is min to max and covers less than
    /// 95%).
    pub n: usize,
}

impl Estimate {
    /// The median and its 95% interval of `values` (non-finite values are dropped).
    #[must_use]
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_unstable_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Self {
                median: f64::NAN,
                lo: f64::NAN,
                hi: f64::NAN,
                n,
            };
        }
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            f64::midpoint(v[n / 2 - 1], v[n / 2])
        };
        let k = median_ci_rank(n);
        Self {
            median,
            lo: v[k.saturating_sub(1)],
            hi: v[n - k.max(1)],
            n,
        }
    }

    /// One exact value (an instruction count): an interval of width zero.
    #[must_use]
    pub fn exact(value: f64) -> Self {
        Self {
            median: value,
            lo: value,
            hi: value,
            n: 1,
        }
    }

    /// `f` applied to the median and the ends; `f` must be monotonic (the ends are reordered
    /// if it decreases).
    #[must_use]
    pub fn map(self, f: impl Fn(f64) -> f64) -> Self {
        let (a, b) = (f(self.lo), f(self.hi));
        Self {
            median: f(self.median),
            lo: a.min(b),
            hi: a.max(b),
            n: self.n,
        }
    }

    /// The larger distance from the median to an end of the interval, in percent of it.
    #[must_use]
    pub fn half_width_pct(&self) -> f64 {
        if self.median == 0.0 {
            return 0.0;
        }
        (self.hi - self.median).max(self.median - self.lo) / self.median.abs() * 100.0
    }

    /// `at_least`: the goal is `value >= target` (else `value <= target`). Met when the whole
    /// interval is on the right side, not met when the whole interval is on the wrong side,
    /// inconclusive when the interval straddles the target.
    #[must_use]
    pub fn judge(&self, target: f64, at_least: bool) -> Verdict {
        let (good, bad) = if at_least {
            (self.lo >= target, self.hi < target)
        } else {
            (self.hi <= target, self.lo > target)
        };
        if self.median.is_nan() {
            Verdict::Inconclusive
        } else if good {
            Verdict::Met
        } else if bad {
            Verdict::NotMet
        } else {
            Verdict::Inconclusive
        }
    }
}

/// The rank k (1-based) such that the k-th smallest and k-th largest of `n` samples bound a
/// confidence interval of at least 95% for the median: the largest k with
/// P(Binomial(n, 1/2) < k) <= 2.5%. 0 when `n < 6` (no such interval exists).
fn median_ci_rank(n: usize) -> usize {
    // ln P(B = i) = ln C(n, i) - n ln 2, accumulated term by term.
    let mut ln_p = -(n as f64) * std::f64::consts::LN_2;
    let mut cdf = 0.0;
    let mut k = 0;
    for i in 0..n {
        cdf += ln_p.exp();
        if cdf > 0.025 {
            break;
        }
        k = i + 1;
        ln_p += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    k
}

/// Whether a goal is met, judged on a confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval meets the target.
    Met,
    /// The whole interval misses it.
    NotMet,
    /// The interval straddles the target: the run cannot tell.
    Inconclusive,
}

impl Verdict {
    /// Every verdict. The match below fails to compile when a variant is added, until it
    /// is listed here too.
    pub const ALL: [Self; 3] = {
        match Self::Met {
            Self::Met | Self::NotMet | Self::Inconclusive => {}
        }
        [Self::Met, Self::NotMet, Self::Inconclusive]
    };

    /// Met if `met`, else not met: a goal judged without an interval (a count, a worst
    /// case, an exact figure).
    #[must_use]
    pub const fn met_if(met: bool) -> Self {
        if met { Self::Met } else { Self::NotMet }
    }

    /// The verdict the report prints as `text`, if any.
    #[must_use]
    pub fn from_text(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// How the report prints it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Met => "met",
            Self::NotMet => "not met",
            Self::Inconclusive => "inconclusive",
        }
    }

    /// Both must be met; not met if either is; inconclusive otherwise.
    #[must_use]
    pub const fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::Met, Self::Met) => Self::Met,
            (Self::NotMet, _) | (_, Self::NotMet) => Self::NotMet,
            _ => Self::Inconclusive,
        }
    }
}

/// The order in which `n` candidates run in round `round`: a pseudo-random permutation (the
/// same for the same round on every run), so that no candidate always runs first, last, or
/// after the same other candidate.
#[must_use]
pub fn round_order(round: usize, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    // splitmix64 of the round number, then Fisher-Yates.
    let mut x = (round as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..n).rev() {
        let j = usize::try_from(next() % (i as u64 + 1)).unwrap_or(0);
        order.swap(i, j);
    }
    order
}

/// Durations of repeated runs of one measurement.
#[derive(Clone, Debug)]
pub struct Samples(Vec<Duration>);

impl Samples {
    /// Runs every candidate on `target` once per round, in [`round_order`], one round after
    /// another until `budget` is spent (after one warm-up round), so drift on a shared machine
    /// hits all of them alike, no candidate always follows the same one (which would leave
    /// it the same cache state), and round `i` of each candidate ran side by side (see
    /// [`Samples::speedup_over`]). One `Samples` per candidate, in order.
    pub fn interleaved<T: ?Sized>(
        budget: Budget,
        target: &mut T,
        candidates: &mut [Candidate<'_, T>],
    ) -> Vec<Self> {
        for c in candidates.iter_mut() {
            c(target);
        }
        let n = candidates.len();
        let mut all = vec![Vec::new(); n];
        budget.run(|round| {
            for i in round_order(round, n) {
                let t = Instant::now();
                candidates[i](target);
                all[i].push(t.elapsed());
            }
        });
        all.into_iter().map(Self).collect()
    }

    /// From recorded durations (in round order, for [`Samples::speedup_over`]).
    #[must_use]
    pub fn from_durations(d: Vec<Duration>) -> Self {
        Self(d)
    }

    /// How many samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn secs(&self) -> impl Iterator<Item = f64> + '_ {
        self.0.iter().map(Duration::as_secs_f64)
    }

    /// The median duration.
    #[must_use]
    pub fn median(&self) -> Duration {
        Duration::from_secs_f64(self.seconds().median.max(0.0))
    }

    /// The median duration in seconds with its interval.
    #[must_use]
    pub fn seconds(&self) -> Estimate {
        Estimate::of(self.secs())
    }

    /// The longest duration.
    #[must_use]
    pub fn worst(&self) -> Duration {
        self.0.iter().max().copied().unwrap_or_default()
    }

    /// Throughput for `bytes` per run, in GB/s (10^9 bytes): median and interval.
    #[must_use]
    pub fn gbps(&self, bytes: usize) -> Estimate {
        Estimate::of(self.secs().map(|s| bytes as f64 / s / 1e9))
    }

    /// Median throughput for `bytes` per run, in GB/s.
    #[must_use]
    pub fn median_gbps(&self, bytes: usize) -> f64 {
        self.gbps(bytes).median
    }

    /// Operations per second for `ops` per run: median and interval.
    #[must_use]
    pub fn rate(&self, ops: f64) -> Estimate {
        Estimate::of(self.secs().map(|s| ops / s))
    }

    /// How many times faster `self` ran than `base` (base time / own time). When both come
    /// from one [`Samples::interleaved`] run (as many samples, round `i` side by side), the
    /// ratio is taken round by round and its median and interval are those of the per-round
    /// ratios, so drift common to a round cancels; otherwise the ratio of the medians, with
    /// the interval from the ends of both.
    #[must_use]
    pub fn speedup_over(&self, base: &Self) -> Estimate {
        if self.len() == base.len() && !self.is_empty() {
            Estimate::of(base.secs().zip(self.secs()).map(|(b, s)| b / s))
        } else {
            let (b, s) = (base.seconds(), self.seconds());
            Estimate {
                median: b.median / s.median,
                lo: b.lo / s.hi,
                hi: b.hi / s.lo,
                n: self.len().min(base.len()),
            }
        }
    }

    /// How many nanoseconds per operation `self` took more than `base`, for `ops`
    /// operations per run: round by round when both come from one
    /// [`Samples::interleaved`] run (the median and interval of the per-round differences),
    /// else the difference of the medians.
    #[must_use]
    pub fn excess_ns_over(&self, base: &Self, ops: f64) -> Estimate {
        let per_op = |d: f64| d / ops * 1e9;
        if self.len() == base.len() && !self.is_empty() {
            Estimate::of(base.secs().zip(self.secs()).map(|(b, s)| per_op(s - b)))
        } else {
            Estimate::exact(per_op(self.seconds().median - base.seconds().median))
        }
    }
}

/// Throughput in GB/s (10^9 bytes per second).
#[must_use]
pub fn gbps(bytes: usize, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s == 0.0 {
        f64::INFINITY
    } else {
        bytes as f64 / s / 1e9
    }
}

/// `n` bytes in the largest binary unit that divides it (4 KiB, 2 MiB, 1 GiB).
#[must_use]
pub fn size_name(n: usize) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_interval_ranks() {
        // Below 6 samples no 95% interval exists: min to max.
        assert_eq!(median_ci_rank(5), 0);
        assert_eq!(median_ci_rank(6), 1);
        assert_eq!(median_ci_rank(10), 2);
        // n = 20: P(B <= 5) = 2.07% <= 2.5% < P(B <= 6) = 5.77%.
        assert_eq!(median_ci_rank(20), 6);
        let e = Estimate::of((1..=20).map(f64::from));
        assert_eq!((e.median, e.lo, e.hi, e.n), (10.5, 6.0, 15.0, 20));
        let e = Estimate::of([3.0, 1.0, 2.0]);
        assert_eq!((e.median, e.lo, e.hi), (2.0, 1.0, 3.0));
    }

    #[test]
    fn verdicts_use_the_interval() {
        let e = |lo, hi| Estimate {
            median: f64::midpoint(lo, hi),
            lo,
            hi,
            n: 10,
        };
        assert_eq!(e(1.0, 1.2).judge(0.95, true), Verdict::Met);
        assert_eq!(e(0.8, 0.9).judge(0.95, true), Verdict::NotMet);
        assert_eq!(e(0.9, 1.0).judge(0.95, true), Verdict::Inconclusive);
        assert_eq!(e(1.0, 1.1).judge(1.2, false), Verdict::Met);
        assert_eq!(
            Verdict::Met.and(Verdict::Inconclusive),
            Verdict::Inconclusive
        );
        assert_eq!(Verdict::Inconclusive.and(Verdict::NotMet), Verdict::NotMet);
    }

    #[test]
    fn paired_speedup_is_per_round() {
        let ms = |v: &[u64]| {
            Samples::from_durations(v.iter().map(|&m| Duration::from_millis(m)).collect())
        };
        // Drift doubles both in round 2: the per-round ratio stays 2.
        let base = ms(&[10, 20, 10, 20, 10, 20]);
        let fast = ms(&[5, 10, 5, 10, 5, 10]);
        let r = fast.speedup_over(&base);
        assert_eq!((r.median, r.lo, r.hi), (2.0, 2.0, 2.0));
    }

    #[test]
    fn round_orders_are_permutations_that_vary() {
        for n in 0..8 {
            for round in 0..20 {
                let mut o = round_order(round, n);
                o.sort_unstable();
                assert_eq!(o, (0..n).collect::<Vec<_>>());
            }
        }
        let firsts: std::collections::HashSet<usize> =
            (0..50).map(|r| round_order(r, 5)[0]).collect();
        assert_eq!(firsts.len(), 5);
    }
}
