//! The `bursts` section: p99 and p99.9 against load under Poisson, Pareto and on-off
//! arrivals, and whether the ranking under bursts is the ranking under Poisson at the same
//! load (Spearman's rank correlation over the servers).
//!
//! It may call what `workloads` may.

use std::fmt::Write as _;

use super::{NO_EXTRA, crossovers, grid, judged, points, reference};
use crate::plan::suites::Suite;
use crate::record::row::{Row, find};
use crate::report::cells::{fmt_num, fmt_us, table};
use crate::report::crossover::{self, spearman};

const SUITE: Suite = Suite::Bursts;
/// The arrivals held against Poisson.
const BURSTY: [&str; 2] = ["pareto", "onoff"];

/// Spearman's correlation of the servers' `y` at the `bursty` point with their `y` at the
/// Poisson point of the same load (share of capacity) and connections, and how many servers
/// it is over.
pub(crate) fn agreement(
    rows: &[Row],
    bursty: &str,
    y: fn(&Row) -> Option<f64>,
) -> Option<(f64, usize)> {
    let at = rows.iter().find(|r| r.point == bursty)?;
    let poisson = rows
        .iter()
        .find(|r| r.series == "poisson" && r.x == at.x && r.conns == at.conns)?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for s in crate::record::row::servers(rows) {
        let value = |id: &str| {
            find(rows, SUITE.name(), &s, id)
                .filter(|r| r.ok > 0)
                .and_then(y)
        };
        if let (Some(x), Some(p)) = (value(bursty), value(&poisson.point)) {
            a.push(x);
            b.push(p);
        }
    }
    Some((spearman(&a, &b)?, a.len()))
}

/// Whose capacity the loads are shares of: one for every server (`--rate`), or each
/// server's own (`--capacities`), with the rate each ran its highest Poisson load at.
fn loads(rows: &[Row]) -> String {
    let poisson = |s: &str| {
        rows.iter()
            .filter(|r| r.suite == SUITE.name() && r.server == s && r.series == "poisson")
            .max_by(|a, b| a.x.total_cmp(&b.x))
            .and_then(|r| Some((r.x, r.rate?)))
    };
    let rates: Vec<(String, f64, f64)> = crate::record::row::servers(rows)
        .into_iter()
        .filter_map(|s| poisson(&s).map(|(x, rate)| (s, x, rate)))
        .collect();
    let Some((_, share, first)) = rates.first() else {
        return "every server at the same offered rates".into();
    };
    if rates.iter().all(|r| r.2 == *first) {
        format!(
            "every server at the same offered rates, shares of one capacity ({}/s at {share:.0}%)",
            fmt_num(Some(*first), 0)
        )
    } else {
        let each: Vec<String> = rates
            .iter()
            .map(|(s, _, r)| format!("{s} {}/s", fmt_num(Some(*r), 0)))
            .collect();
        format!(
            "each server at shares of its own capacity (`--capacities`; at {share:.0}%: {})",
            each.join(", ")
        )
    }
}

pub(crate) fn section(out: &mut String, rows: &[Row], explicit: Option<&str>) {
    let reference = reference(SUITE, rows, explicit);
    let reference = reference.as_deref();
    let _ = writeln!(
        out,
        "16-byte echo in open loop, {}, sent at random (Poisson), in Pareto gaps (mutilate's fb_ia) and on-off (twice the rate for 10 ms, silent for 10 ms). Each cell: p99 from the due time, its multiple of **{}**'s, · p99.9:\n",
        loads(rows),
        reference.unwrap_or("no server")
    );
    for series in ["poisson", "pareto", "onoff"] {
        let pts = points(rows, SUITE, series);
        if pts.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{series}:\n");
        grid(
            out,
            rows,
            SUITE,
            ("p99 · p99.9", &pts),
            |r| {
                format!(
                    "{} · {}",
                    judged(rows, r, ("p99_us", |r| r.p99_us), reference, fmt_us),
                    fmt_us(r.p99_9_us)
                )
            },
            NO_EXTRA,
        );
        crossovers(
            out,
            rows,
            SUITE,
            (&pts, reference),
            ("p99", crossover::P99, true),
        );
    }
    let mut body = Vec::new();
    for series in BURSTY {
        for (id, label) in points(rows, SUITE, series) {
            let rho = |y: fn(&Row) -> Option<f64>| {
                agreement(rows, &id, y).map_or("–".into(), |(r, n)| {
                    format!("{} ({n} servers)", fmt_num(Some(r), 2))
                })
            };
            body.push(vec![label, rho(|r| r.p99_us), rho(|r| r.p99_9_us)]);
        }
    }
    if !body.is_empty() {
        let _ = writeln!(
            out,
            "Whether the ranking under bursts is the ranking under Poisson at the same load: Spearman's ρ of the servers' latency (1: the same order; 0: unrelated; below 0.8, places changed):\n"
        );
        table(
            out,
            &["bursts", "ρ of p99 with Poisson's", "ρ of p99.9"],
            &body,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, series: &str, p99: f64) -> Row {
        Row {
            suite: "bursts".into(),
            server: server.into(),
            series: series.into(),
            point: format!("{series}-l50-c100"),
            label: format!("{series} 50%"),
            x: 50.0,
            rate: Some(20_000.0),
            conns: 100,
            repeats: 1,
            ok: 1,
            p99_us: Some(p99),
            p99_9_us: Some(p99 * 2.0),
            ..Row::default()
        }
    }

    #[test]
    fn the_ranking_under_bursts_is_held_against_poissons() {
        let mut rows = Vec::new();
        for (s, poisson, pareto, onoff) in [
            ("floor-epoll", 10.0, 20.0, 100.0),
            ("b", 20.0, 40.0, 50.0),
            ("c", 30.0, 60.0, 40.0),
            ("d", 40.0, 80.0, 30.0),
        ] {
            rows.push(row(s, "poisson", poisson));
            rows.push(row(s, "pareto", pareto));
            rows.push(row(s, "onoff", onoff));
        }
        assert_eq!(
            agreement(&rows, "pareto-l50-c100", |r| r.p99_us),
            Some((1.0, 4))
        );
        assert_eq!(
            agreement(&rows, "onoff-l50-c100", |r| r.p99_us),
            Some((-1.0, 4))
        );
        assert_eq!(agreement(&rows, "nowhere", |r| r.p99_us), None);
        let mut out = String::new();
        section(&mut out, &rows, None);
        assert!(
            out.contains("| pareto 50% | 1.00 (4 servers) | 1.00 (4 servers) |"),
            "{out}"
        );
        assert!(
            out.contains("| onoff 50% | -1.00 (4 servers) | -1.00 (4 servers) |"),
            "{out}"
        );
        assert!(
            out.contains(
                "every server at the same offered rates, shares of one capacity (20000/s at 50%)"
            ),
            "{out}"
        );
        // Each server at a share of its own capacity: the loads say so, and the rankings are
        // still held point against point (the same share), not rate against rate.
        for (i, r) in rows.iter_mut().enumerate() {
            r.rate = Some(10_000.0 * (1 + i / 3) as f64);
        }
        assert_eq!(
            agreement(&rows, "onoff-l50-c100", |r| r.p99_us),
            Some((-1.0, 4))
        );
        let mut out = String::new();
        section(&mut out, &rows, None);
        assert!(
            out.contains("each server at shares of its own capacity (`--capacities`; at 50%: floor-epoll 10000/s, b 20000/s, c 30000/s, d 40000/s)"),
            "{out}"
        );
    }
}
