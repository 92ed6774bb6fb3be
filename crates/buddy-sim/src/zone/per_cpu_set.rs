//! The per-CPU storage a zone is given ([`PerCpuSet`]): its [`PerCpu`] slots and the event
//! hook, plain storage with [`NoEvents`] or [`WithEvents`] with a hook of the embedder's.

use crate::events::{NoEvents, ZoneEvents};
use crate::zone::pcp::PerCpu;

/// The per-CPU storage a zone is given: its [`PerCpu`] slots, one per CPU, and the event
/// hook. Any `AsRef<[PerCpu<R>]>` (a slice, an array, a vector) is one with [`NoEvents`];
/// [`WithEvents`] adds a hook.
pub trait PerCpuSet<R> {
    /// The hook.
    type Events: ZoneEvents;
    /// The slots, one per CPU.
    fn slots(&self) -> &[PerCpu<R>];
    /// The hook.
    fn events(&self) -> &Self::Events;
}

impl<R, T: AsRef<[PerCpu<R>]> + ?Sized> PerCpuSet<R> for T {
    type Events = NoEvents;

    #[inline(always)]
    fn slots(&self) -> &[PerCpu<R>] {
        self.as_ref()
    }

    #[inline(always)]
    fn events(&self) -> &NoEvents {
        &NoEvents
    }
}

/// Per-CPU storage `P` with the event hook `E`: what a zone is given to report its events.
///
/// ```
/// use buddy_sim::events::{PageAlloc, ZoneEvents};
/// use buddy_sim::WithEvents;
/// use buddy_sim::{Frame, Order, PerCpu, Pfn, Zone, ZoneConfig};
/// use core::sync::atomic::{AtomicU64, Ordering};
///
/// /// Allocations per CPU, as a per-CPU counter would keep them.
/// struct CountAllocs([AtomicU64; 2]);
/// impl ZoneEvents for CountAllocs {
///     fn page_alloc(&self, e: &PageAlloc<'_>) {
///         self.0[e.cpu.get()].fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// static FRAMES: [Frame; 64] = [const { Frame::new() }; 64];
/// static CPUS: [PerCpu; 2] = [const { PerCpu::new() }; 2];
/// static COUNTS: CountAllocs = CountAllocs([const { AtomicU64::new(0) }; 2]);
/// let zone = Zone::new_empty(
///     ZoneConfig::new(Pfn(0x100), 64).with_cpus(2),
///     &FRAMES[..],
///     WithEvents::new(&CPUS[..], &COUNTS),
/// )?;
/// zone.add_memory(Pfn(0x100), 64)?;
/// zone.alloc_pages(1, Order::ZERO)?;
/// assert_eq!(COUNTS.0[1].load(Ordering::Relaxed), 1);
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
#[derive(Debug)]
pub struct WithEvents<P, E> {
    slots: P,
    events: E,
}

impl<P, E> WithEvents<P, E> {
    /// `slots` reporting to `events`.
    pub const fn new(slots: P, events: E) -> Self {
        Self { slots, events }
    }
}

impl<R, P: AsRef<[PerCpu<R>]>, E: ZoneEvents> PerCpuSet<R> for WithEvents<P, E> {
    type Events = E;

    #[inline(always)]
    fn slots(&self) -> &[PerCpu<R>] {
        self.slots.as_ref()
    }

    #[inline(always)]
    fn events(&self) -> &E {
        &self.events
    }
}
