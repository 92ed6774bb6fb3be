//! The barriers the clearing and TLB code needs, from aarch64-cpu.

/// `dsb ish`: waits until earlier memory accesses and TLB maintenance are complete in the
/// inner-shareable domain.
#[inline]
pub fn dsb_ish() {
    #[cfg(not(miri))]
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISH);
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// `dmb ishst`: orders earlier stores before later stores (inner shareable); what publishes
/// cleared memory, and what must precede TLB maintenance for updated descriptors.
#[inline]
pub fn dmb_ishst() {
    #[cfg(not(miri))]
    aarch64_cpu::asm::barrier::dmb(aarch64_cpu::asm::barrier::ISHST);
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
}

/// `dsb ishst`: waits until earlier stores are complete (before invalidating TLB entries
/// for descriptors just written).
#[inline]
pub fn dsb_ishst() {
    #[cfg(not(miri))]
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
}

/// `isb`: the instructions after it are fetched and translated again, seeing completed TLB
/// maintenance and system-register writes.
#[inline]
pub fn isb() {
    #[cfg(not(miri))]
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}
