//! Free page reporting to a real device: every free 2 MiB block is touched (made resident
//! in the host), freed, and reported through buddy-sim's `report_free_pages` to the
//! platform's device (a virtio-balloon on QEMU), which discards it; the host samples its
//! resident memory before and after (the kernel prints `balloon: sample` and waits for its
//! answer). Then the reported blocks come back from `alloc_zeroed` known zero, without a
//! clear, and every word of them reads zero.

use buddy_sim::{Order, PageReporting, Pfn, ReportSink};

use super::{KernelZone, PAGE, Platform, Step, fail};

/// 2 MiB: the reporting order (Linux's `page_reporting_order`, the pageblock order).
const ORDER: u8 = 9;
/// The most blocks the step takes (128 MiB of RAM holds fewer).
const MAX_BLOCKS: usize = 64;

/// Runs the step with `device` as the sink; `sample` prints the marker line and waits for
/// the host's answer (false: none came).
pub fn reporting_step<P: Platform>(
    zone: &KernelZone,
    device: &mut impl ReportSink,
    sample: &mut dyn FnMut(&str) -> bool,
) {
    let order = Order::new(ORDER).unwrap_or(Order::ZERO);
    let registration = PageReporting::new(order).discard_zeroes(true);
    zone.register_page_reporting(registration)
        .unwrap_or_else(|e| fail::<P>(Step::Reporting, format_args!("register: {e}")));
    // Every 2 MiB block the zone has, written in every page (resident in the host), freed.
    let mut blocks = [Pfn(0); MAX_BLOCKS];
    let mut n = 0;
    while n < MAX_BLOCKS
        && let Ok(pfn) = zone.alloc_pages(0, order)
    {
        blocks[n] = pfn;
        n += 1;
    }
    for &pfn in &blocks[..n] {
        for page in 0..order.pages() {
            // SAFETY: a page of a block this step holds, identity-mapped normal memory.
            unsafe { (((pfn.0 + page) * PAGE) as *mut u64).write_volatile(0x5EED_0000 | page) };
        }
        // SAFETY: the step frees what it allocated, once, and no longer uses its memory.
        unsafe { zone.free_pages(0, pfn, order) }
            .unwrap_or_else(|e| fail::<P>(Step::Reporting, format_args!("free: {e}")));
    }
    zone.drain_all();
    let answered = sample("before");
    let reported = zone
        .report_free_pages(u64::MAX, device)
        .unwrap_or_else(|e| fail::<P>(Step::Reporting, format_args!("report: {e}")));
    let stats = zone.page_reporting_stats();
    println!(
        "balloon: reported {} KiB in {} rounds ({} blocks of 2 MiB written before)",
        reported * PAGE / 1024,
        stats.reports,
        n
    );
    let answered = sample("after") && answered;
    if !answered {
        println!("balloon: no host sampled the resident memory (run by the bare-metal stage)");
    }
    // The reported blocks come back known zero: no clear, and every word reads zero.
    let cleared = zone.counters().cleared_on_alloc;
    let clearer = super::clearer();
    let mut taken = 0;
    for slot in blocks.iter_mut().take(n) {
        let pfn = zone
            .alloc_zeroed(0, order, &clearer, None, &mut zero_core::NoResched)
            .unwrap_or_else(|e| fail::<P>(Step::Reporting, format_args!("alloc_zeroed: {e}")));
        let words = (order.pages() * PAGE / 8) as usize;
        // SAFETY: the block this step just allocated, identity-mapped normal memory.
        let block = unsafe { core::slice::from_raw_parts((pfn.0 * PAGE) as *const u64, words) };
        if let Some(i) = block.iter().position(|&w| w != 0) {
            fail::<P>(
                Step::Reporting,
                format_args!(
                    "a reported block at {pfn} reads {:#x} at word {i}",
                    block[i]
                ),
            );
        }
        *slot = pfn;
        taken += 1;
    }
    if zone.counters().cleared_on_alloc != cleared {
        fail::<P>(
            Step::Reporting,
            format_args!("alloc_zeroed cleared reported memory"),
        );
    }
    for &pfn in &blocks[..taken] {
        // SAFETY: as above.
        unsafe { zone.free_pages(0, pfn, order) }
            .unwrap_or_else(|e| fail::<P>(Step::Reporting, format_args!("free: {e}")));
    }
    zone.unregister_page_reporting();
    println!(
        "balloon: {taken} reported 2 MiB blocks allocated zeroed without a clear, every word zero"
    );
}
