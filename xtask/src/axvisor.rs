//! AxVisor, ArceOS's hypervisor: `axvisor` 0.8.2 from the package registry, its source
//! unpatched, built on buddy-sim's `ax-alloc` drop-in (`[patch.crates-io]` in a cargo
//! configuration beside the copy of its source) and booted under QEMU at EL2 (`virt` with
//! virtualization and GICv3) with today's ArceOS app as its guest, the guest's RAM in two
//! regions of 64 MiB that AxVisor allocates from the host allocator (axvisor#176 and #179
//! report a guest with more than one region failing).
//!
//! AxVisor is a Rust-std application (`ax-std`'s `std-compat`): its own build uses a target
//! spec of tgoskits' that no published crate ships. [`TARGET_SPEC`] is written here from the
//! target's description: aarch64 bare metal, soft float, position-independent, linked by
//! `rust-lld` with ArceOS's linker script, and Linux/musl as the interface the standard
//! library (`-Zbuild-std=std,panic_abort`) is built against; ArceOS provides that interface
//! itself, so the `-lc` and `-lgcc_s` the standard library asks for are satisfied by empty
//! archives instead of a musl cross toolchain.

use crate::arceos_today::{NIGHTLY, aarch64_guest_image, flat_image};
use crate::cmd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The AxVisor release built.
const VERSION: &str = "0.8.2";

/// The target: aarch64 bare metal with the Linux/musl standard-library interface that
/// ArceOS's `std-compat` serves.
const TARGET_SPEC: &str = r#"{
  "abi": "softfloat",
  "arch": "aarch64",
  "crt-objects-fallback": "false",
  "data-layout": "e-m:e-p270:32:32-p271:32:32-p272:64:64-i8:8:32-i16:16:32-i64:64-i128:128-n32:64-S128-Fn32",
  "disable-redzone": true,
  "env": "musl",
  "features": "+v8a,+strict-align,-neon",
  "has-thread-local": true,
  "linker": "rust-lld",
  "linker-flavor": "gnu-lld",
  "llvm-target": "aarch64-unknown-none",
  "max-atomic-width": 128,
  "metadata": {
    "description": "aarch64 bare metal with the Linux/musl std interface of ArceOS's std-compat",
    "host_tools": false,
    "std": true,
    "tier": 3
  },
  "os": "linux",
  "panic-strategy": "abort",
  "position-independent-executables": true,
  "pre-link-args": { "gnu-lld": ["-pie", "-znostart-stop-gc", "-Tlinker.x"] },
  "relocation-model": "pic",
  "rustc-abi": "softfloat",
  "stack-probes": { "kind": "inline" },
  "static-position-independent-executables": true,
  "target-family": ["unix"],
  "target-pointer-width": 64,
  "tls-model": "initial-exec"
}
"#;

/// The guest's VM: today's ArceOS app (`KERNEL`), loaded from memory, its RAM two regions
/// of 64 MiB that AxVisor allocates (`MAP_ALLOC`, 0).
const VM_CONFIG: &str = r#"[base]
id = 1
name = "arceos-today"
guest_type = "passthrough"
cpu_num = 1
phys_cpu_ids = [0]

[kernel]
entry_point = 0x8020_0000
image_location = "memory"
kernel_path = "KERNEL"
kernel_load_addr = 0x8020_0000
dtb_load_addr = 0x8000_0000
memory_regions = [
  [0x8000_0000, 0x0400_0000, 0x7, 0],
  [0x9000_0000, 0x0400_0000, 0x7, 0],
]

[devices]
passthrough = []
disabled = [{ path = "/pcie@10000000" }]
"#;

/// What a passing boot prints: AxVisor on buddy-sim with page lists for both CPUs, the
/// guest created and attached, and the guest's checks (its five and the pattern over its
/// RAM), with its RAM in the two regions (and the DMA32 one below them).
const EXPECTED: [&str; 7] = [
    "use buddy-sim allocator.",
    // Lists for both CPUs: the drop-in reads ax-percpu on the std-compat target too.
    ", 2 CPUs; zeroed pages cleared with ",
    "Creating VM[1] \"arceos-today\"",
    "attached VM[1] console",
    "today guest RAM written and read back: ok",
    "today on buddy-sim with 3 region(s)",
    "today: all 6 checks passed",
];

/// An empty `ar` archive: what `-lc` and `-lgcc_s` find.
const EMPTY_ARCHIVE: &[u8] = b"!<arch>\n";

/// AxVisor's published source, copied to `dir/axvisor` (the registry's copy is read-only
/// in spirit: the build writes beside it).
fn source(dir: &Path) -> Result<PathBuf, String> {
    // A scratch package that depends on it makes cargo download it.
    let fetch = dir.join("fetch");
    cmd::write_file(
        &fetch.join("Cargo.toml"),
        format!(
            "[package]\nname = \"axvisor-fetch\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\naxvisor = \"={VERSION}\"\n\n[workspace]\n"
        ),
    )?;
    cmd::write_file(&fetch.join("src/main.rs"), "fn main() {}\n")?;
    cmd::status(cmd::toolchain_cargo(&fetch, NIGHTLY).arg("fetch"))?;
    let registry = cmd::cargo_home()?.join("registry/src");
    let found = std::fs::read_dir(&registry)
        .map_err(|e| format!("{}: {e}", registry.display()))?
        .filter_map(Result::ok)
        .map(|index| index.path().join(format!("axvisor-{VERSION}")))
        .find(|p| p.join("Cargo.toml").is_file())
        .ok_or_else(|| format!("axvisor {VERSION} is not under {}", registry.display()))?;
    let copy = dir.join("src/axvisor");
    if !copy.join("Cargo.toml").is_file() {
        let parent = dir.join("src");
        std::fs::create_dir_all(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        cmd::status(Command::new("cp").arg("-r").arg(&found).arg(&copy))?;
    }
    Ok(copy)
}

/// The test stage: AxVisor on buddy-sim with today's ArceOS app as its guest.
pub fn stage(root: &Path) -> Result<String, String> {
    let dir = root.join("target/axvisor");
    let src = source(&dir)?;
    // The drop-in, for every crate that asks for ax-alloc (ax-runtime's allocator).
    cmd::write_file(
        &dir.join("src/.cargo/config.toml"),
        format!(
            "[patch.crates-io]\nax-alloc = {{ path = \"{}\" }}\n",
            root.join("arceos/ax-alloc").display()
        ),
    )?;
    let spec = dir.join("aarch64-unknown-linux-musl.json");
    cmd::write_file(&spec, TARGET_SPEC)?;
    let lib = dir.join("lib");
    cmd::write_file(&lib.join("libc.a"), EMPTY_ARCHIVE)?;
    cmd::write_file(&lib.join("libgcc_s.a"), EMPTY_ARCHIVE)?;
    let guest = aarch64_guest_image(root, "ram-pattern")?;
    let vm = dir.join("arceos-today.toml");
    cmd::write_file(
        &vm,
        VM_CONFIG.replace("KERNEL", &guest.display().to_string()),
    )?;

    let mut build = cmd::toolchain_cargo(&src, NIGHTLY);
    build
        .env("AX_ARCH", "aarch64")
        .env("AX_TARGET", "aarch64-unknown-none-softfloat")
        .env("AXVISOR_VM_CONFIGS", &vm)
        .env("RUSTFLAGS", format!("-L native={}", lib.display()))
        .env("CARGO_TARGET_DIR", dir.join("build"))
        // Its release profile links with fat LTO; thin LTO drops the same unused parts of
        // the standard library (which name libc functions ArceOS does not provide), in
        // parallel: a minute sooner on two cores. Without LTO the link fails.
        .env("CARGO_PROFILE_RELEASE_LTO", "thin")
        .args(["build", "--release", "--bin", "axvisor", "--target"])
        .arg(&spec)
        .args(["-Zjson-target-spec", "-Zbuild-std=std,panic_abort"])
        // std's default features only: not cargo's `backtrace` and `panic-unwind` on top
        // (ArceOS symbolizes nothing and the target aborts on panic), which leaves out the
        // backtrace's five crates and a third of std's own build.
        .arg("-Zbuild-std-features=default");
    cmd::status(&mut build)?;
    let image = dir.join("axvisor.bin");
    flat_image(
        &dir.join("build/aarch64-unknown-linux-musl/release/axvisor"),
        &image,
    )?;

    // AxVisor starts the guest and returns to its shell; Ctrl+X ] attaches the guest's
    // console, which replays what the guest printed so far.
    let mut qemu = Command::new("qemu-system-aarch64");
    qemu.args(["-machine", "virt,virtualization=on,gic-version=3"])
        .args(["-cpu", "cortex-a72", "-smp", "2", "-m", "2G"])
        .args(["-nographic", "-nic", "none", "-kernel"])
        .arg(&image);
    let (out, done) = cmd::output_until(
        &mut qemu,
        Duration::from_secs(240),
        ("shell task on CPU0", b"\x18]"),
        "today: ",
    )?;
    let out = crate::arceos::strip_colours(&out);
    if !done {
        return Err("the guest printed no verdict within 240 s".into());
    }
    if let Some(line) = EXPECTED.iter().find(|l| !out.contains(**l)) {
        return Err(format!("AxVisor's run printed no line containing {line:?}"));
    }
    Ok(format!(
        "AxVisor {VERSION} (unpatched, from the registry) on buddy-sim (page lists for both CPUs) ran today's ArceOS app as its guest with RAM in two regions: 6 checks passed (a pattern over all its RAM among them)"
    ))
}
