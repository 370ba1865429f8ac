//! The key-value service of `--proto kv`, a Redis subset over RESP2, free of any
//! runtime: the [`Store`] every worker shares, one connection's protocol state
//! ([`Connection`]: bytes in, replies out), and its loop for blocking runtimes
//! ([`serve_blocking`], srv-threads and srv-fiber).
//!
//! A server feeds each read to [`Connection::feed`], then calls
//! [`Connection::execute`] and writes what it appended: one reply batch per read batch,
//! however many requests the read held (pipelining). `execute` stops once the output
//! holds the connection's limit of pending bytes ([`Flow::OutputFull`]); the server
//! writes, and reads nothing more from that connection until `execute` has run dry
//! ([`Flow::NeedInput`]). So a client that pipelines and never reads costs the server at
//! most one read, the limit and one reply, whatever it sends: Redis would buffer all of
//! its replies.
//!
//! ```
//! use service::kv::{Connection, Flow, Store};
//!
//! let store = Store::new();
//! let mut conn = Connection::new();
//! let mut out = Vec::new();
//! conn.feed(b"SET k v\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nQUIT\r\nPING\r\n");
//! assert_eq!(conn.execute(&store, &mut out, 64 * 1024), Flow::Close);
//! assert_eq!(out, b"+OK\r\n$1\r\nv\r\n+OK\r\n");
//! ```

mod command;
mod store;

use std::io::{self, BufRead, Write};
use std::ops::Deref;

use proto::resp::RequestBuffer;

pub use store::{SHARDS, Store};

use crate::counters::Tally;
pub use crate::exchange::Flow;
use crate::exchange::{Exchange, Feed};

/// One kv connection's state: the bytes received and not yet executed.
#[derive(Debug, Default)]
pub struct Connection {
    input: RequestBuffer,
    closing: bool,
}

impl Connection {
    /// A connection that has received nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes read from the socket.
    pub fn feed(&mut self, bytes: &[u8]) {
        if !self.closing {
            self.input.extend_from_slice(bytes);
        }
    }

    /// Bytes received and not yet executed.
    pub fn pending_input(&self) -> usize {
        self.input.pending()
    }

    /// Executes the complete requests received, in order, appending their replies to
    /// `out`, until none is left or `out` holds at least `limit` bytes.
    pub fn execute(&mut self, store: &Store, out: &mut Vec<u8>, limit: usize) -> Flow {
        if self.closing {
            return Flow::Close;
        }
        while out.len() < limit {
            match self.input.next_request() {
                None => return Flow::NeedInput,
                Some(Err(e)) => {
                    e.encode(out);
                    self.closing = true;
                    return Flow::Close;
                }
                Some(Ok(request)) => match command::execute(store, &request, out) {
                    command::After::Continue => {}
                    command::After::Close => {
                        self.closing = true;
                        return Flow::Close;
                    }
                    command::After::Drop => {
                        // Redis drops the connection at once, replies pending or not.
                        out.clear();
                        self.closing = true;
                        return Flow::Close;
                    }
                },
            }
        }
        Flow::OutputFull
    }
}

impl Feed for Connection {
    fn feed(&mut self, bytes: &[u8]) {
        Connection::feed(self, bytes);
    }
}

/// A [`Connection`] with the store it runs against and its limit of pending output: the
/// [`Exchange`] a server's generic request-reply loop drives.
#[derive(Debug)]
pub struct Served<S> {
    /// The connection's state.
    pub conn: Connection,
    /// The store (`&Store`, `Arc<Store>`).
    pub store: S,
    /// The limit of [`Connection::execute`].
    pub limit: usize,
}

impl<S: Deref<Target = Store>> Served<S> {
    /// A connection that has received nothing yet.
    pub fn new(store: S, limit: usize) -> Self {
        Served {
            conn: Connection::new(),
            store,
            limit,
        }
    }
}

impl<S> Feed for Served<S> {
    fn feed(&mut self, bytes: &[u8]) {
        self.conn.feed(bytes);
    }
}

impl<S: Deref<Target = Store>> Exchange for Served<S> {
    fn execute(&mut self, out: &mut Vec<u8>) -> Flow {
        self.conn.execute(&self.store, out, self.limit)
    }
}

/// Serves one kv connection over blocking I/O until the peer closes it or a request
/// ends it, then flushes `writer` and returns (the caller closes the connection).
///
/// Each read is executed whole and its replies written with one `write_all`; while that
/// write blocks (a peer that does not read), nothing more is read, and the output never
/// holds more than `limit` bytes and one reply.
pub fn serve_blocking<R: BufRead, W: Write>(
    reader: R,
    writer: W,
    store: &Store,
    limit: usize,
    tally: &mut Tally,
) -> io::Result<()> {
    crate::exchange::serve_blocking(reader, writer, &mut Served::new(store, limit), tally)
}

/// [`serve_blocking`] with the execution of each read batch left to `execute`, which
/// appends the replies to `out` as [`Connection::execute`] does (srv-fiber's
/// `--kv-owner` sends both to the fiber that owns the store, and gets them back).
pub fn serve_blocking_by<R: BufRead, W: Write>(
    reader: R,
    writer: W,
    tally: &mut Tally,
    execute: impl FnMut(&mut Connection, &mut Vec<u8>) -> io::Result<Flow>,
) -> io::Result<()> {
    crate::exchange::serve_blocking_by(reader, writer, &mut Connection::new(), tally, execute)
}

#[cfg(test)]
mod tests;
