//! Records the compiler version for the report's header, and on x86_64 builds the
//! compiler-builtins `memset` peer (see `builtins/zero.rs`): the toolchain's
//! `x86_64-unknown-none` rust-std compiles it, binutils' `ld -r` keeps only the object files it
//! needs and `objcopy` hides every symbol but `zc_builtins_zero`. Where a step fails the
//! report says why instead of measuring it (`BENCHES_BUILTINS_MEMSET`).

use std::path::Path;
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(&rustc)
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
        );
    println!("cargo:rustc-env=BENCHES_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rerun-if-changed=builtins/zero.rs");
    // Build again once the x86_64-unknown-none target is installed (or updated): the peer
    // is compiled against its rust-std.
    if let Some(sysroot) = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
    {
        let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
        println!("cargo:rerun-if-changed={sysroot}/lib/rustlib/x86_64-unknown-none/lib");
    }
    println!("cargo::rustc-check-cfg=cfg(builtins_memset)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let status = if arch == "x86_64" && os == "linux" {
        match builtins_memset(&rustc) {
            Ok(()) => {
                println!("cargo:rustc-cfg=builtins_memset");
                "built".to_string()
            }
            Err(e) => {
                println!("cargo:warning=compiler-builtins memset peer not built: {e}");
                e
            }
        }
    } else {
        "only built for x86_64 Linux hosts".into()
    };
    println!("cargo:rustc-env=BENCHES_BUILTINS_MEMSET={status}");
}

fn run(c: &mut Command) -> Result<(), String> {
    let what = format!("{c:?}");
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn builtins_memset(rustc: &str) -> Result<(), String> {
    let out = std::env::var("OUT_DIR").map_err(|e| e.to_string())?;
    let out = Path::new(&out);
    let full = out.join("libzc_builtins_full.a");
    let object = out.join("zc_builtins.o");
    run(Command::new(rustc)
        .args([
            "--edition",
            "2024",
            "--target",
            "x86_64-unknown-none",
            "--crate-type",
            "staticlib",
            "--crate-name",
            "zc_builtins_full",
            "-C",
            "opt-level=3",
            "-C",
            "panic=abort",
            "builtins/zero.rs",
            "-o",
        ])
        .arg(&full))
    .map_err(|e| format!("{e} (is the x86_64-unknown-none target installed?)"))?;
    run(Command::new("ld")
        .args(["-r", "-u", "zc_builtins_zero", "-o"])
        .arg(&object)
        .arg(&full))?;
    run(Command::new("objcopy")
        .arg("--keep-global-symbol=zc_builtins_zero")
        .arg(&object))?;
    let lib = out.join("libzc_builtins_memset.a");
    let _ = std::fs::remove_file(&lib);
    run(Command::new("ar").arg("rcs").arg(&lib).arg(&object))?;
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=zc_builtins_memset");
    Ok(())
}
