//! FEAT_MOPS and the DC ZVA block size, detected once and cached in an atomic (no `std`, no
//! lock: racing first callers compute the same value). Under Miri: nothing detected.

use core::sync::atomic::{AtomicU64, Ordering};

/// What this CPU offers for clearing memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// FEAT_MOPS: `SETP/SETM/SETE` (and the non-temporal `SETPN/...`) usable here.
    pub mops: bool,
    /// The DC ZVA block size in bytes, or `None` when DC ZVA is prohibited (DZP).
    pub dc_zva_block: Option<usize>,
}

static FEATURES: AtomicU64 = AtomicU64::new(0);
const VALID: u64 = 1 << 63;

/// The CPU's features, detected on first use.
#[must_use]
pub fn features() -> Features {
    let mut bits = FEATURES.load(Ordering::Relaxed);
    if bits & VALID == 0 {
        bits = detect() | VALID;
        FEATURES.store(bits, Ordering::Relaxed);
    }
    Features {
        mops: bits & 1 != 0,
        dc_zva_block: match (bits >> 8) & 0xff {
            0 => None,
            log2 => Some(1 << log2),
        },
    }
}

/// Packs: bit 0 MOPS; bits 8..16 log2 of the DC ZVA block (0: prohibited).
#[cfg(miri)]
fn detect() -> u64 {
    0
}

#[cfg(not(miri))]
fn detect() -> u64 {
    use crate::regs::{DCZID, DCZID_EL0, ID_AA64ISAR2, ID_AA64ISAR2_EL1};
    use tock_registers::interfaces::Readable;
    let mops = ID_AA64ISAR2.read(ID_AA64ISAR2_EL1::MOPS) >= 1 && os_enabled_mops();
    let dczid = DCZID.extract();
    // Block size = 4 << BS bytes: log2 = BS + 2.
    let zva = if dczid.is_set(DCZID_EL0::DZP) {
        0
    } else {
        dczid.read(DCZID_EL0::BS) + 2
    };
    u64::from(mops) | zva << 8
}

/// With `std` on Linux: whether the kernel enabled MOPS for EL0 (HWCAP2_MOPS). Without, a
/// kernel or unikernel at EL1 enables it itself, so the ID register alone decides.
#[cfg(not(miri))]
fn os_enabled_mops() -> bool {
    #[cfg(all(feature = "std", target_os = "linux"))]
    {
        const HWCAP2_MOPS: u64 = 1 << 43;
        // SAFETY: getauxval only reads the process's auxiliary vector.
        let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
        hwcap2 & HWCAP2_MOPS != 0
    }
    #[cfg(not(all(feature = "std", target_os = "linux")))]
    {
        true
    }
}
