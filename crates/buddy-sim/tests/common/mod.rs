//! What the integration tests share. Each test target compiles this module and uses part
//! of it.
#![allow(dead_code)]

pub mod bytes;

use buddy_sim::FrameStorage;
use buddy_sim::{
    ConfigError, Frame, FrameMemory, MapError, NodeSet, PerCpu, Pfn, Topology, Zone, ZoneConfig,
};
use core::ptr::NonNull;
use proptest::test_runner::Config;

/// A zone whose metadata is in vectors: the type `BoxedZone` is (feature `alloc`), made
/// here without that feature, so that the tests that need no other run under a plain
/// `cargo test`.
pub type TestZone = Zone<FrameVec, Vec<PerCpu>>;

/// A node set of [`TestZone`]s (`BoxedNodeSet` without the `alloc` feature).
pub type TestNodeSet = NodeSet<Vec<TestZone>, FrameVec, Vec<PerCpu>>;

/// The test zones' frame storage: `Vec<Frame>` where buddy-sim gives it [`FrameStorage`]
/// (features `alloc` and `testing`, under which `TestZone` is `BoxedZone`).
#[cfg(any(feature = "alloc", feature = "testing"))]
pub type FrameVec = Vec<Frame>;

/// The test zones' frame storage: a vector of frames, given [`FrameStorage`] here.
#[cfg(not(any(feature = "alloc", feature = "testing")))]
pub type FrameVec = VecFrames;

/// Frame metadata in a vector, for builds where `Vec<Frame>` is no [`FrameStorage`].
#[cfg(not(any(feature = "alloc", feature = "testing")))]
pub struct VecFrames(Vec<Frame>);

#[cfg(not(any(feature = "alloc", feature = "testing")))]
impl FromIterator<Frame> for VecFrames {
    fn from_iter<I: IntoIterator<Item = Frame>>(frames: I) -> Self {
        Self(frames.into_iter().collect())
    }
}

// SAFETY: the vector's `len` frames (`as_ptr` is dangling and aligned when there are none),
// which stay where they are while it is borrowed shared.
#[cfg(not(any(feature = "alloc", feature = "testing")))]
unsafe impl FrameStorage for VecFrames {
    fn frames(&self) -> NonNull<[Frame]> {
        let first = NonNull::new(self.0.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
        NonNull::slice_from_raw_parts(first, self.0.len())
    }
}

/// [`Zone::new_empty`] with fresh metadata in vectors, as `BoxedZone::new_boxed_empty`.
pub fn empty_zone(cfg: ZoneConfig) -> Result<TestZone, ConfigError> {
    // Before allocating: a bad frame count is an error, not an allocation failure.
    cfg.validate()?;
    let frames = (0..cfg.nr_pages).map(|_| Frame::new()).collect();
    let cpus = (0..cfg.cpus).map(|_| PerCpu::new()).collect();
    Zone::new_empty(cfg, frames, cpus)
}

/// [`Zone::new`] with fresh metadata in vectors, as `BoxedZone::new_boxed`: every frame
/// usable and free (past `eager_pages`, deferred).
pub fn zone(cfg: ZoneConfig) -> Result<TestZone, MapError> {
    let zone = empty_zone(cfg)?;
    zone.add_memory(cfg.start, cfg.nr_pages)?;
    zone.reset_counters();
    Ok(zone)
}

/// A node set over `zones`.
pub fn node_set(topology: Topology, zones: Vec<TestZone>) -> Result<TestNodeSet, ConfigError> {
    NodeSet::new(topology, zones)
}

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

/// [`proptest_config`] for a property whose cases are expensive: `cases` cases unless
/// `PROPTEST_CASES` asks for a number, `miri_cases` under Miri.
pub fn proptest_config_of(cases: u32, miri_cases: u32) -> Config {
    let config = proptest_config(miri_cases);
    if cfg!(miri) || std::env::var_os("PROPTEST_CASES").is_some() {
        config
    } else {
        Config { cases, ..config }
    }
}

/// A zone's state before an operation that must change nothing. With the `testing` feature,
/// the whole zone's snapshot (`testing::Snapshot`: every frame's metadata, the pageblocks,
/// the free lists); without it, what the public API shows (the zone's statistics and free
/// frames, and its consistency check after), so that the test runs under a plain
/// `cargo test` and checks the rest with `--features testing`.
pub struct Before {
    #[cfg(feature = "testing")]
    snapshot: buddy_sim::testing::Snapshot,
    #[cfg(not(feature = "testing"))]
    seen: (buddy_sim::MemoryStats, u64),
}

impl Before {
    /// The state of `zone` now.
    pub fn of<F, P>(zone: &Zone<F, P>) -> Self
    where
        F: FrameStorage,
        P: AsRef<[PerCpu]>,
    {
        Self {
            #[cfg(feature = "testing")]
            snapshot: buddy_sim::testing::Snapshot::of(zone),
            #[cfg(not(feature = "testing"))]
            seen: (zone.stats(), zone.free_pages_total()),
        }
    }

    /// Panics, saying what differs, unless `zone` is as it was.
    #[track_caller]
    pub fn assert_unchanged<F, P>(&self, zone: &Zone<F, P>)
    where
        F: FrameStorage,
        P: AsRef<[PerCpu]>,
    {
        #[cfg(feature = "testing")]
        assert_eq!(
            self.snapshot
                .difference(&buddy_sim::testing::Snapshot::of(zone)),
            None
        );
        #[cfg(not(feature = "testing"))]
        {
            assert_eq!((zone.stats(), zone.free_pages_total()), self.seen);
            zone.check().expect("a consistent zone");
        }
    }
}
