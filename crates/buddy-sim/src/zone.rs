//! The zone: its frames, its per-cpu lists, the buddy under the zone lock, and what every
//! operation shares (the counted lock acquisitions, the frame-to-list hand-offs).

use core::fmt;
use core::ops::{DerefMut, Range};

use crate::buddy::FreeArea;
use crate::counters::LockStats;
use crate::decompose;
use crate::frame::{Frame, FrameInfo, FrameState, Word};
use crate::list::{FreeCount, List};
use crate::map::{FrameMap, Frames};
use crate::pcp::{PcpLists, PerCpu};
use crate::sync::{AtomicU64, Mutex, Ordering};
use crate::{
    BuddyError, DefaultRawMutex, MAX_SUPPORTED_ORDER, MigrateType, OpCounters, Order, Pfn,
    ZoneConfig,
};
use lock_api::RawMutex;

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
    pub(crate) free: Mutex<R, FreeArea>,
    /// Free-time checks of pages that were leaked, which take no lock to count under.
    pub(crate) leaked_prepares: AtomicU64,
    /// Each CPU's lists are reached without their lock ([`Zone::with_cpu_local_lists`]).
    pub(crate) cpu_local: bool,
}

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
    R: RawMutex,
{
    /// A zone whose frames are all usable and free, as the fewest aligned blocks (past
    /// [`ZoneConfig::eager_pages`] frames, deferred: see [`Zone::add_memory`]).
    ///
    /// # Errors
    /// As [`Zone::new_empty`].
    pub fn new(cfg: ZoneConfig, frames: F, pcps: P) -> Result<Self, BuddyError> {
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
    /// [`BuddyError::BadConfig`] for an unusable configuration, [`BuddyError::MetadataSize`]
    /// if `frames` does not hold `nr_pages` entries or `pcps` `cpus` entries.
    pub fn new_empty(cfg: ZoneConfig, frames: F, pcps: P) -> Result<Self, BuddyError> {
        let zone = Self::with_metadata(cfg, frames, pcps)?;
        zone.frames.as_ref().iter().for_each(Frame::reset);
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
    ) -> Result<Self, BuddyError> {
        Self::with_metadata(cfg, frames, pcps)
    }

    /// The zone over `frames` and `pcps` after checking their sizes; the per-cpu lists are
    /// emptied, the frames left as they are.
    fn with_metadata(cfg: ZoneConfig, frames: F, pcps: P) -> Result<Self, BuddyError> {
        cfg.validate()?;
        let n = cfg.nr_pages as usize;
        let (got_frames, got_cpus) = (frames.as_ref().len(), pcps.as_ref().len());
        if got_frames != n {
            return Err(BuddyError::MetadataSize {
                need: n,
                got: got_frames,
            });
        }
        if got_cpus != cfg.cpus {
            return Err(BuddyError::MetadataSize {
                need: cfg.cpus,
                got: got_cpus,
            });
        }
        pcps.as_ref().iter().for_each(PerCpu::reset);
        Ok(Self {
            cfg,
            frames,
            pcps,
            free: Mutex::new(FreeArea::EMPTY),
            leaked_prepares: AtomicU64::new(0),
            cpu_local: false,
        })
    }

    /// The same zone, reaching each CPU's per-cpu lists without taking their lock, as
    /// Linux's `local_lock` does: an allocation served from the CPU's list, and a free onto
    /// it, then execute no atomic read-modify-write for the list (a free still drops its
    /// reference by compare-and-swap, which other CPUs can race). The zone lock is taken as
    /// before for refills and drains, and the allocation slow path drains only the calling
    /// CPU's lists (it never reaches into another CPU's).
    ///
    /// Debug builds still take each list's lock, with `try_lock`, and panic when it is held:
    /// a broken contract shows there instead of corrupting the lists.
    ///
    /// # Safety
    /// For as long as the zone lives:
    /// - every call that names a CPU (`alloc_pages`, `alloc_zeroed`, `alloc_pages_exact`,
    ///   `free_pages`, `free_pages_exact`, `put_page`, `free_contig_range`, `vmalloc`,
    ///   `vmalloc_buf`, `vfree`, `drain_pcp`, `pcp_pages`, the adapters' calls) is made on
    ///   that CPU with interrupts and preemption disabled for the whole call, so no two calls
    ///   naming one CPU ever overlap (an interrupt handler that allocates must not interrupt
    ///   one);
    /// - calls that visit every CPU's lists (`drain_all`, `counters`, `reset_counters`,
    ///   `zeroed_pages`, `free_pages_total`, `check`) and calls naming another CPU are made
    ///   only while no other CPU is inside the zone (at boot, or with the others stopped).
    #[must_use]
    #[allow(unsafe_code)]
    pub unsafe fn with_cpu_local_lists(self) -> Self {
        Self {
            cpu_local: true,
            ..self
        }
    }

    /// Whether the per-cpu lists are reached without their lock
    /// ([`Zone::with_cpu_local_lists`]).
    pub const fn has_cpu_local_lists(&self) -> bool {
        self.cpu_local
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
    /// [`BuddyError::OutOfZone`] or [`BuddyError::Overflow`] if the range leaves the zone,
    /// [`BuddyError::AlreadyAdded`] if any frame of it is usable already; nothing changes.
    pub fn add_memory(&self, pfn: Pfn, nr: u64) -> Result<(), BuddyError> {
        self.add_memory_as(pfn, nr, false)
    }

    /// As [`Zone::add_memory`], for memory the embedder knows reads zero in every byte
    /// (cleared at boot, fresh from a hypervisor that zeroes what it gives a guest): its
    /// blocks are known zero, so zeroed allocations take them without clearing.
    ///
    /// # Errors
    /// As [`Zone::add_memory`]; nothing changes.
    pub fn add_zeroed_memory(&self, pfn: Pfn, nr: u64) -> Result<(), BuddyError> {
        self.add_memory_as(pfn, nr, true)
    }

    pub(crate) fn add_memory_as(&self, pfn: Pfn, nr: u64, zeroed: bool) -> Result<(), BuddyError> {
        let m = self.map();
        let pages = m.range(pfn, nr)?;
        let mut free = self.lock_zone();
        Self::check_addable(m, &free, &pages)?;
        let recorded = free.added.insert(pages.clone());
        // What allocation needs first now; the rest later, if the range is recorded and the
        // deferred list has room.
        let eager_end = pages.start + (nr.min(self.cfg.eager_pages) as u32);
        let eager = if recorded && free.deferred.push(eager_end..pages.end, zeroed) {
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
        )?;
        for (head, order) in blocks {
            let h = m.index_of(head);
            for t in h + 1..h + order.pages() as u32 {
                m.frame(t).store(Word::TAIL);
            }
            free.free_one_page(m, h, order, zeroed);
        }
        free.present += u64::from(eager.end - eager.start);
        Ok(())
    }

    /// [`Zone::add_memory`]'s checks of `[pfn, pfn + nr)` without adding it: what a node
    /// set checks of every piece of a range before it adds any.
    pub(crate) fn addable(&self, pfn: Pfn, nr: u64) -> Result<(), BuddyError> {
        let m = self.map();
        let pages = m.range(pfn, nr)?;
        Self::check_addable(m, &self.lock_zone(), &pages)
    }

    /// [`BuddyError::AlreadyAdded`] for the first usable frame of `pages`.
    fn check_addable(
        m: FrameMap<'_>,
        free: &FreeArea,
        pages: &Range<u32>,
    ) -> Result<(), BuddyError> {
        let overlap = match free.added.overlap(pages) {
            Ok(first) => first,
            // Past what the table holds: the frames say (a range it does not hold was
            // initialized when it was added).
            Err(()) => pages
                .clone()
                .find(|&i| m.frame(i).load().state() != FrameState::Reserved),
        };
        match overlap {
            Some(i) => Err(BuddyError::AlreadyAdded(m.pfn(i))),
            None => Ok(()),
        }
    }

    /// The configuration.
    pub const fn config(&self) -> &ZoneConfig {
        &self.cfg
    }

    /// Work done so far, summed over the zone lock and every per-cpu lock. Reads each lock's
    /// counts under that lock (these acquisitions are not counted).
    pub fn counters(&self) -> OpCounters {
        let zone = self.free.lock().stats;
        let mut c = OpCounters {
            zone_locks: zone.acquisitions,
            pcp_locks: 0,
            list_ops: zone.list_ops,
            prepares: zone.prepares + self.leaked_prepares.load(Ordering::Relaxed),
            zeroed_hits: zone.zeroed_hits,
            cleared_on_alloc: zone.cleared_on_alloc,
            cleared_in_background: zone.cleared_in_background,
        };
        for pcp in self.pcps.as_ref() {
            let s = pcp.lists.lock().stats;
            c.pcp_locks += s.acquisitions;
            c.list_ops += s.list_ops;
            c.prepares += s.prepares;
            c.zeroed_hits += s.zeroed_hits;
            c.cleared_on_alloc += s.cleared_on_alloc;
        }
        c
    }

    /// Resets the work counters.
    pub fn reset_counters(&self) {
        self.free.lock().stats = LockStats::ZERO;
        for pcp in self.pcps.as_ref() {
            pcp.lists.lock().stats = LockStats::ZERO;
        }
        self.leaked_prepares.store(0, Ordering::Relaxed);
    }

    /// A frame's metadata, read at one instant.
    ///
    /// # Errors
    /// [`BuddyError::OutOfZone`].
    pub fn frame(&self, pfn: Pfn) -> Result<FrameInfo, BuddyError> {
        let m = self.map();
        Ok(m.frame(m.index(pfn)?).info())
    }

    /// Every frame's metadata, in frame order.
    pub fn frames_slice(&self) -> &[Frame] {
        self.frames.as_ref()
    }

    /// Frames free in the buddy (not counting per-cpu lists).
    pub fn buddy_pages(&self) -> u64 {
        self.free.lock().count.pages
    }

    /// Usable frames: the ranges added, holes excluded, deferred frames included
    /// ([`Zone::deferred_pages`]).
    pub fn present_pages(&self) -> u64 {
        let free = self.free.lock();
        free.present + free.deferred.pages
    }

    /// Free frames known zero, in the buddy and on every CPU's lists: the zeroed pool.
    pub fn zeroed_pages(&self) -> u64 {
        let pcp = self.sum_over_pcp_lists(|c| c.zeroed);
        self.free.lock().count.zeroed + pcp
    }

    /// `field` of every CPU's list counts, summed, each read under its list's lock.
    fn sum_over_pcp_lists(&self, field: impl Fn(&FreeCount) -> u64) -> u64 {
        self.pcps
            .as_ref()
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
    /// [`Zone::with_cpu_local_lists`], only while no other CPU is inside the zone.)
    pub fn free_pages_total(&self) -> u64 {
        let pcp = self.sum_over_pcp_lists(|c| c.pages);
        let free = self.free.lock();
        free.count.pages + free.deferred.pages + pcp
    }

    /// Frames on `cpu`'s per-cpu lists.
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`].
    pub fn pcp_pages(&self, cpu: usize) -> Result<u64, BuddyError> {
        Ok(self.pcp(cpu)?.lists.lock().count.pages)
    }

    /// Whether the free block at `pfn` is on `cpu`'s per-cpu lists (for the zero model).
    #[cfg(all(feature = "testing", feature = "alloc", feature = "spin"))]
    pub(crate) fn on_pcp_list(&self, cpu: usize, pfn: Pfn) -> bool {
        let m = self.map();
        let (Ok(pcp), Ok(idx)) = (self.pcp(cpu), m.index(pfn)) else {
            return false;
        };
        let lists = pcp.lists.lock();
        lists
            .lists
            .iter()
            .any(|list| list.blocks(m.frames).any(|i| i == idx))
    }

    /// Free blocks per order in the buddy: `result[o]` blocks of order `o`.
    pub fn buddy_blocks_per_order(&self) -> [u32; MAX_SUPPORTED_ORDER as usize + 1] {
        self.free
            .lock()
            .lists
            .map(|l| l.iter().map(List::len).sum())
    }

    /// Free blocks per order in the buddy on `mt`'s lists (isolated pageblocks' blocks are
    /// on none of them).
    pub fn buddy_blocks_of_type(&self, mt: MigrateType) -> [u32; MAX_SUPPORTED_ORDER as usize + 1] {
        self.free.lock().lists.map(|l| l[mt as usize].len())
    }

    /// The type of the pageblock holding `pfn`, and whether it is isolated.
    ///
    /// # Errors
    /// [`BuddyError::OutOfZone`].
    pub fn pageblock_type(&self, pfn: Pfn) -> Result<(MigrateType, bool), BuddyError> {
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
    pub(crate) fn blocks(&self) -> impl Iterator<Item = (u32, Word)> + '_ {
        let frames = self.frames.as_ref();
        let mut idx = 0usize;
        core::iter::from_fn(move || {
            let w = frames.get(idx)?.load();
            let here = idx as u32;
            idx = idx.saturating_add(1 << w.order().min(MAX_SUPPORTED_ORDER));
            Some((here, w))
        })
    }

    // ---- shared by the operations -------------------------------------------------------

    #[allow(unsafe_code)]
    pub(crate) fn map(&self) -> FrameMap<'_> {
        let frames: *const [Frame] = self.frames.as_ref();
        FrameMap {
            cfg: &self.cfg,
            // SAFETY: `frames` is `self.frames.as_ref()`, borrowed as long as `self`.
            frames: unsafe { Frames::from_slice_ptr(frames) },
        }
    }

    pub(crate) fn pcp(&self, cpu: usize) -> Result<&PerCpu<R>, BuddyError> {
        self.pcps.as_ref().get(cpu).ok_or(BuddyError::BadCpu(cpu))
    }

    pub(crate) fn check_order(&self, order: Order) -> Result<(), BuddyError> {
        if order <= self.cfg.max_order {
            Ok(())
        } else {
            Err(BuddyError::OrderTooLarge {
                order: order.get(),
                max: self.cfg.max_order.get(),
            })
        }
    }

    /// Takes the zone lock, counting the acquisition.
    pub(crate) fn lock_zone(&self) -> impl DerefMut<Target = FreeArea> + '_ {
        let mut free = self.free.lock();
        free.stats.acquisitions += 1;
        free
    }

    /// Takes `pcp`'s lock (or, with CPU-local lists, reaches them without it), counting the
    /// acquisition. Only for the lists of the CPU a call names.
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn lock_pcp<'a>(&self, pcp: &'a PerCpu<R>) -> impl DerefMut<Target = PcpLists> + 'a {
        let mut lists = if self.cpu_local {
            // SAFETY: `with_cpu_local_lists`' contract: a call naming a CPU runs on it with
            // interrupts off and no other context reaches its lists meanwhile.
            unsafe { pcp.lists.lock_exclusive() }
        } else {
            pcp.lists.lock()
        };
        lists.stats.acquisitions += 1;
        lists
    }

    /// Frees a block the caller owns (its head `Freeing` or just taken, its other frames
    /// tails): to `cpu`'s list for per-cpu orders (draining a batch past `high`), else to the
    /// buddy under the zone lock. `prepares` free-time checks are counted under that lock.
    #[inline]
    pub(crate) fn free_block(&self, pcp: &PerCpu<R>, idx: u32, order: Order, prepares: u64) {
        let m = self.map();
        // The list of the pageblock's type now; an isolated pageblock's blocks go straight
        // to the buddy (its isolated lists).
        let list = MigrateType::from_index(m.free_list_of(idx))
            .and_then(|mt| self.cfg.pcp_list(order, mt));
        let Some(list) = list else {
            let mut free = self.lock_zone();
            free.stats.prepares += prepares;
            free.free_one_page(m, idx, order, false);
            return;
        };
        let mut lists = self.lock_pcp(pcp);
        lists.stats.prepares += prepares;
        lists.push(m, list, idx, order, false);
        lists.recent_frees = lists
            .recent_frees
            .saturating_add(order.pages())
            .min(self.cfg.pcp_recent_frees_max());
        if lists.count.pages > self.cfg.pcp_high {
            let pages = self.cfg.pcp_drain_pages(lists.recent_frees);
            lists.drain(m, &mut self.lock_zone(), pages);
        }
    }

    /// Returns every per-cpu block this call may reach to the buddy: every CPU's lists, one
    /// CPU's lock at a time; with CPU-local lists only `pcp`'s (another CPU's lists are its
    /// own alone). What the allocation slow path, compaction and contiguous allocation do
    /// before they look at the buddy.
    pub(crate) fn drain_reachable(&self, pcp: &PerCpu<R>) {
        if self.cpu_local {
            self.drain(pcp, u64::MAX);
        } else {
            self.drain_all();
        }
    }

    /// Returns at least `pages` frames (or all) of `pcp`'s lists to the buddy.
    pub(crate) fn drain(&self, pcp: &PerCpu<R>, pages: u64) {
        let mut lists = self.lock_pcp(pcp);
        if lists.count.pages > 0 {
            lists.drain(self.map(), &mut self.lock_zone(), pages);
        }
    }

    /// Counts free-time checks of pages that were leaked (no lock to count them under).
    pub(crate) fn count_leaked(&self, prepares: u64) {
        if prepares > 0 {
            self.leaked_prepares.fetch_add(prepares, Ordering::Relaxed);
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
