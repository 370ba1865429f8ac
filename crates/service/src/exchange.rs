//! Request-reply protocols served one read batch at a time (`--proto kv` and
//! `--proto http`): the [`Exchange`] each connection state implements, the [`Flow`] it
//! answers, and the loop of blocking runtimes ([`serve_blocking`], srv-threads and
//! srv-fiber), the one place where the rule of pending output lives for them.
//!
//! The rule: a connection's replies to one read are written before anything more is
//! read, and an `execute` stops once its output holds the connection's limit. So a client
//! that pipelines and never reads costs the server at most one read, the limit and one
//! reply, whatever it sends.

use std::io::{self, BufRead, ErrorKind, Write};

use crate::counters::{Count, Tally};

/// What the server does after [`Exchange::execute`], once it has written the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Every complete request has been answered: read more.
    NeedInput,
    /// The output reached the limit with requests still buffered: write it, then call
    /// `execute` again before reading.
    OutputFull,
    /// Write the output, then close the connection. Nothing more will be executed.
    Close,
}

/// A connection state that takes in the bytes read from its socket.
pub trait Feed {
    /// Adds bytes read from the socket.
    fn feed(&mut self, bytes: &[u8]);
}

/// One connection of a request-reply protocol: bytes in, replies out.
pub trait Exchange: Feed {
    /// Answers the complete requests received, in order, appending the replies to
    /// `out`, until none is left or `out` holds the connection's limit.
    fn execute(&mut self, out: &mut Vec<u8>) -> Flow;
}

/// Serves one connection over blocking I/O until the peer closes it or a request ends
/// it, then flushes `writer` and returns (the caller closes the connection).
///
/// Each read is executed whole and its replies written with one `write_all`; while that
/// write blocks (a peer that does not read), nothing more is read.
pub fn serve_blocking<E: Exchange, R: BufRead, W: Write>(
    reader: R,
    writer: W,
    conn: &mut E,
    tally: &mut Tally,
) -> io::Result<()> {
    serve_blocking_by(reader, writer, conn, tally, |conn, out| {
        Ok(conn.execute(out))
    })
}

/// [`serve_blocking`] with the execution of each read batch left to `execute`, which
/// appends the replies to `out` as [`Exchange::execute`] does (srv-fiber's `--kv-owner`
/// sends both to the fiber that owns the store, and gets them back).
pub fn serve_blocking_by<C: Feed, R: BufRead, W: Write>(
    mut reader: R,
    mut writer: W,
    conn: &mut C,
    tally: &mut Tally,
    mut execute: impl FnMut(&mut C, &mut Vec<u8>) -> io::Result<Flow>,
) -> io::Result<()> {
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
        tally.add(Count::BytesIn, n as u64);
        loop {
            let flow = execute(conn, &mut out)?;
            writer.write_all(&out)?;
            tally.add(Count::BytesOut, out.len() as u64);
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
