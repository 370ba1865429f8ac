//! The `churn` suite: connection churn, the client closing each connection after R requests
//! and opening a fresh one (loadgen's `--requests-per-conn`; R = 1 is a connection per
//! request, as HttpArena's short-lived test and redis-benchmark's `-k 0`), R ∈ {1, 10, 100, ∞}
//! × 64, 512 and 4096 connections of 16-byte echo in closed loop; and kv GETs at 50
//! connections, a connection per request or kept, driven by redis-benchmark (`-k 0`) and by
//! loadgen, beside redis-server.
//!
//! The client closes: a server that ignored a request to close could not hide it. What a
//! connection's life costs the server is the slope of its CPU per request against 1/R (the
//! report's fit); loadgen counts the connections it opened, the server the ones it accepted
//! and closed (its stop line), and the harness its open descriptors at the window's end.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, KvDriver, Load, NO_RATE, Point, Shape, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "churn",
    title: "Connection churn: the client closes after R requests",
    help: "Connection churn: the client closes each connection after R = 1, 10, 100 or ∞ requests (16 B echo, closed loop, 64, 512 and 4096 connections), and kv GETs at 50 connections a connection per request or kept, by redis-benchmark (-k 0) and loadgen: CPU per connection lifetime, accepts/s (about 8 min with the 16 default servers, fewer where a server does not speak kv)",
    duration: 0.5,
    warmup: 0.2,
    conns: &[64, 512, 4096],
    repeats: 1,
    rate_meaning: NO_RATE,
    extra_servers: &[],
    default_servers_help: Some(
        "for churn also `redis` (redis-server, when installed), at the kv points",
    ),
};

/// The requests a connection carries, `None` for as many as the run (keep-alive).
pub(crate) const CHURN_R: [Option<u64>; 4] = [Some(1), Some(10), Some(100), None];
/// The kv points' connections: redis-benchmark's default clients.
const KV_CONNS: usize = 50;

/// `r10`, or `keep-alive` for connections that last the run.
pub(crate) fn r_name(r: Option<u64>) -> String {
    r.map_or_else(|| "keep-alive".into(), |r| format!("r{r}"))
}

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let echo16 = Workload::Echo {
        msg_size: 16,
        compute_us: 0,
    };
    let mut out = Vec::new();
    for &c in &cx.conns {
        for r in CHURN_R {
            let series = r_name(r);
            out.push(cx.shaped(
                &series,
                format!("{series}-c{c}"),
                format!(
                    "{}, R {}",
                    conns_label(c),
                    r.map_or("∞".into(), |r| r.to_string())
                ),
                c,
                (echo16, churning(r)),
                Load::Closed,
                Stop::Duration(cx.duration),
            ));
        }
    }
    for driver in [KvDriver::RedisBenchmark, KvDriver::Loadgen] {
        for r in [Some(1), None] {
            let series = format!("kv-{}-{}", driver.name(), r_name(r));
            out.push(cx.shaped(
                &series,
                format!("{series}-c{KV_CONNS}"),
                format!(
                    "GET {}, {}, {}",
                    conns_label(KV_CONNS),
                    if r.is_some() {
                        "a connection per request"
                    } else {
                        "kept"
                    },
                    driver.name()
                ),
                KV_CONNS,
                (
                    Workload::Kv {
                        get: true,
                        pipeline: 1,
                        driver,
                    },
                    churning(r),
                ),
                Load::Closed,
                Stop::Duration(cx.duration),
            ));
        }
    }
    out
}

fn churning(r: Option<u64>) -> Shape {
    Shape {
        requests_per_conn: r,
        ..Shape::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{default_servers, o};
    use super::super::{KvDriver, Load, Point, Suite, Workload};

    #[test]
    fn churn_crosses_r_and_conns_and_adds_kv_by_both_drivers() {
        let p = Suite::Churn.points(&o());
        assert_eq!(p.len(), 4 * 3 + 4);
        let ids: std::collections::HashSet<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids.len(), p.len());
        let echo: Vec<(usize, Option<u64>)> = p[..12]
            .iter()
            .map(|p| (p.conns, p.shape.requests_per_conn))
            .collect();
        assert_eq!(
            echo[..4],
            [(64, Some(1)), (64, Some(10)), (64, Some(100)), (64, None)]
        );
        assert_eq!(echo[11], (4096, None));
        assert!(
            p.iter()
                .all(|p| p.load == Load::Closed && p.shape.idle_conns == 0)
        );
        assert_eq!(p[1].id, "r10-c64");
        assert_eq!(p[3].series, "keep-alive");
        let rb = p
            .iter()
            .find(|p| p.id == "kv-redis-benchmark-r1-c50")
            .unwrap();
        assert_eq!(rb.shape.requests_per_conn, Some(1));
        assert!(matches!(
            rb.workload,
            Workload::Kv {
                get: true,
                driver: KvDriver::RedisBenchmark,
                ..
            }
        ));
        assert!(p.iter().any(|p| p.id == "kv-loadgen-keep-alive-c50"));
        // The 4096-connection points wait for their connections as every point does.
        assert!(
            p.iter()
                .filter(|p| p.conns == 4096)
                .all(|p| p.warmup >= 4096.0 / 2500.0)
        );
        // A few minutes with the sixteen default servers (the kv points for few of them).
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>() * default_servers();
        assert!(secs < 9.0 * 60.0, "{secs}");
    }
}
