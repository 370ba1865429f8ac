//! What both async outboxes ([`super::one_task`], [`super::two_task`]) are made of: the
//! connection's [`OutQueue`] under a `std::sync::Mutex`, and the wake-up of the task
//! that writes, which the hub's offers and seams notify.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::hub::Line;
use crate::outbox::{Offered, OutQueue};
use crate::signal::Notifier;

/// The queue and its writer's wake-up.
#[derive(Debug)]
pub(super) struct Shared<N> {
    queue: Mutex<OutQueue>,
    /// Woken when something is queued for the writer, or the connection is cut.
    pub(super) to_writer: N,
}

impl<N: Notifier> Shared<N> {
    pub(super) fn new(max_pending: usize) -> Self {
        Shared {
            queue: Mutex::new(OutQueue::new(max_pending)),
            to_writer: N::default(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, OutQueue> {
        // Every critical section leaves the counts consistent, so the state a
        // panicking holder left is usable.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The hub's [`crate::hub::Subscriber::offer`]: queues a live line, or cuts the
    /// subscriber off, and wakes the writer either way.
    pub(super) fn offer(&self, line: &Line) -> bool {
        let offered = self.lock().offer(line);
        if offered != Offered::Refused {
            self.to_writer.notify();
        }
        offered == Offered::Queued
    }

    /// The hub's [`crate::hub::Subscriber::push_seam`].
    pub(super) fn push_seam(&self, lines: Vec<u8>) {
        if self.lock().push_seam(lines) {
            self.to_writer.notify();
        }
    }
}
