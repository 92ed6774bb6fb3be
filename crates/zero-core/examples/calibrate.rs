//! Boot-time calibration, as a kernel would run it once per CPU model: time the strategies on
//! this CPU with `Policy::calibrate`, then clear a 256 MiB extent with the calibrated policy on
//! every core at once (`ParallelClear`), and check it.
//!
//! `cargo run --release --example calibrate`

use std::num::NonZeroUsize;
use std::time::Instant;
use zero_core::{ClearConfig, NoResched, PageSize, ParallelClear, Policy, PreemptModel, Strategy};

fn describe(p: &Policy) -> String {
    let small = match p.small_below() {
        0 => String::new(),
        below => format!("{} below {} KiB, then ", p.small().name(), below >> 10),
    };
    format!(
        "temporal {small}{}, streaming {} from {} KiB (cold memory from {} KiB)",
        p.temporal().name(),
        p.streaming().map_or("none", Strategy::name),
        p.streaming_threshold().min(usize::MAX >> 10) >> 10,
        p.cold_threshold().min(usize::MAX >> 10) >> 10
    )
}

fn main() -> Result<(), zero_core::ZeroError> {
    // The scratch buffer: twice a common last-level cache, faulted in first.
    let mut scratch = vec![1u8; 64 << 20];
    let origin = Instant::now();
    let calibration = Policy::calibrate(&mut scratch, &mut || {
        u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    });
    println!("detected:   {}", describe(&Policy::detect()));
    println!(
        "calibrated: {} ({:?} in {:.1} ms)",
        describe(&calibration.policy),
        calibration.outcome,
        calibration.elapsed_ns as f64 / 1e6
    );

    let pages = (256 << 20) / 4096;
    let mut backing = vec![0xA5u8; (pages + 1) * 4096];
    let at = backing.as_ptr().align_offset(4096);
    let extent = &mut backing[at..at + pages * 4096];
    let clearer = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
        .with_policy(calibration.policy)
        .validate()?;
    let chunk = NonZeroUsize::new(2048).expect("non-zero"); // 8 MiB per claim
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let start = Instant::now();
    let job = ParallelClear::new(extent, chunk, &clearer)?;
    std::thread::scope(|s| {
        for _ in 0..cores {
            s.spawn(|| job.work(&mut NoResched));
        }
    });
    let took = start.elapsed();
    assert!(extent.iter().all(|&b| b == 0));
    println!(
        "cleared 256 MiB on {cores} cores in {:.1} ms ({:.1} GB/s)",
        took.as_secs_f64() * 1e3,
        (256u64 << 20) as f64 / took.as_secs_f64() / 1e9
    );
    Ok(())
}
