//! StarryOS on buddy-sim: `starryos` 0.5.39 (a Linux-compatible kernel on today's ArceOS
//! line, `starry-kernel` 0.12) built from its published source with `ax-alloc` patched to
//! this project's drop-in (`arceos/ax-alloc`), booted under QEMU for x86_64 (`q35`, UEFI;
//! [`FULL_RUN_ARCH`]) in the full run, and for aarch64 (`virt`) too on request, with two
//! CPUs on a root file system made at test time from Debian's `busybox-static`, on QEMU's
//! NVMe disk. Its init runs `arceos/starry/load.sh` (fork and exec in a loop, many
//! processes, a large sort, gzip and gunzip, large `dd`s), whose every line is checked. On
//! request (`starry-compare`), the same kernel on both architectures, and on ax-alloc's own
//! buddy-slab-allocator too, runs the same script for the comparison: guest instructions
//! (QEMU's `-icount shift=0`: the guest clock counts one nanosecond per instruction), the
//! least free memory the script saw and the 2 MiB pages it got after its churn. The full
//! run leaves the comparison out: it is a measurement of both allocators, three kernel
//! builds more (four minutes each on two cores), not a check of this project's.
//!
//! What building the published source takes (no StarryOS source is kept here):
//! - The crate: `cargo fetch` of `arceos/starry/Cargo.toml` downloads it; the stage unpacks
//!   the `.crate` under `target/starry/` and changes one line of `src/main.rs`, its
//!   `#![doc = include_str!("../../README.md")]`, a path outside the package that the
//!   published crate does not contain (the build fails on it as published), and adds a
//!   `[workspace]` table and, for buddy-sim, the `[patch]` of `ax-alloc`.
//! - `lwprintf-rs` compiles C with `<arch>-linux-musl-gcc`: `arceos/starry/musl-gcc` serves
//!   through Debian's gcc; bindgen needs libclang's resource headers
//!   (`BINDGEN_EXTRA_CLANG_ARGS`).
//! - The kernel panics at boot on an empty `.kallsyms` section (its symbol table, which
//!   tgoskits' build tool fills): the stage writes the empty table's 40-byte header (its
//!   size, then four zero counts) into it.

use crate::arceos_today;
use crate::cmd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The StarryOS release built.
const VERSION: &str = "0.5.39";

/// One architecture StarryOS is built and booted for: today's ArceOS's, and what the root
/// file system needs.
struct Arch {
    base: &'static arceos_today::Arch,
    /// Debian's name for it (`busybox-static`'s package).
    debian: &'static str,
    /// The C compiler (Debian's) that builds static Linux programs for it.
    gcc: &'static str,
}

impl std::ops::Deref for Arch {
    type Target = arceos_today::Arch;

    fn deref(&self) -> &arceos_today::Arch {
        self.base
    }
}

const ARCHS: [Arch; 2] = [
    Arch {
        base: &arceos_today::ARCHS[0],
        debian: "arm64",
        gcc: "aarch64-linux-gnu-gcc",
    },
    Arch {
        base: &arceos_today::ARCHS[1],
        debian: "amd64",
        gcc: "gcc",
    },
];

/// The allocators StarryOS runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Allocator {
    BuddySim,
    BuddySlab,
}

impl Allocator {
    fn name(self) -> &'static str {
        match self {
            Self::BuddySim => "buddy-sim",
            Self::BuddySlab => "buddy-slab-allocator",
        }
    }
}

/// The architecture the full run builds and boots StarryOS for (`starry-compare` builds
/// both): x86_64, whose `q35` machine under OVMF hands the kernel five regions of RAM (the
/// drop-in's zones, holes between); aarch64's drop-in runs in the `arceos-today` stage. A
/// StarryOS build takes four minutes on two cores: both would be a quarter of the full
/// run's time budget.
const FULL_RUN_ARCH: &str = "x86_64";

/// The lines a run prints, in order: the allocator at boot, then the script's checks.
fn expected(allocator: Allocator) -> [String; 8] {
    [
        format!("use {} allocator.", allocator.name()),
        "load: fork-exec 100".into(),
        "load: processes 262144 24".into(),
        "load: sort 200000 1 200000".into(),
        "load: gzip ok".into(),
        "load: dd 33554432".into(),
        "load: huge pages ".into(),
        "load: done".into(),
    ]
}

/// The published source (fetched by [`stage`]), unpacked under `target/starry/<allocator>/`
/// and changed as the module docs say.
fn source(root: &Path, allocator: Allocator) -> Result<PathBuf, String> {
    let crate_file = registry_cache()?
        .into_iter()
        .map(|d| d.join(format!("starryos-{VERSION}.crate")))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("starryos-{VERSION}.crate is in no registry cache"))?;
    let dir = root.join("target/starry").join(allocator.name());
    let src = dir.join(format!("starryos-{VERSION}"));
    if src.exists() {
        std::fs::remove_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    cmd::status(
        Command::new("tar")
            .arg("xzf")
            .arg(&crate_file)
            .arg("-C")
            .arg(&dir),
    )?;
    let main = src.join("src/main.rs");
    let text = std::fs::read_to_string(&main).map_err(|e| format!("{}: {e}", main.display()))?;
    let doc = "#![doc = include_str!(\"../../README.md\")]\n";
    if !text.contains(doc) {
        return Err(format!("{}: no line {doc:?} to remove", main.display()));
    }
    std::fs::write(&main, text.replacen(doc, "", 1))
        .map_err(|e| format!("{}: {e}", main.display()))?;
    let manifest = src.join("Cargo.toml");
    let mut toml =
        std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    toml.push_str("\n[workspace]\n");
    if allocator == Allocator::BuddySim {
        let drop_in = root.join("arceos/ax-alloc");
        toml.push_str(&format!(
            "\n[patch.crates-io]\nax-alloc = {{ path = {:?} }}\n",
            drop_in.display().to_string()
        ));
    }
    std::fs::write(&manifest, toml).map_err(|e| format!("{}: {e}", manifest.display()))?;
    Ok(src)
}

/// Cargo's registry cache directories (one per registry index).
fn registry_cache() -> Result<Vec<PathBuf>, String> {
    let cache = cmd::cargo_home()?.join("registry/cache");
    let dirs = std::fs::read_dir(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    Ok(dirs.filter_map(Result::ok).map(|d| d.path()).collect())
}

/// libclang's resource headers (`stddef.h` and the like), which bindgen needs for a bare
/// target.
fn clang_headers() -> Result<PathBuf, String> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib")
        .map_err(|e| format!("/usr/lib: {e}"))?
        .filter_map(Result::ok)
        .filter(|d| d.file_name().to_string_lossy().starts_with("llvm-"))
        .filter_map(|d| std::fs::read_dir(d.path().join("lib/clang")).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|d| d.path().join("include"))
        .filter(|p| p.join("stddef.h").is_file())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        "no libclang resource headers under /usr/lib/llvm-*: apt-get install libclang-dev".into()
    })
}

/// Builds StarryOS for `arch` on `allocator` and returns its image (a flat binary).
fn build(root: &Path, arch: &Arch, allocator: Allocator) -> Result<PathBuf, String> {
    let src = source(root, allocator)?;
    let work = root.join("target/starry");
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    for a in &ARCHS {
        let link = bin.join(format!("{}-linux-musl-gcc", a.name));
        if !link.exists() {
            std::os::unix::fs::symlink(root.join("arceos/starry/musl-gcc"), &link)
                .map_err(|e| format!("{}: {e}", link.display()))?;
        }
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let mut c = arceos_today::nightly_build(root, arch.target);
    c.env("PATH", format!("{}:{path}", bin.display()))
        .env(
            "BINDGEN_EXTRA_CLANG_ARGS",
            format!("-isystem {}", clang_headers()?.display()),
        )
        .args(["--bin", "starryos", "--manifest-path"])
        .arg(src.join("Cargo.toml"));
    cmd::status(&mut c)?;
    let elf = work.join(format!("starry-{}-{}.elf", arch.name, allocator.name()));
    let built = arceos_today::target_dir(root)
        .join(arch.target)
        .join("release/starryos");
    std::fs::copy(&built, &elf).map_err(|e| format!("{}: {e}", built.display()))?;
    fill_kallsyms(&elf)?;
    let image = elf.with_extension("bin");
    arceos_today::flat_image(&elf, &image)?;
    Ok(image)
}

/// Writes an empty symbol table's header into the ELF's `.kallsyms` section: its size (40
/// bytes) and four zero counts, as little-endian `u64`s.
fn fill_kallsyms(elf: &Path) -> Result<(), String> {
    let out = cmd::probe(Command::new("llvm-readelf").arg("-S").arg(elf))
        .ok_or("llvm-readelf -S failed: apt-get install llvm")?;
    let offset = out
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace().skip_while(|w| *w != ".kallsyms");
            // Name, type, address, offset.
            f.nth(3)
        })
        .and_then(|o| u64::from_str_radix(o, 16).ok())
        .ok_or_else(|| format!("{}: no .kallsyms section", elf.display()))?;
    let mut bytes = std::fs::read(elf).map_err(|e| format!("{}: {e}", elf.display()))?;
    let mut header = Vec::with_capacity(40);
    for word in [40u64, 0, 0, 0, 0] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    let at = usize::try_from(offset).map_err(|e| e.to_string())?;
    let slot = bytes
        .get_mut(at..at + header.len())
        .ok_or_else(|| format!("{}: .kallsyms past the file's end", elf.display()))?;
    slot.copy_from_slice(&header);
    std::fs::write(elf, bytes).map_err(|e| format!("{}: {e}", elf.display()))
}

/// The root file system for `arch`: Debian's `busybox-static` with a link per applet and
/// the load script as StarryOS's test hook, as a 64 MiB ext4 image.
fn rootfs(root: &Path, arch: &Arch) -> Result<PathBuf, String> {
    let work = root.join("target/starry/rootfs");
    let package = busybox_deb(&work, arch.debian)?;
    // The applets, from this machine's own busybox of the same release.
    let host = work.join("host");
    if !host.join("bin/busybox").is_file() {
        let own = busybox_deb(&work, &host_debian_arch()?)?;
        cmd::status(Command::new("dpkg-deb").arg("-x").arg(&own).arg(&host))?;
    }
    let list = cmd::probe(Command::new(host.join("bin/busybox")).arg("--list-full"))
        .ok_or("busybox --list-full failed")?;
    let tree = work.join(format!("tree-{}", arch.name));
    if tree.exists() {
        std::fs::remove_dir_all(&tree).map_err(|e| format!("{}: {e}", tree.display()))?;
    }
    cmd::status(Command::new("dpkg-deb").arg("-x").arg(&package).arg(&tree))?;
    for dir in [
        "tmp", "root", "dev", "proc", "sys", "etc", "usr/bin", "usr/sbin", "sbin",
    ] {
        let d = tree.join(dir);
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    for applet in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let link = tree.join(applet);
        if !link.exists() && !link.is_symlink() {
            std::os::unix::fs::symlink("/bin/busybox", &link)
                .map_err(|e| format!("{}: {e}", link.display()))?;
        }
    }
    let counter = tree.join("usr/bin/hugepages");
    cmd::status(
        Command::new(arch.gcc)
            .args(["-static", "-O2", "-o"])
            .arg(&counter)
            .arg(root.join("arceos/starry/hugepages.c")),
    )?;
    let hook = tree.join("usr/bin/starry-run-case-tests");
    std::fs::copy(root.join("arceos/starry/load.sh"), &hook)
        .map_err(|e| format!("{}: {e}", hook.display()))?;
    let image = work.join(format!("rootfs-{}.img", arch.name));
    cmd::status(
        Command::new("mke2fs")
            .args(["-q", "-t", "ext4", "-b", "4096", "-I", "256", "-F", "-d"])
            .arg(&tree)
            .arg(&image)
            .arg("64M"),
    )?;
    Ok(image)
}

/// Debian's `busybox-static` package for `debian_arch`, downloaded into `work/debs` once
/// (through package lists of that architecture kept apart from the machine's).
fn busybox_deb(work: &Path, debian_arch: &str) -> Result<PathBuf, String> {
    let debs = work.join("debs");
    let apt_dir = work.join(format!("apt-{debian_arch}"));
    for d in [
        &debs,
        &apt_dir.join("lists/partial"),
        &apt_dir.join("cache/archives/partial"),
    ] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let find = || {
        std::fs::read_dir(&debs).ok().and_then(|d| {
            d.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                p.to_string_lossy()
                    .ends_with(&format!("_{debian_arch}.deb"))
            })
        })
    };
    if let Some(p) = find() {
        return Ok(p);
    }
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.current_dir(&debs)
            .arg(format!("-oAPT::Architecture={debian_arch}"))
            .arg(format!("-oAPT::Architectures={debian_arch}"))
            .arg(format!(
                "-oDir::State::Lists={}",
                apt_dir.join("lists").display()
            ))
            .arg(format!("-oDir::Cache={}", apt_dir.join("cache").display()))
            .args(args);
        c
    };
    cmd::status(&mut apt(&["update", "-qq"]))?;
    cmd::status(&mut apt(&[
        "download",
        &format!("busybox-static:{debian_arch}"),
    ]))?;
    find().ok_or_else(|| format!("apt-get download left no busybox-static for {debian_arch}"))
}

/// This machine's Debian architecture.
fn host_debian_arch() -> Result<String, String> {
    cmd::probe(Command::new("dpkg").arg("--print-architecture"))
        .map(|s| s.trim().into())
        .ok_or_else(|| "dpkg --print-architecture failed".into())
}

/// One run of the script: the guest instructions it took (billions, from the guest clock
/// under `-icount shift=0`) and the least free memory it saw (MiB).
struct Run {
    instructions: f64,
    least_free_mib: f64,
    /// 2 MiB pages handed out after the churn.
    huge_pages: u32,
}

/// Boots `image` for `arch` on `rootfs` with two CPUs (with `icount`, under `-icount
/// shift=0`: the instructions counted, the CPUs run one at a time), checks the lines
/// `expected` in order, and reads the script's marks.
fn boot(
    arch: &Arch,
    image: &Path,
    rootfs: &Path,
    expected: &[String],
    icount: bool,
) -> Result<Run, String> {
    let mut qemu = Command::new(arch.qemu);
    qemu.args(arch.machine).args(["-m", "512M", "-smp", "2"]);
    if icount {
        qemu.args(["-icount", "shift=0"]);
    }
    qemu.args(["-nographic", "-no-reboot", "-nic", "none", "-kernel"])
        .arg(image)
        .arg("-drive")
        .arg(format!(
            "file={},if=none,id=d0,format=raw",
            rootfs.display()
        ))
        .args(["-device", "nvme,serial=starry,drive=d0"]);
    let (_, out) = cmd::output_quiet_with_timeout(&mut qemu, Duration::from_secs(400))?;
    let out = crate::arceos::strip_colours(&out);
    let mut rest = out.as_str();
    for line in expected {
        match rest.find(line.as_str()) {
            Some(at) => rest = &rest[at + line.len()..],
            None => {
                let tail: Vec<&str> = out.lines().rev().take(20).collect();
                return Err(format!(
                    "StarryOS on {}: no line {line:?} (in order); the run ended:\n{}",
                    arch.name,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
        }
    }
    for line in out.lines().filter(|l| l.starts_with("load: ")) {
        println!("    {line}");
    }
    // "load: mark <uptime> s <free> kB"
    let marks: Vec<(f64, f64)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("load: mark "))
        .filter_map(|m| {
            let mut f = m.split_whitespace();
            let t = f.next()?.parse().ok()?;
            let free = f.nth(1)?.parse().ok()?;
            Some((t, free))
        })
        .collect();
    let (first, last) = match (marks.first(), marks.last()) {
        (Some(a), Some(b)) if marks.len() > 1 => (a.0, b.0),
        _ => {
            return Err(format!(
                "StarryOS on {}: the script's marks are missing",
                arch.name
            ));
        }
    };
    let least_free = marks.iter().map(|m| m.1).fold(f64::INFINITY, f64::min);
    let huge_pages = out
        .lines()
        .find_map(|l| l.strip_prefix("load: huge pages "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("StarryOS on {}: no huge page count", arch.name))?;
    Ok(Run {
        instructions: last - first,
        least_free_mib: least_free / 1024.0,
        huge_pages,
    })
}

/// The test stage: StarryOS on buddy-sim for both architectures, every line of the script
/// checked; with `compare`, on buddy-slab-allocator too, the guest instructions, the least
/// free memory and the 2 MiB pages of both set side by side.
pub fn stage(root: &Path, compare: bool) -> Result<String, String> {
    // The published crate into cargo's registry cache, once ([`source`] unpacks it).
    cmd::status(
        cmd::toolchain_cargo(root, arceos_today::NIGHTLY)
            .args(["fetch", "--locked", "--manifest-path"])
            .arg(root.join("arceos/starry/Cargo.toml")),
    )?;
    // Each kernel boots while the next one builds (a boot keeps one core busy, QEMU's
    // `-icount` counts the guest's instructions whatever the host does meanwhile).
    let results = std::thread::scope(|scope| {
        // Each architecture's boots, in the order they started.
        let mut boots = Vec::new();
        for arch in ARCHS.iter().filter(|a| compare || a.name == FULL_RUN_ARCH) {
            let fs = rootfs(root, arch)?;
            let allocators: &[Allocator] = if compare {
                &[Allocator::BuddySim, Allocator::BuddySlab]
            } else {
                &[Allocator::BuddySim]
            };
            let mut runs = Vec::new();
            for &allocator in allocators {
                println!(
                    "    --- StarryOS {VERSION} on {} with {}",
                    arch.name,
                    allocator.name()
                );
                let image = build(root, arch, allocator)?;
                // A fresh file system each run: the script's files are gone, as on a new
                // boot.
                let disk = fs.with_extension(format!("{}.img", allocator.name()));
                std::fs::copy(&fs, &disk).map_err(|e| format!("{}: {e}", disk.display()))?;
                runs.push(
                    scope.spawn(move || boot(arch, &image, &disk, &expected(allocator), compare)),
                );
            }
            boots.push((arch, runs));
        }
        boots
            .into_iter()
            .map(|(arch, runs)| {
                let runs = runs
                    .into_iter()
                    .map(|run| {
                        run.join()
                            .map_err(|_| "a boot's thread panicked".to_string())?
                    })
                    .collect::<Result<Vec<Run>, String>>()?;
                Ok(summary(arch, &runs))
            })
            .collect::<Result<Vec<String>, String>>()
    })?;
    Ok(format!(
        "StarryOS {VERSION} ran the load script (fork/exec, 24 processes, sort, gzip, dd, 2 MiB pages); {}",
        results.join("; ")
    ))
}

/// One architecture's line of the stage's summary.
fn summary(arch: &Arch, runs: &[Run]) -> String {
    match runs {
        [ours, slab] => format!(
            "{}: {:.2} G guest instructions on buddy-sim, {:.2} G on buddy-slab-allocator ({:.2}x), least free memory {:.0} MiB and {:.0} MiB, 2 MiB pages after the churn {} and {}",
            arch.name,
            ours.instructions,
            slab.instructions,
            slab.instructions / ours.instructions,
            ours.least_free_mib,
            slab.least_free_mib,
            ours.huge_pages,
            slab.huge_pages
        ),
        [ours] => format!(
            "{}: every line checked on buddy-sim, {} 2 MiB pages after the churn",
            arch.name, ours.huge_pages
        ),
        _ => String::new(),
    }
}
