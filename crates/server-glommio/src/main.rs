//! `srv-glommio`: the glommio server, written the way glommio's documentation and
//! examples serve sockets: thread-per-core, one `LocalExecutor` per worker thread
//! (started by `launch::workers`, pinned with `--cpus`, worker i to
//! `cpus.for_worker(i)`, and built with `Placement::Fixed` on that CPU), each with its
//! own `glommio::net::TcpListener` on the same address through `SO_REUSEPORT` (as
//! glommio's `bind` does, so the kernel spreads the connections), and a task per
//! connection on the executor that accepted it, which it never leaves. READY comes only
//! once every executor listens.
//!
//! Choices, and why:
//!
//! - The executors are made with glommio's defaults (10 MiB of I/O memory registered
//!   with the ring, no spin before parking, a preemption timer of 100 ms), the settings
//!   glommio recommends, ring depth included: `ring_depth(128)`, glommio's default
//!   (`--sq-entries N` changes it). That one setting sizes the submission queue of each
//!   of its three rings (main, latency, and the storage poll ring, which sockets do not
//!   use), their completion queues (the kernel's twice: glommio has no option for the
//!   completion queue, so `--cq-entries` is refused), and its own queue of pending
//!   submissions (4 × depth per ring); and it arms glommio's throughput preemption, a
//!   timer on the main ring that fires after `depth` completions and makes the executor
//!   stop running tasks and poll for I/O. So a larger depth is also fewer preemptions
//!   (at 16,384, effectively none), not only a larger ring. The completion queue of 256
//!   at the default depth is small beside srv-fiber's 32,768: glommio's sockets try the
//!   system call first and wait for readiness with a poll on the ring, one completion per
//!   ready socket, which a worker reaps every pass; whether they overflow at 10,000
//!   connections is for the sweep below to show (the kernel parks overflowed completions
//!   on its list; none are lost on 6.18).
//!   The sweep (issue 61, 2026-12-07, a 2-CPU EPYC VM; server CPU per echo at 20,000
//!   echoes/s, medians of 3 rotated rounds, one worker on CPU 1, loadgen on CPU 0:
//!   `python3 ../shared/tools/eqload.py 3 CONNS SECS 20000 'target/release/srv-glommio
//!   --workers 1 --sq-entries 256' ... '... --sq-entries 16384'`, CONNS 1000 with SECS 4 and
//!   10000 with SECS 5), depth 256 / 1,024 / 4,096 / 16,384: at 1,000 connections 20.4 /
//!   23.6 / 26.2 / 19.7 µs (each with rounds 16-29 µs apart: no order), at 10,000 40.7 /
//!   35.1 / 33.1 / 34.2 µs: there a depth of 256 costs 16-23% more than 1,024 and up (the
//!   preemption timer fires every 256 completions; the default 128 is not in that sweep).
//!   At 10,000 connections its completions did not overflow at the default depth (no
//!   dropped completion, no backlog seen: `cargo xtask bench --suite quick --conns 10000
//!   --points open --repeat 3 --servers glommio,glommio+sq-entries=256+name=glommio-256,
//!   glommio+sq-entries=1024+name=glommio-1024`, 2026-12-07), so the depth stays glommio's
//!   own 128, though that run read 48.4 µs per echo at 128 against 42.5 at 256 (0.88×,
//!   a verdict) and 40.3 at 1,024: a preemption every 128 completions costs.
//! - glommio's own listener and streams, with one difference: the listeners are
//!   `launch::bind_group`'s (the backlog of 4096 every server has, `SO_REUSEPORT` one
//!   per worker, an address in use refused rather than shared), handed to glommio with
//!   `FromRawFd`, glommio's way to take a socket bound elsewhere, in the crate's one
//!   module allowed `unsafe` (`listener.rs`), as srv-may hands may its listener. glommio's
//!   own `bind` listens with a backlog of 1024 and has no way to set it. glommio's
//!   sockets try the system call first and fall back to the ring: an accept tries
//!   `accept(2)` at once (setting `O_NONBLOCK` on the listener around it) and otherwise
//!   submits an accept to the ring; a read tries `recv(2)` and otherwise waits for
//!   readiness with a poll on the ring; a write likewise with `send(2)`. That is
//!   glommio's design for sockets, kept as is.
//! - Streams are read and written through futures-io's `AsyncRead` and `AsyncWrite`,
//!   as glommio's examples do; the loops are `service::stream`'s, shared with
//!   srv-smol, the other futures-io server.
//! - glommio needs io_uring, and memory it may lock (RLIMIT_MEMLOCK of at least
//!   512 KiB; as root, `CAP_IPC_LOCK` covers the registered buffers). If an executor
//!   cannot start, the server exits with status 2 and one line saying so.
//! - Counting: each connection task counts into a `launch::Tally` of its own (and the
//!   accept loop into another), which it hands to the `service::stream` loop as its
//!   `stream::Counts`, as srv-tokio's tasks count: a plain load and store per read and
//!   per write, in a cache line only that task writes, summed once at the stop line.
//!
//! # Echo
//!
//! `service::stream::echo`: a read into a 16 KiB buffer, then `write_all` of what was
//! read (the complete messages with `--compute-us`, which spins in the task, holding
//! the executor: its other connections wait, as on any thread-per-core runtime). A peer
//! that does not read leaves the task in `write_all`: it reads no more (backpressure).
//!
//! # Chat
//!
//! The rooms are one `service::hub::Hub` shared by every executor; a connection's
//! `Subscriber` is a `service::outbox::one_task::Outbox`. One task per connection
//! reads and writes its socket, racing the read against the outbox, as srv-tokio does
//! (`service::stream::chat`, shared with srv-smol; `pool.rs` says why one task is safe
//! on glommio). Fan-out across executors: glommio's channels join one executor to one
//! other, so instead the outbox is woken through glommio's foreign wakers: a task's
//! `Waker` woken on another thread is queued to its own executor, whose ring wakes on
//! an eventfd, so the outbox's runtime-free `service::signal::Signal` serves (`wake.rs`
//! tests it on glommio). The queue's buffer and slow-subscriber rule are
//! `service::outbox::OutQueue`.
//!
//! Hub calls go through `service::offload::HubCalls`: inline with `--fsync never` (a
//! `write(2)` into the page cache, cheaper than a hop to another thread), on the
//! executor's blocking pool (`spawn_blocking`: one thread per executor, placed with it,
//! glommio's default; `pool.rs`) with `--fsync always`. The `fdatasync(2)` itself is
//! made by the hub's group commit (`service::commit`) on a thread of its own, one sync
//! for every append since the last; the task awaits its outcome before it queues the
//! `ACK`, and the executor serves every other connection meanwhile.
//!
//! # Kv and http
//!
//! `service::stream::exchange`: read, answer every request of the read, one
//! `write_all`. The kv store is one for the server, shared by every executor.
#![deny(unsafe_code)] // Only `listener.rs` may use it, and says why.

mod listener;
mod pool;
mod serve;
#[cfg(test)]
mod wake;

use clap::Parser;

/// glommio: an io_uring executor per worker thread, pinned to its CPU, each with its
/// own SO_REUSEPORT listener; a task per connection.
#[derive(Debug, Parser)]
#[command(name = "srv-glommio", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    #[command(flatten)]
    ring: launch::RingArgs,
}

const NAME: &str = "srv-glommio";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common, &cli.ring))
}
