//! "Claims beside measurements": each runtime's own published performance claim, with its
//! source, date and setup, beside what this run measured of it, as a ratio on this machine,
//! and the `--suite scaling` command that would check the claim where the machine is big
//! enough. The claims are data ([`CLAIMS`]); what this machine can measure of them is the
//! quick suite's one-worker ratios to the claim's base (closed-loop echoes/s at the fewest
//! and the most connections, CPU per echo and p99 at equal load).
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use crate::record::row::{Row, find, points_of};
use crate::report::cells::{UNTESTED, table};

/// What of a claim the quick suite's rows measure here: a ratio of the runtime's median to
/// the base's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ours {
    /// Closed-loop echoes/s at the fewest connections (1: the inverse of a round trip).
    ClosedFew,
    /// Closed-loop echoes/s at the most connections (the suite's peak).
    ClosedMany,
    /// Server CPU per echo at the first open-loop rate (below 1: cheaper).
    CpuAtEqualLoad,
    /// p99 latency at the first open-loop rate (below 1: a shorter tail).
    P99AtEqualLoad,
}

/// One published claim.
#[derive(Debug)]
struct Claim {
    /// The server (its `--servers` name) the claim is about.
    runtime: &'static str,
    /// The server it is measured against.
    base: &'static str,
    /// Where it is published, and when.
    source: &'static str,
    /// The machine and load it was measured with.
    setup: &'static str,
    /// What it says.
    says: &'static str,
    /// Its ratio, runtime to base, as published or read from the source.
    theirs: &'static str,
    /// What this run measures of it.
    ours: &'static [Ours],
    /// The server cores the claim is at; the scaling command asks for as many.
    cores: usize,
    /// The servers the scaling command runs.
    servers: &'static str,
}

/// The claims, as issue 44 quotes them from their sources (the runtimes' own repositories,
/// documentation and issue trackers, and glommio's announcement), each with its date.
const CLAIMS: &[Claim] = &[
    Claim {
        runtime: "monoio",
        base: "tokio",
        source: "monoio, docs/en/benchmark.md (2021-12)",
        setup: "ByteDance, Xeon Gold 5118, Linux 5.15, clients on other machines, \
                monoio-benchmark echo",
        says: "on 1 core slightly ahead of Tokio, except with very few connections, where \
               Tokio's latency is lower",
        theirs: "slightly above 1× (below 1× at very few connections)",
        ours: &[Ours::ClosedFew, Ours::ClosedMany, Ours::CpuAtEqualLoad],
        cores: 1,
        servers: "tokio,monoio,glommio",
    },
    Claim {
        runtime: "monoio",
        base: "tokio",
        source: "monoio, docs/en/benchmark.md (2021-12)",
        setup: "as above",
        says: "about 2× Tokio's peak throughput at 4 cores",
        theirs: "≈ 2×",
        ours: &[],
        cores: 4,
        servers: "tokio,monoio,glommio",
    },
    Claim {
        runtime: "monoio",
        base: "tokio",
        source: "monoio, docs/en/benchmark.md (2021-12)",
        setup: "as above",
        says: "nearly 3× Tokio's peak throughput at 16 cores",
        theirs: "≈ 3×",
        ours: &[],
        cores: 16,
        servers: "tokio,monoio,glommio",
    },
    Claim {
        runtime: "glommio",
        base: "monoio",
        source: "monoio, docs/en/benchmark.md (2021-12)",
        setup: "as above",
        says: "glommio scales like monoio, but below it",
        theirs: "below 1×",
        ours: &[Ours::ClosedMany, Ours::CpuAtEqualLoad],
        cores: 16,
        servers: "tokio,monoio,glommio",
    },
    Claim {
        runtime: "tokio-uring",
        base: "tokio",
        source: "monoio issue #59, jon-chuang (2022-02)",
        setup: "Linux 5.11, 8 cores × 100 connections, monoio-benchmark, average QPS per core",
        says: "Tokio 94.3k, tokio-uring 86.8k per core: Tokio ahead",
        theirs: "0.92×",
        ours: &[Ours::ClosedMany],
        cores: 8,
        servers: "tokio,tokio-uring,monoio,glommio",
    },
    Claim {
        runtime: "monoio",
        base: "tokio",
        source: "monoio issue #59, jon-chuang (2022-02)",
        setup: "as above",
        says: "Tokio 94.3k, monoio 76.8k per core: Tokio ahead",
        theirs: "0.81×",
        ours: &[Ours::ClosedMany],
        cores: 8,
        servers: "tokio,tokio-uring,monoio,glommio",
    },
    Claim {
        runtime: "glommio",
        base: "tokio",
        source: "monoio issue #59, jon-chuang (2022-02)",
        setup: "as above",
        says: "Tokio 94.3k, glommio 64.5k per core: Tokio ahead",
        theirs: "0.68×",
        ours: &[Ours::ClosedMany],
        cores: 8,
        servers: "tokio,tokio-uring,monoio,glommio",
    },
    Claim {
        runtime: "glommio",
        base: "tokio",
        source: "glommio's announcement, Datadog blog (2020-11)",
        setup: "research it cites; glommio publishes no throughput figure of its own against \
                Tokio",
        says: "thread-per-core can improve tail latencies by up to 71%",
        theirs: "tail up to 71% lower (≥ 0.29×)",
        ours: &[Ours::P99AtEqualLoad, Ours::CpuAtEqualLoad],
        cores: 4,
        servers: "tokio,glommio",
    },
    Claim {
        runtime: "glommio",
        base: "monoio",
        source: "glommio issue #641 (2024)",
        setup: "a reading of monoio's 100-byte chart (above)",
        says: "glommio about 30% below monoio",
        theirs: "≈ 0.7×",
        ours: &[Ours::ClosedMany, Ours::CpuAtEqualLoad],
        cores: 16,
        servers: "monoio,glommio",
    },
    Claim {
        runtime: "compio",
        base: "tokio",
        source: "compio's README",
        setup: "–",
        says: "publishes no performance claim (its README says it is inspired by monoio)",
        theirs: "none published",
        ours: &[Ours::ClosedFew, Ours::ClosedMany, Ours::CpuAtEqualLoad],
        cores: 4,
        servers: "tokio,monoio,compio",
    },
    Claim {
        runtime: "may",
        base: "tokio",
        source: "may, performace.md in its repository (undated; against Tokio 0.2.18, of 2020)",
        setup: "i7-3820QM, 4 cores × 2 threads, WSL2 Ubuntu 18.04, 100 clients, 100-byte echo, \
                8 threads; Tokio 0.2.18's echo example",
        says: "may 256,155 req/s against Tokio's 153,496",
        theirs: "1.67×",
        ours: &[Ours::ClosedMany, Ours::CpuAtEqualLoad],
        cores: 4,
        servers: "tokio,may",
    },
];

/// A point of the quick rows a ratio is taken at: `(id, label)`.
type At = (String, String);

/// A measure of a row.
type Measure = fn(&Row) -> Option<f64>;

/// Where each of [`Ours`] is measured in `rows`: the first and last closed-loop points and
/// the first open-loop one.
fn points(rows: &[Row]) -> [Option<At>; 3] {
    let closed = points_of(rows, "quick", "closed");
    let open = points_of(rows, "quick", "open");
    let at = |p: Option<&(String, String, f64)>| p.map(|p| (p.0.clone(), p.1.clone()));
    [at(closed.first()), at(closed.last()), at(open.first())]
}

/// One of [`Ours`] for `c`, as a cell: the ratio of the medians, or why there is none.
fn ratio(rows: &[Row], at: &[Option<At>; 3], c: &Claim, what: Ours) -> String {
    let (point, measure, f): (&Option<At>, &str, Measure) = match what {
        Ours::ClosedFew => (&at[0], "echoes/s", |r| r.throughput_per_sec),
        Ours::ClosedMany => (&at[1], "echoes/s", |r| r.throughput_per_sec),
        Ours::CpuAtEqualLoad => (&at[2], "CPU per echo", |r| r.cpu_us_per_req),
        Ours::P99AtEqualLoad => (&at[2], "p99", |r| r.p99_us),
    };
    let Some((id, label)) = point else {
        return format!("{measure}: no such point in this run");
    };
    let row = |s: &str| find(rows, "quick", s, id).filter(|r| r.ok > 0);
    match (row(c.runtime), row(c.base)) {
        (Some(a), Some(b)) => match (f(a), f(b)) {
            (Some(x), Some(y)) if y > 0.0 => {
                let limited = a.client_bound || b.client_bound;
                format!(
                    "{measure} at {label}: {:.2}×{}, {UNTESTED}",
                    x / y,
                    if limited { " †" } else { "" }
                )
            }
            _ => format!("{measure} at {label}: not measured"),
        },
        (a, _) => format!(
            "{measure} at {label}: {} not in this run",
            if a.is_none() { c.runtime } else { c.base }
        ),
    }
}

/// The scaling command that checks `c` on a machine with twice its cores (the server's and
/// as many for the load generator).
fn command(c: &Claim) -> String {
    let n = c.cores.max(1);
    let span = |first: usize| match n {
        1 => first.to_string(),
        _ => format!("{first}-{}", first + n - 1),
    };
    format!(
        "`cargo xtask bench --suite scaling --servers {} --server-cpus {} --client-cpus {}`",
        c.servers,
        span(0),
        span(n)
    )
}

/// The section: the claims table and how to read it. `workers` and `cores` are the run's.
pub(crate) fn section(out: &mut String, rows: &[Row], workers: usize, cores: usize) {
    let at = points(rows);
    if at.iter().all(Option::is_none) {
        return;
    }
    let _ = writeln!(
        out,
        "**Claims beside measurements.** Each runtime's own published claim, and what this \
         run measured of it: the ratio of medians, the runtime's over its base's, with {workers} \
         server worker(s) on this {cores}-CPU machine († where the load generator limited \
         either, so the ratio measures it, not the servers). A claim at more cores than this \
         machine can give the server and the load generator each is not measured here: the \
         command beside it runs the scaling suite (1, 2, 4, … workers) where it can be, with \
         `--server-cpus` the server's CPUs (as many as the claim's cores) and `--client-cpus` \
         as many others for the load generator; or, as monoio's benchmark did, put the \
         clients on other machines with `--client-hosts HOST --server-addr ADDR` instead of \
         `--client-cpus`.\n"
    );
    let body: Vec<Vec<String>> = CLAIMS
        .iter()
        .map(|c| {
            let ours: Vec<String> = c.ours.iter().map(|&o| ratio(rows, &at, c, o)).collect();
            vec![
                format!("**{}** ÷ {}", c.runtime, c.base),
                format!("{}: {}. Setup: {}", c.source, c.says, c.setup),
                c.theirs.to_string(),
                if ours.is_empty() {
                    format!("not measurable here (needs {} server cores)", c.cores)
                } else {
                    ours.join("; ")
                },
                command(c),
            ]
        })
        .collect();
    table(
        out,
        &[
            "runtime ÷ base",
            "their claim (source, date, setup)",
            "their ratio",
            "ours here",
            "to check it on a machine big enough",
        ],
        &body,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, series: &str, conns: usize, tp: f64, cpu: f64) -> Row {
        Row {
            suite: "quick".into(),
            server: server.into(),
            series: series.into(),
            point: format!("{series}-c{conns}"),
            label: format!("{conns} conns"),
            x: conns as f64,
            conns,
            ok: 5,
            repeats: 5,
            throughput_per_sec: Some(tp),
            cpu_us_per_req: Some(cpu),
            p99_us: Some(cpu * 10.0),
            ..Row::default()
        }
    }

    fn rows() -> Vec<Row> {
        let mut out = Vec::new();
        for (s, tp, cpu) in [
            ("tokio", 100_000.0, 10.0),
            ("monoio", 110_000.0, 8.0),
            ("glommio", 90_000.0, 9.0),
        ] {
            out.push(row(s, "closed", 1, tp / 10.0, cpu));
            out.push(row(s, "closed", 1000, tp, cpu));
            out.push(row(s, "open", 1000, 20_000.0, cpu));
        }
        out
    }

    #[test]
    fn ratios_are_the_runtimes_over_the_base() {
        let mut out = String::new();
        section(&mut out, &rows(), 1, 2);
        assert!(out.contains("| **monoio** ÷ tokio |"), "{out}");
        assert!(out.contains("echoes/s at 1000 conns: 1.10×"), "{out}");
        assert!(out.contains("CPU per echo at 1000 conns: 0.80×"), "{out}");
        // glommio against monoio (monoio's chart, glommio issue #641).
        assert!(out.contains("echoes/s at 1000 conns: 0.82×"), "{out}");
        assert!(out.contains("p99 at 1000 conns: 0.90×"), "{out}");
        // The published ratios, beside.
        for theirs in ["0.92×", "0.81×", "0.68×", "1.67×", "≈ 3×", "none published"] {
            assert!(out.contains(theirs), "{theirs}: {out}");
        }
        assert!(out.contains("may not in this run"), "{out}");
        assert!(
            out.contains("not measurable here (needs 16 server cores)"),
            "{out}"
        );
        assert!(
            out.contains(
                "`cargo xtask bench --suite scaling --servers tokio,monoio,glommio \
                 --server-cpus 0-15 --client-cpus 16-31`"
            ),
            "{out}"
        );
        assert!(out.contains("--server-cpus 0 --client-cpus 1`"), "{out}");
    }

    #[test]
    fn a_client_bound_point_is_marked_and_no_quick_rows_no_section() {
        let mut rs = rows();
        rs[1].client_bound = true;
        let mut out = String::new();
        section(&mut out, &rs, 1, 2);
        assert!(out.contains("echoes/s at 1000 conns: 1.10× †"), "{out}");
        let mut none = String::new();
        section(&mut none, &[], 1, 2);
        assert!(none.is_empty());
    }
}
