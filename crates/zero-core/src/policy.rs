use crate::{Strategy, ZeroError, backend};

/// Whether clearing may use vector (SIMD/FP) registers: the AVX2/AVX-512 and NEON
/// strategies. A hosted program (a VMM) always may, since its OS saves every thread's
/// vector state; a kernel may once it saves the interrupted context's vector state around
/// the clear (Linux's `kernel_fpu_begin`), or never touches vector state elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VectorUse {
    /// Vector strategies may be chosen.
    Allowed,
    /// Only strategies that leave vector registers alone may be chosen.
    Forbidden,
}

impl VectorUse {
    /// What [`Policy::detect`] and [`Policy::calibrate`] assume: allowed on hosted targets,
    /// forbidden on bare-metal ones (`target_os = "none"`), where a kernel opts in with
    /// [`Policy::detect_with`] or [`Policy::calibrate_with`].
    pub const TARGET_DEFAULT: Self = if cfg!(target_os = "none") {
        Self::Forbidden
    } else {
        Self::Allowed
    };

    /// Whether `strategy` may be used under this setting.
    #[must_use]
    pub const fn permits(self, strategy: Strategy) -> bool {
        matches!(self, Self::Allowed) || !strategy.uses_vector_registers()
    }
}

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
    /// The policy read from CPUID alone, assuming [`VectorUse::TARGET_DEFAULT`]: temporal, the
    /// kernel's boot-time pick (x86_64: ERMS -> `rep stosb`, REP_GOOD -> `rep stosq`, else
    /// the unrolled loop; arm64: MOPS, else DC ZVA, else `stnp`; `write_bytes` elsewhere and
    /// under Miri); streaming, the first available of AVX-512, AVX2 streaming stores,
    /// CLZERO, `movnti` (x86_64) or non-temporal MOPS (arm64), each only where
    /// [`VectorUse`] permits; streaming from [`Policy::default_streaming_threshold`]. It
    /// never picks a temporal vector strategy: those win only on some CPUs and sizes, which
    /// [`Policy::calibrate`] measures.
    #[must_use]
    pub fn detect() -> Self {
        Self::detect_with(VectorUse::TARGET_DEFAULT)
    }

    /// [`Policy::detect`] with vector registers allowed or not.
    #[must_use]
    pub fn detect_with(vectors: VectorUse) -> Self {
        let first = |candidates: &[Strategy]| {
            candidates
                .iter()
                .copied()
                .find(|&s| vectors.permits(s) && s.is_available())
        };
        Self {
            temporal: first(backend::TEMPORAL_PREFERENCE).unwrap_or(Strategy::Portable),
            streaming: first(backend::STREAMING_PREFERENCE),
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
    #[inline]
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
        backend::reported_llc_bytes()
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
/// larger than the one the stores see (a 480 MiB L3 reported where store bandwidth fell to
/// memory speed between 32 and 256 MiB). The "policy check" of this project's benchmark
/// report shows whether the default is right on the CPU it runs on.
pub const MAX_DEFAULT_STREAMING_THRESHOLD: usize = 64 << 20;

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
        let scalar = Policy::detect_with(VectorUse::Forbidden);
        assert!(!scalar.temporal().uses_vector_registers());
        assert!(
            scalar
                .streaming()
                .is_none_or(|s| !s.uses_vector_registers())
        );
    }
}
