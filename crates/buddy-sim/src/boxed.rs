//! Zones and node sets whose metadata the global allocator provides (feature `alloc`):
//! [`BoxedZone`], [`BoxedNodeSet`].

use crate::error::config::ConfigError;
use crate::error::map::MapError;
use crate::frame::Frame;
use crate::node::NodeSet;
use crate::sync::DefaultRawMutex;
use crate::zone::Zone;
use crate::zone::config::ZoneConfig;
use crate::zone::pcp::PerCpu;

/// A zone whose metadata is in vectors, locked with [`DefaultRawMutex`] unless `R` names
/// another lock: `BoxedZone::new_boxed(cfg)` (the default lock, as `HashMap::new` has the
/// default hasher) or `BoxedZone::<MyLock>::new_boxed_with_lock(cfg)`.
pub type BoxedZone<R = DefaultRawMutex> =
    Zone<alloc::vec::Vec<Frame>, alloc::vec::Vec<PerCpu<R>>, R>;

/// A CPU handle on a [`BoxedZone`] (`BoxedCpu<'_>` in a helper's signature).
pub type BoxedCpu<'z, R = DefaultRawMutex> =
    crate::zone::cpu::Cpu<'z, alloc::vec::Vec<Frame>, alloc::vec::Vec<PerCpu<R>>, R>;

#[cfg(all(feature = "alloc", feature = "spin"))]
impl BoxedZone {
    /// A zone with freshly allocated metadata, all of it usable, locked with
    /// [`DefaultRawMutex`]. The frame metadata comes zeroed from the allocator and is not
    /// written again, and memory past [`EAGER_PAGES`](crate::EAGER_PAGES) frames is deferred
    /// ([`Zone::init_deferred`]): a zone of any size is ready in about the time of its first
    /// gigabyte.
    ///
    /// # Errors
    /// As [`Zone::new`].
    pub fn new_boxed(cfg: ZoneConfig) -> Result<Self, MapError> {
        Self::new_boxed_with_lock(cfg)
    }

    /// A zone with freshly allocated metadata and no usable frames yet (see
    /// [`Zone::new_empty`]), locked with [`DefaultRawMutex`].
    ///
    /// # Errors
    /// As [`Zone::new_empty`].
    pub fn new_boxed_empty(cfg: ZoneConfig) -> Result<Self, ConfigError> {
        Self::new_boxed_empty_with_lock(cfg)
    }
}

impl<R: lock_api::RawMutex> Zone<alloc::vec::Vec<Frame>, alloc::vec::Vec<PerCpu<R>>, R> {
    /// [`BoxedZone::new_boxed`] with the lock type `R`.
    ///
    /// # Errors
    /// As [`Zone::new`].
    pub fn new_boxed_with_lock(cfg: ZoneConfig) -> Result<Self, MapError> {
        let zone = Self::new_boxed_empty_with_lock(cfg)?;
        zone.add_memory(cfg.start, cfg.nr_pages)?;
        zone.reset_counters();
        Ok(zone)
    }

    /// [`BoxedZone::new_boxed_empty`] with the lock type `R`.
    ///
    /// # Errors
    /// As [`Zone::new_empty`].
    #[allow(unsafe_code)]
    pub fn new_boxed_empty_with_lock(cfg: ZoneConfig) -> Result<Self, ConfigError> {
        let (frames, pcps) = boxed_metadata(cfg)?;
        // SAFETY: `zeroed_frames` gives all-zero metadata (under loom, `Frame::new()` each,
        // which is the same state).
        unsafe { Zone::new_empty_zeroed(cfg, frames, pcps) }
    }
}

/// A [`NodeSet`] of [`BoxedZone`]s, in a vector.
pub type BoxedNodeSet<R = DefaultRawMutex> =
    NodeSet<alloc::vec::Vec<BoxedZone<R>>, alloc::vec::Vec<Frame>, alloc::vec::Vec<PerCpu<R>>, R>;

type BoxedMetadata<R> = (alloc::vec::Vec<Frame>, alloc::vec::Vec<PerCpu<R>>);

fn boxed_metadata<R: lock_api::RawMutex>(cfg: ZoneConfig) -> Result<BoxedMetadata<R>, ConfigError> {
    // Before allocating: a bad frame count must be an error, not an allocation failure.
    cfg.validate()?;
    let frames = zeroed_frames(cfg.nr_pages as usize)?;
    let pcps = (0..cfg.cpus).map(|_| PerCpu::new()).collect();
    Ok((frames, pcps))
}

/// `n` frames of all-zero metadata, from the allocator's zeroing path (`calloc`: fresh pages
/// from the OS are not written at all).
#[cfg(all(feature = "alloc", not(loom)))]
#[allow(unsafe_code)]
fn zeroed_frames(n: usize) -> Result<alloc::vec::Vec<Frame>, ConfigError> {
    use alloc::alloc::{Layout, alloc_zeroed, handle_alloc_error};
    if n == 0 {
        return Ok(alloc::vec::Vec::new());
    }
    let Ok(layout) = Layout::array::<Frame>(n) else {
        return Err(crate::error::config::ConfigError::MetadataTooLarge);
    };
    // SAFETY: the layout is non-zero-sized (n > 0 and a Frame is 24 bytes).
    let ptr = unsafe { alloc_zeroed(layout) }.cast::<Frame>();
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `n` frames;
    // all-zero bytes are a valid `Frame` (integer atomics only: `Frame::new()`), so all `n`
    // are initialized; length and capacity are `n`.
    Ok(unsafe { alloc::vec::Vec::from_raw_parts(ptr, n, n) })
}

#[cfg(all(feature = "alloc", loom))]
fn zeroed_frames(n: usize) -> Result<alloc::vec::Vec<Frame>, ConfigError> {
    Ok((0..n).map(|_| Frame::new()).collect())
}
