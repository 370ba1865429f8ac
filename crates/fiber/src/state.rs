//! The run state of a fiber: the park/wake protocol between the worker that runs a fiber
//! and whoever wakes it.
//!
//! ```text
//!             wake()                      pop + resume
//!   PARKED ------------> SCHEDULED -------------------------> RUNNING
//!     ^  (waker pushes it                                      |  |  |
//!     |   on a run queue)        wake() while running          |  |  | returns
//!     |                      +-------------------------------+ |  |  v
//!     |                      v                                 |  |  DONE
//!     |                   NOTIFIED --- parks: requeued ------>-+  |
//!     |                                 (to SCHEDULED)            |
//!     +------------------------ parks, no wake-up pending --------+
//! ```
//!
//! Exactly one party moves a fiber into SCHEDULED (the waker that wins the PARKED ->
//! SCHEDULED exchange, or the worker that finds NOTIFIED when the fiber parks), so a fiber is
//! in at most one run queue at a time and runs on one worker at a time. A wake-up that
//! arrives while the fiber is still running (between registering its waker and actually
//! parking) is remembered as NOTIFIED, so it cannot be lost. The loom model at the end of
//! this file (built with `RUSTFLAGS="--cfg loom"`) checks this.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

const PARKED: u8 = 0;
const SCHEDULED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

/// A fiber's run state.
#[derive(Debug)]
pub(crate) struct RunState(AtomicU8);

impl RunState {
    /// A new fiber, about to be pushed on a run queue by its spawner.
    pub(crate) fn new_scheduled() -> RunState {
        RunState(AtomicU8::new(SCHEDULED))
    }

    /// A wake-up. Returns `true` if the caller won the fiber and must push it on a run queue.
    pub(crate) fn wake(&self) -> bool {
        let mut s = self.0.load(Ordering::Acquire);
        loop {
            let next = match s {
                PARKED => SCHEDULED,
                RUNNING => NOTIFIED,
                _ => return false,
            };
            match self
                .0
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next == SCHEDULED,
                Err(actual) => s = actual,
            }
        }
    }

    /// The worker that popped the fiber is about to resume it.
    pub(crate) fn start(&self) {
        self.0.store(RUNNING, Ordering::Release);
    }

    /// The fiber suspended to park. Returns `true` if a wake-up came in while it ran: the
    /// worker must push it on a run queue again.
    pub(crate) fn park(&self) -> bool {
        match self
            .0
            .compare_exchange(RUNNING, PARKED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => false,
            Err(_) => {
                // NOTIFIED: only this worker moves the fiber out of it.
                self.0.store(SCHEDULED, Ordering::Release);
                true
            }
        }
    }

    /// The fiber yielded: it goes straight back on a run queue. A pending wake-up is
    /// absorbed; the fiber will run and look at its conditions again anyway.
    pub(crate) fn yielded(&self) {
        self.0.store(SCHEDULED, Ordering::Release);
    }

    /// The fiber finished or was torn down; later wake-ups are ignored.
    pub(crate) fn finish(&self) {
        self.0.store(DONE, Ordering::Release);
    }

    /// Whether the fiber finished.
    pub(crate) fn is_done(&self) -> bool {
        self.0.load(Ordering::Acquire) == DONE
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn wake_while_running_is_remembered() {
        let s = RunState::new_scheduled();
        s.start();
        assert!(!s.wake(), "a running fiber is not queued by the waker");
        assert!(s.park(), "the worker requeues it instead of parking");
        s.start();
        assert!(!s.park());
        assert!(s.wake(), "a parked fiber is queued by its waker");
        assert!(!s.wake(), "only once");
        s.start();
        s.finish();
        assert!(!s.wake());
        assert!(s.is_done());
    }
}

/// The park/wake protocol under every interleaving loom can find.
///
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p fiber --lib loom_model --release`.
#[cfg(all(test, loom))]
mod loom_model {
    use super::RunState;
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    /// A waiter slot as the blocking primitives keep it: a registered waker, under a lock.
    struct Slot {
        registered: Mutex<bool>,
        ready: AtomicBool,
    }

    /// The fiber side, run by the worker that resumed it: register, check, park. Returns
    /// whether the fiber saw the condition (and finished) or parked; `queued` counts run-queue
    /// pushes.
    fn fiber_waits(state: &RunState, slot: &Slot, queued: &AtomicUsize) -> bool {
        state.start();
        {
            let mut reg = slot.registered.lock().unwrap();
            if slot.ready.load(Ordering::Acquire) {
                drop(reg);
                state.finish();
                return true;
            }
            *reg = true;
        }
        // The fiber suspends; its worker records the park.
        if state.park() {
            queued.fetch_add(1, Ordering::SeqCst);
        }
        false
    }

    /// The waking side: make the condition true, take the registration, wake.
    fn wake(state: &RunState, slot: &Slot, queued: &AtomicUsize) {
        slot.ready.store(true, Ordering::Release);
        let registered = std::mem::take(&mut *slot.registered.lock().unwrap());
        if registered && state.wake() {
            queued.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_wake_up_is_never_lost_nor_doubled() {
        loom::model(|| {
            let state = Arc::new(RunState::new_scheduled());
            let slot = Arc::new(Slot {
                registered: Mutex::new(false),
                ready: AtomicBool::new(false),
            });
            let queued = Arc::new(AtomicUsize::new(0));
            let waker = {
                let (state, slot, queued) =
                    (Arc::clone(&state), Arc::clone(&slot), Arc::clone(&queued));
                thread::spawn(move || wake(&state, &slot, &queued))
            };
            let finished = fiber_waits(&state, &slot, &queued);
            waker.join().unwrap();
            let q = queued.load(Ordering::SeqCst);
            if finished {
                assert_eq!(q, 0, "a finished fiber was queued");
                assert!(state.is_done());
            } else {
                // It parked: exactly one party put it back on a run queue.
                assert_eq!(q, 1, "the fiber was queued {q} times");
            }
        });
    }

    #[test]
    fn two_wakers_queue_a_parked_fiber_once() {
        loom::model(|| {
            let state = Arc::new(RunState::new_scheduled());
            state.start();
            let queued = Arc::new(AtomicUsize::new(0));
            let wakers: Vec<_> = (0..2)
                .map(|_| {
                    let (state, queued) = (Arc::clone(&state), Arc::clone(&queued));
                    thread::spawn(move || {
                        if state.wake() {
                            queued.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            if state.park() {
                queued.fetch_add(1, Ordering::SeqCst);
            }
            for w in wakers {
                w.join().unwrap();
            }
            assert_eq!(queued.load(Ordering::SeqCst), 1);
        });
    }
}
