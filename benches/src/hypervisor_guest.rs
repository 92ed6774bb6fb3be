//! The "hypervisor guest" section: the arm64 kernel's EL2 hypervisor running today's ArceOS
//! app as its guest (the `hypervisor-guest` test stage's boot), booted by `cargo xtask
//! report` under `qemu-system-aarch64 -icount shift=0` (the guest clock counts one
//! nanosecond per instruction, the hypervisor's own included) on `-cpu neoverse-n1`, whose
//! clears are DC ZVA loops. The boots' `linux guest figures:` lines are left in the file
//! named by [`LOG_ENV`] (first line `UNAVAILABLE: why` if there are none).
//!
//! Rows: setting up the guest's 96 MiB from the zones (zeroed 2 MiB blocks, known zero where
//! background zeroing left them so) against a plain allocation of each block cleared by
//! zero-core, what an allocator without a known-zero pool does; the clears that saved; one
//! aging pass of pte-batch over the guest's stage 2.

use crate::measure::Estimate;
use crate::{Cell, Section, SectionContext, Table};

/// The environment variable naming the captured boots' figures.
pub const LOG_ENV: &str = "ZC_HYPERVISOR_GUEST_LOG";

/// One boot's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Boot {
    blocks: f64,
    known_zero: f64,
    setup: f64,
    plain_setup: f64,
    aging: f64,
    pages: f64,
}

/// The boots of a captured log, or why there are none.
fn parse(log: &str) -> Result<Vec<Boot>, String> {
    let log = crate::capture::available(log)?;
    let boots: Vec<Boot> = log
        .lines()
        .filter_map(|l| l.strip_prefix("linux guest figures: "))
        .filter_map(|l| {
            let field =
                |key: &str| crate::capture::field(l, key).and_then(|v| v.parse::<f64>().ok());
            Some(Boot {
                blocks: field("blocks")?,
                known_zero: field("known_zero")?,
                setup: field("setup_ns")?,
                plain_setup: field("plain_setup_ns")?,
                aging: field("aging_ns")?,
                pages: field("pages")?,
            })
        })
        .collect();
    if boots.is_empty() {
        return Err("the log holds no boot's figures".into());
    }
    Ok(boots)
}

fn table(ctx: &SectionContext, boots: &Result<Vec<Boot>, String>) -> Table {
    let mut t = Table::new(
        "hypervisor-guest",
        "Today's ArceOS app as the guest of the arm64 kernel's EL2 hypervisor, QEMU -icount shift=0 -cpu neoverse-n1: guest instructions (median [min, max] over boots)",
        &[
            "figure",
            "buddy-sim",
            "plain blocks, each cleared",
            "plain ÷ buddy-sim",
        ],
    );
    match boots {
        Ok(boots) => {
            let of = |f: fn(&Boot) -> f64| Estimate::of(boots.iter().map(f));
            let (setup, plain) = (of(|b| b.setup), of(|b| b.plain_setup));
            let ratio = of(|b| b.plain_setup / b.setup);
            ctx.headline(
                "hypervisor guest: guest RAM set-up, plain blocks cleared ÷ zoned zeroed blocks (instructions)",
                ratio,
            );
            let (blocks, known) = (of(|b| b.blocks), of(|b| b.known_zero));
            t.row(vec![
                Cell::text(format!(
                    "guest RAM set-up: {:.0} blocks of 2 MiB (instructions)",
                    blocks.median
                )),
                Cell::estimate(setup, 0, ""),
                Cell::estimate(plain, 0, ""),
                Cell::estimate(ratio, 2, "x"),
            ]);
            t.row(vec![
                Cell::text("blocks known zero: clears saved"),
                Cell::estimate(known, 0, ""),
                Cell::num(0.0, 0, ""),
                Cell::text("-"),
            ]);
            let aging = of(|b| b.aging);
            let per_page = of(|b| b.aging / b.pages.max(1.0));
            t.row(vec![
                Cell::text(format!(
                    "one aging pass over {:.0} pages (instructions)",
                    of(|b| b.pages).median
                )),
                Cell::estimate(aging, 0, ""),
                Cell::text("-"),
                Cell::text("-"),
            ]);
            t.row(vec![
                Cell::text("the same per page"),
                Cell::estimate(per_page, 1, ""),
                Cell::text("-"),
                Cell::text("-"),
            ]);
        }
        Err(why) => t.note(format!("Not measured: {why}.")),
    }
    t.note(
        "The hypervisor takes the guest's 96 MiB as 2 MiB zeroed blocks from two zones (the \
         movable-only zone's first, then node 0's, where the second CPU zeroed free memory in \
         the background before the guest started: those blocks are known zero and need no \
         clear); the plain column allocates the same number of blocks from node 0's zone and \
         clears each with zero-core, what an allocator without a known-zero pool does, and \
         frees them. Both are timed on the guest clock, which under -icount shift=0 counts \
         instructions: the figures are the same on every host and blind to memory bandwidth. \
         On neoverse-n1 a clear is a DC ZVA loop (one DC ZVA per 64 bytes and its loop); on \
         a CPU with FEAT_MOPS it would count three instructions whatever its size, so the \
         report boots that CPU rather than -cpu max. The aging pass is pte-batch's age_batches (KVM's clear_flush_young) over every \
         level-3 table of the guest's RAM, 4 KiB pages without the contiguous hint, into a \
         WorkingSet, at the guest's own calls, with the invalidations of the pages found young.",
    );
    t
}

/// The section.
pub struct HypervisorGuest;

impl Section for HypervisorGuest {
    fn name(&self) -> &'static str {
        "hypervisor guest"
    }

    fn planned_steps(&self, _quick: bool) -> u64 {
        1
    }

    fn run(&self, ctx: &SectionContext) -> Vec<Table> {
        ctx.step("hypervisor guest: the captured boots");
        vec![table(
            ctx,
            &crate::capture::read(LOG_ENV).and_then(|l| parse(&l)),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_parse_and_an_unavailable_log_says_why() {
        let log = "linux guest figures: blocks=48 known_zero=40 setup_ns=1620976 plain_setup_ns=9463120 aging_ns=4473978 pages=24576\n";
        let boots = parse(log).unwrap();
        assert_eq!(boots.len(), 1);
        assert_eq!(boots[0].known_zero, 40.0);
        assert_eq!(boots[0].plain_setup, 9_463_120.0);
        assert_eq!(
            parse("UNAVAILABLE: no QEMU\n").unwrap_err(),
            "no QEMU".to_string()
        );
        assert!(parse("nothing\n").is_err());
    }
}
