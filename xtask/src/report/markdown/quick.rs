//! The `quick` section: closed-loop echo by connections, and the equal-load open-loop points
//! beside the io_uring paper's table of system-call techniques.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::pivot;
use crate::record::row::{Row, find, points_of};
use crate::report::cells::{fmt_num, fmt_pct, fmt_rate, fmt_us, table, with_ci};

pub(crate) fn section(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "Echo of 16-byte messages, closed loop (each connection waits for its echo before sending the next). Throughput in echoes/s:\n"
    );
    pivot(out, rows, "quick", "closed", "echoes/s", |r| {
        fmt_rate(r.throughput_per_sec)
    });
    let _ = writeln!(out, "Server CPU per echo (user + system):\n");
    pivot(
        out,
        rows,
        "quick",
        "closed",
        "CPU per echo [interval]",
        |r| {
            with_ci(
                r.cpu_us_per_req,
                r.cpu_us_per_req_ci_low,
                r.cpu_us_per_req_ci_high,
                fmt_us,
            )
        },
    );
    let _ = writeln!(out, "p99 latency:\n");
    pivot(out, rows, "quick", "closed", "p99", |r| fmt_us(r.p99_us));
    if !points_of(rows, "quick", "open").is_empty() {
        let _ = writeln!(
            out,
            "Open loop at a fixed rate every server should sustain: the same work for all, so CPU and latency compare directly (latency counts from when each echo was due, so a server that falls behind is not flattered):\n"
        );
        pivot(out, rows, "quick", "open", "at equal load", |r| {
            format!(
                "{} echoes/s, {} CPU ({} per echo, {} user / {} sys), p50 {}, p99 {}, p99.99 {}, {} / {} cs per echo",
                fmt_rate(r.throughput_per_sec),
                fmt_pct(r.cpu_mean_pct),
                fmt_us(r.cpu_us_per_req),
                fmt_us(r.user_us_per_req),
                fmt_us(r.sys_us_per_req),
                fmt_us(r.p50_us),
                fmt_us(r.p99_us),
                fmt_us(r.p99_99_us),
                fmt_num(r.vol_cs_per_req, 2),
                fmt_num(r.invol_cs_per_req, 3),
            )
        });
        syscall_techniques(out, rows);
    }
}

/// The io_uring paper's Table I beside our CPU per echo at equal load, by the system-call
/// technique each server uses.
pub(crate) fn syscall_techniques(out: &mut String, rows: &[Row]) {
    let Some((id, label, _)) = points_of(rows, "quick", "open").into_iter().next() else {
        return;
    };
    let cost = |server: &str| find(rows, "quick", server, &id).and_then(|r| r.cpu_us_per_req);
    let base = cost("threads");
    let ours = |server: &str| match (cost(server), base) {
        (Some(c), Some(b)) if b > 0.0 => {
            format!("{} ({server}, {:.2}× threads)", fmt_us(Some(c)), c / b)
        }
        (Some(c), _) => format!("{} ({server})", fmt_us(Some(c))),
        (None, _) => format!("– ({server} not in this run)"),
    };
    let _ = writeln!(
        out,
        "**Beside the paper** (io_uring paper, Table I: the cost of one eventfd read by each \
         system-call technique, Xeon E5-4640, Linux 5.13). Ours is the server's whole CPU per \
         echo at {label}, TCP stack included, so only the ratios compare:\n"
    );
    table(
        out,
        &[
            "technique",
            "paper, per request",
            "paper's ratio to blocking",
            "ours, CPU per echo",
        ],
        &[
            vec![
                "blocking".into(),
                "955 ns".into(),
                "1.00×".into(),
                ours("threads"),
            ],
            vec![
                "non-blocking + epoll".into(),
                "1656 ns".into(),
                "1.73×".into(),
                ours("reactor"),
            ],
            vec![
                "io_uring".into(),
                "306 ns".into(),
                "0.32×".into(),
                ours("fiber"),
            ],
        ],
    );
}
