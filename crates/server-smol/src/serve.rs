//! Start, accept and stop: one `smol::Executor` run by `--workers` threads (each
//! pinned with `--cpus`), one listener, one accept task that spawns a task per
//! connection on the executor.
//!
//! Start: block the stop signals, pin `main` to the `--cpus` list, open the rooms,
//! bind the listener (registering it with async-io's reactor, whose thread then
//! inherits the whole list), start the worker threads and wait until each is
//! pinned, then spawn the accept task and print READY. Any failure before READY is
//! one line and exit status 2. Stop: on SIGINT or SIGTERM, close the stop channel
//! (every worker's `run` returns), drop the executor and with it every task (the
//! listener and every connection close: the accept task holds the executor only
//! weakly), `fdatasync` every room, print the counters, and return.

use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::Context;
use launch::workers::{Placement, Workers};
use launch::{CommonArgs, Conn};
use service::outbox::one_task::Outbox;
use service::stream;
use smol::Executor;
use smol::channel::{Receiver, unbounded};
use smol::net::{TcpListener, TcpStream};

use crate::NAME;
use crate::pool::Unblock;

/// How long the stop waits for the worker threads to leave the executor.
const STOP_GRACE: Duration = Duration::from_secs(4);

/// What every connection task of the server shares.
pub(crate) type Service = launch::Service<Outbox>;

pub(crate) fn serve(args: &CommonArgs) -> anyhow::Result<()> {
    let (shutdown, service) = Service::begin(args)?;
    let listener = launch::bind(args.addr)?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let listener =
        TcpListener::try_from(listener).context("registering the listener with async-io")?;
    let ex = Arc::new(Executor::new());
    let (stop, stopped) = unbounded::<()>();
    let workers = start(&ex, args, stopped)?;
    let accept = accept_loop(listener, Arc::downgrade(&ex), Arc::clone(&service));
    ex.spawn(accept).detach();
    launch::announce_ready(addr)?;
    shutdown.wait();
    drop(stop);
    workers.join(STOP_GRACE);
    drop(ex);
    service.finish(NAME)
}

/// Starts `--workers` threads, each pinned (with `--cpus`) and then running the
/// executor until `stopped` closes; returns once every one is pinned.
fn start(
    ex: &Arc<Executor<'static>>,
    args: &CommonArgs,
    stopped: Receiver<()>,
) -> anyhow::Result<Workers<()>> {
    let placement = Placement::one_per_worker(args.cpus.as_ref());
    let ex = Arc::clone(ex);
    let items = vec![(); args.worker_count()];
    Workers::start(NAME, items, placement, move |_, ()| {
        let (ex, stopped) = (Arc::clone(&ex), stopped.clone());
        // smol's multi-threaded pattern: every thread runs the one executor,
        // and `block_on` drives async-io's reactor while the thread is idle.
        Ok(move || {
            let _ = smol::block_on(ex.run(stopped.recv()));
        })
    })
}

/// Accepts connections for as long as the executor runs it, a task each. The loop and
/// each connection task count into tallies of their own.
async fn accept_loop(listener: TcpListener, ex: Weak<Executor<'static>>, service: Arc<Service>) {
    let mut tally = service.counters.tally();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                launch::accepted(&mut tally, stream.set_nodelay(true));
                // The executor is gone only once the server stops.
                let Some(ex) = ex.upgrade() else { return };
                ex.spawn(connection(stream, Arc::clone(&service))).detach();
            }
            Err(e) => {
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    smol::Timer::after(pause).await;
                }
            }
        }
    }
}

async fn connection(mut stream: TcpStream, service: Arc<Service>) {
    let tally = &mut service.counters.tally();
    let result = match service.app.connection() {
        Conn::Echo(config) => stream::echo::serve(&mut stream, config, tally).await,
        Conn::Chat(rooms) => stream::chat::serve(&mut stream, rooms, Unblock, tally).await,
        Conn::Exchange(mut conn) => stream::exchange::serve(&mut stream, &mut conn, tally).await,
    };
    launch::closed(tally, &result);
}
