//! Fault injection as Linux's `fail_page_alloc` (`CONFIG_FAIL_PAGE_ALLOC`): block
//! allocations that fail on purpose, seeded, so that a kernel's out-of-memory paths run in
//! its tests. [`FailPageAlloc`] says which fail; [`Zone::set_fail_page_alloc`](crate::Zone::set_fail_page_alloc) arms a zone.

use crate::migratetype::MigrateType;
use crate::sync::Mutex;
use crate::types::Order;
use lock_api::RawMutex;

/// Which block allocations fail on purpose: Linux's `fail_page_alloc` attributes
/// (`probability`, `interval`, `times`, `space`, `min-order`) with a filter by kind in place
/// of its GFP filters, and a seed in place of the kernel's random numbers, so that a run
/// repeats exactly.
///
/// A call is eligible when its order is at least `min_order` and its kind is one of
/// `kinds`. Of the eligible calls, as Linux's `should_fail_ex` decides: none fails once
/// `times` failures were injected; the first `space` frames asked for pass (each call
/// takes its frames off `space` until it runs out); then every `interval`-th call is a
/// candidate, and a candidate fails with `probability` percent.
///
/// ```
/// use buddy_sim::{AllocError, FailPageAlloc, MigrateType, Order, Pfn, StaticZone};
/// static ZONE: StaticZone<1024, 1> = StaticZone::new_static_at(Pfn(0x1000));
///
/// // Every second unmovable allocation fails, three times in all.
/// ZONE.set_fail_page_alloc(Some(
///     FailPageAlloc::new(7).interval(2).times(3).only(MigrateType::Unmovable),
/// ));
/// let results: Vec<bool> = (0..8).map(|_| ZONE.alloc_pages(0, Order::ZERO).is_ok()).collect();
/// assert_eq!(results, [true, false, true, false, true, false, true, true]);
/// assert_eq!(ZONE.injected_failures(), 3);
///
/// // Only order 9 and above, half of them: the same seed fails the same calls.
/// ZONE.set_fail_page_alloc(Some(FailPageAlloc::new(7).probability(50).min_order(Order::SIZE_2MIB)));
/// assert!(ZONE.alloc_pages(0, Order::ZERO).is_ok());
/// let huge = ZONE.alloc_pages(0, Order::SIZE_2MIB);
/// assert!(matches!(huge, Ok(_) | Err(AllocError::OutOfMemory(_))));
/// ZONE.set_fail_page_alloc(None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailPageAlloc {
    /// Percent of the candidates that fail (Linux's `probability`; 100 and above: all).
    pub probability: u8,
    /// Every `interval`-th eligible call is a candidate (0 and 1: every call).
    pub interval: u64,
    /// Failures to inject before stopping (`times`; `None` is Linux's -1: no limit).
    pub times: Option<u64>,
    /// Frames the eligible calls may take before any fails (`space`, in frames).
    pub space: u64,
    /// Calls below this order never fail (`min-order`).
    pub min_order: Order,
    /// The kinds whose calls may fail, indexed as [`MigrateType::ALL`].
    pub kinds: [bool; 3],
    /// The seed of the random numbers `probability` draws.
    pub seed: u64,
}

impl FailPageAlloc {
    /// Every call fails (probability 100, interval 1, no limit, no space, every order and
    /// kind), its random numbers seeded with `seed`.
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        Self {
            probability: 100,
            interval: 1,
            times: None,
            space: 0,
            min_order: Order::ZERO,
            kinds: [true; 3],
            seed,
        }
    }

    /// With `probability` percent.
    #[must_use]
    pub const fn probability(self, probability: u8) -> Self {
        Self {
            probability,
            ..self
        }
    }

    /// With every `interval`-th eligible call a candidate.
    #[must_use]
    pub const fn interval(self, interval: u64) -> Self {
        Self { interval, ..self }
    }

    /// At most `times` failures.
    #[must_use]
    pub const fn times(self, times: u64) -> Self {
        Self {
            times: Some(times),
            ..self
        }
    }

    /// The first `space` frames pass.
    #[must_use]
    pub const fn space(self, space: u64) -> Self {
        Self { space, ..self }
    }

    /// Only calls of `min_order` or above fail.
    #[must_use]
    pub const fn min_order(self, min_order: Order) -> Self {
        Self { min_order, ..self }
    }

    /// Only calls of kind `mt` fail.
    #[must_use]
    pub const fn only(self, mt: MigrateType) -> Self {
        let mut kinds = [false; 3];
        kinds[mt as usize] = true;
        Self { kinds, ..self }
    }
}

/// An armed [`FailPageAlloc`] and what it has done.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Armed {
    pub(crate) attr: FailPageAlloc,
    /// The random state (SplitMix64's).
    rng: u64,
    /// Eligible calls counted for `interval`.
    count: u64,
    /// Frames left of `space`.
    space: u64,
}

impl Armed {
    /// Linux's `should_fail_ex` for an eligible call of `pages` frames.
    fn should_fail(&mut self, pages: u64) -> bool {
        if self.attr.times == Some(0) {
            return false;
        }
        if self.space > pages {
            self.space -= pages;
            return false;
        }
        if self.attr.interval > 1 {
            self.count = self.count.wrapping_add(1);
            if !self.count.is_multiple_of(self.attr.interval) {
                return false;
            }
        }
        if u64::from(self.attr.probability) <= self.next_random() % 100 {
            return false;
        }
        if let Some(t) = self.attr.times.as_mut() {
            *t -= 1;
        }
        true
    }

    /// SplitMix64's next number.
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A zone's fault injection: the armed state under a lock of its own (allocations look at
/// it only while the zone's debugging switch has [`DEBUG_FAULT`] set).
pub(crate) struct FaultInjection<R> {
    pub(crate) state: Mutex<R, (Option<Armed>, u64)>,
}

impl<R: RawMutex> FaultInjection<R> {
    /// Disarmed.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        Self {
            state: Mutex::new((None, 0)),
        }
    }

    /// Disarmed.
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new((None, 0)),
        }
    }

    /// Arms with `attr` (its counts afresh), or disarms.
    pub(crate) fn arm(&self, attr: Option<FailPageAlloc>) {
        self.state.lock().0 = attr.map(|attr| Armed {
            attr,
            rng: attr.seed,
            count: 0,
            space: attr.space,
        });
    }

    /// Failures injected since the zone was built.
    pub(crate) fn injected(&self) -> u64 {
        self.state.lock().1
    }

    /// Whether an allocation of `order` of kind `mt` fails on purpose (and, if so, counts
    /// it).
    #[cold]
    #[inline(never)]
    pub(crate) fn decide(&self, order: Order, mt: MigrateType) -> bool {
        // One critical section: the interval count, the space left, the random state and
        // the failures left move together (the loom model's negative control splits it).
        let mut state = self.state.lock();
        let (armed, injected) = &mut *state;
        let Some(armed) = armed.as_mut() else {
            return false;
        };
        let eligible = order >= armed.attr.min_order && armed.attr.kinds[mt as usize];
        let fail = eligible && armed.should_fail(order.pages());
        *injected += u64::from(fail);
        fail
    }
}
