//! What the zone knows of a block's bytes when it hands the block out: that they read zero,
//! that this CPU freed the block a little while ago (so they are likely in its caches), or
//! nothing. A zeroed allocation clears by it: nothing to clear for the first, temporal
//! stores for memory in the caches, streaming stores for memory out of them.

use crate::memory::FRAME;

/// What the zone knows of a block's bytes when it hands it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Contents {
    /// Nothing: a block from the buddy (freed on any CPU at any time, merged, split, or never
    /// touched since the zone got it), or from a per-cpu list that took it from the buddy.
    Unknown,
    /// Every byte reads zero.
    KnownZero,
    /// This CPU freed it to its per-cpu list, and then freed blocks of `since` frames more
    /// (blocks above the costly order, the per-cpu lists' large blocks) before taking it.
    FreedHere {
        /// Frames this CPU freed to its lists after this block, in large blocks.
        since: u64,
    },
}

impl Contents {
    /// [`Contents::KnownZero`] when `zeroed`, else [`Contents::Unknown`].
    #[inline(always)]
    pub(crate) const fn of(zeroed: bool) -> Self {
        if zeroed {
            Self::KnownZero
        } else {
            Self::Unknown
        }
    }

    /// Whether every byte reads zero.
    #[inline(always)]
    pub(crate) const fn known_zero(self) -> bool {
        matches!(self, Self::KnownZero)
    }

    /// Whether `frames` frames of a block with these contents are likely in the caches of the
    /// CPU that freed it: it freed them, and since then no more than `cache` bytes (with the
    /// block's own) were freed there. `None` where the zone has no evidence either way.
    pub(crate) fn in_cache(self, frames: u64, cache: u64) -> Option<bool> {
        let Self::FreedHere { since } = self else {
            return None;
        };
        let bytes = since
            .saturating_add(frames)
            .saturating_mul(FRAME.bytes() as u64);
        Some(bytes <= cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_block_freed_here_is_evidence_and_its_age_counts_against_the_cache() {
        assert_eq!(Contents::Unknown.in_cache(512, u64::MAX), None);
        assert_eq!(Contents::KnownZero.in_cache(512, u64::MAX), None);
        let last = Contents::FreedHere { since: 0 };
        assert_eq!(last.in_cache(512, 2 << 20), Some(true));
        assert_eq!(last.in_cache(512, (2 << 20) - 1), Some(false));
        let older = Contents::FreedHere { since: 1024 };
        assert_eq!(older.in_cache(512, 8 << 20), Some(true));
        assert_eq!(older.in_cache(512, (6 << 20) - 1), Some(false));
        // No overflow past u64 frames.
        let ancient = Contents::FreedHere { since: u64::MAX };
        assert_eq!(ancient.in_cache(512, u64::MAX - 1), Some(false));
        assert!(Contents::of(true).known_zero() && !Contents::of(false).known_zero());
    }

    #[cfg(not(loom))]
    #[test]
    #[allow(unsafe_code)]
    fn a_large_block_this_cpu_freed_comes_back_with_its_age_and_nothing_else_does() {
        use crate::migratetype::MigrateType;
        use crate::types::Order;
        use crate::zone::StaticZone;
        use crate::zone::buddy::Prefer;
        use crate::zone::config::ZoneConfig;
        use mm_types::Pfn;

        const START: Pfn = Pfn(0x1_0000);
        // Room on the per-cpu lists for a few 2 MiB blocks.
        static ZONE: StaticZone<8192, 2> =
            StaticZone::new_static(ZoneConfig::new(START, 8192).with_cpus(2).with_pcp(4096, 64));
        let (zone, order, mt) = (&ZONE, Order(9), MigrateType::Movable);
        let cpu = zone.cpu(0).unwrap();
        let take = || {
            let (idx, c) = zone
                .alloc_preferring(cpu.lists(), order, Prefer::Zeroed, mt, 0)
                .unwrap();
            (zone.map().pfn(idx), c)
        };
        // SAFETY: each block freed below was allocated by this test and is freed once.
        let free = |pfn| unsafe { cpu.free_pages(pfn, order) }.unwrap();
        // From the buddy (through a refill of the list): nothing known.
        let [(a, ca), (b, cb), (c, cc)] = [take(), take(), take()];
        assert_eq!([ca, cb, cc], [Contents::Unknown; 3]);
        // Freed in the order a, b, c: taken back c, b, a, each `since` the blocks after it.
        for pfn in [a, b, c] {
            free(pfn);
        }
        zone.check().unwrap();
        assert_eq!(take(), (c, Contents::FreedHere { since: 0 }));
        assert_eq!(take(), (b, Contents::FreedHere { since: 512 }));
        assert_eq!(take(), (a, Contents::FreedHere { since: 1024 }));
        // Freed on another CPU: no evidence for this one once it is back in the buddy.
        let other = zone.cpu(1).unwrap();
        // SAFETY: as above.
        unsafe { other.free_pages(a, order) }.unwrap();
        other.drain();
        let (_, after_drain) = take();
        assert_eq!(after_drain, Contents::Unknown);
        // Order 0 carries no stamp.
        let (p, _) = zone
            .alloc_preferring(cpu.lists(), Order::ZERO, Prefer::Zeroed, mt, 0)
            .unwrap();
        let p = zone.map().pfn(p);
        // SAFETY: as above.
        unsafe { cpu.free_pages(p, Order::ZERO) }.unwrap();
        let (_, small) = zone
            .alloc_preferring(cpu.lists(), Order::ZERO, Prefer::Zeroed, mt, 0)
            .unwrap();
        assert_eq!(small, Contents::Unknown);
        zone.check().unwrap();
    }
}
