//! `report --compare OLD.json`: every figure of this report against the same figure of an
//! earlier one, listing those that moved beyond both 95% intervals (and exact counts that
//! changed), with the direction.
//!
//! A figure is named by its section, its table, its row's leading text cells and its column:
//! the same name in both reports is the same measurement. Both reports are read as JSON
//! (the earlier one may come from an older commit whose tables had other fields).

use super::{Cell, Report, Table};
use serde_json::Value;

/// An exact figure (one without an interval: a count, a size) is listed when it changed by
/// this much or more, in percent.
pub const EXACT_CHANGE_PCT: f64 = 0.5;

/// A figure that moved.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    /// Section, table title, the row's text cells, the column.
    pub name: [String; 4],
    /// The earlier figure: median and interval (equal ends for an exact figure).
    pub before: Figure,
    /// This report's.
    pub after: Figure,
}

/// One figure: its value and 95% interval (`lo == hi` for an exact one), as printed.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The median (or the exact value).
    pub value: f64,
    /// The interval's ends.
    pub lo: f64,
    /// The interval's ends.
    pub hi: f64,
    /// How the report printed it.
    pub text: String,
}

impl Figure {
    fn exact(&self) -> bool {
        self.lo == self.hi
    }
}

impl Move {
    /// The change of the median, in percent of the earlier one.
    #[must_use]
    pub fn change_pct(&self) -> f64 {
        (self.after.value / self.before.value - 1.0) * 100.0
    }

    /// "higher" or "lower".
    #[must_use]
    pub fn direction(&self) -> &'static str {
        if self.after.value > self.before.value {
            "higher"
        } else {
            "lower"
        }
    }
}

/// What a comparison found.
#[derive(Debug, Default)]
pub struct Comparison {
    /// The figures that moved, in this report's order.
    pub moves: Vec<Move>,
    /// Figures found in both reports.
    pub compared: usize,
    /// Figures of this report the earlier one lacks.
    pub only_here: usize,
}

/// Every figure of a report as JSON: (name, figure), in order.
fn figures(report: &Value) -> Vec<([String; 4], Figure)> {
    let mut out = Vec::new();
    let sections = report["sections"].as_array().map_or(&[][..], Vec::as_slice);
    for section in sections {
        let name = section[0].as_str().unwrap_or_default();
        for table in section[1].as_array().into_iter().flatten() {
            let title = table["title"].as_str().unwrap_or_default();
            let columns: Vec<&str> = table["columns"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c.as_str().unwrap_or_default())
                .collect();
            for row in table["rows"].as_array().into_iter().flatten() {
                let cells = row.as_array().map_or(&[][..], Vec::as_slice);
                // The row's name: its text cells before the first figure (later text cells,
                // such as a verdict, depend on the figures).
                let key: Vec<&str> = cells.iter().map_while(Value::as_str).collect();
                let leading = key.len();
                let key = key.join(" / ");
                for (i, (cell, column)) in cells.iter().zip(&columns).enumerate() {
                    if let Some(figure) = figure(cell) {
                        out.push(([name, title, &key, column].map(str::to_owned), figure));
                        continue;
                    }
                    // Past the row's name, a text cell that lists counts ("436 / 672 (peer
                    // ÷ ours 1.54x)"): each an exact figure of its own.
                    let listed = cell.as_str().filter(|_| i >= leading).and_then(counts);
                    for (k, figure) in listed.into_iter().flatten().enumerate() {
                        let column = format!("{column} (figure {})", k + 1);
                        out.push(([name, title, &key, &column].map(str::to_owned), figure));
                    }
                }
            }
        }
    }
    out
}

/// A numeric cell's figure (a text cell is part of its row's name).
fn figure(cell: &Value) -> Option<Figure> {
    let value = cell["value"].as_f64().filter(|v| v.is_finite())?;
    let text = cell["text"].as_str().unwrap_or_default().to_owned();
    let (lo, hi) = match cell["ci"].as_array().map(Vec::as_slice) {
        Some([lo, hi]) => (lo.as_f64()?, hi.as_f64()?),
        _ => (value, value),
    };
    Some(Figure {
        value,
        lo,
        hi,
        text,
    })
}

/// The exact figures a text cell lists as numbers separated by " / ", before any
/// parenthesis ("129788 / 6312", "2.9 / 513.0 / 1040.4 / 512", "436 / 672 (peer ÷ ours
/// 1.54x)"); `None` for any other text (a name, a verdict, "-").
fn counts(text: &str) -> Option<Vec<Figure>> {
    let listed = text.split(" (").next().unwrap_or_default();
    let parts: Vec<&str> = listed.split(" / ").map(str::trim).collect();
    if parts.len() < 2 {
        return None;
    }
    parts
        .into_iter()
        .map(|part| {
            let value = part.parse::<f64>().ok().filter(|v| v.is_finite())?;
            Some(Figure {
                value,
                lo: value,
                hi: value,
                text: part.to_owned(),
            })
        })
        .collect()
}

/// Whether `after` moved from `before`: beyond both intervals when either has one (the
/// intervals do not overlap), else an exact change of at least [`EXACT_CHANGE_PCT`].
fn moved(before: &Figure, after: &Figure) -> bool {
    if before.exact() && after.exact() {
        let base = before.value.abs().max(f64::MIN_POSITIVE);
        return (after.value - before.value).abs() / base * 100.0 >= EXACT_CHANGE_PCT;
    }
    after.lo > before.hi || after.hi < before.lo
}

/// Compares the report `now` with `earlier` (both as JSON).
#[must_use]
pub fn compare(earlier: &Value, now: &Value) -> Comparison {
    let before = figures(earlier);
    let mut c = Comparison::default();
    for (name, after) in figures(now) {
        let Some((_, was)) = before.iter().find(|(n, _)| *n == name) else {
            c.only_here += 1;
            continue;
        };
        c.compared += 1;
        if moved(was, &after) {
            c.moves.push(Move {
                name,
                before: was.clone(),
                after,
            });
        }
    }
    c
}

/// The comparison of `report` with the earlier report `earlier` as a table.
///
/// # Errors
/// The serializer's error, as text.
pub fn table(report: &Report, earlier: &Value) -> Result<Table, String> {
    let now = serde_json::to_value(report).map_err(|e| e.to_string())?;
    Ok(table_between(earlier, &now))
}

/// The comparison of the report `now` with the earlier report `earlier`, both as JSON (two
/// `report.json` files already written: `report compare OLD NEW`), as a table.
#[must_use]
pub fn table_between(earlier: &Value, now: &Value) -> Table {
    let c = compare(earlier, now);
    let header = |field: &str| earlier["header"][field].as_str().unwrap_or("?").to_owned();
    let now_cpu = now["header"]["cpu"].as_str().unwrap_or("?");
    let mut t = Table::new(
        "comparison",
        &format!(
            "Figures that moved against the report of {} ({}): beyond both 95% intervals, or \
             exact figures changed by {EXACT_CHANGE_PCT}% or more",
            header("commit"),
            header("date")
        ),
        &[
            "section",
            "table",
            "row",
            "column",
            "before",
            "now",
            "change",
            "direction",
        ],
    );
    for m in &c.moves {
        let [section, title, row, column] = m.name.clone();
        t.row(vec![
            Cell::text(section),
            Cell::text(title),
            Cell::text(row),
            Cell::text(column),
            Cell::text(&m.before.text),
            Cell::text(&m.after.text),
            Cell::num(m.change_pct(), 1, "%"),
            Cell::text(m.direction()),
        ]);
    }
    t.note(format!(
        "{} figures compared, {} moved; {} figures of this report are not in the earlier one \
         (new rows, or renamed). Earlier CPU: {}; this report's: {}.{}",
        c.compared,
        c.moves.len(),
        c.only_here,
        header("cpu"),
        now_cpu,
        if header("cpu") == now_cpu {
            ""
        } else {
            " The CPUs differ: timed figures are not comparable, exact counts are."
        }
    ));
    t.note(
        "Higher or lower says which way the median went, not whether that is better: a time \
         per call is better lower, a speed-up ratio higher. Intervals that do not overlap can \
         still come from the host's load changing between the two runs; exact instruction \
         counts cannot.",
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(cells: Value) -> Value {
        json!({
            "header": {"commit": "abc", "date": "d", "cpu": "c"},
            "sections": [["s", [{
                "title": "t",
                "columns": ["workload", "ns", "count"],
                "rows": [cells],
            }]]],
        })
    }

    fn cells(ns: [f64; 3], count: f64) -> Value {
        json!(["pages", {"value": ns[0], "text": "x", "ci": [ns[1], ns[2]]},
               {"value": count, "text": "y"}])
    }

    #[test]
    fn moves_are_figures_beyond_both_intervals_or_exact_changes() {
        let before = report(cells([10.0, 9.0, 11.0], 100.0));
        // Overlapping intervals, an exact count within the threshold: nothing moved.
        let same = compare(&before, &report(cells([10.8, 10.5, 12.0], 100.4)));
        assert_eq!((same.compared, same.moves.len()), (2, 0));
        // Disjoint intervals and a changed count: both listed, with their direction.
        let moved = compare(&before, &report(cells([12.0, 11.5, 12.5], 90.0)));
        let names: Vec<_> = moved.moves.iter().map(|m| m.name[3].as_str()).collect();
        assert_eq!(names, ["ns", "count"]);
        assert_eq!(moved.moves[0].direction(), "higher");
        assert_eq!(moved.moves[1].direction(), "lower");
        assert!((moved.moves[1].change_pct() + 10.0).abs() < 1e-9);
        // Counts listed in a text cell are exact figures each; other text is not.
        let listed = |text: &str| {
            report(json!(["pages", {"value": 10.0, "text": "x", "ci": [9.0, 11.0]}, text]))
        };
        let counted = compare(
            &listed("436 / 672 (peer ÷ ours 1.54x)"),
            &listed("456 / 672 (peer ÷ ours 1.47x)"),
        );
        assert_eq!(counted.compared, 3);
        let names: Vec<_> = counted.moves.iter().map(|m| m.name[3].as_str()).collect();
        assert_eq!(names, ["count (figure 1)"]);
        assert_eq!(counted.moves[0].after.text, "456");
        for text in ["met", "-", "not counted: no valgrind", "1 / x", "3 / 4x"] {
            assert_eq!(counts(text), None, "{text}");
        }
        // A row the earlier report lacks is counted, not compared.
        let other = json!(["other", {"value": 1.0, "text": "z"}, "n/a"]);
        let new = compare(&before, &report(other));
        assert_eq!((new.compared, new.only_here), (0, 1));
    }
}
