//! `srv-tokio-uring`: the tokio-uring server, written the way that crate is
//! meant to be used: one `tokio_uring` runtime per worker thread (started by
//! `launch::workers`, pinned with `--cpus`, worker i to `cpus.for_worker(i)`), each with its own listener on the
//! same address through `SO_REUSEPORT`, so the kernel spreads the connections and
//! each connection lives on one ring for its whole life. A task per connection
//! (two for chat), owned buffers handed to the ring and back (kv and http, `src/exchange.rs`: a
//! read buffer and a reply buffer per connection, one write per read batch).
//!
//! Each ring keeps tokio-uring's own submission size, `tokio_uring::builder().entries(256)`
//! (`--sq-entries N` changes it; tokio-uring submits on its own cadence, when its driver
//! is polled or its ring is full), and gets a completion ring of 32,768 entries through
//! tokio-uring's own `uring_builder(tokio_uring::uring_builder().setup_cqsize(..))`
//! (`launch::CQ_ENTRIES`, srv-fiber's; `--cq-entries N`), where the kernel's default of
//! twice 256 would overflow under the completions of thousands of connections a worker.
//! The sweep (issue 61, 2026-12-07, a 2-CPU EPYC VM; server CPU per echo at 20,000
//! echoes/s, medians of 3 rotated rounds, one worker on CPU 1, loadgen on CPU 0:
//! `python3 ../shared/tools/eqload.py 3 CONNS SECS 20000 'target/release/srv-tokio-uring
//! --workers 1 --sq-entries 256' ... '... --sq-entries 16384'`, CONNS 1000 with SECS 4 and
//! 10000 with SECS 5), submission entries 256 / 1,024 / 4,096 / 16,384: at 1,000
//! connections 18.8 / 18.6 / 18.3 / 18.3 µs, at 10,000 20.7 / 20.6 / 21.2 / 21.0 µs: within
//! 3%, so tokio-uring keeps its own 256.
//!
//! tokio-uring 0.5 brings its own io-uring 0.6 (and socket2 0.4), while the
//! fiber runtime of this workspace uses io-uring 0.7: two versions of the
//! binding in one build, which is fine since neither crate exposes the other's
//! types and this crate only uses tokio-uring's API. It has no unsafe code of its
//! own: every operation and buffer hand-over is tokio-uring's.
//!
//! # Echo
//!
//! One buffer of 16 KiB (plus room for a held partial message), allocated when
//! the connection starts: `read` takes it by value and gives it back, `write_all`
//! takes a view of its first bytes and gives it back, so no message allocates.
//! `--compute-us` spins inside the task, holding the worker as a real handler
//! would; a tokio-uring runtime has one thread, so its other connections wait.
//!
//! # Chat
//!
//! The rooms are one `service::hub::Hub` shared by every runtime; a connection's
//! `Subscriber` is its [`outbox::Outbox`], which another worker's `SAY` can fill
//! and wake through `tokio::sync::Notify` (Tokio's wakers cross threads; the
//! worker wakes from its epoll wait, where the ring's own fd is registered too). A reader
//! task and a writer task share the socket; `chat.rs` says why two. The outbox is
//! `service::outbox::two_task`, shared with srv-monoio and srv-compio (`outbox.rs`
//! only wakes it with Tokio's `Notify`); its buffer and slow-subscriber rule are
//! `service::outbox::OutQueue`, and the hub calls go through
//! `service::offload::HubCalls`, both shared with srv-tokio.
//!
//! Hub calls do blocking file I/O (`write(2)` of a small record for a `SAY`,
//! `pread(2)` for replay; the hub owns those files, so they cannot go through
//! the ring). As in srv-tokio, they run inline with `--fsync never` (microseconds
//! into the page cache, cheaper than a hop to another thread) and on the
//! runtime's blocking pool with `--fsync always`. The `fdatasync(2)` itself is
//! made by the hub's group commit (`service::commit`) on a thread of its own,
//! one sync for every append since the last; the task awaits its outcome before
//! it sends the `ACK`, and the ring serves every other connection meanwhile
//! (srv-tokio's `examples/hub_offload.rs` measures both: about 1.5 µs
//! inline against 11 to 25 µs offloaded without fsync, 0.5 to 1.8 ms with it). tokio-uring offers no thread-start hook, so with `--cpus` those
//! blocking-pool threads inherit the CPU of the worker that started them.
#![forbid(unsafe_code)]

mod chat;
mod echo;
mod exchange;
mod outbox;
mod serve;

use clap::Parser;

/// One tokio-uring runtime per worker thread, each with its own SO_REUSEPORT
/// listener; a task per connection.
#[derive(Debug, Parser)]
#[command(name = "srv-tokio-uring", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    #[command(flatten)]
    ring: launch::RingArgs,
}

const NAME: &str = "srv-tokio-uring";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common, &cli.ring))
}
