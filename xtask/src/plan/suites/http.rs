//! The `http` suite: TechEmpower's plaintext (pipelined 16) and json (unpipelined) tests at
//! 16, 256 and 1024 connections, driven by wrk (an outside client, `run::wrk`) and by loadgen
//! (closed loop), one equal-load point (loadgen's open loop at a rate every server sustains),
//! every server beside nginx (a peer, `run::nginx`).
//!
//! It may call the suites' shared parts (`plan::suites`).

use serde::Serialize;

use super::{Defaults, Load, Point, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "http",
    title: "HTTP/1.1, TechEmpower's plaintext and json, beside nginx",
    help: "HTTP/1.1: TechEmpower's plaintext (pipelined 16) and json at 16, 256 and 1024 connections, driven by wrk and by loadgen, one equal-load point, every server beside nginx",
    // 13 points a server, short ones, as kv's.
    duration: 2.0,
    warmup: 0.5,
    // TechEmpower's json test starts at 16 and its plaintext test at 256; 1024 is where a
    // 2-CPU machine still opens the connections quickly. (The official runs go to 16,384.)
    conns: &[16, 256, 1024],
    repeats: 1,
    rate_meaning: "the equal-load point's requests/s in total (default 10000)",
    extra_servers: &[],
    default_servers_help: Some("for http also `nginx` (when installed)"),
};

/// The equal-load point's rate when `--rate` does not say: well under what the slowest
/// default server (a forked process per connection) answers on one CPU.
const HTTP_EQUAL_RATE: f64 = 10_000.0;
/// The equal-load point's connections, when the sweep has them (else its largest count).
const HTTP_EQUAL_CONNS: usize = 256;

/// TechEmpower's two tests that need no database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HttpPath {
    /// `GET /plaintext`: `Hello, World!`, pipelined 16 deep.
    Plaintext,
    /// `GET /json`: `{"message":"Hello, World!"}`, serialized per request, unpipelined.
    Json,
}

impl HttpPath {
    /// As the series and the report name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            HttpPath::Plaintext => "plaintext",
            HttpPath::Json => "json",
        }
    }

    /// The request's path.
    pub(crate) fn path(self) -> &'static str {
        match self {
            HttpPath::Plaintext => "/plaintext",
            HttpPath::Json => "/json",
        }
    }

    /// TechEmpower's pipeline depth for the test: 16 for plaintext, none for json.
    pub(crate) fn pipeline(self) -> usize {
        match self {
            HttpPath::Plaintext => 16,
            HttpPath::Json => 1,
        }
    }
}

/// Who sends the http requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HttpDriver {
    /// loadgen http: latency from its histograms (from the intended send time in open loop),
    /// every response checked.
    Loadgen,
    /// wrk with `scripts/wrk/pipeline.lua`: the client TechEmpower runs.
    Wrk,
}

impl HttpDriver {
    pub(crate) fn name(self) -> &'static str {
        match self {
            HttpDriver::Loadgen => "loadgen",
            HttpDriver::Wrk => "wrk",
        }
    }

    /// The outside client this driver is, by its program's name (`run::outside` finds it).
    pub(super) fn outside_client(self) -> Option<&'static str> {
        match self {
            HttpDriver::Loadgen => None,
            HttpDriver::Wrk => Some(self.name()),
        }
    }
}

/// The series of a driver and test: `wrk-plaintext-p16`, `loadgen-json-p1`.
pub(crate) fn http_series(driver: HttpDriver, path: HttpPath) -> String {
    format!("{}-{}-p{}", driver.name(), path.name(), path.pipeline())
}

/// The series of the equal-load point.
pub(crate) const HTTP_EQUAL_SERIES: &str = "loadgen-json-open";

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for driver in [HttpDriver::Wrk, HttpDriver::Loadgen] {
        for path in [HttpPath::Plaintext, HttpPath::Json] {
            let series = http_series(driver, path);
            for &c in &cx.conns {
                out.push(cx.point(
                    &series,
                    format!("{series}-c{c}"),
                    format!(
                        "{} {}, pipeline {}, {}",
                        path.name(),
                        conns_label(c),
                        path.pipeline(),
                        driver.name()
                    ),
                    c,
                    Workload::Http {
                        path,
                        pipeline: path.pipeline(),
                        driver,
                    },
                    Load::Closed,
                    Stop::Duration(cx.duration),
                ));
            }
        }
    }
    let c = if cx.conns.contains(&HTTP_EQUAL_CONNS) {
        HTTP_EQUAL_CONNS
    } else {
        cx.conns.iter().copied().max().unwrap_or(HTTP_EQUAL_CONNS)
    };
    let rate = cx.o.rate.unwrap_or(HTTP_EQUAL_RATE);
    out.push(cx.point(
        HTTP_EQUAL_SERIES,
        format!("{HTTP_EQUAL_SERIES}-c{c}"),
        format!("json {} @ {rate}/s, loadgen", conns_label(c)),
        c,
        Workload::Http {
            path: HttpPath::Json,
            pipeline: 1,
            driver: HttpDriver::Loadgen,
        },
        Load::Open { rate },
        Stop::Duration(cx.duration),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Load, Overrides, Stop, Suite, Workload};
    use super::{HttpDriver, HttpPath};

    #[test]
    fn http_crosses_drivers_tests_and_conns_and_adds_one_equal_load_point() {
        let p = Suite::Http.points(&o());
        assert_eq!(p.len(), 2 * 2 * 3 + 1);
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        assert!(p.iter().all(|p| p.workload.proto() == "http"));
        let first = &p[0];
        assert_eq!(first.series, "wrk-plaintext-p16");
        assert_eq!(first.id, "wrk-plaintext-p16-c16");
        assert_eq!(first.label, "plaintext 16 conns, pipeline 16, wrk");
        assert_eq!(
            first.workload,
            Workload::Http {
                path: HttpPath::Plaintext,
                pipeline: 16,
                driver: HttpDriver::Wrk
            }
        );
        assert_eq!(first.workload.outside_client(), Some("wrk"));
        assert!(p.iter().any(|p| p.id == "wrk-json-p1-c1024"));
        assert!(
            p.iter()
                .filter(|p| p.series.starts_with("loadgen-"))
                .all(|p| p.workload.outside_client().is_none())
        );
        let equal = p.last().unwrap();
        assert_eq!(equal.id, "loadgen-json-open-c256");
        assert_eq!(equal.load, Load::Open { rate: 10_000.0 });
        assert!(p[..p.len() - 1].iter().all(|p| p.load == Load::Closed));
        // A short look: one connection count, a rate of its own.
        let quick = Suite::Http.points(&Overrides {
            conns: Some(vec![16]),
            duration: Some(0.5),
            rate: Some(2000.0),
            ..o()
        });
        assert_eq!(quick.len(), 5);
        assert!(quick.iter().all(|p| p.stop == Stop::Duration(0.5)));
        assert_eq!(quick[4].id, "loadgen-json-open-c16");
        assert_eq!(quick[4].load, Load::Open { rate: 2000.0 });
    }
}
