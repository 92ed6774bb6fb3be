//! One SVG bar chart per plotted table (plotters): labels and legend laid out from the
//! text they hold, error bars from the intervals.

use super::*;
use std::path::Path;

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

pub(super) fn draw_bars(t: &Table, plot: &Plot, path: &Path) -> DrawResult {
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
