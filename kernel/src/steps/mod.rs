//! What every kernel does with the three crates, once, over a [`Platform`]: take frames from
//! buddy-sim, zero them with zero-core, map folios with pte-batch, let the MMU set access and
//! dirty bits, age, flush, refault, run the negative control, share the zone with a second
//! CPU, move movable pages under their mappings, allocate node-local and take a range of a
//! NUMA node offline and back, unmap, free, and check the zone is whole. A platform module
//! holds only boot, MMU and platform code: it reads the memory map and the NUMA nodes, builds
//! the zones (`make_zones`) and the page tables, hands the data
//! region's last-level tables over ([`set_data_table`]), and calls [`Kernel::run`] and
//! [`Kernel::finish`].
//!
//! By concern: `platform` (what the steps need from an architecture), `zone` (the zones,
//! one per node, and their zeroed allocations), `data` (the data region's tables, layout and
//! accesses), `aging` (touching, aging, refaulting, the negative control, the timed passes),
//! `smp` (the second CPU's steps), `mobility` (movable pages moved by compaction and a
//! contiguous allocation under the kernel's mappings) and `numa` (the firmware's node
//! layout, node-local allocation, offline and online). This module holds the shared
//! constants, the exit codes and [`Kernel`], whose steps the others implement.

mod aging;
mod data;
mod guest;
mod mobility;
mod numa;
mod platform;
// The arm64 kernel's: a virtio-balloon on QEMU virt's virtio-mmio (x86_64 has none yet).
#[cfg(target_arch = "aarch64")]
mod reporting;
mod smp;
mod zone;

#[cfg(target_arch = "aarch64")]
pub use data::data_table;
pub use data::{locate, set_data_table};
/// The arm64 hypervisor's guest nobody here wrote ages its tables the same way.
#[cfg(linux_guest)]
pub use guest::age_table;
pub use guest::{GUEST_PAGES, GUEST_RAM, Guest, GuestExit, GuestRam, Touch, working_set_storage};
pub use numa::{NODES, NodeMap};
pub use platform::Platform;
#[cfg(target_arch = "aarch64")]
pub use reporting::reporting_step;
pub use smp::secondary;
/// It checks its RAM reads zero as every zeroed allocation here is checked.
#[cfg(linux_guest)]
pub use zone::check_zero;
pub use zone::{
    BOOT_POOL, Blocks, KernelZone, alloc_zeroed, check_whole, clearer, free_block, make_zones,
    movable_zone, nodes, set_owner, zero_in_background, zone,
};

use data::*;
use smp::*;
use zone::*;

use buddy_sim::{FrameClearer, OffsetMap, Pfn};
use pte_batch::AgingStats;
use pte_batch::mm_types::PageSize;
use zero_core::Policy;

/// Exit codes: the step that failed.
#[derive(Clone, Copy, Debug)]
#[repr(u32)]
pub enum Step {
    /// Building or using the zone.
    Zone = 2,
    /// A frame did not read zero after zero-core cleared it.
    Zeroing = 3,
    /// pte-batch refused a mapping, or a table is missing.
    Mapping = 4,
    /// Aging did not report exactly the touched folios, or lost a dirty bit.
    Aging = 6,
    /// A page touched after the flush was not young again.
    Refault = 7,
    /// Skipping the flush went unnoticed.
    NegativeControl = 8,
    /// The zone is not whole after everything was freed.
    Free = 9,
    /// The second CPU's steps.
    Smp = 10,
    /// An exception the kernel does not handle.
    Exception = 11,
    /// A panic.
    Panic = 12,
    /// Building the page tables.
    PageTables = 13,
    /// Moving movable data: the fill, compaction or the contiguous allocation.
    Mobility = 14,
    /// The NUMA nodes: node-local allocation, or a range of node 1 taken offline and back.
    Numa = 15,
    /// Free page reporting to the platform's device.
    #[cfg(target_arch = "aarch64")]
    Reporting = 16,
}

/// The kernel on platform `P` stopped at `step`: print why and exit with the step's number.
pub fn fail<P: Platform>(step: Step, what: core::fmt::Arguments<'_>) -> ! {
    println!("FAIL {step:?} (exit {}): {what}", step as u32);
    P::exit(step as u32)
}

/// 4 KiB pages everywhere.
pub const PAGE: u64 = PageSize::Size4KiB.bytes() as u64;

/// Last-level tables of the data region (2 MiB each).
pub const DATA_TABLES: usize = 2;

/// The last-level table of the movable region, after the data region's
/// ([`mobility`]: pages compaction and contiguous allocation move).
pub const MOVABLE_TABLE: usize = DATA_TABLES;

/// Last-level tables a platform hands over ([`set_data_table`]): the data region's and the
/// movable region's.
pub const LAST_LEVEL_TABLES: usize = DATA_TABLES + 1;

/// Pages of the data region.
pub const DATA_PAGES: usize = 512 * DATA_TABLES;

/// Virtual base of the data region: the fifth GiB, outside every identity map.
pub const DATA_VA: u64 = 4 << 30;

/// The data region is one order-10 block (4 MiB), split into order-0 pages.
const DATA_ORDER: u8 = 10;

/// The most RAM a zone spans: a node's (the runs give QEMU `-m 128M` a node).
pub const MAX_RAM: u64 = 128 << 20;

/// The most folios the data region is cut into.
const MAX_FOLIOS: usize = 128;

/// CPUs the zone has per-cpu lists for (the `-smp 2` boots start the second).
pub const CPUS: usize = 2;

/// The state the steps share.
pub struct Kernel<P: Platform> {
    /// The zone.
    pub zone: &'static KernelZone,
    clearer: FrameClearer<OffsetMap>,
    /// Frames of the data region (zeroed allocations).
    pub frames: u64,
    data_pfn: u64,
    /// The data region is mapped: from step 4 until [`Kernel::unmap_data`].
    data_mapped: bool,
    layout: Layout,
    /// Flushes of unfolds and unmaps.
    pub tlb: P::Tlb,
    stats: AgingStats,
    aging_flushes: u64,
    /// The second CPU runs.
    pub second_cpu: bool,
    /// `start_second_cpu` was called (it may be called once).
    smp_tried: bool,
}

impl<P: Platform> Kernel<P> {
    /// The kernel's state over `zone`, clearing through the detected policy.
    pub fn new(zone: &'static KernelZone) -> Self {
        let policy = Policy::detect();
        println!(
            "zero-core: policy picks {} for 4 KiB, {} for 4 MiB, {} for 1 GiB",
            policy.choose(4096, zero_core::Locality::Unknown).name(),
            policy.choose(4 << 20, zero_core::Locality::Unknown).name(),
            policy.choose(1 << 30, zero_core::Locality::Unknown).name()
        );
        Self {
            zone,
            clearer: clearer(),
            frames: 0,
            data_pfn: 0,
            data_mapped: false,
            layout: Layout::new(),
            tlb: P::tlb(),
            stats: AgingStats::default(),
            aging_flushes: 0,
            second_cpu: false,
            smp_tried: false,
        }
    }

    /// Steps 4 to 7, the SMP steps, mobility and the nodes: the data region mapped, touched,
    /// aged, refaulted, the negative control, (with a second CPU) concurrent writes and
    /// allocation, movable pages moved by compaction and a contiguous allocation, node-local
    /// allocation and (with two nodes) a range of node 1 offline and back.
    pub fn run(&mut self, platform: &mut P) {
        set_owner(self.zone, *b"data");
        self.map_data();
        let touched = self.touch_some();
        self.age_exactly(&touched);
        self.refault_and_control(&touched);
        set_owner(self.zone, *b"smp ");
        self.second_cpu = self.smp_step(platform);
        smp_alloc_step::<P>(self.second_cpu);
        set_owner(self.zone, *b"mobi");
        self.mobility_step();
        set_owner(self.zone, *b"numa");
        self.numa_step();
    }

    /// Step 8: Gives the data run back and checks the zone is whole (the platform has freed its
    /// tables); prints the summary and ends the run.
    pub fn finish(self, whole: Blocks, tables: u64) -> ! {
        // SAFETY: the data run is this kernel's, unmapped by the platform before this step.
        unsafe {
            self.zone
                .free_contig_range(0, Pfn(self.data_pfn), DATA_PAGES as u64)
        }
        .unwrap_or_else(|e| fail::<P>(Step::Free, format_args!("{e}")));
        check_whole::<P>(self.zone, whole);
        println!(
            "buddy-sim: free_contig_range gave the {DATA_PAGES}-page run back, the page tables their {tables} table pages; zone whole"
        );
        println!(
            "summary: frames {} zeroed, folios {}, young found {}, entry updates {}, flushes {} (+{} unfold/unmap)",
            self.frames,
            self.layout.len,
            self.stats.young_folios,
            self.stats.entry_updates,
            self.aging_flushes,
            P::flushes(&self.tlb),
        );
        println!("PASS");
        P::exit(0)
    }
}
