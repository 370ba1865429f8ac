//! The `idle` section: at each total of connections, the active clients' p99 and the
//! server's CPU as the active share falls from 100% to 1% (idle connections growing at one
//! active rate); memory per active connection (all active) and per idle one (1% active);
//! CPU at no load (the quiet point: one connection at 10/s, all the others idle).
//!
//! It may call what `workloads` may.

use crate::report::crossover;
use std::fmt::Write as _;

use super::{crossovers, grid, judged, reference};
use crate::plan::suites::Suite;
use crate::record::row::Row;
use crate::report::cells::{fmt_bytes, fmt_num, fmt_pct, fmt_us};

const SUITE: Suite = Suite::Idle;

/// The points at `total` connections, 100% active first, with their labels.
fn at_total(rows: &[Row], total: f64) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for series in ["active-100", "active-10", "active-1"] {
        if let Some(r) = rows.iter().find(|r| r.series == series && r.x == total) {
            let pct = series.trim_start_matches("active-");
            out.push((
                r.point.clone(),
                format!("{pct}% active ({} idle)", r.idle_conns.unwrap_or(0)),
            ));
        }
    }
    out
}

/// `server`'s row of `series` at `total` connections.
fn row_at<'a>(rows: &'a [Row], server: &str, series: &str, total: f64) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.server == server && r.series == series && r.x == total && r.ok > 0)
}

pub(crate) fn section(out: &mut String, rows: &[Row], explicit: Option<&str>) {
    let reference = reference(SUITE, rows, explicit);
    let reference = reference.as_deref();
    let _ = writeln!(
        out,
        "A total of connections of which 100%, 10% or 1% send 16-byte echoes at one open-loop rate in all, the rest connected, silent and held through the window. Each cell: the active clients' p99 (from the due time), its multiple of **{}**'s, · the server's CPU (% of one core). Memory per connection is the growth of the server's user memory (PSS) over every connection it holds: all active, then 1% active (nearly all idle). CPU at no load is the quiet point's, one connection at 10/s beside all the others idle:\n",
        reference.unwrap_or("no server")
    );
    let mut totals: Vec<f64> = rows.iter().map(|r| r.x).collect();
    totals.sort_by(f64::total_cmp);
    totals.dedup();
    for &total in &totals {
        let pts = at_total(rows, total);
        if pts.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{total} connections:\n");
        let extra = |s: &str| {
            let mem = |series| row_at(rows, s, series, total).and_then(|r| r.mem_per_conn_bytes);
            vec![
                fmt_bytes(mem("active-100")),
                fmt_bytes(mem("active-1")),
                row_at(rows, s, "quiet", total)
                    .map_or("–".into(), |r| format!("{}%", fmt_num(r.cpu_mean_pct, 1))),
            ]
        };
        grid(
            out,
            rows,
            SUITE,
            ("p99 · CPU", &pts),
            |r| {
                format!(
                    "{} · {}",
                    judged(rows, r, ("p99_us", |r| r.p99_us), reference, fmt_us),
                    fmt_pct(r.cpu_mean_pct)
                )
            },
            (
                &["memory per active conn", "per idle conn", "CPU at no load"],
                &extra,
            ),
        );
        crossovers(
            out,
            rows,
            SUITE,
            (&pts, reference),
            ("the active clients' p99", crossover::P99, true),
        );
    }
    let held = rows.iter().filter(|r| r.idle_conns.is_some() && r.ok > 0);
    let short: Vec<String> = held
        .filter(|r| {
            r.idle_held
                .is_some_and(|h| h < r.idle_conns.unwrap_or(0) as f64)
        })
        .map(|r| format!("{} at {}", r.server, r.label))
        .collect();
    if !short.is_empty() {
        let _ = writeln!(
            out,
            "Idle connections the server dropped before the window's end (loadgen held fewer than it opened): {}.\n",
            short.join("; ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, series: &str, total: usize, idle: usize, p99: f64) -> Row {
        Row {
            suite: "idle".into(),
            server: server.into(),
            series: series.into(),
            point: format!("{series}-c{total}"),
            label: series.into(),
            x: total as f64,
            conns: total - idle,
            repeats: 1,
            ok: 1,
            idle_conns: (idle > 0).then_some(idle),
            idle_held: (idle > 0).then_some(idle as f64),
            p99_us: Some(p99),
            cpu_mean_pct: Some(40.0),
            mem_per_conn_bytes: Some(if series == "active-1" { 1024.0 } else { 4096.0 }),
            ..Row::default()
        }
    }

    #[test]
    fn the_table_gives_p99_as_idle_grows_memory_both_ways_and_cpu_at_no_load() {
        let mut rows = Vec::new();
        for (server, slope) in [("floor-epoll", 1.0), ("io", 0.2)] {
            rows.push(row(server, "active-100", 1000, 0, 50.0));
            rows.push(row(server, "active-10", 1000, 900, 50.0 + 100.0 * slope));
            rows.push(row(server, "active-1", 1000, 990, 50.0 + 200.0 * slope));
            let mut q = row(server, "quiet", 1000, 999, 30.0);
            q.cpu_mean_pct = Some(0.5);
            rows.push(q);
        }
        rows[7].idle_held = Some(500.0);
        let mut out = String::new();
        section(&mut out, &rows, None);
        assert!(out.contains("| p99 · CPU | 100% active (0 idle) | 10% active (900 idle) | 1% active (990 idle) |"), "{out}");
        assert!(out.contains("| **io** | 50.0 µs (1.00×, untested) · 40% | 70.0 µs (0.47×, untested) · 40% | 90.0 µs (0.36×, untested) · 40% | 4.0 KiB | 1.0 KiB | 0.5% |"), "{out}");
        assert!(out.contains("no two servers swap places"), "{out}");
        assert!(
            out.contains(
                "dropped before the window's end (loadgen held fewer than it opened): io at quiet"
            ),
            "{out}"
        );
    }
}
