//! page_owner, as Linux's (`CONFIG_PAGE_OWNER`): who allocated each block still allocated.
//! Off until the embedder hands the zone a table of [`OwnerRecord`]s, one per frame of its
//! span, in storage of its own ([`Zone::enable_page_owner`]), as it hands it the frame
//! table. Then every block allocation records, in its head frame's record, its order and
//! kind, the CPU, that CPU's owner tag ([`Zone::set_owner_tag`]: what the embedder says
//! the CPU is doing, Linux's pid and stack) and an allocation sequence number; every free
//! clears it. [`Zone::owned_blocks`] lists the blocks allocated, [`PageOwnerDump`] prints
//! them in the layout of Linux's `page_owner` file, [`TopOwners`] groups them by tag as
//! `page_owner_sort` does, and [`Zone::owner_mark`] with [`Zone::blocks_since`] is a leak
//! report: the blocks allocated past a mark and still alive.
//!
//! Records are read without locks: a block allocated or freed while a dump reads it may be
//! listed with another allocation's fields, or not at all. Contiguous runs
//! (`alloc_contig_pages` and the rest) are not recorded.

use crate::frame_storage::FrameStorage;
use crate::zone::per_cpu_set::PerCpuSet;
use core::fmt;

use crate::debugging::DEBUG_OWNER;
use crate::migratetype::MigrateType;
pub use crate::owner_record::{NO_CPU, OwnedBlock, OwnerRecord, PageOwnerError};
use crate::sync::Ordering;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::pcp::CpuLists;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Starts recording owners into `records`, one per frame of the zone's span (more are
    /// not used). Blocks allocated before are not recorded.
    ///
    /// ```
    /// use buddy_sim::{OwnerRecord, Pfn, StaticZone, Order};
    /// use buddy_sim::page_owner::TopOwners;
    /// static ZONE: StaticZone<1024, 1> = StaticZone::new_static_at(Pfn(0x1000));
    /// static OWNERS: [OwnerRecord; 1024] = [const { OwnerRecord::new() }; 1024];
    ///
    /// ZONE.enable_page_owner(&OWNERS)?;
    /// ZONE.set_owner_tag(0, 0x7461_626c)?; // "tabl": page tables
    /// let table = ZONE.alloc_pages(0, Order::ZERO)?;
    /// let mark = ZONE.owner_mark();
    /// ZONE.set_owner_tag(0, 0x6865_6170)?; // "heap"
    /// let heap = ZONE.alloc_pages(0, Order::new(2)?)?;
    /// assert_eq!(ZONE.blocks_since(mark).count(), 1); // alive past the mark: the heap run
    /// let top = TopOwners::of(&ZONE);
    /// assert_eq!(format!("{top}"), "1 times, 4 pages, tag \"heap\"\n1 times, 1 pages, tag \"tabl\"\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`PageOwnerError::TooShort`] for a table shorter than the span,
    /// [`PageOwnerError::AlreadyEnabled`] if the zone was given one before.
    pub fn enable_page_owner(&self, records: &'static [OwnerRecord]) -> Result<(), PageOwnerError> {
        let frames = self.cfg.nr_pages;
        if (records.len() as u64) < frames {
            return Err(PageOwnerError::TooShort {
                records: records.len(),
                frames,
            });
        }
        let ptr = records.as_ptr().cast_mut();
        self.owners
            .table
            .compare_exchange(
                core::ptr::null_mut(),
                ptr,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map_err(|_| PageOwnerError::AlreadyEnabled)?;
        self.set_debugging(DEBUG_OWNER, true);
        Ok(())
    }

    /// Whether page_owner is on: the zone was given its table
    /// ([`Zone::enable_page_owner`]).
    pub fn page_owner_enabled(&self) -> bool {
        self.owner_records().is_some()
    }

    /// The records, if page_owner is on.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn owner_records(&self) -> Option<&'static [OwnerRecord]> {
        let ptr = self.owners.table.load(Ordering::Acquire);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: a non-null pointer is the start of the `&'static [OwnerRecord]` that
        // `enable_page_owner` checked holds at least `nr_pages` records (and `nr_pages`
        // fits a `u32`, the zone's index space); it is never changed after.
        Some(unsafe { core::slice::from_raw_parts(ptr, self.cfg.nr_pages as usize) })
    }

    /// Records the allocation of the block at `idx` on `cpu`'s lists (page_owner on).
    pub(crate) fn record_owner(
        &self,
        cpu: Option<CpuLists<'_, R>>,
        idx: FrameIdx,
        order: Order,
        mt: MigrateType,
    ) {
        if let Some(records) = self.owner_records() {
            self.record_owner_in(records, cpu, idx, order, mt);
        }
    }

    fn record_owner_in(
        &self,
        records: &[OwnerRecord],
        cpu: Option<CpuLists<'_, R>>,
        idx: FrameIdx,
        order: Order,
        mt: MigrateType,
    ) {
        let (n, tag) = match cpu {
            Some(c) => {
                let n = self.cpu_number(c).get().min(NO_CPU as usize);
                (n as u16, c.pcp.owner_tag.load(Ordering::Relaxed))
            }
            None => (NO_CPU, 0),
        };
        let seq = self.owners.seq.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = records.get(idx.get()) {
            r.set(order, mt, n, tag, seq);
        }
    }

    /// Clears the records of the block of `order` at `idx`, freed (page_owner on): every
    /// frame's, as Linux's `__reset_page_owner` does, since a block freed whole may hold
    /// pieces recorded apart (a block split into pages, then freed as one run).
    pub(crate) fn clear_owner(&self, idx: FrameIdx, order: Order) {
        if let Some(records) = self.owner_records() {
            let end = idx
                .get()
                .saturating_add(1 << order.get())
                .min(records.len());
            if let Some(block) = records.get(idx.get()..end) {
                block.iter().for_each(OwnerRecord::clear);
            }
        }
    }

    /// The block at `src` moved to `dst` (migration): its record moves with it, as Linux's
    /// `folio_copy_owner`.
    pub(crate) fn move_owner(&self, src: FrameIdx, dst: FrameIdx) {
        let Some(records) = self.owner_records() else {
            return;
        };
        if let (Some(from), Some(to)) = (records.get(src.get()), records.get(dst.get())) {
            from.copy_to(to, None);
            from.clear();
        }
    }

    /// The block at `idx` of `order` was split into the blocks `pieces` (each first frame
    /// and order, the first at `idx`): each gets the block's record, with its own order.
    pub(crate) fn split_owner(
        &self,
        idx: FrameIdx,
        pieces: impl Iterator<Item = (FrameIdx, Order)>,
    ) {
        let Some(records) = self.owner_records() else {
            return;
        };
        let Some(head) = records.get(idx.get()) else {
            return;
        };
        // The head's own piece last: the others copy its record before it changes order.
        let mut head_order = None;
        for (at, order) in pieces {
            if at == idx {
                head_order = Some(order);
            } else if let Some(r) = records.get(at.get()) {
                head.copy_to(r, Some(order));
            }
        }
        if let Some(order) = head_order {
            head.copy_to(head, Some(order));
        }
    }

    /// Sets what CPU `cpu` is doing, as page_owner records it with each block the CPU
    /// allocates from now on (0 until set): a subsystem's name, a task, a return address.
    ///
    /// # Errors
    /// [`NoSuchCpu`](crate::error::NoSuchCpu).
    pub fn set_owner_tag(&self, cpu: usize, tag: u64) -> Result<(), crate::error::NoSuchCpu> {
        let pcp = self
            .pcps
            .slots()
            .get(cpu)
            .ok_or(crate::error::NoSuchCpu(cpu))?;
        pcp.owner_tag.store(tag, Ordering::Relaxed);
        Ok(())
    }

    /// A mark in the zone's allocation order: [`Zone::blocks_since`] lists the blocks
    /// allocated after it and still alive.
    pub fn owner_mark(&self) -> u64 {
        self.owners.seq.load(Ordering::Relaxed)
    }

    /// Every block allocated whose owner is recorded, in frame order (none while page_owner
    /// is off).
    pub fn owned_blocks(&self) -> impl Iterator<Item = OwnedBlock> + '_ {
        let records = self.owner_records().unwrap_or(&[]);
        let start = self.cfg.start.0;
        records
            .iter()
            .enumerate()
            .filter_map(move |(i, r)| r.read(Pfn(start + i as u64)))
    }

    /// The leak report: the blocks allocated after `mark` ([`Zone::owner_mark`]) and alive
    /// now.
    pub fn blocks_since(&self, mark: u64) -> impl Iterator<Item = OwnedBlock> + '_ {
        self.owned_blocks().filter(move |b| b.seq >= mark)
    }
}

/// Linux's `page_owner` file for a zone (`Display`): per block recorded, `Page allocated
/// via order {order}, kind {kind}, cpu {cpu}, tag {tag:#x}, seq {seq}` and `PFN {pfn:#x}
/// type {kind} Block {pageblock} type {kind}`, then an empty line, in frame order.
pub struct PageOwnerDump<'a, F, P, R>(pub &'a Zone<F, P, R>);

impl<F, P, R> fmt::Display for PageOwnerDump<'_, F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shift = self.0.cfg.pageblock_order.get();
        for b in self.0.owned_blocks() {
            let kind = crate::vmstat::snapshot::FreeListType::ALL[b.kind as usize].name();
            writeln!(
                f,
                "Page allocated via order {}, kind {kind}, cpu {}, tag {:#x}, seq {}",
                b.order.get(),
                b.cpu,
                b.tag,
                b.seq
            )?;
            writeln!(
                f,
                "PFN {:#x} type {kind} Block {} type {kind}",
                b.pfn.0,
                b.pfn.0 >> shift
            )?;
            writeln!(f)?;
        }
        Ok(())
    }
}

/// The owners holding most memory, as `page_owner_sort` groups blocks by stack: per tag,
/// the blocks and frames allocated, largest first ([`TopOwners::OWNERS`] of them; the
/// frames of tags past those, and of more distinct tags than it counts, in `other_pages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopOwners {
    /// Per tag, `(tag, blocks, frames)`, most frames first; `len` of them used.
    pub owners: [(u64, u64, u64); Self::OWNERS],
    /// How many of `owners` are used.
    pub len: usize,
    /// Frames of the owners not listed.
    pub other_pages: u64,
}

impl TopOwners {
    /// Owners listed.
    pub const OWNERS: usize = 8;
    /// Distinct tags counted before the rest go to `other_pages`.
    const COUNTED: usize = 64;

    /// The top owners of `zone` now.
    pub fn of<F, P, R>(zone: &Zone<F, P, R>) -> Self
    where
        F: FrameStorage,
        P: PerCpuSet<R>,
        R: RawMutex,
    {
        let mut counted = [(0u64, 0u64, 0u64); Self::COUNTED];
        let (mut used, mut other_pages) = (0, 0);
        for b in zone.owned_blocks() {
            let pages = b.order.pages();
            match counted[..used].iter_mut().find(|c| c.0 == b.tag) {
                Some(c) => {
                    c.1 += 1;
                    c.2 += pages;
                }
                None if used < Self::COUNTED => {
                    counted[used] = (b.tag, 1, pages);
                    used += 1;
                }
                None => other_pages += pages,
            }
        }
        counted[..used]
            .sort_unstable_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
        let len = used.min(Self::OWNERS);
        let mut owners = [(0, 0, 0); Self::OWNERS];
        owners[..len].copy_from_slice(&counted[..len]);
        other_pages += counted[len..used].iter().map(|c| c.2).sum::<u64>();
        Self {
            owners,
            len,
            other_pages,
        }
    }
}

impl fmt::Display for TopOwners {
    /// One line per owner, as `page_owner_sort` prints a group: `{blocks} times, {pages}
    /// pages, tag {tag}`, the tag in hex, or quoted where its bytes (big-endian, leading
    /// zeros dropped) are printable ASCII (a name the embedder packed into it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &(tag, blocks, pages) in &self.owners[..self.len] {
            write!(f, "{blocks} times, {pages} pages, tag ")?;
            let bytes = tag.to_be_bytes();
            let name = &bytes[(tag.leading_zeros() / 8) as usize..];
            match core::str::from_utf8(name) {
                Ok(s) if tag != 0 && name.iter().all(|b| b.is_ascii_graphic() || *b == b' ') => {
                    writeln!(f, "\"{s}\"")?;
                }
                _ => writeln!(f, "{tag:#x}")?,
            }
        }
        if self.other_pages > 0 {
            writeln!(f, "{} pages of other owners", self.other_pages)?;
        }
        Ok(())
    }
}
