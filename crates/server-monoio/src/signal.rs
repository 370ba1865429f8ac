//! A wake-up that crosses threads, for one waiting task: what `tokio::sync::Notify`'s
//! `notify_one` gives the Tokio servers, which monoio does not have (its `local-sync`
//! channels are for one thread; with the `sync` feature its wakers, though, may be
//! woken from any thread, which is all this needs). A chat connection's writer waits on
//! one for its queue, its reader on another for room, and each worker on one for the stop.
//!
//! A notification with nobody waiting is kept as a permit, so one sent between a
//! task's look at its state and its wait is not lost; a spare permit at most costs
//! the task one more look.

use std::future::poll_fn;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

/// A permit and the waker of the one task that waits for it.
#[derive(Debug, Default)]
pub(crate) struct Signal(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// Notified since the last wait ended.
    permit: bool,
    waker: Option<Waker>,
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Each critical section sets a flag or a waker: any state is usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the waiting task, or leaves a permit for its next wait. Any thread.
    pub(crate) fn notify(&self) {
        let waker = {
            let mut state = self.lock();
            state.permit = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Waits for a permit and takes it.
    pub(crate) async fn notified(&self) {
        poll_fn(|cx| {
            let mut state = self.lock();
            if std::mem::take(&mut state.permit) {
                state.waker = None;
                return Poll::Ready(());
            }
            match &state.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => state.waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::Context;

    use super::*;

    #[test]
    fn a_permit_sent_before_the_wait_is_kept_and_taken_once() {
        let signal = Signal::default();
        let mut cx = Context::from_waker(Waker::noop());
        signal.notify();
        assert!(pin!(signal.notified()).poll(&mut cx).is_ready());
        assert!(pin!(signal.notified()).poll(&mut cx).is_pending());
    }

    #[test]
    fn a_waiting_task_is_woken_from_another_thread() {
        let signal = std::sync::Arc::new(Signal::default());
        let other = std::sync::Arc::clone(&signal);
        let mut cx = Context::from_waker(Waker::noop());
        let mut wait = pin!(signal.notified());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        std::thread::spawn(move || other.notify()).join().unwrap();
        assert!(wait.poll(&mut cx).is_ready());
    }
}
