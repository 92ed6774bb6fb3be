//! The x86_64 kernel under QEMU: which accelerator this machine offers, building the kernel
//! and booting it. Used by the `bare-metal` stage of `cargo xtask test` and by `cargo xtask
//! report` (its ring-0 measurements).

use crate::cmd::{self, cargo};
use std::path::Path;

/// How QEMU ran the x86_64 kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// KVM: native speed, the host's CPU.
    Kvm,
    /// TCG: emulated, `-cpu max`.
    Tcg,
}

impl Accel {
    /// QEMU's arguments for it.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            // The host's CPU; MSR 0x10a (arch capabilities) cannot be set on these hosts.
            Self::Kvm => &["-accel", "kvm", "-cpu", "host,-arch-capabilities"],
            Self::Tcg => &["-accel", "tcg", "-cpu", "max"],
        }
    }

    /// Its name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Self::Kvm => "KVM",
            Self::Tcg => "TCG",
        }
    }
}

/// What `/dev/kvm` is on this machine.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kvm {
    /// No `/dev/kvm` this user may open.
    Missing,
    /// KVM on VMX or SVM (`kvm_intel` / `kvm_amd`): a guest's ring 0 runs at native speed.
    Hardware,
    /// KVM on PVM (`kvm_pvm`, no VMX/SVM: page-table-based virtualization). It runs the x86_64
    /// kernel correctly but emulates its ring-0 code: a boot that takes 0.3 s under TCG took
    /// 40 s here (measured 2026-11-23), so nothing it times is native.
    Pvm,
}

/// Probes `/dev/kvm` and the loaded KVM modules.
pub fn kvm() -> Kvm {
    let opens = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let module = |m: &str| Path::new("/sys/module").join(m).exists();
    if !opens {
        Kvm::Missing
    } else if !module("kvm_intel") && !module("kvm_amd") && module("kvm_pvm") {
        Kvm::Pvm
    } else {
        Kvm::Hardware
    }
}

/// The x86_64 kernel's ELF after [`build_x86_kernel`].
pub fn x86_kernel(root: &Path) -> std::path::PathBuf {
    root.join("kernel/target/x86_64-unknown-none/release/unikernel")
}

/// Builds `kernel/` for `x86_64-unknown-none`.
pub fn build_x86_kernel(root: &Path) -> Result<(), String> {
    let kernel = root.join("kernel");
    cmd::status(cargo(&kernel).args(["build", "--release", "--target", "x86_64-unknown-none"]))
}

/// Boots the x86_64 kernel once under `accel` with QEMU's CPU, memory and NUMA arguments
/// `machine` (`-smp`, `-m`, `-numa`, ...) and the command line `cmdline`, for at most `limit`: `Ok(output)` when it printed `PASS` and exited
/// through `isa-debug-exit` with 0 (QEMU's status 1), `Err` otherwise.
///
/// # Errors
/// The failed step, QEMU's own failure, or the time limit.
pub fn boot_x86(
    root: &Path,
    accel: Accel,
    machine: &[&str],
    cmdline: &str,
    limit: std::time::Duration,
) -> Result<String, String> {
    let mut qemu = std::process::Command::new("qemu-system-x86_64");
    qemu.args(accel.args())
        .args(machine)
        .args([
            "-display",
            "none",
            "-serial",
            "stdio",
            "-nic",
            "none",
            "-no-reboot",
        ])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
    if !cmdline.is_empty() {
        qemu.args(["-append", cmdline]);
    }
    qemu.arg("-kernel").arg(x86_kernel(root));
    let (code, out) = cmd::output_with_timeout(&mut qemu, limit)?;
    // isa-debug-exit makes QEMU exit with (value << 1) | 1: the kernel's 0 is 1, step n is
    // 2n + 1. QEMU's own failures exit 1 too, hence the PASS line.
    match code {
        Some(1) if out.contains("PASS") => Ok(out),
        Some(c) if c % 2 == 1 && c > 1 => Err(format!(
            "the kernel failed step {} (see its output above)",
            (c - 1) / 2
        )),
        other => Err(format!(
            "QEMU ended with {other:?} without the kernel's PASS"
        )),
    }
}

/// Boots the kernel with its measurements (`-append "measure xsave"`: AVX state on, 2 GiB of
/// RAM) under hardware KVM and writes its console output to `out`; where there is no hardware
/// KVM, or the boot fails, `out` holds one line `UNAVAILABLE: why` instead, which the report
/// shows.
///
/// # Errors
/// Only if `out` cannot be written.
pub fn capture_measurements(root: &Path, out: &Path) -> Result<(), String> {
    let text = match kvm() {
        Kvm::Missing => "UNAVAILABLE: no /dev/kvm this user can open\n".to_string(),
        Kvm::Pvm => "UNAVAILABLE: /dev/kvm is kvm_pvm (page-table-based virtualization, no \
                     VMX/SVM on this machine): it runs the kernel correctly but emulates its \
                     ring 0, 130 times slower than QEMU's TCG (a boot took 40 s against 0.3 s, \
                     measured 2026-11-23), so no ring-0 figure would mean anything\n"
            .to_string(),
        Kvm::Hardware => match build_x86_kernel(root).and_then(|()| {
            boot_x86(
                root,
                Accel::Kvm,
                &["-smp", "1", "-m", "2G"],
                "measure xsave",
                std::time::Duration::from_secs(900),
            )
        }) {
            Ok(log) => log,
            Err(e) => format!("UNAVAILABLE: the kernel's measurement boot under KVM failed: {e}\n"),
        },
    };
    crate::cmd::write_capture(out, Ok(text))
}
