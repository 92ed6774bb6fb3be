use crate::plan::{ChunkPlan, FaultRanges, TargetLastOrder, non_preempt_batch_pages};
use crate::{PageSize, Policy, PreemptModel, Resched, Strategy, ZeroError};
use core::num::NonZeroUsize;
use core::ops::Range;

/// In which order [`folio_zero_user`] clears a folio's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FolioOrder {
    /// The merged 2026 form: right of the fault's neighbourhood, left of it, then the
    /// neighbourhood, each range as contiguous batches.
    #[default]
    NeighbourhoodLast,
    /// The older `process_huge_page` form: one page at a time, far pages first, converging
    /// on the target page, which is cleared last.
    TargetLast,
}

/// How to clear: page size, preemption model, strategy policy, batch size and folio order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClearConfig {
    /// The base page size; extents are whole pages of this size, aligned to it.
    pub page_size: PageSize,
    /// The scheduler's preemption model: decides whether a range is cut into batches.
    pub preempt: PreemptModel,
    /// Which strategy clears each extent.
    pub policy: Policy,
    /// Pages per batch under a cooperative model; `None` means
    /// [`non_preempt_batch_pages`] for the chosen strategy.
    pub batch_pages: Option<NonZeroUsize>,
    /// The order of [`folio_zero_user`].
    pub folio_order: FolioOrder,
}

impl ClearConfig {
    /// The detected policy, the kernel's batch, the merged folio order.
    #[must_use]
    pub fn new(page_size: PageSize, preempt: PreemptModel) -> Self {
        Self {
            page_size,
            preempt,
            policy: Policy::detect(),
            batch_pages: None,
            folio_order: FolioOrder::NeighbourhoodLast,
        }
    }

    /// The same configuration with another policy.
    #[must_use]
    pub const fn with_policy(self, policy: Policy) -> Self {
        Self { policy, ..self }
    }

    /// The same configuration with `pages` pages per cooperative batch.
    #[must_use]
    pub const fn with_batch_pages(self, pages: NonZeroUsize) -> Self {
        Self {
            batch_pages: Some(pages),
            ..self
        }
    }

    /// The same configuration with another folio order.
    #[must_use]
    pub const fn with_folio_order(self, folio_order: FolioOrder) -> Self {
        Self {
            folio_order,
            ..self
        }
    }

    /// Pages per cooperative batch for `strategy`.
    #[must_use]
    pub fn batch_for(&self, strategy: Strategy) -> NonZeroUsize {
        self.batch_pages
            .unwrap_or_else(|| non_preempt_batch_pages(self.page_size, strategy.is_extent()))
    }

    /// The chunks, and the strategy, with which `pages` of an extent are cleared.
    #[must_use]
    pub fn plan(&self, pages: Range<usize>, hot: bool) -> (ChunkPlan, Strategy) {
        let bytes = pages.len().saturating_mul(self.page_size.bytes());
        let strategy = self.policy.choose(bytes, hot);
        let plan = ChunkPlan::for_clear(pages, self.preempt, self.batch_for(strategy));
        (plan, strategy)
    }
}

/// Zeroes `buf`, a whole number of pages aligned to the page size, in chunks: the whole
/// range at once under a preemptible model, else batches of `cfg.batch_pages`;
/// `resched.cond_resched()` runs before every chunk, the first included.
///
/// # Errors
/// [`ZeroError::ZeroLength`], [`ZeroError::Misaligned`], [`ZeroError::NotPageMultiple`], or
/// [`ZeroError::StrategyUnavailable`]; nothing is written then.
///
/// # Example
/// ```
/// use zero_core::{ClearConfig, CountingResched, PageSize, PreemptModel, clear_contig_pages};
/// # let mut backing = vec![0xA5u8; 5 * 4096];
/// # let at = backing.as_ptr().align_offset(4096);
/// # let buf = &mut backing[at..at + 4 * 4096];
/// let cfg = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None);
/// let mut resched = CountingResched::new();
/// clear_contig_pages(buf, &cfg, &mut resched)?;
/// assert!(buf.iter().all(|&b| b == 0));
/// assert!(resched.calls() >= 1);
/// # Ok::<(), zero_core::ZeroError>(())
/// ```
pub fn clear_contig_pages(
    buf: &mut [u8],
    cfg: &ClearConfig,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let npages = check_slice(buf, cfg)?;
    // SAFETY: `buf` is an exclusive borrow of exactly npages pages, validated.
    unsafe { clear_range(buf.as_mut_ptr(), 0..npages, false, cfg, resched) };
    Ok(())
}

/// [`clear_contig_pages`] over raw memory, for physical frames a kernel maps itself.
///
/// # Errors
/// As [`clear_contig_pages`], plus [`ZeroError::Overflow`] if `npages` pages from `dst` do
/// not fit the address space.
///
/// # Safety
/// `npages` pages from `dst` must be valid for writes and not accessed by anyone else until
/// this returns.
pub unsafe fn clear_contig_pages_raw(
    dst: *mut u8,
    npages: usize,
    cfg: &ClearConfig,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    check_raw(dst, npages, cfg)?;
    // SAFETY: the caller's contract, and check_raw validated the geometry.
    unsafe { clear_range(dst, 0..npages, false, cfg, resched) };
    Ok(())
}

/// Zeroes a folio that a fault at byte `fault_offset` is about to use, keeping the fault's
/// neighbourhood cache-hot: with [`FolioOrder::NeighbourhoodLast`] it clears the pages right
/// of the neighbourhood, then left of it, then the faulting page and up to two pages each
/// side, each range in batches as [`clear_contig_pages`] does; with
/// [`FolioOrder::TargetLast`], page by page in the older converging order.
///
/// # Errors
/// As [`clear_contig_pages`], plus [`ZeroError::FaultOutsideFolio`]; nothing is written then.
///
/// # Example
/// ```
/// use zero_core::{ClearConfig, NoResched, PageSize, PreemptModel, folio_zero_user};
/// # let mut backing = vec![0xA5u8; 17 * 4096];
/// # let at = backing.as_ptr().align_offset(4096);
/// # let folio = &mut backing[at..at + 16 * 4096];
/// let cfg = ClearConfig::new(PageSize::Size4KiB, PreemptModel::Voluntary);
/// // A fault 5 pages and 123 bytes into a 64 KiB folio: pages 3..=7 are cleared last.
/// folio_zero_user(folio, 5 * 4096 + 123, &cfg, &mut NoResched)?;
/// assert!(folio.iter().all(|&b| b == 0));
/// # Ok::<(), zero_core::ZeroError>(())
/// ```
pub fn folio_zero_user(
    folio: &mut [u8],
    fault_offset: usize,
    cfg: &ClearConfig,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let npages = check_slice(folio, cfg)?;
    // SAFETY: `folio` is an exclusive borrow of exactly npages pages, validated.
    unsafe { folio_zero_validated(folio.as_mut_ptr(), npages, fault_offset, cfg, resched) }
}

/// [`folio_zero_user`] over raw memory.
///
/// # Errors
/// As [`folio_zero_user`], plus [`ZeroError::Overflow`].
///
/// # Safety
/// `npages` pages from `dst` must be valid for writes and not accessed by anyone else until
/// this returns.
pub unsafe fn folio_zero_user_raw(
    dst: *mut u8,
    npages: usize,
    fault_offset: usize,
    cfg: &ClearConfig,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    check_raw(dst, npages, cfg)?;
    // SAFETY: the caller's contract, and check_raw validated the geometry and policy.
    unsafe { folio_zero_validated(dst, npages, fault_offset, cfg, resched) }
}

/// [`folio_zero_user`] after validation.
///
/// # Safety
/// `npages` pages from `dst` writable and unshared, validated by [`check_slice`] or
/// [`check_raw`] (so `npages * page` does not overflow and the policy is executable).
unsafe fn folio_zero_validated(
    dst: *mut u8,
    npages: usize,
    fault_offset: usize,
    cfg: &ClearConfig,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let len = npages << cfg.page_size.shift();
    if fault_offset >= len {
        return Err(ZeroError::FaultOutsideFolio {
            offset: fault_offset,
            len,
        });
    }
    let fault = fault_offset >> cfg.page_size.shift();
    match cfg.folio_order {
        FolioOrder::NeighbourhoodLast => {
            for (pages, hot) in FaultRanges::new(npages, fault)?.in_order() {
                // SAFETY: each range lies inside the caller's npages pages.
                unsafe { clear_range(dst, pages, hot, cfg, resched) };
            }
        }
        FolioOrder::TargetLast => {
            for page in TargetLastOrder::new(npages, fault)? {
                // SAFETY: page < npages, inside the caller's range.
                unsafe { clear_range(dst, page..page + 1, page == fault, cfg, resched) };
            }
        }
    }
    Ok(())
}

/// The checks every entry point shares: not empty, start aligned to the page.
fn check_start(addr: usize, empty: bool, page: usize) -> Result<(), ZeroError> {
    if empty {
        return Err(ZeroError::ZeroLength);
    }
    if !addr.is_multiple_of(page) {
        return Err(ZeroError::Misaligned { addr, align: page });
    }
    Ok(())
}

/// Validates a slice (not empty, page-aligned, whole pages) and the policy. Returns its page
/// count.
pub(crate) fn check_slice(buf: &[u8], cfg: &ClearConfig) -> Result<usize, ZeroError> {
    let page = cfg.page_size.bytes();
    check_start(buf.as_ptr().addr(), buf.is_empty(), page)?;
    if !buf.len().is_multiple_of(page) {
        return Err(ZeroError::NotPageMultiple {
            len: buf.len(),
            page_size: page,
        });
    }
    cfg.policy.validate()?;
    Ok(buf.len() >> cfg.page_size.shift())
}

/// Validates raw geometry (not empty, page-aligned, no overflow) and the policy. Returns the
/// length in bytes.
pub(crate) fn check_raw(
    dst: *mut u8,
    npages: usize,
    cfg: &ClearConfig,
) -> Result<usize, ZeroError> {
    let page = cfg.page_size.bytes();
    check_start(dst.addr(), npages == 0, page)?;
    let len = npages.checked_mul(page).ok_or(ZeroError::Overflow)?;
    dst.addr().checked_add(len).ok_or(ZeroError::Overflow)?;
    cfg.policy.validate()?;
    Ok(len)
}

/// Clears the page range `pages` of the extent at `base`: the kernel's `clear_contig`.
///
/// # Safety
/// The pages must be valid for writes and unshared; `base` page-aligned; the policy
/// validated.
pub(crate) unsafe fn clear_range(
    base: *mut u8,
    pages: Range<usize>,
    hot: bool,
    cfg: &ClearConfig,
    resched: &mut impl Resched,
) {
    let (plan, strategy) = cfg.plan(pages, hot);
    let page = cfg.page_size.bytes();
    for chunk in plan {
        resched.cond_resched();
        // SAFETY: the chunk lies inside the caller's range, which is writable and unshared.
        // (Page-aligned whole pages also meet every strategy's alignment and granule: the
        // largest, a DC ZVA block, is at most 2 KiB, under the smallest page; clear_raw
        // checks them anyway.)
        unsafe { clear_pages(strategy, base.add(chunk.start * page), chunk.len(), page) };
        strategy.fence();
    }
}

/// The kernel's `clear_pages()`: one primitive call for an extent strategy, else a loop of
/// one call per page (the generic `clear_page()` loop).
///
/// # Safety
/// `npages * page` bytes from `dst` writable and unshared; the strategy available.
unsafe fn clear_pages(strategy: Strategy, dst: *mut u8, npages: usize, page: usize) {
    if strategy.is_extent() {
        // SAFETY: forwarded from the caller.
        unsafe { strategy.clear_raw(dst, npages * page) };
    } else {
        for i in 0..npages {
            // SAFETY: page i of the caller's range.
            unsafe { strategy.clear_raw(dst.add(i * page), page) };
        }
    }
}
