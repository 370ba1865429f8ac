//! `--mode thread`: a thread per connection, blocking std I/O. Echo is one
//! thread running [`service::echo::serve_blocking`]; chat is a reader thread
//! running [`service::blocking::read_commands`] and a writer thread draining
//! the connection's [`Outbox`]; kv is one thread running
//! [`service::kv::serve_blocking`] against the one store all threads share: the same
//! code srv-fiber runs on fibers; http likewise runs [`service::http::serve_blocking`].
//! (Process mode has no kv: forked processes share no
//! memory, so each would hold a store of its own.)

use std::net::TcpStream;
use std::sync::Arc;

use launch::{App, CommonArgs, Counters, Service, Shutdown};
use service::blocking::{Outbox, ThreadWakeup, read_commands};
use service::echo::{buffered, serve_blocking};
use service::hub::Hub;
use service::{http, kv};

use crate::NAME;
use crate::accept::{AfterSignal, accept_until_stop};

/// A chat connection's outbox, for connections that are OS threads.
type ThreadOutbox = Outbox<ThreadWakeup>;

pub(crate) fn serve(args: &CommonArgs) -> anyhow::Result<()> {
    let shutdown = Shutdown::install()?;
    if let Some(cpus) = &args.cpus {
        // Connection threads inherit the mask of the thread that spawns them.
        launch::cpus::pin_current_thread_to(cpus)?;
    }
    let service = Arc::new(Service::<ThreadOutbox>::open(args)?);
    let listener = launch::bind(args.addr)?;
    launch::announce_ready(listener.local_addr()?)?;

    let counters = &service.counters;
    accept_until_stop(
        &listener,
        &shutdown,
        |stream| {
            Counters::add(&counters.accepted, 1);
            let service = Arc::clone(&service);
            let spawned = std::thread::Builder::new()
                .name("conn".into())
                .spawn(move || {
                    let counters = &service.counters;
                    let result = match &service.app {
                        App::Echo(echo) => {
                            serve_blocking(buffered(&stream), &stream, echo, counters)
                        }
                        App::Chat(rooms) => {
                            serve_chat(stream, &rooms.hub, rooms.max_pending, counters)
                        }
                        App::Kv(kv) => kv::serve_blocking(
                            buffered(&stream),
                            &stream,
                            &kv.store,
                            kv.limit,
                            counters,
                        ),
                        App::Http(limit) => {
                            http::serve_blocking(buffered(&stream), &stream, *limit, counters)
                        }
                    };
                    if result.is_err() {
                        Counters::add(&counters.errors, 1);
                    }
                    Counters::add(&counters.closed, 1);
                });
            if let Err(e) = spawned {
                eprintln!("{NAME}: cannot start a connection thread: {e}; closing it");
                Counters::add(&counters.errors, 1);
            }
        },
        |_| AfterSignal::Stop,
    )?;
    service.finish(NAME)
}

/// One chat connection: this thread reads and handles commands; a second
/// thread writes everything the connection is sent, in order.
fn serve_chat(
    stream: TcpStream,
    hub: &Hub<ThreadOutbox>,
    max_pending: usize,
    counters: &Counters,
) -> std::io::Result<()> {
    let to_cut = stream.try_clone()?;
    let outbox = ThreadOutbox::new(max_pending, move || {
        let _ = to_cut.shutdown(std::net::Shutdown::Both);
    });
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name("conn-writer".into())
            .spawn_scoped(scope, || outbox.drain_into(&mut &stream, counters))?;
        let result = read_commands(&stream, hub, &outbox, counters);
        outbox.close();
        let written = writer.join().unwrap_or(Ok(()));
        result.and(written)
    })
}
