//! The capacity suite's plots: per server and workload, its latency (p50, p99, p99.9, log
//! scale) against the rate it achieved at each rate offered, the objective as a line; and per
//! workload every server's p99 curve in one figure.
//!
//! It may call what `figures` may.

use super::{Data, Figure};
use crate::plan::capacity::Slo;
use crate::record::row::{Row, servers};
use crate::record::stats;
use crate::report::plots::{Bound, Line, Scale};

/// The suite's rows that measured something.
fn probes<'a>(rows: &'a [Row], series: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
    rows.iter()
        .filter(move |r| r.suite == "capacity" && r.series == series && r.ok > 0)
}

/// One line of `y` against the achieved rate over `rows`: the probes at one offered rate (a
/// bisection's and a confirmation's) as one point, the median of each coordinate, so that
/// the line runs from rate to rate instead of zigzagging through the repeats.
fn line(name: &str, rows: &[&Row], y: fn(&Row) -> Option<f64>) -> Option<Line> {
    let mut offered: Vec<f64> = rows.iter().filter_map(|r| r.rate).collect();
    offered.sort_by(f64::total_cmp);
    offered.dedup();
    let points: Vec<(f64, f64, bool)> = offered
        .into_iter()
        .filter_map(|rate| {
            let at: Vec<&&Row> = rows.iter().filter(|r| r.rate == Some(rate)).collect();
            let xs: Vec<f64> = at.iter().filter_map(|r| r.throughput_per_sec).collect();
            let ys: Vec<f64> = at.iter().filter_map(|r| y(r)).collect();
            let (x, v) = (stats::median(&xs)?, stats::median(&ys)?);
            (v > 0.0).then_some((x, v, at.iter().any(|r| r.client_bound)))
        })
        .collect();
    (!points.is_empty()).then(|| Line {
        name: name.to_string(),
        points,
        markers: true,
        bars: Vec::new(),
    })
}

/// The objective the rows were judged by, as a line across a latency plot.
fn objective(rows: &[&Row]) -> Option<Bound> {
    let slo: Slo = rows.iter().find_map(|r| r.slo.as_ref())?.parse().ok()?;
    Some(Bound {
        y: slo.limit_us,
        label: format!("objective {slo}"),
    })
}

pub(crate) fn figures(rows: &[Row]) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut workloads: Vec<&str> = rows
        .iter()
        .filter(|r| r.suite == "capacity")
        .map(|r| r.series.as_str())
        .collect();
    workloads.sort_unstable();
    workloads.dedup();
    let axes = (
        ("achieved rate (per second)", Scale::Linear),
        ("latency (µs, from the due time)", Scale::Log),
    );
    for w in workloads {
        let all: Vec<&Row> = probes(rows, w).collect();
        let bound = objective(&all);
        let with_bound = |f: Figure| match &bound {
            Some(b) => f.bound(b.clone()),
            None => f,
        };
        let p99s: Vec<Line> = servers(rows)
            .into_iter()
            .filter_map(|s| {
                let mine: Vec<&Row> = all.iter().copied().filter(|r| r.server == s).collect();
                line(&s, &mine, |r| r.p99_us)
            })
            .collect();
        out.push(with_bound(Figure::new(
            format!("{w}-p99"),
            format!("{w}: p99 latency against the achieved rate, every server (Poisson arrivals)"),
            axes.0,
            axes.1,
            Data::Drawn(p99s),
        )));
        for s in servers(rows) {
            let mine: Vec<&Row> = all.iter().copied().filter(|r| r.server == s).collect();
            let lines: Vec<Line> = [
                line("p50", &mine, |r| r.p50_us),
                line("p99", &mine, |r| r.p99_us),
                line("p99.9", &mine, |r| r.p99_9_us),
            ]
            .into_iter()
            .flatten()
            .collect();
            if lines.is_empty() {
                continue;
            }
            out.push(with_bound(Figure::new(
                format!("{w}-{s}"),
                format!("{w}, {s}: latency against the achieved rate"),
                axes.0,
                axes.1,
                Data::Drawn(lines),
            )));
        }
    }
    out
}
