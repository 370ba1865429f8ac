//! Redis in the kv suite: redis-server as one more server (persistence off, on a free
//! loopback port, pinned like the others), and redis-benchmark as a second client beside
//! loadgen. Both are optional programs: where one is missing the suite says so, with the
//! install command, and runs what it can.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cgroup::Group;
use crate::children::{self, Proc};
use crate::cpus;
use crate::procfs::Sampler;
use crate::runner::{self, Failure, Measured, Placement, RunFiles};
use crate::servers::Variant;
use crate::stats;
use crate::suites::{KV_KEYS, KV_VALUE_SIZE, Point, Stop, Workload};

/// The server binary, looked up on PATH.
pub(crate) const SERVER: &str = "redis-server";
/// The benchmark client, looked up on PATH.
pub(crate) const BENCHMARK: &str = "redis-benchmark";
/// How to get both on Debian and Ubuntu.
pub(crate) const INSTALL: &str = "apt-get install redis-server redis-tools";
/// The variant name `--servers` takes.
pub(crate) const NAME: &str = "redis";
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a redis-benchmark point samples the server: more often than loadgen's points
/// (500 ms), because the window ends when redis-benchmark exits and closes its connections,
/// and a thread-per-connection server's threads exit with them: their CPU since the last
/// sample is lost, so the period bounds what is lost.
const BENCHMARK_SAMPLE_PERIOD: Duration = Duration::from_millis(100);

/// The first line of `program --version`, or `None` when it does not run.
fn version(program: &str) -> Option<String> {
    Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
}

/// Why redis-server cannot run here, or `None` when it can.
pub(crate) fn missing_server() -> Option<String> {
    version(SERVER)
        .is_none()
        .then(|| format!("`{SERVER}` is not on PATH ({INSTALL})"))
}

/// Why redis-benchmark cannot run here, or `None` when it can.
pub(crate) fn missing_benchmark() -> Option<String> {
    version(BENCHMARK)
        .is_none()
        .then(|| format!("`{BENCHMARK}` is not on PATH ({INSTALL})"))
}

/// redis-server as a variant. Its flags are its own (see [`start_server`]), so none are
/// listed for the `--help` check the ringside servers get.
pub(crate) fn variant() -> Variant {
    Variant {
        name: NAME.to_string(),
        binary: SERVER.to_string(),
        flags: Vec::new(),
        about: format!(
            "{}, persistence off (--save '' --appendonly no), one I/O thread",
            version(SERVER).unwrap_or_else(|| SERVER.to_string())
        ),
    }
}

/// A loopback port the kernel just handed out and took back: free unless another program
/// takes it in between, in which case redis-server fails to bind and says so.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts redis-server pinned to the server CPUs, persistence off, and waits until it accepts
/// connections (it prints no `READY` line of ours).
pub(crate) fn start_server(
    place: &Placement,
    files: &RunFiles,
    group: Option<&Group>,
) -> Result<(Proc, String), Failure> {
    let port = free_port().map_err(|e| Failure::Start(format!("no free port: {e}")))?;
    let mut cmd = Command::new(SERVER);
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        // Thousands of clients, as the other servers take them.
        .args(["--maxclients", "20000", "--tcp-backlog", "4096"])
        // Its log on stderr, where the harness keeps a server's last words.
        .args(["--logfile", "/dev/stderr"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cpus::spawn_on(&place.server_cpus, || cmd.spawn())
        .map_err(|e| Failure::Start(format!("cannot run {SERVER}: {e:#}")))?;
    if let Some(g) = group
        && let Err(e) = g.add(child.id())
    {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Failure::Start(format!(
            "cannot move {SERVER} into its cgroup: {e}"
        )));
    }
    let mut server = Proc::adopt(child, &files.path("server.log"))
        .map_err(|e| Failure::Start(format!("{e:#}")))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let until = Instant::now() + READY_TIMEOUT;
    // Bounded by the deadline: every pass sleeps or ends.
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok((server, addr.to_string()));
        }
        if let Some(status) = server.try_wait() {
            return Err(Failure::Start(runner::last_words(status, &mut server)));
        }
        if children::interrupted() {
            return Err(Failure::Interrupted);
        }
        if Instant::now() > until {
            server.stop(Duration::from_secs(1));
            return Err(Failure::Start(format!(
                "{SERVER} did not accept connections on {addr} within {} s",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks redis-server to exit (`SHUTDOWN NOSAVE`) and waits up to 2 s for it to close the
/// connection; does nothing for other servers. The harness blocks SIGTERM (it reads its stop
/// signals from a signalfd) and children inherit the blocked mask: the ringside servers read
/// theirs from a signalfd too, but redis-server, which installs handlers, would never see the
/// SIGTERM of a stop and be killed after the grace period.
pub(crate) fn shutdown_if_redis(variant: &Variant, addr: &str) {
    if variant.binary != SERVER {
        return;
    }
    let Ok(addr) = addr.parse::<SocketAddr>() else {
        return;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return;
    };
    let timeout = Some(Duration::from_secs(2));
    if s.set_write_timeout(timeout).is_err() || s.set_read_timeout(timeout).is_err() {
        return;
    }
    if s.write_all(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
        .is_err()
    {
        return;
    }
    // The server closes the connection as it exits; whatever happens, the stop that follows
    // (SIGTERM, then SIGKILL) ends it.
    let mut sink = [0u8; 256];
    let until = Instant::now() + Duration::from_secs(2);
    // Bounded by the deadline and the read timeout.
    while Instant::now() < until {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
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
pub(crate) fn benchmark_args(point: &Point, addr: &str) -> Option<(Vec<String>, u64)> {
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

/// What redis-benchmark's `--csv` says of its one test: requests/s, and latency in µs (p50,
/// p95, p99, max).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Csv {
    pub(crate) rps: f64,
    pub(crate) latency_us: [f64; 4],
}

/// Parses the `--csv` output: a header line naming the columns, then one line per test.
pub(crate) fn parse_csv(text: &str) -> Result<Csv, String> {
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
    Ok(Csv {
        rps: col("rps")?,
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

/// Runs a redis-benchmark point against the server already started at `addr`: the server's
/// CPU and memory are sampled as for loadgen's points, over redis-benchmark's whole run
/// (connection setup included), and the CPU per request is over the requests it sent.
pub(crate) fn run_benchmark(
    point: &Point,
    server: &mut Proc,
    addr: &str,
    loadgen: &Path,
    place: &Placement,
    files: &RunFiles,
) -> Result<Measured, Failure> {
    let io = |what: &str, e: &dyn std::fmt::Display| Failure::Loadgen(format!("{what}: {e}"));
    let Some((args, n)) = benchmark_args(point, addr) else {
        return Err(Failure::Loadgen(format!(
            "{} is not a kv point",
            point.label
        )));
    };
    if matches!(point.workload, Workload::Kv { get: true, .. }) {
        preload(loadgen, addr, place)?;
    }
    let mut sampler = Sampler::new(server.id()).watching(place.server_cpus.as_slice());
    let baseline = sampler
        .sample()
        .map_err(|_| Failure::Died(server.stderr_tail()))?;
    let mut cmd = Command::new(BENCHMARK);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cpus::spawn_on(&place.client_cpus, || cmd.spawn())
        .map_err(|e| io("starting redis-benchmark", &e))?;
    // Its stdout is the CSV; read whole on a thread so that it never blocks on a full pipe.
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = out.read_to_string(&mut text);
        }
        let _ = tx.send(text);
    });
    let mut bench = Proc::adopt(child, &files.path("redis-benchmark.log"))
        .map_err(|e| io("starting redis-benchmark", &e))?;
    let mut client = Sampler::new(bench.id());
    let client_start = client.sample().ok();
    let mut client_last = client_start;
    let started = unix_now();
    let limit = Duration::from_secs_f64(60.0 + n as f64 / 5_000.0);
    let mut samples = vec![];
    let mut next = Instant::now();
    let t0 = Instant::now();
    // Bounded by `limit`.
    let status = loop {
        let now = Instant::now();
        if now >= next {
            if let Ok(s) = sampler.sample() {
                samples.push(s);
                server.remember(sampler.members());
            }
            if let Ok(c) = client.sample() {
                client_last = Some(c);
            }
            next = (next + BENCHMARK_SAMPLE_PERIOD).max(now);
        }
        if children::interrupted() {
            return Err(Failure::Interrupted);
        }
        if let Some(status) = bench.try_wait() {
            break status;
        }
        if let Some(status) = server.try_wait() {
            bench.stop(Duration::from_secs(1));
            return Err(Failure::Died(runner::last_words(status, server)));
        }
        if t0.elapsed() > limit {
            bench.stop(Duration::from_secs(1));
            return Err(Failure::Timeout(format!(
                "redis-benchmark ran past {:.0} s; its last words: {}",
                limit.as_secs_f64(),
                bench.stderr_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(50).min(next.saturating_duration_since(now)));
    };
    let ended = unix_now();
    if let Ok(s) = sampler.sample() {
        samples.push(s);
    }
    if !status.success() {
        return Err(Failure::Loadgen(format!(
            "redis-benchmark: {status}: {}",
            bench.stderr_tail()
        )));
    }
    let text = rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|e| io("reading redis-benchmark's output", &e))?;
    let csv = parse_csv(&text).map_err(|e| io("reading redis-benchmark's CSV", &e))?;
    let window = (ended - started).max(1e-3);
    // The server's CPU over every request sent: per second of the whole run.
    let cost = runner::server_cost(
        &baseline,
        &samples,
        (started, ended),
        n as f64 / window,
        point.conns,
    );
    let client_cpu = client_start
        .zip(client_last)
        .map(|(a, b)| (b.cpu_s - a.cpu_s).max(0.0));
    let hist = files.path("hist");
    // An empty histogram, so that the summary finds a file and says no latency was recorded
    // (redis-benchmark's own is in `driver_latency_us`).
    let empty = hdrhistogram::Histogram::<u64>::new(3)
        .map_err(anyhow::Error::from)
        .and_then(|h| stats::encode_histogram(&h))
        .map_err(|e| io("encoding an empty histogram", &e))?;
    std::fs::write(&hist, empty).map_err(|e| io("writing the histogram", &e))?;
    Ok(Measured {
        throughput_per_sec: csv.rps,
        errors: 0,
        delivery_errors: 0,
        deliveries: None,
        delivery_latency_us: None,
        client_cpu_per_msg_us: client_cpu.map_or(0.0, |c| c * 1e6 / n as f64),
        // redis-benchmark is one thread: near a whole CPU, it is what was measured.
        client_bound: client_cpu.is_some_and(|c| c / window > 0.9),
        window_secs: window,
        window_exact: true,
        cost,
        hist,
        counters: None,
        notes: vec![
            "redis-benchmark: its own latency (p50, p95, p99, max), no histogram; the server's CPU over its whole run, connection setup included; replies are not checked".into(),
        ],
        throttle: None,
        driver_latency_us: Some(csv.latency_us),
    })
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suites::{KvDriver, Overrides, Suite};

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
    fn redis_and_kv_owners_serve_kv_only_and_process_mode_no_kv() {
        let kv = Workload::Kv {
            get: true,
            pipeline: 1,
            driver: KvDriver::Loadgen,
        };
        let echo = Workload::Echo {
            msg_size: 16,
            compute_us: 0,
        };
        let redis = variant();
        assert!(redis.serves(kv) && !redis.serves(echo));
        let process = Variant {
            name: "threads-process".into(),
            binary: "srv-threads".into(),
            flags: vec!["--mode".into(), "process".into()],
            about: String::new(),
        };
        assert!(!process.serves(kv) && process.serves(echo));
        let owner = Variant {
            name: "fiber+kv-owner".into(),
            binary: "srv-fiber".into(),
            flags: vec!["--kv-owner".into()],
            about: String::new(),
        };
        assert!(owner.serves(kv) && !owner.serves(echo));
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
