//! Pages through ArceOS's allocator interface (`axalloc`): alignments 4 KiB..2 MiB, runs
//! freed in parts, fixed-address runs, zeroed pages, and 20 000 random calls whose runs are
//! marked to find one handed out twice.
#![no_std]
#![no_main]

#[macro_use]
extern crate axstd as std;

use alloc_apps::{Checks, PAGE, Rng, mark, marked};
use axalloc::{GlobalPage, UsageKind, global_allocator};
use std::string::String;

/// Every alignment 4 KiB..2 MiB for runs of 1, 2, 3, 8 and 64 pages.
fn alignments() -> Result<(), String> {
    let a = global_allocator();
    let mut misaligned = 0;
    let mut asked = 0;
    let mut example = None;
    for shift in 12..=21 {
        let align = 1usize << shift;
        for pages in [1, 2, 3, 8, 64] {
            let at = a
                .alloc_pages(pages, align, UsageKind::VirtMem)
                .map_err(|e| format!("{pages} pages aligned to {align:#x}: {e:?}"))?;
            asked += 1;
            if at % align != 0 {
                misaligned += 1;
                example.get_or_insert((pages, align, at));
            }
            a.dealloc_pages(at, pages, UsageKind::VirtMem);
        }
    }
    match example {
        None => Ok(()),
        Some((pages, align, at)) => Err(format!(
            "{misaligned} of {asked} runs misaligned, e.g. {pages} pages aligned to {align:#x} at {at:#x}"
        )),
    }
}

/// A run freed in parts (middle first, then both ends) gives every page back.
fn partial_frees() -> Result<(), String> {
    let a = global_allocator();
    let before = a.available_pages();
    let at = a
        .alloc_pages(96, PAGE, UsageKind::VirtMem)
        .map_err(|e| format!("96 pages: {e:?}"))?;
    a.dealloc_pages(at + 32 * PAGE, 16, UsageKind::VirtMem);
    a.dealloc_pages(at, 32, UsageKind::VirtMem);
    a.dealloc_pages(at + 48 * PAGE, 48, UsageKind::VirtMem);
    let after = a.available_pages();
    if after != before {
        return Err(format!("{before} pages free before, {after} after"));
    }
    Ok(())
}

/// A run taken at a fixed address, refused while held, free after.
fn fixed_address() -> Result<(), String> {
    let a = global_allocator();
    let probe = a
        .alloc_pages(16, 16 * PAGE, UsageKind::Dma)
        .map_err(|e| format!("16 pages: {e:?}"))?;
    a.dealloc_pages(probe, 16, UsageKind::Dma);
    let at = a
        .alloc_pages_at(probe, 16, PAGE, UsageKind::Dma)
        .map_err(|e| format!("16 pages at {probe:#x}: {e:?}"))?;
    if at != probe {
        return Err(format!("asked for {probe:#x}, got {at:#x}"));
    }
    let again = a.alloc_pages_at(probe + 4 * PAGE, 2, PAGE, UsageKind::Dma);
    a.dealloc_pages(probe, 16, UsageKind::Dma);
    if let Ok(twice) = again {
        return Err(format!("pages at {twice:#x} handed out while held"));
    }
    Ok(())
}

/// Zeroed pages read zero, after every page they could come from was dirtied.
fn zeroed_pages() -> Result<(), String> {
    let a = global_allocator();
    let mut dirty = [0usize; 256];
    let mut n = 0;
    while n < dirty.len() {
        let Ok(at) = a.alloc_pages(1, PAGE, UsageKind::VirtMem) else {
            break;
        };
        // SAFETY: the page is this app's.
        unsafe { core::ptr::write_bytes(at as *mut u8, 0xa5, PAGE) };
        dirty[n] = at;
        n += 1;
    }
    for &at in &dirty[..n] {
        a.dealloc_pages(at, 1, UsageKind::VirtMem);
    }
    for i in 0..n {
        let page = GlobalPage::alloc_zero().map_err(|e| format!("zeroed page {i}: {e:?}"))?;
        if let Some(at) = page.as_slice().iter().position(|&b| b != 0) {
            return Err(format!(
                "zeroed page {i} reads {:#x} at byte {at}",
                page.as_slice()[at]
            ));
        }
    }
    Ok(())
}

/// 20 000 random allocations and frees (of whole runs and parts) with alignments up to
/// 64 KiB; every run marked and checked when freed.
fn random_churn() -> Result<(), String> {
    let a = global_allocator();
    let before = a.available_pages();
    let mut rng = Rng::new(2026);
    let mut runs = [(0usize, 0usize); 64];
    let mut live = 0;
    for round in 0..20_000 {
        if live < runs.len() && (live == 0 || rng.below(2) == 0) {
            let pages = 1 + rng.below(24);
            let align = PAGE << rng.below(5);
            if let Ok(at) = a.alloc_pages(pages, align, UsageKind::VirtMem) {
                // SAFETY: the run is this app's.
                unsafe { mark(at, pages, at) };
                runs[live] = (at, pages);
                live += 1;
            }
        } else {
            let i = rng.below(live);
            let (at, pages) = runs[i];
            // SAFETY: the run is this app's.
            unsafe { marked(at, pages, at) }.map_err(|e| format!("round {round}: {e}"))?;
            // Half the time, free only the tail and keep the head.
            let keep = if pages > 1 && rng.below(2) == 0 {
                rng.below(pages)
            } else {
                0
            };
            a.dealloc_pages(at + keep * PAGE, pages - keep, UsageKind::VirtMem);
            if keep > 0 {
                runs[i] = (at, keep);
            } else {
                live -= 1;
                runs[i] = runs[live];
            }
        }
    }
    for &(at, pages) in &runs[..live] {
        // SAFETY: as above.
        unsafe { marked(at, pages, at) }.map_err(|e| format!("at the end: {e}"))?;
        a.dealloc_pages(at, pages, UsageKind::VirtMem);
    }
    let after = a.available_pages();
    if after != before {
        return Err(format!("{before} pages free before, {after} after"));
    }
    Ok(())
}

#[unsafe(no_mangle)]
fn main() {
    println!("pages: {} allocator", global_allocator().name());
    let mut checks = Checks::new("pages");
    checks.check("alignments 4 KiB..2 MiB", alignments());
    checks.check("partial frees", partial_frees());
    checks.check("fixed address", fixed_address());
    checks.check("zeroed pages", zeroed_pages());
    checks.check("random churn", random_churn());
    checks.verdict();
}
