//! "At a glance": what this machine can measure first. CPU per echo at equal load (each open-loop
//! rate) and the tail at the first rate, with intervals and verdicts against the reference named
//! in advance (`equal_load`); then capacity under the CPU quota when the run had one; then
//! closed-loop echoes/s, marked for what they are on a machine where one load-generator core may
//! not outrun the server.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::Input;
use super::equal_load::{
    PointOf, behind_the_rate, off_schedule, resolution, say_references, table_at_equal_load,
};
use crate::plan::suites::Suite;
use crate::record::row::{DISTURBED_PCT, Row, STEAL_PCT, find, points_of, servers};
use crate::report::cells::{
    Column, fmt_bytes, fmt_pct, fmt_rate, fmt_us, legend, mark, table, with_ci,
};

/// The servers of the quick rows, in the order they ran.
fn quick_servers(rows: &[Row]) -> Vec<String> {
    servers(rows)
        .into_iter()
        .filter(|s| rows.iter().any(|r| r.suite == "quick" && &r.server == s))
        .collect()
}

/// "At a glance": the quick suite's three tables (CPU per echo at equal load, capacity
/// under the quota, closed-loop echoes/s) and how to read them; for another suite, a line.
pub(crate) fn at_a_glance(out: &mut String, input: &Input<'_>) {
    let rows = input.rows;
    let _ = writeln!(out, "## At a glance\n");
    let open = points_of(rows, "quick", "open");
    let closed = points_of(rows, "quick", "closed");
    if open.is_empty() && closed.is_empty() {
        if let Some(&suite) = input.suites.first() {
            let _ = writeln!(
                out,
                "{}: the main table of the suite follows. † marks a client-bound point.\n",
                suite.title()
            );
        }
    } else {
        // The reference by the run's order (the first server, where none is named); the
        // table ranked by the headline figure.
        let order = quick_servers(rows);
        let reference = super::reference(input, Suite::Quick, &order);
        let reference = reference.as_deref();
        let names = super::conclusion::ranked(rows, Suite::Quick, &order);
        // 1. CPU per echo at equal load: the comparison one client core can always make.
        if !open.is_empty() {
            table_at_equal_load(out, input, &names, &open, reference);
            behind_the_rate(out, rows, &names, &open);
            off_schedule(out, rows, &names, &open);
            resolution(out, rows, &names, &open);
        }
        // 2. Capacity under the quota.
        let quota = rows
            .iter()
            .find_map(|r| r.cpu_quota.filter(|_| r.suite == "quick"));
        if let (Some(q), false) = (quota, closed.is_empty()) {
            capacity_under_quota(out, rows, &names, &closed, q, reference);
        }
        // 3. Closed-loop echoes/s, after them and marked.
        if let (Some(first), Some(last)) = (closed.first(), closed.last()) {
            closed_loop(out, rows, &names, first, last);
        }
        crate::report::anatomy::section(out, rows, "quick", &names, reference, "echo");
        how_to_read(out, rows, names.len());
    }
    if !input.skipped.is_empty() {
        let _ = writeln!(out, "Not in this run: {}.\n", input.skipped.join("; "));
    }
    left_out_of_the_defaults(out, input);
}

/// The named servers the default run leaves out and this run did not name, with what each
/// is (srv-go's busy-poll model spends a CPU per worker even with no client, which would
/// load the machine under every other server's points).
fn left_out_of_the_defaults(out: &mut String, input: &Input<'_>) {
    let left: Vec<String> = crate::plan::servers::not_default()
        .into_iter()
        .filter(|(name, _)| !input.variants.iter().any(|v| v.name == *name))
        .map(|(name, about)| format!("**{name}** ({about})"))
        .collect();
    if !left.is_empty() {
        let _ = writeln!(
            out,
            "Not in the default run (name them in `--servers` to run them): {}.\n",
            left.join("; ")
        );
    }
}

/// The table of closed-loop echoes/s under the CPU quota `q`, against the reference.
fn capacity_under_quota(
    out: &mut String,
    rows: &[Row],
    names: &[String],
    closed: &[PointOf],
    q: f64,
    reference: Option<&str>,
) {
    let picked: Vec<&(String, String, f64)> = closed.iter().filter(|p| p.2 >= 10.0).collect();
    let columns: Vec<Column> = picked
        .iter()
        .map(|p| Column::new(rows, "quick", &p.0, "throughput_per_sec", reference))
        .collect();
    let mut head: Vec<String> = vec!["server".into()];
    for p in &picked {
        head.push(format!("echoes/s, {} [interval]", p.1));
        head.push(format!("against {}", reference.unwrap_or("the reference")));
    }
    head.push("server CPU, last point".into());
    head.push("throttled, last point".into());
    let mut body = Vec::new();
    for s in names {
        let mut cells = vec![format!("**{s}**")];
        for (p, col) in picked.iter().zip(&columns) {
            let r = find(rows, "quick", s, &p.0);
            cells.push(mark(
                r,
                r.map_or_else(String::new, |r| {
                    with_ci(
                        r.throughput_per_sec,
                        r.throughput_per_sec_ci_low,
                        r.throughput_per_sec_ci_high,
                        fmt_rate,
                    )
                }),
            ));
            cells.push(r.map_or("–".into(), |_| col.cell(s)));
        }
        let last = picked.last().and_then(|p| find(rows, "quick", s, &p.0));
        cells.push(fmt_pct(last.and_then(|r| r.cpu_mean_pct)));
        cells.push(last.map_or("–".into(), |r| {
            format!(
                "{} periods, {}",
                r.nr_throttled.map_or("–".into(), |n| format!("{n:.0}")),
                fmt_us(r.throttled_ms.map(|ms| ms * 1e3))
            )
        }));
        body.push(cells);
    }
    let _ = writeln!(
        out,
        "**Capacity under a quota of {q} CPU** (closed loop; the server's cgroup caps it, so one load-generator core can outrun it):\n"
    );
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
    let marked = rows
        .iter()
        .filter(|r| picked.iter().any(|p| r.point == p.0));
    out.push_str(&legend(marked.filter(|r| r.suite == "quick")));
    say_references(out, &columns);
}

/// The table of closed-loop echoes/s at the first and last points, marked for what they
/// measure.
fn closed_loop(out: &mut String, rows: &[Row], names: &[String], first: &PointOf, last: &PointOf) {
    let n = &last.1;
    let two = first.0 != last.0;
    let mut head: Vec<String> = vec!["server".into()];
    if two {
        head.push(format!("echoes/s, {}", first.1));
    }
    head.push(format!("echoes/s, {n}"));
    head.push(format!("p99 latency, {n}"));
    head.push(format!(
        "memory per conn, {n}: user / kernel stacks / sockets"
    ));
    let mut body = Vec::new();
    for s in names {
        let a = find(rows, "quick", s, &first.0);
        let b = find(rows, "quick", s, &last.0);
        let mut cells = vec![format!("**{s}**")];
        if two {
            cells.push(mark(a, fmt_rate(a.and_then(|r| r.throughput_per_sec))));
        }
        cells.push(mark(
            b,
            b.map_or_else(String::new, |r| {
                with_ci(
                    r.throughput_per_sec,
                    r.throughput_per_sec_ci_low,
                    r.throughput_per_sec_ci_high,
                    fmt_rate,
                )
            }),
        ));
        cells.push(mark(b, fmt_us(b.and_then(|r| r.p99_us))));
        cells.push(mark(
            b,
            format!(
                "{} / {} / {}",
                fmt_bytes(b.and_then(|r| r.mem_per_conn_bytes)),
                fmt_bytes(b.and_then(|r| r.kernel_stack_per_conn_bytes)),
                fmt_bytes(b.and_then(|r| r.socket_mem_per_conn_bytes)),
            ),
        ));
        body.push(cells);
    }
    let _ = writeln!(
        out,
        "**Closed-loop echoes/s** (each connection waits for its echo before sending the next; where marked †, the load generator's limit, not the server's):\n"
    );
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
    let shown = |r: &&Row| r.suite == "quick" && (r.point == first.0 || r.point == last.0);
    out.push_str(&legend(rows.iter().filter(shown)));
}

/// How to read the tables: the intervals, the tests' power, the marks.
fn how_to_read(out: &mut String, rows: &[Row], servers: usize) {
    let level = rows
        .iter()
        .filter(|r| r.suite == "quick")
        .filter_map(|r| r.ci_level)
        .fold(f64::NAN, f64::min);
    let repeats = rows
        .iter()
        .filter(|r| r.suite == "quick")
        .map(|r| r.ok)
        .min()
        .unwrap_or(0);
    let over = if level.is_finite() {
        format!(
            "Numbers are medians over {repeats} repeats with an order-statistic \
             interval in brackets, which covers the true median {:.0}% of the time (95% needs \
             6 repeats)",
            level * 100.0
        )
    } else {
        "Each number is a single run (`--repeat 3` or more gives intervals)".into()
    };
    let verdicts = super::verdicts_note(repeats, servers);
    let _ = writeln!(
        out,
        "How to read it (the method, and what a run can and cannot conclude: `docs/METHOD.md`): \
         CPU per echo at a fixed rate comes first, because on a small machine closed-loop \
         echoes/s often measure the load generator (†). It is the server's CPU (its cgroup's \
         counter read at the window's edges: every thread and process it had) over the echoes \
         it served. {over}. {verdicts} p99 and p99.9 at the first rate are each round's \
         percentile, tested as CPU is (a family a column). *lowest repeat*: noise only adds \
         CPU time. ‡: something else used over {DISTURBED_PCT:.0}% of the server's CPU, or the \
         hypervisor stole over {STEAL_PCT:.0}% of it in the median repeat (a ‡ point is judged \
         in no column); §: the CPU quota throttled the server; ◊: the \
         load generator did not keep its schedule, so the latency is the client's and is never \
         judged.\n"
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::meta::Meta;

    /// A quick row of `server` at `point` with these CPU per echo values, one a round.
    pub(crate) fn row(
        server: &str,
        point: &str,
        series: &str,
        cpu: &[f64],
        quota: Option<f64>,
    ) -> Row {
        let mut r = Row {
            suite: "quick".into(),
            server: server.into(),
            series: series.into(),
            point: point.into(),
            label: if series == "open" {
                "1000 conns @ 20000/s".into()
            } else {
                "100 conns".into()
            },
            x: if series == "open" { 1000.0 } else { 100.0 },
            conns: if series == "open" { 1000 } else { 100 },
            rate: (series == "open").then_some(20_000.0),
            ok: cpu.len(),
            repeats: cpu.len(),
            throughput_per_sec: Some(20_000.0),
            cpu_us_per_req: crate::record::stats::median(cpu),
            cpu_us_per_req_min: crate::record::stats::min(cpu),
            cpu_quota: quota,
            nr_throttled: quota.map(|_| 10.0),
            ..Row::default()
        };
        let i = crate::record::stats::median_interval(cpu).unwrap();
        r.ci_level = Some(i.level);
        (r.cpu_us_per_req_ci_low, r.cpu_us_per_req_ci_high) = (Some(i.low), Some(i.high));
        r.per_repeat.insert("cpu_us_per_req".into(), cpu.to_vec());
        r.per_round.insert(
            "cpu_us_per_req".into(),
            cpu.iter().copied().map(Some).collect(),
        );
        r.per_repeat
            .insert("throughput_per_sec".into(), vec![20_000.0; cpu.len()]);
        r
    }

    fn render(rows: &[Row]) -> String {
        let meta = Meta::default();
        let input = Input {
            meta: &meta,
            rows,
            plots: &[],
            variants: &[],
            skipped: &[],
            suites: &[crate::plan::suites::Suite::Quick],
            server_cpus: "1".into(),
            client_cpus: "0".into(),
            workers: 1,
            capacity: &[],
        };
        let mut out = String::new();
        at_a_glance(&mut out, &input);
        out
    }

    #[test]
    fn cpu_at_equal_load_leads_with_intervals_and_verdicts() {
        let rows = vec![
            row("a", "open", "open", &[10.0, 10.2, 9.9, 10.1, 10.3], None),
            row("b", "open", "open", &[15.0, 15.3, 15.1, 14.9, 15.2], None),
            row("c", "open", "open", &[10.2, 9.9, 10.4, 10.3, 10.0], None),
        ];
        let t = render(&rows);
        assert!(
            t.starts_with("## At a glance\n\n**CPU per echo at equal load**"),
            "{t}"
        );
        // No floor-epoll and no --reference: the first server is the reference.
        assert!(
            t.contains("| **a** |  | 10.1 µs [9.90 µs–10.3 µs] | reference | 9.90 µs |"),
            "{t}"
        );
        assert!(
            t.contains("Verdicts against **a** (named before the run"),
            "{t}"
        );
        // b costs half as much again, in every round: a verdict; c is within a's noise.
        let line = |s: &str| t.lines().find(|l| l.starts_with(s)).unwrap();
        assert!(line("| **b** |").contains("| 1.50× [1.4"), "{t}");
        assert!(line("| **b** |").contains("(p<0.001) |"), "{t}");
        assert!(line("| **c** |").contains("| ~ (1.01× [0.9"), "{t}");
        // The per-round column, whose sign test could not speak at 5 rounds, is gone.
        assert!(!t.contains("per round"), "{t}");
        assert!(t.contains("Williams order"), "{t}");
        assert!(t.contains("covers the true median 94% of the time"), "{t}");
        assert!(!t.contains("Capacity under"), "{t}");
    }

    #[test]
    fn a_quota_adds_capacity_and_marks_throttling() {
        let rows = vec![
            row("a", "closed-c100", "closed", &[10.0, 11.0, 12.0], Some(0.5)),
            row("a", "open", "open", &[10.0, 11.0, 12.0], Some(0.5)),
        ];
        let t = render(&rows);
        assert!(t.contains("**Capacity under a quota of 0.5 CPU**"), "{t}");
        assert!(t.contains("10 periods"), "{t}");
        assert!(t.contains(" §"), "{t}");
        let cpu = t.find("CPU per echo at equal load").unwrap();
        let cap = t.find("Capacity under").unwrap();
        let closed = t.find("Closed-loop echoes/s").unwrap();
        assert!(cpu < cap && cap < closed, "{t}");
    }

    #[test]
    fn the_floor_is_the_reference_and_a_flagged_one_is_not_tested() {
        let mut rows = vec![
            row("a", "open", "open", &[10.0, 10.2, 9.9, 10.1, 10.3], None),
            row(
                "floor-epoll",
                "open",
                "open",
                &[5.0, 5.1, 4.9, 5.0, 5.2],
                None,
            ),
        ];
        let t = render(&rows);
        let line = |t: &str, s: &str| t.lines().find(|l| l.starts_with(s)).unwrap().to_string();
        assert!(
            line(&t, "| **floor-epoll** |").contains("| reference |"),
            "{t}"
        );
        assert!(line(&t, "| **a** |").contains("| 2.0"), "{t}");
        assert!(t.contains("Verdicts against **floor-epoll**"), "{t}");
        // Something else ran on the floor's CPUs: its column is not tested.
        rows[1].other_load_pct = Some(50.0);
        let t = render(&rows);
        assert!(line(&t, "| **a** |").contains("| not tested |"), "{t}");
        assert!(
            t.contains("the reference, **floor-epoll**, is disturbed by other load (‡) here"),
            "{t}"
        );
    }

    /// `r` with a p99 in each round of `p99` (its median and interval as the summary gives).
    fn with_p99(mut r: Row, p99: &[f64]) -> Row {
        let i = crate::record::stats::median_interval(p99).unwrap();
        r.p99_us = crate::record::stats::median(p99);
        (r.p99_us_ci_low, r.p99_us_ci_high) = (Some(i.low), Some(i.high));
        r.per_repeat.insert("p99_us".into(), p99.to_vec());
        r.per_round
            .insert("p99_us".into(), p99.iter().copied().map(Some).collect());
        r
    }

    #[test]
    fn the_p99_column_carries_verdicts_and_the_clients_latency_none() {
        let cpu = [10.0, 10.2, 9.9, 10.1, 10.3];
        let p99 = [300.0, 420.0, 350.0, 390.0, 310.0];
        let times = |k: f64| p99.iter().map(|v| v * k).collect::<Vec<f64>>();
        let at = |s: &str, p: &[f64]| with_p99(row(s, "open", "open", &cpu, None), p);
        let mut rows = vec![
            at("a", &p99),
            at("twin", &[310.0, 400.0, 360.0, 380.0, 320.0]),
            at("slow", &times(1.5)),
            at("late", &times(1.5)),
        ];
        rows[3].schedule_ok = Some(false);
        rows[3].schedule_reason = Some("repeat 2 of 5: hiccups".into());
        let t = render(&rows);
        assert!(
            t.contains("is not judged): late at 20000/s (repeat 2 of 5: hiccups)."),
            "{t}"
        );
        let line = |t: &str, s: &str| t.lines().find(|l| l.starts_with(s)).unwrap().to_string();
        assert!(
            t.contains("| p99 at 20000/s [interval] | against a |"),
            "{t}"
        );
        // The p99 cell, then its verdict: `~` for a's twin, a ratio for a server 1.5× slower.
        let twin = line(&t, "| **twin** |");
        assert!(
            twin.contains("| 360 µs [310 µs–400 µs] | ~ (1.00× [0.95–1.07]) |"),
            "{twin}"
        );
        // Three servers in the column (late's is not judged): each compared by the paired t,
        // and slow is 1.5× the reference in every round, whatever twin's noise.
        assert!(
            line(&t, "| **slow** |")
                .contains("| 525 µs [450 µs–630 µs] | 1.50× [1.50–1.50] (p<0.001) |"),
            "{t}"
        );
        // The load generator missed its schedule at `late`: its cells are marked, its p99 is
        // not judged, and its CPU still is.
        let late = line(&t, "| **late** |");
        assert!(late.contains(" ◊ | the client's ◊ |"), "{late}");
        assert!(late.contains("| ~ (1.00×"), "{late}");
        // With the reference off its schedule, the tail is not tested, and the table says so.
        rows[0].schedule_ok = Some(false);
        rows[3].schedule_ok = None;
        let t = render(&rows);
        // Three servers in the column (late's is not judged): each compared by the paired t,
        // and slow is 1.5× the reference in every round, whatever twin's noise.
        assert!(
            line(&t, "| **slow** |").ends_with("| not tested | – | not tested |"),
            "{t}"
        );
        assert!(
            t.contains("The tail's verdicts: the reference, **a**, is off its schedule"),
            "{t}"
        );
    }
}
