//! Start, accept and stop: a thread per worker (started by `launch::workers`, pinned
//! with `--cpus`), each running its own glommio executor with its own listener on the
//! same address (`launch::bind_group`'s `SO_REUSEPORT` group, handed to glommio by
//! `listener::take`), so the kernel spreads the connections and each one lives on one
//! executor for its whole life.
//!
//! Start: block the stop signals, pin `main` to the `--cpus` list, open the rooms, bind
//! every listener, then start the workers: each makes its executor and takes its listener
//! into it, and READY comes only once every executor has one. Any failure before READY
//! (glommio cannot make its rings, RLIMIT_MEMLOCK, a CPU that is not there, the port in
//! use) is one line and exit status 2. Stop: on SIGINT or SIGTERM, close the stop channel
//! (each executor's main future ends, and its tasks are dropped with it), `fdatasync`
//! every room, print the counters, and return.

use std::net::TcpListener as StdListener;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use async_channel::Receiver;
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutor, LocalExecutorBuilder};
use launch::workers::{Placement, Workers};
use launch::{CommonArgs, Conn, CpuList, RingArgs};
use service::outbox::one_task::Outbox;
use service::stream;

use crate::pool::Pool;
use crate::{NAME, listener};

/// glommio's own ring depth (`LocalExecutorBuilder::ring_depth`: "the default is 128").
const GLOMMIO_RING_DEPTH: u32 = 128;

/// How long the stop waits for the executors to come down.
const STOP_GRACE: Duration = Duration::from_secs(4);

/// What every connection task of the server shares.
pub(crate) type Service = launch::Service<Outbox>;

pub(crate) fn serve(args: &CommonArgs, ring: &RingArgs) -> anyhow::Result<()> {
    let (shutdown, service) = Service::begin(args)?;
    let (listeners, addr) = launch::bind_per_worker(args)?;
    let (stop, stopped) = async_channel::unbounded::<()>();
    anyhow::ensure!(
        ring.cq_entries.is_none(),
        "glommio has no option for the completion queue: --sq-entries (its ring depth) \
         sizes it, at twice the depth"
    );
    let depth = ring.sq(GLOMMIO_RING_DEPTH) as usize;
    let workers = start(listeners, args.cpus.as_ref(), depth, &service, stopped)?;
    launch::announce_ready(addr)?;
    shutdown.wait();
    drop(stop);
    workers.join(STOP_GRACE);
    service.finish(NAME)
}

/// Starts a worker thread per listener, each with its executor (made on the thread,
/// pinned to its CPU) and its listener taken into it; returns once every one has its.
fn start(
    listeners: Vec<StdListener>,
    cpus: Option<&CpuList>,
    depth: usize,
    service: &Arc<Service>,
    stopped: Receiver<()>,
) -> anyhow::Result<Workers<()>> {
    let cpus = cpus.cloned();
    let placement = Placement::one_per_worker(cpus.as_ref());
    let service = Arc::clone(service);
    Workers::start(NAME, listeners, placement, move |index, listener| {
        let ex = executor(index, cpus.as_ref(), depth)?;
        // glommio takes a descriptor only inside its executor (its reactor).
        let listener = ex.run(async { listener::take(listener) });
        let (service, stopped) = (Arc::clone(&service), stopped.clone());
        Ok(move || {
            ex.run(futures_lite::future::or(
                accept_loop(listener, service),
                async {
                    // Never sent to: closed at the stop.
                    let _ = stopped.recv().await;
                },
            ));
            // Drops every connection task of this executor.
            drop(ex);
        })
    })
}

/// Makes worker `index`'s executor, its rings `depth` deep, on the calling thread, bound to its CPU of
/// `--cpus` (the thread is pinned there already; glommio is told so that its
/// blocking pool thread is placed with it).
fn executor(index: usize, cpus: Option<&CpuList>, depth: usize) -> anyhow::Result<LocalExecutor> {
    let placement = match cpus {
        Some(cpus) => glommio::Placement::Fixed(cpus.for_worker(index)),
        None => glommio::Placement::Unbound,
    };
    let builder = LocalExecutorBuilder::new(placement)
        .name(&format!("{NAME}-{index}"))
        .ring_depth(depth);
    // glommio panics on some failures of its rings instead of returning them.
    match std::panic::catch_unwind(AssertUnwindSafe(|| builder.make())) {
        Ok(Ok(ex)) => Ok(ex),
        Ok(Err(e)) => Err(anyhow!(
            "cannot start a glommio executor: {e} (glommio needs io_uring, which \
             kernel.io_uring_disabled or a seccomp filter may forbid, and an \
             RLIMIT_MEMLOCK of at least 512 KiB: see `ulimit -l`)"
        )),
        Err(_) => Err(anyhow!(
            "cannot start a glommio executor: it panicked (is io_uring available?)"
        )),
    }
}

/// Accepts connections for as long as the executor runs it, a task each, on this
/// executor. The loop and each connection task count into tallies of their own.
async fn accept_loop(listener: TcpListener, service: Arc<Service>) {
    let mut tally = service.counters.tally();
    loop {
        match listener.accept().await {
            Ok(stream) => {
                launch::accepted(&mut tally, stream.set_nodelay(true));
                glommio::spawn_local(connection(stream, Arc::clone(&service))).detach();
            }
            Err(e) => {
                let e = std::io::Error::from(e);
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    glommio::timer::sleep(pause).await;
                }
            }
        }
    }
}

async fn connection(mut stream: TcpStream, service: Arc<Service>) {
    let tally = &mut service.counters.tally();
    let result = match service.app.connection() {
        Conn::Echo(config) => stream::echo::serve(&mut stream, config, tally).await,
        Conn::Chat(rooms) => stream::chat::serve(&mut stream, rooms, Pool, tally).await,
        Conn::Exchange(mut conn) => stream::exchange::serve(&mut stream, &mut conn, tally).await,
    };
    launch::closed(tally, &result);
}
