//! The runtime: its builder, the state its workers share, and the handles users hold.

use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak, mpsc};
use std::thread;

use crossbeam_deque::{Injector, Stealer};
use slab::Slab;

use crate::error::{Error, JoinError};
use crate::fiber::{self, Fiber, FiberRef};
use crate::fs::FileOps;
use crate::join::JoinHandle;
use crate::stats::{Counter, LocalCounter, Stats, WorkerCounters};
use crate::sys::fd::eventfd_signal;
use crate::sys::op::{OpRef, Sqe};
use crate::sys::ring::{self, Features, ProbeError, RingSetup, RingShared};
use crate::sys::stack::{GuardKind, StackPool};
use crate::{completer, worker};

/// Default usable bytes of a fiber stack.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;
/// Smallest stack the builder accepts.
pub const MIN_STACK_SIZE: usize = crate::sys::stack::MIN_STACK_SIZE;
/// Default SQ entries per worker ring.
pub const DEFAULT_RING_ENTRIES: u32 = 256;
/// Default CQ entries per worker ring: twice the operations in flight of 16,000 connections
/// (a multishot recv each), so that completions do not overflow to the kernel's slow list.
pub const DEFAULT_CQ_ENTRIES: u32 = 32768;

const REGISTRY_SHARDS: usize = 64;

/// Where a fiber sits in its runtime's registry, the list shutdown tears down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Registered {
    /// In the shared registry: (shard, key). Fibers that may move between workers, or that
    /// another thread spawned.
    Shared(usize, usize),
    /// In its home worker's own registry, under this key (see [`Shared::register`]).
    Worker(usize),
}

/// Provided buffers per worker ring for multishot recv, and their size: 2 MiB per worker,
/// enough for the data of one reaping pass (buffers go back as soon as they are copied).
const PROVIDED_BUFS: u16 = 512;
const PROVIDED_BUF_SIZE: usize = 4096;

/// Runtime phases, in the only order they happen.
pub(crate) const RUNNING: u8 = 0;
/// Shutdown requested: I/O is cancelled, new I/O and spawns fail, runnable fibers finish.
pub(crate) const DRAINING: u8 = 1;
/// No fiber is runnable and no I/O is in flight: the rest are torn down.
pub(crate) const TEARDOWN: u8 = 2;
/// Workers exit.
pub(crate) const STOPPED: u8 = 3;

/// io_uring setup flags for the workers' rings. All off by default.
///
/// Parsed from a comma-separated list (`"single_issuer,coop_taskrun"`, or `"none"`), so a
/// server can pass a `--ring-flags` option straight through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RingFlags {
    /// `IORING_SETUP_SINGLE_ISSUER`: only the worker submits to its ring.
    pub single_issuer: bool,
    /// `IORING_SETUP_DEFER_TASKRUN` (implies `single_issuer`): completions are posted only
    /// when the worker enters the kernel, so neither the Completer nor I/O stealing can reap
    /// them.
    pub defer_taskrun: bool,
    /// `IORING_SETUP_COOP_TASKRUN`: no interrupt of a busy worker to post completions.
    pub coop_taskrun: bool,
    /// `IORING_SETUP_SQPOLL` with this idle time in milliseconds: a kernel thread per ring
    /// polls the SQ.
    pub sqpoll_idle_ms: Option<u32>,
}

impl RingFlags {
    /// No flags.
    pub fn none() -> RingFlags {
        RingFlags::default()
    }

    /// Sets `single_issuer`.
    pub fn single_issuer(mut self, on: bool) -> RingFlags {
        self.single_issuer = on;
        self
    }

    /// Sets `defer_taskrun`.
    pub fn defer_taskrun(mut self, on: bool) -> RingFlags {
        self.defer_taskrun = on;
        self
    }

    /// Sets `coop_taskrun`.
    pub fn coop_taskrun(mut self, on: bool) -> RingFlags {
        self.coop_taskrun = on;
        self
    }

    /// Sets `sqpoll` with the kernel thread's idle time.
    pub fn sqpoll(mut self, idle_ms: Option<u32>) -> RingFlags {
        self.sqpoll_idle_ms = idle_ms;
        self
    }
}

impl FromStr for RingFlags {
    type Err = String;

    fn from_str(s: &str) -> Result<RingFlags, String> {
        let mut f = RingFlags::default();
        for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word.to_ascii_lowercase().as_str() {
                "none" => {}
                "single_issuer" => f.single_issuer = true,
                "defer_taskrun" => {
                    f.defer_taskrun = true;
                    f.single_issuer = true;
                }
                "coop_taskrun" => f.coop_taskrun = true,
                "sqpoll" => f.sqpoll_idle_ms = Some(1000),
                other => {
                    return Err(format!(
                        "unknown ring flag {other:?}; expected a comma-separated list of \
                         single_issuer, defer_taskrun, coop_taskrun, sqpoll (or none)"
                    ));
                }
            }
        }
        Ok(f)
    }
}

impl fmt::Display for RingFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words = Vec::new();
        if self.single_issuer {
            words.push("single_issuer");
        }
        if self.defer_taskrun {
            words.push("defer_taskrun");
        }
        if self.coop_taskrun {
            words.push("coop_taskrun");
        }
        if self.sqpoll_idle_ms.is_some() {
            words.push("sqpoll");
        }
        if words.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&words.join(","))
        }
    }
}

/// The settings of a runtime.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) cpus: Vec<usize>,
    pub(crate) stack_size: usize,
    pub(crate) ring: RingSetup,
    pub(crate) completer: bool,
    pub(crate) io_stealing: bool,
    pub(crate) multishot: bool,
    pub(crate) multishot_recv: bool,
    /// Fibers may move between workers (work stealing); otherwise each stays on the worker
    /// it first ran on.
    pub(crate) stealing: bool,
    /// How `fs` opens, reads and closes files.
    pub(crate) file_ops: FileOps,
    pub(crate) name: String,
}

impl Config {
    pub(crate) fn cpu_for(&self, worker: usize) -> Option<usize> {
        if self.cpus.is_empty() {
            None
        } else {
            Some(self.cpus[worker % self.cpus.len()])
        }
    }
}

/// Builds a [`Runtime`].
///
/// ```no_run
/// let rt = fiber::Runtime::builder()
///     .workers(2)
///     .cpus([1])
///     .stack_size(64 * 1024)
///     .build()?;
/// # Ok::<(), fiber::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    workers: Option<usize>,
    cpus: Vec<usize>,
    stack_size: usize,
    ring_entries: u32,
    cq_entries: u32,
    ring_flags: RingFlags,
    completer: bool,
    io_stealing: bool,
    multishot_accept: bool,
    multishot_recv: bool,
    fixed_files: bool,
    stealing: bool,
    file_ops: FileOps,
    name: String,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            workers: None,
            cpus: Vec::new(),
            stack_size: DEFAULT_STACK_SIZE,
            ring_entries: DEFAULT_RING_ENTRIES,
            cq_entries: DEFAULT_CQ_ENTRIES,
            ring_flags: RingFlags::default(),
            completer: false,
            io_stealing: false,
            multishot_accept: false,
            multishot_recv: false,
            fixed_files: false,
            stealing: false,
            file_ops: FileOps::default(),
            name: "fiber".to_owned(),
        }
    }
}

impl Builder {
    /// Number of worker threads. Default: the number of `cpus` if given, else the CPUs this
    /// process may run on.
    pub fn workers(mut self, n: usize) -> Builder {
        self.workers = Some(n);
        self
    }

    /// Pins worker `i` to `cpus[i % cpus.len()]`. Default: no pinning.
    pub fn cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Builder {
        self.cpus = cpus.into_iter().collect();
        self
    }

    /// Usable bytes of each fiber stack (rounded up to whole pages; one guard page is added).
    /// Default 64 KiB; at least 16 KiB.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = bytes;
        self
    }

    /// Submission queue entries of each worker's ring. Default 256.
    pub fn ring_entries(mut self, n: u32) -> Builder {
        self.ring_entries = n;
        self
    }

    /// Completion queue entries of each worker's ring (16 to 65,536). Default
    /// [`DEFAULT_CQ_ENTRIES`]: keep it at least twice the operations in flight (about one
    /// per connection with multishot recv); `Stats` counts overflows.
    pub fn cq_entries(mut self, n: u32) -> Builder {
        self.cq_entries = n;
        self
    }

    /// io_uring setup flags of the workers' rings.
    pub fn ring_flags(mut self, flags: RingFlags) -> Builder {
        self.ring_flags = flags;
        self
    }

    /// Runs the Completer thread (the paper's Figure 4): it is woken by an eventfd registered
    /// on every worker's ring and reaps completions a busy worker has not reaped yet.
    pub fn completer(mut self, on: bool) -> Builder {
        self.completer = on;
        self
    }

    /// Lets a worker with nothing to run reap the completions of another worker's ring
    /// before it goes to sleep (I/O stealing).
    pub fn io_stealing(mut self, on: bool) -> Builder {
        self.io_stealing = on;
        self
    }

    /// Uses multishot accept on listeners (one SQE yields every incoming connection) and
    /// multishot recv on streams read from fibers, with a ring of provided buffers per worker
    /// (one SQE yields every chunk of data, which `TcpStream::reader` lends in place until it
    /// is consumed). Ignored where the kernel lacks them (before 5.19 and 6.0).
    pub fn multishot(mut self, on: bool) -> Builder {
        self.multishot_accept = on;
        self.multishot_recv = on;
        self
    }

    /// Uses multishot accept on listeners, whatever [`Builder::multishot`] says of recv.
    /// The kernel then accepts connections as they arrive and an accepting fiber takes
    /// every one queued each time it runs, where a plain accept takes one per turn of the
    /// run queue: on a worker busy with many runnable fibers, that is one connection per
    /// pass over all of them.
    pub fn multishot_accept(mut self, on: bool) -> Builder {
        self.multishot_accept = on;
        self
    }

    /// Registers each stream's socket in a table of fixed files of the worker that first
    /// does I/O on it, so that the SQEs that worker pushes for it name a table slot and the
    /// kernel skips a descriptor lookup (`fget`/`fput`) per operation. Other workers and
    /// plain threads go on naming the descriptor. Ignored where the kernel refuses a table
    /// (before 5.19, or a descriptor limit too low).
    pub fn fixed_files(mut self, on: bool) -> Builder {
        self.fixed_files = on;
        self
    }

    /// Lets fibers move between workers: an idle worker steals runnable fibers from a busy
    /// one, and a fiber woken by another worker (a completion it reaped, a channel send)
    /// runs there. This is the EMPER paper's design. Without it (the default) every fiber
    /// stays on the worker it first ran on (thread-per-core, as monoio and glommio do):
    /// wake-ups from elsewhere are queued to that worker, and nothing a fiber holds ever
    /// changes threads.
    ///
    /// # Safety
    ///
    /// With stealing, a fiber may resume on another OS thread after any blocking call of
    /// this crate. The caller guarantees that no fiber of this runtime holds anything tied
    /// to its OS thread across such a call: no reference obtained from a `thread_local!`,
    /// no `std::sync::MutexGuard`, no `Rc` shared with thread-local state (see the crate
    /// documentation, "The migration rule").
    // The one `unsafe fn` outside `sys/`: it does nothing unsafe itself, but its caller
    // takes on the migration rule that makes moving coroutines between threads sound.
    #[allow(unsafe_code)]
    pub unsafe fn work_stealing(mut self) -> Builder {
        self.stealing = true;
        self
    }

    /// [`work_stealing`](Self::work_stealing) for the crate's own tests, whose fibers keep
    /// the migration rule.
    #[cfg(test)]
    pub(crate) fn stealing_for_tests(mut self) -> Builder {
        self.stealing = true;
        self
    }

    /// How [`fs`](crate::fs) opens, reads and closes files: [`FileOps::Direct`] (the
    /// default) tries a system call that finishes at once or refuses (`openat2` with
    /// `RESOLVE_CACHED`, `preadv2` with `RWF_NOWAIT`, `close`) and goes to the ring only
    /// when it would wait; [`FileOps::Ring`] sends every operation through the ring.
    pub fn file_ops(mut self, ops: FileOps) -> Builder {
        self.file_ops = ops;
        self
    }

    /// Prefix of the worker threads' names. Default `fiber`.
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Builder {
        self.name = prefix.into();
        self
    }

    /// Probes io_uring, creates one ring per worker (on its thread) and starts the workers.
    pub fn build(self) -> Result<Runtime, Error> {
        let features = probe_features()?;
        let workers = match self.workers {
            Some(0) => return Err(Error::Config("at least one worker is needed".into())),
            Some(n) => n,
            None if !self.cpus.is_empty() => self.cpus.len(),
            None => thread::available_parallelism().map_or(1, usize::from),
        };
        if workers > 4096 {
            return Err(Error::Config(format!("{workers} workers is too many")));
        }
        if self.stack_size < MIN_STACK_SIZE || self.stack_size > (1 << 30) {
            return Err(Error::Config(format!(
                "stack size {} is out of range ({MIN_STACK_SIZE} bytes to 1 GiB)",
                self.stack_size
            )));
        }
        if !(8..=32768).contains(&self.ring_entries) {
            return Err(Error::Config(format!(
                "ring entries {} is out of range (8 to 32768)",
                self.ring_entries
            )));
        }
        if !(16..=65536).contains(&self.cq_entries) || self.cq_entries < self.ring_entries {
            return Err(Error::Config(format!(
                "completion queue entries {} is out of range (16 to 65536, and at least the \
                 {} submission queue entries)",
                self.cq_entries, self.ring_entries
            )));
        }
        let config = Config {
            workers,
            cpus: self.cpus,
            stack_size: self.stack_size,
            ring: RingSetup {
                entries: self.ring_entries,
                cq_entries: self.cq_entries,
                single_issuer: self.ring_flags.single_issuer,
                defer_taskrun: self.ring_flags.defer_taskrun,
                coop_taskrun: self.ring_flags.coop_taskrun,
                sqpoll_idle_ms: self.ring_flags.sqpoll_idle_ms,
                provided_bufs: (self.multishot_recv && features.recv_multishot)
                    .then_some((PROVIDED_BUFS, PROVIDED_BUF_SIZE)),
                fixed_files: if self.fixed_files {
                    crate::sys::files::table_size()
                } else {
                    0
                },
                reaped_by_others: features.msg_ring && (self.completer || self.io_stealing),
            },
            // Both reap other workers' rings and must then re-deliver wake-ups they took,
            // which needs MSG_RING (5.18).
            completer: self.completer && features.msg_ring,
            io_stealing: self.io_stealing && features.msg_ring,
            multishot: self.multishot_accept && features.accept_multishot,
            multishot_recv: self.multishot_recv && features.recv_multishot,
            stealing: self.stealing,
            file_ops: self.file_ops,
            name: self.name,
        };
        Runtime::start(config, features)
    }
}

/// Probes io_uring: `Ok` if this kernel can run the runtime. Tests use it to skip.
pub fn probe() -> Result<(), Error> {
    probe_features().map(drop)
}

fn probe_features() -> Result<Features, Error> {
    ring::probe().map_err(|e| match e {
        ProbeError::Setup(io) => Error::from_setup(io),
        ProbeError::Missing(op) => Error::Unsupported(op),
    })
}

/// What the workers of a runtime share.
pub(crate) struct Shared {
    /// This runtime's number, unique in the process (see [`Shared::find`]).
    pub(crate) id: u64,
    pub(crate) config: Config,
    pub(crate) features: Features,
    pub(crate) injector: Injector<FiberRef>,
    pub(crate) stealers: Vec<Stealer<FiberRef>>,
    /// Each in its own allocation, which its worker holds too (`WorkerCtx::me`).
    pub(crate) workers: Vec<Arc<WorkerShared>>,
    state: AtomicU8,
    registry: Vec<Mutex<Slab<FiberRef>>>,
    next_id: AtomicU64,
    pub(crate) stacks: StackPool,
    /// Fibers spawned from threads that are not this runtime's workers (the workers count
    /// their own, and all finishes, in their `WorkerCounters`).
    spawned: Counter,
    pub(crate) completer: Option<completer::Shared>,
    /// Without stealing: the worker that began the teardown, and how many workers have
    /// torn down their own fibers.
    teardown_by: AtomicUsize,
    teardowns: AtomicUsize,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("workers", &self.workers.len())
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

/// What other threads need of one worker.
#[derive(Debug)]
pub(crate) struct WorkerShared {
    /// The worker's ring, set once the worker created it.
    pub(crate) ring: OnceLock<Arc<RingShared>>,
    /// Written to wake the worker when no MSG_RING can be sent (from a non-worker thread,
    /// or a kernel without MSG_RING).
    pub(crate) eventfd: OwnedFd,
    /// Registered on the ring for the Completer (signalled on every CQE).
    pub(crate) cq_eventfd: Option<OwnedFd>,
    pub(crate) sleeping: std::sync::atomic::AtomicBool,
    /// Set by `notify_one` when it picks this sleeping worker, so that the next
    /// notification wakes another one; cleared when the worker leaves its idle state.
    pub(crate) notified: std::sync::atomic::AtomicBool,
    /// Bumped every time the worker leaves its idle state (only by the worker).
    pub(crate) epoch: AtomicU64,
    /// What other threads ask of this worker's ring.
    pub(crate) requests: Mutex<Requests>,
    /// Whether `requests` may hold something: the worker looks at it only when set.
    pub(crate) has_requests: std::sync::atomic::AtomicBool,
    /// Fibers pinned to this worker that another thread made runnable.
    pub(crate) remote: Injector<FiberRef>,
    pub(crate) stats: WorkerCounters,
}

impl WorkerShared {
    /// Worker `i`'s shared half, with its wake-up eventfd (and the Completer's, when it runs).
    fn new(i: usize, completer: bool) -> Result<WorkerShared, Error> {
        let eventfd =
            || crate::sys::fd::eventfd().map_err(|source| Error::Worker { worker: i, source });
        Ok(WorkerShared {
            ring: OnceLock::new(),
            eventfd: eventfd()?,
            cq_eventfd: if completer { Some(eventfd()?) } else { None },
            sleeping: std::sync::atomic::AtomicBool::new(false),
            notified: std::sync::atomic::AtomicBool::new(false),
            has_requests: std::sync::atomic::AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            requests: Mutex::new(Requests::default()),
            remote: Injector::new(),
            stats: WorkerCounters::default(),
        })
    }
}

/// Work for a worker's ring that only its owner thread may push.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// In-flight ops of the ring to cancel.
    pub(crate) cancels: Vec<OpRef>,
    /// Slots of the ring's table of fixed files to empty (their streams were dropped).
    pub(crate) file_removals: Vec<u32>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The runtimes alive in this process, by [`Shared::id`]: an operation in flight names its
/// runtime by number, not by an `Arc` (a clone and a drop per operation), and the rare
/// caller that is none of that runtime's workers finds it here.
static LIVE: Mutex<Vec<(u64, Weak<Shared>)>> = Mutex::new(Vec::new());

/// The next [`Shared::id`].
static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(0);

impl Drop for Shared {
    fn drop(&mut self) {
        lock(&LIVE).retain(|(id, _)| *id != self.id);
    }
}

impl Shared {
    /// The live runtime numbered `id`, if it is still alive.
    pub(crate) fn find(id: u64) -> Option<Arc<Shared>> {
        let live = lock(&LIVE);
        live.iter().find(|(i, _)| *i == id)?.1.upgrade()
    }

    pub(crate) fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    pub(crate) fn set_state(&self, s: u8) {
        self.state.store(s, Ordering::Release);
    }

    pub(crate) fn advance_state(&self, from: u8, to: u8) -> bool {
        self.state
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Records that worker `i` began the teardown (and tears down its fibers at once).
    pub(crate) fn set_teardown_by(&self, i: usize) {
        self.teardown_by.store(i, Ordering::Release);
    }

    /// The worker that began the teardown, or `usize::MAX`.
    pub(crate) fn teardown_by(&self) -> usize {
        self.teardown_by.load(Ordering::Acquire)
    }

    /// Counts one worker's teardown as finished; `true` for the last one.
    pub(crate) fn teardown_done(&self) -> bool {
        self.teardowns.fetch_add(1, Ordering::AcqRel) + 1 == self.workers.len()
    }

    pub(crate) fn accepting_spawns(&self) -> bool {
        self.state() == RUNNING
    }

    /// Adds a fiber to the registry (so shutdown can find it) and returns it. `here` is the
    /// calling thread's worker when it belongs to this runtime: the id and the count are then
    /// its own, without a read-modify-write on a word every spawner shares. A fiber that will
    /// live on `here` for good (fibers are pinned, and `home` is `here` or none) goes into
    /// that worker's own registry, which only its thread touches: no lock at spawn or finish.
    pub(crate) fn register(
        &self,
        here: Option<&worker::WorkerCtx>,
        home: usize,
        make: impl FnOnce(u64, Registered) -> Fiber,
    ) -> FiberRef {
        let id = self.new_fiber_id(here);
        let fiber = match here {
            Some(w) if !self.config.stealing && (home == fiber::NO_HOME || home == w.index) => {
                w.register_here(|key| make(id, Registered::Worker(key)))
            }
            _ => {
                let shard = (id as usize) % REGISTRY_SHARDS;
                let mut slab = lock(&self.registry[shard]);
                let entry = slab.vacant_entry();
                let (fiber, kept) =
                    FiberRef::new_pair(make(id, Registered::Shared(shard, entry.key())));
                entry.insert(kept);
                fiber
            }
        };
        match here {
            Some(w) => w.stats().spawned.inc(),
            None => self.spawned.inc(),
        }
        fiber
    }

    /// A fiber id unique in this runtime: worker `i` hands out `k * (workers + 1) + i + 1`
    /// from its own sequence; other threads `k * (workers + 1)` from the shared one.
    fn new_fiber_id(&self, here: Option<&worker::WorkerCtx>) -> u64 {
        let stride = self.workers.len() as u64 + 1;
        match here {
            Some(w) => {
                let seq = &w.stats().spawned;
                seq.get() * stride + w.index as u64 + 1
            }
            None => self.next_id.fetch_add(1, Ordering::Relaxed) * stride,
        }
    }

    /// Removes a finished or torn-down fiber from the registry; only worker threads do
    /// (`here` is the calling one, which for a fiber in a worker's own registry is that
    /// worker: such a fiber never runs, finishes or is torn down anywhere else). Returns the
    /// registry's reference (`None` if it was removed before), for the caller to drop outside
    /// the registry's lock or borrow.
    pub(crate) fn unregister(&self, here: &worker::WorkerCtx, f: &Fiber) -> Option<FiberRef> {
        let removed = match f.registered() {
            Registered::Shared(shard, key) => lock(&self.registry[shard]).try_remove(key),
            Registered::Worker(key) => {
                debug_assert_eq!(f.home(), here.index, "a fiber left its worker's registry");
                here.unregister_here(key)
            }
        };
        if removed.is_some() {
            here.stats().finished.inc();
        }
        removed
    }

    /// Every fiber in the shared registry (a worker adds those in its own, see
    /// `WorkerCtx::registered_here`).
    pub(crate) fn registered(&self) -> Vec<FiberRef> {
        let mut v = Vec::new();
        for shard in &self.registry {
            v.extend(lock(shard).iter().map(|(_, f)| f.clone()));
        }
        v
    }

    /// Announces worker `i` as idle. Pair with [`Shared::unannounce`].
    pub(crate) fn announce_idle(&self, i: usize) {
        let w = &self.workers[i];
        // A wake-up sent in an earlier idle period is spent: a notifier that saw that period
        // could still mark it after this worker woke (`unannounce` clears it first), and a
        // stale mark would keep every later notifier from waking this worker. Cleared before
        // the announcement (release): whoever sees it sees the mark cleared.
        w.notified.store(false, Ordering::Relaxed);
        // Release, not SeqCst (which costs a locked exchange per idle period): against a
        // notifier (push; SeqCst fence; load `sleeping`) the fence below is what orders this
        // store before the worker's looks at its queues, as in Dekker's protocol with fences,
        // and a `quiescent` check that reads `true` here sees, through the release, the
        // worker's last `unannounce` (its epoch) too.
        w.sleeping.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
    }

    pub(crate) fn unannounce(&self, i: usize) {
        let w = &self.workers[i];
        // Only worker `i` writes its epoch: no read-modify-write needed.
        w.epoch
            .store(w.epoch.load(Ordering::Relaxed) + 1, Ordering::SeqCst);
        w.sleeping.store(false, Ordering::SeqCst);
        w.notified.store(false, Ordering::Relaxed);
    }

    /// Called after work was made available: wakes one idle worker, if any (one not
    /// already picked by another notification since it fell asleep).
    pub(crate) fn notify_one(&self, from: Option<&worker::WorkerCtx>) {
        fence(Ordering::SeqCst);
        for (t, w) in self.workers.iter().enumerate() {
            if w.sleeping.load(Ordering::SeqCst)
                && !w.notified.load(Ordering::Relaxed)
                && !w.notified.swap(true, Ordering::AcqRel)
            {
                self.wake_worker(t, from);
                return;
            }
        }
    }

    /// Wakes worker `t`: by MSG_RING from the caller's ring if it is a worker of this
    /// runtime, else through `t`'s eventfd.
    pub(crate) fn wake_worker(&self, t: usize, from: Option<&worker::WorkerCtx>) {
        let target = &self.workers[t];
        if let (Some(ctx), Some(ring)) = (from, target.ring.get())
            && self.features.msg_ring
            && ctx.index != t
            && std::ptr::eq(Arc::as_ptr(&ctx.rt), self)
            && ctx.ring.push(Sqe::msg_ring(ring.fd())).is_ok()
            && ctx.ring.flush().is_ok()
        {
            target.stats.wakes_msg_ring.inc();
            return;
        }
        // An eventfd write cannot fail on a valid eventfd short of counter overflow, which
        // `eventfd_signal` treats as success.
        let _ = eventfd_signal(target.eventfd.as_fd());
        target.stats.wakes_eventfd.inc();
    }

    /// Asks worker `t` for work on its ring (`add` records it) from another thread, and
    /// wakes `t` so that it pushes it.
    pub(crate) fn request(&self, t: usize, add: impl FnOnce(&mut Requests)) {
        let target = &self.workers[t];
        add(&mut lock(&target.requests));
        target.has_requests.store(true, Ordering::SeqCst);
        let ctx = worker::current();
        let from = ctx
            .as_deref()
            .filter(|c| std::ptr::eq(Arc::as_ptr(&c.rt), self));
        self.wake_worker(t, from);
    }

    /// Queues a fiber pinned to worker `t` from another thread, and wakes `t` if it sleeps.
    pub(crate) fn push_remote(&self, t: usize, f: FiberRef, from: Option<&worker::WorkerCtx>) {
        let target = &self.workers[t];
        target.remote.push(f);
        target.stats.wakes_remote.inc();
        // Pairs with the fence in `announce_idle`: either the worker sees the fiber when it
        // checks its queues after announcing, or this sees it asleep and wakes it.
        fence(Ordering::SeqCst);
        if target.sleeping.load(Ordering::SeqCst) {
            self.wake_worker(t, from);
        }
    }

    /// Wakes every worker (state changes).
    pub(crate) fn wake_all(&self) {
        for w in &self.workers {
            let _ = eventfd_signal(w.eventfd.as_fd());
        }
        if let Some(c) = &self.completer {
            c.wake();
        }
    }

    /// Starts shutting down (idempotent).
    pub(crate) fn shutdown(&self) {
        if self.advance_state(RUNNING, DRAINING) {
            self.wake_all();
        }
    }

    /// One of the workers' own counters, added up over the workers.
    fn worker_sum(&self, counter: impl Fn(&WorkerCounters) -> &LocalCounter) -> u64 {
        self.workers.iter().map(|w| counter(&w.stats).get()).sum()
    }

    pub(crate) fn stats(&self) -> Stats {
        let counts = self.stacks.counts();
        Stats {
            workers: self.workers.iter().map(|w| w.stats.snapshot()).collect(),
            fibers_spawned: self.spawned.get() + self.worker_sum(|w| &w.spawned),
            fibers_finished: self.worker_sum(|w| &w.finished),
            completions_completer: self.completer.as_ref().map_or(0, |c| c.completions()),
            completer_wakeups: self.completer.as_ref().map_or(0, |c| c.wakeups()),
            stacks_in_use: counts
                .in_use
                .saturating_sub(self.worker_sum(|w| &w.stacks_cached) as usize),
            stacks_carved: counts.carved,
            stack_mappings: counts.mappings,
            guard_pages: match counts.guard {
                Some(GuardKind::Madvise) => "madvise",
                Some(GuardKind::Mprotect) => "mprotect",
                None => "-",
            },
            ops_live: crate::sys::op::live_ops(),
        }
    }
}

/// A handle to a runtime: spawn fibers, read stats, or shut it down, from any thread.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("shared", &self.shared)
            .finish()
    }
}

impl Handle {
    /// The runtime of the calling fiber, if it runs on one.
    pub fn current() -> Option<Handle> {
        worker::current_runtime().map(|shared| Handle { shared })
    }

    /// Spawns a fiber. Once shutdown has begun, the fiber is not started and its handle
    /// reports [`JoinError::Cancelled`].
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        fiber::spawn_on(&self.shared, fiber::NO_HOME, f)
    }

    /// Spawns a fiber on worker `worker` (modulo the number of workers). Without work
    /// stealing it runs there for its whole life: a server starts one accepting fiber per
    /// worker this way.
    pub fn spawn_on<F, T>(&self, worker: usize, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        fiber::spawn_on(&self.shared, worker % self.shared.workers.len(), f)
    }

    /// Begins shutdown and returns at once (callable from a signal-handling thread or a
    /// fiber): in-flight I/O is cancelled (it fails with `ECANCELED`), new I/O and spawns
    /// fail, runnable fibers run until they park; then fibers still parked on sync
    /// primitives are torn down (their stacks unwound, destructors run) and the workers
    /// exit. Dropping the [`Runtime`] waits for that.
    pub fn shutdown(&self) {
        self.shared.shutdown();
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.state() != RUNNING
    }

    /// A snapshot of the runtime's counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }
}

/// A fiber runtime: worker threads, each with an io_uring and a run queue.
///
/// Dropping it shuts it down and waits for the workers to exit.
pub struct Runtime {
    handle: Handle,
    threads: Vec<thread::JoinHandle<()>>,
    completer: Option<thread::JoinHandle<()>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.threads.len())
            .finish()
    }
}

impl Runtime {
    /// A runtime with the default settings.
    pub fn new() -> Result<Runtime, Error> {
        Builder::default().build()
    }

    /// A builder for a runtime with other settings.
    pub fn builder() -> Builder {
        Builder::default()
    }

    fn start(config: Config, features: Features) -> Result<Runtime, Error> {
        let n = config.workers;
        let locals: Vec<_> = (0..n)
            .map(|_| crossbeam_deque::Worker::new_fifo())
            .collect();
        let stealers = locals
            .iter()
            .map(crossbeam_deque::Worker::stealer)
            .collect();
        let workers = (0..n)
            .map(|i| WorkerShared::new(i, config.completer).map(Arc::new))
            .collect::<Result<Vec<_>, Error>>()?;
        let completer = if config.completer {
            Some(completer::Shared::new().map_err(|source| Error::Worker { worker: n, source })?)
        } else {
            None
        };
        let shared = Arc::new(Shared {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            stacks: StackPool::new(config.stack_size),
            config,
            features,
            injector: Injector::new(),
            stealers,
            workers,
            state: AtomicU8::new(RUNNING),
            registry: (0..REGISTRY_SHARDS)
                .map(|_| Mutex::new(Slab::new()))
                .collect(),
            next_id: AtomicU64::new(0),
            spawned: Counter::default(),
            completer,
            teardown_by: AtomicUsize::new(usize::MAX),
            teardowns: AtomicUsize::new(0),
        });
        lock(&LIVE).push((shared.id, Arc::downgrade(&shared)));

        let (threads, mut failure) = Self::start_workers(&shared, locals);
        let mut completer_thread = None;
        if failure.is_none() && shared.completer.is_some() {
            match completer::spawn(Arc::clone(&shared)) {
                Ok(t) => completer_thread = Some(t),
                Err(source) => failure = Some(Error::Worker { worker: n, source }),
            }
        }
        let rt = Runtime {
            handle: Handle { shared },
            threads,
            completer: completer_thread,
        };
        match failure {
            Some(e) => {
                // Not every worker is up, so nobody could detect quiescence: stop outright.
                // Dropping `rt` joins the workers that did start.
                rt.handle.shared.set_state(STOPPED);
                rt.handle.shared.wake_all();
                Err(e)
            }
            None => Ok(rt),
        }
    }

    /// Spawns a thread per worker and waits until each has set up its ring (or failed to):
    /// the threads that started, and the first failure, if any.
    fn start_workers(
        shared: &Arc<Shared>,
        locals: Vec<crossbeam_deque::Worker<FiberRef>>,
    ) -> (Vec<thread::JoinHandle<()>>, Option<Error>) {
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut threads = Vec::with_capacity(locals.len());
        let mut failure = None;
        for (i, local) in locals.into_iter().enumerate() {
            match worker::spawn(Arc::clone(shared), i, local, ready_tx.clone()) {
                Ok(t) => threads.push(t),
                Err(source) => {
                    failure = Some(Error::Worker { worker: i, source });
                    break;
                }
            }
        }
        drop(ready_tx);
        for _ in 0..threads.len() {
            match ready_rx.recv() {
                Ok((_, Ok(()))) => {}
                Ok((i, Err(e))) => {
                    failure.get_or_insert(if e.kind() == std::io::ErrorKind::InvalidInput {
                        Error::Worker {
                            worker: i,
                            source: e,
                        }
                    } else {
                        Error::from_setup(e)
                    });
                }
                Err(_) => break,
            }
        }
        (threads, failure)
    }

    /// Runs `f` on a fiber and blocks the calling thread until it returns.
    ///
    /// Called from a fiber of this runtime, it parks that fiber instead.
    pub fn block_on<F, T>(&self, f: F) -> Result<T, JoinError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn(f).join()
    }

    /// Spawns a fiber; see [`Handle::spawn`].
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.handle.spawn(f)
    }

    /// A handle for other threads (a signal thread that will call [`Handle::shutdown`]).
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// A snapshot of the runtime's counters.
    pub fn stats(&self) -> Stats {
        self.handle.stats()
    }

    /// Begins shutdown without waiting; see [`Handle::shutdown`].
    pub fn shutdown(&self) {
        self.handle.shutdown();
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.handle.shared.workers.len()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let shared = &self.handle.shared;
        shared.shutdown();
        for t in self.threads.drain(..) {
            // A worker that panicked has nothing left to clean up here.
            let _ = t.join();
        }
        shared.set_state(STOPPED);
        shared.wake_all();
        if let Some(t) = self.completer.take() {
            let _ = t.join();
        }
    }
}
