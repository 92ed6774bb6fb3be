//! The zone's debugging switch: one word that says which debugging features are on (fault
//! injection, page_owner, `init_on_free`), so that every allocation and every free reads
//! one word for all of them and, while it is zero, does nothing else for them. Each
//! feature's state lives in its own module; here are the switch and the slow paths the
//! allocation and free paths take while it is on.

use crate::contents::Contents;
use crate::error::alloc::AllocError;
use crate::events::PerCpuSet;
use crate::frame::Frame;
use crate::migratetype::MigrateType;
use crate::request::SlowPath;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::buddy::Prefer;
use crate::zone::pcp::CpuLists;
use core::sync::atomic::Ordering;
use lock_api::RawMutex;

/// Fault injection is armed ([`Zone::set_fail_page_alloc`]).
pub(crate) const DEBUG_FAULT: u32 = 1;
/// page_owner records owners ([`Zone::enable_page_owner`]).
pub(crate) const DEBUG_OWNER: u32 = 1 << 1;
/// Frees clear what they free ([`Zone::set_init_on_free`]).
pub(crate) const DEBUG_INIT_ON_FREE: u32 = 1 << 2;
/// Frees poison what they free, allocations check it ([`Zone::set_page_poison`]).
pub(crate) const DEBUG_POISON: u32 = 1 << 3;

impl<F, P, R> Zone<F, P, R>
where
    F: AsRef<[Frame]>,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Whether any debugging feature is on (a relaxed load: turning one on is not ordered
    /// with allocations on other CPUs, as Linux's debugfs writes are not).
    #[inline(always)]
    pub(crate) fn debugging(&self) -> bool {
        self.debug.load(Ordering::Relaxed) != 0
    }

    /// Whether debugging feature `bit` is on.
    #[inline]
    pub(crate) fn debugging_with(&self, bit: u32) -> bool {
        self.debug.load(Ordering::Relaxed) & bit != 0
    }

    /// Turns debugging feature `bit` on or off.
    pub(crate) fn set_debugging(&self, bit: u32, on: bool) {
        if on {
            self.debug.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.debug.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// [`Zone::alloc_with`] while debugging: fault injection first, the owner recorded
    /// after.
    #[cold]
    #[inline(never)]
    pub(crate) fn alloc_debugged(
        &self,
        cpu: CpuLists<'_, R>,
        order: Order,
        how: (Prefer, MigrateType, u64),
        hooks: &mut SlowPath<'_, '_>,
    ) -> Result<(FrameIdx, Contents), AllocError> {
        if self.injects_failure(order, how.1) {
            return Err(AllocError::OutOfMemory(order));
        }
        let taken = self.alloc_unchecked(cpu, order, how, hooks)?;
        self.allocated_debugged(Some(cpu), taken.0, order, how.1);
        Ok(taken)
    }

    /// What an allocation does while debugging once it has the block of `order` at `idx`:
    /// its owner recorded, and with page poisoning the poison checked.
    pub(crate) fn allocated_debugged(
        &self,
        cpu: Option<CpuLists<'_, R>>,
        idx: FrameIdx,
        order: Order,
        mt: MigrateType,
    ) {
        self.record_owner(cpu, idx, order, mt);
        if self.debugging_with(DEBUG_POISON) {
            self.check_poison(idx, order);
        }
    }

    /// What a free does while debugging, before the block of `order` at `idx` goes back:
    /// its owner record cleared, and with `init_on_free` the block cleared; whether it is
    /// zero now.
    #[cold]
    #[inline(never)]
    pub(crate) fn free_debugged(&self, idx: FrameIdx, order: Order) -> bool {
        self.clear_owner(idx);
        self.init_freed(idx, order)
    }
}
