//! `decompose` under arbitrary pfn, count and max order (overflow and zero included): an
//! error exactly on overflow, else an exact, aligned cover equal to the brute force.
#![no_main]

use buddy_sim::reference::brute_force_cover;
use buddy_sim::{Order, Pfn, decompose};
use libfuzzer_sys::fuzz_target;

/// The most blocks of a cover compared with the brute force.
const MAX_BLOCKS: usize = 256;

fuzz_target!(|input: (u64, u64, u8)| {
    let (pfn, nr, max) = input;
    let Ok(max) = Order::new(max) else {
        assert!(max > buddy_sim::MAX_SUPPORTED_ORDER);
        return;
    };
    let Ok(blocks) = decompose(Pfn(pfn), nr, max) else {
        assert!(pfn.checked_add(nr).is_none(), "error without overflow");
        return;
    };
    // Keep each run short: at most MAX_BLOCKS blocks are compared (a longer cover is the
    // same arithmetic repeated).
    let mut brute = Vec::new();
    let mut next = pfn;
    for (i, (p, o)) in blocks.enumerate() {
        if i == MAX_BLOCKS {
            return;
        }
        assert_eq!(p.0, next);
        assert!(o <= max && o.aligns(p));
        next += o.pages();
        brute.push((p, o));
    }
    assert_eq!(next, pfn + nr);
    let mut i = 0;
    brute_force_cover(Pfn(pfn), nr, max, |p, o| {
        assert_eq!(brute[i], (p, o));
        i += 1;
    });
    assert_eq!(i, brute.len());
});
