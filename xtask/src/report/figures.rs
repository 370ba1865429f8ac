//! Which plots a run gets. A figure is a value, [`Figure`]: its file name, its title and
//! axes, and where its lines come from ([`Data`]: a measure of the rows against x, the latency
//! spectra or the CPU over time at a series' last point, lines drawn already, or a ranked dot
//! plot of one point, a row per server); each suite
//! lists its figures in [`of_suite`] (`lists`), and one function, [`draw_figure`], draws any
//! of them as SVG into `plots/`. A new suite's figure is one more value in its list. The
//! scaling suite's are in `scaling`, the capacity suite's curves in `capacity`, the crossover
//! figures of issue 62's workloads in `crossover`.
//!
//! It may call the plan layer's `suites`, `servers` and `capacity`, the run layer's `histogram`, the record
//! layer's `row` and `stats`, and the report layer's `plots`, `ranked` and `crossover`.

pub(crate) mod capacity;
mod crossover;
mod lists;
pub(crate) mod scaling;

pub(crate) use crossover::swaps as crossover_swaps;
pub(crate) use lists::of_suite;

use std::path::Path;

use anyhow::{Context, Result};

use crate::plan::suites::Suite;
use crate::record::row::{Row, points_of, servers};
use crate::report::plots::{self, Bound, Line, Plot, Scale};
use crate::report::ranked::{self, Dot, Ranked};

/// The interval of a row's throughput, for error bars.
pub(crate) fn tp_ci(r: &Row) -> Option<(f64, f64)> {
    r.throughput_per_sec_ci_low
        .zip(r.throughput_per_sec_ci_high)
}

/// The interval of a row's CPU per request, for error bars.
pub(crate) fn cpu_ci(r: &Row) -> Option<(f64, f64)> {
    r.cpu_us_per_req_ci_low.zip(r.cpu_us_per_req_ci_high)
}

/// One line per server of `f` against `x`, for a suite's series, with an error bar from
/// `ci` where it has one.
pub(crate) fn lines_with(
    rows: &[Row],
    suite: &str,
    series: &str,
    x: impl Fn(&Row) -> f64,
    f: impl Fn(&Row) -> Option<f64>,
    ci: impl Fn(&Row) -> Option<(f64, f64)>,
) -> Vec<Line> {
    servers(rows)
        .into_iter()
        .map(|s| {
            let mine = || {
                rows.iter()
                    .filter(|r| r.suite == suite && r.series == series && r.server == s && r.ok > 0)
            };
            let mut points: Vec<(f64, f64, bool)> = mine()
                .filter_map(|r| Some((x(r), f(r)?, r.client_bound)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let bars = mine()
                .filter(|r| f(r).is_some())
                .filter_map(|r| ci(r).map(|(lo, hi)| (x(r), lo, hi)))
                .collect();
            Line {
                name: s,
                points,
                markers: true,
                bars,
            }
        })
        .filter(|l| !l.points.is_empty())
        .collect()
}

/// The latency spectrum of each server at one point, from the summed histograms.
pub(crate) fn spectra(rows: &[Row], run_dir: &Path, suite: &str, point: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.suite == suite && r.point == point && r.ok > 0)
    {
        let Some(rel) = &r.hist else { continue };
        let Ok(bytes) = std::fs::read(run_dir.join(rel)) else {
            continue;
        };
        let Ok(h) = crate::run::histogram::decode_histogram(&bytes) else {
            continue;
        };
        // A spectrum has too many points for markers: the legend says client-bound instead.
        out.push(Line {
            name: if r.client_bound {
                format!("{} † (client-bound)", r.server)
            } else {
                r.server.clone()
            },
            points: plots::spectrum(&h),
            markers: false,
            bars: Vec::new(),
        });
    }
    out
}

pub(crate) fn cpu_over_time(rows: &[Row], suite: &str, point: &str) -> Vec<Line> {
    rows.iter()
        .filter(|r| r.suite == suite && r.point == point && !r.cpu_series.is_empty())
        .map(|r| Line {
            name: r.server.clone(),
            points: r.cpu_series.iter().map(|&(t, c)| (t, c, false)).collect(),
            markers: false,
            bars: Vec::new(),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Figures.

/// A plot written into the run directory, for the report to show.
#[derive(Debug, Clone)]
pub(crate) struct PlotFile {
    pub(crate) suite: String,
    pub(crate) file: String,
    pub(crate) caption: String,
}

/// Where a figure's lines come from.
#[derive(Debug)]
pub(crate) enum Data {
    /// One line per server: `y` of the rows of `series` against `x`, with `ci` as error bars.
    Lines {
        series: String,
        x: fn(&Row) -> f64,
        y: fn(&Row) -> Option<f64>,
        ci: fn(&Row) -> Option<(f64, f64)>,
    },
    /// The latency spectrum of each server at the last point of `series`.
    Spectra { series: String },
    /// The server CPU over time of each server at the last point of `series`.
    CpuOverTime { series: String },
    /// Lines made already (a linear ideal, a bound drawn as a line).
    Drawn(Vec<Line>),
    /// A ranked dot plot of the point `at` of `series` (`{point}` in the title is its
    /// label): a row per server, `y` its dot and `ci` its bar, the lowest first when
    /// `lowest_first` (a cost), the floor's rows marked. What a line over a few x values
    /// becomes when fifteen servers would tangle it. The figure's x axis is unused (`y` is
    /// drawn along it), its y description names the measure.
    RankedDots {
        series: String,
        at: PointAt,
        y: fn(&Row) -> Option<f64>,
        ci: fn(&Row) -> Option<(f64, f64)>,
        lowest_first: bool,
    },
}

/// One figure of a suite, as data: drawn by [`draw_figure`] into
/// `plots/<suite>-<name>.svg`, or left out when it has no line.
#[derive(Debug)]
pub(crate) struct Figure {
    /// The file's name after the suite's.
    pub(crate) name: String,
    /// The title and the report's caption; `{point}` stands for the label of the series'
    /// last point (in a figure of spectra or CPU over time).
    pub(crate) title: String,
    pub(crate) x: String,
    pub(crate) y: String,
    pub(crate) x_scale: Scale,
    pub(crate) y_scale: Scale,
    pub(crate) data: Data,
    pub(crate) bounds: Vec<Bound>,
}

impl Figure {
    /// A figure without bounds.
    pub(crate) fn new(
        name: impl Into<String>,
        title: impl Into<String>,
        (x, x_scale): (&str, Scale),
        (y, y_scale): (&str, Scale),
        data: Data,
    ) -> Figure {
        Figure {
            name: name.into(),
            title: title.into(),
            x: x.into(),
            y: y.into(),
            x_scale,
            y_scale,
            data,
            bounds: Vec::new(),
        }
    }

    /// The figure with a horizontal line across it.
    pub(crate) fn bound(mut self, b: Bound) -> Figure {
        self.bounds.push(b);
        self
    }
}

/// The lines of `data` from the rows of `suite`, with the label of the point they are at
/// (for a figure of one point); `None` when the series has no point.
fn lines_of(data: Data, rows: &[Row], run_dir: &Path, suite: &str) -> Option<(Vec<Line>, String)> {
    let last_point = |series: &str| {
        points_of(rows, suite, series)
            .last()
            .map(|p| (p.0.clone(), p.1.clone()))
    };
    Some(match data {
        Data::Lines { series, x, y, ci } => {
            (lines_with(rows, suite, &series, x, y, ci), String::new())
        }
        Data::Spectra { series } => {
            let (id, label) = last_point(&series)?;
            (spectra(rows, run_dir, suite, &id), label)
        }
        Data::CpuOverTime { series } => {
            let (id, label) = last_point(&series)?;
            (cpu_over_time(rows, suite, &id), label)
        }
        Data::Drawn(lines) => (lines, String::new()),
        Data::RankedDots { .. } => return None,
    })
}

/// Which point of a series a ranked dot plot shows, in the series' x order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PointAt {
    Nth(usize),
    /// The last (the most connections).
    Last,
}

/// The rows of a ranked dot plot: each server's `y` at the point `at` of `series` of
/// `suite`, with the point's label; `None` when the series has no such point.
fn dots_of(
    rows: &[Row],
    suite: &str,
    (series, at): (&str, PointAt),
    y: fn(&Row) -> Option<f64>,
    ci: fn(&Row) -> Option<(f64, f64)>,
) -> Option<(Vec<Dot>, String)> {
    let points = points_of(rows, suite, series);
    let (id, label, _) = match at {
        PointAt::Nth(i) => points.into_iter().nth(i)?,
        PointAt::Last => points.into_iter().last()?,
    };
    let dots = rows
        .iter()
        .filter(|r| r.suite == suite && r.point == id && r.ok > 0)
        .filter_map(|r| {
            Some(Dot {
                name: r.server.clone(),
                value: y(r)?,
                interval: ci(r),
                client_bound: r.client_bound,
                floor: crate::plan::servers::is_floor(&r.server),
            })
        })
        .collect();
    Some((dots, label))
}

/// Draws a ranked dot plot figure, unless its point has no row.
fn draw_ranked(
    figure: Figure,
    suite: &str,
    rows: &[Row],
    run_dir: &Path,
) -> Result<Option<PlotFile>> {
    let Data::RankedDots {
        series,
        at,
        y,
        ci,
        lowest_first,
    } = figure.data
    else {
        return Ok(None);
    };
    let Some((dots, point)) = dots_of(rows, suite, (&series, at), y, ci) else {
        return Ok(None);
    };
    if dots.is_empty() {
        return Ok(None);
    }
    let plot = Ranked {
        title: figure.title.replace("{point}", &point),
        x_desc: figure.y,
        dots,
        lowest_first,
    };
    let file = format!("plots/{suite}-{}.svg", figure.name);
    ranked::draw(&plot, &run_dir.join(&file))?;
    Ok(Some(PlotFile {
        suite: suite.to_string(),
        file,
        caption: plot.title,
    }))
}

/// Draws `figure` of `suite` into `<run_dir>/plots/`, unless it has no line.
pub(crate) fn draw_figure(
    figure: Figure,
    suite: &str,
    rows: &[Row],
    run_dir: &Path,
) -> Result<Option<PlotFile>> {
    if matches!(figure.data, Data::RankedDots { .. }) {
        return draw_ranked(figure, suite, rows, run_dir);
    }
    let Some((lines, point)) = lines_of(figure.data, rows, run_dir, suite) else {
        return Ok(None);
    };
    if lines.is_empty() {
        return Ok(None);
    }
    let plot = Plot {
        title: figure.title.replace("{point}", &point),
        x_desc: figure.x,
        y_desc: figure.y,
        x_scale: figure.x_scale,
        y_scale: figure.y_scale,
        lines,
        bounds: figure.bounds,
        // Spectra rise to the right and leave the bottom right empty.
        legend_low: figure.x_scale == Scale::Nines,
    };
    let file = format!("plots/{suite}-{}.svg", figure.name);
    // Each server keeps its colour and marker in every figure of the run.
    let order = crate::record::row::servers(rows);
    plots::draw(&plot, &order, &run_dir.join(&file))?;
    Ok(Some(PlotFile {
        suite: suite.to_string(),
        file,
        caption: plot.title,
    }))
}

/// Draws every figure the rows allow into `<run_dir>/plots/`: the figures of each suite of
/// the rows, in `Suite` order.
pub(crate) fn draw_plots(run_dir: &Path, rows: &[Row], workers: usize) -> Result<Vec<PlotFile>> {
    std::fs::create_dir_all(run_dir.join("plots")).context("creating plots/")?;
    let mut out = Vec::new();
    for suite in Suite::ALL
        .into_iter()
        .filter(|s| rows.iter().any(|r| r.suite == s.name()))
    {
        for figure in of_suite(suite, rows, workers) {
            out.extend(draw_figure(figure, suite.name(), rows, run_dir)?);
        }
    }
    Ok(out)
}
