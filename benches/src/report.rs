//! Report tables and their three renderings: Markdown (terminal and `report.md`), JSON
//! (`report.json`) and one SVG bar chart per plotted table.

use indicatif::ProgressBar;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One report section: a named set of measurements that produces tables.
pub trait Section {
    /// Short name, used by `--only` and as the heading.
    fn name(&self) -> &'static str;
    /// How many progress steps [`Section::run`] will report (for the progress bar).
    fn planned_steps(&self, quick: bool) -> u64;
    /// Measures and returns the tables.
    fn run(&self, ctx: &SectionContext) -> Vec<Table>;
}

/// What a section gets to run with.
pub struct SectionContext {
    /// The progress bar: one `inc(1)` per planned step.
    pub progress: ProgressBar,
    /// Smaller regions and fewer runs, for a fast look.
    pub quick: bool,
}

impl SectionContext {
    /// Marks one step done, naming the next.
    pub fn step(&self, what: impl Into<String>) {
        self.progress.set_message(what.into());
        self.progress.inc(1);
    }
}

/// A table cell: text, or a number with its formatted text.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Cell {
    /// Plain text.
    Text(String),
    /// A number; `text` is how it prints.
    Num {
        /// The value (plotted).
        value: f64,
        /// The printed form.
        text: String,
    },
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
        }
    }

    /// A ratio, printed as `1.23x`.
    #[must_use]
    pub fn ratio(value: f64) -> Self {
        Self::num(value, 2, "x")
    }

    fn as_text(&self) -> &str {
        match self {
            Self::Text(s) | Self::Num { text: s, .. } => s,
        }
    }

    fn value(&self) -> Option<f64> {
        match self {
            Self::Num { value, .. } if value.is_finite() => Some(*value),
            _ => None,
        }
    }
}

/// How to plot a table: one group of bars per row, one bar per listed column.
#[derive(Clone, Debug, Serialize)]
pub struct Plot {
    /// The y axis label.
    pub y_label: String,
    /// The numeric columns plotted, by index.
    pub series: Vec<usize>,
    /// Log-scale y axis.
    pub log_y: bool,
}

/// One table of a section.
#[derive(Clone, Debug, Serialize)]
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

    /// The table as Markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut s = format!("### {}\n\n", self.title);
        let _ = writeln!(s, "| {} |", self.columns.join(" | "));
        let _ = writeln!(s, "|{}", "---|".repeat(self.columns.len()));
        for r in &self.rows {
            let cells: Vec<&str> = r.iter().map(Cell::as_text).collect();
            let _ = writeln!(s, "| {} |", cells.join(" | "));
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
        draw_bars(self, plot, &dir.join(&file)).map_err(|e| format!("{file}: {e}"))?;
        Ok(Some(file))
    }
}

const PALETTE: [plotters::style::RGBColor; 8] = [
    plotters::style::RGBColor(31, 119, 180),
    plotters::style::RGBColor(255, 127, 14),
    plotters::style::RGBColor(44, 160, 44),
    plotters::style::RGBColor(214, 39, 40),
    plotters::style::RGBColor(148, 103, 189),
    plotters::style::RGBColor(140, 86, 75),
    plotters::style::RGBColor(227, 119, 194),
    plotters::style::RGBColor(127, 127, 127),
];

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw_bars(t: &Table, plot: &Plot, path: &Path) -> DrawResult {
    use plotters::prelude::*;
    let groups = t.rows.len().max(1);
    let per = plot.series.len().max(1);
    let values: Vec<f64> = t
        .rows
        .iter()
        .flat_map(|r| plot.series.iter().filter_map(|&c| r.get(c)?.value()))
        .collect();
    let max = values.iter().copied().fold(0.0f64, f64::max).max(1e-9) * 1.15;
    let min_pos = values
        .iter()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    let width = u32::try_from((160 + groups * (per * 22 + 30)).clamp(640, 1600)).unwrap_or(1600);
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&t.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    if plot.log_y {
        let floor = if min_pos == f64::MAX {
            1e-3
        } else {
            min_pos / 2.0
        };
        let mut chart = builder.build_cartesian_2d(0.0..groups as f64, (floor..max).log_scale())?;
        fill(&mut chart, t, plot, floor)?;
    } else {
        let mut chart = builder.build_cartesian_2d(0.0..groups as f64, 0.0..max)?;
        fill(&mut chart, t, plot, 0.0)?;
    }
    root.present()?;
    Ok(())
}

/// Draws the mesh, one group of bars per row (bars start at `y0`) and the legend.
fn fill<'a, Y>(
    chart: &mut plotters::chart::ChartContext<
        'a,
        plotters::prelude::SVGBackend<'a>,
        plotters::coord::cartesian::Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    t: &Table,
    plot: &Plot,
    y0: f64,
) -> DrawResult
where
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    use plotters::prelude::*;
    let labels: Vec<String> = t.rows.iter().map(|r| r[0].as_text().to_string()).collect();
    let x_fmt = |x: &f64| {
        let i = x.floor();
        if (x - i - 0.5).abs() < 1e-6 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_labels(labels.len() * 2 + 1)
        .x_label_formatter(&x_fmt)
        .disable_x_mesh()
        .y_desc(plot.y_label.as_str())
        .draw()?;
    let w = 0.8 / plot.series.len().max(1) as f64;
    for (k, &col) in plot.series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let bars = t.rows.iter().enumerate().filter_map(|(g, row)| {
            let v = row.get(col)?.value()?;
            let x0 = g as f64 + 0.1 + k as f64 * w;
            Some(Rectangle::new(
                [(x0, y0), (x0 + w * 0.9, v)],
                color.filled(),
            ))
        });
        chart
            .draw_series(bars)?
            .label(t.columns[col].as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

/// A whole report: every section's tables, with when and where it ran.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Seconds since the Unix epoch when the report finished.
    pub generated_unix: u64,
    /// Whether `--quick` shrank the workloads.
    pub quick: bool,
    /// Sections in order: (name, tables).
    pub sections: Vec<(String, Vec<Table>)>,
}

impl Report {
    /// The whole report as Markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut s = String::from("# Report\n\n");
        s.push_str(
            "Produced by `cargo xtask report`. Times are wall-clock on this machine, measured \
             side by side in one run; each figure says whether it is a median or a best.\n",
        );
        for (name, tables) in &self.sections {
            let _ = write!(s, "\n## {name}\n\n");
            for t in tables {
                s.push_str(&t.markdown());
                s.push('\n');
            }
        }
        s
    }
}
