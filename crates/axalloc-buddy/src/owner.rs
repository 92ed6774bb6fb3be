//! Who holds which pages (feature `page-owner`): buddy-sim's page_owner
//! ([`buddy_sim::page_owner`]) in every region's zone, each block recorded with the
//! [`UsageKind`] its page call named, the CPU, and, while tracking is on, a sequence number
//! the allocator hands out across all its regions (and to the heap's own records, ArceOS's
//! `tracking`), so that one number orders every allocation the kernel made.
//!
//! Without the feature, [`OwnerTag`] and [`Owners`] are empty and every call on them is a
//! no-op: the page calls carry nothing of it.

use crate::frames::PageZone;
use crate::usage::UsageKind;

/// What a page call's blocks are recorded with: its [`UsageKind`] (bits 0..8, the kind's
/// number plus one) and, while tracking is on, its sequence number plus one (bits 8..64; 0
/// when untracked). Empty without the feature.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnerTag(#[cfg(feature = "page-owner")] u64);

impl OwnerTag {
    /// Makes this tag what `cpu` of `zone` is doing: the zone records it with each block the
    /// CPU allocates next (the caller holds the CPU's slot, so no other call on that CPU
    /// allocates between).
    #[inline(always)]
    pub(crate) fn set(self, zone: &PageZone, cpu: usize) {
        #[cfg(feature = "page-owner")]
        if zone.set_owner_tag(cpu, self.0).is_err() {
            log::warn!("page_owner: no CPU {cpu} in the zone");
        }
        #[cfg(not(feature = "page-owner"))]
        let _ = (zone, cpu);
    }
}

/// The allocator's side of page_owner: the next sequence number, and whether page calls
/// take one (tracking) and new regions get records (page_owner on). Empty without the
/// feature.
#[derive(Debug)]
pub(crate) struct Owners {
    #[cfg(feature = "page-owner")]
    next: core::sync::atomic::AtomicU64,
    #[cfg(feature = "page-owner")]
    tracking: core::sync::atomic::AtomicBool,
    #[cfg(feature = "page-owner")]
    on: core::sync::atomic::AtomicBool,
}

impl Owners {
    /// Off, untracked, the first sequence number next.
    pub(crate) const fn new() -> Self {
        Self {
            #[cfg(feature = "page-owner")]
            next: core::sync::atomic::AtomicU64::new(0),
            #[cfg(feature = "page-owner")]
            tracking: core::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "page-owner")]
            on: core::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The tag of a page call for `kind`: its sequence number taken while tracking is on.
    #[inline(always)]
    pub(crate) fn tag(&self, kind: UsageKind) -> OwnerTag {
        #[cfg(feature = "page-owner")]
        {
            use core::sync::atomic::Ordering::Relaxed;
            let seq = if self.tracking.load(Relaxed) {
                // Sequence numbers are 56 bits (the tag's bits 8..64): they wrap there.
                (self.next.fetch_add(1, Relaxed) & SEQ_MASK) + 1
            } else {
                0
            };
            OwnerTag(seq << 8 | (kind as u64 + 1))
        }
        #[cfg(not(feature = "page-owner"))]
        {
            let _ = kind;
            OwnerTag()
        }
    }
}

#[cfg(feature = "page-owner")]
pub use enabled::OwnedRun;
#[cfg(feature = "page-owner")]
const SEQ_MASK: u64 = (1 << 56) - 1;

#[cfg(feature = "page-owner")]
mod enabled {
    use super::SEQ_MASK;
    use crate::cpu::CpuId;
    use crate::frames::{Frames, PAGE};
    use crate::global::GlobalAllocator;
    use crate::usage::{UsageKind, Usages};
    use axallocator::{AllocError, AllocResult, PageAllocator};
    use buddy_sim::OwnerRecord;
    use core::sync::atomic::Ordering::Relaxed;
    use strum::VariantArray;

    /// A run of pages the allocator handed out, as page_owner recorded it: one block, or
    /// adjacent blocks of one call (same kind, CPU and sequence number).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct OwnedRun {
        /// Its first page's address.
        pub addr: usize,
        /// Its pages.
        pub pages: usize,
        /// What its call said it is for (`None` for a block recorded without a kind: one the
        /// zone allocated for no page call, such as a compaction's target).
        pub kind: Option<UsageKind>,
        /// The CPU whose lists it came from (`None` for none in particular: a fixed-address
        /// run).
        pub cpu: Option<usize>,
        /// Its place in the order of tracked allocations
        /// ([`GlobalAllocator::next_sequence`]); `None` for a run allocated while tracking
        /// was off.
        pub sequence: Option<u64>,
    }

    impl OwnedRun {
        /// The run of the block `b` recorded in a zone of frames numbered by address.
        fn of(b: &buddy_sim::page_owner::OwnedBlock) -> Self {
            let kind_number = (b.tag & 0xff) as usize;
            let seq = b.tag >> 8;
            Self {
                addr: (b.pfn.0 as usize).wrapping_mul(PAGE),
                pages: 1usize.checked_shl(u32::from(b.order.get())).unwrap_or(0),
                kind: kind_number
                    .checked_sub(1)
                    .and_then(|k| UsageKind::VARIANTS.get(k).copied()),
                cpu: (b.cpu != buddy_sim::page_owner::NO_CPU).then_some(usize::from(b.cpu)),
                sequence: seq.checked_sub(1),
            }
        }

        /// Whether `next`, the block after this run in memory, belongs to the same call.
        fn continued_by(&self, next: &Self) -> bool {
            self.sequence.is_some()
                && (self.sequence, self.kind, self.cpu) == (next.sequence, next.kind, next.cpu)
                && self.addr.wrapping_add(self.pages.wrapping_mul(PAGE)) == next.addr
        }
    }

    impl<C: CpuId> GlobalAllocator<C> {
        /// Starts page_owner: every region's zone records from now on who holds each block
        /// it hands out (kind, CPU, and while tracking is on the call's sequence number),
        /// in a table of records taken from the region's own pages (a few bytes per page,
        /// never given back, as Linux's `page_ext`), and every region given later gets one
        /// too. Blocks handed out before are not recorded. Returns the pages the tables
        /// took (not counted in any usage); a region that has a table keeps it.
        ///
        /// # Errors
        /// `NoMemory` when a region has no free run for its table (the regions before it
        /// keep theirs, and later calls retry it); before `init`, nothing to record.
        pub fn enable_page_owner(&self) -> AllocResult<usize> {
            self.owners().on.store(true, Relaxed);
            let mut pages = 0;
            for frames in self.regions() {
                pages += Self::give_owner_table(frames)?;
            }
            Ok(pages)
        }

        /// Gives the zone of `frames` its page_owner table, from its own pages, if page_owner
        /// is on and it has none: the pages taken.
        pub(crate) fn owner_table_for_new(&self, frames: &Frames<C>) -> AllocResult<usize> {
            if self.owners().on.load(Relaxed) {
                Self::give_owner_table(frames)
            } else {
                Ok(0)
            }
        }

        fn give_owner_table(frames: &Frames<C>) -> AllocResult<usize> {
            let zone = frames.zone();
            if zone.page_owner_enabled() {
                return Ok(0);
            }
            let records =
                usize::try_from(zone.config().nr_pages).map_err(|_| AllocError::NoMemory)?;
            let bytes = records
                .checked_mul(core::mem::size_of::<OwnerRecord>())
                .ok_or(AllocError::NoMemory)?;
            let pages = bytes.div_ceil(PAGE);
            let at = frames.this_cpu().pages.alloc_pages(pages, PAGE)?;
            let table = at as *mut OwnerRecord;
            // SAFETY: the run of `pages` pages at `at` was just handed out by this region's
            // zone, whose memory is readable and writable at these addresses (the contract
            // of `init`/`add_memory`) and is never given back: the table lives as long as
            // the zone. Its `bytes <= pages * PAGE` bytes hold `records` records, page-aligned
            // (more than an `OwnerRecord`'s alignment), each written before the slice is made.
            let table: &'static [OwnerRecord] = unsafe {
                for i in 0..records {
                    table.add(i).write(OwnerRecord::new());
                }
                core::slice::from_raw_parts(table, records)
            };
            match zone.enable_page_owner(table) {
                Ok(()) => Ok(pages),
                // Another CPU gave it one in between: this run stays unused (a leak of a few
                // pages, once; the table must outlive any reader, so it is not given back).
                Err(_) => Ok(0),
            }
        }

        /// Whether page calls take a sequence number ([`GlobalAllocator::next_sequence`]),
        /// which page_owner records with their blocks: ArceOS's `tracking`, for pages.
        /// Page_owner must be on ([`GlobalAllocator::enable_page_owner`]) for blocks to be
        /// recorded at all.
        pub fn set_page_tracking(&self, on: bool) {
            self.owners().tracking.store(on, Relaxed);
        }

        /// Whether page calls are tracked.
        pub fn page_tracking(&self) -> bool {
            self.owners().tracking.load(Relaxed)
        }

        /// Takes the next sequence number: the heap's records (ArceOS's `tracking`) number
        /// their allocations with the page calls' numbers, in one order. Numbers are 56
        /// bits and wrap there.
        pub fn next_sequence(&self) -> u64 {
            self.owners().next.fetch_add(1, Relaxed) & SEQ_MASK
        }

        /// The sequence number the next tracked allocation gets (a mark for a leak report:
        /// what is alive with a number from it on was allocated after it).
        pub fn sequence(&self) -> u64 {
            self.owners().next.load(Relaxed) & SEQ_MASK
        }

        /// Calls `f` on every run page_owner records as handed out, region by region in
        /// address order (adjacent blocks of one tracked call as one run). Records are read
        /// without locks: a run allocated or freed meanwhile may be listed with another
        /// call's fields, or not at all.
        pub fn owned_runs(&self, mut f: impl FnMut(OwnedRun)) {
            for frames in self.regions() {
                let mut run: Option<OwnedRun> = None;
                for block in frames.zone().owned_blocks() {
                    let next = OwnedRun::of(&block);
                    match &mut run {
                        Some(r) if r.continued_by(&next) => r.pages += next.pages,
                        _ => {
                            if let Some(done) = run.replace(next) {
                                f(done);
                            }
                        }
                    }
                }
                if let Some(done) = run {
                    f(done);
                }
            }
        }

        /// The bytes of pages held per kind, as page_owner's records say: what
        /// [`GlobalAllocator::usages`] counts as the calls go, from the other side (every
        /// block recorded: those handed out since [`GlobalAllocator::enable_page_owner`]).
        /// The heap's kind counts its pages here, its bytes there.
        pub fn owner_usages(&self) -> Usages {
            let mut bytes = [0usize; UsageKind::VARIANTS.len()];
            self.owned_runs(|r| {
                if let Some(kind) = r.kind {
                    bytes[kind as usize] =
                        bytes[kind as usize].wrapping_add(r.pages.wrapping_mul(PAGE));
                }
            });
            Usages::from_bytes(bytes)
        }
    }
}
