//! Owned pages (ax-alloc's `GlobalPage`): a run of 4 KiB pages from the global allocator,
//! counted as [`UsageKind::Global`] and given back when dropped.

use ax_memory_addr::{PhysAddr, VirtAddr};

use crate::{AllocResult, PAGE_SIZE, UsageKind, global_allocator};

/// Contiguous 4 KiB pages from the global allocator, given back when dropped.
#[derive(Debug)]
pub struct GlobalPage {
    start_vaddr: VirtAddr,
    num_pages: usize,
}

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
        let at = global_allocator()
            .buddy()
            .alloc_zeroed_pages(1, PAGE_SIZE, UsageKind::Global)?;
        Ok(Self::owning(at, 1))
    }

    /// `num_pages` contiguous pages aligned to `alignment` bytes.
    ///
    /// # Errors
    /// [`AllocError::NoMemory`](crate::AllocError::NoMemory); `InvalidParam` for an
    /// alignment that is not a power of two.
    pub fn alloc_contiguous(num_pages: usize, alignment: usize) -> AllocResult<Self> {
        let at = global_allocator().alloc_pages(num_pages, alignment, UsageKind::Global)?;
        Ok(Self::owning(at, num_pages))
    }

    fn owning(at: usize, num_pages: usize) -> Self {
        Self {
            start_vaddr: VirtAddr::from(at),
            num_pages,
        }
    }

    /// The first page's virtual address.
    pub fn start_vaddr(&self) -> VirtAddr {
        self.start_vaddr
    }

    /// The first page's physical address, through the kernel's `virt_to_phys`.
    pub fn start_paddr<F>(&self, virt_to_phys: F) -> PhysAddr
    where
        F: FnOnce(VirtAddr) -> PhysAddr,
    {
        virt_to_phys(self.start_vaddr)
    }

    /// The run's size in bytes.
    pub fn size(&self) -> usize {
        self.num_pages * PAGE_SIZE
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.start_vaddr.as_ptr()
    }

    /// The first byte, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.start_vaddr.as_mut_ptr()
    }

    /// Writes `byte` to every byte of the run.
    pub fn fill(&mut self, byte: u8) {
        self.as_slice_mut().fill(byte);
    }

    /// Writes zero to every byte of the run.
    pub fn zero(&mut self) {
        self.fill(0);
    }

    /// The run's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocator handed this run to this value alone, mapped readable and
        // writable (ArceOS maps all of its RAM); it lives until `drop`.
        unsafe { core::slice::from_raw_parts(self.as_ptr(), self.size()) }
    }

    /// The run's bytes, writable.
    pub fn as_slice_mut(&mut self) -> &mut [u8] {
        let len = self.size();
        // SAFETY: as `as_slice`, and `&mut self` makes this the only reference to them.
        unsafe { core::slice::from_raw_parts_mut(self.as_mut_ptr(), len) }
    }
}

impl Drop for GlobalPage {
    fn drop(&mut self) {
        global_allocator().dealloc_pages(
            self.start_vaddr.as_usize(),
            self.num_pages,
            UsageKind::Global,
        );
    }
}
