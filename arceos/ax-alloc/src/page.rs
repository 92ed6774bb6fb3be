//! Owned pages (ax-alloc's `GlobalPage`): a run of 4 KiB pages from the global allocator,
//! counted as [`UsageKind::Global`] and given back when dropped. It is `axalloc-buddy`'s
//! `GlobalPage` over this package's allocator, with ax-alloc's address types.

use ax_memory_addr::{PhysAddr, VirtAddr};

use crate::{AllocResult, PAGE_SIZE, UsageKind, global_allocator};

/// Contiguous 4 KiB pages from the global allocator, given back when dropped.
#[derive(Debug)]
pub struct GlobalPage(axalloc_buddy::GlobalPage<crate::CurrentCpu>);

impl GlobalPage {
    /// One page.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`](crate::AllocError::NoMemory).
    pub fn alloc() -> AllocResult<Self> {
        Self::alloc_contiguous(1, PAGE_SIZE)
    }

    /// One page that reads zero: one the zone knows is zero, else cleared with zero-core's
    /// strategy for this CPU (not a byte loop).
    ///
    /// # Errors
    /// [`AllocError::NoMemory`](crate::AllocError::NoMemory).
    pub fn alloc_zero() -> AllocResult<Self> {
        let a = global_allocator().buddy();
        let at = a.alloc_zeroed_pages(1, PAGE_SIZE, UsageKind::Global)?;
        // SAFETY: `a` allocated the page for `Global` just now and hands it to nobody else.
        Ok(Self(unsafe {
            axalloc_buddy::GlobalPage::from_raw(a, at, 1)
        }))
    }

    /// `num_pages` contiguous pages aligned to `alignment` bytes (after the registered
    /// reclaim when memory is short).
    ///
    /// # Errors
    /// [`AllocError::NoMemory`](crate::AllocError::NoMemory); `InvalidParam` for an
    /// alignment that is not a power of two.
    pub fn alloc_contiguous(num_pages: usize, alignment: usize) -> AllocResult<Self> {
        let a = global_allocator();
        let at = a.alloc_pages(num_pages, alignment, UsageKind::Global)?;
        // SAFETY: the allocator under `a` allocated the run for `Global` just now and hands
        // it to nobody else.
        Ok(Self(unsafe {
            axalloc_buddy::GlobalPage::from_raw(a.buddy(), at, num_pages)
        }))
    }

    /// The first page's virtual address.
    pub fn start_vaddr(&self) -> VirtAddr {
        VirtAddr::from(self.0.start_vaddr().as_usize())
    }

    /// The first page's physical address, through the kernel's `virt_to_phys`.
    pub fn start_paddr<F>(&self, virt_to_phys: F) -> PhysAddr
    where
        F: FnOnce(VirtAddr) -> PhysAddr,
    {
        virt_to_phys(self.start_vaddr())
    }

    /// The run's size in bytes.
    pub fn size(&self) -> usize {
        self.0.size()
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }

    /// The first byte, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr()
    }

    /// Writes `byte` to every byte of the run.
    pub fn fill(&mut self, byte: u8) {
        self.0.fill(byte);
    }

    /// Writes zero to every byte of the run.
    pub fn zero(&mut self) {
        self.0.zero();
    }

    /// The run's bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.0.as_slice()
    }

    /// The run's bytes, writable.
    pub fn as_slice_mut(&mut self) -> &mut [u8] {
        self.0.as_slice_mut()
    }
}
