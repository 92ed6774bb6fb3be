use crate::frame::{Frame, FrameState, List, PCP_LISTS, PerCpu};
use crate::{BuddyError, MAX_SUPPORTED_ORDER, Order, Pfn, decompose};

/// A zone's geometry and tuning. [`ZoneConfig::new`] gives the x86_64 kernel's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneConfig {
    /// First frame of the zone.
    pub start: Pfn,
    /// Frames in the zone (at most `u32::MAX - 1`).
    pub nr_pages: u64,
    /// MAX_ORDER: the largest block (10 on x86_64: 4 MiB with 4 KiB pages).
    pub max_order: Order,
    /// The pageblock order (9), which also gets a per-cpu list.
    pub pageblock_order: Order,
    /// Frames per memory section (a power of two; 2^15 by default). `free_contig_range`
    /// never coalesces across a section boundary.
    pub section_pages: u64,
    /// Number of CPUs, each with its own per-cpu lists.
    pub cpus: usize,
    /// A per-cpu list set that holds more than this many frames drains `pcp_batch` frames.
    pub pcp_high: u64,
    /// Frames moved per drain or refill.
    pub pcp_batch: u64,
}

impl ZoneConfig {
    /// `[start, start + nr_pages)` with MAX_ORDER 10, pageblock order 9, 2^15-frame
    /// sections, one CPU, `high` 1536 and `batch` 63 frames.
    #[must_use]
    pub const fn new(start: Pfn, nr_pages: u64) -> Self {
        Self {
            start,
            nr_pages,
            max_order: Order(10),
            pageblock_order: Order(9),
            section_pages: 1 << 15,
            cpus: 1,
            pcp_high: 1536,
            pcp_batch: 63,
        }
    }

    fn validate(&self) -> Result<(), BuddyError> {
        let bad = |why| Err(BuddyError::BadConfig(why));
        if self.nr_pages == 0 {
            return bad("the zone has no frames");
        }
        if self.nr_pages >= u64::from(u32::MAX) || usize::try_from(self.nr_pages).is_err() {
            return bad("more frames than 32-bit list links can index");
        }
        if self.start.checked_add(self.nr_pages).is_none() {
            return bad("start + nr_pages overflows");
        }
        if self.pageblock_order > self.max_order {
            return bad("pageblock order above MAX_ORDER");
        }
        if !self.section_pages.is_power_of_two() {
            return bad("section size is not a power of two");
        }
        if self.cpus == 0 {
            return bad("no CPUs");
        }
        if self.pcp_batch == 0 {
            return bad("per-cpu batch is zero");
        }
        Ok(())
    }
}

/// Counts of the work the allocator did: what the report shows beside the times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounters {
    /// Times the zone lock was taken (buddy frees, drains, refills, buddy allocations).
    pub zone_locks: u64,
    /// Insertions into and removals from any free list.
    pub list_ops: u64,
    /// Per-page free-time checks (`free_pages_prepare`).
    pub prepares: u64,
}

/// Where a free block sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FreeWhere {
    /// On the buddy free list of its order.
    Buddy,
    /// On a per-cpu list.
    Pcp,
}

/// A buddy allocator over the frames `[start, start + nr_pages)`, with its metadata in
/// caller-provided storage: `F` holds one [`Frame`] per frame, `P` one [`PerCpu`] per CPU
/// (slices, arrays or, with `alloc`, vectors).
#[derive(Debug)]
pub struct Zone<F, P> {
    cfg: ZoneConfig,
    frames: F,
    pcps: P,
    free_area: [List; MAX_SUPPORTED_ORDER as usize + 1],
    buddy_pages: u64,
    counters: OpCounters,
    drain_cursor: usize,
}

/// What a frame is, looked up through its block.
enum Class {
    /// Head of an allocated block.
    Allocated { order: Order },
    /// Inside an allocated block of order > 0 whose head is elsewhere.
    InsideAllocated,
    /// Part of a free block (buddy or per-cpu).
    Free,
    /// Leaked after a failed check.
    Leaked,
}

impl<F, P> Zone<F, P>
where
    F: AsRef<[Frame]> + AsMut<[Frame]>,
    P: AsRef<[PerCpu]> + AsMut<[PerCpu]>,
{
    /// A zone whose frames are all free, as the fewest aligned blocks.
    ///
    /// # Errors
    /// [`BuddyError::BadConfig`] for an unusable configuration, [`BuddyError::MetadataSize`]
    /// if `frames` does not hold `nr_pages` entries or `pcps` `cpus` entries.
    pub fn new(cfg: ZoneConfig, mut frames: F, mut pcps: P) -> Result<Self, BuddyError> {
        cfg.validate()?;
        let n = cfg.nr_pages as usize;
        if frames.as_ref().len() != n {
            return Err(BuddyError::MetadataSize {
                need: n,
                got: frames.as_ref().len(),
            });
        }
        if pcps.as_ref().len() != cfg.cpus {
            return Err(BuddyError::MetadataSize {
                need: cfg.cpus,
                got: pcps.as_ref().len(),
            });
        }
        frames.as_mut().fill(Frame::EMPTY);
        pcps.as_mut().fill(PerCpu::EMPTY);
        let mut zone = Self {
            cfg,
            frames,
            pcps,
            free_area: [List::EMPTY; MAX_SUPPORTED_ORDER as usize + 1],
            buddy_pages: 0,
            counters: OpCounters::default(),
            drain_cursor: 0,
        };
        for (pfn, order) in decompose(cfg.start, cfg.nr_pages, cfg.max_order)? {
            zone.insert_buddy(zone.index_unchecked(pfn), order);
        }
        zone.counters = OpCounters::default();
        Ok(zone)
    }

    /// The configuration.
    pub const fn config(&self) -> &ZoneConfig {
        &self.cfg
    }

    /// Work done so far.
    pub const fn counters(&self) -> OpCounters {
        self.counters
    }

    /// Resets the work counters.
    pub fn reset_counters(&mut self) {
        self.counters = OpCounters::default();
    }

    /// A frame's metadata.
    ///
    /// # Errors
    /// [`BuddyError::OutOfZone`].
    pub fn frame(&self, pfn: Pfn) -> Result<&Frame, BuddyError> {
        let idx = self.index(pfn)?;
        Ok(&self.frames.as_ref()[idx as usize])
    }

    /// Every frame's metadata, in frame order.
    pub fn frames_slice(&self) -> &[Frame] {
        self.frames.as_ref()
    }

    /// Frames free in the buddy (not counting per-cpu lists).
    pub const fn buddy_pages(&self) -> u64 {
        self.buddy_pages
    }

    /// Frames on `cpu`'s per-cpu lists.
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`].
    pub fn pcp_pages(&self, cpu: usize) -> Result<u64, BuddyError> {
        self.pcps
            .as_ref()
            .get(cpu)
            .map(PerCpu::pages)
            .ok_or(BuddyError::BadCpu(cpu))
    }

    /// Free blocks per order in the buddy: `result[o]` blocks of order `o`.
    pub fn buddy_blocks_per_order(&self) -> [u32; MAX_SUPPORTED_ORDER as usize + 1] {
        self.free_area.map(|l| l.len)
    }

    /// Every free block, ascending: `(first frame, order, where)`. Walks the zone: O(frames).
    pub fn free_blocks(&self) -> impl Iterator<Item = (Pfn, Order, FreeWhere)> + '_ {
        self.blocks().filter_map(|(idx, f)| {
            let place = match f.state {
                FrameState::Buddy => FreeWhere::Buddy,
                FrameState::Pcp => FreeWhere::Pcp,
                _ => return None,
            };
            Some((self.pfn_of(idx), Order(f.order), place))
        })
    }

    /// Frames leaked after failed free-time checks.
    pub fn leaked_pages(&self) -> u64 {
        self.blocks()
            .filter(|(_, f)| f.state == FrameState::Leaked)
            .count() as u64
    }

    /// The block heads in ascending order: `(index, frame)`.
    fn blocks(&self) -> impl Iterator<Item = (u32, &Frame)> + '_ {
        let frames = self.frames.as_ref();
        let mut idx = 0usize;
        core::iter::from_fn(move || {
            let f = frames.get(idx)?;
            let here = idx as u32;
            idx += 1 << f.order;
            Some((here, f))
        })
    }

    // ---- indices -------------------------------------------------------------------------

    fn index(&self, pfn: Pfn) -> Result<u32, BuddyError> {
        let off = pfn
            .0
            .checked_sub(self.cfg.start.0)
            .ok_or(BuddyError::OutOfZone(pfn))?;
        if off >= self.cfg.nr_pages {
            return Err(BuddyError::OutOfZone(pfn));
        }
        Ok(off as u32)
    }

    fn index_unchecked(&self, pfn: Pfn) -> u32 {
        (pfn.0 - self.cfg.start.0) as u32
    }

    fn pfn_of(&self, idx: u32) -> Pfn {
        Pfn(self.cfg.start.0 + u64::from(idx))
    }

    fn check_cpu(&self, cpu: usize) -> Result<(), BuddyError> {
        if cpu < self.cfg.cpus {
            Ok(())
        } else {
            Err(BuddyError::BadCpu(cpu))
        }
    }

    fn check_order(&self, order: Order) -> Result<(), BuddyError> {
        if order <= self.cfg.max_order {
            Ok(())
        } else {
            Err(BuddyError::OrderTooLarge {
                order: order.get(),
                max: self.cfg.max_order.get(),
            })
        }
    }

    /// The head of the block holding `idx`: the first head met aligning down.
    fn block_head(&self, idx: u32) -> u32 {
        let frames = self.frames.as_ref();
        let pfn = self.pfn_of(idx);
        for o in 0..=self.cfg.max_order.get() {
            let head = Pfn(pfn.0 & !(Order(o).pages() - 1));
            if head < self.cfg.start {
                break;
            }
            let h = self.index_unchecked(head);
            if frames[h as usize].state != FrameState::Tail {
                return h;
            }
        }
        idx
    }

    fn classify(&self, idx: u32) -> Class {
        let head = self.block_head(idx);
        let f = &self.frames.as_ref()[head as usize];
        match f.state {
            FrameState::Buddy | FrameState::Pcp => Class::Free,
            FrameState::Leaked => Class::Leaked,
            FrameState::Allocated if head == idx => Class::Allocated {
                order: Order(f.order),
            },
            FrameState::Allocated | FrameState::Tail => Class::InsideAllocated,
        }
    }

    /// The allocated block head at `pfn`, or the error that says what `pfn` is instead.
    fn allocated_head(&self, pfn: Pfn) -> Result<(u32, Order), BuddyError> {
        let idx = self.index(pfn)?;
        match self.classify(idx) {
            Class::Allocated { order } => Ok((idx, order)),
            Class::InsideAllocated => Err(BuddyError::CompoundPage(pfn)),
            Class::Free => Err(BuddyError::DoubleFree(pfn)),
            Class::Leaked => Err(BuddyError::LeakedPage(pfn)),
        }
    }

    fn pcp_list(&self, order: Order) -> Option<usize> {
        if order.get() <= 3 {
            Some(order.get() as usize)
        } else if order == self.cfg.pageblock_order {
            Some(PCP_LISTS - 1)
        } else {
            None
        }
    }

    // ---- the buddy ------------------------------------------------------------------------

    fn insert_buddy(&mut self, idx: u32, order: Order) {
        let frames = self.frames.as_mut();
        frames[idx as usize].set_head(FrameState::Buddy, order.get());
        self.free_area[order.get() as usize].push_front(frames, idx);
        self.buddy_pages += order.pages();
        self.counters.list_ops += 1;
    }

    fn remove_buddy(&mut self, idx: u32, order: Order) {
        let frames = self.frames.as_mut();
        self.free_area[order.get() as usize].remove(frames, idx);
        frames[idx as usize].make_tail();
        self.buddy_pages -= order.pages();
        self.counters.list_ops += 1;
    }

    /// `__free_one_page`: merges with free buddies of the same order up to MAX_ORDER.
    /// The caller holds the zone lock.
    fn free_one_page(&mut self, mut idx: u32, mut order: Order) {
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        while order < self.cfg.max_order {
            let pfn = self.pfn_of(idx);
            let buddy = pfn.buddy(order);
            if buddy < self.cfg.start || buddy.0 >= zone_end {
                break;
            }
            let b = self.index_unchecked(buddy);
            let f = self.frames.as_ref()[b as usize];
            if f.state != FrameState::Buddy || f.order != order.get() {
                break;
            }
            self.remove_buddy(b, order);
            let frames = self.frames.as_mut();
            frames[idx as usize].make_tail();
            idx = idx.min(b);
            order = order.up();
        }
        self.insert_buddy(idx, order);
    }

    /// `__rmqueue_smallest`: the smallest free block of at least `order`, split down; the
    /// upper halves go back to the free lists. The caller holds the zone lock.
    fn rmqueue_smallest(&mut self, order: Order) -> Option<u32> {
        let mut o = order.get();
        while o <= self.cfg.max_order.get() && self.free_area[o as usize].len == 0 {
            o += 1;
        }
        if o > self.cfg.max_order.get() {
            return None;
        }
        let idx = self.free_area[o as usize].head;
        self.remove_buddy(idx, Order(o));
        while o > order.get() {
            o -= 1;
            self.insert_buddy(idx + (1u32 << o), Order(o));
        }
        Some(idx)
    }

    /// Frees a prepared block: to `cpu`'s list for per-cpu orders (draining a batch past
    /// `high`), else to the buddy under the zone lock.
    fn free_block(&mut self, cpu: usize, idx: u32, order: Order) {
        let Some(list) = self.pcp_list(order) else {
            self.counters.zone_locks += 1;
            self.free_one_page(idx, order);
            return;
        };
        self.push_pcp(cpu, list, idx, order);
        if self.pcps.as_ref()[cpu].pages > self.cfg.pcp_high {
            self.drain(cpu, self.cfg.pcp_batch);
        }
    }

    /// Puts the free block at `idx` at the front of `cpu`'s per-cpu `list`.
    fn push_pcp(&mut self, cpu: usize, list: usize, idx: u32, order: Order) {
        let frames = self.frames.as_mut();
        frames[idx as usize].set_head(FrameState::Pcp, order.get());
        let pcp = &mut self.pcps.as_mut()[cpu];
        pcp.lists[list].push_front(frames, idx);
        pcp.pages += order.pages();
        self.counters.list_ops += 1;
    }

    /// Returns at least `pages` frames (or all) from `cpu`'s lists to the buddy, oldest
    /// first, taking the lists in turn: one zone-lock acquisition.
    fn drain(&mut self, cpu: usize, pages: u64) {
        self.counters.zone_locks += 1;
        let mut drained = 0;
        while drained < pages && self.pcps.as_ref()[cpu].pages > 0 {
            let list = (0..PCP_LISTS)
                .map(|k| (self.drain_cursor + k) % PCP_LISTS)
                .find(|&l| self.pcps.as_ref()[cpu].lists[l].len > 0);
            let Some(list) = list else { break };
            self.drain_cursor = (list + 1) % PCP_LISTS;
            let frames = self.frames.as_mut();
            let pcp = &mut self.pcps.as_mut()[cpu];
            let Some(idx) = pcp.lists[list].pop_back(frames) else {
                break;
            };
            let order = Order(frames[idx as usize].order);
            pcp.pages -= order.pages();
            self.counters.list_ops += 1;
            drained += order.pages();
            self.free_one_page(idx, order);
        }
    }

    // ---- the public operations ------------------------------------------------------------

    /// Allocates a naturally aligned block of `2^order` frames with one reference: from
    /// `cpu`'s list for per-cpu orders (refilled from the buddy when empty), else from the
    /// buddy. When that fails, it drains every CPU's lists back into the buddy (where the
    /// blocks can merge) and tries once more, as the kernel's slow path does with
    /// `drain_all_pages()`.
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`], [`BuddyError::OrderTooLarge`], [`BuddyError::OutOfMemory`].
    pub fn alloc_pages(&mut self, cpu: usize, order: Order) -> Result<Pfn, BuddyError> {
        self.check_cpu(cpu)?;
        self.check_order(order)?;
        match self.alloc_fast(cpu, order) {
            Err(BuddyError::OutOfMemory(_)) if self.pcps.as_ref().iter().any(|p| p.pages > 0) => {
                self.drain_all();
                self.alloc_fast(cpu, order)
            }
            other => other,
        }
    }

    /// One allocation attempt without draining other lists.
    fn alloc_fast(&mut self, cpu: usize, order: Order) -> Result<Pfn, BuddyError> {
        let idx = match self.pcp_list(order) {
            Some(list) => {
                if self.pcps.as_ref()[cpu].lists[list].len == 0 {
                    self.refill(cpu, order, list);
                }
                let frames = self.frames.as_mut();
                let pcp = &mut self.pcps.as_mut()[cpu];
                let idx = pcp.lists[list]
                    .pop_front(frames)
                    .ok_or(BuddyError::OutOfMemory(order))?;
                pcp.pages -= order.pages();
                self.counters.list_ops += 1;
                idx
            }
            None => {
                self.counters.zone_locks += 1;
                self.rmqueue_smallest(order)
                    .ok_or(BuddyError::OutOfMemory(order))?
            }
        };
        let f = &mut self.frames.as_mut()[idx as usize];
        f.set_head(FrameState::Allocated, order.get());
        f.refcount = 1;
        f.poisoned = false;
        Ok(self.pfn_of(idx))
    }

    /// Allocates the specific block `[pfn, pfn + 2^order)` if it lies wholly inside one block
    /// that is free in the buddy (not on a per-cpu list), splitting that block around it:
    /// for reserved ranges, taking a bad frame off the buddy, or replaying an allocation.
    ///
    /// # Errors
    /// [`BuddyError::OrderTooLarge`], [`BuddyError::Misaligned`], [`BuddyError::OutOfZone`],
    /// [`BuddyError::NotInBuddy`].
    pub fn alloc_pages_at(&mut self, pfn: Pfn, order: Order) -> Result<(), BuddyError> {
        self.check_order(order)?;
        if !pfn.is_aligned(order) {
            return Err(BuddyError::Misaligned { pfn, order });
        }
        let idx = self.index(pfn)?;
        let head = self.block_head(idx);
        let f = self.frames.as_ref()[head as usize];
        if f.state != FrameState::Buddy || f.order < order.get() {
            return Err(BuddyError::NotInBuddy(pfn));
        }
        self.counters.zone_locks += 1;
        self.remove_buddy(head, Order(f.order));
        // Halve the free block around the wanted one, returning the other halves.
        let (mut base, mut o) = (head, f.order);
        while o > order.get() {
            o -= 1;
            let half = 1u32 << o;
            if idx >= base + half {
                self.insert_buddy(base, Order(o));
                base += half;
            } else {
                self.insert_buddy(base + half, Order(o));
            }
        }
        let f = &mut self.frames.as_mut()[idx as usize];
        f.set_head(FrameState::Allocated, order.get());
        f.refcount = 1;
        f.poisoned = false;
        Ok(())
    }

    /// `rmqueue_bulk`: moves up to `batch` frames' worth of `order` blocks to `cpu`'s list.
    fn refill(&mut self, cpu: usize, order: Order, list: usize) {
        self.counters.zone_locks += 1;
        let blocks = (self.cfg.pcp_batch / order.pages()).max(1);
        for _ in 0..blocks {
            let Some(idx) = self.rmqueue_smallest(order) else {
                break;
            };
            self.push_pcp(cpu, list, idx, order);
        }
    }

    /// Drops one reference to the block at `pfn` allocated at `order` and frees it when
    /// none is left (`__free_pages`).
    ///
    /// # Errors
    /// [`BuddyError::DoubleFree`], [`BuddyError::OrderMismatch`],
    /// [`BuddyError::CompoundPage`] (a frame inside a block), [`BuddyError::LeakedPage`],
    /// [`BuddyError::OutOfZone`], [`BuddyError::BadCpu`].
    pub fn free_pages(&mut self, cpu: usize, pfn: Pfn, order: Order) -> Result<(), BuddyError> {
        self.check_cpu(cpu)?;
        let (_, allocated) = self.allocated_head(pfn)?;
        if allocated != order {
            return Err(BuddyError::OrderMismatch {
                pfn,
                given: order,
                allocated,
            });
        }
        self.put_page(cpu, pfn)
    }

    /// Takes one more reference to the allocated block at `pfn`.
    ///
    /// # Errors
    /// As [`Zone::free_pages`] for a frame that is not an allocated block's head, and
    /// [`BuddyError::RefcountOverflow`].
    pub fn get_page(&mut self, pfn: Pfn) -> Result<(), BuddyError> {
        let (idx, _) = self.allocated_head(pfn)?;
        let f = &mut self.frames.as_mut()[idx as usize];
        f.refcount = f
            .refcount
            .checked_add(1)
            .ok_or(BuddyError::RefcountOverflow(pfn))?;
        Ok(())
    }

    /// Drops one reference to the allocated block at `pfn`; at zero the block is checked
    /// (`free_pages_prepare`: a poisoned page is leaked) and freed.
    ///
    /// # Errors
    /// As [`Zone::free_pages`].
    pub fn put_page(&mut self, cpu: usize, pfn: Pfn) -> Result<(), BuddyError> {
        self.check_cpu(cpu)?;
        let (idx, order) = self.allocated_head(pfn)?;
        if self.put_testzero(idx) && self.prepare(idx) {
            self.free_block(cpu, idx, order);
        }
        Ok(())
    }

    /// `put_page_testzero`: drops a reference; true when it was the last.
    fn put_testzero(&mut self, idx: u32) -> bool {
        let f = &mut self.frames.as_mut()[idx as usize];
        f.refcount -= 1;
        f.refcount == 0
    }

    /// `free_pages_prepare`: the per-page check; a poisoned page is leaked (false).
    fn prepare(&mut self, idx: u32) -> bool {
        self.counters.prepares += 1;
        let f = &mut self.frames.as_mut()[idx as usize];
        if f.poisoned {
            f.set_head(FrameState::Leaked, 0);
            return false;
        }
        true
    }

    /// Splits the allocated block at `pfn` of `order` into `2^order` order-0 pages with one
    /// reference each (`split_page`).
    ///
    /// # Errors
    /// As [`Zone::free_pages`], and [`BuddyError::Shared`] if the block has more than one
    /// reference.
    pub fn split_page(&mut self, pfn: Pfn, order: Order) -> Result<(), BuddyError> {
        let (idx, allocated) = self.allocated_head(pfn)?;
        if allocated != order {
            return Err(BuddyError::OrderMismatch {
                pfn,
                given: order,
                allocated,
            });
        }
        let frames = self.frames.as_mut();
        if frames[idx as usize].refcount != 1 {
            return Err(BuddyError::Shared(pfn));
        }
        for f in &mut frames[idx as usize..(idx as usize + order.pages() as usize)] {
            f.set_head(FrameState::Allocated, 0);
            f.refcount = 1;
        }
        Ok(())
    }

    /// Marks the allocated order-0 page at `pfn` hardware-poisoned: freeing it later fails
    /// the free-time check and leaks it.
    ///
    /// # Errors
    /// As [`Zone::free_pages`]; [`BuddyError::CompoundPage`] for a block above order 0.
    pub fn mark_hwpoison(&mut self, pfn: Pfn) -> Result<(), BuddyError> {
        let (idx, order) = self.allocated_head(pfn)?;
        if order != Order::ZERO {
            return Err(BuddyError::CompoundPage(pfn));
        }
        self.frames.as_mut()[idx as usize].poisoned = true;
        Ok(())
    }

    /// Returns all of `cpu`'s per-cpu blocks to the buddy.
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`].
    pub fn drain_pcp(&mut self, cpu: usize) -> Result<(), BuddyError> {
        self.check_cpu(cpu)?;
        self.drain(cpu, u64::MAX);
        Ok(())
    }

    /// Returns every CPU's per-cpu blocks to the buddy.
    pub fn drain_all(&mut self) {
        for cpu in 0..self.cfg.cpus {
            self.drain(cpu, u64::MAX);
        }
    }

    /// Checks `[pfn, pfn + nr)` for `free_contig_range`: inside the zone, and every frame an
    /// allocated order-0 page. Nothing is changed.
    pub(crate) fn check_contig_range(
        &self,
        cpu: usize,
        pfn: Pfn,
        nr: u64,
    ) -> Result<(), BuddyError> {
        self.check_cpu(cpu)?;
        let end = pfn.checked_add(nr).ok_or(BuddyError::Overflow)?;
        if nr == 0 {
            return Ok(());
        }
        let first = self.index(pfn)?;
        let zone_end = self.cfg.start.0 + self.cfg.nr_pages;
        if end.0 > zone_end {
            return Err(BuddyError::OutOfZone(Pfn(zone_end)));
        }
        let frames = &self.frames.as_ref()[first as usize..first as usize + nr as usize];
        for (idx, f) in (first..).zip(frames) {
            // Fast path: an allocated order-0 page is its own block's head.
            if f.state == FrameState::Allocated && f.order == 0 {
                continue;
            }
            let p = self.pfn_of(idx);
            match self.classify(idx) {
                Class::Allocated { order } if order == Order::ZERO => {}
                Class::Allocated { .. } | Class::InsideAllocated => {
                    return Err(BuddyError::CompoundPage(p));
                }
                Class::Free => return Err(BuddyError::DoubleFree(p)),
                Class::Leaked => return Err(BuddyError::LeakedPage(p)),
            }
        }
        Ok(())
    }

    /// Frees a run of order-0 pages (`__free_contig_range`, 2026): drops one reference per
    /// page; pages that reach zero and pass the free-time check are gathered into runs (never
    /// across a section boundary), and each run is freed as the fewest naturally aligned
    /// blocks ([`decompose`]), each to a per-cpu list or the buddy as one unit. Pages still
    /// referenced stay allocated; poisoned pages are leaked.
    ///
    /// Every page is checked before anything changes: on an error the zone is untouched.
    ///
    /// # Errors
    /// [`BuddyError::CompoundPage`] if a page belongs to an unsplit high-order block (the
    /// kernel warns and frees nothing), [`BuddyError::DoubleFree`],
    /// [`BuddyError::LeakedPage`], [`BuddyError::OutOfZone`], [`BuddyError::Overflow`],
    /// [`BuddyError::BadCpu`].
    pub fn free_contig_range(&mut self, cpu: usize, pfn: Pfn, nr: u64) -> Result<(), BuddyError> {
        self.check_contig_range(cpu, pfn, nr)?;
        if nr == 0 {
            return Ok(());
        }
        let (mut idx, end) = (
            self.index_unchecked(pfn),
            self.index_unchecked(pfn) + nr as u32,
        );
        while idx < end {
            let (run, next) = self.scan_run(idx, end);
            self.flush_run(cpu, run);
            idx = next;
        }
        Ok(())
    }

    /// From `idx`, drops one reference per page and checks each page that reaches zero
    /// (`put_page_testzero` + `free_pages_prepare`), until one run of freeable pages ends:
    /// at a page still referenced, a leaked page, or a section boundary. Returns the run
    /// (`(first index, length)`, its pages already made tails) and where to continue.
    fn scan_run(&mut self, idx: u32, end: u32) -> (Option<(u32, u32)>, u32) {
        let (start, section_pages) = (self.cfg.start.0, self.cfg.section_pages);
        let section = |i: u32| (start + u64::from(i)) / section_pages;
        let frames = &mut self.frames.as_mut()[idx as usize..end as usize];
        let mut run: Option<(u32, u32)> = None;
        let mut prepares = 0;
        let mut i = idx;
        for f in frames {
            if let Some((s, _)) = run
                && section(s) != section(i)
            {
                break; // this page starts the next run: not touched yet
            }
            i += 1;
            f.refcount -= 1;
            if f.refcount != 0 {
                if run.is_some() {
                    break;
                }
                continue;
            }
            prepares += 1;
            if f.poisoned {
                f.set_head(FrameState::Leaked, 0);
                if run.is_some() {
                    break;
                }
                continue;
            }
            f.make_tail();
            run = Some(run.map_or((i - 1, 1), |(s, len)| (s, len + 1)));
        }
        self.counters.prepares += prepares;
        (run, i)
    }

    /// `free_prepared_contig_range`: frees a run of prepared pages as aligned blocks.
    fn flush_run(&mut self, cpu: usize, run: Option<(u32, u32)>) {
        let Some((start, len)) = run else { return };
        let blocks = decompose(self.pfn_of(start), u64::from(len), self.cfg.max_order);
        // The run lies inside the zone, so pfn + len cannot overflow.
        for (pfn, order) in blocks.into_iter().flatten() {
            let idx = self.index_unchecked(pfn);
            self.free_block(cpu, idx, order);
        }
    }

    /// Allocates `nr_pages` frames the way the kernel's vmalloc does: the largest blocks that
    /// fit (falling back to smaller ones), each split into order-0 pages. The physically
    /// contiguous runs are written to `runs`; the area names the ones used.
    ///
    /// # Errors
    /// [`BuddyError::OutOfMemory`] or [`BuddyError::RunsFull`] (everything allocated so far
    /// is freed again), [`BuddyError::BadCpu`].
    pub fn vmalloc<'r>(
        &mut self,
        cpu: usize,
        nr_pages: u64,
        runs: &'r mut [(Pfn, u64)],
    ) -> Result<VmArea<'r>, BuddyError> {
        self.check_cpu(cpu)?;
        let mut used = 0usize;
        let mut left = nr_pages;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            let mut order = Order::floor_log2(left, self.cfg.max_order);
            let pfn = loop {
                match self.alloc_pages(cpu, order) {
                    Ok(pfn) => break Some(pfn),
                    Err(_) if order > Order::ZERO => order = Order(order.get() - 1),
                    Err(_) => break None,
                }
            };
            let Some(pfn) = pfn else {
                break Err(BuddyError::OutOfMemory(order));
            };
            // A freshly allocated block has one reference and this order, so this does not
            // fail; if it ever did, the block and the runs so far go back like any error.
            if let Err(e) = self.split_page(pfn, order) {
                self.free_pages(cpu, pfn, order)?;
                break Err(e);
            }
            left -= order.pages();
            let extends = used > 0 && runs[used - 1].0.0 + runs[used - 1].1 == pfn.0;
            if extends {
                runs[used - 1].1 += order.pages();
            } else if used < runs.len() {
                runs[used] = (pfn, order.pages());
                used += 1;
            } else {
                self.free_contig_range(cpu, pfn, order.pages())?;
                break Err(BuddyError::RunsFull);
            }
        };
        if let Err(e) = result {
            for &(pfn, len) in &runs[..used] {
                self.free_contig_range(cpu, pfn, len)?;
            }
            return Err(e);
        }
        Ok(VmArea {
            runs: &runs[..used],
        })
    }

    /// Frees a [`Zone::vmalloc`] area: each physically contiguous run with
    /// [`Zone::free_contig_range`].
    ///
    /// # Errors
    /// As [`Zone::free_contig_range`]; runs before the failing one are already freed.
    pub fn vfree(&mut self, cpu: usize, area: &VmArea<'_>) -> Result<(), BuddyError> {
        for &(pfn, len) in area.runs {
            self.free_contig_range(cpu, pfn, len)?;
        }
        Ok(())
    }

    /// Verifies every invariant: the blocks tile the zone (each frame the head of exactly
    /// one block or a tail inside one), blocks are aligned and inside the zone, free lists
    /// are consistent with the frames and their counts, no two free buddies of one order are
    /// both in the buddy below MAX_ORDER, and references are sane.
    ///
    /// # Errors
    /// [`Corruption`] naming the first broken invariant and a frame.
    pub fn check(&self) -> Result<(), Corruption> {
        let frames = self.frames.as_ref();
        let n = frames.len();
        let bad = |what, idx: u32| {
            Err(Corruption {
                what,
                pfn: self.pfn_of(idx),
            })
        };
        let (mut buddy_heads, mut pcp_heads, mut buddy_pages) = (0u64, 0u64, 0u64);
        let mut idx = 0usize;
        while idx < n {
            let f = &frames[idx];
            let i = idx as u32;
            let size = 1usize << f.order;
            match f.state {
                FrameState::Tail => return bad("a tail frame outside any block", i),
                FrameState::Buddy => {
                    buddy_heads += 1;
                    buddy_pages += size as u64;
                }
                FrameState::Pcp => pcp_heads += 1,
                FrameState::Allocated | FrameState::Leaked => {}
            }
            if f.order > self.cfg.max_order.get() {
                return bad("a block above MAX_ORDER", i);
            }
            if !self.pfn_of(i).is_aligned(Order(f.order)) || idx + size > n {
                return bad("a misaligned block or one past the zone", i);
            }
            if (f.state == FrameState::Allocated) == (f.refcount == 0) {
                return bad("a refcount that does not match the state", i);
            }
            if f.state == FrameState::Leaked && f.order != 0 {
                return bad("a leaked block above order 0", i);
            }
            if let Some(t) = frames[idx + 1..idx + size]
                .iter()
                .position(|t| t.state != FrameState::Tail)
            {
                return bad("a head inside another block", (idx + 1 + t) as u32);
            }
            if f.state == FrameState::Buddy && f.order < self.cfg.max_order.get() {
                let buddy = self.pfn_of(i).buddy(Order(f.order));
                if let Ok(b) = self.index(buddy) {
                    let bf = &frames[b as usize];
                    if bf.state == FrameState::Buddy && bf.order == f.order {
                        return bad("two free buddies of one order both in the buddy", i);
                    }
                }
            }
            idx += size;
        }
        let mut listed = 0u64;
        for (o, list) in self.free_area.iter().enumerate() {
            listed += self.check_list(list, FrameState::Buddy, |order| order as usize == o)?;
        }
        if listed != buddy_heads || buddy_pages != self.buddy_pages {
            return bad("buddy lists and frames disagree", 0);
        }
        let mut listed = 0u64;
        for pcp in self.pcps.as_ref() {
            let mut pages = 0u64;
            for (l, list) in pcp.lists.iter().enumerate() {
                listed += self.check_list(list, FrameState::Pcp, |order| {
                    self.pcp_list(Order(order)) == Some(l)
                })?;
                pages += self.list_pages(list);
            }
            if pages != pcp.pages {
                return bad("a per-cpu page count that does not match its lists", 0);
            }
        }
        if listed != pcp_heads {
            return bad("per-cpu lists and frames disagree", 0);
        }
        Ok(())
    }

    /// Walks one list, checking links, states and orders; returns its length.
    fn check_list(
        &self,
        list: &List,
        state: FrameState,
        order_ok: impl Fn(u8) -> bool,
    ) -> Result<u64, Corruption> {
        let frames = self.frames.as_ref();
        let (mut idx, mut prev, mut len) = (list.head, crate::frame::NIL, 0u64);
        while idx != crate::frame::NIL {
            let f = &frames[idx as usize];
            let fail = |what| {
                Err(Corruption {
                    what,
                    pfn: self.pfn_of(idx),
                })
            };
            if f.prev != prev {
                return fail("a broken list link");
            }
            if f.state != state || !order_ok(f.order) {
                return fail("a list entry of the wrong state or order");
            }
            len += 1;
            if len > frames.len() as u64 {
                return fail("a cycle in a free list");
            }
            prev = idx;
            idx = f.next;
        }
        if list.tail != prev || u64::from(list.len) != len {
            return Err(Corruption {
                what: "a list head whose tail or length is wrong",
                pfn: self.cfg.start,
            });
        }
        Ok(len)
    }

    fn list_pages(&self, list: &List) -> u64 {
        let frames = self.frames.as_ref();
        let (mut idx, mut pages) = (list.head, 0);
        while idx != crate::frame::NIL {
            pages += 1u64 << frames[idx as usize].order;
            idx = frames[idx as usize].next;
        }
        pages
    }
}

/// Frames a [`Zone::vmalloc`] call allocated: physically contiguous runs of order-0 pages.
#[derive(Debug)]
pub struct VmArea<'r> {
    runs: &'r [(Pfn, u64)],
}

impl<'r> VmArea<'r> {
    /// An area made of the given runs, e.g. ones saved from an earlier [`Zone::vmalloc`].
    #[must_use]
    pub const fn from_runs(runs: &'r [(Pfn, u64)]) -> Self {
        Self { runs }
    }

    /// The runs: `(first frame, frames)`.
    #[must_use]
    pub fn runs(&self) -> &[(Pfn, u64)] {
        self.runs
    }

    /// Frames in the area.
    #[must_use]
    pub fn pages(&self) -> u64 {
        self.runs.iter().map(|r| r.1).sum()
    }
}

/// A broken invariant found by [`Zone::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corruption {
    /// Which invariant.
    pub what: &'static str,
    /// A frame where it shows.
    pub pfn: Pfn,
}

impl core::fmt::Display for Corruption {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} at frame {}", self.what, self.pfn)
    }
}
