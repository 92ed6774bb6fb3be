//! The benchmark workloads behind `cargo xtask report` and the criterion benches.
//!
//! Each report section is a [`Section`]; [`sections`] is the one registration point.
//! [`report`] turns the tables into Markdown, JSON and SVG; [`measure`] holds the timing and
//! memory helpers every section shares.

pub mod clearing;
pub mod contig_free;
pub mod count;
pub mod machine;
pub mod measure;
pub mod prefault;
pub mod report;
pub mod ring0;
pub mod smp;
pub mod young;
pub mod zeroed;

pub use report::{Cell, Plot, Section, SectionContext, Table};

/// Every report section, in the order the report prints them. Add a section here.
#[must_use]
pub fn sections() -> Vec<Box<dyn Section>> {
    vec![
        Box::new(machine::Machine),
        Box::new(clearing::Clearing),
        Box::new(prefault::Prefault),
        Box::new(contig_free::ContigFree),
        Box::new(smp::SmpScaling),
        Box::new(young::YoungClearing),
        Box::new(zeroed::ZeroedAllocation),
        Box::new(ring0::Ring0),
    ]
}
