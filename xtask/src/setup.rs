//! Stage 1: install what is missing, idempotently; quiet when everything is there.
//!
//! Rust targets and components through rustup, QEMU 10 (`qemu-user` and `qemu-system-arm`,
//! FEAT_MOPS; `qemu-system-x86`, the x86_64 kernel under KVM) from bookworm-backports, the aarch64 cross linker and libc, build-essential (libFuzzer needs
//! g++), valgrind (the report's instruction counts), and cargo-fuzz. Each failed install stops
//! the run with the command and a hint. `cargo xtask report` runs the part it needs
//! ([`for_report`]).

use crate::cmd::{self, MSRV, TOOLCHAIN, probe};
use std::path::Path;
use std::process::Command;

/// The bare-metal targets the MSRV check builds for, beside the host.
const BARE_METAL_TARGETS: [&str; 2] = ["aarch64-unknown-none", "x86_64-unknown-none"];
const TARGETS: [&str; 3] = [
    "aarch64-unknown-linux-gnu",
    "aarch64-unknown-none",
    "x86_64-unknown-none",
];
const APT_PACKAGES: [&str; 4] = [
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "build-essential",
    "valgrind",
];
/// What the report needs beyond the toolchain: callgrind, and binutils' `ld -r` and `objcopy`
/// to build the compiler-builtins memset peer (the toolchain's `x86_64-unknown-none` target
/// provides its code).
const REPORT_APT_PACKAGES: [&str; 2] = ["valgrind", "binutils"];
const BACKPORTS_LIST: &str = "/etc/apt/sources.list.d/bookworm-backports.list";
/// QEMU older than this has no FEAT_MOPS (`setp` is SIGILL under bookworm's 7.2).
const MIN_QEMU_MAJOR: u32 = 10;

pub fn run(root: &Path) -> Result<String, String> {
    let mut done = Vec::new();
    rust_toolchains(&mut done)?;
    msrv_toolchain(&mut done)?;
    arceos_toolchain(&mut done)?;
    arceos_today_toolchain(&mut done)?;
    apt(&mut done, true, &APT_PACKAGES)?;
    apt(&mut done, false, &crate::arceos_today::APT_PACKAGES)?;
    cargo_fuzz(root, &mut done)?;
    Ok(summary(&done))
}

/// The oldest supported toolchain (minimal profile) with the bare-metal targets, for the
/// msrv stage.
fn msrv_toolchain(done: &mut Vec<String>) -> Result<(), String> {
    ensure_toolchain(MSRV, done)?;
    ensure_targets(
        MSRV,
        &BARE_METAL_TARGETS,
        "rustup could not add the targets to the MSRV toolchain",
        done,
    )
}

/// The nightly that builds ArceOS's published crates, with `rust-src` (aarch64's softfloat
/// target is built from source) and `llvm-tools` (objcopy), and x86_64's bare-metal target.
fn arceos_toolchain(done: &mut Vec<String>) -> Result<(), String> {
    use crate::arceos::{NIGHTLY, NIGHTLY_COMPONENTS, NIGHTLY_TARGETS};
    ensure_toolchain(NIGHTLY, done)?;
    ensure_components(
        NIGHTLY,
        &NIGHTLY_COMPONENTS,
        "rustup could not add the component to ArceOS's nightly; check the dist server",
        done,
    )?;
    ensure_targets(
        NIGHTLY,
        &NIGHTLY_TARGETS,
        "rustup could not add the bare-metal target to ArceOS's nightly",
        done,
    )
}

/// The nightly that builds today's ArceOS crates (`ax-std` 0.7), with `rust-src`.
fn arceos_today_toolchain(done: &mut Vec<String>) -> Result<(), String> {
    use crate::arceos_today::{NIGHTLY, NIGHTLY_COMPONENTS};
    ensure_toolchain(NIGHTLY, done)?;
    ensure_components(
        NIGHTLY,
        &NIGHTLY_COMPONENTS,
        "rustup could not add rust-src to today's ArceOS nightly; check the dist server",
        done,
    )
}

/// Adds the `components` that `toolchain` lacks.
fn ensure_components(
    toolchain: &str,
    components: &[&str],
    hint: &str,
    done: &mut Vec<String>,
) -> Result<(), String> {
    let have = probe(&mut rustup(&[
        "component",
        "list",
        "--installed",
        "--toolchain",
        toolchain,
    ]))
    .unwrap_or_default();
    for comp in components {
        if !have.lines().any(|l| l.starts_with(comp)) {
            install(
                &mut rustup(&["component", "add", "--toolchain", toolchain, comp]),
                hint,
            )?;
            done.push(format!("{toolchain} {comp}"));
        }
    }
    Ok(())
}

/// Adds the `targets` that `toolchain` lacks.
fn ensure_targets(
    toolchain: &str,
    targets: &[&str],
    hint: &str,
    done: &mut Vec<String>,
) -> Result<(), String> {
    let have = probe(&mut rustup(&[
        "target",
        "list",
        "--installed",
        "--toolchain",
        toolchain,
    ]))
    .unwrap_or_default();
    let missing: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|t| !have.lines().any(|l| l.trim() == *t))
        .collect();
    if !missing.is_empty() {
        let mut args = vec!["target", "add", "--toolchain", toolchain];
        args.extend(&missing);
        install(&mut rustup(&args), hint)?;
        done.push(format!("{toolchain} targets {}", missing.join(" ")));
    }
    Ok(())
}

/// What `cargo xtask report` needs: the toolchain with its targets, the nightlies of
/// ArceOS's two lines, valgrind and binutils, today's ArceOS's Debian packages, and QEMU 10
/// (the ArceOS sections boot ArceOS under TCG; the ring-0 section boots the x86_64 kernel
/// where the machine has hardware KVM).
pub fn for_report() -> Result<String, String> {
    let mut done = Vec::new();
    rust_toolchains(&mut done)?;
    arceos_toolchain(&mut done)?;
    // Today's ArceOS (the "ArceOS today" guests and the EL2 hypervisor's guest) builds
    // with its own nightly, and with Debian's libclang, llvm-objcopy and OVMF.
    arceos_today_toolchain(&mut done)?;
    // QEMU with x86 and arm system emulation: the ArceOS sections boot both.
    apt(&mut done, true, &REPORT_APT_PACKAGES)?;
    apt(&mut done, false, &crate::arceos_today::APT_PACKAGES)?;
    Ok(summary(&done))
}

fn summary(done: &[String]) -> String {
    if done.is_empty() {
        "everything was already installed".into()
    } else {
        format!("installed: {}", done.join(", "))
    }
}

fn rustup(args: &[&str]) -> Command {
    let mut c = Command::new("rustup");
    c.args(args);
    c
}

fn install(c: &mut Command, hint: &str) -> Result<(), String> {
    cmd::status(c).map_err(|e| format!("{e}\n    what to do: {hint}"))
}

/// Installs `toolchain` (minimal profile) if rustup lacks it.
fn ensure_toolchain(toolchain: &str, done: &mut Vec<String>) -> Result<(), String> {
    let toolchains = probe(&mut rustup(&["toolchain", "list"])).unwrap_or_default();
    if !toolchains.lines().any(|l| l.starts_with(toolchain)) {
        install(
            &mut rustup(&["toolchain", "install", toolchain, "--profile", "minimal"]),
            "check that the Rust dist server is reachable",
        )?;
        done.push(format!("toolchain {toolchain}"));
    }
    Ok(())
}

fn rust_toolchains(done: &mut Vec<String>) -> Result<(), String> {
    ensure_toolchain(TOOLCHAIN, done)?;
    let toolchains = probe(&mut rustup(&["toolchain", "list"])).unwrap_or_default();
    let installed = |kind: &str, tc: &str| {
        probe(&mut rustup(&[
            kind,
            "list",
            "--installed",
            "--toolchain",
            tc,
        ]))
        .unwrap_or_default()
    };
    let have = installed("component", TOOLCHAIN);
    for comp in ["rustfmt", "clippy"] {
        if !have.lines().any(|l| l.starts_with(comp)) {
            install(
                &mut rustup(&["component", "add", "--toolchain", TOOLCHAIN, comp]),
                "rustup could not add the component; retry, or check the dist server",
            )?;
            done.push(comp.into());
        }
    }
    ensure_targets(
        TOOLCHAIN,
        &TARGETS,
        "the pinned 1.95.0 has rust-std for these targets; `stable` may not",
        done,
    )?;
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        install(
            &mut rustup(&[
                "toolchain",
                "install",
                "nightly",
                "--profile",
                "minimal",
                "-c",
                "miri,rust-src",
            ]),
            "nightly is needed for Miri and cargo-fuzz; check the dist server",
        )?;
        done.push("nightly".into());
    }
    let have = installed("component", "nightly");
    for comp in ["miri", "rust-src"] {
        if !have.lines().any(|l| l.starts_with(comp)) {
            install(
                &mut rustup(&["component", "add", "--toolchain", "nightly", comp]),
                "this nightly may lack Miri; install a nightly that has it",
            )?;
            done.push(format!("nightly {comp}"));
        }
    }
    // Builds Miri's sysroot once; prints one line and returns at once when it exists.
    let mut miri = Command::new("cargo");
    miri.args(["+nightly", "miri", "setup"]);
    if probe(&mut miri).is_none() {
        install(
            &mut miri,
            "`cargo +nightly miri setup` failed; see its output above",
        )?;
        done.push("miri sysroot".into());
    }
    Ok(())
}

/// The QEMU binaries the stages run, and the backports package of each.
const QEMU: [(&str, &str); 3] = [
    ("qemu-aarch64", "qemu-user"),
    ("qemu-system-aarch64", "qemu-system-arm"),
    ("qemu-system-x86_64", "qemu-system-x86"),
];

fn qemu_major(binary: &str) -> Option<u32> {
    let out = probe(Command::new(binary).arg("--version"))?;
    let version = out.split("version ").nth(1)?;
    version.split('.').next()?.trim().parse().ok()
}

fn dpkg_installed(pkg: &str) -> bool {
    probe(Command::new("dpkg-query").args(["-W", "-f=${Status}", pkg]))
        .is_some_and(|s| s.contains("install ok installed"))
}

/// Installs the missing `packages` and, with `qemu`, QEMU 10 from bookworm-backports.
fn apt(done: &mut Vec<String>, qemu: bool, packages: &[&str]) -> Result<(), String> {
    let qemu_missing: Vec<&str> = QEMU
        .into_iter()
        .filter(|_| qemu)
        .filter(|(binary, _)| qemu_major(binary).is_none_or(|m| m < MIN_QEMU_MAJOR))
        .map(|(_, package)| package)
        .collect();
    let qemu_ok = qemu_missing.is_empty();
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if qemu_ok && missing.is_empty() {
        return Ok(());
    }
    let sudo = probe(Command::new("id").arg("-u")).is_some_and(|u| u.trim() != "0");
    let apt_get = |args: &[&str]| {
        let mut c = if sudo {
            let mut c = Command::new("sudo");
            c.arg("apt-get");
            c
        } else {
            Command::new("apt-get")
        };
        c.env("DEBIAN_FRONTEND", "noninteractive").args(args);
        c
    };
    if !qemu_ok && !Path::new(BACKPORTS_LIST).exists() {
        let line = format!("deb {} bookworm-backports main\n", debian_mirror());
        std::fs::write(BACKPORTS_LIST, line).map_err(|e| {
            format!(
                "could not write {BACKPORTS_LIST}: {e}\n    what to do: run as root, or add \
                 bookworm-backports to the apt sources by hand"
            )
        })?;
        done.push("bookworm-backports apt source".into());
    }
    install(
        &mut apt_get(&["update", "-qq"]),
        "apt-get update failed: check the Debian mirror in /etc/apt/sources.list.d",
    )?;
    if !qemu_ok {
        let mut args = vec![
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            "-t",
            "bookworm-backports",
        ];
        args.extend(&qemu_missing);
        install(
            &mut apt_get(&args),
            "QEMU 10 comes from bookworm-backports (bookworm's 7.2 has no FEAT_MOPS)",
        )?;
        done.push(format!("{} (backports)", qemu_missing.join(" ")));
    }
    if !missing.is_empty() {
        let mut args = vec!["install", "-y", "-qq"];
        args.extend(&missing);
        install(
            &mut apt_get(&args),
            "apt-get install failed; see its output above",
        )?;
        done.push(missing.join(" "));
    }
    Ok(())
}

/// The Debian mirror the machine's own sources name (deb822 `URIs:` or a `deb` line).
fn debian_mirror() -> String {
    let files = [
        "/etc/apt/sources.list.d/debian.sources",
        "/etc/apt/sources.list",
    ];
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines() {
            let line = line.trim();
            let uri = line.strip_prefix("URIs:").map(str::trim).or_else(|| {
                line.strip_prefix("deb ")
                    .and_then(|r| r.split_whitespace().next())
            });
            if let Some(uri) = uri.filter(|u| u.contains("/debian") && !u.contains("security")) {
                return uri.split_whitespace().next().unwrap_or(uri).to_string();
            }
        }
    }
    "http://deb.debian.org/debian".into()
}

fn cargo_fuzz(root: &Path, done: &mut Vec<String>) -> Result<(), String> {
    let mut version = Command::new("cargo");
    version
        .args(["+nightly", "fuzz", "--version"])
        .current_dir(root);
    if probe(&mut version).is_some() {
        return Ok(());
    }
    install(
        cmd::cargo(root).args(["install", "cargo-fuzz", "--locked"]),
        "cargo-fuzz installs from crates.io; check that it is reachable",
    )?;
    done.push("cargo-fuzz".into());
    Ok(())
}
