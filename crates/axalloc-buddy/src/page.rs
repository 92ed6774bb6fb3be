//! Owned pages: a run of 4 KiB pages from the global allocator, given back when dropped.

use crate::frames::PAGE;
use crate::{CpuId, GlobalAllocator, PerCpuRegister, UsageKind, global_allocator};
use axerrno::{AxError, AxResult};
use core::fmt;
use memory_addr::{PhysAddr, VirtAddr};

/// Contiguous 4 KiB pages from the global allocator (or another `'static` one:
/// [`GlobalPage::from_raw`]), counted as [`UsageKind::Global`] and given back to it when
/// dropped (ArceOS's `GlobalPage`).
pub struct GlobalPage<C: CpuId = PerCpuRegister> {
    allocator: &'static GlobalAllocator<C>,
    start_vaddr: VirtAddr,
    num_pages: usize,
}

impl<C: CpuId> fmt::Debug for GlobalPage<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalPage")
            .field("start_vaddr", &self.start_vaddr)
            .field("num_pages", &self.num_pages)
            .finish()
    }
}

impl GlobalPage {
    /// One page.
    ///
    /// # Errors
    /// `NoMemory` when the allocator has no free page.
    pub fn alloc() -> AxResult<Self> {
        Self::alloc_contiguous(1, PAGE)
    }

    /// One page that reads zero: a page the zone knows is zero, else one cleared with
    /// zero-core's strategy for this CPU.
    ///
    /// # Errors
    /// `NoMemory` when the allocator has no free page.
    pub fn alloc_zero() -> AxResult<Self> {
        let a = global_allocator();
        let at = a
            .alloc_zeroed_pages(1, PAGE, UsageKind::Global)
            .map_err(|_| AxError::NoMemory)?;
        // SAFETY: `a` allocated the page for `Global` just now and hands it to nobody else.
        Ok(unsafe { Self::from_raw(a, at, 1) })
    }

    /// `num_pages` contiguous pages aligned to `alignment` bytes.
    ///
    /// # Errors
    /// `NoMemory` when the allocator has no such run (or the alignment is not a power of
    /// two).
    pub fn alloc_contiguous(num_pages: usize, alignment: usize) -> AxResult<Self> {
        let a = global_allocator();
        let at = a
            .alloc_pages(num_pages, alignment, UsageKind::Global)
            .map_err(|_| AxError::NoMemory)?;
        // SAFETY: `a` allocated the run for `Global` just now and hands it to nobody else.
        Ok(unsafe { Self::from_raw(a, at, num_pages) })
    }
}

impl<C: CpuId> GlobalPage<C> {
    /// The `num_pages` pages from `start_vaddr`, owned from now on and given back to
    /// `allocator` when dropped (an ArceOS package whose allocator is its own `static`
    /// makes its `GlobalPage` so).
    ///
    /// # Safety
    /// `allocator` handed out the run through its page calls, counted as
    /// [`UsageKind::Global`], and nothing else owns or uses it: this value frees it.
    #[must_use]
    pub unsafe fn from_raw(
        allocator: &'static GlobalAllocator<C>,
        start_vaddr: usize,
        num_pages: usize,
    ) -> Self {
        Self {
            allocator,
            start_vaddr: start_vaddr.into(),
            num_pages,
        }
    }

    /// The first page's virtual address.
    #[must_use]
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
    #[must_use]
    pub fn size(&self) -> usize {
        self.num_pages * PAGE
    }

    /// The first byte.
    #[must_use]
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
    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocator handed this run to this value alone, mapped readable and
        // writable (its contract for the memory it is given); it lives until `drop`.
        unsafe { core::slice::from_raw_parts(self.as_ptr(), self.size()) }
    }

    /// The run's bytes, writable.
    pub fn as_slice_mut(&mut self) -> &mut [u8] {
        let len = self.size();
        // SAFETY: as `as_slice`, and `&mut self` makes this the only reference to them.
        unsafe { core::slice::from_raw_parts_mut(self.as_mut_ptr(), len) }
    }
}

impl<C: CpuId> Drop for GlobalPage<C> {
    fn drop(&mut self) {
        // SAFETY: the run came from `self.allocator`'s page calls (the constructors' and
        // `from_raw`'s contract), is this value's alone, and is given back once, here; nothing
        // reaches it after (every borrow of it ended with this value).
        unsafe {
            self.allocator.dealloc_pages(
                self.start_vaddr.as_usize(),
                self.num_pages,
                UsageKind::Global,
            );
        }
    }
}
