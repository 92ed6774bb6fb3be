//! `cargo xtask report --compare OLD`: the report compared with an earlier one. `OLD` is a
//! `report.json` file, or a commit: then that commit's own `cargo xtask report` runs first,
//! with the same arguments, in a worktree of it under `target/compare/` (kept, so that a
//! second comparison with the same commit rebuilds only what changed), and its
//! `report.json` is the earlier report.
//!
//! With `--alternate` (and a commit), the earlier report is made section by section beside
//! this one instead (`report --alternate-with`): the worktree builds its report program, and
//! runs its own `cargo xtask report` only for the sections that read a kernel's log, so that
//! those read logs of kernels built from the earlier code.
//!
//! `--layouts N` links the report program `N` ways, each with its functions in another
//! order (LLD's `--shuffle-sections`, seed `k`), and runs the report once per layout, merged
//! as the runs of one report (`report layouts`: each headline per layout, each goal verdict
//! the layouts did not agree on marked). With `--alternate` both programs are linked so,
//! run `k` pairs the two programs' layout `k`, and the comparison is over all their pairs
//! (`report compare --pairs`). Two builds of the same code differ by where their hot loops
//! fall in the instruction cache, branch predictors and decoded-µop cache: on an Intel Xeon
//! (family 6 model 0xa7) four link orders of one report program put buddy_system_allocator's
//! one-frame row 10% apart. A move one layout makes is no move of the code; one that every
//! pair makes, each with other layouts, is.

use crate::cmd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The report's arguments once `--compare` is resolved, and with `--layouts N` how many
/// layouts and where the earlier program's are.
#[derive(Debug, PartialEq)]
pub struct Resolved {
    /// The arguments of the report program.
    pub args: Vec<String>,
    /// `--layouts N`: the report runs once per layout of its program, `N` of them.
    pub layouts: Option<usize>,
    /// With `--layouts N` and `--alternate`: the earlier checkout's report program in each
    /// layout, layout `k` (from 1) at `k - 1` ([`link_layouts`]).
    pub earlier_layouts: Option<Vec<PathBuf>>,
}

/// `args` with `--compare OLD` resolved to a `report.json` (running the commit's report if
/// `OLD` names one), or with `--alternate` to `--alternate-with` the commit's worktree, its
/// report program built (with `--layouts N`, linked `N` ways) and its kernels' logs captured
/// for the sections of `captured` the report runs; unchanged without `--compare`.
///
/// # Errors
/// `--alternate` without a commit to compare with, `--layouts` without a count or with a
/// `--compare` not alternated, an unknown revision, a failed worktree, build, link or report
/// at that commit.
pub fn resolve(root: &Path, args: &[String], captured: &[&str]) -> Result<Resolved, String> {
    let alternate = args.iter().any(|a| a == "--alternate");
    let mut layouts = None;
    let mut kept = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--alternate" => {}
            "--layouts" => match it.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n >= 1 => layouts = Some(n),
                _ => return Err("--layouts needs a count of at least 1".into()),
            },
            _ => kept.push(a.clone()),
        }
    }
    let args = kept;
    let Some(at) = args.iter().position(|a| a == "--compare") else {
        return if alternate {
            Err("--alternate needs --compare COMMIT".into())
        } else {
            Ok(Resolved {
                args,
                layouts,
                earlier_layouts: None,
            })
        };
    };
    if layouts.is_some() && !alternate {
        return Err("--layouts with --compare needs --alternate (a commit run beside)".into());
    }
    let Some(old) = args.get(at + 1) else {
        return Err("--compare needs a report.json or a commit".into());
    };
    let mut resolved: Vec<String> = args[..at].iter().chain(&args[at + 2..]).cloned().collect();
    let mut earlier_layouts = None;
    if Path::new(old).is_file() {
        if alternate {
            return Err(format!(
                "--alternate needs a commit to run beside this report, not the file {old}"
            ));
        }
        resolved.extend(["--compare".into(), old.clone()]);
    } else if alternate {
        let dir = program_at_commit(root, old, &resolved, captured)?;
        if let Some(n) = layouts {
            earlier_layouts = Some(link_layouts(&dir, n, &|| worktree_cargo(&dir))?);
        }
        resolved.extend(["--alternate-with".into(), dir.display().to_string()]);
    } else {
        let json = report_at_commit(root, old, &resolved)?;
        resolved.extend(["--compare".into(), json.display().to_string()]);
    }
    Ok(Resolved {
        args: resolved,
        layouts,
        earlier_layouts,
    })
}

/// Links the report program of the checkout `dir` in `n` layouts, each with its functions
/// in another order (LLD's `--shuffle-sections` over `.text.*` with seed `k`, 1 to `n`), as
/// `target/layouts/k/report`. `cargo` makes the `cargo` command of that checkout; only the
/// program's own crate is compiled again for each layout. `target/release/report` is left
/// as the last layout's: build it again where the usual program is needed.
///
/// # Errors
/// A failed build or link (a toolchain whose linker is not LLD), or copy.
pub fn link_layouts(
    dir: &Path,
    n: usize,
    cargo: &dyn Fn() -> Command,
) -> Result<Vec<PathBuf>, String> {
    let build = ["--release", "-p", "benches", "--bin", "report"];
    let built = dir.join("target/release/report");
    let mut programs = Vec::with_capacity(n);
    for k in 1..=n {
        eprintln!(
            "xtask report: linking layout {k} of {n} of the report program in {}",
            dir.display()
        );
        let shuffle = format!("link-arg=-Wl,--shuffle-sections=.text.*={k}");
        let mut c = cargo();
        c.arg("rustc").args(build).args(["--", "-C", &shuffle]);
        cmd::status(&mut c)?;
        let program = dir
            .join("target/layouts")
            .join(k.to_string())
            .join("report");
        let parent = program.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        std::fs::copy(&built, &program).map_err(|e| format!("{}: {e}", program.display()))?;
        programs.push(program);
    }
    Ok(programs)
}

/// `cargo` at the worktree `dir`: its own xtask and toolchain, none of this one's
/// environment.
fn worktree_cargo(dir: &Path) -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(dir);
    cmd::without_outer_cargo_env(&mut c);
    c
}

/// The worktree of commit `rev` under `target/compare/`, checked out (made if missing):
/// its directory and the commit.
fn worktree(root: &Path, rev: &str) -> Result<(PathBuf, String), String> {
    let sha = git(
        root,
        &["rev-parse", "--verify", &format!("{rev}^{{commit}}")],
    )
    .map_err(|e| format!("--compare {rev}: neither a file nor a commit ({e})"))?;
    let dir = root.join("target/compare").join(&sha[..12]);
    if dir.join(".git").exists() {
        git(&dir, &["checkout", "--quiet", "--detach", &sha])?;
    } else {
        let path = dir.display().to_string();
        git(
            root,
            &["worktree", "add", "--quiet", "--detach", &path, &sha],
        )?;
    }
    Ok((dir, sha))
}

/// `cargo ARGS` at the worktree `dir` (its own xtask and toolchain).
fn cargo_at(dir: &Path, args: &[String]) -> Result<(), String> {
    cmd::status(worktree_cargo(dir).args(args))
}

/// Builds the report program at commit `rev`, after that commit's `cargo xtask report` of
/// the sections of `captured` the report (`args`) runs: the kernels' logs those sections
/// read, from the earlier code. Returns the worktree.
fn program_at_commit(
    root: &Path,
    rev: &str,
    args: &[String],
    captured: &[&str],
) -> Result<PathBuf, String> {
    let (dir, sha) = worktree(root, rev)?;
    let only = only(args);
    let mut captures: Vec<String> = vec!["xtask".into(), "report".into()];
    for section in captured
        .iter()
        .filter(|s| only.is_empty() || only.contains(s))
    {
        captures.extend(["--only".into(), (*section).to_owned()]);
    }
    if captures.len() > 2 {
        if args.iter().any(|a| a == "--quick") {
            captures.push("--quick".into());
        }
        eprintln!(
            "xtask report: the kernels' logs of {sha} first, in {}",
            dir.display()
        );
        // A commit whose report lacks one of these sections fails here; its program then
        // fails that section alone, and the comparison says so.
        if let Err(e) = cargo_at(&dir, &captures) {
            eprintln!("xtask report: the kernels' logs of {sha}: {e}");
        }
    }
    eprintln!(
        "xtask report: building the report program of {sha}, in {}",
        dir.display()
    );
    let build = ["build", "--release", "-p", "benches", "--bin", "report"];
    cargo_at(&dir, &build.map(String::from))?;
    Ok(dir)
}

/// The sections `--only` names in `args`.
pub fn only(args: &[String]) -> Vec<&str> {
    args.iter()
        .zip(args.iter().skip(1))
        .filter(|(flag, _)| flag.as_str() == "--only")
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Runs `cargo xtask report ARGS` at commit `rev` and returns its `report.json`.
fn report_at_commit(root: &Path, rev: &str, args: &[String]) -> Result<PathBuf, String> {
    let (dir, sha) = worktree(root, rev)?;
    eprintln!(
        "xtask report: the report of {sha} first, in {}",
        dir.display()
    );
    // That commit's own xtask and toolchain (its rust-toolchain.toml), in its own target,
    // writing where it writes by default (an `--out` is this report's, not that one's).
    let report = ["xtask".to_owned(), "report".to_owned()];
    cargo_at(&dir, &[&report[..], &without_out(args)].concat())?;
    let json = dir.join("target/report/report.json");
    if json.is_file() {
        Ok(json)
    } else {
        Err(format!("the report of {sha} wrote no {}", json.display()))
    }
}

/// The directory `--out` names in `args`, if any.
pub fn out(args: &[String]) -> Option<String> {
    let at = args.iter().position(|a| a == "--out")?;
    args.get(at + 1).cloned()
}

/// `args` less any `--out DIR`.
pub fn without_out(args: &[String]) -> Vec<String> {
    let mut kept = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--out" {
            it.next();
        } else {
            kept.push(a.clone());
        }
    }
    kept
}

/// `git ARGS` in `dir`: its trimmed output.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut c = Command::new("git");
    c.current_dir(dir).args(args);
    let out = c
        .output()
        .map_err(|e| format!("{}: {e}", cmd::describe(&c)))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{}: {}",
            cmd::describe(&c),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{Resolved, only, resolve, without_out};
    use std::path::Path;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn alternating_needs_a_commit_to_compare_with() {
        let root = Path::new("/nonexistent");
        let e = resolve(root, &strings(&["--alternate", "--only", "scale"]), &[]);
        assert_eq!(e, Err("--alternate needs --compare COMMIT".into()));
        let file = std::env::temp_dir().join(format!("compare-{}.json", std::process::id()));
        std::fs::write(&file, "{}").unwrap();
        let path = file.display().to_string();
        let e = resolve(root, &strings(&["--compare", &path, "--alternate"]), &[]);
        assert!(e.is_err_and(|e| e.contains("needs a commit")));
        // Without `--alternate` the file is the earlier report, as it is.
        let ok = resolve(root, &strings(&["--compare", &path, "--quick"]), &[]);
        let args = strings(&["--quick", "--compare", &path]);
        let (layouts, earlier_layouts) = (None, None);
        assert_eq!(
            ok,
            Ok(Resolved {
                args,
                layouts,
                earlier_layouts
            })
        );
        // Layouts of this report alone need no comparison.
        let ok = resolve(root, &strings(&["--layouts", "2", "--quick"]), &[]);
        assert!(ok.is_ok_and(|r| r.layouts == Some(2) && r.args == ["--quick"]));
        std::fs::remove_file(file).unwrap();
    }

    #[test]
    fn layouts_with_a_comparison_need_it_alternated_and_a_count() {
        let root = Path::new("/nonexistent");
        let e = resolve(root, &strings(&["--layouts", "3", "--compare", "abc"]), &[]);
        assert!(e.is_err_and(|e| e.contains("needs --alternate")));
        for bad in [&["--layouts", "0"][..], &["--layouts", "x"], &["--layouts"]] {
            let args = strings(&[bad, &["--alternate", "--compare", "abc"]].concat());
            let e = resolve(root, &args, &[]);
            assert_eq!(e, Err("--layouts needs a count of at least 1".into()));
        }
    }

    #[test]
    fn only_lists_the_sections_named() {
        let args = strings(&["--only", "scale", "--quick", "--only", "ArceOS today"]);
        assert_eq!(only(&args), ["scale", "ArceOS today"]);
        assert!(only(&strings(&["--quick"])).is_empty());
    }

    #[test]
    fn the_earlier_report_writes_where_it_writes_by_default() {
        let args: Vec<String> = ["--only", "scale", "--out", "/tmp/x", "--quick"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(without_out(&args), ["--only", "scale", "--quick"]);
        assert_eq!(without_out(&args[..2]), ["--only", "scale"]);
    }
}
