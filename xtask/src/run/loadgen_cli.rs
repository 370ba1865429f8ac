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
    /// Kv: the latency of GETs and of SETs apart.
    #[serde(default)]
    pub(crate) get_latency_us: Option<LgPercentiles>,
    #[serde(default)]
    pub(crate) set_latency_us: Option<LgPercentiles>,
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
mod tests;
