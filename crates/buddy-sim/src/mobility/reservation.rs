//! CMA reservations (Linux's `cma_declare_contiguous` + `cma_activate_area`, made at run
//! time): frames set aside for one owner's contiguous runs (gigantic pages through
//! `hugetlb_cma=`, device buffers through `cma=`) that movable allocations borrow
//! meanwhile.
//!
//! A reservation is made of whole pageblocks. It is taken as a contiguous range first (the
//! movable allocations in the way are migrated out, exactly as `alloc_contig_range` does,
//! so a zone in use can reserve), its pageblocks are then marked (`MIGRATE_CMA`: movable,
//! on free lists of their own) and its frames freed into them. From then on:
//! - only movable allocations take its free frames (after their own pageblocks, or first
//!   while the reservations hold over half the zone's free frames, as Linux's `__rmqueue`
//!   balances them); unmovable and reclaimable ones never do, not even by falling back;
//! - its free blocks never merge with, nor are claimed for, other pageblocks;
//! - a contiguous run [`from_cma`](crate::AllocRequest::from_cma) the area (Linux's
//!   `cma_alloc`) is searched inside it, migrating the borrowers out; a run without it is
//!   never taken there. Freeing the run (dropping its [`Block`](crate::Block),
//!   `free_contig_range`) gives the frames back to the reservation (`cma_release`).

use crate::cma::CmaArea;
use crate::error::alloc::AllocError;
use crate::error::contig::ContigError;
use crate::frame::Word;
use crate::frame_storage::FrameStorage;
use crate::migrate::Migrate;
use crate::migratetype::{MigrateType, Pageblock};
use crate::mobility::contig_alloc::Take;
use crate::types::Order;
use crate::zone::Zone;
use crate::zone::cpu::{Access, Cpu};
use crate::zone::pcp::CpuLists;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Makes the run `[pfn, pfn + nr)`, whole pageblocks this call allocated as order-0
    /// pages, a CMA reservation: marks its pageblocks and frees its frames into them. If
    /// another CPU reserved one of its pageblocks meanwhile (it read the pageblocks before
    /// it took the run), nothing is marked, the run is freed, and the first such pageblock
    /// is returned.
    fn activate_cma(&self, pcp: CpuLists<'_, R>, pfn: Pfn, nr: u64) -> Result<CmaArea, Pfn> {
        let m = self.map();
        let mut taken = Ok(CmaArea::new(pfn, nr));
        // The caller allocated the run inside the zone.
        if let Ok(pages) = m.range(pfn, nr) {
            let mut free = self.lock_zone();
            if let Some(b) = m
                .pageblocks(pages.clone())
                .find(|b| m.pageblock(b.start).cma)
            {
                taken = Err(m.pfn(b.start));
            } else {
                let reserved = Pageblock {
                    cma: true,
                    ..Pageblock::of(MigrateType::Movable)
                };
                // Every frame is this call's allocated page: no free block changes lists.
                for block in m.pageblocks(pages) {
                    m.pageblock_bits_frame(block.start)
                        .set_pageblock_bits(reserved.bits());
                }
                free.add_cma_reserved(nr);
            }
        }
        // SAFETY: the caller allocated the run as order-0 pages with one reference each and
        // hands it to nobody; freeing it cannot fail.
        #[allow(unsafe_code)]
        let _ = unsafe { self.free_contig_range_on(pcp, pfn, nr) };
        taken
    }
}

impl<F, P, R, A, C> Cpu<'_, F, P, R, A, C>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
    A: Access,
{
    /// Reserves `nr` frames for CMA anywhere in the zone (Linux's `cma_declare_contiguous`
    /// with `cma_activate_area`; per node, `hugetlb_cma=`): `nr` rounded up to whole
    /// pageblocks, starting aligned to `align` (at least the pageblock order; it may exceed
    /// MAX_ORDER), found as a [`contiguous`](crate::AllocRequest::contiguous) run is, with
    /// the movable allocations in the way migrated out through `migrate`. See the module
    /// docs for what the reservation does.
    ///
    /// # Errors
    /// As a contiguous run's allocation ([`Cpu::alloc_raw`]): [`AllocError::ZeroPages`],
    /// [`AllocError::OutOfMemory`] when no candidate could be taken (a length past the pfn
    /// space included). Nothing is reserved then.
    pub fn reserve_cma(
        &self,
        nr: u64,
        align: Order,
        migrate: &mut impl Migrate,
    ) -> Result<CmaArea, AllocError> {
        let pb = self.zone.cfg.pageblock_order;
        let nr = nr
            .checked_next_multiple_of(pb.pages())
            .ok_or(AllocError::OutOfMemory(self.zone.cfg.max_order))?;
        let take = Take::Pages(Word::allocated(0));
        loop {
            let pfn =
                self.zone
                    .contig_pages(self.lists(), (nr, align.max(pb)), take, None, migrate)?;
            // A reservation another CPU made meanwhile: the search passes over it now.
            if let Ok(area) = self.zone.activate_cma(self.lists(), pfn, nr) {
                return Ok(area);
            }
        }
    }

    /// Reserves exactly the frames `[pfn, pfn + nr)` for CMA (Linux's `cma=size@base`),
    /// migrating the movable allocations in the way out through `migrate`.
    ///
    /// # Errors
    /// [`ContigError::Misaligned`] (with the pageblock order) when `pfn` or `pfn + nr` is not
    /// a pageblock boundary; [`ContigError::InCma`] for a frame already reserved; as
    /// [`Cpu::alloc_contig_range`] otherwise. Nothing is reserved then.
    pub fn reserve_cma_at(
        &self,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<CmaArea, ContigError> {
        let m = self.zone.map();
        let pages = m.range(pfn, nr)?;
        let pb = self.zone.cfg.pageblock_order;
        let end = Pfn(pfn.0 + nr);
        if let Some(at) = [pfn, end].into_iter().find(|&p| !pb.aligns(p)) {
            return Err(ContigError::Misaligned { pfn: at, order: pb });
        }
        // A look before anything moves (`activate_cma` decides under the zone lock).
        if let Some(b) = m.pageblocks(pages).find(|b| m.pageblock(b.start).cma) {
            return Err(ContigError::InCma(m.pfn(b.start)));
        }
        let take = Take::Pages(Word::allocated(0));
        self.zone
            .contig_range(self.lists(), pfn, nr, take, migrate)?;
        self.zone
            .activate_cma(self.lists(), pfn, nr)
            .map_err(ContigError::InCma)
    }
}
