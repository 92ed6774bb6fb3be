//! The Miri stages (`miri`, and `miri-full` on request): every library's unit tests and
//! integration tests under Miri, one test target at a time per worker (Miri runs one
//! thread), as many workers as cores, each in a target directory of its own.
//!
//! In a run of several stages, Miri starts beside them once `setup` has passed
//! ([`start_beside`]): its build and its first worker run under Linux's `SCHED_IDLE` policy
//! (`chrt --idle`) while the stages before its place run, on the CPU time those leave idle
//! (links, test runs and QEMU boots that keep one core busy: 12% of two cores over a clean
//! run's first stages). Under `nice -n 19` instead, it took a fifth of the CPU and slowed
//! the builds beside it by 8-18%. At its place, [`stage`] adds the other workers, waits for every
//! target and prints each one's output, in queue order.

use crate::cmd::{self, nightly_cargo};
use crate::stages::tests_run;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// The crates Miri checks (the arch crates' instructions cannot run under Miri).
const CRATES: [&str; 5] = [
    "mm-types",
    "zero-core",
    "buddy-sim",
    "pte-batch",
    "axalloc-buddy",
];

/// What a target's command printed, with its command line and time; `Err` when it failed.
type Report = Result<String, String>;

/// A Miri run: its queue of test targets and what its workers found.
struct Run {
    root: PathBuf,
    /// `miri-full`'s run (every target), or `miri`'s.
    full: bool,
    units: Vec<Unit>,
    workers: usize,
    /// The next target a worker takes.
    next: AtomicUsize,
    /// Set when a target failed or the run was cancelled: workers take nothing more.
    stop: AtomicBool,
    /// The build's output once everything is built and each worker's directory is ready.
    built: Mutex<Option<Report>>,
    built_now: Condvar,
    /// Each target's report, in queue order.
    reports: Mutex<Vec<Option<Report>>>,
    /// The process groups of the commands running now ([`cancel_beside`] ends them).
    running: Mutex<Vec<u32>>,
    started: Instant,
}

/// The run [`start_beside`] started, and its first worker, until [`stage`] takes them.
static BESIDE: Mutex<Option<(Arc<Run>, JoinHandle<()>)>> = Mutex::new(None);

/// Starts the Miri stage (`full`: `miri-full`'s targets) in the background, at the lowest
/// CPU priority: everything built, then one worker. Does nothing if a run is under way.
///
/// # Errors
/// When the crates' test targets cannot be listed.
pub fn start_beside(root: &Path, full: bool) -> Result<(), String> {
    let mut beside = BESIDE.lock().map_err(|e| e.to_string())?;
    if beside.is_none() {
        let run = Arc::new(Run::new(root, full)?);
        let first = spawn_first_worker(&run, true);
        println!(
            "    miri: {} test targets building and running beside the stages before its own, at idle priority (SCHED_IDLE)",
            run.units.len()
        );
        *beside = Some((run, first));
    }
    Ok(())
}

/// Ends a run [`start_beside`] started, if any: its commands are killed (a stage before
/// Miri's failed and the run stops there).
pub fn cancel_beside() {
    let taken = BESIDE.lock().ok().and_then(|mut b| b.take());
    if let Some((run, first)) = taken {
        run.stop.store(true, Ordering::SeqCst);
        run.kill_running();
        let _ = first.join();
    }
}

/// The stage: the run started beside the others if there is one (else one started now),
/// with the other workers added; every target's output, in queue order.
///
/// # Errors
/// When the build or a target fails: the first failure's command line and status.
pub fn stage(root: &Path, full: bool) -> Result<String, String> {
    let taken = BESIDE
        .lock()
        .map_err(|e| e.to_string())?
        .take_if(|(run, _)| run.full == full);
    let beside = taken.is_some();
    let (run, first) = match taken {
        Some(pair) => pair,
        None => {
            let run = Arc::new(Run::new(root, full)?);
            let first = spawn_first_worker(&run, false);
            (run, first)
        }
    };
    let waited = run.started.elapsed().as_secs_f64();
    let beside_note = if beside {
        format!(", the first {waited:.0} s beside the stages before")
    } else {
        String::new()
    };
    println!(
        "    {} test targets under Miri, {} at a time (Miri runs one thread){beside_note}",
        run.units.len(),
        run.workers,
    );
    let built = run.wait_built();
    match &built {
        Ok(log) | Err(log) => print!("{log}"),
    }
    let others: Vec<JoinHandle<()>> = match built {
        Ok(_) => (1..run.workers)
            .map(|worker| {
                let run = Arc::clone(&run);
                std::thread::spawn(move || run.work(worker, false))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    for handle in others.into_iter().chain([first]) {
        handle
            .join()
            .map_err(|_| "a Miri worker panicked".to_string())?;
    }
    if built.is_err() {
        return Err("the Miri build failed (its output is above)".into());
    }
    let reports = std::mem::take(&mut *run.reports.lock().map_err(|e| e.to_string())?);
    let mut tests = 0;
    let mut failed = None;
    for report in reports.into_iter().flatten() {
        match report {
            Ok(out) => {
                print!("{out}");
                tests += tests_run(&out);
            }
            Err(out) => {
                print!("{out}");
                failed.get_or_insert_with(|| out.lines().next().unwrap_or_default().to_string());
            }
        }
    }
    if let Some(line) = failed {
        return Err(format!("failed under Miri: {}", line.trim()));
    }
    Ok(format!(
        "{tests} tests under Miri ({} test targets, {} at a time{beside_note})",
        run.units.len(),
        run.workers,
    ))
}

/// Starts `run`'s first worker: it builds everything, then takes targets (at idle priority
/// with `idle`).
fn spawn_first_worker(run: &Arc<Run>, idle: bool) -> JoinHandle<()> {
    let run = Arc::clone(run);
    std::thread::spawn(move || {
        let built = run.build(idle);
        let ok = built.is_ok();
        if !ok {
            run.stop.store(true, Ordering::SeqCst);
        }
        if let Ok(mut slot) = run.built.lock() {
            *slot = Some(built);
        }
        run.built_now.notify_all();
        if ok {
            run.work(0, idle);
        }
    })
}

impl Run {
    fn new(root: &Path, full: bool) -> Result<Self, String> {
        let units = units(root, full)?;
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(units.len())
            .max(1);
        Ok(Self {
            root: root.to_path_buf(),
            full,
            reports: Mutex::new(units.iter().map(|_| None).collect()),
            units,
            workers,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            built: Mutex::new(None),
            built_now: Condvar::new(),
            running: Mutex::new(Vec::new()),
            started: Instant::now(),
        })
    }

    /// Worker `worker`'s target directory.
    fn worker_dir(&self, worker: usize) -> PathBuf {
        self.root.join(format!("target/miri/worker-{worker}"))
    }

    /// Builds every crate's test targets in the first worker's directory and copies it to
    /// the others' (cargo holds a build directory's lock while `cargo miri test` runs the
    /// tests, so workers sharing one ran one at a time; built by each worker, the crates
    /// the targets share were compiled in each: buddy-sim eight times in all, with the
    /// features of each crate that depends on it). Returns the commands' output.
    fn build(&self, idle: bool) -> Report {
        let mut krates: Vec<&str> = self.units.iter().map(|u| u.krate).collect();
        krates.sort_unstable();
        krates.dedup();
        let builds = krates.into_iter().map(|krate| {
            let mut c = nightly_cargo(&self.root);
            c.args(["miri", "test", "--no-run", "--all-features", "-p", krate])
                .arg("--target-dir")
                .arg(self.worker_dir(0));
            c
        });
        let mut copies = Vec::new();
        for worker in 1..self.workers {
            let dir = self.worker_dir(worker);
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            // `-a`: the files keep their times, which cargo compares to find what is fresh.
            let mut copy = Command::new("cp");
            copy.arg("-a").arg(self.worker_dir(0)).arg(&dir);
            copies.push(copy);
        }
        let mut log = String::new();
        for c in builds.chain(copies) {
            match self.run_command(c, idle) {
                Ok(out) => log.push_str(&out),
                Err(out) => return Err(log + &out),
            }
        }
        Ok(log)
    }

    /// The build's output once it has ended.
    fn wait_built(&self) -> Report {
        let Ok(mut built) = self.built.lock() else {
            return Err("the Miri build's state is poisoned".into());
        };
        loop {
            if let Some(report) = built.as_ref() {
                return report.clone();
            }
            built = match self.built_now.wait(built) {
                Ok(b) => b,
                Err(_) => return Err("the Miri build's state is poisoned".into()),
            };
        }
    }

    /// Takes targets off the queue until it is empty or the run stops.
    fn work(&self, worker: usize, idle: bool) {
        while !self.stop.load(Ordering::SeqCst) {
            let i = self.next.fetch_add(1, Ordering::SeqCst);
            let Some(unit) = self.units.get(i) else { break };
            let mut c = nightly_cargo(&self.root);
            c.args(["miri", "test", "--all-features", "-p", unit.krate])
                .arg("--target-dir")
                .arg(self.worker_dir(worker))
                .args(unit.target.args());
            let report = self.run_command(c, idle);
            if report.is_err() {
                self.stop.store(true, Ordering::SeqCst);
            }
            if let Ok(mut reports) = self.reports.lock() {
                reports[i] = Some(report);
            }
        }
    }

    /// Runs `c` (at idle priority with `idle`) in a process group of its own, output
    /// captured: its command line and time, then what it printed.
    fn run_command(&self, c: Command, idle: bool) -> Report {
        let line = cmd::describe(&c);
        let mut c = if idle { at_idle_priority(&c) } else { c };
        c.process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let child = c
            .spawn()
            .map_err(|e| format!("    `{line}` could not start: {e}\n"))?;
        let id = child.id();
        if let Ok(mut running) = self.running.lock() {
            running.push(id);
        }
        if self.stop.load(Ordering::SeqCst) {
            self.kill_running();
        }
        let out = child.wait_with_output();
        if let Ok(mut running) = self.running.lock() {
            running.retain(|&p| p != id);
        }
        let out = out.map_err(|e| format!("    `{line}`: {e}\n"))?;
        let report = format!(
            "    $ {line} ({:.1} s)\n{}{}",
            started.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        if out.status.success() {
            Ok(report)
        } else {
            Err(format!("{report}    `{line}` failed ({})\n", out.status))
        }
    }

    /// Sends SIGTERM to the process group of every command running now.
    fn kill_running(&self) {
        let groups = self.running.lock().map(|r| r.clone()).unwrap_or_default();
        for group in groups {
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{group}")])
                .status();
        }
    }
}

/// `c` run by `chrt --idle 0` (util-linux), under `SCHED_IDLE`, which its children inherit:
/// the same program, arguments, environment and directory.
fn at_idle_priority(c: &Command) -> Command {
    let mut n = Command::new("chrt");
    n.args(["--idle", "0"])
        .arg(c.get_program())
        .args(c.get_args());
    for (key, value) in c.get_envs() {
        match value {
            Some(value) => n.env(key, value),
            None => n.env_remove(key),
        };
    }
    if let Some(dir) = c.get_current_dir() {
        n.current_dir(dir);
    }
    n
}

/// One of a crate's test targets, run by itself under Miri.
struct Unit {
    krate: &'static str,
    target: TestTarget,
}

/// A test target as `cargo test` selects it.
enum TestTarget {
    /// The unit tests: `--lib`.
    Lib,
    /// An integration test, `tests/NAME.rs`: `--test NAME`.
    Test(String),
}

impl TestTarget {
    fn args(&self) -> Vec<&str> {
        match self {
            Self::Lib => vec!["--lib"],
            Self::Test(name) => vec!["--test", name],
        }
    }
}

/// The test targets that take most of the Miri stage's time, longest first (`lib`: the
/// unit tests): queued first, in this order, so that the shorter ones fill in beside them
/// (wall seconds with build, two at a time on a 2-core Intel Xeon: axalloc-buddy `global`
/// 281, buddy-sim `lib` 160, `requests` 100, `ax_pages` 94, pte-batch `working_set` 56,
/// `review_cases` 44; each run prints its time; the times libtest prints under Miri are
/// Miri's virtual clock's). The tests compare memory with slices (`memcmp`, which Miri runs
/// natively), not a closure per byte: `requests` took 373 s, `global` 331 s that way.
const LONG_TESTS: [(&str, &str); 6] = [
    ("axalloc-buddy", "global"),
    ("buddy-sim", "lib"),
    ("buddy-sim", "requests"),
    ("buddy-sim", "ax_pages"),
    ("pte-batch", "working_set"),
    ("pte-batch", "review_cases"),
];

/// buddy-sim's model tests the full run leaves to `miri-full`: metadata-only zones (no memory
/// behind them) driven through hundreds of operations in safe code, whose few `unsafe`
/// calls (the frees' contracts) the targets the full run keeps make too; natively they run
/// in the `test` stage. Wall seconds under Miri, two at a time on a 2-core Intel Xeon:
/// `properties` 233, `nodes` 231, `ax_paging` 215, `mobility` 108, `reporting` 77,
/// `failed_operations` 43; `observability` over 17 minutes (its `init_on_free`
/// test clears and checks 4 MiB byte by byte). `properties` took 493 s before the zone
/// reached its frames without making a slice reference (`FrameStorage`): Stacked Borrows
/// retagged every frame of the zone each time.
const FULL_ONLY: [(&str, &str); 7] = [
    ("buddy-sim", "properties"),
    ("buddy-sim", "nodes"),
    ("buddy-sim", "ax_paging"),
    ("buddy-sim", "mobility"),
    ("buddy-sim", "reporting"),
    ("buddy-sim", "failed_operations"),
    ("buddy-sim", "observability"),
];

/// Every test target of [`CRATES`] (the unit tests and each `tests/*.rs`; with `full`, else
/// all but [`FULL_ONLY`]), the long ones first ([`LONG_TESTS`]). The doctests run natively only (the `test` stage):
/// they call the API the unit and integration tests run under Miri, and under Miri each is
/// a program of its own (zero-core's took 78 s, most of it starting them).
fn units(root: &Path, full: bool) -> Result<Vec<Unit>, String> {
    let mut units = Vec::new();
    for krate in CRATES {
        units.push(Unit {
            krate,
            target: TestTarget::Lib,
        });
        let dir = root.join("crates").join(krate).join("tests");
        if dir.is_dir() {
            let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut names: Vec<String> = entries
                .filter_map(|e| {
                    let path = e.ok()?.path();
                    (path.extension()? == "rs")
                        .then(|| path.file_stem()?.to_str().map(String::from))?
                })
                .collect();
            names.sort();
            units.extend(names.into_iter().map(|name| Unit {
                krate,
                target: TestTarget::Test(name),
            }));
        }
    }
    units.sort_by_key(|u| {
        let name = match &u.target {
            TestTarget::Test(name) => name.as_str(),
            TestTarget::Lib => "lib",
        };
        LONG_TESTS
            .iter()
            .position(|&(krate, test)| krate == u.krate && test == name)
            .unwrap_or(LONG_TESTS.len())
    });
    if !full {
        units.retain(|u| match &u.target {
            TestTarget::Test(name) => !FULL_ONLY.contains(&(u.krate, name.as_str())),
            TestTarget::Lib => true,
        });
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn an_idle_priority_command_keeps_its_program_arguments_environment_and_directory() {
        let mut c = Command::new("cargo");
        c.args(["+nightly", "miri"])
            .env("KEPT", "1")
            .env_remove("REMOVED")
            .current_dir("/tmp");
        let n = at_idle_priority(&c);
        assert_eq!(n.get_program(), "chrt");
        let args: Vec<&OsStr> = n.get_args().collect();
        assert_eq!(args, ["--idle", "0", "cargo", "+nightly", "miri"]);
        let envs: Vec<(&OsStr, Option<&OsStr>)> = n.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("KEPT"), Some(OsStr::new("1")))));
        assert!(envs.contains(&(OsStr::new("REMOVED"), None)));
        assert_eq!(n.get_current_dir(), Some(Path::new("/tmp")));
    }

    #[test]
    fn the_queue_starts_with_the_long_targets_and_the_full_run_adds_the_model_tests() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask is in the workspace");
        let name = |u: &Unit| match &u.target {
            TestTarget::Lib => "lib".to_string(),
            TestTarget::Test(name) => name.clone(),
        };
        let queue = units(root, false).unwrap();
        let head: Vec<(&str, String)> = queue
            .iter()
            .take(LONG_TESTS.len())
            .map(|u| (u.krate, name(u)))
            .collect();
        let long: Vec<(&str, String)> = LONG_TESTS
            .iter()
            .map(|&(krate, test)| (krate, test.to_string()))
            .collect();
        assert_eq!(head, long, "a long target was renamed or removed");
        assert!(
            queue
                .iter()
                .all(|u| !FULL_ONLY.contains(&(u.krate, name(u).as_str())))
        );
        let full = units(root, true).unwrap();
        assert_eq!(full.len(), queue.len() + FULL_ONLY.len());
    }
}
