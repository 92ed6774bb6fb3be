//! The zone core: its frames, its per-cpu lists, the buddy under the zone lock, and what
//! every operation shares (the counted lock acquisitions, the frame-to-list hand-offs).
//!
//! Below it: the plain types (`types`, `migratetype`, `frame`, `error`, `memory`). Above it
//! the features (`mobility`, `zeroed`, `deferred`, `vmalloc`, `exact`) reach the zone's
//! locked state only through the methods of these modules. The lowest of them first:
//! `config` (geometry), `map` (frame arithmetic and lookups), `list` (the intrusive free
//! lists), `counters`, `ranges` (the memory map's added and deferred ranges), `buddy` (the
//! zone lock's `FreeArea`: lists, counts, ranges, the compaction cursor), `pageblock` (types
//! of pageblocks, fallback claiming), `pcp` (per-cpu lists); this module (the `Zone`); then
//! `cpu` (the per-CPU handle), `alloc` and `refs` (the allocation and free paths), `contig`
//! (`free_contig_range`), `stats` and `check`.

pub(crate) mod alloc;
pub(crate) mod buddy;
pub(crate) mod check;
pub(crate) mod config;
pub(crate) mod contig;
pub(crate) mod counters;
pub(crate) mod cpu;
pub(crate) mod direct_reclaim;
pub(crate) mod frozen;
pub(crate) mod list;
pub(crate) mod map;
pub(crate) mod pageblock;
pub(crate) mod pcp;
pub(crate) mod pcp_high;
pub(crate) mod pcp_list;
pub(crate) mod per_cpu_set;
pub(crate) mod ranges;
pub(crate) mod refs;
pub(crate) mod stats;

use crate::frame_storage::FrameStorage;
use crate::zone::per_cpu_set::PerCpuSet;
use core::fmt;
use core::ops::{Deref, DerefMut, Range};

use crate::decompose::decompose;
use crate::error::config::ConfigError;
use crate::error::map::MapError;
use crate::error::{NoSuchCpu, TooLarge};
use crate::events::{CpuNumber, PageFree, PcpDrain, ZoneEvents};
use crate::fail_page_alloc::FaultInjection;
use crate::frame::{Frame, FrameInfo, FrameState, Word};
use crate::free_init::FreeTimeInit;
use crate::memory::FRAME;
use crate::migratetype::{CMA, MigrateType};
use crate::owner_record::PageOwnerState;
use crate::sync::DefaultRawMutex;
use crate::sync::{AtomicU64, Guard, Mutex, Ordering, OwnLines};
use crate::types::NodeId;
use crate::types::{FrameIdx, MAX_SUPPORTED_ORDER, Order};
use crate::zone::buddy::FreeArea;
use crate::zone::config::ZoneConfig;
use crate::zone::counters::LockStats;
use crate::zone::counters::OpCounters;
use crate::zone::list::{FreeCount, List};
use crate::zone::map::{FrameMap, Frames};
use crate::zone::pcp::CpuLists;
use crate::zone::pcp::{PcpLists, PerCpu};
use lock_api::RawMutex;
use mm_types::Pfn;
use mm_types::{FrameRange, PhysAddr};

/// Where a free block sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FreeWhere {
    /// On the buddy free list of its order.
    Buddy,
    /// On a per-cpu list.
    Pcp,
}

/// A buddy allocator over the 4 KiB frames `[start, start + nr_pages)` (frame `n` is the
/// physical memory at `n * 4 KiB`; an order-`k` block is `2^k` of them) that every CPU shares
/// through `&self` (it is `Sync`), with its metadata in caller-provided storage: `F` holds
/// one [`Frame`] per frame, `P` one [`PerCpu`] per CPU (slices, arrays, `static`s or, with
/// `alloc`, vectors); `R` is the raw lock of the zone and of each per-cpu list set
/// (`spin`'s by default; a kernel plugs in its own IRQ-safe one).
///
/// Each operation names the CPU it runs on. The CPU's per-cpu lists are under its own lock,
/// which in the common case only that CPU takes; the buddy's free areas are under the zone
/// lock, taken inside a per-cpu lock to refill or drain a list in batches, or alone for
/// orders without a per-cpu list. Two threads may pass the same CPU number (the lock keeps
/// that correct); they then share one set of lists.
pub struct Zone<F, P, R = DefaultRawMutex> {
    pub(crate) cfg: ZoneConfig,
    pub(crate) frames: F,
    pub(crate) pcps: P,
    /// The zone lock and what it protects, on lines of their own: the configuration and
    /// the frame and list references, read on every call without the lock, never share a
    /// line with it (a shared line costs two CPUs freeing at once half their throughput).
    pub(crate) free: OwnLines<Mutex<R, FreeArea>>,
    /// Free-time checks of pages that were leaked, which take no lock to count under.
    pub(crate) leaked_prepares: AtomicU64,
    /// Fault injection ([`Zone::set_fail_page_alloc`]).
    pub(crate) fault: FaultInjection<R>,
    /// page_owner's table and counter ([`Zone::enable_page_owner`]).
    pub(crate) owners: PageOwnerState,
    /// `init_on_free` and page poisoning ([`Zone::set_init_on_free`],
    /// [`Zone::set_page_poison`]).
    pub(crate) free_init: FreeTimeInit<R>,
    /// Which debugging features are on (`crate::debugging`): what every allocation and
    /// free reads. `core`'s atomic even under loom: a switch flipped before the CPUs use
    /// the feature, not a protocol the models check, and a loom access on every
    /// allocation and free would multiply every model's interleavings.
    pub(crate) debug: core::sync::atomic::AtomicU32,
    /// Why a [`Zone::new_static`] zone has no usable frames: its configuration, refused
    /// (every `add_memory` returns it).
    pub(crate) refused: Option<ConfigError>,
    /// The configuration's [`ZoneConfig::pcp_recent_frees_max`], worked out once: every
    /// free to a per-cpu list caps its count of recent frees with it.
    pub(crate) recent_frees_max: u64,
    /// A pageblock's frames less one (the low bits of a pfn that place it inside its
    /// pageblock), worked out once: every free reads its pageblock's type.
    pub(crate) pageblock_mask: u32,
}

/// What [`Zone::add_memory_bytes`] made of a byte range: the whole frames inside it, and the
/// bytes left out at each end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddedMemory {
    /// The frames added.
    pub frames: FrameRange,
    /// Bytes before the first whole frame, not added.
    pub dropped_head: u64,
    /// Bytes after the last whole frame, not added.
    pub dropped_tail: u64,
}

impl AddedMemory {
    /// The whole frames inside `range` (none if it holds none, or is empty).
    pub(crate) fn inside(range: Range<PhysAddr>) -> Self {
        let len = range.end.0.saturating_sub(range.start.0);
        let first = range.start.align_up(FRAME).filter(|s| s.0 <= range.end.0);
        let Some(first) = first else {
            return Self {
                frames: FrameRange::new(Pfn(range.start.0 >> FRAME.shift()), 0),
                dropped_head: len,
                dropped_tail: 0,
            };
        };
        let end = range.end.align_down(FRAME).0.max(first.0);
        let frames = FrameRange::new(
            Pfn::containing(first, FRAME),
            (end - first.0) >> FRAME.shift(),
        );
        Self {
            frames,
            dropped_head: first.0 - range.start.0,
            dropped_tail: range.end.0 - end,
        }
    }
}

/// `CPUS` empty per-CPU list sets, numbered.
#[cfg(not(loom))]
const fn numbered_cpus<R: RawMutex, const CPUS: usize>() -> [PerCpu<R>; CPUS] {
    let mut cpus = [const { PerCpu::new() }; CPUS];
    let mut i = 0;
    while i < CPUS {
        cpus[i].cpu = crate::sync::AtomicU32::new(i as u32);
        i += 1;
    }
    cpus
}

/// A zone whose metadata lives inside it, in arrays: `FRAMES` frames and `CPUS` CPUs, so a
/// `static` holds the whole zone ([`Zone::new_static`]).
pub type StaticZone<const FRAMES: usize, const CPUS: usize, R = DefaultRawMutex> =
    Zone<[Frame; FRAMES], [PerCpu<R>; CPUS], R>;

#[cfg(not(loom))]
impl<const FRAMES: usize, const CPUS: usize, R: RawMutex>
    Zone<[Frame; FRAMES], [PerCpu<R>; CPUS], R>
{
    /// `FRAMES` frames from `start` for `CPUS` CPUs, all of them usable and free, in the
    /// default geometry: [`Zone::new_static`] of
    /// `ZoneConfig::new(start, FRAMES).with_cpus(CPUS)`, the one value a static zone needs.
    ///
    /// ```
    /// use buddy_sim::{AllocRequest, Pfn, StaticZone};
    /// static ZONE: StaticZone<1024, 1> = StaticZone::new_static_at(Pfn(0x1000));
    ///
    /// let page = ZONE.cpu(0)?.alloc(AllocRequest::page())?;
    /// # drop(page);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    #[must_use]
    pub const fn new_static_at(start: Pfn) -> Self {
        Self::new_static(ZoneConfig::new(start, FRAMES as u64).with_cpus(CPUS))
    }

    /// A zone over `cfg`'s frames, all of them usable and free, built at compile time so
    /// that a `static` holds it without `Once` or an allocator:
    ///
    /// ```
    /// use buddy_sim::{AllocRequest, Pfn, StaticZone, ZoneConfig};
    /// // 1024 frames from physical 16 MiB, one CPU: the whole zone in one static.
    /// static ZONE: StaticZone<1024, 1> = StaticZone::new_static(ZoneConfig::new(Pfn(0x1000), 1024));
    ///
    /// let page = ZONE.cpu(0)?.alloc(AllocRequest::page())?;
    /// # drop(page);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// The frames start deferred ([`Zone::init_deferred`]): the first allocation
    /// initializes a chunk of them, or an idle CPU initializes them all. `cfg.nr_pages` must
    /// be `FRAMES` and `cfg.cpus` `CPUS` (as [`ZoneConfig::new`] and
    /// [`ZoneConfig::with_cpus`] set them). A configuration the zone cannot use is not a
    /// panic: the zone then spans no frames, and allocations and `add_memory` return its
    /// [`ConfigError`] (the checks of [`Zone::new`], made when the zone is first used).
    #[must_use]
    pub const fn new_static(cfg: ZoneConfig) -> Self {
        Self::new_static_as(cfg, true)
    }

    /// A zone spanning `cfg`'s frames with none of them usable yet, built at compile time:
    /// [`Zone::new_static`] for a firmware memory map, whose usable ranges
    /// [`Zone::add_memory`] adds.
    ///
    /// ```
    /// use buddy_sim::{AllocRequest, Pfn, StaticZone, ZoneConfig};
    /// static ZONE: StaticZone<1024, 1> =
    ///     StaticZone::new_static_empty(ZoneConfig::new(Pfn(0x1000), 1024));
    ///
    /// ZONE.add_memory(Pfn(0x1000), 512)?; // what the memory map says is usable
    /// let page = ZONE.cpu(0)?.alloc(AllocRequest::page())?;
    /// # drop(page);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// A configuration the zone cannot use is refused as [`Zone::new_static`] refuses it.
    #[must_use]
    pub const fn new_static_empty(cfg: ZoneConfig) -> Self {
        Self::new_static_as(cfg, false)
    }

    /// [`Zone::new_static`] (`usable`: every frame added, deferred) or
    /// [`Zone::new_static_empty`].
    const fn new_static_as(cfg: ZoneConfig, usable: bool) -> Self {
        let refused = match cfg.validate() {
            Err(e) => Some(e),
            Ok(()) if cfg.nr_pages != FRAMES as u64 => Some(ConfigError::FrameMetadata {
                need: cfg.nr_pages as usize,
                got: FRAMES,
            }),
            Ok(()) if cfg.cpus != CPUS => Some(ConfigError::CpuMetadata {
                need: cfg.cpus,
                got: CPUS,
            }),
            Ok(()) => None,
        };
        let cfg = match refused {
            // Spanning nothing, the zone reaches none of its arrays' frames, and its per-cpu
            // orders stay inside the lists' slots.
            Some(_) => ZoneConfig {
                nr_pages: 0,
                cpus: CPUS,
                pcp_max_order: crate::zone::config::PAGE_ALLOC_COSTLY_ORDER,
                ..cfg
            },
            None => cfg,
        };
        let free = match refused {
            None if usable => {
                // Validated: the frames fit 32-bit indices.
                let n = cfg.nr_pages as u32;
                FreeArea::all_deferred(n)
            }
            _ => FreeArea::EMPTY,
        };
        Self {
            cfg,
            frames: [const { Frame::new() }; FRAMES],
            pcps: numbered_cpus(),
            free: OwnLines(Mutex::new(free)),
            leaked_prepares: AtomicU64::new(0),
            fault: FaultInjection::new(),
            owners: PageOwnerState::new(),
            free_init: FreeTimeInit::new(),
            debug: core::sync::atomic::AtomicU32::new(0),
            refused,
            recent_frees_max: cfg.pcp_recent_frees_max(),
            pageblock_mask: cfg.pageblock_mask(),
        }
    }
}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// A zone whose frames are all usable and free, as the fewest aligned blocks (past
    /// [`ZoneConfig::eager_pages`] frames, deferred: see [`Zone::add_memory`]).
    ///
    /// # Errors
    /// As [`Zone::new_empty`].
    pub fn new(cfg: ZoneConfig, frames: F, pcps: P) -> Result<Self, MapError> {
        let zone = Self::new_empty(cfg, frames, pcps)?;
        zone.add_memory(cfg.start, cfg.nr_pages)?;
        zone.reset_counters();
        Ok(zone)
    }

    /// A zone spanning `cfg`'s frames with none of them usable yet: every frame is
    /// [`FrameState::Reserved`] until [`Zone::add_memory`] adds the ranges a firmware memory
    /// map calls usable. Whatever `frames` and `pcps` held is overwritten.
    ///
    /// # Errors
    /// The [`ConfigError`] of an unusable configuration ([`ZoneConfig::validate`]),
    /// [`ConfigError::FrameMetadata`] if `frames` does not hold `nr_pages` entries,
    /// [`ConfigError::CpuMetadata`] if `pcps` does not hold `cpus` entries.
    pub fn new_empty(cfg: ZoneConfig, frames: F, pcps: P) -> Result<Self, ConfigError> {
        let zone = Self::with_metadata(cfg, frames, pcps)?;
        zone.spanned_frames().iter().for_each(Frame::reset);
        Ok(zone)
    }

    /// [`Zone::new_empty`] over frame metadata that is all zero already (fresh from a
    /// zeroing allocator, a `.bss` array, memory the firmware cleared): it is not written,
    /// so a zone of any size starts in time independent of its size (with
    /// [`Zone::add_memory`]'s deferral, a terabyte zone is ready in milliseconds).
    ///
    /// # Errors
    /// As [`Zone::new_empty`].
    ///
    /// # Safety
    /// Every byte of `frames` is zero. (Other contents would give the zone blocks and links
    /// nobody made: it could hand out, and with a [`FrameClearer`](crate::FrameClearer)
    /// write, memory that is in use.)
    #[allow(unsafe_code)]
    pub unsafe fn new_empty_zeroed(
        cfg: ZoneConfig,
        frames: F,
        pcps: P,
    ) -> Result<Self, ConfigError> {
        Self::with_metadata(cfg, frames, pcps)
    }

    /// The zone over `frames` and `pcps` after checking their sizes; the per-cpu lists are
    /// emptied, the frames left as they are.
    fn with_metadata(cfg: ZoneConfig, frames: F, pcps: P) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let n = cfg.nr_pages as usize;
        let (got_frames, got_cpus) = (frames.frames().len(), pcps.slots().len());
        if got_frames != n {
            return Err(ConfigError::FrameMetadata {
                need: n,
                got: got_frames,
            });
        }
        if got_cpus != cfg.cpus {
            return Err(ConfigError::CpuMetadata {
                need: cfg.cpus,
                got: got_cpus,
            });
        }
        // At most `MAX_CPUS`-ish in practice; numbered modulo 2^32 past that.
        for (cpu, pcp) in pcps.slots().iter().enumerate() {
            pcp.reset(cpu as u32);
        }
        Ok(Self {
            cfg,
            frames,
            pcps,
            free: OwnLines(Mutex::new(FreeArea::EMPTY)),
            leaked_prepares: AtomicU64::new(0),
            fault: FaultInjection::new(),
            owners: PageOwnerState::new(),
            free_init: FreeTimeInit::new(),
            debug: core::sync::atomic::AtomicU32::new(0),
            refused: None,
            recent_frees_max: cfg.pcp_recent_frees_max(),
            pageblock_mask: cfg.pageblock_mask(),
        })
    }

    /// Makes the reserved frames `[pfn, pfn + nr)` usable and frees them into the buddy,
    /// merging with usable neighbours (never across a hole, since reserved frames are never
    /// free). For each usable range of a firmware memory map, at boot or later (memory
    /// hot-add) while other CPUs allocate. Of a range longer than
    /// [`ZoneConfig::eager_pages`], only that many frames are initialized here; the rest is
    /// deferred (reserved until [`Zone::init_deferred`] or the allocation slow path
    /// initializes it, counted in [`Zone::present_pages`] and [`Zone::deferred_pages`]).
    /// Holds the zone lock for O(min(`nr`, `eager_pages`)), plus a check of every frame of
    /// the range once more than [`MAX_ADDED_RANGES`](crate::MAX_ADDED_RANGES) disjoint ranges
    /// were added.
    ///
    /// # Errors
    /// [`MapError::OutOfZone`] or [`MapError::Overflow`] if the range leaves the zone,
    /// [`MapError::AlreadyAdded`] if any frame of it is usable already; nothing changes.
    pub fn add_memory(&self, pfn: Pfn, nr: u64) -> Result<(), MapError> {
        self.add_memory_as(pfn, nr, false)
    }

    /// [`Zone::add_memory`] of a firmware memory map's usable range as it gives it, in
    /// bytes: the whole 4 KiB frames inside `[range.start, range.end)` (its ends aligned
    /// inward). Returns what was added and the bytes dropped at each end; a range holding no
    /// whole frame adds nothing.
    ///
    /// # Errors
    /// As [`Zone::add_memory`]; nothing changes.
    pub fn add_memory_bytes(&self, range: Range<PhysAddr>) -> Result<AddedMemory, MapError> {
        let added = AddedMemory::inside(range);
        if added.frames.pages > 0 {
            self.add_memory(added.frames.start, added.frames.pages)?;
        }
        Ok(added)
    }

    /// As [`Zone::add_memory`], for memory the embedder knows reads zero in every byte
    /// (cleared at boot, fresh from a hypervisor that zeroes what it gives a guest): its
    /// blocks are known zero, so zeroed allocations take them without clearing.
    ///
    /// # Errors
    /// As [`Zone::add_memory`]; nothing changes.
    pub fn add_zeroed_memory(&self, pfn: Pfn, nr: u64) -> Result<(), MapError> {
        self.add_memory_as(pfn, nr, true)
    }

    pub(crate) fn add_memory_as(&self, pfn: Pfn, nr: u64, zeroed: bool) -> Result<(), MapError> {
        if let Some(e) = self.refused {
            return Err(e.into());
        }
        let m = self.map();
        let pages = m.range(pfn, nr)?;
        let mut free = self.lock_zone();
        Self::check_addable(m, &free, &pages)?;
        // Nothing is known zero while page poisoning is on: every free block reads poison.
        let zeroed = zeroed && !self.poisoning();
        let recorded = free.record_added(pages.clone());
        // What allocation needs first now; the rest later, if the range is recorded and the
        // deferred list has room.
        let eager_end = pages.start + (nr.min(self.cfg.eager_pages) as u32);
        let eager = if recorded && free.defer(eager_end..pages.end, zeroed) {
            pages.start..eager_end
        } else {
            pages.clone()
        };
        free.init_pageblocks(m, eager.clone());
        // The range lies inside the zone, so pfn + nr cannot overflow.
        let blocks = decompose(
            m.pfn(eager.start),
            u64::from(eager.end - eager.start),
            self.cfg.max_order,
        );
        m.init_tails(blocks.clone().into_iter().flatten());
        for (head, order) in blocks.into_iter().flatten() {
            if self.poisoning() {
                self.poison_added(head, order);
            }
            free.free_one_page(m, m.index_of(head), order, zeroed);
        }
        free.add_present(u64::from(eager.end - eager.start));
        Ok(())
    }

    /// [`Zone::add_memory`]'s checks of `[pfn, pfn + nr)` without adding it: what a node
    /// set checks of every piece of a range before it adds any.
    pub(crate) fn addable(&self, pfn: Pfn, nr: u64) -> Result<(), MapError> {
        if let Some(e) = self.refused {
            return Err(e.into());
        }
        let m = self.map();
        let pages = m.range(pfn, nr)?;
        Self::check_addable(m, &self.lock_zone(), &pages)
    }

    /// [`MapError::AlreadyAdded`] for the first usable frame of `pages`.
    fn check_addable(
        m: FrameMap<'_>,
        free: &FreeArea,
        pages: &Range<FrameIdx>,
    ) -> Result<(), MapError> {
        let overlap = match free.added_overlap(pages) {
            Ok(first) => first,
            // Past what the table holds: the frames say (a range it does not hold was
            // initialized when it was added).
            Err(()) => FrameIdx::each(pages.clone())
                .find(|&i| m.frame(i).load().state() != FrameState::Reserved),
        };
        match overlap {
            Some(i) => Err(MapError::AlreadyAdded(m.pfn(i))),
            None => Ok(()),
        }
    }

    /// The configuration.
    pub const fn config(&self) -> &ZoneConfig {
        &self.cfg
    }

    /// The frames the zone spans, holes included.
    pub const fn span(&self) -> FrameRange {
        FrameRange::new(self.cfg.start, self.cfg.nr_pages)
    }

    /// The NUMA node the zone's memory is on ([`ZoneConfig::node`]).
    pub const fn node(&self) -> NodeId {
        self.cfg.node
    }

    /// Work done so far, summed over the zone lock and every per-cpu lock. Reads each lock's
    /// counts under that lock (these acquisitions are not counted).
    pub fn counters(&self) -> OpCounters {
        let zone = *self.free.lock().stats();
        let mut c = OpCounters {
            zone_locks: zone.acquisitions,
            pcp_locks: 0,
            list_ops: zone.list_ops,
            prepares: zone.prepares + self.leaked_prepares.load(Ordering::Relaxed),
            zeroed_hits: zone.zeroed_hits,
            cleared_on_alloc: zone.cleared_on_alloc,
            cleared_in_background: zone.cleared_in_background,
            pgalloc: zone.pgalloc,
            pgfree: zone.pgfree,
            compact_stall: zone.compact_stall,
            compact_fail: zone.compact_fail,
            compact_success: zone.compact_success,
            thp_fault_alloc: zone.thp_fault_alloc,
            thp_fault_fallback: zone.thp_fault_fallback,
        };
        for pcp in self.pcps.slots() {
            let lists = pcp.lists.lock();
            let s = lists.stats;
            let work = lists.work(&self.cfg);
            c.pgalloc += s.pcp_pgalloc(work.pgfree, lists.count.pages);
            c.pcp_locks += s.acquisitions;
            c.list_ops += work.list_ops;
            c.prepares += work.prepares;
            c.zeroed_hits += s.zeroed_hits;
            c.cleared_on_alloc += s.cleared_on_alloc;
            c.pgfree += work.pgfree;
            c.thp_fault_alloc += s.thp_fault_alloc;
            c.thp_fault_fallback += s.thp_fault_fallback;
        }
        c
    }

    /// Resets the work counters.
    pub fn reset_counters(&self) {
        {
            let mut free = self.free.lock();
            *free.stats() = LockStats::ZERO;
            free.reset_fallback_counts();
        }
        for pcp in self.pcps.slots() {
            pcp.lists.lock().restart_counts();
        }
        self.leaked_prepares.store(0, Ordering::Relaxed);
    }

    /// A frame's metadata, read at one instant.
    ///
    /// # Errors
    /// [`MapError::OutOfZone`].
    pub fn frame(&self, pfn: Pfn) -> Result<FrameInfo, MapError> {
        let m = self.map();
        Ok(m.frame(m.index(pfn)?).info())
    }

    /// Every frame's metadata, in frame order.
    pub fn frames_slice(&self) -> &[Frame] {
        self.spanned_frames()
    }

    /// Frames free in the buddy (not counting per-cpu lists).
    pub fn buddy_pages(&self) -> u64 {
        self.free.lock().count().pages
    }

    /// Usable frames: the ranges added, holes excluded, deferred frames included
    /// ([`Zone::deferred_pages`]).
    pub fn present_pages(&self) -> u64 {
        let free = self.free.lock();
        free.present() + free.deferred().pages
    }

    /// Free frames known zero, in the buddy and on every CPU's lists: the zeroed pool.
    pub fn zeroed_pages(&self) -> u64 {
        let pcp = self.sum_over_pcp_lists(|c| c.zeroed);
        self.free.lock().count().zeroed + pcp
    }

    /// `field` of every CPU's list counts, summed, each read under its list's lock.
    fn sum_over_pcp_lists(&self, field: impl Fn(&FreeCount) -> u64) -> u64 {
        self.pcps
            .slots()
            .iter()
            .map(|p| field(&p.lists.lock().count))
            .sum()
    }

    /// Every free frame the zone can hand out: the buddy's, every CPU's per-cpu lists' and
    /// the deferred frames not yet initialized ([`Zone::deferred_pages`]), which an
    /// allocation initializes on demand. Blocks that background zeroing is clearing, and
    /// deferred chunks `init_deferred` is initializing, at that moment are not counted.
    /// Each list is read under its own lock, one after another: with other CPUs allocating
    /// meanwhile, the sum is a moment's estimate, as Linux's `NR_FREE_PAGES` is. (With
    /// [`LocalCpu`](crate::LocalCpu) handles, only while no other CPU is inside the zone.)
    pub fn free_pages_total(&self) -> u64 {
        let pcp = self.sum_over_pcp_lists(|c| c.pages);
        let free = self.free.lock();
        free.count().pages + free.deferred().pages + pcp
    }

    /// Frames on `cpu`'s per-cpu lists.
    ///
    /// # Errors
    /// [`NoSuchCpu`].
    pub fn pcp_pages(&self, cpu: usize) -> Result<u64, NoSuchCpu> {
        Ok(self.cpu(cpu)?.pcp_pages())
    }

    /// Whether the free block at `pfn` is on `cpu`'s per-cpu lists (for the zero model).
    #[cfg(all(feature = "testing", feature = "alloc", feature = "spin"))]
    pub(crate) fn on_pcp_list(&self, cpu: usize, pfn: Pfn) -> bool {
        let m = self.map();
        let (Ok(pcp), Ok(idx)) = (self.pcp(cpu), m.index(pfn)) else {
            return false;
        };
        let lists = pcp.pcp.lists.lock();
        lists.lists.all_blocks(m.frames).any(|i| i == idx)
    }

    /// Free blocks per order in the buddy: `result[o]` blocks of order `o`.
    pub fn buddy_blocks_per_order(&self) -> [u32; MAX_SUPPORTED_ORDER as usize + 1] {
        self.free
            .lock()
            .lists()
            .map(|l| l.iter().map(List::len).sum())
    }

    /// Free blocks per order in the buddy on `mt`'s lists (isolated pageblocks' and CMA
    /// reservations' blocks are on none of them).
    pub fn buddy_blocks_of_type(&self, mt: MigrateType) -> [u32; MAX_SUPPORTED_ORDER as usize + 1] {
        self.free.lock().lists().map(|l| l[mt as usize].len())
    }

    /// The type of the pageblock holding `pfn`, and whether it is isolated (a CMA
    /// reservation's pageblocks are movable: [`Zone::stats`] counts them).
    ///
    /// # Errors
    /// [`MapError::OutOfZone`].
    pub fn pageblock_type(&self, pfn: Pfn) -> Result<(MigrateType, bool), MapError> {
        let m = self.map();
        let pb = m.pageblock(m.index(pfn)?);
        Ok((pb.mt, pb.isolated))
    }

    /// Every free block, ascending: `(first frame, order, where)` (whether a block is known
    /// zero: [`Zone::frame`]'s [`FrameInfo::zeroed`]). Walks the zone without
    /// locks: exact only while no other CPU is allocating or freeing. O(frames).
    pub fn free_blocks(&self) -> impl Iterator<Item = (Pfn, Order, FreeWhere)> + '_ {
        let m = self.map();
        self.blocks().filter_map(move |(idx, w)| {
            let place = match w.state() {
                FrameState::Buddy => FreeWhere::Buddy,
                FrameState::Pcp => FreeWhere::Pcp,
                _ => return None,
            };
            Some((m.pfn(idx), Order(w.order()), place))
        })
    }

    /// Frames leaked after failed free-time checks.
    pub fn leaked_pages(&self) -> u64 {
        self.blocks()
            .filter(|(_, w)| w.state() == FrameState::Leaked)
            .count() as u64
    }

    /// The block heads in ascending order: `(index, word)`.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = (FrameIdx, Word)> + '_ {
        let frames = self.spanned_frames();
        let mut idx = 0usize;
        core::iter::from_fn(move || {
            let w = frames.get(idx)?.load();
            // A frame of the zone: its index fits a u32.
            let here = FrameIdx(idx as u32);
            idx = idx.saturating_add(1 << w.order().min(MAX_SUPPORTED_ORDER));
            Some((here, w))
        })
    }

    // ---- shared by the operations -------------------------------------------------------

    /// The metadata of the frames the zone spans (all of it, but for a
    /// [`Zone::new_static`] zone whose configuration was refused: none).
    pub(crate) fn spanned_frames(&self) -> &[Frame] {
        let frames = self.map().frames;
        frames.slice(0..frames.len().min(self.cfg.nr_pages as usize))
    }

    #[allow(unsafe_code)]
    pub(crate) fn map(&self) -> FrameMap<'_> {
        FrameMap {
            cfg: &self.cfg,
            pageblock_mask: self.pageblock_mask,
            // SAFETY: `FrameStorage`'s contract: the storage's frames, valid for shared
            // access while `self.frames` is borrowed, which it is as long as `self`.
            frames: unsafe { Frames::from_slice_ptr(self.frames.frames().as_ptr()) },
        }
    }

    /// CPU `cpu`'s lists, reached under their lock.
    pub(crate) fn pcp(&self, cpu: usize) -> Result<CpuLists<'_, R>, NoSuchCpu> {
        let pcp = self.pcps.slots().get(cpu).ok_or(NoSuchCpu(cpu))?;
        Ok(CpuLists { pcp, local: false })
    }

    pub(crate) fn check_order(&self, order: Order) -> Result<(), TooLarge> {
        if order <= self.cfg.max_order {
            Ok(())
        } else {
            Err(TooLarge {
                order: order.get(),
                max: self.cfg.max_order.get(),
            })
        }
    }

    /// Takes the zone lock, counting the acquisition; a lock found held is reported to the
    /// event hook with the wait.
    #[inline]
    pub(crate) fn lock_zone(&self) -> ZoneGuard<'_, R, P::Events> {
        // Under loom, the plain lock: a first `try_lock` would double the interleavings of
        // every model for a report the models do not check.
        #[cfg(loom)]
        let mut free = self.free.lock();
        #[cfg(not(loom))]
        let mut free = match self.free.try_lock() {
            Some(free) => free,
            None => self.lock_zone_contended(),
        };
        free.stats().acquisitions += 1;
        ZoneGuard {
            free,
            events: self.events(),
        }
    }

    /// [`Zone::lock_zone`] when another CPU holds the lock: waits, and reports the wait.
    #[cfg(not(loom))]
    #[cold]
    #[inline(never)]
    fn lock_zone_contended(&self) -> Guard<'_, R, FreeArea> {
        let start = self.events().now();
        let free = self.free.lock();
        let wait = self.events().now().wrapping_sub(start);
        self.events()
            .zone_lock_contended(&crate::events::LockContended { wait });
        free
    }

    /// The event hook.
    #[inline(always)]
    pub(crate) fn events(&self) -> &P::Events {
        self.pcps.events()
    }

    /// The number of the CPU whose lists `pcp` are.
    #[inline(always)]
    pub(crate) fn cpu_number<'a>(&self, pcp: CpuLists<'a, R>) -> CpuNumber<'a> {
        CpuNumber(&pcp.pcp.cpu)
    }

    /// Takes `pcp`'s lock (or, for a [`LocalCpu`](crate::LocalCpu) handle's call, reaches
    /// the lists without it), counting the acquisition.
    #[inline]
    pub(crate) fn lock_pcp<'a>(
        &self,
        pcp: CpuLists<'a, R>,
    ) -> impl DerefMut<Target = PcpLists> + 'a {
        let mut lists = Self::reach_pcp(pcp);
        if !pcp.local {
            // A CPU-local call reaches the lists without their lock: nothing to count.
            lists.stats.acquisitions += 1;
        }
        lists
    }

    /// [`Zone::lock_pcp`] without counting the acquisition (for reading a count).
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn reach_pcp(pcp: CpuLists<'_, R>) -> impl DerefMut<Target = PcpLists> + '_ {
        if pcp.local {
            // SAFETY: only a `LocalCpu` handle's calls reach lists with `local` set, and
            // `Zone::local_cpu`'s contract is that while it lives its thread runs on the CPU
            // with interrupts off and no other context reaches these lists.
            unsafe { pcp.pcp.lists.lock_exclusive() }
        } else {
            pcp.pcp.lists.lock()
        }
    }

    /// Frees a block the caller owns (its head `Freeing` or just taken, its other frames
    /// tails): to `cpu`'s list for per-cpu orders (draining a batch past `high`), else to the
    /// buddy under the zone lock. `prepares` free-time checks are counted under that lock.
    #[inline(always)]
    pub(crate) fn free_block(
        &self,
        pcp: CpuLists<'_, R>,
        idx: FrameIdx,
        order: Order,
        prepares: u64,
    ) {
        self.free_block_in(self.map(), pcp, (idx, order), prepares);
    }

    /// [`Zone::free_block`] with the zone's frame map `m` the caller has read already (so
    /// that it is not read again after the caller's compare-and-swap).
    #[inline(always)]
    pub(crate) fn free_block_in(
        &self,
        m: FrameMap<'_>,
        pcp: CpuLists<'_, R>,
        (idx, order): (FrameIdx, Order),
        prepares: u64,
    ) {
        // The list of the pageblock's type now (a CMA reservation's blocks the movable
        // list, as Linux's `free_frozen_pages`: only movable allocations take from it); an
        // isolated pageblock's blocks go straight to the buddy (its isolated lists).
        let list = match m.free_list_of(idx) {
            CMA => Some(MigrateType::Movable),
            list => MigrateType::from_index(list),
        }
        .and_then(|mt| self.cfg.pcp_list(order, mt));
        let Some(list) = list else {
            self.events().page_free(&PageFree {
                pfn: m.pfn(idx),
                order,
                cpu: self.cpu_number(pcp),
                percpu: false,
            });
            let zeroed = self.debugging() && self.free_debugged(idx, order);
            let mut free = self.lock_zone();
            free.stats().prepares += prepares;
            free.stats().pgfree += order.pages();
            free.free_one_page(m, idx, order, zeroed);
            return;
        };
        self.free_to_pcp_list(m, pcp, (idx, order), list, prepares);
    }

    /// [`Zone::free_block`] of a block whose per-cpu list is `list` (its order and its
    /// pageblock's type, not isolated), draining a batch past `high`.
    #[inline(always)]
    pub(crate) fn free_to_pcp_list(
        &self,
        m: FrameMap<'_>,
        pcp: CpuLists<'_, R>,
        (idx, order): (FrameIdx, Order),
        list: usize,
        prepares: u64,
    ) {
        self.events().page_free(&PageFree {
            pfn: m.pfn(idx),
            order,
            cpu: self.cpu_number(pcp),
            percpu: true,
        });
        // While the zone debugs, the free-time checks and clears come first (a block
        // cleared by `init_on_free` goes on the list known zero), in a branch with its own
        // push, so that the values the common push needs never live across their call.
        if self.debugging() {
            let zeroed = self.free_debugged(idx, order);
            self.push_to_pcp_list(m, pcp, (idx, order), (list, zeroed), prepares);
        } else {
            self.push_to_pcp_list(m, pcp, (idx, order), (list, false), prepares);
        }
    }

    /// The push of [`Zone::free_to_pcp_list`], its block known zero if `zeroed`.
    #[inline(always)]
    fn push_to_pcp_list(
        &self,
        m: FrameMap<'_>,
        pcp: CpuLists<'_, R>,
        (idx, order): (FrameIdx, Order),
        (list, zeroed): (usize, bool),
        prepares: u64,
    ) {
        let mut lists = self.lock_pcp(pcp);
        self.count_pcp_free(&mut lists, (list, order), prepares);
        if zeroed {
            // Cleared by init_on_free: known zero (no free-time stamp: nothing to age).
            lists.push(m, list, idx, order, true);
        } else {
            lists.push_freed(m, list, idx, order);
        }
        if lists.high.passed_by(&self.cfg, lists.count.pages) {
            self.drain_past_high(pcp, &mut lists);
        }
    }

    /// The counts of a free of a block of `order` onto `list` of `lists` (locked), with `prepares`
    /// free-time checks: [`Zone::push_to_pcp_list`]'s, and
    /// [`Zone::free_frozen_listed_on`]'s.
    #[inline(always)]
    pub(crate) fn count_pcp_free(
        &self,
        lists: &mut PcpLists,
        (list, order): (usize, Order),
        prepares: u64,
    ) {
        lists.flows.count_free(list, prepares);
        // At most 2^63 (`pcp_recent_frees_max`) plus a block's frames: no wrap.
        lists.recent_frees = lists
            .recent_frees
            .wrapping_add(order.pages())
            .min(self.recent_frees_max);
    }

    /// Drains a batch of `lists` (past their high mark) to the buddy: out of line, so that
    /// a free's push carries none of it. The CPU's mark follows the run of frees first
    /// ([`HighMark::drained_past`]: tuned, it rises, or drops below the high watermark).
    #[inline(never)]
    fn drain_past_high(&self, pcp: CpuLists<'_, R>, lists: &mut PcpLists) {
        let m = self.map();
        let mut free = self.lock_zone();
        let (count, recent) = (lists.count.pages, lists.recent_frees);
        let high = lists
            .high
            .drained_past(&self.cfg, (count, recent), || free.below_high_watermark());
        let pages = self.cfg.pcp_drain_pages(recent, high);
        self.events().pcp_drain(&PcpDrain {
            cpu: self.cpu_number(pcp),
            pages,
        });
        lists.drain(m, &mut free, pages);
    }

    /// Returns every per-cpu block this call may reach to the buddy: every CPU's lists, one
    /// CPU's lock at a time; for a [`LocalCpu`](crate::LocalCpu) handle's call only `pcp`'s
    /// (another CPU's lists are its own alone). What the allocation slow path, compaction
    /// and contiguous allocation do before they look at the buddy.
    pub(crate) fn drain_reachable(&self, pcp: CpuLists<'_, R>) {
        if pcp.local {
            self.drain(pcp, u64::MAX);
        } else {
            self.drain_all();
        }
    }

    /// Returns at least `pages` frames (or all) of `pcp`'s lists to the buddy.
    pub(crate) fn drain(&self, pcp: CpuLists<'_, R>, pages: u64) {
        let mut lists = self.lock_pcp(pcp);
        if lists.count.pages > 0 {
            self.events().pcp_drain(&PcpDrain {
                cpu: self.cpu_number(pcp),
                pages,
            });
            lists.drain(self.map(), &mut self.lock_zone(), pages);
        }
    }

    /// [`Cpu::decay_pcp_high`] on `pcp`'s lists.
    pub(crate) fn decay_pcp_high(&self, pcp: CpuLists<'_, R>) -> bool {
        let mut lists = self.lock_pcp(pcp);
        let count = lists.count.pages;
        let decayed = lists.high.decayed(&self.cfg, count, self.recent_frees_max);
        let past = count.saturating_sub(decayed);
        if past > 0 {
            self.events().pcp_drain(&PcpDrain {
                cpu: self.cpu_number(pcp),
                pages: past,
            });
            lists.drain(self.map(), &mut self.lock_zone(), past);
        }
        lists.high.raised() || past > 0
    }

    /// Counts free-time checks of pages that were leaked (no lock to count them under).
    pub(crate) fn count_leaked(&self, prepares: u64) {
        if prepares > 0 {
            self.leaked_prepares.fetch_add(prepares, Ordering::Relaxed);
        }
    }
}

/// The zone lock held: the free areas; on release, the fallbacks taken under it go to the
/// event hook (with the lock still held).
pub(crate) struct ZoneGuard<'a, R: RawMutex, E: ZoneEvents> {
    free: Guard<'a, R, FreeArea>,
    events: &'a E,
}

impl<R: RawMutex, E: ZoneEvents> Deref for ZoneGuard<'_, R, E> {
    type Target = FreeArea;

    #[inline(always)]
    fn deref(&self) -> &FreeArea {
        &self.free
    }
}

impl<R: RawMutex, E: ZoneEvents> DerefMut for ZoneGuard<'_, R, E> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut FreeArea {
        &mut self.free
    }
}

impl<R: RawMutex, E: ZoneEvents> Drop for ZoneGuard<'_, R, E> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(pending) = self.free.take_extfrag() {
            for e in pending.events() {
                self.events.extfrag(e);
            }
        }
    }
}

impl<F, P, R> fmt::Debug for Zone<F, P, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zone")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}
