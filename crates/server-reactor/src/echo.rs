//! One echo connection as a state machine over its [`Io`]: a turn reads what
//! the budget allows, spins for the messages it completed (`--compute-us`),
//! writes what is ready, and says whether it wants another turn.
//!
//! The bytes live in one buffer that is both the read buffer and the write
//! buffer, so an echo is a `read` into it and a `write` out of it, with no
//! copy and no allocation:
//!
//! ```text
//!  buf:  [ written | to send         | held partial msg | free ...            ]
//!        0       start            ready                end             buf.len()
//!                 '----------- pending (at most MAX_PENDING) ----------'
//! ```
//!
//! The buffer starts at `READ_BUF` (16 KiB) and grows, by doubling, up to
//! `MAX_PENDING` (64 KiB) only while a client reads less than it sends; when
//! 64 KiB are pending the connection is not read until the client makes room
//! (docs/PROTOCOL.md's backpressure).

use std::io;

use proto::echo::{MAX_PENDING, MessageCutter, READ_BUF};
use service::echo::EchoConfig;

use crate::conn::Turn;
use crate::io::Io;
use service::counters::{Count, Tally};

/// Bytes a connection may read in one turn before the others get theirs.
pub(crate) const TURN_BYTES: usize = 64 * 1024;

/// With `--compute-us`, complete messages a connection may compute in one
/// turn: a pipelining client must not hold the reactor for a whole 16 KiB
/// read of 16-byte messages at once.
pub(crate) const TURN_MESSAGES: usize = 16;

/// The echo state of one connection.
#[derive(Debug)]
pub(crate) struct Echo {
    config: EchoConfig,
    buf: Vec<u8>,
    /// # Invariant
    /// `start <= ready <= end <= buf.len()`, `end - start <= MAX_PENDING`, and
    /// `end - ready` is the cutter's partial message (0 without a cutter).
    start: usize,
    ready: usize,
    end: usize,
    cutter: Option<MessageCutter>,
    /// The peer closed its side: send what is pending, then close.
    eof: bool,
}

impl Echo {
    pub(crate) fn new(config: &EchoConfig) -> Self {
        Echo {
            config: *config,
            buf: vec![0; READ_BUF],
            start: 0,
            ready: 0,
            end: 0,
            cutter: config.cutter(),
            eof: false,
        }
    }

    fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Whether bytes wait to be written (for the `WRITABLE` interest).
    pub(crate) fn has_output(&self) -> bool {
        self.ready > self.start
    }

    /// One bounded turn.
    pub(crate) fn turn(&mut self, io: &mut Io, tally: &mut Tally) -> io::Result<Turn> {
        let mut budget = match &self.cutter {
            None => TURN_BYTES,
            Some(c) => TURN_BYTES.min(TURN_MESSAGES * c.msg_size()),
        };
        loop {
            self.flush(io, tally)?;
            if self.eof {
                return Ok(if self.pending() == 0 {
                    Turn::Done
                } else {
                    Turn::Idle
                });
            }
            let room = MAX_PENDING - self.pending();
            if !io.readable || room == 0 {
                // Nothing to read, or backpressure: a writable event (or a
                // readable one) brings the connection back.
                return Ok(Turn::Idle);
            }
            if budget == 0 {
                return Ok(Turn::Again);
            }
            let want = READ_BUF.min(room).min(budget);
            let spare = self.spare(want);
            match io.read(spare)? {
                None => {}
                Some(0) => {
                    // EOF: a trailing partial message goes out as it is.
                    self.eof = true;
                    self.ready = self.end;
                }
                Some(n) => {
                    tally.add(Count::BytesIn, n as u64);
                    budget -= n;
                    self.end += n;
                    self.ready = match &mut self.cutter {
                        None => self.end,
                        Some(c) => {
                            // The compute happens here, on the reactor thread,
                            // holding up every other connection of this
                            // reactor: the paradigm's cost, not hidden.
                            self.config.spin_for(c.feed(n));
                            self.end - c.partial_len()
                        }
                    };
                }
            }
        }
    }

    /// Writes what is ready, as far as the socket takes it.
    fn flush(&mut self, io: &mut Io, tally: &mut Tally) -> io::Result<()> {
        if self.ready > self.start {
            let n = io.write(&self.buf[self.start..self.ready])?;
            tally.add(Count::BytesOut, n as u64);
            self.start += n;
            if self.start == self.end {
                self.start = 0;
                self.ready = 0;
                self.end = 0;
            }
        }
        Ok(())
    }

    /// `want` free bytes at `end`, compacting or growing the buffer if needed.
    /// The caller keeps `pending + want <= MAX_PENDING`.
    fn spare(&mut self, want: usize) -> &mut [u8] {
        debug_assert!(self.pending() + want <= MAX_PENDING);
        if self.buf.len() - self.end < want {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.ready -= self.start;
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < want {
                let grown = (self.buf.len() * 2).max(self.end + want).min(MAX_PENDING);
                self.buf.resize(grown, 0);
            }
        }
        &mut self.buf[self.end..self.end + want]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroUsize;

    fn config(compute: bool) -> EchoConfig {
        EchoConfig {
            compute: compute.then_some(std::time::Duration::ZERO),
            msg_size: NonZeroUsize::new(4).unwrap(),
        }
    }

    #[test]
    fn spare_compacts_before_it_grows_and_never_passes_max_pending() {
        let mut e = Echo::new(&config(false));
        e.spare(READ_BUF);
        e.end = READ_BUF;
        e.ready = READ_BUF;
        e.start = 100;
        // 100 bytes written: compaction makes room without growing.
        assert_eq!(e.spare(100).len(), 100);
        assert_eq!((e.start, e.end, e.buf.len()), (0, READ_BUF - 100, READ_BUF));
        // A full buffer grows by doubling, up to MAX_PENDING.
        e.end = READ_BUF;
        e.ready = READ_BUF;
        e.spare(READ_BUF);
        assert_eq!(e.buf.len(), 2 * READ_BUF);
        e.end = MAX_PENDING - 10;
        e.ready = e.end;
        e.buf.resize(MAX_PENDING - 5, 0);
        assert_eq!(e.spare(10).len(), 10);
        assert_eq!(e.buf.len(), MAX_PENDING);
    }

    #[test]
    fn the_compute_budget_is_a_number_of_messages() {
        let e = Echo::new(&config(true));
        let c = e.cutter.as_ref().unwrap();
        assert_eq!(TURN_BYTES.min(TURN_MESSAGES * c.msg_size()), 64);
    }
}
