//! The byte allocator under the Rust heap: axallocator's, chosen by feature as ArceOS's
//! axalloc chooses it (`slab`, else `buddy`, else `tlsf`).

cfg_if::cfg_if! {
    if #[cfg(feature = "slab")] {
        /// The byte allocator the heap uses (axallocator's slab allocator).
        pub type DefaultByteAllocator = axallocator::SlabByteAllocator;
        /// The allocator's name, as the boot log prints it.
        pub(crate) const NAME: &str = "slab + buddy-sim";
    } else if #[cfg(feature = "buddy")] {
        /// The byte allocator the heap uses (axallocator's buddy byte allocator).
        pub type DefaultByteAllocator = axallocator::BuddyByteAllocator;
        /// The allocator's name, as the boot log prints it.
        pub(crate) const NAME: &str = "buddy + buddy-sim";
    } else if #[cfg(feature = "tlsf")] {
        /// The byte allocator the heap uses (axallocator's TLSF allocator).
        pub type DefaultByteAllocator = axallocator::TlsfByteAllocator;
        /// The allocator's name, as the boot log prints it.
        pub(crate) const NAME: &str = "TLSF + buddy-sim";
    } else {
        compile_error!("axalloc-buddy needs a byte allocator: feature `tlsf`, `slab` or `buddy`");
    }
}
