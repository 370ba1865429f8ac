//! `srv-compio`: the compio server, written the way compio's own examples serve
//! sockets (`compio::net::TcpListener`, a task per connection with
//! `compio::runtime::spawn`, owned buffers through `compio::io::{AsyncRead,
//! AsyncWriteExt}`), with one compio runtime per worker thread (started by
//! `launch::workers`, pinned with `--cpus`, worker i to `cpus.for_worker(i)`), each with
//! its own listener on the same address through `SO_REUSEPORT`, so the kernel spreads
//! the connections and each connection lives on one ring for its whole life. compio's
//! runtime is a thread's own, as monoio's and tokio-uring's are; a server on several
//! cores runs one per thread. (compio also ships a dispatcher, one accepting thread that
//! hands connections to worker runtimes; the listener per worker is chosen instead, so
//! that no connection crosses threads and the kernel spreads them as it does for
//! srv-monoio and srv-tokio-uring.)
//!
//! # Choices
//!
//! - **The runtime**: compio 0.19, the current stable release (0.20 is a beta), with the
//!   features `runtime` and `net`, plus `time` (the accept back-off of
//!   `launch::accept_failed`) and `fs` (search-compio); its default driver is io_uring,
//!   and where the kernel refuses io_uring the start fails before READY. The runtime is
//!   compio's defaults (its queues and event interval), as its examples use it, but for
//!   the completion ring: the submission ring at compio's own default,
//!   `ProactorBuilder::capacity(1024)` (`--sq-entries N` changes it; compio submits on
//!   its own cadence, every 61 tasks run or when it parks), and a completion ring of
//!   32,768 entries through compio's own `ProactorBuilder::cqsize` (`launch::CQ_ENTRIES`,
//!   srv-fiber's; `--cq-entries N`), where the kernel's default of twice 1,024 can
//!   overflow under the completions of 3,000 to 10,000 connections a worker.
//!   The sweep (issue 61, 2026-12-07, a 2-CPU EPYC VM; server CPU per echo at 20,000
//!   echoes/s, medians of 3 rotated rounds, one worker on CPU 1, loadgen on CPU 0:
//!   `python3 ../shared/tools/eqload.py 3 CONNS SECS 20000 'target/release/srv-compio
//!   --workers 1 --sq-entries 256' ... '... --sq-entries 16384'`, CONNS 1000 with SECS 4 and
//!   10000 with SECS 5), submission entries 256 / 1,024 / 4,096 / 16,384: at 1,000
//!   connections 14.8 / 15.9 / 14.8 / 16.3 µs, at 10,000 19.2 / 18.8 / 18.2 / 18.4 µs: no
//!   order beyond the rounds' spread, so compio keeps its own 1,024.
//! - **`--tuned`** (the bench's `compio-tuned`, issue 61): the knobs srv-fiber tunes its
//!   own rings with, as compio offers them: `ProactorBuilder::coop_taskrun` and
//!   `taskrun_flag` (documented there as "optimize performance for most cases, especially
//!   compio is a single thread runtime"), `single_issuer` and `defer_taskrun` (the kernel
//!   runs completion work only when the worker enters it), and, for echo without
//!   `--compute-us`, reads through compio's buffer pool (`AsyncReadManaged::read_managed`,
//!   a recv that picks a buffer from a ring of 512 provided buffers of 4 KiB per worker, so
//!   an idle connection holds none, as srv-fiber's multishot receive). compio 0.19's
//!   `read_multi` (multishot) is not used: its stream ends the multishot at the first
//!   buffer not yet returned, and a connection writes each buffer before it reads again.
//!   When the pool is empty (every buffer waits on a write to a slow peer), the read falls
//!   back to a plain read into a buffer of the connection's own. Kv, http and chat read as
//!   untuned compio does.
//! - **The listeners**: compio's `TcpListener::bind` listens with a backlog of 128 and
//!   no `SO_REUSEPORT`, so each worker's listener comes from `launch::bind_group` (the
//!   4096 of every server, `SO_REUSEPORT` one per worker) and is handed to
//!   `TcpListener::from_std`, a public compio call.
//! - **Tasks**: `compio::runtime::spawn` returns a handle that cancels its task when
//!   dropped; the connection tasks are detached, as compio's examples do.
//! - **Counting**: each connection task counts into a `launch::Tally` of its own (and
//!   the accept loop into another), handed down to its loop, as srv-tokio's and
//!   srv-tokio-uring's tasks do: a plain load and store per read and per write, in a cache
//!   line only that task writes, summed once at the stop line.
//!
//! # Echo, kv and http
//!
//! Echo keeps one buffer of 16 KiB (plus room for a held partial message), allocated
//! when the connection starts; `read` takes a view of it by value and gives it back,
//! `write_all` likewise, so no message allocates. `--compute-us` spins inside the
//! task, holding the worker as a real handler would. Kv and http keep a read buffer
//! and a reply buffer per connection, one write per read batch (`src/exchange.rs`).
//!
//! # Chat
//!
//! The rooms are one `service::hub::Hub` shared by every runtime; a connection's
//! `Subscriber` is a `service::outbox::two_task::Outbox`, which another worker's `SAY`
//! can fill. compio's wakers may be woken from any thread (a remote wake goes to the
//! runtime's queue and wakes its driver), but it has no cross-thread `Notify` (its
//! `synchrony` events are single-threaded), so the outbox's tasks, and each worker for
//! the stop, wait on `service::signal::Signal`, as srv-monoio's do. A reader task and a
//! writer task share the socket (compio's `into_split`); `chat.rs` says why two, and how
//! a cut stops the read: the writer shuts the socket down, as srv-tokio-uring's does.
//! compio's `CancelToken` would keep a registration (and the operation's allocation) for
//! every read submitted under it until the token is cancelled, and in this build it
//! reaches no read at all (`chat.rs` shows why). compio ships no `select!`; the two
//! races it needs are `service::race::first`. The outbox, its slow-subscriber rule
//! (`service::outbox::OutQueue`) and the hub calls (`service::offload::HubCalls`) are
//! the same as srv-monoio's and srv-tokio-uring's.
//!
//! Hub calls do blocking file I/O (`write(2)` of a small record for a `SAY`, `pread(2)`
//! for replay; the hub owns those files, so they cannot go through the ring). As in
//! srv-tokio-uring, they run inline with `--fsync never` (microseconds into the page
//! cache, cheaper than a hop to another thread) and with `--fsync always` on compio's
//! own blocking pool, `compio::runtime::spawn_blocking` (each driver's thread pool, up
//! to 256 threads started on demand, compio's default). The `fdatasync(2)` itself is
//! made by the hub's group commit (`service::commit`) on a thread of its own, one sync
//! for every append since the last; the task awaits its outcome before it sends the
//! `ACK`, and the ring serves every other connection meanwhile.
//!
//! It has no unsafe code of its own: every operation and buffer hand-over is compio's.
#![forbid(unsafe_code)]

mod chat;
mod echo;
mod exchange;
mod serve;

use clap::Parser;

/// One compio runtime (io_uring) per worker thread, each with its own SO_REUSEPORT
/// listener; a task per connection.
#[derive(Debug, Parser)]
#[command(name = "srv-compio", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    #[command(flatten)]
    ring: launch::RingArgs,

    /// Tune the rings as srv-fiber's are, with compio's own options: COOP_TASKRUN and
    /// TASKRUN_FLAG ("optimize performance for most cases"), SINGLE_ISSUER and
    /// DEFER_TASKRUN, and echo reads into compio's buffer pool (a provided-buffer ring of
    /// 512 buffers of 4 KiB per worker, `read_managed`) instead of each connection's own
    /// buffer. The bench's `compio-tuned`.
    #[arg(long)]
    tuned: bool,
}

const NAME: &str = "srv-compio";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common, &cli.ring, cli.tuned))
}
