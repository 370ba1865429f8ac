//! What one run of a point yields: its numbers ([`Measured`]) or why it has none
//! ([`Failure`]), and where its files go ([`RunFiles`]). The run layer makes these; the record
//! layer keeps them.
//!
//! It may call the run layer's `cost` and `cgroup` (the parts of a measurement).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::run::cgroup::Throttle;
use crate::run::cost::ServerCost;

/// Why a point has no numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "detail")]
pub(crate) enum Failure {
    /// The server exited or stayed silent before `READY`.
    Start(String),
    /// The server exited while loadgen ran.
    Died(String),
    /// loadgen failed.
    Loadgen(String),
    /// loadgen ran past its deadline and was killed.
    Timeout(String),
    /// Ctrl-C.
    Interrupted,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Start(t) => write!(f, "the server did not start: {t}"),
            Failure::Died(t) => write!(f, "the server died during the run: {t}"),
            Failure::Loadgen(t) => write!(f, "loadgen failed: {t}"),
            Failure::Timeout(t) => write!(f, "timed out: {t}"),
            Failure::Interrupted => f.write_str("interrupted"),
        }
    }
}

/// The binaries of a point.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    pub(crate) server: PathBuf,
    pub(crate) loadgen: PathBuf,
    /// Loadgen agents on other hosts (`--client-hosts`), instead of a local loadgen.
    pub(crate) agents: Option<std::sync::Arc<crate::run::agents::Agents>>,
}

/// One measured run of a point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Measured {
    pub(crate) throughput_per_sec: f64,
    pub(crate) errors: u64,
    pub(crate) delivery_errors: u64,
    pub(crate) deliveries: Option<u64>,
    pub(crate) delivery_latency_us: Option<[f64; 4]>,
    pub(crate) client_cpu_per_msg_us: f64,
    pub(crate) client_bound: bool,
    /// Open loop: the client's send lag p50 and p99, in µs.
    #[serde(default)]
    pub(crate) send_lag_us: Option<[f64; 2]>,
    /// Open loop: whether the client kept its schedule (its self-check), and why not.
    #[serde(default)]
    pub(crate) schedule_ok: Option<bool>,
    #[serde(default)]
    pub(crate) schedule_reason: Option<String>,
    /// Open loop: how the client paced its sends, `spin` or `sleep`.
    #[serde(default)]
    pub(crate) pacing: Option<String>,
    pub(crate) window_secs: f64,
    /// Whether the window's start came from loadgen's interval log (else it is estimated
    /// from when loadgen exited).
    pub(crate) window_exact: bool,
    pub(crate) cost: ServerCost,
    /// loadgen's latency histogram (V2), relative to the run directory.
    pub(crate) hist: PathBuf,
    /// Connections loadgen opened over the run (replacements and idle ones included), and the
    /// idle ones it still held at the window's end (issue 62's churn and idle workloads).
    #[serde(default)]
    pub(crate) connections: Option<[u64; 2]>,
    /// Kv: GETs' p50 and p99 and SETs' p50 and p99, in µs, where the client tells them apart.
    #[serde(default)]
    pub(crate) ops_us: Option<[Option<f64>; 4]>,
    /// The server's counters line, printed at its clean stop.
    pub(crate) counters: Option<String>,
    /// Things that did not spoil the numbers but should be said.
    pub(crate) notes: Vec<String>,
    /// How the CPU quota held the server back, when it ran under one.
    #[serde(default)]
    pub(crate) throttle: Option<Throttle>,
    /// What the server's io_uring rings said of their completion queues (`run::rings`):
    /// completions dropped from its start to the load's end, and whether some waited on the
    /// kernel's overflow list in a sample of the load or after it; `None` for a server
    /// without a ring.
    #[serde(default)]
    pub(crate) cq_overflow: Option<(u64, bool)>,
    /// Latency as a client without histograms reports it (an outside client), in µs: p50,
    /// p95, p99, max.
    #[serde(default)]
    pub(crate) driver_latency_us: Option<[f64; 4]>,
    /// The mean and least latency of an outside client that reports them, in µs (the summary
    /// keeps them per repeat, as `avg_us` and `min_us`).
    #[serde(default)]
    pub(crate) driver_avg_min_us: Option<[f64; 2]>,
}

/// The files of one run of a point, all under `dir`, named after `stem`.
#[derive(Debug, Clone)]
pub(crate) struct RunFiles {
    pub(crate) dir: PathBuf,
    pub(crate) stem: String,
}

impl RunFiles {
    pub(crate) fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.stem))
    }
}
