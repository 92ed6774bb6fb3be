//! The atomics this crate uses: loom's under `cfg(loom)` (so the model checker sees every
//! interleaving), core's otherwise.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicUsize, Ordering};
