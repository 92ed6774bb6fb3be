//! The benchmark workloads behind `cargo xtask report` and the criterion benches.
//!
//! Each report section is a [`Section`]; [`sections`] is the one registration point.
//! [`report`] turns the tables into Markdown, JSON and SVG; [`measure`] holds the timing and
//! memory helpers every section shares.

pub mod arceos;
pub mod arceos_today;
pub mod arceos_today_guest;
pub mod capture;
pub mod clearing;
pub mod contig_free;
pub mod count;
pub mod fragmentation;
pub mod frame_table;
pub mod guest;
pub mod hypervisor_guest;
pub mod machine;
pub mod measure;
pub mod memsets;
pub mod numa;
pub mod observability;
pub mod prefault;
pub mod report;
pub mod reporting;
pub mod ring0;
pub mod scale;
pub mod smp;
pub mod young;
pub mod zeroed;

pub use report::{Cell, Plot, Section, SectionContext, Table};

/// The workspace README, whose Rust examples run as this crate's doctests (it is not part of
/// a published crate, whose own READMEs are their crate docs).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct WorkspaceReadme;

use buddy_sim::{BuddyError, Order};

/// The value of an allocator call a workload makes with valid arguments (an error is a bug in
/// the workload or the allocator: the report stops).
pub(crate) fn must<T, E: Into<BuddyError>>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("allocator error on a valid workload: {}", e.into()))
}

/// An order a workload names.
pub(crate) fn order(o: u8) -> Order {
    must(Order::new(o))
}

/// Every workload callgrind counts (`report count`), from the sections that own them. Add a
/// section's `COUNTED` here.
#[must_use]
pub fn counted_workloads() -> Vec<count::Workload> {
    let mut all = contig_free::COUNTED.to_vec();
    all.extend(contig_free::PAIR_COUNTED.iter().flat_map(|(_, w)| *w));
    all.extend(contig_free::ONE_FRAME_COUNTED);
    all.extend(contig_free::GROUPS_COUNTED);
    all.extend(clearing::COUNTED);
    all.extend(young::COUNTED);
    all.extend(guest::COUNTED);
    all.extend(zeroed::COUNTED);
    all.extend(arceos::COUNTED);
    all.push(arceos::DROP_IN_COUNTED);
    all.extend(arceos_today::COUNTED);
    all.extend(smp::COUNTED);
    all.extend(observability::COUNTED);
    all
}

/// Every report section, in the order the report prints them. Add a section here.
#[must_use]
pub fn sections() -> Vec<Box<dyn Section>> {
    vec![
        Box::new(machine::Machine),
        Box::new(clearing::Clearing),
        Box::new(prefault::Prefault),
        Box::new(contig_free::ContigFree),
        Box::new(smp::SmpScaling),
        Box::new(scale::Scale),
        Box::new(young::YoungClearing),
        Box::new(guest::GuestAging),
        Box::new(zeroed::ZeroedAllocation),
        Box::new(fragmentation::Fragmentation),
        Box::new(reporting::FreePageReporting),
        Box::new(numa::Numa),
        Box::new(arceos::Arceos),
        Box::new(arceos_today::ArceosToday),
        Box::new(hypervisor_guest::HypervisorGuest),
        Box::new(observability::Observability),
        Box::new(ring0::Ring0),
    ]
}
