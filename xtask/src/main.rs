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
    let args = match compare::resolve(root, args) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("xtask report: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The ring-0 section's figures: the x86_64 kernel's own, booted under KVM first (unless
    // `--only` leaves that section out).
    let only: Vec<&String> = args
        .iter()
        .zip(args.iter().skip(1))
        .filter(|(flag, _)| flag.as_str() == "--only")
        .map(|(_, v)| v)
        .collect();
    let ring0_log = root.join("target/report/ring0-kernel.log");
    if only.is_empty() || only.iter().any(|o| o.as_str() == "ring0") {
        eprintln!("xtask report: booting the x86_64 kernel for its ring-0 measurements");
        if let Err(e) = x86_kernel::capture_measurements(root, &ring0_log) {
            eprintln!("xtask report: {e}");
            return ExitCode::FAILURE;
        }
    }
    let arceos_log = root.join("target/report/arceos-qemu.log");
    if only.is_empty() || only.iter().any(|o| o.as_str() == "ArceOS") {
        eprintln!("xtask report: building ArceOS on both allocators and timing it under QEMU");
        if let Err(e) = arceos::capture_measurements(root, &arceos_log) {
            eprintln!("xtask report: {e}");
            return ExitCode::FAILURE;
        }
    }
    let today_log = root.join("target/report/arceos-today-qemu.log");
    if only.is_empty() || only.iter().any(|o| o.as_str() == "ArceOS today") {
        eprintln!(
            "xtask report: building today's ArceOS on buddy-sim and on ax-alloc's backends and timing it under QEMU"
        );
        if let Err(e) = arceos_today::capture_measurements(root, &today_log) {
            eprintln!("xtask report: {e}");
            return ExitCode::FAILURE;
        }
    }
    let guest_log = root.join("target/report/hypervisor-guest.log");
    if only.is_empty() || only.iter().any(|o| o.as_str() == "hypervisor guest") {
        eprintln!("xtask report: booting the EL2 hypervisor with today's ArceOS app as its guest");
        if let Err(e) = hypervisor_guest::capture_measurements(root, &guest_log) {
            eprintln!("xtask report: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut c = cmd::cargo(root);
    c.env("ZC_ARCEOS_LOG", &arceos_log);
    c.env("ZC_ARCEOS_TODAY_LOG", &today_log);
    c.env("ZC_HYPERVISOR_GUEST_LOG", &guest_log);
    c.env("ZC_RING0_LOG", &ring0_log).args([
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
    match cmd::status(&mut c) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask report: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
