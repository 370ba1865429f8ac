//! The server: runtime options, the accept loop, and the connection handlers (kv's in
//! `kv.rs`).
//!
//! Echo is [`serve_blocking`] over a fiber `TcpStream`, http
//! [`service::http::serve_blocking`]; chat is a reader fiber running
//! [`read_commands`] and a writer fiber draining the connection's [`Outbox`], the same
//! code srv-threads runs with two OS threads. The runtime is a plug-in here: how a
//! fiber waits ([`FiberWakeup`]), how a cut connection is shut down, and who spawns.
//!
//! Each worker accepts on a listener of its own (SO_REUSEPORT) and keeps every
//! connection it accepts: fibers are pinned to their worker by default, so the kernel's
//! spread of connections over the listeners is the load balance, as in srv-reactor and
//! srv-tokio-uring. With `--scheduler stealing` there is one listener and one accepting
//! fiber, and idle workers steal connection fibers from it. Accepting is always
//! multishot where the kernel has it (5.19): one SQE accepts every connection, and the
//! accepting fiber takes all that are queued each time it runs. A plain accept takes
//! one per turn of the run queue, and on a worker saturated by many runnable fibers
//! (10,000 connections with 200 µs of work per echo) a turn takes seconds: srv-fiber
//! then accepted only 9,451 to 9,802 of 10,000 connections in a 10 s point.

use std::io;
use std::net::Shutdown as How;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use fiber::net::{TcpListener, TcpStream};
use launch::{CommonArgs, Count, Counters, Proto, Shutdown, Tally};
use service::blocking::{Outbox, read_commands};
use service::echo::{EchoConfig, serve_blocking};
use service::hub::Hub;

use crate::NAME;
use crate::kv::{Kv, KvArgs};
use crate::wakeup::FiberWakeup;

/// A chat connection's outbox, for connections that are fibers.
type FiberOutbox = Outbox<FiberWakeup>;

/// How long a stop waits for the runtime to wind down (cancelled I/O, torn-down
/// fibers) before it reports and exits anyway: a fiber spinning in --compute-us does
/// not park, and so holds its worker until its message is done.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The fiber runtime's options, passed straight to `fiber::Builder`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RuntimeArgs {
    /// How fibers are placed on workers. `pinned` (the default): every fiber stays on the
    /// worker it starts on, each worker accepts on its own SO_REUSEPORT listener, and
    /// nothing a fiber holds ever changes threads. `stealing`: one listener, and idle
    /// workers steal runnable fibers from busy ones (the EMPER paper's design).
    #[arg(long, value_enum, default_value_t = Scheduler::Pinned)]
    scheduler: Scheduler,

    /// Run the Completer thread of the EMPER paper (its Figure 4): it reaps the
    /// completions of busy workers' rings, woken by an eventfd registered on each.
    #[arg(long)]
    completer: bool,

    /// Let a worker with nothing to run reap the completions of other workers' rings
    /// before it sleeps (I/O stealing).
    #[arg(long)]
    io_stealing: bool,

    /// Read with a plain recv per read into a buffer of the operation's own, instead of
    /// the default multishot recv over the worker's ring of provided buffers (which an
    /// idle connection does not occupy). Accept is multishot either way.
    #[arg(long)]
    plain_recv: bool,

    /// Register each connection's socket in its worker's table of fixed files, so that
    /// the worker's SQEs name it by slot and the kernel skips a descriptor lookup per
    /// operation (true or false). On by default: it takes `fget`/`fput` (1% of srv-fiber's
    /// CPU at 20,000 echoes/s) out of every send, for one registration per connection.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    fixed_files: bool,

    /// Usable bytes of each fiber's stack (a guard page is added). Suffixes K and M
    /// multiply by 1024 and 1024²; 16K at least.
    #[arg(long, default_value = "64K", value_parser = parse_size, value_name = "BYTES")]
    stack_size: usize,

    /// io_uring setup flags of the workers' rings: a comma-separated list of
    /// single_issuer, defer_taskrun, coop_taskrun, sqpoll, or none. By default
    /// single_issuer,defer_taskrun: the kernel runs completion work only when the worker
    /// enters it, once per dispatch round, instead of interrupting it. With --completer or
    /// --io-stealing the default is none, since they reap a busy worker's completions,
    /// which DEFER_TASKRUN and COOP_TASKRUN post only when that worker enters the kernel.
    #[arg(long, value_name = "FLAGS")]
    ring_flags: Option<fiber::RingFlags>,

    /// Submission queue entries of each worker's ring (8 to 32768). `--sq-entries` is
    /// the same flag, the name every io_uring server here takes.
    #[arg(long, alias = "sq-entries", default_value_t = fiber::DEFAULT_RING_ENTRIES, value_name = "N")]
    ring_entries: u32,

    /// Completion queue entries of each worker's ring (16 to 65536, at least the
    /// submission queue's), set with IORING_SETUP_CQSIZE.
    #[arg(long, default_value_t = fiber::DEFAULT_CQ_ENTRIES, value_name = "N")]
    cq_entries: u32,

    /// At stop, print a second stderr line with the runtime's counters (resumes,
    /// SQEs, io_uring_enter calls, completions by path, steals, wake-ups, cross-ring
    /// operations, stacks) and, for echo, a third with the scheduling counters per echo
    /// (bytes received over --msg-size).
    #[arg(long)]
    runtime_stats: bool,
}

/// Where fibers run (see `--scheduler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scheduler {
    Pinned,
    Stealing,
}

impl RuntimeArgs {
    fn builder(&self, common: &CommonArgs) -> fiber::Builder {
        let mut b = fiber::Runtime::builder()
            .workers(common.worker_count())
            .stack_size(self.stack_size)
            .ring_entries(self.ring_entries)
            .cq_entries(self.cq_entries)
            .ring_flags(self.ring_flags())
            .completer(self.completer)
            .io_stealing(self.io_stealing)
            .multishot(!self.plain_recv)
            .multishot_accept(true)
            .fixed_files(self.fixed_files)
            .thread_name("srv-fiber");
        if let Some(cpus) = &common.cpus {
            b = b.cpus(cpus.as_slice().iter().copied());
        }
        match self.scheduler {
            Scheduler::Pinned => b,
            Scheduler::Stealing => allow_migration(b),
        }
    }
}

impl RuntimeArgs {
    /// The ring flags asked for, or the fastest the other options allow.
    fn ring_flags(&self) -> fiber::RingFlags {
        match self.ring_flags {
            Some(flags) => flags,
            None if self.completer || self.io_stealing => fiber::RingFlags::none(),
            None => fiber::RingFlags::none()
                .single_issuer(true)
                .defer_taskrun(true),
        }
    }
}

/// Lets the runtime move fibers between workers.
#[allow(unsafe_code)]
fn allow_migration(b: fiber::Builder) -> fiber::Builder {
    // SAFETY: srv-fiber's fibers run `service`'s echo and chat code, the accept loop and
    // the stop, none of which holds a thread-local reference, a `std::sync::MutexGuard` or
    // an `Rc` across a call that can park (the hub's std locks are taken and released
    // between blocking calls, never across one).
    unsafe { b.work_stealing() }
}

/// Parses a byte count with an optional K or M suffix.
fn parse_size(s: &str) -> Result<usize, String> {
    let (digits, unit) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1usize << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("`{s}` is not a size like 65536, 64K or 1M"))
}

/// What every connection fiber shares.
#[derive(Debug)]
struct Conns {
    hub: Option<Arc<Hub<FiberOutbox>>>,
    kv: Option<Arc<Kv>>,
    /// `--proto http`: the limit of pending output.
    http: Option<usize>,
    echo: EchoConfig,
    max_pending: usize,
    /// Where each connection fiber takes its tally.
    counters: Counters,
}

pub(crate) fn serve(
    common: &CommonArgs,
    rt_args: &RuntimeArgs,
    kv_args: &KvArgs,
) -> anyhow::Result<()> {
    let shutdown = Shutdown::install()?;
    let hub = launch::open_rooms::<FiberOutbox>(common)?.map(Arc::new);
    let workers = common.worker_count();
    // Pinned fibers cannot be stolen, so each worker accepts its share of the connections
    // on a listener of its own (SO_REUSEPORT). With stealing one listener serves them all:
    // the connections' fibers spread as idle workers steal them.
    let listeners = match rt_args.scheduler {
        Scheduler::Pinned => launch::bind_group(common.addr, workers)?,
        Scheduler::Stealing => vec![launch::bind(common.addr)?],
    };
    let addr = listeners[0]
        .local_addr()
        .context("reading the listener's address")?;
    // The runtime's error already names its OS error: no `context`, which would print
    // that error a second time as the cause.
    let runtime = rt_args
        .builder(common)
        .build()
        .map_err(|e| anyhow::anyhow!("starting the fiber runtime: {e}"))?;
    let handle = runtime.handle();

    let counters = Counters::default();
    let conns = Arc::new(Conns {
        hub: hub.clone(),
        kv: Kv::start(common, kv_args, &handle),
        http: (common.proto == Proto::Http).then(|| common.kv_max_pending()),
        echo: common.echo(),
        max_pending: common.max_pending,
        counters: counters.clone(),
    });
    for (worker, listener) in listeners.into_iter().enumerate() {
        let listener = TcpListener::from_std(listener);
        let conns = Arc::clone(&conns);
        // Detached: it ends when shutdown cancels its accept.
        drop(handle.spawn_on(worker, move || accept_loop(&listener, &conns)));
    }
    launch::announce_ready(addr)?;

    shutdown.wait();
    stop(runtime);
    launch::finish(NAME, hub.as_deref(), &counters)?;
    if rt_args.runtime_stats {
        let stats = handle.stats();
        eprintln!("{NAME}: runtime: {stats}");
        if common.proto == Proto::Echo {
            // An echo is one message of --msg-size bytes in and out.
            let echoes = counters.snapshot().bytes_in / common.msg_size.get() as u64;
            eprintln!("{NAME}: runtime per echo: {}", stats.per(echoes));
        }
    }
    Ok(())
}

/// Shuts the runtime down (I/O in flight fails with ECANCELED, so every connection
/// fiber returns) and waits, at most [`STOP_GRACE`], for its workers to exit.
fn stop(runtime: fiber::Runtime) {
    runtime.shutdown();
    let (done_tx, done_rx) = mpsc::channel();
    let joined = std::thread::Builder::new()
        .name("srv-fiber-stop".into())
        .spawn(move || {
            drop(runtime);
            let _ = done_tx.send(());
        });
    if joined.is_ok() {
        // Past the grace period the process exits with the workers still running.
        let _ = done_rx.recv_timeout(STOP_GRACE);
    }
}

fn stopping() -> bool {
    fiber::Handle::current().is_none_or(|h| h.is_shutting_down())
}

/// Each accept loop and each connection fiber counts into a tally of its own, which
/// moves with the fiber when another worker steals it: one writer per block, whatever
/// the worker, and no thread-local to go stale across a park.
fn accept_loop(listener: &TcpListener, conns: &Arc<Conns>) {
    let mut tally = conns.counters.tally();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tally.add(Count::Accepted, 1);
                let guard = Closing::new(conns.counters.tally());
                let conns = Arc::clone(conns);
                // Detached; if the fiber cannot start, dropping the closure closes the
                // stream and the guard counts the connection as failed.
                drop(fiber::spawn(move || conns.serve(stream, guard)));
            }
            Err(_) if stopping() => return,
            Err(e) => {
                if let Some(pause) = launch::accept_failed(NAME, &e) {
                    fiber::sleep(pause);
                }
            }
        }
    }
}

/// A connection's tally, which counts it as closed exactly once, however its fiber
/// ends: it returns, it is torn down at shutdown (its stack unwound), or it never
/// started (an error).
#[derive(Debug)]
struct Closing {
    tally: Tally,
    served: bool,
}

impl Closing {
    fn new(tally: Tally) -> Closing {
        Closing {
            tally,
            served: false,
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        if !self.served && !stopping() {
            self.tally.add(Count::Errors, 1);
        }
        self.tally.add(Count::Closed, 1);
    }
}

impl Conns {
    fn serve(&self, stream: TcpStream, mut closing: Closing) {
        let tally = &mut closing.tally;
        let result = match (&self.kv, self.http, &self.hub) {
            (Some(kv), _, _) => kv.serve(&stream, tally),
            (None, Some(limit), _) => {
                service::http::serve_blocking(stream.reader(), &stream, limit, tally)
            }
            (None, None, None) => serve_blocking(stream.reader(), &stream, &self.echo, tally),
            (None, None, Some(hub)) => {
                serve_chat(stream, hub, self.max_pending, &self.counters, tally)
            }
        };
        // I/O cancelled by a stop is not the connection's failure.
        if result.is_err() && !stopping() {
            tally.add(Count::Errors, 1);
        }
        closing.served = true;
    }
}

/// One chat connection: this fiber reads and handles commands; a second fiber writes
/// everything the connection is sent, in order, into a tally of its own.
fn serve_chat(
    stream: TcpStream,
    hub: &Hub<FiberOutbox>,
    max_pending: usize,
    counters: &Counters,
    tally: &mut Tally,
) -> io::Result<()> {
    let stream = Arc::new(stream);
    // Weak: the hub may keep the outbox (and so this closure) a little longer than the
    // connection lives, and must not keep its socket open.
    let to_cut = Arc::downgrade(&stream);
    let outbox = FiberOutbox::new(max_pending, move || {
        if let Some(s) = to_cut.upgrade() {
            // Wakes this connection's reader (its recv ends) and writer (its send fails).
            let _ = s.shutdown(How::Both);
        }
    });
    let writer = {
        let (outbox, stream, mut tally) = (outbox.clone(), Arc::clone(&stream), counters.tally());
        fiber::spawn(move || outbox.drain_into(&mut &*stream, &mut tally))
    };
    if writer.is_finished() {
        // The writer cannot have returned by itself yet (nothing closed the outbox), so
        // it never started: without it, the reader could wait for room forever.
        outbox.close();
        return writer.join().map_err(io::Error::other).and_then(|r| r);
    }
    let result = read_commands(&*stream, hub, &outbox, tally);
    outbox.close();
    let written = writer.join().map_err(io::Error::other).and_then(|r| r);
    result.and(written)
}
