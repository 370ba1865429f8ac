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

use launch::{App, CommonArgs, Count, Counters, Service, Shutdown, Tally};
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

    // The acceptor counts into a tally of its own, each connection thread into its own.
    let mut tally = service.counters.tally();
    accept_until_stop(
        &listener,
        &shutdown,
        |stream| {
            tally.add(Count::Accepted, 1);
            let service = Arc::clone(&service);
            let spawned = std::thread::Builder::new()
                .name("conn".into())
                .spawn(move || {
                    let counters = &service.counters;
                    let mut conn_tally = counters.tally();
                    let tally = &mut conn_tally;
                    let result = match &service.app {
                        App::Echo(echo) => serve_blocking(buffered(&stream), &stream, echo, tally),
                        App::Chat(rooms) => {
                            serve_chat(stream, &rooms.hub, rooms.max_pending, counters, tally)
                        }
                        App::Kv(kv) => kv::serve_blocking(
                            buffered(&stream),
                            &stream,
                            &kv.store,
                            kv.limit,
                            tally,
                        ),
                        App::Http(limit) => {
                            http::serve_blocking(buffered(&stream), &stream, *limit, tally)
                        }
                    };
                    if result.is_err() {
                        tally.add(Count::Errors, 1);
                    }
                    tally.add(Count::Closed, 1);
                });
            if let Err(e) = spawned {
                eprintln!("{NAME}: cannot start a connection thread: {e}; closing it");
                tally.add(Count::Errors, 1);
            }
        },
        |_| AfterSignal::Stop,
    )?;
    drop(tally);
    service.finish(NAME)
}

/// One chat connection: this thread reads and handles commands; a second
/// thread writes everything the connection is sent, in order, into a tally of its own.
fn serve_chat(
    stream: TcpStream,
    hub: &Hub<ThreadOutbox>,
    max_pending: usize,
    counters: &Counters,
    tally: &mut Tally,
) -> std::io::Result<()> {
    let to_cut = stream.try_clone()?;
    let outbox = ThreadOutbox::new(max_pending, move || {
        let _ = to_cut.shutdown(std::net::Shutdown::Both);
    });
    let mut writer_tally = counters.tally();
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name("conn-writer".into())
            .spawn_scoped(scope, || outbox.drain_into(&mut &stream, &mut writer_tally))?;
        let result = read_commands(&stream, hub, &outbox, tally);
        outbox.close();
        let written = writer.join().unwrap_or(Ok(()));
        result.and(written)
    })
}
