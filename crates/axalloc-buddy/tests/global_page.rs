//! `GlobalPage` over the crate's global allocator (one test: the allocator is initialized
//! once per process).

#[path = "support/bytes.rs"]
mod bytes;
use bytes::all_bytes_are;

use axalloc_buddy::{GlobalPage, UsageKind, global_add_memory, global_allocator, global_init};

/// The memory given to the global allocator: reachable from a static, as a kernel's RAM is
/// (Miri's leak check then passes it).
static RAM: std::sync::atomic::AtomicPtr<u8> =
    std::sync::atomic::AtomicPtr::new(core::ptr::null_mut());
/// The memory given to its heap later, alike.
static MORE: std::sync::atomic::AtomicPtr<u8> =
    std::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

#[test]
fn global_pages_own_their_runs() {
    let bytes = if cfg!(miri) { 256 } else { 1024 } * 4096;
    let layout = core::alloc::Layout::from_size_align(bytes, 4096).unwrap();
    // SAFETY: the layout is not empty; the memory is leaked to the allocator for good.
    let ram = unsafe { std::alloc::alloc(layout) };
    assert!(!ram.is_null());
    // Dirty, as a kernel's free memory is: zeroed pages must be cleared.
    // SAFETY: `ram` is `bytes` bytes this test owns.
    unsafe { core::ptr::write_bytes(ram, 0xcc, bytes) };
    RAM.store(ram, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `ram` is this test's, leaked to the allocator for the rest of the process.
    unsafe { global_init(ram as usize, bytes) };
    // The byte allocator's name, as ArceOS's log prints it (slab wins when several are on).
    let heap = if cfg!(feature = "slab") {
        "slab"
    } else if cfg!(feature = "buddy") {
        "buddy"
    } else {
        "TLSF"
    };
    assert_eq!(global_allocator().name(), heap);
    let free = global_allocator().available_pages();
    {
        let zero = GlobalPage::alloc_zero().unwrap();
        assert!(all_bytes_are(zero.as_slice(), 0));
        let mut run = GlobalPage::alloc_contiguous(8, 8 * 4096).unwrap();
        assert_eq!(run.start_vaddr().as_usize() % (8 * 4096), 0);
        assert_eq!(run.size(), 8 * 4096);
        run.fill(7);
        assert!(all_bytes_are(run.as_slice(), 7));
        run.zero();
        assert!(all_bytes_are(run.as_slice(), 0));
        let one = GlobalPage::alloc().unwrap();
        assert_eq!(
            one.start_paddr(|v| (v.as_usize() - 0x1000).into())
                .as_usize(),
            one.start_vaddr().as_usize() - 0x1000
        );
        assert_eq!(
            global_allocator().usages().get(UsageKind::Global),
            10 * 4096
        );
    }
    assert_eq!(global_allocator().available_pages(), free);
    assert_eq!(global_allocator().usages().get(UsageKind::Global), 0);
    // Later regions go to the heap's byte allocator, as ArceOS's axalloc gives them.
    let more = Box::leak(vec![0u8; 64 * 1024].into_boxed_slice());
    MORE.store(more.as_mut_ptr(), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `more` is leaked to the allocator for the rest of the process.
    unsafe { global_add_memory(more.as_mut_ptr() as usize, more.len()) }.unwrap();
    // The same region again, or one overlapping the first, is refused: the heap would hand
    // out the same bytes twice.
    for (at, len) in [
        (more.as_mut_ptr() as usize, more.len()),
        (more.as_mut_ptr() as usize + 4096, 4096),
        (ram as usize + 8 * 4096, 16 * 4096),
    ] {
        // SAFETY: refused before anything is written (memory the test gave away already).
        let r = unsafe { global_add_memory(at, len) };
        assert!(
            matches!(
                r,
                Err(axalloc_buddy::axallocator::AllocError::MemoryOverlap)
            ),
            "{r:?}"
        );
    }
    assert!(global_allocator().available_bytes() >= 64 * 1024);
}
