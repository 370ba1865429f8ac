//! The `kv` suite: the Redis subset, RESP `GET` and `SET` at 1, 50 and 1000 connections,
//! pipeline 1 and 16, driven by redis-benchmark (an outside client, `run::redis`) and by
//! loadgen, every server beside redis-server itself (a peer, `run::redis`); and the Event
//! Loop in Go article's two points, redis-benchmark at its defaults (`article-set-c50`,
//! `article-get-c50`), whatever `--conns` and `--duration` say.
//!
//! It may call the suites' shared parts (`plan::suites`).

use serde::Serialize;

use super::{Defaults, Load, NO_RATE, Point, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "kv",
    title: "A Redis subset, GET and SET, beside redis-server",
    help: "The Redis subset: GET and SET at 1, 50 and 1000 connections, pipeline 1 and 16, driven by redis-benchmark and by loadgen, every server beside redis-server itself; and the Go event-loop article's `redis-benchmark -t get,set -n 100000` (`--points article` alone)",
    // 24 points a server: short ones, as quick's.
    duration: 1.5,
    warmup: 0.5,
    // The article's redis-benchmark default (50) and the two ends.
    conns: &[1, 50, 1000],
    repeats: 1,
    rate_meaning: NO_RATE,
    // The article's design beside the shared store: one owner of the map, fed by every
    // connection over a channel (kv only; see `Variant::serves`).
    extra_servers: &["fiber+kv-owner", "go+kv-owner"],
    default_servers_help: Some(
        "for kv also fiber+kv-owner, go+kv-owner and `redis` (redis-server, when installed)",
    ),
};

/// The kv key space: redis-benchmark's `-r 100000`, as the anchor ran it.
pub(crate) const KV_KEYS: u64 = 100_000;
/// The kv value size, for both drivers (`-d 32`): room for loadgen's check of every value.
pub(crate) const KV_VALUE_SIZE: usize = 32;
/// The kv pipeline depths: none, and redis-benchmark's `-P 16` of the anchor.
const KV_PIPELINES: [usize; 2] = [1, 16];
/// The article's `-n 100000`: the requests of each of its tests.
const ARTICLE_REQUESTS: u64 = 100_000;
/// redis-benchmark's default clients (`-c 50`), which the article kept.
const ARTICLE_CONNS: usize = 50;
/// The series (and the start of the ids) of the article's points: `--points article`.
const ARTICLE_SERIES: &str = "article";

/// Who sends the kv requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum KvDriver {
    /// loadgen kv: latency from its histograms, every reply checked.
    Loadgen,
    /// redis-benchmark `--csv`: the client nobody here wrote, with loadgen's keys and values.
    RedisBenchmark,
    /// redis-benchmark at its defaults, as the Event Loop in Go article ran it (`-t get,set
    /// -n 100000`: 50 clients, no pipelining, its one key `key:__rand_int__` and 3-byte
    /// values), a test a point.
    Article,
}

impl KvDriver {
    pub(crate) fn name(self) -> &'static str {
        match self {
            KvDriver::Loadgen => "loadgen",
            KvDriver::RedisBenchmark => "redis-benchmark",
            KvDriver::Article => ARTICLE_SERIES,
        }
    }

    /// The outside client this driver is, by its program's name (`run::outside` finds it).
    pub(super) fn outside_client(self) -> Option<&'static str> {
        match self {
            KvDriver::Loadgen => None,
            KvDriver::RedisBenchmark | KvDriver::Article => Some("redis-benchmark"),
        }
    }
}

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for driver in [KvDriver::RedisBenchmark, KvDriver::Loadgen] {
        for pipeline in KV_PIPELINES {
            for get in [false, true] {
                let op = if get { "get" } else { "set" };
                let series = format!("{}-{op}-p{pipeline}", driver.name());
                for &c in &cx.conns {
                    out.push(cx.point(
                        &series,
                        format!("{series}-c{c}"),
                        format!(
                            "{} {}, -P {pipeline}, {}",
                            op.to_uppercase(),
                            conns_label(c),
                            driver.name()
                        ),
                        c,
                        Workload::Kv {
                            get,
                            pipeline,
                            driver,
                        },
                        Load::Closed,
                        Stop::Duration(cx.duration),
                    ));
                }
            }
        }
    }
    out.extend(article_points(cx));
    out
}

/// The article's `redis-benchmark -t get,set -n 100000` at its defaults, a point a test
/// (redis-benchmark opens new connections for each test anyway): SET, then GET, of its one
/// key. They keep the article's 50 clients and count whatever `--conns` and `--duration` say.
fn article_points(cx: &Sweep<'_>) -> Vec<Point> {
    [false, true]
        .into_iter()
        .map(|get| {
            let op = if get { "get" } else { "set" };
            cx.point(
                &format!("{ARTICLE_SERIES}-{op}"),
                format!("{ARTICLE_SERIES}-{op}-c{ARTICLE_CONNS}"),
                format!(
                    "{} {}, redis-benchmark's defaults (Go event-loop article)",
                    op.to_uppercase(),
                    conns_label(ARTICLE_CONNS)
                ),
                ARTICLE_CONNS,
                Workload::Kv {
                    get,
                    pipeline: 1,
                    driver: KvDriver::Article,
                },
                Load::Closed,
                Stop::Requests(ARTICLE_REQUESTS / ARTICLE_CONNS as u64),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Overrides, Stop, Suite, Workload};
    use super::KvDriver;

    #[test]
    fn kv_crosses_drivers_pipelines_ops_and_conns() {
        let p = Suite::Kv.points(&o());
        assert_eq!(p.len(), 2 * 2 * 2 * 3 + 2);
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        assert!(p.iter().all(|p| p.workload.proto() == "kv"));
        let first = &p[0];
        assert_eq!(first.series, "redis-benchmark-set-p1");
        assert_eq!(first.label, "SET 1 conn, -P 1, redis-benchmark");
        assert_eq!(
            first.workload,
            Workload::Kv {
                get: false,
                pipeline: 1,
                driver: KvDriver::RedisBenchmark
            }
        );
        assert_eq!(first.workload.outside_client(), Some("redis-benchmark"));
        assert!(p.iter().any(|p| p.id == "loadgen-get-p16-c1000"));
        // A quick look: two connection counts and short points.
        let quick = Suite::Kv.points(&Overrides {
            conns: Some(vec![1, 50]),
            duration: Some(0.5),
            ..o()
        });
        assert_eq!(quick.len(), 16 + 2);
        assert!(quick[..16].iter().all(|p| p.stop == Stop::Duration(0.5)));
    }

    #[test]
    fn the_article_points_keep_its_command_whatever_the_overrides() {
        let quick = Suite::Kv.points(&Overrides {
            conns: Some(vec![1]),
            duration: Some(0.3),
            ..o()
        });
        let article: Vec<_> = quick
            .iter()
            .filter(|p| p.series.starts_with("article"))
            .collect();
        let ids: Vec<&str> = article.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["article-set-c50", "article-get-c50"]);
        for (p, get) in article.iter().zip([false, true]) {
            assert_eq!(p.conns, 50);
            assert_eq!(
                p.stop,
                Stop::Requests(2000),
                "100,000 requests over 50 clients"
            );
            assert_eq!(
                p.workload,
                Workload::Kv {
                    get,
                    pipeline: 1,
                    driver: KvDriver::Article
                }
            );
            assert_eq!(p.workload.outside_client(), Some("redis-benchmark"));
        }
    }
}
