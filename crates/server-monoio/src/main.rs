//! `srv-monoio`: the monoio server, written the way monoio's own examples and
//! benchmark serve sockets: one monoio runtime per worker thread
//! (`RuntimeBuilder::<IoUringDriver>`, started by `launch::workers`, pinned with
//! `--cpus`, worker i to `cpus.for_worker(i)`), each with its own listener on the same
//! address through `SO_REUSEPORT`, so the kernel spreads the connections and each
//! connection lives on one ring for its whole life; a task per connection (two for
//! chat), and owned buffers lent to the ring and given back (`AsyncReadRent`,
//! `AsyncWriteRent`), as monoio's `examples/echo.rs` does.
//!
//! # Choices
//!
//! - **The driver**: `IoUringDriver` alone, not the `FusionDriver` of monoio's
//!   examples (which falls back to epoll where io_uring is missing): this server is
//!   the io_uring one, and where the kernel refuses io_uring it fails before READY.
//!   Features: `iouring`, `sync` (below), `async-cancel` (on by default: dropping an
//!   operation cancels it on the ring), `macros` (`monoio::select!`); not `legacy`
//!   (the epoll driver, unused).
//! - **The listeners**: monoio's own `TcpListener::bind` sets `SO_REUSEPORT` by default
//!   (its `ListenerOpts`), which is how its examples get a listener per thread. This
//!   server takes the group from `launch::bind_group` instead and hands each to
//!   `TcpListener::from_std`, a public monoio call: the same thing, with the backlog
//!   of 4096 every server has (monoio's default is 1024) and an address already in use
//!   refused rather than shared.
//! - **Accepting**: one `accept` on the ring at a time, in the runtime's main future, as
//!   monoio's examples and monoio-benchmark accept. monoio runs every ready task before
//!   it reaps completions again, and polls the main future once per such pass, so a
//!   worker admits one new connection per pass of its event loop. Under load from the
//!   connections it already serves a pass takes milliseconds (a thousand echoes), and a
//!   burst of new connections waits in the listen backlog meanwhile: at 1,000
//!   closed-loop connections on one worker, tens to hundreds of the last to connect wait
//!   past 250 ms for their first echo (the backlog drained by about one connection each
//!   15 ms on a loaded host), which loadgen counts as `stalled` (issue 44's "370
//!   errors", all stalls of the warm-up: the server saw no error and lost no byte).
//!   compio's executor, which runs at most 61 tasks between polls of its ring, showed no
//!   such stall in the same runs. It is monoio's design, kept as is.
//! - **The ring**: the submission ring at monoio's own default, `with_entries(1024)`
//!   (`--sq-entries N` changes it; monoio raises anything under 256 to 256). monoio
//!   submits only when it parks or its submission ring is full, so the ring's size caps
//!   its batch: at 1,000 connections a worker, about 1,000 submissions a pass fit in
//!   1,024, and a larger ring only walks more memory. The completion ring is 32,768
//!   entries (`launch::CQ_ENTRIES`, srv-fiber's; `--cq-entries N`), given through monoio's
//!   own `RuntimeBuilder::uring_builder` with io-uring's `setup_cqsize` (monoio has no
//!   option of its own for it), so that the completions of 10,000 connections a worker do
//!   not overflow, where the kernel's default of twice 1,024 would.
//!   monoio-benchmark asks for `with_entries(32768)`. The timer is enabled for the
//!   accept back-off of `launch::accept_failed`.
//!   The sweep (issue 61, 2026-12-07, a 2-CPU EPYC VM; server CPU per echo at 20,000
//!   echoes/s, medians of 3 rotated rounds, one worker on CPU 1, loadgen on CPU 0:
//!   `python3 ../shared/tools/eqload.py 3 CONNS SECS 20000 'target/release/srv-monoio
//!   --workers 1 --sq-entries 256' ... '... --sq-entries 16384'`, CONNS 1000 with SECS 4 and
//!   10000 with SECS 5), submission entries 256 / 1,024 / 4,096 / 16,384: at 1,000
//!   connections 16.2 / 15.7 / 15.5 / 15.1 µs, at 10,000 18.4 / 18.4 / 18.3 / 18.2 µs. The
//!   size moves the cost by at most 7%, within the rounds' spread (15.0-16.3 µs at 1,000),
//!   so monoio keeps its own 1,024.
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
//! can fill. A wake-up from another thread needs monoio's `sync` feature (without it a
//! waker may only be woken on its own thread); with it, a remote wake goes to the
//! worker's queue and rings its eventfd. monoio has no cross-thread `Notify` (its
//! `local-sync` channels are for one thread), so the outbox's tasks, and each worker
//! for the stop, wait on `service::signal::Signal`, a permit and a std `Waker` behind
//! a mutex, free of any runtime. A reader task and a writer task share the socket
//! through monoio's `into_split`; `chat.rs` says why two, and how a cut stops the read
//! (the writer shuts the socket down, as srv-tokio-uring's does, rather than pay
//! monoio's `Canceller` a registration per read). The outbox, its slow-subscriber rule
//! (`service::outbox::OutQueue`) and the hub calls (`service::offload::HubCalls`) are
//! the same as srv-compio's and srv-tokio-uring's.
//!
//! Hub calls do blocking file I/O (`write(2)` of a small record for a `SAY`,
//! `pread(2)` for replay; the hub owns those files, so they cannot go through the
//! ring). As in srv-tokio-uring, they run inline with `--fsync never` (microseconds
//! into the page cache, cheaper than a hop to another thread) and with `--fsync
//! always` on the blocking pool, which is what monoio's docs prescribe for blocking
//! work: `monoio::spawn_blocking` on a `DefaultThreadPool` attached to every worker's
//! runtime (without one, monoio panics or runs the call on the worker). The pool is
//! one, of a fixed size (monoio's pool does not grow), shared by the workers, and made
//! only for `--fsync always`. The `fdatasync(2)` itself is made by the hub's group
//! commit (`service::commit`) on a thread of its own, one sync for every append since
//! the last; the task awaits its outcome before it sends the `ACK`, and the ring
//! serves every other connection meanwhile.
//!
//! It has no unsafe code of its own: every operation and buffer hand-over is monoio's.
#![forbid(unsafe_code)]

mod chat;
mod echo;
mod exchange;
mod serve;

use clap::Parser;

/// One monoio runtime (io_uring) per worker thread, each with its own SO_REUSEPORT
/// listener; a task per connection.
#[derive(Debug, Parser)]
#[command(name = "srv-monoio", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,

    #[command(flatten)]
    ring: launch::RingArgs,
}

const NAME: &str = "srv-monoio";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common, &cli.ring))
}
