//! Start, accept and stop: a thread per worker, each pinned (with `--cpus`), each
//! running its own compio runtime (io_uring driver) and accept loop on its own listener.
//!
//! Start: block the stop signals, pin `main` to the `--cpus` list, open the rooms,
//! bind every listener, start the workers and wait until each has pinned itself
//! and set up its ring, then print READY. Any failure before READY (no io_uring,
//! a CPU that is not there, the port in use) is one line and exit status 2.
//! Stop: on SIGINT or SIGTERM, tell every worker to stop (its accept loop ends, and
//! dropping its runtime drops its tasks and cancels what is in flight on its ring),
//! `fdatasync` every room, print the counters, and return.

use std::net::TcpListener as StdListener;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use compio::driver::ProactorBuilder;
use compio::net::{TcpListener, TcpStream};
use compio::runtime::Runtime;
use launch::workers::{Placement, Workers};
use launch::{CommonArgs, Conn, CpuList, RingArgs};
use service::outbox::two_task::Outbox;
use service::race::{First, first};
use service::signal::Signal;

use crate::{NAME, chat, echo, exchange};

/// compio's own submission-ring size (`ProactorBuilder::capacity`: "The default value is
/// 1024").
const COMPIO_SQ_ENTRIES: u32 = 1024;

/// How long the stop waits for the workers' runtimes to come down.
const STOP_GRACE: Duration = Duration::from_secs(4);

/// What every connection task of the server shares.
pub(crate) type Service = launch::Service<Outbox>;

pub(crate) fn serve(args: &CommonArgs, ring: &RingArgs, tuned: bool) -> anyhow::Result<()> {
    let (shutdown, service) = Service::begin(args)?;
    let (listeners, addr) = launch::bind_per_worker(args)?;
    let sq = ring.sq(COMPIO_SQ_ENTRIES);
    let rings = Rings {
        sq,
        cq: ring.cq(sq)?,
        tuned,
    };
    let workers = start(listeners, args.cpus.as_ref(), rings, &service)?;
    launch::announce_ready(addr)?;
    shutdown.wait();
    workers.stop();
    service.finish(NAME)
}

/// How each worker's ring is made: its sizes, and whether it is tuned (`--tuned`).
#[derive(Debug, Clone, Copy)]
struct Rings {
    sq: u32,
    cq: u32,
    tuned: bool,
}

/// Provided buffers of a tuned worker's pool, and their size: srv-fiber's.
const POOL_BUFFERS: u16 = 512;
const POOL_BUFFER_LEN: usize = 4096;

impl Rings {
    fn proactor(self) -> ProactorBuilder {
        let mut proactor = ProactorBuilder::new();
        proactor.capacity(self.sq).cqsize(self.cq);
        if self.tuned {
            proactor
                .coop_taskrun(true)
                .taskrun_flag(true)
                .single_issuer(true)
                .defer_taskrun(true)
                .buffer_pool_size(NonZeroU16::new(POOL_BUFFERS).expect("not zero"))
                .buffer_pool_buffer_len(POOL_BUFFER_LEN);
        }
        proactor
    }
}

/// Started workers, and how to tell each to stop.
#[derive(Debug)]
struct Running {
    stops: Vec<Arc<Signal>>,
    workers: Workers<()>,
}

/// Starts a worker thread per listener (pinned, with its own ring of `sq` submission and
/// `cq` completion entries, tuned or not) and returns
/// once every one has its runtime.
fn start(
    listeners: Vec<StdListener>,
    cpus: Option<&CpuList>,
    rings: Rings,
    service: &Arc<Service>,
) -> anyhow::Result<Running> {
    let stops: Vec<Arc<Signal>> = listeners.iter().map(|_| Arc::default()).collect();
    let items = listeners.into_iter().zip(stops.iter().cloned()).collect();
    let service = Arc::clone(service);
    let placement = Placement::one_per_worker(cpus);
    let workers = Workers::start(NAME, items, placement, move |_, (listener, stop)| {
        let proactor = rings.proactor();
        let runtime = Runtime::builder().with_proactor(proactor).build().context(
            "cannot set up an io_uring (is it disabled by kernel.io_uring_disabled, \
             a seccomp filter, or RLIMIT_MEMLOCK?)",
        )?;
        // compio takes a descriptor only inside its runtime.
        let listener = runtime
            .enter(|| TcpListener::from_std(listener))
            .context("cannot take the listener into the runtime")?;
        let service = Arc::clone(&service);
        let managed = rings.tuned;
        Ok(move || {
            runtime.block_on(async move {
                // The accept loop ends only with the stop.
                match first(accept_loop(listener, service, managed), stop.notified()).await {
                    First::A(()) | First::B(()) => {}
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
async fn accept_loop(listener: TcpListener, service: Arc<Service>, managed: bool) {
    let mut tally = service.counters.tally();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                launch::accepted(&mut tally, stream.set_nodelay(true));
                // A compio task dropped with its handle is cancelled: detached, it
                // lives until the connection ends or the runtime is dropped.
                compio::runtime::spawn(connection(stream, Arc::clone(&service), managed)).detach();
            }
            Err(e) => {
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    compio::time::sleep(pause).await;
                }
            }
        }
    }
}

/// One connection; `managed`: echo reads into the worker's buffer pool (`--tuned`).
async fn connection(mut stream: TcpStream, service: Arc<Service>, managed: bool) {
    let counters = &service.counters;
    let tally = &mut counters.tally();
    let result = match service.app.connection() {
        Conn::Echo(config) if managed && config.compute.is_none() => {
            echo::serve_managed(&mut stream, tally).await
        }
        Conn::Echo(config) => echo::serve(&mut stream, config, tally).await,
        Conn::Chat(rooms) => chat::serve(stream, rooms, counters, tally).await,
        Conn::Exchange(mut conn) => exchange::serve(&mut stream, &mut conn, tally).await,
    };
    launch::closed(tally, &result);
}
