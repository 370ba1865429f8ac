//! A chat connection's outbound queue: the [`Subscriber`] the room hub offers
//! live lines to, and the one place the connection's task takes bytes from to
//! write them, in order.
//!
//! # Why a mutex over one byte buffer and a `Notify`, not a channel
//!
//! The slow-subscriber rule counts *bytes* of live output (`--max-pending`, 1 MiB
//! by default), and a bounded `tokio::sync::mpsc` counts *messages*: a capacity of
//! N lines is 60 KiB of short messages or 40 MiB of long ones. An unbounded
//! channel plus an `AtomicUsize` of queued bytes would count right, but it
//! allocates a node block per 32 messages, keeps an `Arc` per line, and still
//! leaves the writer to gather the lines into one buffer for one `write(2)`.
//! Here `offer` copies the line (a few hundred bytes) into the connection's
//! buffer under a `std::sync::Mutex` held for just that copy, adds its length to
//! the live count, and calls `Notify::notify_one`, which stores a permit if the
//! task is busy: it never blocks, never waits on the task, and allocates only
//! when the buffer grows. The task swaps the whole buffer out in one lock and
//! writes it with one `write(2)`, so a burst of fan-out costs one system call, and
//! the two buffers it swaps are reused for the life of the connection.
//!
//! The connection's own replies are copied into the same buffer, behind the live
//! lines already there, and the `JOIN` seam arrives through `push_seam` under the
//! room's lock, so one buffer in production order is the single outbound path the
//! session's ordering rule asks for. Own output does not count against
//! `--max-pending`: the task stops reading while it has anything to write, which
//! is the backpressure docs/protocol-notes.md describes.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use service::hub::{Line, Subscriber};
use tokio::sync::Notify;

/// A batch this big or bigger is not kept for reuse: a connection that fell
/// behind once should not hold a megabyte for the rest of its life.
const KEEP_CAPACITY: usize = proto::echo::MAX_PENDING;

/// A handle to one connection's outbound queue; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Outbox(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Woken when live lines or a seam are queued, or the connection is cut.
    wake: Notify,
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
    /// `buf_live` plus the live bytes of the batch being written: the pending
    /// live output that `--max-pending` limits.
    live: usize,
    /// The connection is gone or going; offers are refused.
    closed: bool,
    /// The connection was cut off as a slow subscriber.
    cut: bool,
}

/// Bytes taken out of the outbox to be written; hand it back to
/// [`Outbox::sent`] once they are.
#[derive(Debug)]
pub(crate) struct Batch {
    live: usize,
}

impl Outbox {
    pub(crate) fn new(max_pending: usize) -> Self {
        Outbox(Arc::new(Inner {
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            max_pending,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the counts consistent, so the state a
        // panicking holder left is usable.
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues the connection's own output behind what is already queued, and
    /// clears `out` (keeping its allocation). The connection's task is the one
    /// writer, so nobody needs waking.
    pub(crate) fn push_own(&self, out: &mut Vec<u8>) {
        if !out.is_empty() {
            self.lock().buf.extend_from_slice(out);
            out.clear();
        }
    }

    /// Swaps everything queued into `batch` (which must be empty); `None` if
    /// nothing is queued.
    pub(crate) fn take(&self, batch: &mut Vec<u8>) -> Option<Batch> {
        debug_assert!(batch.is_empty());
        let mut st = self.lock();
        if st.buf.is_empty() {
            return None;
        }
        std::mem::swap(&mut st.buf, batch);
        let live = std::mem::take(&mut st.buf_live);
        Some(Batch { live })
    }

    /// The batch was written: its live bytes are no longer pending. Clears
    /// `batch` for reuse.
    pub(crate) fn sent(&self, done: Batch, batch: &mut Vec<u8>) {
        self.lock().live -= done.live;
        batch.clear();
        if batch.capacity() > KEEP_CAPACITY {
            batch.shrink_to(proto::echo::READ_BUF);
        }
    }

    /// Waits until something was queued by others, or the connection was cut.
    /// A wake-up that came while the task was busy is kept, so none is lost.
    pub(crate) async fn notified(&self) {
        self.0.wake.notified().await;
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub(crate) fn is_cut(&self) -> bool {
        self.lock().cut
    }

    /// The connection is ending: refuse further offers and drop what is queued.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        st.buf = Vec::new();
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
            st.buf = Vec::new();
            drop(st);
            self.0.wake.notify_one();
            return false;
        }
        st.buf.extend_from_slice(line);
        st.buf_live += line.len();
        st.live += line.len();
        drop(st);
        self.0.wake.notify_one();
        true
    }

    fn push_seam(&self, lines: Vec<u8>) {
        let mut st = self.lock();
        if st.closed || lines.is_empty() {
            return;
        }
        if st.buf.is_empty() {
            // Take the seam's allocation instead of copying it.
            st.buf = lines;
        } else {
            st.buf.extend_from_slice(&lines);
        }
        drop(st);
        self.0.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    #[test]
    fn everything_comes_out_in_the_order_it_went_in() {
        let outbox = Outbox::new(1 << 20);
        let mut own = b"OK\n".to_vec();
        outbox.push_own(&mut own);
        assert!(own.is_empty());
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        outbox.push_seam(b"JOINED q 1\n".to_vec());
        let mut own = b"PONG t\n".to_vec();
        outbox.push_own(&mut own);
        let mut batch = Vec::new();
        let done = outbox.take(&mut batch).unwrap();
        assert_eq!(batch, b"OK\nMSG r 1 a x\nJOINED q 1\nPONG t\n");
        outbox.sent(done, &mut batch);
        assert!(batch.is_empty());
        assert!(outbox.take(&mut batch).is_none());
    }

    #[test]
    fn live_bytes_past_the_limit_cut_and_own_bytes_do_not_count() {
        let outbox = Outbox::new(20);
        let mut own = vec![b'x'; 100];
        outbox.push_own(&mut own);
        assert!(outbox.offer(&line("0123456789\n")));
        let mut batch = Vec::new();
        // Taken but not yet written: still pending.
        let done = outbox.take(&mut batch).unwrap();
        assert!(outbox.offer(&line("01234567\n")), "11 + 9 = 20 fits");
        assert!(!outbox.is_cut());
        outbox.sent(done, &mut batch);
        assert!(
            outbox.offer(&line("0123456789\n")),
            "the first line was sent"
        );
        assert!(!outbox.offer(&line("x\n")), "9 + 11 + 2 > 20");
        assert!(outbox.is_cut());
        assert!(!outbox.offer(&line("\n")), "a cut outbox stays closed");
        assert!(
            outbox.take(&mut batch).is_none(),
            "a cut drops what is queued"
        );
    }

    #[test]
    fn a_closed_outbox_refuses_offers() {
        let outbox = Outbox::new(100);
        outbox.close();
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        outbox.push_seam(b"JOINED r 2\n".to_vec());
        assert!(!outbox.is_cut());
        assert!(outbox.take(&mut Vec::new()).is_none());
    }

    #[tokio::test]
    async fn an_offer_wakes_the_task_even_if_it_was_busy() {
        let outbox = Outbox::new(100);
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        tokio::time::timeout(std::time::Duration::from_secs(5), outbox.notified())
            .await
            .expect("the permit was kept");
    }
}
