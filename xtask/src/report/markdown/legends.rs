//! The report of a recorded run (the gate's fixture `base`: the quick suite, floor-epoll and
//! reactor over five repeats), its rows copied to the servers the claims and the paper's
//! tables name and to the emper-echo suite: under every table that shows an interval, the
//! line that says which; and no ratio without a verdict or the untested label.

use std::path::PathBuf;

use super::{Input, render};
use crate::plan::suites::Suite;
use crate::record::meta::Meta;
use crate::record::row::Row;
use crate::record::summary::read_summary;
use crate::report::cells::UNTESTED;

/// The fixture's rows, and copies of reactor's as `names`, in the quick suite and in
/// emper-echo's no-work series.
fn rows(names: &[&str]) -> Vec<Row> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate/base");
    let base = read_summary(&dir).unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()));
    let mut rows = base.clone();
    for (k, name) in names.iter().enumerate() {
        for r in base.iter().filter(|r| r.server == "reactor") {
            let mut c = r.clone();
            c.server = (*name).into();
            // Each a little dearer than the last, so that some columns find a difference.
            let by = 1.0 + 0.03 * k as f64;
            c.cpu_us_per_req = c.cpu_us_per_req.map(|v| v * by);
            for v in c.per_round.values_mut().flatten().flatten() {
                *v *= by;
            }
            for v in c.per_repeat.values_mut().flatten() {
                *v *= by;
            }
            rows.push(c);
        }
    }
    // Each median's interval over its repeats, [min, max] at five, as a run records it.
    for r in &mut rows {
        let cpu = r
            .per_repeat
            .get("cpu_us_per_req")
            .cloned()
            .unwrap_or_default();
        let least = cpu.iter().copied().reduce(f64::min);
        let most = cpu.iter().copied().reduce(f64::max);
        (r.cpu_us_per_req_ci_low, r.cpu_us_per_req_ci_high) = (least, most);
    }
    let emper: Vec<Row> = rows
        .iter()
        .filter(|r| r.series == "closed")
        .map(|r| Row {
            suite: "emper-echo".into(),
            series: "no-work".into(),
            ..r.clone()
        })
        .collect();
    rows.extend(emper);
    rows
}

/// The tables of `md`: each its header, its rows' cells and the first line after it that is
/// not blank.
fn tables(md: &str) -> Vec<(Vec<String>, Vec<Vec<String>>, String)> {
    let lines: Vec<&str> = md.lines().collect();
    let split = |l: &str| -> Vec<String> {
        let l = l.trim().trim_start_matches('|').trim_end_matches('|');
        l.split('|').map(|c| c.trim().to_string()).collect()
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with('|') {
            i += 1;
            continue;
        }
        let head = split(lines[i]);
        let mut rows = Vec::new();
        i += 2;
        while i < lines.len() && lines[i].starts_with('|') {
            rows.push(split(lines[i]));
            i += 1;
        }
        let under = lines[i.min(lines.len())..]
            .iter()
            .find(|l| !l.trim().is_empty());
        found.push((
            head,
            rows,
            under.map_or(String::new(), |l| (*l).to_string()),
        ));
    }
    found
}

#[test]
fn every_table_with_intervals_says_which_and_every_ratio_is_tested_or_labelled() {
    let names = [
        "go",
        "tokio",
        "fiber",
        "monoio",
        "glommio",
        "tokio-uring",
        "compio",
        "may",
    ];
    let rows = rows(&names);
    let meta = Meta::default();
    let input = Input {
        meta: &meta,
        rows: &rows,
        plots: &[],
        variants: &[],
        skipped: &[],
        suites: &[Suite::Quick, Suite::EmperEcho],
        server_cpus: "1".into(),
        client_cpus: "0".into(),
        workers: 1,
        capacity: &[],
    };
    let md = render(&input);
    let tables = tables(&md);
    let (mut medians, mut verdicts, mut untested) = (0, 0, 0);
    for (head, rows, under) in &tables {
        let cells: Vec<&String> = rows.iter().flatten().collect();
        let median = cells.iter().any(|c| {
            c.match_indices(" [")
                .any(|(i, _)| !c[..i].ends_with('×') && c[i..].contains('–'))
        });
        let verdict = cells.iter().any(|c| c.contains("× [") && c.contains('–'));
        if median {
            medians += 1;
            assert!(
                under.starts_with("Intervals and ratios:") && under.contains("median's interval"),
                "a table of medians' intervals, under it: {under}\n{head:?}"
            );
        }
        if verdict {
            verdicts += 1;
            assert!(
                under.starts_with("Intervals and ratios:")
                    && under.contains("simultaneous 95% interval")
                    && under.contains("one family"),
                "a table of verdicts, under it: {under}\n{head:?}"
            );
        }
        for row in rows {
            for (c, h) in row.iter().zip(head) {
                // A ratio the paper or the claim's source published is theirs, not this run's.
                let theirs = h.contains("paper") || h.contains("their");
                let ratio = c
                    .char_indices()
                    .any(|(i, ch)| ch == '×' && c[..i].ends_with(|d: char| d.is_ascii_digit()));
                let tested = ["(p=", "(p<", "~ ("].iter().any(|v| c.contains(v));
                let labelled = c.contains(UNTESTED) || c.contains("not judged");
                if ratio && !theirs {
                    assert!(
                        tested || labelled,
                        "a ratio neither tested nor labelled: {c}\n{head:?}"
                    );
                    untested += usize::from(labelled && !tested);
                }
            }
        }
        if cells.iter().any(|c| c.contains(UNTESTED)) {
            assert!(under.contains("untested"), "{under}");
        }
    }
    // The report has each kind: the check above is not vacuous.
    assert!(
        medians > 0 && verdicts > 0 && untested > 0,
        "{medians} {verdicts} {untested}\n{md}"
    );
    assert!(md.contains("Beside the paper"), "{md}");
}
