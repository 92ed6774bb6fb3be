//! The "machine" section: what the numbers of every other section were measured on.

use crate::measure::{meminfo, size_name};
use crate::{Cell, Plot, Section, SectionContext, Table};

/// CPU, features, caches, cores, memory, kernel and THP setting.
pub struct Machine;

/// The CPU's full brand string (CPUID on x86_64, `/proc/cpuinfo` elsewhere).
#[must_use]
pub fn cpu_brand() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        arch_x86::cpu::brand().as_str().trim().to_string()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        info.lines()
            .find(|l| l.starts_with("model name") || l.starts_with("CPU part"))
            .and_then(|l| l.split(':').nth(1))
            .map_or_else(|| "unknown".into(), |v| v.trim().to_string())
    }
}

/// Now, as `YYYY-MM-DD HH:MM UTC`.
#[must_use]
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar (Howard
/// Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".into(), |s| s.trim().to_string())
}

fn yes_no(b: bool) -> Cell {
    Cell::text(if b { "yes" } else { "no" })
}

impl Section for Machine {
    fn name(&self) -> &'static str {
        "machine"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        1
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        ctx.step("machine");
        let mut t = Table::new("machine", "Machine", &["what", "value"]);
        let mut caches = Table::new(
            "machine-caches",
            "Cache hierarchy as CPUID reports it",
            &["cache", "size KiB", "line B", "shared by"],
        );
        cpu_rows(&mut t, &mut caches);
        let cores = crate::measure::allowed_cpus().len();
        t.row(vec![
            Cell::text("cores (available)"),
            Cell::num(cores as f64, 0, ""),
        ]);
        let mem = meminfo("MemTotal:").unwrap_or(0) as f64 / f64::from(1u32 << 30);
        t.row(vec![Cell::text("memory"), Cell::num(mem, 1, " GiB")]);
        t.row(vec![
            Cell::text("kernel"),
            Cell::text(read_trimmed("/proc/sys/kernel/osrelease")),
        ]);
        t.row(vec![
            Cell::text("transparent huge pages"),
            Cell::text(read_trimmed("/sys/kernel/mm/transparent_hugepage/enabled")),
        ]);
        t.note(
            "Features are CPUID's (AVX2/AVX-512F also need the OS to enable their state in \
             XCR0). Under a hypervisor the reported caches may not match what store bandwidth \
             shows: the clearing section measures instead of trusting them.",
        );
        caches.plot = Some(Plot::new("cache", "size (KiB)", vec![1]).log());
        vec![t, caches]
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_rows(t: &mut Table, caches: &mut Table) {
    use arch_x86::cpu::{self, CacheKind};
    let f = cpu::features();
    t.row(vec![Cell::text("CPU"), Cell::text(cpu_brand())]);
    t.row(vec![
        Cell::text("vendor"),
        Cell::text(format!("{:?}", f.vendor)),
    ]);
    t.row(vec![
        Cell::text("family / model"),
        Cell::text(format!("{:#x} / {:#x}", f.family, f.model)),
    ]);
    for (name, has) in [
        ("ERMS", f.erms),
        ("FSRM", f.fsrm),
        ("FZRM", f.fzrm),
        ("FSRS", f.fsrs),
        ("REP_GOOD (derived)", f.rep_good),
        ("AVX2", f.avx2),
        ("AVX-512F", f.avx512f),
        ("CLZERO", f.clzero),
        ("hypervisor bit", f.hypervisor),
    ] {
        t.row(vec![Cell::text(name), yes_no(has)]);
    }
    for c in cpu::caches().iter() {
        let kind = match c.kind {
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
            CacheKind::Unified => "",
        };
        let name = format!("L{}{kind}", c.level);
        t.row(vec![
            Cell::text(format!("{name} cache")),
            Cell::text(format!(
                "{} (line {} B, shared by up to {})",
                size_name(c.size),
                c.line,
                c.shared_by
            )),
        ]);
        caches.row(vec![
            Cell::text(name),
            Cell::num((c.size / 1024) as f64, 0, ""),
            Cell::num(c.line as f64, 0, ""),
            Cell::num(f64::from(c.shared_by), 0, ""),
        ]);
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_rows(t: &mut Table, _caches: &mut Table) {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split(':').nth(1))
            .map_or("unknown".to_string(), |v| v.trim().to_string())
    };
    t.row(vec![
        Cell::text("CPU implementer / part"),
        Cell::text(format!(
            "{} / {}",
            field("CPU implementer"),
            field("CPU part")
        )),
    ]);
    t.row(vec![Cell::text("features"), Cell::text(field("Features"))]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(super::civil_from_days(20_780), (2026, 11, 23));
    }
}
