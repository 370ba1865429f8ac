//! From runs to what a person reads: a summary row per server and point (medians over
//! repeats, latency from the repeats' histograms added together), `summary.csv` and
//! `summary.json`, the plots, and `report.md`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::meta::Meta;
use crate::plots::{self, Bound, Line, Plot, Scale};
use crate::runner::{Failure, Measured};
use crate::servers::Variant;
use crate::stats::{self, Percentiles};
use crate::suites::{self, Load, Point, Stop, Suite, Workload};

/// One server at one load point: the line of `summary.csv`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Row {
    pub(crate) suite: String,
    pub(crate) server: String,
    pub(crate) series: String,
    pub(crate) point: String,
    pub(crate) label: String,
    /// Connections, or room size for chat-room: the x axis of the suite's plots.
    pub(crate) x: f64,
    pub(crate) conns: usize,
    /// `closed` or `open`.
    pub(crate) mode: String,
    pub(crate) rate: Option<f64>,
    pub(crate) compute_us: u64,
    pub(crate) room_size: Option<usize>,
    /// `4 s` or `2500 req/conn`.
    pub(crate) stop: String,
    pub(crate) repeats: usize,
    /// Repeats that produced numbers.
    pub(crate) ok: usize,
    pub(crate) failure: Option<String>,
    pub(crate) throughput_per_sec: Option<f64>,
    /// (max - min) / median of throughput over the repeats.
    pub(crate) throughput_spread: Option<f64>,
    pub(crate) p50_us: Option<f64>,
    pub(crate) p90_us: Option<f64>,
    pub(crate) p95_us: Option<f64>,
    pub(crate) p99_us: Option<f64>,
    pub(crate) p99_9_us: Option<f64>,
    pub(crate) p99_99_us: Option<f64>,
    pub(crate) p99_999_us: Option<f64>,
    pub(crate) max_us: Option<f64>,
    pub(crate) errors: u64,
    pub(crate) client_bound: bool,
    pub(crate) client_cpu_per_msg_us: Option<f64>,
    pub(crate) cpu_mean_pct: Option<f64>,
    pub(crate) cpu_cv: Option<f64>,
    pub(crate) user_us_per_req: Option<f64>,
    pub(crate) sys_us_per_req: Option<f64>,
    pub(crate) cpu_us_per_req: Option<f64>,
    pub(crate) vol_cs_per_req: Option<f64>,
    pub(crate) invol_cs_per_req: Option<f64>,
    pub(crate) vol_cs_per_sec: Option<f64>,
    pub(crate) invol_cs_per_sec: Option<f64>,
    pub(crate) peak_mem_bytes: Option<f64>,
    pub(crate) mem_per_conn_bytes: Option<f64>,
    pub(crate) max_procs: usize,
    pub(crate) max_threads: usize,
    /// What else used the server's CPUs during the window, percent of one CPU.
    pub(crate) other_load_pct: Option<f64>,
    pub(crate) deliveries: Option<f64>,
    pub(crate) delivery_errors: u64,
    pub(crate) delivery_p50_us: Option<f64>,
    pub(crate) delivery_p99_us: Option<f64>,
    pub(crate) delivery_p99_9_us: Option<f64>,
    pub(crate) delivery_max_us: Option<f64>,
    /// The latency histogram of all repeats, relative to the run directory.
    pub(crate) hist: Option<String>,
    pub(crate) notes: Vec<String>,
    /// CPU percent over time (seconds from the window's start) of the median repeat.
    pub(crate) cpu_series: Vec<(f64, f64)>,
}

/// The columns of `summary.csv`, in order: every scalar field of [`Row`].
const CSV_COLUMNS: &[&str] = &[
    "suite",
    "server",
    "series",
    "point",
    "label",
    "x",
    "conns",
    "mode",
    "rate",
    "compute_us",
    "room_size",
    "stop",
    "repeats",
    "ok",
    "failure",
    "throughput_per_sec",
    "throughput_spread",
    "p50_us",
    "p90_us",
    "p95_us",
    "p99_us",
    "p99_9_us",
    "p99_99_us",
    "p99_999_us",
    "max_us",
    "errors",
    "client_bound",
    "client_cpu_per_msg_us",
    "cpu_mean_pct",
    "cpu_cv",
    "user_us_per_req",
    "sys_us_per_req",
    "cpu_us_per_req",
    "vol_cs_per_req",
    "invol_cs_per_req",
    "vol_cs_per_sec",
    "invol_cs_per_sec",
    "peak_mem_bytes",
    "mem_per_conn_bytes",
    "max_procs",
    "max_threads",
    "deliveries",
    "delivery_errors",
    "delivery_p50_us",
    "delivery_p99_us",
    "delivery_p99_9_us",
    "delivery_max_us",
    "hist",
];

fn median_of(ms: &[&Measured], f: impl Fn(&Measured) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = ms.iter().filter_map(|m| f(m)).collect();
    stats::median(&v)
}

/// Sums the repeats' histograms and writes the sum as `<id>.hist` and `<id>.hgrm` in `dir`.
/// Returns its percentiles and its path relative to `run_dir`.
fn merge_histograms(
    ms: &[&Measured],
    run_dir: &Path,
    dir: &Path,
    id: &str,
) -> Result<(Percentiles, String)> {
    let mut parts = Vec::new();
    for m in ms {
        let path = run_dir.join(&m.hist);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        parts.push(
            stats::decode_histogram(&bytes).with_context(|| format!("in {}", path.display()))?,
        );
    }
    let sum = stats::merge(&parts);
    let hist = dir.join(format!("{id}.hist"));
    if ms.len() > 1 {
        std::fs::write(&hist, stats::encode_histogram(&sum)?)
            .with_context(|| format!("writing {}", hist.display()))?;
    }
    let mut hgrm = Vec::new();
    stats::write_hgrm(&sum, &mut hgrm)?;
    let hgrm_path = dir.join(format!("{id}.hgrm"));
    std::fs::write(&hgrm_path, hgrm).with_context(|| format!("writing {}", hgrm_path.display()))?;
    let rel = hist
        .strip_prefix(run_dir)
        .unwrap_or(&hist)
        .display()
        .to_string();
    Ok((Percentiles::of(&sum), rel))
}

/// The summary row of `point` for `server` from its repeats. `dir` holds the point's files.
pub(crate) fn aggregate(
    point: &Point,
    server: &Variant,
    outcomes: &[Result<Measured, Failure>],
    run_dir: &Path,
    dir: &Path,
) -> Row {
    let ok: Vec<&Measured> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    let mut row = Row {
        suite: point.suite.name().to_string(),
        server: server.name.clone(),
        series: point.series.clone(),
        point: point.id.clone(),
        label: point.label.clone(),
        x: point.x(),
        conns: point.conns,
        mode: match point.load {
            Load::Closed => "closed".into(),
            Load::Open { .. } => "open".into(),
        },
        rate: match point.load {
            Load::Open { rate } => Some(rate),
            Load::Closed => None,
        },
        compute_us: point.workload.compute_us(),
        room_size: match point.workload {
            Workload::ChatRoom { room_size } => Some(room_size),
            _ => None,
        },
        stop: match point.stop {
            Stop::Duration(d) => format!("{d} s"),
            Stop::Requests(k) => format!("{k} req/conn"),
        },
        repeats: outcomes.len(),
        ok: ok.len(),
        ..Row::default()
    };
    for (i, o) in outcomes.iter().enumerate() {
        if let Err(f) = o {
            if ok.is_empty() && row.failure.is_none() {
                row.failure = Some(f.to_string());
            } else {
                row.notes.push(format!("repeat {} failed: {f}", i + 1));
            }
        }
    }
    if ok.is_empty() {
        return row;
    }
    let tp: Vec<f64> = ok.iter().map(|m| m.throughput_per_sec).collect();
    row.throughput_per_sec = stats::median(&tp);
    row.throughput_spread = stats::spread(&tp);
    match merge_histograms(&ok, run_dir, dir, &point.id) {
        Ok((p, rel)) if p.count > 0 => {
            row.p50_us = Some(p.p50);
            row.p90_us = Some(p.p90);
            row.p95_us = Some(p.p95);
            row.p99_us = Some(p.p99);
            row.p99_9_us = Some(p.p99_9);
            row.p99_99_us = Some(p.p99_99);
            row.p99_999_us = Some(p.p99_999);
            row.max_us = Some(p.max);
            row.hist = Some(rel);
        }
        Ok(_) => row.notes.push("no latency was recorded".into()),
        Err(e) => row
            .notes
            .push(format!("latency histogram unreadable: {e:#}")),
    }
    row.errors = ok.iter().map(|m| m.errors).sum();
    row.client_bound = ok.iter().any(|m| m.client_bound);
    row.client_cpu_per_msg_us = median_of(&ok, |m| Some(m.client_cpu_per_msg_us));
    row.cpu_mean_pct = median_of(&ok, |m| m.cost.cpu_mean_pct);
    row.cpu_cv = median_of(&ok, |m| m.cost.cpu_cv);
    row.user_us_per_req = median_of(&ok, |m| m.cost.user_us_per_req);
    row.sys_us_per_req = median_of(&ok, |m| m.cost.sys_us_per_req);
    row.cpu_us_per_req = median_of(&ok, |m| m.cost.cpu_us_per_req);
    row.vol_cs_per_req = median_of(&ok, |m| m.cost.vol_cs_per_req);
    row.invol_cs_per_req = median_of(&ok, |m| m.cost.invol_cs_per_req);
    row.vol_cs_per_sec = median_of(&ok, |m| m.cost.vol_cs_per_sec);
    row.invol_cs_per_sec = median_of(&ok, |m| m.cost.invol_cs_per_sec);
    row.peak_mem_bytes = median_of(&ok, |m| Some(m.cost.peak_mem_bytes as f64));
    row.mem_per_conn_bytes = median_of(&ok, |m| m.cost.mem_per_conn_bytes);
    row.max_procs = ok.iter().map(|m| m.cost.max_procs).max().unwrap_or(0);
    row.max_threads = ok.iter().map(|m| m.cost.max_threads).max().unwrap_or(0);
    row.other_load_pct = median_of(&ok, |m| m.cost.other_load_pct);
    row.deliveries = median_of(&ok, |m| m.deliveries.map(|d| d as f64));
    row.delivery_errors = ok.iter().map(|m| m.delivery_errors).sum();
    row.delivery_p50_us = median_of(&ok, |m| m.delivery_latency_us.map(|d| d[0]));
    row.delivery_p99_us = median_of(&ok, |m| m.delivery_latency_us.map(|d| d[1]));
    row.delivery_p99_9_us = median_of(&ok, |m| m.delivery_latency_us.map(|d| d[2]));
    row.delivery_max_us = median_of(&ok, |m| m.delivery_latency_us.map(|d| d[3]));
    let mid = row.throughput_per_sec.unwrap_or(0.0);
    let typical = ok.iter().min_by(|a, b| {
        (a.throughput_per_sec - mid)
            .abs()
            .total_cmp(&(b.throughput_per_sec - mid).abs())
    });
    row.cpu_series = typical
        .map(|m| m.cost.cpu_series.clone())
        .unwrap_or_default();
    if ok.iter().any(|m| !m.window_exact) {
        row.notes
            .push("measured window estimated (no interval log)".into());
    }
    for m in &ok {
        for n in &m.notes {
            if !row.notes.contains(n) {
                row.notes.push(n.clone());
            }
        }
    }
    row
}

fn csv_field(v: &serde_json::Value) -> String {
    let s = match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// Writes `summary.csv` and `summary.json` into `dir`.
pub(crate) fn write_summary(dir: &Path, rows: &[Row]) -> Result<()> {
    let mut csv = CSV_COLUMNS.join(",");
    csv.push('\n');
    for row in rows {
        let v = serde_json::to_value(row)?;
        let fields: Vec<String> = CSV_COLUMNS.iter().map(|c| csv_field(&v[*c])).collect();
        csv.push_str(&fields.join(","));
        csv.push('\n');
    }
    std::fs::write(dir.join("summary.csv"), csv).context("writing summary.csv")?;
    let json = serde_json::to_string_pretty(rows)?;
    std::fs::write(dir.join("summary.json"), json).context("writing summary.json")?;
    Ok(())
}

/// Reads the rows of a run directory's `summary.json`.
pub(crate) fn read_summary(dir: &Path) -> Result<Vec<Row>> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (is it a result directory?)", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// Formatting.

pub(crate) fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 100_000.0 => format!("{:.0}k", v / 1000.0),
        Some(v) if v >= 1_000.0 => format!("{:.1}k", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

pub(crate) fn fmt_us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 1_000_000.0 => format!("{:.2} s", v / 1e6),
        Some(v) if v >= 10_000.0 => format!("{:.0} ms", v / 1e3),
        Some(v) if v >= 1_000.0 => format!("{:.1} ms", v / 1e3),
        Some(v) if v >= 100.0 => format!("{v:.0} µs"),
        Some(v) if v >= 10.0 => format!("{v:.1} µs"),
        Some(v) => format!("{v:.2} µs"),
    }
}

pub(crate) fn fmt_bytes(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v.abs() >= 1024.0 * 1024.0 * 10.0 => format!("{:.0} MiB", v / 1024.0 / 1024.0),
        Some(v) if v.abs() >= 1024.0 * 1024.0 => format!("{:.1} MiB", v / 1024.0 / 1024.0),
        Some(v) if v.abs() >= 10.0 * 1024.0 => format!("{:.0} KiB", v / 1024.0),
        Some(v) if v.abs() >= 1024.0 => format!("{:.1} KiB", v / 1024.0),
        Some(v) => format!("{v:.0} B"),
    }
}

fn fmt_num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

fn fmt_pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.0}%"))
}

/// Percent of one CPU that something else may take from the server's CPUs before a point is
/// marked as disturbed.
const DISTURBED_PCT: f64 = 10.0;

impl Row {
    /// Something other than the server used its CPUs during the window.
    pub(crate) fn disturbed(&self) -> bool {
        self.other_load_pct.is_some_and(|p| p > DISTURBED_PCT)
    }
}

/// A cell for a row: `failed`, or the value marked † when the row is client-bound and ‡ when
/// something else disturbed the server's CPUs.
fn mark(row: Option<&Row>, cell: String) -> String {
    match row {
        None => "–".into(),
        Some(r) if r.ok == 0 => "failed".into(),
        Some(r) => {
            let mut c = cell;
            if r.client_bound {
                c.push_str(" †");
            }
            if r.disturbed() {
                c.push_str(" ‡");
            }
            c
        }
    }
}

fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        head.iter().map(|_| " --- |").collect::<String>()
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

// ---------------------------------------------------------------------------------------------
// Selecting rows.

/// The servers of the rows, in the order they ran.
fn servers(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.server) {
            out.push(r.server.clone());
        }
    }
    out
}

fn find<'a>(rows: &'a [Row], suite: &str, server: &str, point: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.suite == suite && r.server == server && r.point == point)
}

/// The distinct points of a suite and series, in x order: `(point id, label, x)`.
fn points_of(rows: &[Row], suite: &str, series: &str) -> Vec<(String, String, f64)> {
    let mut seen: Vec<(String, String, f64)> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.suite == suite && r.series == series)
    {
        if !seen.iter().any(|p| p.0 == r.point) {
            seen.push((r.point.clone(), r.label.clone(), r.x));
        }
    }
    seen.sort_by(|a, b| a.2.total_cmp(&b.2));
    seen
}

/// One line per server of `f` against x, for a suite's series.
fn lines(rows: &[Row], suite: &str, series: &str, f: impl Fn(&Row) -> Option<f64>) -> Vec<Line> {
    servers(rows)
        .into_iter()
        .map(|s| {
            let mut points: Vec<(f64, f64, bool)> = rows
                .iter()
                .filter(|r| r.suite == suite && r.series == series && r.server == s && r.ok > 0)
                .filter_map(|r| Some((r.x, f(r)?, r.client_bound)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Line {
                name: s,
                points,
                markers: true,
            }
        })
        .filter(|l| !l.points.is_empty())
        .collect()
}

/// The latency spectrum of each server at one point, from the summed histograms.
fn spectra(rows: &[Row], run_dir: &Path, suite: &str, point: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.suite == suite && r.point == point && r.ok > 0)
    {
        let Some(rel) = &r.hist else { continue };
        let Ok(bytes) = std::fs::read(run_dir.join(rel)) else {
            continue;
        };
        let Ok(h) = stats::decode_histogram(&bytes) else {
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
        });
    }
    out
}

fn cpu_over_time(rows: &[Row], suite: &str, point: &str) -> Vec<Line> {
    rows.iter()
        .filter(|r| r.suite == suite && r.point == point && !r.cpu_series.is_empty())
        .map(|r| Line {
            name: r.server.clone(),
            points: r.cpu_series.iter().map(|&(t, c)| (t, c, false)).collect(),
            markers: false,
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
    let suites: BTreeSet<&str> = rows.iter().map(|r| r.suite.as_str()).collect();
    for suite in suites {
        let has = |series: &str| rows.iter().any(|r| r.suite == suite && r.series == series);
        let last_point = |series: &str| {
            points_of(rows, suite, series)
                .last()
                .map(|p| (p.0.clone(), p.1.clone()))
        };
        match suite {
            "quick" => {
                emit(
                    suite,
                    "throughput",
                    plot(
                        "Echo throughput, closed loop, 16 B".into(),
                        "connections",
                        "echoes per second",
                        Scale::Log,
                        Scale::Linear,
                        lines(rows, suite, "closed", |r| r.throughput_per_sec),
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
                        lines(rows, suite, "closed", |r| r.cpu_us_per_req),
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
            "emper-echo" => {
                emit(
                    suite,
                    "throughput",
                    plot(
                        "Echo throughput (io_uring paper, Fig. 5)".into(),
                        "connections",
                        "echoes per second",
                        Scale::Log,
                        Scale::Linear,
                        lines(rows, suite, "no-work", |r| r.throughput_per_sec),
                        vec![],
                    ),
                )?;
                let work = format!("work-{}us", suites::EMPER_COMPUTE_US);
                if has(&work) {
                    let bound = workers as f64 * 1e6 / suites::EMPER_COMPUTE_US as f64;
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
            "chat-cpu" => {
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
            "chat-room" => {
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
            "memory" => {
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
            _ => {}
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// report.md

/// What the report is written from.
#[derive(Debug)]
pub(crate) struct Input<'a> {
    pub(crate) meta: &'a Meta,
    pub(crate) rows: &'a [Row],
    pub(crate) plots: &'a [PlotFile],
    pub(crate) variants: &'a [Variant],
    /// Default servers that could not run here, and why.
    pub(crate) skipped: &'a [String],
    pub(crate) suites: &'a [Suite],
    pub(crate) server_cpus: String,
    pub(crate) client_cpus: String,
    pub(crate) workers: usize,
}

fn about<'a>(input: &'a Input<'_>, server: &str) -> &'a str {
    input
        .variants
        .iter()
        .find(|v| v.name == server)
        .map_or("", |v| v.about.as_str())
}

/// Renders `report.md`.
pub(crate) fn render(input: &Input<'_>) -> String {
    let mut out = String::new();
    let m = input.meta;
    let names: Vec<&str> = input.suites.iter().map(|s| s.name()).collect();
    let _ = writeln!(out, "# ringside bench: {}\n", names.join(", "));
    let _ = writeln!(
        out,
        "Run `{}` of {} on {} ({} CPUs, Linux {}), commit `{}`{}. The server ran on CPU {} \
         with {} worker(s), the load generator on CPU {}. Load average (1, 5, 15 min) at the \
         start {}, at the end {}. Command: `{}`.{}\n",
        m.run_id,
        m.started,
        m.cpu_model.as_deref().unwrap_or("an unknown CPU"),
        m.cores,
        m.kernel.as_deref().unwrap_or("?"),
        m.commit.as_deref().map_or("?", |c| &c[..c.len().min(12)]),
        if m.dirty {
            " with uncommitted changes"
        } else {
            ""
        },
        input.server_cpus,
        input.workers,
        input.client_cpus,
        m.load_average_start.as_deref().unwrap_or("?"),
        m.load_average_end.as_deref().unwrap_or("?"),
        m.command,
        if m.interrupted {
            " **The run was interrupted (Ctrl-C): what is here is what was measured before.**"
        } else {
            ""
        },
    );

    at_a_glance(&mut out, input);

    for &suite in input.suites {
        let rows: Vec<Row> = input
            .rows
            .iter()
            .filter(|r| r.suite == suite.name())
            .cloned()
            .collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "## {}: {}\n", suite.name(), suite.title());
        match suite {
            Suite::Quick => quick_section(&mut out, &rows),
            Suite::EmperEcho => emper_section(&mut out, &rows, input.workers),
            Suite::ChatCpu => chat_cpu_section(&mut out, &rows),
            Suite::ChatRoom => chat_room_section(&mut out, &rows),
            Suite::Memory => memory_section(&mut out, &rows),
        }
        for p in input.plots.iter().filter(|p| p.suite == suite.name()) {
            let _ = writeln!(out, "![{}]({})\n", p.caption, p.file);
        }
        let _ = writeln!(
            out,
            "<details><summary>Every point of {} (all measurements)</summary>\n",
            suite.name()
        );
        details(&mut out, &rows);
        let _ = writeln!(out, "</details>\n");
    }

    failures(&mut out, input.rows);
    method(&mut out, input);
    out
}

fn at_a_glance(out: &mut String, input: &Input<'_>) {
    let rows = input.rows;
    let _ = writeln!(out, "## At a glance\n");
    let closed = points_of(rows, "quick", "closed");
    let open = points_of(rows, "quick", "open");
    if let (Some(first), Some(last)) = (closed.first(), closed.last()) {
        let open = open.first();
        let n = &last.1;
        // With a single closed-loop point, its throughput is shown once.
        let two = first.0 != last.0;
        let mut head: Vec<String> = vec!["server".into(), "how it serves connections".into()];
        if two {
            head.push(format!("echoes/s, {}", first.1));
        }
        head.push(format!("echoes/s, {n}"));
        head.push(format!("p99 latency, {n}"));
        if let Some(o) = open {
            head.push(format!(
                "CPU per echo at {}",
                o.1.split(" @ ").nth(1).unwrap_or("equal load")
            ));
            head.push("p99 latency there".into());
        }
        head.push(format!("memory per conn, {n}"));
        let mut body = Vec::new();
        for s in servers(rows) {
            if !rows.iter().any(|r| r.suite == "quick" && r.server == s) {
                continue;
            }
            let a = find(rows, "quick", &s, &first.0);
            let b = find(rows, "quick", &s, &last.0);
            let mut cells = vec![format!("**{s}**"), about(input, &s).to_string()];
            if two {
                cells.push(mark(a, fmt_rate(a.and_then(|r| r.throughput_per_sec))));
            }
            cells.push(mark(b, fmt_rate(b.and_then(|r| r.throughput_per_sec))));
            cells.push(mark(b, fmt_us(b.and_then(|r| r.p99_us))));
            if let Some(o) = open {
                let c = find(rows, "quick", &s, &o.0);
                cells.push(mark(c, fmt_us(c.and_then(|r| r.cpu_us_per_req))));
                cells.push(mark(c, fmt_us(c.and_then(|r| r.p99_us))));
            }
            cells.push(mark(b, fmt_bytes(b.and_then(|r| r.mem_per_conn_bytes))));
            body.push(cells);
        }
        let head: Vec<&str> = head.iter().map(String::as_str).collect();
        table(out, &head, &body);
        let _ = writeln!(
            out,
            "How to read it: each server echoes 16-byte messages back to the load generator. \
             **echoes/s** is how many round trips per second it completed with that many \
             connections each waiting for its reply before sending the next (more is better; \
             with one connection it mostly measures the round-trip latency through the \
             kernel). **p99 latency** is the time within which 99% of the echoes came back \
             (less is better). **CPU per echo** is the server's CPU time (user + system, read \
             from /proc) divided by the echoes it served, measured while every server \
             handled the same fixed rate, so it compares efficiency directly (less is \
             better). **memory per conn** is how much the server's memory grew per open \
             connection. † marks a point where the load generator, not the server, was the \
             bottleneck: its numbers understate the server. ‡ marks a point where something \
             else used more than {DISTURBED_PCT:.0}% of the server's CPU (another program, or \
             the hypervisor): its numbers are disturbed. Only ratios between servers of the \
             same run mean much on a shared machine.\n"
        );
    } else if let Some(&suite) = input.suites.first() {
        let _ = writeln!(
            out,
            "{}: the main table of the suite follows. † marks a client-bound point.\n",
            suite.title()
        );
    }
    if !input.skipped.is_empty() {
        let _ = writeln!(out, "Not in this run: {}.\n", input.skipped.join("; "));
    }
}

/// A pivot table: a row per server, a column per point of a series.
fn pivot(
    out: &mut String,
    rows: &[Row],
    suite: &str,
    series: &str,
    corner: &str,
    cell: impl Fn(&Row) -> String,
) {
    let points = points_of(rows, suite, series);
    if points.is_empty() {
        return;
    }
    let mut head = vec![corner.to_string()];
    head.extend(points.iter().map(|p| p.1.clone()));
    let body: Vec<Vec<String>> = servers(rows)
        .into_iter()
        .map(|s| {
            let mut cells = vec![format!("**{s}**")];
            for p in &points {
                let r = find(rows, suite, &s, &p.0);
                cells.push(mark(r, r.map(&cell).unwrap_or_default()));
            }
            cells
        })
        .collect();
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
}

fn quick_section(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "Echo of 16-byte messages, closed loop (each connection waits for its echo before sending the next). Throughput in echoes/s:\n"
    );
    pivot(out, rows, "quick", "closed", "echoes/s", |r| {
        fmt_rate(r.throughput_per_sec)
    });
    let _ = writeln!(out, "Server CPU per echo (user + system):\n");
    pivot(out, rows, "quick", "closed", "CPU per echo", |r| {
        fmt_us(r.cpu_us_per_req)
    });
    let _ = writeln!(out, "p99 latency:\n");
    pivot(out, rows, "quick", "closed", "p99", |r| fmt_us(r.p99_us));
    if !points_of(rows, "quick", "open").is_empty() {
        let _ = writeln!(
            out,
            "Open loop at a fixed rate every server should sustain: the same work for all, so CPU and latency compare directly (latency counts from when each echo was due, so a server that falls behind is not flattered):\n"
        );
        pivot(out, rows, "quick", "open", "at equal load", |r| {
            format!(
                "{} echoes/s, {} CPU ({} per echo, {} user / {} sys), p50 {}, p99 {}, p99.99 {}, {} / {} cs per echo",
                fmt_rate(r.throughput_per_sec),
                fmt_pct(r.cpu_mean_pct),
                fmt_us(r.cpu_us_per_req),
                fmt_us(r.user_us_per_req),
                fmt_us(r.sys_us_per_req),
                fmt_us(r.p50_us),
                fmt_us(r.p99_us),
                fmt_us(r.p99_99_us),
                fmt_num(r.vol_cs_per_req, 2),
                fmt_num(r.invol_cs_per_req, 3),
            )
        });
        syscall_techniques(out, rows);
    }
}

/// The io_uring paper's Table I beside our CPU per echo at equal load, by the system-call
/// technique each server uses.
fn syscall_techniques(out: &mut String, rows: &[Row]) {
    let Some((id, label, _)) = points_of(rows, "quick", "open").into_iter().next() else {
        return;
    };
    let cost = |server: &str| find(rows, "quick", server, &id).and_then(|r| r.cpu_us_per_req);
    let base = cost("threads");
    let ours = |server: &str| match (cost(server), base) {
        (Some(c), Some(b)) if b > 0.0 => {
            format!("{} ({server}, {:.2}× threads)", fmt_us(Some(c)), c / b)
        }
        (Some(c), _) => format!("{} ({server})", fmt_us(Some(c))),
        (None, _) => format!("– ({server} not in this run)"),
    };
    let _ = writeln!(
        out,
        "**Beside the paper** (io_uring paper, Table I: the cost of one eventfd read by each \
         system-call technique, Xeon E5-4640, Linux 5.13). Ours is the server's whole CPU per \
         echo at {label}, TCP stack included, so only the ratios compare:\n"
    );
    table(
        out,
        &[
            "technique",
            "paper, per request",
            "ratio to blocking",
            "ours, CPU per echo",
        ],
        &[
            vec![
                "blocking".into(),
                "955 ns".into(),
                "1.00×".into(),
                ours("threads"),
            ],
            vec![
                "non-blocking + epoll".into(),
                "1656 ns".into(),
                "1.73×".into(),
                ours("reactor"),
            ],
            vec![
                "io_uring".into(),
                "306 ns".into(),
                "0.32×".into(),
                ours("fiber"),
            ],
        ],
    );
}

/// The peak throughput of a server in a series: `(throughput, x)`.
fn peak(rows: &[Row], suite: &str, series: &str, server: &str) -> Option<(f64, f64)> {
    rows.iter()
        .filter(|r| r.suite == suite && r.series == series && r.server == server)
        .filter_map(|r| Some((r.throughput_per_sec?, r.x)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

fn ratio_text(a: Option<f64>, b: Option<f64>, higher_is: &str, lower_is: &str) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => {
            let pct = (a / b - 1.0) * 100.0;
            if pct >= 0.0 {
                format!("{pct:.1}% {higher_is}")
            } else {
                format!("{:.1}% {lower_is}", -pct)
            }
        }
        _ => "not in this run".into(),
    }
}

fn emper_section(out: &mut String, rows: &[Row], workers: usize) {
    let s = "emper-echo";
    let _ = writeln!(
        out,
        "Each connection sends 16-byte echoes, one at a time, 2500 per connection where that fits the time budget, else for a fixed duration (the label says which). Echoes/s:\n"
    );
    pivot(out, rows, s, "no-work", "no work", |r| {
        fmt_rate(r.throughput_per_sec)
    });
    let work = format!("work-{}us", suites::EMPER_COMPUTE_US);
    let bound = workers as f64 * 1e6 / suites::EMPER_COMPUTE_US as f64;
    if !points_of(rows, s, &work).is_empty() {
        let _ = writeln!(
            out,
            "With {} µs of busy work per echo (Figures 6 and 7). With {workers} worker(s), Little's law caps throughput at {workers} / {} µs = **{bound:.0} echoes/s**:\n",
            suites::EMPER_COMPUTE_US,
            suites::EMPER_COMPUTE_US
        );
        pivot(out, rows, s, &work, "200 µs work", |r| {
            fmt_rate(r.throughput_per_sec)
        });
    }
    let last = points_of(rows, s, "no-work").last().cloned();
    if let Some((id, label, _)) = &last {
        let _ = writeln!(out, "Latency percentiles at {label} (Figure 8):\n");
        let body: Vec<Vec<String>> = servers(rows)
            .into_iter()
            .filter_map(|sv| {
                let r = find(rows, s, &sv, id)?;
                Some(vec![
                    format!("**{sv}**"),
                    mark(Some(r), fmt_us(r.p95_us)),
                    mark(Some(r), fmt_us(r.p99_us)),
                    mark(Some(r), fmt_us(r.p99_99_us)),
                    mark(Some(r), fmt_us(r.p99_999_us)),
                ])
            })
            .collect();
        table(out, &["server", "p95", "p99", "p99.99", "p99.999"], &body);
    }
    let _ = writeln!(
        out,
        "**Beside the paper** (EMPER is the paper's fiber runtime, our `fiber`; the paper ran 80 hardware threads against a separate client machine, we run one server core against one client core, so compare shapes and ratios, not absolute numbers):\n"
    );
    let pk = |sv: &str| peak(rows, s, "no-work", sv);
    let peak_text = |sv: &str| {
        pk(sv).map_or("not in this run".to_string(), |(t, x)| {
            format!("{} echoes/s at {x} conns", fmt_rate(Some(t)))
        })
    };
    let p5 = |sv: &str| {
        last.as_ref()
            .and_then(|(id, _, _)| find(rows, s, sv, id)?.p99_999_us)
    };
    let best_work = servers(rows)
        .into_iter()
        .filter_map(|sv| Some((peak(rows, s, &work, &sv)?.0, sv)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let body = vec![
        vec![
            "EMPER against Go, peak throughput".into(),
            "+4%".into(),
            ratio_text(
                pk("fiber").map(|p| p.0),
                pk("go").map(|p| p.0),
                "more (fiber against go)",
                "less (fiber against go)",
            ),
        ],
        vec![
            "EMPER against Tokio, peak throughput".into(),
            "+17.8%".into(),
            ratio_text(
                pk("fiber").map(|p| p.0),
                pk("tokio").map(|p| p.0),
                "more (fiber against tokio)",
                "less (fiber against tokio)",
            ),
        ],
        vec![
            "where throughput peaks".into(),
            "5000 connections (EMPER, Go); 1000 (Tokio)".into(),
            format!(
                "fiber: {}; go: {}; tokio: {}",
                peak_text("fiber"),
                peak_text("go"),
                peak_text("tokio")
            ),
        ],
        vec![
            "p99.999 at 10,000 connections, EMPER against Go".into(),
            "7.7% lower".into(),
            ratio_text(
                p5("fiber"),
                p5("go"),
                "higher (fiber against go)",
                "lower (fiber against go)",
            ),
        ],
        vec![
            "Little's law bound with 200 µs work".into(),
            "20 workers → 100,000/s".into(),
            best_work.map_or("not in this run".into(), |(t, sv)| {
                format!(
                    "{workers} worker(s) → {bound:.0}/s; best: {sv} at {} ({:.0}% of the bound)",
                    fmt_rate(Some(t)),
                    t / bound * 100.0
                )
            }),
        ],
    ];
    table(out, &["", "paper", "ours"], &body);
}

fn chat_cpu_section(out: &mut String, rows: &[Row]) {
    let s = "chat-cpu";
    let _ = writeln!(
        out,
        "Every connection sends chat `SAY` lines at 1 Mbit/s and waits for each `ACK`; the server appends every message to its room log. Mean server CPU (% of one core, sampled every 500 ms as `top` does):\n"
    );
    // The load is offered at a fixed byte rate: a server that falls behind it does less work,
    // and its CPU must not be read as efficiency.
    pivot(out, rows, s, "ingest", "CPU mean", |r| {
        let offered = r.conns as f64 * suites::CHAT_BYTE_RATE / suites::CHAT_LINE as f64;
        let done = r.throughput_per_sec.unwrap_or(0.0) / offered;
        if done < 0.95 {
            format!(
                "{} (behind: {:.0}% of the load)",
                fmt_pct(r.cpu_mean_pct),
                done * 100.0
            )
        } else {
            fmt_pct(r.cpu_mean_pct)
        }
    });
    let _ = writeln!(
        out,
        "Coefficient of variation of those samples (σ/μ: lower is steadier):\n"
    );
    pivot(out, rows, s, "ingest", "CPU CV", |r| fmt_num(r.cpu_cv, 3));
    let points = points_of(rows, s, "ingest");
    let (c, g) = ("threads-process", "go");
    /// The C-like server and Go at one point.
    struct Pair {
        c_cpu: f64,
        go_cpu: f64,
        c_cv: Option<f64>,
        go_cv: Option<f64>,
        conns: f64,
    }
    let both: Vec<Pair> = points
        .iter()
        .filter_map(|p| {
            let rc = find(rows, s, c, &p.0)?;
            let rg = find(rows, s, g, &p.0)?;
            Some(Pair {
                c_cpu: rc.cpu_mean_pct?,
                go_cpu: rg.cpu_mean_pct?,
                c_cv: rc.cpu_cv,
                go_cv: rg.cpu_cv,
                conns: p.2,
            })
        })
        .collect();
    let _ = writeln!(
        out,
        "**Beside the paper** (its C server forks a process per connection, our `threads-process`; it ran on a 1-vCPU FreeBSD VM with a remote load generator):\n"
    );
    let cpu_ours = if both.is_empty() {
        "needs threads-process and go in the same run".to_string()
    } else {
        let lower = both.iter().filter(|b| b.c_cpu < b.go_cpu).count();
        let last = both.last().map_or(String::new(), |b| {
            format!(
                "; at {} conns {} against {}",
                b.conns,
                fmt_pct(Some(b.c_cpu)),
                fmt_pct(Some(b.go_cpu))
            )
        });
        format!(
            "threads-process lower at {lower} of {} points{last}",
            both.len()
        )
    };
    let high: Vec<&Pair> = both.iter().filter(|b| b.conns >= 16.0).collect();
    let cv_ours = {
        let cc: Vec<f64> = high.iter().filter_map(|b| b.c_cv).collect();
        let gg: Vec<f64> = high.iter().filter_map(|b| b.go_cv).collect();
        match (stats::mean(&cc), stats::mean(&gg)) {
            (Some(a), Some(b)) => {
                format!("mean CV at ≥16 conns: threads-process {a:.3}, go {b:.3}")
            }
            _ => "needs threads-process and go at 16 connections or more".into(),
        }
    };
    table(
        out,
        &["", "paper", "ours"],
        &[
            vec![
                "CPU, C (process per connection) against Go".into(),
                "C lower at every point, 1 to 64 connections".into(),
                cpu_ours,
            ],
            vec![
                "CPU stability under high load".into(),
                "C has the lower coefficient of variation".into(),
                cv_ours,
            ],
        ],
    );
}

fn chat_room_section(out: &mut String, rows: &[Row]) {
    let s = "chat-room";
    let _ = writeln!(
        out,
        "Connections are dealt into rooms of the given size; each `SAY` reaches every other member of its room. The `SAY` rate is set so the server delivers about the same number of `MSG` lines per second at every room size. Delivery latency p99 (from `SAY` to each member's `MSG`) and completeness (subscribers that missed, repeated or reordered a message):\n"
    );
    pivot(out, rows, s, "rooms", "delivery p99", |r| {
        format!(
            "{} (p50 {}), {} delivered, {} incomplete",
            fmt_us(r.delivery_p99_us),
            fmt_us(r.delivery_p50_us),
            fmt_rate(r.deliveries),
            r.delivery_errors
        )
    });
    let _ = writeln!(out, "Server CPU per `SAY` (the fan-out included):\n");
    pivot(out, rows, s, "rooms", "CPU per SAY", |r| {
        fmt_us(r.cpu_us_per_req)
    });
}

fn memory_section(out: &mut String, rows: &[Row]) {
    let s = "memory";
    let _ = writeln!(
        out,
        "Connections held open and all but idle (one echo a second over all of them). Memory per connection is the growth of the server's memory (PSS over its processes) over its memory before the first connection, divided by the connections:\n"
    );
    pivot(out, rows, s, "idle", "memory per conn", |r| {
        fmt_bytes(r.mem_per_conn_bytes)
    });
    pivot(out, rows, s, "idle", "whole server", |r| {
        format!(
            "{} in {} process(es), {} thread(s)",
            fmt_bytes(r.peak_mem_bytes),
            r.max_procs,
            r.max_threads
        )
    });
    let _ = writeln!(
        out,
        "**Beside the literature** (goroutine-switch article): a goroutine starts with a 2 KiB stack, an OS thread reserves 8 MiB of *virtual* stack; what a thread really costs is what it touches, which the table above shows.\n"
    );
}

fn details(out: &mut String, rows: &[Row]) {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let m = |c: String| mark(Some(r), c);
            vec![
                r.server.clone(),
                r.label.clone(),
                m(fmt_rate(r.throughput_per_sec)),
                r.throughput_spread
                    .map_or("–".into(), |s| format!("{:.0}%", s * 100.0)),
                m(fmt_us(r.p50_us)),
                m(fmt_us(r.p99_us)),
                m(fmt_us(r.p99_99_us)),
                m(fmt_us(r.max_us)),
                fmt_pct(r.cpu_mean_pct),
                fmt_num(r.cpu_cv, 3),
                format!(
                    "{} / {}",
                    fmt_us(r.user_us_per_req),
                    fmt_us(r.sys_us_per_req)
                ),
                format!(
                    "{} / {}",
                    fmt_num(r.vol_cs_per_req, 2),
                    fmt_num(r.invol_cs_per_req, 3)
                ),
                fmt_bytes(r.peak_mem_bytes),
                fmt_bytes(r.mem_per_conn_bytes),
                r.errors.to_string(),
                fmt_us(r.client_cpu_per_msg_us),
                fmt_pct(r.other_load_pct),
            ]
        })
        .collect();
    table(
        out,
        &[
            "server",
            "point",
            "msgs/s",
            "spread",
            "p50",
            "p99",
            "p99.99",
            "max",
            "CPU",
            "CPU CV",
            "CPU/msg user / sys",
            "ctx sw/msg vol / invol",
            "peak mem",
            "mem/conn",
            "errors",
            "client CPU/msg",
            "other load on server CPU",
        ],
        &body,
    );
}

fn failures(out: &mut String, rows: &[Row]) {
    let bad: Vec<&Row> = rows
        .iter()
        .filter(|r| r.failure.is_some() || !r.notes.is_empty())
        .collect();
    if bad.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Failures and notes\n");
    for r in bad {
        if let Some(f) = &r.failure {
            let _ = writeln!(
                out,
                "- **{} / {} / {}** failed: {}",
                r.suite,
                r.server,
                r.label,
                f.replace('\n', " ⏎ ")
            );
        }
        for n in &r.notes {
            let _ = writeln!(
                out,
                "- {} / {} / {}: {}",
                r.suite,
                r.server,
                r.label,
                n.replace('\n', " ⏎ ")
            );
        }
    }
    out.push('\n');
}

fn method(out: &mut String, input: &Input<'_>) {
    let _ = writeln!(out, "## How this was measured\n");
    let _ = writeln!(
        out,
        "- Every point starts the server afresh on CPU {} (`--cpus`, and pinned by the harness before it runs), waits for its `READY` line, then runs `loadgen` pinned to CPU {}: connections first, then a warmup that is not recorded, then the measured window. Latency is recorded in HdrHistograms; percentiles come from the histograms of all repeats added together, never from averaged percentiles. In the open loop latency counts from when a message was due (coordinated omission included).",
        input.server_cpus, input.client_cpus
    );
    let _ = writeln!(
        out,
        "- The server's cost is read from /proc every 500 ms over its whole process tree (forked connection processes included): CPU from `/proc/<pid>/stat` (user and system, 10 ms ticks, as `top` reads it), context switches from every thread's `status`, memory as PSS from `smaps_rollup` (so pages shared by forked processes count once). Counters are interpolated to the exact measured window, which loadgen stamps in its interval log. CPU per message = CPU seconds in the window / messages in the window."
    );
    let _ = writeln!(
        out,
        "- The coefficient of variation is σ/μ of the 500 ms CPU samples inside the window (sample standard deviation), as the C-versus-Go paper computed it from `top`."
    );
    let _ = writeln!(
        out,
        "- ‡ disturbed: the server's CPUs were busier than the server by more than {DISTURBED_PCT:.0}% of a CPU over the window (from `/proc/stat`: user, system and the hypervisor's steal time; interrupts, which are the benchmark's own network traffic, left out): something else ran there. † client-bound: loadgen's CPUs were over 90% busy, so the point measures the load generator as much as the server. With `--repeat N`, numbers are medians over the repeats and *spread* is (max − min) / median of throughput."
    );
    let _ = writeln!(
        out,
        "- Files: `summary.csv` and `summary.json` (a row per server and point), `meta.json` (machine, kernel, mitigations, compilers, command), `<suite>/<server>/<point>.hist` (V2 HdrHistogram) and `.hgrm` (percentile table), loadgen's JSON and interval log, and each server's stderr, beside each point.\n"
    );
}

/// A compact table of every row, for the terminal at the end of a run.
pub(crate) fn terminal_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let m = |c: String| mark(Some(r), c);
            vec![
                r.suite.clone(),
                r.server.clone(),
                r.label.clone(),
                m(fmt_rate(r.throughput_per_sec)),
                m(fmt_us(r.p99_us)),
                fmt_pct(r.cpu_mean_pct),
                fmt_num(r.cpu_cv, 3),
                fmt_us(r.cpu_us_per_req),
                fmt_bytes(r.mem_per_conn_bytes),
                r.errors.to_string(),
            ]
        })
        .collect();
    table(
        &mut out,
        &[
            "suite", "server", "point", "msgs/s", "p99", "CPU", "CV", "CPU/msg", "mem/conn",
            "errors",
        ],
        &body,
    );
    out
}

/// The "At a glance" part of the report alone.
pub(crate) fn glance(input: &Input<'_>) -> String {
    let mut out = String::new();
    at_a_glance(&mut out, input);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, point: &str, x: f64, tp: f64) -> Row {
        Row {
            suite: "quick".into(),
            server: server.into(),
            series: "closed".into(),
            point: point.into(),
            label: format!("{x} conns"),
            x,
            ok: 1,
            repeats: 1,
            throughput_per_sec: Some(tp),
            p99_us: Some(80.0),
            ..Row::default()
        }
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_rate(Some(123_456.0)), "123k");
        assert_eq!(fmt_rate(Some(12_345.0)), "12.3k");
        assert_eq!(fmt_rate(Some(42.0)), "42");
        assert_eq!(fmt_us(Some(5.123)), "5.12 µs");
        assert_eq!(fmt_us(Some(1500.0)), "1.5 ms");
        assert_eq!(fmt_us(Some(2_500_000.0)), "2.50 s");
        assert_eq!(fmt_bytes(Some(2048.0)), "2.0 KiB");
        assert_eq!(fmt_bytes(Some(20.0 * 1024.0 * 1024.0)), "20 MiB");
        assert_eq!(fmt_us(None), "–");
    }

    #[test]
    fn pivot_marks_client_bound_and_failed_points() {
        let mut rows = vec![
            row("a", "c1", 1.0, 1000.0),
            row("a", "c10", 10.0, 5000.0),
            row("b", "c1", 1.0, 900.0),
        ];
        rows[1].client_bound = true;
        let mut failed = row("b", "c10", 10.0, 0.0);
        failed.ok = 0;
        failed.throughput_per_sec = None;
        failed.failure = Some("the server did not start: boom".into());
        rows.push(failed);
        let mut out = String::new();
        pivot(&mut out, &rows, "quick", "closed", "echoes/s", |r| {
            fmt_rate(r.throughput_per_sec)
        });
        assert!(out.contains("| echoes/s | 1 conns | 10 conns |"), "{out}");
        // Every CSV column is a field of a row.
        let v = serde_json::to_value(&rows[0]).unwrap();
        for c in CSV_COLUMNS {
            assert!(v.get(*c).is_some(), "{c}");
        }
        assert!(out.contains("| **a** | 1.0k | 5.0k † |"), "{out}");
        assert!(out.contains("| **b** | 900 | failed |"), "{out}");
        let mut f = String::new();
        failures(&mut f, &rows);
        assert!(f.contains("boom"));
    }

    #[test]
    fn summary_round_trips_and_csv_has_every_column() {
        let dir = std::env::temp_dir().join(format!("xtask-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = row("fiber+completer", "c1", 1.0, 1234.5);
        r.notes.push("a note, with a comma".into());
        r.failure = Some("said \"no\"".into());
        write_summary(&dir, &[r.clone()]).unwrap();
        assert_eq!(read_summary(&dir).unwrap(), vec![r]);
        let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(lines.next().unwrap().split(',').count(), CSV_COLUMNS.len());
        let line = lines.next().unwrap();
        assert!(
            line.starts_with("quick,fiber+completer,closed,c1,1 conns,1.0,"),
            "{line}"
        );
        assert!(line.contains("\"said \"\"no\"\"\""), "{line}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
