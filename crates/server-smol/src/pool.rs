//! The one piece of the chat connection that is smol's own: how a hub call runs off
//! the executor with `--fsync always`. The connection itself is
//! `service::stream::chat` (one task that reads and writes its socket, as srv-tokio's
//! does, shared with srv-glommio): a read on an `Async` socket waits for readiness,
//! so the read the loop drops when the outbox wins loses no bytes.

use std::panic::AssertUnwindSafe;

use service::offload::{BlockingPool, Job};

/// smol's blocking pool (`smol::unblock`, the `blocking` crate's threads).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unblock;

impl BlockingPool for Unblock {
    async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
        // `unblock` would carry a panic over to this task; the session is lost
        // either way, and an error ends only this connection.
        smol::unblock(move || std::panic::catch_unwind(AssertUnwindSafe(job)).ok()).await
    }
}
