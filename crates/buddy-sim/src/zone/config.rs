//! A zone's geometry and tuning.

use crate::error::config::ConfigError;
use crate::migratetype::MigrateType;
use crate::types::{NodeId, Order};
use mm_types::Pfn;

/// Per-cpu list orders: 0..=[`ZoneConfig::pcp_max_order`] (at most 8) and the pageblock
/// order, the last slot.
pub(crate) const PCP_SLOTS: usize = 10;
/// The largest [`ZoneConfig::pcp_max_order`]: the slots below the pageblock order's.
pub const PCP_MAX_ORDER: Order = Order(PCP_SLOTS as u8 - 2);
/// Linux's `PAGE_ALLOC_COSTLY_ORDER`: the default [`ZoneConfig::pcp_max_order`]; an
/// allocation above it gets one round of direct reclaim and compaction.
pub const PAGE_ALLOC_COSTLY_ORDER: Order = Order(3);
/// Per-cpu lists per CPU: the orders' lists for each [`MigrateType`], kept apart.
pub(crate) const PCP_LISTS: usize = PCP_SLOTS * MigrateType::ALL.len();

/// The default [`ZoneConfig::eager_pages`](crate::ZoneConfig::eager_pages): frames of a
/// range [`Zone::add_memory`](crate::Zone::add_memory) initializes before it returns (1 GiB of 4 KiB frames); the
/// rest of a larger range is deferred.
pub const EAGER_PAGES: u64 = 1 << 18;

/// A zone's geometry and tuning, in 4 KiB frames (whatever the kernel's page size: a kernel
/// with 16 or 64 KiB pages allocates them as blocks of order 2 or 4). [`ZoneConfig::new`]
/// gives the x86_64 kernel's geometry and per-cpu list sizes derived from the zone's size as
/// Linux derives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneConfig {
    /// First frame the zone spans (a 4 KiB frame number: physical address / 4 KiB).
    pub start: Pfn,
    /// 4 KiB frames the zone spans, holes included (at most `u32::MAX - 1`).
    pub nr_pages: u64,
    /// MAX_ORDER: the largest block (10 on x86_64: 4 MiB with 4 KiB pages).
    pub max_order: Order,
    /// The pageblock order (9), which also gets a per-cpu list.
    pub pageblock_order: Order,
    /// The largest order below the pageblock order that the per-cpu lists hold: 3 by
    /// default, Linux's `PAGE_ALLOC_COSTLY_ORDER` (at most [`PCP_MAX_ORDER`], 8). A kernel
    /// whose common calls are larger (ArceOS's 256 KiB task stacks are order 6) raises it so
    /// that they take the CPU's list too, not the zone lock and a split and merge through
    /// every order; the blocks the lists hold stay bounded by `pcp_high`.
    pub pcp_max_order: Order,
    /// Frames per memory section (a power of two; 2^15 by default). `free_contig_range`
    /// never coalesces across a section boundary.
    pub section_pages: u64,
    /// Number of CPUs, each with its own per-cpu lists.
    pub cpus: usize,
    /// A per-cpu list set that holds more than this many frames drains some back to the
    /// buddy: `pcp_batch` frames, more after a run of frees (up to `pcp_high - pcp_batch`,
    /// as Linux's `nr_pcp_free` scales the batch by the frees since the last allocation).
    pub pcp_high: u64,
    /// The most frames a CPU's high mark grows to (Linux 6.7's `pcp->high_max`), where it
    /// is above [`pcp_high`](ZoneConfig::pcp_high), which is then the least (`high_min`):
    /// each refill raises the CPU's mark by `pcp_batch` while the zone's free memory is at
    /// or above its high watermark, a free that reaches the mark after a run of frees
    /// raises it to hold that run, and a free below the high watermark lowers it again, as
    /// [`Cpu::decay_pcp_high`](crate::Cpu::decay_pcp_high) does when a kernel calls it from
    /// a periodic timer (Linux: each second). A list that drains and refills in turn (a
    /// burst of task stacks larger than the fixed mark) then stops going through the buddy.
    /// By default Linux's own bound ([`pcp_high_max_for`]: an eighth of the zone per CPU),
    /// so the marks are tuned as Linux has tuned them by default since 6.7. 0, or any value
    /// at or below `pcp_high` (as [`ZoneConfig::with_pcp`] sets): the mark stays at
    /// `pcp_high`.
    pub pcp_high_max: u64,
    /// Frames moved per refill (for orders above 0, `pcp_batch >> order` blocks, at least
    /// two when the batch is above one, as Linux's `nr_pcp_alloc`), and the least a drain
    /// returns.
    pub pcp_batch: u64,
    /// Frames of each range [`Zone::add_memory`](crate::Zone::add_memory) initializes before
    /// it returns ([`EAGER_PAGES`](crate::EAGER_PAGES) by default); the rest is deferred
    /// ([`Zone::init_deferred`](crate::Zone::init_deferred)). `u64::MAX` defers nothing.
    pub eager_pages: u64,
    /// The NUMA node the zone's memory is on (node 0 by default): where a
    /// [`NodeSet`](crate::NodeSet) puts the zone.
    pub node: NodeId,
    /// Linux's `vm.defrag_mode` (6.15; off by default, as there): an allocation whose type
    /// has no free block takes another type's memory only as whole free pageblocks
    /// (`ALLOC_NOFRAGMENT`), and before it would take part of one the slow path reclaims
    /// and compacts to the pageblock order through the request's callbacks
    /// ([`AllocRequest::reclaim`](crate::AllocRequest::reclaim),
    /// [`AllocRequest::compact`](crate::AllocRequest::compact)); background compaction
    /// ([`Zone::compact_work`](crate::Zone::compact_work)) keeps the high watermark's worth
    /// of memory in free pageblocks.
    ///
    /// Two rules go further than Linux's, for its last resort (what an allocation takes
    /// when reclaim and compaction could not make the whole pageblock it needs):
    /// - an unmovable or reclaimable allocation takes part of another type's pageblock,
    ///   but where that pageblock is movable it claims it whole (Linux would steal the block
    ///   and leave the pageblock movable): no unmovable or reclaimable allocation ever sits
    ///   in a movable pageblock, where it would keep compaction from emptying it;
    /// - a movable allocation has no last resort: it fails instead
    ///   ([`AllocError::OutOfMemory`](crate::AllocError::OutOfMemory)), for its caller to
    ///   reclaim or kill (Linux's OOM killer). Its memory can always be made by reclaim,
    ///   and the free memory in unmovable and reclaimable pageblocks is what their own
    ///   allocations need: taken by movable ones, it sends the next of those to claim
    ///   another pageblock.
    pub defrag_mode: bool,
    /// Linux's `vm.watermark_boost_factor`: how far a fallback that fragments a pageblock
    /// boosts the watermark, in ten-thousandths of the high watermark (15000 by default;
    /// 0 turns boosting off). The boost is what background compaction works off first.
    pub watermark_boost_factor: u32,
    /// Linux's `vm.compaction_proactiveness` (0..=100, 20 by default; 0 turns it off): how
    /// unfragmented background compaction keeps the zone. It runs when the zone's
    /// fragmentation score (the share of free memory outside blocks of the pageblock order)
    /// is above `min(110 - proactiveness, 100)`% and stops at `max(100 - proactiveness, 5)`%.
    pub compaction_proactiveness: u8,
    /// Linux's `ZONE_MOVABLE` (`movablecore=`, memory onlined as movable): the zone serves
    /// movable allocations and contiguous runs only, so every pageblock in it can be
    /// emptied by migration (run-time gigantic pages). An unmovable or reclaimable block
    /// request fails with [`AllocError::MovableOnly`](crate::AllocError::MovableOnly), and a
    /// [`NodeSet`](crate::NodeSet) passes the zone over for them.
    pub movable_only: bool,
    /// In defrag mode only (off by default; not in Linux): a request of whole pageblocks
    /// (the pageblock order or above) is served only while the free pageblocks left after
    /// it hold the min watermark's worth of frames, a reserve for the fallbacks of
    /// unmovable and reclaimable allocations, which must claim a whole free pageblock in
    /// defrag mode; pageblock-order blocks then stay off the per-cpu lists, in the buddy
    /// where those fallbacks find them, and direct compaction for a huge page works until
    /// the block and the reserve are free. An unmovable or reclaimable allocation that finds
    /// no free pageblock to claim also takes a block out of the other one's pageblocks
    /// (never a movable one's) before the slow path: that pins no pageblock a huge page
    /// could have. Without it huge pages take every free
    /// pageblock under memory pressure, and an unmovable allocation that finds none falls
    /// back to a single page inside a movable pageblock (defrag mode's last resort),
    /// which pins that pageblock: more huge pages under churn, fewer at rest.
    pub pageblock_reserve: bool,
}

/// How far an allocation may take from other types' pageblocks when its own lists are empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Linux's default: claim a pageblock where the rules allow, else take (steal) a block
    /// out of another type's pageblock without changing its type.
    Any,
    /// `ALLOC_NOFRAGMENT`: only free blocks of the pageblock order or above, claimed whole;
    /// never a steal, never part of a pageblock.
    WholePageblocks,
    /// Defrag mode's last resort for an unmovable or reclaimable allocation that reclaim
    /// and compaction could not serve: as [`Fallback::Any`], except that where it would
    /// steal out of a movable pageblock it claims that pageblock whole instead (the
    /// pageblock and its free blocks become the allocation's type), so that no unmovable or
    /// reclaimable allocation ever sits in a movable pageblock.
    Claiming,
}

impl Fallback {
    /// The lowest order a fallback for an allocation of `order` takes from.
    #[inline]
    pub(crate) fn lowest_order(self, order: Order, pageblock_order: Order) -> Order {
        match self {
            Self::WholePageblocks if order < pageblock_order => pageblock_order,
            _ => order,
        }
    }
}

/// A zone's watermarks in frames (Linux's `__setup_per_zone_wmarks` for a machine of the
/// zone's size): `min` from `min_free_kbytes` (the square root of 16 x the KiB, clamped to
/// 128 KiB..256 MiB, at most an eighth of the zone), `low` and `high` a step above it and
/// two (a quarter of `min`, or 0.1% of the zone if more: `watermark_scale_factor` 10).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermarks {
    /// Below it only atomic allocations dip (Linux's `WMARK_MIN`).
    pub min: u64,
    /// Where Linux wakes kswapd.
    pub low: u64,
    /// Where kswapd stops reclaiming, and what a watermark boost is a multiple of.
    pub high: u64,
}

impl Watermarks {
    /// The watermarks of a zone of `managed` usable frames.
    #[must_use]
    pub const fn for_pages(managed: u64) -> Self {
        let min = min_free_pages(managed);
        let step = max(min / 4, managed.saturating_mul(10) / 10_000);
        Self {
            min,
            low: min + step,
            high: min + 2 * step,
        }
    }
}

/// Linux's `min_free_kbytes` for `nr_pages` of 4 KiB frames, in frames: sqrt(16 x KiB),
/// clamped to 128 KiB..256 MiB, at most an eighth of the frames.
const fn min_free_pages(nr_pages: u64) -> u64 {
    let kib = nr_pages.saturating_mul(4);
    let min_free_kib = clamp(isqrt(kib.saturating_mul(16)), 128, 262_144);
    min(min_free_kib / 4, nr_pages / 8)
}

/// The per-cpu batch x86_64 Linux uses for every zone of 256 MiB or more: 63 frames.
pub const LINUX_PCP_BATCH: u64 = 63;

/// Linux's `zone_batchsize`: a quarter of a 1024th of the zone, at most 1 MiB of frames
/// (256), rounded to `2^n - 1` (so that batches do not all start on the same cache colour);
/// at least 1 (`zone_set_pageset_high_and_batch`). 63 from 256 MiB on; 1 for a zone under
/// 8 MiB.
#[must_use]
pub const fn pcp_batch_for(nr_pages: u64) -> u64 {
    let batch = min(nr_pages >> 10, 256) / 4;
    let batch = if batch < 1 { 1 } else { batch };
    let sum = batch + batch / 2;
    // rounddown_pow_of_two(sum) - 1, at least 1.
    let pow = 1u64 << (63 - sum.leading_zeros());
    if pow > 1 { pow - 1 } else { 1 }
}

/// Linux's `zone_highsize` with its default `high_fraction` of 0: the zone's low watermark
/// split across its CPUs, at least four batches. The low watermark is Linux's for a machine
/// of this zone's size (`min_free_kbytes` = sqrt(16 x KiB), clamped to 128 KiB..256 MiB, plus
/// a quarter), at most an eighth of the zone, so a tiny zone keeps its frames in the buddy.
/// 1536 is what the fixed defaults used; this gives 1280 for a 1 GiB zone and one CPU.
#[must_use]
pub const fn pcp_high_for(nr_pages: u64, cpus: usize, batch: u64) -> u64 {
    let min_free = min_free_pages(nr_pages);
    let low = min(min_free + min_free / 4, nr_pages / 8);
    let cpus = if cpus == 0 { 1 } else { cpus as u64 };
    let high = low / cpus;
    let floor = batch.saturating_mul(4);
    if high > floor { high } else { floor }
}

/// Linux's `zone_highsize` with a `high_fraction` of 8 (`MIN_PERCPU_PAGELIST_HIGH_FRACTION`,
/// what 6.7 takes for `pcp->high_max`): an eighth of the zone split across its CPUs, at
/// least four batches ([`ZoneConfig::pcp_high_max`]).
#[must_use]
pub const fn pcp_high_max_for(nr_pages: u64, cpus: usize, batch: u64) -> u64 {
    let cpus = if cpus == 0 { 1 } else { cpus as u64 };
    max(nr_pages / 8 / cpus, batch.saturating_mul(4))
}

const fn min(a: u64, b: u64) -> u64 {
    if a < b { a } else { b }
}

const fn max(a: u64, b: u64) -> u64 {
    if a > b { a } else { b }
}

const fn clamp(v: u64, lo: u64, hi: u64) -> u64 {
    if v < lo {
        lo
    } else if v > hi {
        hi
    } else {
        v
    }
}

/// The integer square root (floor).
const fn isqrt(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let mut x = n;
    let mut y = x.div_ceil(2);
    while y < x {
        x = y;
        y = (x + n / x) / 2;
    }
    x
}

impl ZoneConfig {
    /// `[start, start + nr_pages)` with MAX_ORDER 10, pageblock order 9, 2^15-frame
    /// sections, one CPU, and per-cpu lists sized from the zone as Linux sizes them
    /// ([`pcp_batch_for`], [`pcp_high_for`]): `batch` 63 and `high` in the thousands for a
    /// zone of a GiB or more, `batch` 1 and `high` 4 for a 16-frame zone, which then behaves
    /// like a plain buddy (a refill moves one block, not the whole zone); each CPU's high
    /// mark tuned between `high` and [`pcp_high_max_for`], as Linux 6.7 and later tune it.
    #[must_use]
    #[inline]
    pub const fn new(start: Pfn, nr_pages: u64) -> Self {
        let batch = pcp_batch_for(nr_pages);
        Self {
            start,
            nr_pages,
            max_order: Order(10),
            pageblock_order: Order(9),
            pcp_max_order: PAGE_ALLOC_COSTLY_ORDER,
            section_pages: 1 << 15,
            cpus: 1,
            pcp_high: pcp_high_for(nr_pages, 1, batch),
            pcp_high_max: pcp_high_max_for(nr_pages, 1, batch),
            pcp_batch: batch,
            eager_pages: EAGER_PAGES,
            node: NodeId(0),
            defrag_mode: false,
            watermark_boost_factor: 15_000,
            compaction_proactiveness: 20,
            movable_only: false,
            pageblock_reserve: false,
        }
    }

    /// The same zone with `cpus` CPUs, its `high` mark and the bound of its tuning derived
    /// again for that many ([`pcp_high_for`], [`pcp_high_max_for`]; set
    /// [`ZoneConfig::with_pcp`] or [`ZoneConfig::with_pcp_high_max`] after this to keep your
    /// own).
    #[must_use]
    #[inline]
    pub const fn with_cpus(self, cpus: usize) -> Self {
        Self {
            cpus,
            pcp_high: pcp_high_for(self.nr_pages, cpus, self.pcp_batch),
            pcp_high_max: pcp_high_max_for(self.nr_pages, cpus, self.pcp_batch),
            ..self
        }
    }

    /// The same zone with MAX_ORDER `max_order`, and the pageblock order lowered to it where
    /// it was larger (Linux: `pageblock_order = min(HPAGE_PMD_ORDER, MAX_PAGE_ORDER)`), so a
    /// zone of small blocks needs one call.
    #[must_use]
    #[inline]
    pub const fn with_max_order(self, max_order: Order) -> Self {
        let pageblock_order = if self.pageblock_order.get() > max_order.get() {
            max_order
        } else {
            self.pageblock_order
        };
        Self {
            max_order,
            pageblock_order,
            ..self
        }
    }

    /// The same zone with fixed per-cpu list sizes: `batch` frames per refill or drain, a
    /// drain past `high` frames, no tuning of the mark. `with_pcp(1536, LINUX_PCP_BATCH)` is
    /// the fixed tuning of earlier versions.
    #[must_use]
    #[inline]
    pub const fn with_pcp(self, high: u64, batch: u64) -> Self {
        Self {
            pcp_high: high,
            pcp_high_max: 0,
            pcp_batch: batch,
            ..self
        }
    }

    /// The same zone with each CPU's high mark tuned between
    /// [`pcp_high`](ZoneConfig::pcp_high) and `high_max` frames
    /// ([`ZoneConfig::pcp_high_max`]); Linux 6.7's bound is [`pcp_high_max_for`].
    #[must_use]
    #[inline]
    pub const fn with_pcp_high_max(self, high_max: u64) -> Self {
        Self {
            pcp_high_max: high_max,
            ..self
        }
    }

    /// The most frames a CPU's high mark stands above `pcp_high`: 0 where the marks are not
    /// tuned ([`ZoneConfig::pcp_high_max`] at or below [`pcp_high`](ZoneConfig::pcp_high)).
    #[inline]
    pub(crate) const fn pcp_high_headroom(&self) -> u64 {
        self.pcp_high_max.saturating_sub(self.pcp_high)
    }

    /// The same zone with per-cpu lists for every order up to `order`
    /// ([`ZoneConfig::pcp_max_order`]).
    #[must_use]
    #[inline]
    pub const fn with_pcp_max_order(self, order: Order) -> Self {
        Self {
            pcp_max_order: order,
            ..self
        }
    }

    /// The same configuration for a zone on NUMA node `node`.
    #[must_use]
    #[inline]
    pub const fn with_node(self, node: NodeId) -> Self {
        Self { node, ..self }
    }

    /// The same zone in Linux's defrag mode ([`ZoneConfig::defrag_mode`]) or not.
    #[must_use]
    #[inline]
    pub const fn with_defrag_mode(self, on: bool) -> Self {
        Self {
            defrag_mode: on,
            ..self
        }
    }

    /// The same zone in defrag mode with the reserve of free pageblocks kept from huge
    /// pages for the fallbacks of unmovable and reclaimable allocations
    /// ([`ZoneConfig::pageblock_reserve`]), or defrag mode as Linux's with `false`.
    #[must_use]
    #[inline]
    pub const fn with_pageblock_reserve(self, on: bool) -> Self {
        Self {
            defrag_mode: self.defrag_mode || on,
            pageblock_reserve: on,
            ..self
        }
    }

    /// The same zone as a movable-only one ([`ZoneConfig::movable_only`], `ZONE_MOVABLE`).
    #[must_use]
    #[inline]
    pub const fn movable_only(self) -> Self {
        Self {
            movable_only: true,
            ..self
        }
    }

    /// Whether the zone can be built from this configuration.
    ///
    /// # Errors
    /// The [`ConfigError`] that says what is wrong.
    pub const fn validate(&self) -> Result<(), ConfigError> {
        let err = if self.nr_pages == 0 {
            ConfigError::NoFrames
        } else if self.nr_pages >= u32::MAX as u64 || self.nr_pages > usize::MAX as u64 {
            ConfigError::TooManyFrames(self.nr_pages)
        } else if self.start.checked_add(self.nr_pages).is_none() {
            ConfigError::SpanOverflows
        } else if self.max_order.get() > crate::types::MAX_SUPPORTED_ORDER {
            ConfigError::MaxOrderTooLarge(self.max_order)
        } else if self.pageblock_order.get() > self.max_order.get() {
            ConfigError::PageblockAboveMaxOrder {
                pageblock: self.pageblock_order,
                max: self.max_order,
            }
        } else if self.pcp_max_order.get() > PCP_MAX_ORDER.get() {
            ConfigError::PcpOrderTooLarge(self.pcp_max_order)
        } else if !self.section_pages.is_power_of_two() {
            ConfigError::SectionNotPowerOfTwo(self.section_pages)
        } else if self.cpus == 0 {
            ConfigError::NoCpus
        } else if self.pcp_batch == 0 {
            ConfigError::ZeroBatch
        } else if self.eager_pages == 0 {
            ConfigError::NoEagerPages
        } else if self.compaction_proactiveness > 100 {
            ConfigError::Proactiveness(self.compaction_proactiveness)
        } else if self.pageblock_reserve && !self.defrag_mode {
            ConfigError::ReserveWithoutDefragMode
        } else {
            return Ok(());
        };
        Err(err)
    }

    /// How far the fast path falls back to other types' pageblocks: only whole free
    /// pageblocks in defrag mode (`ALLOC_NOFRAGMENT`), else as Linux's default.
    #[inline]
    pub(crate) const fn fallback(&self) -> Fallback {
        if self.defrag_mode {
            Fallback::WholePageblocks
        } else {
            Fallback::Any
        }
    }

    /// Blocks of `order` one refill moves to a per-cpu list (Linux's `nr_pcp_alloc`):
    /// `pcp_batch` frames' worth, and at least two blocks of a high order unless the batch
    /// is one frame (a tiny zone, whose frames stay in the buddy).
    #[must_use]
    #[inline]
    pub fn pcp_blocks(&self, order: Order) -> u64 {
        if self.pcp_batch > 1 {
            (self.pcp_batch >> order.get()).max(2)
        } else {
            1
        }
    }

    /// Blocks of `order` a zeroed allocation's refill moves to a per-cpu list:
    /// [`pcp_blocks`](Self::pcp_blocks), and at least eight unless the batch is one frame;
    /// sixteen where a CPU's lists may grow to hold four such batches or more
    /// ([`pcp_high_max`](Self::pcp_high_max), else [`pcp_high`](Self::pcp_high): for 2 MiB
    /// blocks, a zone of 1 GiB or more per CPU). The known-zero block a refill finds is
    /// usually larger than the order (background zeroing returns cleared blocks to the
    /// buddy, where they merge), so one split serves the batch as a run of its pieces, and a
    /// trip to the buddy costs about the same whatever the batch: a batch of two (a 2 MiB
    /// block's) went back to the buddy every other allocation.
    #[inline]
    pub(crate) fn pcp_zeroed_blocks(&self, order: Order) -> u64 {
        const SMALL: u64 = 8;
        const LARGE: u64 = 16;
        if self.pcp_batch <= 1 {
            return 1;
        }
        let lists_hold = self.pcp_high.max(self.pcp_high_max) >> order.get();
        let zeroed = if lists_hold >= 4 * LARGE {
            LARGE
        } else {
            SMALL
        };
        self.pcp_blocks(order).max(zeroed)
    }

    /// Frames a drain past the CPU's high mark `high` returns to the buddy (Linux's
    /// `nr_pcp_free`): the frames freed to the lists since the last allocation from them
    /// (`recent_frees`), at least `pcp_batch` and at most what leaves `pcp_batch` frames on
    /// the lists.
    #[inline]
    pub(crate) fn pcp_drain_pages(&self, recent_frees: u64, high: u64) -> u64 {
        let most = high.saturating_sub(self.pcp_batch);
        recent_frees.min(most).max(self.pcp_batch)
    }

    /// A pageblock's frames less one: the low bits of a pfn that place it inside its
    /// pageblock (a validated pageblock order is below 32).
    #[inline]
    pub(crate) const fn pageblock_mask(&self) -> u32 {
        match 1u32.checked_shl(self.pageblock_order.get() as u32) {
            Some(pages) => pages - 1,
            None => u32::MAX,
        }
    }

    /// The most [`pcp_drain_pages`](Self::pcp_drain_pages) counts as recent frees:
    /// `pcp_batch << 5` frames (Linux's `CONFIG_PCP_BATCH_SCALE_MAX` of 5), and never above
    /// `2^63`, so that adding a block's frames to a count at most this cannot wrap.
    #[inline]
    pub(crate) const fn pcp_recent_frees_max(&self) -> u64 {
        let max = self.pcp_batch.saturating_mul(32);
        if max > 1 << 63 { 1 << 63 } else { max }
    }

    /// The per-cpu list that holds blocks of `order` and type `mt`, if any: orders
    /// 0..=[`pcp_max_order`](ZoneConfig::pcp_max_order) (3, PAGE_ALLOC_COSTLY_ORDER, by
    /// default) and the pageblock order, one set per type (Linux's `order_to_pindex`); not
    /// the pageblock order in a zone that keeps a
    /// [pageblock reserve](ZoneConfig::pageblock_reserve), whose free pageblocks stay in
    /// the buddy, nor in one whose [`pcp_high`](ZoneConfig::pcp_high) is below a pageblock:
    /// there every pageblock freed to the list was drained again at once, and every one
    /// taken refilled it (a refill and a drain per pageblock call, for nothing).
    #[inline]
    pub(crate) fn pcp_list(
        &self,
        order: Order,
        mt: crate::migratetype::MigrateType,
    ) -> Option<usize> {
        // `validate` keeps `pcp_max_order` below the pageblock order's slot.
        let slot = if order.get() <= self.pcp_max_order.get() {
            order.get() as usize
        } else if order == self.pageblock_order
            && !self.pageblock_reserve
            && order.pages() <= self.pcp_high
        {
            PCP_SLOTS - 1
        } else {
            return None;
        };
        Some(mt as usize * PCP_SLOTS + slot)
    }

    /// The order of the blocks per-cpu list `list` holds ([`ZoneConfig::pcp_list`]'s
    /// inverse): its slot's order, or the pageblock order for each type's last slot.
    pub(crate) fn pcp_list_order(&self, list: usize) -> Order {
        match list % PCP_SLOTS {
            slot if slot == PCP_SLOTS - 1 => self.pageblock_order,
            // Below `PCP_SLOTS`, a `u8`.
            slot => Order(slot as u8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pageblock goes to a per-cpu list only where the list's high mark can keep one: in
    /// a zone whose high mark is below a pageblock, each one freed there was drained at
    /// once and each one taken refilled the list first.
    #[test]
    fn a_pageblock_list_exists_only_where_the_high_mark_can_keep_a_pageblock() {
        use crate::migratetype::MigrateType::Unmovable;
        let small = ZoneConfig::new(Pfn(0), 32768).with_cpus(2);
        assert!(
            small.pcp_high < small.pageblock_order.pages(),
            "{}",
            small.pcp_high
        );
        assert_eq!(small.pcp_list(small.pageblock_order, Unmovable), None);
        assert!(small.pcp_list(Order(3), Unmovable).is_some());
        let keeps = small.with_pcp(4 * 512, 512);
        assert!(keeps.pcp_list(keeps.pageblock_order, Unmovable).is_some());
        assert_eq!(keeps.pcp_list(Order(4), Unmovable), None);
    }

    /// Every list a block order has names that order back, for every type.
    #[test]
    fn a_per_cpu_list_names_the_order_it_holds() {
        // A pageblock order of its own (7), so that its list cannot name a default one.
        let cfg = ZoneConfig::new(Pfn(0), 32768)
            .with_cpus(2)
            .with_max_order(Order(7))
            .with_pcp(4 * 128, 128);
        assert_eq!(cfg.pageblock_order, Order(7));
        let mut listed = 0;
        for mt in crate::migratetype::MigrateType::ALL {
            for order in 0..=cfg.max_order.get() {
                if let Some(list) = cfg.pcp_list(Order(order), mt) {
                    assert_eq!(cfg.pcp_list_order(list), Order(order), "{mt:?} {list}");
                    listed += 1;
                }
            }
        }
        // Orders 0..=3 and the pageblock order, for every type.
        assert_eq!(listed, 5 * crate::migratetype::MigrateType::ALL.len());
    }

    #[test]
    fn a_small_max_order_lowers_the_pageblock_order_with_it() {
        let cfg = ZoneConfig::new(Pfn(0), 64).with_max_order(Order(5));
        assert_eq!((cfg.max_order, cfg.pageblock_order), (Order(5), Order(5)));
        assert_eq!(cfg.validate(), Ok(()));
        let big = ZoneConfig::new(Pfn(0), 64).with_max_order(Order(12));
        assert_eq!((big.max_order, big.pageblock_order), (Order(12), Order(9)));
        // Set by hand, the error says how to fix it.
        let by_hand = ZoneConfig {
            max_order: Order(5),
            ..ZoneConfig::new(Pfn(0), 64)
        };
        let Err(e) = by_hand.validate() else {
            panic!("accepted a pageblock order above MAX_ORDER");
        };
        assert!(std::format!("{e}").contains("with_max_order"), "{e}");
    }

    #[test]
    fn batch_follows_zone_batchsize() {
        // Linux: min(pages >> 10, 256) / 4, at least 1, then rounddown_pow_of_two(b + b/2) - 1.
        assert_eq!(pcp_batch_for(16), 1);
        assert_eq!(pcp_batch_for(1 << 11), 1); // 8 MiB: 2 / 4 = 0 -> 1
        assert_eq!(pcp_batch_for(1 << 14), 3); // 64 MiB: 16 / 4 = 4 -> 6 -> 4 - 1
        assert_eq!(pcp_batch_for(1 << 16), 15); // 256 MiB: 64 / 4 = 16 -> 24 -> 16 - 1
        assert_eq!(pcp_batch_for(1 << 18), 63); // 1 GiB: 256 / 4 = 64 -> 96 -> 64 - 1
        assert_eq!(pcp_batch_for(1 << 28), LINUX_PCP_BATCH);
        assert_eq!(pcp_batch_for(u64::MAX), LINUX_PCP_BATCH);
    }

    #[test]
    fn high_is_the_low_watermark_per_cpu_at_least_four_batches() {
        assert_eq!(pcp_high_for(16, 1, 1), 4);
        // 1 GiB: min_free = sqrt(16 * 1 Mi KiB) = 4096 KiB = 1024 frames; low = 1280.
        assert_eq!(pcp_high_for(1 << 18, 1, 63), 1280);
        assert_eq!(pcp_high_for(1 << 18, 2, 63), 640);
        assert_eq!(pcp_high_for(1 << 18, 64, 63), 252);
        // 1 TiB: sqrt(16 * 2^30 KiB) = 128 MiB = 32768 frames; low = 40960.
        assert_eq!(pcp_high_for(1 << 28, 1, 63), 40_960);
        // 16 TiB: min_free_kbytes is capped at 256 MiB = 65536 frames; low = 81920.
        assert_eq!(pcp_high_for(1 << 32, 1, 63), 81_920);
        assert!(pcp_high_for(u64::MAX, 0, u64::MAX) > 0);
        assert_eq!(isqrt(99), 9);
        assert_eq!(isqrt(u64::MAX), u64::from(u32::MAX));
    }

    #[test]
    fn refills_and_drains_scale_as_linux() {
        let order = |o| Order::new(o).unwrap();
        let cfg = ZoneConfig::new(Pfn(0), 1 << 18); // batch 63, high 1280
        // nr_pcp_alloc: batch >> order blocks, at least two, one when the batch is one.
        assert_eq!(cfg.pcp_blocks(order(0)), 63);
        assert_eq!(cfg.pcp_blocks(order(3)), 7);
        assert_eq!(cfg.pcp_blocks(order(9)), 2);
        assert_eq!(ZoneConfig::new(Pfn(0), 16).pcp_blocks(order(0)), 1);
        // nr_pcp_free: the recent frees, clamped to [batch, high - batch].
        assert_eq!(cfg.pcp_drain_pages(0, 1280), 63);
        assert_eq!(cfg.pcp_drain_pages(500, 1280), 500);
        assert_eq!(cfg.pcp_drain_pages(u64::MAX, 1280), 1280 - 63);
        assert_eq!(cfg.pcp_drain_pages(u64::MAX, 2000), 2000 - 63);
        assert_eq!(cfg.pcp_recent_frees_max(), 63 << 5);
        // Capped at 2^63, so that a block's frames added to it cannot wrap.
        assert_eq!(
            cfg.with_pcp(u64::MAX, 1 << 62).pcp_recent_frees_max(),
            1 << 63
        );
        assert_eq!(
            cfg.with_pcp(u64::MAX, u64::MAX).pcp_recent_frees_max(),
            1 << 63
        );
        // The low bits that place a frame in its pageblock.
        assert_eq!(cfg.pageblock_mask(), 511);
        let one_frame_blocks = ZoneConfig {
            pageblock_order: order(0),
            ..cfg
        };
        assert_eq!(one_frame_blocks.pageblock_mask(), 0);
        // A high mark below the batch (set by hand) drains one batch.
        assert_eq!(cfg.pcp_drain_pages(1000, 10), 63);
    }

    #[test]
    fn small_zones_are_plain_buddies() {
        let cfg = ZoneConfig::new(Pfn(0), 16);
        assert_eq!((cfg.pcp_batch, cfg.pcp_high), (1, 4));
        let fixed = cfg.with_pcp(1536, LINUX_PCP_BATCH);
        assert_eq!((fixed.pcp_batch, fixed.pcp_high), (63, 1536));
        assert_eq!(ZoneConfig::new(Pfn(0), 1 << 18).with_cpus(2).pcp_high, 640);
    }

    #[test]
    fn high_marks_are_tuned_only_up_to_a_bound_above_the_fixed_one() {
        // Tuned by default, as Linux since 6.7: from high 1280 up to an eighth of the zone.
        let tuned = ZoneConfig::new(Pfn(0), 1 << 18);
        assert_eq!((tuned.pcp_high, tuned.pcp_high_max), (1280, 32768));
        assert_eq!(tuned.pcp_high_headroom(), 32768 - 1280);
        // zone_highsize with a fraction of 8: 2^18 / 8 / CPUs, at least four batches.
        assert_eq!(pcp_high_max_for(1 << 18, 1, 63), 32768);
        assert_eq!(pcp_high_max_for(1 << 18, 4, 63), 8192);
        assert_eq!(pcp_high_max_for(16, 0, 1), 4);
        assert_eq!(pcp_high_max_for(u64::MAX, 1, u64::MAX), u64::MAX);
        // More CPUs share the bound, as they share the fixed mark.
        let four = tuned.with_cpus(4);
        assert_eq!((four.pcp_high, four.pcp_high_max), (320, 8192));
        // A bound at or below the fixed mark, or fixed sizes set after it, tune nothing.
        assert_eq!(tuned.with_pcp_high_max(1000).pcp_high_headroom(), 0);
        assert_eq!(tuned.with_pcp_high_max(0).pcp_high_headroom(), 0);
        assert_eq!(tuned.with_pcp(2048, 63).pcp_high_headroom(), 0);
        // A 16-frame zone: both marks four frames, nothing to tune.
        assert_eq!(ZoneConfig::new(Pfn(0), 16).pcp_high_headroom(), 0);
    }

    #[test]
    fn a_zeroed_refill_takes_sixteen_blocks_where_the_lists_may_hold_four_such_batches() {
        let nine = Order(9);
        // 1 GiB on one CPU: the lists may grow to 128 MiB, 64 blocks of 2 MiB.
        let gib = ZoneConfig::new(Pfn(0), 1 << 18);
        assert_eq!(gib.pcp_zeroed_blocks(nine), 16);
        // On two CPUs each may hold 64 MiB: 8 blocks a batch, as a smaller zone's.
        assert_eq!(gib.with_cpus(2).pcp_zeroed_blocks(nine), 8);
        assert_eq!(ZoneConfig::new(Pfn(0), 1 << 16).pcp_zeroed_blocks(nine), 8);
        // A fixed mark: the fixed mark is what the lists may hold.
        assert_eq!(gib.with_pcp(32768, 63).pcp_zeroed_blocks(nine), 16);
        assert_eq!(gib.with_pcp(1536, 63).pcp_zeroed_blocks(nine), 8);
        // Never fewer than the plain batch; one frame at a time where the batch is one.
        assert_eq!(gib.pcp_zeroed_blocks(Order(0)), 63);
        assert_eq!(ZoneConfig::new(Pfn(0), 16).pcp_zeroed_blocks(nine), 1);
    }
}
