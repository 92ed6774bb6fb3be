/// The kernel's preemption models. Under a cooperative model (`None`, `Voluntary`) a long
/// clear must call `cond_resched` now and then, so it is cut into batches; under a
/// preemptible one the scheduler can interrupt it anywhere, so it runs as one extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PreemptModel {
    /// `PREEMPT_NONE`: no preemption in kernel code.
    None,
    /// `PREEMPT_VOLUNTARY`: only at explicit rescheduling points.
    Voluntary,
    /// `PREEMPT_FULL`: anywhere outside critical sections.
    Full,
    /// `PREEMPT_LAZY`: full preemption, with lazy rescheduling for fair tasks.
    Lazy,
    /// `PREEMPT_RT`: real-time, fully preemptible.
    Rt,
}

impl PreemptModel {
    /// Every model.
    pub const ALL: [Self; 5] = [
        Self::None,
        Self::Voluntary,
        Self::Full,
        Self::Lazy,
        Self::Rt,
    ];

    /// Whether the scheduler can preempt a clear in progress (full, lazy, rt).
    #[must_use]
    pub const fn is_preemptible(self) -> bool {
        matches!(self, Self::Full | Self::Lazy | Self::Rt)
    }
}

/// The cooperative scheduler's `cond_resched()`: called before every chunk of a clear.
pub trait Resched {
    /// Gives the scheduler a chance to run something else.
    fn cond_resched(&mut self);
}

/// A borrowed reschedule point is one: a caller passes `&mut r` on and keeps `r`.
impl<R: Resched + ?Sized> Resched for &mut R {
    fn cond_resched(&mut self) {
        (**self).cond_resched();
    }
}

/// A `cond_resched` that does nothing: for callers that never yield (a unikernel's boot).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoResched;

impl Resched for NoResched {
    fn cond_resched(&mut self) {}
}

/// A `cond_resched` that counts its calls, to check or report how often a clear yields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountingResched {
    calls: usize,
}

impl CountingResched {
    /// A counter at zero.
    #[must_use]
    pub const fn new() -> Self {
        Self { calls: 0 }
    }

    /// How many times `cond_resched` was called.
    #[must_use]
    pub const fn calls(&self) -> usize {
        self.calls
    }
}

impl Resched for CountingResched {
    fn cond_resched(&mut self) {
        self.calls = self.calls.saturating_add(1);
    }
}
