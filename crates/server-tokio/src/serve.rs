//! What both flavors share: the order of start and stop, the accept loop, and
//! the dispatch of a connection to echo, chat, kv or http.
//!
//! Start: block the stop signals, pin `main` to the `--cpus` list, open the rooms,
//! bind every listener, start and pin the workers, then print READY. Any failure
//! before READY is one line and exit status 2. Stop: on SIGINT or SIGTERM, shut the
//! runtimes down (tasks are dropped, connections closed), `fdatasync` every room,
//! print the counters, and return.

use std::sync::Arc;

use anyhow::Context;
use launch::{CommonArgs, Conn};
use tokio::net::{TcpListener, TcpStream};

use crate::chat;
use crate::exchange;
use crate::outbox::Outbox;
use crate::{Flavor, NAME, echo, runtime};

/// What every connection task of the server shares.
pub(crate) type Service = launch::Service<Outbox>;

pub(crate) fn serve(args: &CommonArgs, flavor: Flavor) -> anyhow::Result<()> {
    let (shutdown, service) = Service::begin(args)?;
    let workers = args.worker_count();
    let running = match flavor {
        Flavor::Multi => {
            let listener = launch::bind(args.addr)?;
            let addr = listener.local_addr().context("reading the bound address")?;
            let running = runtime::multi(listener, workers, args.cpus.as_ref(), &service)?;
            (running, addr)
        }
        Flavor::PerCore => {
            let listeners = launch::bind_group(args.addr, workers)?;
            let addr = listeners[0]
                .local_addr()
                .context("reading the bound address")?;
            let running = runtime::per_core(listeners, args.cpus.as_ref(), &service)?;
            (running, addr)
        }
    };
    let (running, addr) = running;
    launch::announce_ready(addr)?;
    shutdown.wait();
    running.stop();
    service.finish(NAME)
}

/// Accepts connections for as long as the runtime runs it, a task each.
///
/// Each loop and each connection task counts into a tally of its own, which moves
/// with the task when a worker steals it: one writer per block, whatever the thread.
pub(crate) async fn accept_loop(listener: TcpListener, service: Arc<Service>) {
    let mut tally = service.counters.tally();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                launch::accepted(&mut tally, stream.set_nodelay(true));
                tokio::spawn(connection(stream, Arc::clone(&service)));
            }
            Err(e) => {
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

async fn connection(mut stream: TcpStream, service: Arc<Service>) {
    let tally = &mut service.counters.tally();
    let result = match service.app.connection() {
        Conn::Echo(config) => echo::serve(&mut stream, config, tally).await,
        Conn::Chat(rooms) => chat::serve(&mut stream, rooms, tally).await,
        Conn::Exchange(mut conn) => exchange::serve(&mut stream, &mut conn, tally).await,
    };
    launch::closed(tally, &result);
}
