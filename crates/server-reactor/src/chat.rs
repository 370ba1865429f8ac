//! One chat connection as a state machine over its [`Io`], running the shared
//! [`Session`]: a turn moves mail into the write buffer and writes it, then
//! handles buffered lines (or continues a `JOIN`'s replay), reading more when
//! they run out, within a budget of lines and bytes.
//!
//! ```text
//!   other reactors ─offer─► Mailbox ─┐ (whenever the write buffer is empty)
//!   Session::handle_line ──► out ────┴─► OutBuf ──write──► socket
//! ```
//!
//! The ordering rule of `service::session`: before the bytes a line produced
//! (`out`) join the write buffer, whatever the mailbox holds goes first; if the
//! mailbox cannot be emptied (the write buffer still holds bytes), `out` is
//! queued in the mailbox behind it. Replies, replay and live lines therefore leave in
//! the order they were produced.
//!
//! Backpressure on the connection's own output (replies, replay): while the
//! write buffer holds `OUT_HIGH` bytes or more, or the mailbox still holds
//! anything, no further line is handled and nothing more is read; the turn
//! ends and the writable event resumes it. Live lines from others are never
//! refused here: they wait in the mailbox, which cuts the subscriber off past
//! `--max-pending` (see [`crate::mailbox`]).

use std::io;
use std::sync::Arc;

use proto::chat::{LineBuffer, MAX_LINE};
use service::hub::Hub;
use service::session::{Flow, Session};

use crate::conn::Turn;
use crate::io::Io;
use crate::mailbox::Mailbox;
use service::counters::{Count, Tally};

/// The write buffer's high-water mark: at or above it the connection's
/// commands wait.
pub(crate) const OUT_HIGH: usize = proto::echo::MAX_PENDING;

/// Lines (or replay batches) one turn may handle before the others get theirs.
pub(crate) const TURN_LINES: usize = 64;

/// Bytes one turn may read.
pub(crate) const TURN_BYTES: usize = 64 * 1024;

/// Rounds of "move mail, write" one turn may do: a subscriber that keeps up
/// with a busy room must not hold the reactor for as long as others talk.
const TURN_PUMPS: usize = 8;

/// The chat state of one connection.
#[derive(Debug)]
pub(crate) struct Chat {
    hub: Arc<Hub<Mailbox>>,
    session: Session,
    mailbox: Mailbox,
    lines: LineBuffer,
    /// What the session produced for the line in hand; empty between lines.
    out: Vec<u8>,
    wbuf: crate::outbuf::OutBuf,
    /// A `JOIN` is replaying: call `replay_more` before the next line.
    replaying: bool,
    /// A `SAY` waits for the group commit (`--fsync always`): no line is
    /// handled until the mailbox has the sync's outcome.
    syncing: bool,
    /// The peer closed its side: handle what is buffered, then close.
    eof: bool,
    /// No more lines will be handled: flush, then close.
    closing: bool,
}

impl Chat {
    pub(crate) fn new(hub: Arc<Hub<Mailbox>>, session: Session, mailbox: Mailbox) -> Self {
        Chat {
            hub,
            session,
            mailbox,
            lines: LineBuffer::new(MAX_LINE),
            out: Vec::new(),
            wbuf: crate::outbuf::OutBuf::default(),
            replaying: false,
            syncing: false,
            eof: false,
            closing: false,
        }
    }

    /// This connection's id in the hub.
    pub(crate) fn conn_id(&self) -> service::hub::ConnId {
        self.session.conn()
    }

    /// Whether bytes wait to be written (for the `WRITABLE` interest).
    pub(crate) fn has_output(&self) -> bool {
        !self.wbuf.is_empty()
    }

    /// One bounded turn.
    pub(crate) fn turn(&mut self, io: &mut Io, tally: &mut Tally) -> io::Result<Turn> {
        if self.mailbox.is_cut() {
            tally.add(Count::Cut, 1);
            return Ok(Turn::Done);
        }
        let mut lines_left = TURN_LINES;
        let mut bytes_left = TURN_BYTES;
        let mut pumps_left = TURN_PUMPS;
        loop {
            if !self.pump(io, tally, &mut pumps_left)? {
                return Ok(Turn::Again);
            }
            if self.closing {
                return Ok(if self.wbuf.is_empty() && self.mailbox.is_empty() {
                    Turn::Done
                } else {
                    Turn::Idle
                });
            }
            if self.wbuf.len() >= OUT_HIGH || !self.mailbox.is_empty() {
                // The client is behind: its commands wait for it to read.
                return Ok(Turn::Idle);
            }
            if self.syncing {
                // The sync happens on the commit thread; its outcome arrives as
                // mail, and this reactor serves its other connections meanwhile.
                let Some(result) = self.mailbox.take_synced() else {
                    return Ok(Turn::Idle);
                };
                self.syncing = false;
                self.session.synced(result, &mut self.out);
                self.after(Flow::Continue);
                continue;
            }
            if lines_left == 0 {
                return Ok(Turn::Again);
            }
            if self.replaying {
                lines_left -= 1;
                let flow = self
                    .session
                    .replay_more(&self.hub, &self.mailbox, &mut self.out);
                self.after(flow);
                continue;
            }
            if let Some(line) = self.lines.next_line() {
                lines_left -= 1;
                tally.add(Count::Lines, 1);
                let flow = self
                    .session
                    .handle_line(line, &self.hub, &self.mailbox, &mut self.out);
                self.after(flow);
                continue;
            }
            if self.eof {
                self.finish();
                continue;
            }
            if !io.readable {
                return Ok(Turn::Idle);
            }
            if bytes_left == 0 {
                return Ok(Turn::Again);
            }
            match io.read(self.lines.spare())? {
                None => {}
                Some(0) => self.eof = true,
                Some(n) => {
                    self.lines.commit(n);
                    tally.add(Count::BytesIn, n as u64);
                    bytes_left = bytes_left.saturating_sub(n);
                }
            }
        }
    }

    /// Moves mail into the write buffer and writes it, until the socket is
    /// behind or nothing is left. Returns false if it stopped on its budget
    /// with more to do.
    fn pump(&mut self, io: &mut Io, tally: &mut Tally, rounds: &mut usize) -> io::Result<bool> {
        loop {
            self.mailbox.drain_into(&mut self.wbuf);
            if self.wbuf.is_empty() || !io.writable {
                return Ok(true);
            }
            if *rounds == 0 {
                return Ok(false);
            }
            *rounds -= 1;
            let n = io.write(self.wbuf.pending())?;
            tally.add(Count::BytesOut, n as u64);
            self.wbuf.consume(n);
        }
    }

    /// Emits what the line produced, in order, and follows the session's flow.
    fn after(&mut self, flow: Flow) {
        if !self.out.is_empty() {
            if self.mailbox.drain_into(&mut self.wbuf) {
                self.wbuf.extend(&self.out);
                self.out.clear();
            } else {
                // Rare: only when the client is behind. The bytes are copied
                // and `out` keeps its memory.
                self.mailbox.push_own(&mut self.out);
            }
        }
        match flow {
            Flow::Continue => self.replaying = false,
            Flow::Replaying => self.replaying = true,
            Flow::Syncing => {
                self.replaying = false;
                self.syncing = true;
                match self.session.take_pending() {
                    Some(pending) => {
                        let mailbox = self.mailbox.clone();
                        pending.on_done(move |result| mailbox.sync_done(result));
                    }
                    None => self.mailbox.sync_done(Err(io::Error::other("no sync"))),
                }
            }
            Flow::Close => self.finish(),
        }
    }

    /// Handles no more lines: leaves every room, takes no more mail, and lets
    /// the turn flush what is queued before the connection closes.
    pub(crate) fn finish(&mut self) {
        if !self.closing {
            self.closing = true;
            self.replaying = false;
            self.syncing = false;
            self.session.close(&self.hub);
            self.mailbox.close();
        }
    }
}
