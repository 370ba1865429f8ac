//! [`Io`]: one non-blocking socket and what the reactor knows of its
//! readiness. mio is edge-triggered, so readiness is state the reactor keeps:
//! an event sets a flag, and only a read or write that comes up short clears it.
//!
//! A short read or write counts as `WouldBlock`. On epoll that is exact: the
//! kernel's queue was empty (or full) at that instant, and any later change
//! raises a new edge, so the extra `read` that would only return `EAGAIN` is
//! saved. Tokio's `PollEvented` and nginx's `ngx_unix_recv` (with
//! `EPOLLRDHUP`) clear readiness the same way. The one exception is a peer
//! that has already closed: when its FIN came with the last data, the event
//! that reported the data was the only one, so once an event has said
//! "read closed" a short read no longer clears readiness, and the next read
//! finds the EOF (Tokio never clears its read-closed bit, for this reason).

use std::io::{self, ErrorKind, Read, Write};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

/// A connection's socket and its readiness.
#[derive(Debug)]
pub(crate) struct Io {
    pub(crate) stream: TcpStream,
    /// A read may return data (or EOF): set by a readable event, cleared by a
    /// read that came up short.
    pub(crate) readable: bool,
    /// A write may make progress: set by a writable event, cleared by a write
    /// that came up short.
    pub(crate) writable: bool,
    /// An event reported the peer's FIN (or an error): reads go on until
    /// they return EOF or fail, whatever their length.
    pub(crate) read_closed: bool,
    /// # Invariant
    /// Whether `WRITABLE` is in the interest registered for the socket. It is
    /// there exactly while output is pending and the socket refused some of it.
    write_interest: bool,
    /// # Invariant
    /// Whether the connection's key is in the reactor's run queue (at most once).
    pub(crate) queued: bool,
}

impl Io {
    /// A socket just registered with `READABLE` interest only. It is not yet
    /// known to be readable (the registration reports it if it is) and a
    /// fresh socket has room to write.
    pub(crate) fn new(stream: TcpStream) -> Self {
        Io {
            stream,
            readable: false,
            writable: true,
            read_closed: false,
            write_interest: false,
            queued: false,
        }
    }

    /// Reads into `buf` (never empty): `Some(n)` with `n == 0` at EOF, `None`
    /// when there is nothing to read now.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        debug_assert!(!buf.is_empty());
        loop {
            match self.stream.read(buf) {
                Ok(n) => {
                    if n < buf.len() && !self.read_closed {
                        self.readable = false;
                    }
                    return Ok(Some(n));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.readable = false;
                    return Ok(None);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes what the socket takes of `bytes` now; returns how much.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if !self.writable || bytes.is_empty() {
            return Ok(0);
        }
        loop {
            match self.stream.write(bytes) {
                Ok(n) => {
                    if n < bytes.len() {
                        self.writable = false;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.writable = false;
                    return Ok(0);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Registers `WRITABLE` interest while output waits for room in the socket
    /// (`pending_output && !writable`), and drops it as soon as it no longer
    /// does, so that a connection that keeps up costs no writable events and
    /// no `epoll_ctl` calls.
    pub(crate) fn sync_interest(
        &mut self,
        registry: &Registry,
        token: Token,
        pending_output: bool,
    ) -> io::Result<()> {
        let want = pending_output && !self.writable;
        if want != self.write_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            registry.reregister(&mut self.stream, token, interest)?;
            self.write_interest = want;
        }
        Ok(())
    }
}
