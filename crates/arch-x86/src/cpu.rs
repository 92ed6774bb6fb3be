//! CPU feature detection and the cache hierarchy, from CPUID (raw-cpuid), computed once and
//! cached in atomics so that it works without `std` and without a lock.
//!
//! Racing first callers may each run CPUID; they compute the same value, so the race is
//! harmless and no thread ever waits. Under Miri (which cannot run `cpuid`) every query
//! reports a bare x86_64 CPU and no caches.

use core::sync::atomic::{AtomicU64, Ordering};

/// The CPU vendor, as CPUID leaf 0 names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// "GenuineIntel".
    Intel,
    /// "AuthenticAMD" (or "HygonGenuine", a Zen derivative).
    Amd,
    /// Anything else, or CPUID unavailable (Miri).
    Other,
}

/// The CPU facts that decide how to clear memory fast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuFeatures {
    /// Who made the CPU.
    pub vendor: Vendor,
    /// Display family (base family plus extended family).
    pub family: u8,
    /// Display model (with the extended model bits).
    pub model: u8,
    /// Enhanced REP MOVSB/STOSB (leaf 7 EBX bit 9): `rep stosb` is the fast string clear.
    pub erms: bool,
    /// Fast short REP MOV (leaf 7 EDX bit 4).
    pub fsrm: bool,
    /// Fast zero-length REP MOVSB (leaf 7.1 EAX bit 10).
    pub fzrm: bool,
    /// Fast short REP STOSB (leaf 7.1 EAX bit 11).
    pub fsrs: bool,
    /// Linux's synthetic REP_GOOD: `rep stosq` is good (Intel family 6 model >= 0x0e or
    /// family 15, AMD family >= 0x10), derived here the way the kernel derives it.
    pub rep_good: bool,
    /// AVX2 present and its YMM state enabled by the OS (XCR0), so it can execute.
    pub avx2: bool,
    /// AVX-512F present and its ZMM/opmask state enabled by the OS (XCR0).
    pub avx512f: bool,
    /// CLZERO (leaf 0x8000_0008 EBX bit 0, AMD).
    pub clzero: bool,
    /// CLFLUSHOPT (leaf 7 EBX bit 23): cache-line flushes that pipeline, unlike `clflush`.
    pub clflushopt: bool,
    /// Running under a hypervisor (leaf 1 ECX bit 31): reported cache sizes may be fiction.
    pub hypervisor: bool,
}

impl CpuFeatures {
    /// A CPU with nothing beyond the x86_64 baseline: what Miri and unknown CPUs report.
    pub const BASELINE: Self = Self {
        vendor: Vendor::Other,
        family: 0,
        model: 0,
        erms: false,
        fsrm: false,
        fzrm: false,
        fsrs: false,
        rep_good: false,
        avx2: false,
        avx512f: false,
        clzero: false,
        clflushopt: false,
        hypervisor: false,
    };

    const VALID: u64 = 1 << 63;
    const FLAGS: [fn(&Self) -> bool; 10] = [
        |f| f.erms,
        |f| f.fsrm,
        |f| f.fzrm,
        |f| f.fsrs,
        |f| f.rep_good,
        |f| f.avx2,
        |f| f.avx512f,
        |f| f.clzero,
        |f| f.hypervisor,
        |f| f.clflushopt,
    ];

    fn pack(&self) -> u64 {
        let mut bits = Self::VALID;
        for (i, flag) in Self::FLAGS.iter().enumerate() {
            bits |= u64::from(flag(self)) << i;
        }
        let vendor = match self.vendor {
            Vendor::Intel => 1,
            Vendor::Amd => 2,
            Vendor::Other => 0,
        };
        bits | u64::from(self.family) << 16 | u64::from(self.model) << 24 | vendor << 32
    }

    fn unpack(bits: u64) -> Self {
        let flag = |i: u32| bits & (1 << i) != 0;
        Self {
            vendor: match (bits >> 32) & 0xf {
                1 => Vendor::Intel,
                2 => Vendor::Amd,
                _ => Vendor::Other,
            },
            family: (bits >> 16) as u8,
            model: (bits >> 24) as u8,
            erms: flag(0),
            fsrm: flag(1),
            fzrm: flag(2),
            fsrs: flag(3),
            rep_good: flag(4),
            avx2: flag(5),
            avx512f: flag(6),
            clzero: flag(7),
            hypervisor: flag(8),
            clflushopt: flag(9),
        }
    }
}

static FEATURES: AtomicU64 = AtomicU64::new(0);

/// The CPU's features, detected on first use and cached.
#[must_use]
pub fn features() -> CpuFeatures {
    let bits = FEATURES.load(Ordering::Relaxed);
    if bits & CpuFeatures::VALID != 0 {
        return CpuFeatures::unpack(bits);
    }
    let detected = detect_features();
    FEATURES.store(detected.pack(), Ordering::Relaxed);
    detected
}

#[cfg(miri)]
fn detect_features() -> CpuFeatures {
    CpuFeatures::BASELINE
}

#[cfg(not(miri))]
fn detect_features() -> CpuFeatures {
    use raw_cpuid::CpuId;
    let cpuid = CpuId::new();
    let vendor = match cpuid.get_vendor_info().as_ref().map(|v| v.as_str()) {
        Some("GenuineIntel") => Vendor::Intel,
        Some("AuthenticAMD" | "HygonGenuine") => Vendor::Amd,
        _ => Vendor::Other,
    };
    let mut f = CpuFeatures {
        vendor,
        ..CpuFeatures::BASELINE
    };
    let mut os_ymm = false;
    let mut os_zmm = false;
    if let Some(info) = cpuid.get_feature_info() {
        f.family = info.family_id();
        f.model = info.model_id();
        f.hypervisor = info.has_hypervisor();
        if info.has_oxsave() {
            let xcr0 = xgetbv0();
            // XCR0 bits 1,2: SSE and AVX (YMM) state; 5,6,7: opmask and ZMM state.
            os_ymm = xcr0 & 0b110 == 0b110;
            os_zmm = os_ymm && xcr0 & 0b1110_0000 == 0b1110_0000;
        }
    }
    f.rep_good = match vendor {
        Vendor::Intel => f.family == 15 || (f.family == 6 && f.model >= 0x0e),
        Vendor::Amd => f.family >= 0x10,
        Vendor::Other => false,
    };
    if let Some(ext) = cpuid.get_extended_feature_info() {
        f.erms = ext.has_rep_movsb_stosb();
        f.avx2 = ext.has_avx2() && os_ymm;
        f.avx512f = ext.has_avx512f() && os_zmm;
        f.clflushopt = ext.has_clflushopt();
    }
    let max_leaf = cpuid_raw(0, 0)[0];
    if max_leaf >= 7 {
        let [eax0, _, _, edx] = cpuid_raw(7, 0);
        f.fsrm = edx & (1 << 4) != 0;
        if eax0 >= 1 {
            let [eax1, ..] = cpuid_raw(7, 1);
            f.fzrm = eax1 & (1 << 10) != 0;
            f.fsrs = eax1 & (1 << 11) != 0;
        }
    }
    if let Some(cap) = cpuid.get_processor_capacity_feature_info() {
        f.clzero = cap.has_cl_zero();
    }
    f
}

/// One CPUID query: `[eax, ebx, ecx, edx]`.
#[cfg(not(miri))]
fn cpuid_raw(leaf: u32, subleaf: u32) -> [u32; 4] {
    // SAFETY: CPUID exists on every x86_64 CPU and only reads identification registers. (The
    // intrinsic is safe from Rust 1.94; the block lets the declared older toolchains build.)
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, subleaf) };
    [r.eax, r.ebx, r.ecx, r.edx]
}

/// XCR0, the OS-enabled register state. Only called when CPUID reports OSXSAVE.
#[cfg(not(miri))]
fn xgetbv0() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: the caller saw CPUID.1:ECX.OSXSAVE, so XGETBV is enabled; ECX = 0 reads XCR0,
    // which always exists. The instruction touches no memory.
    unsafe {
        core::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi,
            options(nomem, nostack, preserves_flags));
    }
    u64::from(hi) << 32 | u64::from(lo)
}

/// What a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheKind {
    /// Data only.
    Data,
    /// Instructions only.
    Instruction,
    /// Both.
    Unified,
}

/// One cache of the hierarchy, as CPUID reports it (under a hypervisor, possibly fiction:
/// measure before trusting the size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLevel {
    /// 1 for L1, 2 for L2, ...
    pub level: u8,
    /// Data, instruction or unified.
    pub kind: CacheKind,
    /// Total size in bytes.
    pub size: usize,
    /// Coherency line size in bytes.
    pub line: usize,
    /// Maximum number of logical processors sharing this cache.
    pub shared_by: u16,
}

impl CacheLevel {
    fn pack(&self) -> u64 {
        let kind = match self.kind {
            CacheKind::Data => 1,
            CacheKind::Instruction => 2,
            CacheKind::Unified => 3,
        };
        let size_kib = (self.size / 1024).min(u32::MAX as usize) as u64;
        let line_log2 = u64::from(self.line.max(1).trailing_zeros());
        kind | u64::from(self.level & 0xf) << 2
            | line_log2 << 6
            | u64::from(self.shared_by & 0xfff) << 12
            | size_kib << 24
    }

    fn unpack(bits: u64) -> Option<Self> {
        let kind = match bits & 3 {
            1 => CacheKind::Data,
            2 => CacheKind::Instruction,
            3 => CacheKind::Unified,
            _ => return None,
        };
        Some(Self {
            kind,
            level: ((bits >> 2) & 0xf) as u8,
            line: 1 << ((bits >> 6) & 0x3f),
            shared_by: ((bits >> 12) & 0xfff) as u16,
            size: ((bits >> 24) as usize).saturating_mul(1024),
        })
    }
}

/// At most this many caches are recorded.
pub const MAX_CACHES: usize = 8;

/// The cache hierarchy: up to [`MAX_CACHES`] caches, innermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheHierarchy {
    levels: [Option<CacheLevel>; MAX_CACHES],
}

impl CacheHierarchy {
    /// The caches, innermost first.
    pub fn iter(&self) -> impl Iterator<Item = CacheLevel> + '_ {
        self.levels.iter().flatten().copied()
    }

    /// The outermost cache that holds data (data or unified), if CPUID reports any.
    #[must_use]
    pub fn last_level(&self) -> Option<CacheLevel> {
        self.iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .max_by_key(|c| c.level)
    }
}

static CACHES: [AtomicU64; MAX_CACHES] = [const { AtomicU64::new(0) }; MAX_CACHES];
/// Set once `CACHES` holds the detected hierarchy.
static CACHES_VALID: AtomicU64 = AtomicU64::new(0);

/// The cache hierarchy as CPUID reports it, detected on first use and cached.
#[must_use]
pub fn caches() -> CacheHierarchy {
    if CACHES_VALID.load(Ordering::Acquire) == 0 {
        let detected = detect_caches();
        for (slot, level) in CACHES.iter().zip(detected.levels) {
            slot.store(level.map_or(0, |l| l.pack()), Ordering::Relaxed);
        }
        CACHES_VALID.store(1, Ordering::Release);
        return detected;
    }
    let mut levels = [None; MAX_CACHES];
    for (level, slot) in levels.iter_mut().zip(&CACHES) {
        *level = CacheLevel::unpack(slot.load(Ordering::Relaxed));
    }
    CacheHierarchy { levels }
}

#[cfg(miri)]
fn detect_caches() -> CacheHierarchy {
    CacheHierarchy {
        levels: [None; MAX_CACHES],
    }
}

#[cfg(not(miri))]
fn detect_caches() -> CacheHierarchy {
    use raw_cpuid::{CacheType, CpuId};
    let mut levels = [None; MAX_CACHES];
    let Some(params) = CpuId::new().get_cache_parameters() else {
        return CacheHierarchy { levels };
    };
    let mut slots = levels.iter_mut();
    for p in params {
        let kind = match p.cache_type() {
            CacheType::Data => CacheKind::Data,
            CacheType::Instruction => CacheKind::Instruction,
            CacheType::Unified => CacheKind::Unified,
            _ => continue,
        };
        let Some(slot) = slots.next() else { break };
        let size = p
            .associativity()
            .saturating_mul(p.physical_line_partitions())
            .saturating_mul(p.coherency_line_size())
            .saturating_mul(p.sets());
        *slot = Some(CacheLevel {
            level: p.level(),
            kind,
            size,
            line: p.coherency_line_size(),
            shared_by: u16::try_from(p.max_cores_for_cache()).unwrap_or(u16::MAX),
        });
    }
    CacheHierarchy { levels }
}

/// The processor brand string (CPUID 0x8000_0002..4), e.g. "AMD EPYC 7B13".
#[derive(Clone, Copy)]
pub struct Brand {
    bytes: [u8; 48],
    len: usize,
}

impl Brand {
    /// The brand as text, trimmed; empty if CPUID has none.
    #[must_use]
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len])
            .unwrap_or("")
            .trim()
    }
}

impl core::fmt::Debug for Brand {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The processor brand string (not cached: meant for reports, not hot paths).
#[must_use]
pub fn brand() -> Brand {
    let mut brand = Brand {
        bytes: [0; 48],
        len: 0,
    };
    #[cfg(not(miri))]
    if let Some(b) = raw_cpuid::CpuId::new().get_processor_brand_string() {
        let s = b.as_str().as_bytes();
        let len = s.len().min(48);
        brand.bytes[..len].copy_from_slice(&s[..len]);
        brand.len = len;
    }
    brand
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_pack_round_trips() {
        let f = CpuFeatures {
            vendor: Vendor::Amd,
            family: 0x19,
            model: 0x11,
            erms: true,
            fsrm: false,
            fzrm: true,
            fsrs: false,
            rep_good: true,
            avx2: true,
            avx512f: false,
            clzero: true,
            clflushopt: false,
            hypervisor: true,
        };
        assert_eq!(CpuFeatures::unpack(f.pack()), f);
        let g = CpuFeatures {
            clflushopt: true,
            ..f
        };
        assert_eq!(CpuFeatures::unpack(g.pack()), g);
        assert_eq!(
            CpuFeatures::unpack(CpuFeatures::BASELINE.pack()),
            CpuFeatures::BASELINE
        );
    }

    #[test]
    fn cache_pack_round_trips() {
        let c = CacheLevel {
            level: 3,
            kind: CacheKind::Unified,
            size: 32 << 20,
            line: 64,
            shared_by: 16,
        };
        assert_eq!(CacheLevel::unpack(c.pack()), Some(c));
        assert_eq!(CacheLevel::unpack(0), None);
    }

    #[test]
    fn detection_is_cached_and_stable() {
        assert_eq!(features(), features());
        assert_eq!(caches(), caches());
    }

    /// std's own detection (which also checks XCR0) must agree with ours.
    #[cfg(not(miri))]
    #[test]
    fn agrees_with_std_detection() {
        let f = features();
        assert_eq!(f.avx2, std::is_x86_feature_detected!("avx2"));
        assert_eq!(f.avx512f, std::is_x86_feature_detected!("avx512f"));
        assert_eq!(f.erms, std::is_x86_feature_detected!("ermsb"));
    }

    #[cfg(not(miri))]
    #[test]
    fn caches_are_plausible() {
        for c in caches().iter() {
            assert!(c.level >= 1 && c.level <= 4, "{c:?}");
            assert!(c.line.is_power_of_two(), "{c:?}");
            assert!(c.size >= c.line, "{c:?}");
        }
    }
}
