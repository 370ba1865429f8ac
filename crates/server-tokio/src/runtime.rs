//! Building, pinning and stopping the runtimes of the two flavors. Both report
//! every worker started (and pinned, with `--cpus`) before `main` prints READY, so
//! a CPU that cannot be used is exit status 2, not a warning after the fact.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use launch::CpuList;
use launch::cpus::{pin_current_thread, pin_current_thread_to};
use launch::workers::{Placement, START_TIMEOUT, Workers};
use tokio::net::TcpListener;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::watch;

use crate::NAME;
use crate::serve::{Service, accept_loop};

/// How long the stop waits for tasks on the blocking pool (an append waiting
/// for the disk) before it goes on without them.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The runtimes of a started server.
#[derive(Debug)]
pub(crate) enum Running {
    Multi(Runtime),
    PerCore {
        stop: watch::Sender<bool>,
        workers: Workers<()>,
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

/// The per-core flavor: a worker thread per listener, each running its own
/// current-thread runtime and accept loop.
pub(crate) fn per_core(
    listeners: Vec<StdListener>,
    cpus: Option<&CpuList>,
    service: &Arc<Service>,
) -> anyhow::Result<Running> {
    let (stop, stopped) = watch::channel(false);
    let (service, pool_cpus) = (Arc::clone(service), cpus.cloned());
    let placement = Placement::one_per_worker(cpus);
    let workers = Workers::start(NAME, listeners, placement, move |_, listener| {
        let mut builder = Builder::new_current_thread();
        builder.enable_all();
        if let Some(cpus) = pool_cpus.clone() {
            // The only threads this runtime starts are its blocking pool's.
            builder.on_thread_start(move || {
                if let Err(e) = pin_current_thread_to(&cpus) {
                    eprintln!("{NAME}: warning: {e:#}");
                }
            });
        }
        let runtime = builder.build().context("starting a Tokio runtime")?;
        let listener = register(&runtime, listener)?;
        let (service, mut stop) = (Arc::clone(&service), stopped.clone());
        Ok(move || {
            runtime.block_on(async {
                tokio::select! {
                    () = accept_loop(listener, service) => {}
                    _ = stop.wait_for(|&stop| stop) => {}
                }
            });
            // Drops every connection task of this worker.
            runtime.shutdown_timeout(STOP_GRACE);
        })
    })?;
    Ok(Running::PerCore { stop, workers })
}

impl Running {
    /// Stops accepting and drops every connection task; returns once the
    /// runtimes are down, or after a bounded wait for blocking-pool work.
    pub(crate) fn stop(self) {
        match self {
            Running::Multi(runtime) => runtime.shutdown_timeout(STOP_GRACE),
            Running::PerCore { stop, workers } => {
                let _ = stop.send(true);
                workers.join(2 * STOP_GRACE);
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
