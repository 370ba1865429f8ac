//! `srv-may`: echo, chat, kv and http on may's stackful coroutines, a coroutine per
//! connection on `--workers` scheduler threads. The connection code is the blocking-style
//! code srv-threads runs on OS threads and srv-fiber on its fibers
//! (`service::echo::serve_blocking`, `service::blocking`, `service::exchange`): one
//! handler, three runtimes.
//!
//! Written as may's own examples serve a socket (its README's echo server and
//! `examples/echo.rs`): a coroutine accepts on `may::net::TcpListener` and `go!`s a
//! coroutine per connection, which reads and writes `may::net::TcpStream` in blocking
//! style while may parks it on its worker's epoll. The choices, and why:
//!
//! - **Workers**: `may::config().set_workers(--workers)`, may's work-stealing
//!   scheduler (its default features), before anything starts the scheduler.
//! - **Pinning**: may pins its workers by itself (`set_worker_pin`, on by default):
//!   worker *i* to the *i*-th CPU, in ascending order, of the mask of the thread that
//!   starts its scheduler, cycling when there are more workers. It takes no list, so with
//!   `--cpus` the main thread pins itself to the list before may starts: worker *i* then
//!   runs on the list's *i*-th CPU (ascending; the list's own order is not kept), one
//!   per CPU as every server's `--cpus` asks, and may's timer thread within the list.
//! - **Stacks**: 64 KiB a coroutine, srv-fiber's default (may's is 32 KiB), see
//!   `coroutines`.
//! - **Listener**: bound by `launch::bind` (the backlog every server has) and handed to
//!   may; may's own `bind` would listen with a backlog of 1024.
//! - **Echo, kv, http**: one coroutine reads and writes the one socket in turn, as may's
//!   echo example does (no second descriptor). **Chat**: a reader coroutine and a
//!   writer coroutine over the two halves of may's `SplitIo::split` (may's API for
//!   giving a socket's two directions to two coroutines: two handles, each registered
//!   with the event loop for its direction only, so a write's readiness does not wake
//!   the reader nor a read's the writer, where two `try_clone`s would each be woken for
//!   both), joined by the connection's `service::blocking::Outbox`, which waits through
//!   may's `Mutex` and `Condvar` (`wakeup`), so a waiting reader or writer parks its
//!   coroutine. A `SAY` under `--fsync always` parks the same way until the group
//!   commit's thread (`service::commit`) has synced it.
//!   A slow subscriber's cut shuts the socket down through the reader's own descriptor
//!   (withdrawn under a lock before the reader closes it), not a third descriptor of its
//!   own: the split's one `dup` and its `epoll_ctl`s are all a connection pays.
//! - **Stop**: SIGINT or SIGTERM cancels the accept coroutine (may's cancellation, at
//!   its blocking `accept`), flushes the rooms and prints the counters; connections still
//!   open end with the process, as srv-threads' threads do.
//!
//! may marks spawning `unsafe`; all of it is in the library's `coroutines.rs`, with the
//! contract it keeps.
#![forbid(unsafe_code)] // may's unsafe API is fenced in the library's `coroutines`.

mod serve;
mod wakeup;

use clap::Parser;

/// A coroutine per connection on may's scheduler threads, in blocking style.
#[derive(Debug, Parser)]
#[command(name = "srv-may", version, about)]
struct Cli {
    #[command(flatten)]
    common: launch::CommonArgs,
}

const NAME: &str = "srv-may";

fn main() {
    launch::run::<Cli>(NAME, |cli| serve::serve(&cli.common))
}
