//! The `kv` suite: the Redis subset, RESP `GET` and `SET` at 1, 50 and 1000 connections,
//! pipeline 1 and 16, driven by redis-benchmark (an outside client, `run::redis`) and by
//! loadgen, every server beside redis-server itself (a peer, `run::redis`).
//!
//! It may call the suites' shared parts (`plan::suites`).

use serde::Serialize;

use super::{Defaults, Load, NO_RATE, Point, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "kv",
    title: "A Redis subset, GET and SET, beside redis-server",
    help: "The Redis subset: GET and SET at 1, 50 and 1000 connections, pipeline 1 and 16, driven by redis-benchmark and by loadgen, every server beside redis-server itself",
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

/// Who sends the kv requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum KvDriver {
    /// loadgen kv: latency from its histograms, every reply checked.
    Loadgen,
    /// redis-benchmark `--csv`: the client nobody here wrote, as the article ran it.
    RedisBenchmark,
}

impl KvDriver {
    pub(crate) fn name(self) -> &'static str {
        match self {
            KvDriver::Loadgen => "loadgen",
            KvDriver::RedisBenchmark => "redis-benchmark",
        }
    }

    /// The outside client this driver is, by its program's name (`run::outside` finds it).
    pub(super) fn outside_client(self) -> Option<&'static str> {
        match self {
            KvDriver::Loadgen => None,
            KvDriver::RedisBenchmark => Some(self.name()),
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
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::super::{Overrides, Stop, Suite, Workload};
    use super::KvDriver;

    #[test]
    fn kv_crosses_drivers_pipelines_ops_and_conns() {
        let p = Suite::Kv.points(&o());
        assert_eq!(p.len(), 2 * 2 * 2 * 3);
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
        assert_eq!(quick.len(), 16);
        assert!(quick.iter().all(|p| p.stop == Stop::Duration(0.5)));
    }
}
