//! Which plots a run gets. A figure is a value, [`Figure`]: its file name, its title and
//! axes, and where its lines come from ([`Data`]: a measure of the rows against x, the latency
//! spectra or the CPU over time at a series' last point, or lines drawn already); each suite
//! lists its figures in [`of_suite`], and one function, [`draw_figure`], draws any of them as
//! SVG into `plots/`. A new suite's figure is one more value in its list. The scaling suite's
//! are in `scaling`.
//!
//! It may call the plan layer's `suites`, the run layer's `histogram`, the record layer's `row`
//! and `stats`, and the report layer's `plots`.

pub(crate) mod scaling;

use std::path::Path;

use anyhow::{Context, Result};

use crate::plan::suites::{self, Suite};
use crate::record::row::{Row, points_of, servers};
use crate::report::plots::{self, Bound, Line, Plot, Scale};

/// The interval of a row's throughput, for error bars.
fn tp_ci(r: &Row) -> Option<(f64, f64)> {
    r.throughput_per_sec_ci_low
        .zip(r.throughput_per_sec_ci_high)
}

/// The interval of a row's CPU per request, for error bars.
fn cpu_ci(r: &Row) -> Option<(f64, f64)> {
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

/// A measure of the rows of `series` against their x, with no error bars.
pub(crate) fn measure(series: &str, y: fn(&Row) -> Option<f64>) -> Data {
    Data::Lines {
        series: series.into(),
        x: |r| r.x,
        y,
        ci: |_| None,
    }
}

/// Throughput against the series' x, with its intervals.
fn throughput(series: &str) -> Data {
    Data::Lines {
        series: series.into(),
        x: |r| r.x,
        y: |r| r.throughput_per_sec,
        ci: tp_ci,
    }
}

/// Server CPU per request against the series' x, with its intervals.
fn cpu_per_request(series: &str) -> Data {
    Data::Lines {
        series: series.into(),
        x: |r| r.x,
        y: |r| r.cpu_us_per_req,
        ci: cpu_ci,
    }
}

fn spectra_at(series: &str) -> Data {
    Data::Spectra {
        series: series.into(),
    }
}

fn cpu_time_at(series: &str) -> Data {
    Data::CpuOverTime {
        series: series.into(),
    }
}

const CONNS: (&str, Scale) = ("connections", Scale::Log);
const PERCENTILE: (&str, Scale) = ("percentile", Scale::Nines);
const SECONDS: (&str, Scale) = (
    "seconds from the start of the measured window (negative: warmup)",
    Scale::Linear,
);
const CPU_PCT: (&str, Scale) = ("CPU (% of one core)", Scale::Linear);
const ECHOES: (&str, Scale) = ("echoes per second", Scale::Linear);
const CPU_PER_ECHO: (&str, Scale) = ("µs of CPU per echo (user + system)", Scale::Linear);
const CPU_PER_REQUEST: (&str, Scale) = ("µs of CPU per request (user + system)", Scale::Linear);

/// The quick suite's figures.
fn quick() -> Vec<Figure> {
    vec![
        Figure::new(
            "throughput",
            "Echo throughput, closed loop, 16 B",
            CONNS,
            ECHOES,
            throughput("closed"),
        ),
        Figure::new(
            "cpu-per-echo",
            "Server CPU per echo, closed loop",
            CONNS,
            CPU_PER_ECHO,
            cpu_per_request("closed"),
        ),
        Figure::new(
            "cpu-per-echo-open",
            "Server CPU per echo at equal load, open loop (bars: interval of the median)",
            ("echoes per second offered", Scale::Log),
            CPU_PER_ECHO,
            Data::Lines {
                series: "open".into(),
                x: |r| r.rate.unwrap_or(r.x),
                y: |r| r.cpu_us_per_req,
                ci: cpu_ci,
            },
        ),
        Figure::new(
            "cv",
            "Stability: coefficient of variation of server CPU (500 ms samples)",
            CONNS,
            ("CV of CPU (σ/μ)", Scale::Linear),
            measure("closed", |r| r.cpu_cv),
        ),
        Figure::new(
            "latency-closed",
            "Latency spectrum, closed loop, {point}",
            PERCENTILE,
            ("latency (µs)", Scale::Log),
            spectra_at("closed"),
        ),
        Figure::new(
            "latency-open",
            "Latency spectrum at equal load, open loop, {point}",
            PERCENTILE,
            ("latency from intended send (µs)", Scale::Log),
            spectra_at("open"),
        ),
        Figure::new(
            "cpu-time",
            "Server CPU over time, open loop, {point}",
            SECONDS,
            CPU_PCT,
            cpu_time_at("open"),
        ),
    ]
}

/// The emper-echo suite's figures (the io_uring paper's Figures 5 to 8); `workers` for the
/// Little's-law bound.
fn emper_echo(workers: usize) -> Vec<Figure> {
    let us = suites::EMPER_COMPUTE_US;
    let bound = suites::littles_law_bound(workers, us);
    let work = format!("work-{us}us");
    vec![
        Figure::new(
            "throughput",
            "Echo throughput (io_uring paper, Fig. 5)",
            CONNS,
            ECHOES,
            throughput("no-work"),
        ),
        Figure::new(
            "throughput-work",
            format!("Echo throughput with {us} µs of work per echo (Figs. 6, 7)"),
            CONNS,
            ECHOES,
            measure(&work, |r| r.throughput_per_sec),
        )
        .bound(Bound {
            y: bound,
            label: format!("Little's law bound: {workers} worker(s) / {us} µs = {bound:.0}/s"),
        }),
        Figure::new(
            "latency",
            "Latency spectrum at {point} (Fig. 8)",
            PERCENTILE,
            ("latency (µs)", Scale::Log),
            spectra_at("no-work"),
        ),
    ]
}

/// The chat-cpu suite's figures (the C-versus-Go paper's Figure 3).
fn chat_cpu() -> Vec<Figure> {
    vec![
        Figure::new(
            "cpu-mean",
            "Chat ingest at 1 Mbit/s per connection: server CPU (C-vs-Go paper, Fig. 3a)",
            CONNS,
            ("mean CPU (% of one core)", Scale::Linear),
            measure("ingest", |r| r.cpu_mean_pct),
        ),
        Figure::new(
            "cv",
            "Chat ingest: coefficient of variation of CPU (Fig. 3b)",
            CONNS,
            ("CV of CPU (σ/μ, 500 ms samples)", Scale::Linear),
            measure("ingest", |r| r.cpu_cv),
        ),
        Figure::new(
            "cpu-time",
            "Server CPU over time, {point}",
            SECONDS,
            CPU_PCT,
            cpu_time_at("ingest"),
        ),
    ]
}

/// The chat-room suite's figures: fan-out against the room size.
fn chat_room() -> Vec<Figure> {
    let room = ("room size", Scale::Log);
    vec![
        Figure::new(
            "delivery-p99",
            "Chat fan-out: delivery latency p99 (SAY to each member's MSG)",
            room,
            ("p99 delivery latency (µs)", Scale::Log),
            measure("rooms", |r| r.delivery_p99_us),
        ),
        Figure::new(
            "cpu-per-delivery",
            "Chat fan-out: server CPU per message sent",
            room,
            ("µs of CPU per SAY", Scale::Log),
            measure("rooms", |r| r.cpu_us_per_req),
        ),
    ]
}

/// The kv suite's figures: a pair a pipeline depth and operation, for the two measures the
/// issue asks for: requests/s (both clients) and server CPU per request (loadgen's window
/// is the steadier one).
fn kv() -> Vec<Figure> {
    let mut out = Vec::new();
    for (op, p) in [("get", 1), ("set", 1), ("get", 16), ("set", 16)] {
        let series = format!("loadgen-{op}-p{p}");
        let name = op.to_uppercase();
        out.push(Figure::new(
            format!("{op}-p{p}-throughput"),
            format!("kv {name}, pipeline {p}: requests/s (loadgen)"),
            CONNS,
            ("requests per second", Scale::Linear),
            throughput(&series),
        ));
        out.push(Figure::new(
            format!("{op}-p{p}-cpu"),
            format!("kv {name}, pipeline {p}: server CPU per request (loadgen)"),
            CONNS,
            CPU_PER_REQUEST,
            cpu_per_request(&series),
        ));
    }
    out
}

/// The http suite's figures: requests/s of both tests by both clients; loadgen's CPU per
/// request too.
fn http() -> Vec<Figure> {
    let wrk = ["wrk-plaintext-p16", "wrk-json-p1"];
    let lg = ["loadgen-plaintext-p16", "loadgen-json-p1"];
    let mut out = Vec::new();
    for s in wrk.into_iter().chain(lg) {
        let y = "requests per second";
        out.push(Figure::new(
            format!("{s}-throughput"),
            format!("http {s}: {y}"),
            CONNS,
            (y, Scale::Linear),
            throughput(s),
        ));
        if lg.contains(&s) {
            let (y, y_scale) = CPU_PER_REQUEST;
            out.push(Figure::new(
                format!("{s}-cpu"),
                format!("http {s}: {y}"),
                CONNS,
                (y, y_scale),
                cpu_per_request(s),
            ));
        }
    }
    out
}

/// The memory suite's figure.
fn memory() -> Vec<Figure> {
    vec![Figure::new(
        "per-conn",
        "Memory per idle connection (PSS)",
        CONNS,
        ("KiB per connection", Scale::Linear),
        measure("idle", |r| r.mem_per_conn_bytes.map(|b| b / 1024.0)),
    )]
}

/// The figures of `suite`, in the order the report shows them. The match names every
/// suite, so that a new suite without figures is a compile error here rather than a silent
/// gap.
pub(crate) fn of_suite(suite: Suite, rows: &[Row], workers: usize) -> Vec<Figure> {
    match suite {
        Suite::Quick => quick(),
        Suite::EmperEcho => emper_echo(workers),
        Suite::ChatCpu => chat_cpu(),
        Suite::ChatRoom => chat_room(),
        Suite::Kv => kv(),
        Suite::Http => http(),
        Suite::Memory => memory(),
        Suite::Scaling => scaling::figures(rows),
        // Drawn by the `search` module from its own runs.
        Suite::Search => Vec::new(),
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
    })
}

/// Draws `figure` of `suite` into `<run_dir>/plots/`, unless it has no line.
pub(crate) fn draw_figure(
    figure: Figure,
    suite: &str,
    rows: &[Row],
    run_dir: &Path,
) -> Result<Option<PlotFile>> {
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
    plots::draw(&plot, &run_dir.join(&file))?;
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
