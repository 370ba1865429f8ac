//! `srv-reactor`: the event-loop paradigm written by hand on mio, with no
//! async runtime anywhere in its dependency tree. It is the reactor of
//! Listing 2 in the io_uring paper (`on_accept`, `on_read`, `on_write` driven
//! by one loop) grown into what Redis, nginx and mio's own users write: one
//! loop per worker thread, each connection an explicit state machine over a
//! non-blocking socket.
//!
//! What it is not: a runtime. There are no tasks, futures or wakers of its
//! own; a connection is a struct in a [`slab::Slab`], and the code that runs
//! for it is a function called with its state. What a reply says is decided by
//! `proto` and `service`, as in every ringside server.
//!
//! # Threads
//!
//! ```text
//!  main ── Shutdown::wait ── stop ─┐
//!  acceptor (handoff) ─accept─► round robin ─hand_over─► Remote ─Waker─┐
//!  reactor 0..N-1: mio::Poll ◄─────────────────────────────────────────┘
//!     slab of Conn { Io, Echo | Chat | Kv | Http }, run queue, its own counters
//! ```
//!
//! `--workers N` reactors, each a thread with its own `mio::Poll`, pinned to
//! `--cpus` (worker i on the i-th CPU of the list) and started by
//! `launch::workers`, the worker group srv-tokio and srv-tokio-uring use too.
//!
//! # Spreading connections: `--accept handoff` (default) or `reuseport`
//!
//! With `handoff`, one acceptor thread owns the only listening socket, accepts
//! every connection and gives it to the reactors in turn: it pushes the socket
//! into the reactor's inbox and wakes it through its `mio::Waker` (one eventfd
//! write, coalesced with anything else pending). With `reuseport`, every
//! reactor has its own `SO_REUSEPORT` listener on the same address and the
//! kernel picks one by a hash of the connection's addresses, as nginx's
//! `listen ... reuseport` does; each reactor then accepts in its own loop, a
//! bounded batch per iteration.
//!
//! Handoff is the default because what this benchmark measures is long-lived
//! connections: the hand-over costs one queue push and one eventfd write per
//! connection, once in its life, and buys an exactly even spread (the hash
//! only approximates one: 100 connections on 2 reactors land around 50 ± 5,
//! and a 55/45 split shows up directly in p99). The acceptor runs on its own
//! thread, so accepting never waits behind a reactor busy with `--compute-us`,
//! and the listener is bound exactly as every other ringside server binds it
//! (an address in use is an error, never shared). `reuseport` is the better
//! design for short connections at high rates, where the acceptor would be a
//! bottleneck and the cross-thread hop a per-request cost; it is offered so
//! the two can be compared.
//!
//! # A connection
//!
//! [`mio`] is edge-triggered, so readiness is state the reactor keeps
//! (`io::Io`): an event sets `readable`/`writable`; only a read or write that
//! comes up short clears them. Reads go until `WouldBlock`, a short read
//! counting as one (exact on epoll, as Tokio and nginx also rely on).
//! `WRITABLE` interest is registered only while output is pending and the
//! socket refused some of it, and dropped as soon as it is written.
//!
//! Every event only marks the connection and queues it once in the reactor's
//! run queue; each connection queued at the start of an iteration gets one
//! turn of bounded work: at most 64 KiB read (with `--compute-us`, at most 16
//! messages computed), 64 chat lines, and 8 write rounds of mail. A connection
//! that used its whole budget goes to the back of the queue and the reactor
//! polls the kernel without sleeping before it comes back to it, so one busy
//! connection cannot starve the others.
//!
//! Echo (`echo`) reads straight into the buffer it writes from: no copy, no
//! allocation per message (`tests/no_alloc.rs` counts them). The buffer is 16
//! KiB and grows up to 64 KiB only while the client reads less than it sends;
//! at 64 KiB pending the connection is not read until the client makes room.
//!
//! # Chat across reactors
//!
//! Rooms belong to no reactor. The [`service::hub::Hub`] is shared by all of
//! them; each room is its log plus its subscribers behind the room's own
//! lock. The reactor that reads a `SAY` runs the shared
//! [`service::session::Session`], which appends to the room log and offers the
//! encoded `MSG` (one `Arc<[u8]>` for all subscribers) to each subscriber
//! under that lock.
//!
//! A subscriber is a [`Mailbox`]: the connection's queue plus the
//! `Remote` (inbox and `mio::Waker`) of the reactor that owns the connection.
//! An offer copies the line into the mailbox's byte buffer under its lock and,
//! the first time since the owner last emptied the mailbox, puts the connection's key in the
//! owner's inbox and wakes it; a burst of lines to one reactor costs one
//! eventfd write, and a sender on the owner's own thread writes none. The
//! owner, woken, gives the connection a turn: mail moves into its write buffer
//! as long as the buffer is under 64 KiB, and goes out.
//!
//! A slow subscriber is one whose queued live lines pass `--max-pending`: the
//! rule is `service::outbox::OutQueue`'s, the same in every server. The
//! offer that would pass it drops the queue, marks the mailbox cut and
//! refuses; the hub forgets the subscriber, the owner is told, and its next
//! turn closes the socket. Nobody waits: not the sender, not the room, not
//! the owner.
//!
//! The session's ordering rule holds because a connection has one outbound
//! path: what its mailbox holds goes into the write buffer before the bytes a
//! line just produced, and if the mailbox cannot be emptied those bytes queue
//! behind it. Output a connection causes itself (replies, `JOIN` replay) is
//! never refused; instead the reactor handles no more of its lines until the
//! client reads.
//!
//! # What runs on the reactor thread, and so stalls its other connections
//!
//! `--compute-us` spins there, before each complete message is echoed: the
//! paradigm's weakness, measured rather than hidden. So does the room log's
//! `write(2)`, a page-cache copy. With `--fsync always` the `fdatasync(2)` does
//! not: the hub's group commit (`service::commit`) syncs on a thread of its
//! own, one sync for every append since the last, and its outcome comes back
//! to the connection as mail ([`Mailbox`]); the connection handles no further
//! command until its `ACK` is out, and the reactor serves the others meanwhile.
//!
//! # Example
//!
//! ```no_run
//! use server_reactor::{AcceptMode, Config, Reactors};
//!
//! let config = Config {
//!     addr: "127.0.0.1:0".parse()?,
//!     workers: 2,
//!     cpus: None,
//!     accept: AcceptMode::Handoff,
//!     echo: service::echo::EchoConfig {
//!         compute: None,
//!         msg_size: std::num::NonZeroUsize::new(16).expect("non-zero"),
//!     },
//!     max_pending: 1 << 20,
//! };
//! let reactors = Reactors::start(&config, None)?; // echo: no hub
//! println!("READY {}", reactors.local_addr());
//! let totals = reactors.stop();
//! println!("{totals}");
//! # Ok::<(), anyhow::Error>(())
//! ```
#![forbid(unsafe_code)]

mod accept;
mod chat;
mod conn;
mod echo;
mod exchange;
mod io;
mod mailbox;
mod outbuf;
mod reactor;
mod remote;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use launch::workers::{Placement, Workers};
use launch::{CommonArgs, CpuList};
use service::counters::{Count, Counters, Snapshot, Tally};
use service::echo::EchoConfig;
use service::hub::Hub;

pub use mailbox::Mailbox;

use crate::accept::Acceptor;
use crate::reactor::{Reactor, Service};
use crate::remote::Remote;

/// How long the stop waits for a reactor (or the acceptor) to come back; one
/// closes its connections and returns at once when told.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How connections are spread across the reactors (see the crate docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AcceptMode {
    /// One acceptor thread hands each connection to the next reactor.
    #[default]
    Handoff,
    /// Every reactor accepts on its own `SO_REUSEPORT` listener.
    Reuseport,
}

/// Everything the reactors need to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (port 0 picks one).
    pub addr: SocketAddr,
    /// How many reactors (at least 1).
    pub workers: usize,
    /// CPUs to pin reactor i to (`for_worker(i)`); the acceptor may run on
    /// any of them.
    pub cpus: Option<CpuList>,
    /// How connections reach the reactors.
    pub accept: AcceptMode,
    /// Echo: the spin per message, and the message size.
    pub echo: EchoConfig,
    /// Chat: the slow-subscriber limit, in bytes of queued live lines.
    pub max_pending: usize,
}

impl Config {
    /// The configuration the common command line asks for.
    pub fn from_args(common: &CommonArgs, accept: AcceptMode) -> Self {
        Config {
            addr: common.addr,
            workers: common.worker_count(),
            cpus: common.cpus.clone(),
            accept,
            echo: common.echo(),
            max_pending: common.max_pending,
        }
    }
}

/// Running reactors (and the acceptor, in handoff mode).
#[derive(Debug)]
pub struct Reactors {
    addr: SocketAddr,
    reactors: (Vec<Arc<Remote>>, Workers<std::io::Result<()>>),
    /// Every reactor's tally, summed by [`Reactors::stop`].
    counters: Counters,
    acceptor: Option<(Arc<Remote>, Workers<std::io::Result<()>>)>,
}

impl Reactors {
    /// Binds every listener, then starts and pins every thread; returns once
    /// all of them run, so that the caller may announce READY. Serves chat
    /// with `hub`, echo without.
    pub fn start(config: &Config, hub: Option<Arc<Hub<Mailbox>>>) -> anyhow::Result<Self> {
        let service = match hub {
            Some(hub) => Service::Chat {
                hub,
                max_pending: config.max_pending,
            },
            None => Service::Echo(config.echo),
        };
        Self::start_serving(config, service)
    }

    /// As [`Reactors::start`], serving `--proto kv` from `store`, which every reactor
    /// shares; a connection is not read while `limit` bytes of its replies are pending.
    pub fn start_kv(
        config: &Config,
        store: Arc<service::kv::Store>,
        limit: usize,
    ) -> anyhow::Result<Self> {
        Self::start_serving(config, Service::Kv { store, limit })
    }

    /// As [`Reactors::start`], serving `--proto http`; a connection is not read while
    /// `limit` bytes of its responses are pending.
    pub fn start_http(config: &Config, limit: usize) -> anyhow::Result<Self> {
        Self::start_serving(config, Service::Http { limit })
    }

    fn start_serving(config: &Config, service: Service) -> anyhow::Result<Self> {
        let workers = config.workers.max(1);
        // Bind first: a port in use fails before any thread exists.
        let (addr, shared, mut own) = match config.accept {
            AcceptMode::Handoff => {
                let l = launch::bind(config.addr)?;
                (l.local_addr()?, Some(l), Vec::new())
            }
            AcceptMode::Reuseport => {
                let ls = launch::bind_group(config.addr, workers)?;
                (ls[0].local_addr()?, None, ls)
            }
        };
        // Then every epoll instance and eventfd, still without threads.
        let counters = Counters::default();
        let reactors = (0..workers)
            .map(|_| {
                let listener = own.pop();
                Reactor::new(service.clone(), listener, counters.tally())
                    .context("creating a reactor (epoll instance, eventfd)")
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let acceptor = match shared {
            Some(listener) => {
                let remotes = reactors.iter().map(Reactor::remote).collect();
                Some(Acceptor::new(listener, remotes).context("creating the acceptor")?)
            }
            None => None,
        };
        // Last the threads, which run only once every one of them is pinned.
        let remotes = reactors.iter().map(Reactor::remote).collect();
        let placement = Placement::one_per_worker(config.cpus.as_ref());
        let reactors = Workers::start("reactor", reactors, placement, |_, reactor: Reactor| {
            Ok(move || reactor.run())
        })?;
        let mut started = Reactors {
            addr,
            reactors: (remotes, reactors),
            counters,
            acceptor: None,
        };
        if let Some(acceptor) = acceptor {
            let remote = acceptor.remote();
            // The acceptor may run on any CPU of the list.
            let placement = config
                .cpus
                .clone()
                .map_or(Placement::Anywhere, Placement::Within);
            match Workers::start("acceptor", vec![acceptor], placement, |_, a: Acceptor| {
                Ok(move || a.run())
            }) {
                Ok(thread) => started.acceptor = Some((remote, thread)),
                Err(e) => {
                    started.stop();
                    return Err(e);
                }
            }
        }
        Ok(started)
    }

    /// The address the server listens on, with the real port.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, then stops every reactor (their connections close)
    /// and waits for them, a bounded time; returns what they counted. A thread
    /// that failed, or did not stop in time, is reported on stderr and counted
    /// in `errors`.
    pub fn stop(self) -> Snapshot {
        let mut total = self.counters.tally();
        if let Some((remote, thread)) = self.acceptor {
            remote.stop();
            if let Some(joined) = thread.join(STOP_GRACE).pop() {
                match joined {
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => failed(&mut total, "the acceptor", &e),
                    Some(Err(_)) => failed(&mut total, "the acceptor", &"panicked"),
                    None => failed(&mut total, "the acceptor", &"did not stop"),
                }
            }
        }
        let (remotes, reactors) = self.reactors;
        for remote in &remotes {
            remote.stop();
        }
        for (i, joined) in reactors.join(STOP_GRACE).into_iter().enumerate() {
            let who = || format!("reactor {i}");
            match joined {
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => failed(&mut total, &who(), &e),
                Some(Err(_)) => failed(&mut total, &who(), &"panicked"),
                None => failed(&mut total, &who(), &"did not stop"),
            }
        }
        drop(total);
        self.counters.snapshot()
    }
}

fn failed(total: &mut Tally, who: &str, e: &dyn std::fmt::Display) {
    eprintln!("srv-reactor: {who} failed: {e}");
    total.add(Count::Errors, 1);
}
