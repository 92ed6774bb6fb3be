//! Running commands: echo what runs, fail with the command line and its exit status.

use std::path::Path;
use std::process::{Command, Stdio};

/// The pinned toolchain (rust-toolchain.toml); nightly is only for Miri and cargo-fuzz.
pub const TOOLCHAIN: &str = "1.95.0";

/// The lowest Rust the library crates build with: `rust-version` in the workspace manifest,
/// checked by the msrv stage.
pub const MSRV: &str = "1.89.0";

/// `cargo +1.95.0` in `dir`.
pub fn cargo(dir: &Path) -> Command {
    toolchain_cargo(dir, TOOLCHAIN)
}

/// Cargo's home directory (`CARGO_HOME`, else `~/.cargo`): where its registry lives.
pub fn cargo_home() -> Result<std::path::PathBuf, String> {
    std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")))
        .ok_or_else(|| "neither CARGO_HOME nor HOME is set".into())
}

/// `cargo +nightly` in `dir`.
pub fn nightly_cargo(dir: &Path) -> Command {
    toolchain_cargo(dir, "nightly")
}

/// `cargo +MSRV` in `dir`.
pub fn msrv_cargo(dir: &Path) -> Command {
    toolchain_cargo(dir, MSRV)
}

/// `cargo +TOOLCHAIN` in `dir`, without the variables the outer `cargo run` exports, and
/// without incremental compilation: the builds xtask runs start from a clean clone or a
/// stage's scratch directory, where the incremental cache is written and never read (the
/// `test` stage's build of the workspace: 123 s with it, 105 s without, on two cores).
pub fn toolchain_cargo(dir: &Path, toolchain: &str) -> Command {
    let mut c = Command::new("cargo");
    c.arg(format!("+{toolchain}"))
        .current_dir(dir)
        .env("CARGO_INCREMENTAL", "0");
    without_outer_cargo_env(&mut c);
    c
}

/// Removes from `c`'s environment what the outer `cargo run` exports for xtask itself (its
/// compiler, toolchain and target directory), so that a cargo it starts, directly or through
/// a script, chooses its own.
pub fn without_outer_cargo_env(c: &mut Command) {
    for var in [
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "RUSTUP_TOOLCHAIN",
    ] {
        c.env_remove(var);
    }
}

/// The command line as a user would type it.
pub fn describe(c: &Command) -> String {
    let mut s = String::new();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            s.push_str(&format!(
                "{}={:?} ",
                k.to_string_lossy(),
                v.to_string_lossy()
            ));
        }
    }
    s.push_str(&c.get_program().to_string_lossy());
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `c` with inherited output; an error names the command and its exit status.
pub fn status(c: &mut Command) -> Result<(), String> {
    let started = announce(c);
    let st = c
        .status()
        .map_err(|e| format!("`{}` could not start: {e}", describe(c)))?;
    took(c, started);
    if st.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({st})", describe(c)))
    }
}

/// Prints the command line `c` is about to run; returns when it starts, for [`took`].
fn announce(c: &Command) -> std::time::Instant {
    println!("    $ {}", describe(c));
    std::time::Instant::now()
}

/// Prints how long `c`, started at `started`, ran: the test run's log says where its time
/// goes.
fn took(c: &Command, started: std::time::Instant) {
    println!(
        "    ({:.1} s: {})",
        started.elapsed().as_secs_f64(),
        c.get_program().to_string_lossy()
    );
}

/// Runs `c`, echoing its stdout live and returning it as well.
pub fn output_echoed(c: &mut Command) -> Result<String, String> {
    use std::io::{BufRead, BufReader};
    let started = announce(c);
    let mut child = c
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{}` could not start: {e}", describe(c)))?;
    let mut out = String::new();
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            out.push_str(&line);
            out.push('\n');
        }
    }
    let st = child.wait().map_err(|e| e.to_string())?;
    took(c, started);
    if st.success() {
        Ok(out)
    } else {
        Err(format!("`{}` failed ({st})", describe(c)))
    }
}

/// Runs `job` on each of `items` on `workers` threads, each taking the next item in order
/// (`job` is told which worker runs it: 0..workers); the results in `items`' order. After
/// a failure no further item starts.
///
/// # Errors
/// The first failure in `items`' order.
pub fn on_workers<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    job: impl Fn(&T, usize) -> Result<R, String> + Sync,
) -> Result<Vec<R>, String> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<R, String>>>> =
        Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for worker in 0..workers.max(1) {
            let (next, failed, results, job) = (&next, &failed, &results, &job);
            scope.spawn(move || {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let result = job(item, worker);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if let Ok(mut r) = results.lock() {
                        r[i] = Some(result);
                    }
                }
            });
        }
    });
    let results = results.into_inner().map_err(|e| e.to_string())?;
    results.into_iter().flatten().collect()
}

/// The host's target triple, from `rustc -vV` of the pinned toolchain.
///
/// # Errors
/// When rustc cannot be run or does not print its host.
pub fn host_target(dir: &Path) -> Result<String, String> {
    let mut c = Command::new("rustc");
    c.arg(format!("+{TOOLCHAIN}")).arg("-vV").current_dir(dir);
    let out = probe(&mut c).ok_or("`rustc -vV` failed")?;
    out.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_string())
        .ok_or_else(|| "`rustc -vV` printed no host".into())
}

/// Runs `c` quietly and returns its stdout if it succeeded.
pub fn probe(c: &mut Command) -> Option<String> {
    let out = c.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `c` with stdout captured (and echoed once it ends), killing it after `limit`.
/// Returns its exit code (`None` if a signal ended it) and its stdout.
pub fn output_with_timeout(
    c: &mut Command,
    limit: std::time::Duration,
) -> Result<(Option<i32>, String), String> {
    let (status, out) = run_with_limit(c, limit)?;
    print!("{out}");
    status
        .map(|code| (code, out))
        .ok_or_else(|| timed_out(c, limit))
}

/// [`output_with_timeout`] without echoing the output (a kernel's log thousands of lines
/// long: the caller prints what it needs of it). A run past `limit` is an error that ends
/// with the output's last lines.
pub fn output_quiet_with_timeout(
    c: &mut Command,
    limit: std::time::Duration,
) -> Result<(Option<i32>, String), String> {
    let (status, out) = run_with_limit(c, limit)?;
    status.map(|code| (code, out.clone())).ok_or_else(|| {
        let tail: Vec<&str> = out.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "{}; its output ended:\n{}",
            timed_out(c, limit),
            tail.join("\n")
        )
    })
}

/// `c` run with stdout captured, killed after `limit`: its exit code (`None` inside: a
/// signal ended it; `None` outside: it ran past `limit`) and its stdout.
fn run_with_limit(
    c: &mut Command,
    limit: std::time::Duration,
) -> Result<(Option<Option<i32>>, String), String> {
    use std::io::Read;
    let started = announce(c);
    let mut child = c
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{}` could not start: {e}", describe(c)))?;
    let mut stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    });
    let status = wait_with_limit(&mut child, limit)?;
    let out = reader.join().unwrap_or_default();
    took(c, started);
    Ok((status.map(|st| st.code()), out))
}

/// The error of a command that ran past its limit.
fn timed_out(c: &Command, limit: std::time::Duration) -> String {
    format!(
        "`{}` did not finish within {} s",
        describe(c),
        limit.as_secs()
    )
}

/// A child with its stdin and stdout piped (a serial console to read and type on), and
/// when it started.
struct Console {
    child: std::process::Child,
    stdout: std::process::ChildStdout,
    stdin: std::process::ChildStdin,
    started: std::time::Instant,
}

/// Starts `c` (printing it) as a [`Console`].
fn spawn_console(c: &mut Command) -> Result<Console, String> {
    let started = announce(c);
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{}` could not start: {e}", describe(c)))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let stdin = child.stdin.take().ok_or("no stdin pipe")?;
    Ok(Console {
        child,
        stdout,
        stdin,
        started,
    })
}

/// [`output_with_timeout`] for a child that asks its host to look at it: each output line
/// that contains `marker` is answered, once `answer` has run with the child's pid and the
/// line, by a newline on the child's stdin (QEMU's serial console). Returns the exit code,
/// the output and `answer`'s results in order.
pub fn output_answering<T: Send + 'static>(
    c: &mut Command,
    limit: std::time::Duration,
    marker: &'static str,
    answer: fn(u32, &str) -> T,
) -> Result<(Option<i32>, String, Vec<T>), String> {
    use std::io::{BufRead, Write};
    let mut console = spawn_console(c)?;
    let (stdout, mut stdin) = (console.stdout, console.stdin);
    let pid = console.child.id();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let mut answers = Vec::new();
        let mut lines = std::io::BufReader::new(stdout);
        let mut line = Vec::new();
        while lines.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let text = String::from_utf8_lossy(&line).into_owned();
            if text.contains(marker) {
                answers.push(answer(pid, &text));
                let _ = stdin.write_all(b"\n").and_then(|()| stdin.flush());
            }
            out.push_str(&text);
            line.clear();
        }
        (out, answers)
    });
    let status = wait_with_limit(&mut console.child, limit)?;
    let (out, answers) = reader.join().unwrap_or_default();
    print!("{out}");
    took(c, console.started);
    match status {
        Some(st) => Ok((st.code(), out, answers)),
        None => Err(format!(
            "`{}` did not finish within {} s",
            describe(c),
            limit.as_secs()
        )),
    }
}

/// Runs a child that does not exit by itself (a hypervisor that returns to its shell): the
/// first output line containing `prompt` is answered with `keys` on its stdin (QEMU's serial
/// console), and the child is killed once a line contains `last`, or past `limit`. Returns
/// the output and whether `last` was seen.
pub fn output_until(
    c: &mut Command,
    limit: std::time::Duration,
    (prompt, keys): (&'static str, &'static [u8]),
    last: &'static str,
) -> Result<(String, bool), String> {
    use std::io::{BufRead, Write};
    let mut console = spawn_console(c)?;
    let (stdout, mut stdin) = (console.stdout, console.stdin);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (mut out, mut answered, mut seen) = (String::new(), false, false);
        let mut lines = std::io::BufReader::new(stdout);
        let mut line = Vec::new();
        while lines.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let text = String::from_utf8_lossy(&line).into_owned();
            if !answered && text.contains(prompt) {
                answered = true;
                let _ = stdin.write_all(keys).and_then(|()| stdin.flush());
            }
            out.push_str(&text);
            line.clear();
            if text.contains(last) {
                seen = true;
                let _ = done_tx.send(());
                break;
            }
        }
        (out, seen)
    });
    let _ = done_rx.recv_timeout(limit);
    let _ = console.child.kill();
    let _ = console.child.wait();
    let (out, seen) = reader.join().unwrap_or_default();
    print!("{out}");
    took(c, console.started);
    Ok((out, seen))
}

/// Waits for `child` to exit, killing it past `limit`: its status, or `None` if it was
/// killed.
fn wait_with_limit(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Result<Option<std::process::ExitStatus>, String> {
    let start = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(Some(st));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Writes a report capture to `out` (its directory made): `text`, or `UNAVAILABLE: why`
/// as its first line, which the report's section shows instead of figures.
pub fn write_capture(out: &Path, text: Result<String, String>) -> Result<(), String> {
    write_file(
        out,
        text.unwrap_or_else(|why| format!("UNAVAILABLE: {why}\n")),
    )
}

/// Writes `contents` to `path`, making its directory first; an error names the path.
pub fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, contents).map_err(|e| format!("{}: {e}", path.display()))
}
