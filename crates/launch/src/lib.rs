//! What every ringside server binary shares, so that the servers differ only in
//! their runtime: the common command line of docs/DESIGN.md ([`CommonArgs`]), CPU
//! pinning ([`cpus`]), the `READY <addr>` line ([`announce_ready`]), clean stop on
//! SIGINT and SIGTERM ([`Shutdown`]), the counters line printed at exit
//! ([`Counters`]), one-line errors with exit status 2 ([`run`]), and the listening
//! sockets with their backlog ([`bind`], [`bind_group`]), and the rooms of `--proto
//! chat` from start to clean stop ([`open_rooms`], [`finish`]), what a server
//! serves as one value its connections share ([`Service`]), and the group of
//! pinned worker threads that must all be up before READY ([`workers`]), and the
//! ring sizes of the io_uring peers, `--sq-entries` and `--cq-entries` ([`RingArgs`]).
//!
//! It is not a runtime: it accepts nothing, and the only threads it starts are
//! the workers a server asks [`workers::Workers`] for.
//!
//! ```no_run
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     common: launch::CommonArgs,
//! }
//!
//! fn main() {
//!     launch::run::<Cli>("srv-example", |cli| {
//!         let shutdown = launch::Shutdown::install()?;
//!         let listener = launch::bind(cli.common.addr)?;
//!         launch::announce_ready(listener.local_addr()?)?;
//!         shutdown.wait();
//!         Ok(())
//!     })
//! }
//! ```
#![forbid(unsafe_code)]

mod app;
mod cli;
mod listen;
mod ring;

pub mod cpus;
mod signals;
pub mod workers;

use std::io::Write;
use std::net::SocketAddr;

use anyhow::Context;

pub use app::{App, Conn, Exchanges, Kv, Service, closed};
pub use cli::{CommonArgs, FsyncMode, Proto};
pub use cpus::CpuList;
pub use listen::{
    ACCEPT_BACKOFF, BACKLOG, accept_failed, accepted, bind, bind_group, bind_per_worker,
};
pub use ring::{CQ_ENTRIES, RingArgs};
pub use service::counters::{Count, Counters, Snapshot, Tally};
pub use signals::Shutdown;

/// Parses the command line as `C`, raises the open-file limit, and runs `serve`.
///
/// A bad command line or an error from `serve` is printed as one line,
/// `<name>: error: <what went wrong>`, and the process exits with status 2.
/// `--help` and `--version` print and exit 0.
pub fn run<C: clap::Parser>(name: &str, serve: impl FnOnce(C) -> anyhow::Result<()>) -> ! {
    let cli = match C::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            std::process::exit(0);
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("{name}: error: {first} (try --help)");
            std::process::exit(2);
        }
    };
    if let Err(e) = raise_fd_limit() {
        eprintln!("{name}: warning: could not raise the open-file limit: {e}");
    }
    match serve(cli) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            std::process::exit(2);
        }
    }
}

/// The rooms of `--proto chat`, recovered from `--data` (a temporary directory when it
/// is not given), with `--fsync`; `None` for `--proto echo`, `kv` and `http`.
pub fn open_rooms<S: service::hub::Subscriber>(
    args: &CommonArgs,
) -> anyhow::Result<Option<service::hub::Hub<S>>> {
    match args.proto {
        Proto::Echo | Proto::Kv | Proto::Http => Ok(None),
        Proto::Chat => service::hub::Hub::open(args.data.as_deref(), args.fsync.into())
            .map(Some)
            .context("opening the room logs"),
    }
}

/// The last step of a clean stop, once no connection runs: flushes the rooms, adds the
/// messages they took to `counters`, and prints the counters line as `name`.
pub fn finish<S: service::hub::Subscriber>(
    name: &str,
    rooms: Option<&service::hub::Hub<S>>,
    counters: &Counters,
) -> anyhow::Result<()> {
    if let Some(hub) = rooms {
        hub.sync_all().context("flushing the room logs")?;
        counters.absorb(&Snapshot {
            messages: hub.stats().messages,
            ..Snapshot::default()
        });
    }
    counters.report(name);
    Ok(())
}

/// Prints exactly `READY <addr>` on stdout and flushes: the harness and the
/// load generator wait for this line before they connect.
pub fn announce_ready(addr: SocketAddr) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY {addr}")
        .and_then(|()| out.flush())
        .context("writing the READY line to stdout")
}

/// Raises the soft RLIMIT_NOFILE to the hard limit: a server with 10,000
/// connections needs more than the usual 1024 descriptors.
pub fn raise_fd_limit() -> nix::Result<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(hard)
}
