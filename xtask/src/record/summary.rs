//! The summary of a run: a row per server and point from its repeats (medians, intervals,
//! latency from the repeats' histograms added together), and `summary.csv` and
//! `summary.json`, written as each point ends. A row and its lookups are `row`.
//!
//! It may call the plan layer, the run layer's `outcome` and `histogram`, and the record
//! layer's `row`, `rounds`, `stats` and `workloads`.

use std::path::Path;

use anyhow::{Context, Result};

use crate::plan::servers::Variant;
use crate::plan::suites::{Load, Point, Stop, Workload};
use crate::record::rounds::Tail;
use crate::record::row::{CSV_COLUMNS, Row, csv_field};
use crate::record::stats::{self, median_of};
use crate::run::histogram::Percentiles;
use crate::run::outcome::{Failure, Measured};

/// The order-statistic interval of `values`' median, as `(low, high)`.
fn bounds(values: &[f64]) -> (Option<f64>, Option<f64>) {
    stats::median_interval(values).map_or((None, None), |i| (Some(i.low), Some(i.high)))
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
            crate::run::histogram::decode_histogram(&bytes)
                .with_context(|| format!("in {}", path.display()))?,
        );
    }
    let sum = crate::run::histogram::merge(&parts);
    let hist = dir.join(format!("{id}.hist"));
    if ms.len() > 1 {
        std::fs::write(&hist, crate::run::histogram::encode_histogram(&sum)?)
            .with_context(|| format!("writing {}", hist.display()))?;
    }
    let mut hgrm = Vec::new();
    crate::run::histogram::write_hgrm(&sum, &mut hgrm)?;
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
    let mut row = identity(point, server);
    crate::record::workloads::identity(&mut row, point);
    row.repeats = outcomes.len();
    row.ok = ok.len();
    row.per_round = crate::record::rounds::per_round(outcomes);
    failures(&mut row, outcomes);
    if ok.is_empty() {
        return row;
    }
    throughput(&mut row, &ok);
    let tails = latency(&mut row, &ok, run_dir, dir, &point.id);
    let tails = crate::record::rounds::tails_per_round(outcomes, &tails);
    row.per_round.extend(tails);
    cost(&mut row, &ok);
    memory_and_load(&mut row, &ok);
    deliveries_and_notes(&mut row, &ok);
    crate::record::workloads::connections(&mut row, &ok);
    row
}

/// What the row is of: the point and the server.
fn identity(point: &Point, server: &Variant) -> Row {
    Row {
        suite: point.suite.name().to_string(),
        server: server.name.clone(),
        series: point.series.clone(),
        point: point.id.clone(),
        label: point.label.clone(),
        x: point.x(),
        conns: point.conns,
        workers: point.workers,
        mode: match point.load {
            Load::Closed => "closed".into(),
            Load::Open { .. } => "open".into(),
        },
        rate: match point.load {
            Load::Open { rate } => Some(rate),
            Load::Closed => None,
        },
        arrivals: match point.load {
            Load::Open { .. } => Some(point.arrivals.name().to_string()),
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
        ..Row::default()
    }
}

/// The failed repeats: the row's failure when none succeeded, else a note each.
fn failures(row: &mut Row, outcomes: &[Result<Measured, Failure>]) {
    let none_ok = row.ok == 0;
    for (i, o) in outcomes.iter().enumerate() {
        if let Err(f) = o {
            if none_ok && row.failure.is_none() {
                row.failure = Some(f.to_string());
            } else {
                row.notes.push(format!("repeat {} failed: {f}", i + 1));
            }
        }
    }
}

/// The median throughput, its spread and interval.
fn throughput(row: &mut Row, ok: &[&Measured]) {
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
}

/// The latency percentiles from the repeats' histograms added together (or an outside
/// client's own), with each one's interval over the repeats. Returns each repeat's tail (its
/// p99 and p99.9), for the verdicts' rounds.
fn latency(row: &mut Row, ok: &[&Measured], run_dir: &Path, dir: &Path, id: &str) -> Vec<Tail> {
    match merge_histograms(ok, run_dir, dir, id) {
        Ok((p, parts, rel)) if p.count > 0 => {
            let tails = parts
                .iter()
                .map(|p| (p.count > 0).then_some([Some(p.p99), Some(p.p99_9)]))
                .map(|t| t.unwrap_or([None; 2]))
                .collect();
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
            tails
        }
        Ok(_) if ok.iter().any(|m| m.driver_latency_us.is_some()) => {
            // A client without histograms (an outside client) gives its own percentiles: the
            // median over the repeats of each.
            let at = |i: usize| median_of(ok, |m| m.driver_latency_us.map(|l| l[i]));
            (row.p50_us, row.p95_us, row.p99_us, row.max_us) = (at(0), at(1), at(2), at(3));
            driver_avg_min(row, ok);
            ok.iter()
                .map(|m| [m.driver_latency_us.map(|l| l[2]), None])
                .collect()
        }
        Ok(_) => {
            row.notes.push("no latency was recorded".into());
            Vec::new()
        }
        Err(e) => {
            row.notes
                .push(format!("latency histogram unreadable: {e:#}"));
            Vec::new()
        }
    }
}

/// An outside client's mean and least latency, where it says them (redis-benchmark): in
/// summary.json only, per repeat, as `avg_us` and `min_us`.
fn driver_avg_min(row: &mut Row, ok: &[&Measured]) {
    for (i, name) in ["avg_us", "min_us"].into_iter().enumerate() {
        let v: Vec<f64> = ok
            .iter()
            .filter_map(|m| m.driver_avg_min_us.map(|l| l[i]))
            .collect();
        if !v.is_empty() {
            row.per_repeat.insert(name.into(), v);
        }
    }
}

/// The server's CPU cost and the client's.
fn cost(row: &mut Row, ok: &[&Measured]) {
    row.errors = ok.iter().map(|m| m.errors).sum();
    row.client_bound = ok.iter().any(|m| m.client_bound);
    row.client_cpu_per_msg_us = median_of(ok, |m| Some(m.client_cpu_per_msg_us));
    schedule(row, ok);
    row.cpu_mean_pct = median_of(ok, |m| m.cost.cpu_mean_pct);
    row.cpu_cv = median_of(ok, |m| m.cost.cpu_cv);
    row.user_us_per_req = median_of(ok, |m| m.cost.user_us_per_req);
    row.sys_us_per_req = median_of(ok, |m| m.cost.sys_us_per_req);
    let cpu: Vec<f64> = ok.iter().filter_map(|m| m.cost.cpu_us_per_req).collect();
    row.cpu_us_per_req = stats::median(&cpu);
    (row.cpu_us_per_req_ci_low, row.cpu_us_per_req_ci_high) = bounds(&cpu);
    row.cpu_us_per_req_min = stats::min(&cpu);
    row.per_repeat.insert("cpu_us_per_req".into(), cpu);
    row.vol_cs_per_req = median_of(ok, |m| m.cost.vol_cs_per_req);
    row.invol_cs_per_req = median_of(ok, |m| m.cost.invol_cs_per_req);
    row.vol_cs_per_sec = median_of(ok, |m| m.cost.vol_cs_per_sec);
    row.invol_cs_per_sec = median_of(ok, |m| m.cost.invol_cs_per_sec);
    row.counted = crate::record::counted::aggregate(ok, &mut row.per_repeat);
}

/// The client's own schedule: its send lag and whether every repeat kept it.
fn schedule(row: &mut Row, ok: &[&Measured]) {
    row.send_lag_p50_us = median_of(ok, |m| m.send_lag_us.map(|l| l[0]));
    row.send_lag_p99_us = median_of(ok, |m| m.send_lag_us.map(|l| l[1]));
    let p99: Vec<f64> = ok
        .iter()
        .filter_map(|m| m.send_lag_us.map(|l| l[1]))
        .collect();
    if !p99.is_empty() {
        row.per_repeat.insert("send_lag_p99_us".into(), p99);
    }
    row.schedule_ok = ok
        .iter()
        .filter_map(|m| m.schedule_ok)
        .reduce(|a, b| a && b);
    row.schedule_reason = ok
        .iter()
        .enumerate()
        .find(|(_, m)| m.schedule_ok == Some(false))
        .map(|(i, m)| {
            let why = m.schedule_reason.as_deref().unwrap_or("not kept");
            format!("repeat {} of {}: {why}", i + 1, ok.len())
        });
    row.pacing = ok.iter().find_map(|m| m.pacing.clone());
}

/// Memory per connection, the peak, the throttling, the processes, the load beside.
fn memory_and_load(row: &mut Row, ok: &[&Measured]) {
    row.peak_mem_bytes = median_of(ok, |m| Some(m.cost.peak_mem_bytes as f64));
    row.mem_per_conn_bytes = median_of(ok, |m| m.cost.mem_per_conn_bytes);
    row.per_repeat.insert(
        "mem_per_conn_bytes".into(),
        ok.iter()
            .filter_map(|m| m.cost.mem_per_conn_bytes)
            .collect(),
    );
    row.kernel_stack_per_conn_bytes = median_of(ok, |m| m.cost.kernel_stack_per_conn_bytes);
    row.socket_mem_per_conn_bytes = median_of(ok, |m| m.cost.socket_mem_per_conn_bytes);
    row.total_mem_per_conn_bytes = row.mem_per_conn_bytes.map(|u| {
        u + row.kernel_stack_per_conn_bytes.unwrap_or(0.0)
            + row.socket_mem_per_conn_bytes.unwrap_or(0.0)
    });
    row.steal_median_pct = median_of(ok, |m| m.cost.steal_pct);
    row.steal_pct = ok
        .iter()
        .filter_map(|m| m.cost.steal_pct)
        .max_by(f64::total_cmp);
    row.cpu_quota = ok.iter().find_map(|m| m.throttle.map(|t| t.quota));
    row.nr_throttled = median_of(ok, |m| m.throttle.map(|t| t.nr_throttled as f64));
    row.throttled_ms = median_of(ok, |m| m.throttle.map(|t| t.throttled_s * 1e3));
    row.cq_dropped = ok.iter().filter_map(|m| m.cq_overflow.map(|o| o.0)).max();
    row.cq_backlog_repeats = ok.iter().any(|m| m.cq_overflow.is_some()).then(|| {
        ok.iter()
            .filter(|m| m.cq_overflow.is_some_and(|o| o.1))
            .count()
    });
    row.max_procs = ok.iter().map(|m| m.cost.max_procs).max().unwrap_or(0);
    row.max_threads = ok.iter().map(|m| m.cost.max_threads).max().unwrap_or(0);
    row.other_load_pct = median_of(ok, |m| m.cost.other_load_pct);
    row.irq_softirq_pct = median_of(ok, |m| m.cost.irq_softirq_pct);
    row.cpu_accounting = accounting_of(ok);
}

/// The repeats' CPU accounting: theirs where they agree, else `mixed`; an outcome from before
/// accounting was recorded counts as `samples`.
fn accounting_of(ok: &[&Measured]) -> Option<String> {
    let each = |m: &&Measured| {
        m.cost
            .cpu_accounting
            .clone()
            .unwrap_or_else(|| "samples".into())
    };
    let first = ok.first().map(each)?;
    Some(if ok.iter().all(|m| each(m) == first) {
        first
    } else {
        "mixed".into()
    })
}

/// Chat's deliveries, the CPU series of the typical repeat, and the repeats' notes.
fn deliveries_and_notes(row: &mut Row, ok: &[&Measured]) {
    row.deliveries = median_of(ok, |m| m.deliveries.map(|d| d as f64));
    row.delivery_errors = ok.iter().map(|m| m.delivery_errors).sum();
    row.delivery_p50_us = median_of(ok, |m| m.delivery_latency_us.map(|d| d[0]));
    row.delivery_p99_us = median_of(ok, |m| m.delivery_latency_us.map(|d| d[1]));
    row.delivery_p99_9_us = median_of(ok, |m| m.delivery_latency_us.map(|d| d[2]));
    row.delivery_max_us = median_of(ok, |m| m.delivery_latency_us.map(|d| d[3]));
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
    for m in ok {
        for n in &m.notes {
            if !row.notes.contains(n) {
                row.notes.push(n.clone());
            }
        }
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
    crate::record::run_dir::write_whole(&dir.join("summary.csv"), csv.as_bytes())?;
    let json = serde_json::to_string_pretty(rows)?;
    crate::record::run_dir::write_whole(&dir.join("summary.json"), json.as_bytes())?;
    Ok(())
}

/// Reads the rows of a run directory's `summary.json`.
pub(crate) fn read_summary(dir: &Path) -> Result<Vec<Row>> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (is it a result directory?)", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

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
        for c in [
            "throughput_per_sec",
            "cpu_us_per_req",
            "p99_us",
            "syscalls_per_req",
        ] {
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
