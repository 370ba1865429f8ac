//! The `sizes` section: by echo message size, CPU per request (with its verdict) and per KiB,
//! Gbit/s of payload each way, and where the runtimes converge (the spread of CPU per KiB,
//! the dearest server's over the cheapest's, at each size); kv SETs by value size from
//! redis-benchmark (`-d`) and loadgen (`--value-size`).
//!
//! It may call what `workloads` may.

use crate::report::crossover;
use std::fmt::Write as _;

use super::{NO_EXTRA, crossovers, grid, judged, points, reference};
use crate::plan::suites::Suite;
use crate::record::row::Row;
use crate::report::cells::{fmt_num, fmt_rate, fmt_us, table};

const SUITE: Suite = Suite::Sizes;

/// Server CPU per KiB of payload, in µs.
fn cpu_per_kib(r: &Row) -> Option<f64> {
    Some(r.cpu_us_per_req? / (r.msg_bytes? / 1024.0))
}

/// Payload each way in Gbit/s.
fn gbit_per_sec(r: &Row) -> Option<f64> {
    Some(r.throughput_per_sec? * r.msg_bytes? * 8.0 / 1e9)
}

/// The dearest of `values` over the cheapest: 1 where they all cost the same.
pub(crate) fn spread(values: &[f64]) -> Option<f64> {
    let min = values
        .iter()
        .copied()
        .filter(|v| *v > 0.0)
        .reduce(f64::min)?;
    let max = values.iter().copied().reduce(f64::max)?;
    Some(max / min)
}

pub(crate) fn section(out: &mut String, rows: &[Row], explicit: Option<&str>) {
    let reference = reference(SUITE, rows, explicit);
    let reference = reference.as_deref();
    let mut pts = points(rows, SUITE, "echo");
    pts.sort_by(|a, b| size_of(rows, &a.0).total_cmp(&size_of(rows, &b.0)));
    pts.extend(points(rows, SUITE, "echo-mix"));
    let _ = writeln!(
        out,
        "Echo in closed loop at each message size, and the mix of 95% 64 B and 5% 64 KiB. Each cell: server CPU per request, its multiple of **{}**'s, · CPU per KiB of payload · Gbit/s of payload each way:\n",
        reference.unwrap_or("no server")
    );
    grid(
        out,
        rows,
        SUITE,
        ("CPU per request · per KiB · Gbit/s", &pts),
        |r| {
            format!(
                "{} · {} · {}",
                judged(
                    rows,
                    r,
                    ("cpu_us_per_req", |r| r.cpu_us_per_req),
                    reference,
                    fmt_us
                ),
                fmt_us(cpu_per_kib(r)),
                fmt_num(gbit_per_sec(r), 2)
            )
        },
        NO_EXTRA,
    );
    convergence(out, rows, &pts);
    crossovers(
        out,
        rows,
        SUITE,
        (&pts, reference),
        ("CPU per request", crossover::CPU, true),
    );
    let mut kv = Vec::new();
    for series in ["kv-redis-benchmark", "kv-loadgen"] {
        let mut p = points(rows, SUITE, series);
        p.sort_by(|a, b| size_of(rows, &a.0).total_cmp(&size_of(rows, &b.0)));
        kv.extend(p);
    }
    if !kv.is_empty() {
        let _ = writeln!(
            out,
            "Kv SETs at 50 connections by value size, by redis-benchmark (`-d`) and loadgen (`--value-size`): SETs/s · server CPU per request, its multiple of **redis**'s:\n"
        );
        grid(
            out,
            rows,
            SUITE,
            ("SET", &kv),
            |r| {
                format!(
                    "{} · {}",
                    fmt_rate(r.throughput_per_sec),
                    judged(
                        rows,
                        r,
                        ("cpu_us_per_req", |r| r.cpu_us_per_req),
                        Some("redis"),
                        fmt_us
                    )
                )
            },
            NO_EXTRA,
        );
    }
}

/// The mean payload of the point `id`'s requests.
fn size_of(rows: &[Row], id: &str) -> f64 {
    rows.iter()
        .find(|r| r.point == id)
        .and_then(|r| r.msg_bytes)
        .unwrap_or(0.0)
}

/// The spread of CPU per KiB at each size: where it nears 1, the runtimes cost alike.
fn convergence(out: &mut String, rows: &[Row], pts: &[(String, String)]) {
    let spreads: Vec<String> = pts
        .iter()
        .map(|(id, _)| {
            let v: Vec<f64> = rows
                .iter()
                .filter(|r| &r.point == id && r.ok > 0)
                .filter_map(cpu_per_kib)
                .collect();
            spread(&v).map_or("–".into(), |s| format!("{s:.2}×"))
        })
        .collect();
    if pts.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Where the runtimes converge: the dearest server's CPU per KiB over the cheapest's at each size (1.00×: they all cost the same):\n"
    );
    let mut head = vec!["spread"];
    head.extend(pts.iter().map(|p| p.1.as_str()));
    let mut line = vec!["**dearest / cheapest**".to_string()];
    line.extend(spreads);
    table(out, &head, &[line]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, bytes: usize, cpu: f64) -> Row {
        Row {
            suite: "sizes".into(),
            server: server.into(),
            series: "echo".into(),
            point: format!("echo-{bytes}-c64"),
            label: format!("{bytes} B"),
            x: bytes as f64,
            repeats: 1,
            ok: 1,
            msg_bytes: Some(bytes as f64),
            cpu_us_per_req: Some(cpu),
            throughput_per_sec: Some(1e6 / cpu),
            ..Row::default()
        }
    }

    #[test]
    fn sizes_give_cpu_per_kib_gbits_and_where_the_spread_closes() {
        // a is twice b's CPU at 16 B, level with it at 1 MiB.
        let rows = vec![
            row("floor-epoll", 16, 4.0),
            row("floor-epoll", 1 << 20, 400.0),
            row("b", 16, 2.0),
            row("b", 1 << 20, 400.0),
        ];
        assert_eq!(spread(&[2.0, 4.0, 3.0]), Some(2.0));
        assert_eq!(spread(&[]), None);
        assert!((cpu_per_kib(&rows[1]).unwrap() - 400.0 / 1024.0).abs() < 1e-12);
        // 2500 MiB-echoes/s of 8 Mibit each.
        assert!((gbit_per_sec(&rows[1]).unwrap() - 2500.0 * 8.0 * 1048576.0 / 1e9).abs() < 1e-9);
        let mut out = String::new();
        section(&mut out, &rows, None);
        assert!(
            out.contains("| **dearest / cheapest** | 2.00× | 1.00× |"),
            "{out}"
        );
        assert!(
            out.contains("| **b** | 2.00 µs (0.50×, untested) · 128 µs · 0.06 |"),
            "{out}"
        );
    }
}
