//! A working-set estimator: fed the batches of periodic aging passes
//! ([`age_batches`](crate::age_batches)), it keeps how many passes each run of pages has been
//! idle and reports the working set as bins of idle time (the shape virtio-balloon's
//! working-set reporting sends a host) and the pages idle longer than a threshold (what a
//! hypervisor reclaims or balloons first).
//!
//! Storage is the caller's: a slice of [`IdleRun`]s, half for the runs kept and half for the
//! pass being built, so a pass that fails leaves the estimate as it was. The state is one run
//! per stretch of consecutive pages of equal idle age, and a pass costs time proportional to
//! the runs and batches it merges, not to pages: a 2 MiB leaf or a 64 KiB contiguous block is
//! one batch, one run.
//!
//! Each pass must report every mapped page (in address order, batches not overlapping); a
//! page the pass does not report is taken as unmapped and forgotten. A batch's idle age is 0
//! if it was young; otherwise one more than the youngest page it covers that was tracked
//! before (a folio that grew by folding is as recently used as its most recently used part;
//! each part of a folio that split keeps the age of the whole), or 1 if none was.

use mm_types::{PageRange, PageSize, VirtAddr};

/// A run of consecutive pages with the same idle age: the unit of a [`WorkingSet`]'s
/// storage, which the caller supplies as a slice (`[IdleRun::EMPTY; N]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IdleRun {
    first: u64,
    pages: u32,
    age: u32,
}

impl IdleRun {
    /// An unused slot.
    pub const EMPTY: Self = Self {
        first: 0,
        pages: 0,
        age: 0,
    };

    /// The first page's number (its address over the page size).
    #[must_use]
    pub const fn first_page(&self) -> u64 {
        self.first
    }

    /// Pages in the run.
    #[must_use]
    pub const fn pages(&self) -> u64 {
        self.pages as u64
    }

    /// Aging passes since any of the run's pages was last found young (0: young in the last
    /// pass).
    #[must_use]
    pub const fn age(&self) -> u32 {
        self.age
    }

    /// The page number just past the run.
    const fn end(&self) -> u64 {
        self.first + self.pages as u64
    }
}

/// What was wrong with a call to the estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WorkingSetError {
    /// The storage holds fewer than two runs: one kept, one being built.
    StorageTooSmall {
        /// Runs given.
        len: usize,
    },
    /// A pass needs more runs than half the storage holds; the estimate is unchanged.
    Capacity {
        /// Runs half the storage holds.
        capacity: usize,
    },
    /// A batch is empty, more than `u32::MAX` pages, not page aligned, or ends past the
    /// address space.
    BadRange {
        /// The batch's start.
        start: VirtAddr,
    },
    /// A batch starts before the end of the previous one: a pass reports in address order.
    OutOfOrder {
        /// The batch's start.
        start: VirtAddr,
    },
    /// A batch's page size differs from the estimate's.
    MixedPageSizes {
        /// The estimate's page size.
        expected: PageSize,
        /// The batch's.
        found: PageSize,
    },
    /// An [`IdleAges`](crate::IdleAges) slot is not a power of two pages, its base is not
    /// aligned to a slot, or its slots end past the address space.
    BadSlot {
        /// The base given.
        base: VirtAddr,
        /// Pages per slot given.
        slot_pages: u64,
    },
    /// A batch lies (partly) outside the slots an [`IdleAges`](crate::IdleAges) covers.
    OutsideTracked {
        /// The batch's start.
        start: VirtAddr,
    },
    /// Bin edges must increase strictly, with one more output slot than edges.
    BadBins {
        /// Edges given.
        edges: usize,
        /// Output slots given.
        out: usize,
    },
}

impl core::fmt::Display for WorkingSetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::StorageTooSmall { len } => {
                write!(f, "storage of {len} runs: need at least 2")
            }
            Self::Capacity { capacity } => {
                write!(f, "the pass needs more than {capacity} runs")
            }
            Self::BadRange { start } => write!(
                f,
                "the batch at {start} is empty, too long, unaligned or ends past the address space"
            ),
            Self::OutOfOrder { start } => write!(
                f,
                "the batch at {start} starts before the previous one ends"
            ),
            Self::MixedPageSizes { expected, found } => {
                write!(
                    f,
                    "a batch of {found} pages in an estimate of {expected} pages"
                )
            }
            Self::BadSlot { base, slot_pages } => write!(
                f,
                "slots of {slot_pages} pages from {base}: need a power of two, a base aligned \
                 to it, and slots that end inside the address space"
            ),
            Self::OutsideTracked { start } => {
                write!(f, "the batch at {start} lies outside the tracked slots")
            }
            Self::BadBins { edges, out } => write!(
                f,
                "{edges} bin edges and {out} output slots: need increasing edges and one \
                 slot more"
            ),
        }
    }
}

impl core::error::Error for WorkingSetError {}

/// The bins of idle age both estimators report: `out[k]` counts the pages of the `(age,
/// pages)` items idle for at least `edges[k - 1]` (0 for the first bin) and fewer than
/// `edges[k]` passes (no bound for the last).
///
/// # Errors
/// [`WorkingSetError::BadBins`] unless `edges` increase strictly and
/// `out.len() == edges.len() + 1`; `out` is untouched then.
pub(crate) fn fill_bins(
    edges: &[u32],
    out: &mut [u64],
    items: impl Iterator<Item = (u32, u64)>,
) -> Result<(), WorkingSetError> {
    let increasing = edges.windows(2).all(|w| w[0] < w[1]);
    if !increasing || edges.len().checked_add(1) != Some(out.len()) {
        return Err(WorkingSetError::BadBins {
            edges: edges.len(),
            out: out.len(),
        });
    }
    out.fill(0);
    for (age, pages) in items {
        let bin = edges.partition_point(|&edge| edge <= age);
        out[bin] += pages;
    }
    Ok(())
}

/// What one pass saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Batches observed.
    pub batches: u64,
    /// Pages they cover.
    pub pages: u64,
    /// Of those, pages in young batches.
    pub young_pages: u64,
    /// Runs the estimate holds after the pass.
    pub runs: usize,
}

/// Per-run idle ages over periodic aging passes, in storage the caller supplies. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct WorkingSet<'a> {
    storage: &'a mut [IdleRun],
    state: State,
}

/// What a finished pass changes besides the runs.
#[derive(Clone, Copy, Debug)]
struct State {
    /// Which half holds the kept runs: false for the low half.
    high: bool,
    len: usize,
    size: Option<PageSize>,
    passes: u64,
}

impl<'a> WorkingSet<'a> {
    /// An empty estimate over `storage`; it holds up to `storage.len() / 2` runs.
    ///
    /// # Errors
    /// [`WorkingSetError::StorageTooSmall`] for fewer than two runs of storage.
    pub fn new(storage: &'a mut [IdleRun]) -> Result<Self, WorkingSetError> {
        if storage.len() < 2 {
            return Err(WorkingSetError::StorageTooSmall { len: storage.len() });
        }
        Ok(Self {
            storage,
            state: State {
                high: false,
                len: 0,
                size: None,
                passes: 0,
            },
        })
    }

    /// The most runs the estimate holds.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.storage.len() / 2
    }

    /// Passes completed.
    #[must_use]
    pub fn passes(&self) -> u64 {
        self.state.passes
    }

    /// The page size of the pages tracked (set by the first batch observed).
    #[must_use]
    pub fn page_size(&self) -> Option<PageSize> {
        self.state.size
    }

    /// The runs, in address order.
    #[must_use]
    pub fn runs(&self) -> &[IdleRun] {
        let cap = self.capacity();
        let base = if self.state.high { cap } else { 0 };
        &self.storage[base..base + self.state.len]
    }

    /// Pages tracked: every page the last pass reported.
    #[must_use]
    pub fn tracked_pages(&self) -> u64 {
        self.runs().iter().map(IdleRun::pages).sum()
    }

    /// Pages idle for at least `min_age` passes.
    #[must_use]
    pub fn idle_pages(&self, min_age: u32) -> u64 {
        self.runs()
            .iter()
            .filter(|r| r.age >= min_age)
            .map(IdleRun::pages)
            .sum()
    }

    /// The runs idle for at least `min_age` passes, as page ranges (adjacent runs of
    /// different ages idle past the threshold come as separate ranges).
    pub fn idle_ranges(&self, min_age: u32) -> impl Iterator<Item = PageRange> + '_ {
        let size = self.state.size.unwrap_or(PageSize::Size4KiB);
        self.runs()
            .iter()
            .filter(move |r| r.age >= min_age)
            .map(move |r| PageRange::new(VirtAddr(r.first << size.shift()), r.pages(), size))
    }

    /// The working set as bins of idle age: `out[k]` counts the pages idle for at least
    /// `edges[k - 1]` (0 for the first bin) and fewer than `edges[k]` passes (no bound for
    /// the last). With passes every `t` ms, bin edges in passes are virtio-balloon's idle-age
    /// edges over `t`.
    ///
    /// # Errors
    /// [`WorkingSetError::BadBins`] unless `edges` increase strictly and
    /// `out.len() == edges.len() + 1`; `out` is untouched then.
    pub fn bins(&self, edges: &[u32], out: &mut [u64]) -> Result<(), WorkingSetError> {
        fill_bins(edges, out, self.runs().iter().map(|r| (r.age, r.pages())))
    }

    /// Starts a pass: report every batch of one aging walk over the whole tracked space
    /// with [`Pass::observe`], then [`Pass::finish`]. Dropping the pass unfinished leaves the
    /// estimate as it was.
    pub fn pass(&mut self) -> Pass<'_> {
        let cap = self.capacity();
        let (low, high) = self.storage.split_at_mut(cap);
        let len = self.state.len;
        let (kept, built) = if self.state.high {
            (&high[..len], low)
        } else {
            (&low[..len], &mut high[..cap])
        };
        let size = self.state.size;
        Pass {
            kept,
            built,
            state: &mut self.state,
            cursor: 0,
            out: 0,
            open: None,
            next: 0,
            size,
            shift: size.map_or(0, PageSize::shift),
            stats: PassStats::default(),
            error: None,
        }
    }
}

/// One aging pass being merged into a [`WorkingSet`].
#[derive(Debug)]
#[must_use = "a pass changes nothing until it is finished"]
pub struct Pass<'w> {
    /// The runs of the last pass.
    kept: &'w [IdleRun],
    /// Where this pass builds its runs (as many slots as the estimate holds).
    built: &'w mut [IdleRun],
    state: &'w mut State,
    /// The first kept run that may overlap the next batch.
    cursor: usize,
    /// Runs built so far, not counting the open one.
    out: usize,
    /// The last run, which the next batch may extend.
    open: Option<IdleRun>,
    /// The page number the next batch may start at.
    next: u64,
    size: Option<PageSize>,
    /// The page size's shift, once it is known.
    shift: u32,
    stats: PassStats,
    error: Option<WorkingSetError>,
}

impl Pass<'_> {
    /// Records one batch of the walk: `range` (its pages, in address order after the
    /// previous batch) and whether it was young. Made to be called from
    /// [`age_batches`](crate::age_batches)'s report.
    ///
    /// # Errors
    /// [`WorkingSetError::BadRange`], [`WorkingSetError::OutOfOrder`],
    /// [`WorkingSetError::MixedPageSizes`] or [`WorkingSetError::Capacity`]; the pass is
    /// spoiled then (every later call and [`finish`](Self::finish) return the first error,
    /// and the estimate stays as it was).
    #[inline]
    pub fn observe(&mut self, range: PageRange, young: bool) -> Result<(), WorkingSetError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let result = self.merge(range, young);
        if let Err(e) = result {
            self.error = Some(e);
        }
        result
    }

    #[inline]
    fn merge(&mut self, range: PageRange, young: bool) -> Result<(), WorkingSetError> {
        match self.size {
            Some(size) if size == range.size => {}
            Some(size) => {
                return Err(WorkingSetError::MixedPageSizes {
                    expected: size,
                    found: range.size,
                });
            }
            None => {
                self.size = Some(range.size);
                self.shift = range.size.shift();
            }
        }
        let pages = u32::try_from(range.pages).unwrap_or(0);
        let misaligned = range.start.0 & ((1 << self.shift) - 1) != 0;
        if pages == 0 || misaligned || range.end().is_none() {
            return Err(WorkingSetError::BadRange { start: range.start });
        }
        let first = range.start.0 >> self.shift;
        let end = first + u64::from(pages);
        if first < self.next {
            return Err(WorkingSetError::OutOfOrder { start: range.start });
        }
        let kept = self.kept;
        while kept.get(self.cursor).is_some_and(|r| r.end() <= first) {
            self.cursor += 1;
        }
        // The youngest kept page the batch covers: usually the batch lies in one run.
        let youngest = match kept.get(self.cursor) {
            Some(r) if r.first < end && r.end() >= end => Some(r.age),
            _ => kept[self.cursor..]
                .iter()
                .take_while(|r| r.first < end)
                .map(|r| r.age)
                .min(),
        };
        let age = if young {
            0
        } else {
            youngest.map_or(1, |a| a.saturating_add(1))
        };
        // The last run stays open (in registers, not storage) while batches extend it.
        match &mut self.open {
            Some(open)
                if open.end() == first
                    && open.age == age
                    && open.pages.checked_add(pages).is_some() =>
            {
                open.pages += pages;
            }
            _ => {
                if let Some(done) = self.open.replace(IdleRun { first, pages, age }) {
                    self.close(done)?;
                }
            }
        }
        self.next = end;
        self.stats.batches += 1;
        self.stats.pages += range.pages;
        if young {
            self.stats.young_pages += range.pages;
        }
        Ok(())
    }

    /// Stores a finished run in the pass's half of the storage.
    fn close(&mut self, run: IdleRun) -> Result<(), WorkingSetError> {
        let capacity = self.built.len();
        let slot = self
            .built
            .get_mut(self.out)
            .ok_or(WorkingSetError::Capacity { capacity })?;
        *slot = run;
        self.out += 1;
        Ok(())
    }

    /// Ends the pass: the batches observed replace the estimate.
    ///
    /// # Errors
    /// The first error [`observe`](Self::observe) returned; the estimate is unchanged then.
    pub fn finish(mut self) -> Result<PassStats, WorkingSetError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if let Some(last) = self.open.take() {
            self.close(last)?;
        }
        let state = self.state;
        state.high = !state.high;
        state.len = self.out;
        state.size = self.size.or(state.size);
        state.passes += 1;
        Ok(PassStats {
            runs: self.out,
            ..self.stats
        })
    }
}
