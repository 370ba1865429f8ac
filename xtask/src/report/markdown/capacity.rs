//! The `capacity` section: each server's capacity at the latency objective, ranked as a
//! multiple of its workload's reference server, then how to read it and how to make the server
//! the limit; the curves follow as the suite's plots.
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use crate::record::capacity::Capacity;
use crate::record::row::Row;
use crate::report::cells::{fmt_rate, fmt_us, table};

/// The capacity tables, one per workload, the highest capacity first.
pub(crate) fn capacity_table(lines: &[Capacity]) -> String {
    let mut out = String::new();
    let mut workloads: Vec<&str> = lines.iter().map(|c| c.workload.as_str()).collect();
    workloads.dedup();
    for w in workloads {
        let mine: Vec<&Capacity> = lines.iter().filter(|c| c.workload == w).collect();
        let Some(first) = mine.first() else { continue };
        let quota = first
            .cpu_quota
            .map_or(String::new(), |q| format!(", the server under {q} CPU"));
        let _ = writeln!(
            out,
            "**{w}** at {} ({} arrivals{quota}; × is against {}):\n",
            first.objective, first.arrivals, first.reference
        );
        let rows: Vec<Vec<String>> = mine
            .iter()
            .enumerate()
            .map(|(i, c)| {
                vec![
                    (i + 1).to_string(),
                    c.server.clone(),
                    capacity_cell(c),
                    interval_cell(c),
                    multiple_cell(c),
                    c.probes.to_string(),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "#",
                "server",
                "capacity /s",
                "interval over the searches",
                "× reference",
                "probes",
            ],
            &rows,
        );
        out.push('\n');
    }
    out
}

/// The capacity, or what bounds it when the search could not find it.
fn capacity_cell(c: &Capacity) -> String {
    let rate = fmt_rate(c.capacity_per_sec);
    match c.result.as_str() {
        "capacity" => rate,
        "client-bound" if c.capacity_per_sec.unwrap_or(0.0) > 0.0 => {
            format!("≥ {rate} † client-bound")
        }
        "client-bound" => "† client-bound at every rate tried".into(),
        "below" => format!("< {rate}"),
        "above" => format!("> {rate}"),
        "failed" => format!(
            "failed: {}",
            c.failure
                .as_deref()
                .and_then(|f| f.lines().next())
                .unwrap_or("?")
        ),
        _ => format!("{rate}? not confirmed"),
    }
}

/// The interval of the searches' median capacity, with how many there were; none for a
/// bound.
fn interval_cell(c: &Capacity) -> String {
    match (c.capacity_ci_low, c.capacity_ci_high) {
        (Some(lo), Some(hi)) if c.is_the_servers() && c.searches > 1 => format!(
            "[{}, {}] ({} searches)",
            fmt_rate(Some(lo)),
            fmt_rate(Some(hi)),
            c.searches
        ),
        _ if c.is_the_servers() => "– (one search)".into(),
        _ => "–".into(),
    }
}

/// The multiple of the reference's capacity: plain, with its interval, only for a capacity;
/// a bound's multiple carries the bound's sign (≥, >, <) or a `?` where it was not
/// confirmed.
fn multiple_cell(c: &Capacity) -> String {
    let Some(m) = c.vs_reference else {
        return "–".into();
    };
    if c.server == c.reference && c.is_the_servers() {
        return "reference".into();
    }
    // No test stands behind any of them: labelled so (`cells::UNTESTED`).
    let cell = match c.result.as_str() {
        "capacity" => match (c.vs_reference_low, c.vs_reference_high) {
            (Some(lo), Some(hi)) => format!("{m:.2}× [{lo:.2}, {hi:.2}]"),
            _ => format!("{m:.2}× (one search: no interval)"),
        },
        "client-bound" if m > 0.0 => format!("≥ {m:.2}× †"),
        "above" => format!("> {m:.2}×"),
        "below" => format!("< {m:.2}×"),
        "unconfirmed" => format!("{m:.2}×? not confirmed"),
        _ => return "–".into(),
    };
    format!("{cell}, {}", crate::report::cells::UNTESTED)
}

/// The section: the ranked tables, then how to read them.
pub(crate) fn section(out: &mut String, rows: &[Row], lines: &[Capacity]) {
    if lines.is_empty() {
        let _ = writeln!(
            out,
            "The searches did not end (the run stopped early): the probes below are what was measured; `--resume` completes it.\n"
        );
    } else {
        out.push_str(&capacity_table(lines));
    }
    resolution(out, rows);
    let probes = rows.len();
    let _ = writeln!(
        out,
        "How to read it: a server's capacity is the highest offered rate it sustained (the achieved rate within 1% of the offered, or within three standard deviations of a window's Poisson arrivals, and no error) with its latency percentile within the objective. A rate is judged by a trial: a probe that misses is run again, and the rate counts as missed only when two of up to three probes miss, so that one noisy window never lowers the bracket. A sweep of rates a factor 2 apart brackets the capacity, a bisection narrows the bracket to 2%, its upper end is tried again (should it meet this time, the bracket moves up), and 2 more trials at the rate found must meet the objective, else the rate steps down 2% and is confirmed again. Latency counts from each message's due time, so a server that falls behind is charged for the queue it builds. One search is run per capacity, or `--repeat` N, each after the first from the capacity the one before found: the capacity is then their median and the interval the median's over them ([min, max] for 3, 75% coverage), where the capacity lands when measured again; × reference is its ratio to the reference's, with the widest ratio the two intervals allow (one search: no interval, the ratio untested). A bound is never a plain multiple: ≥ (client-bound), > (above the highest rate tried), < (below the least) or ? (not confirmed) stays beside it. {probes} probes in all, each a fresh server.\n"
    );
    let _ = writeln!(
        out,
        "**The server, not the client, must be the limit.** Latency counts from each message's due time, so a slow client only ever makes a server look worse: a probe is the client's only where loadgen did not keep its schedule (its self-check failed): it says nothing of the server and is run again, up to 3 times in a row; only then does the search stop, and the capacity reads \"≥ N † client-bound\", the highest rate met before it, never the server's own. On a small machine one loadgen core can be slower than a fast server; to make the server the limit, give it less: `--server-cpu-quota 0.5` (half a CPU, named above the table), `--servers NAME+compute-us=100` (100 µs of CPU per echo, spun on the thread's CPU clock, a ceiling near 10,000/s per CPU), or drive the load from other machines with `--client-hosts`.\n"
    );
}

/// The machine's resolution the run measured before its searches (`bench::resolution`): the
/// floor server's latency at the first rate, at the objective's percentile.
fn resolution(out: &mut String, rows: &[Row]) {
    for r in rows.iter().filter(|r| r.point.ends_with("-resolution")) {
        let Some(slo) = r.slo.as_deref() else {
            continue;
        };
        let percentile = slo.split('=').next().unwrap_or("p99");
        if let (Some(v), Some(rate)) = (r.latency(percentile), r.rate) {
            let _ = writeln!(
                out,
                "Resolution: {}'s {percentile} at {rate:.0}/s was {}, the least latency this machine and its client show at that percentile (the kernel alone, no runtime); an objective below it is refused.\n",
                r.server,
                fmt_us(Some(v))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::capacity::Found;

    fn line(server: &str, found: &[Found]) -> Capacity {
        let mut c = Capacity {
            server: server.into(),
            workload: "echo".into(),
            objective: "p99=5ms".into(),
            arrivals: "poisson".into(),
            reference: "floor-epoll".into(),
            ..Capacity::default()
        };
        c.set_findings(found);
        c
    }

    #[test]
    fn one_search_gives_a_multiple_without_an_interval() {
        let mut lines = vec![
            line("floor-epoll", &[Found::Capacity { rate: 24_000.0 }]),
            line("fiber", &[Found::Capacity { rate: 28_800.0 }]),
        ];
        crate::record::capacity::rank(&mut lines);
        let t = capacity_table(&lines);
        assert!(t.contains("1.20× (one search: no interval)"), "{t}");
        assert!(!t.contains("[1.20, 1.20]"), "{t}");
    }

    #[test]
    fn the_section_names_the_resolution_the_run_measured() {
        let probe = Row {
            server: "floor-epoll".into(),
            point: "echo-resolution".into(),
            slo: Some("p99=1ms".into()),
            rate: Some(1000.0),
            p99_us: Some(106.0),
            ..Row::default()
        };
        let mut out = String::new();
        section(&mut out, &[probe], &[]);
        assert!(
            out.contains("Resolution: floor-epoll's p99 at 1000/s was 106 µs"),
            "{out}"
        );
        let mut none = String::new();
        section(&mut none, &[], &[]);
        assert!(!none.contains("Resolution"));
    }

    #[test]
    fn a_bound_is_never_a_plain_multiple() {
        let cap = |rate| Found::Capacity { rate };
        let mut lines = vec![
            line(
                "floor-epoll",
                &[cap(40_000.0), cap(41_000.0), cap(39_000.0)],
            ),
            line("tokio", &[cap(20_000.0), cap(20_400.0), cap(19_600.0)]),
            line(
                "reactor",
                &[cap(60_000.0), Found::ClientBound { rate: 48_000.0 }],
            ),
            line("fiber", &[Found::Above { rate: 80_000.0 }]),
            line("threads", &[Found::Unconfirmed { rate: 10_000.0 }]),
        ];
        crate::record::capacity::rank(&mut lines);
        let t = capacity_table(&lines);
        let row = |s: &str| {
            t.lines()
                .find(|l| l.contains(&format!("| {s} ")))
                .unwrap_or_else(|| panic!("{s}: {t}"))
                .to_string()
        };
        assert!(row("tokio").contains("0.50× [0.48, 0.52]"), "{t}");
        assert!(row("tokio").contains("(3 searches)"), "{t}");
        assert!(row("reactor").contains("≥ 1.20× †"), "{t}");
        assert!(row("fiber").contains("> 2.00×"), "{t}");
        assert!(row("threads").contains("0.25×? not confirmed"), "{t}");
        for bound in ["reactor", "fiber", "threads"] {
            assert!(
                !row(bound).contains('['),
                "{bound}: no interval for a bound: {t}"
            );
        }
    }
}
