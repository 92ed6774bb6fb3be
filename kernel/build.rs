//! Links the kernel with its target's linker script, `link-ARCH.ld`.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    println!("cargo:rustc-link-arg-bins=-T{dir}/link-{arch}.ld");
    println!("cargo:rustc-link-arg-bins=--orphan-handling=error");
    println!("cargo:rerun-if-changed=link-aarch64.ld");
    println!("cargo:rerun-if-changed=link-x86_64.ld");
}
