//! Start, accept and stop: a thread per worker, each pinned (with `--cpus`), each
//! running its own monoio runtime (io_uring driver, timer) and accept loop on its own
//! listener.
//!
//! Start: block the stop signals, pin `main` to the `--cpus` list, open the rooms,
//! bind every listener, start the workers and wait until each has pinned itself
//! and set up its ring, then print READY. Any failure before READY (no io_uring,
//! a CPU that is not there, the port in use) is one line and exit status 2.
//! Stop: on SIGINT or SIGTERM, tell every worker to stop (its accept loop ends, and
//! dropping its runtime drops its tasks and cancels what is in flight on its ring),
//! `fdatasync` every room, print the counters, and return.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use launch::workers::{Placement, Workers};
use launch::{App, CommonArgs, Conn, CpuList, RingArgs};
use monoio::blocking::DefaultThreadPool;
use monoio::net::{TcpListener, TcpStream};
use monoio::{IoUringDriver, RuntimeBuilder};
use service::outbox::two_task::Outbox;
use service::signal::Signal;

use crate::{NAME, chat, echo, exchange};

/// Threads of the blocking pool per worker, for the hub calls of `--fsync always`
/// (each a `write(2)` or `pread(2)` of a room file; the sync itself is the commit
/// thread's): monoio's pool has a fixed size, so it is sized for a few calls of every
/// worker at once.
const BLOCKING_THREADS_PER_WORKER: usize = 4;

/// monoio's own submission-ring size (`RuntimeBuilder::with_entries`: "the default size
/// is 1024").
const MONOIO_SQ_ENTRIES: u32 = 1024;

/// How long the stop waits for the workers' runtimes to come down.
const STOP_GRACE: Duration = Duration::from_secs(4);

/// What every connection task of the server shares.
pub(crate) type Service = launch::Service<Outbox>;

pub(crate) fn serve(args: &CommonArgs, ring: &RingArgs) -> anyhow::Result<()> {
    let (shutdown, service) = Service::begin(args)?;
    let (listeners, addr) = launch::bind_per_worker(args)?;
    let pool = match &service.app {
        App::Chat(rooms) if rooms.offload => Some(DefaultThreadPool::new(
            BLOCKING_THREADS_PER_WORKER * listeners.len(),
        )),
        _ => None,
    };
    let sq = ring.sq(MONOIO_SQ_ENTRIES);
    let rings = (sq, ring.cq(sq)?);
    let workers = start(listeners, args.cpus.as_ref(), rings, pool, &service)?;
    launch::announce_ready(addr)?;
    shutdown.wait();
    workers.stop();
    service.finish(NAME)
}

/// Started workers, and how to tell each to stop.
#[derive(Debug)]
struct Running {
    stops: Vec<Arc<Signal>>,
    workers: Workers<()>,
}

/// Starts a worker thread per listener (pinned, with its own ring of `sq` submission and
/// `cq` completion entries) and returns
/// once every one has its runtime.
fn start(
    listeners: Vec<StdListener>,
    cpus: Option<&CpuList>,
    (sq, cq): (u32, u32),
    pool: Option<DefaultThreadPool>,
    service: &Arc<Service>,
) -> anyhow::Result<Running> {
    let stops: Vec<Arc<Signal>> = listeners.iter().map(|_| Arc::default()).collect();
    let items = listeners.into_iter().zip(stops.iter().cloned()).collect();
    let service = Arc::clone(service);
    let placement = Placement::one_per_worker(cpus);
    let workers = Workers::start(NAME, items, placement, move |_, (listener, stop)| {
        // monoio sizes the completion queue only through the io-uring builder it is handed.
        let mut uring = io_uring_06::IoUring::builder();
        uring.setup_cqsize(cq);
        let mut builder = RuntimeBuilder::<IoUringDriver>::new()
            .with_entries(sq)
            .uring_builder(uring)
            .enable_timer();
        if let Some(pool) = &pool {
            builder = builder.attach_thread_pool(Box::new(pool.clone()));
        }
        let mut runtime = builder.build().context(
            "cannot set up an io_uring (is it disabled by kernel.io_uring_disabled, \
             a seccomp filter, or RLIMIT_MEMLOCK?)",
        )?;
        // monoio takes a descriptor only inside its runtime (the ring's thread-local).
        let listener = runtime
            .block_on(async { TcpListener::from_std(listener) })
            .context("cannot take the listener into the runtime")?;
        let service = Arc::clone(&service);
        Ok(move || {
            runtime.block_on(async move {
                monoio::select! {
                    () = accept_loop(listener, service) => {}
                    () = stop.notified() => {}
                }
            });
            // Drops every connection task of this worker and cancels its operations.
            drop(runtime);
        })
    })?;
    Ok(Running { stops, workers })
}

impl Running {
    /// Tells every worker to stop and waits, a bounded time, until they have.
    fn stop(self) {
        for stop in &self.stops {
            stop.notify();
        }
        self.workers.join(STOP_GRACE);
    }
}

/// Accepts connections for as long as the runtime runs it, a task each, on this
/// worker's runtime. The loop and each connection task count into tallies of their own.
async fn accept_loop(listener: TcpListener, service: Arc<Service>) {
    let mut tally = service.counters.tally();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                launch::accepted(&mut tally, stream.set_nodelay(true));
                monoio::spawn(connection(stream, Arc::clone(&service)));
            }
            Err(e) => {
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    monoio::time::sleep(pause).await;
                }
            }
        }
    }
}

async fn connection(mut stream: TcpStream, service: Arc<Service>) {
    let counters = &service.counters;
    let tally = &mut counters.tally();
    let result = match service.app.connection() {
        Conn::Echo(config) => echo::serve(&mut stream, config, tally).await,
        Conn::Chat(rooms) => chat::serve(stream, rooms, counters, tally).await,
        Conn::Exchange(mut conn) => exchange::serve(&mut stream, &mut conn, tally).await,
    };
    launch::closed(tally, &result);
}
