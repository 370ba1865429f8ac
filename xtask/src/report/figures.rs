//! Which plots a run gets: for each suite, the lines drawn from its rows (throughput, CPU per
//! request, latency spectra, CPU over time), written as SVG into `plots/`; the scaling suite's
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

/// One line per server of `f` against x, for a suite's series.
pub(crate) fn lines(
    rows: &[Row],
    suite: &str,
    series: &str,
    f: impl Fn(&Row) -> Option<f64>,
) -> Vec<Line> {
    lines_with(rows, suite, series, |r| r.x, f, |_| None)
}

/// The interval of a row's throughput, for error bars.
fn tp_ci(r: &Row) -> Option<(f64, f64)> {
    r.throughput_per_sec_ci_low
        .zip(r.throughput_per_sec_ci_high)
}

/// The interval of a row's CPU per request, for error bars.
fn cpu_ci(r: &Row) -> Option<(f64, f64)> {
    r.cpu_us_per_req_ci_low.zip(r.cpu_us_per_req_ci_high)
}

/// Throughput against the series' x, with its intervals.
fn throughput_lines(rows: &[Row], suite: &str, series: &str) -> Vec<Line> {
    lines_with(
        rows,
        suite,
        series,
        |r| r.x,
        |r| r.throughput_per_sec,
        tp_ci,
    )
}

/// Server CPU per request against the series' x, with its intervals.
fn cpu_lines(rows: &[Row], suite: &str, series: &str) -> Vec<Line> {
    lines_with(rows, suite, series, |r| r.x, |r| r.cpu_us_per_req, cpu_ci)
}

/// Like [`lines`], with x read by `x` and an error bar from `ci` where it has one.
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
// Plots.

/// A plot written into the run directory, for the report to show.
#[derive(Debug, Clone)]
pub(crate) struct PlotFile {
    pub(crate) suite: String,
    pub(crate) file: String,
    pub(crate) caption: String,
}

/// Draws every plot the rows allow into `<run_dir>/plots/`.
pub(crate) fn draw_plots(run_dir: &Path, rows: &[Row], workers: usize) -> Result<Vec<PlotFile>> {
    let dir = run_dir.join("plots");
    std::fs::create_dir_all(&dir).context("creating plots/")?;
    let mut out = Vec::new();
    let mut emit = |suite: &str, name: &str, plot: Plot| -> Result<()> {
        if plot.lines.is_empty() {
            return Ok(());
        }
        let file = format!("plots/{suite}-{name}.svg");
        plots::draw(&plot, &run_dir.join(&file))?;
        out.push(PlotFile {
            suite: suite.to_string(),
            file,
            caption: plot.title.clone(),
        });
        Ok(())
    };
    let plot = |title: String, x: &str, y: &str, xs, ys, lines, bounds| Plot {
        title,
        x_desc: x.into(),
        y_desc: y.into(),
        x_scale: xs,
        y_scale: ys,
        lines,
        bounds,
        // Spectra rise to the right and leave the bottom right empty.
        legend_low: xs == Scale::Nines,
    };
    // Every suite of the rows, in `Suite` order; the match below names each one, so that a new
    // suite without plots is a compile error here rather than a silent gap.
    let suites = Suite::ALL
        .into_iter()
        .filter(|s| rows.iter().any(|r| r.suite == s.name()));
    for kind in suites {
        let suite = kind.name();
        let has = |series: &str| rows.iter().any(|r| r.suite == suite && r.series == series);
        let last_point = |series: &str| {
            points_of(rows, suite, series)
                .last()
                .map(|p| (p.0.clone(), p.1.clone()))
        };
        match kind {
            Suite::Quick => {
                emit(
                    suite,
                    "throughput",
                    plot(
                        "Echo throughput, closed loop, 16 B".into(),
                        "connections",
                        "echoes per second",
                        Scale::Log,
                        Scale::Linear,
                        throughput_lines(rows, suite, "closed"),
                        vec![],
                    ),
                )?;
                emit(
                    suite,
                    "cpu-per-echo",
                    plot(
                        "Server CPU per echo, closed loop".into(),
                        "connections",
                        "µs of CPU per echo (user + system)",
                        Scale::Log,
                        Scale::Linear,
                        cpu_lines(rows, suite, "closed"),
                        vec![],
                    ),
                )?;
                emit(
                    suite,
                    "cpu-per-echo-open",
                    plot(
                        "Server CPU per echo at equal load, open loop (bars: interval of the median)"
                            .into(),
                        "echoes per second offered",
                        "µs of CPU per echo (user + system)",
                        Scale::Log,
                        Scale::Linear,
                        lines_with(
                            rows,
                            suite,
                            "open",
                            |r| r.rate.unwrap_or(r.x),
                            |r| r.cpu_us_per_req,
                            cpu_ci,
                        ),
                        vec![],
                    ),
                )?;
                emit(
                    suite,
                    "cv",
                    plot(
                        "Stability: coefficient of variation of server CPU (500 ms samples)".into(),
                        "connections",
                        "CV of CPU (σ/μ)",
                        Scale::Log,
                        Scale::Linear,
                        lines(rows, suite, "closed", |r| r.cpu_cv),
                        vec![],
                    ),
                )?;
                if let Some((id, label)) = last_point("closed") {
                    emit(
                        suite,
                        "latency-closed",
                        plot(
                            format!("Latency spectrum, closed loop, {label}"),
                            "percentile",
                            "latency (µs)",
                            Scale::Nines,
                            Scale::Log,
                            spectra(rows, run_dir, suite, &id),
                            vec![],
                        ),
                    )?;
                }
                if let Some((id, label)) = last_point("open") {
                    emit(
                        suite,
                        "latency-open",
                        plot(
                            format!("Latency spectrum at equal load, open loop, {label}"),
                            "percentile",
                            "latency from intended send (µs)",
                            Scale::Nines,
                            Scale::Log,
                            spectra(rows, run_dir, suite, &id),
                            vec![],
                        ),
                    )?;
                    emit(
                        suite,
                        "cpu-time",
                        plot(
                            format!("Server CPU over time, open loop, {label}"),
                            "seconds from the start of the measured window (negative: warmup)",
                            "CPU (% of one core)",
                            Scale::Linear,
                            Scale::Linear,
                            cpu_over_time(rows, suite, &id),
                            vec![],
                        ),
                    )?;
                }
            }
            Suite::EmperEcho => {
                emit(
                    suite,
                    "throughput",
                    plot(
                        "Echo throughput (io_uring paper, Fig. 5)".into(),
                        "connections",
                        "echoes per second",
                        Scale::Log,
                        Scale::Linear,
                        throughput_lines(rows, suite, "no-work"),
                        vec![],
                    ),
                )?;
                let work = format!("work-{}us", suites::EMPER_COMPUTE_US);
                if has(&work) {
                    let bound = suites::littles_law_bound(workers, suites::EMPER_COMPUTE_US);
                    emit(
                        suite,
                        "throughput-work",
                        plot(
                            format!(
                                "Echo throughput with {} µs of work per echo (Figs. 6, 7)",
                                suites::EMPER_COMPUTE_US
                            ),
                            "connections",
                            "echoes per second",
                            Scale::Log,
                            Scale::Linear,
                            lines(rows, suite, &work, |r| r.throughput_per_sec),
                            vec![Bound {
                                y: bound,
                                label: format!(
                                    "Little's law bound: {workers} worker(s) / {} µs = {bound:.0}/s",
                                    suites::EMPER_COMPUTE_US
                                ),
                            }],
                        ),
                    )?;
                }
                if let Some((id, label)) = last_point("no-work") {
                    emit(
                        suite,
                        "latency",
                        plot(
                            format!("Latency spectrum at {label} (Fig. 8)"),
                            "percentile",
                            "latency (µs)",
                            Scale::Nines,
                            Scale::Log,
                            spectra(rows, run_dir, suite, &id),
                            vec![],
                        ),
                    )?;
                }
            }
            Suite::ChatCpu => {
                emit(suite, "cpu-mean", plot("Chat ingest at 1 Mbit/s per connection: server CPU (C-vs-Go paper, Fig. 3a)".into(), "connections", "mean CPU (% of one core)", Scale::Log, Scale::Linear, lines(rows, suite, "ingest", |r| r.cpu_mean_pct), vec![]))?;
                emit(
                    suite,
                    "cv",
                    plot(
                        "Chat ingest: coefficient of variation of CPU (Fig. 3b)".into(),
                        "connections",
                        "CV of CPU (σ/μ, 500 ms samples)",
                        Scale::Log,
                        Scale::Linear,
                        lines(rows, suite, "ingest", |r| r.cpu_cv),
                        vec![],
                    ),
                )?;
                if let Some((id, label)) = last_point("ingest") {
                    emit(
                        suite,
                        "cpu-time",
                        plot(
                            format!("Server CPU over time, {label}"),
                            "seconds from the start of the measured window (negative: warmup)",
                            "CPU (% of one core)",
                            Scale::Linear,
                            Scale::Linear,
                            cpu_over_time(rows, suite, &id),
                            vec![],
                        ),
                    )?;
                }
            }
            Suite::ChatRoom => {
                emit(
                    suite,
                    "delivery-p99",
                    plot(
                        "Chat fan-out: delivery latency p99 (SAY to each member's MSG)".into(),
                        "room size",
                        "p99 delivery latency (µs)",
                        Scale::Log,
                        Scale::Log,
                        lines(rows, suite, "rooms", |r| r.delivery_p99_us),
                        vec![],
                    ),
                )?;
                emit(
                    suite,
                    "cpu-per-delivery",
                    plot(
                        "Chat fan-out: server CPU per message sent".into(),
                        "room size",
                        "µs of CPU per SAY",
                        Scale::Log,
                        Scale::Log,
                        lines(rows, suite, "rooms", |r| r.cpu_us_per_req),
                        vec![],
                    ),
                )?;
            }
            Suite::Kv => {
                // One plot a pipeline depth and operation, for the two measures the issue
                // asks for: requests/s (both clients) and server CPU per request (loadgen's
                // window is the steadier one).
                for (op, p) in [("get", 1), ("set", 1), ("get", 16), ("set", 16)] {
                    let series = format!("loadgen-{op}-p{p}");
                    let name = op.to_uppercase();
                    emit(
                        suite,
                        &format!("{op}-p{p}-throughput"),
                        plot(
                            format!("kv {name}, pipeline {p}: requests/s (loadgen)"),
                            "connections",
                            "requests per second",
                            Scale::Log,
                            Scale::Linear,
                            throughput_lines(rows, suite, &series),
                            vec![],
                        ),
                    )?;
                    emit(
                        suite,
                        &format!("{op}-p{p}-cpu"),
                        plot(
                            format!("kv {name}, pipeline {p}: server CPU per request (loadgen)"),
                            "connections",
                            "µs of CPU per request (user + system)",
                            Scale::Log,
                            Scale::Linear,
                            cpu_lines(rows, suite, &series),
                            vec![],
                        ),
                    )?;
                }
            }
            Suite::Http => {
                // Requests/s of both tests by both clients; loadgen's CPU per request too.
                let wrk = ["wrk-plaintext-p16", "wrk-json-p1"];
                let lg = ["loadgen-plaintext-p16", "loadgen-json-p1"];
                let (log, lin) = (Scale::Log, Scale::Linear);
                for s in wrk.into_iter().chain(lg) {
                    let tp = throughput_lines(rows, suite, s);
                    let mut ps = vec![("throughput", "requests per second", tp)];
                    if lg.contains(&s) {
                        let c = cpu_lines(rows, suite, s);
                        ps.push(("cpu", "µs of CPU per request (user + system)", c));
                    }
                    for (what, y, ls) in ps {
                        let title = format!("http {s}: {y}");
                        let p = plot(title, "connections", y, log, lin, ls, vec![]);
                        emit(suite, &format!("{s}-{what}"), p)?;
                    }
                }
            }
            Suite::Memory => {
                emit(
                    suite,
                    "per-conn",
                    plot(
                        "Memory per idle connection (PSS)".into(),
                        "connections",
                        "KiB per connection",
                        Scale::Log,
                        Scale::Linear,
                        lines(rows, suite, "idle", |r| {
                            r.mem_per_conn_bytes.map(|b| b / 1024.0)
                        }),
                        vec![],
                    ),
                )?;
            }
            Suite::Scaling => {
                for (name, p) in scaling::plots(rows) {
                    emit(suite, name, p)?;
                }
            }
            // Drawn by the `search` module from its own runs.
            Suite::Search => {}
        }
    }
    Ok(out)
}
