//! Building, pinning and stopping the runtimes of the two flavors. Both report
//! every worker started (and pinned, with `--cpus`) before `main` prints READY, so
//! a CPU that cannot be used is exit status 2, not a warning after the fact.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use launch::CpuList;
use launch::cpus::{pin_current_thread, pin_current_thread_to};
use tokio::net::TcpListener;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::watch;

use crate::NAME;
use crate::serve::{Service, accept_loop};

/// How long a worker may take to start before the server gives up.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the stop waits for tasks on the blocking pool (an append waiting
/// for the disk) before it goes on without them.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The runtimes of a started server.
#[derive(Debug)]
pub(crate) enum Running {
    Multi(Runtime),
    PerCore {
        stop: watch::Sender<bool>,
        done: mpsc::Receiver<()>,
        threads: usize,
    },
}

/// The multi flavor: one multi-thread runtime, `workers` worker threads, and
/// one accept task on `listener`.
pub(crate) fn multi(
    listener: StdListener,
    workers: usize,
    cpus: Option<&CpuList>,
    service: &Arc<Service>,
) -> anyhow::Result<Running> {
    let mut builder = Builder::new_multi_thread();
    builder
        .worker_threads(workers)
        .thread_name(NAME)
        .enable_all();
    let pinned = cpus.map(|cpus| {
        let (report, pinned) = mpsc::channel();
        let next = AtomicUsize::new(0);
        let cpus = cpus.clone();
        // Tokio starts its `workers` worker threads inside `build`, before any
        // task can start a blocking-pool thread, so the first `workers` calls are
        // the workers. Blocking-pool threads inherit the single CPU of the worker
        // that started them; they get the whole list back.
        builder.on_thread_start(move || {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i < workers {
                let _ = report.send(pin_current_thread(cpus.for_worker(i)));
            } else if let Err(e) = pin_current_thread_to(&cpus) {
                eprintln!("{NAME}: warning: {e:#}");
            }
        });
        pinned
    });
    let runtime = builder.build().context("starting the Tokio runtime")?;
    if let Some(pinned) = pinned {
        for _ in 0..workers {
            pinned
                .recv_timeout(START_TIMEOUT)
                .context("a worker thread did not start")??;
        }
    }
    let listener = register(&runtime, listener)?;
    runtime.spawn(accept_loop(listener, Arc::clone(service)));
    Ok(Running::Multi(runtime))
}

/// The per-core flavor: a thread per listener, each running its own
/// current-thread runtime and accept loop.
pub(crate) fn per_core(
    listeners: Vec<StdListener>,
    cpus: Option<&CpuList>,
    service: &Arc<Service>,
) -> anyhow::Result<Running> {
    let (stop, stopped) = watch::channel(false);
    let (report, started) = mpsc::channel();
    let (finished, done) = mpsc::channel();
    let threads = listeners.len();
    for (i, listener) in listeners.into_iter().enumerate() {
        let worker = Worker {
            cpus: cpus.cloned(),
            index: i,
            listener,
            service: Arc::clone(service),
            stop: stopped.clone(),
            finished: finished.clone(),
        };
        let report = report.clone();
        std::thread::Builder::new()
            .name(format!("{NAME}-{i}"))
            .spawn(move || worker.run(&report))
            .context("starting a worker thread")?;
    }
    for _ in 0..threads {
        started
            .recv_timeout(START_TIMEOUT)
            .context("a worker thread did not start")??;
    }
    Ok(Running::PerCore {
        stop,
        done,
        threads,
    })
}

/// One per-core worker thread, before it starts.
struct Worker {
    cpus: Option<CpuList>,
    index: usize,
    listener: StdListener,
    service: Arc<Service>,
    stop: watch::Receiver<bool>,
    finished: mpsc::Sender<()>,
}

impl Worker {
    fn run(self, report: &mpsc::Sender<anyhow::Result<()>>) {
        let Worker {
            cpus,
            index,
            listener,
            service,
            mut stop,
            finished,
        } = self;
        let setup = || -> anyhow::Result<(Runtime, TcpListener)> {
            let mut builder = Builder::new_current_thread();
            builder.enable_all();
            if let Some(cpus) = cpus {
                pin_current_thread(cpus.for_worker(index))?;
                // The only threads this runtime starts are its blocking pool's.
                builder.on_thread_start(move || {
                    if let Err(e) = pin_current_thread_to(&cpus) {
                        eprintln!("{NAME}: warning: {e:#}");
                    }
                });
            }
            let runtime = builder.build().context("starting a Tokio runtime")?;
            let listener = register(&runtime, listener)?;
            Ok((runtime, listener))
        };
        let (runtime, listener) = match setup() {
            Ok(ready) => {
                let _ = report.send(Ok(()));
                ready
            }
            Err(e) => {
                let _ = report.send(Err(e));
                return;
            }
        };
        runtime.block_on(async {
            tokio::select! {
                () = accept_loop(listener, service) => {}
                _ = stop.wait_for(|&stop| stop) => {}
            }
        });
        // Drops every connection task of this worker.
        runtime.shutdown_timeout(STOP_GRACE);
        let _ = finished.send(());
    }
}

impl Running {
    /// Stops accepting and drops every connection task; returns once the
    /// runtimes are down, or after a bounded wait for blocking-pool work.
    pub(crate) fn stop(self) {
        match self {
            Running::Multi(runtime) => runtime.shutdown_timeout(STOP_GRACE),
            Running::PerCore {
                stop,
                done,
                threads,
            } => {
                let _ = stop.send(true);
                let deadline = Instant::now() + 2 * STOP_GRACE;
                for _ in 0..threads {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if done.recv_timeout(left).is_err() {
                        break;
                    }
                }
            }
        }
    }
}

/// Hands a listener bound by `launch` (blocking, as std leaves it) to `runtime`'s
/// reactor.
fn register(runtime: &Runtime, listener: StdListener) -> anyhow::Result<TcpListener> {
    let _inside = runtime.enter();
    listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
        .context("registering the listener with Tokio")
}
