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
