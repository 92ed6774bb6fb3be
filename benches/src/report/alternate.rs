//! `report --alternate-with DIR`: the earlier report of a comparison made section by section
//! beside this one, by the report program an earlier checkout in `DIR` built, instead of
//! read from a file written minutes or hours before.
//!
//! A shared host's speed drifts: within an hour every bandwidth of the clearing section moved
//! 5-14% between two runs of the same code. Two whole reports run one after the other put
//! each section's two runs a whole report apart (12 minutes and more); run section by
//! section, the two runs of a section are a section apart, and which of them runs first
//! alternates from one section (and `--repeat` run) to the next, so that a drift within the
//! pair does not favour one side everywhere.
//!
//! That does not make one pair of runs enough: two report programs of the same library code
//! differ by their code's layout, and on an Intel Xeon (family 6 model 0xa7) that moved
//! buddy_system_allocator's order-0 and order-3 rows by 6-15% with the same instructions,
//! the same way in both pairs of runs; one pair of four sections listed 53 notable moves of
//! 550 figures. With `--repeat N` a move counts only if every pair made it
//! ([`super::compare::compare_runs`]), and the layouts still stay the same in every pair:
//! `cargo xtask report --layouts N` links both programs `N` ways (another function order
//! each) and runs the report once per layout, the earlier program's given by
//! `--alternate-program`; each run writes its pairs (`alternated-pairs.json`), and `report
//! compare --pairs` compares them all. Three layouts of contiguous free against a commit of
//! the same library code: 1 figure of 145 moved the same way in all three pairs, none
//! notably, where each pair alone had 16-28 moved and 1-6 notable.
//!
//! The earlier program runs as `DIR/target/release/report --only SECTION --out ...` in `DIR`
//! (every commit's report takes those arguments), on every CPU this process was given. Its
//! output goes to a log beside its `report.json`. The sections that read a kernel's log
//! (`cargo xtask report`'s captures, named by `ZC_*_LOG` variables) read the earlier
//! checkout's own log of the same name under `DIR/target/report/`, which its `cargo xtask
//! report` wrote: a kernel built from the earlier code.

use serde_json::Value;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the earlier checkout's program writes its sections, under its `target/report/`.
const OUT: &str = "alternate";

/// The earlier report, made section by section.
pub struct Alternate {
    /// The earlier checkout.
    dir: PathBuf,
    /// Its report program.
    program: PathBuf,
    /// Whether to pass `--quick` on.
    quick: bool,
    /// The variables naming the kernels' logs, each set to the earlier checkout's log.
    logs: Vec<(String, PathBuf)>,
    /// The first section's report, whose header the earlier report keeps.
    header: Option<Value>,
    /// The sections made in each run (`--repeat`), `[name, tables]` as `report.json` holds
    /// them, in order.
    runs: Vec<Vec<Value>>,
    /// Each section run, in order, and whether the earlier program ran it first.
    order: Vec<(String, bool)>,
    /// The sections the earlier program did not make, each with why.
    failed: Vec<(String, String)>,
}

impl Alternate {
    /// The earlier checkout in `dir`, whose report program is `program`, by default its
    /// `target/release/report` (built); another is the same program linked another way
    /// (`cargo xtask report --layouts`).
    ///
    /// # Errors
    /// No program there.
    pub fn new(dir: &Path, program: Option<&Path>, quick: bool) -> Result<Self, String> {
        Self::with_vars(dir, program, quick, std::env::vars_os())
    }

    /// [`Alternate::new`] given the environment's variables `vars`.
    fn with_vars(
        dir: &Path,
        program: Option<&Path>,
        quick: bool,
        vars: impl Iterator<Item = (OsString, OsString)>,
    ) -> Result<Self, String> {
        // Absolute: the program runs in the checkout, where a relative path (of the
        // program, or the logs under `dir`) would name another file.
        let absolute =
            |p: &Path| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
        let dir = absolute(dir)?;
        let program = absolute(
            &program.map_or_else(|| dir.join("target/release/report"), Path::to_path_buf),
        )?;
        if !program.is_file() {
            return Err(format!(
                "--alternate-with {}: no {} (build it there: cargo build --release -p benches \
                 --bin report)",
                dir.display(),
                program.display()
            ));
        }
        Ok(Self {
            logs: earlier_logs(&dir, vars),
            dir,
            program,
            quick,
            header: None,
            runs: Vec::new(),
            order: Vec::new(),
            failed: Vec::new(),
        })
    }

    /// Whether the earlier program runs `run`'s (from 1) section at `index` (from 0) before
    /// this one's: every other section, starting the other way round in every other run.
    #[must_use]
    pub fn earlier_first(index: usize, run: usize) -> bool {
        (index + run) % 2 == 1
    }

    /// Runs section `name` with the earlier program for run `run` (from 1) and keeps its
    /// tables; if it fails (the commit has no such section, or it crashed), keeps why
    /// instead.
    pub fn run_section(&mut self, name: &str, run: usize, earlier_first: bool) {
        self.order.push((name.to_owned(), earlier_first));
        match self.section(name) {
            Ok((header, section)) => {
                self.header.get_or_insert(header);
                if self.runs.len() < run {
                    self.runs.resize_with(run, Vec::new);
                }
                self.runs[run - 1].push(section);
            }
            Err(why) => self.failed.push((name.to_owned(), why)),
        }
    }

    /// Section `name` made by the earlier program: its report's header and the section.
    fn section(&self, name: &str) -> Result<(Value, Value), String> {
        let out = self
            .dir
            .join("target/report")
            .join(OUT)
            .join(file_name(name));
        std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let log_path = out.join("report.log");
        let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let err = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut c = Command::new(&self.program);
        c.current_dir(&self.dir)
            .args(["--only", name, "--out"])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        if self.quick {
            c.arg("--quick");
        }
        c.envs(self.logs.iter().map(|(var, log)| (var, log)));
        // The program pins its own threads, on the CPUs this process was given, not on the
        // one CPU the measuring thread is pinned to (the next section pins it again).
        crate::measure::unpin_current_thread();
        let status = c
            .status()
            .map_err(|e| format!("{}: {e}", self.program.display()))?;
        if !status.success() {
            return Err(format!("{status}; its output: {}", log_path.display()));
        }
        let json = out.join("report.json");
        let report: Value = std::fs::read_to_string(&json)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .map_err(|e| format!("{}: {e}", json.display()))?;
        let section = report["sections"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s[0] == name))
            .cloned()
            .ok_or_else(|| format!("{}: no section {name}", json.display()))?;
        Ok((report["header"].clone(), section))
    }

    /// The earlier report of run `run` (from 1): the first section's header, every section
    /// made in that run. `None` if the earlier program made none there.
    #[must_use]
    pub fn report(&self, run: usize) -> Option<Value> {
        let header = self.header.clone()?;
        let sections = self.runs.get(run.checked_sub(1)?)?;
        Some(serde_json::json!({
            "header": header,
            "quick": self.quick,
            "runs": [],
            "sections": sections,
        }))
    }

    /// What the comparison's reader needs to know of how the earlier report was made.
    #[must_use]
    pub fn note(&self) -> String {
        let first: Vec<&str> = self
            .order
            .iter()
            .filter(|(_, earlier)| *earlier)
            .map(|(name, _)| name.as_str())
            .collect();
        let mut note = format!(
            "The earlier report was made section by section alternating with this one \
             (`--alternate-with {}`, its program {}), so that the two runs of a section are \
             minutes apart, not a whole report: the earlier program ran first for {} of {} \
             sections ({}), this one first for the rest.",
            self.dir.display(),
            self.program.display(),
            first.len(),
            self.order.len(),
            if first.is_empty() {
                "none".to_owned()
            } else {
                first.join(", ")
            }
        );
        for (name, why) in &self.failed {
            note.push_str(&format!(" The earlier program did not make {name}: {why}."));
        }
        note
    }
}

/// The variables of `vars` that name a kernel's log (`ZC_*_LOG`), each set to the log of
/// the same name under the earlier checkout `dir`'s `target/report/`.
fn earlier_logs(
    dir: &Path,
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> Vec<(String, PathBuf)> {
    vars.filter_map(|(var, path)| {
        let var = var.into_string().ok()?;
        let file = Path::new(&path).file_name()?;
        (var.starts_with("ZC_") && var.ends_with("_LOG"))
            .then(|| (var, dir.join("target/report").join(file)))
    })
    .collect()
}

/// A section's name as a directory's: its letters and digits, the rest `-`.
fn file_name(section: &str) -> String {
    section
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Alternate, file_name};

    #[test]
    fn which_side_runs_first_alternates_by_section_and_by_run() {
        let run1: Vec<bool> = (0..4).map(|i| Alternate::earlier_first(i, 1)).collect();
        let run2: Vec<bool> = (0..4).map(|i| Alternate::earlier_first(i, 2)).collect();
        assert_eq!(run1, [true, false, true, false]);
        assert_eq!(run2, [false, true, false, true]);
    }

    #[test]
    fn a_section_directory_is_its_name_in_letters_digits_and_dashes() {
        assert_eq!(file_name("ArceOS today"), "ArceOS-today");
        assert_eq!(file_name("contiguous free"), "contiguous-free");
        assert_eq!(file_name("../x"), "---x");
    }

    /// An earlier checkout in a fresh directory under the temporary one, whose program is
    /// the shell script `script` (given the arguments `--only NAME --out DIR [--quick]`).
    #[cfg(unix)]
    fn checkout(name: &str, script: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("alternate-{name}-{}", std::process::id()));
        let bin = dir.join("target/release");
        std::fs::create_dir_all(&bin).unwrap();
        let program = bin.join("report");
        std::fs::write(&program, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    #[cfg(unix)]
    #[test]
    fn the_earlier_program_makes_each_section_and_reads_its_own_logs() {
        // The program writes a report of the one section `--only` names, with a table
        // whose title is the log the section would read, and fails for section "gone".
        let dir = checkout(
            "sections",
            r#"[ "$2" = gone ] && { echo "no section named gone" >&2; exit 2; }
mkdir -p "$4"
printf '{"header":{"commit":"c0ffee"},"quick":%s,"runs":[],"sections":[["%s",[{"title":"%s"}]]]}' \
  "$([ "$5" = --quick ] && echo true || echo false)" "$2" "$ZC_TEST_ALTERNATE_LOG" > "$4/report.json""#,
        );
        let vars = [
            ("ZC_TEST_ALTERNATE_LOG", "/elsewhere/target/report/k.log"),
            ("ZC_QUICK", "/elsewhere/target/report/q.log"),
            ("PATH", "/usr/bin:/bin"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        let mut a = Alternate::with_vars(&dir, None, true, vars.into_iter()).unwrap();
        a.run_section("one", 1, false);
        a.run_section("gone", 1, true);
        a.run_section("two words", 1, true);
        a.run_section("one", 2, false);
        let names = |run: usize| -> Vec<String> {
            let report = a.report(run).unwrap();
            assert_eq!(report["header"]["commit"], "c0ffee");
            assert_eq!(report["quick"], true);
            let sections = report["sections"].as_array().unwrap();
            sections
                .iter()
                .map(|s| s[0].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(names(1), ["one", "two words"]);
        assert_eq!(names(2), ["one"]);
        assert!(a.report(3).is_none() && a.report(0).is_none());
        let report = a.report(1).unwrap();
        let own_log = dir.join("target/report/k.log").display().to_string();
        assert_eq!(report["sections"][1][1][0]["title"], own_log.as_str());
        let note = a.note();
        assert!(
            note.contains("ran first for 2 of 4 sections (gone, two words)"),
            "{note}"
        );
        assert!(note.contains("did not make gone: exit status: 2"), "{note}");
        let log = dir.join("target/report/alternate/gone/report.log");
        assert!(
            std::fs::read_to_string(log)
                .unwrap()
                .contains("no section named gone")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_relative_checkout_and_program_run_from_where_they_were_named() {
        // The same checkout named relative to this process's directory: its program and
        // logs must not be looked up again inside the checkout, where the program runs.
        let dir = checkout("relative", "exit 0");
        let cwd = std::env::current_dir().unwrap();
        let up: std::path::PathBuf = cwd.components().skip(1).map(|_| "..").collect();
        let relative = up.join(dir.strip_prefix("/").unwrap());
        assert!(relative.is_relative());
        let program = relative.join("target/release/report");
        let vars: [(std::ffi::OsString, std::ffi::OsString); 1] =
            [("ZC_TEST_RELATIVE_LOG".into(), "k.log".into())];
        let a = Alternate::with_vars(&relative, Some(&program), false, vars.into_iter()).unwrap();
        assert!(
            a.dir.is_absolute() && a.program.is_absolute(),
            "{:?}",
            a.program
        );
        assert!(a.program.is_file());
        assert_eq!(a.logs.len(), 1, "{:?}", a.logs);
        assert!(a.logs.iter().all(|(_, log)| log.is_absolute()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn no_section_made_is_no_earlier_report() {
        let dir = checkout("none", "exit 1");
        let mut a = Alternate::new(&dir, None, false).unwrap();
        a.run_section("one", 1, true);
        assert!(a.report(1).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_earlier_checkout_without_a_built_program_is_refused() {
        let dir = std::env::temp_dir().join("alternate-without-program");
        let e = Alternate::new(&dir, None, false).err();
        assert!(e.is_some_and(|e| e.contains("no ") && e.contains("target/release/report")));
    }
}
