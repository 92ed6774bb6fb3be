//! The app as the guest of this project's EL2 hypervisor (the `hypervisor-guest` feature,
//! aarch64): it shows the hypervisor a known working set through the hypervisor's calls
//! (SMCCC's vendor-specific hypervisor service): it names a buffer, writes every other page
//! of it, then idles, and the hypervisor's aging of stage 2 must see exactly that.

use ax_alloc::{UsageKind, global_allocator};
use core::time::Duration;
use std::string::String;
use std::thread;

use crate::PAGE;

/// The hypervisor's service: function 0 answers [`HYP_MAGIC`]; 1 starts a check of a
/// buffer (x1 its physical address, x2 its pages); 2 follows writes to every x3-th page of
/// it, 3 an idle spell (x2 the buffer's pages each time); each answers the buffer's young
/// pages (-2: a bad buffer, or a call out of order).
const HYP_SERVICE: u64 = 0xC600_0000;
/// "buddysim" in ASCII.
const HYP_MAGIC: u64 = 0x6275_6464_7973_696d;
/// Pages of the working-set buffer.
const BUFFER_PAGES: usize = 256;
/// Every `STRIDE`-th page of it is written.
const STRIDE: usize = 2;

/// A call to the hypervisor: function `f`, arguments in x1-x3; its answer.
fn hvc(f: u64, a: u64, b: u64, c: u64) -> u64 {
    let answer;
    // SAFETY: an SMCCC call through `hvc`, which the hypervisor answers in x0 (x1-x3 may
    // change); nothing else is touched.
    unsafe {
        core::arch::asm!("hvc #0", inout("x0") f => answer, inout("x1") a => _,
            inout("x2") b => _, inout("x3") c => _, options(nostack));
    }
    answer
}

/// Names a buffer to the hypervisor, writes every [`STRIDE`]-th page of it, then sleeps:
/// the hypervisor must find exactly those pages young, then none.
pub fn working_set() -> Result<(), String> {
    if hvc(HYP_SERVICE, 0, 0, 0) != HYP_MAGIC {
        return Err(String::from("no buddy-sim hypervisor answered"));
    }
    let a = global_allocator();
    let va = a
        .alloc_pages(BUFFER_PAGES, PAGE, UsageKind::Global)
        .map_err(|e| format!("the buffer: {e}"))?;
    let touch = |stride: usize| {
        for p in (0..BUFFER_PAGES).step_by(stride) {
            // SAFETY: the buffer is this function's (ArceOS maps all of its RAM).
            unsafe { ((va + p * PAGE) as *mut usize).write_volatile(p) };
        }
    };
    touch(1);
    let pa = ax_plat::mem::virt_to_phys(va.into()).as_usize() as u64;
    hvc(HYP_SERVICE + 1, pa, BUFFER_PAGES as u64, 0);
    touch(STRIDE);
    let young = hvc(HYP_SERVICE + 2, pa, BUFFER_PAGES as u64, STRIDE as u64);
    thread::sleep(Duration::from_millis(20));
    let idle = hvc(HYP_SERVICE + 3, pa, BUFFER_PAGES as u64, 0);
    a.dealloc_pages(va, BUFFER_PAGES, UsageKind::Global);
    println!(
        "today guest working set: the hypervisor saw {young} of {BUFFER_PAGES} buffer pages young after every {STRIDE}nd was written, {idle} after a 20 ms sleep"
    );
    if young != (BUFFER_PAGES / STRIDE) as u64 || idle != 0 {
        return Err(format!("expected {} young, then 0", BUFFER_PAGES / STRIDE));
    }
    Ok(())
}
