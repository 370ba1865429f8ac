//! The state of a chat connection's outbound queue, free of I/O and of waking:
//! the slow-subscriber rule of docs/protocol-notes.md written once. Every
//! server's outbox keeps an [`OutQueue`] under its own lock and adds only how its
//! runtime wakes a writer or a reader: [`crate::blocking::Outbox`] for threads and
//! fibers, srv-reactor's mailbox, and for async runtimes the two outboxes here,
//! generic over their wake-up ([`crate::signal::Notifier`]): [`one_task`], where one
//! task reads and writes its socket (srv-tokio, srv-glommio, srv-smol), and
//! [`two_task`], where a reader task and a writer task share it (srv-tokio-uring,
//! srv-monoio, srv-compio).
//!
//! The rule, as the comparison needs it to be the same everywhere:
//!
//! - live `MSG` lines ([`OutQueue::offer`]) count against `--max-pending` from
//!   the moment they are queued until they are written; one that would pass the
//!   limit cuts the subscriber off: the queue closes and drops what it holds;
//! - the connection's own output ([`OutQueue::push_own`]: replies, replay) is
//!   never refused while the connection is open, but the reader waits until
//!   [`OutQueue::has_room`] before it queues more, which stops reading the
//!   client: plain TCP backpressure;
//! - the `JOIN` seam ([`OutQueue::push_seam`]) is own output that cannot wait
//!   (the hub hands it over with the room locked), so it is queued at once.
//!
//! Everything is one byte buffer in production order, so the writer takes all
//! of it with one swap and writes it with one system call, and a burst of
//! fan-out costs no allocation per line. A writer that once took a batch past
//! [`KEEP_CAPACITY`] gives the memory back ([`OutQueue::sent`]).
//!
//! ```
//! use service::outbox::{Offered, OutQueue};
//!
//! let mut queue = OutQueue::new(16);
//! assert!(queue.push_own(&mut b"OK\n".to_vec()));
//! assert_eq!(queue.offer(b"MSG r 1 a hi\n"), Offered::Queued);
//! let mut batch = Vec::new();
//! let taken = queue.take(&mut batch).unwrap();
//! assert_eq!(batch, b"OK\nMSG r 1 a hi\n");
//! // Taken but not written: the live line is still pending.
//! assert_eq!(queue.offer(b"MSG r 2 a hi\n"), Offered::Cut);
//! queue.sent(taken, &mut batch);
//! assert!(queue.is_cut() && queue.is_closed());
//! ```

pub mod one_task;
mod shared;
pub mod two_task;

/// A batch buffer this big or bigger is not kept for reuse: a connection that
/// fell behind once should not hold a megabyte for the rest of its life.
pub const KEEP_CAPACITY: usize = proto::echo::MAX_PENDING;

/// What became of a live line offered to an [`OutQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// Queued: wake the writer.
    Queued,
    /// The queue was already closed; nothing changed.
    Refused,
    /// The line would have passed `--max-pending`: the subscriber is cut off
    /// now (closed, its queue dropped). Wake everyone, and make the
    /// connection's socket stop.
    Cut,
}

/// The accounting of bytes taken out of an [`OutQueue`] to be written; hand it
/// back to [`OutQueue::sent`] once they are.
#[derive(Debug)]
#[must_use = "the bytes stay pending until the batch is handed back to `sent`"]
pub struct Batch {
    len: usize,
    live: usize,
}

/// One connection's outbound bytes and the slow-subscriber rule over them.
#[derive(Debug)]
pub struct OutQueue {
    /// What the client has yet to be sent and nobody has taken, in the order
    /// it was produced.
    buf: Vec<u8>,
    /// # Invariant
    /// The bytes of live lines in `buf`.
    buf_live: usize,
    /// # Invariant
    /// `buf_live` plus the live bytes of batches taken and not yet `sent`: the
    /// pending live output that `--max-pending` limits.
    live: usize,
    /// # Invariant
    /// `buf.len()` plus the bytes of batches taken and not yet `sent`.
    queued: usize,
    /// Offers and own output are refused: the connection is ending, or was cut.
    closed: bool,
    /// Closed because a live line would have passed `max_pending`.
    cut: bool,
    max_pending: usize,
}

impl OutQueue {
    /// An empty, open queue whose live lines may have `max_pending` bytes
    /// pending.
    pub fn new(max_pending: usize) -> Self {
        OutQueue {
            buf: Vec::new(),
            buf_live: 0,
            live: 0,
            queued: 0,
            closed: false,
            cut: false,
            max_pending,
        }
    }

    /// A live line another connection caused (the hub's
    /// [`crate::hub::Subscriber::offer`]). Never waits.
    pub fn offer(&mut self, line: &[u8]) -> Offered {
        if self.closed {
            return Offered::Refused;
        }
        if self.live + line.len() > self.max_pending {
            self.cut = true;
            self.close();
            self.drop_queued();
            return Offered::Cut;
        }
        self.buf.extend_from_slice(line);
        self.buf_live += line.len();
        self.live += line.len();
        self.queued += line.len();
        Offered::Queued
    }

    /// The `JOIN` seam (the hub's [`crate::hub::Subscriber::push_seam`]): own
    /// output, queued at once. Returns whether it was queued (false when closed
    /// or empty): wake the writer if so.
    pub fn push_seam(&mut self, lines: Vec<u8>) -> bool {
        if self.closed || lines.is_empty() {
            return false;
        }
        self.queued += lines.len();
        if self.buf.is_empty() {
            // Take the seam's allocation instead of copying it.
            self.buf = lines;
        } else {
            self.buf.extend_from_slice(&lines);
        }
        true
    }

    /// Whether own output of `len` bytes may be queued now. An empty queue
    /// takes anything (a reply longer than the limit must still go out); a
    /// reader that finds no room waits for the writer's [`OutQueue::sent`].
    /// Always true once closed, so that nobody waits for a queue that no
    /// longer drains.
    pub fn has_room(&self, len: usize) -> bool {
        self.closed || self.queued == 0 || self.queued + len <= self.max_pending
    }

    /// Queues the connection's own output behind what is queued, copying it
    /// and clearing `out` (its allocation stays with the caller). Returns
    /// false, with `out` cleared, when the queue is closed: the connection is
    /// over. Never refused for its size: see [`OutQueue::has_room`].
    pub fn push_own(&mut self, out: &mut Vec<u8>) -> bool {
        if self.closed {
            out.clear();
            return false;
        }
        self.buf.extend_from_slice(out);
        self.queued += out.len();
        out.clear();
        true
    }

    /// Swaps everything queued into `batch` (which must be empty); `None` if
    /// nothing is queued. The bytes stay pending until [`OutQueue::sent`].
    pub fn take(&mut self, batch: &mut Vec<u8>) -> Option<Batch> {
        debug_assert!(batch.is_empty());
        if self.buf.is_empty() {
            return None;
        }
        std::mem::swap(&mut self.buf, batch);
        let live = std::mem::take(&mut self.buf_live);
        Some(Batch {
            len: batch.len(),
            live,
        })
    }

    /// The batch was written (or handed to a write buffer the runtime owns):
    /// its bytes are no longer pending. Clears `batch` for reuse, giving back
    /// its memory if a backlog made it large.
    pub fn sent(&mut self, done: Batch, batch: &mut Vec<u8>) {
        self.live -= done.live;
        self.queued -= done.len;
        batch.clear();
        if batch.capacity() > KEEP_CAPACITY {
            batch.shrink_to(proto::echo::READ_BUF);
        }
    }

    /// No more offers or own output; what is queued stays, to be written.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Forgets what is queued (a writer that stopped, a cut), with its memory.
    pub fn drop_queued(&mut self) {
        self.queued -= self.buf.len();
        self.live -= self.buf_live;
        self.buf_live = 0;
        self.buf = Vec::new();
    }

    /// Whether nothing is queued (batches taken and not yet sent aside).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Whether the queue takes nothing more.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub fn is_cut(&self) -> bool {
        self.cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes and sends everything queued, returning it.
    fn write_all(q: &mut OutQueue) -> Vec<u8> {
        let mut batch = Vec::new();
        let Some(done) = q.take(&mut batch) else {
            return Vec::new();
        };
        let written = batch.clone();
        q.sent(done, &mut batch);
        written
    }

    #[test]
    fn everything_comes_out_in_the_order_it_went_in() {
        let mut q = OutQueue::new(1 << 20);
        assert!(q.push_own(&mut b"OK\n".to_vec()));
        assert_eq!(q.offer(b"MSG r 1 a x\n"), Offered::Queued);
        assert!(q.push_seam(b"JOINED q 1\n".to_vec()));
        let mut own = b"PONG t\n".to_vec();
        assert!(q.push_own(&mut own));
        assert!(
            own.is_empty(),
            "own output is moved out of the caller's buffer"
        );
        assert_eq!(write_all(&mut q), b"OK\nMSG r 1 a x\nJOINED q 1\nPONG t\n");
        assert!(q.is_empty() && q.take(&mut Vec::new()).is_none());
    }

    #[test]
    fn a_seam_into_an_empty_queue_keeps_its_allocation() {
        let mut q = OutQueue::new(100);
        let seam = b"JOINED r 1\n".to_vec();
        let ptr = seam.as_ptr();
        assert!(q.push_seam(seam));
        let mut batch = Vec::new();
        let _done = q.take(&mut batch).unwrap();
        assert_eq!(batch.as_ptr(), ptr);
    }

    #[test]
    fn live_bytes_count_until_sent_and_passing_the_limit_cuts() {
        let mut q = OutQueue::new(20);
        assert_eq!(q.offer(b"0123456789\n"), Offered::Queued);
        let mut batch = Vec::new();
        let done = q.take(&mut batch).unwrap();
        assert_eq!(q.offer(b"01234567\n"), Offered::Queued, "11 + 9 = 20 fits");
        q.sent(done, &mut batch);
        assert_eq!(
            q.offer(b"0123456789\n"),
            Offered::Queued,
            "the first was sent"
        );
        assert!(!q.is_cut());
        assert_eq!(q.offer(b"x\n"), Offered::Cut, "9 + 11 + 2 > 20");
        assert!(q.is_cut() && q.is_closed());
        assert!(q.is_empty(), "a cut drops what is queued");
        assert_eq!(q.offer(b"\n"), Offered::Refused, "a cut queue stays closed");
        assert!(!q.push_own(&mut b"late\n".to_vec()));
        assert!(!q.push_seam(b"JOINED r 3\n".to_vec()));
    }

    #[test]
    fn own_output_does_not_count_against_the_live_limit() {
        let mut q = OutQueue::new(20);
        assert!(q.push_own(&mut vec![b'x'; 100]));
        assert!(q.push_seam(vec![b'y'; 100]));
        assert_eq!(
            q.offer(b"MSG r 1 anon 0123\n"),
            Offered::Queued,
            "18 live bytes"
        );
        assert_eq!(
            q.offer(b"MSG r 1 anon 0123\n"),
            Offered::Cut,
            "36 live bytes"
        );
    }

    #[test]
    fn own_output_waits_for_room_but_an_empty_queue_takes_anything() {
        let mut q = OutQueue::new(10);
        assert!(q.has_room(30), "an empty queue takes anything");
        assert!(q.push_own(&mut vec![b'a'; 30]));
        assert!(!q.has_room(1), "30 queued: the reader waits");
        let mut batch = Vec::new();
        let done = q.take(&mut batch).unwrap();
        assert!(!q.has_room(1), "taken but not written is still queued");
        q.sent(done, &mut batch);
        assert!(q.has_room(1000), "written: empty again");
        assert!(q.push_own(&mut vec![b'b'; 6]));
        assert!(q.has_room(4) && !q.has_room(5), "6 + 5 > 10");
        q.close();
        assert!(q.has_room(5), "nobody waits on a closed queue");
        assert_eq!(write_all(&mut q), [b'b'; 6], "closing keeps what is queued");
    }

    #[test]
    fn dropping_the_queue_keeps_the_counts_of_batches_in_flight() {
        let mut q = OutQueue::new(20);
        assert_eq!(q.offer(b"0123456789\n"), Offered::Queued);
        let mut batch = Vec::new();
        let done = q.take(&mut batch).unwrap();
        assert_eq!(q.offer(b"01234567\n"), Offered::Queued);
        q.drop_queued();
        assert!(q.is_empty());
        assert_eq!(q.offer(b"01234567\n"), Offered::Queued, "11 + 9 = 20");
        q.sent(done, &mut batch);
        assert_eq!(q.offer(b"0123456789\n"), Offered::Queued, "9 + 11 = 20");
    }

    #[test]
    fn a_large_batch_gives_its_memory_back() {
        let mut q = OutQueue::new(usize::MAX);
        let mut big = vec![0; 2 * KEEP_CAPACITY];
        assert!(q.push_own(&mut big));
        let mut batch = Vec::new();
        let done = q.take(&mut batch).unwrap();
        q.sent(done, &mut batch);
        assert!(batch.is_empty() && batch.capacity() <= KEEP_CAPACITY);
    }
}
