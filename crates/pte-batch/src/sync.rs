//! The atomics this crate uses: loom's under `cfg(loom)` (so the model checker sees every
//! interleaving), core's otherwise.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
pub use core::sync::atomic::{AtomicU64, Ordering};
