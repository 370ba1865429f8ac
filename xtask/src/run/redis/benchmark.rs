//! redis-benchmark, the kv suite's outside client (`--csv`): its arguments for a point (the
//! keys and value size loadgen uses, so that both clients send the same requests; or its
//! defaults, at the Event Loop in Go article's points), the keys stored before its GETs, and
//! its CSV read.
//!
//! It may call the plan layer and the run layer's `outside`, `peer`, `outcome`, `children`
//! and `cpus`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::plan::placement::Placement;
use crate::plan::suites::{KV_KEYS, KV_VALUE_SIZE, KvDriver, Point, Stop, Workload};
use crate::run::children;
use crate::run::cpus;
use crate::run::outcome::Failure;
use crate::run::outside::{OutsideClient, Said};
use crate::run::peer;

/// The benchmark client, looked up on PATH.
const BENCHMARK: &str = "redis-benchmark";

/// redis-benchmark as an outside client.
#[derive(Debug)]
pub(crate) struct RedisBenchmark;

/// The one redis-benchmark client, for `run::outside_clients`.
pub(crate) static CLIENT: RedisBenchmark = RedisBenchmark;

impl OutsideClient for RedisBenchmark {
    fn program(&self) -> &'static str {
        BENCHMARK
    }

    fn missing(&self) -> Option<String> {
        peer::version(BENCHMARK)
            .is_none()
            .then(|| format!("`{BENCHMARK}` is not on PATH ({})", super::INSTALL))
    }

    fn args(&self, point: &Point, addr: &str) -> Option<(Vec<String>, u64)> {
        benchmark_args(point, addr)
    }

    /// Before a GET point, the keys its GETs read: the suite's key space, or the article's
    /// one key as its SET test leaves it.
    fn prepare(
        &self,
        point: &Point,
        addr: &str,
        loadgen: &Path,
        place: &Placement,
    ) -> Result<(), Failure> {
        match point.workload {
            Workload::Kv {
                get: true,
                driver: KvDriver::Article,
                ..
            } => store_article_key(addr),
            Workload::Kv { get: true, .. } => preload(loadgen, addr, place),
            _ => Ok(()),
        }
    }

    fn output(&self) -> &'static str {
        "CSV"
    }

    fn parse(&self, stdout: &str) -> Result<Said, String> {
        parse_csv(stdout)
    }

    fn note(&self) -> &'static str {
        "redis-benchmark: its own latency (avg, min, p50, p95, p99, max), no histogram; the server's CPU over its whole run, connection setup included; replies are not checked"
    }
}

/// Requests a redis-benchmark point sends: enough for about the point's duration at a rate
/// this kind of machine reaches (redis-benchmark stops at a count, not a time), and at least
/// 20 per connection.
fn requests(point: &Point, pipeline: usize) -> u64 {
    let secs = match point.stop {
        Stop::Duration(d) => d,
        Stop::Requests(k) => k as f64 * point.conns as f64 / 50_000.0,
    };
    let rate = match (point.conns, pipeline) {
        (1, 1) => 15_000.0,
        (_, 1) => 50_000.0,
        (1, _) => 150_000.0,
        _ => 400_000.0,
    };
    // A connection per request (`-k 0`): a connect and a close each, about a fifth as fast.
    let rate = if point.shape.requests_per_conn == Some(1) {
        rate / 5.0
    } else {
        rate
    };
    ((secs * rate) as u64).max(20 * point.conns as u64)
}

/// redis-benchmark's arguments for `point` against `addr`: `-r 100000` keys and the values of
/// loadgen's size, so that both clients send the same requests; at the article's points, its
/// defaults.
fn benchmark_args(point: &Point, addr: &str) -> Option<(Vec<String>, u64)> {
    let Workload::Kv {
        get,
        pipeline,
        driver,
    } = point.workload
    else {
        return None;
    };
    let (host, port) = addr.rsplit_once(':')?;
    if driver == KvDriver::Article {
        return Some(article_args(point, get, host, port));
    }
    let n = requests(point, pipeline);
    // The value size of the point (the sizes suite's -d), one size: redis-benchmark draws
    // no mix.
    let value_size = point
        .shape
        .sizes
        .map_or(Ok(KV_VALUE_SIZE), str::parse::<usize>)
        .ok()?;
    let mut args: Vec<String> = [
        "-h",
        host,
        "-p",
        port,
        "-c",
        &point.conns.to_string(),
        "-P",
        &pipeline.to_string(),
        "-t",
        if get { "get" } else { "set" },
        "-r",
        &KV_KEYS.to_string(),
        "-d",
        &value_size.to_string(),
        "-n",
        &n.to_string(),
        "--csv",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    // A connection per request (the churn suite): its `-k 0`, which closes and reconnects
    // after every reply; other lifetimes it cannot keep.
    match point.shape.requests_per_conn {
        None => {}
        Some(1) => args.extend(["-k".into(), "0".into()]),
        Some(_) => return None,
    }
    Some((args, n))
}

/// The article's command for one of its tests, `redis-benchmark -t set -n 100000`: its
/// defaults otherwise (50 clients, no pipelining, one key, 3-byte values), the point's
/// requests per connection over its 50 connections.
fn article_args(point: &Point, get: bool, host: &str, port: &str) -> (Vec<String>, u64) {
    let n = match point.stop {
        Stop::Requests(k) => k * point.conns as u64,
        Stop::Duration(_) => requests(point, 1),
    };
    let args = [
        "-h",
        host,
        "-p",
        port,
        "-t",
        if get { "get" } else { "set" },
        "-n",
        &n.to_string(),
        "--csv",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    (args, n)
}

/// The one key the article's GETs read, as redis-benchmark's SET test leaves it: without
/// `-r`, its `key:__rand_int__` stays that string, and its value is `-d`'s 3 bytes (random
/// letters in redis-benchmark 7; any 3 bytes serve).
fn store_article_key(addr: &str) -> Result<(), Failure> {
    let fail = |e: &dyn std::fmt::Display| {
        Failure::Loadgen(format!(
            "storing key:__rand_int__ at {addr} before the article's GETs: {e}"
        ))
    };
    let sock: SocketAddr = addr.parse().map_err(|e| fail(&e))?;
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(5)).map_err(|e| fail(&e))?;
    let timeout = Some(Duration::from_secs(5));
    s.set_read_timeout(timeout).map_err(|e| fail(&e))?;
    s.set_write_timeout(timeout).map_err(|e| fail(&e))?;
    s.write_all(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:__rand_int__\r\n$3\r\nxxx\r\n")
        .map_err(|e| fail(&e))?;
    let mut reply = [0u8; 5];
    s.read_exact(&mut reply).map_err(|e| fail(&e))?;
    if &reply != b"+OK\r\n" {
        return Err(fail(&format!(
            "the reply was {:?}, not +OK",
            String::from_utf8_lossy(&reply)
        )));
    }
    Ok(())
}

/// Parses the `--csv` output: a header line naming the columns, then one line per test.
fn parse_csv(text: &str) -> Result<Said, String> {
    let fields = |line: &str| -> Vec<String> {
        line.split(',')
            .map(|f| f.trim().trim_matches('"').to_string())
            .collect()
    };
    let mut lines = text.lines().filter(|l| l.starts_with('"'));
    let head = lines
        .next()
        .map(fields)
        .ok_or_else(|| format!("no CSV header in {text:?}"))?;
    let row = lines
        .next()
        .map(fields)
        .ok_or_else(|| format!("no CSV row in {text:?}"))?;
    let col = |name: &str| -> Result<f64, String> {
        let i = head
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("no column {name} in {head:?}"))?;
        row.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("column {name} is not a number in {row:?}"))
    };
    Ok(Said {
        rps: col("rps")?,
        // Every one of `-n`, which it stops at.
        requests: None,
        latency_us: [
            col("p50_latency_ms")? * 1e3,
            col("p95_latency_ms")? * 1e3,
            col("p99_latency_ms")? * 1e3,
            col("max_latency_ms")? * 1e3,
        ],
        avg_min_us: Some([col("avg_latency_ms")? * 1e3, col("min_latency_ms")? * 1e3]),
    })
}

/// Stores every key of the suite's key space with loadgen before a GET point (loadgen does
/// that itself before its own GETs), so that redis-benchmark's GETs find values of the same
/// size as loadgen's. One connection, one GET after the preload.
fn preload(loadgen: &Path, addr: &str, place: &Placement) -> Result<(), Failure> {
    let mut cmd = Command::new(loadgen);
    cmd.args(["kv", "--addr", addr, "--conns", "1", "--requests", "1"])
        .args(["--get-ratio", "1", "--keys", &KV_KEYS.to_string()])
        .args(["--value-size", &KV_VALUE_SIZE.to_string(), "--quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cpus::spawn_on(&place.client_cpus, || cmd.spawn())
        .map_err(|e| Failure::Loadgen(format!("starting the preload: {e:#}")))?;
    let until = Instant::now() + Duration::from_secs(60);
    // Bounded by the deadline.
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return Err(Failure::Loadgen(format!(
                    "the preload for redis-benchmark's GETs failed ({status}): {}",
                    err.trim()
                )));
            }
            Ok(None) if Instant::now() < until && !children::interrupted() => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Failure::Timeout("the preload took over 60 s".into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::suites::{KvDriver, Overrides, Suite};

    #[test]
    fn the_csv_of_redis_benchmark_7() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"SET\",\"303030.31\",\"0.242\",\"0.064\",\"0.247\",\"0.359\",\"0.455\",\"1.183\"\n";
        let c = parse_csv(text).unwrap();
        assert!((c.rps - 303_030.31).abs() < 1e-6);
        let want = [247.0, 359.0, 455.0, 1183.0];
        for (got, want) in c.latency_us.iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{got} {want}");
        }
        let [avg, min] = c.avg_min_us.unwrap();
        assert!((avg - 242.0).abs() < 1e-6 && (min - 64.0).abs() < 1e-6);
        assert!(parse_csv("").is_err());
        assert!(parse_csv("\"test\",\"rps\"\n").is_err());
        assert!(parse_csv("\"test\",\"rps\"\n\"SET\",\"fast\"\n").is_err());
    }

    #[test]
    fn benchmark_args_follow_the_point() {
        let points = Suite::Kv.points(&Overrides {
            workers: 1,
            ..Overrides::default()
        });
        let p = points
            .iter()
            .find(|p| {
                p.conns == 50
                    && p.workload
                        == Workload::Kv {
                            get: true,
                            pipeline: 16,
                            driver: KvDriver::RedisBenchmark,
                        }
            })
            .unwrap();
        let (args, n) = benchmark_args(p, "127.0.0.1:6400").unwrap();
        let line = args.join(" ");
        assert!(
            line.starts_with("-h 127.0.0.1 -p 6400 -c 50 -P 16 -t get -r 100000 -d 32 -n "),
            "{line}"
        );
        assert!(line.ends_with(" --csv"));
        assert_eq!(n, 600_000, "1.5 s at 400k/s");
        let echo = Suite::Quick.points(&Overrides::default());
        assert!(benchmark_args(&echo[0], "127.0.0.1:1").is_none());
    }

    #[test]
    fn churn_and_sizes_reach_redis_benchmark_as_k_0_and_d() {
        let o = Overrides {
            workers: 1,
            ..Overrides::default()
        };
        let line = |suite: Suite, id: &str| {
            let points = suite.points(&o);
            let p = points.iter().find(|p| p.id == id).unwrap();
            benchmark_args(p, "127.0.0.1:6400").map(|(a, _)| a.join(" "))
        };
        let churn = line(Suite::Churn, "kv-redis-benchmark-r1-c50").unwrap();
        assert!(
            churn.contains("-n 5000 "),
            "0.5 s at 10,000 connections a second: {churn}"
        );
        assert!(
            churn.contains("-c 50 -P 1 -t get") && churn.ends_with("--csv -k 0"),
            "{churn}"
        );
        let kept = line(Suite::Churn, "kv-redis-benchmark-keep-alive-c50").unwrap();
        assert!(!kept.contains("-k"), "{kept}");
        let big = line(Suite::Sizes, "kv-redis-benchmark-64KiB-c50").unwrap();
        assert!(big.contains("-t set -r 100000 -d 65536 -n "), "{big}");
    }

    /// redis-benchmark 7.0.15, `-t get,set -n 2000 --csv` against redis-server: a test a line,
    /// SET first.
    const ARTICLE_CSV: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"
\"SET\",\"27027.03\",\"1.247\",\"0.096\",\"0.663\",\"5.015\",\"5.391\",\"7.527\"
\"GET\",\"35714.29\",\"1.088\",\"0.088\",\"0.623\",\"4.887\",\"7.847\",\"8.063\"
";

    #[test]
    fn the_article_points_send_its_command_and_read_every_figure() {
        let points = Suite::Kv.points(&Overrides {
            workers: 1,
            conns: Some(vec![1]),
            duration: Some(0.3),
            ..Overrides::default()
        });
        let args = |id: &str| {
            let p = points.iter().find(|p| p.id == id).unwrap();
            let (args, n) = benchmark_args(p, "127.0.0.1:6400").unwrap();
            (args.join(" "), n)
        };
        assert_eq!(
            args("article-set-c50"),
            (
                "-h 127.0.0.1 -p 6400 -t set -n 100000 --csv".to_string(),
                100_000
            )
        );
        assert_eq!(
            args("article-get-c50").0,
            "-h 127.0.0.1 -p 6400 -t get -n 100000 --csv"
        );
        // The first test of the output is the one read: each point runs one.
        let c = parse_csv(ARTICLE_CSV).unwrap();
        assert!((c.rps - 27_027.03).abs() < 1e-6);
        assert_eq!(c.requests, None);
        let got = [
            c.avg_min_us.unwrap()[0],
            c.avg_min_us.unwrap()[1],
            c.latency_us[0],
            c.latency_us[1],
            c.latency_us[2],
            c.latency_us[3],
        ];
        let want = [1247.0, 96.0, 663.0, 5015.0, 5391.0, 7527.0];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?}");
        }
        // A CSV without the mean is refused, as one without the percentiles is.
        let no_avg = ARTICLE_CSV.replace("avg_latency_ms", "mean");
        assert!(parse_csv(&no_avg).unwrap_err().contains("avg_latency_ms"));
    }
}
