//! A CPU's high mark: how many frames its per-cpu lists hold before a free drains a batch to
//! the buddy. Fixed at [`ZoneConfig::pcp_high`], or tuned between it and
//! [`ZoneConfig::pcp_high_max`] as Linux 6.7 tunes `pcp->high` (mm/page_alloc.c:
//! `nr_pcp_alloc`, `nr_pcp_high`, `decay_pcp_high`): raised at each refill and after a run of
//! frees while the zone has memory to spare, lowered when it has not, and by a periodic
//! decay. Every rule is here; the lists keep one [`HighMark`] under their lock.

use crate::zone::config::ZoneConfig;

/// A CPU's high mark, as the frames it stands above [`ZoneConfig::pcp_high`] (Linux's
/// `pcp->high` less `high_min`): 0 unless the zone tunes the marks, and at most
/// [`ZoneConfig::pcp_high_headroom`], so that the mark never wraps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HighMark {
    raise: u64,
}

impl HighMark {
    /// The mark at `pcp_high`: where every CPU's starts, and where a fixed one stays.
    pub(crate) const FIXED: Self = Self { raise: 0 };

    /// The mark in frames.
    #[inline(always)]
    pub(crate) const fn frames(self, cfg: &ZoneConfig) -> u64 {
        // `raise` is at most `pcp_high_max - pcp_high`: no wrap.
        cfg.pcp_high.wrapping_add(self.raise)
    }

    /// Whether `pages` frames on the lists are past the mark: the fixed mark first, so that
    /// lists below it (the common case) read no more.
    #[inline(always)]
    pub(crate) const fn passed_by(self, cfg: &ZoneConfig, pages: u64) -> bool {
        pages > cfg.pcp_high && pages > self.frames(cfg)
    }

    /// Whether the mark stands above `pcp_high`.
    #[inline]
    pub(crate) const fn raised(self) -> bool {
        self.raise > 0
    }

    /// A refill of the lists from the buddy (Linux's `nr_pcp_alloc`: with a larger mark the
    /// list would not have run empty): in a zone that tunes the marks, one batch up, unless
    /// the buddy is below its high watermark (`below_watermark`, asked only then).
    #[inline]
    pub(crate) fn refilled(&mut self, cfg: &ZoneConfig, below_watermark: impl FnOnce() -> bool) {
        let headroom = cfg.pcp_high_headroom();
        if headroom > 0 && !below_watermark() {
            self.raise = self.raise.saturating_add(cfg.pcp_batch).min(headroom);
        }
    }

    /// A free that left `count` frames on the lists, past the mark, after `recent_frees`
    /// frames freed since the last allocation (Linux's `nr_pcp_high`); returns the mark the
    /// drain that follows measures against. In a zone that tunes the marks: with the buddy
    /// below its high watermark (`below_watermark`, asked only then) the mark drops by the
    /// run of frees (at least a batch) and the drain measures against the lists' frames or
    /// `pcp_high`, whichever is more; else the mark rises to hold the run and a batch for
    /// the next run, and this drain measures against the mark it found.
    #[inline]
    pub(crate) fn drained_past(
        &mut self,
        cfg: &ZoneConfig,
        (count, recent_frees): (u64, u64),
        below_watermark: impl FnOnce() -> bool,
    ) -> u64 {
        let found = self.frames(cfg);
        let headroom = cfg.pcp_high_headroom();
        if headroom == 0 {
            return found;
        }
        if below_watermark() {
            self.raise = self.raise.saturating_sub(recent_frees.max(cfg.pcp_batch));
            count.max(cfg.pcp_high)
        } else {
            let need = recent_frees
                .saturating_add(cfg.pcp_batch)
                .saturating_sub(cfg.pcp_high);
            self.raise = self.raise.max(need.min(headroom));
            found
        }
    }

    /// A periodic decay (Linux's `decay_pcp_high`) with `count` frames on the lists and
    /// `recent_frees_max` the most a run of frees counts: an eighth down, at least a frame
    /// (Linux's eighth of a mark under 8 frames is 0, which would never bring a small mark
    /// down), not below `pcp_high` nor below `count - recent_frees_max`. Returns the new
    /// mark.
    #[inline]
    pub(crate) fn decayed(&mut self, cfg: &ZoneConfig, count: u64, recent_frees_max: u64) -> u64 {
        let high = self.frames(cfg);
        let decayed = high
            .saturating_sub((high / 8).max(1))
            .max(count.saturating_sub(recent_frees_max))
            .max(cfg.pcp_high)
            .min(high);
        // `pcp_high <= decayed <= high`.
        self.raise = decayed - cfg.pcp_high;
        decayed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm_types::Pfn;

    /// Marks 64..1024 frames, batches of 8.
    fn tuned() -> ZoneConfig {
        ZoneConfig::new(Pfn(0), 4096)
            .with_pcp(64, 8)
            .with_pcp_high_max(1024)
    }

    #[test]
    fn refills_raise_a_tuned_mark_up_to_its_bound_and_a_fixed_one_never() {
        let cfg = tuned();
        let mut mark = HighMark::FIXED;
        mark.refilled(&cfg, || false);
        assert_eq!(mark.frames(&cfg), 72);
        mark.refilled(&cfg, || true);
        assert_eq!(mark.frames(&cfg), 72, "below the watermark: no raise");
        for _ in 0..200 {
            mark.refilled(&cfg, || false);
        }
        assert_eq!(mark.frames(&cfg), 1024);
        let fixed = cfg.with_pcp(64, 8);
        let mut mark = HighMark::FIXED;
        mark.refilled(&fixed, || unreachable!("a fixed mark asks nothing"));
        assert_eq!(mark, HighMark::FIXED);
        assert!(mark.passed_by(&fixed, 65) && !mark.passed_by(&fixed, 64));
    }

    #[test]
    fn a_drain_raises_the_mark_to_hold_the_run_or_lowers_it_below_the_watermark() {
        let cfg = tuned();
        let mut mark = HighMark::FIXED;
        // A run of 300 frees: the drain measures against 64, the next run has 308.
        assert_eq!(mark.drained_past(&cfg, (400, 300), || false), 64);
        assert_eq!(mark.frames(&cfg), 308);
        // Below the watermark: down by the run, the drain against the lists' frames.
        assert_eq!(mark.drained_past(&cfg, (350, 100), || true), 350);
        assert_eq!(mark.frames(&cfg), 208);
        assert_eq!(mark.drained_past(&cfg, (30, 0), || true), 64);
        assert_eq!(mark.frames(&cfg), 200, "at least a batch down");
        // Never past the bound.
        mark.drained_past(&cfg, (5000, u64::MAX), || false);
        assert_eq!(mark.frames(&cfg), 1024);
    }

    #[test]
    fn the_decay_takes_an_eighth_at_least_a_frame_down_to_the_fixed_mark() {
        let cfg = tuned();
        let mut mark = HighMark::FIXED;
        mark.drained_past(&cfg, (0, 1016), || false);
        assert_eq!(mark.decayed(&cfg, 0, 256), 896);
        // Not below the lists' frames less the most a run counts (1000 - 100), nor above
        // the mark it had.
        assert_eq!(mark.decayed(&cfg, 1000, 100), 896);
        let mut ticks = 0;
        while mark.raised() {
            mark.decayed(&cfg, 0, 256);
            ticks += 1;
        }
        assert_eq!(mark.frames(&cfg), 64);
        assert!(ticks < 40, "{ticks}");
        // A small mark, and a fixed mark of 0: a frame a tick, no wrap.
        let small = ZoneConfig::new(Pfn(0), 4096)
            .with_pcp(0, 1)
            .with_pcp_high_max(3);
        let mut mark = HighMark::FIXED;
        mark.refilled(&small, || false);
        mark.refilled(&small, || false);
        assert_eq!(mark.decayed(&small, 0, 32), 1);
        assert_eq!(mark.decayed(&small, 0, 32), 0);
        assert_eq!(mark.decayed(&small, 0, 32), 0);
    }
}
