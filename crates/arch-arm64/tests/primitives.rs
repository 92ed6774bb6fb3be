//! Every arm64 clearing primitive, called directly at many lengths and offsets, against
//! `PROT_NONE` guard pages and guard bytes: MOPS and MOPS-NT where the CPU has FEAT_MOPS
//! (qemu `-cpu max`), DC ZVA with the block size DCZID_EL0 reports, `stnp` and NEON `stp q`.
#![cfg(all(target_arch = "aarch64", target_os = "linux", not(miri)))]

#[path = "support/bytes.rs"]
mod bytes;
#[path = "support/guarded.rs"]
mod guarded;

use arch_arm64::{barrier, clear, cpu};
use guarded::exercise;

const FENCE: &dyn Fn() = &barrier::dmb_ishst;

#[test]
fn reports_what_it_detected() {
    let f = cpu::features();
    println!(
        "arm64 features: MOPS {}, DC ZVA block {:?}",
        f.mops, f.dc_zva_block
    );
    if let Some(block) = f.dc_zva_block {
        assert!(
            block.is_power_of_two() && (16..=2048).contains(&block),
            "{block}"
        );
    }
    // The ID register (emulated at EL0) must agree with what the kernel reports in HWCAP2.
    const HWCAP2_MOPS: u64 = 1 << 43;
    // SAFETY: getauxval only reads the process's auxiliary vector.
    let hwcap2 = unsafe { libc::getauxval(libc::AT_HWCAP2) };
    assert_eq!(
        f.mops,
        hwcap2 & HWCAP2_MOPS != 0,
        "ID_AA64ISAR2_EL1.MOPS vs HWCAP2"
    );
}

#[test]
fn dc_zva() {
    let Some(block) = cpu::features().dc_zva_block else {
        println!("dc zva: skipped, DCZID_EL0.DZP prohibits DC ZVA here");
        return;
    };
    exercise(
        &format!("dc zva ({block}-byte blocks)"),
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping; dc_zva reads the
            // block size itself and uses plain stores for ranges that are not whole blocks.
            unsafe { clear::dc_zva(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn stnp() {
    exercise(
        "stnp",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping; stnp uses plain
            // stores for ranges that are not 16-aligned whole 64-byte steps.
            unsafe { clear::stnp(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn neon_stp() {
    exercise(
        "neon stp",
        &|d, n| {
            // SAFETY: exercise() passes writable ranges inside its mapping; a Linux thread may
            // use NEON; neon_stp uses plain stores for ranges that are not 16-aligned whole
            // 64-byte steps.
            unsafe { clear::neon_stp(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

#[test]
fn mops() {
    if !cpu::features().mops {
        println!("mops: skipped, this CPU has no FEAT_MOPS");
        return;
    }
    exercise(
        "mops set",
        &|d, n| {
            // SAFETY: MOPS checked above; exercise() passes ranges inside its mapping.
            unsafe { clear::mops_set(d, n) }
        },
        FENCE,
        1,
        1,
    );
    exercise(
        "mops set (non-temporal)",
        &|d, n| {
            // SAFETY: as above.
            unsafe { clear::mops_set_nt(d, n) }
        },
        FENCE,
        1,
        1,
    );
}

/// Cleaning and invalidating the caches changes no byte, whatever the range's alignment and
/// length (a partial first and last line included).
#[test]
fn clean_invalidate_lines_keeps_the_data() {
    let data: Vec<u8> = (0..3 * 4096 + 17).map(|i| (i * 7 + 3) as u8).collect();
    for (start, end) in [(0, data.len()), (5, 70), (63, 64), (1, 1), (100, 4000)] {
        // SAFETY: Linux lets EL0 read CTR_EL0 and run `dc civac` (SCTLR_EL1.UCT, UCI).
        unsafe { clear::clean_invalidate_lines(&data[start..end]) };
        assert!(
            data.iter()
                .enumerate()
                .all(|(i, &b)| b == (i * 7 + 3) as u8)
        );
    }
}
