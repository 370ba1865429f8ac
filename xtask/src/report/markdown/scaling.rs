//! The `scaling` section: each server at 1, 2, 4, … workers (closed loop, equal load per
//! worker, the Figure 7 point under its Little's-law bound), the parallel efficiency, and why
//! the sweep stops where it does.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::pivot;
use crate::plan::placement::CpuList;
use crate::plan::suites::{self, Suite};
use crate::record::row::Row;
use crate::report::cells::{Column, fmt_num, fmt_rate, fmt_us, with_ci};
use crate::report::figures::scaling::{efficiency, work_series, workers_of};

/// `server_cpus` is the run's `--server-cpus`, `machine_cpus` the machine's CPUs.
/// `explicit` is the run's `--reference`.
pub(crate) fn section(
    out: &mut String,
    rows: &[Row],
    server_cpus: &str,
    machine_cpus: usize,
    explicit: Option<&str>,
) {
    let s = Suite::Scaling.name();
    // A server sits out the points it does not serve (srv-floor those with work): they are
    // left blank, not failed.
    let served: Vec<Row> = rows.iter().filter(|r| r.repeats > 0).cloned().collect();
    let rows = served.as_slice();
    let stop = server_cpus
        .parse::<CpuList>()
        .map(|cpus| suites::scaling_stop_reason(&cpus, machine_cpus))
        .unwrap_or_default();
    let floor = if rows.iter().any(|r| r.server.starts_with("floor")) {
        " srv-floor is one thread whatever its workers: its rows are the one-core floor."
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "The server runs with 1, 2, 4, … workers, W workers on W of its CPUs ({server_cpus}; those \
         loadgen does not use first), a fresh start at each point; {stop}.{floor} † marks a \
         client-bound point (loadgen's CPUs were saturated: the server may have had more to \
         give).\n"
    );
    let _ = writeln!(out, "Closed loop, echoes/s · server CPU per echo · p99:\n");
    pivot(out, rows, s, "closed", "closed loop", |r| {
        format!(
            "{} · {} · {}",
            fmt_rate(r.throughput_per_sec),
            fmt_us(r.cpu_us_per_req),
            fmt_us(r.p99_us)
        )
    });
    let _ = writeln!(
        out,
        "Parallel efficiency in the closed loop, throughput(W) / (W × throughput(1)); 1.00 is \
         linear scaling:\n"
    );
    pivot(out, rows, s, "closed", "efficiency", |r| {
        fmt_num(efficiency(rows, r), 2)
    });
    let names = crate::record::row::servers(rows);
    let reference = Suite::Scaling.reference(&names, explicit);
    let _ = writeln!(
        out,
        "At equal load per worker (W × the one-worker rate, open loop), server CPU per echo \
         [interval] · p99 from the intended send · the verdict against **{}** at the same \
         workers (named in advance: `--reference`, else the first server; log CPU = server + \
         round, Bonferroni over the column; a ratio with its simultaneous interval where it \
         differs, else `~`):\n",
        reference.as_deref().unwrap_or("no server")
    );
    pivot(out, rows, s, "open", "equal load", |r| {
        let col = Column::new(rows, s, &r.point, "cpu_us_per_req", reference.as_deref());
        format!(
            "{} · {} · {}",
            with_ci(
                r.cpu_us_per_req,
                r.cpu_us_per_req_ci_low,
                r.cpu_us_per_req_ci_high,
                fmt_us
            ),
            fmt_us(r.p99_us),
            col.cell(&r.server)
        )
    });
    let _ = writeln!(
        out,
        "The io_uring paper's Figure 7 point, {} µs of work per echo: echoes/s (share of the \
         Little's-law bound, W × 10⁶ / {} µs) · p99:\n",
        suites::EMPER_COMPUTE_US,
        suites::EMPER_COMPUTE_US
    );
    pivot(out, rows, s, &work_series(), "200 µs work", |r| {
        let bound = suites::littles_law_bound(workers_of(r), suites::EMPER_COMPUTE_US);
        format!(
            "{} ({:.0}% of {}) · {}",
            fmt_rate(r.throughput_per_sec),
            r.throughput_per_sec.unwrap_or(0.0) / bound * 100.0,
            fmt_rate(Some(bound)),
            fmt_us(r.p99_us)
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    #[test]
    fn the_section_says_why_it_stops_and_marks_client_bound_points() {
        let mut rows = Vec::new();
        for (w, tp) in [(1, 100_000.0), (2, 150_000.0)] {
            let mut r = Row {
                suite: "scaling".into(),
                workers: Some(w),
                label: format!("{w} workers, 1000 conns"),
                ..row("reactor", &format!("closed-w{w}"), w as f64, tp)
            };
            r.client_bound = w == 2;
            rows.push(r);
        }
        let mut out = String::new();
        section(&mut out, &rows, "1", 2, None);
        assert!(
            out.contains("the server has 1 CPU (--server-cpus 1)"),
            "{out}"
        );
        assert!(out.contains("| **reactor** | 1.00 | 0.75 † |"), "{out}");
        assert!(out.contains("150k · – · 80.0 µs †"), "{out}");
    }
}
