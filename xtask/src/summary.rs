//! The summary of a run: a row per server and point from its repeats (medians, intervals,
//! latency from the repeats' histograms added together), `summary.csv` and `summary.json`,
//! and the lookups the report and the plots make over the rows.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::runner::{Failure, Measured};
use crate::servers::Variant;
use crate::stats::{self, Percentiles};
use crate::suites::{Load, Point, Stop, Workload};

/// One server at one load point: the line of `summary.csv`.
///
/// A number over repeats is their median; `<metric>_ci_low` and `<metric>_ci_high` are the
/// order-statistic interval for that median (`stats::median_interval`), whose coverage is
/// `ci_level`. Latency percentiles are read off the repeats' histograms added together; their
/// intervals come from each repeat's own percentile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// How often an interval made as the `_ci_` ones are covers the true median (0.75 with 3
    /// repeats, 0.9375 with 5, 0.95 or more from 6).
    pub(crate) ci_level: Option<f64>,
    pub(crate) throughput_per_sec_ci_low: Option<f64>,
    pub(crate) throughput_per_sec_ci_high: Option<f64>,
    pub(crate) p50_us: Option<f64>,
    pub(crate) p90_us: Option<f64>,
    pub(crate) p95_us: Option<f64>,
    pub(crate) p99_us: Option<f64>,
    pub(crate) p99_9_us: Option<f64>,
    pub(crate) p99_99_us: Option<f64>,
    pub(crate) p99_999_us: Option<f64>,
    pub(crate) max_us: Option<f64>,
    pub(crate) p50_us_ci_low: Option<f64>,
    pub(crate) p50_us_ci_high: Option<f64>,
    pub(crate) p90_us_ci_low: Option<f64>,
    pub(crate) p90_us_ci_high: Option<f64>,
    pub(crate) p95_us_ci_low: Option<f64>,
    pub(crate) p95_us_ci_high: Option<f64>,
    pub(crate) p99_us_ci_low: Option<f64>,
    pub(crate) p99_us_ci_high: Option<f64>,
    pub(crate) p99_9_us_ci_low: Option<f64>,
    pub(crate) p99_9_us_ci_high: Option<f64>,
    pub(crate) p99_99_us_ci_low: Option<f64>,
    pub(crate) p99_99_us_ci_high: Option<f64>,
    pub(crate) p99_999_us_ci_low: Option<f64>,
    pub(crate) p99_999_us_ci_high: Option<f64>,
    pub(crate) errors: u64,
    pub(crate) client_bound: bool,
    pub(crate) client_cpu_per_msg_us: Option<f64>,
    pub(crate) cpu_mean_pct: Option<f64>,
    pub(crate) cpu_cv: Option<f64>,
    pub(crate) user_us_per_req: Option<f64>,
    pub(crate) sys_us_per_req: Option<f64>,
    pub(crate) cpu_us_per_req: Option<f64>,
    pub(crate) cpu_us_per_req_ci_low: Option<f64>,
    pub(crate) cpu_us_per_req_ci_high: Option<f64>,
    /// The lowest CPU per request of the repeats: noise on a shared host only ever adds CPU
    /// time, so the lowest is the steadiest estimate of the cost itself.
    pub(crate) cpu_us_per_req_min: Option<f64>,
    pub(crate) vol_cs_per_req: Option<f64>,
    pub(crate) invol_cs_per_req: Option<f64>,
    pub(crate) vol_cs_per_sec: Option<f64>,
    pub(crate) invol_cs_per_sec: Option<f64>,
    pub(crate) peak_mem_bytes: Option<f64>,
    pub(crate) mem_per_conn_bytes: Option<f64>,
    /// Growth of the kernel's thread stacks (`KernelStack` of /proc/meminfo) per connection.
    pub(crate) kernel_stack_per_conn_bytes: Option<f64>,
    /// Growth of TCP socket memory (`/proc/net/sockstat` `mem` pages) per connection: both
    /// ends of each loopback connection, loadgen's included.
    pub(crate) socket_mem_per_conn_bytes: Option<f64>,
    /// User memory, kernel stacks and socket memory per connection together.
    pub(crate) total_mem_per_conn_bytes: Option<f64>,
    pub(crate) max_procs: usize,
    pub(crate) max_threads: usize,
    /// What else used the server's CPUs during the window, percent of one CPU.
    pub(crate) other_load_pct: Option<f64>,
    /// Time stolen by the hypervisor from the server's CPUs over the window, percent of the
    /// window (the most of any repeat).
    pub(crate) steal_pct: Option<f64>,
    /// The server's CPU quota (`--server-cpu-quota`), in CPUs.
    pub(crate) cpu_quota: Option<f64>,
    /// Periods in which the quota throttled the server, over the point (median of repeats).
    pub(crate) nr_throttled: Option<f64>,
    /// Time the quota held the server back, milliseconds over the point (median of repeats).
    pub(crate) throttled_ms: Option<f64>,
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
    /// Each metric's value in each repeat (`throughput_per_sec`, `cpu_us_per_req`, `p99_us`,
    /// ...), for the significance tests between rows; in summary.json only.
    pub(crate) per_repeat: BTreeMap<String, Vec<f64>>,
}

/// The columns of `summary.csv`, in order: every scalar field of [`Row`].
pub(crate) const CSV_COLUMNS: &[&str] = &[
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
    "ci_level",
    "throughput_per_sec_ci_low",
    "throughput_per_sec_ci_high",
    "p50_us",
    "p90_us",
    "p95_us",
    "p99_us",
    "p99_9_us",
    "p99_99_us",
    "p99_999_us",
    "max_us",
    "p50_us_ci_low",
    "p50_us_ci_high",
    "p90_us_ci_low",
    "p90_us_ci_high",
    "p95_us_ci_low",
    "p95_us_ci_high",
    "p99_us_ci_low",
    "p99_us_ci_high",
    "p99_9_us_ci_low",
    "p99_9_us_ci_high",
    "p99_99_us_ci_low",
    "p99_99_us_ci_high",
    "p99_999_us_ci_low",
    "p99_999_us_ci_high",
    "errors",
    "client_bound",
    "client_cpu_per_msg_us",
    "cpu_mean_pct",
    "cpu_cv",
    "user_us_per_req",
    "sys_us_per_req",
    "cpu_us_per_req",
    "cpu_us_per_req_ci_low",
    "cpu_us_per_req_ci_high",
    "cpu_us_per_req_min",
    "vol_cs_per_req",
    "invol_cs_per_req",
    "vol_cs_per_sec",
    "invol_cs_per_sec",
    "peak_mem_bytes",
    "mem_per_conn_bytes",
    "kernel_stack_per_conn_bytes",
    "socket_mem_per_conn_bytes",
    "total_mem_per_conn_bytes",
    "max_procs",
    "max_threads",
    "other_load_pct",
    "steal_pct",
    "cpu_quota",
    "nr_throttled",
    "throttled_ms",
    "deliveries",
    "delivery_errors",
    "delivery_p50_us",
    "delivery_p99_us",
    "delivery_p99_9_us",
    "delivery_max_us",
    "hist",
];

/// The order-statistic interval of `values`' median, as `(low, high)`.
fn bounds(values: &[f64]) -> (Option<f64>, Option<f64>) {
    stats::median_interval(values).map_or((None, None), |i| (Some(i.low), Some(i.high)))
}

pub(crate) fn median_of(ms: &[&Measured], f: impl Fn(&Measured) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = ms.iter().filter_map(|m| f(m)).collect();
    stats::median(&v)
}

/// Sums the repeats' histograms and writes the sum as `<id>.hist` and `<id>.hgrm` in `dir`.
/// Returns its percentiles, each repeat's, and its path relative to `run_dir`.
pub(crate) fn merge_histograms(
    ms: &[&Measured],
    run_dir: &Path,
    dir: &Path,
    id: &str,
) -> Result<(Percentiles, Vec<Percentiles>, String)> {
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
    Ok((
        Percentiles::of(&sum),
        parts.iter().map(Percentiles::of).collect(),
        rel,
    ))
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
    let interval = stats::median_interval(&tp);
    row.ci_level = interval.map(|i| i.level);
    (
        row.throughput_per_sec_ci_low,
        row.throughput_per_sec_ci_high,
    ) = bounds(&tp);
    row.per_repeat.insert("throughput_per_sec".into(), tp);
    match merge_histograms(&ok, run_dir, dir, &point.id) {
        Ok((p, parts, rel)) if p.count > 0 => {
            let of = |f: fn(&Percentiles) -> f64| -> Vec<f64> {
                parts.iter().filter(|p| p.count > 0).map(f).collect()
            };
            let each: [(&str, Vec<f64>); 7] = [
                ("p50_us", of(|p| p.p50)),
                ("p90_us", of(|p| p.p90)),
                ("p95_us", of(|p| p.p95)),
                ("p99_us", of(|p| p.p99)),
                ("p99_9_us", of(|p| p.p99_9)),
                ("p99_99_us", of(|p| p.p99_99)),
                ("p99_999_us", of(|p| p.p99_999)),
            ];
            (row.p50_us_ci_low, row.p50_us_ci_high) = bounds(&each[0].1);
            (row.p90_us_ci_low, row.p90_us_ci_high) = bounds(&each[1].1);
            (row.p95_us_ci_low, row.p95_us_ci_high) = bounds(&each[2].1);
            (row.p99_us_ci_low, row.p99_us_ci_high) = bounds(&each[3].1);
            (row.p99_9_us_ci_low, row.p99_9_us_ci_high) = bounds(&each[4].1);
            (row.p99_99_us_ci_low, row.p99_99_us_ci_high) = bounds(&each[5].1);
            (row.p99_999_us_ci_low, row.p99_999_us_ci_high) = bounds(&each[6].1);
            for (name, v) in each {
                row.per_repeat.insert(name.into(), v);
            }
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
        Ok(_) if ok.iter().any(|m| m.driver_latency_us.is_some()) => {
            // A client without histograms (redis-benchmark) gives its own percentiles: the
            // median over the repeats of each.
            let at = |i: usize| median_of(&ok, |m| m.driver_latency_us.map(|l| l[i]));
            (row.p50_us, row.p95_us, row.p99_us, row.max_us) = (at(0), at(1), at(2), at(3));
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
    let cpu: Vec<f64> = ok.iter().filter_map(|m| m.cost.cpu_us_per_req).collect();
    row.cpu_us_per_req = stats::median(&cpu);
    (row.cpu_us_per_req_ci_low, row.cpu_us_per_req_ci_high) = bounds(&cpu);
    row.cpu_us_per_req_min = stats::min(&cpu);
    row.per_repeat.insert("cpu_us_per_req".into(), cpu);
    row.vol_cs_per_req = median_of(&ok, |m| m.cost.vol_cs_per_req);
    row.invol_cs_per_req = median_of(&ok, |m| m.cost.invol_cs_per_req);
    row.vol_cs_per_sec = median_of(&ok, |m| m.cost.vol_cs_per_sec);
    row.invol_cs_per_sec = median_of(&ok, |m| m.cost.invol_cs_per_sec);
    row.peak_mem_bytes = median_of(&ok, |m| Some(m.cost.peak_mem_bytes as f64));
    row.mem_per_conn_bytes = median_of(&ok, |m| m.cost.mem_per_conn_bytes);
    row.per_repeat.insert(
        "mem_per_conn_bytes".into(),
        ok.iter()
            .filter_map(|m| m.cost.mem_per_conn_bytes)
            .collect(),
    );
    row.kernel_stack_per_conn_bytes = median_of(&ok, |m| m.cost.kernel_stack_per_conn_bytes);
    row.socket_mem_per_conn_bytes = median_of(&ok, |m| m.cost.socket_mem_per_conn_bytes);
    row.total_mem_per_conn_bytes = row.mem_per_conn_bytes.map(|u| {
        u + row.kernel_stack_per_conn_bytes.unwrap_or(0.0)
            + row.socket_mem_per_conn_bytes.unwrap_or(0.0)
    });
    row.steal_pct = ok
        .iter()
        .filter_map(|m| m.cost.steal_pct)
        .max_by(f64::total_cmp);
    row.cpu_quota = ok.iter().find_map(|m| m.throttle.map(|t| t.quota));
    row.nr_throttled = median_of(&ok, |m| m.throttle.map(|t| t.nr_throttled as f64));
    row.throttled_ms = median_of(&ok, |m| m.throttle.map(|t| t.throttled_s * 1e3));
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

pub(crate) fn csv_field(v: &serde_json::Value) -> String {
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

/// Percent of one CPU that something else may take from the server's CPUs before a point is
/// marked as disturbed.
pub(crate) const DISTURBED_PCT: f64 = 10.0;

/// Percent of the window the hypervisor may steal from the server's CPUs before a point is
/// marked as disturbed.
pub(crate) const STEAL_PCT: f64 = 2.0;

impl Row {
    /// Something other than the server used its CPUs during the window: another program, or
    /// the hypervisor, which stole more than [`STEAL_PCT`] of their time.
    pub(crate) fn disturbed(&self) -> bool {
        self.other_load_pct.is_some_and(|p| p > DISTURBED_PCT)
            || self.steal_pct.is_some_and(|p| p > STEAL_PCT)
    }

    /// The quota held the server back during the point: its latency includes throttling.
    pub(crate) fn throttled(&self) -> bool {
        self.nr_throttled.is_some_and(|n| n > 0.0)
    }

    /// The values of `metric` in each repeat.
    pub(crate) fn repeats_of(&self, metric: &str) -> &[f64] {
        self.per_repeat.get(metric).map_or(&[], Vec::as_slice)
    }
}

// ---------------------------------------------------------------------------------------------
// Selecting rows.

/// The servers of the rows, in the order they ran.
pub(crate) fn servers(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.server) {
            out.push(r.server.clone());
        }
    }
    out
}

pub(crate) fn find<'a>(rows: &'a [Row], suite: &str, server: &str, point: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.suite == suite && r.server == server && r.point == point)
}

/// The distinct points of a suite and series, in x order: `(point id, label, x)`.
pub(crate) fn points_of(rows: &[Row], suite: &str, series: &str) -> Vec<(String, String, f64)> {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A closed-loop row of `quick`, for the tests here and of the report's Markdown.
    pub(crate) fn row(server: &str, point: &str, x: f64, tp: f64) -> Row {
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
    fn summary_round_trips_and_csv_has_every_column() {
        let dir = std::env::temp_dir().join(format!("xtask-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = row("fiber+completer", "c1", 1.0, 1234.5);
        r.notes.push("a note, with a comma".into());
        r.failure = Some("said \"no\"".into());
        r.per_repeat.insert("cpu_us_per_req".into(), vec![1.0, 2.0]);
        // Every CSV column is a field of a row, the intervals among them.
        let v = serde_json::to_value(&r).unwrap();
        for c in CSV_COLUMNS {
            assert!(v.get(*c).is_some(), "{c}");
        }
        for c in ["throughput_per_sec", "cpu_us_per_req", "p99_us"] {
            assert!(CSV_COLUMNS.contains(&format!("{c}_ci_low").as_str()), "{c}");
            assert!(
                CSV_COLUMNS.contains(&format!("{c}_ci_high").as_str()),
                "{c}"
            );
        }
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
