//! `srv-smol`: the smol server, the futures-io side of the async ecosystem, written
//! the way smol's own documentation serves sockets: one `smol::Executor` run by
//! `--workers` threads (async-executor's documented multi-threaded pattern, each
//! thread in `block_on(ex.run(..))`), one listener on async-io's epoll reactor, one
//! accept task, and a task per connection spawned on the executor, which any idle
//! thread may run (a work-stealing pool, as Tokio's multi flavor is). With
//! `--cpus`, worker i is pinned to `cpus.for_worker(i)` by `launch::workers`.
//!
//! Choices, and why:
//!
//! - One listener, not one per thread: every smol example binds one and spawns a
//!   task per `accept`; the executor spreads the tasks over its threads.
//! - async-io's reactor is global: one thread at a time waits in `epoll_wait` for
//!   all of them (whichever `block_on` is idle, or async-io's own thread), then
//!   wakes the tasks whose sockets are ready. That is smol's design, kept as is.
//! - Streams are `smol::net::TcpStream` (`Async<std::net::TcpStream>`), read and
//!   written through futures-io's `AsyncRead` and `AsyncWrite` by the loops of
//!   `service::stream`, shared with srv-glommio: the buffers are the task's own, so a read waits for readiness and then reads, and a read
//!   dropped by `future::or` loses nothing.
//! - Blocking work goes to `smol::unblock` (the `blocking` crate's pool), smol's
//!   answer to Tokio's `spawn_blocking`. Its threads are started on demand by
//!   whichever worker needs one, and so with `--cpus` inherit that worker's CPU:
//!   smol offers no thread-start hook to widen them.
//! - Counting: each connection task counts into a `launch::Tally` of its own (and the
//!   accept loop into another), which it hands to the `service::stream` loop as its
//!   `stream::Counts`, as srv-tokio's tasks count: a plain load and store per read and
//!   per write, in a cache line only that task writes, summed once at the stop line;
//!   the tally moves with the task when another thread runs it.
//!
//! # Echo
//!
//! `service::stream::echo`: a read into a 16 KiB buffer, then `write_all` of what was
//! read (the complete messages with `--compute-us`, which spins in the task, holding
//! its thread while the other threads run the other tasks). A peer that does not read
//! leaves the task in `write_all`: it reads no more (backpressure).
//!
//! # Chat
//!
//! One task per connection reads and writes the socket, racing the socket against
//! its `service::outbox::one_task::Outbox` (the connection's `Subscriber` for the
//! shared `service::hub::Hub`), as srv-tokio does: `service::stream::chat`, shared
//! with srv-glommio. smol has no `Notify`, and its wakers are ordinary thread-safe
//! `Waker`s, so the outbox's runtime-free wake-up, `service::signal::Signal` (a
//! permit and a waker behind a mutex), is all fan-out across threads needs (`wake.rs`
//! tests it on smol); the queue's buffer and slow-subscriber rule are
//! `service::outbox::OutQueue`.
//!
//! Hub calls go through `service::offload::HubCalls`: inline with `--fsync never` (a
//! `write(2)` into the page cache, cheaper than a hop to another thread), on
//! `smol::unblock` with `--fsync always` (`pool.rs`). The `fdatasync(2)` itself is made
//! by the hub's group commit (`service::commit`) on a thread of its own, one sync for
//! every append since the last; the task awaits its outcome before it queues the `ACK`,
//! and the executor serves every other connection meanwhile.
//!
//! # Kv and http
//!
//! `service::stream::exchange`: read, answer every request of the read, one
//! `write_all`.
#![forbid(unsafe_code)]

mod pool;
mod serve;
#[cfg(test)]
mod wake;

use clap::Parser;

/// smol: one executor run by --workers threads over async-io's epoll reactor, one
/// listener, a task per connection.
#[derive(Debug, Parser)]
#[command(name = "srv-smol", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,
}

const NAME: &str = "srv-smol";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common))
}
