//! Allocation tracking (ax-alloc's `tracking` feature): while enabled, every heap allocation
//! is recorded with its layout, a backtrace and a generation number (its place in the order
//! of allocations), until it is freed; a leak hunt enables it, runs a workload and lists
//! what is still alive from a range of generations.
//!
//! The records live in a map on the heap itself: a CPU that is recording does not record
//! the map's own allocations (one flag per CPU, set while its record is written).

use alloc::collections::btree_map::BTreeMap;
use core::alloc::Layout;
use core::ops::Range;
use core::sync::atomic::{AtomicBool, Ordering};

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

/// The live allocations by address, and the next generation.
struct Records {
    live: BTreeMap<usize, AllocationInfo>,
    generation: u64,
}

static RECORDS: Mutex<Records> = Mutex::new(Records {
    live: BTreeMap::new(),
    generation: 0,
});

static ENABLED: AtomicBool = AtomicBool::new(false);

/// CPUs whose recording flag is kept; a CPU past them records nothing.
const CPUS: usize = 256;

/// Set on a CPU while it writes a record (its allocations then are the map's own).
static RECORDING: [AtomicBool; CPUS] = [const { AtomicBool::new(false) }; CPUS];

/// Starts recording allocations.
pub fn enable_tracking() {
    ENABLED.store(true, Ordering::SeqCst);
}

/// Stops recording (the records of live allocations stay).
pub fn disable_tracking() {
    ENABLED.store(false, Ordering::SeqCst);
}

/// Whether allocations are recorded.
pub fn tracking_enabled() -> bool {
    ENABLED.load(Ordering::SeqCst)
}

/// The generation the next recorded allocation gets.
pub fn current_generation() -> u64 {
    with_records(|r| r.generation).unwrap_or(0)
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

/// `f` on the records, with interrupts off and this CPU's flag set; `None` when this CPU is
/// writing a record already (or has no flag).
fn with_records<T>(f: impl FnOnce(&mut Records) -> T) -> Option<T> {
    let _irq = kernel_guard::NoPreemptIrqSave::new();
    let flag = RECORDING.get(crate::cpu_id())?;
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
    with_records(|r| {
        let generation = r.generation;
        r.generation = r.generation.wrapping_add(1);
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
