//! The scaling suite's plots, against the server's workers: closed-loop throughput with each
//! server's linear ideal (W × its one-worker throughput), CPU per echo (closed loop and at
//! equal load), parallel efficiency, and the Figure 7 point under its Little's-law bound; and
//! the efficiency arithmetic the report's section shares.
//!
//! It may call what `figures` may.

use super::{Data, Figure, cpu_ci, lines_with, tp_ci};
use crate::plan::suites::{self, Suite};
use crate::record::row::{Row, servers};
use crate::report::plots::{Bound, Line, Scale};

/// The Figure 7 series of the suite.
pub(crate) fn work_series() -> String {
    format!("work-{}us", suites::EMPER_COMPUTE_US)
}

/// Parallel efficiency: `throughput / (workers × one_worker)`, 1 for linear scaling.
pub(crate) fn parallel_efficiency(throughput: f64, workers: usize, one_worker: f64) -> Option<f64> {
    (workers > 0 && one_worker > 0.0).then(|| throughput / (workers as f64 * one_worker))
}

/// The workers of a scaling row (a row of a run from before rows kept them: its x).
pub(crate) fn workers_of(r: &Row) -> usize {
    r.workers.unwrap_or(r.x as usize)
}

/// The throughput of `server` at one worker in `series`, where it was measured.
fn one_worker_throughput(rows: &[Row], series: &str, server: &str) -> Option<f64> {
    rows.iter()
        .find(|r| {
            r.suite == Suite::Scaling.name()
                && r.series == series
                && r.server == server
                && r.ok > 0
                && workers_of(r) == 1
        })?
        .throughput_per_sec
}

/// The parallel efficiency of a scaling row against its server's one-worker row of the same
/// series.
pub(crate) fn efficiency(rows: &[Row], r: &Row) -> Option<f64> {
    parallel_efficiency(
        r.throughput_per_sec?,
        workers_of(r),
        one_worker_throughput(rows, &r.series, &r.server)?,
    )
}

/// The worker counts of the suite's rows, in order.
fn worker_counts(rows: &[Row]) -> Vec<usize> {
    let mut w: Vec<usize> = rows
        .iter()
        .filter(|r| r.suite == Suite::Scaling.name())
        .map(workers_of)
        .collect();
    w.sort_unstable();
    w.dedup();
    w
}

/// Server workers on a linear axis: 1, 2, 4, 8 workers, and the ideal a straight line.
const WORKERS: (&str, Scale) = ("server workers", Scale::Linear);

/// The x of a scaling row.
fn x(r: &Row) -> f64 {
    workers_of(r) as f64
}

/// Closed-loop throughput against workers, and each server's linear ideal through its
/// one-worker point.
fn throughput_with_ideals(rows: &[Row], counts: &[usize]) -> Vec<Line> {
    let suite = Suite::Scaling.name();
    let mut throughput = lines_with(rows, suite, "closed", x, |r| r.throughput_per_sec, tp_ci);
    // An ideal is a line only where there is more than one worker count to draw it through.
    if counts.len() > 1 {
        for s in servers(rows) {
            if let Some(one) = one_worker_throughput(rows, "closed", &s) {
                throughput.push(Line {
                    name: format!("{s}: linear ideal"),
                    points: counts
                        .iter()
                        .map(|&w| (w as f64, w as f64 * one, false))
                        .collect(),
                    markers: false,
                    bars: Vec::new(),
                });
            }
        }
    }
    throughput
}

/// The Figure 7 point against workers, under its Little's-law bound: a horizontal bound
/// at one worker count, a line through them at several.
fn work_with_bound(rows: &[Row], counts: &[usize]) -> (Vec<Line>, Vec<Bound>) {
    let suite = Suite::Scaling.name();
    let bound = |w: usize| suites::littles_law_bound(w, suites::EMPER_COMPUTE_US);
    let mut fig7 = lines_with(
        rows,
        suite,
        &work_series(),
        x,
        |r| r.throughput_per_sec,
        tp_ci,
    );
    let mut fig7_bounds = Vec::new();
    match counts {
        [] => {}
        [w] => fig7_bounds.push(Bound {
            y: bound(*w),
            label: format!(
                "Little's law bound: {w} worker(s) / {} µs = {:.0}/s",
                suites::EMPER_COMPUTE_US,
                bound(*w)
            ),
        }),
        _ if !fig7.is_empty() => fig7.push(Line {
            name: format!("Little's law bound: W / {} µs", suites::EMPER_COMPUTE_US),
            points: counts
                .iter()
                .map(|&w| (w as f64, bound(w), false))
                .collect(),
            markers: false,
            bars: Vec::new(),
        }),
        _ => {}
    }
    (fig7, fig7_bounds)
}

/// Server CPU per echo of `series` against workers, with its intervals.
fn cpu_per_echo(series: &str) -> Data {
    Data::Lines {
        series: series.into(),
        x,
        y: |r| r.cpu_us_per_req,
        ci: cpu_ci,
    }
}

/// The suite's figures.
pub(crate) fn figures(rows: &[Row]) -> Vec<Figure> {
    let counts = worker_counts(rows);
    let (fig7, fig7_bounds) = work_with_bound(rows, &counts);
    let cpu = ("µs of CPU per echo (user + system)", Scale::Linear);
    let efficiency_lines = lines_with(
        rows,
        Suite::Scaling.name(),
        "closed",
        x,
        |r| efficiency(rows, r),
        |_| None,
    );
    let mut work = Figure::new(
        "work",
        format!(
            "Figure 7 point: {} µs of work per echo, against workers",
            suites::EMPER_COMPUTE_US
        ),
        WORKERS,
        ("echoes per second", Scale::Linear),
        Data::Drawn(fig7),
    );
    work.bounds = fig7_bounds;
    vec![
        Figure::new(
            "throughput",
            "Echo throughput against workers, closed loop (thin lines: linear ideal, W × one worker's)",
            WORKERS,
            ("echoes per second", Scale::Linear),
            Data::Drawn(throughput_with_ideals(rows, &counts)),
        ),
        Figure::new(
            "cpu-per-echo",
            "Server CPU per echo against workers, closed loop",
            WORKERS,
            cpu,
            cpu_per_echo("closed"),
        ),
        Figure::new(
            "cpu-per-echo-open",
            "Server CPU per echo against workers at equal load per worker, open loop",
            WORKERS,
            cpu,
            cpu_per_echo("open"),
        ),
        Figure::new(
            "efficiency",
            "Parallel efficiency, closed loop: throughput(W) / (W × throughput(1))",
            WORKERS,
            ("parallel efficiency", Scale::Linear),
            Data::Drawn(efficiency_lines),
        )
        .bound(Bound {
            y: 1.0,
            label: "linear scaling".into(),
        }),
        work,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    fn scaling(server: &str, w: usize, tp: f64) -> Row {
        Row {
            suite: "scaling".into(),
            workers: Some(w),
            ..row(server, &format!("closed-w{w}"), w as f64, tp)
        }
    }

    #[test]
    fn efficiency_is_throughput_over_workers_times_one_worker() {
        assert_eq!(parallel_efficiency(200.0, 2, 100.0), Some(1.0));
        assert_eq!(parallel_efficiency(150.0, 2, 100.0), Some(0.75));
        assert_eq!(parallel_efficiency(100.0, 1, 100.0), Some(1.0));
        assert_eq!(parallel_efficiency(100.0, 2, 0.0), None);
        let rows = vec![
            scaling("a", 1, 100.0),
            scaling("a", 2, 180.0),
            scaling("a", 4, 300.0),
            scaling("b", 2, 50.0),
        ];
        assert_eq!(efficiency(&rows, &rows[1]), Some(0.9));
        assert_eq!(efficiency(&rows, &rows[2]), Some(0.75));
        // No one-worker row of b: no efficiency.
        assert_eq!(efficiency(&rows, &rows[3]), None);
        let p = figures(&rows);
        let drawn = |name: &str| match &p.iter().find(|f| f.name == name).unwrap().data {
            Data::Drawn(lines) => lines.clone(),
            other => panic!("{name}: lines drawn already, not {other:?}"),
        };
        let tp = drawn("throughput");
        let ideal = tp.iter().find(|l| l.name == "a: linear ideal").unwrap();
        assert_eq!(
            ideal.points,
            [
                (1.0, 100.0, false),
                (2.0, 200.0, false),
                (4.0, 400.0, false)
            ]
        );
        let eff = drawn("efficiency");
        assert_eq!(eff[0].points[2], (4.0, 0.75, false));
    }
}
