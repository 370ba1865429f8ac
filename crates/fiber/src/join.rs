//! Join handles: waiting for a fiber's result from a fiber or from a plain thread.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::JoinError;
use crate::park::{self, Parked, Waker};

/// The result slot a fiber fills and its [`JoinHandle`] reads.
pub(crate) struct JoinState<T> {
    slot: Mutex<Slot<T>>,
}

struct Slot<T> {
    result: Option<Result<T, JoinError>>,
    finished: bool,
    waiter: Option<Waker>,
}

impl<T> JoinState<T> {
    pub(crate) fn new() -> Arc<JoinState<T>> {
        Arc::new(JoinState {
            slot: Mutex::new(Slot {
                result: None,
                finished: false,
                waiter: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores the outcome (the first one wins) and wakes a joiner.
    pub(crate) fn finish(&self, r: Result<T, JoinError>) {
        let waiter = {
            let mut s = self.lock();
            if s.finished {
                return;
            }
            s.finished = true;
            s.result = Some(r);
            s.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }

    fn is_finished(&self) -> bool {
        self.lock().finished
    }

    /// Takes the result, or registers the caller to be woken when it arrives.
    fn poll(&self) -> Option<Result<T, JoinError>> {
        let mut s = self.lock();
        if s.finished {
            return Some(s.result.take().unwrap_or(Err(JoinError::Cancelled)));
        }
        let me = Waker::current();
        if !s.waiter.as_ref().is_some_and(|w| w.same(&me)) {
            s.waiter = Some(me);
        }
        None
    }
}

/// An owned permission to wait for a fiber's result. Dropping it detaches the fiber.
///
/// `join` works from a fiber (it parks the fiber) and from any thread (it blocks the thread).
pub struct JoinHandle<T> {
    state: Arc<JoinState<T>>,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.state.is_finished())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(state: Arc<JoinState<T>>) -> JoinHandle<T> {
        JoinHandle { state }
    }

    /// Waits for the fiber to finish and returns its value.
    ///
    /// Errors: the fiber panicked, or the runtime shut down before it finished.
    pub fn join(self) -> Result<T, JoinError> {
        loop {
            if let Some(r) = self.state.poll() {
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
            if let Some(r) = self.state.poll() {
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
        self.state.is_finished()
    }
}
