use crate::plan::FAULT_RADIUS;
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

/// What is known of the memory an extent covers, which decides between temporal stores
/// (they read each line in first, and leave it cached) and streaming ones (they write around
/// the caches, with no read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Locality {
    /// The thread that asked for the clear touches it next (a fault's neighbourhood): always
    /// temporal, so that what it reads is in its cache.
    TouchedNext,
    /// Nothing known: streaming only from [`Policy::streaming_threshold`] on, where the
    /// extent could not stay cached anyway.
    Unknown,
    /// Out of the caches and not touched soon (guest memory a VMM zeroes, a pool's
    /// background work, a folio's pages far from its fault): streaming from
    /// [`Policy::cold_threshold`] on, which saves the read-for-ownership of every line.
    Cold,
}

/// What a caller knows of the memory it gives a [`crate::Clearer`], as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Temperature {
    /// Not known: plain extents are [`Locality::Unknown`]; the pages of a folio away from its
    /// fault are [`Locality::Cold`] (memory fresh from a frame allocator is not in the
    /// faulting thread's cache, and only the neighbourhood is touched next).
    #[default]
    Unknown,
    /// Known to be in the caches (just freed and reused): every extent is
    /// [`Locality::Unknown`], a folio's far pages included.
    Hot,
    /// Known to be out of the caches and not touched soon: every extent is
    /// [`Locality::Cold`], except a folio's fault neighbourhood.
    Cold,
}

impl Temperature {
    /// The locality of a plain extent (or of a folio's pages away from its fault, when
    /// `folio_far`) under this temperature.
    #[must_use]
    #[inline]
    pub const fn locality(self, folio_far: bool) -> Locality {
        match (self, folio_far) {
            (Self::Cold, _) | (Self::Unknown, true) => Locality::Cold,
            (Self::Hot, _) | (Self::Unknown, false) => Locality::Unknown,
        }
    }
}

/// Picks the strategy for each extent: a temporal one (the `rep stosb` family) for small
/// extents and always for the fault's neighbourhood, which the faulting thread reads next; a
/// streaming one for extents at or past a threshold, which would only evict the cache, and for
/// cold memory from a lower one; and how many pages each side of a fault are its
/// neighbourhood.
///
/// The temporal side may be split in two by extent size, as glibc's `memset` splits it at
/// its `rep_stosb_threshold`: a [`Policy::small`] strategy below [`Policy::small_below`]
/// bytes (vector stores, on CPUs where `rep stosb` is slower while the extent fits the
/// inner caches) and [`Policy::temporal`] from there on. [`Policy::detect`] does not split
/// it; [`Policy::calibrate`] does where the measurements say so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    temporal: Strategy,
    small: Strategy,
    small_below: usize,
    streaming: Option<Strategy>,
    streaming_threshold: usize,
    cold_threshold: usize,
    fault_radius: usize,
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
        let temporal = first(backend::TEMPORAL_PREFERENCE).unwrap_or(Strategy::Portable);
        Self {
            temporal,
            small: temporal,
            small_below: 0,
            streaming: first(backend::STREAMING_PREFERENCE),
            streaming_threshold: Self::default_streaming_threshold(),
            cold_threshold: DEFAULT_COLD_THRESHOLD,
            fault_radius: FAULT_RADIUS,
        }
    }

    /// Always `strategy`, whatever the extent: for benchmarks and for callers who know.
    #[must_use]
    pub const fn fixed(strategy: Strategy) -> Self {
        Self {
            temporal: strategy,
            small: strategy,
            small_below: 0,
            streaming: None,
            streaming_threshold: usize::MAX,
            cold_threshold: usize::MAX,
            fault_radius: FAULT_RADIUS,
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

    /// The same policy, streaming cold extents ([`Locality::Cold`]) from `bytes` on.
    #[must_use]
    pub const fn with_cold_threshold(self, bytes: usize) -> Self {
        Self {
            cold_threshold: bytes,
            ..self
        }
    }

    /// The same policy with `pages` pages each side of a fault in its neighbourhood.
    #[must_use]
    pub const fn with_fault_radius(self, pages: usize) -> Self {
        Self {
            fault_radius: pages,
            ..self
        }
    }

    /// The same policy with another streaming strategy (or none).
    #[must_use]
    pub const fn with_streaming(self, streaming: Option<Strategy>) -> Self {
        Self { streaming, ..self }
    }

    /// The same policy with another temporal strategy (for every temporal extent where the
    /// policy has no [`Policy::small`] strategy, else from [`Policy::small_below`] on).
    #[must_use]
    pub const fn with_temporal(self, temporal: Strategy) -> Self {
        let small = if self.small_below == 0 {
            temporal
        } else {
            self.small
        };
        Self {
            temporal,
            small,
            ..self
        }
    }

    /// The same policy with `small` as the temporal strategy of extents under `below`
    /// bytes (0: none, [`Policy::temporal`] everywhere).
    #[must_use]
    pub const fn with_small(self, small: Strategy, below: usize) -> Self {
        Self {
            small: if below == 0 { self.temporal } else { small },
            small_below: below,
            ..self
        }
    }

    /// The temporal strategy: for the extents that do not stream, the fault's neighbourhood
    /// among them (from [`Policy::small_below`] on where the policy has a small strategy).
    #[must_use]
    pub const fn temporal(&self) -> Strategy {
        self.temporal
    }

    /// The temporal strategy of extents under [`Policy::small_below`] bytes
    /// ([`Policy::temporal`] where that is 0).
    #[must_use]
    pub const fn small(&self) -> Strategy {
        self.small
    }

    /// Extents under this many bytes that do not stream use [`Policy::small`] (0: none).
    #[must_use]
    pub const fn small_below(&self) -> usize {
        self.small_below
    }

    /// The temporal strategy for an extent of `bytes`: [`Policy::small`] under
    /// [`Policy::small_below`], else [`Policy::temporal`].
    #[must_use]
    #[inline(always)]
    pub const fn temporal_for(&self, bytes: usize) -> Strategy {
        if bytes < self.small_below {
            self.small
        } else {
            self.temporal
        }
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

    /// Cold extents ([`Locality::Cold`]) of at least this many bytes stream.
    #[must_use]
    pub const fn cold_threshold(&self) -> usize {
        self.cold_threshold
    }

    /// Pages each side of a fault that are its neighbourhood, cleared last and temporally
    /// ([`FAULT_RADIUS`] unless set).
    #[must_use]
    pub const fn fault_radius(&self) -> usize {
        self.fault_radius
    }

    /// Whether an extent of `bytes` with `locality` streams (the policy having a streaming
    /// strategy).
    #[must_use]
    #[inline(always)]
    pub const fn streams(&self, bytes: usize, locality: Locality) -> bool {
        self.streaming.is_some()
            && match locality {
                Locality::TouchedNext => false,
                Locality::Unknown => bytes >= self.streaming_threshold,
                Locality::Cold => bytes >= self.streaming_threshold || bytes >= self.cold_threshold,
            }
    }

    /// The strategy for an extent of `bytes` with `locality`.
    #[must_use]
    #[inline(always)]
    pub fn choose(&self, bytes: usize, locality: Locality) -> Strategy {
        match self.streaming {
            Some(s) if self.streams(bytes, locality) => s,
            _ => self.temporal_for(bytes),
        }
    }

    /// Checks that this CPU can execute every strategy the policy may choose.
    ///
    /// # Errors
    /// [`ZeroError::StrategyUnavailable`] naming the first one it cannot.
    pub fn validate(&self) -> Result<(), ZeroError> {
        for s in [self.temporal, self.small]
            .into_iter()
            .chain(self.streaming)
        {
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
/// memory speed between 32 and 256 MiB). [`Policy::calibrate`] measures the threshold on
/// the CPU it runs on instead.
pub const MAX_DEFAULT_STREAMING_THRESHOLD: usize = 64 << 20;

/// The cold threshold [`Policy::detect`] assumes: one 4 KiB page. Out of the caches, a
/// temporal store reads every line in before writing it and a streaming store does not, so
/// streaming wins from the smallest page (measured at 4 KiB and 2 MiB, cold, on Intel and AMD
/// Zen 3: the report's strategy table); [`Policy::calibrate`] measures it.
pub const DEFAULT_COLD_THRESHOLD: usize = 4 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbourhood_is_always_temporal() {
        let p = Policy::fixed(Strategy::Portable)
            .with_streaming(Some(Strategy::Movnti))
            .with_streaming_threshold(4096);
        assert_eq!(p.choose(1 << 30, Locality::TouchedNext), Strategy::Portable);
        assert_eq!(p.choose(1 << 30, Locality::Unknown), Strategy::Movnti);
        assert_eq!(p.choose(4095, Locality::Unknown), Strategy::Portable);
        assert_eq!(p.choose(4096, Locality::Unknown), Strategy::Movnti);
    }

    #[test]
    fn cold_extents_stream_from_the_cold_threshold() {
        let p = Policy::fixed(Strategy::Portable)
            .with_streaming(Some(Strategy::Movnti))
            .with_streaming_threshold(1 << 20)
            .with_cold_threshold(8192);
        assert_eq!(p.choose(4096, Locality::Cold), Strategy::Portable);
        assert_eq!(p.choose(8192, Locality::Cold), Strategy::Movnti);
        assert_eq!(p.choose(8192, Locality::Unknown), Strategy::Portable);
        assert_eq!(p.choose(1 << 20, Locality::TouchedNext), Strategy::Portable);
        // A cold threshold above the streaming one changes nothing past the latter.
        let q = p.with_cold_threshold(usize::MAX);
        assert_eq!(q.choose(1 << 20, Locality::Cold), Strategy::Movnti);
        // Without a streaming strategy nothing streams.
        let none = p.with_streaming(None);
        assert_eq!(none.choose(1 << 30, Locality::Cold), Strategy::Portable);
        assert_eq!(Temperature::Unknown.locality(true), Locality::Cold);
        assert_eq!(Temperature::Unknown.locality(false), Locality::Unknown);
        assert_eq!(Temperature::Hot.locality(true), Locality::Unknown);
        assert_eq!(Temperature::Cold.locality(false), Locality::Cold);
    }

    #[test]
    fn small_extents_take_the_small_strategy_unless_they_stream() {
        let p = Policy::fixed(Strategy::RepStosb)
            .with_streaming(Some(Strategy::Movnti))
            .with_streaming_threshold(1 << 20)
            .with_cold_threshold(8192)
            .with_small(Strategy::Avx2Stores, 65536);
        assert_eq!(p.small_below(), 65536);
        assert_eq!(p.choose(4096, Locality::Unknown), Strategy::Avx2Stores);
        assert_eq!(p.choose(65535, Locality::TouchedNext), Strategy::Avx2Stores);
        assert_eq!(p.choose(65536, Locality::Unknown), Strategy::RepStosb);
        assert_eq!(p.choose(1 << 30, Locality::TouchedNext), Strategy::RepStosb);
        // Streaming first: a cold extent under the split streams from the cold threshold.
        assert_eq!(p.choose(4096, Locality::Cold), Strategy::Avx2Stores);
        assert_eq!(p.choose(8192, Locality::Cold), Strategy::Movnti);
        // A new temporal strategy leaves the small one; with no split, it is both.
        let q = p.with_temporal(Strategy::RepStosq);
        assert_eq!(q.choose(4096, Locality::Unknown), Strategy::Avx2Stores);
        assert_eq!(q.choose(65536, Locality::Unknown), Strategy::RepStosq);
        let none = p.with_small(Strategy::Avx2Stores, 0);
        assert_eq!((none.small(), none.small_below()), (Strategy::RepStosb, 0));
        assert_eq!(
            none,
            Policy::fixed(Strategy::RepStosb)
                .with_streaming(Some(Strategy::Movnti))
                .with_streaming_threshold(1 << 20)
                .with_cold_threshold(8192)
        );
        assert_eq!(
            none.with_temporal(Strategy::RepStosq).small(),
            Strategy::RepStosq
        );
        // A small strategy this CPU lacks is refused, as a temporal one is.
        if let Some(&missing) = Strategy::ALL.iter().find(|s| !s.is_available()) {
            let p = Policy::detect().with_small(missing, 4096);
            assert_eq!(p.validate(), Err(ZeroError::StrategyUnavailable(missing)));
        }
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
