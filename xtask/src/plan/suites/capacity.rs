//! The `capacity` suite: latency under load. For each server and workload (echo; kv and http
//! where the server serves them), offered rates from light load to past the knee, Poisson
//! arrivals, each probe a fresh server: the latency-vs-throughput curves, and the highest rate
//! whose latency meets the objective (`--slo`, default p99=5ms), found by the search of
//! `plan::capacity`. Its points here are the workloads, each at the search's first rate: the
//! rates themselves are chosen as the search goes (`bench::capacity`).
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{
    Defaults, HttpDriver, HttpPath, KvDriver, Load, Point, Stop, Sweep, Workload, conns_label,
};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "capacity",
    title: "Latency under load: latency-vs-throughput curves and capacity at an objective",
    help: "Latency under load: each server's latency against its achieved rate under Poisson arrivals, from light load to past the knee, and its capacity at a latency objective (--slo, default p99=5ms), searched and confirmed by --repeat probes (default 3); echo, and kv and http where the server serves them; runs alone",
    // Short probes: a search makes about fifteen of them per server and workload.
    duration: 1.0,
    warmup: 0.3,
    conns: &[100],
    // The probes at the rate found that must all meet the objective.
    repeats: 3,
    rate_meaning: "the first rate the search tries (default 1000/s)",
    extra_servers: &[],
    default_servers_help: Some(
        "for capacity also `redis` and `nginx` (when installed), the references of kv and http",
    ),
};

/// The search's first rate, unless `--rate` says otherwise.
pub(crate) const START_RATE: f64 = 1000.0;

/// The workloads, each at the search's first rate: `echo`, `kv` (GETs) and `http`
/// (plaintext), unpipelined, at the first `--conns` (default 100).
pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let c = cx.conns.first().copied().unwrap_or(100);
    let rate = cx.o.rate.unwrap_or(START_RATE);
    let stop = Stop::Duration(cx.duration);
    let one = |name: &str, workload| {
        cx.point(
            name,
            name.to_string(),
            format!("{name}, {}", conns_label(c)),
            c,
            workload,
            Load::Open { rate },
            stop,
        )
    };
    vec![
        one(
            "echo",
            Workload::Echo {
                msg_size: 16,
                compute_us: 0,
            },
        ),
        one(
            "kv",
            Workload::Kv {
                get: true,
                pipeline: 1,
                driver: KvDriver::Loadgen,
            },
        ),
        one(
            "http",
            Workload::Http {
                path: HttpPath::Plaintext,
                pipeline: 1,
                driver: HttpDriver::Loadgen,
            },
        ),
    ]
}

/// About how many probes a search makes: a sweep of six rates or so, a bisection of five, and
/// the confirmation's repeats.
const PROBES: usize = 12;

/// What `--list` says of the suite: `points` are its workloads, `repeats` the confirmation's
/// probes.
pub(super) fn list_text(points: &[Point], repeats: usize, servers: usize) -> String {
    let searches = points.len() * servers.max(1);
    let secs: f64 = points.iter().map(Point::estimate_secs).sum::<f64>()
        * (PROBES + repeats) as f64
        * servers.max(1) as f64;
    format!(
        "  {:<11} {} ({} workloads, a search of about {} probes each per server; at most about {:.0} min with the {} default servers, {} searches, fewer where a server does not serve kv or http)\n              --rate: {}",
        DEFAULTS.name,
        DEFAULTS.title,
        points.len(),
        PROBES + repeats,
        secs / 60.0,
        servers,
        searches,
        DEFAULTS.rate_meaning
    )
}

/// The reference server of a workload (`echo`, `kv`, `http`): each server's capacity is
/// given as a multiple of its.
pub(crate) fn reference(workload: &str) -> &'static str {
    match workload {
        "kv" => "redis",
        "http" => "nginx",
        _ => "floor-epoll",
    }
}
