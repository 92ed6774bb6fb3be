//! The obvious definitions, written for clarity and never optimized: what every optimized
//! path is checked against, and the "before" column of the benchmarks.

use crate::{PageSize, Resched, Strategy, ZeroError};

/// Zeroes `buf` one page at a time: one `cond_resched` and one primitive call per page, in
/// ascending order (the kernel before extent clearing).
///
/// # Errors
/// [`ZeroError::ZeroLength`], [`ZeroError::Misaligned`], [`ZeroError::NotPageMultiple`] for
/// bad geometry, [`ZeroError::StrategyUnavailable`] on a CPU without `strategy`.
pub fn clear_pages_one_by_one(
    buf: &mut [u8],
    page_size: PageSize,
    strategy: Strategy,
    resched: &mut impl Resched,
) -> Result<(), ZeroError> {
    let page = page_size.bytes();
    if buf.is_empty() {
        return Err(ZeroError::ZeroLength);
    }
    if !buf.as_ptr().addr().is_multiple_of(page) {
        return Err(ZeroError::Misaligned {
            addr: buf.as_ptr().addr(),
            align: page,
        });
    }
    if !buf.len().is_multiple_of(page) {
        return Err(ZeroError::NotPageMultiple {
            len: buf.len(),
            page_size: page,
        });
    }
    for p in buf.chunks_exact_mut(page) {
        resched.cond_resched();
        strategy.clear(p)?;
    }
    Ok(())
}

/// Calls `visit` with each page index of a folio of `npages` pages in the order the merged
/// `folio_zero_user` clears them, computed straight from the kernel's arithmetic with its
/// radius (`FOLIO_ZERO_LOCALITY_RADIUS`, 2) as `radius`:
/// `r2 = [max(f - radius, 0), min(f + radius, n - 1)]`, `r1 = [0, r2.start - 1]`,
/// `r0 = [r2.end + 1, n - 1]`, visited r0, r1, r2, ascending inside each.
/// Requires `fault < npages`; visits nothing otherwise.
pub fn neighbourhood_last_order(
    npages: usize,
    fault: usize,
    radius: usize,
    mut visit: impl FnMut(usize),
) {
    if fault >= npages {
        return;
    }
    let (n, f, r) = (npages as i128, fault as i128, radius as i128);
    let r2 = ((f - r).max(0), (f + r).min(n - 1));
    let r1 = (0, r2.0 - 1);
    let r0 = (r2.1 + 1, n - 1);
    for (lo, hi) in [r0, r1, r2] {
        let mut i = lo;
        while i <= hi {
            visit(i as usize);
            i += 1;
        }
    }
}

/// Calls `visit` with each page index in `process_huge_page`'s target-last order, written as
/// the kernel's two loops. Requires `target < npages`; visits nothing otherwise.
pub fn target_last_order(npages: usize, target: usize, mut visit: impl FnMut(usize)) {
    if target >= npages {
        return;
    }
    let (n, t) = (npages as i128, target as i128);
    let (base, l);
    if 2 * t <= n {
        base = 0;
        l = t;
        let mut i = n - 1;
        while i >= 2 * t {
            visit(i as usize);
            i -= 1;
        }
    } else {
        base = n - 2 * (n - t);
        l = n - t;
        for i in 0..base {
            visit(i as usize);
        }
    }
    for i in 0..l {
        visit((base + i) as usize);
        visit((base + 2 * l - 1 - i) as usize);
    }
}
