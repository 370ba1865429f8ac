//! The one piece of the chat connection that is glommio's own: how a hub call runs
//! off the executor with `--fsync always`. The connection itself is
//! `service::stream::chat` (one task that reads and writes its socket, as srv-tokio's
//! does, shared with srv-smol): glommio's socket read tries `recv(2)` first and
//! otherwise waits for readiness with a poll on its ring, kept in the stream, not the
//! future, so the read the loop drops when the outbox wins loses no bytes.

use std::panic::AssertUnwindSafe;

use service::offload::{BlockingPool, Job};

/// The executor's blocking thread pool (`ExecutorProxy::spawn_blocking`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pool;

impl BlockingPool for Pool {
    async fn run<R: Send + 'static>(&self, job: impl Job<R>) -> Option<R> {
        // A panic would leave glommio's result slot unwritten: catch it, and end
        // only this connection.
        let job = move || std::panic::catch_unwind(AssertUnwindSafe(job)).ok();
        glommio::executor().spawn_blocking(job).await
    }
}
