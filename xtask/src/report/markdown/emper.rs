//! The `emper-echo` section: the io_uring paper's echo figures beside ours.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::pivot;
use crate::plan::suites;
use crate::record::row::{Row, find, points_of, servers};
use crate::report::cells::{UNTESTED, fmt_rate, fmt_us, mark, table};

/// The peak throughput of a server in a series: `(throughput, x)`.
pub(crate) fn peak(rows: &[Row], suite: &str, series: &str, server: &str) -> Option<(f64, f64)> {
    rows.iter()
        .filter(|r| r.suite == suite && r.series == series && r.server == server)
        .filter_map(|r| Some((r.throughput_per_sec?, r.x)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// `a` against `b` as a per cent more or less: a plain ratio, with no test behind it, and
/// labelled so.
pub(crate) fn ratio_text(
    a: Option<f64>,
    b: Option<f64>,
    higher_is: &str,
    lower_is: &str,
) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => {
            let pct = (a / b - 1.0) * 100.0;
            if pct >= 0.0 {
                format!("{pct:.1}% {higher_is}, {UNTESTED}")
            } else {
                format!("{:.1}% {lower_is}, {UNTESTED}", -pct)
            }
        }
        _ => "not in this run".into(),
    }
}

/// Echoes/s without and with work per echo, and the latency percentiles at the last point.
pub(crate) fn tables(out: &mut String, rows: &[Row], workers: usize) {
    let s = "emper-echo";
    let _ = writeln!(
        out,
        "Each connection sends 16-byte echoes, one at a time, 2500 per connection where that fits the time budget, else for a fixed duration (the label says which). Echoes/s:\n"
    );
    pivot(out, rows, s, "no-work", "no work", |r| {
        fmt_rate(r.throughput_per_sec)
    });
    let work = format!("work-{}us", suites::EMPER_COMPUTE_US);
    let bound = suites::littles_law_bound(workers, suites::EMPER_COMPUTE_US);
    if !points_of(rows, s, &work).is_empty() {
        let _ = writeln!(
            out,
            "With {} µs of busy work per echo (Figures 6 and 7). With {workers} worker(s), Little's law caps throughput at {workers} / {} µs = **{bound:.0} echoes/s**:\n",
            suites::EMPER_COMPUTE_US,
            suites::EMPER_COMPUTE_US
        );
        pivot(out, rows, s, &work, "200 µs work", |r| {
            fmt_rate(r.throughput_per_sec)
        });
    }
    let last = points_of(rows, s, "no-work").last().cloned();
    if let Some((id, label, _)) = &last {
        let _ = writeln!(out, "Latency percentiles at {label} (Figure 8):\n");
        let body: Vec<Vec<String>> = servers(rows)
            .into_iter()
            .filter_map(|sv| {
                let r = find(rows, s, &sv, id)?;
                Some(vec![
                    format!("**{sv}**"),
                    mark(Some(r), fmt_us(r.p95_us)),
                    mark(Some(r), fmt_us(r.p99_us)),
                    mark(Some(r), fmt_us(r.p99_99_us)),
                    mark(Some(r), fmt_us(r.p99_999_us)),
                ])
            })
            .collect();
        table(out, &["server", "p95", "p99", "p99.99", "p99.999"], &body);
    }
}

/// The paper's findings beside ours.
pub(crate) fn beside_the_paper(out: &mut String, rows: &[Row], workers: usize) {
    let s = "emper-echo";
    let work = format!("work-{}us", suites::EMPER_COMPUTE_US);
    let bound = suites::littles_law_bound(workers, suites::EMPER_COMPUTE_US);
    let last = points_of(rows, s, "no-work").last().cloned();
    let _ = writeln!(
        out,
        "**Beside the paper** (EMPER is the paper's fiber runtime, our `fiber`; the paper ran 80 hardware threads against a separate client machine, we run one server core against one client core, so compare shapes and ratios, not absolute numbers):\n"
    );
    let pk = |sv: &str| peak(rows, s, "no-work", sv);
    let peak_text = |sv: &str| {
        pk(sv).map_or("not in this run".to_string(), |(t, x)| {
            format!("{} echoes/s at {x} conns", fmt_rate(Some(t)))
        })
    };
    let p5 = |sv: &str| {
        last.as_ref()
            .and_then(|(id, _, _)| find(rows, s, sv, id)?.p99_999_us)
    };
    let best_work = servers(rows)
        .into_iter()
        .filter_map(|sv| Some((peak(rows, s, &work, &sv)?.0, sv)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let body = vec![
        vec![
            "EMPER against Go, peak throughput".into(),
            "+4%".into(),
            ratio_text(
                pk("fiber").map(|p| p.0),
                pk("go").map(|p| p.0),
                "more (fiber against go)",
                "less (fiber against go)",
            ),
        ],
        vec![
            "EMPER against Tokio, peak throughput".into(),
            "+17.8%".into(),
            ratio_text(
                pk("fiber").map(|p| p.0),
                pk("tokio").map(|p| p.0),
                "more (fiber against tokio)",
                "less (fiber against tokio)",
            ),
        ],
        vec![
            "where throughput peaks".into(),
            "5000 connections (EMPER, Go); 1000 (Tokio)".into(),
            format!(
                "fiber: {}; go: {}; tokio: {}",
                peak_text("fiber"),
                peak_text("go"),
                peak_text("tokio")
            ),
        ],
        vec![
            "p99.999 at 10,000 connections, EMPER against Go".into(),
            "7.7% lower".into(),
            ratio_text(
                p5("fiber"),
                p5("go"),
                "higher (fiber against go)",
                "lower (fiber against go)",
            ),
        ],
        vec![
            "Little's law bound with 200 µs work".into(),
            "20 workers → 100,000/s".into(),
            best_work.map_or("not in this run".into(), |(t, sv)| {
                format!(
                    "{workers} worker(s) → {bound:.0}/s; best: {sv} at {} ({:.0}% of the bound)",
                    fmt_rate(Some(t)),
                    t / bound * 100.0
                )
            }),
        ],
    ];
    table(out, &["", "paper", "ours"], &body);
}
