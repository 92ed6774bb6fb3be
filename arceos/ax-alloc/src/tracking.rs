//! Allocation tracking (ax-alloc's `tracking` feature): while enabled, every heap allocation
//! is recorded with its layout, a backtrace and a generation number (its place in the order
//! of allocations), until it is freed; a leak hunt enables it, runs a workload and lists
//! what is still alive from a range of generations.
//!
//! Pages are tracked too, by buddy-sim's page_owner: enabling tracking gives every zone its
//! owner records (from its own pages, once), and each page call's blocks are recorded with
//! its [`UsageKind`](axalloc_buddy::UsageKind), its CPU and a generation from the same sequence as the heap's
//! ([`axalloc_buddy::GlobalAllocator::next_sequence`]), so that one range of generations
//! covers heap and pages. [`page_allocations_in`] lists the runs; [`page_usages`] sums them
//! per kind, what [`GlobalAllocator::usages`](crate::GlobalAllocator::usages) counts as the
//! calls go.
//!
//! The heap's records live in a map on the heap itself: a CPU that is recording does not
//! record the map's own allocations (one flag per CPU, set while its record is written).

use alloc::collections::btree_map::BTreeMap;
use core::alloc::Layout;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, Ordering};

use axalloc_buddy::Usages;
use axbacktrace::Backtrace;
use spin::Mutex;

/// One live allocation.
#[derive(Debug)]
pub struct AllocationInfo {
    /// Its size and alignment.
    pub layout: Layout,
    /// Where it was allocated.
    pub backtrace: Backtrace,
    /// Its place in the order of tracked allocations.
    pub generation: u64,
}

/// A run of pages alive, as page_owner recorded it: its `sequence` is its generation, in
/// one order with the heap's allocations.
pub use axalloc_buddy::OwnedRun;

/// The live allocations by address.
struct Records {
    live: BTreeMap<usize, AllocationInfo>,
}

static RECORDS: Mutex<Records> = Mutex::new(Records {
    live: BTreeMap::new(),
});

/// The allocator whose sequence numbers the records take and whose pages are tracked.
fn pages() -> &'static axalloc_buddy::GlobalAllocator<crate::CurrentCpu> {
    crate::global_allocator().buddy()
}

static ENABLED: AtomicBool = AtomicBool::new(false);

/// CPUs whose recording flag is kept; a CPU past them records nothing.
const CPUS: usize = 256;

/// Set on a CPU while it writes a record (its allocations then are the map's own).
static RECORDING: [AtomicBool; CPUS] = [const { AtomicBool::new(false) }; CPUS];

/// Starts recording allocations: the heap's, and the page calls' (page_owner, started in
/// every zone the first time; a zone without room for its records logs it and records
/// none).
pub fn enable_tracking() {
    if let Err(e) = pages().enable_page_owner() {
        log::warn!("tracking: page_owner could not start in every zone: {e:?}");
    }
    pages().set_page_tracking(true);
    ENABLED.store(true, Ordering::SeqCst);
}

/// Stops recording (the records of live allocations stay).
pub fn disable_tracking() {
    ENABLED.store(false, Ordering::SeqCst);
    pages().set_page_tracking(false);
}

/// Whether allocations are recorded.
pub fn tracking_enabled() -> bool {
    ENABLED.load(Ordering::SeqCst)
}

/// The generation the next recorded allocation gets (heap or pages).
pub fn current_generation() -> u64 {
    pages().sequence()
}

/// Calls `visitor` on every live allocation whose generation lies in `range`.
pub fn allocations_in(range: Range<u64>, mut visitor: impl FnMut(&AllocationInfo)) {
    with_records(|r| {
        r.live
            .values()
            .filter(|info| range.contains(&info.generation))
            .for_each(&mut visitor);
    });
}

/// Calls `visitor` on every run of pages alive that a tracked page call allocated with a
/// generation (its `sequence`) in `range`, region by region in address order. Records are
/// read without locks: a run allocated or freed meanwhile may be listed with another call's
/// fields, or not at all.
pub fn page_allocations_in(range: Range<u64>, mut visitor: impl FnMut(&OwnedRun)) {
    pages().owned_runs(|run| {
        if run.sequence.is_some_and(|g| range.contains(&g)) {
            visitor(&run);
        }
    });
}

/// The bytes of pages held per kind, from page_owner's records: every run allocated since
/// tracking was first enabled, tracked or not (the heap's kind counts its pages here, its
/// bytes in [`GlobalAllocator::usages`](crate::GlobalAllocator::usages)).
pub fn page_usages() -> Usages {
    pages().owner_usages()
}

/// The CPU whose flag a record takes: this CPU on a bare-metal kernel, where
/// `kernel_guard`'s guard masks interrupts and preemption; CPU 0 for every CPU elsewhere (on
/// the `std-compat` target the guard does nothing: a CPU read there could be stale, and one
/// flag for all keeps a record from recursing, at the cost of a record skipped while another
/// CPU writes one).
#[inline(always)]
fn recording_cpu() -> usize {
    #[cfg(target_os = "none")]
    // SAFETY: `with_records` holds `kernel_guard`'s guard, which masks interrupts and
    // preemption on a bare-metal kernel.
    let cpu = unsafe { crate::percpu_index() };
    #[cfg(not(target_os = "none"))]
    let cpu = 0;
    cpu
}

/// `f` on the records, with interrupts off and this CPU's flag set; `None` when this CPU is
/// writing a record already (or has no flag).
fn with_records<T>(f: impl FnOnce(&mut Records) -> T) -> Option<T> {
    let _irq = kernel_guard::NoPreemptIrqSave::new();
    let flag = RECORDING.get(recording_cpu())?;
    if flag.swap(true, Ordering::Acquire) {
        return None;
    }
    let result = f(&mut RECORDS.lock());
    flag.store(false, Ordering::Release);
    Some(result)
}

/// Records `ptr`, just allocated with `layout`, while tracking is enabled.
pub(crate) fn allocated(ptr: *mut u8, layout: Layout) {
    if ptr.is_null() || !tracking_enabled() {
        return;
    }
    let generation = pages().next_sequence();
    with_records(|r| {
        let info = AllocationInfo {
            layout,
            backtrace: Backtrace::capture(),
            generation,
        };
        r.live.insert(ptr as usize, info);
    });
}

/// Forgets `ptr`'s record, if it has one.
pub(crate) fn freed(ptr: *mut u8) {
    with_records(|r| r.live.remove(&(ptr as usize)));
}
