//! Test harnesses (feature `testing`; not part of the stable API): operation sequences
//! applied to a zone and to its reference side by side, with every invariant checked:
//! [`Lockstep`] (batched `free_contig_range` against the per-page path) and, with the
//! features `alloc` and `spin`, [`ZeroedModel`] (zeroed allocation against a page-by-page
//! model backed by memory). The crate's tests, its fuzz targets and an embedder's own tests
//! use them; the references themselves are in [`crate::reference`].

mod lockstep;
#[cfg(all(feature = "alloc", feature = "spin"))]
mod nodes;
mod ops;
mod outcome;
mod snapshot;
#[cfg(all(feature = "alloc", feature = "spin"))]
mod zeroed;

pub use lockstep::{Divergence, Lockstep, ReportFault};
#[cfg(all(feature = "alloc", feature = "spin"))]
pub use nodes::{NodeDivergence, NodeModel, NodeOp};
pub use ops::Op;
pub use snapshot::{Snapshot, SnapshotDifference};
#[cfg(all(feature = "alloc", feature = "spin"))]
pub use zeroed::{ZeroDivergence, ZeroedModel};
