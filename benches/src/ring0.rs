//! The "ring 0 (KVM guest)" section: the x86_64 kernel's own measurements, taken in ring 0 on
//! its live page tables at native speed under KVM, beside the user-space figures.
//!
//! `cargo xtask report` boots the kernel (`kernel/`, `-append measure`, `-m 2G`) under
//! hardware KVM before the report runs and leaves its console output in the file named by
//! `ZC_RING0_LOG`; where KVM is missing, or is `kvm_pvm` (which emulates a guest's ring 0,
//! so its timings mean nothing), the file's first line says `UNAVAILABLE: why`. This module
//! parses the kernel's block (`MEASURE BEGIN` ... `MEASURE END`, one `sample NAME BYTES NS...`
//! line per figure) into the same medians and intervals as every other section.

use crate::measure::Estimate;
use crate::report::thread;
use crate::{Cell, Section, SectionContext, Table};
use std::collections::BTreeMap;

/// The section.
pub struct Ring0;

/// The environment variable naming the kernel's captured console output.
pub const LOG_ENV: &str = "ZC_RING0_LOG";

/// One figure: its byte count and samples in nanoseconds per operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Bytes one operation covers.
    pub bytes: usize,
    /// Nanoseconds per operation, one per sample.
    pub ns: Vec<f64>,
}

impl Figure {
    /// GB/s (10^9 bytes per second) of each sample, as median and interval.
    fn gbps(&self) -> Estimate {
        Estimate::of(self.ns.iter().map(|ns| self.bytes as f64 / ns))
    }

    /// The median and interval of the samples, scaled by `k`.
    fn time(&self, k: f64) -> Estimate {
        Estimate::of(self.ns.iter().map(|ns| ns * k))
    }
}

/// The kernel's measurement block.
#[derive(Debug, Default, PartialEq)]
pub struct Block {
    /// The TSC frequency the kernel calibrated against the PIT.
    pub tsc_hz: u64,
    /// Whether the kernel saw KVM's signature.
    pub kvm: bool,
    /// Figures by `name@bytes`.
    pub figures: BTreeMap<String, Figure>,
}

/// Parses the kernel's console output.
///
/// # Errors
/// The `UNAVAILABLE` reason the capture recorded, or what is missing from the block.
pub fn parse(log: &str) -> Result<Block, String> {
    let log = crate::capture::available(log)?;
    let mut block = Block::default();
    let mut inside = false;
    let mut ended = false;
    for line in log.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("MEASURE BEGIN") {
            inside = true;
            for kv in rest.split_whitespace() {
                match kv.split_once('=') {
                    Some(("tsc_hz", v)) => {
                        block.tsc_hz = v.parse().map_err(|e| format!("tsc_hz: {e}"))?
                    }
                    Some(("kvm", v)) => block.kvm = v == "true",
                    _ => {}
                }
            }
        } else if line == "MEASURE END" {
            ended = inside;
            inside = false;
        } else if let Some(rest) = line.strip_prefix("sample ").filter(|_| inside) {
            let mut words = rest.split_whitespace();
            let name = words.next().ok_or("a sample line without a name")?;
            let bytes: usize = words
                .next()
                .ok_or("a sample line without bytes")?
                .parse()
                .map_err(|e| format!("{name}: bytes: {e}"))?;
            let ns = words
                .map(|w| w.parse::<f64>().map_err(|e| format!("{name}: {w}: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            if ns.is_empty() {
                return Err(format!("{name}: no samples"));
            }
            block
                .figures
                .insert(format!("{name}@{bytes}"), Figure { bytes, ns });
        } else if let Some(why) = line.strip_prefix("MEASURE SKIPPED: ") {
            return Err(format!("the kernel skipped its measurements: {why}"));
        } else if let Some(rest) = line.strip_prefix("FAIL ") {
            return Err(format!("the kernel failed: {rest}"));
        }
    }
    if !ended {
        return Err("no complete MEASURE BEGIN .. MEASURE END block in the kernel's output".into());
    }
    Ok(block)
}

impl Block {
    fn get(&self, name: &str, bytes: usize) -> Option<&Figure> {
        self.figures.get(&format!("{name}@{bytes}"))
    }

    /// Strategy names (`strategy:NAME`), alphabetically.
    fn strategies(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .figures
            .keys()
            .filter_map(|k| k.strip_prefix("strategy:")?.split('@').next())
            .map(str::to_string)
            .collect();
        v.dedup();
        v
    }
}

/// `a / b` of two independent medians, with the interval from the ends of theirs
/// (conservative: the lowest over the highest and the reverse).
fn quotient(a: Estimate, b: Estimate) -> Estimate {
    Estimate {
        median: a.median / b.median,
        lo: a.lo / b.hi,
        hi: a.hi / b.lo,
        ..a
    }
}

const EXTENTS: [usize; 6] = [4 << 10, 64 << 10, 2 << 20, 32 << 20, 256 << 20, 1 << 30];

fn size(bytes: usize) -> String {
    crate::measure::size_name(bytes)
}

/// The tables of a parsed block.
#[must_use]
pub fn tables(block: &Block) -> Vec<Table> {
    vec![
        strategies_table(block),
        folio_table(block),
        batches_table(block),
        kernel_paths_table(block),
    ]
}

/// Where the ring-0 figures come from.
fn source(block: &Block) -> String {
    format!(
        "Measured in ring 0 by the x86_64 kernel (kernel/) under KVM at native speed, on its \
     own page tables; times from the TSC ({:.3} GHz, calibrated against the PIT). Median \
     of the samples with the 95% interval; the kernel prints raw samples, the report \
     computes these as for the user-space sections.",
        block.tsc_hz as f64 / 1e9
    )
}

/// Clearing bandwidth by strategy and extent, and zero-core's policy.
fn strategies_table(block: &Block) -> Table {
    let mut columns = vec!["strategy".to_string()];
    columns.extend(EXTENTS.iter().map(|&b| size(b)));
    let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "ring0-strategies",
        "Ring 0: clearing bandwidth by strategy and extent (GB/s)",
        &cols,
    );
    let mut names = block.strategies();
    names.push("policy".into());
    for name in &names {
        let key = if name == "policy" {
            "policy".to_string()
        } else {
            format!("strategy:{name}")
        };
        let mut row = vec![Cell::text(name.replace('-', " "))];
        for b in EXTENTS {
            row.push(match block.get(&key, b) {
                Some(f) => Cell::estimate(f.gbps(), 1, ""),
                None => Cell::text("-"),
            });
        }
        t.row(row);
    }
    t.notes.push(source(block));
    t.notes.push(
        "The same extents as the user-space clearing section; `policy` is zero-core's detected \
         policy (what `clear_contig_pages` uses)."
            .into(),
    );
    t
}

/// A folio cleared page at a time vs as one extent.
fn folio_table(block: &Block) -> Table {
    let published = format!("published ({})", thread::FOLIO_ZERO_USER_SHORT);
    let mut t = Table::new(
        "ring0-folio",
        "Ring 0: a folio cleared page at a time vs as one extent (GB/s)",
        &["folio", "page-at-a-time", "one extent", "ratio", &published],
    );
    for (bytes, figure) in [(2 << 20, "1.32x"), (1 << 30, "2.44x")] {
        if let (Some(p), Some(e)) = (
            block.get("folio-page-at-a-time", bytes),
            block.get("folio-extent", bytes),
        ) {
            let (pg, ex) = (p.gbps(), e.gbps());
            t.row(vec![
                Cell::text(size(bytes)),
                Cell::estimate(pg, 1, ""),
                Cell::estimate(ex, 1, ""),
                Cell::ratio_ci(quotient(ex, pg)),
                Cell::text(figure),
            ]);
        }
    }
    t.notes.push(format!(
        "The folio_zero_user() patch's experiment in the kind of kernel it came from ({}). The ratio is of the \
         two medians, its interval from the ends of theirs.",
        thread::FOLIO_ZERO_USER
    ));
    t
}

/// The longest cooperative batch clearing 1 GiB.
fn batches_table(block: &Block) -> Table {
    let mut t = Table::new(
        "ring0-batches",
        "Ring 0: the longest cooperative batch clearing 1 GiB (ms)",
        &["batch", "worst batch ms"],
    );
    for mib in [8usize, 32, 64] {
        if let Some(f) = block.get(&format!("worst-batch:{mib}MiB"), mib << 20) {
            t.row(vec![
                Cell::text(format!("{mib} MiB")),
                Cell::estimate(f.time(1e-6), 2, ""),
            ]);
        }
    }
    t.notes.push(
        "Each sample is the longest time between two cond_resched() calls over one 1 GiB clear \
         with PreemptModel::Voluntary: the preemption latency the batch size buys."
            .into(),
    );
    t
}

/// The free loop and the young-clearing pass in the kernel, batched vs one by one.
fn kernel_paths_table(block: &Block) -> Table {
    let mut t = Table::new(
        "ring0-kernel-paths",
        "Ring 0: the free loop and the young-clearing pass, batched vs one by one (µs)",
        &["operation", "one by one", "batched", "ratio", "published"],
    );
    for (what, per, batched, figure) in [
        (
            "free a 512-page run (free_contig_range)",
            "free-per-page",
            "free-batched",
            format!("5.61x ({})", thread::FREE_CONTIG_RANGE_SHORT),
        ),
        (
            "age 1024 live x86 entries, every page young",
            "young-per-entry",
            "young-batched",
            format!("2.61x arm64 ({})", thread::YOUNG_PTES_SHORT),
        ),
    ] {
        let per = block
            .figures
            .iter()
            .find(|(k, _)| k.starts_with(&format!("{per}@")));
        let bat = block
            .figures
            .iter()
            .find(|(k, _)| k.starts_with(&format!("{batched}@")));
        if let (Some((_, p)), Some((_, b))) = (per, bat) {
            let (p, b) = (p.time(1e-3), b.time(1e-3));
            t.row(vec![
                Cell::text(what),
                Cell::estimate(p, 1, ""),
                Cell::estimate(b, 1, ""),
                Cell::ratio_ci(quotient(p, b)),
                Cell::text(figure),
            ]);
        }
    }
    t.notes.push(
        "The zone and the page tables are the kernel's own: buddy-sim over the firmware's \
         memory map, pte-batch on the level-1 tables the MMU walks (x86 has no contiguous \
         hint, so the batching is folio_pte_batch over 16-page folios)."
            .into(),
    );
    t
}

impl Section for Ring0 {
    fn name(&self) -> &'static str {
        "ring0"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        1
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        ctx.step("ring 0: reading the x86_64 kernel's measurements");
        let log = crate::capture::read(LOG_ENV);
        match log.and_then(|l| parse(&l)) {
            Ok(block) => tables(&block),
            Err(why) => {
                let mut t = Table::new(
                    "ring0-unavailable",
                    "Ring 0 (KVM guest): no figures on this machine",
                    &["why"],
                );
                t.row(vec![Cell::text(why)]);
                t.notes.push(
                    "The x86_64 kernel still boots and passes its checks under TCG in `cargo \
                     xtask test`; only its timings need hardware KVM. The other sections are \
                     unaffected."
                        .into(),
                );
                vec![t]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
unikernel-x86_64: booted
MEASURE BEGIN tsc_hz=2450000000 kvm=true
sample strategy:rep-stosb 4096 100.0 110.0 90.0
sample strategy:rep-stosb 1073741824 50000000.0 51000000.0 49000000.0
sample policy 4096 95.0 96.0 97.0
sample folio-page-at-a-time 2097152 200000.0 210000.0 190000.0
sample folio-extent 2097152 100000.0 105000.0 95000.0
sample worst-batch:8MiB 8388608 3000000.0 3100000.0
sample free-batched 2097152 20000.0 21000.0
sample free-per-page 2097152 160000.0 150000.0
sample young-batched 4194304 130000.0 140000.0
sample young-per-entry 4194304 580000.0 600000.0
MEASURE END
PASS
";

    #[test]
    fn a_block_parses_into_figures_and_tables() {
        let b = parse(LOG).unwrap();
        assert_eq!(b.tsc_hz, 2_450_000_000);
        assert!(b.kvm);
        assert_eq!(b.strategies(), ["rep-stosb"]);
        let f = b.get("strategy:rep-stosb", 4096).unwrap();
        assert!((f.gbps().median - 40.96).abs() < 0.01);
        let t = tables(&b);
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].rows.len(), 2);
        assert_eq!(t[1].rows.len(), 1);
        assert_eq!(t[3].rows.len(), 2);
    }

    #[test]
    fn missing_or_broken_blocks_say_why() {
        assert_eq!(parse("UNAVAILABLE: no KVM\n").unwrap_err(), "no KVM");
        assert!(parse("MEASURE BEGIN tsc_hz=1\nsample x 1 2\n").is_err());
        assert!(parse("MEASURE BEGIN tsc_hz=1\nsample x 1\nMEASURE END\n").is_err());
        assert!(
            parse("FAIL Zone (exit 2): no zone\n")
                .unwrap_err()
                .contains("no zone")
        );
    }
}
