use crate::{ZeroError, backend};

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
    /// x86 AVX2 `vmovdqa` temporal stores: for cache-resident extents, where vector
    /// registers may be used ([`VectorUse`](crate::VectorUse)).
    Avx2Stores,
    /// x86 AVX-512 `vmovdqa64` temporal stores: for cache-resident extents, where vector
    /// registers may be used.
    Avx512Stores,
    /// x86 `movnti` non-temporal stores (the 2018 proposal for clearing 1 GiB pages).
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
    /// arm64 NEON `STP q, q` temporal stores: for cache-resident extents, where vector
    /// registers may be used.
    NeonStp,
    /// arm64 FEAT_MOPS `SETP/SETM/SETE`.
    Mops,
    /// arm64 FEAT_MOPS non-temporal `SETPN/SETMN/SETEN`.
    MopsNt,
}

impl Strategy {
    /// Every strategy, portable first.
    pub const ALL: [Self; 15] = [
        Self::Portable,
        Self::RepStosb,
        Self::RepStosq,
        Self::UnrolledStores,
        Self::Avx2Stores,
        Self::Avx512Stores,
        Self::Movnti,
        Self::Avx2Stream,
        Self::Avx512Stream,
        Self::Clzero,
        Self::DcZva,
        Self::Stnp,
        Self::NeonStp,
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
            Self::Avx2Stores => "avx2 stores",
            Self::Avx512Stores => "avx512 stores",
            Self::Movnti => "movnti",
            Self::Avx2Stream => "avx2 stream",
            Self::Avx512Stream => "avx512 stream",
            Self::Clzero => "clzero",
            Self::DcZva => "dc zva",
            Self::Stnp => "stnp",
            Self::NeonStp => "neon stp",
            Self::Mops => "mops",
            Self::MopsNt => "mops nt",
        }
    }

    /// Whether one call clears a whole multi-page extent (the kernel's `clear_pages()`), so
    /// that a batch may span many pages. [`Strategy::Portable`] models the generic per-page
    /// loop and [`Strategy::Stnp`] the kernel's arm64 `clear_page()`: they are not. MOPS and
    /// DC ZVA are, unlike in the kernel (which keeps arm64 at one page per batch): the patch
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

    /// Whether the primitive uses vector (SIMD/FP) registers, which a kernel must save for the
    /// context it interrupted before using them ([`VectorUse`](crate::VectorUse)).
    #[must_use]
    pub const fn uses_vector_registers(self) -> bool {
        matches!(
            self,
            Self::Avx2Stores
                | Self::Avx512Stores
                | Self::Avx2Stream
                | Self::Avx512Stream
                | Self::NeonStp
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
            Self::Stnp | Self::NeonStp => 16,
            Self::Avx2Stores | Self::Avx2Stream => 32,
            Self::Avx512Stores | Self::Avx512Stream | Self::Clzero => 64,
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
            | Self::Avx2Stores
            | Self::Avx512Stores
            | Self::Movnti
            | Self::Avx2Stream
            | Self::Avx512Stream
            | Self::Clzero
            | Self::Stnp
            | Self::NeonStp => 64,
            Self::DcZva => self.alignment(),
        }
    }

    /// Whether this CPU can execute the strategy. Under Miri only [`Strategy::Portable`].
    #[must_use]
    #[inline]
    pub fn is_available(self) -> bool {
        backend::is_available(self)
    }

    /// The strategies this CPU can execute, in [`Strategy::ALL`] order.
    pub fn available() -> impl Iterator<Item = Self> {
        Self::ALL.into_iter().filter(|s| s.is_available())
    }

    /// Zeroes `buf` with this strategy, then fences if the strategy needs it.
    ///
    /// # Errors
    /// [`ZeroError::StrategyUnavailable`] on a CPU without it; [`ZeroError::Misaligned`] or
    /// [`ZeroError::NotGranuleMultiple`] when `buf` does not meet [`Strategy::alignment`] and
    /// [`Strategy::granule`].
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
            return Err(ZeroError::NotGranuleMultiple {
                len: buf.len(),
                granule: self.granule(),
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
        unsafe { backend::clear(self, dst, len) }
    }

    /// Issues the store fence this strategy needs (nothing for temporal strategies).
    #[inline]
    pub fn fence(self) {
        if self.needs_fence() {
            backend::store_fence();
        }
    }
}

/// The architectural maximum DC ZVA block (DCZID_EL0.BS = 9).
const DC_ZVA_MAX_BLOCK: usize = 2048;

/// The DC ZVA block size, if DC ZVA is permitted here.
fn dc_zva_block() -> Option<usize> {
    backend::dc_zva_block()
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
                    matches!(err, ZeroError::NotGranuleMultiple { .. }),
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
