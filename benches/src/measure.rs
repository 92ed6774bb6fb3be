//! Timing and memory helpers shared by the report sections and the criterion benches.

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

/// Durations of repeated runs of one measurement.
#[derive(Clone, Debug)]
pub struct Samples(Vec<Duration>);

impl Samples {
    /// Runs every candidate on `target` `runs` times, round-robin with the starting
    /// candidate rotating each round (after one warm-up round), so drift on a shared machine
    /// hits all of them alike. One `Samples` per candidate, in order.
    pub fn interleaved<T: ?Sized>(
        runs: usize,
        target: &mut T,
        candidates: &mut [Candidate<'_, T>],
    ) -> Vec<Self> {
        for c in candidates.iter_mut() {
            c(target);
        }
        let n = candidates.len();
        let mut all = vec![Vec::with_capacity(runs); n];
        for round in 0..runs.max(1) {
            // Rotate the starting candidate so no one always runs first or last.
            for k in 0..n {
                let i = (round + k) % n;
                let t = Instant::now();
                candidates[i](target);
                all[i].push(t.elapsed());
            }
        }
        all.into_iter().map(Self).collect()
    }

    /// From recorded durations.
    #[must_use]
    pub fn from_durations(d: Vec<Duration>) -> Self {
        Self(d)
    }

    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.0.clone();
        v.sort_unstable();
        v
    }

    /// The median duration.
    #[must_use]
    pub fn median(&self) -> Duration {
        let v = self.sorted();
        v.get(v.len() / 2).copied().unwrap_or_default()
    }

    /// The shortest duration.
    #[must_use]
    pub fn best(&self) -> Duration {
        self.0.iter().min().copied().unwrap_or_default()
    }

    /// The longest duration.
    #[must_use]
    pub fn worst(&self) -> Duration {
        self.0.iter().max().copied().unwrap_or_default()
    }

    /// Median throughput for `bytes` per run, in GB/s (10^9 bytes).
    #[must_use]
    pub fn median_gbps(&self, bytes: usize) -> f64 {
        gbps(bytes, self.median())
    }

    /// Best throughput for `bytes` per run, in GB/s.
    #[must_use]
    pub fn best_gbps(&self, bytes: usize) -> f64 {
        gbps(bytes, self.best())
    }

    /// Spread: (slowest - fastest) / median, in percent.
    #[must_use]
    pub fn spread_pct(&self) -> f64 {
        let m = self.median().as_secs_f64();
        if m == 0.0 {
            return 0.0;
        }
        (self.worst() - self.best()).as_secs_f64() / m * 100.0
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
