//! The "zeroing guest memory" section: the paths a VMM or kernel would otherwise take to get a
//! gigabyte of zeroed memory, measured beside zero-core in one run.
//!
//! - Linux zeroing pages as it populates a fresh mapping (`MADV_POPULATE_WRITE` with
//!   transparent huge pages), on one thread and on every core: how QEMU and Cloud Hypervisor
//!   prefault guest RAM.
//! - compiler-builtins' `memset`: what `core::ptr::write_bytes` becomes in a `no_std` x86_64
//!   kernel (built for `x86_64-unknown-none` by `build.rs`).
//! - glibc's `memset` (`write_bytes` in this hosted binary).
//! - zero-core on one thread (`clear_contig_pages`) and on every core (`ParallelClear`).
//! - zero-core prefaulting a fresh `vm-memory` guest memory map of two regions on every core
//!   (`guest::clear_guest_memory_parallel`): what a rust-vmm VMM would call instead of
//!   `MADV_POPULATE_WRITE`.

use crate::measure::{
    Budget, Region, Samples, allowed_cpus, pin_current_thread, round_order, size_name,
};
use crate::{Cell, Plot, Section, SectionContext, Table};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};
use zero_core::{Clearer, NoResched, PageSize, ParallelClear, PreemptModel, clear_contig_pages};

/// The section.
pub struct Prefault;

const MIB: usize = 1 << 20;
/// Chunk each `ParallelClear` worker claims at a time.
const CHUNK_PAGES: usize = 8 * MIB / 4096;

/// One path: zeroes `bytes` (the region, or a fresh mapping of its size) and returns the time
/// of the zeroing alone (mapping and unmapping a fresh region are not timed).
type Path = Box<dyn FnMut(&mut [u8]) -> Duration>;

/// A fresh private anonymous mapping of `len` bytes, THP advised, not yet faulted in.
struct Fresh {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Fresh {
    fn new(len: usize) -> Self {
        // SAFETY: a new private anonymous mapping, owned by the Fresh until drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap of {len} bytes failed");
        // SAFETY: advice on our own mapping; failure only means no huge pages.
        unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
        Self { ptr, len }
    }

    /// Populates `[offset, offset + len)` writable: the kernel allocates and zeroes the pages.
    fn populate(&self, offset: usize, len: usize) {
        assert!(offset + len <= self.len);
        // SAFETY: a sub-range of our own mapping; MADV_POPULATE_WRITE only faults it in.
        let r = unsafe {
            libc::madvise(
                self.ptr.cast::<u8>().add(offset).cast(),
                len,
                libc::MADV_POPULATE_WRITE,
            )
        };
        assert_eq!(
            r,
            0,
            "MADV_POPULATE_WRITE failed: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in new().
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

// SAFETY: the mapping is plain memory; populate only asks the kernel to fault it in, and
// threads populate disjoint ranges.
unsafe impl Sync for Fresh {}

/// Splits `len` into one range per worker, 2 MiB aligned (whole huge pages each).
fn shares(len: usize, workers: usize) -> Vec<(usize, usize)> {
    let huge = 2 * MIB;
    let per = (len / huge).div_ceil(workers.max(1)) * huge;
    (0..workers)
        .map(|i| (i * per, per.min(len.saturating_sub(i * per))))
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// A fresh `vm-memory` guest memory map of `len` bytes in two regions (as a VMM splits
/// guest RAM around a hole), THP advised like the Linux rows' mapping, cleared (and so
/// faulted in) by zero-core on `threads` threads; the mapping is made and dropped untimed.
fn guest_memory(threads: usize) -> Path {
    use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion};
    Box::new(move |region: &mut [u8]| {
        let half = region.len() / 2;
        let mem = GuestMemoryMmap::<()>::from_ranges(&[
            (GuestAddress(0), half),
            (GuestAddress(half as u64), region.len() - half),
        ])
        .unwrap_or_else(|e| panic!("guest memory of {} bytes: {e}", region.len()));
        for r in mem.iter() {
            let host = r
                .get_host_address(vm_memory::MemoryRegionAddress(0))
                .unwrap_or_else(|e| panic!("a host mapping: {e}"));
            // SAFETY: advice on the region's own mapping; failure only means no huge pages.
            unsafe { libc::madvise(host.cast(), r.len() as usize, libc::MADV_HUGEPAGE) };
        }
        let chunk = NonZeroUsize::new(CHUNK_PAGES).unwrap_or(NonZeroUsize::MIN);
        let workers = NonZeroUsize::new(threads).unwrap_or(NonZeroUsize::MIN);
        let start = Instant::now();
        // SAFETY: the guest memory is this closure's alone (no vCPU, no device).
        let cleared = unsafe {
            zero_core::guest::clear_guest_memory_parallel(
                &mem,
                GuestAddress(0),
                region.len(),
                &config(),
                chunk,
                workers,
            )
        };
        let d = start.elapsed();
        cleared.unwrap_or_else(|e| panic!("clearing the guest memory: {e}"));
        // A byte of every page reads zero, untimed.
        let mut byte = [0xffu8];
        for at in (0..region.len()).step_by(4096) {
            vm_memory::Bytes::read_slice(&mem, &mut byte, GuestAddress(at as u64))
                .unwrap_or_else(|e| panic!("reading guest memory: {e}"));
            assert_eq!(byte[0], 0, "guest page at {at:#x} not zero");
        }
        d
    })
}

fn populate(cpus: &[usize]) -> Path {
    let cpus = cpus.to_vec();
    Box::new(move |region: &mut [u8]| {
        let fresh = Fresh::new(region.len());
        let start = Instant::now();
        std::thread::scope(|s| {
            for (&cpu, (offset, len)) in cpus.iter().zip(shares(fresh.len, cpus.len())) {
                let fresh = &fresh;
                s.spawn(move || {
                    pin_current_thread(cpu);
                    fresh.populate(offset, len);
                });
            }
        });
        let d = start.elapsed();
        // The kernel zeroed it: check a byte of every page it gave us, untimed.
        // SAFETY: the whole mapping is populated, readable and ours.
        let bytes = unsafe { std::slice::from_raw_parts(fresh.ptr.cast::<u8>(), fresh.len) };
        assert!(bytes.iter().step_by(4096).all(|&b| b == 0));
        d
    })
}

fn timed(mut clear: impl FnMut(&mut [u8]) + 'static) -> Path {
    Box::new(move |region: &mut [u8]| {
        let start = Instant::now();
        clear(region);
        start.elapsed()
    })
}

fn builtins_memset() -> Result<Path, String> {
    let zero = crate::memsets::compiler_builtins_zero()?;
    Ok(timed(move |region: &mut [u8]| {
        // SAFETY: exactly the borrowed, writable region.
        unsafe { zero(region.as_mut_ptr(), region.len()) }
    }))
}

fn config() -> Clearer {
    Clearer::detected(PageSize::Size4KiB, PreemptModel::None)
}

fn parallel_clear(cpus: &[usize]) -> Path {
    let cpus = cpus.to_vec();
    timed(move |region: &mut [u8]| {
        let chunk = NonZeroUsize::new(CHUNK_PAGES).unwrap_or(NonZeroUsize::MIN);
        let job = ParallelClear::new(region, chunk, &config())
            .unwrap_or_else(|e| panic!("ParallelClear on a valid region: {e}"));
        std::thread::scope(|s| {
            for &cpu in &cpus {
                let job = &job;
                s.spawn(move || {
                    pin_current_thread(cpu);
                    job.work(&mut NoResched);
                });
            }
        });
    })
}

impl Section for Prefault {
    fn name(&self) -> &'static str {
        "zeroing guest memory"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        1
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        let bytes = if ctx.quick { 256 * MIB } else { 1 << 30 };
        let cpus = allowed_cpus();
        let n = cpus.len();
        ctx.step(format!(
            "zeroing {}: seven paths interleaved",
            size_name(bytes)
        ));
        let (mut paths, builtins_missing) = paths(&cpus);
        let mut region = Region::new(bytes);
        let buf = region.as_mut_slice();
        let samples = measure(&mut paths, buf, Budget::cell(ctx.quick, 8.0));
        assert!(buf.iter().all(|&b| b == 0), "a path left non-zero bytes");

        let by_name = |prefix: &str| paths.iter().position(|(name, _)| name.starts_with(prefix));
        let populate_all = by_name(&format!("Linux MADV_POPULATE_WRITE (THP), {n}"));
        let builtins = by_name("compiler-builtins");
        let mut columns = vec![
            "path".to_string(),
            "GB/s".into(),
            "÷ Linux populate, 1 thread".into(),
            format!("÷ Linux populate, {n} threads"),
        ];
        if builtins.is_some() {
            columns.push("÷ compiler-builtins memset".into());
        }
        let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
        let mut t = Table::new(
            "prefault",
            &format!(
                "Zeroing {} of memory: the kernel populating it vs memsets vs zero-core (GB/s)",
                size_name(bytes)
            ),
            &cols,
        );
        let versus = |s: &Samples, base: Option<usize>| {
            base.map(|b| Cell::ratio_ci(s.speedup_over(&samples[b])))
        };
        for ((name, _), s) in paths.iter().zip(&samples) {
            let mut row = vec![
                Cell::text(name.as_str()),
                Cell::estimate(s.gbps(bytes), 1, ""),
            ];
            row.extend(versus(s, Some(0)));
            row.push(versus(s, populate_all).unwrap_or_else(|| Cell::text("-")));
            row.extend(versus(s, builtins));
            t.row(row);
        }
        let parallel = &samples[samples.len() - 1];
        let single = &samples[samples.len() - 2];
        if let Some(p) = populate_all {
            ctx.headline(
                format!(
                    "zeroing 1 GiB on {n} threads: zero-core ParallelClear over Linux populate"
                ),
                parallel.speedup_over(&samples[p]),
            );
        }
        if let Some(b) = builtins {
            ctx.headline(
                "zeroing 1 GiB, 1 thread: zero-core over compiler-builtins memset",
                single.speedup_over(&samples[b]),
            );
        }
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .map_or_else(|_| "unknown".into(), |s| s.trim().to_string());
        t.note(format!(
            "Every path ends with {} zeroed and mapped, each path once per round in a shuffled order ({} rounds; median \
             ± the half-width of its 95% interval; ratios per round). The Linux rows time \
             `madvise(MADV_POPULATE_WRITE)` on a fresh private anonymous mapping with \
             `MADV_HUGEPAGE` (transparent huge pages here: {thp}), split into 2 MiB-aligned \
             shares, one thread pinned per core: the kernel allocates each page, zeroes it \
             (clear_huge_page / folio_zero_user) and maps it, which is what a VMM prefaulting \
             guest RAM pays. The other rows clear memory that is already mapped (what a \
             hypervisor or unikernel that owns its memory pays): compiler-builtins' memset is \
             the `memset` a no_std x86_64 kernel links for `write_bytes` (rep stosq with byte \
             heads and tails), glibc's is this hosted binary's; zero-core uses the detected \
             policy with the 32 MiB batches of a kernel without preemption, and ParallelClear \
             hands out {} chunks to one pinned worker per core. The vm-memory row zeroes a \
             fresh `GuestMemoryMmap` of two regions (each its own anonymous mapping, \
             `MADV_HUGEPAGE`) with `zero_core::guest::clear_guest_memory_parallel`, one \
             unpinned thread per core: like the Linux rows it pays the page faults, so it is \
             what a rust-vmm VMM prefaulting guest RAM with zero-core pays instead. It pays \
             twice: the kernel zeroes each fresh page as it faults it in, then zero-core \
             writes it again, so for fresh memory MADV_POPULATE_WRITE is the faster path; \
             zero-core's gain is on guest memory already populated (a reused VM, a balloon's \
             returned pages), the rows below.",
            size_name(bytes),
            samples[0].len(),
            size_name(CHUNK_PAGES * 4096),
        ));
        if let Some(why) = builtins_missing {
            t.note(format!("compiler-builtins memset not measured: {why}."));
        }
        t.plot = Some(
            Plot::new(
                "path",
                "ratio to Linux populate, 1 thread (median, 95% interval)",
                vec![2],
            )
            .ratios(),
        );
        vec![t]
    }
}

/// The paths measured, in their rows' order (the last two: zero-core on one thread, then on
/// every core), and why compiler-builtins' memset is missing if it is.
fn paths(cpus: &[usize]) -> (Vec<(String, Path)>, Option<String>) {
    let n = cpus.len();
    let one = &cpus[n - 1..];
    let mut paths: Vec<(String, Path)> = vec![
        (
            "Linux MADV_POPULATE_WRITE (THP), 1 thread".into(),
            populate(one),
        ),
        (
            format!("Linux MADV_POPULATE_WRITE (THP), {n} threads"),
            populate(cpus),
        ),
    ];
    paths.push((
        format!("zero-core over a vm-memory GuestMemoryMmap (2 regions), {n} threads"),
        guest_memory(n),
    ));
    let builtins_missing = match builtins_memset() {
        Ok(p) => {
            paths.push(("compiler-builtins memset (no_std kernel)".into(), p));
            None
        }
        Err(why) => Some(why),
    };
    paths.push((
        "glibc memset (write_bytes)".into(),
        timed(|region: &mut [u8]| {
            // SAFETY: write_bytes over exactly the borrowed slice.
            unsafe { std::ptr::write_bytes(region.as_mut_ptr(), 0, region.len()) }
        }),
    ));
    paths.push((
        "zero-core clear_contig_pages, 1 thread".into(),
        timed(|region: &mut [u8]| {
            if let Err(e) = clear_contig_pages(region, &config(), &mut NoResched) {
                panic!("clearing a valid region: {e}");
            }
        }),
    ));
    paths.push((
        format!("zero-core ParallelClear, {n} threads"),
        parallel_clear(cpus),
    ));
    (paths, builtins_missing)
}

/// Runs every path once per round in [`round_order`], after one warm-up round, until `budget`
/// is spent; each path's own timing of its zeroing.
fn measure(paths: &mut [(String, Path)], region: &mut [u8], budget: Budget) -> Vec<Samples> {
    for (_, p) in paths.iter_mut() {
        p(region);
    }
    let n = paths.len();
    let mut times = vec![Vec::new(); n];
    budget.run(|round| {
        for i in round_order(round, n) {
            times[i].push((paths[i].1)(region));
        }
    });
    times.into_iter().map(Samples::from_durations).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_range_in_huge_pages() {
        let gib = 1 << 30;
        for workers in 1..=16 {
            let s = shares(gib, workers);
            assert!(s.len() <= workers);
            assert_eq!(s.iter().map(|x| x.1).sum::<usize>(), gib);
            assert!(s.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
            assert!(s.iter().all(|&(o, _)| o % (2 * MIB) == 0));
        }
    }
}
