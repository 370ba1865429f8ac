//! Waking and parking, for fibers and plain threads alike.
//!
//! Every blocking primitive of the crate follows one protocol: check the condition, register a
//! [`Waker`] for the current fiber (or thread) where the waking side will find it, [`park`],
//! and check again. A wake-up that arrives between the registration and the park is not lost:
//! the fiber state machine (`fiber.rs`) remembers it as `NOTIFIED`, and `Thread::unpark`
//! leaves a token. Parks may return spuriously, so callers always loop.

use std::thread::Thread;
use std::time::Duration;

use crate::fiber::{self, FiberRef};
use crate::sys::coro::{self, Suspend};
use crate::worker;

/// Something that can be made runnable again: a parked fiber or a parked thread.
#[derive(Clone)]
pub(crate) enum Waker {
    Fiber(FiberRef),
    Thread(Thread),
}

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Waker::Fiber(fb) => write!(f, "Waker::Fiber({})", fb.id()),
            Waker::Thread(t) => write!(f, "Waker::Thread({:?})", t.id()),
        }
    }
}

impl Waker {
    /// The waker of the calling fiber, or of the calling thread when not on a fiber.
    pub(crate) fn current() -> Waker {
        match worker::current_fiber() {
            Some(f) => Waker::Fiber(f),
            None => Waker::Thread(std::thread::current()),
        }
    }

    pub(crate) fn wake(self) {
        match self {
            Waker::Fiber(f) => fiber::wake(f),
            Waker::Thread(t) => t.unpark(),
        }
    }

    /// Whether both wake the same fiber or thread.
    pub(crate) fn same(&self, other: &Waker) -> bool {
        match (self, other) {
            (Waker::Fiber(a), Waker::Fiber(b)) => FiberRef::ptr_eq(a, b),
            (Waker::Thread(a), Waker::Thread(b)) => a.id() == b.id(),
            _ => false,
        }
    }
}

/// How a park ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parked {
    /// Woken, or spuriously returned: check the condition again.
    Woken,
    /// The fiber is being torn down at shutdown and must not wait: give up.
    Cancelled,
}

/// Parks the current fiber (or thread) until woken.
pub(crate) fn park() -> Parked {
    if coro::in_teardown() {
        return Parked::Cancelled;
    }
    if !worker::suspend(Suspend::Park) {
        std::thread::park();
    }
    Parked::Woken
}

/// Parks the current thread for at most `dur`. Fibers use timers instead (`time.rs`).
pub(crate) fn park_thread_timeout(dur: Duration) {
    std::thread::park_timeout(dur);
}

/// Whether the caller runs on a fiber.
pub(crate) fn on_fiber() -> bool {
    coro::on_fiber()
}
