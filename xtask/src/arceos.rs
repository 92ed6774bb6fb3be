//! ArceOS on buddy-sim: a kernel nobody here wrote, built from ArceOS's published crates
//! (`axstd`, `axruntime`, `axhal`, ... 0.3.0-preview.3), its `axalloc` patched to this
//! project's (`arceos/axalloc`, over `axalloc-buddy`) with one `[patch]` line, booted under
//! QEMU for x86_64 and aarch64 with one and two CPUs. The apps of `arceos/apps` check the
//! heap, page runs and tasks through ArceOS's interfaces; the same apps on ArceOS's own
//! allocator (`arceos/control`, no patch) are the control.
//!
//! The published crates build with a nightly newer than ArceOS's repository pins
//! (nightly-2025-05-20 predates `core::io::BorrowedBuf` under the name `axio` uses) and
//! older than the current one (`x86_64` and `axio` use nightly features since renamed):
//! [`NIGHTLY`]. The apps' lockfiles pin `axcpu` 0.3.0-preview.8 (later versions move to
//! `percpu` 0.4, whose symbols clash with axhal's 0.2) and `x86_64` 0.15.2.

use crate::cmd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The nightly that builds ArceOS's 0.3.0-preview.3 crates.
pub const NIGHTLY: &str = "nightly-2025-12-01";

/// How QEMU loads a kernel: x86_64 boots the ELF (multiboot), aarch64 a flat image.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Image {
    Elf,
    Binary,
}

/// One architecture ArceOS is built and booted for.
pub struct Arch {
    pub name: &'static str,
    target: &'static str,
    /// The platform package whose `axconfig.toml` the build's configuration starts from.
    platform_package: &'static str,
    /// Its platform name (axhal writes `linker_<platform>.lds`).
    platform: &'static str,
    qemu: &'static str,
    machine: &'static [&'static str],
    image: Image,
    /// The nightly has no rust-std for the target: `-Zbuild-std`.
    build_std: bool,
}

pub const ARCHS: [Arch; 2] = [
    Arch {
        name: "x86_64",
        target: "x86_64-unknown-none",
        platform_package: "axplat-x86-pc",
        platform: "x86-pc",
        qemu: "qemu-system-x86_64",
        machine: &["-machine", "q35"],
        image: Image::Elf,
        build_std: false,
    },
    Arch {
        name: "aarch64",
        target: "aarch64-unknown-none-softfloat",
        platform_package: "axplat-aarch64-qemu-virt",
        platform: "aarch64-qemu-virt",
        qemu: "qemu-system-aarch64",
        machine: &["-machine", "virt", "-cpu", "cortex-a72"],
        image: Image::Binary,
        build_std: true,
    },
];

/// Targets the nightly needs from rustup (aarch64's softfloat target has no rust-std
/// there: built from `rust-src`).
pub const NIGHTLY_TARGETS: [&str; 1] = ["x86_64-unknown-none"];
/// Components the nightly needs: `rust-src` (build-std), `llvm-tools` (objcopy).
pub const NIGHTLY_COMPONENTS: [&str; 2] = ["rust-src", "llvm-tools"];

/// The allocator an ArceOS build runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// `axalloc` patched to this project's (`arceos/apps`).
    BuddySim,
    /// ArceOS's own `axalloc` from the registry (`arceos/control`).
    Bitmap,
}

impl Allocator {
    /// The directory of its workspace under `arceos/`.
    fn dir(self) -> &'static str {
        match self {
            Self::BuddySim => "apps",
            Self::Bitmap => "control",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::BuddySim => "buddy-sim (axalloc-buddy)",
            Self::Bitmap => "ArceOS's bitmap allocator",
        }
    }
}

/// The apps the test stage boots (`bench` is the report's).
pub const APPS: [&str; 3] = ["heap", "pages", "tasks"];

/// RAM given to each boot: the platforms' configured 128 MiB.
const RAM: &str = "128M";

/// The kernels of one architecture, CPU count and allocator: where its images are.
pub struct Build {
    dir: PathBuf,
    image: Image,
}

impl Build {
    /// The image QEMU boots for `app`.
    fn image(&self, app: &str) -> PathBuf {
        match self.image {
            Image::Elf => self.dir.join(format!("{app}.elf")),
            Image::Binary => self.dir.join(format!("{app}.bin")),
        }
    }
}

/// `cargo +NIGHTLY` in `dir`, without the outer build's `RUSTFLAGS`.
fn nightly_cargo(dir: &Path) -> Command {
    let mut c = cmd::toolchain_cargo(dir, NIGHTLY);
    c.env_remove("RUSTFLAGS");
    c
}

/// The version of `package` in the apps' lockfile.
fn locked_version(root: &Path, package: &str) -> Result<String, String> {
    let lock_path = root.join("arceos/apps/Cargo.lock");
    let lock =
        std::fs::read_to_string(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l == format!("name = \"{package}\"")
            && let Some(v) = lines.next().and_then(|v| v.strip_prefix("version = \""))
        {
            return Ok(v.trim_end_matches('"').to_string());
        }
    }
    Err(format!("{package} is not in {}", lock_path.display()))
}

/// The platform package's `axconfig.toml` in cargo's registry sources (after a fetch).
fn platform_config(root: &Path, arch: &Arch) -> Result<PathBuf, String> {
    let version = locked_version(root, arch.platform_package)?;
    let home = cmd::cargo_home()?;
    let src = home.join("registry/src");
    let dirs = std::fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    dirs.filter_map(Result::ok)
        .map(|d| {
            d.path()
                .join(format!("{}-{version}", arch.platform_package))
                .join("axconfig.toml")
        })
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no {}-{version}/axconfig.toml under {}",
                arch.platform_package,
                src.display()
            )
        })
}

/// The build configuration for `arch` with `cpus` CPUs: the platform's `axconfig.toml`
/// with ArceOS's kernel defaults (`configs/defconfig.toml`: a 256 KiB task stack, 100
/// ticks a second) and `max-cpu-num` set, as ArceOS's `axconfig-gen` merges them.
fn write_config(root: &Path, arch: &Arch, cpus: usize, out: &Path) -> Result<(), String> {
    let platform = platform_config(root, arch)?;
    let text =
        std::fs::read_to_string(&platform).map_err(|e| format!("{}: {e}", platform.display()))?;
    let mut config = String::from("task-stack-size = 0x40000\nticks-per-sec = 100\n");
    let mut found = false;
    for line in text.lines() {
        if line.trim_start().starts_with("max-cpu-num") {
            config.push_str(&format!("max-cpu-num = {cpus}\n"));
            found = true;
        } else {
            config.push_str(line);
            config.push('\n');
        }
    }
    if !found {
        return Err(format!("{} has no max-cpu-num", platform.display()));
    }
    // Written only when it changes: a new file rebuilds every crate that reads it.
    if std::fs::read_to_string(out).ok().as_deref() != Some(config.as_str()) {
        std::fs::write(out, config).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    Ok(())
}

/// Builds the apps for `arch` with `cpus` CPUs on `allocator`, their images in
/// `target/arceos/<arch>-<cpus>cpu/<allocator>/`.
pub fn build(root: &Path, arch: &Arch, cpus: usize, allocator: Allocator) -> Result<Build, String> {
    let work = root.join(format!("target/arceos/{}-{cpus}cpu", arch.name));
    let dir = work.join(allocator.dir());
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let manifest = root.join("arceos").join(allocator.dir()).join("Cargo.toml");
    cmd::status(
        nightly_cargo(root)
            .args(["fetch", "--locked", "--manifest-path"])
            .arg(&manifest),
    )?;
    let config = work.join("axconfig.toml");
    write_config(root, arch, cpus, &config)?;
    // Both allocators' builds share one target directory: they differ from axalloc up.
    let target_dir = work.join("target");
    let release = target_dir.join(arch.target).join("release");
    let script = release.join(format!("linker_{}.lds", arch.platform));
    let rustflags = format!(
        "-C link-arg=-T{} -C link-arg=-no-pie -C link-arg=-znostart-stop-gc",
        script.display()
    );
    let mut c = nightly_cargo(root);
    c.env("AX_CONFIG_PATH", &config)
        .env("RUSTFLAGS", rustflags)
        .env("CARGO_TARGET_DIR", &target_dir)
        .args([
            "build",
            "--release",
            "--locked",
            "--bins",
            "--target",
            arch.target,
        ])
        .arg("--manifest-path")
        .arg(&manifest);
    if arch.build_std {
        c.args([
            "-Zbuild-std=core,alloc",
            "-Zbuild-std-features=compiler-builtins-mem",
        ]);
    }
    cmd::status(&mut c)?;
    let objcopy = objcopy()?;
    for app in APPS.iter().chain(&["bench"]) {
        let elf = dir.join(format!("{app}.elf"));
        std::fs::copy(release.join(app), &elf)
            .map_err(|e| format!("{}: {e}", release.join(app).display()))?;
        if arch.image == Image::Binary {
            cmd::status(
                Command::new(&objcopy)
                    .arg(&elf)
                    .args(["--strip-all", "-O", "binary"])
                    .arg(dir.join(format!("{app}.bin"))),
            )?;
        }
    }
    Ok(Build {
        dir,
        image: arch.image,
    })
}

/// The nightly's `llvm-objcopy` (its `llvm-tools` component).
fn objcopy() -> Result<PathBuf, String> {
    let sysroot = cmd::probe(
        Command::new("rustc")
            .arg(format!("+{NIGHTLY}"))
            .args(["--print", "sysroot"]),
    )
    .ok_or("rustc +NIGHTLY --print sysroot failed")?;
    let host = cmd::probe(Command::new("rustc").arg(format!("+{NIGHTLY}")).arg("-vV"))
        .and_then(|v| {
            v.lines()
                .find_map(|l| l.strip_prefix("host: ").map(String::from))
        })
        .ok_or("rustc +NIGHTLY -vV names no host")?;
    let tool = PathBuf::from(sysroot.trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/llvm-objcopy");
    if tool.is_file() {
        Ok(tool)
    } else {
        Err(format!(
            "{} is missing: rustup component add --toolchain {NIGHTLY} llvm-tools",
            tool.display()
        ))
    }
}

/// Boots `app` of `build` for `arch` with `cpus` CPUs; with `icount`, under
/// `-icount shift=0` (the guest clock counts instructions, 1 ns each, and TCG runs one
/// thread). Returns the output with its colour codes removed.
pub fn boot(
    arch: &Arch,
    build: &Build,
    app: &str,
    cpus: usize,
    icount: bool,
) -> Result<String, String> {
    let mut qemu = Command::new(arch.qemu);
    qemu.args(arch.machine)
        .args(["-m", RAM, "-smp", &cpus.to_string()])
        .args(["-nographic", "-no-reboot", "-nic", "none", "-kernel"])
        .arg(build.image(app));
    if icount {
        qemu.args(["-icount", "shift=0"]);
    }
    let (code, out) = cmd::output_with_timeout(&mut qemu, Duration::from_secs(180))?;
    let out = strip_colours(&out);
    if code != Some(0) {
        return Err(format!("{app} on {} exited with {code:?}", arch.name));
    }
    Ok(out)
}

/// `s` without ANSI colour sequences (ArceOS colours its log).
pub fn strip_colours(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... letter
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The test stage: every app on both allocators, both architectures, one and two CPUs.
/// Every buddy-sim run must pass all its checks and say it ran on buddy-sim and which
/// strategy clears its zeroed pages; the control runs must finish (a check or the heap
/// failing there is ArceOS's allocator's finding, listed in the summary).
pub fn stage(root: &Path) -> Result<String, String> {
    let mut passed = 0;
    let mut strategies = Vec::new();
    // The control's findings: (what failed, an example, the configurations it failed in).
    let mut findings: Vec<(String, String, usize)> = Vec::new();
    for arch in &ARCHS {
        for cpus in [1, 2] {
            for allocator in [Allocator::BuddySim, Allocator::Bitmap] {
                println!(
                    "    --- ArceOS {} {cpus} CPU(s) on {}",
                    arch.name,
                    allocator.name()
                );
                let build = build(root, arch, cpus, allocator)?;
                for app in APPS {
                    let name = format!("{app} on {} with {cpus} CPU(s)", arch.name);
                    let out = boot(arch, &build, app, cpus, false)?;
                    match allocator {
                        Allocator::BuddySim => {
                            check_buddy_sim_run(&name, app, &out)?;
                            if let Some(s) = out
                                .lines()
                                .find_map(|l| l.split("zeroed pages cleared with ").nth(1))
                            {
                                let s = format!("{} {}", arch.name, s.trim());
                                if !strategies.contains(&s) {
                                    strategies.push(s);
                                }
                            }
                            passed += 1;
                        }
                        Allocator::Bitmap => {
                            for (what, example) in control_findings(app, &out) {
                                match findings.iter_mut().find(|f| f.0 == what) {
                                    Some(f) => f.2 += 1,
                                    None => findings.push((what, example, 1)),
                                }
                            }
                        }
                    }
                }
            }
            // Both allocators' kernels are booted: the configuration's build directory is
            // not needed again in this run.
            let build_dir = format!("target/arceos/{}-{cpus}cpu/target", arch.name);
            if let Some(r) = crate::disk::reclaim(root, &[&build_dir])? {
                println!("    {r}");
            }
        }
    }
    let configurations = ARCHS.len() * 2;
    let control = if findings.is_empty() {
        "every check passed".to_string()
    } else {
        let each: Vec<String> = findings
            .iter()
            .map(|(what, example, n)| {
                format!("{what} in {n} of {configurations} configurations ({example})")
            })
            .collect();
        each.join("; ")
    };
    let harness = match harness(root)? {
        Some(h) => format!("; {h}"),
        None => String::new(),
    };
    Ok(format!(
        "{passed} boots on buddy-sim passed every check ({} apps, x86_64 and aarch64, 1 and 2 CPUs; zeroed pages: {}); ArceOS's own allocator, same apps: {control}{harness}",
        APPS.len(),
        strategies.join(", ")
    ))
}

/// A buddy-sim run: the boot log names the allocator and the zone, and the app's verdict
/// line says every check passed.
fn check_buddy_sim_run(name: &str, app: &str, out: &str) -> Result<(), String> {
    let mut lines = vec![
        "use TLSF allocator.",
        "buddy-sim: ",
        "zeroed pages cleared with",
    ];
    if app == "tasks" {
        // The CPU id from ArceOS's per-CPU register reached every CPU's lists.
        lines.push("tasks every CPU's own lists used: ok");
    }
    for line in lines {
        if !out.contains(line) {
            return Err(format!(
                "{name}: the boot log has no line containing {line:?}"
            ));
        }
    }
    let verdict = format!("{app}: all ");
    match out.lines().find(|l| l.starts_with(&verdict)) {
        Some(l) if l.ends_with("checks passed") => Ok(()),
        _ => {
            let failed: Vec<&str> = out
                .lines()
                .filter(|l| l.contains("FAIL") || l.contains("panicked") || l.contains("failed"))
                .collect();
            Err(format!(
                "{name}: not every check passed: {}",
                failed.join(" | ")
            ))
        }
    }
}

/// What a control run found: its failed checks, or the panic that ended it, each as (what
/// failed, its message).
fn control_findings(app: &str, out: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| {
            let (what, why) = l.split_once(": FAIL ")?;
            what.starts_with(app)
                .then(|| (format!("{what} failed"), why.to_string()))
        })
        .collect();
    if let Some(i) = out.lines().position(|l| l.starts_with("panicked at")) {
        let why = out.lines().nth(i + 1).unwrap_or("").trim();
        found.push((format!("{app} panicked"), why.to_string()));
    }
    found
}

/// Boots of `bench` per architecture and allocator for the report, with one CPU (exact:
/// instructions under `-icount`).
const MEASURE_BOOTS: usize = 3;

/// The same with two CPUs, timed by the wall clock under TCG: 5 rounds each, 40 in all, so
/// that the interval of the scaling's median leaves out the rounds that QEMU's own threads
/// or the host's other tenants slowed (15 rounds left it from 1.15x to 2.23x on a busy
/// 2-CPU host).
const SMP_MEASURE_BOOTS: usize = 8;

/// The report's QEMU half of the "ArceOS" section: `bench` on both allocators, x86_64 and
/// aarch64, each booted [`MEASURE_BOOTS`] times with one CPU under `-icount shift=0` (guest
/// time counts instructions) and [`SMP_MEASURE_BOOTS`] times with two CPUs by the wall
/// clock, the outputs left in `out`, each headed by `ARCEOS RUN arch=... allocator=...
/// cpus=...`. A build or boot that fails leaves `UNAVAILABLE: why` as the file's first line
/// instead: the report says so and goes on.
pub fn capture_measurements(root: &Path, out: &Path) -> Result<(), String> {
    cmd::write_capture(out, measure(root))
}

fn measure(root: &Path) -> Result<String, String> {
    let mut log = String::new();
    // One CPU under -icount (instructions); two CPUs by the wall clock (-icount runs the
    // CPUs one at a time), where `bench` times one CPU alone and both at once.
    for (cpus, icount) in [(1, true), (2, false)] {
        for arch in &ARCHS {
            for allocator in [Allocator::BuddySim, Allocator::Bitmap] {
                let build = build(root, arch, cpus, allocator)?;
                let boots = if cpus == 1 {
                    MEASURE_BOOTS
                } else {
                    SMP_MEASURE_BOOTS
                };
                for _ in 0..boots {
                    let out = boot(arch, &build, "bench", cpus, icount)?;
                    let tag = match allocator {
                        Allocator::BuddySim => "buddy-sim",
                        Allocator::Bitmap => "bitmap",
                    };
                    log.push_str(&format!(
                        "ARCEOS RUN arch={} allocator={tag} cpus={cpus}\n",
                        arch.name
                    ));
                    for line in out.lines().filter(|l| l.starts_with("bench ")) {
                        log.push_str(line);
                        log.push('\n');
                    }
                }
            }
        }
    }
    Ok(log)
}

/// The environment variable naming a checkout of ArceOS's repository (main line) to run
/// ArceOS's own app harness on the drop-in; unset, the harness does not run.
pub const CHECKOUT_ENV: &str = "ARCEOS_CHECKOUT";
/// The environment variable naming a checkout of `arceos-apps` (whose `scripts/app_test.sh`
/// is the harness, and whose apps it runs).
pub const APPS_CHECKOUT_ENV: &str = "ARCEOS_APPS_CHECKOUT";
/// Optional: a directory of vendored copies of ArceOS's git dependencies (as `cargo vendor`
/// lays them out: one directory per package with a `.cargo-checksum.json`), for a machine
/// that cannot reach their git hosts.
pub const VENDOR_ENV: &str = "ARCEOS_VENDOR";

/// ArceOS's apps without a network, each with its `test_cmd` (ArceOS's CI list, less
/// `rust/net/httpclient`).
const HARNESS_APPS: [&str; 11] = [
    "rust/helloworld",
    "rust/memtest",
    "rust/exception",
    "rust/task/yield",
    "rust/task/parallel",
    "rust/task/sleep",
    "rust/task/priority",
    "rust/task/tls",
    "rust/task/irq",
    "rust/task/affinity",
    "rust/task/wait_queue",
];

/// ArceOS's own app harness (`arceos-apps`' `scripts/app_test.sh`, every non-network Rust
/// app, each in the configurations its `test_cmd` lists) on the drop-in, for x86_64 and
/// aarch64, when [`CHECKOUT_ENV`] and [`APPS_CHECKOUT_ENV`] name checkouts. The checkouts
/// are copied under `target/arceos/harness` and the copies changed, never the originals:
/// ArceOS's workspace dependency `axalloc = { path = "modules/axalloc" }` points at
/// `arceos/axalloc-0.2` (its main line's interface), the apps' `axstd` at the ArceOS copy.
/// `None` when the variables are unset.
pub fn harness(root: &Path) -> Result<Option<String>, String> {
    let (Some(arceos), Some(apps)) = (
        std::env::var_os(CHECKOUT_ENV),
        std::env::var_os(APPS_CHECKOUT_ENV),
    ) else {
        if std::env::var_os(CHECKOUT_ENV).is_some() {
            return Err(format!(
                "{CHECKOUT_ENV} is set but {APPS_CHECKOUT_ENV} is not: the harness is arceos-apps' scripts/app_test.sh"
            ));
        }
        return Ok(None);
    };
    let dir = root.join("target/arceos/harness");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (ax, ax_apps) = (dir.join("arceos"), dir.join("arceos-apps"));
    for (from, to) in [(&arceos, &ax), (&apps, &ax_apps)] {
        cmd::status(Command::new("cp").arg("-a").arg(from).arg(to))?;
        for junk in [".git", "target", ".axroot", "Cargo.lock"] {
            let p = to.join(junk);
            if p.is_dir() {
                std::fs::remove_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            } else if p.exists() && junk != "Cargo.lock" {
                std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
    }
    let drop_in = root.join("arceos/axalloc-0.2");
    replace_line(
        &ax.join("Cargo.toml"),
        "axalloc = { path = \"modules/axalloc\" }",
        &format!("axalloc = {{ path = {:?} }}", drop_in.display().to_string()),
    )?;
    replace_line(
        &ax_apps.join("Cargo.toml"),
        "axstd = { git = \"https://github.com/arceos-org/arceos.git\" }",
        &format!(
            "axstd = {{ path = {:?} }}",
            ax.join("ulib/axstd").display().to_string()
        ),
    )?;
    std::fs::write(ax_apps.join(".axroot"), ax.display().to_string()).map_err(|e| e.to_string())?;
    if let Some(vendor) = std::env::var_os(VENDOR_ENV) {
        vendor_git_sources(&ax, &ax_apps, Path::new(&vendor))?;
    }
    let mut summary = Vec::new();
    for arch in ["x86_64", "aarch64"] {
        println!("    --- ArceOS's app harness, {arch}, on axalloc-buddy");
        let mut c = Command::new(ax_apps.join("scripts/app_test.sh"));
        c.current_dir(&ax_apps).env("ARCH", arch).args(HARNESS_APPS);
        cmd::without_outer_cargo_env(&mut c);
        c.env_remove("RUSTFLAGS");
        let (code, out) = cmd::output_with_timeout(&mut c, Duration::from_secs(3600))?;
        let out = strip_colours(&out);
        let passed = out.matches("passed!").count();
        let failed = out.matches("failed!").count() + out.matches("timeout!").count();
        if code != Some(0) || failed > 0 || passed == 0 {
            return Err(format!(
                "ArceOS's app harness on {arch}: {passed} passed, {failed} failed or timed out (exit {code:?}; output above)"
            ));
        }
        summary.push(format!("{arch} {passed}/{passed}"));
    }
    Ok(Some(format!(
        "ArceOS's own app harness ({} apps, every configuration their test_cmd lists) on the drop-in: {}",
        HARNESS_APPS.len(),
        summary.join(", ")
    )))
}

/// Replaces the line of `file` that reads `from` (whitespace trimmed) with `to`.
fn replace_line(file: &Path, from: &str, to: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    if !text.lines().any(|l| l.trim() == from) {
        return Err(format!(
            "{} has no line {from:?} to point at the drop-in",
            file.display()
        ));
    }
    let out: Vec<&str> = text
        .lines()
        .map(|l| if l.trim() == from { to } else { l })
        .collect();
    std::fs::write(file, out.join("\n") + "\n").map_err(|e| format!("{}: {e}", file.display()))
}

/// Points every git source of ArceOS's lockfile at `vendor` (cargo source replacement: a
/// `[patch]` does not stop cargo from cloning), and seeds the apps' lockfile from ArceOS's
/// (cargo takes git sources from a directory only with a lockfile naming them).
fn vendor_git_sources(ax: &Path, ax_apps: &Path, vendor: &Path) -> Result<(), String> {
    let lock = std::fs::read_to_string(ax.join("Cargo.lock"))
        .map_err(|e| format!("ArceOS's Cargo.lock: {e}"))?;
    let mut config = String::new();
    let mut seen = Vec::new();
    for source in lock
        .lines()
        .filter_map(|l| l.strip_prefix("source = \"git+"))
    {
        let source = source.trim_end_matches('"');
        let Some((url_rev, _hash)) = source.split_once('#') else {
            continue;
        };
        let Some((url, rev)) = url_rev.split_once("?rev=") else {
            continue;
        };
        if seen.contains(&url_rev) {
            continue;
        }
        seen.push(url_rev);
        config.push_str(&format!(
            "[source.\"git+{url_rev}\"]\ngit = {url:?}\nrev = {rev:?}\nreplace-with = \"vendored-sources\"\n\n"
        ));
    }
    config.push_str(&format!(
        "[source.vendored-sources]\ndirectory = {:?}\n",
        vendor.display().to_string()
    ));
    let cargo_dir = ax_apps.join(".cargo");
    std::fs::create_dir_all(&cargo_dir).map_err(|e| e.to_string())?;
    std::fs::write(cargo_dir.join("config.toml"), config).map_err(|e| e.to_string())?;
    std::fs::write(ax_apps.join("Cargo.lock"), lock).map_err(|e| e.to_string())?;
    // `cargo metadata` fits the seeded lockfile to the apps' workspace (a new lockfile
    // would need the git sources themselves). Run from ArceOS's copy, so that its pinned
    // toolchain runs it, in the apps' directory (`-C`, as ArceOS's build runs cargo), so
    // that it reads the source replacement.
    let mut c = Command::new("cargo");
    c.current_dir(ax)
        .args(["-Z", "unstable-options", "-C"])
        .arg(ax_apps)
        .args(["metadata", "--format-version", "1"]);
    c.env_remove("RUSTUP_TOOLCHAIN")
        .stdout(std::process::Stdio::null());
    cmd::status(&mut c)
}
