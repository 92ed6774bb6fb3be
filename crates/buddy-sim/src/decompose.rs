use crate::error::free::FreeError;
use crate::types::Order;
use mm_types::Pfn;

/// The kernel's `free_prepared_contig_range` chunking: the run `[pfn, pfn + nr)` as the
/// unique minimal cover by naturally aligned power-of-two blocks no larger than `max_order`,
/// in ascending order. Each step takes `min(max_order, Order::align_of(pfn), floor_log2(count))`.
///
/// ```
/// use buddy_sim::{Order, Pfn, decompose};
/// let blocks: Vec<_> = decompose(Pfn(0x1003), 13, Order::new(10)?)?.collect();
/// let orders: Vec<u8> = blocks.iter().map(|(_, o)| o.get()).collect();
/// assert_eq!(blocks.iter().map(|(p, _)| p.0).collect::<Vec<_>>(), [0x1003, 0x1004, 0x1008]);
/// assert_eq!(orders, [0, 2, 3]);
/// # Ok::<(), buddy_sim::BuddyError>(())
/// ```
///
/// # Errors
/// [`FreeError::Overflow`] if `pfn + nr` overflows.
pub fn decompose(pfn: Pfn, nr: u64, max_order: Order) -> Result<Decompose, FreeError> {
    pfn.checked_add(nr).ok_or(FreeError::Overflow)?;
    Ok(Decompose {
        pfn,
        left: nr,
        max_order,
    })
}

/// The iterator [`decompose`] returns: `(first frame, order)` per block.
#[derive(Clone, Debug)]
pub struct Decompose {
    pfn: Pfn,
    left: u64,
    max_order: Order,
}

impl Iterator for Decompose {
    type Item = (Pfn, Order);

    fn next(&mut self) -> Option<(Pfn, Order)> {
        if self.left == 0 {
            return None;
        }
        let order = Order::align_of(self.pfn, self.max_order)
            .min(Order::floor_log2(self.left, self.max_order));
        let block = (self.pfn, order);
        // Cannot overflow: decompose() checked pfn + nr, and pages() <= left.
        self.pfn = Pfn(self.pfn.0 + order.pages());
        self.left -= order.pages();
        Some(block)
    }
}
