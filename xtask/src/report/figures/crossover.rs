//! The crossover figure of each of issue 62's workloads: every server's ratio to the
//! suite's reference across the sweep (the reference a flat line at 1), so that a reader
//! sees where two runtimes swap places. churn: CPU per request against 1/R at 512
//! connections (or the suite's first count); idle: the active clients' p99 against the idle
//! share at the largest total; sizes: CPU per request against the message size; bursts: p99
//! against the load (a share of capacity) under on-off arrivals; skew: throughput against Zipf's exponent
//! at SET:GET 1:30 (uniform at 0).
//!
//! It may call what `figures` may, and the report layer's `crossover`.

use super::{Data, Figure};
use crate::plan::suites::Suite;
use crate::record::row::{Row, servers_that_ran};
use crate::report::crossover::{self, ByServer, Reading, ratios, sentences};
use crate::report::plots::{Line, Scale};

/// What a crossover figure plots: which rows make the sweep, their x, and the measure.
struct Sweep {
    x: (&'static str, Scale),
    what: &'static str,
    /// Whether less of `y` is better (a cost, a latency).
    lower_better: bool,
    pick: fn(&Row, &[Row]) -> bool,
    x_of: fn(&Row) -> f64,
    y: Reading,
}

/// The sweep of each workload, `None` for another suite.
fn sweep(suite: Suite) -> Option<Sweep> {
    Some(match suite {
        Suite::Churn => Sweep {
            x: ("1 / requests per connection (0: kept)", Scale::Linear),
            what: "CPU per request",
            lower_better: true,
            pick: |r, rows| !r.series.starts_with("kv-") && r.conns == churn_conns(rows),
            x_of: |r| r.requests_per_conn.map_or(0.0, |n| 1.0 / n as f64),
            y: crossover::CPU,
        },
        Suite::Idle => Sweep {
            x: ("idle share of the connections (%)", Scale::Linear),
            what: "the active clients' p99",
            lower_better: true,
            pick: |r, rows| r.series.starts_with("active-") && r.x == largest(rows),
            x_of: |r| 100.0 * r.idle_conns.unwrap_or(0) as f64 / r.x.max(1.0),
            y: crossover::P99,
        },
        Suite::Sizes => Sweep {
            x: ("message size (bytes)", Scale::Log),
            what: "CPU per request",
            lower_better: true,
            pick: |r, _| r.series == "echo",
            x_of: |r| r.msg_bytes.unwrap_or(r.x),
            y: crossover::CPU,
        },
        Suite::Bursts => Sweep {
            x: ("load, on-off arrivals (% of capacity)", Scale::Linear),
            what: "p99",
            lower_better: true,
            pick: |r, _| r.series == "onoff",
            x_of: |r| r.x,
            y: crossover::P99,
        },
        Suite::Skew => Sweep {
            x: (
                "Zipf exponent of the keys (0: uniform), SET:GET 1:30",
                Scale::Linear,
            ),
            what: "throughput",
            lower_better: false,
            pick: |r, _| r.series == "set1-get30",
            x_of: |r| {
                r.key_dist
                    .as_deref()
                    .and_then(|d| d.strip_prefix("zipf:"))
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0.0)
            },
            y: crossover::THROUGHPUT,
        },
        _ => return None,
    })
}

/// The churn figure's connections: 512 (HttpArena's) where the run has it, else its first.
fn churn_conns(rows: &[Row]) -> usize {
    let echo = || rows.iter().filter(|r| !r.series.starts_with("kv-"));
    if echo().any(|r| r.conns == 512) {
        512
    } else {
        echo().map(|r| r.conns).min().unwrap_or(0)
    }
}

/// The largest x of the rows: the idle suite's largest total.
fn largest(rows: &[Row]) -> f64 {
    rows.iter().map(|r| r.x).fold(0.0, f64::max)
}

/// The points of `suite`'s sweep in the rows, in x order: `(id, label, x)`.
fn picked(mine: &[Row], sw: &Sweep) -> Vec<(String, String, f64)> {
    let mut picked: Vec<(String, String, f64)> = Vec::new();
    for r in mine.iter().filter(|r| (sw.pick)(r, mine)) {
        if !picked.iter().any(|p| p.0 == r.point) {
            picked.push((r.point.clone(), r.label.clone(), (sw.x_of)(r)));
        }
    }
    picked.sort_by(|a, b| a.2.total_cmp(&b.2));
    picked
}

/// The rows of `suite`.
fn rows_of(rows: &[Row], suite: Suite) -> Vec<Row> {
    rows.iter()
        .filter(|r| r.suite == suite.name())
        .cloned()
        .collect()
}

/// Each server's ratio to `reference` along `suite`'s sweep, with the sweep's points.
fn along(
    rows: &[Row],
    suite: Suite,
    sw: &Sweep,
    reference: &str,
) -> (ByServer, Vec<(String, String, f64)>) {
    let mine = rows_of(rows, suite);
    let picked = picked(&mine, sw);
    let ids: Vec<String> = picked.iter().map(|p| p.0.clone()).collect();
    (
        ratios(&mine, suite.name(), &ids, reference, sw.y.value),
        picked,
    )
}

/// Where two servers swap places along `suite`'s sweep, by more than `margin` and with their
/// repeats' intervals apart at both places, as the report's conclusion says it; `None` for
/// a suite without a sweep, or a run without two of its points or a reference.
pub(crate) fn swaps(rows: &[Row], suite: Suite, margin: f64) -> Option<Vec<String>> {
    let sw = sweep(suite)?;
    let reference = suite.reference(&servers_that_ran(rows), None)?;
    let mine = rows_of(rows, suite);
    let picked = picked(&mine, &sw);
    if picked.len() < 2 {
        return None;
    }
    let ids: Vec<String> = picked.iter().map(|p| p.0.clone()).collect();
    let labels: Vec<String> = picked.into_iter().map(|p| p.1).collect();
    let (told, _) =
        crossover::swaps_told_apart(&mine, (suite.name(), &ids), &reference, sw.y, margin);
    Some(sentences(&told, &labels, sw.what, sw.lower_better))
}

/// The lines of `suite`'s crossover figure: a server each, its ratio to `reference`.
pub(crate) fn lines(rows: &[Row], suite: Suite, reference: &str) -> Vec<Line> {
    let Some(sw) = sweep(suite) else {
        return Vec::new();
    };
    let (by, picked) = along(rows, suite, &sw, reference);
    by.into_iter()
        .map(|(name, values)| Line {
            name,
            points: picked
                .iter()
                .zip(values)
                .filter_map(|((_, _, x), v)| Some((*x, v?, false)))
                .collect(),
            markers: true,
            bars: Vec::new(),
        })
        .filter(|l| !l.points.is_empty())
        .collect()
}

/// The crossover figure of `suite`, against its reference among the servers that ran (the
/// suite's own, else the first), or nothing for a suite that has none.
pub(crate) fn figure(suite: Suite, rows: &[Row]) -> Vec<Figure> {
    let (Some(sw), Some(reference)) =
        (sweep(suite), suite.reference(&servers_that_ran(rows), None))
    else {
        return Vec::new();
    };
    vec![Figure::new(
        "crossover",
        format!(
            "{}: {} as a multiple of {reference}'s",
            suite.title(),
            sw.what
        ),
        sw.x,
        ("multiple of the reference's (1: level)", Scale::Log),
        Data::Drawn(lines(rows, suite, &reference)),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, bytes: usize, cpu: f64) -> Row {
        Row {
            suite: "sizes".into(),
            server: server.into(),
            series: "echo".into(),
            point: format!("echo-{bytes}"),
            label: format!("{bytes} B"),
            x: bytes as f64,
            repeats: 5,
            ok: 5,
            msg_bytes: Some(bytes as f64),
            cpu_us_per_req: Some(cpu),
            cpu_us_per_req_ci_low: Some(cpu * 0.95),
            cpu_us_per_req_ci_high: Some(cpu * 1.05),
            ..Row::default()
        }
    }

    #[test]
    fn each_server_is_drawn_as_its_ratio_to_the_reference_along_the_sweep() {
        let rows = vec![
            row("floor-epoll", 1024, 2.0),
            row("floor-epoll", 16, 1.0),
            row("x", 16, 3.0),
            row("x", 1024, 1.0),
        ];
        let l = lines(&rows, Suite::Sizes, "floor-epoll");
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].points, [(16.0, 1.0, false), (1024.0, 1.0, false)]);
        assert_eq!(l[1].name, "x");
        assert_eq!(l[1].points, [(16.0, 3.0, false), (1024.0, 0.5, false)]);
        let f = figure(Suite::Sizes, &rows);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].title.contains("multiple of floor-epoll's"),
            "{}",
            f[0].title
        );
        assert!(figure(Suite::Quick, &rows).is_empty());
        // x overtakes floor-epoll between the two sizes: the conclusion says so.
        let said = swaps(&rows, Suite::Sizes, 0.1).unwrap();
        assert_eq!(
            said,
            ["floor-epoll leads x on CPU per request at 16 B but trails it at 1024 B"]
        );
        assert_eq!(swaps(&rows, Suite::Churn, 0.1), None);

        // The same medians, but x's repeats spread over floor-epoll's at 1024 B: not told
        // apart there, so no swap is named. Nor at one repeat, which has no interval.
        let mut wide = rows.clone();
        wide[3].cpu_us_per_req_ci_high = Some(2.5);
        assert_eq!(
            swaps(&wide, Suite::Sizes, 0.1).unwrap(),
            Vec::<String>::new()
        );
        let once: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                repeats: 1,
                cpu_us_per_req_ci_low: None,
                cpu_us_per_req_ci_high: None,
                ..r.clone()
            })
            .collect();
        assert_eq!(
            swaps(&once, Suite::Sizes, 0.1).unwrap(),
            Vec::<String>::new()
        );
    }
}
