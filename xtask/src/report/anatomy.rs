//! The anatomy of a request: what the kernel counted for each server per request
//! (`record::counted`), as a table beside a suite's main one, and for each server that the
//! column of CPU per request finds dearer than the reference, one line naming what differs
//! most ("glommio: 1.73× the floor's CPU per echo; 3.1 system calls per echo against 1.0, ...").
//! The same line names what changed in a regression of `compare`.
//!
//! It may call the plan layer (a suite's reference), the record layer (rows) and the report
//! layer's `cells`.

use std::fmt::Write as _;

use crate::plan::suites::Suite;
use crate::record::counted::by_name;
use crate::record::row::{Row, find, servers_that_ran};
use crate::report::cells::{Column, fmt_num, mark, table};

/// The counts a line may name: the key, and how it is said.
const NAMED: [(&str, &str); 9] = [
    ("syscalls", "system calls"),
    ("voluntary_switches", "voluntary switches"),
    ("involuntary_switches", "involuntary switches"),
    ("context_switches", "context switches"),
    ("migrations", "CPU migrations"),
    ("page_faults", "page faults"),
    ("instructions", "instructions"),
    ("llc_misses", "last-level cache misses"),
    ("dtlb_misses", "dTLB misses"),
];

/// The point of `suite` the table shows: of the points where something was counted, the
/// open-loop one of the highest rate (equal load, the most work to count), else the last.
pub(crate) fn point_of(rows: &[Row], suite: &str) -> Option<(String, String)> {
    rows.iter()
        .filter(|r| r.suite == suite && r.counted.syscalls_per_req.is_some())
        .max_by(|a, b| {
            let key = |r: &Row| (r.series == "open", r.rate.unwrap_or(0.0), r.x);
            let (ka, kb) = (key(a), key(b));
            ka.0.cmp(&kb.0)
                .then(ka.1.total_cmp(&kb.1))
                .then(ka.2.total_cmp(&kb.2))
        })
        .map(|r| (r.point.clone(), r.label.clone()))
}

/// The table's cells of a row: system calls, context switches (all, then voluntary and
/// involuntary: counted, else the samples' marked ≈), migrations, faults, instructions and
/// IPC, the top calls.
fn cells(r: &Row) -> Vec<String> {
    let c = &r.counted;
    let n = |v: Option<f64>| fmt_num(v, 2);
    let split = match (c.voluntary_switches_per_req, c.involuntary_switches_per_req) {
        (Some(v), Some(i)) => format!("{} / {}", n(Some(v)), n(Some(i))),
        _ => format!("≈ {} / {}", n(r.vol_cs_per_req), n(r.invol_cs_per_req)),
    };
    vec![
        n(c.syscalls_per_req),
        n(c.context_switches_per_req),
        split,
        fmt_num(c.migrations_per_req, 3),
        n(c.page_faults_per_req),
        c.instructions_per_req
            .map_or("–".into(), |i| format!("{i:.0}")),
        n(c.ipc),
        by_name(&top(&c.syscalls_by_name_per_req, 4), 0.005).unwrap_or_else(|| "–".into()),
    ]
}

/// The `k` most frequent calls of `per_req` (and `other`).
fn top(
    per_req: &std::collections::BTreeMap<String, f64>,
    k: usize,
) -> std::collections::BTreeMap<String, f64> {
    let mut calls: Vec<(&String, &f64)> = per_req.iter().filter(|(n, _)| *n != "other").collect();
    calls.sort_by(|a, b| b.1.total_cmp(a.1));
    calls
        .into_iter()
        .take(k)
        .chain(per_req.get_key_value("other"))
        .map(|(n, v)| (n.clone(), *v))
        .collect()
}

/// What a request of `suite` is called in its anatomy, where its section shows one (quick's
/// is in "At a glance").
fn unit_of(suite: Suite) -> Option<&'static str> {
    match suite {
        Suite::EmperEcho
        | Suite::Scaling
        | Suite::Churn
        | Suite::Idle
        | Suite::Sizes
        | Suite::Bursts => Some("echo"),
        Suite::Skew => Some("request"),
        Suite::ChatCpu => Some("message"),
        Suite::ChatRoom => Some("SAY"),
        Suite::Kv | Suite::Http => Some("request"),
        Suite::Quick | Suite::Memory | Suite::Search | Suite::Capacity => None,
    }
}

/// The anatomy section of a suite's rows, against its reference (`settings` the run's).
pub(crate) fn of_suite(out: &mut String, rows: &[Row], suite: Suite, settings: &serde_json::Value) {
    let Some(unit) = unit_of(suite) else { return };
    let names = servers_that_ran(rows);
    let reference = suite.reference(&names, settings["reference"].as_str());
    section(out, rows, suite.name(), &names, reference.as_deref(), unit);
}

/// The anatomy section of `suite` for `names`, `unit` what a request is called ("echo"):
/// the table at its point, the lines of the servers dearer than `reference`, and what could
/// not be counted.
pub(crate) fn section(
    out: &mut String,
    rows: &[Row],
    suite: &str,
    names: &[String],
    reference: Option<&str>,
    unit: &str,
) {
    let Some((point, label)) = point_of(rows, suite) else {
        return unavailable_only(out, rows, suite);
    };
    let mut body = Vec::new();
    for s in names {
        let Some(r) = find(rows, suite, s, &point) else {
            continue;
        };
        let mut line = vec![mark(Some(r), format!("**{s}**"))];
        line.extend(cells(r));
        body.push(line);
    }
    let _ = writeln!(
        out,
        "**The anatomy of a request** at {label}: what the kernel counted in each server's cgroup over the window, per {unit} ({}; `run::counters`, docs/METHOD.md):\n",
        counted_when(rows, suite, &point)
    );
    let head = [
        "server",
        "system calls",
        "context switches",
        "voluntary / involuntary",
        "migrations",
        "page faults",
        "instructions",
        "IPC",
        "top system calls",
    ];
    table(out, &head, &body);
    let col = Column::new(rows, suite, &point, "cpu_us_per_req", reference);
    let lines: Vec<String> = names
        .iter()
        .filter(|s| col.of(s).is_some_and(|v| v.differs && v.ratio > 1.0))
        .filter_map(|s| {
            let base = find(rows, suite, col.reference.as_deref()?, &point)?;
            differs_most(find(rows, suite, s, &point)?, base, col.of(s)?.ratio, unit)
        })
        .collect();
    for l in &lines {
        let _ = writeln!(out, "- {l}");
    }
    if !lines.is_empty() {
        out.push('\n');
    }
    if let Some(why) = body_unavailable(rows, suite, &point) {
        let _ = writeln!(out, "Not counted here: {why}.\n");
    }
}

/// Which windows the counts come from: the measured rounds', or a round of their own.
fn counted_when(rows: &[Row], suite: &str, point: &str) -> &'static str {
    let apart = rows
        .iter()
        .any(|r| r.suite == suite && r.point == point && r.counted.counted_apart);
    if apart {
        "counted in one more round after the measured ones, whose CPU is not used: counting slows every system call"
    } else {
        "median of the repeats"
    }
}

/// Where nothing was counted at any point of the suite: why, once.
fn unavailable_only(out: &mut String, rows: &[Row], suite: &str) {
    if let Some(why) = rows
        .iter()
        .filter(|r| r.suite == suite)
        .find_map(|r| r.counted.counters_unavailable.as_deref())
    {
        let _ = writeln!(
            out,
            "**The anatomy of a request**: not counted in this run ({why}).\n"
        );
    }
}

/// What a row of the point says was not counted, where one does.
fn body_unavailable(rows: &[Row], suite: &str, point: &str) -> Option<String> {
    rows.iter()
        .filter(|r| r.suite == suite && r.point == point)
        .find_map(|r| r.counted.counters_unavailable.clone())
}

/// One line of what differs most between `r` and the reference's row `base` at a point where
/// `r` costs `ratio` times its CPU per request (`what_differs`).
pub(crate) fn differs_most(r: &Row, base: &Row, ratio: f64, unit: &str) -> Option<String> {
    let parts = what_differs(r, base, unit);
    (!parts.is_empty()).then(|| {
        format!(
            "{}: {ratio:.2}× {}'s CPU per {unit}; {}",
            r.server,
            base.server,
            parts.join(", ")
        )
    })
}

/// What changed between a point's row in run A (`a`) and in run B (`b`) where B costs `ratio`
/// times A's CPU per request: the line of a regression in `compare`.
pub(crate) fn changed(a: &Row, b: &Row, ratio: f64) -> Option<String> {
    let parts = what_differs(b, a, "request");
    (!parts.is_empty()).then(|| {
        format!(
            "{} / {} / {}: B {ratio:.2}× A's CPU per request; in B {}",
            b.suite,
            b.server,
            b.label,
            parts.join(", ")
        )
    })
}

/// What differs most between `r` and `base`: the two counts furthest apart (as a ratio) and
/// the system call whose count per request differs most, each as `r`'s against `base`'s.
fn what_differs(r: &Row, base: &Row, unit: &str) -> Vec<String> {
    let mut apart: Vec<(f64, String)> = NAMED
        .iter()
        .filter_map(|(key, said)| {
            // The switches split where they were, else in all.
            let split = r.counted.voluntary_switches_per_req.is_some();
            if *key == "context_switches" && split {
                return None;
            }
            let (a, b) = (r.counted.per_req(key)?, base.counted.per_req(key)?);
            let far = ((a + 0.01) / (b + 0.01)).ln().abs();
            (far > 0.1).then(|| {
                (
                    far,
                    format!("{} {said} per {unit} against {}", num(a), num(b)),
                )
            })
        })
        .collect();
    apart.sort_by(|x, y| y.0.total_cmp(&x.0));
    let mut parts: Vec<String> = apart.into_iter().take(2).map(|(_, s)| s).collect();
    let calls = &r.counted.syscalls_by_name_per_req;
    let base_calls = &base.counted.syscalls_by_name_per_req;
    let call = calls
        .keys()
        .chain(base_calls.keys())
        .filter(|k| *k != "other")
        .map(|k| {
            let (a, b) = (
                calls.get(k).copied().unwrap_or(0.0),
                base_calls.get(k).copied().unwrap_or(0.0),
            );
            ((a - b).abs(), k, a, b)
        })
        .filter(|d| d.0 >= 0.05)
        .max_by(|x, y| x.0.total_cmp(&y.0));
    if let Some((_, k, a, b)) = call {
        parts.push(format!("{k} {} against {}", num(a), num(b)));
    }
    parts
}

/// A count per request as the lines say it: two significant digits below 10.
fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    fn counted(server: &str, syscalls: f64, switches: f64, calls: &[(&str, f64)]) -> Row {
        let mut r = row(server, "o1", 1000.0, 20_000.0);
        r.series = "open".into();
        r.rate = Some(20_000.0);
        r.counted.syscalls_per_req = Some(syscalls);
        r.counted.context_switches_per_req = Some(switches);
        r.counted.page_faults_per_req = Some(0.001);
        r.counted.syscalls_by_name_per_req =
            calls.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        r
    }

    #[test]
    fn the_line_names_the_counts_furthest_apart_and_the_call_that_differs_most() {
        let floor = counted(
            "floor-epoll",
            2.1,
            0.02,
            &[("read", 1.0), ("write", 1.0), ("epoll_wait", 0.1)],
        );
        let glommio = counted(
            "glommio",
            3.1,
            1.4,
            &[
                ("read", 1.0),
                ("write", 1.0),
                ("io_uring_enter", 1.0),
                ("futex", 0.1),
            ],
        );
        let line = differs_most(&glommio, &floor, 1.73, "echo").unwrap();
        assert_eq!(
            line,
            "glommio: 1.73× floor-epoll's CPU per echo; 1.40 context switches per echo against \
             0.020, 3.10 system calls per echo against 2.10, io_uring_enter 1.00 against 0.000"
        );
        // Nothing apart: no line.
        assert_eq!(differs_most(&floor, &floor, 1.2, "echo"), None);
        // A regression of compare: the same server in two runs.
        let mut later = floor.clone();
        later.counted.context_switches_per_req = Some(0.5);
        assert_eq!(
            changed(&floor, &later, 1.1).unwrap(),
            "quick / floor-epoll / 1000 conns: B 1.10× A's CPU per request; in B 0.50 context \
             switches per request against 0.020"
        );
    }

    #[test]
    fn the_table_is_at_the_highest_open_rate_and_names_what_was_not_counted() {
        let mut low = counted("floor-epoll", 2.0, 0.0, &[("read", 1.0)]);
        low.point = "o0".into();
        low.rate = Some(5_000.0);
        let mut high = counted("floor-epoll", 2.1, 0.0, &[("read", 1.0), ("write", 1.0)]);
        high.label = "1000 conns @ 20000/s".into();
        high.counted.counters_unavailable = Some("instructions: not available here: no PMU".into());
        let rows = vec![low, high];
        assert_eq!(point_of(&rows, "quick").unwrap().0, "o1");
        let mut out = String::new();
        section(
            &mut out,
            &rows,
            "quick",
            &["floor-epoll".to_string()],
            None,
            "echo",
        );
        assert!(out.contains("at 1000 conns @ 20000/s"), "{out}");
        assert!(out.contains("read 1.00, write 1.00"), "{out}");
        assert!(
            out.contains("Not counted here: instructions: not available here: no PMU."),
            "{out}"
        );
    }
}
