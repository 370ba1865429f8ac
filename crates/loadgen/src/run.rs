//! The main thread of a run: it resolves the address, raises the descriptor limit, starts the
//! workers, waits until every connection is up, starts the clock, shows progress, and merges
//! what the workers measured into a [`Summary`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{ChatProfile, Config, Stop, Workload};
use crate::error::{Error, Fault};
use crate::hist::{Histograms, Percentiles, merge};
use crate::schedule::Schedule;
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
    if let Some(pid) = cfg.server_pid {
        sys::process_cpu_ns(pid).map_err(|e| {
            Error::Config(format!(
                "--server-pid {pid}: cannot read /proc/{pid}/stat: {e}"
            ))
        })?;
    }
    let addr = resolve(&cfg.addr)?;
    let needed = cfg.conns as u64 + SPARE_FDS + 2 * cfg.threads as u64;
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

fn run_pinned(
    cfg: &Config,
    addr: SocketAddr,
    nofile: u64,
    warnings: Vec<String>,
    gate: &mut dyn FnMut(usize) -> Result<(), Error>,
) -> Result<Summary, Error> {
    if let Workload::Kv(kv) = &cfg.workload {
        // Every GET must find a value; the preload writes as the writer after the last
        // connection, so that a GET may see its values too.
        if kv.get_ratio > 0.0 {
            if cfg.progress && kv.keys >= 100_000 {
                eprintln!("loadgen: storing {} keys before the clock starts", kv.keys);
            }
            crate::kv::preload(
                addr,
                kv.keys,
                cfg.conns as u32,
                cfg.msg_size,
                cfg.reply_timeout,
            )?;
        }
    }
    let warm_ns = cfg.warmup.as_nanos() as u64;
    let rate = offered_rate(cfg);
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
    let plan = Arc::new(Plan {
        cfg: cfg.clone(),
        addr,
        schedule: rate.map(|rate| Schedule::new(rate, cfg.conns)),
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
    });

    let (up_tx, up_rx) = mpsc::channel();
    let mut controls = Vec::with_capacity(cfg.threads);
    let mut handles = Vec::with_capacity(cfg.threads);
    for t in 0..cfg.threads {
        let (ctl_tx, ctl_rx) = mpsc::channel();
        let ids: Vec<usize> = (t..cfg.conns).step_by(cfg.threads).collect();
        let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]);
        let (plan, up) = (Arc::clone(&plan), up_tx.clone());
        let handle = thread::Builder::new()
            .name(format!("loadgen-{t}"))
            .spawn(move || worker::run(plan, t, cpu, ids, up, ctl_rx))
            .map_err(|e| Error::io("starting a worker thread", e))?;
        controls.push(ctl_tx);
        handles.push(handle);
    }
    drop(up_tx);

    let abort = |controls: &[mpsc::Sender<Control>], handles: Vec<thread::JoinHandle<()>>| {
        for c in controls {
            // A worker that is gone needs no telling.
            let _ = c.send(Control::Abort);
        }
        for h in handles {
            let _ = h.join();
        }
    };

    // Phase 1: every worker connects its connections (each bounded by the connect timeout).
    let mut connected = 0usize;
    let mut connect_faults = [0u64; Fault::COUNT];
    let mut first_error = None;
    let mut handshake_error = None;
    let deadline = Instant::now() + cfg.connect_timeout + Duration::from_secs(5);
    let mut heard = 0;
    while heard < cfg.threads {
        let wait = deadline.saturating_duration_since(Instant::now());
        match up_rx.recv_timeout(wait) {
            Ok(Up::Connected(Ok(c))) => {
                heard += 1;
                connected += c.ok;
                for (sum, n) in connect_faults.iter_mut().zip(c.faults) {
                    *sum += n;
                }
                if first_error.is_none() {
                    first_error = c.first_error;
                }
                if handshake_error.is_none() {
                    handshake_error = c.handshake_error;
                }
            }
            Ok(Up::Connected(Err(e))) => {
                abort(&controls, handles);
                return Err(e);
            }
            Ok(Up::Done(..)) => heard += 1,
            Err(_) => {
                abort(&controls, handles);
                return Err(Error::WorkerPanicked);
            }
        }
    }
    if connected == 0 {
        abort(&controls, handles);
        if let Some(reason) = handshake_error {
            return Err(Error::Handshake {
                addr: addr.to_string(),
                reason,
            });
        }
        return Err(Error::Unreachable {
            addr: addr.to_string(),
            source: first_error.unwrap_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotConnected, "no connection came up")
            }),
        });
    }
    if cfg.progress && connected < cfg.conns {
        eprintln!(
            "loadgen: {connected} of {} connections came up ({})",
            cfg.conns,
            first_error.map_or_else(String::new, |e| e.to_string())
        );
    }

    if let Err(e) = gate(connected) {
        abort(&controls, handles);
        return Err(e);
    }

    // Phase 2: start the clock, watch, collect.
    let epoch = Instant::now();
    let wall_epoch = SystemTime::now();
    for c in &controls {
        // A worker whose receiver is gone has died; the join below reports it.
        let _ = c.send(Control::Start(epoch));
    }
    let cpu_ticks_at = |_: ()| {
        (!cfg.cpus.is_empty())
            .then(|| sys::CpuTicks::read(&cfg.cpus).ok())
            .flatten()
    };
    let server_cpu = || cfg.server_pid.and_then(|pid| sys::process_cpu_ns(pid).ok());
    let mut ticks_start = (warm_ns == 0).then(|| cpu_ticks_at(())).flatten();
    let mut server_start = (warm_ns == 0).then(server_cpu).flatten();
    let mut server_end = None;
    let window_end = match cfg.stop {
        Stop::Duration(d) => Some(cfg.warmup + d),
        Stop::Requests(_) => None,
    };
    let show_progress = cfg.progress
        && match cfg.stop {
            Stop::Duration(d) => cfg.warmup + d > PROGRESS_AFTER,
            Stop::Requests(_) => true,
        };
    let mut reports: Vec<Option<Report>> = (0..cfg.threads).map(|_| None).collect();
    let mut failure = None;
    let mut next_progress = Duration::from_secs(1);
    let mut last_count = 0u64;
    let mut done = 0;
    // Bounded: the workers end on their own (see `worker`), and each one's end is a message.
    while done < cfg.threads {
        let elapsed = epoch.elapsed();
        let mut wake = next_progress;
        if ticks_start.is_none() && warm_ns > 0 && elapsed < cfg.warmup {
            wake = wake.min(cfg.warmup);
        }
        if let (Some(end), None) = (window_end, server_end) {
            wake = wake.min(end);
        }
        match up_rx.recv_timeout(wake.saturating_sub(elapsed)) {
            Ok(Up::Done(i, report)) => {
                done += 1;
                match *report {
                    Ok(r) => reports[i] = Some(r),
                    Err(e) => failure = Some(e),
                }
            }
            Ok(Up::Connected(..)) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let elapsed = epoch.elapsed();
        if ticks_start.is_none() && elapsed >= cfg.warmup {
            ticks_start = cpu_ticks_at(());
        }
        if server_start.is_none() && elapsed >= cfg.warmup {
            server_start = server_cpu();
        }
        if window_end.is_some_and(|end| elapsed >= end) && server_end.is_none() {
            server_end = server_cpu();
        }
        if elapsed >= next_progress {
            let count: u64 = plan
                .progress
                .iter()
                .map(|p| p.0.load(std::sync::atomic::Ordering::Relaxed))
                .sum();
            let long = matches!(cfg.stop, Stop::Duration(_)) || elapsed > PROGRESS_AFTER;
            if show_progress && long {
                let phase = if elapsed < cfg.warmup {
                    "warmup"
                } else {
                    "measuring"
                };
                eprintln!(
                    "loadgen: {:>6.1} s {phase}: {count} replies, {} /s",
                    elapsed.as_secs_f64(),
                    count - last_count
                );
            }
            last_count = count;
            next_progress += Duration::from_secs(1);
        }
    }
    let ticks_end = cpu_ticks_at(());
    if server_end.is_none() {
        server_end = server_cpu();
    }
    let mut panicked = false;
    for h in handles {
        panicked |= h.join().is_err();
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if panicked || reports.iter().any(Option::is_none) {
        return Err(Error::WorkerPanicked);
    }
    let reports: Vec<Report> = reports.into_iter().flatten().collect();

    let mut faults = connect_faults;
    for r in &reports {
        for (sum, n) in faults.iter_mut().zip(r.faults) {
            *sum += n;
        }
    }
    let measured: u64 = reports.iter().map(|r| r.measured).sum();
    let window_secs = match cfg.stop {
        Stop::Duration(d) => d.as_secs_f64(),
        Stop::Requests(_) => {
            let last = reports.iter().map(|r| r.last_reply_ns).max().unwrap_or(0);
            last.saturating_sub(warm_ns) as f64 / 1e9
        }
    };
    let cpu_ns: u64 = reports.iter().map(|r| r.cpu_ns).sum();
    let utilization = reports
        .iter()
        .filter(|r| r.wall_ns > 0)
        .map(|r| r.cpu_ns as f64 / r.wall_ns as f64)
        .fold(0.0, f64::max);
    let cpus_busy = match (ticks_start, ticks_end) {
        (Some(a), Some(b)) => a.busy_since(b),
        _ => None,
    };
    let server_secs = match (server_start, server_end) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9),
        _ => None,
    };
    let intervals_len = reports.iter().map(|r| r.intervals.len()).max().unwrap_or(0);
    let intervals = (0..intervals_len)
        .map(|i| merge(reports.iter().filter_map(|r| r.intervals.get(i))))
        .collect();
    let histograms = Histograms {
        latency: merge(reports.iter().map(|r| &r.latency)),
        service: merge(reports.iter().map(|r| &r.service)),
        delivery: plan
            .rooms
            .as_ref()
            .map(|_| merge(reports.iter().filter_map(|r| r.delivery.as_ref()))),
        intervals,
        interval: cfg.interval.unwrap_or(Duration::from_secs(1)),
        window_start: wall_epoch + cfg.warmup,
    };
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
    Ok(Summary {
        workload: workload.to_owned(),
        profile: profile.map(|p| format!("{p:?}").to_lowercase()),
        get_ratio: kv.map(|k| k.get_ratio),
        keys: kv.map(|k| k.keys),
        path: match &cfg.workload {
            Workload::Http(path) => Some(path.as_str().to_owned()),
            _ => None,
        },
        addr: addr.to_string(),
        conns: cfg.conns,
        connected,
        threads: cfg.threads,
        cpus: cfg.cpus.clone(),
        msg_size: cfg.msg_size,
        depth: cfg.depth,
        mode: if rate.is_some() { "open" } else { "closed" }.to_owned(),
        rate,
        requests_per_conn: match cfg.stop {
            Stop::Requests(k) => Some(k),
            Stop::Duration(_) => None,
        },
        warmup_secs: cfg.warmup.as_secs_f64(),
        window_secs,
        messages: measured,
        throughput_per_sec: if window_secs > 0.0 {
            measured as f64 / window_secs
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
        deliveries: reports.iter().map(|r| r.deliveries).sum(),
        errors: Errors::from_counts(&faults),
        client_cpu_secs: cpu_ns as f64 / 1e9,
        client_cpu_per_msg_us: if measured > 0 {
            cpu_ns as f64 / 1e3 / measured as f64
        } else {
            0.0
        },
        client_cpu_utilization: utilization,
        client_cpus_busy: cpus_busy,
        client_bound: utilization > CLIENT_BOUND || cpus_busy.is_some_and(|b| b > CLIENT_BOUND),
        server_pid: cfg.server_pid,
        server_cpu_secs: server_secs,
        server_cpu_per_msg_us: server_secs
            .filter(|_| measured > 0)
            .map(|s| s * 1e6 / measured as f64),
        nofile_limit: nofile,
        warnings,
        histograms,
    })
}

/// The open-loop rate in messages per second in total: `--rate`, or for chat ingest the byte
/// rate of every connection in lines; `None` for the closed loop.
fn offered_rate(cfg: &Config) -> Option<f64> {
    match &cfg.workload {
        Workload::Chat(c) if c.profile == ChatProfile::Ingest => {
            Some(c.byte_rate / cfg.msg_size as f64 * cfg.conns as f64)
        }
        _ => cfg.rate,
    }
}
