//! [`Mailbox`]: a chat connection's [`Subscriber`], the queue through which
//! every other thread reaches it.
//!
//! The hub calls [`Subscriber::offer`] with the room locked, on the thread of
//! whichever reactor served the `SAY`. The offer copies the line into this
//! queue's byte buffer (`service::outbox::OutQueue`, the rule every server
//! shares) under the mailbox's own short lock and, if the queue was empty (so
//! the owning reactor has not already been told), tells it through its
//! [`Remote`]. The owning reactor later moves what is queued into the
//! connection's write buffer, as far as the socket keeps up.
//!
//! Cut-off without blocking: the offer compares the live bytes still queued
//! here with `--max-pending`. Past it, the mailbox drops its queue, marks
//! itself cut and closed, tells the owner, and refuses: the hub forgets the
//! subscriber, and the owning reactor closes the socket at its next turn. The
//! sender never waits for the slow client, and neither does any reactor.
//!
//! The owner moves everything queued into the connection's write buffer each
//! time that buffer is empty, so lines stay here only while the socket is
//! behind. Moved lines still count against `--max-pending` until they are
//! written, as in every server: a slow client's limit covers what it has not
//! read, wherever the bytes wait.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use service::hub::{ConnId, Line, Subscriber};
use service::outbox::{Batch, Offered, OutQueue};

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
}

#[derive(Debug)]
struct State {
    /// The queued bytes and the slow-subscriber rule over them. Lines queued
    /// while it was not empty need not tell the owner: it was told when the
    /// first came, and has not emptied it since.
    queue: OutQueue,
    /// The buffer the queue's bytes are swapped into on their way to the
    /// write buffer, kept between drains.
    spare: Vec<u8>,
    /// The batch in the owner's write buffer, not yet all written.
    in_flight: Option<Batch>,
    /// The outcome of the group commit's sync that the connection's `ACK` waits
    /// for (`--fsync always`), put here by the commit thread.
    synced: Option<io::Result<()>>,
}

impl Mailbox {
    pub(crate) fn new(owner: Arc<Remote>, key: usize, conn: ConnId, max_pending: usize) -> Self {
        Mailbox(Arc::new(Inner {
            state: Mutex::new(State {
                queue: OutQueue::new(max_pending),
                spare: Vec::new(),
                in_flight: None,
                synced: None,
            }),
            owner,
            key,
            conn,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the counts consistent with the queue.
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves everything queued, in order, into `out` if it is empty (by a
    /// swap, so nothing is copied). Returns whether the mailbox is now empty.
    ///
    /// What was moved stays pending (its live lines count against
    /// `--max-pending`) until it is written: an empty `out` says the previous
    /// batch was, so it is settled here first. The owner calls this after every
    /// write, so a written batch never counts for long.
    pub(crate) fn drain_into(&self, out: &mut OutBuf) -> bool {
        let mut st = self.lock();
        let State {
            queue,
            spare,
            in_flight,
            ..
        } = &mut *st;
        if out.is_empty() {
            if let Some(written) = in_flight.take() {
                queue.sent(written, spare);
            }
            if let Some(taken) = queue.take(spare) {
                out.append(spare);
                *in_flight = Some(taken);
            }
        }
        queue.is_empty()
    }

    /// Queues bytes the connection caused itself behind what is queued, and
    /// clears `out`. Never refused while the connection is open: this is not
    /// live output, and the owner stops reading commands until the client
    /// catches up.
    pub(crate) fn push_own(&self, out: &mut Vec<u8>) {
        self.lock().queue.push_own(out);
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
        self.lock().queue.close();
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub(crate) fn is_cut(&self) -> bool {
        self.lock().queue.is_cut()
    }

    fn tell_owner(&self) {
        self.0.owner.mail(self.0.key, self.0.conn);
    }
}

impl Subscriber for Mailbox {
    fn offer(&self, line: &Line) -> bool {
        let mut st = self.lock();
        let was_empty = st.queue.is_empty();
        let offered = st.queue.offer(line);
        drop(st);
        match offered {
            Offered::Queued if was_empty => self.tell_owner(),
            Offered::Queued | Offered::Refused => {}
            // Always tell: the owner may be waiting for a writable socket that
            // never comes, and must close it now.
            Offered::Cut => self.tell_owner(),
        }
        offered == Offered::Queued
    }

    fn push_seam(&self, lines: Vec<u8>) {
        let mut st = self.lock();
        let was_empty = st.queue.is_empty();
        let queued = st.queue.push_seam(lines);
        drop(st);
        if queued && was_empty {
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
        assert!(mb.drain_into(&mut out));
        assert_eq!(out.pending(), b"MSG r 1 a x\nMSG r 2 a y\n");
        assert!(mb.offer(&line("MSG r 3 a z\n")));
        assert_eq!(take_mail(&remote), [(5, 50)]);
    }

    #[test]
    fn a_full_write_buffer_leaves_lines_queued_in_order() {
        let (mb, remote, _poll) = mailbox(1 << 20);
        let mut out = OutBuf::default();
        out.extend(b"x");
        mb.push_seam(b"JOINED r 1\n".to_vec());
        assert!(mb.offer(&line("MSG r 1 a x\n")));
        mb.push_own(&mut b"ACK r 2\n".to_vec());
        assert!(!mb.drain_into(&mut out), "the write buffer is not empty");
        assert_eq!(take_mail(&remote), [(5, 50)], "told once, for the seam");
        // Not emptied: the owner will come back when the socket drains.
        assert!(mb.offer(&line("MSG r 3 a y\n")));
        assert!(take_mail(&remote).is_empty());
        out.consume(1);
        assert!(mb.drain_into(&mut out));
        assert_eq!(
            out.pending(),
            b"JOINED r 1\nMSG r 1 a x\nACK r 2\nMSG r 3 a y\n"
        );
    }

    #[test]
    fn moved_lines_count_until_the_write_buffer_is_written() {
        let (mb, _remote, _poll) = mailbox(24);
        assert!(mb.offer(&line("MSG r 1 a 12345\n")));
        let mut out = OutBuf::default();
        assert!(mb.drain_into(&mut out));
        assert!(
            !mb.offer(&line("MSG r 2 a 12345\n")),
            "16 unwritten + 16 > 24"
        );
        let (mb, _remote, _poll) = mailbox(24);
        assert!(mb.offer(&line("MSG r 1 a 12345\n")));
        let mut out = OutBuf::default();
        assert!(mb.drain_into(&mut out));
        out.consume(out.len());
        assert!(mb.drain_into(&mut out), "settles the written batch");
        assert!(
            mb.offer(&line("MSG r 2 a 12345\n")),
            "16 written, 16 pending"
        );
    }

    #[test]
    fn a_cut_tells_the_owner_and_drops_the_queue() {
        let (mb, remote, _poll) = mailbox(24);
        mb.push_own(&mut vec![b'x'; 100]);
        assert!(mb.offer(&line("MSG r 1 a 12345\n")));
        assert!(take_mail(&remote).is_empty(), "own bytes were queued first");
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
        assert!(mb.drain_into(&mut out));
        assert_eq!(out.pending(), b"MSG r 1 a x\n");
    }
}
