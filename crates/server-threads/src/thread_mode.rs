//! `--mode thread`: a thread per connection, blocking std I/O. Echo is one
//! thread running [`service::echo::serve_blocking`]; chat is a reader thread
//! running the shared [`service::session::Session`] and a writer thread
//! draining the connection's [`Outbox`].

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::sync::Arc;

use anyhow::Context;
use launch::{CommonArgs, Counters, Proto, Shutdown};
use proto::chat::{LineBuffer, MAX_LINE};
use service::echo::{EchoConfig, serve_blocking};
use service::hub::Hub;
use service::session::{Flow, Session};

use crate::NAME;
use crate::accept::{AfterSignal, accept_until_stop};
use crate::outbox::Outbox;

pub(crate) fn serve(args: &CommonArgs) -> anyhow::Result<()> {
    let shutdown = Shutdown::install()?;
    if let Some(cpus) = &args.cpus {
        // Connection threads inherit the mask of the thread that spawns them.
        launch::cpus::pin_current_thread_to(cpus)?;
    }
    let hub = match args.proto {
        Proto::Chat => Some(Arc::new(
            Hub::<Outbox>::open(args.data.as_deref(), args.fsync.into())
                .context("opening the room logs")?,
        )),
        Proto::Echo => None,
    };
    let listener = launch::bind(args.addr)?;
    launch::announce_ready(listener.local_addr()?)?;

    let counters = Arc::new(Counters::default());
    let echo = EchoConfig {
        compute: args.compute(),
        msg_size: args.msg_size,
    };
    let max_pending = args.max_pending;
    accept_until_stop(
        &listener,
        &shutdown,
        |stream| {
            Counters::add(&counters.accepted, 1);
            let conn_counters = Arc::clone(&counters);
            let hub = hub.clone();
            let spawned = std::thread::Builder::new()
                .name("conn".into())
                .spawn(move || {
                    let counters = conn_counters;
                    let result = match &hub {
                        None => serve_blocking(&stream, &echo, &counters),
                        Some(hub) => serve_chat(stream, hub, max_pending, &counters),
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
    if let Some(hub) = &hub {
        hub.sync_all().context("flushing the room logs")?;
        Counters::add(&counters.messages, hub.stats().messages);
    }
    counters.report(NAME);
    Ok(())
}

/// One chat connection: this thread reads and handles commands; a second
/// thread writes everything the connection is sent, in order.
fn serve_chat(
    stream: TcpStream,
    hub: &Hub<Outbox>,
    max_pending: usize,
    counters: &Counters,
) -> std::io::Result<()> {
    let outbox = Outbox::new(stream.try_clone()?, max_pending);
    std::thread::scope(|scope| serve_chat_in(scope, &stream, &outbox, hub, counters))
}

fn serve_chat_in<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    stream: &'s TcpStream,
    outbox: &'s Outbox,
    hub: &Hub<Outbox>,
    counters: &'s Counters,
) -> std::io::Result<()> {
    let writer = std::thread::Builder::new()
        .name("conn-writer".into())
        .spawn_scoped(scope, move || outbox.drain_into(&mut { stream }, counters))?;
    let mut session = Session::new(hub);
    let result = read_commands(stream, &mut session, hub, outbox, counters);
    session.close(hub);
    outbox.close();
    let written = writer.join().unwrap_or(Ok(()));
    if outbox.was_cut() {
        Counters::add(&counters.cut, 1);
    }
    result.and(written)
}

fn read_commands(
    mut stream: &TcpStream,
    session: &mut Session,
    hub: &Hub<Outbox>,
    outbox: &Outbox,
    counters: &Counters,
) -> std::io::Result<()> {
    let mut lines = LineBuffer::new(MAX_LINE);
    let mut out = Vec::new();
    loop {
        let n = match stream.read(lines.spare()) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // A cut subscriber's socket is shut down under us: not an error.
            Err(_) if outbox.is_closed() => return Ok(()),
            Err(e) => return Err(e),
        };
        Counters::add(&counters.bytes_in, n as u64);
        lines.commit(n);
        while let Some(line) = lines.next_line() {
            Counters::add(&counters.lines, 1);
            let mut flow = session.handle_line(line, hub, outbox, &mut out);
            while let Flow::Replaying = flow {
                // Hand over a replay batch (waiting while the client is behind),
                // then take the next one.
                if !outbox.push_own(&mut out) {
                    return Ok(());
                }
                flow = session.replay_more(hub, outbox, &mut out);
            }
            if !outbox.push_own(&mut out) {
                return Ok(());
            }
            match flow {
                Flow::Continue | Flow::Replaying => {}
                Flow::Close => return Ok(()),
            }
        }
    }
}
