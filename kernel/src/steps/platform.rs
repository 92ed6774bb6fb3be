//! What the steps need from an architecture and its machine: [`Platform`].

use pte_batch::{PteFormat, Stage1, TlbFlush};

/// What the shared steps need from an architecture and its machine: the MMU's entry format,
/// the TLB flush, barriers, the second CPU, a clock and the exit (the console is the crate's
/// `println!`; each platform builds its own page tables and hands the data region's
/// last-level tables over with [`set_data_table`](super::set_data_table)).
pub trait Platform {
    /// The MMU's last-level entry format (the kernel's own tables: stage 1).
    type Format: PteFormat<Stage = Stage1>;
    /// The format's value (its granule).
    const FORMAT: Self::Format;
    /// Memory attributes of a data page, for `Prot::attrs` (normal write-back memory).
    const DATA_ATTRS: u64;
    /// Whether the mobility step takes its 2 MiB block frozen (`alloc_contig_frozen_pages`,
    /// given back by `free_contig_frozen_range`) rather than with a reference per page.
    const CONTIG_FROZEN: bool;
    /// Consumes flush tokens with this CPU's TLB invalidation.
    type Tlb: TlbFlush;

    /// A flush consumer, counting from zero.
    fn tlb() -> Self::Tlb;
    /// Range invalidations `tlb` performed.
    fn flushes(tlb: &Self::Tlb) -> u64;
    /// Waits until the MMU's access and dirty updates of earlier accesses are visible.
    fn sync();
    /// Makes new table entries visible to the table walker.
    fn publish_tables();
    /// Invalidates every cached translation.
    fn flush_all();
    /// `Err` with the reason where a skipped TLB flush cannot be observed (a hypervisor that
    /// virtualizes the MMU with shadow tables re-reads the guest's entries itself), so the
    /// negative control reports instead of failing.
    ///
    /// # Errors
    /// Why a skipped flush is invisible on this machine.
    fn skipped_flush_observable() -> Result<(), &'static str>;
    /// Starts the second CPU, which calls [`secondary`](super::secondary); `Err` says why there is none.
    ///
    /// # Errors
    /// Why the second CPU does not run (not present, or the firmware refused).
    ///
    /// # Safety
    /// Called once, on the boot CPU running on the kernel's map (which the second CPU starts
    /// on), with the data region mapped.
    unsafe fn start_second_cpu(&mut self) -> Result<(), &'static str>;
    /// Ends the run with `code` (0: success, else the failed step).
    fn exit(code: u32) -> !;
    /// Nanoseconds on a monotonic clock (arm64's generic timer, x86's TSC), for the timings
    /// the kernels print; never asserted on.
    fn now_ns() -> u64;
}
