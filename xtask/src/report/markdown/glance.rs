//! "At a glance": what this machine can measure first. CPU per echo at equal load (each open-loop
//! rate), with intervals and significance against the cheapest server; then capacity under
//! the CPU quota when the run had one; then closed-loop echoes/s, marked for what they are on
//! a machine where one load-generator core may not outrun the server.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::{Input, about};
use crate::record::row::{DISTURBED_PCT, Row, STEAL_PCT, find, points_of, servers};
use crate::report::cells::{
    delta, fmt_bytes, fmt_pct, fmt_rate, fmt_us, mark, paired_against, table, with_ci,
};

/// The servers of the quick rows, in the order they ran.
fn quick_servers(rows: &[Row]) -> Vec<String> {
    servers(rows)
        .into_iter()
        .filter(|s| rows.iter().any(|r| r.suite == "quick" && &r.server == s))
        .collect()
}

/// The row among `rs` with the best median of `f` (lowest or highest).
fn best<'a>(rs: &[&'a Row], f: fn(&Row) -> Option<f64>, lowest: bool) -> Option<&'a Row> {
    let key = |r: &&&'a Row| f(r).unwrap_or(if lowest { f64::MAX } else { f64::MIN });
    if lowest {
        rs.iter().min_by(|a, b| key(a).total_cmp(&key(b))).copied()
    } else {
        rs.iter().max_by(|a, b| key(a).total_cmp(&key(b))).copied()
    }
    .filter(|r| f(r).is_some())
}

/// At each of `points`, the quick row with the best median of `f` among the servers
/// `names` that measured it (lowest or highest).
fn bests_at<'a, 'p>(
    rows: &'a [Row],
    names: &[String],
    points: impl Iterator<Item = &'p PointOf>,
    f: fn(&Row) -> Option<f64>,
    lowest: bool,
) -> Vec<Option<&'a Row>> {
    points
        .map(|p| {
            let rs: Vec<&Row> = names
                .iter()
                .filter_map(|s| find(rows, "quick", s, &p.0))
                .filter(|r| r.ok > 0)
                .collect();
            best(&rs, f, lowest)
        })
        .collect()
}

/// The cell comparing `r` with the best row for `metric`.
fn against(best: Option<&Row>, r: &Row, metric: &str, f: fn(&Row) -> Option<f64>) -> String {
    match best {
        Some(b) if b.server == r.server => "best".into(),
        Some(b) => delta(b, r, metric, f(b), f(r)),
        None => "–".into(),
    }
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
        let names = quick_servers(rows);
        // 1. CPU per echo at equal load: the comparison one client core can always make.
        if !open.is_empty() {
            cpu_at_equal_load(out, input, &names, &open);
            behind_the_rate(out, rows, &names, &open);
        }
        // 2. Capacity under the quota.
        let quota = rows
            .iter()
            .find_map(|r| r.cpu_quota.filter(|_| r.suite == "quick"));
        if let (Some(q), false) = (quota, closed.is_empty()) {
            capacity_under_quota(out, rows, &names, &closed, q);
        }
        // 3. Closed-loop echoes/s, after them and marked.
        if let (Some(first), Some(last)) = (closed.first(), closed.last()) {
            closed_loop(out, rows, &names, first, last);
        }
        how_to_read(out, rows);
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

/// A point of a series: its id, its label and its x.
type PointOf = (String, String, f64);

/// The table of CPU per echo at the open-loop rates, against the cheapest.
fn cpu_at_equal_load(out: &mut String, input: &Input<'_>, names: &[String], open: &[PointOf]) {
    let rows = input.rows;
    let cpu = |r: &Row| r.cpu_us_per_req;
    let mut head: Vec<String> = vec!["server".into(), "how it serves connections".into()];
    for o in open {
        let rate = o.1.split(" @ ").nth(1).unwrap_or("equal load");
        head.push(format!("CPU per echo at {rate} [interval]"));
        head.push("against the cheapest".into());
        head.push("per round against the cheapest".into());
        head.push("lowest repeat".into());
    }
    head.push(format!(
        "p99 at {}",
        open[0].1.split(" @ ").nth(1).unwrap_or("equal load")
    ));
    let bests = bests_at(rows, names, open.iter(), cpu, true);
    let mut body = Vec::new();
    for s in names {
        let mut cells = vec![format!("**{s}**"), about(input, s).to_string()];
        for (o, b) in open.iter().zip(&bests) {
            let r = find(rows, "quick", s, &o.0);
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
            cells.push(r.map_or("–".into(), |r| against(*b, r, "cpu_us_per_req", cpu)));
            cells.push(r.map_or("–".into(), |r| paired_against(*b, r, "cpu_us_per_req")));
            cells.push(fmt_us(r.and_then(|r| r.cpu_us_per_req_min)));
        }
        let r = find(rows, "quick", s, &open[0].0);
        cells.push(mark(
            r,
            r.map_or_else(String::new, |r| {
                with_ci(r.p99_us, r.p99_us_ci_low, r.p99_us_ci_high, fmt_us)
            }),
        ));
        body.push(cells);
    }
    let _ = writeln!(
        out,
        "**CPU per echo at equal load** (open loop: every server handles the same fixed rate, 16-byte echoes, {} connections):\n",
        names
            .first()
            .and_then(|s| find(rows, "quick", s, &open[0].0))
            .map_or(0, |r| r.conns)
    );
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
}

/// A server that fell behind the rate did less work: say so rather than let its CPU per
/// echo stand alone.
fn behind_the_rate(out: &mut String, rows: &[Row], names: &[String], open: &[PointOf]) {
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

/// The table of closed-loop echoes/s under the CPU quota `q`, against the most.
fn capacity_under_quota(
    out: &mut String,
    rows: &[Row],
    names: &[String],
    closed: &[PointOf],
    q: f64,
) {
    let tp = |r: &Row| r.throughput_per_sec;
    let picked: Vec<&(String, String, f64)> = closed.iter().filter(|p| p.2 >= 10.0).collect();
    let mut head: Vec<String> = vec!["server".into()];
    for p in &picked {
        head.push(format!("echoes/s, {} [interval]", p.1));
        head.push("against the most".into());
        head.push("per round against the most".into());
    }
    head.push("server CPU, last point".into());
    head.push("throttled, last point".into());
    let bests = bests_at(rows, names, picked.iter().copied(), tp, false);
    let mut body = Vec::new();
    for s in names {
        let mut cells = vec![format!("**{s}**")];
        for (p, b) in picked.iter().zip(&bests) {
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
            cells.push(r.map_or("–".into(), |r| against(*b, r, "throughput_per_sec", tp)));
            cells.push(r.map_or("–".into(), |r| {
                paired_against(*b, r, "throughput_per_sec")
            }));
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
}

/// How to read the tables: the intervals, the tests' power, the marks.
fn how_to_read(out: &mut String, rows: &[Row]) {
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
    let least = crate::record::stats::least_p(repeats, repeats);
    let power = match least {
        Some(p) if p >= crate::record::stats::ALPHA => format!(
            "with {repeats} repeats a side the least p possible is {p:.3}, so no difference can \
             be shown: run `--repeat 5` or more for verdicts"
        ),
        Some(p) => format!(
            "with {repeats} repeats a side the least p possible is {p:.3}; where two servers do \
             not differ, a cell still shows a ratio about {:.0}% of the time",
            crate::record::stats::false_positive_rate(repeats, repeats) * 100.0
        ),
        None => "a single run cannot be tested".into(),
    };
    let paired = super::per_round_note(repeats);
    let _ = writeln!(
        out,
        "How to read it: on a small machine one load-generator core costs about as much per \
         echo as the fastest servers, so closed-loop echoes/s often measure the load \
         generator (†); the server's CPU per echo at a fixed rate, and its throughput under a \
         CPU quota, are what this machine measures about the server itself, so they come \
         first. {over}; *against the cheapest* (or *the most*) shows the ratio only where a \
         Mann-Whitney test on the repeats gives p < 0.05, else `~` ({power}). {paired} \
         *lowest repeat* \
         is the \
         steadiest estimate of a cost on a shared host, where noise only adds CPU time. \
         **CPU per echo** is the server's CPU time (user + system, from /proc) over the echoes \
         it served (less is better); **p99** the time within which 99% of echoes came back; \
         **memory per conn** the growth of the server's memory, of the kernel's thread stacks \
         and of TCP socket memory (both ends of the loopback connections) per connection. \
         ‡ marks a point where something else used more than {DISTURBED_PCT:.0}% of the \
         server's CPU or the hypervisor stole more than {STEAL_PCT:.0}% of it; § a point where \
         the CPU quota throttled the server (its latency includes the throttling). The \
         default run is cut so that sixteen servers fit in about ten minutes on 2 CPUs, build \
         included: windows of 0.3 s in the closed loop and 0.5 s in the open one (0.4 s and \
         0.75 s before), so each repeat rests on fewer echoes and the intervals are wider \
         (p99.99 at 20,000/s on about one echo), and it leaves out the closed loop at 10 and \
         100 connections and the second open-loop rate, 50,000/s (`--conns 1,10,100,1000` \
         and `--rate 50000` measure them).\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::meta::Meta;

    fn row(server: &str, point: &str, series: &str, cpu: &[f64], quota: Option<f64>) -> Row {
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
        assert!(
            t.contains("| **a** |  | 10.1 µs [9.90 µs–10.3 µs] | best | best | 9.90 µs |"),
            "{t}"
        );
        // b costs half as much again, in every repeat: a verdict; c is within a's noise.
        let line = |s: &str| t.lines().find(|l| l.starts_with(s)).unwrap();
        assert!(line("| **b** |").contains("× (p=0.008 n=5+5) |"), "{t}");
        assert!(line("| **c** |").contains("| ~ (p="), "{t}");
        // Round by round: b above a in all 5 rounds (the sign test's least p at 5), c in 3.
        assert!(
            line("| **b** |").contains("| 1.50× (p=0.062, 5 of 5 rounds above) |"),
            "{t}"
        );
        assert!(
            line("| **c** |").contains("| 1.02× (p=1.000, 3 of 5 rounds above) |"),
            "{t}"
        );
        assert!(t.contains("Williams design"), "{t}");
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
}
