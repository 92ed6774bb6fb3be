//! Running the fuzz targets: for a fixed time or number of executions each, counting
//! executions and crashes. The `fuzz` stage of `cargo xtask test` runs every target for
//! seconds; `cargo xtask fuzz` is a campaign of minutes or millions of executions per target.
//!
//! How the targets are built and run, for throughput (every target above 20 000 inputs per
//! second on one Zen 4 core from the committed seeds, whose long inputs run up to 256
//! operations each):
//! - libFuzzer itself is built without AddressSanitizer (`CXXFLAGS=-fno-sanitize=address`:
//!   the `cc` crate instruments C++ for the sanitizer rustc uses unless told not to), as
//!   clang's `-fsanitize=fuzzer` links it: its per-input feature loop was a third of the
//!   stateful targets' time. The targets and the crates under test keep the sanitizer.
//! - AddressSanitizer runs with every check but stack-use-after-return: that mode gives each
//!   call with addressable locals a heap-allocated frame (a fifth of `smp_ops`' time while
//!   libFuzzer was instrumented too, a few percent since). Returning a pointer to a dead
//!   local takes `unsafe` code, which the
//!   targets' crates keep to a few audited places none of which takes a local's address
//!   (pte-batch forbids it; buddy-sim denies it outside zone construction and its memory
//!   access; zero-core writes through pointers its callers own).
//! - No comparison tracing (`--no-trace-compares`): the inputs are structured (`arbitrary`),
//!   so libFuzzer's table of compared values buys little, while the callbacks took two
//!   thirds of the stateful targets' time (three times the executions without them, and as
//!   many edges reached in the same time or more).

use std::path::Path;
use std::process::Stdio;

use crate::cmd::{self, nightly_cargo};

/// The ASan options every target runs with (see the module docs).
const ASAN_OPTIONS: &str = "detect_stack_use_after_return=0";

/// How long each target runs.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// Seconds of fuzzing.
    Seconds(u64),
    /// Executions (inputs run), however long they take.
    Executions(u64),
}

/// What one target's run did.
pub struct TargetRun {
    /// The target's name.
    pub target: String,
    /// Inputs executed (libFuzzer's `stat::number_of_executed_units`).
    pub executions: u64,
    /// Seconds it ran (libFuzzer's `stat::total_time`, else the wall time of the run, build
    /// check included).
    pub seconds: u64,
    /// The crashing input libFuzzer wrote, if it found one (it stops at the first).
    pub crash: Option<String>,
}

impl TargetRun {
    /// Executions per second.
    pub fn rate(&self) -> u64 {
        self.executions / self.seconds.max(1)
    }
}

/// The fuzz targets, as cargo-fuzz itself lists them.
pub fn targets(root: &Path) -> Result<Vec<String>, String> {
    let out = cmd::output_echoed(nightly_cargo(root).args(["fuzz", "list"]))?;
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// `cargo fuzz` with the subcommand and this module's build flags.
fn cargo_fuzz(root: &Path, subcommand: &str) -> std::process::Command {
    let mut c = nightly_cargo(root);
    c.args(["fuzz", subcommand, "--no-trace-compares"])
        .env("CXXFLAGS", "-fno-sanitize=address");
    c
}

/// Builds every target (or those named in `only`), then runs each within `budget` on its
/// working corpus (`fuzz/corpus/TARGET`, not committed) and its committed seeds
/// (`fuzz/seeds/TARGET`, a minimized corpus: `cargo fuzz cmin`), one target per core at a
/// time (libFuzzer runs one thread), echoing each target's output when it ends.
pub fn run_all(root: &Path, budget: Budget, only: &[String]) -> Result<Vec<TargetRun>, String> {
    let mut targets = targets(root)?;
    if let Some(unknown) = only.iter().find(|t| !targets.contains(t)) {
        return Err(format!(
            "no fuzz target `{unknown}` (targets: {})",
            targets.join(", ")
        ));
    }
    if !only.is_empty() {
        targets.retain(|t| only.contains(t));
    }
    cmd::status(&mut cargo_fuzz(root, "build"))?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    cmd::on_workers(&targets, workers, |target, _| run_one(root, target, budget))
}

/// Runs `target` within `budget`; its output (libFuzzer's, on stderr) is printed whole when
/// it ends, so that targets running side by side do not interleave their lines.
fn run_one(root: &Path, target: &str, budget: Budget) -> Result<TargetRun, String> {
    use std::io::{BufRead, BufReader};
    let limit = match budget {
        Budget::Seconds(s) => format!("-max_total_time={s}"),
        Budget::Executions(n) => format!("-runs={n}"),
    };
    // The working corpus (new inputs go there, ignored by git) and the committed seeds.
    let corpus = root.join("fuzz/corpus").join(target);
    let seeds = root.join("fuzz/seeds").join(target);
    std::fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
    let mut c = cargo_fuzz(root, "run");
    c.arg(target).arg(&corpus);
    if seeds.is_dir() {
        c.arg(&seeds);
    }
    c.args(["--", &limit, "-print_final_stats=1"]);
    c.env("ASAN_OPTIONS", ASAN_OPTIONS);
    println!("    $ {}", cmd::describe(&c));
    let started = std::time::Instant::now();
    let mut child = c
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{}` could not start: {e}", cmd::describe(&c)))?;
    let (mut executions, mut total_time, mut crash) = (0, None, None);
    let mut output = String::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            output.push_str(&line);
            output.push('\n');
            let stat = |name: &str| {
                line.strip_prefix(name)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            if let Some(n) = stat("stat::number_of_executed_units:") {
                executions = n;
            } else if let Some(s) = stat("stat::total_time:") {
                total_time = Some(s);
            } else if let Some((_, path)) = line.split_once("Test unit written to ") {
                crash = Some(path.trim().to_string());
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("`{}`: {e}", cmd::describe(&c)))?;
    eprint!("{output}");
    println!(
        "    {target}: {executions} executions in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if !status.success() && crash.is_none() {
        return Err(format!(
            "`{}` failed ({status}) without a crashing input",
            cmd::describe(&c)
        ));
    }
    Ok(TargetRun {
        target: target.to_string(),
        executions,
        seconds: total_time.unwrap_or_else(|| started.elapsed().as_secs()),
        crash,
    })
}

/// `cargo xtask fuzz`: every target (or those in `only`) within `budget`, then a table of
/// executions, rates and crashes. Fails if any target crashed.
pub fn campaign(root: &Path, budget: Budget, only: &[String]) -> Result<String, String> {
    let runs = run_all(root, budget, only)?;
    println!("\n| target | executions | executions/s | crashes |");
    println!("|---|---|---|---|");
    for r in &runs {
        let crash = r
            .crash
            .as_deref()
            .map_or("0".to_string(), |p| format!("1: {p}"));
        println!(
            "| {} | {} | {} | {crash} |",
            r.target,
            r.executions,
            r.rate()
        );
    }
    let crashed: Vec<&str> = runs
        .iter()
        .filter(|r| r.crash.is_some())
        .map(|r| r.target.as_str())
        .collect();
    if crashed.is_empty() {
        Ok(format!("{} targets, {budget:?} each, no crash", runs.len()))
    } else {
        Err(format!("crashes in {}", crashed.join(", ")))
    }
}

/// One line per target for the stage summary: `name N exec (R/s)`.
pub fn summary(runs: &[TargetRun]) -> String {
    runs.iter()
        .map(|r| format!("{} {} exec ({}/s)", r.target, r.executions, r.rate()))
        .collect::<Vec<_>>()
        .join(", ")
}
