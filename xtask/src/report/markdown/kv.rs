//! The `kv` section: requests/s and server CPU per request of every server beside
//! redis-server, by both clients, and the Event Loop in Go article's table beside ours
//! (`article`, as ratios to Redis).
//!
//! It may call what `markdown` may, and the kv peer's name and install command (`run::redis`).

mod article;

use std::fmt::Write as _;

use super::pivot;
use crate::record::row::{Row, find, rows_of_servers_that_ran, servers_that_ran};
use crate::report::cells::{Column, fmt_bytes, fmt_rate, fmt_us, mark, table};

const SUITE: &str = "kv";
/// The combinations of each table, in the order the anchor gives them.
const OPS: [(&str, usize); 4] = [("set", 1), ("get", 1), ("set", 16), ("get", 16)];

/// The series of a client, operation and pipeline depth, as `suites` names them.
fn series(driver: &str, op: &str, pipeline: usize) -> String {
    format!("{driver}-{op}-p{pipeline}")
}

/// A row per server at one connection count: requests/s and CPU per request for each
/// operation and depth, the CPU also as a multiple of redis-server's.
fn headline(out: &mut String, rows: &[Row], driver: &str, conns: usize) {
    let id = |op: &str, p: usize| format!("{}-c{conns}", series(driver, op, p));
    if !OPS
        .iter()
        .any(|&(op, p)| rows.iter().any(|r| r.point == id(op, p)))
    {
        return;
    }
    let _ = writeln!(
        out,
        "**{driver}, {conns} connections** (the article's default):\n"
    );
    let mut head = vec!["server".to_string()];
    head.extend(
        OPS.iter()
            .map(|&(op, p)| format!("{} -P {p}: req/s · CPU/req", op.to_uppercase())),
    );
    let body: Vec<Vec<String>> = servers_that_ran(rows)
        .into_iter()
        .map(|s| {
            let mut cells = vec![format!("**{s}**")];
            for &(op, p) in &OPS {
                let r = find(rows, SUITE, &s, &id(op, p));
                let redis = find(rows, SUITE, crate::run::redis::NAME, &id(op, p));
                let col = Column::new(
                    rows,
                    SUITE,
                    &id(op, p),
                    "cpu_us_per_req",
                    Some(crate::run::redis::NAME),
                );
                let cell = r.map_or_else(String::new, |r| {
                    format!(
                        "{} · {}{}",
                        fmt_rate(r.throughput_per_sec),
                        fmt_us(r.cpu_us_per_req),
                        col.multiple(&s, r.cpu_us_per_req, redis.and_then(|x| x.cpu_us_per_req))
                    )
                });
                cells.push(mark(r, cell));
            }
            cells
        })
        .collect();
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
}

/// The kv section: its parts, in order, over the rows of the servers that ran. A new table
/// of the section is one more function in the list. A run of the article's points alone
/// (`--points article`) gets their part alone.
pub(crate) fn section(out: &mut String, rows: &[Row]) {
    let rows = rows_of_servers_that_ran(rows);
    let parts: &[fn(&mut String, &[Row])] = if article_only(&rows) {
        &[article::part]
    } else {
        &[
            intro,
            beside_the_anchor,
            article::part,
            redis_benchmark_latency,
            every_point,
            peak_memory,
        ]
    };
    for part in parts {
        part(out, &rows);
    }
}

/// Every row is of the article's points.
fn article_only(rows: &[Row]) -> bool {
    !rows.is_empty() && rows.iter().all(|r| r.series.starts_with("article-"))
}

/// What the suite runs and how, and each client's headline table.
fn intro(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "RESP `GET` and `SET` of {}-byte values over {} keys (`key:` and 12 digits, as \
         redis-benchmark's `-r` makes them), closed loop, every server beside redis-server \
         itself (`redis`: started by xtask with persistence off, `--save '' --appendonly no`, \
         on the server CPUs like the others). Two clients send the same requests: \
         redis-benchmark (`--csv`, `-n` sized to the point's duration; it checks no reply, and \
         its point's server CPU counts its whole run, connection setup included) and loadgen \
         kv (every reply checked against what the store must hold; CPU over its measured \
         window). GET points start with the key space stored. CPU per request is the server's \
         user + system time; the multiple in brackets is of redis-server's at the same point: with \
         one run a point (the default) a bare multiple, labelled untested, with `--repeat 3` or more the \
         verdict of the point's column against redis-server (log cost = server + round, \
         Bonferroni over the column), a ratio with its simultaneous interval where it differs, \
         else `~`.\n",
        crate::plan::suites::KV_VALUE_SIZE,
        crate::plan::suites::KV_KEYS,
    );
    for driver in ["redis-benchmark", "loadgen"] {
        headline(out, rows, driver, 50);
    }
}

/// The anchor, for scale.
fn beside_the_anchor(out: &mut String, _rows: &[Row]) {
    let _ = writeln!(
        out,
        "**Beside the issue's anchor** (redis-server 7.0.15, persistence off, on CPU 1, \
         redis-benchmark on CPU 0, `-r 100000`): SET 69.9k and GET 79.2k requests/s at \
         `-c 50`; 632k and 783k with `-P 16`; at `-c 1000` 61.6k and 65.6k. Redis used 11.1 µs \
         of CPU per request at `-c 50 -P 1` and 1.4 µs at `-P 16`.\n"
    );
}

/// redis-benchmark's own latency percentiles at 50 connections, pipeline 1.
fn redis_benchmark_latency(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "Ours, redis-benchmark at 50 connections, pipeline 1, latency in ms as it reports it \
         (p50 / p95 / p99 / max; it gives no histogram):\n"
    );
    let ms = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |us| format!("{:.3}", us / 1e3));
    let body: Vec<Vec<String>> = servers_that_ran(rows)
        .into_iter()
        .map(|s| {
            let mut cells = vec![format!("**{s}**")];
            for op in ["get", "set"] {
                let r = find(
                    rows,
                    SUITE,
                    &s,
                    &format!("{}-c50", series("redis-benchmark", op, 1)),
                );
                let cell = r.map_or_else(String::new, |r| {
                    format!(
                        "{} / {} / {} / {}",
                        ms(r.p50_us),
                        ms(r.p95_us),
                        ms(r.p99_us),
                        ms(r.max_us)
                    )
                });
                cells.push(mark(r, cell));
            }
            cells
        })
        .collect();
    if rows
        .iter()
        .any(|r| r.series.starts_with("redis-benchmark-") && r.ok > 0)
    {
        table(out, &["server", "GET", "SET"], &body);
    } else {
        let _ = writeln!(
            out,
            "(no redis-benchmark points in this run: install it with `{}`)\n",
            crate::run::redis::INSTALL
        );
    }
}

/// Every point's requests/s and CPU per request, by client, operation and depth.
fn every_point(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "Every point, requests/s · server CPU per request, by client, operation and depth:\n"
    );
    for driver in ["redis-benchmark", "loadgen"] {
        for (op, p) in OPS {
            pivot(
                out,
                rows,
                SUITE,
                &series(driver, op, p),
                &format!("{driver} {} -P {p}", op.to_uppercase()),
                |r| {
                    format!(
                        "{} · {}",
                        fmt_rate(r.throughput_per_sec),
                        fmt_us(r.cpu_us_per_req)
                    )
                },
            );
        }
    }
}

/// The whole server's peak memory at loadgen's GET points.
fn peak_memory(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "Memory: the whole server's peak (PSS), the {} stored keys included, at loadgen's GET \
         points:\n",
        crate::plan::suites::KV_KEYS
    );
    pivot(
        out,
        rows,
        SUITE,
        &series("loadgen", "get", 1),
        "peak memory",
        |r| fmt_bytes(r.peak_mem_bytes),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    fn kv_row(server: &str, point: &str, x: f64, tp: f64, cpu: f64) -> Row {
        let mut r = row(server, point, x, tp);
        r.repeats = 1;
        r.suite = SUITE.into();
        r.series = point
            .rsplit_once("-c")
            .map(|p| p.0.to_string())
            .unwrap_or_default();
        r.cpu_us_per_req = Some(cpu);
        r
    }

    #[test]
    fn the_headline_sets_cpu_beside_redis_and_the_article_beside_ours() {
        let rows = vec![
            kv_row("redis", "redis-benchmark-set-p1-c50", 50.0, 70_000.0, 10.0),
            kv_row("fiber", "redis-benchmark-set-p1-c50", 50.0, 80_000.0, 5.0),
            kv_row("fiber", "loadgen-get-p16-c1", 1.0, 50_000.0, 2.0),
        ];
        let mut sat_out = kv_row("floor-epoll", "redis-benchmark-set-p1-c50", 50.0, 0.0, 0.0);
        (sat_out.repeats, sat_out.ok, sat_out.throughput_per_sec) = (0, 0, None);
        let mut rows = rows;
        rows.push(sat_out);
        let mut out = String::new();
        section(&mut out, &rows);
        assert!(
            out.contains("| **fiber** | 80.0k · 5.00 µs (0.50×, untested)"),
            "{out}"
        );
        assert!(out.contains("| **redis** | 70.0k · 10.0 µs |"), "{out}");
        assert!(!out.contains("| **floor-epoll** | failed"), "{out}");
        // The article's table as ratios, its designs named, even where its points did not run.
        assert!(
            out.contains("| **go-eventloop** (Kqueue) | not run | – (0.89) |"),
            "{out}"
        );
        assert!(out.contains("632k and 783k"), "{out}");
        // loadgen has no 50-connection point: no headline of its own, but its pivot.
        assert!(out.contains("**redis-benchmark, 50 connections**"), "{out}");
        assert!(!out.contains("**loadgen, 50 connections**"), "{out}");
        assert!(out.contains("loadgen GET -P 16"), "{out}");
    }

    #[test]
    fn the_article_s_points_alone_get_their_part_alone() {
        let mut rows = vec![kv_row("redis", "article-get-c50", 50.0, 80_000.0, 8.0)];
        rows[0].p50_us = Some(300.0);
        let mut out = String::new();
        section(&mut out, &rows);
        assert!(
            out.starts_with("**The Go event-loop article's table"),
            "{out}"
        );
        assert!(out.contains("| **redis** | GET |"), "{out}");
        assert!(!out.contains("no redis-benchmark points"), "{out}");
        assert!(!out.contains("Every point"), "{out}");
    }
}
