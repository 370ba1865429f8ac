//! The main thread of a run: it resolves the address, raises the descriptor limit, and goes
//! through the run's phases, each a function: preload (kv's keys), connect (the workers
//! started, every connection up), the gate, warm-up and measure (the clock started, the
//! window's edges and the progress watched), drain (the workers joined) and summarize (what
//! they measured merged into a [`Summary`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;

use crate::account::{CpuSource, CpuStates, CpuTime};
use crate::config::{ChatProfile, Config, Stop, Workload};
use crate::error::{Error, Fault};
use crate::hist::{Histograms, Percentiles, merge};
use crate::pacing::{Hiccups, Pacing};
use crate::schedule::Schedule;
use crate::selfcheck::{self, CheckInput, Gaps, ScheduleCheck};
use crate::summary::{Errors, Summary};
use crate::sys;
use crate::worker::{self, Control, Plan, ProgressSlot, Report, Rooms, Up};

/// Descriptors a run needs besides one per connection: stdio, epoll and timer per worker,
/// output files, and slack for the runtime.
const SPARE_FDS: u64 = 64;
/// A client thread busier than this is the bottleneck, not the server.
const CLIENT_BOUND: f64 = 0.9;
/// Runs expected to last longer than this print progress.
const PROGRESS_AFTER: Duration = Duration::from_secs(3);

/// Runs the load `cfg` describes and returns what it measured.
///
/// The calling thread coordinates and sleeps; with `cfg.cpus` set it is pinned to those CPUs
/// for the length of the run (so that it never disturbs the server's) and unpinned after.
pub fn run(cfg: &Config) -> Result<Summary, Error> {
    run_gated(cfg, &mut |_| Ok(()))
}

/// [`run`], with a gate between the two phases: once every connection is up (and before the
/// warmup's clock starts), `gate` is called with the number that came up; the run goes on
/// when it returns `Ok`, and ends with its error, every connection closed, when it does not.
/// A [`crate::agent`] waits there for its fleet's go.
pub fn run_gated(
    cfg: &Config,
    gate: &mut dyn FnMut(usize) -> Result<(), Error>,
) -> Result<Summary, Error> {
    cfg.validate()?;
    if let Some(source) = &cfg.server {
        source.read().map_err(|e| {
            Error::Config(match source {
                CpuSource::Tree(pid) => {
                    format!("--server-pid {pid}: cannot read /proc/{pid}/stat: {e}")
                }
                CpuSource::Cgroup(dir) => {
                    format!(
                        "--server-cgroup {}: cannot read its CPU counter: {e}",
                        dir.display()
                    )
                }
            })
        })?;
    }
    let addr = resolve(&cfg.addr)?;
    let needed = (cfg.conns + cfg.idle_conns) as u64 + SPARE_FDS + 2 * cfg.threads as u64;
    let mut warnings = Vec::new();
    let nofile = match sys::raise_nofile(needed) {
        Ok(limit) => {
            if !limit.enough {
                warnings.push(format!(
                    "RLIMIT_NOFILE is {} and cannot be raised to the {needed} that {} connections need; expect connect errors (raise the hard limit: ulimit -Hn)",
                    limit.soft, cfg.conns
                ));
            }
            limit.soft
        }
        Err(e) => {
            warnings.push(format!("cannot read or raise RLIMIT_NOFILE: {e}"));
            0
        }
    };
    if cfg.progress {
        for w in &warnings {
            eprintln!("loadgen: warning: {w}");
        }
    }
    let saved = if cfg.cpus.is_empty() {
        None
    } else {
        let saved = sys::affinity().map_err(|e| Error::io("reading the CPU affinity", e))?;
        sys::pin(&cfg.cpus)
            .map_err(|e| Error::Config(format!("cannot run on --cpus {:?}: {e}", cfg.cpus)))?;
        Some(saved)
    };
    let result = run_pinned(cfg, addr, nofile, warnings, gate);
    if let Some(saved) = saved {
        // The caller keeps running on the CPUs it had; failing to restore them leaves it
        // pinned, which is not worth failing a finished run for.
        let _ = sys::set_affinity(&saved);
    }
    result
}

fn resolve(addr: &str) -> Result<SocketAddr, Error> {
    let mut addrs = addr.to_socket_addrs().map_err(|source| Error::Resolve {
        addr: addr.to_owned(),
        source,
    })?;
    addrs.next().ok_or_else(|| Error::Resolve {
        addr: addr.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
    })
}

/// The run on the CPUs it was given, phase after phase: preload, connect, the gate,
/// warm-up and measure, drain, summarize.
fn run_pinned(
    cfg: &Config,
    addr: SocketAddr,
    nofile: u64,
    warnings: Vec<String>,
    gate: &mut dyn FnMut(usize) -> Result<(), Error>,
) -> Result<Summary, Error> {
    preload(cfg, addr)?;
    let plan = Arc::new(plan(cfg, addr));
    let crew = Crew::spawn(&plan)?;
    let up = match connect(&plan, &crew) {
        Ok(up) => up,
        Err(e) => return Err(crew.abort(e)),
    };
    if let Err(e) = gate(up.connected) {
        return Err(crew.abort(e));
    }
    let watched = measure(cfg, &plan, &crew);
    let reports = crew.drain(watched.reports, watched.failure)?;
    Ok(summarize(
        cfg,
        &plan,
        Outcome {
            up,
            reports,
            cpu: watched.cpu,
            wall_epoch: watched.wall_epoch,
            nofile,
            warnings,
        },
    ))
}

/// Preload: with GETs in the kv mix, every key stored before the clock starts, so that
/// every GET finds a value. The preload writes as the writer after the last connection,
/// so that a GET may see its values too.
fn preload(cfg: &Config, addr: SocketAddr) -> Result<(), Error> {
    let Workload::Kv(kv) = &cfg.workload else {
        return Ok(());
    };
    if kv.get_ratio > 0.0 {
        if cfg.progress && kv.keys >= 100_000 {
            eprintln!("loadgen: storing {} keys before the clock starts", kv.keys);
        }
        crate::kv::preload(
            addr,
            kv.keys,
            cfg.conns as u32,
            &cfg.msg_size,
            cfg.reply_timeout,
        )?;
    }
    Ok(())
}

/// What every worker shares: the configuration, the schedule, the window, the rooms.
fn plan(cfg: &Config, addr: SocketAddr) -> Plan {
    let warm_ns = cfg.warmup.as_nanos() as u64;
    let rooms = match &cfg.workload {
        Workload::Chat(c) if c.profile == ChatProfile::Room => Some(Rooms {
            size: c.room_size,
            last: (0..cfg.conns / c.room_size)
                .map(|_| Default::default())
                .collect(),
            drained: Default::default(),
        }),
        _ => None,
    };
    Plan {
        cfg: cfg.clone(),
        addr,
        schedule: offered_rate(cfg)
            .map(|rate| Schedule::new(rate, cfg.conns, cfg.arrivals, cfg.seed)),
        warm_ns,
        end_ns: match cfg.stop {
            Stop::Duration(d) => Some(warm_ns + d.as_nanos() as u64),
            Stop::Requests(_) => None,
        },
        requests: match cfg.stop {
            Stop::Requests(k) => Some(k),
            Stop::Duration(_) => None,
        },
        progress: (0..cfg.threads).map(|_| ProgressSlot::default()).collect(),
        rooms,
    }
}

/// The worker threads, with a control channel each and their one channel up.
struct Crew {
    controls: Vec<mpsc::Sender<Control>>,
    handles: Vec<thread::JoinHandle<()>>,
    up: mpsc::Receiver<Up>,
}

impl Crew {
    /// Starts the workers, each with its share of the connections and its CPU.
    fn spawn(plan: &Arc<Plan>) -> Result<Crew, Error> {
        let cfg = &plan.cfg;
        let (up_tx, up) = mpsc::channel();
        let mut crew = Crew {
            controls: Vec::with_capacity(cfg.threads),
            handles: Vec::with_capacity(cfg.threads),
            up,
        };
        for t in 0..cfg.threads {
            let (ctl_tx, ctl_rx) = mpsc::channel();
            let ids: Vec<usize> = (t..cfg.conns).step_by(cfg.threads).collect();
            let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]);
            let (plan, up) = (Arc::clone(plan), up_tx.clone());
            let handle = thread::Builder::new()
                .name(format!("loadgen-{t}"))
                .spawn(move || worker::run(plan, t, cpu, ids, up, ctl_rx))
                .map_err(|e| Error::io("starting a worker thread", e));
            match handle {
                Ok(handle) => {
                    crew.controls.push(ctl_tx);
                    crew.handles.push(handle);
                }
                Err(e) => return Err(crew.abort(e)),
            }
        }
        Ok(crew)
    }

    /// Tells every worker to give up, waits for them, and hands back `e`.
    fn abort(self, e: Error) -> Error {
        for c in &self.controls {
            // A worker that is gone needs no telling.
            let _ = c.send(Control::Abort);
        }
        for h in self.handles {
            let _ = h.join();
        }
        e
    }

    /// Drain: every worker joined; the reports, unless one failed or panicked.
    fn drain(
        self,
        reports: Vec<Option<Report>>,
        failure: Option<Error>,
    ) -> Result<Vec<Report>, Error> {
        let mut panicked = false;
        for h in self.handles {
            panicked |= h.join().is_err();
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if panicked || reports.iter().any(Option::is_none) {
            return Err(Error::WorkerPanicked);
        }
        Ok(reports.into_iter().flatten().collect())
    }
}

/// How connecting went, over every worker.
struct Connections {
    connected: usize,
    idle_connected: usize,
    faults: [u64; Fault::COUNT],
    first_error: Option<std::io::Error>,
    handshake_error: Option<String>,
}

/// Connect: every worker connects its connections (each bounded by the connect timeout);
/// an error when none came up.
fn connect(plan: &Plan, crew: &Crew) -> Result<Connections, Error> {
    let cfg = &plan.cfg;
    let mut up = Connections {
        connected: 0,
        idle_connected: 0,
        faults: [0; Fault::COUNT],
        first_error: None,
        handshake_error: None,
    };
    let deadline = Instant::now() + cfg.connect_timeout + Duration::from_secs(5);
    let mut heard = 0;
    while heard < cfg.threads {
        let wait = deadline.saturating_duration_since(Instant::now());
        match crew.up.recv_timeout(wait) {
            Ok(Up::Connected(Ok(c))) => {
                heard += 1;
                up.connected += c.ok;
                up.idle_connected += c.idle_ok;
                for (sum, n) in up.faults.iter_mut().zip(c.faults) {
                    *sum += n;
                }
                up.first_error = up.first_error.or(c.first_error);
                up.handshake_error = up.handshake_error.or(c.handshake_error);
            }
            Ok(Up::Connected(Err(e))) => return Err(e),
            Ok(Up::Done(..)) => heard += 1,
            Err(_) => return Err(Error::WorkerPanicked),
        }
    }
    if up.connected == 0 {
        return Err(none_connected(plan.addr, up));
    }
    if cfg.progress && up.idle_connected < cfg.idle_conns {
        eprintln!(
            "loadgen: {} of {} idle connections came up",
            up.idle_connected, cfg.idle_conns
        );
    }
    if cfg.progress && up.connected < cfg.conns {
        eprintln!(
            "loadgen: {} of {} connections came up ({})",
            up.connected,
            cfg.conns,
            up.first_error
                .as_ref()
                .map_or_else(String::new, |e| e.to_string())
        );
    }
    Ok(up)
}

/// The error of a run where no connection came up: the handshake's, else the connect's.
fn none_connected(addr: SocketAddr, up: Connections) -> Error {
    let addr = addr.to_string();
    if let Some(reason) = up.handshake_error {
        return Error::Handshake { addr, reason };
    }
    Error::Unreachable {
        addr,
        source: up.first_error.unwrap_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotConnected, "no connection came up")
        }),
    }
}

/// CPU time read at the edges of the measured window: the client CPUs' ticks and the
/// server's CPU time.
#[derive(Debug, Default)]
struct CpuAtEdges {
    ticks_start: Option<CpuStates>,
    ticks_end: Option<CpuStates>,
    server_start: Option<CpuTime>,
    server_end: Option<CpuTime>,
    states_start: Option<CpuStates>,
    states_end: Option<CpuStates>,
}

/// What the measure phase gathered.
struct Watched {
    reports: Vec<Option<Report>>,
    failure: Option<Error>,
    cpu: CpuAtEdges,
    wall_epoch: SystemTime,
}

/// The window's clock, read by the main thread while the workers run: when the warm-up
/// ends and when the measured window does.
struct Window<'a> {
    cfg: &'a Config,
    epoch: Instant,
    /// The end of the measured window from the epoch (duration runs).
    end: Option<Duration>,
    cpu: CpuAtEdges,
    /// The server's side has been read at the window's start, at its end.
    started_server: bool,
    ended_server: bool,
}

impl Window<'_> {
    fn client_ticks(&self) -> Option<CpuStates> {
        (!self.cfg.cpus.is_empty())
            .then(|| CpuStates::read(&self.cfg.cpus).ok())
            .flatten()
    }

    fn server_cpu(&self) -> Option<CpuTime> {
        self.cfg.server.as_ref().and_then(|s| s.read().ok())
    }

    fn server_cpu_states(&self) -> Option<CpuStates> {
        (!self.cfg.server_cpus.is_empty())
            .then(|| CpuStates::read(&self.cfg.server_cpus).ok())
            .flatten()
    }

    /// Reads the server's side at the window's start.
    fn server_edge_start(&mut self) {
        self.cpu.server_start = self.server_cpu();
        self.cpu.states_start = self.server_cpu_states();
    }

    /// Reads the server's side at the window's end.
    fn server_edge_end(&mut self) {
        self.cpu.server_end = self.server_cpu();
        self.cpu.states_end = self.server_cpu_states();
    }

    /// How long to wait for the workers before the next edge or progress line.
    fn wake(&self, next_progress: Duration) -> Duration {
        let mut wake = next_progress;
        if self.cpu.ticks_start.is_none()
            && !self.cfg.warmup.is_zero()
            && self.epoch.elapsed() < self.cfg.warmup
        {
            wake = wake.min(self.cfg.warmup);
        }
        if let (Some(end), false) = (self.end, self.ended_server) {
            wake = wake.min(end);
        }
        wake.saturating_sub(self.epoch.elapsed())
    }

    /// Reads the CPU times at an edge the clock has passed: the warm-up's end, the window's.
    fn observe(&mut self) {
        let elapsed = self.epoch.elapsed();
        if self.cpu.ticks_start.is_none() && elapsed >= self.cfg.warmup {
            self.cpu.ticks_start = self.client_ticks();
        }
        if !self.started_server && elapsed >= self.cfg.warmup {
            self.started_server = true;
            self.server_edge_start();
        }
        if self.end.is_some_and(|end| elapsed >= end) && !self.ended_server {
            self.ended_server = true;
            self.server_edge_end();
        }
    }

    /// The CPU times at the end of the run.
    fn close(mut self) -> CpuAtEdges {
        self.cpu.ticks_end = self.client_ticks();
        if !self.ended_server {
            self.server_edge_end();
        }
        self.cpu
    }
}

/// Warm-up and measure: the clock started, the window's edges and the progress watched,
/// each worker's report collected as it ends.
fn measure(cfg: &Config, plan: &Plan, crew: &Crew) -> Watched {
    let epoch = Instant::now();
    let wall_epoch = SystemTime::now();
    if let (true, Stop::Duration(d)) = (cfg.progress, cfg.stop) {
        eprintln!(
            "{}",
            crate::announce::window_line(wall_epoch + cfg.warmup, d)
        );
    }
    for c in &crew.controls {
        // A worker whose receiver is gone has died; the join reports it.
        let _ = c.send(Control::Start(epoch));
    }
    let mut window = Window {
        cfg,
        epoch,
        end: match cfg.stop {
            Stop::Duration(d) => Some(cfg.warmup + d),
            Stop::Requests(_) => None,
        },
        cpu: CpuAtEdges::default(),
        started_server: false,
        ended_server: false,
    };
    if cfg.warmup.is_zero() {
        window.cpu.ticks_start = window.client_ticks();
        window.started_server = true;
        window.server_edge_start();
    }
    let mut progress = Progress::new(cfg);
    let mut reports: Vec<Option<Report>> = (0..cfg.threads).map(|_| None).collect();
    let mut failure = None;
    let mut done = 0;
    // Bounded: the workers end on their own (see `worker`), and each one's end is a message.
    while done < cfg.threads {
        match crew.up.recv_timeout(window.wake(progress.next)) {
            Ok(Up::Done(i, report)) => {
                done += 1;
                match *report {
                    Ok(r) => reports[i] = Some(r),
                    Err(e) => failure = Some(e),
                }
            }
            Ok(Up::Connected(..)) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        window.observe();
        progress.tell(plan, epoch.elapsed());
    }
    Watched {
        reports,
        failure,
        cpu: window.close(),
        wall_epoch,
    }
}

/// The progress line, once a second on a run long enough to want it.
struct Progress {
    show: bool,
    requests: bool,
    warmup: Duration,
    next: Duration,
    last_count: u64,
    /// Where the workers spin, the measured window: this thread shares their CPU and does
    /// not wake in it (the window's edges excepted), so no line is told there.
    silent: Option<(Duration, Duration)>,
}

impl Progress {
    fn new(cfg: &Config) -> Progress {
        let mut p = Progress {
            show: cfg.progress
                && match cfg.stop {
                    Stop::Duration(d) => cfg.warmup + d > PROGRESS_AFTER,
                    Stop::Requests(_) => true,
                },
            requests: matches!(cfg.stop, Stop::Requests(_)),
            warmup: cfg.warmup,
            next: Duration::from_secs(1),
            last_count: 0,
            silent: match (cfg.rate, pacing(cfg), cfg.stop) {
                (Some(_), Pacing::Spin, Stop::Duration(d)) => Some((cfg.warmup, cfg.warmup + d)),
                _ => None,
            },
        };
        p.skip_silence();
        p
    }

    /// Moves the next line out of the silent window.
    fn skip_silence(&mut self) {
        if let Some((start, end)) = self.silent
            && self.next >= start
            && self.next < end
        {
            self.next = end;
        }
    }

    /// Prints the replies so far when a second has passed.
    fn tell(&mut self, plan: &Plan, elapsed: Duration) {
        if elapsed < self.next {
            return;
        }
        let count: u64 = plan
            .progress
            .iter()
            .map(|p| p.0.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        let long = !self.requests || elapsed > PROGRESS_AFTER;
        if self.show && long {
            let phase = if elapsed < self.warmup {
                "warmup"
            } else {
                "measuring"
            };
            eprintln!(
                "loadgen: {:>6.1} s {phase}: {count} replies, {} /s",
                elapsed.as_secs_f64(),
                count - self.last_count
            );
        }
        self.last_count = count;
        self.next += Duration::from_secs(1);
        self.skip_silence();
    }
}

/// Everything a run ends with, for its summary.
struct Outcome {
    up: Connections,
    reports: Vec<Report>,
    cpu: CpuAtEdges,
    wall_epoch: SystemTime,
    nofile: u64,
    warnings: Vec<String>,
}

/// The merged histograms of the workers' reports.
fn histograms(cfg: &Config, plan: &Plan, reports: &[Report], wall_epoch: SystemTime) -> Histograms {
    let intervals_len = reports.iter().map(|r| r.intervals.len()).max().unwrap_or(0);
    let intervals = (0..intervals_len)
        .map(|i| merge(reports.iter().filter_map(|r| r.intervals.get(i))))
        .collect();
    Histograms {
        latency: merge(reports.iter().map(|r| &r.latency)),
        service: merge(reports.iter().map(|r| &r.service)),
        delivery: plan
            .rooms
            .as_ref()
            .map(|_| merge(reports.iter().filter_map(|r| r.delivery.as_ref()))),
        intervals,
        interval: cfg.interval.unwrap_or(Duration::from_secs(1)),
        window_start: wall_epoch + cfg.warmup,
    }
}

/// The counts and times of a run, from its reports and the window's CPU times.
struct Measures {
    faults: [u64; Fault::COUNT],
    measured: u64,
    window_secs: f64,
    /// The workers' CPU time, or where they spin, the time they spent working.
    cpu_ns: u64,
    utilization: f64,
    cpus_busy: Option<f64>,
    /// What the client's CPUs did over the window.
    client_cpus: Option<CpuStates>,
    server: Option<CpuTime>,
    server_cpus: Option<CpuStates>,
}

fn measures(cfg: &Config, plan: &Plan, o: &Outcome) -> Measures {
    let reports = &o.reports;
    let mut faults = o.up.faults;
    for r in reports {
        for (sum, n) in faults.iter_mut().zip(r.faults) {
            *sum += n;
        }
    }
    Measures {
        faults,
        measured: reports.iter().map(|r| r.measured).sum(),
        window_secs: match cfg.stop {
            Stop::Duration(d) => d.as_secs_f64(),
            Stop::Requests(_) => {
                let last = reports.iter().map(|r| r.last_reply_ns).max().unwrap_or(0);
                last.saturating_sub(plan.warm_ns) as f64 / 1e9
            }
        },
        cpu_ns: reports.iter().map(|r| worked(cfg, r)).sum(),
        utilization: reports
            .iter()
            .filter(|r| r.wall_ns > 0)
            .map(|r| worked(cfg, r) as f64 / r.wall_ns as f64)
            .fold(0.0, f64::max),
        // A spinning worker keeps its CPUs busy whatever its work: their ticks say nothing
        // of it.
        cpus_busy: match (o.cpu.ticks_start, o.cpu.ticks_end) {
            (Some(a), Some(b)) if pacing(cfg) == Pacing::Sleep => a.busy_since(b),
            _ => None,
        },
        client_cpus: o
            .cpu
            .ticks_start
            .zip(o.cpu.ticks_end)
            .map(|(a, b)| a.until(b)),
        server: o
            .cpu
            .server_start
            .zip(o.cpu.server_end)
            .map(|(a, b)| a.until(b)),
        server_cpus: o
            .cpu
            .states_start
            .zip(o.cpu.states_end)
            .map(|(a, b)| a.until(b)),
    }
}

/// The pacing the workers ran with.
fn pacing(cfg: &Config) -> Pacing {
    cfg.pacing
        .unwrap_or(Pacing::default_for(cfg.threads, &cfg.cpus))
}

/// A worker's work over its window: its CPU time, or where it spins (and its CPU time is all
/// of its wall time), the time it spent serving events and releasing messages.
fn worked(cfg: &Config, r: &Report) -> u64 {
    match (cfg.rate, pacing(cfg)) {
        (Some(_), Pacing::Spin) => r.work_ns,
        _ => r.cpu_ns,
    }
}

/// The open loop's self-check (`selfcheck`) over the workers' reports.
fn schedule_check(
    cfg: &Config,
    reports: &[Report],
    latency: &Histograms,
    m: &Measures,
) -> Option<ScheduleCheck> {
    cfg.rate?;
    let lag = merge(reports.iter().map(|r| &r.send_lag));
    let mut gaps = Gaps::new();
    for r in reports {
        gaps.add(&r.gaps);
    }
    let busiest = reports
        .iter()
        .max_by_key(|r| r.hiccups.lost_ns)
        .map(|r| (r.hiccups.lost_ns, r.wall_ns));
    let hiccups = reports
        .iter()
        .fold(Hiccups::default(), |sum, r| sum.and(r.hiccups));
    Some(selfcheck::check(CheckInput {
        lag: &lag,
        latency_p99_us: latency.latency.value_at_quantile(0.99) as f64 / 1e3,
        gaps: &gaps,
        poisson: cfg.arrivals.is_poisson(),
        held: reports.iter().map(|r| r.held).sum(),
        // The share of the window lost is the busiest worker's.
        hiccups: Hiccups {
            lost_ns: busiest.map_or(0, |b| b.0),
            ..hiccups
        },
        window_ns: busiest.map_or(0, |b| b.1),
        client_steal_pct: m
            .client_cpus
            .filter(|c| c.total_ns > 0)
            .map(|c| c.steal_ns as f64 / c.total_ns as f64 * 100.0),
    }))
}

/// Kv: the latency of one operation (0: GETs, 1: SETs) over the workers, where any was
/// measured.
fn op_latency(reports: &[Report], op: usize) -> Option<Percentiles> {
    let parts: Vec<&Histogram<u64>> = reports
        .iter()
        .filter_map(|r| r.ops.as_ref().map(|o| &o[op]))
        .collect();
    let sum = merge(parts.iter().copied());
    (!parts.is_empty() && !sum.is_empty()).then(|| Percentiles::of(&sum))
}

/// Summarize: the workers' reports and the window's CPU times merged into the
/// [`Summary`].
fn summarize(cfg: &Config, plan: &Plan, o: Outcome) -> Summary {
    let m = measures(cfg, plan, &o);
    let (measured, cpu_ns) = (m.measured, m.cpu_ns);
    let reports = &o.reports;
    let histograms = histograms(cfg, plan, reports, o.wall_epoch);
    let check = schedule_check(cfg, reports, &histograms, &m);
    let rate = offered_rate(cfg);
    let (workload, profile) = match &cfg.workload {
        Workload::Echo => ("echo", None),
        Workload::Chat(c) => ("chat", Some(c.profile)),
        Workload::Kv(_) => ("kv", None),
        Workload::Http(_) => ("http", None),
    };
    let kv = match &cfg.workload {
        Workload::Kv(kv) => Some(kv),
        _ => None,
    };
    Summary {
        workload: workload.to_owned(),
        profile: profile.map(|p| format!("{p:?}").to_lowercase()),
        get_ratio: kv.map(|k| k.get_ratio),
        keys: kv.map(|k| k.keys),
        path: match &cfg.workload {
            Workload::Http(path) => Some(path.as_str().to_owned()),
            _ => None,
        },
        addr: plan.addr.to_string(),
        conns: cfg.conns,
        connected: o.up.connected,
        threads: cfg.threads,
        cpus: cfg.cpus.clone(),
        msg_size: cfg
            .msg_size
            .single()
            .unwrap_or(cfg.msg_size.mean().round() as usize),
        msg_sizes: cfg
            .msg_size
            .single()
            .is_none()
            .then(|| cfg.msg_size.to_string()),
        depth: cfg.depth,
        mode: if rate.is_some() { "open" } else { "closed" }.to_owned(),
        rate,
        arrivals: rate.map(|_| cfg.arrivals.to_string()),
        pacing: cfg.rate.map(|_| pacing(cfg).as_str().to_owned()),
        requests_per_conn: plan.requests,
        reconnect_after: cfg.requests_per_conn,
        connections_opened: reports.iter().map(|r| r.opened).sum(),
        idle_conns: cfg.idle_conns,
        idle_connected: o.up.idle_connected,
        // Closed with the reports, when the summary is made: after every worker's end.
        idle_held: reports.iter().map(|r| r.idle.len()).sum(),
        key_dist: kv.map(|k| k.key_dist.to_string()),
        warmup_secs: cfg.warmup.as_secs_f64(),
        window_secs: m.window_secs,
        messages: measured,
        throughput_per_sec: if m.window_secs > 0.0 {
            measured as f64 / m.window_secs
        } else {
            0.0
        },
        sent_total: reports.iter().map(|r| r.sent).sum(),
        replies_total: reports.iter().map(|r| r.replies).sum(),
        bytes_sent: reports.iter().map(|r| r.bytes_written).sum(),
        bytes_received: reports.iter().map(|r| r.bytes_read).sum(),
        latency_us: Percentiles::of(&histograms.latency),
        service_time_us: Percentiles::of(&histograms.service),
        delivery_latency_us: histograms.delivery.as_ref().map(Percentiles::of),
        get_latency_us: op_latency(reports, 0),
        set_latency_us: op_latency(reports, 1),
        deliveries: reports.iter().map(|r| r.deliveries).sum(),
        errors: Errors::from_counts(&m.faults),
        client_cpu_secs: cpu_ns as f64 / 1e9,
        client_cpu_per_msg_us: if measured > 0 {
            cpu_ns as f64 / 1e3 / measured as f64
        } else {
            0.0
        },
        client_cpu_utilization: m.utilization,
        client_cpus_busy: m.cpus_busy,
        sends_late: reports.iter().map(|r| r.released_late).sum(),
        send_lag_us: rate.map(|_| Percentiles::of(&merge(reports.iter().map(|r| &r.send_lag)))),
        client_bound: m.utilization > CLIENT_BOUND || m.cpus_busy.is_some_and(|b| b > CLIENT_BOUND),
        schedule_ok: check.as_ref().map(|c| c.ok),
        schedule_reason: check.as_ref().and_then(|c| c.reason.clone()),
        schedule_check: check,
        server_accounting: cfg.server.as_ref().map(|s| s.accounting().to_owned()),
        server_cpu_secs: m.server.map(|t| t.total_ns as f64 / 1e9),
        server_user_secs: m.server.map(|t| t.user_ns as f64 / 1e9),
        server_system_secs: m.server.map(|t| t.system_ns as f64 / 1e9),
        server_cpu_per_msg_us: m
            .server
            .filter(|_| measured > 0)
            .map(|t| t.total_ns as f64 / 1e3 / measured as f64),
        server_cpus: m.server_cpus,
        nofile_limit: o.nofile,
        warnings: o.warnings,
        histograms,
    }
}

/// The open-loop rate in messages per second in total: `--rate`, or for chat ingest the byte
/// rate of every connection in lines; `None` for the closed loop.
fn offered_rate(cfg: &Config) -> Option<f64> {
    match &cfg.workload {
        Workload::Chat(c) if c.profile == ChatProfile::Ingest => {
            Some(c.byte_rate / cfg.msg_size.mean() * cfg.conns as f64)
        }
        _ => cfg.rate,
    }
}
