use crate::ZeroError;

#[cfg(all(target_arch = "x86_64", not(miri)))]
use arch_x86::{clear as x86, cpu};

#[cfg(all(target_arch = "aarch64", not(miri)))]
use arch_arm64::{barrier as arm64_barrier, clear as arm64, cpu as arm64_cpu};

/// Whether the target lets code use vector registers (false on soft-float kernel targets).
#[cfg(all(target_arch = "x86_64", not(miri)))]
const VECTOR_STATE: bool = cfg!(target_feature = "sse2");

/// One way to clear memory: an instruction sequence from an arch crate, or the portable
/// fallback. Every variant exists on every target, so plans and policies can be reasoned
/// about anywhere; [`Strategy::is_available`] says which ones this CPU can execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// `core::ptr::write_bytes` one page at a time: the kernel's generic `clear_page()` loop,
    /// for an architecture without an extent primitive. Always available; what Miri runs.
    Portable,
    /// x86 `rep stosb` over the whole extent (ERMS; the merged kernel's choice).
    RepStosb,
    /// x86 `rep stosq` (REP_GOOD without ERMS).
    RepStosq,
    /// x86 unrolled loop of eight 8-byte stores per line (neither ERMS nor REP_GOOD).
    UnrolledStores,
    /// x86 `movnti` non-temporal stores (seed 001).
    Movnti,
    /// x86 AVX2 `vmovntdq` streaming stores.
    Avx2Stream,
    /// x86 AVX-512 `vmovntdq` streaming stores.
    Avx512Stream,
    /// AMD CLZERO, one line per instruction.
    Clzero,
    /// arm64 `DC ZVA`, one DCZID_EL0-sized block per instruction.
    DcZva,
    /// arm64 `STNP xzr, xzr` pairs, the fallback where DC ZVA is prohibited; like the
    /// kernel's, not treated as an extent primitive.
    Stnp,
    /// arm64 FEAT_MOPS `SETP/SETM/SETE`.
    Mops,
    /// arm64 FEAT_MOPS non-temporal `SETPN/SETMN/SETEN`.
    MopsNt,
}

impl Strategy {
    /// Every strategy, portable first.
    pub const ALL: [Self; 12] = [
        Self::Portable,
        Self::RepStosb,
        Self::RepStosq,
        Self::UnrolledStores,
        Self::Movnti,
        Self::Avx2Stream,
        Self::Avx512Stream,
        Self::Clzero,
        Self::DcZva,
        Self::Stnp,
        Self::Mops,
        Self::MopsNt,
    ];

    /// A short name for reports and logs.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::RepStosb => "rep stosb",
            Self::RepStosq => "rep stosq",
            Self::UnrolledStores => "unrolled stores",
            Self::Movnti => "movnti",
            Self::Avx2Stream => "avx2 stream",
            Self::Avx512Stream => "avx512 stream",
            Self::Clzero => "clzero",
            Self::DcZva => "dc zva",
            Self::Stnp => "stnp",
            Self::Mops => "mops",
            Self::MopsNt => "mops nt",
        }
    }

    /// Whether one call clears a whole multi-page extent (the kernel's `clear_pages()`), so
    /// that a batch may span many pages. [`Strategy::Portable`] models the generic per-page
    /// loop and [`Strategy::Stnp`] the kernel's arm64 `clear_page()`: they are not. MOPS and
    /// DC ZVA are, unlike in the kernel (which keeps arm64 at one page per batch): the seed
    /// notes MOPS is "extendable to larger page sizes", and both take any page count.
    #[must_use]
    pub const fn is_extent(self) -> bool {
        !matches!(self, Self::Portable | Self::Stnp)
    }

    /// Whether the stores bypass the cache (and so are weakly ordered).
    #[must_use]
    pub const fn is_non_temporal(self) -> bool {
        matches!(
            self,
            Self::Movnti | Self::Avx2Stream | Self::Avx512Stream | Self::Clzero | Self::MopsNt
        )
    }

    /// Whether a store fence must follow before the memory is handed out. The clearing
    /// functions of this crate issue it themselves; [`Strategy::clear_raw`] does not.
    #[must_use]
    pub const fn needs_fence(self) -> bool {
        self.is_non_temporal()
    }

    /// The alignment the primitive needs for its start address, in bytes. For
    /// [`Strategy::DcZva`] the block size DCZID_EL0 reports (the 2 KiB architectural maximum
    /// where it cannot be read).
    #[must_use]
    pub fn alignment(self) -> usize {
        match self {
            Self::Portable | Self::RepStosb | Self::Mops | Self::MopsNt => 1,
            Self::RepStosq | Self::UnrolledStores | Self::Movnti => 8,
            Self::Stnp => 16,
            Self::Avx2Stream => 32,
            Self::Avx512Stream | Self::Clzero => 64,
            Self::DcZva => dc_zva_block().unwrap_or(DC_ZVA_MAX_BLOCK),
        }
    }

    /// The primitive clears lengths that are multiples of this many bytes.
    #[must_use]
    pub fn granule(self) -> usize {
        match self {
            Self::Portable | Self::RepStosb | Self::Mops | Self::MopsNt => 1,
            Self::RepStosq => 8,
            Self::UnrolledStores
            | Self::Movnti
            | Self::Avx2Stream
            | Self::Avx512Stream
            | Self::Clzero
            | Self::Stnp => 64,
            Self::DcZva => self.alignment(),
        }
    }

    /// Whether this CPU can execute the strategy. Under Miri only [`Strategy::Portable`].
    #[must_use]
    pub fn is_available(self) -> bool {
        match self {
            Self::Portable => true,
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            Self::RepStosb | Self::RepStosq | Self::UnrolledStores | Self::Movnti => true,
            // Vector strategies exist only where the target has SSE: a soft-float kernel
            // target does not save vector state (see arch_x86::clear).
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            Self::Avx2Stream => VECTOR_STATE && cpu::features().avx2,
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            Self::Avx512Stream => VECTOR_STATE && cpu::features().avx512f,
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            Self::Clzero => cpu::features().clzero,
            #[cfg(all(target_arch = "aarch64", not(miri)))]
            Self::DcZva => dc_zva_block().is_some(),
            #[cfg(all(target_arch = "aarch64", not(miri)))]
            Self::Stnp => true,
            #[cfg(all(target_arch = "aarch64", not(miri)))]
            Self::Mops | Self::MopsNt => arm64_cpu::features().mops,
            _ => false,
        }
    }

    /// The strategies this CPU can execute, in [`Strategy::ALL`] order.
    pub fn available() -> impl Iterator<Item = Self> {
        Self::ALL.into_iter().filter(|s| s.is_available())
    }

    /// Zeroes `buf` with this strategy, then fences if the strategy needs it.
    ///
    /// # Errors
    /// [`ZeroError::StrategyUnavailable`] on a CPU without it; [`ZeroError::Misaligned`] or
    /// [`ZeroError::NotPageMultiple`] (naming the strategy's granule) when `buf` does not meet
    /// [`Strategy::alignment`] and [`Strategy::granule`].
    pub fn clear(self, buf: &mut [u8]) -> Result<(), ZeroError> {
        if !self.is_available() {
            return Err(ZeroError::StrategyUnavailable(self));
        }
        let addr = buf.as_ptr().addr();
        if !addr.is_multiple_of(self.alignment()) {
            return Err(ZeroError::Misaligned {
                addr,
                align: self.alignment(),
            });
        }
        if !buf.len().is_multiple_of(self.granule()) {
            return Err(ZeroError::NotPageMultiple {
                len: buf.len(),
                page_size: self.granule(),
            });
        }
        // SAFETY: checked just above: available, aligned, whole granules; `buf` is an
        // exclusive borrow, so the range is writable and unshared.
        unsafe { self.clear_raw(buf.as_mut_ptr(), buf.len()) };
        self.fence();
        Ok(())
    }

    /// Zeroes `len` bytes at `dst` with one call of the primitive. Does not fence.
    ///
    /// Checked in every build: where the strategy is not available on this CPU, or `dst` is
    /// not aligned to [`Strategy::alignment`] or `len` not a multiple of
    /// [`Strategy::granule`], the range is cleared with plain stores (`write_bytes`)
    /// instead, so no instruction the CPU lacks runs and nothing outside the range is
    /// written.
    ///
    /// # Safety
    /// `dst..dst + len` must be valid for writes and not accessed concurrently.
    pub unsafe fn clear_raw(self, dst: *mut u8, len: usize) {
        let usable = self.is_available()
            && dst.addr().is_multiple_of(self.alignment())
            && len.is_multiple_of(self.granule());
        if !usable {
            // SAFETY: the caller guarantees the range is writable.
            return unsafe { core::ptr::write_bytes(dst, 0, len) };
        }
        // SAFETY: the caller guarantees a writable, unshared range; availability, alignment
        // and granule were checked just above (and each primitive checks its own again).
        // Strategies of another architecture are never available, so they never reach here;
        // the portable fallback keeps the match total.
        unsafe {
            match self {
                #[cfg(all(target_arch = "x86_64", not(miri)))]
                Self::RepStosb => x86::rep_stosb(dst, len),
                #[cfg(all(target_arch = "x86_64", not(miri)))]
                Self::RepStosq => x86::rep_stosq(dst, len),
                #[cfg(all(target_arch = "x86_64", not(miri)))]
                Self::UnrolledStores => x86::unrolled_stores(dst, len),
                #[cfg(all(target_arch = "x86_64", not(miri)))]
                Self::Movnti => x86::movnti(dst, len),
                #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
                Self::Avx2Stream => x86::avx2_stream(dst, len),
                #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(miri)))]
                Self::Avx512Stream => x86::avx512_stream(dst, len),
                #[cfg(all(target_arch = "x86_64", not(miri)))]
                Self::Clzero => x86::clzero(dst, len),
                #[cfg(all(target_arch = "aarch64", not(miri)))]
                Self::DcZva => arm64::dc_zva(dst, len),
                #[cfg(all(target_arch = "aarch64", not(miri)))]
                Self::Stnp => arm64::stnp(dst, len),
                #[cfg(all(target_arch = "aarch64", not(miri)))]
                Self::Mops => arm64::mops_set(dst, len),
                #[cfg(all(target_arch = "aarch64", not(miri)))]
                Self::MopsNt => arm64::mops_set_nt(dst, len),
                _ => core::ptr::write_bytes(dst, 0, len),
            }
        }
    }

    /// Issues the store fence this strategy needs (nothing for temporal strategies).
    pub fn fence(self) {
        if !self.needs_fence() {
            return;
        }
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        x86::sfence();
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        arm64_barrier::dmb_ishst();
        #[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
}

/// The architectural maximum DC ZVA block (DCZID_EL0.BS = 9).
const DC_ZVA_MAX_BLOCK: usize = 2048;

/// The DC ZVA block size, if DC ZVA is permitted here.
fn dc_zva_block() -> Option<usize> {
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    {
        arm64_cpu::features().dc_zva_block
    }
    #[cfg(not(all(target_arch = "aarch64", not(miri))))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    #[test]
    fn portable_is_always_available_and_not_an_extent() {
        assert!(Strategy::Portable.is_available());
        assert!(!Strategy::Portable.is_extent());
        assert!(Strategy::available().any(|s| s == Strategy::Portable));
    }

    #[test]
    fn every_available_strategy_clears_and_checks_its_contract() {
        // Page-aligned: every strategy's alignment (up to a 2 KiB DC ZVA block) divides it.
        let mut buf = vec![0xA5u8; 6 * 4096];
        let start = buf.as_ptr().align_offset(4096);
        for s in Strategy::available() {
            let region = &mut buf[start..start + 4096];
            region.fill(0xA5);
            s.clear(region).unwrap();
            assert!(region.iter().all(|&b| b == 0), "{}", s.name());
            if s.alignment() > 1 {
                let len = s.granule();
                let err = s.clear(&mut buf[start + 1..start + 1 + len]).unwrap_err();
                assert!(matches!(err, ZeroError::Misaligned { .. }), "{}", s.name());
            }
            if s.granule() > 1 {
                let err = s
                    .clear(&mut buf[start..start + s.granule() - 1])
                    .unwrap_err();
                assert!(
                    matches!(err, ZeroError::NotPageMultiple { .. }),
                    "{}",
                    s.name()
                );
            }
        }
        for s in Strategy::ALL.into_iter().filter(|s| !s.is_available()) {
            let region = &mut buf[start..start + 64];
            assert_eq!(s.clear(region), Err(ZeroError::StrategyUnavailable(s)));
        }
    }
}
