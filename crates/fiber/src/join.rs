//! Join handles: waiting for a fiber's result from a fiber or from a plain thread.

use std::time::{Duration, Instant};

use crate::error::JoinError;
use crate::park::{self, Parked, Waker};
use crate::sys::oneshot::{self, Receiver, Sender, Wake};

/// The fiber's side of its result slot: `send` the outcome; dropping it unsent (the fiber torn
/// down, or never started) tells the joiner `Cancelled`.
pub(crate) type ResultSender<T> = Sender<Result<T, JoinError>, Waker>;

impl Wake for Waker {
    fn wake(self) {
        Waker::wake(self);
    }
}

/// A result slot and the handle that reads it.
pub(crate) fn result_slot<T>() -> (ResultSender<T>, JoinHandle<T>) {
    let (tx, rx) = oneshot::channel();
    (tx, JoinHandle { rx })
}

/// An owned permission to wait for a fiber's result. Dropping it detaches the fiber.
///
/// `join` works from a fiber (it parks the fiber) and from any thread (it blocks the thread).
pub struct JoinHandle<T> {
    rx: Receiver<Result<T, JoinError>, Waker>,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.rx.is_done())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// Takes the result, or registers the caller to be woken when it arrives.
    fn poll(&mut self) -> Option<Result<T, JoinError>> {
        self.rx
            .poll(Waker::current, Waker::same)
            .map(|r| r.unwrap_or(Err(JoinError::Cancelled)))
    }

    /// Waits for the fiber to finish and returns its value.
    ///
    /// Errors: the fiber panicked, or the runtime shut down before it finished.
    pub fn join(mut self) -> Result<T, JoinError> {
        loop {
            if let Some(r) = self.poll() {
                return r;
            }
            if park::park() == Parked::Cancelled {
                return Err(JoinError::Cancelled);
            }
        }
    }

    /// Like [`join`](Self::join), giving up with [`JoinError::Timeout`] after `timeout`; the
    /// handle stays usable then.
    pub fn join_timeout(&mut self, timeout: Duration) -> Result<T, JoinError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.poll() {
                return r;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(JoinError::Timeout);
            }
            if park::on_fiber() {
                if crate::time::park_fiber_timeout(deadline - now) == Parked::Cancelled {
                    return Err(JoinError::Cancelled);
                }
            } else {
                park::park_thread_timeout(deadline - now);
            }
        }
    }

    /// Whether the fiber has finished (its value is ready).
    pub fn is_finished(&self) -> bool {
        self.rx.is_done()
    }
}
