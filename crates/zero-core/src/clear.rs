use crate::plan::{ChunkPlan, FaultRanges, TargetLastOrder, non_preempt_batch_pages};
use crate::{
    Locality, PageSize, Policy, PreemptModel, Resched, Strategy, Temperature, ZeroError, backend,
};
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

/// How to clear: page size, preemption model, strategy policy, batch size, folio order and
/// what is known of the memory's temperature.
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
    /// What the caller knows of the memory it clears: whether it is in the caches. Decides,
    /// with the policy's thresholds, which extents stream ([`Temperature::locality`]).
    pub memory: Temperature,
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
            memory: Temperature::Unknown,
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

    /// The same configuration for memory of another temperature: [`Temperature::Cold`] for
    /// a VMM zeroing guest memory, a pool's background zeroing, or pages a hypervisor
    /// discarded; [`Temperature::Hot`] for memory known to be in the caches.
    #[must_use]
    pub const fn with_memory(self, memory: Temperature) -> Self {
        Self { memory, ..self }
    }

    /// Pages per cooperative batch for `strategy`.
    #[must_use]
    pub fn batch_for(&self, strategy: Strategy) -> NonZeroUsize {
        self.batch_of(strategy.is_extent())
    }

    /// Pages per cooperative batch for an extent strategy (`extent`) or one that clears a
    /// page at a time: all a strategy's batch depends on.
    fn batch_of(&self, extent: bool) -> NonZeroUsize {
        self.batch_pages
            .unwrap_or_else(|| non_preempt_batch_pages(self.page_size, extent))
    }

    /// Checks the configuration once, for every clear that follows: the [`Clearer`] the
    /// clearing functions take.
    ///
    /// # Errors
    /// [`ZeroError::StrategyUnavailable`] naming the first strategy of the policy this CPU
    /// cannot execute.
    pub fn validate(self) -> Result<Clearer, ZeroError> {
        self.policy.validate()?;
        Ok(self.validated())
    }

    /// The clearer of a configuration whose policy is known to validate.
    fn validated(self) -> Clearer {
        let batch = |extent: bool| {
            if self.preempt.is_preemptible() {
                // One chunk whatever the length: a preemptible kernel needs no cond_resched.
                usize::MAX
            } else {
                self.batch_of(extent).get()
            }
        };
        let shift = self.page_size.shift();
        let extent_batch = batch(true);
        Clearer {
            shift,
            page_batch: batch(false),
            extent_batch,
            small_extent: small_extent(&self.policy, self.memory, extent_batch, shift),
            small_touched: {
                let batch = small_extent(
                    &self.policy.with_streaming(None),
                    self.memory,
                    extent_batch,
                    shift,
                );
                let pages = match self.folio_order {
                    FolioOrder::NeighbourhoodLast => self.policy.fault_radius().saturating_add(1),
                    FolioOrder::TargetLast => 0,
                };
                let bytes = if pages > usize::MAX >> shift {
                    usize::MAX
                } else {
                    pages << shift
                };
                if bytes < batch { bytes } else { batch }
            },
            small_clear: backend::primitive(self.policy.small()),
            whole_neighbourhood: match self.folio_order {
                FolioOrder::NeighbourhoodLast => self.policy.fault_radius().saturating_add(1),
                FolioOrder::TargetLast => 0,
            },
            page_mask: self.page_size.bytes() - 1,
            small_fence: self.policy.small().needs_fence(),
            cfg: self,
        }
    }
}

/// The most bytes a plain extent may have for a clearer of `policy` and `memory` to clear it
/// with the policy's [`Policy::small`] strategy, an extent primitive, in one batch of
/// `extent_batch` pages (`usize::MAX`: one chunk whatever the length): below the threshold it
/// would stream from, below [`Policy::small_below`] where the policy has one, within one
/// batch. The inline fast path of [`clear_contig_pages`] takes extents up to this size.
const fn small_extent(
    policy: &Policy,
    memory: Temperature,
    extent_batch: usize,
    shift: u32,
) -> usize {
    if !policy.small().is_extent() {
        // A page at a time (the generic loop): the general path.
        return 0;
    }
    let below_small = match policy.small_below() {
        0 => usize::MAX,
        below => below - 1,
    };
    let below_streaming = if policy.streaming().is_none() {
        usize::MAX
    } else {
        let from = match memory.locality(false) {
            Locality::Cold if policy.cold_threshold() < policy.streaming_threshold() => {
                policy.cold_threshold()
            }
            _ => policy.streaming_threshold(),
        };
        from.saturating_sub(1)
    };
    let batch_bytes = if extent_batch > (usize::MAX >> shift) {
        usize::MAX
    } else {
        extent_batch << shift
    };
    let limit = if below_streaming < batch_bytes {
        below_streaming
    } else {
        batch_bytes
    };
    if below_small < limit {
        below_small
    } else {
        limit
    }
}

/// A [`ClearConfig`] checked once ([`ClearConfig::validate`]): what the clearing functions
/// take, so that a clear pays for no validation of its configuration and no feature lookup,
/// only for the checks of the memory it is given (start and length whole pages). Cheap to
/// copy; make one at boot and keep it.
#[derive(Clone, Copy, Debug)]
pub struct Clearer {
    cfg: ClearConfig,
    /// log2 of the page size.
    shift: u32,
    /// Pages per chunk with a strategy that clears a page at a time (`usize::MAX`: one
    /// chunk).
    page_batch: usize,
    /// Pages per chunk with an extent strategy (`usize::MAX`: one chunk).
    extent_batch: usize,
    /// Plain extents up to this many bytes are one batch of the small-extent strategy
    /// ([`small_extent`]).
    small_extent: usize,
    /// A folio up to this many bytes is all its fault's neighbourhood and one batch of the
    /// small-extent strategy (0 where that clears a page at a time).
    small_touched: usize,
    /// A folio of at most this many pages is all its fault's neighbourhood (radius + 1 with
    /// the neighbourhood-last order; 0 with the target-last order, which orders every folio).
    whole_neighbourhood: usize,
    /// The page size less one: the bits an aligned address or length has clear.
    page_mask: usize,
    /// The small-extent strategy's primitive ([`Policy::small`], the temporal one where the
    /// policy has no small strategy), called for those without a dispatch.
    small_clear: backend::ClearFn,
    /// Whether that strategy needs a fence (only a fixed non-temporal policy's does).
    small_fence: bool,
}

/// Two clearers are equal when they were made from equal configurations (everything else is
/// derived from the configuration).
impl PartialEq for Clearer {
    fn eq(&self, other: &Self) -> bool {
        self.cfg == other.cfg
    }
}

impl Eq for Clearer {}

impl Clearer {
    /// [`ClearConfig::new`] validated: the detected policy names only strategies this CPU
    /// has, so there is nothing to refuse.
    #[must_use]
    pub fn detected(page_size: PageSize, preempt: PreemptModel) -> Self {
        ClearConfig::new(page_size, preempt).validated()
    }

    /// The configuration it was made from.
    #[must_use]
    #[inline]
    pub const fn config(&self) -> &ClearConfig {
        &self.cfg
    }

    /// The base page size.
    #[must_use]
    #[inline]
    pub const fn page_size(&self) -> PageSize {
        self.cfg.page_size
    }

    /// The same clearer with another policy.
    ///
    /// # Errors
    /// As [`ClearConfig::validate`].
    pub fn with_policy(&self, policy: Policy) -> Result<Self, ZeroError> {
        self.cfg.with_policy(policy).validate()
    }

    /// The same clearer for memory of another temperature ([`ClearConfig::with_memory`]):
    /// nothing to validate, so it cannot fail, and it costs a copy.
    #[must_use]
    #[inline]
    pub const fn with_memory(&self, memory: Temperature) -> Self {
        let mut c = *self;
        c.cfg.memory = memory;
        c.small_extent = small_extent(&c.cfg.policy, memory, c.extent_batch, c.shift);
        c
    }

    /// The general path of a plain extent of `npages` pages at `dst` (out of line, so that the
    /// small-extent path around it inlines into its caller).
    ///
    /// # Safety
    /// As [`Clearer::clear_range`].
    #[inline(never)]
    unsafe fn clear_extent(&self, dst: *mut u8, npages: usize, resched: &mut impl Resched) {
        // SAFETY: forwarded from the caller.
        unsafe { self.clear_range(dst, 0..npages, self.extent_locality(), resched) };
    }

    /// Clears `len` bytes from `dst`, whole pages, if they are at most `limit` bytes: one
    /// `cond_resched`, the small-extent primitive ([`Policy::small`]), its fence if it has
    /// one. Returns whether it did (false: the caller takes the general path). `limit` is
    /// [`Clearer::small_extent`] for a plain extent, [`Clearer::small_touched`] for a folio
    /// that is all its fault's neighbourhood (touched next: never streamed).
    ///
    /// # Safety
    /// `len` bytes from `dst` writable and unshared, page-aligned whole pages; `limit` one of
    /// the two above (both 0 unless the small-extent strategy is an extent primitive).
    #[inline(always)]
    unsafe fn clear_small(
        &self,
        dst: *mut u8,
        len: usize,
        limit: usize,
        resched: &mut impl Resched,
    ) -> bool {
        if len > limit {
            return false;
        }
        resched.cond_resched();
        // SAFETY: the caller's range; the primitive is the validated policy's small-extent
        // strategy's (available), an extent primitive (the limits are 0 otherwise).
        unsafe { (self.small_clear)(dst, len) };
        if self.small_fence {
            backend::store_fence();
        }
        true
    }

    /// The chunks, and the strategy, with which `pages` of an extent of `locality` are
    /// cleared.
    #[must_use]
    #[inline]
    pub fn plan(&self, pages: Range<usize>, locality: Locality) -> (ChunkPlan, Strategy) {
        let (strategy, batch) = self.choose(pages.len(), locality);
        let unit = NonZeroUsize::new(batch.min(pages.len())).unwrap_or(NonZeroUsize::MIN);
        (ChunkPlan::new(pages, unit), strategy)
    }

    /// The strategy for an extent of `npages` pages and its batch in pages (`usize::MAX`:
    /// one chunk whatever the length).
    #[inline(always)]
    fn choose(&self, npages: usize, locality: Locality) -> (Strategy, usize) {
        let bytes = npages.saturating_mul(1 << self.shift);
        let strategy = self.cfg.policy.choose(bytes, locality);
        let batch = if strategy.is_extent() {
            self.extent_batch
        } else {
            self.page_batch
        };
        (strategy, batch)
    }

    /// The locality of a plain extent this clearer is given.
    #[inline(always)]
    pub(crate) const fn extent_locality(&self) -> Locality {
        self.cfg.memory.locality(false)
    }

    /// Checks that `len` bytes from `addr` are whole pages, page-aligned, not empty; returns
    /// the page count.
    #[inline]
    pub(crate) fn pages_of(&self, addr: usize, len: usize) -> Result<usize, ZeroError> {
        if len == 0 || (addr | len) & self.page_mask != 0 {
            return Err(self.geometry_error(addr, len));
        }
        Ok(len >> self.shift)
    }

    /// What is wrong with `len` bytes from `addr` as an extent (off the fast path).
    #[cold]
    #[inline(never)]
    fn geometry_error(&self, addr: usize, len: usize) -> ZeroError {
        let page = self.cfg.page_size.bytes();
        if len == 0 {
            ZeroError::ZeroLength
        } else if !addr.is_multiple_of(page) {
            ZeroError::Misaligned { addr, align: page }
        } else {
            ZeroError::NotPageMultiple {
                len,
                page_size: page,
            }
        }
    }

    /// Validates a slice: not empty, page-aligned, whole pages. Returns its page count.
    #[inline]
    pub(crate) fn check_slice(&self, buf: &[u8]) -> Result<usize, ZeroError> {
        self.pages_of(buf.as_ptr().addr(), buf.len())
    }

    /// Validates raw geometry: not empty, page-aligned, no overflow. Returns the page count.
    #[inline]
    fn check_raw(&self, dst: *mut u8, npages: usize) -> Result<usize, ZeroError> {
        let addr = dst.addr();
        let fits = npages <= usize::MAX >> self.shift;
        // In range, not empty, aligned; every failing case is told apart off the fast path.
        if fits
            && npages != 0
            && addr <= usize::MAX - (npages << self.shift)
            && addr & self.page_mask == 0
        {
            return Ok(npages);
        }
        Err(self.raw_error(addr, npages))
    }

    /// What is wrong with `npages` pages from `addr` (off the fast path): an overflow first,
    /// then the extent's geometry.
    #[cold]
    #[inline(never)]
    fn raw_error(&self, addr: usize, npages: usize) -> ZeroError {
        let len = npages.checked_mul(self.cfg.page_size.bytes());
        match len.and_then(|len| addr.checked_add(len).map(|_| len)) {
            None => ZeroError::Overflow,
            Some(len) => self.geometry_error(addr, len),
        }
    }

    /// Clears the page range `pages` of the extent at `base`: the kernel's `clear_contig`.
    /// One batch (the common case, and every case under a preemptible model) is inline: a
    /// strategy choice, one `cond_resched`, one primitive call and the fence it needs.
    ///
    /// # Safety
    /// The pages must be valid for writes and unshared; `base` page-aligned.
    #[inline(always)]
    pub(crate) unsafe fn clear_range(
        &self,
        base: *mut u8,
        pages: Range<usize>,
        locality: Locality,
        resched: &mut impl Resched,
    ) {
        let npages = pages.end.saturating_sub(pages.start);
        if npages == 0 {
            return;
        }
        let (strategy, batch) = self.choose(npages, locality);
        if npages > batch {
            // SAFETY: forwarded from the caller.
            return unsafe { self.clear_batches(base, pages, strategy, batch, resched) };
        }
        let shift = self.shift;
        resched.cond_resched();
        // SAFETY: the range lies inside the caller's, which is writable and unshared; the
        // strategy is one of the validated policy's, so available.
        unsafe { clear_pages(strategy, base.add(pages.start << shift), npages, shift) };
        strategy.fence();
    }

    /// [`Clearer::clear_range`] for a range longer than one batch.
    ///
    /// # Safety
    /// As [`Clearer::clear_range`].
    #[inline(never)]
    unsafe fn clear_batches(
        &self,
        base: *mut u8,
        pages: Range<usize>,
        strategy: Strategy,
        batch: usize,
        resched: &mut impl Resched,
    ) {
        let unit = NonZeroUsize::new(batch).unwrap_or(NonZeroUsize::MIN);
        let shift = self.shift;
        for chunk in ChunkPlan::new(pages, unit) {
            resched.cond_resched();
            // SAFETY: the chunk lies inside the caller's range, which is writable and
            // unshared; the strategy is one of the validated policy's, so available.
            unsafe { clear_pages(strategy, base.add(chunk.start << shift), chunk.len(), shift) };
            strategy.fence();
        }
    }
}

/// Zeroes `buf`, a whole number of pages aligned to the page size, in chunks: the whole
/// range at once under a preemptible model, else batches of the configuration's batch size;
/// `resched.cond_resched()` runs before every chunk, the first included.
///
/// # Errors
/// [`ZeroError::ZeroLength`], [`ZeroError::Misaligned`] or [`ZeroError::NotPageMultiple`];
/// nothing is written then.
///
/// # Example
/// ```
/// use zero_core::{ClearConfig, CountingResched, PageSize, PreemptModel, clear_contig_pages};
/// # let mut backing = vec![0xA5u8; 5 * 4096];
/// # let at = backing.as_ptr().align_offset(4096);
/// # let buf = &mut backing[at..at + 4 * 4096];
/// // Once, at boot: the configuration is checked here, not on every clear.
/// let clearer = ClearConfig::new(PageSize::Size4KiB, PreemptModel::None).validate()?;
/// let mut resched = CountingResched::new();
/// clear_contig_pages(buf, &clearer, &mut resched)?;
/// assert!(buf.iter().all(|&b| b == 0));
/// assert!(resched.calls() >= 1);
/// # Ok::<(), zero_core::ZeroError>(())
/// ```
#[inline]
pub fn clear_contig_pages(
    buf: &mut [u8],
    clearer: &Clearer,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let npages = clearer.check_slice(buf)?;
    // SAFETY: `buf` is an exclusive borrow of exactly npages pages, page-aligned.
    unsafe {
        if !clearer.clear_small(buf.as_mut_ptr(), buf.len(), clearer.small_extent, resched) {
            clearer.clear_extent(buf.as_mut_ptr(), npages, resched);
        }
    }
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
#[inline]
pub unsafe fn clear_contig_pages_raw(
    dst: *mut u8,
    npages: usize,
    clearer: &Clearer,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let npages = clearer.check_raw(dst, npages)?;
    // SAFETY: the caller's contract, and check_raw validated the geometry (so the length
    // does not overflow).
    unsafe {
        if !clearer.clear_small(dst, npages << clearer.shift, clearer.small_extent, resched) {
            clearer.clear_extent(dst, npages, resched);
        }
    }
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
/// let clearer = ClearConfig::new(PageSize::Size4KiB, PreemptModel::Voluntary).validate()?;
/// // A fault 5 pages and 123 bytes into a 64 KiB folio: pages 3..=7 are cleared last.
/// folio_zero_user(folio, 5 * 4096 + 123, &clearer, &mut NoResched)?;
/// assert!(folio.iter().all(|&b| b == 0));
/// # Ok::<(), zero_core::ZeroError>(())
/// ```
#[inline]
pub fn folio_zero_user(
    folio: &mut [u8],
    fault_offset: usize,
    clearer: &Clearer,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let npages = clearer.check_slice(folio)?;
    // SAFETY: `folio` is an exclusive borrow of exactly npages pages, validated.
    unsafe {
        let len = folio.len();
        folio_zero_validated(
            folio.as_mut_ptr(),
            (npages, len),
            fault_offset,
            clearer,
            resched,
        )
    }
}

/// [`folio_zero_user`] over raw memory.
///
/// # Errors
/// As [`folio_zero_user`], plus [`ZeroError::Overflow`].
///
/// # Safety
/// `npages` pages from `dst` must be valid for writes and not accessed by anyone else until
/// this returns.
#[inline]
pub unsafe fn folio_zero_user_raw(
    dst: *mut u8,
    npages: usize,
    fault_offset: usize,
    clearer: &Clearer,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let npages = clearer.check_raw(dst, npages)?;
    // SAFETY: the caller's contract, and check_raw validated the geometry.
    unsafe {
        let len = npages << clearer.shift;
        folio_zero_validated(dst, (npages, len), fault_offset, clearer, resched)
    }
}

/// [`folio_zero_user`] after validation.
///
/// # Safety
/// `npages` pages from `dst` writable and unshared, page-aligned, validated by the clearer
/// (so `npages * page` does not overflow).
#[inline]
unsafe fn folio_zero_validated(
    dst: *mut u8,
    (npages, len): (usize, usize),
    fault_offset: usize,
    clearer: &Clearer,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    if fault_offset >= len {
        return Err(ZeroError::FaultOutsideFolio {
            offset: fault_offset,
            len,
        });
    }
    // The common 4 KiB fault: a folio that is all its fault's neighbourhood and one temporal
    // batch, inline.
    // SAFETY: the caller's npages pages, writable and unshared.
    if unsafe { clearer.clear_small(dst, len, clearer.small_touched, resched) } {
        return Ok(());
    }
    // SAFETY: forwarded from the caller; fault_offset < len.
    unsafe { folio_zero_ordered(dst, npages, fault_offset >> clearer.shift, clearer, resched) }
}

/// [`folio_zero_validated`] past its inline case (out of line): a folio that is all its
/// fault's neighbourhood in more than one batch, or one whose pages it orders around the
/// fault.
///
/// # Safety
/// As [`folio_zero_validated`], and `fault < npages`.
#[inline(never)]
unsafe fn folio_zero_ordered(
    dst: *mut u8,
    npages: usize,
    fault: usize,
    clearer: &Clearer,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    // A folio of at most radius + 1 pages is all the fault's neighbourhood, wherever the
    // fault is: one hot range, nothing to order.
    if npages <= clearer.whole_neighbourhood {
        // SAFETY: the caller's npages pages, writable and unshared.
        unsafe { clearer.clear_range(dst, 0..npages, Locality::TouchedNext, resched) };
        return Ok(());
    }
    match clearer.config().folio_order {
        FolioOrder::NeighbourhoodLast => {
            // Right, left, then the neighbourhood, hot (`in_order`, unrolled).
            let r = FaultRanges::around(npages, fault, clearer.cfg.policy.fault_radius());
            let far = clearer.cfg.memory.locality(true);
            // SAFETY: each range lies inside the caller's npages pages (fault < npages).
            unsafe {
                clearer.clear_range(dst, r.right, far, resched);
                clearer.clear_range(dst, r.left, far, resched);
                clearer.clear_range(dst, r.neighbourhood, Locality::TouchedNext, resched);
            }
        }
        FolioOrder::TargetLast => {
            let far = clearer.cfg.memory.locality(true);
            for page in TargetLastOrder::new(npages, fault)? {
                let locality = if page == fault {
                    Locality::TouchedNext
                } else {
                    far
                };
                // SAFETY: page < npages, inside the caller's range.
                unsafe { clearer.clear_range(dst, page..page + 1, locality, resched) };
            }
        }
    }
    Ok(())
}

/// The kernel's `clear_pages()`: one primitive call for an extent strategy (inline, so a
/// small clear costs the primitive and a jump), else a loop of one call per page (the generic
/// `clear_page()` loop).
///
/// # Safety
/// `npages << shift` bytes from `dst` writable and unshared; the strategy available.
#[inline(always)]
unsafe fn clear_pages(strategy: Strategy, dst: *mut u8, npages: usize, shift: u32) {
    if strategy.is_extent() {
        // SAFETY: forwarded from the caller.
        unsafe { backend::clear(strategy, dst, npages << shift) };
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { clear_page_by_page(strategy, dst, npages, shift) };
    }
}

/// The generic `clear_page()` loop: one primitive call per page.
///
/// # Safety
/// As [`clear_pages`].
#[inline(never)]
unsafe fn clear_page_by_page(strategy: Strategy, dst: *mut u8, npages: usize, shift: u32) {
    for i in 0..npages {
        // SAFETY: page i of the caller's range.
        unsafe { backend::clear(strategy, dst.add(i << shift), 1 << shift) };
    }
}
