//! The kv section's "The Go event-loop article's table, on this machine": redis-benchmark at
//! its defaults (`article-set-c50`, `article-get-c50`), avg, min, p50, p95, p99 and max as the
//! article gives them, ours in milliseconds, then every server's figures as multiples of
//! redis-server's beside the article's Apple M1 figures as multiples of its Redis's: ratios
//! only, never its times beside ours.
//!
//! It may call what `markdown` may, and the kv peer's name and install command (`run::redis`).

use std::fmt::Write as _;

use crate::record::row::{Row, find, servers_that_ran};
use crate::record::stats;
use crate::report::cells::{fmt_rate, mark, table};

const SUITE: &str = "kv";
/// The figures, in the article's order.
const STATS: [&str; 6] = ["avg", "min", "p50", "p95", "p99", "max"];
/// The article's two tests, in the order redis-benchmark runs them: (label, point id).
const TESTS: [(&str, &str); 2] = [("SET", "article-set-c50"), ("GET", "article-get-c50")];

/// A design of the article: its name, the servers of ours that are it, and its figures on
/// the M1 in ms (avg, min, p50, p95, p99, max; one row for GET and SET together).
struct Design {
    name: &'static str,
    ours: &'static [&'static str],
    m1_ms: [f64; 6],
}

/// The article's table, "Running on a 2021 MacBook Pro with Apple M1 & 16GB RAM". Its
/// Goroutines server is a goroutine per connection with one goroutine owning the map: `go`
/// (our store is shared, sharded) and `go+kv-owner` (the owner, as the article wrote it).
const ARTICLE: [Design; 4] = [
    Design {
        name: "Goroutines",
        ours: &["go", "go+kv-owner"],
        m1_ms: [0.268, 0.032, 0.279, 0.351, 0.551, 1.311],
    },
    Design {
        name: "NonblockingIO",
        ours: &["go-poll"],
        m1_ms: [0.263, 0.128, 0.255, 0.335, 0.543, 1.215],
    },
    Design {
        name: "Kqueue",
        ours: &["go-eventloop"],
        m1_ms: [0.274, 0.120, 0.279, 0.335, 0.415, 0.719],
    },
    Design {
        name: "Redis(antirez)",
        ours: &[crate::run::redis::NAME],
        m1_ms: [0.309, 0.112, 0.295, 0.519, 0.655, 1.311],
    },
];

/// The design of the article a server of ours is, if any.
fn design_of(server: &str) -> Option<&'static Design> {
    ARTICLE.iter().find(|d| d.ours.contains(&server))
}

/// The article's Redis, the base of its ratios.
fn article_redis() -> &'static Design {
    &ARTICLE[ARTICLE.len() - 1]
}

/// A row's six figures in µs, in the article's order: avg and min are redis-benchmark's,
/// kept per repeat (their median), the percentiles the row's.
fn figures(r: &Row) -> [Option<f64>; 6] {
    let med = |m: &str| stats::median(r.repeats_of(m));
    [
        med("avg_us"),
        med("min_us"),
        r.p50_us,
        r.p95_us,
        r.p99_us,
        r.max_us,
    ]
}

/// `a / b` to two places, or `–` without both.
fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".into(),
    }
}

/// A row's test, with the row's marks (†, ‡, §) or `failed`: once a row, not on every figure.
fn test_cell(test: &str, r: Option<&Row>) -> String {
    match r {
        Some(r) if r.ok == 0 => format!("{test}: failed"),
        _ => mark(r, test.to_string()),
    }
}

/// The servers of the table, in order: the article's designs first, as it lists them (with
/// those not run here, so that its ratios show), then every other server that ran the
/// article's points.
fn servers(rows: &[Row]) -> Vec<String> {
    let ran = servers_that_ran(rows);
    let has = |s: &str| TESTS.iter().any(|t| find(rows, SUITE, s, t.1).is_some());
    let mut out: Vec<String> = Vec::new();
    for d in &ARTICLE {
        let of_ours: Vec<&&str> = d.ours.iter().filter(|s| has(s)).collect();
        if of_ours.is_empty() {
            out.push(d.ours[0].to_string());
        }
        out.extend(of_ours.into_iter().map(|s| s.to_string()));
    }
    out.extend(ran.into_iter().filter(|s| has(s) && design_of(s).is_none()));
    out
}

/// The section's part: what was run and how, ours in ms, the ratios, how to read them.
pub(super) fn part(out: &mut String, rows: &[Row]) {
    intro(out);
    if !rows
        .iter()
        .any(|r| r.suite == SUITE && r.series.starts_with("article-") && r.ok > 0)
    {
        let _ = writeln!(
            out,
            "(no article points in this run: they need redis-benchmark, `{}`; \
             `cargo xtask bench --suite kv --points article` runs them alone. The article's \
             own ratios:)\n",
            crate::run::redis::INSTALL
        );
    } else {
        ours_in_ms(out, rows);
    }
    ratios(out, rows);
    how_to_read(out);
}

fn intro(out: &mut String) {
    let _ = writeln!(
        out,
        "**The Go event-loop article's table, on this machine.** The article (\"Event Loop in \
         Go\") ran `redis-benchmark -t get,set -n 100000` at its defaults (50 clients, no \
         pipelining, its one key `key:__rand_int__`, 3-byte values) against each of its Go \
         servers and Redis, client and server on one laptop (a 2021 MacBook Pro, Apple M1), \
         and gave one run of each. We run the same, client and server on this machine over \
         loopback (on their own CPUs), a point a test (`-t set`, then `-t get` of the key the \
         SETs leave; redis-benchmark opens new connections for each test either way), one \
         run each unless `--repeat` says otherwise (then medians). Its designs are ours: \
         Goroutines is `go` (a goroutine per connection; `go+kv-owner` also has its one \
         goroutine owning the map), NonblockingIO is `go-poll` (a loop trying every \
         non-blocking socket), Kqueue is `go-eventloop` (epoll on Linux); `go-gnet` and the \
         Rust servers have no row of its.\n"
    );
}

/// Ours, in ms as the article gives them, and requests/s: a line per server and test.
fn ours_in_ms(out: &mut String, rows: &[Row]) {
    let _ = writeln!(out, "Ours, latency in ms as redis-benchmark reports it:\n");
    let mut body = Vec::new();
    for s in servers(rows) {
        for (test, id) in TESTS {
            let Some(r) = find(rows, SUITE, &s, id) else {
                continue;
            };
            // The row's marks (†, ‡, failed) once, on its test.
            let mut cells = vec![format!("**{s}**"), test_cell(test, Some(r))];
            if r.ok == 0 {
                body.push(cells);
                continue;
            }
            let f = figures(r);
            cells.extend(
                f.iter()
                    .map(|v| v.map_or_else(|| "–".into(), |us| format!("{:.3}", us / 1e3))),
            );
            cells.push(fmt_rate(r.throughput_per_sec));
            body.push(cells);
        }
    }
    let mut head = vec!["server", "test"];
    head.extend(STATS);
    head.push("req/s");
    table(out, &head, &body);
}

/// Each server's figures over redis-server's at the same test here, beside the article's
/// design's over its Redis's on the M1.
fn ratios(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "As multiples of Redis's figure (redis-server's here, at the same test; the article's \
         Redis's on the M1, one figure for GET and SET together), ours then the M1's in \
         brackets:\n"
    );
    let mut body = Vec::new();
    for s in servers(rows) {
        let design = design_of(&s);
        let m1: Vec<String> = (0..STATS.len())
            .map(|i| {
                design.map_or_else(String::new, |d| {
                    format!(
                        " ({})",
                        ratio(Some(d.m1_ms[i]), Some(article_redis().m1_ms[i]))
                    )
                })
            })
            .collect();
        let name = match design {
            Some(d) => format!("**{s}** ({})", d.name),
            None => format!("**{s}**"),
        };
        let ran: Vec<(&str, Option<&Row>)> = TESTS
            .iter()
            .map(|&(test, id)| (test, find(rows, SUITE, &s, id)))
            .filter(|t| t.1.is_some())
            .collect();
        if ran.is_empty() {
            // A design of the article not run here: its ratios alone.
            let mut cells = vec![name.clone(), "not run".to_string()];
            cells.extend(m1.iter().map(|m1| format!("–{m1}")));
            body.push(cells);
        }
        for (test, r) in ran {
            let id = r.map_or("", |r| r.point.as_str());
            let base = find(rows, SUITE, crate::run::redis::NAME, id).map(figures);
            let f = r.map(figures);
            let mut cells = vec![name.clone(), test_cell(test, r)];
            for (i, m1) in m1.iter().enumerate() {
                let here = ratio(f.and_then(|f| f[i]), base.and_then(|b| b[i]));
                cells.push(format!("{here}{m1}"));
            }
            body.push(cells);
        }
    }
    let mut head = vec!["server (the article's design)", "test"];
    head.extend(STATS);
    table(out, &head, &body);
    let redis = crate::run::redis::NAME;
    if TESTS
        .iter()
        .all(|t| find(rows, SUITE, redis, t.1).is_none())
    {
        let _ = writeln!(
            out,
            "(`{redis}` did not run these points, so ours have no base: add it to `--servers`.)\n"
        );
    }
}

fn how_to_read(out: &mut String) {
    let _ = writeln!(
        out,
        "How to read it: under 1 is below Redis's figure (faster), over 1 above it. Compare \
         the ratios, never the times: the machines, the kernels (kqueue on macOS, epoll here) \
         and the Redis versions differ, and a ratio to the Redis beside it on the same \
         machine is the one figure the two tables share. One run of 100,000 requests a test \
         settles avg and p50 well; min and max are one request each and p99 the slowest \
         thousand, so they move from run to run by more than the article's designs differ: \
         read them only where they differ by far more, or run the points again (`--repeat 5 \
         --points article`). With one server CPU (the default on 2 CPUs) our servers have one \
         worker, one loop or one thread running goroutines, as the article's loops are one \
         thread; `go-poll` spends its CPU whether requests come or not.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    /// A row of an article point: its figures in µs (avg, min, p50, p95, p99, max).
    fn article_row(server: &str, id: &str, us: [f64; 6]) -> Row {
        let mut r = row(server, id, 50.0, 30_000.0);
        r.suite = SUITE.into();
        r.series = id.trim_end_matches("-c50").into();
        r.per_repeat.insert("avg_us".into(), vec![us[0]]);
        r.per_repeat.insert("min_us".into(), vec![us[1]]);
        (r.p50_us, r.p95_us, r.p99_us, r.max_us) =
            (Some(us[2]), Some(us[3]), Some(us[4]), Some(us[5]));
        r
    }

    #[test]
    fn the_ratio_table_sets_ours_over_redis_beside_the_m1s() {
        let redis = [200.0, 100.0, 200.0, 400.0, 500.0, 1000.0];
        let go = [100.0, 50.0, 300.0, 200.0, 1000.0, 500.0];
        let rows = vec![
            article_row("redis", "article-set-c50", redis),
            article_row("redis", "article-get-c50", redis),
            article_row("go", "article-set-c50", go),
            article_row("go", "article-get-c50", redis),
            article_row("reactor", "article-set-c50", redis),
        ];
        let mut failed = article_row("smol", "article-get-c50", redis);
        failed.ok = 0;
        let mut disturbed = article_row("go-gnet", "article-get-c50", go);
        disturbed.other_load_pct = Some(50.0);
        let rows = [rows, vec![failed, disturbed]].concat();
        let mut out = String::new();
        part(&mut out, &rows);
        // Goroutines on the M1: 0.268 / 0.309 = 0.87, 0.032 / 0.112 = 0.29, ...
        assert!(
            out.contains(
                "| **go** (Goroutines) | SET | 0.50 (0.87) | 0.50 (0.29) | 1.50 (0.95) | 0.50 (0.68) | 2.00 (0.84) | 0.50 (1.00) |"
            ),
            "{out}"
        );
        assert!(
            out.contains("| **go** (Goroutines) | GET | 1.00 (0.87) |"),
            "{out}"
        );
        assert!(
            out.contains("| **redis** (Redis(antirez)) | SET | 1.00 (1.00) |"),
            "{out}"
        );
        // Designs not run here keep the article's ratios; ours are blank.
        assert!(
            out.contains("| **go-eventloop** (Kqueue) | not run | – (0.89) | – (1.07) |"),
            "{out}"
        );
        // A server with no design of the article: ours only, after the article's.
        assert!(out.contains("| **reactor** | SET | 1.00 | 1.00 |"), "{out}");
        assert!(!out.contains("| **reactor** | GET"), "{out}");
        // Marks once a row, on its test.
        assert!(out.contains("| **smol** | GET: failed |"), "{out}");
        assert!(
            out.contains("| **go-gnet** | GET ‡ | 0.50 | 0.50 | 1.50 |"),
            "{out}"
        );
        let reactor = out.rfind("| **reactor** | SET").unwrap();
        assert!(out.find("(Redis(antirez)) | SET").unwrap() < reactor);
        // Ours in ms; the article's times never appear.
        assert!(
            out.contains(
                "| **go** | SET | 0.100 | 0.050 | 0.300 | 0.200 | 1.000 | 0.500 | 30.0k |"
            ),
            "{out}"
        );
        for m1 in ["0.268", "0.309", "0.719", "1.311"] {
            assert!(!out.contains(m1), "{m1} in {out}");
        }
        assert!(out.contains("over loopback"), "{out}");
        assert!(!out.contains("did not run these points"), "{out}");
        assert!(out.contains("one run of each"), "{out}");
    }

    #[test]
    fn without_the_points_the_article_s_ratios_still_show() {
        let mut out = String::new();
        part(&mut out, &[]);
        assert!(out.contains("no article points in this run"), "{out}");
        assert!(
            out.contains("| **go-poll** (NonblockingIO) | not run | – (0.85) |"),
            "{out}"
        );
        assert!(!out.contains("Ours, latency in ms"), "{out}");
        assert!(out.contains("`redis` did not run these points"), "{out}");
    }
}
