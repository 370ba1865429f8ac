//! One kv or http connection as a state machine over its [`Io`]: a turn writes the
//! replies still pending, and only once they are all out executes the requests received
//! (the protocol's [`Exchange`]: `service::kv::Served`, `service::http::Connection`) and
//! reads more, so that a read batch gets one reply batch, written with as few `write`
//! calls as the socket allows.
//!
//! A peer that pipelines and does not read is read from no more: `execute` stops at
//! the connection's limit of pending output (64 KiB or `--max-pending`), the replies
//! wait for a writable event, and no read happens before they are out. The kv store is
//! the one every reactor shares; a command holds one shard's lock for a map
//! operation.

use std::cell::RefCell;
use std::io;

use proto::echo::READ_BUF;
use service::exchange::{Exchange, Flow};

use crate::conn::Turn;
use crate::echo::TURN_BYTES;
use crate::io::Io;
use service::counters::{Count, Tally};

thread_local! {
    /// The read buffer of every kv and http connection of this reactor: a read's bytes are
    /// copied into the connection's request buffer at once, so one per thread is
    /// enough, and an idle connection holds no read buffer.
    static READ: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BUF]);
}

/// The request-reply state of one connection.
#[derive(Debug)]
pub(crate) struct Exchanged<E> {
    conn: E,
    /// Replies not yet written, from `sent` on.
    ///
    /// # Invariant
    /// `sent <= out.len()`; both are 0 once everything is written.
    out: Vec<u8>,
    sent: usize,
    /// A request ended the connection: write what is pending, then close.
    closing: bool,
    /// The peer closed its side.
    eof: bool,
}

impl<E: Exchange> Exchanged<E> {
    pub(crate) fn new(conn: E) -> Self {
        Exchanged {
            conn,
            out: Vec::new(),
            sent: 0,
            closing: false,
            eof: false,
        }
    }

    /// Whether replies wait to be written (for the `WRITABLE` interest).
    pub(crate) fn has_output(&self) -> bool {
        self.sent < self.out.len()
    }

    /// One bounded turn.
    pub(crate) fn turn(&mut self, io: &mut Io, tally: &mut Tally) -> io::Result<Turn> {
        let mut budget = TURN_BYTES;
        loop {
            if self.has_output() {
                let n = io.write(&self.out[self.sent..])?;
                tally.add(Count::BytesOut, n as u64);
                self.sent += n;
                if self.has_output() {
                    // The socket is full: a writable event brings the connection
                    // back, and nothing is read meanwhile.
                    return Ok(Turn::Idle);
                }
                self.out.clear();
                self.sent = 0;
            }
            if self.closing {
                return Ok(Turn::Done);
            }
            match self.conn.execute(&mut self.out) {
                Flow::Close => {
                    self.closing = true;
                    continue;
                }
                Flow::OutputFull => continue,
                Flow::NeedInput if !self.out.is_empty() => continue,
                Flow::NeedInput => {}
            }
            if self.eof {
                return Ok(Turn::Done);
            }
            if !io.readable {
                return Ok(Turn::Idle);
            }
            if budget == 0 {
                return Ok(Turn::Again);
            }
            let read = READ.with_borrow_mut(|buf| {
                let want = buf.len().min(budget);
                let got = io.read(&mut buf[..want])?;
                if let Some(n) = got {
                    self.conn.feed(&buf[..n]);
                }
                Ok::<_, io::Error>(got)
            })?;
            match read {
                None => {}
                Some(0) => self.eof = true,
                Some(n) => {
                    tally.add(Count::BytesIn, n as u64);
                    budget -= n;
                }
            }
        }
    }
}
