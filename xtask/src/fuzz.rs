//! Running the fuzz targets: for a fixed time each, counting executions and crashes. The
//! `fuzz` stage of `cargo xtask test` runs every target for seconds; `cargo xtask fuzz
//! --minutes N` is a campaign of minutes per target.

use std::path::Path;
use std::process::Stdio;

use crate::cmd::{self, nightly_cargo};

/// What one target's run did.
pub struct TargetRun {
    /// The target's name.
    pub target: String,
    /// Inputs executed (libFuzzer's `stat::number_of_executed_units`).
    pub executions: u64,
    /// Seconds it ran (libFuzzer's `stat::total_time`, else the time asked for).
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

/// Builds every target, then runs each for `seconds` on its working corpus
/// (`fuzz/corpus/TARGET`, not committed) and its committed seeds (`fuzz/seeds/TARGET`, a
/// minimized corpus: `cargo fuzz cmin`), echoing libFuzzer's output.
pub fn run_all(root: &Path, seconds: u64) -> Result<Vec<TargetRun>, String> {
    let targets = targets(root)?;
    cmd::status(nightly_cargo(root).args(["fuzz", "build"]))?;
    targets.iter().map(|t| run_one(root, t, seconds)).collect()
}

fn run_one(root: &Path, target: &str, seconds: u64) -> Result<TargetRun, String> {
    use std::io::{BufRead, BufReader};
    let time = format!("-max_total_time={seconds}");
    // The working corpus (new inputs go there, ignored by git) and the committed seeds.
    let corpus = root.join("fuzz/corpus").join(target);
    let seeds = root.join("fuzz/seeds").join(target);
    std::fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
    let mut c = nightly_cargo(root);
    c.args(["fuzz", "run", target]).arg(&corpus);
    if seeds.is_dir() {
        c.arg(&seeds);
    }
    c.args(["--", &time, "-print_final_stats=1"]);
    println!("    $ {}", cmd::describe(&c));
    let mut child = c
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{}` could not start: {e}", cmd::describe(&c)))?;
    let (mut executions, mut total_time, mut crash) = (0, None, None);
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
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
    if !status.success() && crash.is_none() {
        return Err(format!(
            "`{}` failed ({status}) without a crashing input",
            cmd::describe(&c)
        ));
    }
    Ok(TargetRun {
        target: target.to_string(),
        executions,
        seconds: total_time.unwrap_or(seconds),
        crash,
    })
}

/// `cargo xtask fuzz --minutes N`: every target for `minutes`, then a table of executions,
/// rates and crashes. Fails if any target crashed.
pub fn campaign(root: &Path, minutes: u64) -> Result<String, String> {
    let runs = run_all(root, minutes.saturating_mul(60))?;
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
        Ok(format!(
            "{} targets, {minutes} min each, no crash",
            runs.len()
        ))
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
