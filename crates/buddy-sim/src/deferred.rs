//! Memory added in large ranges becomes usable in steps, as Linux's `deferred_init_memmap`
//! does for struct pages: [`Zone::add_memory`] initializes the first
//! [`ZoneConfig::eager_pages`](crate::ZoneConfig::eager_pages) frames of a range at once (what allocation needs first) and records the rest; any CPU then
//! initializes it a section at a time with [`Zone::init_deferred`] (several CPUs in
//! parallel: only the hand-over of each section takes the zone lock), and the allocation slow
//! path does so before it reports that memory is out. A deferred frame reads as reserved
//! until its section is initialized.
//!
//! The zone remembers the ranges it was given (merged, up to [`MAX_ADDED_RANGES`]) so that
//! adding a range checks overlap against them instead of reading every frame; past that many
//! disjoint ranges it reads the frames of a range that overlaps none it holds, and
//! initializes such a range at once (only a recorded range is ever deferred, so a deferred
//! frame, or one being initialized, is always found by the table).

use crate::decompose::decompose;
use crate::frame_storage::FrameStorage;
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use crate::zone::ranges::DEFERRED_CHUNK_PAGES;
use lock_api::RawMutex;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Initializes up to `max_pages` frames of deferred memory (at least one chunk when
    /// there is any), a chunk of up to [`DEFERRED_CHUNK_PAGES`] frames at a time: the chunk
    /// is taken off the deferred list under the zone lock, its frames written outside it,
    /// and its blocks freed into the buddy under it again. Call it from an idle loop or a
    /// housekeeping core, or from every CPU at boot to initialize a large machine in
    /// parallel. Returns how many frames it initialized (0: none was deferred).
    pub fn init_deferred(&self, max_pages: u64) -> u64 {
        let m = self.map();
        let mut done = 0u64;
        while done < max_pages.max(1) {
            let Some((chunk, zeroed)) = self.lock_zone().take_deferred(max_pages - done) else {
                break;
            };
            // The chunk's frames are reserved and off every list: this call alone writes them
            // (others read them only to name an error).
            let blocks = decompose(
                m.pfn(chunk.start),
                u64::from(chunk.end - chunk.start),
                self.cfg.max_order,
            );
            m.init_tails(blocks.clone().into_iter().flatten());
            let poisoning = self.poisoning();
            if poisoning {
                for (head, order) in blocks.into_iter().flatten() {
                    self.poison_added(head, order);
                }
            }
            let zeroed = zeroed && !poisoning;
            let mut free = self.lock_zone();
            free.init_pageblocks(m, chunk.clone());
            let blocks = decompose(
                m.pfn(chunk.start),
                u64::from(chunk.end - chunk.start),
                self.cfg.max_order,
            );
            for (head, order) in blocks.into_iter().flatten() {
                free.free_one_page(m, m.index_of(head), order, zeroed);
            }
            free.finish_deferred(&chunk);
            done += u64::from(chunk.end - chunk.start);
        }
        done
    }

    /// Frames added but not initialized yet ([`Zone::init_deferred`]).
    pub fn deferred_pages(&self) -> u64 {
        self.free.lock().deferred().pages
    }

    /// How many deferred chunks were initialized so far (for [`Zone::grow_from_deferred`]).
    pub(crate) fn deferred_generation(&self) -> u64 {
        self.lock_zone().deferred().completed
    }

    /// The allocation slow path's last resort, after an attempt that failed having seen
    /// `seen` ([`Zone::deferred_generation`]) before it: initializes a chunk of deferred
    /// memory, or waits for another CPU that is initializing the last ones. True when memory
    /// came in since `seen` (the caller tries again), false when none is left to come.
    pub(crate) fn grow_from_deferred(&self, seen: u64) -> bool {
        loop {
            if self.init_deferred(DEFERRED_CHUNK_PAGES) > 0 {
                return true;
            }
            let free = self.lock_zone();
            if free.deferred().completed != seen {
                return true;
            }
            if free.deferred().in_flight == 0 {
                return false;
            }
            drop(free);
            crate::sync::spin_loop();
        }
    }
}
