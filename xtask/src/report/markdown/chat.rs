//! The chat sections: `chat-cpu` (the C-versus-Go paper's ingest CPU) and `chat-room`
//! (fan-out delivery latency and completeness).
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::pivot;
use crate::plan::suites;
use crate::record::row::{Row, find, points_of};
use crate::report::cells::{fmt_num, fmt_pct, fmt_rate, fmt_us, table};

/// The chat-cpu tables: mean server CPU and its coefficient of variation, by connections.
pub(crate) fn cpu_tables(out: &mut String, rows: &[Row]) {
    let s = "chat-cpu";
    let _ = writeln!(
        out,
        "Every connection sends chat `SAY` lines at 1 Mbit/s and waits for each `ACK`; the server appends every message to its room log. Mean server CPU (% of one core over the window, its cgroup's counter read at the window's edges; the coefficient of variation below is over 500 ms samples, as `top` shows them):\n"
    );
    // The load is offered at a fixed byte rate: a server that falls behind it does less work,
    // and its CPU must not be read as efficiency.
    pivot(out, rows, s, "ingest", "CPU mean", |r| {
        let offered = r.conns as f64 * suites::CHAT_BYTE_RATE / suites::CHAT_LINE as f64;
        let done = r.throughput_per_sec.unwrap_or(0.0) / offered;
        if done < 0.95 {
            format!(
                "{} (behind: {:.0}% of the load)",
                fmt_pct(r.cpu_mean_pct),
                done * 100.0
            )
        } else {
            fmt_pct(r.cpu_mean_pct)
        }
    });
    let _ = writeln!(
        out,
        "Coefficient of variation of those samples (σ/μ: lower is steadier):\n"
    );
    pivot(out, rows, s, "ingest", "CPU CV", |r| fmt_num(r.cpu_cv, 3));
}

/// The C-like server and Go at one point.
struct Pair {
    c_cpu: f64,
    go_cpu: f64,
    c_cv: Option<f64>,
    go_cv: Option<f64>,
    conns: f64,
}

/// The paper's findings (C's CPU lower than Go's, and steadier) beside ours.
pub(crate) fn cpu_beside_the_paper(out: &mut String, rows: &[Row]) {
    let s = "chat-cpu";
    let points = points_of(rows, s, "ingest");
    let (c, g) = ("threads-process", "go");
    let both: Vec<Pair> = points
        .iter()
        .filter_map(|p| {
            let rc = find(rows, s, c, &p.0)?;
            let rg = find(rows, s, g, &p.0)?;
            Some(Pair {
                c_cpu: rc.cpu_mean_pct?,
                go_cpu: rg.cpu_mean_pct?,
                c_cv: rc.cpu_cv,
                go_cv: rg.cpu_cv,
                conns: p.2,
            })
        })
        .collect();
    let _ = writeln!(
        out,
        "**Beside the paper** (its C server forks a process per connection, our `threads-process`; it ran on a 1-vCPU FreeBSD VM with a remote load generator):\n"
    );
    let (cpu_ours, cv_ours) = ours(&both);
    table(
        out,
        &["", "paper", "ours"],
        &[
            vec![
                "CPU, C (process per connection) against Go".into(),
                "C lower at every point, 1 to 64 connections".into(),
                cpu_ours,
            ],
            vec![
                "CPU stability under high load".into(),
                "C has the lower coefficient of variation".into(),
                cv_ours,
            ],
        ],
    );
}

/// Our side of the paper's two findings: where threads-process's CPU is lower, and the
/// mean CVs at 16 connections or more.
fn ours(both: &[Pair]) -> (String, String) {
    let cpu_ours = if both.is_empty() {
        "needs threads-process and go in the same run".to_string()
    } else {
        let lower = both.iter().filter(|b| b.c_cpu < b.go_cpu).count();
        let last = both.last().map_or(String::new(), |b| {
            format!(
                "; at {} conns {} against {}",
                b.conns,
                fmt_pct(Some(b.c_cpu)),
                fmt_pct(Some(b.go_cpu))
            )
        });
        format!(
            "threads-process lower at {lower} of {} points{last}",
            both.len()
        )
    };
    let high: Vec<&Pair> = both.iter().filter(|b| b.conns >= 16.0).collect();
    let cv_ours = {
        let cc: Vec<f64> = high.iter().filter_map(|b| b.c_cv).collect();
        let gg: Vec<f64> = high.iter().filter_map(|b| b.go_cv).collect();
        match (crate::run::series::mean(&cc), crate::run::series::mean(&gg)) {
            (Some(a), Some(b)) => {
                format!("mean CV at ≥16 conns: threads-process {a:.3}, go {b:.3}")
            }
            _ => "needs threads-process and go at 16 connections or more".into(),
        }
    };
    (cpu_ours, cv_ours)
}

pub(crate) fn room_section(out: &mut String, rows: &[Row]) {
    let s = "chat-room";
    let _ = writeln!(
        out,
        "Connections are dealt into rooms of the given size; each `SAY` reaches every other member of its room. The `SAY` rate is set so the server delivers about the same number of `MSG` lines per second at every room size. Delivery latency p99 (from `SAY` to each member's `MSG`) and completeness (subscribers that missed, repeated or reordered a message):\n"
    );
    pivot(out, rows, s, "rooms", "delivery p99", |r| {
        format!(
            "{} (p50 {}), {} delivered, {} incomplete",
            fmt_us(r.delivery_p99_us),
            fmt_us(r.delivery_p50_us),
            fmt_rate(r.deliveries),
            r.delivery_errors
        )
    });
    let _ = writeln!(out, "Server CPU per `SAY` (the fan-out included):\n");
    pivot(out, rows, s, "rooms", "CPU per SAY", |r| {
        fmt_us(r.cpu_us_per_req)
    });
}
