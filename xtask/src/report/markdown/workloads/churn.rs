//! The `churn` section: at each connection count, throughput and CPU per request as the
//! client closes after R = 1, 10, 100 and ∞ requests; the fit of CPU per request against 1/R
//! (its slope is the CPU of a connection's life: accept, set-up, close); accepts/s at R = 1;
//! the connections loadgen opened beside the server's own count of those it accepted and
//! closed; kv by redis-benchmark's `-k 0` and loadgen's R = 1.
//!
//! It may call what `workloads` may.

use std::fmt::Write as _;

use super::{NO_EXTRA, crossovers, grid, judged, points, reference};
use crate::plan::suites::Suite;
use crate::record::row::{Row, find};
use crate::report::cells::{fmt_num, fmt_rate, fmt_us};
use crate::report::crossover::{self, least_squares};

const SUITE: Suite = Suite::Churn;

/// The fit of `server`'s CPU per request against 1/R over `points` (∞ as 0): `(intercept,
/// slope)`, µs per request on a kept connection and µs per connection's life.
pub(crate) fn connection_cost(
    rows: &[Row],
    server: &str,
    points: &[(String, String)],
) -> Option<(f64, f64)> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| {
            let r = find(rows, SUITE.name(), server, &p.0).filter(|r| r.ok > 0)?;
            let inv = r.requests_per_conn.map_or(0.0, |r| 1.0 / r as f64);
            Some((inv, r.cpu_us_per_req?))
        })
        .collect();
    least_squares(&pts)
}

/// The echo points at `conns`, R = 1 first, kept connections last.
fn at_conns(rows: &[Row], conns: usize) -> Vec<(String, String)> {
    let mut at: Vec<&Row> = rows
        .iter()
        .filter(|r| r.conns == conns && !r.series.starts_with("kv-"))
        .collect();
    at.sort_by_key(|r| r.requests_per_conn.unwrap_or(u64::MAX));
    let mut out: Vec<(String, String)> = Vec::new();
    for r in at {
        if !out.iter().any(|p| p.0 == r.point) {
            let r_text = r.requests_per_conn.map_or("∞".into(), |n| n.to_string());
            out.push((r.point.clone(), format!("R {r_text}")));
        }
    }
    out
}

pub(crate) fn section(out: &mut String, rows: &[Row], explicit: Option<&str>) {
    let reference = reference(SUITE, rows, explicit);
    let reference = reference.as_deref();
    let _ = writeln!(
        out,
        "The client closes each connection after R requests and opens a fresh one (R = 1: a connection per request; R ∞: connections kept for the run); 16-byte echo in closed loop. Each cell: echoes/s · server CPU per request, with its multiple of **{}**'s (a verdict where the run has repeats). The fit of CPU per request against 1/R (least squares over the four R) gives the CPU of a connection's life (its slope: accept, set-up, teardown) and of a request on a kept connection (its intercept). Accepts/s at R = 1 are the echoes/s (a connection each; closed loop, so at no latency objective: the accepts/s a server sustains at one are the capacity suite's `churn` workload, `cargo xtask bench --suite capacity --points churn`). Connections, at R = 1: loadgen's opened (warmup included) · the server's accepted · closed, from its stop line (– for a server that prints none):\n",
        reference.unwrap_or("no server")
    );
    let mut conns: Vec<usize> = rows
        .iter()
        .filter(|r| !r.series.starts_with("kv-"))
        .map(|r| r.conns)
        .collect();
    conns.sort_unstable();
    conns.dedup();
    for &c in &conns {
        let pts = at_conns(rows, c);
        let _ = writeln!(out, "{c} connections:\n");
        let extra = |s: &str| {
            let fit = connection_cost(rows, s, &pts);
            let r1 = pts
                .first()
                .and_then(|p| find(rows, SUITE.name(), s, &p.0))
                .filter(|r| r.requests_per_conn == Some(1));
            vec![
                fmt_us(fit.map(|f| f.1)),
                fmt_us(fit.map(|f| f.0)),
                fmt_rate(r1.and_then(|r| r.throughput_per_sec)),
                format!(
                    "{} · {} · {}",
                    fmt_num(r1.and_then(|r| r.connections_opened), 0),
                    fmt_num(r1.and_then(|r| r.server_accepted), 0),
                    fmt_num(r1.and_then(|r| r.server_closed), 0)
                ),
            ]
        };
        grid(
            out,
            rows,
            SUITE,
            ("echoes/s · CPU per request", &pts),
            |r| {
                format!(
                    "{} · {}",
                    fmt_rate(r.throughput_per_sec),
                    judged(
                        rows,
                        r,
                        ("cpu_us_per_req", |r| r.cpu_us_per_req),
                        reference,
                        fmt_us
                    )
                )
            },
            (
                &[
                    "CPU per connection (slope)",
                    "per request kept (intercept)",
                    "accepts/s at R 1",
                    "opened · accepted · closed",
                ],
                &extra,
            ),
        );
        crossovers(
            out,
            rows,
            SUITE,
            (&pts, reference),
            ("CPU per request", crossover::CPU, true),
        );
    }
    held_open(out, rows);
    kv(out, rows);
}

/// The churning rows whose server closed fewer connections than loadgen opened: it held
/// connections the client had left, by its own count.
pub(crate) fn held_open(out: &mut String, rows: &[Row]) {
    let held: Vec<String> = rows
        .iter()
        .filter(|r| r.requests_per_conn.is_some() && r.ok > 0)
        .filter_map(|r| {
            let (opened, closed) = (r.connections_opened?, r.server_closed?);
            (closed < opened)
                .then(|| format!("{} at {} ({closed:.0} of {opened:.0})", r.server, r.label))
        })
        .collect();
    let _ = if held.is_empty() {
        writeln!(
            out,
            "Every server that counts its connections closed at least as many as loadgen opened.\n"
        )
    } else {
        writeln!(
            out,
            "**Connections left open**: the server closed fewer than loadgen opened: {}.\n",
            held.join("; ")
        )
    };
}

/// The kv points: GETs at 50 connections, a connection per request or kept, by each driver.
fn kv(out: &mut String, rows: &[Row]) {
    let mut pts: Vec<(String, String)> = Vec::new();
    for series in [
        "kv-redis-benchmark-r1",
        "kv-redis-benchmark-keep-alive",
        "kv-loadgen-r1",
        "kv-loadgen-keep-alive",
    ] {
        pts.extend(points(rows, SUITE, series));
    }
    if pts.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Kv GETs at 50 connections, a connection per request (redis-benchmark's `-k 0`, loadgen's `--requests-per-conn 1`) or kept, by both clients: GETs/s · server CPU per request · p99 (redis-benchmark's own percentiles; its replies are not checked), the multiple of **redis**'s CPU beside:\n"
    );
    grid(
        out,
        rows,
        SUITE,
        ("GET, 50 conns", &pts),
        |r| {
            format!(
                "{} · {} · {}",
                fmt_rate(r.throughput_per_sec),
                judged(
                    rows,
                    r,
                    ("cpu_us_per_req", |r| r.cpu_us_per_req),
                    Some("redis"),
                    fmt_us
                ),
                fmt_us(r.p99_us)
            )
        },
        NO_EXTRA,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, conns: usize, r: Option<u64>, cpu: f64, tp: f64) -> Row {
        let name = r.map_or("keep-alive".into(), |r| format!("r{r}"));
        Row {
            suite: "churn".into(),
            server: server.into(),
            series: name.clone(),
            point: format!("{name}-c{conns}"),
            label: name,
            conns,
            repeats: 1,
            ok: 1,
            requests_per_conn: r,
            cpu_us_per_req: Some(cpu),
            // The repeats' interval a swap needs to be named: 1% either side.
            cpu_us_per_req_ci_low: Some(cpu * 0.99),
            cpu_us_per_req_ci_high: Some(cpu * 1.01),
            throughput_per_sec: Some(tp),
            connections_opened: r.map(|r| tp / r as f64),
            server_accepted: r.map(|r| tp / r as f64),
            server_closed: r.map(|r| tp / r as f64),
            ..Row::default()
        }
    }

    /// `base` µs per request and `life` µs per connection at R = 1, 10, 100, ∞.
    fn server(name: &str, base: f64, life: f64) -> Vec<Row> {
        [Some(1), Some(10), Some(100), None]
            .into_iter()
            .map(|r| {
                let cpu = base + life * r.map_or(0.0, |r| 1.0 / r as f64);
                row(name, 64, r, cpu, 1e6 / cpu)
            })
            .collect()
    }

    #[test]
    fn the_fit_gives_each_servers_cost_of_a_connection_and_the_swap_is_said() {
        // b is cheaper per request kept, dearer per connection: a leads at R 1, b at ∞.
        let mut rows = server("floor-epoll", 3.0, 20.0);
        rows.extend(server("b", 2.0, 40.0));
        let pts = at_conns(&rows, 64);
        let labels: Vec<&str> = pts.iter().map(|p| p.1.as_str()).collect();
        assert_eq!(labels, ["R 1", "R 10", "R 100", "R ∞"]);
        let (a, b) = connection_cost(&rows, "b", &pts).unwrap();
        assert!((a - 2.0).abs() < 1e-9 && (b - 40.0).abs() < 1e-9, "{a} {b}");
        let mut out = String::new();
        section(&mut out, &rows, None);
        assert!(out.contains("64 connections"), "{out}");
        assert!(out.contains("| **b** |"), "{out}");
        assert!(
            out.contains("40.0 µs | 2.00 µs |"),
            "the slope and intercept: {out}"
        );
        assert!(
            out.contains("(1.83×, untested)"),
            "b's CPU at R 1 over floor-epoll's: {out}"
        );
        assert!(
            out.contains("floor-epoll leads b on CPU per request at R 10 but trails it at R 100"),
            "{out}"
        );
        // Without the repeats' intervals (one repeat) the swap of the medians goes unnamed,
        // and the section says so.
        let once: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                cpu_us_per_req_ci_low: None,
                cpu_us_per_req_ci_high: None,
                ..r.clone()
            })
            .collect();
        let mut unnamed = String::new();
        section(&mut unnamed, &once, None);
        assert!(!unnamed.contains("leads b"), "{unnamed}");
        assert!(
            unnamed.contains("1 swap(s) of the medians alone are not named"),
            "{unnamed}"
        );
        assert!(
            out.contains("closed at least as many as loadgen opened"),
            "{out}"
        );
        let meta = crate::record::meta::Meta::default();
        let input = super::super::Input {
            meta: &meta,
            rows: &rows,
            plots: &[],
            variants: &[],
            skipped: &[],
            suites: &[Suite::Churn],
            server_cpus: "1".into(),
            client_cpus: "0".into(),
            workers: 1,
            capacity: &[],
        };
        let note = super::super::swap_note(&input, Suite::Churn).expect("a swap to tell");
        assert!(
            note.starts_with("Along the churn sweep the ranking changes: ") && note.contains("b"),
            "{note}"
        );
        let mut leaky = rows.clone();
        leaky[4].server_closed = Some(10.0);
        let mut out = String::new();
        held_open(&mut out, &leaky);
        assert!(out.contains("Connections left open**: the server closed fewer than loadgen opened: b at r1 (10 of"), "{out}");
    }
}
