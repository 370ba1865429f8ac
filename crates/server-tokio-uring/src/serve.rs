//! Start, accept and stop: a thread per worker, each pinned (with `--cpus`),
//! each running its own tokio-uring runtime and accept loop on its own listener.
//!
//! Start: block the stop signals, pin `main` to the `--cpus` list, open the rooms,
//! bind every listener, start the workers and wait until each has pinned itself
//! and set up its ring, then print READY. Any failure before READY (no io_uring,
//! a CPU that is not there, the port in use) is one line and exit status 2.
//! Stop: on SIGINT or SIGTERM, tell every worker to stop (its runtime drops its
//! tasks and cancels what is in flight on its ring), `fdatasync` every room,
//! print the counters, and return.

use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use launch::workers::{Placement, Workers};
use launch::{CommonArgs, Conn, CpuList, RingArgs};
use tokio::sync::watch;
use tokio_uring::net::{TcpListener, TcpStream};

use crate::chat;
use crate::exchange;
use crate::outbox::Outbox;
use crate::{NAME, echo};

/// tokio-uring's own submission-ring size (`tokio_uring::builder`: "The default value is
/// 256").
const TOKIO_URING_SQ_ENTRIES: u32 = 256;

/// How long the stop waits for the workers' runtimes to come down.
const STOP_GRACE: Duration = Duration::from_secs(4);

/// What every connection task of the server shares.
pub(crate) type Service = launch::Service<Outbox>;

pub(crate) fn serve(args: &CommonArgs, ring: &RingArgs) -> anyhow::Result<()> {
    let (shutdown, service) = Service::begin(args)?;
    let (listeners, addr) = launch::bind_per_worker(args)?;
    let sq = ring.sq(TOKIO_URING_SQ_ENTRIES);
    let rings = (sq, ring.cq(sq)?);
    let workers = start(listeners, args.cpus.as_ref(), rings, &service)?;
    launch::announce_ready(addr)?;
    shutdown.wait();
    workers.stop();
    service.finish(NAME)
}

/// Started workers, and how to tell them to stop.
#[derive(Debug)]
struct Running {
    stop: watch::Sender<bool>,
    workers: Workers<()>,
}

/// Starts a worker thread per listener (pinned, with its own ring of `sq` submission and
/// `cq` completion entries) and returns
/// once every one has its runtime.
fn start(
    listeners: Vec<StdListener>,
    cpus: Option<&CpuList>,
    (sq, cq): (u32, u32),
    service: &Arc<Service>,
) -> anyhow::Result<Running> {
    let (stop, stopped) = watch::channel(false);
    let service = Arc::clone(service);
    let placement = Placement::one_per_worker(cpus);
    let workers = Workers::start(NAME, listeners, placement, move |_, listener| {
        let mut builder = tokio_uring::builder();
        builder
            .entries(sq)
            .uring_builder(tokio_uring::uring_builder().setup_cqsize(cq));
        let runtime = tokio_uring::Runtime::new(&builder).context(
            "cannot set up an io_uring (is it disabled by kernel.io_uring_disabled, \
             a seccomp filter, or RLIMIT_MEMLOCK?)",
        )?;
        let (service, mut stop) = (Arc::clone(&service), stopped.clone());
        Ok(move || {
            runtime.block_on(async {
                let listener = TcpListener::from_std(listener);
                tokio::select! {
                    () = accept_loop(listener, service) => {}
                    _ = stop.wait_for(|&stop| stop) => {}
                }
            });
            // Drops every connection task of this worker and cancels its operations.
            drop(runtime);
        })
    })?;
    Ok(Running { stop, workers })
}

impl Running {
    /// Tells every worker to stop and waits, a bounded time, until they have.
    fn stop(self) {
        let _ = self.stop.send(true);
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
                tokio_uring::spawn(connection(stream, Arc::clone(&service)));
            }
            Err(e) => {
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

async fn connection(stream: TcpStream, service: Arc<Service>) {
    let counters = &service.counters;
    let tally = &mut counters.tally();
    let result = match service.app.connection() {
        Conn::Echo(config) => echo::serve(&stream, config, tally).await,
        Conn::Chat(rooms) => chat::serve(stream, rooms, counters, tally).await,
        Conn::Exchange(mut conn) => exchange::serve(&stream, &mut conn, tally).await,
    };
    launch::closed(tally, &result);
}
