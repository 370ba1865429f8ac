//! redis-benchmark, the kv suite's outside client (`--csv`): its arguments for a point (the
//! keys and value size loadgen uses, so that both clients send the same requests), the keys
//! stored before its GETs, and its CSV read.
//!
//! It may call the plan layer and the run layer's `outside`, `peer`, `outcome`, `children`
//! and `cpus`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::plan::placement::Placement;
use crate::plan::suites::{KV_KEYS, KV_VALUE_SIZE, Point, Stop, Workload};
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

    /// Before a GET point, the keys its GETs read.
    fn prepare(
        &self,
        point: &Point,
        addr: &str,
        loadgen: &Path,
        place: &Placement,
    ) -> Result<(), Failure> {
        if matches!(point.workload, Workload::Kv { get: true, .. }) {
            preload(loadgen, addr, place)?;
        }
        Ok(())
    }

    fn output(&self) -> &'static str {
        "CSV"
    }

    fn parse(&self, stdout: &str) -> Result<Said, String> {
        parse_csv(stdout)
    }

    fn note(&self) -> &'static str {
        "redis-benchmark: its own latency (p50, p95, p99, max), no histogram; the server's CPU over its whole run, connection setup included; replies are not checked"
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
    ((secs * rate) as u64).max(20 * point.conns as u64)
}

/// redis-benchmark's arguments for `point` against `addr`: `-r 100000` keys and the values of
/// loadgen's size, so that both clients send the same requests.
fn benchmark_args(point: &Point, addr: &str) -> Option<(Vec<String>, u64)> {
    let Workload::Kv { get, pipeline, .. } = point.workload else {
        return None;
    };
    let (host, port) = addr.rsplit_once(':')?;
    let n = requests(point, pipeline);
    let args = [
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
        &KV_VALUE_SIZE.to_string(),
        "-n",
        &n.to_string(),
        "--csv",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    Some((args, n))
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
}
