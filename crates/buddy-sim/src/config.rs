//! A zone's geometry and tuning.

use crate::{BuddyError, Order, Pfn};

/// A zone's geometry and tuning. [`ZoneConfig::new`] gives the x86_64 kernel's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneConfig {
    /// First frame the zone spans.
    pub start: Pfn,
    /// Frames the zone spans, holes included (at most `u32::MAX - 1`).
    pub nr_pages: u64,
    /// MAX_ORDER: the largest block (10 on x86_64: 4 MiB with 4 KiB pages).
    pub max_order: Order,
    /// The pageblock order (9), which also gets a per-cpu list.
    pub pageblock_order: Order,
    /// Frames per memory section (a power of two; 2^15 by default). `free_contig_range`
    /// never coalesces across a section boundary.
    pub section_pages: u64,
    /// Number of CPUs, each with its own per-cpu lists.
    pub cpus: usize,
    /// A per-cpu list set that holds more than this many frames drains `pcp_batch` frames.
    pub pcp_high: u64,
    /// Frames moved per drain or refill.
    pub pcp_batch: u64,
}

impl ZoneConfig {
    /// `[start, start + nr_pages)` with MAX_ORDER 10, pageblock order 9, 2^15-frame
    /// sections, one CPU, `high` 1536 and `batch` 63 frames.
    #[must_use]
    #[inline]
    pub const fn new(start: Pfn, nr_pages: u64) -> Self {
        Self {
            start,
            nr_pages,
            max_order: Order(10),
            pageblock_order: Order(9),
            section_pages: 1 << 15,
            cpus: 1,
            pcp_high: 1536,
            pcp_batch: 63,
        }
    }

    /// The same zone with `cpus` CPUs.
    #[must_use]
    #[inline]
    pub const fn with_cpus(self, cpus: usize) -> Self {
        Self { cpus, ..self }
    }

    pub(crate) fn validate(&self) -> Result<(), BuddyError> {
        let bad = |why| Err(BuddyError::BadConfig(why));
        if self.nr_pages == 0 {
            return bad("the zone has no frames");
        }
        if self.nr_pages >= u64::from(u32::MAX) || usize::try_from(self.nr_pages).is_err() {
            return bad("more frames than 32-bit list links can index");
        }
        if self.start.checked_add(self.nr_pages).is_none() {
            return bad("start + nr_pages overflows");
        }
        if self.max_order.get() > crate::MAX_SUPPORTED_ORDER {
            return bad("MAX_ORDER above MAX_SUPPORTED_ORDER");
        }
        if self.pageblock_order > self.max_order {
            return bad("pageblock order above MAX_ORDER");
        }
        if !self.section_pages.is_power_of_two() {
            return bad("section size is not a power of two");
        }
        if self.cpus == 0 {
            return bad("no CPUs");
        }
        if self.pcp_batch == 0 {
            return bad("per-cpu batch is zero");
        }
        Ok(())
    }

    /// Blocks of `order` one refill moves to a per-cpu list: `pcp_batch` frames' worth, at
    /// least one.
    #[inline]
    pub(crate) fn pcp_blocks(&self, order: Order) -> u64 {
        (self.pcp_batch / order.pages()).max(1)
    }

    /// The per-cpu list that holds blocks of `order`, if any: orders 0..=3
    /// (PAGE_ALLOC_COSTLY_ORDER) and the pageblock order.
    #[inline]
    pub(crate) fn pcp_list(&self, order: Order) -> Option<usize> {
        if order.get() <= 3 {
            Some(order.get() as usize)
        } else if order == self.pageblock_order {
            Some(crate::pcp::PCP_LISTS - 1)
        } else {
            None
        }
    }
}
