//! Sleeping and yielding.

use std::time::{Duration, Instant};

use crate::driver;
use crate::park::{self, Parked, Waker};
use crate::sys::coro::Suspend;
use crate::sys::op::Sqe;
use crate::worker;

/// Puts the current fiber to sleep for at least `dur` (an `IORING_OP_TIMEOUT` on the
/// worker's ring); other fibers run meanwhile. Off a fiber it sleeps the thread.
///
/// During shutdown it returns early.
pub fn sleep(dur: Duration) {
    if !park::on_fiber() {
        std::thread::sleep(dur);
        return;
    }
    if dur.is_zero() {
        yield_now();
        return;
    }
    let deadline = Instant::now() + dur;
    // A timer that fires early (it cannot, but a spurious wake can) is simply re-armed.
    for _ in 0..1000 {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let Ok(p) = driver::submit(Sqe::timeout(deadline - now)) else {
            return;
        };
        match driver::wait(&p) {
            // -ETIME: expired; anything else (cancelled at shutdown) ends the sleep too.
            Ok((res, _)) if res == -libc::ETIME => {}
            _ => return,
        }
    }
}

/// Lets the other runnable fibers of this worker run before the current one continues.
/// Off a fiber it yields the thread.
pub fn yield_now() {
    if !worker::suspend(Suspend::Yield) {
        std::thread::yield_now();
    }
}

/// Submits an io_uring no-op and waits for it: what the runtime itself costs per operation
/// (building and pushing the SQE, the enter, reaping the CQE, waking and resuming the fiber),
/// to set beside a bare io_uring NOP. Off a fiber it goes through the thread's own ring.
///
/// Errors: the runtime is shutting down, or the ring failed.
pub fn nop() -> std::io::Result<()> {
    let p = driver::submit(Sqe::nop())?;
    match driver::wait(&p)? {
        (0, _) => Ok(()),
        (res, _) => Err(std::io::Error::from_raw_os_error(-res)),
    }
}

/// One park of the current fiber, ended by a wake-up or after `dur` at the latest.
pub(crate) fn park_fiber_timeout(dur: Duration) -> Parked {
    let Ok(p) = driver::submit(Sqe::timeout(dur)) else {
        return park::park();
    };
    // The timer's waiter is this fiber; the caller registered it elsewhere too.
    let _ = p.op.poll(Waker::current);
    let parked = park::park();
    driver::cancel(&p);
    parked
}
