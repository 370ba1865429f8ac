//! Start, accept, serve a connection, stop. Every connection is a coroutine running the
//! blocking loop of its protocol from `service`; each counts into a tally of its own,
//! which moves with it when a worker steals it.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use launch::{App, CommonArgs, Count, Counters, Shutdown, Tally};
use may::io::SplitIo;
use may::net::TcpStream;
use server_may::coroutines;
use service::blocking::{Outbox, read_commands};
use service::echo::{buffered, serve_blocking};
use service::hub::Hub;
use service::{http, kv};

use crate::NAME;
use crate::wakeup::MayWakeup;

/// A chat connection's outbox, for connections that are may coroutines.
type MayOutbox = Outbox<MayWakeup>;

/// What every connection coroutine shares.
type Service = launch::Service<MayOutbox>;

/// How long the stop waits for the accept coroutine to end once cancelled.
const STOP_GRACE: Duration = Duration::from_secs(2);

pub(crate) fn serve(args: &CommonArgs) -> anyhow::Result<()> {
    // Before may starts a thread: its threads inherit the blocked signals and the CPUs.
    let shutdown = Shutdown::install()?;
    configure(args)?;
    let service = Arc::new(Service::open(args)?);
    let listener = launch::bind(args.addr)?;
    let addr = listener
        .local_addr()
        .context("reading the listener's address")?;
    let listener = coroutines::listener(listener);
    let accepting = {
        let service = Arc::clone(&service);
        coroutines::spawn(move || accept_loop(&listener, &service))
            .context("starting the accept coroutine")?
    };
    launch::announce_ready(addr)?;

    shutdown.wait();
    coroutines::cancel(&accepting);
    let deadline = Instant::now() + STOP_GRACE;
    while !accepting.is_done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    service.finish(NAME)
}

/// may's scheduler, configured before its first use starts it.
fn configure(args: &CommonArgs) -> anyhow::Result<()> {
    let config = may::config();
    config.set_workers(args.worker_count());
    config.set_stack_size(coroutines::STACK_WORDS);
    if let Some(cpus) = &args.cpus {
        // may pins worker i to the i-th CPU of the mask of the thread that starts it
        // (this one, below, when the listener is handed over): the list's i-th CPU.
        config.set_worker_pin(true);
        launch::cpus::pin_current_thread_to(cpus)?;
    }
    Ok(())
}

/// Accepts until cancelled, a coroutine per connection. The loop counts into a tally of
/// its own, each connection coroutine into its own.
fn accept_loop(listener: &may::net::TcpListener, service: &Arc<Service>) {
    let mut tally = service.counters.tally();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                // Replies are small and each one matters: no Nagle delay.
                let _ = stream.set_nodelay(true);
                tally.add(Count::Accepted, 1);
                let conn_tally = service.counters.tally();
                let service = Arc::clone(service);
                if let Err(e) = coroutines::spawn(move || connection(stream, &service, conn_tally))
                {
                    // The closure, and the stream in it, dropped: the connection is closed.
                    eprintln!("{NAME}: cannot start a connection coroutine: {e}; closing it");
                    tally.add(Count::Errors, 1);
                    tally.add(Count::Closed, 1);
                }
            }
            Err(e) => {
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    may::coroutine::sleep(pause);
                }
            }
        }
    }
}

fn connection(stream: TcpStream, service: &Service, mut tally: Tally) {
    let t = &mut tally;
    let result = match &service.app {
        App::Echo(echo) => {
            let stream = RefCell::new(stream);
            serve_blocking(buffered(Turns(&stream)), Turns(&stream), echo, t)
        }
        App::Chat(rooms) => serve_chat(stream, &rooms.hub, rooms.max_pending, &service.counters, t),
        App::Kv(kv) => {
            let stream = RefCell::new(stream);
            kv::serve_blocking(
                buffered(Turns(&stream)),
                Turns(&stream),
                &kv.store,
                kv.limit,
                t,
            )
        }
        App::Http(limit) => {
            let stream = RefCell::new(stream);
            http::serve_blocking(buffered(Turns(&stream)), Turns(&stream), *limit, t)
        }
    };
    if result.is_err() {
        tally.add(Count::Errors, 1);
    }
    tally.add(Count::Closed, 1);
}

/// The one socket of a connection that one coroutine reads and writes in turn (may's
/// `TcpStream` reads and writes through `&mut`, and a second handle would be a second
/// descriptor in the event loop). The loops of `service` never read while they write.
struct Turns<'a>(&'a RefCell<TcpStream>);

impl Turns<'_> {
    fn stream(&self) -> io::Result<std::cell::RefMut<'_, TcpStream>> {
        self.0
            .try_borrow_mut()
            .map_err(|_| io::Error::other("the socket is read and written at once"))
    }
}

impl Read for Turns<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream()?.read(buf)
    }
}

impl Write for Turns<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream()?.flush()
    }
}

/// One chat connection: this coroutine reads and handles commands on may's read half of
/// the socket; a second coroutine, on its write half, writes everything the connection is
/// sent, in order, into a tally of its own.
fn serve_chat(
    stream: TcpStream,
    hub: &Hub<MayOutbox>,
    max_pending: usize,
    counters: &Counters,
    tally: &mut Tally,
) -> io::Result<()> {
    // may's split: two handles of the socket, each registered with the event loop for its
    // own direction only, so neither coroutine is woken for the other's readiness.
    let (mut reader, mut out) = stream.split()?;
    // The cut shuts the socket down through the reader's own descriptor (no third
    // descriptor of its own), for as long as the reader has it: the hub may keep the
    // outbox, and so this closure, a little longer than the connection lives, and a
    // descriptor closed and reused meanwhile must not be shut down. The lock orders the
    // two: the reader's descriptor is withdrawn under it before it is closed.
    let cut_fd = CutFd(Arc::new(Mutex::new(Some(reader.as_raw_fd()))));
    let outbox = MayOutbox::new(max_pending, {
        let cut_fd = Arc::clone(&cut_fd.0);
        move || {
            if let Some(fd) = *cut_fd.lock().unwrap_or_else(PoisonError::into_inner) {
                // Wakes this connection's reader (its read ends) and writer (its write
                // fails).
                let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both);
            }
        }
    });
    let writer = {
        let (outbox, mut tally) = (outbox.clone(), counters.tally());
        coroutines::spawn(move || outbox.drain_into(&mut out, &mut tally))?
    };
    let result = read_commands(&mut reader, hub, &outbox, tally);
    drop(cut_fd);
    outbox.close();
    let written = writer
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the writer coroutine panicked")));
    result.and(written)
}

/// A chat connection's descriptor for its cut, withdrawn when this is dropped: declared
/// after the reader it names, it is dropped before it, on every way out.
struct CutFd(Arc<Mutex<Option<RawFd>>>);

impl Drop for CutFd {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}
