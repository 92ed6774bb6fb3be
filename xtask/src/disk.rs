//! The disk the build directories live on. A full run of `cargo xtask test` writes about
//! 9 GiB of build output; on a machine whose disk is nearly full a linker dies of SIGBUS
//! half-way through writing, which reads like a toolchain bug. So the run says how much is
//! free before every stage, removes the build directories that only a finished stage uses
//! when little is left ([`LOW`]), and names the disk when a stage fails on a nearly full one.

use std::path::Path;
use std::process::Command;

/// Below this much free space a passed stage's own build directories are removed.
pub const LOW: u64 = 8 << 30;
/// Below this much free space a failure is probably the disk's.
const FULL: u64 = 1 << 30;

/// Bytes free to an unprivileged writer on the filesystem holding `path`, from `df -Pk`
/// (POSIX output: the fourth field of the second line is the available 1 KiB blocks).
/// `None` when `df` cannot say.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let out = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let kib: u64 = text
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// `N.N GiB` for a byte count.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// Removes each of `dirs` (relative to `root`) when the disk has under [`LOW`] free, and says
/// what it did; `None` when nothing was removed.
///
/// # Errors
/// A directory that exists and cannot be removed.
pub fn reclaim(root: &Path, dirs: &[&str]) -> Result<Option<String>, String> {
    let Some(free) = free_bytes(root) else {
        return Ok(None);
    };
    if free >= LOW {
        return Ok(None);
    }
    let mut removed = Vec::new();
    for dir in dirs {
        let path = root.join(dir);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            removed.push(*dir);
        }
    }
    if removed.is_empty() {
        return Ok(None);
    }
    let after = free_bytes(root).map_or_else(|| "?".to_string(), gib);
    Ok(Some(format!(
        "{} free, under {}: removed {} ({after} free now)",
        gib(free),
        gib(LOW),
        removed.join(", ")
    )))
}

/// What a failure on a nearly full disk should add to its message; `None` when the disk has
/// room.
pub fn failure_hint(root: &Path) -> Option<String> {
    let free = free_bytes(root)?;
    (free < FULL).then(|| {
        format!(
            "the disk holding {} has {} free: a linker or compiler killed by SIGBUS or failing to write is what a full disk looks like",
            root.display(),
            gib(free)
        )
    })
}
