//! A row of the summary: one server at one load point, the line of `summary.csv`; its
//! columns, and the lookups the report and the plots make over the rows.
//!
//! It may call the record layer's `counted` (the anatomy columns, flattened into the row).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One server at one load point: the line of `summary.csv`.
///
/// A number over repeats is their median; `<metric>_ci_low` and `<metric>_ci_high` are the
/// order-statistic interval for that median (`stats::median_interval`), whose coverage is
/// `ci_level`. Latency percentiles are read off the repeats' histograms added together; their
/// intervals come from each repeat's own percentile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Row {
    pub(crate) suite: String,
    pub(crate) server: String,
    pub(crate) series: String,
    pub(crate) point: String,
    pub(crate) label: String,
    /// Connections, room size for chat-room, workers for scaling: the x axis of the suite's
    /// plots.
    pub(crate) x: f64,
    pub(crate) conns: usize,
    /// The server's workers at a point with its own count (the scaling suite), else `None`:
    /// the run's (`workers` in meta.json).
    pub(crate) workers: Option<usize>,
    /// `closed` or `open`.
    pub(crate) mode: String,
    pub(crate) rate: Option<f64>,
    /// Open loop: how the sends were spaced, `uniform` or `poisson`.
    pub(crate) arrivals: Option<String>,
    /// The capacity suite: the latency objective its probes were judged by (`p99=5ms`).
    pub(crate) slo: Option<String>,
    pub(crate) compute_us: u64,
    pub(crate) room_size: Option<usize>,
    /// `4 s` or `2500 req/conn`.
    pub(crate) stop: String,
    pub(crate) repeats: usize,
    /// Repeats that produced numbers.
    pub(crate) ok: usize,
    pub(crate) failure: Option<String>,
    pub(crate) throughput_per_sec: Option<f64>,
    /// (max - min) / median of throughput over the repeats.
    pub(crate) throughput_spread: Option<f64>,
    /// How often an interval made as the `_ci_` ones are covers the true median (0.75 with 3
    /// repeats, 0.9375 with 5, 0.95 or more from 6).
    pub(crate) ci_level: Option<f64>,
    pub(crate) throughput_per_sec_ci_low: Option<f64>,
    pub(crate) throughput_per_sec_ci_high: Option<f64>,
    pub(crate) p50_us: Option<f64>,
    pub(crate) p90_us: Option<f64>,
    pub(crate) p95_us: Option<f64>,
    pub(crate) p99_us: Option<f64>,
    pub(crate) p99_9_us: Option<f64>,
    pub(crate) p99_99_us: Option<f64>,
    pub(crate) p99_999_us: Option<f64>,
    pub(crate) max_us: Option<f64>,
    pub(crate) p50_us_ci_low: Option<f64>,
    pub(crate) p50_us_ci_high: Option<f64>,
    pub(crate) p90_us_ci_low: Option<f64>,
    pub(crate) p90_us_ci_high: Option<f64>,
    pub(crate) p95_us_ci_low: Option<f64>,
    pub(crate) p95_us_ci_high: Option<f64>,
    pub(crate) p99_us_ci_low: Option<f64>,
    pub(crate) p99_us_ci_high: Option<f64>,
    pub(crate) p99_9_us_ci_low: Option<f64>,
    pub(crate) p99_9_us_ci_high: Option<f64>,
    pub(crate) p99_99_us_ci_low: Option<f64>,
    pub(crate) p99_99_us_ci_high: Option<f64>,
    pub(crate) p99_999_us_ci_low: Option<f64>,
    pub(crate) p99_999_us_ci_high: Option<f64>,
    pub(crate) errors: u64,
    pub(crate) client_bound: bool,
    pub(crate) client_cpu_per_msg_us: Option<f64>,
    /// Open loop: how late the client wrote its messages against their due times, p50 and
    /// p99 in µs (median of the repeats; each repeat's in `per_repeat`).
    pub(crate) send_lag_p50_us: Option<f64>,
    pub(crate) send_lag_p99_us: Option<f64>,
    /// Open loop: whether the client kept its schedule in every repeat (loadgen's
    /// self-check). Where it did not, the latency is the client's as much as the server's:
    /// it is marked, and it is never a verdict nor a capacity.
    pub(crate) schedule_ok: Option<bool>,
    /// Why not, from the first repeat that did not keep it.
    pub(crate) schedule_reason: Option<String>,
    /// Open loop: how the client paced its sends, `spin` or `sleep`.
    pub(crate) pacing: Option<String>,
    pub(crate) cpu_mean_pct: Option<f64>,
    pub(crate) cpu_cv: Option<f64>,
    pub(crate) user_us_per_req: Option<f64>,
    pub(crate) sys_us_per_req: Option<f64>,
    pub(crate) cpu_us_per_req: Option<f64>,
    pub(crate) cpu_us_per_req_ci_low: Option<f64>,
    pub(crate) cpu_us_per_req_ci_high: Option<f64>,
    /// The lowest CPU per request of the repeats: noise on a shared host only ever adds CPU
    /// time, so the lowest is the steadiest estimate of the cost itself.
    pub(crate) cpu_us_per_req_min: Option<f64>,
    pub(crate) vol_cs_per_req: Option<f64>,
    pub(crate) invol_cs_per_req: Option<f64>,
    pub(crate) vol_cs_per_sec: Option<f64>,
    pub(crate) invol_cs_per_sec: Option<f64>,
    pub(crate) peak_mem_bytes: Option<f64>,
    pub(crate) mem_per_conn_bytes: Option<f64>,
    /// Growth of the kernel's thread stacks (`KernelStack` of /proc/meminfo) per connection.
    pub(crate) kernel_stack_per_conn_bytes: Option<f64>,
    /// Growth of TCP socket memory (`/proc/net/sockstat` `mem` pages) per connection: both
    /// ends of each loopback connection, loadgen's included.
    pub(crate) socket_mem_per_conn_bytes: Option<f64>,
    /// User memory, kernel stacks and socket memory per connection together.
    pub(crate) total_mem_per_conn_bytes: Option<f64>,
    pub(crate) max_procs: usize,
    pub(crate) max_threads: usize,
    /// What else used the server's CPUs during the window, percent of one CPU: their busy
    /// time less their interrupt and softirq time (on loopback mostly the benchmark's own
    /// traffic) less the server's own CPU time.
    pub(crate) other_load_pct: Option<f64>,
    /// Softirq and interrupt time on the server's CPUs during the window, percent of one CPU
    /// (median of repeats): on loopback, mostly the peer's receive path, which the kernel
    /// runs on the sender's CPU. On a kernel without IRQ time accounting it is inside the
    /// CPU time of the task it interrupted, the server's own included.
    #[serde(default)]
    pub(crate) irq_softirq_pct: Option<f64>,
    /// What the CPU figures come from: `cgroup v1`, `cgroup v2` or `process tree` (read at the
    /// window's edges), `samples` (interpolated from the live threads' samples, which loses
    /// what exiting threads and processes used: a run from before cgroups); `mixed` where the
    /// repeats differ.
    #[serde(default)]
    pub(crate) cpu_accounting: Option<String>,
    /// Time stolen by the hypervisor from the server's CPUs over the window, percent of the
    /// window (the most of any repeat).
    pub(crate) steal_pct: Option<f64>,
    /// The same, the median of the repeats: what decides whether the point was disturbed
    /// (`Row::disturbed`), where one stolen repeat of five is only one value of the verdicts'
    /// model.
    #[serde(default)]
    pub(crate) steal_median_pct: Option<f64>,
    /// The server's CPU quota (`--server-cpu-quota`), in CPUs.
    pub(crate) cpu_quota: Option<f64>,
    /// Periods in which the quota throttled the server, over the point (median of repeats).
    pub(crate) nr_throttled: Option<f64>,
    /// Time the quota held the server back, milliseconds over the point (median of repeats).
    pub(crate) throttled_ms: Option<f64>,
    /// io_uring servers (`run::rings`): completions the kernel dropped from the server's
    /// start to the load's end, the most of any repeat; `None` for a server without a ring,
    /// or where its memory could not be read.
    #[serde(default)]
    pub(crate) cq_dropped: Option<u64>,
    /// io_uring servers: the repeats during or after whose load some ring of the server had
    /// completions on the kernel's overflow list (its completion queue overflowed), as the
    /// samples and the reading after the load saw it.
    #[serde(default)]
    pub(crate) cq_backlog_repeats: Option<usize>,
    pub(crate) deliveries: Option<f64>,
    pub(crate) delivery_errors: u64,
    pub(crate) delivery_p50_us: Option<f64>,
    pub(crate) delivery_p99_us: Option<f64>,
    pub(crate) delivery_p99_9_us: Option<f64>,
    pub(crate) delivery_max_us: Option<f64>,
    /// Issue 62's workloads (`record::workloads`): requests a connection carried before the
    /// client closed it (`None`: the run), idle connections beside the active ones, the mix of
    /// sizes or the value size, the kv key distribution and SET:GET mix.
    pub(crate) requests_per_conn: Option<u64>,
    pub(crate) idle_conns: Option<usize>,
    pub(crate) sizes: Option<String>,
    pub(crate) key_dist: Option<String>,
    pub(crate) ratio: Option<String>,
    /// Mean payload bytes of a request: the echo message, the kv value.
    pub(crate) msg_bytes: Option<f64>,
    /// Connections loadgen opened over the run, warmup and replacements included (median of
    /// the repeats), and the idle ones still held at the window's end.
    pub(crate) connections_opened: Option<f64>,
    pub(crate) idle_held: Option<f64>,
    /// The server's own count of the connections it accepted and closed, from its stop line
    /// (`accepted=… closed=…`; median of the repeats): that churned connections closed.
    pub(crate) server_accepted: Option<f64>,
    pub(crate) server_closed: Option<f64>,
    /// Kv: GETs' and SETs' latency apart, p50 and p99 in µs (median of the repeats), where
    /// the client told them apart (loadgen).
    pub(crate) get_p50_us: Option<f64>,
    pub(crate) get_p99_us: Option<f64>,
    pub(crate) set_p50_us: Option<f64>,
    pub(crate) set_p99_us: Option<f64>,
    /// The latency histogram of all repeats, relative to the run directory.
    pub(crate) hist: Option<String>,
    /// What the kernel counted for the server per request (`record::counted`).
    #[serde(flatten)]
    pub(crate) counted: crate::record::counted::Counted,
    pub(crate) notes: Vec<String>,
    /// CPU percent over time (seconds from the window's start) of the median repeat.
    pub(crate) cpu_series: Vec<(f64, f64)>,
    /// Each metric's value in each repeat (`throughput_per_sec`, `cpu_us_per_req`, `p99_us`,
    /// ...), for the significance tests between rows; in summary.json only.
    pub(crate) per_repeat: BTreeMap<String, Vec<f64>>,
    /// Each of `record::rounds::PAIRED_METRICS` and `TAIL_METRICS` (p99 and p99.9) by round,
    /// `null` where the round gave no value, for the verdicts' model of server plus round
    /// (`record::verdict`); in summary.json only.
    pub(crate) per_round: BTreeMap<String, Vec<Option<f64>>>,
}

/// The columns of `summary.csv`, in order: every scalar field of [`Row`].
pub(crate) const CSV_COLUMNS: &[&str] = &[
    "suite",
    "server",
    "series",
    "point",
    "label",
    "x",
    "conns",
    "workers",
    "mode",
    "rate",
    "arrivals",
    "slo",
    "compute_us",
    "room_size",
    "stop",
    "repeats",
    "ok",
    "failure",
    "throughput_per_sec",
    "throughput_spread",
    "ci_level",
    "throughput_per_sec_ci_low",
    "throughput_per_sec_ci_high",
    "p50_us",
    "p90_us",
    "p95_us",
    "p99_us",
    "p99_9_us",
    "p99_99_us",
    "p99_999_us",
    "max_us",
    "p50_us_ci_low",
    "p50_us_ci_high",
    "p90_us_ci_low",
    "p90_us_ci_high",
    "p95_us_ci_low",
    "p95_us_ci_high",
    "p99_us_ci_low",
    "p99_us_ci_high",
    "p99_9_us_ci_low",
    "p99_9_us_ci_high",
    "p99_99_us_ci_low",
    "p99_99_us_ci_high",
    "p99_999_us_ci_low",
    "p99_999_us_ci_high",
    "errors",
    "client_bound",
    "client_cpu_per_msg_us",
    "send_lag_p50_us",
    "send_lag_p99_us",
    "schedule_ok",
    "schedule_reason",
    "pacing",
    "cpu_mean_pct",
    "cpu_cv",
    "user_us_per_req",
    "sys_us_per_req",
    "cpu_us_per_req",
    "cpu_us_per_req_ci_low",
    "cpu_us_per_req_ci_high",
    "cpu_us_per_req_min",
    "vol_cs_per_req",
    "invol_cs_per_req",
    "vol_cs_per_sec",
    "invol_cs_per_sec",
    "peak_mem_bytes",
    "mem_per_conn_bytes",
    "kernel_stack_per_conn_bytes",
    "socket_mem_per_conn_bytes",
    "total_mem_per_conn_bytes",
    "max_procs",
    "max_threads",
    "other_load_pct",
    "irq_softirq_pct",
    "cpu_accounting",
    "steal_pct",
    "cpu_quota",
    "nr_throttled",
    "throttled_ms",
    "cq_dropped",
    "cq_backlog_repeats",
    "deliveries",
    "delivery_errors",
    "delivery_p50_us",
    "delivery_p99_us",
    "delivery_p99_9_us",
    "delivery_max_us",
    "requests_per_conn",
    "idle_conns",
    "sizes",
    "key_dist",
    "ratio",
    "msg_bytes",
    "connections_opened",
    "idle_held",
    "server_accepted",
    "server_closed",
    "get_p50_us",
    "get_p99_us",
    "set_p50_us",
    "set_p99_us",
    "hist",
    "syscalls_per_req",
    "syscalls_per_req_ci_low",
    "syscalls_per_req_ci_high",
    "context_switches_per_req",
    "context_switches_per_req_ci_low",
    "context_switches_per_req_ci_high",
    "voluntary_switches_per_req",
    "voluntary_switches_per_req_ci_low",
    "voluntary_switches_per_req_ci_high",
    "involuntary_switches_per_req",
    "involuntary_switches_per_req_ci_low",
    "involuntary_switches_per_req_ci_high",
    "migrations_per_req",
    "migrations_per_req_ci_low",
    "migrations_per_req_ci_high",
    "page_faults_per_req",
    "page_faults_per_req_ci_low",
    "page_faults_per_req_ci_high",
    "instructions_per_req",
    "instructions_per_req_ci_low",
    "instructions_per_req_ci_high",
    "cycles_per_req",
    "cycles_per_req_ci_low",
    "cycles_per_req_ci_high",
    "llc_misses_per_req",
    "llc_misses_per_req_ci_low",
    "llc_misses_per_req_ci_high",
    "dtlb_misses_per_req",
    "dtlb_misses_per_req_ci_low",
    "dtlb_misses_per_req_ci_high",
    "ipc",
    "syscalls_by_name",
    "counters_unavailable",
    "counted_apart",
];

pub(crate) fn csv_field(v: &serde_json::Value) -> String {
    let s = match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// Percent of one CPU that something else may take from the server's CPUs before a point is
/// disturbed (‡).
pub(crate) const DISTURBED_PCT: f64 = 10.0;

/// Percent of the window the hypervisor may steal from the server's CPUs, in the median
/// repeat, before a point is disturbed (‡).
pub(crate) const STEAL_PCT: f64 = 10.0;

impl Row {
    /// The latency `percentile` (one of `plan::capacity::PERCENTILES`, as `--slo` names
    /// them), in µs.
    pub(crate) fn latency(&self, percentile: &str) -> Option<f64> {
        match percentile {
            "p50" => self.p50_us,
            "p90" => self.p90_us,
            "p95" => self.p95_us,
            "p99" => self.p99_us,
            "p99.9" => self.p99_9_us,
            "p99.99" => self.p99_99_us,
            "max" => self.max_us,
            _ => None,
        }
    }

    /// Something other than the server took its CPUs during the window (‡): another program
    /// (or kernel work charged to no task; the server's own interrupts and softirqs are not
    /// counted, `run::cost`) used more than [`DISTURBED_PCT`] of a CPU there, or the
    /// hypervisor stole more than [`STEAL_PCT`] of their time in the median repeat. The one
    /// test behind the mark ‡: a point it holds for is marked ‡ in every table and judged in
    /// no column and by no gate, whatever the metric.
    ///
    /// A little steal does not count: with the hypervisor's steal accounting
    /// (`CONFIG_PARAVIRT_TIME_ACCOUNTING`, on every common guest kernel) the scheduler's task
    /// clock, and so the cgroup's counter, leaves stolen time out. Much steal does, indirectly:
    /// a server descheduled that often comes back to cold caches, and on a 2-CPU EPYC guest
    /// the CPU per echo at one connection doubled at 30–40% steal. One stolen repeat of five
    /// is one value of the verdicts' model, hence the median.
    pub(crate) fn disturbed(&self) -> bool {
        self.other_load_pct.is_some_and(|p| p > DISTURBED_PCT)
            || self.steal_median_pct.is_some_and(|p| p > STEAL_PCT)
    }

    /// Its CPU figures are not exact: interpolated from samples of the live threads (a run
    /// from before each server had its cgroup), or mixed with such repeats.
    pub(crate) fn cpu_inexact(&self) -> bool {
        matches!(self.cpu_accounting.as_deref(), Some("samples" | "mixed"))
    }

    /// The quota held the server back during the point: its latency includes throttling.
    pub(crate) fn throttled(&self) -> bool {
        self.nr_throttled.is_some_and(|n| n > 0.0)
    }

    /// Completions overflowed the server's io_uring completion queue (⊘): some waited on the
    /// kernel's overflow list during or after the load in some repeat (each took the kernel's slow
    /// path), or the kernel dropped some.
    pub(crate) fn overflowed(&self) -> bool {
        self.cq_dropped.is_some_and(|n| n > 0) || self.cq_backlog_repeats.is_some_and(|n| n > 0)
    }

    /// The load generator did not keep its schedule here: the point's latency is the
    /// client's, not the server's (`schedule_ok` false).
    pub(crate) fn schedule_missed(&self) -> bool {
        self.schedule_ok == Some(false)
    }

    /// The values of `metric` in each repeat.
    pub(crate) fn repeats_of(&self, metric: &str) -> &[f64] {
        self.per_repeat.get(metric).map_or(&[], Vec::as_slice)
    }

    /// The values of `metric` in each round (`None` where the round gave none).
    pub(crate) fn rounds_of(&self, metric: &str) -> &[Option<f64>] {
        self.per_round.get(metric).map_or(&[], Vec::as_slice)
    }
}

// ---------------------------------------------------------------------------------------------
// Selecting rows.

/// The servers of the rows, in the order they ran.
pub(crate) fn servers(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.server) {
            out.push(r.server.clone());
        }
    }
    out
}

/// The servers of the rows that ran at least one of them: a server that sat the points out
/// (srv-floor at kv or http; rows of older runs kept it with no repeat) is left out.
pub(crate) fn servers_that_ran(rows: &[Row]) -> Vec<String> {
    servers(rows)
        .into_iter()
        .filter(|s| rows.iter().any(|r| &r.server == s && r.repeats > 0))
        .collect()
}

/// The rows of the servers that ran (`servers_that_ran`).
pub(crate) fn rows_of_servers_that_ran(rows: &[Row]) -> Vec<Row> {
    let ran = servers_that_ran(rows);
    rows.iter()
        .filter(|r| ran.contains(&r.server))
        .cloned()
        .collect()
}

pub(crate) fn find<'a>(rows: &'a [Row], suite: &str, server: &str, point: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.suite == suite && r.server == server && r.point == point)
}

/// The distinct points of a suite and series, in x order: `(point id, label, x)`.
pub(crate) fn points_of(rows: &[Row], suite: &str, series: &str) -> Vec<(String, String, f64)> {
    let mut seen: Vec<(String, String, f64)> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.suite == suite && r.series == series)
    {
        if !seen.iter().any(|p| p.0 == r.point) {
            seen.push((r.point.clone(), r.label.clone(), r.x));
        }
    }
    seen.sort_by(|a, b| a.2.total_cmp(&b.2));
    seen
}

#[cfg(test)]
pub(crate) mod tests;
