//! [`service::blocking::Wakeup`] over may's own primitives, so that a chat reader or
//! writer waiting on its outbox (or for the group commit's fsync) parks its coroutine,
//! not its scheduler thread.

use may::sync::{Condvar, Mutex};
use service::blocking::Wakeup;

/// A wake-up flag under may's mutex with may's condvar: [`service::blocking::ThreadWakeup`]
/// with may's types, which park a coroutine (and block a plain thread, such as the group
/// commit's, that waits on one).
#[derive(Default)]
pub(crate) struct MayWakeup {
    woken: Mutex<bool>,
    cond: Condvar,
}

impl std::fmt::Debug for MayWakeup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MayWakeup").finish_non_exhaustive()
    }
}

impl Wakeup for MayWakeup {
    fn wait(&self) {
        let mut woken = self.woken.lock().unwrap_or_else(|p| p.into_inner());
        while !*woken {
            woken = self.cond.wait(woken).unwrap_or_else(|p| p.into_inner());
        }
        *woken = false;
    }

    fn wake(&self) {
        *self.woken.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cond.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_wake_is_kept_and_a_parked_coroutine_is_woken_by_a_thread() {
        let wakeup = Arc::new(MayWakeup::default());
        // A wake with nobody waiting: the next wait returns at once.
        wakeup.wake();
        wakeup.wait();
        let (done_tx, done_rx) = mpsc::channel();
        let waiter = Arc::clone(&wakeup);
        let parked = server_may::coroutines::spawn(move || {
            waiter.wait();
            let _ = done_tx.send(());
        })
        .expect("a coroutine starts");
        // A plain thread (as the group commit's is) wakes the coroutine.
        std::thread::spawn(move || wakeup.wake());
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the parked coroutine is woken");
        assert!(parked.join().is_ok());
    }
}
