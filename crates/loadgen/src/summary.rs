//! What a run reports: the [`Summary`] (serialized as the `--json` file) and its human form.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::account::CpuStates;
use crate::error::{Fault, FaultCounts};
use crate::hist::{Histograms, Percentiles};

/// Everything a run measured. Serializes to the `--json` schema; times are microseconds. An
/// agent sends it to its fleet the same way (its histograms go beside it, encoded).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// `echo`, `chat`, `kv` or `http`.
    pub workload: String,
    /// The chat profile, `ingest` or `room`; absent for echo and kv.
    pub profile: Option<String>,
    /// kv: the share of requests that were `GET`s.
    pub get_ratio: Option<f64>,
    /// kv: the size of the key space.
    pub keys: Option<u64>,
    /// http: the path requested, `/plaintext` or `/json`.
    pub path: Option<String>,
    /// The server address, resolved.
    pub addr: String,
    /// Connections asked for.
    pub conns: usize,
    /// Connections that came up.
    pub connected: usize,
    /// Worker threads.
    pub threads: usize,
    /// CPUs the workers were pinned to; empty if not pinned.
    pub cpus: Vec<usize>,
    /// Bytes per message (echo), per `SAY` line (chat) or per value (kv); for a mix of
    /// sizes, their mean, rounded.
    pub msg_size: usize,
    /// A mix of sizes, as `--msg-size` (or `--value-size`) gave it: `64:95,65536:5`; absent
    /// for one size.
    #[serde(default)]
    pub msg_sizes: Option<String>,
    /// Messages in flight per connection, at most.
    pub depth: usize,
    /// `closed` or `open`.
    pub mode: String,
    /// Open loop: messages per second asked for, in total.
    pub rate: Option<f64>,
    /// Open loop: `uniform`, `poisson`, `onoff:ON_MS:OFF_MS` or `pareto:SHAPE`
    /// (`--arrivals`).
    #[serde(default)]
    pub arrivals: Option<String>,
    /// Open loop: how the workers waited between sends, `spin` or `sleep` (`--pacing`).
    #[serde(default)]
    pub pacing: Option<String>,
    /// Measured messages per connection, for request-count runs.
    pub requests_per_conn: Option<u64>,
    /// `--requests-per-conn`: requests a connection carried before the client closed it and
    /// opened a fresh one; absent where connections last the run.
    #[serde(default)]
    pub reconnect_after: Option<u64>,
    /// Connections opened over the run: the first ones, the idle ones and every
    /// replacement.
    #[serde(default)]
    pub connections_opened: u64,
    /// `--idle-conns`: connections held open and silent beside the active ones.
    #[serde(default)]
    pub idle_conns: usize,
    /// Idle connections that came up before the clock started.
    #[serde(default)]
    pub idle_connected: usize,
    /// Idle connections still open at the end of the run (the others faulted: the server
    /// closed them or sent them bytes).
    #[serde(default)]
    pub idle_held: usize,
    /// kv: how the keys were drawn, `uniform` or `zipf:S`.
    #[serde(default)]
    pub key_dist: Option<String>,
    /// Warmup before the window, not recorded.
    pub warmup_secs: f64,
    /// Length of the measured window: `--duration`, or until the last measured reply.
    pub window_secs: f64,
    /// Measured messages whose reply arrived.
    pub messages: u64,
    /// `messages / window_secs`.
    pub throughput_per_sec: f64,
    /// Messages sent over the whole run, warmup included.
    pub sent_total: u64,
    /// Replies received over the whole run, warmup included.
    pub replies_total: u64,
    /// Bytes written to the server over the whole run.
    pub bytes_sent: u64,
    /// Bytes read from the server over the whole run.
    pub bytes_received: u64,
    /// Latency: from the due time in the open loop (coordinated omission counted), from the
    /// send time in the closed loop.
    pub latency_us: Percentiles,
    /// Service time: from the write of a message to its reply.
    pub service_time_us: Percentiles,
    /// Chat room profile: from a `SAY` to each other member's `MSG`.
    pub delivery_latency_us: Option<Percentiles>,
    /// Kv: the latency of GETs and of SETs apart (from the due time, as `latency_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub get_latency_us: Option<Percentiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_latency_us: Option<Percentiles>,
    /// Chat room profile: measured `MSG` deliveries (each message reaches every other
    /// member of its room).
    pub deliveries: u64,
    /// Faults by kind.
    pub errors: Errors,
    /// CPU time of the worker threads over the measured window; where they spin (`pacing`
    /// `spin`), the time they spent working, since a spinning thread's CPU time is all of
    /// its wall time.
    pub client_cpu_secs: f64,
    /// `client_cpu_secs` per measured message, in microseconds.
    pub client_cpu_per_msg_us: f64,
    /// The busiest worker's CPU time (spinning: its work) over its window, as a fraction of
    /// one CPU.
    pub client_cpu_utilization: f64,
    /// How busy the `--cpus` were over the window, whatever ran on them (from `/proc/stat`);
    /// absent where the workers spin.
    pub client_cpus_busy: Option<f64>,
    /// Open loop: measured messages the client released more than 1 ms after they were due
    /// (its worker was busy or not scheduled), and so sent late through its own fault.
    #[serde(default)]
    pub sends_late: u64,
    /// Open loop: how long after its due time the client released each measured message,
    /// its percentiles: the part of the latency that is the client's own delay (for merged
    /// agents, each percentile the most of any agent's).
    #[serde(default)]
    pub send_lag_us: Option<Percentiles>,
    /// The client, not the server, was the bottleneck: a worker or its CPUs were more than
    /// 90% busy.
    pub client_bound: bool,
    /// Open loop: whether the client kept its schedule (the self-check: send lag, the
    /// achieved gaps against the intended, Poisson gaps against the exponential); where it
    /// did not, the point's latency is the client's as much as the server's.
    #[serde(default)]
    pub schedule_ok: Option<bool>,
    /// Why the schedule was not kept, in words.
    #[serde(default)]
    pub schedule_reason: Option<String>,
    /// The self-check's figures.
    #[serde(default)]
    pub schedule_check: Option<crate::selfcheck::ScheduleCheck>,
    /// What the server's CPU was read from (`cgroup v2`, `cgroup v1`, `process tree`), where
    /// it was read.
    #[serde(default)]
    pub server_accounting: Option<String>,
    /// The server's CPU time (every thread and process it ever had) over the measured window.
    pub server_cpu_secs: Option<f64>,
    /// Of it, in user mode.
    #[serde(default)]
    pub server_user_secs: Option<f64>,
    /// Of it, in the kernel.
    #[serde(default)]
    pub server_system_secs: Option<f64>,
    /// `--server-cpus`: what those CPUs did over the window, interrupts and softirqs among it.
    #[serde(default)]
    pub server_cpus: Option<CpuStates>,
    /// `server_cpu_secs` per measured message, in microseconds.
    pub server_cpu_per_msg_us: Option<f64>,
    /// The soft RLIMIT_NOFILE the run had.
    pub nofile_limit: u64,
    /// Things the user should know that did not stop the run.
    pub warnings: Vec<String>,
    /// The merged histograms, for `--hist`, `--hgrm` and `--interval-log`.
    #[serde(skip)]
    pub histograms: Histograms,
}

/// Faults by kind. Connection-level kinds count connections; `unanswered` counts messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errors {
    /// Sum of all the kinds below but `stalled`, which does not end a connection.
    pub total: u64,
    /// Connections the server refused.
    pub connect_refused: u64,
    /// Connections that failed to open some other way.
    pub connect_failed: u64,
    /// Connections not up within the connect timeout.
    pub connect_timeout: u64,
    /// Connections the server reset.
    pub reset: u64,
    /// Connections the server closed while replies were owed.
    pub closed: u64,
    /// Connections that received bytes other than those expected.
    pub corrupt: u64,
    /// `ERR` replies from a chat server.
    pub server_error: u64,
    /// Chat subscribers that missed, repeated or reordered a message.
    pub delivery: u64,
    /// Spells of no reply for longer than the stall threshold (the connection went on).
    pub stalled: u64,
    /// Connections given up after no reply for the reply timeout.
    pub timed_out: u64,
    /// Messages still unanswered when the grace period ended.
    pub unanswered: u64,
    /// Other I/O errors.
    pub io: u64,
}

impl Errors {
    /// The faults of two runs together, as one run of both would have counted them.
    pub fn plus(&self, o: &Errors) -> Errors {
        Errors {
            total: self.total + o.total,
            connect_refused: self.connect_refused + o.connect_refused,
            connect_failed: self.connect_failed + o.connect_failed,
            connect_timeout: self.connect_timeout + o.connect_timeout,
            reset: self.reset + o.reset,
            closed: self.closed + o.closed,
            corrupt: self.corrupt + o.corrupt,
            server_error: self.server_error + o.server_error,
            delivery: self.delivery + o.delivery,
            stalled: self.stalled + o.stalled,
            timed_out: self.timed_out + o.timed_out,
            unanswered: self.unanswered + o.unanswered,
            io: self.io + o.io,
        }
    }

    pub(crate) fn from_counts(c: &FaultCounts) -> Errors {
        let n = |f: Fault| c[f.index()];
        let mut e = Errors {
            total: 0,
            connect_refused: n(Fault::ConnectRefused),
            connect_failed: n(Fault::ConnectFailed),
            connect_timeout: n(Fault::ConnectTimeout),
            reset: n(Fault::Reset),
            closed: n(Fault::Closed),
            corrupt: n(Fault::Corrupt),
            server_error: n(Fault::ServerError),
            delivery: n(Fault::Delivery),
            stalled: n(Fault::Stalled),
            timed_out: n(Fault::TimedOut),
            unanswered: n(Fault::Unanswered),
            io: n(Fault::Io),
        };
        e.total = c.iter().sum::<u64>() - e.stalled;
        e
    }

    fn kinds(&self) -> [(&'static str, u64); 12] {
        [
            ("refused", self.connect_refused),
            ("connect failed", self.connect_failed),
            ("connect timeout", self.connect_timeout),
            ("reset", self.reset),
            ("closed by server", self.closed),
            ("corrupt reply", self.corrupt),
            ("server ERR", self.server_error),
            ("delivery gap/repeat/order", self.delivery),
            ("stalled", self.stalled),
            ("timed out", self.timed_out),
            ("unanswered", self.unanswered),
            ("other I/O", self.io),
        ]
    }
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut any = false;
        for (name, n) in self.kinds() {
            if n > 0 {
                write!(f, "{}{name} {n}", if any { ", " } else { "" })?;
                any = true;
            }
        }
        if !any {
            f.write_str("none")?;
        }
        Ok(())
    }
}

fn percentiles(f: &mut fmt::Formatter<'_>, p: &Percentiles) -> fmt::Result {
    write!(
        f,
        "p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  p99.999 {:.1}  max {:.1}",
        p.p50, p.p90, p.p99, p.p99_9, p.p99_99, p.p99_999, p.max
    )
}

impl Summary {
    /// The churn and idle connections' line of the human summary, where there are any.
    fn connections_line(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(r) = self.reconnect_after {
            writeln!(
                f,
                "churn     a fresh connection every {r} request(s): {} connections opened (idle ones included)",
                self.connections_opened
            )?;
        }
        if self.idle_conns > 0 {
            writeln!(
                f,
                "idle      {} connections held silent beside them: {} came up, {} held to the end",
                self.idle_conns, self.idle_connected, self.idle_held
            )?;
        }
        Ok(())
    }

    /// The self-check's line of the human summary (open loop).
    fn schedule_line(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = &self.schedule_check {
            writeln!(
                f,
                "schedule  {} ({} pacing): send lag p50 {:.1} us, p99 {:.1} us (at most {:.0}), gaps off by {:.3}{}",
                if c.ok { "kept" } else { "NOT KEPT" },
                self.pacing.as_deref().unwrap_or("?"),
                c.lag_p50_us,
                c.lag_p99_us,
                c.lag_p99_max_us,
                c.gap_distance.max(c.exponential_distance.unwrap_or(0.0)),
                match &c.reason {
                    Some(why) =>
                        format!(" -- {why}: this latency is the client's as much as the server's"),
                    None => String::new(),
                }
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.profile {
            Some(p) => format!("{} {p}", self.workload),
            None => self.workload.clone(),
        };
        let pinned = if self.cpus.is_empty() {
            "unpinned".to_owned()
        } else {
            format!("on CPUs {:?}", self.cpus)
        };
        let shape = match (self.rate, &self.arrivals) {
            (Some(r), Some(a)) if a != "uniform" => {
                format!(
                    "open loop at {r} msg/s ({a} arrivals), depth {}",
                    self.depth
                )
            }
            (Some(r), _) => format!("open loop at {r} msg/s, depth {}", self.depth),
            (None, _) => format!("closed loop, depth {}", self.depth),
        };
        let sized = |what: &str| match &self.msg_sizes {
            Some(mix) => format!("{what}s of sizes {mix} (mean {} bytes)", self.msg_size),
            None => format!("{}-byte {what}s", self.msg_size),
        };
        let sizes = match (self.get_ratio, self.keys) {
            (Some(g), Some(k)) => format!(
                "{}, {:.0}% GET over {k} {} keys",
                sized("value"),
                g * 100.0,
                self.key_dist.as_deref().unwrap_or("uniform")
            ),
            _ => match &self.path {
                Some(path) => format!("GET {path} ({})", sized("request")),
                None => sized("message"),
            },
        };
        writeln!(
            f,
            "{what} against {}: {}/{} connections, {} thread(s) {pinned}, {shape}, {sizes}",
            self.addr, self.connected, self.conns, self.threads
        )?;
        self.connections_line(f)?;
        writeln!(
            f,
            "window    {:.2} s after {:.2} s warmup: {} messages, {:.1} msg/s",
            self.window_secs, self.warmup_secs, self.messages, self.throughput_per_sec
        )?;
        write!(f, "latency   (us) ")?;
        percentiles(f, &self.latency_us)?;
        writeln!(f)?;
        if self.mode == "open" {
            write!(f, "service   (us) ")?;
            percentiles(f, &self.service_time_us)?;
            writeln!(f)?;
        }
        self.schedule_line(f)?;
        if let Some(d) = &self.delivery_latency_us {
            writeln!(f, "delivered {} MSG lines, each checked", self.deliveries)?;
            write!(f, "delivery  (us) ")?;
            percentiles(f, d)?;
            writeln!(f)?;
        }
        writeln!(f, "errors    {}", self.errors)?;
        let busy = match self.client_cpus_busy {
            Some(b) => format!(", CPUs {:.0}% busy", b * 100.0),
            None => String::new(),
        };
        write!(
            f,
            "client    {:.3} us CPU per message, busiest thread {:.0}% of a CPU{busy}{}",
            self.client_cpu_per_msg_us,
            self.client_cpu_utilization * 100.0,
            if self.client_bound {
                " -- CLIENT-BOUND: these numbers measure loadgen, not the server"
            } else {
                ""
            }
        )?;
        if let (Some(source), Some(per_msg)) = (&self.server_accounting, self.server_cpu_per_msg_us)
        {
            let ratio = if per_msg > 0.0 {
                format!(
                    "; client/server {:.2}",
                    self.client_cpu_per_msg_us / per_msg
                )
            } else {
                String::new()
            };
            write!(
                f,
                "\nserver    {per_msg:.3} us CPU per message ({source}){ratio}"
            )?;
        }
        for w in &self.warnings {
            write!(f, "\nwarning   {w}")?;
        }
        Ok(())
    }
}
