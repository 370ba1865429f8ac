//! A wake-up for one waiting task that any thread may send, free of any runtime:
//! what `tokio::sync::Notify::notify_one` gives the Tokio servers, for runtimes that
//! have no such primitive of their own but whose task wakers may be woken from any
//! thread (monoio with its `sync` feature, compio, glommio's foreign wakers since
//! 0.8, smol). The outboxes ([`crate::outbox::one_task`], [`crate::outbox::two_task`])
//! wait on one per task through [`Notifier`], which a server may also implement over its
//! runtime's own primitive (the Tokio servers' `Notify`); srv-monoio's and
//! srv-compio's workers wait on a [`Signal`] for the stop.
//!
//! A notification with nobody waiting is kept as a permit, so one sent between a
//! task's look at its state and its wait is not lost; a spare permit at most costs
//! the task one more look.
//!
//! ```
//! use std::pin::pin;
//! use std::task::{Context, Waker};
//! use service::signal::Signal;
//!
//! let signal = Signal::default();
//! signal.notify(); // nobody waits yet: kept
//! let mut cx = Context::from_waker(Waker::noop());
//! assert!(pin!(signal.notified()).poll(&mut cx).is_ready());
//! assert!(pin!(signal.notified()).poll(&mut cx).is_pending());
//! ```

use std::future::{Future, poll_fn};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

/// A one-waiter wake-up with a kept permit, as the outboxes need it: [`Signal`], or a
/// runtime's own (`tokio::sync::Notify`'s `notify_one`, wrapped by its server).
pub trait Notifier: Default + Send + Sync + 'static {
    /// Wakes the waiting task, or leaves a permit for its next wait. Any thread.
    fn notify(&self);

    /// Waits for a permit and takes it.
    fn notified(&self) -> impl Future<Output = ()> + Send + '_;
}

/// A permit and the waker of the one task that waits for it.
#[derive(Debug, Default)]
pub struct Signal(Mutex<State>);

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
    pub fn notify(&self) {
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
    pub async fn notified(&self) {
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

impl Notifier for Signal {
    fn notify(&self) {
        Signal::notify(self);
    }

    fn notified(&self) -> impl Future<Output = ()> + Send + '_ {
        Signal::notified(self)
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
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

    /// A task waker that records its wake-up.
    #[derive(Default)]
    struct Flag(AtomicBool);

    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }

    #[test]
    fn a_waiting_task_is_woken_from_another_thread() {
        let signal = Arc::new(Signal::default());
        let other = Arc::clone(&signal);
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(Arc::clone(&flag));
        let mut cx = Context::from_waker(&waker);
        let mut wait = pin!(signal.notified());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        std::thread::spawn(move || other.notify()).join().unwrap();
        assert!(flag.0.load(SeqCst), "the waker was woken");
        assert!(wait.poll(&mut cx).is_ready());
    }
}
