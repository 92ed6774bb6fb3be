//! What is wrong with an [`AllocRequest`](crate::AllocRequest): [`RequestConflict`].

use core::fmt;

/// What is wrong with a request's combination of options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestConflict {
    /// [`AllocRequest::frozen`](crate::AllocRequest::frozen) without [`AllocRequest::contiguous`](crate::AllocRequest::contiguous): only contiguous
    /// allocations hand pages out frozen.
    FrozenWithoutContiguous,
    /// A movable or reclaimable kind with [`AllocRequest::contiguous`](crate::AllocRequest::contiguous): contiguous runs are
    /// unmovable pages.
    KindWithContiguous,
    /// [`AllocRequest::from_cma`](crate::AllocRequest::from_cma) without
    /// [`AllocRequest::contiguous`](crate::AllocRequest::contiguous): a CMA reservation
    /// hands out contiguous runs, moving what borrowed its memory.
    CmaWithoutContiguous,
    /// [`AllocRequest::aligned`](crate::AllocRequest::aligned) above a block's own order: a block is aligned to its order;
    /// ask for [`AllocRequest::frames`](crate::AllocRequest::frames) to align a run further.
    AlignedBlock,
    /// [`AllocRequest::fault_at`](crate::AllocRequest::fault_at) without [`AllocRequest::zeroed`](crate::AllocRequest::zeroed).
    FaultWithoutZeroed,
}

impl fmt::Display for RequestConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FrozenWithoutContiguous => "frozen pages come only from contiguous allocations",
            Self::KindWithContiguous => "contiguous runs are unmovable",
            Self::CmaWithoutContiguous => "a CMA reservation hands out contiguous runs only",
            Self::AlignedBlock => "a block is aligned to its own order; ask for frames instead",
            Self::FaultWithoutZeroed => "a fault hint only orders the clearing of a zeroed request",
        })
    }
}
