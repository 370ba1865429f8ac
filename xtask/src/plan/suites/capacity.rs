//! The `capacity` suite: latency under load. For each server and workload (echo; churn, the
//! echo on a fresh connection each, so its capacity is the accepts/s a server sustains at the
//! objective; kv and http where the server serves them), offered rates from light load to past the knee, Poisson
//! arrivals, each probe a fresh server: the latency-vs-throughput curves, and the highest rate
//! whose latency meets the objective (`--slo`, default p99=5ms), found by the search of
//! `plan::capacity`. Its points here are the workloads, each at the search's first rate: the
//! rates themselves are chosen as the search goes (`bench::capacity`).
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{
    Defaults, HttpDriver, HttpPath, KvDriver, Load, Point, Shape, Stop, Sweep, Workload,
    conns_label,
};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "capacity",
    title: "Latency under load: latency-vs-throughput curves and capacity at an objective",
    help: "Latency under load: each server's latency against its achieved rate under Poisson arrivals, from light load to past the knee, and its capacity at a latency objective (--slo, default p99=5ms): a search whose misses count only when 2 of 3 probes miss, its bracket's upper end tried again, run once, or --repeat N times for the capacity as the searches' median with its interval; echo, churn (a fresh connection for each echo: accepts/s at the objective), and kv and http where the server serves them; runs alone",
    // Short probes: a search makes about twenty of them per server and workload, the ones
    // after it about twelve.
    duration: 1.0,
    warmup: 0.3,
    conns: &[100],
    // One search per capacity, so that sixteen servers fit in about a quarter of an hour on
    // 2 CPUs; `--repeat 3` for the searches' median and its interval ([min, max], 75%),
    // about three times as long.
    repeats: 1,
    rate_meaning: "the first rate the search tries (default 1000/s)",
    extra_servers: &[],
    default_servers_help: Some(
        "for capacity also `redis` and `nginx` (when installed), the references of kv and http",
    ),
};

/// The search's first rate, unless `--rate` says otherwise.
pub(crate) const START_RATE: f64 = 1000.0;

/// The workloads, each at the search's first rate: `echo`, `churn` (echo, a connection
/// per echo), `kv` (GETs) and `http` (plaintext), unpipelined, at the first `--conns`
/// (default 100).
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
    let echo16 = Workload::Echo {
        msg_size: 16,
        compute_us: 0,
    };
    vec![
        one("echo", echo16),
        // The client closes each connection after its one echo and opens a fresh one: a
        // rate of echoes is a rate of accepts (issue 62's churn at its latency objective).
        Point {
            shape: Shape {
                requests_per_conn: Some(1),
                ..Shape::default()
            },
            ..one("churn", echo16)
        },
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

/// About how many probes a search makes: from afar a sweep of six rates or so, a bisection of
/// five, a miss probed twice, the upper end tried again and the confirmation (about 19); run
/// again from the capacity found, about 12.
const FIRST_PROBES: usize = 19;
const AGAIN_PROBES: usize = 12;

/// What `--list` says of the suite: `points` are its workloads, `repeats` the searches of each
/// capacity.
pub(super) fn list_text(points: &[Point], repeats: usize, servers: usize) -> String {
    let searches = points.len() * servers.max(1);
    let probes = FIRST_PROBES + AGAIN_PROBES * repeats.saturating_sub(1);
    let secs: f64 = points.iter().map(Point::estimate_secs).sum::<f64>()
        * probes as f64
        * servers.max(1) as f64;
    format!(
        "  {:<11} {} ({} workloads; per server and workload --repeat {} searches, the first of about {} probes, each after it about {}: {} probes, at most about {:.0} min with the {} default servers, {} capacities, fewer where a server does not serve kv or http; a miss counts when 2 of 3 probes miss, the bracket's upper end is tried again, the capacity is the searches' median with its interval)\n              --rate: {}",
        DEFAULTS.name,
        DEFAULTS.title,
        points.len(),
        repeats,
        FIRST_PROBES,
        AGAIN_PROBES,
        probes,
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
