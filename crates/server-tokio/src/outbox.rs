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
//!
//! The buffer and its accounting are `service::outbox::OutQueue`, the rule every
//! server shares; this module adds the lock and the task's `Notify`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use service::hub::{Line, Subscriber};
use service::outbox::{Batch, Offered, OutQueue};
use tokio::sync::Notify;

/// A handle to one connection's outbound queue; clones share it. The rule is
/// [`OutQueue`]'s; this adds the task's wake-up.
#[derive(Debug, Clone)]
pub(crate) struct Outbox(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    queue: Mutex<OutQueue>,
    /// Woken when live lines or a seam are queued, or the connection is cut.
    wake: Notify,
}

impl Outbox {
    pub(crate) fn new(max_pending: usize) -> Self {
        Outbox(Arc::new(Inner {
            queue: Mutex::new(OutQueue::new(max_pending)),
            wake: Notify::new(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, OutQueue> {
        // Every critical section leaves the counts consistent, so the state a
        // panicking holder left is usable.
        self.0.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues the connection's own output behind what is already queued, and
    /// clears `out` (keeping its allocation). The connection's task is the one
    /// writer, and it writes everything queued before it reads again, so it
    /// never waits for room and nobody needs waking.
    pub(crate) fn push_own(&self, out: &mut Vec<u8>) {
        if !out.is_empty() {
            self.lock().push_own(out);
        }
    }

    /// Swaps everything queued into `batch` (which must be empty); `None` if
    /// nothing is queued.
    pub(crate) fn take(&self, batch: &mut Vec<u8>) -> Option<Batch> {
        self.lock().take(batch)
    }

    /// The batch was written: its live bytes are no longer pending. Clears
    /// `batch` for reuse.
    pub(crate) fn sent(&self, done: Batch, batch: &mut Vec<u8>) {
        self.lock().sent(done, batch);
    }

    /// Waits until something was queued by others, or the connection was cut.
    /// A wake-up that came while the task was busy is kept, so none is lost.
    pub(crate) async fn notified(&self) {
        self.0.wake.notified().await;
    }

    /// Whether the connection was cut off as a slow subscriber.
    pub(crate) fn is_cut(&self) -> bool {
        self.lock().is_cut()
    }

    /// The connection is ending: refuse further offers and drop what is queued.
    pub(crate) fn close(&self) {
        let mut q = self.lock();
        q.close();
        q.drop_queued();
    }
}

impl Subscriber for Outbox {
    fn offer(&self, line: &Line) -> bool {
        let offered = self.lock().offer(line);
        if offered != Offered::Refused {
            self.0.wake.notify_one();
        }
        offered == Offered::Queued
    }

    fn push_seam(&self, lines: Vec<u8>) {
        if self.lock().push_seam(lines) {
            self.0.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    //! The rule itself is `service::outbox`'s to test; these check the wrapping.

    use std::time::Duration;

    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    #[test]
    fn a_closed_outbox_refuses_offers_and_drops_its_queue() {
        let outbox = Outbox::new(100);
        outbox.push_own(&mut b"OK\n".to_vec());
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
        tokio::time::timeout(Duration::from_secs(5), outbox.notified())
            .await
            .expect("the permit was kept");
    }

    #[tokio::test]
    async fn a_cut_wakes_the_task() {
        let outbox = Outbox::new(4);
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        tokio::time::timeout(Duration::from_secs(5), outbox.notified())
            .await
            .expect("the cut left a permit");
        assert!(outbox.is_cut());
    }
}
