//! Test support shared by the crates' tests (a link to this file sits in each crate's test
//! directory, so that the packaged crates carry it): whether memory reads back a byte.

/// Whether every byte of `bytes` is `byte`.
///
/// One slice comparison (`memcmp`, from the optimized standard library) per 4 KiB rather
/// than a closure per byte: the unoptimized test build checks at memory speed, and Miri,
/// which interprets a closure call per byte, runs the comparison natively (a per-byte
/// check of a few hundred KiB took a minute under Miri).
pub fn all_bytes_are(bytes: &[u8], byte: u8) -> bool {
    let pattern = [byte; 4096];
    bytes
        .chunks(pattern.len())
        .all(|c| c == &pattern[..c.len()])
}
