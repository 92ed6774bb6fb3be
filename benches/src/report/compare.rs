//! `report --compare OLD.json`: every figure of this report against the same figure of an
//! earlier one, listing those that moved beyond both 95% intervals (and figures without an
//! interval that changed), with the direction.
//!
//! A shared host's speed changes between two runs (other tenants, frequency), and then every
//! timed figure of a table moves together. So each moved figure says what kind it is, and a
//! timed one also how far it moved beyond its table's median change:
//! - a figure without an interval is a count (callgrind, `-icount`), which moves only when
//!   the code does, or a single measurement (a worst case, a best of several);
//! - a per-round ratio (the `x` figures: two paths timed side by side in each round) is
//!   immune to the host's speed as a whole;
//! - a timed figure that moved with its table's median moved with the host; one that moved
//!   5% or more beyond it moved against the rest of its table, as a regression does.
//!
//! The summary table counts, table by table, the notable moves ([`Move::notable`]).
//!
//! A figure is named by its section, its table, its row's leading text cells and its column:
//! the same name in both reports is the same measurement. Both reports are read as JSON
//! (the earlier one may come from an older commit whose tables had other fields).

use super::{Cell, Table};
use crate::measure::Estimate;
use serde_json::Value;

/// A figure without an interval (a count, a worst case) is listed when it changed by
/// this much or more, in percent.
pub const SINGLE_CHANGE_PCT: f64 = 0.5;

/// A figure that moved.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    /// Section, table title, the row's text cells, the column.
    pub name: [String; 4],
    /// The earlier figure: median and interval (equal ends for a figure without one).
    pub before: Figure,
    /// This report's.
    pub after: Figure,
    /// For a timed figure, the median of `after / before` over its table's timed figures
    /// found in both reports (at least [`TABLE_SHIFT_MIN_FIGURES`]): how far the table moved
    /// as a whole.
    pub table_shift: Option<f64>,
    /// The same figure's move in each earlier pair of runs of a comparison over several
    /// (`--repeat` with `--alternate-with`), in run order; empty for one pair.
    pub earlier_runs: Vec<Move>,
}

/// One figure: its value and 95% interval (`lo == hi` for one without), as printed.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The median (or the single value).
    pub value: f64,
    /// The interval's ends.
    pub lo: f64,
    /// The interval's ends.
    pub hi: f64,
    /// How the report printed it.
    pub text: String,
}

impl Figure {
    fn single(&self) -> bool {
        self.lo == self.hi
    }

    /// One step of the last digit the report printed the figure with: 0.01 for "0.06",
    /// 1 for "609" or "25 ±0%" (0 if the text starts with no number).
    #[must_use]
    pub fn printed_step(&self) -> f64 {
        let number: String = self
            .text
            .trim_start_matches('-')
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        match number.split_once('.') {
            _ if number.is_empty() => 0.0,
            Some((_, decimals)) => 10f64.powi(-(decimals.len() as i32)),
            None => 1.0,
        }
    }

    /// What kind of figure this is, from its interval and how the report printed it.
    #[must_use]
    pub fn kind(&self) -> Kind {
        if self.single() {
            Kind::Single
        } else if is_ratio(&self.text) {
            Kind::Ratio
        } else {
            Kind::Timed
        }
    }
}

/// What kind of figure a report prints, which says what can move it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No interval: a count (callgrind, `-icount`), which only a change of the code or the
    /// workload moves, or a single measurement the report gives no interval for (a worst
    /// case, the best of several).
    Single,
    /// A median of per-round ratios, printed `1.47x [1.46, 1.47]`: both sides timed in each
    /// round, so a change of the host's speed as a whole cancels.
    Ratio,
    /// Any other measured median (time, throughput, bandwidth): it moves with the host.
    Timed,
}

impl Kind {
    /// The kind as the comparison prints it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Single => "no interval",
            Self::Ratio => "per-round ratio",
            Self::Timed => "timed",
        }
    }
}

/// Whether a figure's printed text is a ratio: a number followed by `x` ("1.47x [1.46,
/// 1.47]", "0.01x").
fn is_ratio(text: &str) -> bool {
    let number = text.trim_start().trim_start_matches(['-', '+']);
    let digits = number
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(number.len());
    digits > 0 && number[digits..].starts_with('x')
}

/// A change that is notable ([`Move::notable`]): this much or more, in percent (of a timed
/// figure, beyond its table's median change).
pub const NOTABLE_PCT: f64 = 5.0;

/// The fewest timed figures a table must have in both reports for its median change to be
/// taken as the host's.
pub const TABLE_SHIFT_MIN_FIGURES: usize = 3;

impl Move {
    /// The change of the median, in percent of the earlier one.
    #[must_use]
    pub fn change_pct(&self) -> f64 {
        (self.after.value / self.before.value - 1.0) * 100.0
    }

    /// How far the median moved beyond its table's median change, in percent (a timed
    /// figure of a table with a shift only).
    #[must_use]
    pub fn beyond_table_pct(&self) -> Option<f64> {
        let shift = self.table_shift?;
        Some((self.after.value / self.before.value / shift - 1.0) * 100.0)
    }

    /// Whether the move is as large as a regression the report must flag: a figure without
    /// an interval or a per-round ratio that moved [`NOTABLE_PCT`] or more, or a timed figure
    /// that moved that much beyond its table's median change (or at all, in a table too
    /// small to have one). A timed figure that moved with its table moved with the host. A
    /// figure without an interval that moved by one step of its last printed digit or less
    /// (0.06 to 0.07 misses per pair: 17%) is within its rounding, not notable. Over
    /// several pairs of runs, notable in every pair.
    #[must_use]
    pub fn notable(&self) -> bool {
        self.notable_in_its_run() && self.earlier_runs.iter().all(Self::notable_in_its_run)
    }

    /// [`Move::notable`] of this pair of runs alone.
    fn notable_in_its_run(&self) -> bool {
        match self.after.kind() {
            Kind::Single => {
                let step = self.before.printed_step().max(self.after.printed_step());
                // One step, and the difference of two numbers rounded to it.
                let within_rounding = (self.after.value - self.before.value).abs() <= step * 1.001;
                self.change_pct().abs() >= NOTABLE_PCT && !within_rounding
            }
            Kind::Ratio => self.change_pct().abs() >= NOTABLE_PCT,
            Kind::Timed => self
                .beyond_table_pct()
                .is_none_or(|pct| pct.abs() >= NOTABLE_PCT),
        }
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

/// The name of the section a report run with `--compare` adds.
pub const COMPARISON: &str = "comparison";

/// What a comparison found.
#[derive(Debug, Default)]
pub struct Comparison {
    /// The figures that moved, in this report's order.
    pub moves: Vec<Move>,
    /// Figures found in both reports.
    pub compared: usize,
    /// Figures of this report the earlier one lacks.
    pub only_here: usize,
    /// Each table with a figure found in both reports, in this report's order.
    pub tables: Vec<TableChange>,
}

/// One table of a comparison as a whole.
#[derive(Debug, PartialEq)]
pub struct TableChange {
    /// Section and table title.
    pub name: [String; 2],
    /// Its figures found in both reports.
    pub compared: usize,
    /// The median change of its timed figures (`after / before`), where it has at least
    /// [`TABLE_SHIFT_MIN_FIGURES`]: how far the table moved as a whole.
    pub shift: Option<f64>,
}

/// Every figure of a report as JSON: (name, figure), in order.
fn figures(report: &Value) -> Vec<([String; 4], Figure)> {
    let mut out = Vec::new();
    let sections = report["sections"].as_array().map_or(&[][..], Vec::as_slice);
    for section in sections {
        let name = section[0].as_str().unwrap_or_default();
        // A report run with `--compare` holds its comparison: not a measurement.
        if name == COMPARISON {
            continue;
        }
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
                    // ÷ ours 1.54x)"): each a figure of its own, without an interval.
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

/// The figures a text cell lists as numbers separated by " / ", before any
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
/// intervals do not overlap), else a change of at least [`SINGLE_CHANGE_PCT`].
fn moved(before: &Figure, after: &Figure) -> bool {
    if before.single() && after.single() {
        let base = before.value.abs().max(f64::MIN_POSITIVE);
        return (after.value - before.value).abs() / base * 100.0 >= SINGLE_CHANGE_PCT;
    }
    after.lo > before.hi || after.hi < before.lo
}

/// Compares the report `now` with `earlier` (both as JSON).
#[must_use]
pub fn compare(earlier: &Value, now: &Value) -> Comparison {
    let before = figures(earlier);
    let mut c = Comparison::default();
    let mut pairs = Vec::new();
    for (name, after) in figures(now) {
        let Some((_, was)) = before.iter().find(|(n, _)| *n == name) else {
            c.only_here += 1;
            continue;
        };
        c.compared += 1;
        pairs.push((name, was.clone(), after));
    }
    c.tables = table_changes(&pairs);
    for (name, before, after) in pairs {
        if moved(&before, &after) {
            let table_shift = (after.kind() == Kind::Timed)
                .then(|| c.tables.iter().find(|t| t.name[..] == name[..2]))
                .flatten()
                .and_then(|t| t.shift);
            c.moves.push(Move {
                name,
                before,
                after,
                table_shift,
                earlier_runs: Vec::new(),
            });
        }
    }
    c
}

/// Compares each pair of reports `(earlier, now)` of `runs` (at least one; `--repeat`'s
/// runs, each section of a pair run side by side): the last pair's comparison, keeping the
/// moves that every pair made in the same direction, each with its move in the earlier pairs
/// ([`Move::earlier_runs`]). With one pair, [`compare`].
#[must_use]
pub fn compare_runs(runs: &[(Value, Value)]) -> Comparison {
    let Some(((earlier, now), before)) = runs.split_last() else {
        return Comparison::default();
    };
    let mut c = compare(earlier, now);
    let before: Vec<Comparison> = before.iter().map(|(e, n)| compare(e, n)).collect();
    c.moves.retain_mut(|m| {
        for run in &before {
            match run.moves.iter().find(|b| b.name == m.name) {
                Some(b) if b.direction() == m.direction() => m.earlier_runs.push(b.clone()),
                _ => return false,
            }
        }
        true
    });
    c
}

/// The tables of the figures found in both reports, in order: how many each has, and the
/// median change of its timed figures (`after / before`, both medians positive) where it has
/// at least [`TABLE_SHIFT_MIN_FIGURES`] of them.
fn table_changes(pairs: &[([String; 4], Figure, Figure)]) -> Vec<TableChange> {
    let mut tables: Vec<(TableChange, Vec<f64>)> = Vec::new();
    for (name, before, after) in pairs {
        let i = match tables.iter().position(|(t, _)| t.name[..] == name[..2]) {
            Some(i) => i,
            None => {
                let table = TableChange {
                    name: [name[0].clone(), name[1].clone()],
                    compared: 0,
                    shift: None,
                };
                tables.push((table, Vec::new()));
                tables.len() - 1
            }
        };
        let (table, changes) = &mut tables[i];
        table.compared += 1;
        if after.kind() == Kind::Timed && before.value > 0.0 && after.value > 0.0 {
            changes.push(after.value / before.value);
        }
    }
    tables
        .into_iter()
        .map(|(mut table, changes)| {
            table.shift =
                (changes.len() >= TABLE_SHIFT_MIN_FIGURES).then(|| Estimate::of(changes).median);
            table
        })
        .collect()
}

/// The comparison of each pair of runs `(earlier, now)` ([`compare_runs`]) as tables: those
/// of [`tables_between`] for the last pair, listing the moves every pair made, with each
/// pair's change.
#[must_use]
pub fn tables_over_runs(runs: &[(Value, Value)]) -> Vec<Table> {
    match runs.last() {
        None => Vec::new(),
        Some((earlier, now)) => comparison_tables(&compare_runs(runs), earlier, now, runs.len()),
    }
}

/// The comparison of the report `now` with the earlier report `earlier`, both as JSON (two
/// `report.json` files already written: `report compare OLD NEW`): a summary, table by
/// table, then every figure that moved.
#[must_use]
pub fn tables_between(earlier: &Value, now: &Value) -> Vec<Table> {
    comparison_tables(&compare(earlier, now), earlier, now, 1)
}

/// The comparison `c` of the report `now` with `earlier` (the last of `runs` pairs of
/// runs) as tables: a summary, table by table, then every figure that moved.
fn comparison_tables(c: &Comparison, earlier: &Value, now: &Value, runs: usize) -> Vec<Table> {
    let header = |field: &str| earlier["header"][field].as_str().unwrap_or("?").to_owned();
    let now_cpu = now["header"]["cpu"].as_str().unwrap_or("?");
    let notable = c.moves.iter().filter(|m| m.notable()).count();
    let mut summary = Table::new(
        "comparison-tables",
        &format!(
            "Against the report of {} ({}), table by table: the figures that moved, and the \
             notable moves among them (those a regression would make)",
            header("commit"),
            header("date")
        ),
        &[
            "section",
            "table",
            "compared",
            "moved",
            "timed figures' median change",
            "notable moves",
        ],
    );
    for t in &c.tables {
        let moves = || c.moves.iter().filter(|m| m.name[..2] == t.name[..]);
        let moved = moves().count();
        if moved == 0 {
            continue;
        }
        let [section, title] = t.name.clone();
        summary.row(vec![
            Cell::text(section),
            Cell::text(title),
            Cell::num(t.compared as f64, 0, ""),
            Cell::num(moved as f64, 0, ""),
            t.shift
                .map_or_else(|| Cell::text("-"), |s| Cell::num((s - 1.0) * 100.0, 1, "%")),
            Cell::num(moves().filter(|m| m.notable()).count() as f64, 0, ""),
        ]);
    }
    summary.note(format!(
        "{} figures compared, {} moved, {notable} of them notably; {} figures of \
         this report are not in the earlier one (new rows, or renamed). Earlier CPU: {}; this \
         report's: {}.{}",
        c.compared,
        c.moves.len(),
        c.only_here,
        header("cpu"),
        now_cpu,
        if header("cpu") == now_cpu {
            ""
        } else {
            " The CPUs differ: timed figures are not comparable, instruction counts are."
        }
    ));
    summary.note(format!(
        "Notable moves, those as large as a regression the report must flag: a figure \
         without an interval that changed by {NOTABLE_PCT}% or more (an instruction count \
         moves only with the code; a worst case or a best of several also with the host); a \
         per-round ratio that moved {NOTABLE_PCT}% or more (both sides timed in each round, \
         so a change of the host's speed as a whole cancels); a timed figure that moved \
         {NOTABLE_PCT}% or more beyond its table's median change (or at all, in a table of \
         fewer than {TABLE_SHIFT_MIN_FIGURES} timed figures). A timed figure that moved with \
         its table's median moved with the host (other tenants, clock speed): every \
         allocator and path of the table alike."
    ));
    if runs > 1 {
        summary.note(format!(
            "Over {runs} pairs of runs (`--repeat`, or `--layouts` of `cargo xtask report`: \
             each section of a pair run side by side): a figure is counted and listed as moved \
             only if it moved the same way in every pair, and as notable only if notable in \
             every pair; the figures are the last pair's, with each pair's change."
        ));
    }
    let mut columns = vec![
        "section", "table", "row", "column", "kind", "before", "now", "change",
    ];
    if runs > 1 {
        columns.push("change in each pair of runs");
    }
    columns.extend(["direction", "beyond the table's median change", "notable"]);
    let mut t = Table::new(
        "comparison",
        &format!(
            "Figures that moved against the report of {} ({}): beyond both 95% intervals, or \
             figures without one changed by {SINGLE_CHANGE_PCT}% or more",
            header("commit"),
            header("date")
        ),
        &columns,
    );
    for m in &c.moves {
        let [section, title, row, column] = m.name.clone();
        let mut row = vec![
            Cell::text(section),
            Cell::text(title),
            Cell::text(row),
            Cell::text(column),
            Cell::text(m.after.kind().as_str()),
            Cell::text(&m.before.text),
            Cell::text(&m.after.text),
            Cell::num(m.change_pct(), 1, "%"),
        ];
        if runs > 1 {
            let each: Vec<String> = m
                .earlier_runs
                .iter()
                .chain([m])
                .map(|r| format!("{:+.1}%", r.change_pct()))
                .collect();
            row.push(Cell::text(each.join(", ")));
        }
        row.extend([
            Cell::text(m.direction()),
            m.beyond_table_pct()
                .map_or_else(|| Cell::text("-"), |pct| Cell::num(pct, 1, "%")),
            Cell::text(if m.notable() { "yes" } else { "no" }),
        ]);
        t.row(row);
    }
    t.note(
        "Higher or lower says which way the median went, not whether that is better: a time \
         per call is better lower, a speed-up ratio higher. Intervals that do not overlap can \
         still come from the host's load changing between the two runs, which moves a whole \
         table (the last column takes that out); exact instruction counts cannot.",
    );
    vec![summary, t]
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
    fn moves_are_figures_beyond_both_intervals_or_single_changes() {
        let before = report(cells([10.0, 9.0, 11.0], 100.0));
        // Overlapping intervals, a count within the threshold: nothing moved.
        let same = compare(&before, &report(cells([10.8, 10.5, 12.0], 100.4)));
        assert_eq!((same.compared, same.moves.len()), (2, 0));
        // Disjoint intervals and a changed count: both listed, with their direction.
        let moved = compare(&before, &report(cells([12.0, 11.5, 12.5], 90.0)));
        let names: Vec<_> = moved.moves.iter().map(|m| m.name[3].as_str()).collect();
        assert_eq!(names, ["ns", "count"]);
        assert_eq!(moved.moves[0].direction(), "higher");
        assert_eq!(moved.moves[1].direction(), "lower");
        assert!((moved.moves[1].change_pct() + 10.0).abs() < 1e-9);
        // Counts listed in a text cell are figures each; other text is not.
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

    /// A table whose rows are allocators timed side by side: `ns` per row (each with an
    /// interval of ±2%), a per-round ratio per row, and an instruction count per row.
    fn allocators(ns: [f64; 4], ratio: f64, count: f64) -> Value {
        let rows: Vec<Value> = ns
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                json!([format!("allocator {i}"),
                       {"value": v, "text": format!("{v}"), "ci": [v * 0.98, v * 1.02]},
                       {"value": ratio, "text": format!("{ratio}x [{}, {}]", ratio * 0.99, ratio * 1.01),
                        "ci": [ratio * 0.99, ratio * 1.01]},
                       {"value": count, "text": format!("{count}")}])
            })
            .collect();
        json!({
            "header": {"commit": "abc", "date": "d", "cpu": "c"},
            "sections": [
                ["s", [{"title": "t", "columns": ["allocator", "ns", "ratio", "instructions"],
                        "rows": rows}]],
                // A report run with `--compare` holds its comparison: never compared.
                [COMPARISON, [{"title": "c", "columns": ["row", "change"],
                               "rows": [["r", {"value": ns[0], "text": "z"}]]}]],
            ],
        })
    }

    /// The host's speed moves a whole table: a timed figure that moved with its table's
    /// median change is not notable, one that moved 5% or more beyond it is; a per-round
    /// ratio or a figure without an interval is notable when it moved 5% or more.
    #[test]
    fn notable_moves_are_those_against_the_table_or_of_ratios_and_counts() {
        let before = allocators([10.0, 20.0, 30.0, 40.0], 2.0, 100.0);
        // Every allocator 10% slower, one 30%; the ratio 3% lower; counts 1% higher.
        let after = allocators([11.0, 22.0, 33.0, 52.0], 1.94, 101.0);
        let c = compare(&before, &after);
        assert_eq!(c.compared, 12, "the comparison section is not compared");
        let [table] = &c.tables[..] else {
            panic!("one table: {:?}", c.tables)
        };
        assert_eq!(table.compared, 12);
        // The median of 1.1, 1.1, 1.1 and 1.3.
        assert!((table.shift.unwrap() - 1.1).abs() < 1e-9);
        let timed: Vec<_> = c.moves.iter().filter(|m| m.name[3] == "ns").collect();
        assert_eq!(timed.len(), 4, "every allocator's interval moved");
        assert!(timed.iter().all(|m| m.after.kind() == Kind::Timed));
        let notable: Vec<_> = timed.iter().filter(|m| m.notable()).collect();
        assert_eq!(notable.len(), 1);
        assert_eq!(notable[0].name[2], "allocator 3");
        let beyond = notable[0].beyond_table_pct().unwrap();
        assert!(
            (beyond - (1.3 / 1.1 - 1.0) * 100.0).abs() < 1e-9,
            "{beyond}"
        );
        // Ratios moved beyond their intervals, by less than 5%; counts changed by 1%.
        for column in ["ratio", "instructions"] {
            let moves: Vec<_> = c.moves.iter().filter(|m| m.name[3] == column).collect();
            assert_eq!(moves.len(), 4, "{column}");
            assert!(moves.iter().all(|m| !m.notable()), "{column}");
            assert_eq!(moves[0].beyond_table_pct(), None, "{column}");
        }
        assert_eq!(c.moves[1].after.kind(), Kind::Ratio);
        assert_eq!(c.moves[2].after.kind(), Kind::Single);
        // A ratio 8% lower and counts 6% higher are notable.
        let worse = compare(&before, &allocators([11.0, 22.0, 33.0, 44.0], 1.84, 106.0));
        let notable: Vec<_> = worse.moves.iter().filter(|m| m.notable()).collect();
        assert_eq!(notable.len(), 8);
        assert!(notable.iter().all(|m| m.name[3] != "ns"));
        // The summary counts them, table by table.
        let [summary, list] = &tables_between(&before, &after)[..] else {
            panic!("two tables")
        };
        let row: Vec<&str> = summary.rows[0].iter().map(Cell::as_text).collect();
        assert_eq!(row, ["s", "t", "12", "12", "10.0%", "1"]);
        assert_eq!(list.rows.len(), 12);
    }

    /// A figure without an interval, as a listed count is: its value read from its text.
    fn printed(text: &str) -> Figure {
        let value = text.parse().unwrap();
        Figure {
            value,
            lo: value,
            hi: value,
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_count_that_moved_by_one_printed_step_is_within_its_rounding() {
        let step = |text: &str| {
            Figure {
                text: text.into(),
                ..printed("1")
            }
            .printed_step()
        };
        assert_eq!(step("0.06"), 0.01);
        assert_eq!(step("609"), 1.0);
        assert_eq!(step("25 ±0%"), 1.0);
        assert_eq!(step("-2.5"), 0.1);
        assert_eq!(step("-"), 0.0);
        let change = |before: &str, after: &str| Move {
            name: Default::default(),
            before: printed(before),
            after: printed(after),
            table_shift: None,
            earlier_runs: Vec::new(),
        };
        // 17% and 50%, but one step of the last digit: the two rounded numbers may differ
        // by almost nothing.
        assert!(!change("0.06", "0.07").notable());
        assert!(!change("0.2", "0.3").notable());
        // Two steps, or a whole number's 6%, are notable.
        assert!(change("0.06", "0.08").notable());
        assert!(change("100", "106").notable());
        assert!(!change("100", "104").notable());
    }

    /// Over several pairs of runs a move counts only if every pair made it the same way,
    /// and is notable only if notable in every pair.
    #[test]
    fn over_pairs_of_runs_a_move_is_one_every_pair_made() {
        let before = allocators([10.0, 20.0, 30.0, 40.0], 2.0, 100.0);
        // Pair 1: allocator 3 30% slower than its table, the ratio 8% lower, counts 6%
        // higher; pair 2: allocator 3 the same, the ratio 3% lower, counts 6% lower.
        let first = allocators([11.0, 22.0, 33.0, 52.0], 1.84, 106.0);
        let second = allocators([11.0, 22.0, 33.0, 52.0], 1.94, 94.0);
        let pairs = [(before.clone(), first), (before.clone(), second.clone())];
        let c = compare_runs(&pairs);
        let last = compare(&before, &second);
        assert_eq!(c.compared, last.compared);
        // The counts moved both ways: not a move of both pairs.
        assert!(last.moves.iter().any(|m| m.name[3] == "instructions"));
        assert!(c.moves.iter().all(|m| m.name[3] != "instructions"));
        // Every timed figure and ratio moved the same way in both.
        assert_eq!(c.moves.len(), 8);
        assert!(c.moves.iter().all(|m| m.earlier_runs.len() == 1));
        let notable: Vec<_> = c.moves.iter().filter(|m| m.notable()).collect();
        // The ratio's 3% in the last pair is not notable; allocator 3 is in both.
        assert_eq!(notable.len(), 1);
        assert_eq!(notable[0].name[..], ["s", "t", "allocator 3", "ns"]);
        // One pair is `compare`; the tables list each pair's change.
        assert_eq!(compare_runs(&pairs[1..]).moves, last.moves);
        let [summary, list] = &tables_over_runs(&pairs)[..] else {
            panic!("two tables")
        };
        assert!(
            summary
                .notes
                .iter()
                .any(|n| n.contains("Over 2 pairs of runs"))
        );
        let row: Vec<&str> = list.rows[0].iter().map(Cell::as_text).collect();
        assert_eq!(row[8], "+10.0%, +10.0%", "{row:?}");
    }

    #[test]
    fn ratios_are_numbers_followed_by_x() {
        for text in [
            "1.47x [1.46, 1.47]",
            "0.01x",
            "403.02x [375.30, 418.34]",
            "-2x",
        ] {
            assert!(is_ratio(text), "{text}");
        }
        for text in ["20 ±0%", "x", "1.5", "x2", "12.3 ±4%", ""] {
            assert!(!is_ratio(text), "{text}");
        }
    }
}
