//! Today's ArceOS line on buddy-sim: `ax-std` 0.7 on `axplat-dyn` from the published crates
//! (no ArceOS source here), its `ax-alloc` 0.9 patched to this project's (`arceos/ax-alloc`)
//! by the app's workspace (`arceos/today`), booted under QEMU for aarch64 (`virt`, a Linux
//! arm64 Image) and x86_64 (`q35`, a UEFI image under OVMF) with one and two CPUs. One
//! build per architecture serves both CPU counts (axplat-dyn finds the CPUs at boot). The
//! same app on ax-alloc's own backends (`arceos/today-control`: buddy-slab-allocator, and
//! TLSF with its `tlsf` feature) is the control, on request (`arceos-today-compare`): what
//! fails there is listed, not fatal.
//!
//! The crates need a newer nightly than the 0.3.0-preview line's ([`NIGHTLY`]: `ax-io` 0.7
//! uses `BorrowedCursor` without its lifetime argument), built from `rust-src` for both
//! targets (this nightly has no rust-std or llvm-tools on the dist server these machines
//! reach); `ax-posix-api` runs bindgen (Debian's libclang), and the images are cut with
//! Debian's `llvm-objcopy`.

use crate::cmd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The nightly today's ArceOS crates build with (the one tgoskits' CI uses).
pub const NIGHTLY: &str = "nightly-2026-09-04";
/// Components the nightly needs: `rust-src` (both targets are built from source).
pub const NIGHTLY_COMPONENTS: [&str; 1] = ["rust-src"];
/// Debian packages the builds and boots need (this stage's and StarryOS's): libclang for
/// bindgen, OVMF for x86_64's UEFI boot, LLVM's `objcopy` and `readelf` for the images,
/// e2fsprogs for StarryOS's root file system.
pub const APT_PACKAGES: [&str; 4] = ["libclang-dev", "ovmf", "llvm", "e2fsprogs"];

/// OVMF's firmware from Debian's `ovmf` package.
const OVMF: &str = "/usr/share/OVMF/OVMF_CODE.fd";

/// One architecture today's ArceOS (and StarryOS on it) is built and booted for.
pub struct Arch {
    pub name: &'static str,
    pub target: &'static str,
    pub qemu: &'static str,
    pub machine: &'static [&'static str],
}

pub const ARCHS: [Arch; 2] = [
    Arch {
        name: "aarch64",
        target: "aarch64-unknown-none-softfloat",
        qemu: "qemu-system-aarch64",
        machine: &["-machine", "virt", "-cpu", "cortex-a72"],
    },
    Arch {
        name: "x86_64",
        target: "x86_64-unknown-none",
        qemu: "qemu-system-x86_64",
        machine: &["-machine", "q35", "-bios", OVMF],
    },
];

/// The lines every run on buddy-sim prints: the allocator ArceOS names at boot, and the
/// app's verdict.
const EXPECTED: [&str; 2] = ["use buddy-sim allocator.", "today: all 5 checks passed"];

/// An allocator today's ArceOS runs on: ours, or a control backend of ax-alloc's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    BuddySim,
    BuddySlab,
    Tlsf,
}

impl Backend {
    const ALL: [Self; 3] = [Self::BuddySim, Self::BuddySlab, Self::Tlsf];

    fn name(self) -> &'static str {
        match self {
            Self::BuddySim => "buddy-sim",
            Self::BuddySlab => "buddy-slab-allocator",
            Self::Tlsf => "TLSF",
        }
    }

    /// The app's workspace, and the features it is built with.
    fn workspace(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Self::BuddySim => ("arceos/today", &[]),
            Self::BuddySlab => ("arceos/today-control", &[]),
            Self::Tlsf => ("arceos/today-control", &["tlsf"]),
        }
    }
}

/// `cargo build --release --target TARGET` of today's ArceOS line, as every build of it here
/// runs: the nightly, the standard library from source, axplat-dyn's position-independent
/// link through its `linker.x`, the shared target directory ([`target_dir`]). The caller
/// adds the package.
pub fn nightly_build(root: &Path, target: &str) -> Command {
    let mut c = cmd::toolchain_cargo(root, NIGHTLY);
    c.env(
        "RUSTFLAGS",
        "-Crelocation-model=pic -Clink-arg=-pie -Clink-arg=-znostart-stop-gc -Clink-arg=-Tlinker.x",
    )
    .env("CARGO_TARGET_DIR", target_dir(root))
    .args(["build", "--release", "--target", target])
    .args([
        "-Zbuild-std=core,alloc",
        "-Zbuild-std-features=compiler-builtins-mem",
    ]);
    c
}

/// Cuts the flat binary QEMU boots (aarch64's Linux Image, x86_64's PE/EFI image, as
/// axplat-dyn links them) out of `elf` with Debian's `llvm-objcopy`.
pub fn flat_image(elf: &Path, image: &Path) -> Result<(), String> {
    cmd::status(
        Command::new("llvm-objcopy")
            .arg(elf)
            .args(["--strip-all", "-O", "binary"])
            .arg(image),
    )
}

/// The target directory of every build of today's ArceOS line (this stage's and StarryOS's).
pub fn target_dir(root: &Path) -> PathBuf {
    root.join("target/arceos-today")
}

/// Builds the app for `arch` on `backend` with the features `extra` and returns its image
/// ([`app_image`]), labelled `label`.
fn build(
    root: &Path,
    arch: &Arch,
    backend: Backend,
    extra: &[&str],
    label: &str,
) -> Result<PathBuf, String> {
    let (workspace, own) = backend.workspace();
    let features = own
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    let args: &[&str] = if features.is_empty() {
        &[]
    } else {
        &["--features", &features]
    };
    app_image(root, arch, workspace, args, label)
}

/// The app's aarch64 image on buddy-sim with `feature` (`ram-pattern`: as AxVisor's guest;
/// `hypervisor-guest`: as the arm64 kernel's), cut to `today-aarch64-FEATURE.bin`.
pub fn aarch64_guest_image(root: &Path, feature: &str) -> Result<PathBuf, String> {
    app_image(
        root,
        &ARCHS[0],
        "arceos/today",
        &["--features", feature],
        feature,
    )
}

/// Builds the app of `workspace` for `arch` with `args` (its features) and cuts its image,
/// a flat binary (aarch64's Linux Image, x86_64's PE/EFI image, as axplat-dyn links them),
/// to `today-ARCH-LABEL.bin` in the shared target directory.
fn app_image(
    root: &Path,
    arch: &Arch,
    workspace: &str,
    args: &[&str],
    label: &str,
) -> Result<PathBuf, String> {
    let mut c = nightly_build(root, arch.target);
    c.arg("--locked")
        .args(args)
        .arg("--manifest-path")
        .arg(root.join(workspace).join("Cargo.toml"));
    cmd::status(&mut c)?;
    let dir = target_dir(root);
    let image = dir.join(format!("today-{}-{label}.bin", arch.name));
    flat_image(&dir.join(arch.target).join("release/arceos-today"), &image)?;
    Ok(image)
}

/// Boots `image` for `arch` with `cpus` CPUs and 128 MiB of RAM; the output without colour
/// codes.
fn boot(arch: &Arch, image: &Path, cpus: usize) -> Result<String, String> {
    boot_with(arch, image, cpus, &["-m", "128M"])
}

/// Boots `image` for `arch` with `cpus` CPUs and QEMU's arguments `extra` (its RAM at
/// least); the output without colour codes.
fn boot_with(arch: &Arch, image: &Path, cpus: usize, extra: &[&str]) -> Result<String, String> {
    let mut qemu = Command::new(arch.qemu);
    qemu.args(arch.machine)
        .args(extra)
        .args(["-smp", &cpus.to_string()])
        .args(["-nographic", "-no-reboot", "-nic", "none", "-kernel"])
        .arg(image);
    let (_, out) = cmd::output_with_timeout(&mut qemu, Duration::from_secs(240))?;
    Ok(crate::arceos::strip_colours(&out))
}

/// The report's QEMU half of the "ArceOS today" section: the app's `bench` build (the
/// allocator calls ArceOS makes most, timed in the guest) on buddy-sim and on ax-alloc's own
/// backends, x86_64 and aarch64, each booted once with one CPU and 512 MiB under
/// `-icount shift=0` (the guest clock counts instructions, 1 ns each), its `today bench`
/// lines left in `out`, each boot's headed by `TODAY RUN arch=... allocator=...`. A build or
/// boot that fails leaves `UNAVAILABLE: why` as the file's first line instead: the report
/// says so and goes on.
pub fn capture_measurements(root: &Path, out: &Path) -> Result<(), String> {
    cmd::write_capture(out, measure(root))
}

fn measure(root: &Path) -> Result<String, String> {
    let mut log = String::new();
    for arch in &ARCHS {
        for backend in Backend::ALL {
            let label = format!("bench-{}", backend.name());
            let image = build(root, arch, backend, &["bench"], &label)?;
            let out = boot_with(arch, &image, 1, &["-m", "512M", "-icount", "shift=0"])?;
            if !out.lines().any(|l| l == "today bench: done") {
                return Err(format!(
                    "the bench on {} with {} did not finish; its run ended:\n{}",
                    arch.name,
                    backend.name(),
                    last_lines(&out)
                ));
            }
            log.push_str(&format!(
                "TODAY RUN arch={} allocator={}\n",
                arch.name,
                backend.name()
            ));
            for line in out.lines().filter(|l| l.starts_with("today bench ")) {
                log.push_str(line);
                log.push('\n');
            }
        }
    }
    Ok(log)
}

/// The test stage: the app on both architectures with one and two CPUs; every run prints
/// every check passed, and how many regions the allocator manages. With `controls`
/// (`arceos-today-compare`), the same app on ax-alloc's own backends too, whose failed
/// checks are listed (a measurement of those allocators, not a check of this project's: the
/// full run leaves them out).
pub fn stage(root: &Path, controls: bool) -> Result<String, String> {
    // The drop-in's own tests (reclaim's retry and lease, tracking through page_owner) and
    // lints, on the host, with `tracking` (the kernel builds below build it without).
    let manifest = root.join("arceos/ax-alloc/Cargo.toml");
    cmd::status(
        cmd::cargo(root)
            .args([
                "clippy",
                "--locked",
                "--all-targets",
                "--features",
                "tracking",
            ])
            .arg("--manifest-path")
            .arg(&manifest)
            .args(["--", "-D", "warnings"]),
    )?;
    cmd::status(
        cmd::cargo(root)
            .args([
                "test",
                "--locked",
                "--features",
                "tracking",
                "--manifest-path",
            ])
            .arg(&manifest),
    )?;
    let mut runs = Vec::new();
    // The controls' failed checks: (backend, check and why, runs).
    let mut findings: Vec<(Backend, String, usize)> = Vec::new();
    let backends: &[Backend] = if controls {
        &Backend::ALL
    } else {
        &[Backend::BuddySim]
    };
    for arch in &ARCHS {
        for &backend in backends {
            println!(
                "    --- today's ArceOS (ax-std 0.7.5) on {} with {}",
                arch.name,
                backend.name()
            );
            let image = build(root, arch, backend, &[], backend.name())?;
            for cpus in [1, 2] {
                let out = boot(arch, &image, cpus)?;
                if backend == Backend::BuddySim {
                    check_ours(arch, cpus, &out)?;
                    let regions = out
                        .lines()
                        .find_map(|l| l.split("today on buddy-sim with ").nth(1))
                        .unwrap_or("? region(s)")
                        .trim()
                        .to_string();
                    runs.push(format!("{} {cpus} CPU(s): {regions}", arch.name));
                    continue;
                }
                for what in control_findings(&out) {
                    match findings.iter_mut().find(|f| f.0 == backend && f.1 == what) {
                        Some(f) => f.2 += 1,
                        None => findings.push((backend, what, 1)),
                    }
                }
            }
        }
    }
    let ours = format!(
        "ax-std 0.7.5 on ax-alloc 0.9.2 patched to buddy-sim passed every check: {}",
        runs.join("; ")
    );
    if !controls {
        return Ok(ours);
    }
    let configurations = ARCHS.len() * 2;
    let controls: Vec<String> = [Backend::BuddySlab, Backend::Tlsf]
        .into_iter()
        .map(|b| {
            let each: Vec<String> = findings
                .iter()
                .filter(|f| f.0 == b)
                .map(|(_, what, n)| format!("{what} ({n} of {configurations})"))
                .collect();
            if each.is_empty() {
                format!("{}: every check passed", b.name())
            } else {
                format!("{}: {}", b.name(), each.join("; "))
            }
        })
        .collect();
    Ok(format!(
        "{ours}; the same app on ax-alloc's own backends: {}",
        controls.join(". ")
    ))
}

/// A run on buddy-sim: the boot log names it, and every check passed.
fn check_ours(arch: &Arch, cpus: usize, out: &str) -> Result<(), String> {
    for line in EXPECTED {
        if !out.contains(line) {
            return Err(format!(
                "{} with {cpus} CPU(s): no line {line:?}; the run ended:\n{}",
                arch.name,
                last_lines(out)
            ));
        }
    }
    Ok(())
}

/// The last 15 lines of a run's output, to show how it ended.
fn last_lines(out: &str) -> String {
    let tail: Vec<&str> = out.lines().rev().take(15).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// What failed in a control run: each failed check with its reason, each region of memory
/// the backend left unused, and how the run ended (a panic's message) if it did not reach
/// its verdict.
fn control_findings(out: &str) -> Vec<String> {
    let mut found: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("today "))
        .filter(|l| l.contains(": FAIL "))
        .map(|l| l.replacen(": FAIL ", ": ", 1))
        .collect();
    // buddy-slab-allocator logs the regions it leaves unused.
    found.extend(
        out.lines()
            .filter_map(|l| l.split("GlobalAllocator: ").nth(1))
            .filter(|l| l.starts_with("skip region"))
            .map(|l| format!("memory left unused: {}", l.trim())),
    );
    if !out.lines().any(|l| l.starts_with("today: ")) {
        let panic = out
            .lines()
            .skip_while(|l| !l.starts_with("panicked at"))
            .nth(1)
            .unwrap_or("no verdict line");
        found.push(format!("the run stopped: {}", panic.trim()));
    }
    found
}
