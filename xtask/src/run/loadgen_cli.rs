//! How the harness drives `loadgen`: the command line of one load point, and what it reads
//! back (the `--json` summary and the start of the measured window, from the interval log).
//! loadgen runs as a child process; of it only its readers of the server's CPU
//! (`loadgen::account`) are linked in, to name them on its command line.
//!
//! It may call the plan layer (the point, its workload, the CPU lists) and the run layer's
//! `cost`.

use std::path::Path;

use anyhow::{Context, Result};
use loadgen::account::CpuSource;
use serde::Deserialize;

use crate::plan::placement::CpuList;
use crate::plan::suites::{Arrivals, Load, Point, Stop, Workload};

/// The output files of one loadgen run.
#[derive(Debug, Clone)]
pub(crate) struct Files<'a> {
    pub(crate) json: &'a Path,
    pub(crate) hist: &'a Path,
    pub(crate) hgrm: &'a Path,
    pub(crate) interval_log: &'a Path,
}

/// The arguments of loadgen for `point` against `addr`, its workers pinned to `cpus`.
pub(crate) fn args(point: &Point, addr: &str, cpus: &CpuList, files: &Files<'_>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    let sub = match point.workload {
        Workload::Echo { .. } | Workload::Idle => "echo",
        Workload::ChatIngest { .. } | Workload::ChatRoom { .. } => "chat",
        Workload::Kv { .. } => "kv",
        Workload::Http { .. } => "http",
    };
    push("--addr", addr.to_string());
    push("--conns", point.conns.to_string());
    let sizes = |one: usize| point.shape.sizes.map_or(one.to_string(), str::to_string);
    match point.workload {
        Workload::Echo { msg_size, .. } => push("--msg-size", sizes(msg_size)),
        Workload::Idle => push("--msg-size", "16".into()),
        Workload::ChatIngest { .. } | Workload::ChatRoom { .. } => {
            push("--msg-size", crate::plan::suites::CHAT_LINE.to_string());
        }
        Workload::Kv { get, pipeline, .. } => {
            push("--value-size", sizes(crate::plan::suites::KV_VALUE_SIZE));
            push("--keys", crate::plan::suites::KV_KEYS.to_string());
            match point.shape.ratio {
                Some((set, get)) => push("--ratio", format!("{set}:{get}")),
                None => push("--get-ratio", if get { "1" } else { "0" }.into()),
            }
            if let Some(dist) = point.shape.key_dist {
                push("--key-dist", dist.into());
            }
            push("--depth", pipeline.to_string());
        }
        Workload::Http { path, pipeline, .. } => {
            push("--path", path.path().to_string());
            push("--depth", pipeline.to_string());
        }
    }
    match point.stop {
        Stop::Requests(k) => push("--requests", k.to_string()),
        Stop::Duration(d) => push("--duration", fmt_secs(d)),
    }
    push("--warmup", fmt_secs(point.warmup));
    if let Load::Open { rate } = point.load {
        push("--rate", format!("{rate}"));
        if point.arrivals != Arrivals::Uniform {
            push("--arrivals", point.arrivals.loadgen_arg());
            if let Some(seed) = point.seed {
                push("--seed", seed.to_string());
            }
        }
    }
    if let Some(r) = point.shape.requests_per_conn {
        push("--requests-per-conn", r.to_string());
    }
    if point.shape.idle_conns > 0 {
        push("--idle-conns", point.shape.idle_conns.to_string());
    }
    // One worker per client CPU, but never more workers than connections.
    let threads = cpus.len().min(point.conns).max(1);
    push("--threads", threads.to_string());
    push("--cpus", cpus.to_string());
    // Bringing up thousands of connections to a server that forks for each one takes time;
    // the default 10 s is for a person at a terminal.
    push(
        "--connect-timeout",
        fmt_secs(10.0 + point.shape.total_conns(point.conns) as f64 / 250.0),
    );
    push("--grace", fmt_secs(grace(point)));
    push("--json", files.json.display().to_string());
    push("--hist", files.hist.display().to_string());
    push("--hgrm", files.hgrm.display().to_string());
    push("--interval-log", files.interval_log.display().to_string());
    match point.workload {
        Workload::ChatIngest { byte_rate } => {
            push("--profile", "ingest".into());
            push("--byte-rate", format!("{byte_rate}"));
        }
        Workload::ChatRoom { room_size } => {
            push("--profile", "room".into());
            push("--room-size", room_size.to_string());
        }
        Workload::Echo { .. } | Workload::Idle | Workload::Kv { .. } | Workload::Http { .. } => {}
    }
    let mut all = vec![sub.to_string()];
    all.extend(a);
    all
}

/// Seconds loadgen waits after the window for replies still owed. With compute per message
/// a server at its bound answers `workers / compute` messages a second, so one message owed
/// on every connection takes `conns × compute / workers` to drain; the grace allows that (as
/// for one worker) on top of loadgen's default 2 s, so that a saturated point is not charged
/// with "unanswered" messages the server was still working through.
fn grace(point: &Point) -> f64 {
    2.0 + point.conns as f64 * point.workload.compute_us() as f64 / 1e6
}

fn fmt_secs(s: f64) -> String {
    format!("{s}")
}

/// Latency percentiles as loadgen writes them, in microseconds (a missing one is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(crate) struct LgPercentiles {
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) p99_9: f64,
    pub(crate) p99_99: f64,
    pub(crate) p99_999: f64,
    pub(crate) max: f64,
}

/// The part of loadgen's `--json` summary the harness uses. The fields beyond the five the
/// command line promises are optional, so that an older or newer loadgen still works.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Summary {
    pub(crate) throughput_per_sec: f64,
    pub(crate) latency_us: LgPercentiles,
    #[serde(deserialize_with = "errors_total")]
    pub(crate) errors: u64,
    pub(crate) client_cpu_per_msg_us: f64,
    pub(crate) client_bound: bool,
    #[serde(default)]
    pub(crate) window_secs: Option<f64>,
    #[serde(default)]
    pub(crate) messages: Option<u64>,
    #[serde(default)]
    pub(crate) connected: Option<u64>,
    #[serde(default)]
    pub(crate) delivery_latency_us: Option<LgPercentiles>,
    #[serde(default)]
    pub(crate) deliveries: Option<u64>,
    /// Chat room profile: subscribers that missed, repeated or reordered a message.
    #[serde(skip)]
    pub(crate) delivery_errors: u64,
    /// The server's CPU over the window, read at its edges (`--server-cgroup`, or
    /// `--server-pid` for its process tree); its source.
    #[serde(default)]
    pub(crate) server_accounting: Option<String>,
    #[serde(default)]
    pub(crate) server_cpu_secs: Option<f64>,
    #[serde(default)]
    pub(crate) server_user_secs: Option<f64>,
    #[serde(default)]
    pub(crate) server_system_secs: Option<f64>,
    /// `--server-cpus`: what those CPUs did over the window.
    #[serde(default)]
    pub(crate) server_cpus: Option<loadgen::account::CpuStates>,
    /// Open loop: how late the client wrote its messages against their due times.
    #[serde(default)]
    pub(crate) send_lag_us: Option<LgPercentiles>,
    /// Open loop: whether the client kept its schedule (loadgen's self-check), and why not.
    #[serde(default)]
    pub(crate) schedule_ok: Option<bool>,
    #[serde(default)]
    pub(crate) schedule_reason: Option<String>,
    /// Open loop: `spin` or `sleep`.
    #[serde(default)]
    pub(crate) pacing: Option<String>,
    /// Connections opened over the run, replacements and idle ones included; the idle ones
    /// still connected at the window's end.
    #[serde(default)]
    pub(crate) connections_opened: Option<u64>,
    #[serde(default)]
    pub(crate) idle_held: Option<u64>,
}

impl Summary {
    /// The server's CPU over the window, where loadgen read it at the edges.
    pub(crate) fn window_cpu(&self) -> Option<crate::run::cost::WindowCpu> {
        Some(crate::run::cost::WindowCpu {
            accounting: self.server_accounting.clone()?,
            cpu_s: self.server_cpu_secs?,
            user_s: self.server_user_secs.unwrap_or(0.0),
            sys_s: self.server_system_secs.unwrap_or(0.0),
            cpus: self.server_cpus,
        })
    }
}

/// `errors` is a number, or an object of counts by kind with a `total`.
fn errors_total<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(match &v {
        serde_json::Value::Number(n) => n.as_u64().unwrap_or(0),
        serde_json::Value::Object(m) => m
            .get("total")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| {
                m.iter()
                    .filter(|(k, _)| k.as_str() != "stalled")
                    .filter_map(|(_, v)| v.as_u64())
                    .sum()
            }),
        _ => 0,
    })
}

/// The flags that tell loadgen where to read the server's side at the window's edges: its
/// CPU counter (its cgroup, or its process tree) and its CPUs' states. Only for a loadgen on
/// the server's host.
pub(crate) fn server_side(counter: &CpuSource, server_cpus: &CpuList) -> Vec<String> {
    let mut a = match counter {
        CpuSource::Cgroup(dir) => vec!["--server-cgroup".into(), dir.display().to_string()],
        CpuSource::Tree(pid) => vec!["--server-pid".into(), pid.to_string()],
    };
    a.extend(["--server-cpus".into(), server_cpus.to_string()]);
    a
}

/// The flags of [`server_side`], which a loadgen on another host must not get.
pub(crate) const SERVER_SIDE_FLAGS: [&str; 3] =
    ["--server-cgroup", "--server-pid", "--server-cpus"];

/// `args` without the flags named (each with its value): a command line for a loadgen that
/// writes no files of its own and is placed by someone else.
pub(crate) fn without(args: &[String], flags: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if flags.contains(&a.as_str()) {
            it.next();
        } else {
            out.push(a.clone());
        }
    }
    out
}

/// Parses loadgen's `--json` summary.
pub(crate) fn parse_summary(text: &str) -> Result<Summary> {
    let mut s: Summary = serde_json::from_str(text).context("reading loadgen's JSON summary")?;
    let v: serde_json::Value = serde_json::from_str(text)?;
    s.delivery_errors = v
        .pointer("/errors/delivery")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    Ok(s)
}

/// The start of the measured window, in seconds since the epoch, from the `StartTime` line of
/// an HdrHistogram interval log.
pub(crate) fn window_start(interval_log: &str) -> Option<f64> {
    interval_log.lines().find_map(|l| {
        l.strip_prefix("#[StartTime: ")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_promised_fields_and_the_error_total() {
        let text = r#"{
            "throughput_per_sec": 12345.5,
            "latency_us": {"p50": 10.0, "p90": 20.0, "p99": 30.0, "p99_9": 40.0,
                           "p99_99": 50.0, "p99_999": 60.0, "max": 70.0, "count": 3},
            "errors": {"total": 2, "reset": 1, "delivery": 1, "stalled": 9},
            "client_cpu_per_msg_us": 1.5,
            "client_bound": true,
            "window_secs": 4.0,
            "something_new": [1, 2]
        }"#;
        let s = parse_summary(text).unwrap();
        assert_eq!(s.throughput_per_sec, 12345.5);
        assert_eq!(s.latency_us.p99_999, 60.0);
        assert_eq!(s.errors, 2);
        assert_eq!(s.delivery_errors, 1);
        assert!(s.client_bound);
        assert_eq!(s.window_secs, Some(4.0));
        let plain = r#"{"throughput_per_sec": 1, "latency_us": {}, "errors": 3,
                        "client_cpu_per_msg_us": 0, "client_bound": false}"#;
        assert_eq!(parse_summary(plain).unwrap().errors, 3);
        assert!(parse_summary("{}").is_err());
    }

    #[test]
    fn the_grace_covers_draining_one_message_per_connection() {
        let point = |conns, compute_us| Point {
            suite: crate::plan::suites::Suite::EmperEcho,
            series: "work-200us".into(),
            id: "c".into(),
            label: "c".into(),
            conns,
            workload: Workload::Echo {
                msg_size: 16,
                compute_us,
            },
            load: Load::Closed,
            stop: Stop::Duration(4.0),
            warmup: 1.0,
            workers: None,
            arrivals: crate::plan::suites::Arrivals::Uniform,
            seed: None,
            shape: crate::plan::suites::Shape::default(),
        };
        assert_eq!(grace(&point(1000, 0)), 2.0);
        assert!((grace(&point(10_000, 200)) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn poisson_arrivals_and_their_seed_reach_loadgen() {
        let point = |arrivals, seed| Point {
            suite: crate::plan::suites::Suite::Capacity,
            series: "echo".into(),
            id: "echo-03-r500".into(),
            label: "echo @ 500/s".into(),
            conns: 10,
            workload: Workload::Echo {
                msg_size: 16,
                compute_us: 0,
            },
            load: Load::Open { rate: 500.0 },
            stop: Stop::Duration(1.0),
            warmup: 0.3,
            workers: None,
            arrivals,
            seed,
            shape: crate::plan::suites::Shape::default(),
        };
        let p = Path::new("x");
        let files = Files {
            json: p,
            hist: p,
            hgrm: p,
            interval_log: p,
        };
        let cpus = CpuList::one(0);
        let a = args(&point(Arrivals::Poisson, Some(4)), "h:1", &cpus, &files).join(" ");
        assert!(a.contains("--rate 500 --arrivals poisson --seed 4"), "{a}");
        let a = args(&point(Arrivals::Uniform, Some(4)), "h:1", &cpus, &files).join(" ");
        assert!(!a.contains("--arrivals") && !a.contains("--seed"), "{a}");
    }

    #[test]
    fn kv_points_become_loadgen_kv() {
        let points =
            crate::plan::suites::Suite::Kv.points(&crate::plan::suites::Overrides::default());
        let p = points
            .iter()
            .find(|p| p.id == "loadgen-set-p16-c50")
            .unwrap();
        let f = Path::new("f");
        let files = Files {
            json: f,
            hist: f,
            hgrm: f,
            interval_log: f,
        };
        let a = args(p, "127.0.0.1:9", &CpuList::one(0), &files);
        assert_eq!(a[0], "kv");
        let line = a.join(" ");
        for want in [
            "--conns 50",
            "--value-size 32",
            "--keys 100000",
            "--get-ratio 0",
            "--depth 16",
        ] {
            assert!(line.contains(want), "{want} not in {line}");
        }
        assert!(!line.contains("--msg-size"), "{line}");
    }

    #[test]
    fn http_points_become_loadgen_http() {
        let points =
            crate::plan::suites::Suite::Http.points(&crate::plan::suites::Overrides::default());
        let f = Path::new("f");
        let files = Files {
            json: f,
            hist: f,
            hgrm: f,
            interval_log: f,
        };
        for (id, want) in [
            ("loadgen-plaintext-p16-c256", "--path /plaintext --depth 16"),
            ("loadgen-json-p1-c16", "--path /json --depth 1"),
            ("loadgen-json-open-c256", "--rate 10000"),
        ] {
            let p = points.iter().find(|p| p.id == id).unwrap();
            let a = args(p, "127.0.0.1:9", &CpuList::one(0), &files);
            assert_eq!(a[0], "http");
            let line = a.join(" ");
            assert!(line.contains(want), "{want} not in {line}");
        }
    }

    #[test]
    fn issue_62s_knobs_reach_loadgen_and_loadgen_takes_every_point() {
        use clap::Parser as _;
        use crate::plan::suites::{Overrides, Suite};
        let f = Path::new("f");
        let files = Files {
            json: f,
            hist: f,
            hgrm: f,
            interval_log: f,
        };
        let o = Overrides {
            workers: 1,
            ..Overrides::default()
        };
        let line = |suite: Suite, id: &str| {
            let points = suite.points(&o);
            let p = points.iter().find(|p| p.id == id).unwrap();
            args(p, "127.0.0.1:9", &CpuList::one(0), &files).join(" ")
        };
        for (suite, id, want) in [
            (Suite::Churn, "r1-c64", "echo --addr 127.0.0.1:9 --conns 64 --msg-size 16"),
            (Suite::Churn, "r10-c4096", "--requests-per-conn 10 --threads 1"),
            (Suite::Churn, "kv-loadgen-r1-c50", "--get-ratio 1 --depth 1"),
            (Suite::Churn, "kv-loadgen-r1-c50", "--requests-per-conn 1"),
            (Suite::Idle, "active-10-c1000", "--conns 100 --msg-size 16"),
            (Suite::Idle, "active-10-c1000", "--rate 10000 --idle-conns 900"),
            (Suite::Sizes, "echo-mix-c64", "--msg-size 64:95,64K:5"),
            (Suite::Sizes, "echo-1MiB-c64", "--msg-size 1048576"),
            (Suite::Sizes, "kv-loadgen-64KiB-c50", "--value-size 65536"),
            (Suite::Bursts, "onoff-l70-c100", "--rate 28000 --arrivals onoff:10:10"),
            (Suite::Bursts, "pareto-l50-c100", "--arrivals pareto:0.154971"),
            (Suite::Skew, "set1-get30-zipf0.99-c50", "--ratio 1:30 --key-dist zipf:0.99"),
        ] {
            let l = line(suite, id);
            assert!(l.contains(want), "{id}: {want} not in {l}");
        }
        assert!(!line(Suite::Churn, "keep-alive-c64").contains("--requests-per-conn"));
        assert!(!line(Suite::Skew, "set1-get1-uniform-c50").contains("--get-ratio"));
        // The connect timeout counts the idle connections too.
        assert!(line(Suite::Idle, "quiet-c10000").contains("--connect-timeout 50"));
        // loadgen itself accepts the command line of every point these suites run.
        for suite in [Suite::Churn, Suite::Idle, Suite::Sizes, Suite::Bursts, Suite::Skew] {
            for p in suite.points(&o).iter().filter(|p| p.workload.outside_client().is_none()) {
                let mut a = vec!["loadgen".to_string()];
                a.extend(args(p, "127.0.0.1:9", &CpuList::one(0), &files));
                let cli = loadgen::cli::Cli::try_parse_from(&a)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.id));
                assert!(cli.config().is_ok(), "{}: {:?}", p.id, cli.config().err());
            }
        }
    }

    #[test]
    fn finds_the_window_start() {
        let log = "#[Logged with loadgen 0.0.0]\n#[Histogram log format version 1.3]\n\
                   #[StartTime: 1700000000.250 (seconds since epoch)]\n";
        assert_eq!(window_start(log), Some(1_700_000_000.25));
        assert_eq!(window_start("nothing"), None);
    }
}
