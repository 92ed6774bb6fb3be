//! The embedder's side of reclaim: the [`Reclaim`] callback an allocation's slow path calls
//! before it fails, or in defrag mode before it would fragment a pageblock (Linux's direct
//! reclaim and shrinkers), and background compaction calls to work off a watermark boost
//! (kswapd's boosted reclaim).

/// Frees some of the embedder's caches back to the zone: clean page cache, slab a shrinker
/// can trim, anything it can drop and rebuild. It frees through the zone's usual free calls
/// and returns how many frames it freed (0: nothing left to drop). Any `FnMut(u64) -> u64`
/// is one.
///
/// The zone calls it holding no lock of its own, from the CPU that allocates; it may free
/// to any CPU's lists.
pub trait Reclaim {
    /// Frees about `pages` frames (more or fewer as the embedder's caches allow) and
    /// returns how many it freed.
    fn reclaim(&mut self, pages: u64) -> u64;
}

impl<T: FnMut(u64) -> u64> Reclaim for T {
    fn reclaim(&mut self, pages: u64) -> u64 {
        self(pages)
    }
}
