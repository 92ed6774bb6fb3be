//! What the zone knows of a block's bytes when it hands the block out: that they read zero,
//! that this CPU freed the block a little while ago (so they are likely in its caches), or
//! nothing. A zeroed allocation clears by it: nothing to clear for the first, temporal
//! stores for memory in the caches, streaming stores for memory out of them.

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
    /// CPU that freed it: it is the last block of its size that CPU freed (nothing freed
    /// there since), and it fits in a cache of `cache_frames` frames. `None` where the zone
    /// has no evidence either way.
    ///
    /// Only the last: the zone sees the blocks a CPU frees, not what else went through its
    /// caches in between (the memory its tasks touched, the blocks it cleared), so the
    /// frames freed since are a floor on what evicted the block, not an estimate. A run of
    /// frees is a task giving back what it no longer touches; the block freed last is the
    /// one a fault that follows it (a task freeing and faulting a huge page again) finds
    /// hot. Counting the older ones hot too cost 2% of a cold 2 MiB fault in the report's
    /// fault table (rounds that free 256 blocks and fault them again after other work):
    /// the 4 last freed were cleared with temporal stores while out of the caches.
    pub(crate) fn in_cache(self, frames: u64, cache_frames: u64) -> Option<bool> {
        let Self::FreedHere { since } = self else {
            return None;
        };
        Some(since == 0 && frames <= cache_frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_block_freed_here_is_evidence_and_only_the_last_freed_is_hot() {
        assert_eq!(Contents::Unknown.in_cache(512, u64::MAX), None);
        assert_eq!(Contents::KnownZero.in_cache(512, u64::MAX), None);
        let last = Contents::FreedHere { since: 0 };
        assert_eq!(last.in_cache(512, 512), Some(true));
        assert_eq!(last.in_cache(512, 511), Some(false));
        // One freed after it, however small against the cache: only the last is taken hot.
        let older = Contents::FreedHere { since: 512 };
        assert_eq!(older.in_cache(512, 1 << 20), Some(false));
        let ancient = Contents::FreedHere { since: u64::MAX };
        assert_eq!(ancient.in_cache(512, u64::MAX), Some(false));
        assert!(Contents::of(true).known_zero() && !Contents::of(false).known_zero());
    }
}
