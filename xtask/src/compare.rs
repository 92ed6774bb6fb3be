//! `cargo xtask report --compare OLD`: the report compared with an earlier one. `OLD` is a
//! `report.json` file, or a commit: then that commit's own `cargo xtask report` runs first,
//! with the same arguments, in a worktree of it under `target/compare/` (kept, so that a
//! second comparison with the same commit rebuilds only what changed), and its
//! `report.json` is the earlier report.

use crate::cmd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `args` with `--compare OLD` resolved to a `report.json` (running the commit's report if
/// `OLD` names one); unchanged without `--compare`.
///
/// # Errors
/// An unknown revision, a failed worktree or a failed report at that commit.
pub fn resolve(root: &Path, args: &[String]) -> Result<Vec<String>, String> {
    let Some(at) = args.iter().position(|a| a == "--compare") else {
        return Ok(args.to_vec());
    };
    let Some(old) = args.get(at + 1) else {
        return Err("--compare needs a report.json or a commit".into());
    };
    let rest: Vec<String> = args[..at].iter().chain(&args[at + 2..]).cloned().collect();
    let json = if Path::new(old).is_file() {
        PathBuf::from(old)
    } else {
        report_at_commit(root, old, &rest)?
    };
    let mut resolved = rest;
    resolved.push("--compare".into());
    resolved.push(json.display().to_string());
    Ok(resolved)
}

/// Runs `cargo xtask report ARGS` at commit `rev` and returns its `report.json`.
fn report_at_commit(root: &Path, rev: &str, args: &[String]) -> Result<PathBuf, String> {
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
    eprintln!(
        "xtask report: the report of {sha} first, in {}",
        dir.display()
    );
    // That commit's own xtask and toolchain (its rust-toolchain.toml), in its own target,
    // writing where it writes by default (an `--out` is this report's, not that one's).
    let mut c = Command::new("cargo");
    c.current_dir(&dir)
        .arg("xtask")
        .arg("report")
        .args(without_out(args));
    cmd::without_outer_cargo_env(&mut c);
    cmd::status(&mut c)?;
    let json = dir.join("target/report/report.json");
    if json.is_file() {
        Ok(json)
    } else {
        Err(format!("the report of {sha} wrote no {}", json.display()))
    }
}

/// `args` less any `--out DIR`.
fn without_out(args: &[String]) -> Vec<String> {
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
    use super::without_out;

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
