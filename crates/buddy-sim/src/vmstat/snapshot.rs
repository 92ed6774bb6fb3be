//! [`ZoneSnapshot`]: a zone's figures at one instant, what every file prints from.

use crate::frame_storage::FrameStorage;
use crate::migratetype::{CMA, INITIALIZED, ISOLATE, LIST_TYPES, Pageblock};
use crate::types::{FrameIdx, MAX_SUPPORTED_ORDER, NodeId, Order};
use crate::zone::Zone;
use crate::zone::config::Watermarks;
use crate::zone::counters::{FallbackCounts, OpCounters};
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

/// Which of Linux's zones a zone is, by the name its files print: a movable-only zone
/// ([`ZoneConfig::movable_only`](crate::ZoneConfig::movable_only)) is `Movable`; any other
/// is named by where it ends, as x86_64 splits memory: `DMA` up to 16 MiB, `DMA32` up to
/// 4 GiB, `Normal` above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ZoneKind {
    /// `ZONE_DMA`: the first 16 MiB (ISA DMA).
    Dma,
    /// `ZONE_DMA32`: below 4 GiB (32-bit DMA).
    Dma32,
    /// `ZONE_NORMAL`.
    Normal,
    /// `ZONE_MOVABLE`.
    Movable,
}

impl ZoneKind {
    /// Every kind, in Linux's zone order.
    pub const ALL: [Self; 4] = [Self::Dma, Self::Dma32, Self::Normal, Self::Movable];

    /// The name Linux's files print (`zone->name`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Dma => "DMA",
            Self::Dma32 => "DMA32",
            Self::Normal => "Normal",
            Self::Movable => "Movable",
        }
    }

    /// The suffix of its `pgalloc_` counter in `/proc/vmstat`.
    #[must_use]
    pub const fn counter_suffix(self) -> &'static str {
        match self {
            Self::Dma => "dma",
            Self::Dma32 => "dma32",
            Self::Normal => "normal",
            Self::Movable => "movable",
        }
    }
}

/// Linux's migratetypes as `/proc/pagetypeinfo` lists them: the three kinds, then the
/// high-atomic reserve (which this zone does not keep: always empty), CMA reservations and
/// isolated pageblocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FreeListType {
    /// `Unmovable`.
    Unmovable,
    /// `Movable`.
    Movable,
    /// `Reclaimable`.
    Reclaimable,
    /// `HighAtomic` (`MIGRATE_HIGHATOMIC`): none here.
    HighAtomic,
    /// `CMA` (`MIGRATE_CMA`).
    Cma,
    /// `Isolate` (`MIGRATE_ISOLATE`).
    Isolate,
}

impl FreeListType {
    /// Every type, in Linux's order (`MIGRATE_TYPES` of them).
    pub const ALL: [Self; 6] = [
        Self::Unmovable,
        Self::Movable,
        Self::Reclaimable,
        Self::HighAtomic,
        Self::Cma,
        Self::Isolate,
    ];

    /// Linux's name (`migratetype_names`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Unmovable => "Unmovable",
            Self::Movable => "Movable",
            Self::Reclaimable => "Reclaimable",
            Self::HighAtomic => "HighAtomic",
            Self::Cma => "CMA",
            Self::Isolate => "Isolate",
        }
    }

    /// The type of the zone's free-list index `list`.
    const fn of_list(list: u8) -> Self {
        match list {
            0 => Self::Unmovable,
            1 => Self::Movable,
            2 => Self::Reclaimable,
            CMA => Self::Cma,
            _ => Self::Isolate,
        }
    }

    /// The type of a pageblock (isolation first, as Linux's isolated pageblocks read).
    fn of_pageblock(pb: Pageblock) -> Self {
        if pb.isolated {
            Self::Isolate
        } else if pb.cma {
            Self::Cma
        } else {
            Self::of_list(pb.mt as u8)
        }
    }
}

/// Orders a snapshot holds counts for: every order a zone supports.
const ORDERS: usize = MAX_SUPPORTED_ORDER as usize + 1;

/// A zone's figures at one instant ([`Zone::snapshot`]): what `/proc/buddyinfo`,
/// `/proc/pagetypeinfo`, `/proc/zoneinfo` and `/proc/vmstat` print of it. See the module
/// docs for which are exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneSnapshot {
    /// The node the zone is on.
    pub node: NodeId,
    /// Which of Linux's zones it is.
    pub kind: ZoneKind,
    /// Its first frame (`start_pfn`).
    pub start: Pfn,
    /// Frames it spans, holes included (`spanned`).
    pub spanned: u64,
    /// Usable frames, deferred ones included (`present`; also `managed`: the zone
    /// reserves none of them).
    pub present: u64,
    /// Its largest order.
    pub max_order: Order,
    /// Its pageblock order.
    pub pageblock_order: Order,
    /// Free blocks in the buddy per order, per type, indexed as [`FreeListType::ALL`]
    /// (orders above `max_order` hold none). Per-cpu lists are not the buddy's, as in Linux.
    pub free_blocks: [[u64; 6]; ORDERS],
    /// Pageblocks of each type, indexed as [`FreeListType::ALL`]; pageblocks of frames not
    /// initialized yet (holes, deferred memory) are in none.
    pub pageblocks: [u64; 6],
    /// Free frames in the buddy outside isolated pageblocks (`nr_free_pages`).
    pub free_pages: u64,
    /// Of those, the frames in free blocks of the pageblock order or above
    /// (`nr_free_pages_blocks`).
    pub free_pages_blocks: u64,
    /// Free frames in CMA reservations (`nr_free_cma`).
    pub free_cma: u64,
    /// Frames reserved for CMA (`cma`).
    pub cma: u64,
    /// Free frames on every CPU's per-cpu lists.
    pub pcp_pages: u64,
    /// Frames not initialized yet.
    pub deferred: u64,
    /// The watermarks (`min`, `low`, `high`).
    pub watermarks: Watermarks,
    /// The watermark boost (`boost`).
    pub boost: u64,
    /// The zone's event counts (`pgalloc`, `pgfree`, compaction's).
    pub events: OpCounters,
    /// Its fallbacks to other types' pageblocks (`mm_page_alloc_extfrag` events).
    pub fallbacks: FallbackCounts,
    /// CPUs with per-cpu lists.
    pub cpus: usize,
}

impl ZoneSnapshot {
    /// Free blocks of `order` in the buddy, every type (`free_area[order].nr_free`).
    #[must_use]
    pub fn nr_free(&self, order: Order) -> u64 {
        self.free_blocks[order.get() as usize]
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Linux's promotion watermark (`promo`): the high one plus the step between low and
    /// high.
    #[must_use]
    pub const fn promo_watermark(&self) -> u64 {
        let w = self.watermarks;
        // Saturating: the fields are public, and a snapshot built by hand may hold anything.
        w.high.saturating_add(w.high.saturating_sub(w.low))
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Which of Linux's zones this zone is ([`ZoneKind`]).
    pub fn kind(&self) -> ZoneKind {
        const DMA_END: u64 = (16 << 20) >> 12;
        const DMA32_END: u64 = (4 << 30) >> 12;
        let end = self.cfg.start.0.saturating_add(self.cfg.nr_pages);
        if self.cfg.movable_only {
            ZoneKind::Movable
        } else if end <= DMA_END {
            ZoneKind::Dma
        } else if end <= DMA32_END {
            ZoneKind::Dma32
        } else {
            ZoneKind::Normal
        }
    }

    /// The zone's figures now, without stopping allocation: the buddy's under one hold of
    /// the zone lock, the rest as the [module docs](crate::vmstat) say.
    pub fn snapshot(&self) -> ZoneSnapshot {
        let m = self.map();
        let mut free_blocks = [[0u64; 6]; ORDERS];
        let (free_pages, free_pages_blocks, free_cma, cma, present, deferred, boost, fallbacks) = {
            let free = self.free.lock();
            let lists = free.lists();
            let mut isolated = 0;
            for (order, per_type) in lists.iter().enumerate() {
                for (list, l) in per_type.iter().enumerate().take(LIST_TYPES) {
                    let t = FreeListType::of_list(list as u8) as usize;
                    free_blocks[order][t] += u64::from(l.len());
                }
                isolated += u64::from(per_type[ISOLATE as usize].len()) << order;
            }
            (
                free.count().pages - isolated,
                free.free_in_pageblocks(m),
                free.cma_free(m),
                free.cma_reserved(),
                free.present() + free.deferred().pages,
                free.deferred().pages,
                free.boost(),
                free.fallback_counts(),
            )
        };
        let mut pageblocks = [0u64; 6];
        let end = FrameIdx(m.frames.len() as u32);
        for block in m.pageblocks(FrameIdx::FIRST..end) {
            let bits = m.pageblock_bits_frame(block.start).pageblock_bits();
            if bits & INITIALIZED != 0 {
                pageblocks[FreeListType::of_pageblock(Pageblock::from_bits(bits)) as usize] += 1;
            }
        }
        let pcp_pages = (0..self.cfg.cpus)
            .filter_map(|c| self.pcp_pages(c).ok())
            .sum();
        ZoneSnapshot {
            node: self.node(),
            kind: self.kind(),
            start: self.cfg.start,
            spanned: self.cfg.nr_pages,
            present,
            max_order: self.cfg.max_order,
            pageblock_order: self.cfg.pageblock_order,
            free_blocks,
            pageblocks,
            free_pages,
            free_pages_blocks,
            free_cma,
            cma,
            pcp_pages,
            deferred,
            watermarks: Watermarks::for_pages(present - deferred),
            boost,
            events: self.counters(),
            fallbacks,
            cpus: self.cfg.cpus,
        }
    }
}
