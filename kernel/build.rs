//! Links the kernel with its target's linker script, `link-ARCH.ld`; on arm64, embeds a
//! guest for the hypervisor when `UNIKERNEL_GUEST_IMAGE` (an arm64 Linux `Image`) and
//! `UNIKERNEL_GUEST_DTB` (the device tree it is shown) name one, and sets `cfg(linux_guest)`.

use std::path::PathBuf;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    println!("cargo:rustc-link-arg-bins=-T{dir}/link-{arch}.ld");
    println!("cargo:rustc-link-arg-bins=--orphan-handling=error");
    println!("cargo:rerun-if-changed=link-aarch64.ld");
    println!("cargo:rerun-if-changed=link-x86_64.ld");
    println!("cargo:rustc-check-cfg=cfg(linux_guest)");
    println!("cargo:rerun-if-env-changed=UNIKERNEL_GUEST_IMAGE");
    println!("cargo:rerun-if-env-changed=UNIKERNEL_GUEST_DTB");
    let guest = (
        std::env::var("UNIKERNEL_GUEST_IMAGE"),
        std::env::var("UNIKERNEL_GUEST_DTB"),
    );
    if let (true, Ok(image), Ok(dtb)) = (arch == "aarch64", guest.0, guest.1) {
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        for (from, to) in [(image, "guest.img"), (dtb, "guest.dtb")] {
            println!("cargo:rerun-if-changed={from}");
            std::fs::copy(&from, out.join(to))
                .unwrap_or_else(|e| panic!("copying the guest's {from}: {e}"));
        }
        println!("cargo:rustc-cfg=linux_guest");
    }
}
