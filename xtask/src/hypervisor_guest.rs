//! The arm64 kernel's EL2 hypervisor running a guest nobody here wrote: today's ArceOS app
//! (`arceos/today` with its `hypervisor-guest` feature, built from the published crates as
//! the `arceos-today` stage builds it), embedded in the kernel with the device tree of the
//! machine it is shown (QEMU's `virt` with one CPU and 96 MiB, dumped by QEMU itself). The
//! guest's RAM is 2 MiB blocks from two of the kernel's zones, its devices are passed
//! through or emulated, pte-batch ages its stage 2 at its calls, and it all goes back to
//! the zones when it powers off.
//!
//! AxVisor (ArceOS's hypervisor) is not the host: see the README's "Hypervisors and their
//! guests" for why.

use crate::arceos_today::aarch64_guest_image;
use crate::cmd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The guest's RAM: what its device tree says, and what the hypervisor maps.
const GUEST_RAM: &str = "96M";

/// What a passing boot prints: the guest's RAM from two zones, its checks (all of the
/// app's and the guest's own), the working set the hypervisor saw, the power-off and the
/// zones whole again.
const EXPECTED: [&str; 10] = [
    "linux guest: 96 MiB of RAM at IPA 0x40000000 in 48 blocks of 2 MiB from two zones",
    "PL011 and GICv2 passed through, PSCI emulated; entering at EL1",
    "today guest RAM written and read back: ok",
    "= exactly the pages written, each dirty",
    "all 256 buffer pages idle",
    "today working set seen by the hypervisor: ok",
    "today: all 7 checks passed",
    "linux guest: powered off (PSCI SYSTEM_OFF)",
    "free counts as before the guest",
    "guest frames and stage-2 tables given back; zone whole",
];

/// Writes QEMU's device tree of `virt` with one CPU and [`GUEST_RAM`] to `out`, cut to its
/// contents (QEMU pads it to 1 MiB).
fn guest_device_tree(out: &Path) -> Result<(), String> {
    let mut qemu = Command::new("qemu-system-aarch64");
    qemu.arg("-machine")
        .arg(format!("virt,dumpdtb={}", out.display()))
        .args(["-cpu", "max", "-smp", "1", "-m", GUEST_RAM])
        .args(["-nographic", "-nic", "none"]);
    cmd::status(&mut qemu)?;
    let mut dtb = std::fs::read(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let be = |at: usize| {
        dtb.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| format!("{}: a header shorter than 40 bytes", out.display()))
    };
    if be(0)? != 0xd00d_feed {
        return Err(format!("{}: not a device tree", out.display()));
    }
    // The header: off_dt_struct at 8, off_dt_strings at 12, size_dt_strings at 32,
    // size_dt_struct at 36.
    let end = (be(8)? + be(36)?)
        .max(be(12)? + be(32)?)
        .next_multiple_of(8);
    if end > dtb.len() {
        return Err(format!("{}: blocks past its end", out.display()));
    }
    dtb.truncate(end);
    dtb[4..8].copy_from_slice(&(end as u32).to_be_bytes());
    std::fs::write(out, &dtb).map_err(|e| format!("{}: {e}", out.display()))
}

/// The word before `label` on the first line that has it.
fn word_before<'a>(out: &'a str, label: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.split(label).next().filter(|_| l.contains(label)))
        .and_then(|head| head.split([' ', '(']).next_back())
        .unwrap_or("?")
}

/// Builds the guest, its device tree and the kernel with both (linted too: the clippy stage
/// builds the kernel without a guest); returns the kernel's ELF. The kernel is built in its
/// own target directory, where the bare-metal stage built its dependencies already: only
/// the kernel crate is compiled again (the guest's variables are its build script's).
fn build(root: &Path) -> Result<PathBuf, String> {
    let image = aarch64_guest_image(root, "hypervisor-guest")?;
    let out = root.join("target/hypervisor-guest");
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let dtb = out.join("guest.dtb");
    guest_device_tree(&dtb)?;
    let kernel = root.join("kernel");
    for action in ["clippy", "build"] {
        let mut c = cmd::cargo(&kernel);
        c.env("UNIKERNEL_GUEST_IMAGE", &image)
            .env("UNIKERNEL_GUEST_DTB", &dtb)
            .args([action, "--release", "--target", "aarch64-unknown-none"]);
        if action == "clippy" {
            c.args(["--", "-D", "warnings"]);
        }
        cmd::status(&mut c)?;
    }
    Ok(kernel.join("target/aarch64-unknown-none/release/unikernel"))
}

/// Boots the kernel at EL2 with two CPUs (`-icount shift=0` with `icount`: the guest clock
/// counts instructions) on `cpu`; its output without colour codes, once it exited 0 and
/// printed every line of [`EXPECTED`].
fn boot(elf: &Path, cpu: &str, icount: bool) -> Result<String, String> {
    let mut qemu = Command::new("qemu-system-aarch64");
    qemu.args(["-M", "virt,virtualization=on", "-cpu", cpu, "-smp", "2"])
        .args(["-m", crate::stages::KERNEL_RAM])
        .args(["-nographic", "-semihosting", "-nic", "none"]);
    if icount {
        qemu.args(["-icount", "shift=0"]);
    }
    qemu.arg("-kernel").arg(elf);
    let (code, out) = cmd::output_with_timeout(&mut qemu, Duration::from_secs(240))?;
    let out = crate::arceos::strip_colours(&out);
    if code != Some(0) {
        return Err(format!(
            "the hypervisor exited with {code:?} (see its output above; the code is the failed step)"
        ));
    }
    if let Some(line) = EXPECTED.iter().find(|l| !out.contains(**l)) {
        return Err(format!(
            "the hypervisor's run printed no line containing {line:?}"
        ));
    }
    Ok(out)
}

/// The test stage: builds everything and boots it once on `-cpu max`, checking what it
/// prints.
pub fn stage(root: &Path) -> Result<String, String> {
    let out = boot(&build(root)?, "max", false)?;
    Ok(format!(
        "today's ArceOS app ran as the EL2 hypervisor's guest on 96 MiB from two zones ({} of 48 blocks known zero), 7 checks passed, its working set seen exactly by pte-batch, all given back",
        word_before(&out, " known zero ("),
    ))
}

/// Boots for the report: guest instruction counts need a CPU whose clears are loops
/// (`-cpu neoverse-n1`: DC ZVA; `-cpu max` clears with FEAT_MOPS, whose one `SET`
/// sequence counts three instructions whatever its size).
const MEASURE_BOOTS: usize = 3;

/// The report's "hypervisor guest" section's figures: [`MEASURE_BOOTS`] boots under
/// `-icount shift=0`, each's `linux guest figures:` line left in `out`; a build or boot that
/// fails leaves `UNAVAILABLE: why` as the file's first line instead.
pub fn capture_measurements(root: &Path, out: &Path) -> Result<(), String> {
    let measure = || -> Result<String, String> {
        let elf = build(root)?;
        let mut log = String::new();
        for _ in 0..MEASURE_BOOTS {
            let run = boot(&elf, "neoverse-n1", true)?;
            for line in run
                .lines()
                .filter(|l| l.starts_with("linux guest figures: "))
            {
                log.push_str(line);
                log.push('\n');
            }
        }
        Ok(log)
    };
    cmd::write_capture(out, measure())
}
