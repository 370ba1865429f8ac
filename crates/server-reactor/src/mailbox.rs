//! [`Mailbox`]: a chat connection's [`Subscriber`], the queue through which
//! every other thread reaches it.
//!
//! The hub calls [`Subscriber::offer`] with the room locked, on the thread of
//! whichever reactor served the `SAY`. The offer appends the shared line (an
//! `Arc`, never a copy) to this queue under the mailbox's own short lock and,
//! if the owning reactor has not already been told, tells it through its
//! [`Remote`]. The owning reactor later moves queued lines into the
//! connection's write buffer, as far as the socket keeps up.
//!
//! Cut-off without blocking: the offer compares the live bytes still queued
//! here with `--max-pending`. Past it, the mailbox drops its queue, marks
//! itself cut and closed, tells the owner, and refuses: the hub forgets the
//! subscriber, and the owning reactor closes the socket at its next turn. The
//! sender never waits for the slow client, and neither does any reactor.
//!
//! Lines reach this queue only when the write buffer is full (the owner moves
//! them out as long as it holds less than [`crate::chat::OUT_HIGH`] bytes), so
//! what is queued here is exactly what a slow client has not made room for.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use service::hub::{ConnId, Line, Subscriber};

use crate::outbuf::OutBuf;
use crate::remote::Remote;

/// A chat connection's inbound queue of server lines; clones share it.
#[derive(Debug, Clone)]
pub struct Mailbox(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// The reactor that owns the connection.
    owner: Arc<Remote>,
    /// The connection's slab key in its reactor, and its hub id.
    key: usize,
    conn: ConnId,
    max_pending: usize,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Chunk>,
    /// # Invariant
    /// The sum of the lengths of the `Chunk::Live` entries of `queue`.
    live: usize,
    /// # Invariant
    /// True while the owner has been told about this mailbox and has not yet
    /// emptied it: further lines need not tell it again.
    notified: bool,
    /// No more offers are taken (the connection is closing, or was cut).
    closed: bool,
    /// Closed because live lines passed `max_pending`.
    cut: bool,
    /// The outcome of the group commit's sync that the connection's `ACK` waits
    /// for (`--fsync always`), put here by the commit thread.
    synced: Option<io::Result<()>>,
}

#[derive(Debug)]
enum Chunk {
    /// Bytes the connection caused itself: the seam of a `JOIN`, or a reply
    /// produced while live lines were still queued ahead of it.
    Own(Vec<u8>),
    /// A `MSG` another connection caused.
    Live(Line),
}

impl Mailbox {
    pub(crate) fn new(owner: Arc<Remote>, key: usize, conn: ConnId, max_pending: usize) -> Self {
        Mailbox(Arc::new(Inner {
            state: Mutex::new(State::default()),
            owner,
            key,
            conn,
            max_pending,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the counts consistent with the queue.
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves queued chunks, in order, into `out` while it holds fewer than
    /// `high` bytes. Returns whether the mailbox is now empty.
    pub(crate) fn drain_into(&self, out: &mut OutBuf, high: usize) -> bool {
        let mut st = self.lock();
        while out.len() < high {
            let Some(chunk) = st.queue.pop_front() else {
                break;
            };
            match chunk {
                Chunk::Own(bytes) => out.extend(&bytes),
                Chunk::Live(line) => {
                    st.live -= line.len();
                    out.extend(&line);
                }
            }
        }
        let empty = st.queue.is_empty();
        // Still holding lines means the socket is behind: the owner comes back
        // when it turns writable, so new lines need not tell it.
        st.notified = !empty;
        empty
    }

    /// Queues bytes the connection caused itself behind what is queued.
    /// Never refused while the connection is open: this is not live output,
    /// and the owner stops reading commands until the client catches up.
    pub(crate) fn push_own(&self, bytes: Vec<u8>) {
        let mut st = self.lock();
        if !st.closed && !bytes.is_empty() {
            st.queue.push_back(Chunk::Own(bytes));
        }
    }

    /// Called on the group-commit thread when the sync a `SAY` of this
    /// connection waits for is done: keeps the outcome and tells the owner,
    /// whose next turn sends the `ACK` and reads commands again.
    pub(crate) fn sync_done(&self, result: io::Result<()>) {
        self.lock().synced = Some(result);
        self.tell_owner();
    }

    /// The outcome [`Mailbox::sync_done`] left, if it has come.
    pub(crate) fn take_synced(&self) -> Option<io::Result<()>> {
        self.lock().synced.take()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().queue.is_empty()
    }

    /// Takes no more offers; what is queued stays, to be written before the
    /// connection closes.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub(crate) fn is_cut(&self) -> bool {
        self.lock().cut
    }

    fn tell_owner(&self) {
        self.0.owner.mail(self.0.key, self.0.conn);
    }
}

impl Subscriber for Mailbox {
    fn offer(&self, line: &Line) -> bool {
        let mut st = self.lock();
        if st.closed {
            return false;
        }
        if st.live + line.len() > self.0.max_pending {
            st.cut = true;
            st.closed = true;
            st.queue = VecDeque::new();
            st.live = 0;
            drop(st);
            // Always tell: the owner may be waiting for a writable socket that
            // never comes, and must close it now.
            self.tell_owner();
            return false;
        }
        st.live += line.len();
        st.queue.push_back(Chunk::Live(Line::clone(line)));
        let tell = !std::mem::replace(&mut st.notified, true);
        drop(st);
        if tell {
            self.tell_owner();
        }
        true
    }

    fn push_seam(&self, lines: Vec<u8>) {
        let mut st = self.lock();
        if st.closed || lines.is_empty() {
            return;
        }
        st.queue.push_back(Chunk::Own(lines));
        let tell = !std::mem::replace(&mut st.notified, true);
        drop(st);
        if tell {
            self.tell_owner();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::Inbox;
    use mio::{Poll, Token};

    fn mailbox(max_pending: usize) -> (Mailbox, Arc<Remote>, Poll) {
        let poll = Poll::new().unwrap();
        let remote = Remote::new(poll.registry(), Token(0)).unwrap();
        (
            Mailbox::new(Arc::clone(&remote), 5, 50, max_pending),
            remote,
            poll,
        )
    }

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    fn take_mail(remote: &Remote) -> Vec<(usize, ConnId)> {
        let mut inbox = Inbox::default();
        remote.take(&mut inbox);
        inbox.mail
    }

    #[test]
    fn the_owner_is_told_once_until_it_empties_the_mailbox() {
        let (mb, remote, _poll) = mailbox(1 << 20);
        assert!(mb.offer(&line("MSG r 1 a x\n")));
        assert!(mb.offer(&line("MSG r 2 a y\n")));
        assert_eq!(take_mail(&remote), [(5, 50)]);
        let mut out = OutBuf::default();
        assert!(mb.drain_into(&mut out, 1024));
        assert_eq!(out.pending(), b"MSG r 1 a x\nMSG r 2 a y\n");
        assert!(mb.offer(&line("MSG r 3 a z\n")));
        assert_eq!(take_mail(&remote), [(5, 50)]);
    }

    #[test]
    fn a_full_write_buffer_leaves_lines_queued_in_order() {
        let (mb, remote, _poll) = mailbox(1 << 20);
        mb.push_seam(b"JOINED r 1\n".to_vec());
        assert!(mb.offer(&line("MSG r 1 a x\n")));
        mb.push_own(b"ACK r 2\n".to_vec());
        let mut out = OutBuf::default();
        assert!(!mb.drain_into(&mut out, 1), "one chunk fits under the mark");
        assert_eq!(out.pending(), b"JOINED r 1\n");
        take_mail(&remote);
        // Not emptied: the owner will come back when the socket drains.
        assert!(mb.offer(&line("MSG r 3 a y\n")));
        assert!(take_mail(&remote).is_empty());
        assert!(mb.drain_into(&mut out, 1024));
        assert_eq!(
            out.pending(),
            b"JOINED r 1\nMSG r 1 a x\nACK r 2\nMSG r 3 a y\n"
        );
    }

    #[test]
    fn live_lines_past_the_limit_cut_the_subscriber_but_own_bytes_do_not() {
        let (mb, remote, _poll) = mailbox(24);
        mb.push_own(vec![b'x'; 100]);
        assert!(mb.offer(&line("MSG r 1 a 12345\n")));
        take_mail(&remote);
        assert!(!mb.is_cut());
        assert!(!mb.offer(&line("MSG r 2 a 12345\n")), "16 + 16 > 24");
        assert!(mb.is_cut());
        assert_eq!(
            take_mail(&remote),
            [(5, 50)],
            "a cut always tells the owner"
        );
        assert!(mb.is_empty(), "a cut subscriber's queue is dropped");
        assert!(!mb.offer(&line("x\n")));
    }

    #[test]
    fn a_closed_mailbox_refuses_offers_but_keeps_its_queue() {
        let (mb, _remote, _poll) = mailbox(1 << 20);
        assert!(mb.offer(&line("MSG r 1 a x\n")));
        mb.close();
        assert!(!mb.offer(&line("MSG r 2 a x\n")));
        assert!(!mb.is_cut());
        let mut out = OutBuf::default();
        assert!(mb.drain_into(&mut out, 1024));
        assert_eq!(out.pending(), b"MSG r 1 a x\n");
    }
}
