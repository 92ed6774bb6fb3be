//! The zone's named calls that name a CPU: each one line over [`Zone::cpu`] and, for the
//! allocations, an [`AllocRequest`]. For callers that make one call on a CPU; a caller that
//! makes several resolves the CPU once with [`Zone::cpu`] and calls the handle.

use crate::cma::CmaArea;
use crate::error::alloc::AllocError;
use crate::error::contig::ContigError;
use crate::error::free::FreeError;
use crate::frame_storage::FrameStorage;
use crate::memory::{Clearing, FrameClearer, FrameMemory};
use crate::migrate::Migrate;
use crate::migratetype::MigrateType;
use crate::mobility::compaction::{CompactStats, CompactWork};
use crate::reclaim::Reclaim;
use crate::request::{AllocRequest, HeadTag};
use crate::types::Order;
use crate::vmalloc::VmArea;
use crate::zeroed::Zeroing;
use crate::zone::Zone;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::FrameRange;
use mm_types::Pfn;
use zero_core::Resched;

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// An unmovable block of `2^order` frames on CPU `cpu`:
    /// `self.cpu(cpu)?.alloc_raw(AllocRequest::order(order))` ([`Cpu::alloc_raw`](crate::Cpu::alloc_raw)).
    /// Free it with [`Zone::free_pages`].
    ///
    /// # Errors
    /// [`AllocError::BadCpu`], [`AllocError::OrderTooLarge`], [`AllocError::OutOfMemory`].
    #[inline]
    pub fn alloc_pages(&self, cpu: usize, order: Order) -> Result<Pfn, AllocError> {
        self.cpu(cpu)?.alloc_raw(AllocRequest::order(order))
    }

    /// A movable block of `2^order` frames under the embedder's `key` on CPU `cpu`:
    /// `self.cpu(cpu)?.alloc_raw(AllocRequest::order(order).movable(key))`. Compaction and
    /// contiguous allocation may move it, handing `key` to the embedder's
    /// [`Migrate`] callback; its frame number changes then.
    ///
    /// # Errors
    /// As [`Zone::alloc_pages`].
    #[inline]
    pub fn alloc_movable(&self, cpu: usize, order: Order, key: u64) -> Result<Pfn, AllocError> {
        self.cpu(cpu)?
            .alloc_raw(AllocRequest::order(order).movable(key))
    }

    /// An unmovable block of `2^order` frames that reads zero, on CPU `cpu`: what
    /// `self.cpu(cpu)?.alloc_raw(AllocRequest::order(order).zeroed_with(clearer).resched(resched))`
    /// allocates, with [`fault_at`](AllocRequest::fault_at) when `fault` is given.
    ///
    /// # Errors
    /// [`AllocError::BadCpu`]; as [`Cpu::alloc_raw`](crate::Cpu::alloc_raw).
    #[inline]
    pub fn alloc_zeroed<M: FrameMemory>(
        &self,
        cpu: usize,
        order: Order,
        clearer: &FrameClearer<M>,
        fault: Option<usize>,
        resched: &mut impl Resched,
    ) -> Result<Pfn, AllocError> {
        let zeroing = Zeroing {
            clearing: Clearing::of(clearer),
            fault,
            resched,
        };
        let block = (order, MigrateType::Unmovable, HeadTag::NONE);
        self.alloc_zeroed_on(self.cpu(cpu)?.lists(), block, zeroing)
    }

    /// [`Cpu::vmalloc`](crate::Cpu::vmalloc) on CPU `cpu`.
    ///
    /// # Errors
    /// [`AllocError::BadCpu`]; as [`Cpu::vmalloc`](crate::Cpu::vmalloc).
    pub fn vmalloc<'r>(
        &self,
        cpu: usize,
        nr_pages: u64,
        runs: &'r mut [FrameRange],
    ) -> Result<VmArea<'r>, AllocError> {
        self.cpu(cpu)?.vmalloc(nr_pages, runs)
    }

    /// [`Cpu::vfree`](crate::Cpu::vfree) on CPU `cpu`.
    ///
    /// # Errors
    /// [`FreeError::BadCpu`]; as [`Cpu::vfree`](crate::Cpu::vfree).
    ///
    /// # Safety
    /// As [`Cpu::vfree`](crate::Cpu::vfree).
    #[allow(unsafe_code)]
    pub unsafe fn vfree(&self, cpu: usize, area: &VmArea<'_>) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.cpu(cpu)?.vfree(area) }
    }

    /// [`Cpu::compact`](crate::Cpu::compact) on CPU `cpu`: `self.cpu(cpu)?.compact(..)`.
    ///
    /// # Errors
    /// [`ContigError::BadCpu`]; as [`Cpu::compact`](crate::Cpu::compact).
    pub fn compact(
        &self,
        cpu: usize,
        order: Order,
        migrate: &mut impl Migrate,
    ) -> Result<CompactStats, ContigError> {
        self.cpu(cpu)?.compact(order, migrate)
    }

    /// [`Cpu::compact_some`](crate::Cpu::compact_some) on CPU `cpu`: `self.cpu(cpu)?.compact_some(..)`.
    ///
    /// # Errors
    /// [`ContigError::BadCpu`].
    pub fn compact_some(
        &self,
        cpu: usize,
        budget: u64,
        migrate: &mut impl Migrate,
    ) -> Result<CompactStats, ContigError> {
        Ok(self.cpu(cpu)?.compact_some(budget, migrate))
    }

    /// [`Cpu::compact_work`](crate::Cpu::compact_work) on CPU `cpu`: `self.cpu(cpu)?.compact_work(..)`.
    ///
    /// # Errors
    /// [`ContigError::BadCpu`].
    pub fn compact_work(
        &self,
        cpu: usize,
        budget: u64,
        migrate: &mut impl Migrate,
        reclaim: &mut impl Reclaim,
    ) -> Result<CompactWork, ContigError> {
        Ok(self.cpu(cpu)?.compact_work(budget, migrate, reclaim))
    }

    /// [`Cpu::free_pages`](crate::Cpu::free_pages) on CPU `cpu`: `self.cpu(cpu)?.free_pages(..)`.
    ///
    /// # Errors
    /// [`FreeError::BadCpu`]; as [`Cpu::free_pages`](crate::Cpu::free_pages).
    ///
    /// # Safety
    /// As [`Cpu::free_pages`](crate::Cpu::free_pages).
    #[inline]
    #[allow(unsafe_code)]
    pub unsafe fn free_pages(&self, cpu: usize, pfn: Pfn, order: Order) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.cpu(cpu)?.free_pages(pfn, order) }
    }

    /// [`Cpu::put_page`](crate::Cpu::put_page) on CPU `cpu`: `self.cpu(cpu)?.put_page(..)`.
    ///
    /// # Errors
    /// [`FreeError::BadCpu`]; as [`Cpu::put_page`](crate::Cpu::put_page).
    ///
    /// # Safety
    /// As [`Cpu::put_page`](crate::Cpu::put_page).
    #[allow(unsafe_code)]
    pub unsafe fn put_page(&self, cpu: usize, pfn: Pfn) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.cpu(cpu)?.put_page(pfn) }
    }

    /// [`Cpu::free_contig_range`](crate::Cpu::free_contig_range) on CPU `cpu`: `self.cpu(cpu)?.free_contig_range(..)`.
    ///
    /// # Errors
    /// [`FreeError::BadCpu`]; as [`Cpu::free_contig_range`](crate::Cpu::free_contig_range).
    ///
    /// # Safety
    /// As [`Cpu::free_contig_range`](crate::Cpu::free_contig_range).
    #[allow(unsafe_code)]
    pub unsafe fn free_contig_range(&self, cpu: usize, pfn: Pfn, nr: u64) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.cpu(cpu)?.free_contig_range(pfn, nr) }
    }

    /// [`Cpu::free_contig_frozen_range`](crate::Cpu::free_contig_frozen_range) on CPU `cpu`: `self.cpu(cpu)?.free_contig_frozen_range(..)`.
    ///
    /// # Errors
    /// [`FreeError::BadCpu`]; as [`Cpu::free_contig_frozen_range`](crate::Cpu::free_contig_frozen_range).
    ///
    /// # Safety
    /// As [`Cpu::free_contig_frozen_range`](crate::Cpu::free_contig_frozen_range).
    #[allow(unsafe_code)]
    pub unsafe fn free_contig_frozen_range(
        &self,
        cpu: usize,
        pfn: Pfn,
        nr: u64,
    ) -> Result<(), FreeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.cpu(cpu)?.free_contig_frozen_range(pfn, nr) }
    }

    /// [`Cpu::alloc_contig_range`](crate::Cpu::alloc_contig_range) on CPU `cpu`: `self.cpu(cpu)?.alloc_contig_range(..)`.
    ///
    /// # Errors
    /// [`ContigError::BadCpu`]; as [`Cpu::alloc_contig_range`](crate::Cpu::alloc_contig_range).
    pub fn alloc_contig_range(
        &self,
        cpu: usize,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<(), ContigError> {
        self.cpu(cpu)?.alloc_contig_range(pfn, nr, migrate)
    }

    /// [`Cpu::alloc_contig_frozen_range`](crate::Cpu::alloc_contig_frozen_range) on CPU `cpu`: `self.cpu(cpu)?.alloc_contig_frozen_range(..)`.
    ///
    /// # Errors
    /// [`ContigError::BadCpu`]; as [`Cpu::alloc_contig_frozen_range`](crate::Cpu::alloc_contig_frozen_range).
    pub fn alloc_contig_frozen_range(
        &self,
        cpu: usize,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<(), ContigError> {
        self.cpu(cpu)?.alloc_contig_frozen_range(pfn, nr, migrate)
    }

    /// [`Cpu::offline_range`](crate::Cpu::offline_range) on CPU `cpu`: `self.cpu(cpu)?.offline_range(..)`.
    ///
    /// # Errors
    /// [`ContigError::BadCpu`]; as [`Cpu::offline_range`](crate::Cpu::offline_range).
    pub fn offline_range(
        &self,
        cpu: usize,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<u64, ContigError> {
        self.cpu(cpu)?.offline_range(pfn, nr, migrate)
    }

    /// [`Cpu::reserve_cma`](crate::Cpu::reserve_cma) on CPU `cpu`: `self.cpu(cpu)?.reserve_cma(..)`.
    ///
    /// # Errors
    /// [`AllocError::BadCpu`]; as [`Cpu::reserve_cma`](crate::Cpu::reserve_cma).
    pub fn reserve_cma(
        &self,
        cpu: usize,
        nr: u64,
        align: Order,
        migrate: &mut impl Migrate,
    ) -> Result<CmaArea, AllocError> {
        self.cpu(cpu)?.reserve_cma(nr, align, migrate)
    }

    /// [`Cpu::reserve_cma_at`](crate::Cpu::reserve_cma_at) on CPU `cpu`: `self.cpu(cpu)?.reserve_cma_at(..)`.
    ///
    /// # Errors
    /// [`ContigError::BadCpu`]; as [`Cpu::reserve_cma_at`](crate::Cpu::reserve_cma_at).
    pub fn reserve_cma_at(
        &self,
        cpu: usize,
        pfn: Pfn,
        nr: u64,
        migrate: &mut impl Migrate,
    ) -> Result<CmaArea, ContigError> {
        self.cpu(cpu)?.reserve_cma_at(pfn, nr, migrate)
    }
}
