//! SVG plots of a run: lines per server against connections (log axis), latency percentile
//! spectra, CPU over time. A client-bound point is drawn hollow on every plot, and said so in
//! the plot's legend; a point measured over repeats carries an error bar, its median's
//! confidence interval.
//!
//! Log axes are drawn by plotting log10 of the values on a linear axis and labelling the
//! whole powers of ten, so that every plot goes through one code path.
//!
//! It may call nothing else of xtask.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// One line of a plot.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub(crate) name: String,
    /// `(x, y, client_bound)`.
    pub(crate) points: Vec<(f64, f64, bool)>,
    /// Draw a marker at each point (a time series has too many for that).
    pub(crate) markers: bool,
    /// Error bars, `(x, low, high)`: the interval of the median at x.
    pub(crate) bars: Vec<(f64, f64, f64)>,
}

/// A horizontal line drawn across the plot, such as a Little's law bound.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    pub(crate) y: f64,
    pub(crate) label: String,
}

/// How an axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    Linear,
    Log,
    /// Latency percentiles: x is the number of nines, -log10(1 - q).
    Nines,
}

/// A plot, ready to draw.
#[derive(Debug, Clone)]
pub(crate) struct Plot {
    pub(crate) title: String,
    pub(crate) x_desc: String,
    pub(crate) y_desc: String,
    pub(crate) x_scale: Scale,
    pub(crate) y_scale: Scale,
    pub(crate) lines: Vec<Line>,
    pub(crate) bounds: Vec<Bound>,
    /// Put the legend bottom right (where rising curves leave room) instead of top right.
    pub(crate) legend_low: bool,
}

/// Distinct colours, one per server, in the order the servers ran; past them, lines are
/// dashed and their markers another shape ([`Style`]).
const COLOURS: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(255, 187, 120),
];

fn to_axis(scale: Scale, v: f64) -> Option<f64> {
    match scale {
        Scale::Linear => v.is_finite().then_some(v),
        Scale::Log | Scale::Nines => (v > 0.0 && v.is_finite()).then(|| v.log10()),
    }
}

/// The axis range over `values` (already mapped): whole powers of ten on log axes, from zero
/// on linear ones.
fn range(scale: Scale, values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    match scale {
        Scale::Linear => {
            let lo = lo.min(0.0);
            let hi = if hi <= lo {
                lo + 1.0
            } else {
                hi + (hi - lo) * 0.08
            };
            (lo, hi)
        }
        Scale::Log | Scale::Nines => {
            let (lo, hi) = (lo.floor(), hi.ceil());
            if hi <= lo {
                (lo - 0.5, hi + 0.5)
            } else {
                (lo, hi)
            }
        }
    }
}

/// A tick label: powers of ten on log axes (other ticks unlabelled), percentiles for nines.
fn label(scale: Scale, v: f64) -> String {
    let whole = (v - v.round()).abs() < 1e-6;
    match scale {
        Scale::Linear => {
            if v.abs() >= 10_000.0 {
                format!("{:.0}k", v / 1000.0)
            } else if (v - v.round()).abs() < 1e-9 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        }
        Scale::Log if whole => human(10f64.powf(v.round())),
        Scale::Nines if whole => {
            let n = v.round() as i32;
            if n <= 0 {
                "0%".to_string()
            } else {
                let q = 100.0 - 100.0 * 10f64.powi(-n);
                format!("{}%", trim(q))
            }
        }
        Scale::Log | Scale::Nines => String::new(),
    }
}

fn trim(q: f64) -> String {
    let s = format!("{q:.5}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn human(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

/// The chart every plot is drawn on: log axes are log10 values on linear ones.
type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// How a drawing error is told: with the file it was for.
type Fail<'a> = &'a dyn Fn(&dyn std::fmt::Debug) -> anyhow::Error;

/// The shape of a line's markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    Circle,
    Triangle,
    Square,
}

/// How a server's line looks: a colour and a marker shape, dashed past the first colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Style {
    pub(crate) colour: (u8, u8, u8),
    pub(crate) shape: Shape,
    pub(crate) dashed: bool,
}

/// The style of the `k`th server of a run: the colours in turn, then again dashed with
/// triangles, then with squares: 36 servers before a colour and shape repeat.
pub(crate) fn style(k: usize) -> Style {
    let RGBColor(r, g, b) = COLOURS[k % COLOURS.len()];
    let shape = [Shape::Circle, Shape::Triangle, Shape::Square][k / COLOURS.len() % 3];
    Style {
        colour: (r, g, b),
        shape,
        dashed: k >= COLOURS.len(),
    }
}

/// The style of the line named `name`, `i`th of its plot: by the name's place in `order`
/// (the run's servers, in the order they ran), so that a server looks the same in every
/// figure of a run whichever others the figure holds; a name not in it comes after them.
pub(crate) fn style_of(order: &[String], name: &str, i: usize) -> Style {
    style(
        order
            .iter()
            .position(|s| s == name)
            .unwrap_or(order.len() + i),
    )
}

/// Draws `plot` into an SVG file at `path`: the axes, each line (styled by its name's place
/// in `order`: [`style_of`]), the bounds, the legend.
pub(crate) fn draw(plot: &Plot, order: &[String], path: &Path) -> Result<()> {
    let err = |e: &dyn std::fmt::Debug| anyhow!("drawing {}: {e:?}", path.display());
    let mapped: Vec<Vec<(f64, f64, bool)>> = plot
        .lines
        .iter()
        .map(|l| {
            l.points
                .iter()
                .filter_map(|&(x, y, cb)| {
                    Some((to_axis(plot.x_scale, x)?, to_axis(plot.y_scale, y)?, cb))
                })
                .collect()
        })
        .collect();
    let (x0, x1) = range(plot.x_scale, mapped.iter().flatten().map(|p| p.0));
    let bound_ys: Vec<f64> = plot
        .bounds
        .iter()
        .filter_map(|b| to_axis(plot.y_scale, b.y))
        .collect();
    let (y0, y1) = range(
        plot.y_scale,
        mapped
            .iter()
            .flatten()
            .map(|p| p.1)
            .chain(bound_ys.iter().copied()),
    );

    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&plot.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| err(&e))?;
    draw_mesh(&mut chart, plot, (x0, x1), (y0, y1), &err)?;
    let mut any_client_bound = false;
    for (i, (line, pts)) in plot.lines.iter().zip(&mapped).enumerate() {
        let style = style_of(order, &line.name, i);
        draw_line(&mut chart, plot, style, line, pts, &err)?;
        any_client_bound |= pts.iter().any(|p| p.2);
    }
    for (b, &y) in plot.bounds.iter().zip(&bound_ys) {
        let grey = RGBColor(90, 90, 90);
        chart
            .draw_series(DashedLineSeries::new(
                [(x0, y), (x1, y)],
                8,
                6,
                grey.stroke_width(1),
            ))
            .map_err(|e| err(&e))?
            .label(b.label.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], grey.stroke_width(1)));
    }
    draw_legend(&mut chart, plot, any_client_bound, &err)?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// The axes, their descriptions and their labels (a log axis labelled at whole powers of
/// ten and the halves between).
fn draw_mesh(
    chart: &mut Chart<'_, '_>,
    plot: &Plot,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    err: Fail<'_>,
) -> Result<()> {
    let xs = plot.x_scale;
    let ys = plot.y_scale;
    let xf = move |v: &f64| label(xs, *v);
    let yf = move |v: &f64| label(ys, *v);
    let x_ticks = if xs == Scale::Linear {
        10
    } else {
        ((x1 - x0) as usize * 2).max(2) + 1
    };
    let y_ticks = if ys == Scale::Linear {
        10
    } else {
        ((y1 - y0) as usize * 2).max(2) + 1
    };
    chart
        .configure_mesh()
        .x_desc(&plot.x_desc)
        .y_desc(&plot.y_desc)
        .x_labels(x_ticks)
        .y_labels(y_ticks)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| err(&e))
}

/// A line of the plot in its [`Style`]: its stroke, its markers (hollow where
/// client-bound) and its error bars; `pts` are its points on the axes.
fn draw_line(
    chart: &mut Chart<'_, '_>,
    plot: &Plot,
    style: Style,
    line: &Line,
    pts: &[(f64, f64, bool)],
    err: Fail<'_>,
) -> Result<()> {
    let (r, g, b) = style.colour;
    let colour = RGBColor(r, g, b);
    let xy = pts.iter().map(|p| (p.0, p.1));
    let drawn = if style.dashed {
        chart.draw_series(DashedLineSeries::new(xy, 10, 5, colour.stroke_width(2)))
    } else {
        chart.draw_series(LineSeries::new(xy, colour.stroke_width(2)))
    };
    drawn
        .map_err(|e| err(&e))?
        .label(line.name.clone())
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
    if line.markers {
        let fill = |cb: bool| {
            if cb {
                colour.stroke_width(2)
            } else {
                colour.filled()
            }
        };
        let at = pts.iter().copied();
        match style.shape {
            Shape::Circle => {
                chart.draw_series(at.map(|(x, y, cb)| Circle::new((x, y), 4, fill(cb))))
            }
            Shape::Triangle => {
                chart.draw_series(at.map(|(x, y, cb)| TriangleMarker::new((x, y), 5, fill(cb))))
            }
            Shape::Square => chart.draw_series(at.map(|(x, y, cb)| {
                EmptyElement::at((x, y)) + Rectangle::new([(-4, -4), (4, 4)], fill(cb))
            })),
        }
        .map_err(|e| err(&e))?;
    }
    let bars: Vec<(f64, f64, f64, f64)> = line
        .bars
        .iter()
        .filter_map(|&(x, lo, hi)| {
            let x = to_axis(plot.x_scale, x)?;
            let (lo, hi) = (to_axis(plot.y_scale, lo)?, to_axis(plot.y_scale, hi)?);
            Some((x, lo, (lo + hi) / 2.0, hi))
        })
        .collect();
    chart
        .draw_series(bars.iter().map(|&(x, lo, mid, hi)| {
            ErrorBar::new_vertical(x, lo, mid, hi, colour.stroke_width(1), 8)
        }))
        .map_err(|e| err(&e))?;
    Ok(())
}

/// The legend, with an entry for hollow markers where a point was client-bound.
fn draw_legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    plot: &Plot,
    any_client_bound: bool,
    err: Fail<'_>,
) -> Result<()> {
    if any_client_bound {
        // A legend entry of its own, so the hollow markers explain themselves.
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(|e| err(&e))?
            .label("hollow marker: client-bound (loadgen saturated)")
            .legend(|(x, y)| Circle::new((x + 9, y), 4, BLACK.stroke_width(1)));
    }
    chart
        .configure_series_labels()
        .position(if plot.legend_low {
            SeriesLabelPosition::LowerRight
        } else {
            SeriesLabelPosition::UpperRight
        })
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))
}

/// The points of a latency spectrum from a histogram of nanoseconds: `(nines, µs)` from the
/// median up to the last recorded value.
pub(crate) fn spectrum(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64, bool)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    // Quantiles at tenths of a nine, up to what the count can resolve.
    let max_nines = (h.len() as f64).log10().clamp(1.0, 6.0);
    let mut n = 0.3; // about the median
    while n <= max_nines + 1e-9 {
        let q = 1.0 - 10f64.powf(-n);
        out.push((10f64.powf(n), h.value_at_quantile(q) as f64 / 1000.0, false));
        n += 0.1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(label(Scale::Log, 3.0), "1k");
        assert_eq!(label(Scale::Log, 4.0), "10k");
        assert_eq!(label(Scale::Log, 0.0), "1");
        assert_eq!(label(Scale::Log, 0.5), "");
        assert_eq!(label(Scale::Nines, 2.0), "99%");
        assert_eq!(label(Scale::Nines, 5.0), "99.999%");
        assert_eq!(label(Scale::Linear, 25.0), "25");
        assert_eq!(range(Scale::Log, [0.0, 3.0].into_iter()), (0.0, 3.0));
        assert_eq!(range(Scale::Log, [2.2].into_iter()), (2.0, 3.0));
        assert_eq!(range(Scale::Log, [2.0].into_iter()), (1.5, 2.5));
    }

    #[test]
    fn draws_an_svg() {
        let dir = std::env::temp_dir().join(format!("xtask-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let plot = Plot {
            title: "echo".into(),
            x_desc: "connections".into(),
            y_desc: "echoes/s".into(),
            x_scale: Scale::Log,
            y_scale: Scale::Linear,
            lines: vec![Line {
                name: "threads".into(),
                points: vec![(1.0, 10.0, false), (10.0, 50.0, false), (100.0, 40.0, true)],
                markers: true,
                bars: vec![(10.0, 45.0, 55.0)],
            }],
            bounds: vec![Bound {
                y: 60.0,
                label: "bound".into(),
            }],
            legend_low: true,
        };
        draw(&plot, &["threads".to_string()], &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("threads") && svg.contains("client-bound"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The sixteen servers of the default run, as the conformance list names them.
    fn sixteen() -> Vec<String> {
        conformance::SERVERS
            .iter()
            .filter_map(|s| s.bench.filter(|b| b.default).map(|b| b.name.to_string()))
            .collect()
    }

    #[test]
    fn every_default_server_has_a_style_of_its_own_in_every_figure() {
        let order = sixteen();
        assert_eq!(order.len(), 16, "{order:?}");
        let styles: std::collections::HashSet<(u8, u8, u8, Shape)> = order
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let st = style_of(&order, s, i);
                (st.colour.0, st.colour.1, st.colour.2, st.shape)
            })
            .collect();
        assert_eq!(styles.len(), 16, "two servers share a colour and a marker");
        // A figure that holds some of the servers only (capacity's kv, say) styles each
        // as the run does, whatever its place among the figure's lines.
        for (i, s) in order.iter().enumerate().rev() {
            assert_eq!(style_of(&order, s, 0), style(i));
            assert_eq!(style_of(&order, s, 7), style(i));
        }
        // A line the run's order lacks comes after them all.
        assert_eq!(style_of(&order, "ext:mine", 2), style(18));
    }
}
