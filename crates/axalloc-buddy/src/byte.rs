//! The byte allocator under the Rust heap: axallocator's, chosen by feature as ArceOS's
//! axalloc chooses it (`slab`, else `buddy`, else `tlsf`).

cfg_if::cfg_if! {
    if #[cfg(feature = "slab")] {
        /// The byte allocator the heap uses (axallocator's slab allocator).
        pub type DefaultByteAllocator = axallocator::SlabByteAllocator;
        /// The heap's allocator, as ArceOS's boot log names it (`use TLSF allocator.`).
        pub(crate) const NAME: &str = "slab";
    } else if #[cfg(feature = "buddy")] {
        /// The byte allocator the heap uses (axallocator's buddy byte allocator).
        pub type DefaultByteAllocator = axallocator::BuddyByteAllocator;
        /// The heap's allocator, as ArceOS's boot log names it (`use TLSF allocator.`).
        pub(crate) const NAME: &str = "buddy";
    } else if #[cfg(feature = "tlsf")] {
        /// The byte allocator the heap uses (axallocator's TLSF allocator).
        pub type DefaultByteAllocator = axallocator::TlsfByteAllocator;
        /// The heap's allocator, as ArceOS's boot log names it (`use TLSF allocator.`).
        pub(crate) const NAME: &str = "TLSF";
    } else {
        compile_error!("axalloc-buddy needs a byte allocator: feature `tlsf`, `slab` or `buddy`");
    }
}
