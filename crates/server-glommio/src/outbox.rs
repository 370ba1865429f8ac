//! A chat connection's outbound queue: the [`Subscriber`] the room hub offers
//! live lines to (from a task on any executor, or a blocking-pool thread with
//! `--fsync always`), and the one place the connection's task takes bytes from to
//! write them, in order.
//!
//! As in srv-tokio (whose `outbox.rs` gives the reasons at length): a
//! `std::sync::Mutex` over one byte buffer, because the slow-subscriber rule counts
//! bytes, not messages; `offer` copies one line under the lock and never blocks;
//! the task swaps the whole buffer out and writes it with one `write_all`. The
//! buffer and its rule are `service::outbox::OutQueue`, the same in every server.
//!
//! # Waking a task of another executor
//!
//! glommio's executors share nothing, and its own channels between them
//! (`glommio::channels::shared_channel`) connect two executors, one producer and
//! one consumer, each end bound to its executor: no fit for a hub that any of N
//! executors, or a blocking-pool thread, offers to. What glommio's users do instead
//! is rely on its foreign wakers (since 0.8): a glommio task's `Waker` may be woken
//! from any thread, and glommio then queues it to the owning executor and writes
//! that executor's eventfd, which its ring is waiting on. So any runtime-agnostic
//! primitive works; this uses the permit of an `async-channel` of capacity one
//! (`try_send` stores it, or finds it stored; `recv` takes it), which keeps a
//! wake-up that comes while the task is busy.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_channel::{Receiver, Sender, bounded};
use service::hub::{Line, Subscriber};
use service::outbox::{Batch, Offered, OutQueue};

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
    //! and that a wake-up reaches a glommio task from another thread.

    use std::time::Duration;

    use futures_lite::future;

    use super::*;

    fn line(s: &str) -> Line {
        Line::from(s.as_bytes())
    }

    /// Whether `outbox.notified()` completes within 5 s in a task of a glommio
    /// executor, while `meanwhile` runs on another thread started from the task
    /// (and returns true); `None`, with a line saying so, where glommio cannot start.
    fn woken_on_glommio(
        outbox: &Outbox,
        meanwhile: impl FnOnce() -> bool + Send + 'static,
    ) -> Option<bool> {
        let ex = match glommio::LocalExecutorBuilder::default().make() {
            Ok(ex) => ex,
            Err(e) => {
                eprintln!("skipped: glommio cannot start here: {e}");
                return None;
            }
        };
        Some(ex.run(async {
            let other = std::thread::spawn(meanwhile);
            let woken = future::or(
                async {
                    outbox.notified().await;
                    true
                },
                async {
                    glommio::timer::sleep(Duration::from_secs(5)).await;
                    false
                },
            )
            .await;
            woken && other.join().unwrap_or(false)
        }))
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
        assert_ne!(woken_on_glommio(&outbox, || true), Some(false));
    }

    #[test]
    fn an_offer_from_another_thread_wakes_a_task_that_waits() {
        let outbox = Outbox::new(100);
        let other = outbox.clone();
        // The thread starts once the task runs, so the offer most likely comes
        // while it waits: glommio's foreign-waker path.
        let offer = move || other.offer(&line("MSG r 1 a x\n"));
        assert_ne!(woken_on_glommio(&outbox, offer), Some(false));
    }

    #[test]
    fn a_cut_wakes_the_task() {
        let outbox = Outbox::new(4);
        assert!(!outbox.offer(&line("MSG r 1 a x\n")));
        assert_ne!(woken_on_glommio(&outbox, || true), Some(false));
        assert!(outbox.is_cut());
    }
}
