//! A chat connection's outbound queue: the [`Subscriber`] the room hub offers
//! live lines to (from a task on any executor thread, or a blocking-pool thread
//! with `--fsync always`), and the one place the connection's task takes bytes
//! from to write them, in order.
//!
//! As in srv-tokio (whose `outbox.rs` gives the reasons at length): a
//! `std::sync::Mutex` over one byte buffer, because the slow-subscriber rule counts
//! bytes, not messages; `offer` copies one line under the lock and never blocks;
//! the task swaps the whole buffer out and writes it with one `write_all`. The
//! buffer and its rule are `service::outbox::OutQueue`, the same in every server.
//!
//! The wake-up is the one smol-specific part. smol has no `Notify`; its users build
//! one from `async-channel` (smol's `channel`): a channel of capacity one whose
//! single slot is the permit. `try_send` from the hub stores it (or finds it
//! already stored) and wakes the task through an ordinary `Waker`, which any
//! thread may call; `recv` takes it. A wake-up that comes while the task is busy
//! writing is kept, so none is lost.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use service::hub::{Line, Subscriber};
use service::outbox::{Batch, Offered, OutQueue};
use smol::channel::{Receiver, Sender, bounded};

/// A handle to one connection's outbound queue; clones share it. The rule is
/// [`OutQueue`]'s; this adds the task's wake-up.
#[derive(Debug, Clone)]
pub(crate) struct Outbox(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    queue: Mutex<OutQueue>,
    /// The permit's two ends: never closed, since this holds both.
    wake: Sender<()>,
    woken: Receiver<()>,
}

impl Outbox {
    pub(crate) fn new(max_pending: usize) -> Self {
        let (wake, woken) = bounded(1);
        Outbox(Arc::new(Inner {
            queue: Mutex::new(OutQueue::new(max_pending)),
            wake,
            woken,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, OutQueue> {
        // Every critical section leaves the counts consistent, so the state a
        // panicking holder left is usable.
        self.0.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) {
        // Full: a permit is already stored, and one is all the task needs.
        let _ = self.0.wake.try_send(());
    }

    /// Queues the connection's own output behind what is already queued, and
    /// clears `out` (keeping its allocation). The task writes everything queued
    /// before it reads again, so it never waits for room.
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
    pub(crate) async fn notified(&self) {
        // Never closed: this outbox holds the sender.
        let _ = self.0.woken.recv().await;
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
            self.wake();
        }
        offered == Offered::Queued
    }

    fn push_seam(&self, lines: Vec<u8>) {
        if self.lock().push_seam(lines) {
            self.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    //! The rule itself is `service::outbox`'s to test; these check the wrapping,
    //! and that a wake-up reaches the task from another thread.

    use std::time::Duration;

    use smol::future::FutureExt;

    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    /// Whether `outbox.notified()` completes within 5 s, while `meanwhile` runs on
    /// another thread started from the waiting future (and returns true).
    fn woken(outbox: &Outbox, meanwhile: impl FnOnce() -> bool + Send + 'static) -> bool {
        smol::block_on(async {
            let other = std::thread::spawn(meanwhile);
            let woken = async {
                outbox.notified().await;
                true
            }
            .or(async {
                smol::Timer::after(Duration::from_secs(5)).await;
                false
            })
            .await;
            woken && other.join().unwrap_or(false)
        })
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

    #[test]
    fn an_offer_made_while_the_task_was_busy_is_kept() {
        let outbox = Outbox::new(100);
        assert!(outbox.offer(&line("MSG r 1 a x\n")));
        assert!(woken(&outbox, || true));
    }

    #[test]
    fn an_offer_from_another_thread_wakes_a_task_that_waits() {
        let outbox = Outbox::new(100);
        let other = outbox.clone();
        assert!(woken(&outbox, move || other.offer(&line("MSG r 1 a x\n"))));
    }

    #[test]
    fn a_cut_wakes_the_task() {
        let outbox = Outbox::new(4);
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        assert!(woken(&outbox, || true), "the cut left a permit");
        assert!(outbox.is_cut());
    }
}
