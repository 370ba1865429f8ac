//! Synchronisation that parks fibers, not threads: [`Mutex`], [`Semaphore`] and a bounded
//! [`channel`].
//!
//! Each also works from a plain thread, where it blocks the thread. Waiting is FIFO.
//!
//! At shutdown, fibers still waiting here are torn down. A destructor that runs then must
//! not wait for a `Mutex` or `Semaphore` that another parked fiber holds: it would spin
//! forever, since that fiber is torn down after it.

mod channel;
mod semaphore;

pub use crate::sys::cell::{Mutex, MutexGuard};
pub use channel::{
    Receiver, RecvError, RecvTimeoutError, SendError, Sender, TryRecvError, TrySendError, channel,
};
pub use semaphore::{Semaphore, SemaphorePermit};
