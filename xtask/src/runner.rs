//! One load point against one server: start the server on its CPUs and wait for `READY`,
//! sample its process tree every 500 ms while loadgen (on the client CPUs) drives it, stop
//! both, and turn the samples into the server's cost over loadgen's measured window.
//!
//! Whatever goes wrong (the server does not start, dies, loadgen fails or hangs, Ctrl-C), the
//! point ends with a [`Failure`] that says what happened with the tail of the culprit's
//! stderr, and both children are stopped before this returns.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::cgroup::{Group, Quota, Throttle};
use crate::children::{self, Proc};
use crate::cpus::{self, CpuList};
use crate::loadgen_cli;
use crate::procfs::{Sample, Sampler};
use crate::servers::Variant;
use crate::stats;
use crate::suites::{KvDriver, Point, Stop, Workload};

/// The CPU sampling period, as the C-versus-Go paper sampled with top.
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_millis(500);
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Where the children run.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) server_cpus: CpuList,
    pub(crate) client_cpus: CpuList,
    pub(crate) workers: usize,
    /// The server's CPU quota, when it runs under one.
    pub(crate) quota: Option<Quota>,
}

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

/// The server's cost over the measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ServerCost {
    /// Mean CPU over the window, percent of one CPU (as top shows it).
    pub(crate) cpu_mean_pct: Option<f64>,
    /// Coefficient of variation of the 500 ms CPU samples in the window.
    pub(crate) cpu_cv: Option<f64>,
    pub(crate) user_us_per_req: Option<f64>,
    pub(crate) sys_us_per_req: Option<f64>,
    pub(crate) cpu_us_per_req: Option<f64>,
    pub(crate) vol_cs_per_req: Option<f64>,
    pub(crate) invol_cs_per_req: Option<f64>,
    pub(crate) vol_cs_per_sec: Option<f64>,
    pub(crate) invol_cs_per_sec: Option<f64>,
    /// The largest memory (PSS over the tree) seen during the point.
    pub(crate) peak_mem_bytes: u64,
    /// (peak memory in the window - memory before the first connection) / connections.
    pub(crate) mem_per_conn_bytes: Option<f64>,
    pub(crate) max_procs: usize,
    pub(crate) max_threads: usize,
    /// What else kept the server's CPUs busy over the window, percent of one CPU: their whole
    /// load less the server's own CPU. Above a few percent, something disturbed the point.
    pub(crate) other_load_pct: Option<f64>,
    /// Time stolen by the hypervisor from the watched CPUs, percent of the window.
    pub(crate) steal_pct: Option<f64>,
    /// Growth of the kernel's thread stacks per connection (system-wide `KernelStack`).
    pub(crate) kernel_stack_per_conn_bytes: Option<f64>,
    /// Growth of TCP socket memory per connection (system-wide `sockstat`).
    pub(crate) socket_mem_per_conn_bytes: Option<f64>,
    /// CPU percent per sample interval, time relative to the window start (warmup shows as
    /// negative times).
    pub(crate) cpu_series: Vec<(f64, f64)>,
}

/// The server's cost from its samples: `baseline` is before any connection, the window is
/// `[start, end]` in epoch seconds, and `per_sec` is loadgen's throughput over it.
pub(crate) fn server_cost(
    baseline: &Sample,
    samples: &[Sample],
    (start, end): (f64, f64),
    per_sec: f64,
    conns: usize,
) -> ServerCost {
    let series = |f: fn(&Sample) -> f64| -> Vec<(f64, f64)> {
        samples.iter().map(|s| (s.t, f(s))).collect()
    };
    let cpu = series(|s| s.cpu_s);
    let vol = series(|s| s.vol_cs as f64);
    let free = series(|s| s.cpus_free_s);
    let watched = samples.iter().map(|s| s.cpus_watched).max().unwrap_or(0);
    let invol = series(|s| s.invol_cs as f64);
    let window = (end - start).max(0.0);
    let rates = stats::interval_rates(&cpu, start, end);
    let pcts: Vec<f64> = rates.iter().map(|r| r.1 * 100.0).collect();
    let grow = |s: &[(f64, f64)]| stats::growth(s, start, end);
    let per_req_us =
        |s: &[(f64, f64)]| grow(s).and_then(|g| stats::us_per_request(g, per_sec, window));
    let cpu_us_per_req = per_req_us(&cpu);
    let user_share = user_share(baseline, samples, (start, end));
    let per_req = |s: &[(f64, f64)]| grow(s).and_then(|g| stats::per_request(g, per_sec, window));
    let per_sec_of = |s: &[(f64, f64)]| grow(s).filter(|_| window > 0.0).map(|g| g / window);
    let in_window = || {
        samples
            .iter()
            .filter(|s| s.t >= start - 0.6 && s.t <= end + 0.6)
    };
    let window_peak = in_window().map(|s| s.mem_bytes).max();
    // The kernel's share, system-wide: what grew from before the first connection to the
    // window's peak, per connection.
    let kernel_per_conn = |f: fn(&Sample) -> u64| {
        in_window()
            .map(f)
            .max()
            .filter(|_| conns > 0)
            .map(|p| (p as f64 - f(baseline) as f64) / conns as f64)
    };
    let steal = series(|s| s.cpus_steal_s);
    ServerCost {
        cpu_mean_pct: per_sec_of(&cpu).map(|c| c * 100.0),
        cpu_cv: stats::coefficient_of_variation(&pcts),
        user_us_per_req: cpu_us_per_req.zip(user_share).map(|(c, u)| c * u),
        sys_us_per_req: cpu_us_per_req.zip(user_share).map(|(c, u)| c * (1.0 - u)),
        cpu_us_per_req,
        vol_cs_per_req: per_req(&vol),
        invol_cs_per_req: per_req(&invol),
        vol_cs_per_sec: per_sec_of(&vol),
        invol_cs_per_sec: per_sec_of(&invol),
        peak_mem_bytes: samples
            .iter()
            .chain([baseline])
            .map(|s| s.mem_bytes)
            .max()
            .unwrap_or(0),
        mem_per_conn_bytes: window_peak
            .filter(|_| conns > 0)
            .map(|p| (p as f64 - baseline.mem_bytes as f64) / conns as f64),
        // The CPUs' busy time (what the wall clock leaves of their free time) less the
        // server's. /proc/stat counts in 10 ms ticks: small negatives are rounding.
        other_load_pct: per_sec_of(&free)
            .zip(per_sec_of(&cpu))
            .filter(|_| watched > 0)
            .map(|(f, c)| ((watched as f64 - f - c) * 100.0).max(0.0)),
        steal_pct: per_sec_of(&steal)
            .filter(|_| watched > 0)
            .map(|s| s * 100.0 / watched as f64),
        kernel_stack_per_conn_bytes: kernel_per_conn(|s| s.kernel_stack_bytes),
        socket_mem_per_conn_bytes: kernel_per_conn(|s| s.socket_mem_bytes),
        max_procs: samples.iter().map(|s| s.procs).max().unwrap_or(0),
        max_threads: samples.iter().map(|s| s.threads).max().unwrap_or(0),
        // Warmup and window; the teardown after the window (connections closing, processes
        // exiting) is not the load being measured.
        cpu_series: stats::interval_rates(&cpu, f64::MIN, end + 0.3)
            .into_iter()
            .map(|(t, r)| (t - start, r * 100.0))
            .collect(),
    }
}

/// The tick counters reliably charge only what they have had time to sample; below this many
/// seconds of ticks the user/system split is left unknown.
const MIN_TICKS_S: f64 = 0.2;

/// The user share of CPU time, from the tick counters: over the window when they moved enough
/// there, else over the whole point (connection processes are charged when they exit).
fn user_share(baseline: &Sample, samples: &[Sample], (start, end): (f64, f64)) -> Option<f64> {
    let user: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.user_ticks_s)).collect();
    let sys: Vec<(f64, f64)> = samples.iter().map(|s| (s.t, s.sys_ticks_s)).collect();
    let share = |u: f64, s: f64| (u + s >= MIN_TICKS_S).then(|| u / (u + s));
    let in_window = stats::growth(&user, start, end)
        .zip(stats::growth(&sys, start, end))
        .and_then(|(u, s)| share(u, s));
    in_window.or_else(|| {
        let last = samples.last()?;
        share(
            last.user_ticks_s - baseline.user_ticks_s,
            last.sys_ticks_s - baseline.sys_ticks_s,
        )
    })
}

/// The binaries of a point.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    pub(crate) server: PathBuf,
    pub(crate) loadgen: PathBuf,
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
    pub(crate) window_secs: f64,
    /// Whether the window's start came from loadgen's interval log (else it is estimated
    /// from when loadgen exited).
    pub(crate) window_exact: bool,
    pub(crate) cost: ServerCost,
    /// loadgen's latency histogram (V2), relative to the run directory.
    pub(crate) hist: PathBuf,
    /// The server's counters line, printed at its clean stop.
    pub(crate) counters: Option<String>,
    /// Things that did not spoil the numbers but should be said.
    pub(crate) notes: Vec<String>,
    /// How the CPU quota held the server back, when it ran under one.
    #[serde(default)]
    pub(crate) throttle: Option<Throttle>,
    /// Latency as a client without histograms reports it (redis-benchmark), in µs: p50,
    /// p95, p99, max.
    #[serde(default)]
    pub(crate) driver_latency_us: Option<[f64; 4]>,
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

/// Runs `point` against `variant` once.
pub(crate) fn run_point(
    point: &Point,
    variant: &Variant,
    bins: &Binaries,
    place: &Placement,
    files: &RunFiles,
    run_dir: &Path,
    progress: &mut dyn FnMut(f64),
) -> Result<Measured, Failure> {
    let io = |what: &str, e: &dyn std::fmt::Display| Failure::Loadgen(format!("{what}: {e}"));
    std::fs::create_dir_all(&files.dir).map_err(|e| io("creating the output directory", &e))?;

    // Declared before the server, so that it is dropped (removed) after the server stopped.
    let group = match &place.quota {
        Some(q) => Some(
            q.group()
                .map_err(|e| Failure::Start(format!("cannot make the server's cgroup: {e}")))?,
        ),
        None => None,
    };
    let (mut server, addr) =
        start_server(point, variant, &bins.server, place, files, group.as_ref())?;
    let stat_before = group.as_ref().map(Group::stat);
    if let Workload::Kv {
        driver: KvDriver::RedisBenchmark,
        ..
    } = point.workload
    {
        let measured =
            crate::redis::run_benchmark(point, &mut server, &addr, &bins.loadgen, place, files);
        let throttle: Option<Throttle> = group
            .as_ref()
            .zip(stat_before)
            .map(|(g, before)| g.between(before, g.stat()));
        crate::redis::shutdown_if_redis(variant, &addr);
        let clean = server.stop(STOP_GRACE);
        return measured.map(|mut m| {
            m.throttle = throttle;
            m.counters = server.last_stderr_line();
            if clean.is_none() {
                m.notes.push(format!(
                    "{} did not stop within {} s of SIGTERM and was killed",
                    variant.name,
                    STOP_GRACE.as_secs()
                ));
            }
            m
        });
    }
    let mut sampler = Sampler::new(server.id()).watching(place.server_cpus.as_slice());
    let baseline = sampler
        .sample()
        .map_err(|_| Failure::Start(server.stderr_tail()))?;

    let lg_files = loadgen_cli::Files {
        json: &files.path("loadgen.json"),
        hist: &files.path("hist"),
        hgrm: &files.path("hgrm"),
        interval_log: &files.path("intervals.hlog"),
    };
    let args = loadgen_cli::args(point, &addr, &place.client_cpus, &lg_files);
    let mut cmd = Command::new(&bins.loadgen);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cpus::spawn_on(&place.client_cpus, || cmd.spawn())
        .map_err(|e| io("starting loadgen", &e))?;
    let mut lg =
        Proc::adopt(child, &files.path("loadgen.log")).map_err(|e| io("starting loadgen", &e))?;

    let started = Instant::now();
    let limit = deadline(point);
    let mut samples = vec![baseline];
    let mut next = Instant::now();
    let lg_status = loop {
        let now = Instant::now();
        if now >= next {
            if let Ok(s) = sampler.sample() {
                samples.push(s);
                server.remember(sampler.members());
            }
            next = (next + SAMPLE_PERIOD).max(now);
        }
        if children::interrupted() {
            return Err(Failure::Interrupted);
        }
        if let Some(status) = lg.try_wait() {
            break status;
        }
        if let Some(status) = server.try_wait() {
            lg.stop(Duration::from_secs(1));
            return Err(Failure::Died(last_words(status, &mut server)));
        }
        if started.elapsed() > limit {
            lg.stop(Duration::from_secs(1));
            return Err(Failure::Timeout(format!(
                "loadgen ran past {:.0} s; its last words: {}",
                limit.as_secs_f64(),
                lg.stderr_tail()
            )));
        }
        progress(started.elapsed().as_secs_f64());
        std::thread::sleep(Duration::from_millis(50).min(next.saturating_duration_since(now)));
    };
    let lg_exit = unix_now();
    if let Ok(s) = sampler.sample() {
        samples.push(s);
    }
    let throttle: Option<Throttle> = group
        .as_ref()
        .zip(stat_before)
        .map(|(g, before)| g.between(before, g.stat()));
    let died = server.try_wait();
    if died.is_none() {
        crate::redis::shutdown_if_redis(variant, &addr);
    }
    let clean = server.stop(STOP_GRACE);
    if let Some(status) = died {
        return Err(Failure::Died(last_words(status, &mut server)));
    }
    if !lg_status.success() {
        return Err(Failure::Loadgen(format!(
            "{lg_status}: {}",
            lg.stderr_tail()
        )));
    }
    let mut notes = Vec::new();
    if clean.is_none() {
        notes.push(format!(
            "{} did not stop within {} s of SIGTERM and was killed",
            variant.name,
            STOP_GRACE.as_secs()
        ));
    } else if clean.is_some_and(|s| !s.success()) {
        notes.push(format!(
            "{} exited with {} at its stop",
            variant.name,
            clean.unwrap_or_default()
        ));
    }

    let json =
        std::fs::read_to_string(lg_files.json).map_err(|e| io("reading loadgen's JSON", &e))?;
    let summary =
        loadgen_cli::parse_summary(&json).map_err(|e| io("reading loadgen's JSON", &e))?;
    let window_secs = summary.window_secs.unwrap_or(match point.stop {
        Stop::Duration(d) => d,
        Stop::Requests(_) => (lg_exit - samples[0].t - point.warmup).max(0.0),
    });
    let logged_start = std::fs::read_to_string(lg_files.interval_log)
        .ok()
        .and_then(|t| loadgen_cli::window_start(&t));
    let start = logged_start.unwrap_or(lg_exit - window_secs);
    let cost = server_cost(
        &samples[0],
        &samples[1..],
        (start, start + window_secs),
        summary.throughput_per_sec,
        point.conns,
    );
    let hist = files
        .path("hist")
        .strip_prefix(run_dir)
        .map_or_else(|_| files.path("hist"), Path::to_path_buf);
    Ok(Measured {
        throughput_per_sec: summary.throughput_per_sec,
        errors: summary.errors,
        delivery_errors: summary.delivery_errors,
        deliveries: summary.deliveries,
        delivery_latency_us: summary
            .delivery_latency_us
            .map(|d| [d.p50, d.p99, d.p99_9, d.max]),
        client_cpu_per_msg_us: summary.client_cpu_per_msg_us,
        client_bound: summary.client_bound,
        window_secs,
        window_exact: logged_start.is_some(),
        cost,
        hist,
        counters: server.last_stderr_line(),
        notes,
        throttle,
        driver_latency_us: None,
    })
}

/// How a child ended, and the end of its stderr.
pub(crate) fn last_words(status: std::process::ExitStatus, proc: &mut Proc) -> String {
    let tail = proc.stderr_tail();
    if tail.is_empty() {
        format!("{status}, nothing on stderr")
    } else {
        format!("{status}; stderr: {tail}")
    }
}

/// Starts the server pinned to the server CPUs and waits for its `READY <addr>` line.
fn start_server(
    point: &Point,
    variant: &Variant,
    bin: &Path,
    place: &Placement,
    files: &RunFiles,
    group: Option<&Group>,
) -> Result<(Proc, String), Failure> {
    if variant.binary == crate::redis::SERVER {
        return crate::redis::start_server(place, files, group);
    }
    let mut cmd = Command::new(bin);
    cmd.args(["--proto", point.workload.proto(), "--addr", "127.0.0.1:0"])
        .args(["--workers", &place.workers.to_string()])
        .args(["--cpus", &place.server_cpus.to_string()]);
    if let crate::suites::Workload::Echo {
        msg_size,
        compute_us,
    } = point.workload
        && compute_us > 0
    {
        cmd.args(["--compute-us", &compute_us.to_string()])
            .args(["--msg-size", &msg_size.to_string()]);
    }
    cmd.args(&variant.flags)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cpus::spawn_on(&place.server_cpus, || cmd.spawn())
        .map_err(|e| Failure::Start(format!("cannot run {}: {e:#}", bin.display())))?;
    // Into its cgroup at once: before READY the server has only started its workers, and
    // threads and forked children made later follow the process.
    if let Some(g) = group
        && let Err(e) = g.add(child.id())
    {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Failure::Start(format!(
            "cannot move the server into its cgroup: {e}"
        )));
    }
    let stdout = child.stdout.take();
    let mut server = Proc::adopt(child, &files.path("server.log"))
        .map_err(|e| Failure::Start(format!("{e:#}")))?;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = stdout {
        // The server's stdout carries the READY line and nothing else; the rest is drained so
        // that the server never blocks on a full pipe.
        let spawned = std::thread::Builder::new()
            .name("ready".into())
            .spawn(move || {
                let mut sent = false;
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if !sent && let Some(addr) = line.strip_prefix("READY ") {
                        sent = tx.send(addr.trim().to_string()).is_ok();
                    }
                }
            });
        if let Err(e) = spawned {
            return Err(Failure::Start(format!(
                "cannot read the server's stdout: {e}"
            )));
        }
    }
    let until = Instant::now() + READY_TIMEOUT;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(addr) => return Ok((server, addr)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Its stdout closed before a READY line: it exited, or is about to.
                let words = match server.stop(Duration::from_secs(1)) {
                    Some(status) => last_words(status, &mut server),
                    None => server.stderr_tail(),
                };
                return Err(Failure::Start(words));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if children::interrupted() {
                    return Err(Failure::Interrupted);
                }
                if Instant::now() > until {
                    server.stop(Duration::from_secs(1));
                    return Err(Failure::Start(format!(
                        "no READY line within {} s; stderr: {}",
                        READY_TIMEOUT.as_secs(),
                        server.stderr_tail()
                    )));
                }
            }
        }
    }
}

/// How long loadgen may take before it is given up: its own timeouts plus a margin.
fn deadline(point: &Point) -> Duration {
    let run = match point.stop {
        Stop::Duration(d) => d,
        // A request-count point runs until its last reply, which a slow server may take long
        // to send; loadgen's reply timeout bounds each connection.
        Stop::Requests(k) => 60.0 + point.conns as f64 * k as f64 / 2000.0,
    };
    let connect = 10.0 + point.conns as f64 / 250.0;
    Duration::from_secs_f64(connect + point.warmup + run + 30.0)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, cpu: f64, vol: u64, mem: u64) -> Sample {
        Sample {
            t,
            cpu_s: cpu,
            user_ticks_s: cpu * 0.25,
            sys_ticks_s: cpu * 0.75,
            vol_cs: vol,
            invol_cs: vol / 10,
            mem_bytes: mem,
            // The CPU is free for what the server and 10% more of its load leave.
            cpus_free_s: t - cpu * 1.1,
            cpus_watched: 1,
            cpus_steal_s: t * 0.03,
            kernel_stack_bytes: 1_000_000 + (cpu * 16384.0) as u64,
            socket_mem_bytes: 0,
            procs: 1,
            threads: 3,
        }
    }

    #[test]
    fn cost_over_the_window() {
        let base = sample(99.0, 0.0, 0, 1_000_000);
        // Half a CPU from 100 s to 102 s, then a full CPU to 104 s; window 101..103.
        let samples: Vec<Sample> = [
            (100.0, 0.0),
            (100.5, 0.25),
            (101.0, 0.5),
            (101.5, 0.75),
            (102.0, 1.0),
            (102.5, 1.5),
            (103.0, 2.0),
            (103.5, 2.5),
        ]
        .iter()
        .map(|&(t, c)| sample(t, c, (c * 1000.0) as u64, 1_000_000 + (c * 1e6) as u64))
        .collect();
        let c = server_cost(&base, &samples, (101.0, 103.0), 1000.0, 500);
        // 1.5 CPU-seconds over 2 s: 75%; 2000 requests: 750 µs each, a quarter of it user.
        assert!((c.cpu_mean_pct.unwrap() - 75.0).abs() < 1e-6);
        assert!((c.cpu_us_per_req.unwrap() - 750.0).abs() < 1e-6);
        assert!((c.user_us_per_req.unwrap() - 187.5).abs() < 1e-6);
        assert!((c.sys_us_per_req.unwrap() - 562.5).abs() < 1e-6);
        assert!((c.vol_cs_per_req.unwrap() - 0.75).abs() < 1e-6);
        // Samples of 50, 50, 100, 100 %.
        let cv = crate::stats::coefficient_of_variation(&[50.0, 50.0, 100.0, 100.0]).unwrap();
        assert!((c.cpu_cv.unwrap() - cv).abs() < 1e-9);
        assert_eq!(c.peak_mem_bytes, 3_500_000);
        // The CPUs were 10% busier than the server: 7.5% of a CPU over the window.
        assert!((c.other_load_pct.unwrap() - 7.5).abs() < 1e-6);
        // Peak in the window (2 CPU-s at 103 s) less the baseline, over 500 connections.
        assert!((c.mem_per_conn_bytes.unwrap() - 2_500_000.0 / 500.0).abs() < 1e-6 * 5000.0);
        assert_eq!(c.cpu_series.len(), 6);
        // 3% of the CPU stolen; kernel stacks grew as memory did (2.5 "CPU-s" at 16 KiB).
        assert!((c.steal_pct.unwrap() - 3.0).abs() < 1e-6);
        assert!((c.kernel_stack_per_conn_bytes.unwrap() - 2.5 * 16384.0 / 500.0).abs() < 1e-6);
        assert_eq!(c.socket_mem_per_conn_bytes, Some(0.0));
        assert!((c.cpu_series[0].0 - (100.25 - 101.0)).abs() < 1e-9);
    }

    #[test]
    fn nothing_done_has_no_per_request_cost() {
        let base = sample(0.0, 0.0, 0, 0);
        let c = server_cost(&base, &[sample(1.0, 0.1, 1, 0)], (0.0, 1.0), 0.0, 1);
        assert_eq!(c.cpu_us_per_req, None);
        assert_eq!(c.cpu_cv, None);
    }
}
