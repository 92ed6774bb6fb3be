//! Report tables and their three renderings: Markdown (terminal and `report.md`), JSON
//! (`report.json`) and one SVG bar chart per plotted table.

use crate::measure::{Estimate, Verdict};
use indicatif::ProgressBar;
use serde::Serialize;
use std::cell::RefCell;
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
    /// The headline ratios recorded so far (see [`SectionContext::headline`]).
    pub headlines: RefCell<Vec<Headline>>,
}

impl SectionContext {
    /// Marks one step done, naming the next.
    pub fn step(&self, what: impl Into<String>) {
        self.progress.set_message(what.into());
        self.progress.inc(1);
    }

    /// Records one of the report's headline ratios: the figures `--repeat` compares between
    /// runs and the report lists at its top.
    pub fn headline(&self, name: impl Into<String>, ratio: Estimate) {
        self.headlines.borrow_mut().push(Headline {
            name: name.into(),
            ratio,
        });
    }
}

/// A headline ratio: what a reader would quote from the report.
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    /// What it compares, in words.
    pub name: String,
    /// The ratio, median and 95% interval.
    pub ratio: Estimate,
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
        /// The 95% confidence interval of `value`, if it is a measured median (error bars).
        #[serde(skip_serializing_if = "Option::is_none")]
        ci: Option<[f64; 2]>,
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

    fn as_text(&self) -> &str {
        match self {
            Self::Text(s) | Self::Num { text: s, .. } => s,
        }
    }

    fn interval(&self) -> Option<[f64; 2]> {
        match self {
            Self::Num { ci: Some(c), .. } if c.iter().all(|v| v.is_finite()) => Some(*c),
            _ => None,
        }
    }

    fn value(&self) -> Option<f64> {
        match self {
            Self::Num { value, .. } if value.is_finite() => Some(*value),
            _ => None,
        }
    }
}

/// The mailing-list threads the published figures come from, named in words.
pub mod thread {
    /// The folio_zero_user() batching patch (Linux 2026).
    pub const FOLIO_ZERO_USER: &str =
        "the folio_zero_user() patch clearing contiguous page ranges in preemption-bounded batches";
    /// The folio_zero_user() patch, for column headings.
    pub const FOLIO_ZERO_USER_SHORT: &str = "folio_zero_user() patch";
    /// The 2018 RFC for streaming stores on 1 GiB pages.
    pub const MOVNTI_1G: &str = "the 2018 RFC clearing 1 GiB pages with movnti streaming stores";
    /// arm64's test_and_clear_young_ptes() patch (Linux 2026).
    pub const YOUNG_PTES: &str =
        "the arm64 test_and_clear_young_ptes() patch (batched, contpte-aware young clearing)";
    /// The test_and_clear_young_ptes() patch, for column headings.
    pub const YOUNG_PTES_SHORT: &str = "test_and_clear_young_ptes() patch";
    /// The free_contig_range() batching patch (Linux 2026).
    pub const FREE_CONTIG_RANGE: &str =
        "the free_contig_range() patch freeing runs as naturally aligned power-of-two chunks";
    /// The free_contig_range() patch, for column headings.
    pub const FREE_CONTIG_RANGE_SHORT: &str = "free_contig_range() patch";
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
#[derive(Clone, Debug, Serialize)]
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
    fn label(&self, row: &[Cell]) -> String {
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
        draw_bars(self, plot, &dir.join(&file)).map_err(|e| format!("{file}: {e}"))?;
        Ok(Some(file))
    }
}

/// Series colours: twelve, so no two series of one plot share a colour.
const PALETTE: [plotters::style::RGBColor; 12] = [
    plotters::style::RGBColor(31, 119, 180),
    plotters::style::RGBColor(255, 127, 14),
    plotters::style::RGBColor(44, 160, 44),
    plotters::style::RGBColor(214, 39, 40),
    plotters::style::RGBColor(148, 103, 189),
    plotters::style::RGBColor(140, 86, 75),
    plotters::style::RGBColor(227, 119, 194),
    plotters::style::RGBColor(127, 127, 127),
    plotters::style::RGBColor(188, 189, 34),
    plotters::style::RGBColor(23, 190, 207),
    plotters::style::RGBColor(0, 0, 128),
    plotters::style::RGBColor(128, 64, 0),
];

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Approximate width of one character of the 12-pixel sans-serif labels, in pixels.
const CHAR_PX: usize = 7;
/// Height of the chart itself (the legend strip comes below it).
const CHART_PX: u32 = 440;

/// Where the labels and the legend go: worked out from the text they must hold, so that
/// category labels do not overlap and the legend covers no data.
struct Layout {
    width: u32,
    /// Category labels turned 90 degrees (they would not fit side by side).
    rotate_labels: bool,
    x_label_area: u32,
    /// Legend entries per line and lines.
    legend_lines: Vec<Vec<usize>>,
}

fn layout(t: &Table, plot: &Plot) -> Layout {
    let groups = t.rows.len().max(1);
    let per = plot.series.len().max(1);
    let longest = t
        .rows
        .iter()
        .map(|r| plot.label(r).chars().count())
        .max()
        .unwrap_or(0);
    let label_px = longest * CHAR_PX + 12;
    let bars_px = per * 18 + 24;
    let wanted = 110 + groups * bars_px.max(label_px);
    let width = wanted.clamp(640, 1800);
    let group_px = (width - 110) / groups;
    let rotate_labels = label_px > group_px;
    let x_label_area = if rotate_labels {
        u32::try_from(label_px + 30).unwrap_or(560).min(560)
    } else {
        50
    };
    // Legend: entries left to right, wrapping at the chart's width.
    let mut legend_lines: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = 0;
    let entries = plot.series.len() + usize::from(plot.ratio);
    for k in 0..entries {
        let name_len = if k < plot.series.len() {
            t.columns[plot.series[k]].chars().count()
        } else {
            RATIO_LINE_LABEL.len()
        };
        let w = name_len * CHAR_PX + 40;
        if used + w > width - 40 && used > 0 {
            legend_lines.push(Vec::new());
            used = 0;
        }
        used += w;
        if let Some(line) = legend_lines.last_mut() {
            line.push(k);
        }
    }
    Layout {
        width: u32::try_from(width).unwrap_or(1800),
        rotate_labels,
        x_label_area,
        legend_lines,
    }
}

const RATIO_LINE_LABEL: &str = "1.0 (no difference)";

fn draw_bars(t: &Table, plot: &Plot, path: &Path) -> DrawResult {
    use plotters::prelude::*;
    let l = layout(t, plot);
    let legend_px = 16 + 22 * u32::try_from(l.legend_lines.len()).unwrap_or(1);
    let root =
        SVGBackend::new(path, (l.width, CHART_PX + l.x_label_area + legend_px)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(CHART_PX + l.x_label_area);
    let groups = t.rows.len().max(1);
    // Every plotted value and interval end, for the axis range.
    let mut values: Vec<f64> = t
        .rows
        .iter()
        .flat_map(|r| plot.series.iter().filter_map(|&c| r.get(c)))
        .flat_map(|c| {
            c.value()
                .into_iter()
                .chain(c.interval().into_iter().flatten())
        })
        .collect();
    if plot.ratio {
        values.push(1.0);
    }
    let max = values.iter().copied().fold(0.0f64, f64::max).max(1e-9) * 1.15;
    let min_pos = values
        .iter()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min);
    let mut builder = ChartBuilder::on(&upper);
    builder
        .caption(&t.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(l.x_label_area)
        .y_label_area_size(80);
    if plot.log_y {
        let floor = if min_pos == f64::MAX {
            1e-3
        } else {
            min_pos / 2.0
        };
        let mut chart = builder.build_cartesian_2d(0.0..groups as f64, (floor..max).log_scale())?;
        let anchors = fill(&mut chart, t, plot, &l, floor)?;
        turned_labels(&upper, t, plot, &anchors)?;
    } else {
        let mut chart = builder.build_cartesian_2d(0.0..groups as f64, 0.0..max)?;
        let anchors = fill(&mut chart, t, plot, &l, 0.0)?;
        turned_labels(&upper, t, plot, &anchors)?;
    }
    legend(&lower, t, plot, &l)?;
    root.present()?;
    Ok(())
}

/// Category labels too long to sit side by side, turned 90 degrees and hung from the x axis
/// at `anchors` (pixel positions under each group).
fn turned_labels(
    area: &plotters::drawing::DrawingArea<
        plotters::prelude::SVGBackend<'_>,
        plotters::coord::Shift,
    >,
    t: &Table,
    plot: &Plot,
    anchors: &[(i32, i32)],
) -> DrawResult {
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let style = TextStyle::from(
        ("sans-serif", 12)
            .into_font()
            .transform(FontTransform::Rotate90),
    )
    .pos(Pos::new(HPos::Left, VPos::Center));
    for (row, &(x, y)) in t.rows.iter().zip(anchors) {
        area.draw(&Text::new(plot.label(row), (x, y + 8), style.clone()))?;
    }
    Ok(())
}

/// Draws the mesh with both axis titles, one group of bars per row (bars start at `y0`), the
/// error bars and the 1.0 line of ratio plots. Returns, when the category labels are to be
/// turned, the pixel under each group where its label hangs (else none: the mesh drew them).
fn fill<'a, Y>(
    chart: &mut plotters::chart::ChartContext<
        'a,
        plotters::prelude::SVGBackend<'a>,
        plotters::coord::cartesian::Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    t: &Table,
    plot: &Plot,
    l: &Layout,
    y0: f64,
) -> Result<Vec<(i32, i32)>, Box<dyn std::error::Error>>
where
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    use plotters::prelude::*;
    let labels: Vec<String> = t.rows.iter().map(|r| plot.label(r)).collect();
    let x_fmt = |x: &f64| {
        let i = x.floor();
        if (x - i - 0.5).abs() < 1e-6 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let y_desc = if plot.log_y {
        format!("{} (log scale)", plot.y_label)
    } else {
        plot.y_label.clone()
    };
    chart
        .configure_mesh()
        .x_labels(if l.rotate_labels {
            0
        } else {
            labels.len() * 2 + 1
        })
        .x_label_formatter(&x_fmt)
        .disable_x_mesh()
        .x_desc(plot.x_label.as_str())
        .y_desc(y_desc)
        .draw()?;
    let w = 0.8 / plot.series.len().max(1) as f64;
    for (k, &col) in plot.series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let cells = t.rows.iter().enumerate().filter_map(|(g, row)| {
            let cell = row.get(col)?;
            Some((
                g as f64 + 0.1 + k as f64 * w,
                cell.value()?,
                cell.interval(),
            ))
        });
        let bars: Vec<_> = cells.collect();
        chart
            .draw_series(bars.iter().map(|&(x0, v, _)| {
                Rectangle::new([(x0, y0), (x0 + w * 0.9, v)], color.filled())
            }))?;
        // Error bars: the 95% interval, with caps.
        chart.draw_series(bars.iter().filter_map(|&(x0, _, ci)| {
            let [lo, hi] = ci?;
            let (mid, cap) = (x0 + w * 0.45, w * 0.2);
            Some(PathElement::new(
                vec![
                    (mid - cap, lo.max(y0)),
                    (mid + cap, lo.max(y0)),
                    (mid, lo.max(y0)),
                    (mid, hi),
                    (mid - cap, hi),
                    (mid + cap, hi),
                ],
                BLACK.stroke_width(1),
            ))
        }))?;
    }
    if plot.ratio {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 1.0), (t.rows.len().max(1) as f64, 1.0)],
            BLACK.stroke_width(2),
        )))?;
    }
    Ok(if l.rotate_labels {
        (0..t.rows.len())
            .map(|g| chart.backend_coord(&(g as f64 + 0.5, y0)))
            .collect()
    } else {
        Vec::new()
    })
}

/// The legend, in its own strip under the chart so that it covers no data.
fn legend(
    area: &plotters::drawing::DrawingArea<
        plotters::prelude::SVGBackend<'_>,
        plotters::coord::Shift,
    >,
    t: &Table,
    plot: &Plot,
    l: &Layout,
) -> DrawResult {
    use plotters::prelude::*;
    for (line_no, line) in l.legend_lines.iter().enumerate() {
        let y = 8 + 22 * i32::try_from(line_no).unwrap_or(0);
        let mut x = 90;
        for &k in line {
            let (name, is_line) = if k < plot.series.len() {
                (t.columns[plot.series[k]].as_str(), false)
            } else {
                (RATIO_LINE_LABEL, true)
            };
            let color = PALETTE[k % PALETTE.len()];
            if is_line {
                area.draw(&PathElement::new(
                    vec![(x, y + 7), (x + 14, y + 7)],
                    BLACK.stroke_width(2),
                ))?;
            } else {
                area.draw(&Rectangle::new([(x, y), (x + 14, y + 14)], color.filled()))?;
            }
            area.draw(&Text::new(
                name.to_string(),
                (x + 20, y),
                ("sans-serif", 12),
            ))?;
            x += i32::try_from(name.chars().count() * CHAR_PX + 40).unwrap_or(200);
        }
    }
    Ok(())
}

/// Where and from what a report was made: printed at its top.
#[derive(Clone, Debug, Serialize)]
pub struct Header {
    /// When it finished, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    /// The commit measured (`git rev-parse HEAD`), marked when the tree had changes.
    pub commit: String,
    /// `rustc -V` of the compiler that built the report.
    pub toolchain: String,
    /// The CPU's full brand string.
    pub cpu: String,
    /// The CPU the measuring thread was pinned to (none if the kernel refused).
    pub pinned_cpu: Option<usize>,
    /// The report's arguments.
    pub arguments: String,
}

/// A whole report: every section's tables, with when and where it ran.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Where and from what it was made.
    pub header: Header,
    /// Whether `--quick` shrank the workloads.
    pub quick: bool,
    /// The headline ratios of each run (one list per `--repeat`); the tables are the last
    /// run's.
    pub runs: Vec<Vec<Headline>>,
    /// Sections in order: (name, tables).
    pub sections: Vec<(String, Vec<Table>)>,
}

/// A headline ratio may differ by less than this between two runs (in percent).
pub const REPEAT_TOLERANCE_PCT: f64 = 10.0;

impl Report {
    /// The whole report as Markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let h = &self.header;
        let mut s = String::from("# Report\n\n");
        let _ = write!(
            s,
            "| | |\n|---|---|\n| date | {} |\n| commit | {} |\n| toolchain | {} |\n\
             | CPU | {} |\n| measuring thread pinned to | {} |\n| arguments | {} |\n\n",
            h.date,
            h.commit,
            h.toolchain,
            h.cpu,
            h.pinned_cpu
                .map_or_else(|| "not pinned".into(), |c| format!("CPU {c}")),
            if h.arguments.is_empty() {
                "(none)"
            } else {
                &h.arguments
            },
        );
        s.push_str(READING);
        if self.quick {
            s.push_str(
                "\n**--quick**: small workloads and few samples; do not quote these figures.\n",
            );
        }
        s.push('\n');
        s.push_str(&self.headline_table().markdown(false));
        for (name, tables) in &self.sections {
            let _ = write!(s, "\n## {name}\n\n");
            for t in tables {
                s.push_str(&t.markdown(true));
                s.push('\n');
            }
        }
        s
    }

    /// The largest difference, in percent, between a later run's median of the headline
    /// `name` and the first run's; NaN when a run lacks it.
    #[must_use]
    pub fn repeat_difference(&self, name: &str) -> f64 {
        let median = |run: &Vec<Headline>| {
            run.iter()
                .find(|h| h.name == name)
                .map_or(f64::NAN, |h| h.ratio.median)
        };
        let Some(first) = self.runs.first().map(median) else {
            return f64::NAN;
        };
        self.runs[1..]
            .iter()
            .map(|r| (median(r) / first - 1.0).abs() * 100.0)
            .fold(
                0.0,
                |worst, d| if d.is_nan() { f64::NAN } else { worst.max(d) },
            )
    }

    /// The headlines whose figure moved by [`REPEAT_TOLERANCE_PCT`] or more between runs,
    /// with the difference.
    #[must_use]
    pub fn unstable_headlines(&self) -> Vec<(String, f64)> {
        self.runs
            .last()
            .into_iter()
            .flatten()
            .map(|h| (h.name.clone(), self.repeat_difference(&h.name)))
            .filter(|(_, d)| d.is_nan() || *d >= REPEAT_TOLERANCE_PCT)
            .collect()
    }

    /// The headline ratios of the last run and, with several runs, how far each run's figure
    /// is from the first run's.
    #[must_use]
    pub fn headline_table(&self) -> Table {
        let repeats = self.runs.len();
        let mut columns = vec!["headline ratio".to_string()];
        if repeats > 1 {
            columns.extend((1..=repeats).map(|r| format!("run {r}")));
            columns.push("largest difference to run 1".into());
            columns.push(format!("within {REPEAT_TOLERANCE_PCT:.0}%"));
            columns.push("why not".into());
        } else {
            columns.push("median [95% interval]".into());
        }
        let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
        let mut t = Table::new("headlines", "Headline ratios", &cols);
        let Some(last) = self.runs.last() else {
            return t;
        };
        for h in last {
            let mut row = vec![Cell::text(&h.name)];
            if repeats > 1 {
                let figures: Vec<Option<Estimate>> = self
                    .runs
                    .iter()
                    .map(|r| r.iter().find(|o| o.name == h.name).map(|o| o.ratio))
                    .collect();
                row.extend(
                    figures
                        .iter()
                        .map(|f| f.map_or_else(|| Cell::text("-"), |e| Cell::text(ratio_text(e)))),
                );
                let diff = self.repeat_difference(&h.name);
                row.push(Cell::num(diff, 1, "%"));
                let stable = diff < REPEAT_TOLERANCE_PCT;
                row.push(Cell::text(if stable { "yes" } else { "NO" }));
                row.push(Cell::text(if stable {
                    String::new()
                } else {
                    why_unstable(&figures)
                }));
            } else {
                row.push(Cell::text(ratio_text(h.ratio)));
            }
            t.row(row);
        }
        t.note(
            "The figures a reader would quote, each from the section named in it. A ratio \
             above 1 means the first-named path is faster (or, for instruction counts, \
             executes fewer instructions).",
        );
        if repeats > 1 {
            t.note(format!(
                "`--repeat {repeats}`: every section ran {repeats} times in this one \
                 invocation; the tables below are the last run's. A difference of \
                 {REPEAT_TOLERANCE_PCT:.0}% or more means that figure did not reproduce on \
                 this machine during this run (see the section's notes for why it is noisy)."
            ));
        }
        t
    }
}

/// Why a headline ratio moved between runs, from its intervals: overlapping intervals mean the
/// figure's own noise is as wide as the difference; disjoint ones that the machine changed
/// between the runs.
fn why_unstable(figures: &[Option<Estimate>]) -> String {
    let known: Vec<Estimate> = figures.iter().flatten().copied().collect();
    if known.len() < figures.len() {
        return "missing from a run (see that run's section output)".into();
    }
    if known.iter().all(|e| e.lo == e.hi) {
        return "an exact count that changed: the measured binary or its input changed".into();
    }
    let overlap = known.iter().map(|e| e.lo).fold(f64::MIN, f64::max)
        <= known.iter().map(|e| e.hi).fold(f64::MAX, f64::min);
    if overlap {
        "the runs' 95% intervals overlap: the difference is within this figure's own noise \
         (a wide interval: see the section's note)"
            .into()
    } else {
        "the runs' 95% intervals do not overlap: the machine changed between the runs (a \
         shared host: other tenants' memory bandwidth and CPU time)"
            .into()
    }
}

/// How to read the figures: printed under the header.
const READING: &str = "\
How to read it. Every timed figure is measured here, in one run, with the paths it compares \
run once per round in a shuffled order on the same memory (so drift on a shared host hits \
them alike), the measuring thread pinned to one CPU, and each cell sampled for a time budget \
(at least 10 rounds) rather than a fixed count. A figure is the **median** of its samples; \
`±N%` is the larger distance from the median to an end of its **95% confidence interval** \
(distribution-free, from order statistics), whose ends are in `report.json` and drawn as \
error bars. A ratio `1.23x [1.18, 1.30]` is the median of the per-round ratios with its \
interval. Goals are judged on the interval: **met** when all of it meets the target, **not \
met** when none of it does, **inconclusive** when it straddles the target. Instruction \
counts come from `valgrind --tool=callgrind` and are exact (the same on every run), so they \
judge CPU-bound goals where wall time is noise. Figures from the mailing-list threads are \
quoted as published, on their authors' machines.\n";
