//! A CMA reservation's handle: [`CmaArea`], the frames a zone set aside for one owner's
//! contiguous runs (Linux's `struct cma`), lent to movable allocations meanwhile.

use mm_types::Pfn;

/// Frames of a zone reserved for contiguous runs (Linux's CMA, `cma=` / `hugetlb_cma=`):
/// whole pageblocks whose free memory only movable allocations borrow, and whose runs only
/// a request naming the area takes ([`AllocRequest::from_cma`](crate::AllocRequest::from_cma)),
/// moving the borrowers out. Made by [`Cpu::reserve_cma`](crate::Cpu::reserve_cma) (or at
/// a frame, [`Cpu::reserve_cma_at`](crate::Cpu::reserve_cma_at); per node,
/// [`NodeSet::reserve_cma`](crate::NodeSet::reserve_cma)). A reservation lasts as long as
/// the zone, as Linux's; the handle is a plain value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CmaArea {
    base: Pfn,
    pages: u64,
}

impl CmaArea {
    /// The area `[base, base + pages)`; the zone checks it when a request names it.
    pub(crate) const fn new(base: Pfn, pages: u64) -> Self {
        Self { base, pages }
    }

    /// Its first frame.
    #[must_use]
    pub const fn base(&self) -> Pfn {
        self.base
    }

    /// Its length in frames.
    #[must_use]
    pub const fn pages(&self) -> u64 {
        self.pages
    }

    /// Whether `[pfn, pfn + nr)` lies inside it (false for `nr == 0` and on overflow).
    #[must_use]
    pub const fn contains(&self, pfn: Pfn, nr: u64) -> bool {
        match (pfn.0.checked_add(nr), self.base.0.checked_add(self.pages)) {
            (Some(end), Some(area_end)) => nr > 0 && pfn.0 >= self.base.0 && end <= area_end,
            _ => false,
        }
    }
}
