//! `srv-tokio`: the idiomatic Tokio server, a task per connection, written the way
//! Tokio's own users write one (echo, chat, and kv and http in `src/exchange.rs`). Two flavors, because that choice is exactly what
//! Tokio users argue about:
//!
//! - `--flavor multi` (the default): one multi-thread runtime with `--workers`
//!   worker threads and work stealing, one listener, one accept task; connection
//!   tasks start on the worker that accepted them and migrate when another worker
//!   steals them.
//! - `--flavor per-core`: one current-thread runtime per worker thread, each with
//!   its own `SO_REUSEPORT` listener on the same address, so the kernel spreads the
//!   connections and a connection never leaves the thread that accepted it
//!   (the "thread-per-core" shape).
//!
//! With `--cpus`, the worker threads are pinned, worker i to `cpus.for_worker(i)`
//! (per-core: by `launch::workers`, the worker group srv-tokio-uring and
//! srv-reactor start theirs with too).
//! In the multi flavor Tokio names no worker in `on_thread_start`, so an atomic
//! counter hands out the indices; Tokio starts its worker threads eagerly in
//! `Builder::build`, and `main` waits until all of them are pinned before it
//! accepts, so the first `--workers` threads to start are the workers. Threads
//! Tokio starts later (the blocking pool) keep the mask of the whole `--cpus` list,
//! which `main` set on itself first. Nothing here uses `block_in_place`: it hands
//! a worker's core to another thread, which would undo the pinning.
//!
//! # Echo
//!
//! A read into a 16 KiB buffer, then `write_all` of what was read, the loop every
//! Tokio tutorial shows; `--compute-us` spins inside the task, as a real handler's
//! work would, holding its worker (the multi flavor lets idle workers steal the
//! other tasks meanwhile). Pending output is the buffer itself: a peer that does
//! not read leaves the task waiting in `write_all`, and it reads no more.
//!
//! # Chat
//!
//! One task per connection, which alone reads and writes the socket: it
//! `select!`s between the socket and its [`outbox::Outbox`], the connection's
//! `Subscriber` for the shared `service::hub::Hub`. Why that queue is a mutex over
//! one byte buffer plus a `Notify`, rather than a `tokio::sync` channel, is in
//! `service::outbox::one_task`, the outbox srv-tokio shares with srv-glommio and
//! srv-smol (`outbox.rs` only wakes it with Tokio's `Notify`); the buffer and the
//! slow-subscriber rule are `service::outbox::OutQueue`, the same in every server. Replies go into the same buffer, behind whatever live lines it
//! already holds, so the session's ordering rule holds; the task writes all that
//! is queued before it reads the next command, which is the backpressure of own
//! output that docs/protocol-notes.md asks for.
//!
//! ## Hub calls and blocking file I/O
//!
//! A `SAY` appends a record to the room's log with `write(2)` (a few hundred
//! bytes into the page cache, a few microseconds) under the room's lock; `JOIN`
//! replays with `pread(2)` from the page cache. With `--fsync never` (the default)
//! these calls run inline in the task: handing each to `spawn_blocking` would cost
//! two cross-thread wake-ups and a context switch (tens of microseconds) to save a
//! few, and Tokio's own guidance is that short blocking sections are fine in a
//! task. With `--fsync always` the `fdatasync(2)` is not made in the task at
//! all: the hub's group commit (`service::commit`) syncs on a thread of its own,
//! one sync for every append since the last, and the task awaits the outcome
//! (a one-shot slot the commit thread fills) before it queues the `ACK`, while
//! the workers serve every other connection. Hub calls still go to
//! `spawn_blocking` with `--fsync always`, as they did when each append synced
//! inline under the room's lock (the offload is `service::offload::HubCalls`,
//! shared with srv-tokio-uring; this crate supplies only `spawn_blocking`);
//! now that the lock is held for a `write(2)` only, running them inline would
//! do as well (a follow-up, to be measured with `examples/hub_offload.rs`).
//! (`block_in_place` would avoid moving the session but is not allowed in a
//! current-thread runtime and would unpin the multi flavor's workers.)
//!
//! Measured with `examples/hub_offload.rs` (release, a virtio disk, a busy
//! 2-core machine, before the group commit): with `--fsync never` a `SAY` costs
//! 1.3 to 4.6 µs inline and 11 to 25 µs through `spawn_blocking`; with `--fsync
//! always` it cost 0.5 to 1.8 ms either way.
#![forbid(unsafe_code)]

mod chat;
mod echo;
mod exchange;
mod outbox;
mod runtime;
mod serve;

use clap::{Parser, ValueEnum};

/// A Tokio task per connection, on one multi-thread runtime or one
/// current-thread runtime per worker thread.
#[derive(Debug, Parser)]
#[command(name = "srv-tokio", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    /// `multi`: one multi-thread runtime with --workers worker threads that steal
    /// work from each other, one listener. `per-core`: one current-thread runtime
    /// per worker thread, each with its own SO_REUSEPORT listener on --addr; a
    /// connection stays on the thread whose listener accepted it.
    #[arg(long, value_enum, default_value_t = Flavor::Multi)]
    flavor: Flavor,
}

/// How the connections' tasks are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Flavor {
    /// One multi-thread runtime, work stealing.
    Multi,
    /// One current-thread runtime and listener per worker thread.
    PerCore,
}

const NAME: &str = "srv-tokio";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common, cli.flavor))
}
