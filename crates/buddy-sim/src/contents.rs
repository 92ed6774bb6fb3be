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
    /// CPU that freed it: it freed them, and since then no more than a cache of
    /// `cache_frames` frames (with the block's own) was freed there. `None` where the zone
    /// has no evidence either way.
    pub(crate) fn in_cache(self, frames: u64, cache_frames: u64) -> Option<bool> {
        let Self::FreedHere { since } = self else {
            return None;
        };
        Some(since.saturating_add(frames) <= cache_frames)
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
        assert_eq!(last.in_cache(512, 512), Some(true));
        assert_eq!(last.in_cache(512, 511), Some(false));
        let older = Contents::FreedHere { since: 1024 };
        assert_eq!(older.in_cache(512, 2048), Some(true));
        assert_eq!(older.in_cache(512, 1535), Some(false));
        // No overflow past u64 frames.
        let ancient = Contents::FreedHere { since: u64::MAX };
        assert_eq!(ancient.in_cache(512, u64::MAX - 1), Some(false));
        assert!(Contents::of(true).known_zero() && !Contents::of(false).known_zero());
    }
}
