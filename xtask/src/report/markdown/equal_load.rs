//! The first table of "At a glance": CPU per echo at equal load (each open-loop rate) and the
//! tail at the first rate (p99 and p99.9), each with its interval and its verdict against the
//! reference named in advance, a family per column (`record::verdict`); who fell behind the
//! rate, and where the load generator did not keep its schedule.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::{Input, about};
use crate::record::row::{Row, find};
use crate::report::cells::{Column, fmt_rate, fmt_us, legend, mark, table, with_ci};

/// A point of a series: its id, its label and its x.
pub(super) type PointOf = (String, String, f64);

/// A tail percentile the table shows at the first rate, tested as CPU per echo is.
struct Tail {
    /// Its name in the summary (and in `per_round`).
    metric: &'static str,
    /// Its heading.
    name: &'static str,
    /// Its median and interval.
    value: fn(&Row) -> [Option<f64>; 3],
}

/// The tail's columns: p99 and p99.9, both kept by round (`record::rounds::TAIL_METRICS`).
const TAILS: [Tail; 2] = [
    Tail {
        metric: "p99_us",
        name: "p99",
        value: |r| [r.p99_us, r.p99_us_ci_low, r.p99_us_ci_high],
    },
    Tail {
        metric: "p99_9_us",
        name: "p99.9",
        value: |r| [r.p99_9_us, r.p99_9_us_ci_low, r.p99_9_us_ci_high],
    },
];

/// The rate of an open-loop point's label (`1000 conns @ 20000/s`).
fn rate_of(point: &PointOf) -> &str {
    point.1.split(" @ ").nth(1).unwrap_or("equal load")
}

/// The table of CPU per echo at the open-loop rates and of the tail at the first, against
/// the reference.
pub(super) fn table_at_equal_load(
    out: &mut String,
    input: &Input<'_>,
    names: &[String],
    open: &[PointOf],
    reference: Option<&str>,
) {
    let rows = input.rows;
    let cpu: Vec<Column> = open
        .iter()
        .map(|o| Column::new(rows, "quick", &o.0, "cpu_us_per_req", reference))
        .collect();
    let tails: Vec<Column> = TAILS
        .iter()
        .map(|t| Column::new(rows, "quick", &open[0].0, t.metric, reference))
        .collect();
    let against = format!("against {}", reference.unwrap_or("the reference"));
    let mut head: Vec<String> = vec!["server".into(), "how it serves connections".into()];
    for o in open {
        head.push(format!("CPU per echo at {} [interval]", rate_of(o)));
        head.push(against.clone());
        head.push("lowest repeat".into());
    }
    for t in &TAILS {
        head.push(format!("{} at {} [interval]", t.name, rate_of(&open[0])));
        head.push(against.clone());
    }
    let body: Vec<Vec<String>> = names
        .iter()
        .map(|s| {
            let mut cells = vec![format!("**{s}**"), about(input, s).to_string()];
            cells.extend(cpu_cells(rows, s, open, &cpu));
            cells.extend(tail_cells(find(rows, "quick", s, &open[0].0), s, &tails));
            cells
        })
        .collect();
    let _ = writeln!(
        out,
        "**CPU per echo at equal load** (open loop: every server handles the same fixed rate, 16-byte echoes, {} connections; latency from when each echo was due):\n",
        names
            .first()
            .and_then(|s| find(rows, "quick", s, &open[0].0))
            .map_or(0, |r| r.conns)
    );
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
    let shown = |r: &&Row| r.suite == "quick" && open.iter().any(|o| o.0 == r.point);
    out.push_str(&legend(rows.iter().filter(shown)));
    say_references(out, &cpu);
    say_tail_references(out, &cpu, &tails);
}

/// `server`'s CPU per echo at each open-loop point: the value, its verdict, its lowest repeat.
fn cpu_cells(rows: &[Row], server: &str, open: &[PointOf], columns: &[Column]) -> Vec<String> {
    let mut cells = Vec::new();
    for (o, col) in open.iter().zip(columns) {
        let r = find(rows, "quick", server, &o.0);
        cells.push(mark(
            r,
            r.map_or_else(String::new, |r| {
                with_ci(
                    r.cpu_us_per_req,
                    r.cpu_us_per_req_ci_low,
                    r.cpu_us_per_req_ci_high,
                    fmt_us,
                )
            }),
        ));
        cells.push(r.map_or("–".into(), |_| col.cell(server)));
        cells.push(fmt_us(r.and_then(|r| r.cpu_us_per_req_min)));
    }
    cells
}

/// `server`'s tail at the first rate (its row `r`): each of [`TAILS`] and its verdict.
fn tail_cells(r: Option<&Row>, server: &str, columns: &[Column]) -> Vec<String> {
    let mut cells = Vec::new();
    for (t, col) in TAILS.iter().zip(columns) {
        cells.push(mark(
            r,
            r.map_or_else(String::new, |r| {
                let [v, low, high] = (t.value)(r);
                with_ci(v, low, high, fmt_us)
            }),
        ));
        cells.push(r.map_or("–".into(), |_| col.cell(server)));
    }
    cells
}

/// Under a table of verdicts, its reference, or why its columns are not tested.
pub(super) fn say_references(out: &mut String, columns: &[Column]) {
    let mut said: Vec<String> = columns.iter().map(Column::about).collect();
    said.dedup();
    let _ = writeln!(
        out,
        "Verdicts {} (named before the run, not picked by its medians).\n",
        said.join("; ")
    );
}

/// What the tail's columns say of their reference, where it is not what the CPU's say (its
/// latency can be off its schedule where its CPU is not).
fn say_tail_references(out: &mut String, cpu: &[Column], tails: &[Column]) {
    let first = cpu.first().map(Column::about);
    let mut said: Vec<String> = tails
        .iter()
        .map(Column::about)
        .filter(|a| Some(a) != first.as_ref())
        .collect();
    said.dedup();
    if !said.is_empty() {
        let _ = writeln!(out, "The tail's verdicts: {}.\n", said.join("; "));
    }
}

/// A server that fell behind the rate did less work: say so rather than let its CPU per
/// echo stand alone.
pub(super) fn behind_the_rate(out: &mut String, rows: &[Row], names: &[String], open: &[PointOf]) {
    let behind: Vec<String> = open
        .iter()
        .flat_map(|o| {
            names.iter().filter_map(|s| {
                let r = find(rows, "quick", s, &o.0)?;
                let (Some(rate), Some(tp)) = (r.rate, r.throughput_per_sec) else {
                    return None;
                };
                (tp < 0.97 * rate).then(|| {
                    format!(
                        "{s} completed {} of {}/s",
                        fmt_rate(Some(tp)),
                        fmt_rate(Some(rate))
                    )
                })
            })
        })
        .collect();
    if !behind.is_empty() {
        let _ = writeln!(out, "Behind the rate (saturated): {}.\n", behind.join("; "));
    }
}

/// Where the load generator did not keep its schedule (◊), and why: that latency is the
/// client's, so the table judges none of it.
pub(super) fn off_schedule(out: &mut String, rows: &[Row], names: &[String], open: &[PointOf]) {
    let off: Vec<String> = open
        .iter()
        .flat_map(|o| {
            names.iter().filter_map(|s| {
                let r = find(rows, "quick", s, &o.0).filter(|r| r.schedule_missed())?;
                let why = r.schedule_reason.as_deref().unwrap_or("no reason recorded");
                Some(format!("{s} at {} ({why})", rate_of(o)))
            })
        })
        .collect();
    if !off.is_empty() {
        let _ = writeln!(
            out,
            "Off schedule (◊: the load generator did not send on time, so the latency is the client's and is not judged): {}.\n",
            off.join("; ")
        );
    }
}

/// The server whose latency is the run's resolution: one thread on epoll, nothing else.
const FLOOR: &str = "floor-epoll";

/// The smallest latency the run can tell apart at each open-loop rate: the floor server's
/// p99 there (the kernel and the client alone), and how late the client itself sent.
pub(super) fn resolution(out: &mut String, rows: &[Row], names: &[String], open: &[PointOf]) {
    for o in open {
        let lags: Vec<f64> = names
            .iter()
            .filter_map(|s| find(rows, "quick", s, &o.0)?.send_lag_p99_us)
            .collect();
        let floor = find(rows, "quick", FLOOR, &o.0).and_then(|r| r.p99_us);
        let mut said = Vec::new();
        if let Some(p99) = floor {
            said.push(format!(
                "{}'s p99 is {}, the least latency this machine and its client show at this load (no runtime, the kernel alone): a p99 near it says little of a runtime",
                FLOOR,
                fmt_us(Some(p99))
            ));
        }
        if let (Some(lo), Some(hi)) = (
            lags.iter().copied().reduce(f64::min),
            lags.iter().copied().reduce(f64::max),
        ) {
            said.push(format!(
                "the client's own send lag p99 was {}–{} across the servers",
                fmt_us(Some(lo)),
                fmt_us(Some(hi))
            ));
        }
        if !said.is_empty() {
            let _ = writeln!(out, "Resolution at {}: {}.\n", rate_of(o), said.join("; "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resolution_names_the_floors_p99_and_the_clients_lag_at_each_rate() {
        let row = |server: &str, p99: f64, lag: f64| Row {
            suite: "quick".into(),
            server: server.into(),
            point: "open-r20000".into(),
            p99_us: Some(p99),
            send_lag_p99_us: Some(lag),
            ..Row::default()
        };
        let rows = vec![row("floor-epoll", 310.0, 12.0), row("fiber", 420.0, 40.0)];
        let names = vec!["floor-epoll".to_string(), "fiber".to_string()];
        let open = vec![(
            "open-r20000".to_string(),
            "1000 conns @ 20000/s".to_string(),
            1000.0,
        )];
        let mut out = String::new();
        resolution(&mut out, &rows, &names, &open);
        assert!(
            out.starts_with("Resolution at 20000/s: floor-epoll's p99 is 310"),
            "{out}"
        );
        assert!(out.contains("send lag p99 was 12"), "{out}");
        assert!(out.contains("–40"), "{out}");
        let mut none = String::new();
        resolution(&mut none, &rows, &names, &[]);
        assert!(none.is_empty());
    }
}
