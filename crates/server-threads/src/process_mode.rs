//! `--mode process`: a forked process per connection, as the C chat server of
//! the C-versus-Go paper (its Figure 2). Processes share no memory, so chat rooms
//! are shared through the room files themselves (docs/room-log.md):
//!
//! ```text
//!  parent: accept, fork, reap         one process group per connection
//!  ─────────────────────────          ─────────────────────────────────────────────
//!  listener ──accept──► fork ──────►  RECV: reads the client's lines, appends SAYs
//!                                       │   to DIR/<room>.log under flock(LOCK_EX)
//!                                       │ frames through a pipe (replies, JOIN/LEAVE,
//!                                       ▼   "appending", "own seq")
//!                                     SEND: the only writer to the socket: replies,
//!                                           replay, and new records of joined rooms,
//!                                           noticed with inotify, read under LOCK_SH
//! ```
//!
//! What a line means is `service::file_session`'s to decide (RECV only carries out
//! its steps), so this mode answers byte for byte as the servers with a hub do.
//!
//! Echo and http need no shared state: the child of either is one process running the
//! same blocking loop as thread mode (`service::echo::serve_blocking`,
//! `service::http::serve_blocking`). Kv is refused: each process would hold a store of
//! its own.
//!
//! SEND skips the connection's own messages (the protocol sends `MSG` to every
//! *other* subscriber). RECV announces an append before it takes the lock and
//! reports its seq after, and SEND reads the pipe before it looks at inotify
//! events and holds back a room while an append is announced but unreported, so
//! it always knows a record is its own before it could send it.

mod frames;
mod recv;
mod send;

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use launch::{CommonArgs, Count, Counters, Proto, Shutdown, Tally};
use service::counters::Block;
use service::echo::{EchoConfig, buffered, serve_blocking};
use service::http;
use service::log::{Fsync, recover_dir};

use crate::NAME;
use crate::accept::{AfterSignal, accept_until_stop};
use crate::fork::{Forked, SharedBlocks, fork_single_threaded};

const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGCHLD];

/// How long the parent waits for its children after asking them to stop.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What a connection's child needs to know.
struct ChildConfig {
    proto: Proto,
    echo: EchoConfig,
    data: PathBuf,
    fsync: Fsync,
    /// Chat: the slow-subscriber cut; http: the limit of pending output.
    max_pending: usize,
    /// Descriptors of the parent's that a child closes first thing.
    parent_fds: [RawFd; 2],
}

pub(crate) fn serve(args: &CommonArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.proto != Proto::Kv,
        "--proto kv needs --mode thread: forked processes share no memory, so each \
         would hold a key-value store of its own"
    );
    let shutdown = Shutdown::for_signals(&SIGNALS)?;
    if let Some(cpus) = &args.cpus {
        launch::cpus::pin_current_thread_to(cpus)?;
    }
    // Rooms are recovered (torn tails cut, corruption refused) here, while this
    // is the only process touching the files.
    let temp;
    let data = match (&args.data, args.proto) {
        (_, Proto::Echo | Proto::Kv | Proto::Http) => PathBuf::new(),
        (Some(dir), Proto::Chat) => dir.clone(),
        (None, Proto::Chat) => {
            temp = tempfile::Builder::new()
                .prefix("srv-threads-rooms-")
                .tempdir()
                .context("creating a temporary --data directory")?;
            temp.path().to_owned()
        }
    };
    if args.proto == Proto::Chat {
        std::fs::create_dir_all(&data)
            .with_context(|| format!("creating --data {}", data.display()))?;
        recover_dir(&data, args.fsync.into()).context("recovering the room logs")?;
    }
    let listener = launch::bind(args.addr)?;
    launch::announce_ready(listener.local_addr()?)?;

    let config = ChildConfig {
        proto: args.proto,
        echo: args.echo(),
        data,
        fsync: args.fsync.into(),
        max_pending: match args.proto {
            Proto::Http => args.kv_max_pending(),
            _ => args.max_pending,
        },
        parent_fds: [listener.as_raw_fd(), shutdown_fd(&shutdown)],
    };
    let counters = Counters::default();
    let mut tally = counters.tally();
    // Both callbacks below need these; they never run at the same time.
    let children = RefCell::new(Children::default());
    accept_until_stop(
        &listener,
        &shutdown,
        |stream| match children.borrow_mut().fork() {
            Ok(Some(blocks)) => child_main(stream, &config, blocks),
            Ok(None) => tally.add(Count::Accepted, 1),
            // `stream` drops here: the parent keeps no connection open.
            Err(e) => {
                eprintln!("{NAME}: cannot fork for a connection: {e:#}; closing it");
                tally.add(Count::Errors, 1);
            }
        },
        |sig| match sig {
            Signal::SIGCHLD => {
                children.borrow_mut().reap();
                AfterSignal::Continue
            }
            _ => AfterSignal::Stop,
        },
    )?;
    let mut children = children.into_inner();
    stop_children(&mut children, &shutdown);
    if args.proto == Proto::Chat {
        sync_rooms(&config.data);
    }
    for counted in children.blocks.sum() {
        counters.absorb(&counted);
    }
    drop(tally);
    counters.report(NAME);
    Ok(())
}

/// The blocks a connection's processes count into: the one process of echo and
/// http (chat's RECV), and chat's SEND (echo and http leave it be).
#[derive(Debug, Clone, Copy)]
struct ConnBlocks {
    main: &'static Block,
    send: &'static Block,
}

/// The connections' processes, and the shared blocks they count into.
#[derive(Debug, Default)]
struct Children {
    live: HashMap<Pid, ConnBlocks>,
    blocks: SharedBlocks,
}

impl Children {
    /// Forks a connection's process: its blocks in the child, `None` in the parent.
    fn fork(&mut self) -> anyhow::Result<Option<ConnBlocks>> {
        let blocks = ConnBlocks {
            main: self.blocks.take()?,
            send: self.blocks.take()?,
        };
        match fork_single_threaded() {
            Ok(Forked::Child) => Ok(Some(blocks)),
            Ok(Forked::Parent(pid)) => {
                self.live.insert(pid, blocks);
                Ok(None)
            }
            Err(e) => {
                self.give_back(blocks);
                Err(e)
            }
        }
    }

    fn give_back(&mut self, blocks: ConnBlocks) {
        self.blocks.give_back(blocks.main);
        self.blocks.give_back(blocks.send);
    }

    /// Reaps every child that has exited, without waiting. RECV reaps its SEND before
    /// it exits, so both blocks are free again.
    fn reap(&mut self) {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) => {
                    if let Some(blocks) = status.pid().and_then(|pid| self.live.remove(&pid)) {
                        self.give_back(blocks);
                    }
                }
            }
        }
    }
}

fn shutdown_fd(shutdown: &Shutdown) -> RawFd {
    use std::os::fd::AsFd;
    shutdown.as_fd().as_raw_fd()
}

/// Asks every connection's process group to stop, waits a little, then kills
/// what is left, and reaps them all: no zombies.
fn stop_children(children: &mut Children, shutdown: &Shutdown) {
    for &pid in children.live.keys() {
        // Each child leads its own group (RECV and SEND for chat).
        let _ = killpg(pid, Signal::SIGTERM);
    }
    let deadline = Instant::now() + STOP_GRACE;
    while !children.live.is_empty() && Instant::now() < deadline {
        children.reap();
        let mut fds = [PollFd::new(
            std::os::fd::AsFd::as_fd(shutdown),
            PollFlags::POLLIN,
        )];
        let _ = poll(&mut fds, PollTimeout::from(50u16));
        while shutdown.take().is_some() {}
    }
    for &pid in children.live.keys() {
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = kill(pid, Signal::SIGKILL);
        let _ = waitpid(pid, None);
    }
    children.live.clear();
}

/// fdatasync every room file: the clean stop flushes the chat logs.
fn sync_rooms(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log")
            && let Err(e) = std::fs::File::open(&path).and_then(|f| f.sync_data())
        {
            eprintln!("{NAME}: cannot sync {}: {e}", path.display());
        }
    }
}

/// A connection's process. Never returns.
fn child_main(stream: TcpStream, config: &ChildConfig, blocks: ConnBlocks) -> ! {
    for fd in config.parent_fds {
        // The parent's descriptors are owned by objects this process will never
        // drop (it leaves through `exit`), so closing them here is the only close.
        let _ = nix::unistd::close(fd);
    }
    let setup = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0))
        .context("starting a process group")
        .and_then(|()| Shutdown::unblock_in_child(&SIGNALS));
    if let Err(e) = setup {
        eprintln!("{NAME}: connection process: {e:#}");
        std::process::exit(1);
    }
    let tally = &mut Tally::over(blocks.main);
    let result = match config.proto {
        Proto::Echo => {
            serve_blocking(buffered(&stream), &stream, &config.echo, tally).map_err(Into::into)
        }
        Proto::Chat => recv::serve(stream, config, tally, blocks.send),
        Proto::Http => http::serve_blocking(buffered(&stream), &stream, config.max_pending, tally)
            .map_err(Into::into),
        // `serve` refuses kv before it forks.
        Proto::Kv => Err(anyhow::anyhow!("--proto kv is not served in process mode")),
    };
    if let Err(e) = result {
        if !is_disconnect(&e) {
            eprintln!("{NAME}: connection process: {e:#}");
        }
        tally.add(Count::Errors, 1);
    }
    tally.add(Count::Closed, 1);
    std::process::exit(0)
}

/// A client that went away is not worth a line on stderr.
fn is_disconnect(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::*;
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted))
}
