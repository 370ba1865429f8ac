//! The `skew` section: the kv servers under uniform and Zipf keys at SET:GET 1:30 and 1:1,
//! throughput (with its verdict against redis-server), GETs' and SETs' p99 apart and CPU per
//! request, and where the ranking changes as the keys grow hotter.
//!
//! It may call what `workloads` may.

use crate::report::crossover;
use std::fmt::Write as _;

use super::{NO_EXTRA, crossovers, grid, judged, points, reference};
use crate::plan::suites::Suite;
use crate::record::row::Row;
use crate::report::cells::{fmt_rate, fmt_us};

const SUITE: Suite = Suite::Skew;

pub(crate) fn section(out: &mut String, rows: &[Row], explicit: Option<&str>) {
    let reference = reference(SUITE, rows, explicit);
    let reference = reference.as_deref();
    let _ = writeln!(
        out,
        "Kv in closed loop at 50 connections by loadgen, every reply checked, keys drawn uniformly or by Zipf's law (0.99 is YCSB's; the hottest of 100,000 keys then takes about 8% of the requests, at 1.2 about 20%). redis-benchmark draws keys uniformly only, so it does not drive this suite. Each cell: requests/s, its multiple of **{}**'s, · GETs' p99 · SETs' p99 (apart, each from its own requests) · server CPU per request:\n",
        reference.unwrap_or("no server")
    );
    let mut series: Vec<&str> = rows.iter().map(|r| r.series.as_str()).collect();
    series.sort_unstable();
    series.dedup();
    for s in series {
        let pts = points(rows, SUITE, s);
        let ratio = rows
            .iter()
            .find(|r| r.series == s)
            .and_then(|r| r.ratio.clone())
            .unwrap_or_default();
        let _ = writeln!(out, "SET:GET {ratio}:\n");
        grid(
            out,
            rows,
            SUITE,
            ("requests/s · GET p99 · SET p99 · CPU", &pts),
            |r| {
                format!(
                    "{} · {} · {} · {}",
                    judged(
                        rows,
                        r,
                        ("throughput_per_sec", |r| r.throughput_per_sec),
                        reference,
                        fmt_rate
                    ),
                    fmt_us(r.get_p99_us),
                    fmt_us(r.set_p99_us),
                    fmt_us(r.cpu_us_per_req)
                )
            },
            NO_EXTRA,
        );
        crossovers(
            out,
            rows,
            SUITE,
            (&pts, reference),
            ("throughput", crossover::THROUGHPUT, false),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, dist: &str, tp: f64) -> Row {
        Row {
            suite: "skew".into(),
            server: server.into(),
            series: "set1-get30".into(),
            point: format!("set1-get30-{dist}-c50"),
            label: format!("{dist} keys"),
            conns: 50,
            repeats: 1,
            ok: 1,
            ratio: Some("1:30".into()),
            key_dist: Some(dist.into()),
            throughput_per_sec: Some(tp),
            // The repeats' interval a swap needs to be named: 1% either side.
            throughput_per_sec_ci_low: Some(tp * 0.99),
            throughput_per_sec_ci_high: Some(tp * 1.01),
            get_p99_us: Some(20.0),
            set_p99_us: Some(90.0),
            ..Row::default()
        }
    }

    #[test]
    fn a_store_that_queues_on_hot_keys_falls_behind_and_is_said_to() {
        // `locked` matches redis on uniform keys and falls to half on the hottest.
        let mut rows = Vec::new();
        for (dist, locked) in [
            ("uniform", 60_000.0),
            ("zipf:0.99", 40_000.0),
            ("zipf:1.2", 30_000.0),
        ] {
            rows.push(row("redis", dist, 50_000.0));
            rows.push(row("locked", dist, locked));
        }
        let mut out = String::new();
        section(&mut out, &rows, None);
        assert!(out.contains("SET:GET 1:30"), "{out}");
        assert!(
            out.contains("| **locked** | 60.0k (1.20×, untested) · 20.0 µs · 90.0 µs · – |"),
            "{out}"
        );
        assert!(
            out.contains(
                "locked leads redis on throughput at uniform keys but trails it at zipf:0.99 keys"
            ),
            "{out}"
        );
    }
}
