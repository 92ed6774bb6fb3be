//! What the integration tests share. Each test target compiles this module and uses part
//! of it.
#![allow(dead_code)]

use buddy_sim::{FrameMemory, Pfn};
use core::ptr::NonNull;
use proptest::test_runner::Config;

/// A memory map that reaches no frame: what any map gives for frames whose physical address
/// does not fit 64 bits, and a stand-in where nothing may be cleared or copied.
pub struct Nowhere;

// SAFETY: `frame_ptr` gives no pointer for any frame, which the contract allows.
unsafe impl FrameMemory for Nowhere {
    fn frame_ptr(&self, _: Pfn) -> Option<NonNull<u8>> {
        None
    }

    fn pfn_at(&self, _: NonNull<u8>) -> Option<Pfn> {
        None
    }
}

/// proptest's configuration: the default cases (more with `PROPTEST_CASES`); under Miri,
/// where a case takes seconds and isolation hides the environment and the working
/// directory, `miri_cases` cases and no failure file.
pub fn proptest_config(miri_cases: u32) -> Config {
    if cfg!(miri) {
        Config {
            cases: miri_cases,
            failure_persistence: None,
            ..Config::default()
        }
    } else {
        Config::default()
    }
}
