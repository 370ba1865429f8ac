//! The `sizes` suite: payload size. Echo of 16 B, 1 KiB, 64 KiB and 1 MiB messages and a mix
//! of 95% 64 B and 5% 64 KiB (loadgen's `--msg-size 64:95,64K:5`), closed loop at 64
//! connections; and kv SETs of 32 B, 1 KiB and 64 KiB values at 50 connections, driven by
//! redis-benchmark (`-d`) and by loadgen (`--value-size`), beside redis-server. The report
//! gives CPU per request and per KiB and Gbit/s, and where the runtimes converge.
//!
//! It may call the suites' shared parts (`plan::suites`).

use super::{Defaults, KvDriver, Load, NO_RATE, Point, Shape, Stop, Sweep, Workload, conns_label};

pub(super) const DEFAULTS: Defaults = Defaults {
    name: "sizes",
    title: "Payload size: 16 B to 1 MiB",
    help: "Payload size: echo of 16 B, 1 KiB, 64 KiB, 1 MiB and a 95% 64 B / 5% 64 KiB mix at 64 connections, closed loop, and kv SETs of 32 B, 1 KiB and 64 KiB values by redis-benchmark (-d) and loadgen: CPU per request and per KiB, Gbit/s, where the runtimes converge (about 4 min with the 16 default servers)",
    duration: 0.5,
    warmup: 0.35,
    conns: &[64],
    repeats: 1,
    rate_meaning: NO_RATE,
    extra_servers: &[],
    default_servers_help: Some(
        "for sizes also `redis` (redis-server, when installed), at the kv points",
    ),
};

/// The echo message sizes, in bytes.
pub(crate) const ECHO_SIZES: [usize; 4] = [16, 1024, 65_536, 1 << 20];
/// The mix: 95% of 64 B, 5% of 64 KiB, as loadgen takes it.
pub(crate) const ECHO_MIX: &str = "64:95,64K:5";
/// The kv value sizes, in bytes and as [`Shape::sizes`] holds them (redis-benchmark's
/// `-d`, loadgen's `--value-size`).
const KV_SIZES: [(usize, &str); 3] = [(32, "32"), (1024, "1024"), (65_536, "65536")];
/// The kv points' connections: redis-benchmark's default clients.
const KV_CONNS: usize = 50;

/// `16B`, `1KiB`, `64KiB`, `1MiB`.
pub(crate) fn size_name(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

pub(super) fn points(cx: &Sweep<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for &c in &cx.conns {
        let echo = |msg_size| Workload::Echo {
            msg_size,
            compute_us: 0,
        };
        for size in ECHO_SIZES {
            out.push(cx.shaped(
                "echo",
                format!("echo-{}-c{c}", size_name(size)),
                format!("{} echoes, {}", size_name(size), conns_label(c)),
                c,
                (echo(size), Shape::default()),
                Load::Closed,
                Stop::Duration(cx.duration),
            ));
        }
        let mix = Shape {
            sizes: Some(ECHO_MIX),
            ..Shape::default()
        };
        out.push(cx.shaped(
            "echo-mix",
            format!("echo-mix-c{c}"),
            format!("95% 64 B, 5% 64 KiB, {}", conns_label(c)),
            c,
            (echo(64), mix),
            Load::Closed,
            Stop::Duration(cx.duration),
        ));
    }
    out.extend(kv_points(cx));
    out
}

/// kv SETs of each value size, by each driver.
fn kv_points(cx: &Sweep<'_>) -> Vec<Point> {
    let mut out = Vec::new();
    for driver in [KvDriver::RedisBenchmark, KvDriver::Loadgen] {
        let series = format!("kv-{}", driver.name());
        for (size, text) in KV_SIZES {
            let shape = Shape {
                sizes: Some(text),
                ..Shape::default()
            };
            out.push(cx.shaped(
                &series,
                format!("{series}-{}-c{KV_CONNS}", size_name(size)),
                format!(
                    "SET {} values, {}, {}",
                    size_name(size),
                    conns_label(KV_CONNS),
                    driver.name()
                ),
                KV_CONNS,
                (
                    Workload::Kv {
                        get: false,
                        pipeline: 1,
                        driver,
                    },
                    shape,
                ),
                Load::Closed,
                Stop::Duration(cx.duration),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{default_servers, o};
    use super::super::{KvDriver, Load, Point, Suite, Workload};

    #[test]
    fn sizes_sweep_16_bytes_to_a_mebibyte_the_mix_and_kv_values() {
        let p = Suite::Sizes.points(&o());
        assert_eq!(p.len(), 5 + 2 * 3);
        let ids: Vec<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids[..5],
            [
                "echo-16B-c64",
                "echo-1KiB-c64",
                "echo-64KiB-c64",
                "echo-1MiB-c64",
                "echo-mix-c64"
            ]
        );
        // The plots' x is the message's size, the mix's mean for the mix.
        let xs: Vec<f64> = p[..5].iter().map(Point::x).collect();
        assert_eq!(xs[..4], [16.0, 1024.0, 65536.0, 1048576.0]);
        assert!((xs[4] - (0.95 * 64.0 + 0.05 * 65536.0)).abs() < 1e-6);
        assert_eq!(p[4].shape.sizes, Some("64:95,64K:5"));
        assert!(p.iter().all(|p| p.load == Load::Closed));
        let kv = p
            .iter()
            .find(|p| p.id == "kv-redis-benchmark-64KiB-c50")
            .unwrap();
        assert_eq!(kv.shape.sizes, Some("65536"));
        assert!(matches!(
            kv.workload,
            Workload::Kv {
                get: false,
                driver: KvDriver::RedisBenchmark,
                ..
            }
        ));
        assert!(p.iter().any(|p| p.id == "kv-loadgen-32B-c50"));
        let secs: f64 = p.iter().map(Point::estimate_secs).sum::<f64>() * default_servers();
        assert!(secs < 5.0 * 60.0, "{secs}");
        assert_eq!(super::size_name(1 << 20), "1MiB");
        assert_eq!(super::size_name(100), "100B");
    }
}
