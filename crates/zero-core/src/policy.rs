use crate::{Strategy, ZeroError};

/// Picks the strategy for each extent: a temporal one (the `rep stosb` family) for small
/// extents and always for the fault's neighbourhood, which the faulting thread reads next; a
/// streaming one for extents at or past a threshold, which would only evict the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    temporal: Strategy,
    streaming: Option<Strategy>,
    streaming_threshold: usize,
}

impl Policy {
    /// The best strategies this CPU has, with the default threshold
    /// ([`Policy::default_streaming_threshold`]).
    #[must_use]
    pub fn detect() -> Self {
        Self {
            temporal: best_temporal(),
            streaming: best_streaming(),
            streaming_threshold: Self::default_streaming_threshold(),
        }
    }

    /// Always `strategy`, whatever the extent: for benchmarks and for callers who know.
    #[must_use]
    pub const fn fixed(strategy: Strategy) -> Self {
        Self {
            temporal: strategy,
            streaming: None,
            streaming_threshold: usize::MAX,
        }
    }

    /// The same policy, streaming from `bytes` on.
    #[must_use]
    pub const fn with_streaming_threshold(self, bytes: usize) -> Self {
        Self {
            streaming_threshold: bytes,
            ..self
        }
    }

    /// The same policy with another streaming strategy (or none).
    #[must_use]
    pub const fn with_streaming(self, streaming: Option<Strategy>) -> Self {
        Self { streaming, ..self }
    }

    /// The same policy with another temporal strategy.
    #[must_use]
    pub const fn with_temporal(self, temporal: Strategy) -> Self {
        Self { temporal, ..self }
    }

    /// The strategy for small extents and the fault's neighbourhood.
    #[must_use]
    pub const fn temporal(&self) -> Strategy {
        self.temporal
    }

    /// The strategy for large extents, if any.
    #[must_use]
    pub const fn streaming(&self) -> Option<Strategy> {
        self.streaming
    }

    /// Extents of at least this many bytes stream.
    #[must_use]
    pub const fn streaming_threshold(&self) -> usize {
        self.streaming_threshold
    }

    /// The strategy for an extent of `bytes`; `hot` marks the fault's neighbourhood.
    #[must_use]
    pub fn choose(&self, bytes: usize, hot: bool) -> Strategy {
        match self.streaming {
            Some(s) if !hot && bytes >= self.streaming_threshold => s,
            _ => self.temporal,
        }
    }

    /// Checks that this CPU can execute every strategy the policy may choose.
    ///
    /// # Errors
    /// [`ZeroError::StrategyUnavailable`] naming the first one it cannot.
    pub fn validate(&self) -> Result<(), ZeroError> {
        for s in core::iter::once(self.temporal).chain(self.streaming) {
            if !s.is_available() {
                return Err(ZeroError::StrategyUnavailable(s));
            }
        }
        Ok(())
    }

    /// The default threshold: the last-level cache size CPUID reports, capped at
    /// [`MAX_DEFAULT_STREAMING_THRESHOLD`] because a hypervisor may report a cache far larger
    /// than the one store bandwidth shows; [`MAX_DEFAULT_STREAMING_THRESHOLD`] when nothing is
    /// reported.
    #[must_use]
    pub fn default_streaming_threshold() -> usize {
        reported_llc_bytes()
            .unwrap_or(MAX_DEFAULT_STREAMING_THRESHOLD)
            .min(MAX_DEFAULT_STREAMING_THRESHOLD)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::detect()
    }
}

/// The largest default streaming threshold. A hypervisor may report a last-level cache far
/// larger than the one the stores see: one of the machines this was developed on reports a
/// 480 MiB L3 while its store bandwidth falls to memory speed between 32 and 256 MiB
/// (MACHINE.md). `cargo xtask report` ("Policy check") shows whether the default is right on
/// the machine it runs on.
pub const MAX_DEFAULT_STREAMING_THRESHOLD: usize = 64 << 20;

#[cfg(all(target_arch = "x86_64", not(miri)))]
fn reported_llc_bytes() -> Option<usize> {
    arch_x86::cpu::caches().last_level().map(|c| c.size)
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
fn reported_llc_bytes() -> Option<usize> {
    None
}

/// The temporal strategy. x86 follows the kernel's boot-time pick: ERMS -> `rep stosb`;
/// REP_GOOD -> `rep stosq`; else the unrolled loop. arm64: MOPS, else DC ZVA, else `stnp`.
/// Portable where there is no arch primitive (and under Miri).
fn best_temporal() -> Strategy {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let f = arch_x86::cpu::features();
        if f.erms {
            Strategy::RepStosb
        } else if f.rep_good {
            Strategy::RepStosq
        } else {
            Strategy::UnrolledStores
        }
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    {
        [Strategy::Mops, Strategy::DcZva, Strategy::Stnp]
            .into_iter()
            .find(|s| s.is_available())
            .unwrap_or(Strategy::Portable)
    }
    #[cfg(not(all(any(target_arch = "x86_64", target_arch = "aarch64"), not(miri))))]
    {
        Strategy::Portable
    }
}

/// The streaming strategies in order of preference; the first available one is chosen.
/// Measured with the candidates interleaved (`cargo xtask report`, "Every strategy"): on the
/// AMD EPYC development host AVX-512 and AVX2 streaming stores reach ~87 GB/s from 32 MiB
/// on, CLZERO ~79 and movnti ~40; on the Intel machines of MACHINE.md AVX-512 and movnti
/// were within 5% of each other.
/// On arm64 only MOPS has a non-temporal form (DC ZVA and `stnp` stay temporal choices).
const STREAMING_PREFERENCE: [Strategy; 5] = [
    Strategy::Avx512Stream,
    Strategy::Avx2Stream,
    Strategy::Clzero,
    Strategy::Movnti,
    Strategy::MopsNt,
];

fn best_streaming() -> Option<Strategy> {
    STREAMING_PREFERENCE.into_iter().find(|s| s.is_available())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbourhood_is_always_temporal() {
        let p = Policy::fixed(Strategy::Portable)
            .with_streaming(Some(Strategy::Movnti))
            .with_streaming_threshold(4096);
        assert_eq!(p.choose(1 << 30, true), Strategy::Portable);
        assert_eq!(p.choose(1 << 30, false), Strategy::Movnti);
        assert_eq!(p.choose(4095, false), Strategy::Portable);
        assert_eq!(p.choose(4096, false), Strategy::Movnti);
    }

    #[test]
    fn detected_policy_is_executable() {
        let p = Policy::detect();
        assert_eq!(p.validate(), Ok(()));
        assert!(p.temporal().is_available() && !p.temporal().is_non_temporal());
        assert!(p.streaming().is_none_or(|s| s.is_non_temporal()));
        assert!(p.streaming_threshold() <= MAX_DEFAULT_STREAMING_THRESHOLD);
        std::println!("detected policy: {p:?}");
    }
}
