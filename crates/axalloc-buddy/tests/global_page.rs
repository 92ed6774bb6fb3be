//! `GlobalPage` over the crate's global allocator (one test: the allocator is initialized
//! once per process).

use axalloc_buddy::{GlobalPage, UsageKind, global_add_memory, global_allocator, global_init};

#[test]
fn global_pages_own_their_runs() {
    #[repr(C, align(4096))]
    struct Page([u8; 4096]);
    let ram = Box::leak(
        (0..1024)
            .map(|_| Page([0xcc; 4096]))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    global_init(ram.as_mut_ptr() as usize, 1024 * 4096);
    assert_eq!(global_allocator().name(), "TLSF + buddy-sim");
    let free = global_allocator().available_pages();
    {
        let zero = GlobalPage::alloc_zero().unwrap();
        assert!(zero.as_slice().iter().all(|&b| b == 0));
        let mut run = GlobalPage::alloc_contiguous(8, 8 * 4096).unwrap();
        assert_eq!(run.start_vaddr().as_usize() % (8 * 4096), 0);
        assert_eq!(run.size(), 8 * 4096);
        run.fill(7);
        assert!(run.as_slice().iter().all(|&b| b == 7));
        run.zero();
        assert!(run.as_slice().iter().all(|&b| b == 0));
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
    global_add_memory(more.as_mut_ptr() as usize, more.len()).unwrap();
    assert!(global_allocator().available_bytes() >= 64 * 1024);
}
