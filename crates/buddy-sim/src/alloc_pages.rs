//! Allocation: from the CPU's per-cpu list (refilled from the buddy in a batch when empty) or
//! straight from the buddy, with the slow path that drains every CPU's lists and retries.

use crate::frame::{Frame, Word};
use crate::{BuddyError, Order, PerCpu, Pfn, Zone};
use lock_api::RawMutex;

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: AsRef<[PerCpu<R>]>,
    R: RawMutex,
{
    /// Allocates a naturally aligned block of `2^order` frames with one reference: from
    /// `cpu`'s list for per-cpu orders (refilled from the buddy when empty), else from the
    /// buddy. When that fails, it drains every CPU's lists back into the buddy (where the
    /// blocks can merge) and tries once more, as the kernel's slow path does with
    /// `drain_all_pages()`.
    ///
    /// # Errors
    /// [`BuddyError::BadCpu`], [`BuddyError::OrderTooLarge`], [`BuddyError::OutOfMemory`].
    pub fn alloc_pages(&self, cpu: usize, order: Order) -> Result<Pfn, BuddyError> {
        let pcp = self.pcp(cpu)?;
        self.check_order(order)?;
        match self.alloc_fast(pcp, order) {
            Err(BuddyError::OutOfMemory(_)) => {
                self.drain_all();
                self.alloc_fast(pcp, order)
            }
            other => other,
        }
    }

    /// One allocation attempt without draining other lists.
    fn alloc_fast(&self, pcp: &PerCpu<R>, order: Order) -> Result<Pfn, BuddyError> {
        let m = self.map();
        let oom = BuddyError::OutOfMemory(order);
        let idx = match self.cfg.pcp_list(order) {
            Some(list) => {
                let mut lists = self.lock_pcp(pcp);
                if lists.lists[list].is_empty() {
                    lists.refill(m, &mut self.lock_zone(), list, order);
                }
                let idx = lists.pop(m, list, order).ok_or(oom)?;
                m.frame(idx).store(Word::allocated(order.get()));
                idx
            }
            None => {
                let mut free = self.lock_zone();
                let idx = free.rmqueue_smallest(m, order).ok_or(oom)?;
                m.frame(idx).store(Word::allocated(order.get()));
                idx
            }
        };
        Ok(m.pfn(idx))
    }

    /// Allocates the specific block `[pfn, pfn + 2^order)` if it lies wholly inside one block
    /// that is free in the buddy (not on a per-cpu list), splitting that block around it:
    /// for reserved ranges, taking a bad frame off the buddy, or replaying an allocation.
    ///
    /// # Errors
    /// [`BuddyError::OrderTooLarge`], [`BuddyError::Misaligned`], [`BuddyError::OutOfZone`],
    /// [`BuddyError::NotInBuddy`].
    pub fn alloc_pages_at(&self, pfn: Pfn, order: Order) -> Result<(), BuddyError> {
        self.check_order(order)?;
        if !order.aligns(pfn) {
            return Err(BuddyError::Misaligned { pfn, order });
        }
        let m = self.map();
        let idx = m.index(pfn)?;
        let mut free = self.lock_zone();
        free.take_block_at(m, idx, order)?;
        m.frame(idx).store(Word::allocated(order.get()));
        Ok(())
    }
}
