//! TLB maintenance for a kernel at **EL1**: invalidate one page, a range of last-level
//! entries, or every entry of one ASID, inner shareable; and for a hypervisor at **EL2**, a
//! guest's stage-2 translations by IPA ([`flush_ipa_range`]) or all of one VMID
//! ([`flush_vmid`]). Like Linux's `__flush_tlb_range`, a
//! range too long to invalidate entry by entry (more than [`max_dvm_ops`] pages without
//! FEAT_TLBIRANGE, more than [`crate::descriptor::MAX_TLBI_RANGE_PAGES`] with it) invalidates
//! the whole ASID instead, so no call issues more than a page-table page's worth of TLBIs. `TLBI` is undefined at EL0 (a user process gets
//! SIGILL), so these compile for every aarch64 target but run only in a kernel or unikernel
//! (the bare-metal example). The trailing `dsb ish` is optional, as the kernel's "nosync"
//! variants do when a caller batches several invalidations before one barrier.

use crate::barrier::{dsb_ish, dsb_ishst};
use crate::descriptor::{MAX_TLBI_RANGE_PAGES, tlbi_range_ops, tlbi_va_operand};
use crate::stage2::tlbi_ipa_operand;
use mm_types::{PageRange, PageSize, PhysAddr, VirtAddr};

/// Whether to wait for the invalidation to complete before returning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sync {
    /// End with `dsb ish`.
    Wait,
    /// Leave the `dsb ish` to the caller.
    NoSync,
}

/// Invalidates the last-level entry for `va` in `asid` (`TLBI VALE1IS`).
///
/// # Safety
/// Must run at EL1 (or EL2 with E2H). The caller has already written the new descriptor.
pub unsafe fn flush_page(va: VirtAddr, asid: u16, sync: Sync) {
    dsb_ishst();
    // SAFETY: the caller runs at EL1; TLBI only drops cached translations.
    unsafe { tlbi_vale1is(tlbi_va_operand(va, asid)) };
    if sync == Sync::Wait {
        dsb_ish();
    }
}

/// The most pages a range flush invalidates one `TLBI` at a time: one page-table page's
/// entries (Linux's `MAX_DVM_OPS`, `PTRS_PER_PTE`: 512 with 4 KiB pages). Past it, one
/// `TLBI ASIDE1IS` is cheaper and does not hold the interconnect for thousands of
/// operations.
#[must_use]
pub const fn max_dvm_ops(granule: PageSize) -> u64 {
    1 << (granule.shift() - 3)
}

/// Invalidates every entry of `asid` (`TLBI ASIDE1IS`): Linux's `flush_tlb_mm`.
///
/// # Safety
/// As [`flush_page`].
pub unsafe fn flush_asid(asid: u16, sync: Sync) {
    dsb_ishst();
    // SAFETY: the caller runs at EL1; TLBI only drops cached translations.
    unsafe { tlbi_aside1is(u64::from(asid) << 48) };
    if sync == Sync::Wait {
        dsb_ish();
    }
}

/// Invalidates the last-level entries of `range`, one `TLBI VALE1IS` per page, what the
/// kernel does without FEAT_TLBIRANGE; past [`max_dvm_ops`] pages, the whole ASID
/// ([`flush_asid`]).
///
/// # Safety
/// As [`flush_page`].
pub unsafe fn flush_range_per_page(range: PageRange, asid: u16, sync: Sync) {
    if range.pages > max_dvm_ops(range.size) {
        // SAFETY: forwarded from the caller.
        return unsafe { flush_asid(asid, sync) };
    }
    dsb_ishst();
    for i in 0..range.pages {
        // SAFETY: the caller runs at EL1.
        unsafe { tlbi_vale1is(tlbi_va_operand(page_va(range, i), asid)) };
    }
    if sync == Sync::Wait {
        dsb_ish();
    }
}

/// Invalidates the last-level entries of `range` with FEAT_TLBIRANGE `TLBI RVALE1IS`
/// operations (an odd last page with `VALE1IS`); past [`MAX_TLBI_RANGE_PAGES`] pages, the
/// whole ASID ([`flush_asid`]), as Linux does.
///
/// # Safety
/// As [`flush_page`], and the CPU must implement FEAT_TLBIRANGE (ID_AA64ISAR0_EL1.TLB = 2).
pub unsafe fn flush_range(range: PageRange, asid: u16, sync: Sync) {
    if range.pages > MAX_TLBI_RANGE_PAGES {
        // SAFETY: forwarded from the caller.
        return unsafe { flush_asid(asid, sync) };
    }
    dsb_ishst();
    let mut covered = 0;
    for op in tlbi_range_ops(range, asid) {
        // SAFETY: the caller runs at EL1 on a CPU with FEAT_TLBIRANGE.
        unsafe { tlbi_rvale1is(op.operand) };
        covered += op.pages;
    }
    for i in covered..range.pages {
        // SAFETY: the caller runs at EL1.
        unsafe { tlbi_vale1is(tlbi_va_operand(page_va(range, i), asid)) };
    }
    if sync == Sync::Wait {
        dsb_ish();
    }
}

/// Invalidates a guest's stage-2 translations of the guest-physical pages `range` (its
/// address field holds IPAs), as KVM's `__kvm_tlb_flush_vmid_ipa` does: one `TLBI
/// IPAS2E1IS` per page, `dsb ish`, then `TLBI VMALLE1IS`, since the TLB may also hold the
/// guest's combined stage-1-and-2 translations, which are not tagged by IPA. Past
/// [`max_dvm_ops`] pages, one [`flush_vmid`] instead. Ends with `dsb ish` and `isb`.
///
/// # Safety
/// Must run at EL2 (without `HCR_EL2.{E2H, TGE} = {1, 1}`), with `VTTBR_EL2` holding the
/// guest's VMID: the operations apply to the current VMID. The caller has already written
/// the new stage-2 descriptors.
pub unsafe fn flush_ipa_range(range: PageRange) {
    if range.pages > max_dvm_ops(range.size) {
        // SAFETY: forwarded from the caller.
        return unsafe { flush_vmid() };
    }
    dsb_ishst();
    for i in 0..range.pages {
        let ipa = PhysAddr(page_va(range, i).0);
        // SAFETY: the caller runs at EL2 with the guest's VMID current.
        unsafe { tlbi_ipas2e1is(tlbi_ipa_operand(ipa)) };
    }
    dsb_ish();
    // SAFETY: as above; VMALLE1IS at EL2 applies to the current VMID's EL1&0 regime.
    unsafe { tlbi_vmalle1is() };
    dsb_ish();
    crate::barrier::isb();
}

/// Invalidates every stage-1 and stage-2 translation of the current VMID (`TLBI
/// VMALLS12E1IS`), then `dsb ish` and `isb`: KVM's `__kvm_tlb_flush_vmid`.
///
/// # Safety
/// As [`flush_ipa_range`].
pub unsafe fn flush_vmid() {
    dsb_ishst();
    #[cfg(not(miri))]
    // SAFETY: the caller runs at EL2; the instruction only invalidates TLB entries.
    unsafe {
        core::arch::asm!("tlbi vmalls12e1is", options(nostack, preserves_flags));
    }
    dsb_ish();
    crate::barrier::isb();
}

/// # Safety
/// EL2 only.
unsafe fn tlbi_ipas2e1is(operand: u64) {
    #[cfg(not(miri))]
    // SAFETY: the caller runs at EL2; the instruction only invalidates TLB entries.
    unsafe {
        core::arch::asm!("tlbi ipas2e1is, {}", in(reg) operand, options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    let _ = operand;
}

/// # Safety
/// EL1, or EL2 for the current VMID.
unsafe fn tlbi_vmalle1is() {
    #[cfg(not(miri))]
    // SAFETY: the caller runs at EL1 or EL2; the instruction only invalidates TLB entries.
    unsafe {
        core::arch::asm!("tlbi vmalle1is", options(nostack, preserves_flags));
    }
}

/// The address of page `i` of `range` (wrapping: TLBI ignores the bits above the VA field).
const fn page_va(range: PageRange, i: u64) -> VirtAddr {
    VirtAddr(range.start.0.wrapping_add(i << range.size.shift()))
}

/// # Safety
/// EL1 only.
unsafe fn tlbi_vale1is(operand: u64) {
    #[cfg(not(miri))]
    // SAFETY: the caller runs at EL1; the instruction only invalidates TLB entries.
    unsafe {
        core::arch::asm!("tlbi vale1is, {}", in(reg) operand, options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    let _ = operand;
}

/// # Safety
/// EL1 only.
unsafe fn tlbi_aside1is(operand: u64) {
    #[cfg(not(miri))]
    // SAFETY: the caller runs at EL1; the instruction only invalidates TLB entries.
    unsafe {
        core::arch::asm!("tlbi aside1is, {}", in(reg) operand, options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    let _ = operand;
}

/// # Safety
/// EL1 only, with FEAT_TLBIRANGE.
unsafe fn tlbi_rvale1is(operand: u64) {
    #[cfg(not(miri))]
    // SAFETY: the caller runs at EL1 on a CPU with FEAT_TLBIRANGE. TLBI RVALE1IS is
    // SYS #0, C8, C2, #5, written by encoding so no assembler extension is needed.
    unsafe {
        core::arch::asm!("sys #0, c8, c2, #5, {}", in(reg) operand, options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    let _ = operand;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_page_flushes_stop_at_one_page_table() {
        assert_eq!(max_dvm_ops(PageSize::Size4KiB), 512);
        assert_eq!(max_dvm_ops(PageSize::Size16KiB), 2048);
        assert_eq!(max_dvm_ops(PageSize::Size64KiB), 8192);
    }
}
