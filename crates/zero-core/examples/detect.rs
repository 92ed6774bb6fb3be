//! Prints the strategies this CPU can execute and what the detected policy chooses, then
//! clears a buffer with each choice: a one-look check of which paths a machine runs.

use zero_core::{
    ClearConfig, Locality, NoResched, PageSize, Policy, PreemptModel, Strategy, Temperature,
    clear_contig_pages,
};

fn main() -> Result<(), zero_core::ZeroError> {
    let available: Vec<&str> = Strategy::available().map(Strategy::name).collect();
    let policy = Policy::detect();
    println!(
        "zero-core on {}: available strategies: {}",
        std::env::consts::ARCH,
        available.join(", ")
    );
    println!(
        "zero-core policy: temporal {}, streaming {} from {} MiB (cold memory from {} KiB)",
        policy.temporal().name(),
        policy.streaming().map_or("none", Strategy::name),
        policy.streaming_threshold() >> 20,
        policy.cold_threshold() >> 10
    );
    let pages = 2 * (policy.streaming_threshold() >> 12).max(1);
    let mut backing = vec![0xA5u8; (pages + 1) * 4096];
    let at = backing.as_ptr().align_offset(4096);
    let buf = &mut backing[at..at + pages * 4096];
    let cfg = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None)
        .with_policy(policy)
        .validate()?;
    for (what, len) in [("small extent", 4096), ("large extent", buf.len())] {
        buf[..len].fill(0xA5);
        clear_contig_pages(&mut buf[..len], &cfg, &mut NoResched)?;
        assert!(buf[..len].iter().all(|&b| b == 0), "{what} not cleared");
        println!(
            "zero-core policy: {what} ({} KiB) cleared with {}",
            len >> 10,
            policy.choose(len, Locality::Unknown).name()
        );
    }
    // Memory the caller knows is cold (a VMM's guest memory): streams from the cold threshold.
    let cold = cfg.with_memory(Temperature::Cold);
    let len = policy.cold_threshold().clamp(4096, buf.len());
    buf[..len].fill(0xA5);
    clear_contig_pages(&mut buf[..len], &cold, &mut NoResched)?;
    assert!(
        buf[..len].iter().all(|&b| b == 0),
        "cold extent not cleared"
    );
    println!(
        "zero-core policy: cold extent ({} KiB) cleared with {}",
        len >> 10,
        policy.choose(len, Locality::Cold).name()
    );
    Ok(())
}
