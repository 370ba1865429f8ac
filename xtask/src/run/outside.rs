//! Outside clients: load generators nobody here wrote (kv's redis-benchmark, http's wrk), run
//! against a server already started, behind one interface. What each one is (its arguments,
//! how its output reads) is its own file's; how a point runs with one is here, the same for
//! all: the server's CPU counter (its cgroup's, or its process tree's) read as the client
//! starts and after it exits, and charged over every request the client sent; its process
//! tree sampled meanwhile (memory, the CPU over time); the client's own CPU beside it, from a
//! cgroup of its own. The run layer's `mod.rs` lists the clients.
//!
//! It may call the plan layer and the run layer's `cgroup`, `cost`, `counters`, `histogram`, `outcome`,
//! `procfs`, `children` and `cpus`.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use loadgen::account::CpuSource;

use crate::plan::placement::Placement;
use crate::plan::suites::Point;
use crate::run::cgroup::{self, Accounting, Group};
use crate::run::children::{self, Proc};
use crate::run::cost::{EdgeReading, server_cost};
use crate::run::counters::Counting;
use crate::run::cpus;
use crate::run::histogram;
use crate::run::outcome::{Failure, Measured, RunFiles};
use crate::run::procfs::{Sample, Sampler};

/// How often a point of an outside client samples the server (and, without cgroups, the
/// client's own CPU, whose last 100 ms are then lost).
const SAMPLE_PERIOD: Duration = Duration::from_millis(100);

/// What an outside client says of its run: requests a second, the requests it counted (a
/// client that runs for a time rather than a count: wrk), and latency in µs (p50, p95, p99,
/// max; and the mean and least, where it says them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Said {
    pub(crate) rps: f64,
    /// `None`: the count its arguments asked for.
    pub(crate) requests: Option<u64>,
    pub(crate) latency_us: [f64; 4],
    /// The mean and the least latency in µs, where the client reports them (redis-benchmark).
    pub(crate) avg_min_us: Option<[f64; 2]>,
}

/// A load generator of someone else's, as a point runs it.
pub(crate) trait OutsideClient: Sync {
    /// Its program, looked up on PATH; a point names its client by it.
    fn program(&self) -> &'static str;
    /// Why it cannot run here, with the install command, or `None` when it can.
    fn missing(&self) -> Option<String>;
    /// Its arguments for `point` against `addr`, and the requests they send (a guess, for the
    /// time limit, when it runs for a time and says what it sent); `None` when it cannot send
    /// the point's workload.
    fn args(&self, point: &Point, addr: &str) -> Option<(Vec<String>, u64)>;
    /// What the server must hold before the client runs (the kv client's GETs need the keys
    /// stored), done with `loadgen` on the client CPUs.
    fn prepare(
        &self,
        point: &Point,
        addr: &str,
        loadgen: &Path,
        place: &Placement,
    ) -> Result<(), Failure>;
    /// The name of what it prints, for errors: `CSV`.
    fn output(&self) -> &'static str;
    /// Reads what it printed.
    fn parse(&self, stdout: &str) -> Result<Said, String>;
    /// What the report says of its figures (which latency, over what window, what is checked).
    fn note(&self) -> &'static str;
}

/// A point of an outside client against a server already started.
pub(crate) struct Job<'a> {
    pub(crate) client: &'a dyn OutsideClient,
    pub(crate) point: &'a Point,
    pub(crate) server: &'a mut Proc,
    pub(crate) addr: &'a str,
    pub(crate) loadgen: &'a Path,
    pub(crate) place: &'a Placement,
    pub(crate) files: &'a RunFiles,
}

impl Job<'_> {
    /// Runs the client against the server: the server's CPU is `counter` read as the client
    /// starts and after it exits (connection setup included), per request it sent; the
    /// client runs in a group of `accounting`'s, where it makes them, for its own CPU.
    pub(crate) fn run(
        self,
        counter: &CpuSource,
        counting: &Counting,
        accounting: &Accounting,
    ) -> Result<Measured, Failure> {
        let Job {
            client,
            point,
            server,
            addr,
            loadgen,
            place,
            files,
        } = self;
        let program = client.program();
        let Some((args, n)) = client.args(point, addr) else {
            return Err(Failure::Loadgen(format!(
                "{program} cannot send the point {}",
                point.label
            )));
        };
        client.prepare(point, addr, loadgen, place)?;
        let counted = matches!(counter, CpuSource::Cgroup(_)).then(|| counter.clone());
        let mut sampler = Sampler::new(server.id())
            .watching(place.server_cpus.as_slice())
            .counting(counted);
        let baseline = sampler
            .sample()
            .map_err(|_| Failure::Died(server.stderr_tail()))?;
        let group = accounting
            .client_group()
            .map_err(|e| io(&format!("making {program}'s cgroup"), &e))?;
        let read = || EdgeReading::read(counter, place.server_cpus.as_slice());
        let before = read();
        let counts_before = counting.read();
        let (proc, stdout) = spawn(program, &args, place, files, group.as_ref())?;
        let limit = Duration::from_secs_f64(60.0 + n as f64 / 5_000.0);
        let client_cpu = group
            .as_ref()
            .map(|g| (g.cpu_source(), g.cpu_source().read().ok()));
        let run = watch(program, proc, server, sampler, limit)?;
        let after = read();
        let counted = counting.between(&counts_before, &counting.read());
        let text = stdout
            .recv_timeout(Duration::from_secs(5))
            .map_err(|e| io(&format!("reading {program}'s output"), &e))?;
        let said = client
            .parse(&text)
            .map_err(|e| io(&format!("reading {program}'s {}", client.output()), &e))?;
        let window = (run.ended - run.started).max(1e-3);
        let n = said.requests.unwrap_or(n).max(1);
        let client_cpu = client_cpu_secs(client_cpu, run.client_cpu);
        // The server's CPU over every request sent: per second of the whole run.
        let mut cost = server_cost(
            &baseline,
            &run.samples,
            (run.started, run.ended),
            n as f64 / window,
            point.conns,
            before.until(after, counter).as_ref(),
        );
        cost.counted = counted.per(n as f64);
        let hist = write_empty_histogram(files)?;
        Ok(Measured {
            throughput_per_sec: said.rps,
            errors: 0,
            delivery_errors: 0,
            deliveries: None,
            delivery_latency_us: None,
            client_cpu_per_msg_us: client_cpu.map_or(0.0, |c| c * 1e6 / n as f64),
            // The client is one thread (kv's is): near a whole CPU, it is what was
            // measured.
            client_bound: client_cpu.is_some_and(|c| c / window > 0.9),
            // An outside client keeps no schedule of its own to check.
            send_lag_us: None,
            schedule_ok: None,
            schedule_reason: None,
            pacing: None,
            window_secs: window,
            window_exact: true,
            cost,
            hist,
            connections: None,
            ops_us: None,
            counters: None,
            notes: vec![client.note().into()],
            throttle: None,
            cq_overflow: None,
            driver_latency_us: Some(said.latency_us),
            driver_avg_min_us: said.avg_min_us,
        })
    }
}

/// The client's own CPU seconds: its group's counter from `start`, exact; else what the
/// samples saw.
fn client_cpu_secs(
    group: Option<(CpuSource, Option<loadgen::account::CpuTime>)>,
    sampled: Option<f64>,
) -> Option<f64> {
    match group {
        Some((source, Some(start))) => source
            .read()
            .ok()
            .map(|end| start.until(end).total_ns as f64 / 1e9),
        _ => sampled,
    }
}

/// A failure of the harness around the client, told as the load's.
fn io(what: &str, e: &dyn std::fmt::Display) -> Failure {
    Failure::Loadgen(format!("{what}: {e}"))
}

/// Starts `program` on the client CPUs, in `group` from its first instruction; its stdout is
/// read whole on a thread, so that it never blocks on a full pipe, and comes on the receiver.
fn spawn(
    program: &str,
    args: &[String],
    place: &Placement,
    files: &RunFiles,
    group: Option<&Group>,
) -> Result<(Proc, mpsc::Receiver<String>), Failure> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(g) = group {
        g.join_on_exec(&mut cmd)
            .map_err(|e| io(&format!("putting {program} in its cgroup"), &e))?;
    }
    let starting = format!("starting {program}{}", cgroup::or_joining(group));
    let mut child =
        cpus::spawn_on(&place.client_cpus, || cmd.spawn()).map_err(|e| io(&starting, &e))?;
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = out.read_to_string(&mut text);
        }
        let _ = tx.send(text);
    });
    let proc = Proc::adopt(child, &files.path(&format!("{program}.log")))
        .map_err(|e| io(&starting, &e))?;
    Ok((proc, rx))
}

/// What watching the client's run gathered.
struct ClientRun {
    /// The server's samples over the run, the last taken after it.
    samples: Vec<Sample>,
    /// The run's start and end, Unix seconds.
    started: f64,
    ended: f64,
    /// The client's own CPU seconds, where it could be read.
    client_cpu: Option<f64>,
}

/// Samples the server (and the client's own CPU) until the client exits, successfully;
/// the server's death, a timeout past `limit` or an interruption end the point.
fn watch(
    program: &str,
    mut proc: Proc,
    server: &mut Proc,
    mut sampler: Sampler,
    limit: Duration,
) -> Result<ClientRun, Failure> {
    let mut own = Sampler::new(proc.id());
    let own_start = own.sample().ok();
    let mut own_last = own_start;
    let started = unix_now();
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
            if let Ok(c) = own.sample() {
                own_last = Some(c);
            }
            next = (next + SAMPLE_PERIOD).max(now);
        }
        if children::interrupted() {
            return Err(Failure::Interrupted);
        }
        if let Some(status) = proc.try_wait() {
            break status;
        }
        if let Some(status) = server.try_wait() {
            proc.stop(Duration::from_secs(1));
            return Err(Failure::Died(children::last_words(status, server)));
        }
        if t0.elapsed() > limit {
            proc.stop(Duration::from_secs(1));
            return Err(Failure::Timeout(format!(
                "{program} ran past {:.0} s; its last words: {}",
                limit.as_secs_f64(),
                proc.stderr_tail()
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
            "{program}: {status}: {}",
            proc.stderr_tail()
        )));
    }
    Ok(ClientRun {
        samples,
        started,
        ended,
        client_cpu: own_start
            .zip(own_last)
            .map(|(a, b)| (b.cpu_s - a.cpu_s).max(0.0)),
    })
}

/// An empty histogram, so that the summary finds a file and says no latency was recorded
/// (the client's own is in `driver_latency_us`); its path.
fn write_empty_histogram(files: &RunFiles) -> Result<std::path::PathBuf, Failure> {
    let hist = files.path("hist");
    let empty = hdrhistogram::Histogram::<u64>::new(3)
        .map_err(anyhow::Error::from)
        .and_then(|h| histogram::encode_histogram(&h))
        .map_err(|e| io("encoding an empty histogram", &e))?;
    std::fs::write(&hist, empty).map_err(|e| io("writing the histogram", &e))?;
    Ok(hist)
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
