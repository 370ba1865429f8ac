//! The `http` section: requests/s of every server as a ratio of nginx's, by wrk and by
//! loadgen, server CPU per request, the equal-load point, who comes first at each point, and
//! TechEmpower's rules beside ours (their figures never beside ours: their hardware is not
//! ours, so only ratios travel).
//!
//! It may call what `markdown` may, and the http peer's name and install commands
//! (`run::nginx`).

use std::fmt::Write as _;

use super::pivot;
use crate::plan::suites::{HTTP_EQUAL_SERIES, HttpDriver, HttpPath, http_series};
use crate::record::row::{Row, find, points_of, rows_of_servers_that_ran, servers_that_ran};
use crate::report::cells::{Column, UNTESTED, fmt_rate, fmt_us, mark, table};

const SUITE: &str = "http";
const NGINX: &str = crate::run::nginx::NAME;
const TESTS: [HttpPath; 2] = [HttpPath::Plaintext, HttpPath::Json];

/// A row per server, a column per test and connection count: requests/s, as a multiple of
/// nginx's at the same point, and CPU per request.
fn main_table(out: &mut String, rows: &[Row], driver: HttpDriver) {
    let cols: Vec<(String, String)> = TESTS
        .iter()
        .flat_map(|&t| {
            points_of(rows, SUITE, &http_series(driver, t))
                .into_iter()
                .map(move |p| (p.0, format!("{} c{}", t.name(), p.2)))
        })
        .collect();
    if cols.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**{}**: requests/s (× nginx's: a bare multiple of one run, labelled untested, the point's verdict against nginx with `--repeat 3` or more) · server CPU per request:\n",
        driver.name()
    );
    let mut head = vec!["server".to_string()];
    head.extend(cols.iter().map(|c| c.1.clone()));
    let body: Vec<Vec<String>> = servers_that_ran(rows)
        .into_iter()
        .map(|s| {
            let mut cells = vec![format!("**{s}**")];
            for (id, _) in &cols {
                let r = find(rows, SUITE, &s, id);
                let nginx = find(rows, SUITE, NGINX, id).and_then(|n| n.throughput_per_sec);
                let col = Column::new(rows, SUITE, id, "throughput_per_sec", Some(NGINX));
                let cell = r.map_or_else(String::new, |r| {
                    format!(
                        "{}{} · {}",
                        fmt_rate(r.throughput_per_sec),
                        col.multiple(&s, r.throughput_per_sec, nginx),
                        fmt_us(r.cpu_us_per_req)
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

/// Who comes first at each closed-loop point, by how much over the second, and where nginx
/// stands: requests/s as ratios only, as TechEmpower's rankings can be set beside them.
fn leaders(out: &mut String, rows: &[Row]) {
    let mut body = Vec::new();
    for driver in [HttpDriver::Wrk, HttpDriver::Loadgen] {
        for t in TESTS {
            for (id, label, _) in points_of(rows, SUITE, &http_series(driver, t)) {
                let mut ranked: Vec<(&str, f64)> = rows
                    .iter()
                    .filter(|r| r.point == id && r.ok > 0)
                    .filter_map(|r| Some((r.server.as_str(), r.throughput_per_sec?)))
                    .collect();
                ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
                let Some(&(first, best)) = ranked.first() else {
                    continue;
                };
                let second = ranked.get(1).map_or_else(
                    || "–".into(),
                    |s| format!("{:.2}× {}, {UNTESTED}", best / s.1, s.0),
                );
                let nginx = ranked.iter().position(|s| s.0 == NGINX).map_or_else(
                    || "–".into(),
                    |i| format!("{:.2} (#{}), {UNTESTED}", ranked[i].1 / best, i + 1),
                );
                let marks = mark(find(rows, SUITE, first, &id), String::new());
                body.push(vec![label, format!("**{first}**{marks}"), second, nginx]);
            }
        }
    }
    if body.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Who comes first (requests/s), by how much over the second, and nginx's requests/s as \
         a fraction of the first's with its rank:\n"
    );
    table(
        out,
        &["point", "first", "over the second", "nginx ÷ first"],
        &body,
    );
}

/// The open-loop point: every server at the same rate, so CPU per request and p99 compare.
fn equal_load(out: &mut String, rows: &[Row]) {
    let Some((id, label, _)) = points_of(rows, SUITE, HTTP_EQUAL_SERIES).into_iter().next() else {
        return;
    };
    let _ = writeln!(
        out,
        "**Equal load** ({label}, open loop, latency from each request's intended send time): \
         the comparison a 2-CPU machine, where the client takes a CPU, can make without the \
         client's limits in the figures. CPU per request (× nginx's) and p99:\n"
    );
    let nginx = find(rows, SUITE, NGINX, &id);
    let col = Column::new(rows, SUITE, &id, "cpu_us_per_req", Some(NGINX));
    let body: Vec<Vec<String>> = servers_that_ran(rows)
        .into_iter()
        .map(|s| {
            let r = find(rows, SUITE, &s, &id);
            let cpu = r.map_or_else(String::new, |r| {
                format!(
                    "{}{}",
                    fmt_us(r.cpu_us_per_req),
                    col.multiple(&s, r.cpu_us_per_req, nginx.and_then(|n| n.cpu_us_per_req))
                )
            });
            vec![
                format!("**{s}**"),
                mark(
                    r,
                    r.map_or_else(String::new, |r| fmt_rate(r.throughput_per_sec)),
                ),
                mark(r, cpu),
                mark(r, r.map_or_else(String::new, |r| fmt_us(r.p99_us))),
            ]
        })
        .collect();
    table(out, &["server", "req/s", "CPU/req", "p99"], &body);
}

pub(crate) fn section(out: &mut String, rows: &[Row]) {
    let rows = rows_of_servers_that_ran(rows);
    let rows = rows.as_slice();
    let _ = writeln!(
        out,
        "TechEmpower's two tests without a database: `GET /plaintext` (`Hello, World!`, \
         pipelined 16 deep) and `GET /json` (`{{\"message\":\"Hello, World!\"}}` serialized per \
         request, unpipelined), every server's own `--proto http` (`go`: Go's `net/http`, which flushes each \
         pipelined response apart; srv-go's other models, `go-sessions` among them: its \
         hand-written parser, a read's responses written together) \
         beside nginx (`nginx`: a configuration xtask writes, a worker process per server \
         worker pinned as ours are, `return` of the same bodies, access log off). Two clients \
         send the same requests, closed loop: wrk (`-t1`, `scripts/wrk/pipeline.lua`; its \
         latency counts from each request's send, so it is **not corrected for coordinated \
         omission**; statuses counted, bodies not checked; a socket error or a non-2xx \
         response fails the point; the server's CPU is over its whole run, connection setup \
         included) and loadgen http (every response checked: status, length, body, a `Date`; \
         CPU over its measured window). CPU per request is the server's user + system time. \
         A † marks a point where the client, not the server, was the limit.\n"
    );
    let _ = writeln!(
        out,
        "**TechEmpower's rules beside ours.** Their figures are not set beside ours (their \
         hardware is not ours): only ratios travel, each server's requests/s as a multiple of \
         nginx's or of the first's at the same point.\n"
    );
    table(
        out,
        &["", "TechEmpower", "here"],
        &[
            ["plaintext", "pipelined 16, at 256, 1,024, 4,096 and 16,384 connections", "pipelined 16, at 16, 256 and 1,024 (`--conns`)"],
            ["json", "unpipelined, at 16 to 512 connections", "unpipelined, at the same counts"],
            ["client", "wrk on a machine of its own, a thread per core, `--timeout 8`, 15 s", "wrk `-t1` and loadgen on the client CPUs of the same machine, `--timeout=8s`, the point's duration"],
            ["figure", "requests/s at the best connection count", "requests/s at each count, server CPU per request, and an equal-load point"],
        ]
        .map(|r| r.map(str::to_string).to_vec()),
    );
    main_table(out, rows, HttpDriver::Wrk);
    main_table(out, rows, HttpDriver::Loadgen);
    leaders(out, rows);
    equal_load(out, rows);
    if !rows.iter().any(|r| r.server == NGINX) {
        let _ = writeln!(
            out,
            "(nginx did not run: install it with `{}`)\n",
            crate::run::nginx::INSTALL
        );
    }
    if !rows.iter().any(|r| r.series.starts_with("wrk-")) {
        let _ = writeln!(
            out,
            "(no wrk points in this run: install it with `apt-get install wrk`)\n"
        );
    }
    let _ = writeln!(out, "Every point, p50 / p99 latency:\n");
    for driver in [HttpDriver::Wrk, HttpDriver::Loadgen] {
        for t in TESTS {
            let series = http_series(driver, t);
            pivot(out, rows, SUITE, &series, &series, |r| {
                format!("{} / {}", fmt_us(r.p50_us), fmt_us(r.p99_us))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    fn http_row(server: &str, point: &str, x: f64, tp: f64, cpu: f64) -> Row {
        let mut r = row(server, point, x, tp);
        r.suite = SUITE.into();
        r.series = point
            .rsplit_once("-c")
            .map(|p| p.0.to_string())
            .unwrap_or_default();
        r.label = format!("{} {x}", r.series);
        r.cpu_us_per_req = Some(cpu);
        r
    }

    #[test]
    fn ratios_of_nginx_and_of_the_first_and_the_equal_load_point() {
        let mut rows = vec![
            http_row("nginx", "wrk-plaintext-p16-c256", 256.0, 400_000.0, 2.0),
            http_row("fiber", "wrk-plaintext-p16-c256", 256.0, 500_000.0, 1.5),
            http_row("go", "wrk-plaintext-p16-c256", 256.0, 250_000.0, 4.0),
            http_row("nginx", "loadgen-json-open-c256", 256.0, 10_000.0, 8.0),
            http_row("fiber", "loadgen-json-open-c256", 256.0, 10_000.0, 6.0),
        ];
        let mut floor = http_row("floor-epoll", "wrk-plaintext-p16-c256", 256.0, 0.0, 0.0);
        (floor.repeats, floor.ok, floor.throughput_per_sec) = (0, 0, None);
        rows.push(floor);
        let mut out = String::new();
        section(&mut out, &rows);
        assert!(
            out.contains("| **fiber** | 500k (1.25×, untested) · 1.50 µs |"),
            "{out}"
        );
        assert!(out.contains("| **nginx** | 400k · 2.00 µs |"), "{out}");
        assert!(!out.contains("floor-epoll"), "{out}");
        // fiber first, 1.25× over nginx, which is second at 0.80 of it.
        assert!(
            out.contains("| **fiber** | 1.25× nginx, untested | 0.80 (#2), untested |"),
            "{out}"
        );
        assert!(
            out.contains("| **fiber** | 10.0k | 6.00 µs (0.75×, untested) |"),
            "{out}"
        );
        assert!(out.contains("16,384"), "{out}");
        assert!(out.contains("not corrected for coordinated"), "{out}");
    }
}
