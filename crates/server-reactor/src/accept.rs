//! Accepting: the accept step both `--accept` modes share (with a back-off when
//! the process runs out of descriptors), and the acceptor thread of `--accept
//! handoff`. The listeners themselves are `launch`'s.

use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::remote::Remote;

/// A non-blocking listener with the edge-triggered readiness the loop keeps
/// for it.
#[derive(Debug)]
pub(crate) struct Listener {
    socket: TcpListener,
    /// A connection may be waiting: set by a readable event, cleared by
    /// `WouldBlock` (or by an error that needs a pause).
    pub(crate) ready: bool,
    /// After an error such as EMFILE: when to try again.
    retry_at: Option<Instant>,
}

impl Listener {
    pub(crate) fn new(listener: std::net::TcpListener) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        Ok(Listener {
            socket: TcpListener::from_std(listener),
            // Connections may have queued before the registration.
            ready: true,
            retry_at: None,
        })
    }

    pub(crate) fn register(&mut self, poll: &Poll, token: Token) -> io::Result<()> {
        poll.registry()
            .register(&mut self.socket, token, Interest::READABLE)
    }

    /// How long the loop may sleep as far as this listener is concerned.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        if self.ready {
            Some(Duration::ZERO)
        } else {
            self.retry_at
                .map(|t| t.saturating_duration_since(Instant::now()))
        }
    }

    /// Accepts one connection if one is waiting.
    pub(crate) fn accept(&mut self) -> Option<TcpStream> {
        if let Some(t) = self.retry_at {
            if Instant::now() < t {
                return None;
            }
            self.retry_at = None;
            self.ready = true;
        }
        while self.ready {
            match self.socket.accept() {
                Ok((stream, _)) => return Some(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.ready = false,
                Err(e) => {
                    if let Some(pause) = launch::accept_failed("srv-reactor", &e) {
                        self.ready = false;
                        self.retry_at = Some(Instant::now() + pause);
                    }
                }
            }
        }
        None
    }
}

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);

/// The acceptor thread of `--accept handoff`: accepts every connection and
/// hands it to the reactors in turn.
#[derive(Debug)]
pub(crate) struct Acceptor {
    poll: Poll,
    listener: Listener,
    remote: Arc<Remote>,
    reactors: Vec<Arc<Remote>>,
}

impl Acceptor {
    pub(crate) fn new(
        listener: std::net::TcpListener,
        reactors: Vec<Arc<Remote>>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        let mut listener = Listener::new(listener)?;
        listener.register(&poll, LISTENER)?;
        let remote = Remote::new(poll.registry(), WAKER)?;
        Ok(Acceptor {
            poll,
            listener,
            remote,
            reactors,
        })
    }

    /// Where to ask it to stop.
    pub(crate) fn remote(&self) -> Arc<Remote> {
        Arc::clone(&self.remote)
    }

    /// Accepts until stopped; round robin over the reactors.
    pub(crate) fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(16);
        let mut next = 0;
        loop {
            match self.poll.poll(&mut events, self.listener.timeout()) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if self.remote.stopping() {
                return Ok(());
            }
            if events.iter().any(|e| e.token() == LISTENER) {
                self.listener.ready = true;
            }
            while let Some(stream) = self.listener.accept() {
                self.reactors[next].hand_over(stream);
                next = (next + 1) % self.reactors.len();
            }
        }
    }
}
