//! A chat connection's outbound queue for runtimes where one task alone reads and
//! writes its socket (srv-tokio, srv-glommio, srv-smol): the [`Subscriber`] the room
//! hub offers live lines to (from a task on any worker, or a blocking-pool thread with
//! `--fsync always`), and the one place the connection's task takes bytes from to write
//! them, in order.
//!
//! # Why a mutex over one byte buffer and a wake-up, not a channel
//!
//! The slow-subscriber rule counts *bytes* of live output (`--max-pending`, 1 MiB
//! by default), and a bounded channel counts *messages*: a capacity of N lines is
//! 60 KiB of short messages or 40 MiB of long ones. An unbounded channel plus an
//! atomic count of queued bytes would count right, but it allocates a node block per
//! few dozen messages, keeps an `Arc` per line, and still leaves the writer to gather
//! the lines into one buffer for one `write(2)`. Here `offer` copies the line (a few
//! hundred bytes) into the connection's buffer under a `std::sync::Mutex` held for
//! just that copy, adds its length to the live count, and notifies the task
//! ([`Notifier`]: [`Signal`] by default, or a runtime's own such as Tokio's `Notify`),
//! which stores a permit if the task is busy: it never blocks, never waits on the
//! task, and allocates only when the buffer grows. The task swaps the whole buffer
//! out in one lock and writes it with one `write(2)`, so a burst of fan-out costs one
//! system call, and the two buffers it swaps are reused for the life of the
//! connection.
//!
//! The connection's own replies are copied into the same buffer, behind the live
//! lines already there, and the `JOIN` seam arrives through `push_seam` under the
//! room's lock, so one buffer in production order is the single outbound path the
//! session's ordering rule asks for. Own output does not count against
//! `--max-pending`: the task stops reading while it has anything to write, which
//! is the backpressure docs/protocol-notes.md describes.

use std::sync::{Arc, MutexGuard};

use super::shared::Shared;
use crate::hub::{Line, Subscriber};
use crate::outbox::{Batch, OutQueue};
use crate::signal::{Notifier, Signal};

/// A handle to one connection's outbound queue; clones share it. The rule is
/// [`OutQueue`]'s; this adds the task's wake-up.
#[derive(Debug)]
pub struct Outbox<N = Signal>(Arc<Shared<N>>);

impl<N> Clone for Outbox<N> {
    fn clone(&self) -> Self {
        Outbox(Arc::clone(&self.0))
    }
}

impl<N: Notifier> Outbox<N> {
    /// An empty, open queue whose live lines may have `max_pending` bytes pending.
    pub fn new(max_pending: usize) -> Self {
        Outbox(Arc::new(Shared::new(max_pending)))
    }

    fn lock(&self) -> MutexGuard<'_, OutQueue> {
        self.0.lock()
    }

    /// Queues the connection's own output behind what is already queued, and
    /// clears `out` (keeping its allocation). The connection's task is the one
    /// writer, and it writes everything queued before it reads again, so it
    /// never waits for room and nobody needs waking.
    pub fn push_own(&self, out: &mut Vec<u8>) {
        if !out.is_empty() {
            self.lock().push_own(out);
        }
    }

    /// Swaps everything queued into `batch` (which must be empty); `None` if
    /// nothing is queued.
    pub fn take(&self, batch: &mut Vec<u8>) -> Option<Batch> {
        self.lock().take(batch)
    }

    /// The batch was written: its live bytes are no longer pending. Clears
    /// `batch` for reuse.
    pub fn sent(&self, done: Batch, batch: &mut Vec<u8>) {
        self.lock().sent(done, batch);
    }

    /// Waits until something was queued by others, or the connection was cut.
    /// A wake-up that came while the task was busy is kept, so none is lost.
    pub async fn notified(&self) {
        self.0.to_writer.notified().await;
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub fn is_cut(&self) -> bool {
        self.lock().is_cut()
    }

    /// The connection is ending: refuse further offers and drop what is queued.
    pub fn close(&self) {
        let mut q = self.lock();
        q.close();
        q.drop_queued();
    }
}

impl<N: Notifier> Subscriber for Outbox<N> {
    fn offer(&self, line: &Line) -> bool {
        self.0.offer(line)
    }

    fn push_seam(&self, lines: Vec<u8>) {
        self.0.push_seam(lines);
    }
}

#[cfg(test)]
mod tests {
    //! The rule itself is `outbox`'s to test; these check the wrapping. That a
    //! runtime's task is woken from another thread is each such server's test.

    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    /// Whether the task's wait would end at once.
    fn woken(outbox: &Outbox) -> bool {
        let wait = pin!(outbox.notified());
        wait.poll(&mut Context::from_waker(Waker::noop())) == Poll::Ready(())
    }

    #[test]
    fn a_closed_outbox_refuses_offers_and_drops_its_queue() {
        let outbox: Outbox = Outbox::new(100);
        outbox.push_own(&mut b"OK\n".to_vec());
        outbox.close();
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        outbox.push_seam(b"JOINED r 2\n".to_vec());
        assert!(!outbox.is_cut());
        assert!(outbox.take(&mut Vec::new()).is_none());
        assert!(!woken(&outbox), "a refused offer wakes nobody");
    }

    #[test]
    fn an_offer_made_while_the_task_was_busy_is_kept() {
        let outbox: Outbox = Outbox::new(100);
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        assert!(woken(&outbox));
        let mut batch = Vec::new();
        let taken = outbox.take(&mut batch).expect("the line is queued");
        assert_eq!(batch, b"MSG r 1 a x\n");
        outbox.sent(taken, &mut batch);
        assert!(batch.is_empty());
    }

    #[test]
    fn a_cut_wakes_the_task() {
        let outbox: Outbox = Outbox::new(4);
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        assert!(woken(&outbox), "the cut left a permit");
        assert!(outbox.is_cut());
    }
}
