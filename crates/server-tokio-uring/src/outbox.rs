//! A chat connection's outbound queue, between its two tasks and the room hub:
//! the reader task queues the session's replies, the hub (on any worker thread)
//! offers live lines and hands over the `JOIN` seam, and the writer task takes
//! everything out in one buffer and writes it with one io_uring `write`.
//!
//! It is a `std::sync::Mutex` over one byte buffer plus two `tokio::sync::Notify`
//! (one per task), for the reasons `srv-tokio`'s outbox gives: the slow-subscriber
//! rule counts bytes, not messages (so a bounded channel counts the wrong thing);
//! `offer` must never block and holds the lock only for a copy of one line; and
//! one contiguous buffer means one system call per burst and no allocation per
//! message: the writer swaps the queued buffer with its own empty one, hands it
//! to the ring by value, gets it back when the write completes, and keeps it for
//! the next batch.
//!
//! Limits, as docs/protocol-notes.md says: live lines count against
//! `--max-pending`, and passing it cuts the connection off; the connection's own
//! output (replies, replay) makes the reader wait for room instead (more than
//! `--max-pending` queued in all), which stops reading the client: backpressure.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use service::hub::{Line, Subscriber};
use tokio::sync::Notify;

/// A batch buffer this big or bigger is not kept for reuse: a connection that
/// fell behind once should not hold a megabyte for the rest of its life.
const KEEP_CAPACITY: usize = proto::echo::MAX_PENDING;

/// A handle to one connection's outbound queue; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Outbox(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Wakes the writer: something was queued, the reader is done, or a cut.
    to_writer: Notify,
    /// Wakes the reader: the writer made room, or stopped.
    to_reader: Notify,
    max_pending: usize,
}

#[derive(Debug, Default)]
struct State {
    /// What the client has yet to be sent, in the order it was produced.
    buf: Vec<u8>,
    /// # Invariant
    /// The bytes of live lines in `buf`.
    buf_live: usize,
    /// # Invariant
    /// `buf_live` plus the live bytes of the batch being written.
    live: usize,
    /// # Invariant
    /// `buf.len()` plus the length of the batch being written.
    queued: usize,
    /// Offers are refused: the reader is done, the writer stopped, or a cut.
    closed: bool,
    /// The reader handed over its last bytes; the writer ends once `buf` is empty.
    reader_done: bool,
    /// The writer stopped (write error, or a cut); queuing is pointless.
    writer_done: bool,
    /// The connection was cut off as a slow subscriber.
    cut: bool,
}

/// What the writer does next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Write the batch swapped into its buffer, then call [`Outbox::sent`].
    Write(Batch),
    /// Nothing queued: wait with [`Outbox::writer_notified`].
    Wait,
    /// The reader is done and everything is written.
    Done,
    /// Cut off as a slow subscriber: shut the socket down, write nothing more.
    Cut,
}

/// The accounting of a batch taken out to be written.
#[derive(Debug)]
pub(crate) struct Batch {
    len: usize,
    live: usize,
}

impl Outbox {
    pub(crate) fn new(max_pending: usize) -> Self {
        Outbox(Arc::new(Inner {
            state: Mutex::new(State::default()),
            to_writer: Notify::new(),
            to_reader: Notify::new(),
            max_pending,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the counts consistent, so the state a
        // panicking holder left is usable.
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues the reader's own output (copied, and `out` cleared, keeping its
    /// allocation), first waiting while the queue is too full to take it.
    /// Returns false if the writer has stopped: the connection is over.
    pub(crate) async fn push_own(&self, out: &mut Vec<u8>) -> bool {
        loop {
            {
                let mut st = self.lock();
                if st.writer_done {
                    out.clear();
                    return false;
                }
                if out.is_empty() {
                    return true;
                }
                if st.queued == 0 || st.queued + out.len() <= self.0.max_pending {
                    st.buf.extend_from_slice(out);
                    st.queued += out.len();
                    drop(st);
                    out.clear();
                    self.0.to_writer.notify_one();
                    return true;
                }
            }
            // A permit stored by a `sent` after the unlock above is kept.
            self.0.to_reader.notified().await;
        }
    }

    /// The reader will queue nothing more: refuse offers, and let the writer end
    /// once it has written what is queued.
    pub(crate) fn reader_done(&self) {
        let mut st = self.lock();
        st.reader_done = true;
        st.closed = true;
        drop(st);
        self.0.to_writer.notify_one();
    }

    /// The writer's next step; with [`Next::Write`], `batch` (empty on entry)
    /// holds the bytes to write.
    pub(crate) fn next(&self, batch: &mut Vec<u8>) -> Next {
        debug_assert!(batch.is_empty());
        let mut st = self.lock();
        if st.cut {
            Next::Cut
        } else if !st.buf.is_empty() {
            std::mem::swap(&mut st.buf, batch);
            let live = std::mem::take(&mut st.buf_live);
            Next::Write(Batch {
                len: batch.len(),
                live,
            })
        } else if st.reader_done {
            Next::Done
        } else {
            Next::Wait
        }
    }

    /// Waits until [`Outbox::next`] may have something new to say.
    pub(crate) async fn writer_notified(&self) {
        self.0.to_writer.notified().await;
    }

    /// The batch was written: its bytes are no longer pending. Clears `batch`
    /// for reuse and wakes a reader waiting for room.
    pub(crate) fn sent(&self, done: Batch, batch: &mut Vec<u8>) {
        let mut st = self.lock();
        st.live -= done.live;
        st.queued -= done.len;
        drop(st);
        batch.clear();
        if batch.capacity() > KEEP_CAPACITY {
            batch.shrink_to(proto::echo::READ_BUF);
        }
        self.0.to_reader.notify_one();
    }

    /// The writer stopped (it could not write, or the connection was cut): the
    /// reader's next `push_own` says so.
    pub(crate) fn writer_done(&self) {
        let mut st = self.lock();
        st.writer_done = true;
        st.closed = true;
        st.buf = Vec::new();
        drop(st);
        self.0.to_reader.notify_one();
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub(crate) fn is_cut(&self) -> bool {
        self.lock().cut
    }
}

impl Subscriber for Outbox {
    fn offer(&self, line: &Line) -> bool {
        let mut st = self.lock();
        if st.closed {
            return false;
        }
        if st.live + line.len() > self.0.max_pending {
            st.cut = true;
            st.closed = true;
            drop(st);
            self.0.to_writer.notify_one();
            return false;
        }
        st.buf.extend_from_slice(line);
        st.buf_live += line.len();
        st.live += line.len();
        st.queued += line.len();
        drop(st);
        self.0.to_writer.notify_one();
        true
    }

    fn push_seam(&self, lines: Vec<u8>) {
        let mut st = self.lock();
        if st.closed || lines.is_empty() {
            return;
        }
        st.queued += lines.len();
        if st.buf.is_empty() {
            // Take the seam's allocation instead of copying it.
            st.buf = lines;
        } else {
            st.buf.extend_from_slice(&lines);
        }
        drop(st);
        self.0.to_writer.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn everything_comes_out_in_order_then_done() {
        block_on(async {
            let outbox = Outbox::new(1 << 20);
            assert!(outbox.push_own(&mut b"OK\n".to_vec()).await);
            assert!(outbox.offer(&line("MSG r 1 a x\n")));
            outbox.push_seam(b"JOINED q 1\n".to_vec());
            assert!(outbox.push_own(&mut b"PONG t\n".to_vec()).await);
            outbox.reader_done();
            assert!(!outbox.offer(&line("MSG r 2 a y\n")), "closed");
            let mut batch = Vec::new();
            let Next::Write(done) = outbox.next(&mut batch) else {
                panic!("expected a batch");
            };
            assert_eq!(batch, b"OK\nMSG r 1 a x\nJOINED q 1\nPONG t\n");
            outbox.sent(done, &mut batch);
            assert!(matches!(outbox.next(&mut batch), Next::Done));
        });
    }

    #[test]
    fn live_bytes_past_the_limit_cut() {
        let outbox = Outbox::new(20);
        assert!(outbox.offer(&line("0123456789\n")));
        let mut batch = Vec::new();
        let Next::Write(done) = outbox.next(&mut batch) else {
            panic!("expected a batch");
        };
        assert!(outbox.offer(&line("01234567\n")), "11 + 9 = 20 fits");
        outbox.sent(done, &mut batch);
        assert!(outbox.offer(&line("0123456789\n")));
        assert!(!outbox.offer(&line("x\n")), "9 + 11 + 2 > 20");
        assert!(outbox.is_cut());
        assert!(matches!(outbox.next(&mut batch), Next::Cut));
    }

    #[test]
    fn own_output_waits_for_room_and_gives_up_when_the_writer_stops() {
        block_on(async {
            let outbox = Outbox::new(10);
            assert!(
                outbox.push_own(&mut vec![b'a'; 30]).await,
                "an empty queue takes anything"
            );
            let mut more = vec![b'b'; 5];
            let pushed = tokio::select! {
                biased;
                pushed = outbox.push_own(&mut more) => Some(pushed),
                () = std::future::ready(()) => None,
            };
            assert_eq!(pushed, None, "30 + 5 > 10 must wait");
            let mut batch = Vec::new();
            let Next::Write(done) = outbox.next(&mut batch) else {
                panic!("expected a batch");
            };
            outbox.sent(done, &mut batch);
            assert!(outbox.push_own(&mut more).await, "room was made");
            outbox.writer_done();
            assert!(!outbox.push_own(&mut b"late".to_vec()).await);
        });
    }
}
