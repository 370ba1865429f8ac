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

use std::io::{self, BufRead, ErrorKind, Write};

use proto::resp::RequestBuffer;

pub use store::{SHARDS, Store};

use crate::counters::Counters;

/// What the server does after [`Connection::execute`], once it has written the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Every complete request has been answered: read more.
    NeedInput,
    /// The output reached the limit with requests still buffered: write it, then call
    /// `execute` again before reading.
    OutputFull,
    /// Write the output, then close the connection (`QUIT`, a protocol error, or a
    /// request Redis drops connections for). Nothing more will be executed.
    Close,
}

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
    counters: &Counters,
) -> io::Result<()> {
    serve_blocking_by(reader, writer, counters, |conn, out| {
        Ok(conn.execute(store, out, limit))
    })
}

/// [`serve_blocking`] with the execution of each read batch left to `execute`, which
/// appends the replies to `out` as [`Connection::execute`] does (srv-fiber's
/// `--kv-owner` sends both to the fiber that owns the store, and gets them back).
pub fn serve_blocking_by<R: BufRead, W: Write>(
    mut reader: R,
    mut writer: W,
    counters: &Counters,
    mut execute: impl FnMut(&mut Connection, &mut Vec<u8>) -> io::Result<Flow>,
) -> io::Result<()> {
    let mut conn = Connection::new();
    let mut out = Vec::new();
    loop {
        let data = match reader.fill_buf() {
            Ok([]) => break,
            Ok(data) => data,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let n = data.len();
        conn.feed(data);
        reader.consume(n);
        Counters::add(&counters.bytes_in, n as u64);
        loop {
            let flow = execute(&mut conn, &mut out)?;
            writer.write_all(&out)?;
            Counters::add(&counters.bytes_out, out.len() as u64);
            out.clear();
            match flow {
                Flow::NeedInput => break,
                Flow::OutputFull => continue,
                Flow::Close => return writer.flush(),
            }
        }
    }
    writer.flush()
}

#[cfg(test)]
mod tests;
