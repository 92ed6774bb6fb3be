//! The `package` stage: the crates as a user downloads them. Every library is packaged in one
//! `cargo package` call (their publish order, [`LIBS`], checked against the packaged
//! manifests) and unpacked into a scratch workspace whose `[patch.crates-io]`
//! points each crate at its unpacked siblings (none is on crates.io yet). From those copies
//! alone:
//! - each package carries its README, both licences and its changelog;
//! - none of its files but the manifests names anything that exists only in this repository
//!   ([`LOCAL_ONLY`]);
//! - its README states the MSRV and opens with a quick start;
//! - `cargo test` passes in each crate's own root with its default features, and its tests
//!   build with every feature (none of them needs nightly; the `test` stage runs those);
//! - the quick start, its `[dependencies]` snippet and its code copied into a fresh cargo
//!   project (a `main.rs`), builds and runs.

use crate::cmd::{self, cargo};
use crate::stages::LIBS;
use std::path::{Path, PathBuf};

/// Files every published crate must carry.
const PACKAGED: [&str; 4] = ["README.md", "LICENSE-MIT", "LICENSE-APACHE", "CHANGELOG.md"];

/// What a packaged README or rustdoc must not name: commands and paths of this repository,
/// which mean nothing to a user of the crate (on crates.io or docs.rs).
const LOCAL_ONLY: [&str; 5] = ["xtask", "cargo run -p", "tests/", "fuzz/", "kernel/"];

/// The heading of the section a README's quick start is under.
const QUICK_START: &str = "## Quick start";

/// Where the unpacked crates, their scratch workspace and the quick-start projects live.
fn scratch(root: &Path) -> PathBuf {
    root.join("target/package-test")
}

pub fn run(root: &Path) -> Result<String, String> {
    let dir = scratch(root);
    if dir.exists() {
        // Keep the build directory: the dependencies need not be built again.
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.file_name().is_some_and(|n| n != "target") {
                remove(&path)?;
            }
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let crates = package_and_unpack(root, &dir)?;
    check_publish_order(&crates)?;
    write_workspace(root, &dir, &crates)?;
    let mut quick_starts = Vec::new();
    for c in &crates {
        check_files(c)?;
        quick_starts.push(check_contents(c)?);
    }
    // The tests run with the default features (what `cargo test` runs in a downloaded
    // crate), and build with every feature (the `test` stage runs those on the repository's
    // copy: the same sources, which the packaged copy builds from alone).
    let mut tests = 0;
    for c in &crates {
        let mut run = cargo(&c.dir);
        run.env("CARGO_TARGET_DIR", dir.join("target")).arg("test");
        tests += crate::stages::tests_run(&cmd::output_echoed(&mut run)?);
        cmd::status(
            cargo(&c.dir)
                .env("CARGO_TARGET_DIR", dir.join("target"))
                .args(["test", "--all-features", "--no-run"]),
        )?;
    }
    for (c, (deps, code)) in crates.iter().zip(&quick_starts) {
        quick_start(root, &dir, c, deps, code, &crates)?;
    }
    Ok(format!(
        "{} crates packaged in publish order ({}), unpacked and tested alone ({} tests with \
         default features; every feature's tests build), each with {}, no repository-only \
         names, each README's quick start built and run in a fresh project",
        crates.len(),
        LIBS.join(", "),
        tests,
        PACKAGED.join(", ")
    ))
}

/// One library, unpacked.
struct Unpacked {
    name: &'static str,
    dir: PathBuf,
}

/// `cargo package` of every library in one call (each built against the others' packages,
/// not their sources), then each `.crate` unpacked into `dir`.
fn package_and_unpack(root: &Path, dir: &Path) -> Result<Vec<Unpacked>, String> {
    let mut c = cargo(root);
    // The unpacked copies are built and tested below.
    c.args(["package", "--no-verify", "--allow-dirty"]);
    for lib in LIBS {
        c.args(["-p", lib]);
    }
    cmd::status(&mut c)?;
    let version = env!("CARGO_PKG_VERSION");
    let mut out = Vec::new();
    for name in LIBS {
        let file = root.join(format!("target/package/{name}-{version}.crate"));
        // `m`: the files get the time of unpacking, not the archive's, so that cargo (which
        // judges path dependencies by modification time) never takes a build of an earlier
        // package in the kept build directory for one of this package.
        cmd::status(
            std::process::Command::new("tar")
                .arg("xzmf")
                .arg(&file)
                .arg("-C")
                .arg(dir),
        )?;
        out.push(Unpacked {
            name,
            dir: dir.join(format!("{name}-{version}")),
        });
    }
    Ok(out)
}

/// [`LIBS`] is the order the crates are published in: each crate's packaged manifest names
/// as a dependency (of any kind, for any target) only crates before it, which crates.io must
/// hold when it is published. (`cargo package -p` of one crate alone fails until the crates
/// before it are published: packaged together, each is built against the others' packages.)
fn check_publish_order(crates: &[Unpacked]) -> Result<(), String> {
    for (i, c) in crates.iter().enumerate() {
        let manifest = read(&c.dir.join("Cargo.toml"))?;
        for later in &crates[i + 1..] {
            let names = |section: &str| {
                manifest.lines().any(|l| {
                    l.starts_with('[') && l.ends_with(&format!("{section}.{}]", later.name))
                })
            };
            if names("dependencies") || names("dev-dependencies") || names("build-dependencies") {
                return Err(format!(
                    "{} depends on {}, which the publish order (LIBS) puts after it",
                    c.name, later.name
                ));
            }
        }
    }
    Ok(())
}

/// `[patch.crates-io]` entries pointing every library at its unpacked copy.
fn patches(crates: &[Unpacked]) -> String {
    let mut s = String::from("[patch.crates-io]\n");
    for c in crates {
        s.push_str(&format!(
            "{} = {{ path = {:?} }}\n",
            c.name,
            c.dir.display()
        ));
    }
    s
}

/// The scratch workspace over the unpacked crates, with this repository's lock file (the
/// same dependency versions as its own tests; cargo drops what it does not need).
fn write_workspace(root: &Path, dir: &Path, crates: &[Unpacked]) -> Result<(), String> {
    let members: Vec<String> = crates
        .iter()
        .map(|c| {
            format!(
                "{:?}",
                c.dir.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect();
    let manifest = format!(
        "# The libraries as packaged, each pointed at its unpacked siblings.\n[workspace]\n\
         resolver = \"3\"\nmembers = [{}]\n\n{}",
        members.join(", "),
        patches(crates)
    );
    cmd::write_file(&dir.join("Cargo.toml"), &manifest)?;
    copy(&root.join("Cargo.lock"), &dir.join("Cargo.lock"))
}

/// The package carries [`PACKAGED`].
fn check_files(c: &Unpacked) -> Result<(), String> {
    match PACKAGED.iter().find(|f| !c.dir.join(f).is_file()) {
        Some(missing) => Err(format!("the {} package lacks {missing}", c.name)),
        None => Ok(()),
    }
}

/// No file of the package but its manifests (which must list the test targets' paths) names
/// anything of [`LOCAL_ONLY`]: not the README, the rustdoc, the examples, the tests or the
/// changelog. The README states the crate's MSRV and has a quick start, which it returns
/// ([`quick_start_snippets`]).
fn check_contents(c: &Unpacked) -> Result<(String, String), String> {
    const MANIFESTS: [&str; 4] = [
        "Cargo.toml",
        "Cargo.toml.orig",
        "Cargo.lock",
        ".cargo_vcs_info.json",
    ];
    for file in files(&c.dir)? {
        let name = file
            .strip_prefix(&c.dir)
            .unwrap_or(&file)
            .display()
            .to_string();
        if MANIFESTS.contains(&name.as_str()) {
            continue;
        }
        // Text files only (a binary file names nothing).
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(word) = LOCAL_ONLY.iter().find(|w| line.contains(**w)) {
                return Err(format!(
                    "{} package, {name}:{}: names {word:?}, which exists only in this \
                     repository: {}",
                    c.name,
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    let readme = read(&c.dir.join("README.md"))?;
    let manifest = read(&c.dir.join("Cargo.toml"))?;
    let msrv = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"').to_string())
        .ok_or(format!("the {} package declares no rust-version", c.name))?;
    if !readme.contains(&format!("Rust {msrv}")) {
        return Err(format!(
            "the {} README does not state its MSRV (\"Rust {msrv}\")",
            c.name
        ));
    }
    quick_start_snippets(c.name, &readme)
}

/// The `[dependencies]` snippet (a `toml` block) and the code (a `rust` block with a `main`)
/// under the README's [`QUICK_START`] heading.
fn quick_start_snippets(name: &str, readme: &str) -> Result<(String, String), String> {
    let section = readme
        .split_once(QUICK_START)
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
        .ok_or(format!(
            "the {name} README has no \"{QUICK_START}\" section"
        ))?;
    let toml = fenced(section, "toml")
        .filter(|t| t.contains("[dependencies]"))
        .ok_or(format!(
            "the {name} README's quick start has no [dependencies] snippet"
        ))?;
    let code = fenced(section, "rust")
        .filter(|r| r.contains("fn main"))
        .ok_or(format!(
            "the {name} README's quick start has no rust block with a main"
        ))?;
    Ok((toml, code))
}

/// The first fenced block of `lang` in `text`.
fn fenced(text: &str, lang: &str) -> Option<String> {
    let (_, rest) = text.split_once(&format!("```{lang}\n"))?;
    let (block, _) = rest.split_once("```")?;
    Some(block.to_string())
}

/// A README's quick start in a fresh project: a manifest with the snippet's dependencies
/// `deps` (the libraries patched to their unpacked copies), `code` as `main.rs`; `cargo run`.
fn quick_start(
    root: &Path,
    dir: &Path,
    c: &Unpacked,
    deps: &str,
    code: &str,
    crates: &[Unpacked],
) -> Result<(), String> {
    let project = dir.join(format!("quick-start-{}", c.name));
    let manifest = format!(
        "[package]\nname = \"quick-start-{}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         publish = false\n\n# A project of its own, outside the scratch workspace.\n\
         [workspace]\n\n{deps}\n{}",
        c.name,
        patches(crates)
    );
    cmd::write_file(&project.join("Cargo.toml"), &manifest)?;
    cmd::write_file(&project.join("src/main.rs"), code)?;
    copy(&root.join("Cargo.lock"), &project.join("Cargo.lock"))?;
    cmd::status(
        cargo(&project)
            .env("CARGO_TARGET_DIR", dir.join("target"))
            .args(["run", "--quiet"]),
    )
}

/// Every file under `dir`.
fn files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))
}

fn remove(path: &Path) -> Result<(), String> {
    let r = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    r.map_err(|e| format!("{}: {e}", path.display()))
}
