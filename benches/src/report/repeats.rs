//! Goal verdicts over the runs of `--repeat`: on a shared host a per-round ratio moves
//! between two runs of the same code by more than one run's 95% interval, so a verdict one
//! run calls can be the host's. Run with `--repeat N`, the report keeps every run's tables
//! and marks each verdict the runs did not agree on. The reports of one program linked in
//! several layouts (`cargo xtask report --layouts N`, merged by `report layouts`) are marked
//! the same way, one run per layout: a verdict one layout calls can be its layout's.

use super::{Cell, Table};
use crate::measure::Verdict;

/// A section's name and tables, as one run made them.
pub type SectionTables = (String, Vec<Table>);

/// How a verdict the runs did not agree on begins: the runs' verdicts follow, in order.
pub const VARIES: &str = "varies between runs";

/// Whether `text` is a goal's verdict.
fn is_verdict(text: &str) -> bool {
    Verdict::from_text(text).is_some()
}

/// A row's name: its first cell (a goal's row is all text: its figure, printed as text,
/// changes between runs).
fn row_name(row: &[Cell]) -> Option<&str> {
    row.first().map(Cell::as_text)
}

/// The verdict in column `col` of `table`'s row that matches row `r` named `name` of the
/// last run: the row at the same place if it has that name (sections make their rows in
/// the same order every run, several rows may share a first cell), else the first so named.
fn verdict_in<'t>(table: &'t Table, r: usize, name: Option<&str>, col: usize) -> Option<&'t str> {
    let row = table
        .rows
        .get(r)
        .filter(|row| row_name(row) == name)
        .or_else(|| table.rows.iter().find(|row| row_name(row) == name))?;
    match row.get(col)? {
        Cell::Text(s) if is_verdict(s) => Some(s),
        _ => None,
    }
}

/// Marks each verdict of `last` (the last run's sections) that an earlier run (`earlier`,
/// in run order) gave otherwise, or did not give: its cell becomes
/// "varies between runs: met, not met" (each run's verdict in order, "-" where a run had
/// none), and its table gets a note saying how verdicts over the runs read (runs of
/// `--repeat`, or with `layouts` one run per layout). Returns how many verdicts varied.
/// With no earlier run nothing changes.
pub fn mark_varying_verdicts(
    last: &mut [SectionTables],
    earlier: &[Vec<SectionTables>],
    layouts: bool,
) -> usize {
    if earlier.is_empty() {
        return 0;
    }
    let runs = earlier.len() + 1;
    let mut varied = 0;
    for (section, tables) in last.iter_mut() {
        for table in tables.iter_mut() {
            // The same table in each earlier run: the same section, the same heading.
            let before: Vec<Option<&Table>> = earlier
                .iter()
                .map(|run| {
                    run.iter()
                        .find(|(name, _)| name == section)
                        .and_then(|(_, ts)| ts.iter().find(|t| t.title == table.title))
                })
                .collect();
            let mut has_verdicts = false;
            let mut marks = Vec::new();
            for (r, row) in table.rows.iter().enumerate() {
                let name = row_name(row);
                // Past the name: a row's verdicts.
                for (col, cell) in row.iter().enumerate().skip(1) {
                    let Cell::Text(now) = cell else { continue };
                    if !is_verdict(now) {
                        continue;
                    }
                    has_verdicts = true;
                    let mut each: Vec<&str> = before
                        .iter()
                        .map(|t| t.and_then(|t| verdict_in(t, r, name, col)).unwrap_or("-"))
                        .collect();
                    each.push(now);
                    if each.iter().any(|v| v != now) {
                        marks.push((r, col, format!("{VARIES}: {}", each.join(", "))));
                    }
                }
            }
            varied += marks.len();
            for (r, col, text) in marks {
                table.rows[r][col] = Cell::text(text);
            }
            if has_verdicts {
                let of = if layouts {
                    format!("`cargo xtask report --layouts {runs}` (run k: layout k)")
                } else {
                    format!("`--repeat {runs}`")
                };
                table.note(format!(
                    "Verdicts over the {runs} runs of {of}: a verdict is the runs' own where \
                     all of them gave it; \"{VARIES}\" lists each run's verdict in order \
                     (\"-\": the run had no such row). The figures are the last run's."
                ));
            }
        }
    }
    varied
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::Estimate;
    use crate::report::ratio_text;

    /// A goals table of two rows, each a figure (its median `median`) and its verdict.
    fn goals(verdicts: [Verdict; 2], median: f64) -> Vec<SectionTables> {
        let mut t = Table::new("goals", "Goals", &["goal", "figure", "target", "verdict"]);
        for (name, v) in ["order 9", "one frame"].into_iter().zip(verdicts) {
            let e = Estimate {
                median,
                lo: median - 0.1,
                hi: median + 0.1,
                n: 30,
            };
            // The first row as most goal rows are, all text; the second with its figure.
            let figure = if name == "order 9" {
                Cell::text(format!("{} on the worst row", ratio_text(e)))
            } else {
                Cell::ratio_ci(e)
            };
            t.row(vec![
                Cell::text(name),
                figure,
                Cell::text(">= 1.25x"),
                Cell::verdict(v),
            ]);
        }
        vec![("contiguous free".into(), vec![t])]
    }

    fn verdicts(sections: &[SectionTables]) -> Vec<String> {
        sections[0].1[0]
            .rows
            .iter()
            .map(|r| r[3].as_text().to_owned())
            .collect()
    }

    #[test]
    fn a_verdict_the_runs_disagree_on_lists_each_run() {
        // Each run's figures differ (as on any host): rows are matched by name and place.
        let earlier = vec![
            goals([Verdict::NotMet, Verdict::Met], 1.0),
            goals([Verdict::Inconclusive, Verdict::Met], 1.2),
        ];
        let mut last = goals([Verdict::NotMet, Verdict::Met], 0.9);
        assert_eq!(mark_varying_verdicts(&mut last, &earlier, false), 1);
        assert_eq!(
            verdicts(&last),
            ["varies between runs: not met, inconclusive, not met", "met"]
        );
        assert!(last[0].1[0].notes[0].contains("the 3 runs of `--repeat 3`"));
        // The target column's text is no verdict, and a single run changes nothing.
        assert_eq!(last[0].1[0].rows[0][2].as_text(), ">= 1.25x");
        let mut one = goals([Verdict::NotMet, Verdict::Met], 1.0);
        assert_eq!(mark_varying_verdicts(&mut one, &[], false), 0);
        assert!(one[0].1[0].notes.is_empty());
    }

    #[test]
    fn a_row_an_earlier_run_lacks_varies() {
        let mut earlier = goals([Verdict::Met, Verdict::Met], 1.0);
        earlier[0].1[0].rows.pop();
        let mut last = goals([Verdict::Met, Verdict::Met], 1.0);
        assert_eq!(mark_varying_verdicts(&mut last, &[earlier], true), 1);
        assert!(last[0].1[0].notes[0].contains("runs of `cargo xtask report --layouts 2`"));
        assert_eq!(verdicts(&last), ["met", "varies between runs: -, met"]);
    }
}
