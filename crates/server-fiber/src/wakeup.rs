//! How a chat connection's reader and writer fibers wait for each other: the
//! [`Wakeup`] of `service::blocking`, over a fiber [`Semaphore`], so a waiting
//! fiber parks and its worker runs other fibers.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

use fiber::sync::Semaphore;
use service::blocking::Wakeup;

/// A wake-up flag that parks fibers (and blocks plain threads, which may also wake it).
///
/// The flag keeps the semaphore at one permit at most: only the wake that raises the
/// flag adds a permit, and the waiter lowers the flag after taking it. A burst of wakes
/// (a room broadcasting to this connection) is one atomic swap each after the first,
/// and leaves at most one spurious return of `wait`, which `Wakeup` allows.
#[derive(Debug)]
pub(crate) struct FiberWakeup {
    /// # Invariant
    /// `true` exactly when a permit was added that `wait` has not yet followed by
    /// lowering the flag; so the semaphore never holds more than one permit.
    raised: AtomicBool,
    permits: Semaphore,
}

impl Default for FiberWakeup {
    fn default() -> Self {
        FiberWakeup {
            raised: AtomicBool::new(false),
            permits: Semaphore::new(0),
        }
    }
}

impl Wakeup for FiberWakeup {
    fn wait(&self) {
        self.permits.acquire().forget();
        // Lowered after the permit is taken and before the caller checks its condition
        // again: a wake that still saw the flag raised changed that condition before
        // the check (both sides order through the outbox lock), so it is not lost.
        self.raised.store(false, SeqCst);
    }

    fn wake(&self) {
        if !self.raised.swap(true, SeqCst) {
            self.permits.add_permits(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn runtime() -> Option<fiber::Runtime> {
        if let Err(e) = fiber::probe() {
            eprintln!("skipped: {e}");
            return None;
        }
        Some(
            fiber::Runtime::builder()
                .workers(2)
                .build()
                .expect("runtime"),
        )
    }

    #[test]
    fn a_wake_before_the_wait_is_kept_and_extra_wakes_collapse() {
        let w = FiberWakeup::default();
        w.wake();
        w.wake();
        w.wake();
        w.wait();
        assert_eq!(w.permits.available_permits(), 0, "three wakes, one permit");
        w.wake();
        w.wait();
    }

    /// One waiter and one waker at a time take turns through two flags: a lost wake
    /// leaves both parked and the join times out.
    #[test]
    fn fibers_on_other_workers_and_plain_threads_wake_a_parked_fiber() {
        let Some(rt) = runtime() else { return };
        let w = Arc::new(FiberWakeup::default());
        let ack = Arc::new(FiberWakeup::default());
        let (w2, ack2) = (Arc::clone(&w), Arc::clone(&ack));
        let mut waiter = rt.spawn(move || {
            for _ in 0..2000 {
                w2.wait();
                ack2.wake();
            }
        });
        let ping = |w: Arc<FiberWakeup>, ack: Arc<FiberWakeup>| {
            move || {
                for _ in 0..1000 {
                    w.wake();
                    ack.wait();
                }
            }
        };
        let mut from_fiber = rt.spawn(ping(Arc::clone(&w), Arc::clone(&ack)));
        from_fiber
            .join_timeout(Duration::from_secs(20))
            .expect("every wake from a fiber arrived");
        let from_thread = std::thread::spawn(ping(Arc::clone(&w), Arc::clone(&ack)));
        waiter
            .join_timeout(Duration::from_secs(20))
            .expect("every wake from a plain thread arrived");
        from_thread.join().expect("the waking thread finished");
    }
}
