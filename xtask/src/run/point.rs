//! One load point against one server: start the server on its CPUs, in a cgroup of its own,
//! and wait for `READY`; while loadgen (on the client CPUs) drives it, loadgen reads the
//! server's CPU counter (its cgroup's, or its process tree's) at the edges of its measured
//! window, and this thread samples the server's process tree every 500 ms (the CPU over
//! time, memory, context switches); stop both, and turn the readings into the server's cost
//! over the window. With client hosts, the window's edges are a warmup and a duration after
//! the agents' go, and this thread reads the counter there. The server's io_uring rings'
//! completion-queue overflows (`run::rings`) are read once it is up and again after the
//! load.
//!
//! Whatever goes wrong (the server does not start, dies, loadgen fails or hangs, Ctrl-C), the
//! point ends with a [`Failure`] that says what happened with the tail of the culprit's
//! stderr, and both children are stopped before this returns.
//!
//! A point whose workload an outside client sends hands over to `run::outside` once the
//! server is up.
//!
//! It may call the plan layer and the run layer's `server`, `outside`, `loadgen_cli`, `cost`,
//! `outcome`, `procfs`, `rings`, `children`, `cpus`, `cgroup` and `counters`.

mod edges;
mod quiet;
mod watch;

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::plan::placement::Placement;
use crate::plan::servers::Variant;
use crate::plan::suites::{Point, Stop};
use loadgen::account::CpuSource;

use crate::run::cgroup::{Accounting, Group, Throttle};
use crate::run::children::{self, Proc};
use crate::run::cost::{WindowCpu, server_cost};
use crate::run::counters::Counting;
use crate::run::loadgen_cli;
use crate::run::outcome::{Binaries, Failure, Measured, RunFiles};
use crate::run::outside;
use crate::run::procfs::Sample;
use crate::run::server::{self, STOP_GRACE};
use edges::Edges;
use watch::Watch;

/// The CPU sampling period, as the C-versus-Go paper sampled with top.
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_millis(500);

/// Runs `point` against `variant` once, the server in a cgroup of its own where `accounting`
/// makes them (under the run's quota, where it has one): the server started, the load
/// driven (by an outside client, the client hosts' agents or a local loadgen) while the
/// server is sampled, the server stopped, and the measures read.
#[allow(clippy::too_many_arguments)] // What a point needs, each of its own kind.
pub(crate) fn run_point(
    point: &Point,
    variant: &Variant,
    bins: &Binaries,
    place: &Placement,
    accounting: &Accounting,
    files: &RunFiles,
    run_dir: &Path,
    progress: &mut dyn FnMut(f64),
) -> Result<Measured, Failure> {
    // A point with its own worker count runs on as many of the server's CPUs.
    let place = &crate::plan::suites::placement_for(point, place);
    std::fs::create_dir_all(&files.dir).map_err(|e| io("creating the output directory", &e))?;
    // Declared before the server, so that it is dropped (removed) after the server stopped.
    let group = accounting
        .server_group()
        .map_err(|e| Failure::Start(format!("cannot make the server's cgroup: {e}")))?;
    let (mut server, addr) = server::start(
        point.workload,
        variant,
        &bins.server,
        place,
        files,
        group.as_ref(),
    )?;
    let counter = group
        .as_ref()
        .map_or(CpuSource::Tree(server.id()), Group::cpu_source);
    let counting = counting(accounting, group.as_ref(), place);
    let stat_before = group.as_ref().map(Group::stat);
    let rings_before = crate::run::rings::read(server.id());
    let overflows = |server: &Proc| {
        let (before, after) = (rings_before?, crate::run::rings::read(server.id())?);
        Some((after.dropped.saturating_sub(before.dropped), after.backlog))
    };
    let throttle = || -> Option<Throttle> {
        group
            .as_ref()
            .zip(stat_before)
            .and_then(|(g, before)| g.between(before, g.stat()))
    };
    if let Some(name) = point.workload.outside_client() {
        let measured = outside_point(name, point, &mut server, &addr, bins, place, files)
            .and_then(|c| c.run(&counter, &counting, accounting));
        let throttle = throttle();
        let cq_overflow = overflows(&server);
        server::ask_to_stop(variant, &addr);
        let clean = server.stop(STOP_GRACE);
        return measured.map(|mut m| {
            m.throttle = throttle;
            m.cq_overflow = cq_overflow;
            m.counters = server.last_stderr_line();
            m.notes.extend(stop_note(variant, clean, false));
            m
        });
    }
    let lg_files = loadgen_cli::Files {
        json: &files.path("loadgen.json"),
        hist: &files.path("hist"),
        hgrm: &files.path("hgrm"),
        interval_log: &files.path("intervals.hlog"),
    };
    let mut args = loadgen_cli::args(point, &addr, &place.client_cpus, &lg_files);
    args.extend(loadgen_cli::server_side(&counter, &place.server_cpus));
    let mut watch = Watch::start(&mut server, place, group.as_ref(), progress)?;
    watch.keeps_still = quiet::keeps_still(point);
    watch.counting = Some(&counting);
    let (lg_result, remote_cpu, remote_counted) = match bins.agents.as_deref() {
        Some(agents) => {
            let edges = Edges::new(&counter, place, point, &counting);
            let done = watch.remote(agents, point, &args, &lg_files, files, &edges)?;
            (done, edges.window_cpu(), edges.counted())
        }
        None => (
            watch.local(&bins.loadgen, &args, place, files, deadline(point))?,
            None,
            None,
        ),
    };
    let lg_exit = unix_now();
    let counted = remote_counted.or_else(|| watch.counted.take());
    let samples = watch.last_sample();
    let throttle = throttle();
    // A backlog seen in any sample of the load (500 ms apart, and at the window's edges).
    let seen = samples.iter().any(|s| s.cq_backlog == Some(true));
    let cq_overflow = overflows(&server).map(|(dropped, after)| (dropped, after || seen));
    let notes = stop(variant, &addr, &mut server)?;
    lg_result.map_err(Failure::Loadgen)?;
    let mut m = measured(
        point, files, run_dir, &lg_files, &samples, lg_exit, remote_cpu,
    )?;
    m.cost.counted = counted
        .unwrap_or_else(|| counting.never_read())
        .per_request(m.throughput_per_sec);
    m.counters = server.last_stderr_line();
    m.notes = notes;
    m.throttle = throttle;
    m.cq_overflow = cq_overflow;
    Ok(m)
}

/// The counters of the server's group (`run::counters`), or why it has none.
fn counting(accounting: &Accounting, group: Option<&Group>, place: &Placement) -> Counting {
    match accounting.perf_dir(group) {
        Ok(dir) => Counting::open(&dir, place.server_cpus.as_slice()),
        Err(why) => Counting::unavailable(why),
    }
}

/// The load of an outside client (`run::outside`), handed over to once the server is up.
fn outside_point<'a>(
    name: &str,
    point: &'a Point,
    server: &'a mut Proc,
    addr: &'a str,
    bins: &'a Binaries,
    place: &'a Placement,
    files: &'a RunFiles,
) -> Result<outside::Job<'a>, Failure> {
    match crate::run::find_client(name) {
        Some(client) => Ok(outside::Job {
            client,
            point,
            server,
            addr,
            loadgen: &bins.loadgen,
            place,
            files,
        }),
        None => Err(Failure::Loadgen(format!(
            "no outside client is named {name}"
        ))),
    }
}

/// A failure of the harness's own files, told as loadgen's.
fn io(what: &str, e: &dyn std::fmt::Display) -> Failure {
    Failure::Loadgen(format!("{what}: {e}"))
}

/// Stops the server (asking first, unless it died): a died server is the point's failure;
/// else the notes of how it stopped.
fn stop(variant: &Variant, addr: &str, server: &mut Proc) -> Result<Vec<String>, Failure> {
    let died = server.try_wait();
    if died.is_none() {
        server::ask_to_stop(variant, addr);
    }
    let clean = server.stop(STOP_GRACE);
    if let Some(status) = died {
        return Err(Failure::Died(children::last_words(status, server)));
    }
    Ok(stop_note(variant, clean, true).into_iter().collect())
}

/// What is worth a note in how the server stopped: killed after the grace, or (with
/// `status_too`) a failing exit status.
fn stop_note(
    variant: &Variant,
    clean: Option<std::process::ExitStatus>,
    status_too: bool,
) -> Option<String> {
    match clean {
        None => Some(format!(
            "{} did not stop within {} s of SIGTERM and was killed",
            variant.name,
            STOP_GRACE.as_secs()
        )),
        Some(s) if status_too && !s.success() => {
            Some(format!("{} exited with {s} at its stop", variant.name))
        }
        Some(_) => None,
    }
}

/// The point's measures from loadgen's JSON and interval log and the server's samples over
/// loadgen's measured window; the counters, notes and throttle are the caller's.
fn measured(
    point: &Point,
    files: &RunFiles,
    run_dir: &Path,
    lg_files: &loadgen_cli::Files<'_>,
    samples: &[Sample],
    lg_exit: f64,
    remote_cpu: Option<WindowCpu>,
) -> Result<Measured, Failure> {
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
    let edges = summary.window_cpu().or(remote_cpu);
    let cost = server_cost(
        &samples[0],
        &samples[1..],
        (start, start + window_secs),
        summary.throughput_per_sec,
        // Memory per connection counts every one the client holds, idle ones included.
        point.shape.total_conns(point.conns),
        edges.as_ref(),
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
        send_lag_us: summary.send_lag_us.map(|l| [l.p50, l.p99]),
        schedule_ok: summary.schedule_ok,
        schedule_reason: summary.schedule_reason.clone(),
        pacing: summary.pacing.clone(),
        window_secs,
        window_exact: logged_start.is_some(),
        cost,
        hist,
        connections: summary
            .connections_opened
            .map(|o| [o, summary.idle_held.unwrap_or(0)]),
        ops_us: ops_us(&summary),
        counters: None,
        notes: Vec::new(),
        throttle: None,
        cq_overflow: None,
        driver_latency_us: None,
        driver_avg_min_us: None,
    })
}

/// Kv: GETs' p50 and p99 and SETs', where loadgen told them apart.
fn ops_us(summary: &loadgen_cli::Summary) -> Option<[Option<f64>; 4]> {
    let (get, set) = (summary.get_latency_us, summary.set_latency_us);
    (get.is_some() || set.is_some()).then(|| {
        [
            get.map(|p| p.p50),
            get.map(|p| p.p99),
            set.map(|p| p.p50),
            set.map(|p| p.p99),
        ]
    })
}

/// How long loadgen may take before it is given up: its own timeouts plus a margin.
fn deadline(point: &Point) -> Duration {
    let run = match point.stop {
        Stop::Duration(d) => d,
        // A request-count point runs until its last reply, which a slow server may take long
        // to send; loadgen's reply timeout bounds each connection.
        Stop::Requests(k) => 60.0 + point.conns as f64 * k as f64 / 2000.0,
    };
    // loadgen's own connect timeout (`loadgen_cli::args`), idle connections included.
    let connect = 10.0 + point.shape.total_conns(point.conns) as f64 / 250.0;
    Duration::from_secs_f64(connect + point.warmup + run + 30.0)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
