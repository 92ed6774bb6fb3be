//! `cargo xtask test`: everything CI checks, in stages. `cargo xtask report`: the benchmark
//! report. Dependency-free so that it builds in seconds on a fresh machine.

mod arceos;
mod arceos_today;
mod axvisor;
mod cmd;
mod compare;
mod disk;
mod fuzz;
mod hypervisor_guest;
mod layers;
mod miri;
mod package;
mod setup;
mod stages;
mod starry;
mod x86_kernel;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage:
  cargo xtask test [--only STAGE]... [--skip STAGE]... [--fuzz-seconds N]
  cargo xtask report [REPORT ARGS]...   (cargo xtask report -- --help lists them)
  cargo xtask report [REPORT ARGS]... --compare REPORT.json|COMMIT
                                        (the figures that moved since that report or commit)
  cargo xtask report [REPORT ARGS]... --compare COMMIT --alternate [--layouts N]
                                        (the same, the commit's report run section by section
                                        beside this one; with --layouts, N times, both
                                        programs linked in another function order each time)
  cargo xtask report [REPORT ARGS]... --layouts N
                                        (the report once per layout of its program, N of
                                        them, merged as the runs of one report)
  cargo xtask fuzz --minutes N [TARGET]...     (each fuzz target N minutes: executions, crashes)
  cargo xtask fuzz --executions N [TARGET]...  (each fuzz target N executions)

stages: setup fmt layers clippy test no-std doc package msrv qemu bare-metal arceos-today hypervisor-guest axvisor starry loom miri fuzz bench;
on request: arceos starry-compare";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    match args.first().map(String::as_str) {
        Some("test") => match stages::Options::parse(&args[1..]) {
            Ok(opts) => stages::run_all(&root, &opts),
            Err(e) => {
                eprintln!("xtask test: {e}\n{USAGE}");
                ExitCode::from(2)
            }
        },
        Some("report") => report(&root, &args[1..]),
        Some("fuzz") => fuzz_campaign(&root, &args[1..]),
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// `cargo xtask fuzz (--minutes N | --executions N) [TARGET]...`: installs what fuzzing
/// needs, then runs the campaign (every target, or those named).
fn fuzz_campaign(root: &std::path::Path, args: &[String]) -> ExitCode {
    let budget = match args {
        [flag, n, ..] if flag == "--minutes" => n
            .parse::<u64>()
            .ok()
            .map(|m| fuzz::Budget::Seconds(m.saturating_mul(60))),
        [flag, n, ..] if flag == "--executions" => n.parse().ok().map(fuzz::Budget::Executions),
        _ => None,
    };
    let Some(budget) = budget else {
        eprintln!("xtask fuzz: expected --minutes N or --executions N\n{USAGE}");
        return ExitCode::from(2);
    };
    let only = &args[2..];
    let result = setup::run(root).and_then(|_| fuzz::campaign(root, budget, only));
    match result {
        Ok(summary) => {
            println!("xtask fuzz: {summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask fuzz: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A kernel the report boots before it runs, for the section that reads its figures.
struct Capture {
    /// The section (`--only`'s name for it).
    section: &'static str,
    /// The log under `target/report/`.
    log: &'static str,
    /// The environment variable that names the log to the report.
    env: &'static str,
    /// What the capture does, for the console.
    doing: &'static str,
    /// Boots the kernel and writes the log (`UNAVAILABLE: why` when it cannot).
    run: fn(&std::path::Path, &std::path::Path) -> Result<(), String>,
}

/// The report's captures, in the order they run.
const CAPTURES: [Capture; 4] = [
    Capture {
        section: "ring0",
        log: "ring0-kernel.log",
        env: "ZC_RING0_LOG",
        doing: "booting the x86_64 kernel for its ring-0 measurements",
        run: x86_kernel::capture_measurements,
    },
    Capture {
        section: "ArceOS",
        log: "arceos-qemu.log",
        env: "ZC_ARCEOS_LOG",
        doing: "building ArceOS on both allocators and timing it under QEMU",
        run: arceos::capture_measurements,
    },
    Capture {
        section: "ArceOS today",
        log: "arceos-today-qemu.log",
        env: "ZC_ARCEOS_TODAY_LOG",
        doing: "building today's ArceOS on buddy-sim and on ax-alloc's backends and timing it under QEMU",
        run: arceos_today::capture_measurements,
    },
    Capture {
        section: "hypervisor guest",
        log: "hypervisor-guest.log",
        env: "ZC_HYPERVISOR_GUEST_LOG",
        doing: "booting the EL2 hypervisor with today's ArceOS app as its guest",
        run: hypervisor_guest::capture_measurements,
    },
];

/// Installs what the report needs, then builds and runs the report binary of the `benches`
/// package in release mode.
fn report(root: &std::path::Path, args: &[String]) -> ExitCode {
    match setup::for_report() {
        Ok(summary) => eprintln!("xtask report: prerequisites: {summary}"),
        Err(e) => {
            eprintln!("xtask report: {e}");
            return ExitCode::FAILURE;
        }
    }
    // An earlier commit's report first, when the comparison names one.
    let captured = CAPTURES.map(|c| c.section);
    let (args, layouts, earlier_layouts) = match compare::resolve(root, args, &captured) {
        Ok(r) => (r.args, r.layouts, r.earlier_layouts),
        Err(e) => {
            eprintln!("xtask report: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The kernels' own figures first, each captured for its section (unless `--only` leaves
    // that section out): the x86_64 kernel's ring-0 figures under KVM, then the guests
    // under QEMU.
    let only = compare::only(&args);
    let mut logs = Vec::with_capacity(CAPTURES.len());
    for capture in CAPTURES {
        let log = root.join("target/report").join(capture.log);
        if only.is_empty() || only.contains(&capture.section) {
            eprintln!("xtask report: {}", capture.doing);
            if let Err(e) = (capture.run)(root, &log) {
                eprintln!("xtask report: {e}");
                return ExitCode::FAILURE;
            }
        }
        logs.push((capture.env, log));
    }
    let result = match layouts {
        Some(n) => report_in_layouts(root, &args, n, earlier_layouts.as_deref(), &logs),
        None => {
            let mut c = cmd::cargo(root);
            c.envs(logs).args([
                "run",
                "--release",
                "--quiet",
                "-p",
                "benches",
                "--bin",
                "report",
                "--",
            ]);
            c.args(&args);
            cmd::status(&mut c)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask report: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--layouts N`: this checkout's report program linked in `n` layouts, the report run once
/// per layout (written under `OUT/layouts/k/`, that folder cleared first), then merged as
/// the runs of one report under `OUT/layouts/` (`report layouts`). With `--compare COMMIT
/// --alternate`, `earlier` holds the earlier program of each layout: run `k` pairs both
/// programs' layout `k`, and the comparison over all their pairs goes under `OUT/layouts/`
/// too. `logs` names the kernels' logs (variable, file); the programs run in the workspace,
/// as the report's `cargo run` does.
fn report_in_layouts(
    root: &std::path::Path,
    args: &[String],
    n: usize,
    earlier: Option<&[PathBuf]>,
    logs: &[(&str, PathBuf)],
) -> Result<(), String> {
    let programs = compare::link_layouts(root, n, &|| cmd::cargo(root))?;
    // The usual program again: it merges and compares the runs, and stays what
    // `target/release/report` is.
    cmd::status(cmd::cargo(root).args(["build", "--release", "-p", "benches", "--bin", "report"]))?;
    let out = compare::out(args).unwrap_or_else(|| "target/report".into());
    let out = PathBuf::from(out).join("layouts");
    // An earlier run's layouts (more of them, or another commit's) would stay beside
    // these, unread but looking current; `out` is the workspace's, where the programs run.
    let stale = root.join(&out);
    if stale.exists() {
        std::fs::remove_dir_all(&stale)
            .map_err(|e| format!("clearing {} for the layouts: {e}", stale.display()))?;
    }
    let args = compare::without_out(args);
    let in_root = |program: &std::path::Path| {
        let mut c = std::process::Command::new(program);
        c.current_dir(root);
        c
    };
    let (mut reports, mut pair_files) = (Vec::new(), Vec::new());
    for (k, now) in programs.iter().enumerate() {
        let dir = out.join((k + 1).to_string());
        eprintln!(
            "xtask report: layout {} of {n}, into {}",
            k + 1,
            dir.display()
        );
        let mut c = in_root(now);
        c.args(&args).envs(logs.iter().map(|(var, log)| (var, log)));
        if let Some(before) = earlier.and_then(|e| e.get(k)) {
            c.arg("--alternate-program").arg(before);
            pair_files.push(dir.join("alternated-pairs.json"));
        }
        cmd::status(c.arg("--out").arg(&dir))?;
        reports.push(dir.join("report.json"));
    }
    let report = root.join("target/release/report");
    cmd::status(
        in_root(&report)
            .arg("layouts")
            .args(&reports)
            .arg("--out")
            .arg(&out),
    )?;
    if pair_files.is_empty() {
        return Ok(());
    }
    cmd::status(
        in_root(&report)
            .args(["compare", "--pairs"])
            .args(&pair_files)
            .arg("--out")
            .arg(&out),
    )
}

fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
