//! The event loop: one [`Reactor`] per worker thread, each with its own
//! `mio::Poll`, its slab of connections, and a run queue.
//!
//! One iteration:
//!
//! ```text
//!  poll(timeout) ──► events: mark readiness, queue the connection once
//!       ▲            inbox:  register handed-over sockets, queue connections with mail
//!       │            listener (reuseport): accept up to ACCEPT_BATCH
//!       │            run queue: each connection queued at the start gets ONE turn,
//!       │                       a bounded amount of work; one that used its whole
//!       └── 0 if work is left,  budget goes to the back, for the next iteration
//!           else until an event
//! ```
//!
//! Fairness comes from the run queue, not from the kernel: mio is
//! edge-triggered, so a connection that stops before `WouldBlock` would get no
//! new event, and it is the reactor that remembers to come back to it, after
//! every other ready connection had its turn and after a non-blocking look at
//! the kernel for new events.

use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::time::Duration;

use mio::event::Event;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use service::counters::{Count, Tally};
use service::echo::EchoConfig;
use service::hub::Hub;
use service::session::Session;
use slab::Slab;

use crate::accept::Listener;
use crate::chat::Chat;
use crate::conn::{Conn, Kind, Turn};
use crate::echo::Echo;
use crate::exchange::Exchanged;
use crate::io::Io;
use crate::mailbox::Mailbox;
use crate::remote::{Inbox, Remote};

/// The waker's token; connections use their slab key, far below these.
const WAKER: Token = Token(usize::MAX);
/// The listener's token in `--accept reuseport` mode.
const LISTENER: Token = Token(usize::MAX - 1);

/// Events taken from the kernel per `epoll_wait`.
const EVENTS: usize = 1024;

/// Connections accepted per iteration in `--accept reuseport` mode, so that a
/// connection storm does not keep the reactor from serving the connections it
/// already has.
const ACCEPT_BATCH: usize = 64;

/// What a reactor serves.
#[derive(Debug, Clone)]
pub(crate) enum Service {
    Echo(EchoConfig),
    Chat {
        hub: Arc<Hub<Mailbox>>,
        max_pending: usize,
    },
    /// The store every reactor shares, and the per-connection output limit.
    Kv {
        store: Arc<service::kv::Store>,
        limit: usize,
    },
    /// The per-connection output limit of http.
    Http {
        limit: usize,
    },
}

/// One event loop and everything it owns.
#[derive(Debug)]
pub(crate) struct Reactor {
    poll: Poll,
    events: Events,
    conns: Slab<Conn>,
    /// # Invariant
    /// Holds each key at most once, exactly the keys whose `io.queued` is set,
    /// and only keys of live connections.
    run: VecDeque<usize>,
    remote: Arc<Remote>,
    /// Where the inbox is taken to; kept to reuse its vectors.
    inbox: Inbox,
    /// Its own listener in `--accept reuseport` mode.
    listener: Option<Listener>,
    service: Service,
    /// What this reactor counts: a block of its own, summed at the stop line.
    tally: Tally,
}

impl Reactor {
    /// A reactor for `service`, with its own listener in reuseport mode.
    pub(crate) fn new(
        service: Service,
        listener: Option<std::net::TcpListener>,
        tally: Tally,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        let remote = Remote::new(poll.registry(), WAKER)?;
        let listener = match listener {
            Some(l) => {
                let mut l = Listener::new(l)?;
                l.register(&poll, LISTENER)?;
                Some(l)
            }
            None => None,
        };
        Ok(Reactor {
            poll,
            events: Events::with_capacity(EVENTS),
            conns: Slab::with_capacity(256),
            run: VecDeque::with_capacity(256),
            remote,
            inbox: Inbox::default(),
            listener,
            service,
            tally,
        })
    }

    /// Where other threads hand this reactor work.
    pub(crate) fn remote(&self) -> Arc<Remote> {
        Arc::clone(&self.remote)
    }

    /// Runs the loop until [`Remote::stop`], counting into its tally.
    pub(crate) fn run(mut self) -> io::Result<()> {
        self.remote.enter();
        loop {
            let timeout = self.timeout();
            match self.poll.poll(&mut self.events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in self.events.iter() {
                match event.token() {
                    WAKER => {}
                    LISTENER => {
                        if let Some(l) = &mut self.listener {
                            l.ready = true;
                        }
                    }
                    Token(key) => mark(&mut self.conns, &mut self.run, key, event),
                }
            }
            if self.remote.stopping() {
                self.close_all();
                return Ok(());
            }
            self.take_inbox();
            self.accept();
            self.run_queue();
        }
    }

    /// Do not sleep while anything is left to do.
    fn timeout(&self) -> Option<Duration> {
        if !self.run.is_empty() || self.remote.is_nudged() {
            return Some(Duration::ZERO);
        }
        self.listener.as_ref().and_then(Listener::timeout)
    }

    fn take_inbox(&mut self) {
        self.remote.take(&mut self.inbox);
        let mut inbox = std::mem::take(&mut self.inbox);
        for stream in inbox.conns.drain(..) {
            self.add(stream);
        }
        for (key, id) in inbox.mail.drain(..) {
            if let Some(conn) = self.conns.get_mut(key)
                && let Kind::Chat(chat) = &conn.kind
                && chat.conn_id() == id
                && !conn.io.queued
            {
                conn.io.queued = true;
                self.run.push_back(key);
            }
        }
        self.inbox = inbox;
    }

    fn accept(&mut self) {
        let Some(mut listener) = self.listener.take() else {
            return;
        };
        for _ in 0..ACCEPT_BATCH {
            match listener.accept() {
                Some(stream) => self.add(stream),
                None => break,
            }
        }
        self.listener = Some(listener);
    }

    /// Registers a new connection and makes its state machine.
    fn add(&mut self, mut stream: TcpStream) {
        // Echoes are small and interactive; Nagle would hold them back.
        if let Err(e) = stream.set_nodelay(true) {
            eprintln!("srv-reactor: cannot set TCP_NODELAY on a connection: {e}");
        }
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, Token(key), Interest::READABLE)
        {
            eprintln!("srv-reactor: cannot register a connection, closing it: {e}");
            self.tally.add(Count::Errors, 1);
            return;
        }
        let kind = match &self.service {
            Service::Echo(config) => Kind::Echo(Echo::new(config)),
            Service::Chat { hub, max_pending } => {
                let session = Session::new(hub);
                let mailbox =
                    Mailbox::new(Arc::clone(&self.remote), key, session.conn(), *max_pending);
                Kind::Chat(Chat::new(Arc::clone(hub), session, mailbox))
            }
            Service::Kv { store, limit } => Kind::Kv(Exchanged::new(service::kv::Served::new(
                Arc::clone(store),
                *limit,
            ))),
            Service::Http { limit } => {
                Kind::Http(Exchanged::new(service::http::Connection::new(*limit)))
            }
        };
        entry.insert(Conn {
            io: Io::new(stream),
            kind,
        });
        self.tally.add(Count::Accepted, 1);
    }

    /// One turn for each connection queued now, in order.
    fn run_queue(&mut self) {
        for _ in 0..self.run.len() {
            let Some(key) = self.run.pop_front() else {
                break;
            };
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            conn.io.queued = false;
            let turn = match &mut conn.kind {
                Kind::Echo(echo) => echo.turn(&mut conn.io, &mut self.tally),
                Kind::Chat(chat) => chat.turn(&mut conn.io, &mut self.tally),
                Kind::Kv(kv) => kv.turn(&mut conn.io, &mut self.tally),
                Kind::Http(http) => http.turn(&mut conn.io, &mut self.tally),
            };
            let turn = turn.and_then(|turn| {
                let pending = conn.has_output();
                conn.io
                    .sync_interest(self.poll.registry(), Token(key), pending)?;
                Ok(turn)
            });
            match turn {
                Ok(Turn::Idle) => {}
                Ok(Turn::Again) => {
                    conn.io.queued = true;
                    self.run.push_back(key);
                }
                Ok(Turn::Done) => self.close(key, false),
                Err(_) => self.close(key, true),
            }
        }
    }

    /// Closes a connection that is not in the run queue.
    fn close(&mut self, key: usize, failed: bool) {
        let mut conn = self.conns.remove(key);
        debug_assert!(!conn.io.queued);
        if let Kind::Chat(chat) = &mut conn.kind {
            chat.finish();
        }
        self.tally.add(Count::Closed, 1);
        self.tally.add(Count::Errors, u64::from(failed));
        // Dropping the socket closes it, which also removes it from the epoll
        // set: no `deregister` call needed.
    }

    /// At stop: every chat connection leaves its rooms, so the hub holds no
    /// subscriber of a reactor that is gone.
    fn close_all(&mut self) {
        for (_, conn) in &mut self.conns {
            if let Kind::Chat(chat) = &mut conn.kind {
                chat.finish();
            }
        }
    }
}

/// Records what an event says about a connection and queues it for a turn.
fn mark(conns: &mut Slab<Conn>, run: &mut VecDeque<usize>, key: usize, event: &Event) {
    let Some(conn) = conns.get_mut(key) else {
        return;
    };
    // An error or hang-up makes both directions "ready": the next read or
    // write reports what happened.
    if event.is_readable() || event.is_read_closed() || event.is_error() {
        conn.io.readable = true;
    }
    if event.is_read_closed() || event.is_error() {
        conn.io.read_closed = true;
    }
    if event.is_writable() || event.is_write_closed() || event.is_error() {
        conn.io.writable = true;
    }
    if !conn.io.queued {
        conn.io.queued = true;
        run.push_back(key);
    }
}
