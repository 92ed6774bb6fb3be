//! Report tables: cells (figures with their intervals, ratios, verdicts), plots and
//! tables, and their Markdown and JSON forms.

use crate::measure::{Estimate, Verdict};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// A table cell: text, or a number with its formatted text.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    /// Plain text.
    Text(String),
    /// A number; `text` is how it prints.
    Num {
        /// The value (plotted).
        #[serde(deserialize_with = "super::float_or_null")]
        value: f64,
        /// The printed form.
        text: String,
        /// The 95% confidence interval of `value`, if it is a measured median (error bars).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "interval_or_null"
        )]
        ci: Option<[f64; 2]>,
    },
}

/// A cell's interval from a `report.json`, either end `null` where it was a NaN.
fn interval_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[f64; 2]>, D::Error> {
    let ends = Option::<[Option<f64>; 2]>::deserialize(d)?;
    Ok(ends.map(|e| e.map(|x| x.unwrap_or(f64::NAN))))
}

impl Cell {
    /// A text cell.
    pub fn text(s: impl Into<String>) -> Self {
        Self::Text(s.into())
    }

    /// A number printed with `decimals` decimals and an optional suffix.
    #[must_use]
    pub fn num(value: f64, decimals: usize, suffix: &str) -> Self {
        Self::Num {
            value,
            text: format!("{value:.decimals$}{suffix}"),
            ci: None,
        }
    }

    /// A measured median, printed as `12.3 ±4%`: the larger distance from the median to an
    /// end of its 95% interval, in percent (the ends themselves go to the JSON and the plot).
    #[must_use]
    pub fn estimate(e: Estimate, decimals: usize, suffix: &str) -> Self {
        Self::Num {
            value: e.median,
            text: format!(
                "{:.decimals$}{suffix} ±{:.0}%",
                e.median,
                e.half_width_pct()
            ),
            ci: Some([e.lo, e.hi]),
        }
    }

    /// A ratio, printed as `1.23x`.
    #[must_use]
    pub fn ratio(value: f64) -> Self {
        Self::num(value, 2, "x")
    }

    /// A measured ratio with its 95% interval, printed as `1.23x [1.18, 1.30]`.
    #[must_use]
    pub fn ratio_ci(e: Estimate) -> Self {
        Self::Num {
            value: e.median,
            text: ratio_text(e),
            ci: Some([e.lo, e.hi]),
        }
    }

    /// A goal's verdict.
    #[must_use]
    pub fn verdict(v: Verdict) -> Self {
        Self::text(v.as_str())
    }

    pub(super) fn as_text(&self) -> &str {
        match self {
            Self::Text(s) | Self::Num { text: s, .. } => s,
        }
    }

    pub(super) fn interval(&self) -> Option<[f64; 2]> {
        match self {
            Self::Num { ci: Some(c), .. } if c.iter().all(|v| v.is_finite()) => Some(*c),
            _ => None,
        }
    }

    pub(super) fn value(&self) -> Option<f64> {
        match self {
            Self::Num { value, .. } if value.is_finite() => Some(*value),
            _ => None,
        }
    }
}

/// `1.23x [1.18, 1.30]`: a ratio and its 95% interval.
#[must_use]
pub fn ratio_text(e: Estimate) -> String {
    if e.lo == e.hi {
        format!("{:.2}x", e.median)
    } else {
        format!("{:.2}x [{:.2}, {:.2}]", e.median, e.lo, e.hi)
    }
}

/// How to plot a table: one group of bars per row (labelled by the row's first cell), one bar
/// per listed column, with error bars where the cells carry an interval.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plot {
    /// The x axis title: what the rows are.
    pub x_label: String,
    /// The y axis title, with its unit.
    pub y_label: String,
    /// The numeric columns plotted, by index.
    pub series: Vec<usize>,
    /// Log-scale y axis (the axis title says so).
    pub log_y: bool,
    /// The values are ratios: draw the 1.0 line.
    pub ratio: bool,
    /// The columns whose text, joined by ", ", labels each group (the first by default).
    pub label_columns: Vec<usize>,
}

impl Plot {
    /// A linear plot of `series` (column indices).
    #[must_use]
    pub fn new(x_label: &str, y_label: &str, series: Vec<usize>) -> Self {
        Self {
            x_label: x_label.into(),
            y_label: y_label.into(),
            series,
            log_y: false,
            ratio: false,
            label_columns: vec![0],
        }
    }

    /// Groups labelled by these columns' text, joined by ", ".
    #[must_use]
    pub fn labelled_by(self, label_columns: Vec<usize>) -> Self {
        Self {
            label_columns,
            ..self
        }
    }

    /// The label of `row`'s group.
    pub(super) fn label(&self, row: &[Cell]) -> String {
        self.label_columns
            .iter()
            .filter_map(|&c| row.get(c).map(Cell::as_text))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// With a logarithmic y axis.
    #[must_use]
    pub fn log(self) -> Self {
        Self {
            log_y: true,
            ..self
        }
    }

    /// Of ratios: with the 1.0 line.
    #[must_use]
    pub fn ratios(self) -> Self {
        Self {
            ratio: true,
            ..self
        }
    }
}

/// One table of a section.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Table {
    /// File-name-safe identifier (the SVG's name).
    pub id: String,
    /// The heading.
    pub title: String,
    /// What was compared, how it was measured, and what it means (printed under the table).
    pub notes: Vec<String>,
    /// Column headings.
    pub columns: Vec<String>,
    /// Rows of cells, as many as columns.
    pub rows: Vec<Vec<Cell>>,
    /// How to plot it, if it is worth a picture.
    pub plot: Option<Plot>,
}

impl Table {
    /// An empty table.
    pub fn new(id: &str, title: &str, columns: &[&str]) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            notes: Vec::new(),
            columns: columns.iter().map(|c| (*c).to_string()).collect(),
            rows: Vec::new(),
            plot: None,
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<Cell>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "{}", self.title);
        self.rows.push(cells);
    }

    /// Adds a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// The table as Markdown; with `plot_link`, its plot's SVG is shown under it.
    #[must_use]
    pub fn markdown(&self, plot_link: bool) -> String {
        let mut s = format!("### {}\n\n", self.title);
        let _ = writeln!(s, "| {} |", self.columns.join(" | "));
        let _ = writeln!(s, "|{}", "---|".repeat(self.columns.len()));
        for r in &self.rows {
            let cells: Vec<&str> = r.iter().map(Cell::as_text).collect();
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        if plot_link && self.plot.is_some() {
            let _ = write!(s, "\n![{}]({}.svg)\n", self.title, self.id);
        }
        for n in &self.notes {
            let _ = write!(s, "\n{n}\n");
        }
        s
    }

    /// Writes the table's SVG bar chart to `dir/<id>.svg`, if it has a plot.
    ///
    /// # Errors
    /// The drawing backend's error, as text.
    pub fn write_svg(&self, dir: &Path) -> Result<Option<String>, String> {
        let Some(plot) = &self.plot else {
            return Ok(None);
        };
        let file = format!("{}.svg", self.id);
        super::svg::draw_bars(self, plot, &dir.join(&file)).map_err(|e| format!("{file}: {e}"))?;
        Ok(Some(file))
    }
}
