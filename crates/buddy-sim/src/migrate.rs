//! The embedder's side of compaction and contiguous allocation: the [`Migrate`] callback that
//! moves one movable block, and the [`Migration`] the zone hands it.

use crate::error::contig::ContigError;
use crate::memory::{FRAME, FrameMemory};
use crate::types::Order;
use mm_types::Pfn;

/// One block to move: what the zone hands the embedder's [`Migrate`] callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migration {
    /// The key the block was allocated with ([`Zone::alloc_movable`](crate::Zone::alloc_movable)).
    pub key: u64,
    /// Where the block is: frozen while the callback runs (a free of it fails with
    /// [`FreeError::Frozen`](crate::FreeError::Frozen)).
    pub from: Pfn,
    /// Where it goes: taken off the free lists for this migration, nobody else's.
    pub to: Pfn,
    /// The block's order.
    pub order: Order,
}

impl Migration {
    /// Copies the block's `2^order` frames from `from` to `to` through `memory`: what a
    /// callback does before it repoints its mappings.
    ///
    /// # Errors
    /// [`ContigError::NotAddressable`] if `memory` cannot reach either block; nothing is
    /// copied then.
    ///
    /// # Safety
    /// `memory` keeps the [`FrameMemory`] contract for this zone, and nothing writes the
    /// source block while the copy runs (its owner's mappings of it are blocked or
    /// read-only): the zone hands the callback the target alone, not the source's users.
    #[allow(unsafe_code)]
    pub unsafe fn copy(&self, memory: &impl FrameMemory) -> Result<(), ContigError> {
        let bytes = usize::try_from(self.order.pages())
            .ok()
            .and_then(|p| p.checked_mul(FRAME.bytes()))
            .ok_or(ContigError::Overflow)?;
        let from = memory
            .frame_ptr(self.from)
            .ok_or(ContigError::NotAddressable(self.from))?;
        let to = memory
            .frame_ptr(self.to)
            .ok_or(ContigError::NotAddressable(self.to))?;
        // SAFETY: by the `FrameMemory` contract both blocks are mapped contiguously for
        // `bytes`, at distinct frames (so the ranges do not overlap); the target is this
        // migration's alone and the caller promised that nothing writes the source meanwhile.
        unsafe { core::ptr::copy_nonoverlapping(from.as_ptr(), to.as_ptr(), bytes) };
        Ok(())
    }
}

/// The embedder's side of moving a movable block: copy it ([`Migration::copy`]), repoint
/// every mapping of it to [`Migration::to`], and return `true`; or return `false` (pinned for
/// I/O, mapped where it cannot be repointed now) and change nothing. Any
/// `FnMut(&Migration) -> bool` is one.
pub trait Migrate {
    /// Moves the block, or refuses.
    fn migrate(&mut self, m: &Migration) -> bool;
}

impl<T: FnMut(&Migration) -> bool> Migrate for T {
    fn migrate(&mut self, m: &Migration) -> bool {
        self(m)
    }
}
