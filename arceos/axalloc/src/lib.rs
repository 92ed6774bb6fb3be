//! ArceOS's `axalloc` interface, implemented by `axalloc-buddy` (buddy-sim's zone under
//! ArceOS's global allocator): patched into an ArceOS build in place of ArceOS's own.
#![no_std]

#[cfg(feature = "level-1")]
compile_error!("axalloc-buddy has no `level-1` mode (a heap without a page allocator)");
#[cfg(feature = "hv")]
compile_error!("axalloc-buddy does not provide AxVisor's allocator (`hv`, `AddrTranslator`)");
#[cfg(feature = "tracking")]
compile_error!("axalloc-buddy does not provide allocation tracking (`tracking`)");

pub use axalloc_buddy::*;
