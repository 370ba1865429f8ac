//! Counters of what the runtime did, per worker and in total.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter bumped by (mostly) one thread and read by anyone.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn inc(&self) {
        self.add(1);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A counter only its worker's thread bumps (others only read it): a plain load and
/// store, no locked read-modify-write on the hot path.
#[derive(Debug, Default)]
pub(crate) struct LocalCounter(AtomicU64);

impl LocalCounter {
    pub(crate) fn add(&self, n: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    pub(crate) fn inc(&self) {
        self.add(1);
    }

    pub(crate) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The live counters of one worker; all but the wake-ups (sent by other threads) are
/// bumped by the worker alone.
#[derive(Debug, Default)]
pub(crate) struct WorkerCounters {
    pub(crate) resumes: LocalCounter,
    pub(crate) resumes_direct: LocalCounter,
    pub(crate) steal_attempts: LocalCounter,
    pub(crate) steals: LocalCounter,
    pub(crate) stolen_fibers: LocalCounter,
    pub(crate) wakes_remote: Counter,
    pub(crate) cross_ring_ops: LocalCounter,
    pub(crate) injector_pops: LocalCounter,
    pub(crate) ops_submitted: LocalCounter,
    pub(crate) enters: LocalCounter,
    pub(crate) completions_own: LocalCounter,
    pub(crate) completions_stolen: LocalCounter,
    pub(crate) sleeps: LocalCounter,
    pub(crate) wakes_msg_ring: Counter,
    pub(crate) wakes_eventfd: Counter,
    pub(crate) cq_overflows: LocalCounter,
    pub(crate) fixed_files: LocalCounter,
    pub(crate) files_direct: LocalCounter,
    pub(crate) files_to_ring: LocalCounter,
    pub(crate) sends_direct: LocalCounter,
    /// Fibers this worker spawned and finished (off-worker spawns count in `Shared`).
    pub(crate) spawned: LocalCounter,
    pub(crate) finished: LocalCounter,
    /// Stacks in this worker's cache (`WorkerCtx::stacks`): counted in use by the pool, but
    /// held by no fiber.
    pub(crate) stacks_cached: LocalCounter,
}

impl WorkerCounters {
    pub(crate) fn snapshot(&self) -> WorkerStats {
        WorkerStats {
            resumes: self.resumes.get(),
            resumes_direct: self.resumes_direct.get(),
            steal_attempts: self.steal_attempts.get(),
            steals: self.steals.get(),
            stolen_fibers: self.stolen_fibers.get(),
            wakes_remote: self.wakes_remote.get(),
            cross_ring_ops: self.cross_ring_ops.get(),
            injector_pops: self.injector_pops.get(),
            ops_submitted: self.ops_submitted.get(),
            enters: self.enters.get(),
            completions_own: self.completions_own.get(),
            completions_stolen: self.completions_stolen.get(),
            sleeps: self.sleeps.get(),
            wakes_msg_ring: self.wakes_msg_ring.get(),
            wakes_eventfd: self.wakes_eventfd.get(),
            cq_overflows: self.cq_overflows.get(),
            fixed_files: self.fixed_files.get(),
            files_direct: self.files_direct.get(),
            files_to_ring: self.files_to_ring.get(),
            sends_direct: self.sends_direct.get(),
        }
    }
}

/// What one worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Fiber resumes (context switches into a fiber).
    pub resumes: u64,
    /// Of the resumes, those a yielding fiber made itself, switching straight to the next
    /// fiber of its worker's queue instead of through the worker's loop (a runtime that
    /// pins fibers).
    pub resumes_direct: u64,
    /// Times this worker looked for fibers to steal in the other workers' run queues (with
    /// work stealing; one attempt looks at every other worker until one gives a batch).
    pub steal_attempts: u64,
    /// Attempts that took a batch of fibers.
    pub steals: u64,
    /// Fibers this worker stole from other workers' run queues (the batches added up).
    pub stolen_fibers: u64,
    /// Fibers made runnable on this worker's queue by another thread: a wake-up of a
    /// pinned fiber from another worker, the Completer or a plain thread (its remote
    /// queue). With work stealing a worker wakes a fiber onto its own queue instead (the
    /// fiber moves to the waker); such moves show up as steals and cross-ring operations.
    pub wakes_remote: u64,
    /// Stream operations this worker pushed on its ring for a socket another worker's ring
    /// owns (the one that did its first operation, and holds its multishot recv and its
    /// fixed-file slot): a fiber that moved (stolen, or woken elsewhere) doing I/O.
    pub cross_ring_ops: u64,
    /// Fibers this worker took from the injector (work from outside the workers).
    pub injector_pops: u64,
    /// SQEs of user operations this worker pushed on its ring.
    pub ops_submitted: u64,
    /// `io_uring_enter` calls this worker made (submissions and waits).
    pub enters: u64,
    /// Completions this worker reaped from its own ring.
    pub completions_own: u64,
    /// Completions this worker reaped from other workers' rings (I/O stealing).
    pub completions_stolen: u64,
    /// Times this worker went to sleep in its ring.
    pub sleeps: u64,
    /// Wake-ups sent to this worker as IORING_OP_MSG_RING messages.
    pub wakes_msg_ring: u64,
    /// Wake-ups sent to this worker through its eventfd.
    pub wakes_eventfd: u64,
    /// Reaping passes that found the CQ overflowed (completions parked on the kernel's
    /// overflow list because the CQ was full): a sign the CQ is too small for the load.
    pub cq_overflows: u64,
    /// Sockets this worker registered in its ring's table of fixed files
    /// ([`Builder::fixed_files`](crate::Builder::fixed_files)).
    pub fixed_files: u64,
    /// File operations (open, read, close) a fiber of this worker finished with a direct
    /// system call, without the ring ([`FileOps::Direct`](crate::FileOps::Direct)).
    pub files_direct: u64,
    /// File operations tried directly that had to go to the ring after all: the kernel
    /// would have waited (`EAGAIN`), or does not do the direct call.
    pub files_to_ring: u64,
    /// Stream writes a fiber of this worker sent with a direct `send(2)`, without an op:
    /// its worker had nothing else to run and the socket had room (see `TcpStream::write`).
    /// Published each time the worker goes idle, so a busy worker's figure lags.
    pub sends_direct: u64,
}

impl WorkerStats {
    fn add(&mut self, o: &WorkerStats) {
        self.resumes += o.resumes;
        self.resumes_direct += o.resumes_direct;
        self.steal_attempts += o.steal_attempts;
        self.steals += o.steals;
        self.stolen_fibers += o.stolen_fibers;
        self.wakes_remote += o.wakes_remote;
        self.cross_ring_ops += o.cross_ring_ops;
        self.injector_pops += o.injector_pops;
        self.ops_submitted += o.ops_submitted;
        self.enters += o.enters;
        self.completions_own += o.completions_own;
        self.completions_stolen += o.completions_stolen;
        self.sleeps += o.sleeps;
        self.wakes_msg_ring += o.wakes_msg_ring;
        self.wakes_eventfd += o.wakes_eventfd;
        self.cq_overflows += o.cq_overflows;
        self.fixed_files += o.fixed_files;
        self.files_direct += o.files_direct;
        self.files_to_ring += o.files_to_ring;
        self.sends_direct += o.sends_direct;
    }
}

/// A snapshot of the runtime's counters, from [`Runtime::stats`](crate::Runtime::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Per worker, by index.
    pub workers: Vec<WorkerStats>,
    /// Fibers spawned.
    pub fibers_spawned: u64,
    /// Fibers that returned, panicked or were torn down.
    pub fibers_finished: u64,
    /// Completions the Completer thread reaped from workers' rings.
    pub completions_completer: u64,
    /// Times the Completer thread woke up.
    pub completer_wakeups: u64,
    /// Stacks handed to fibers now.
    pub stacks_in_use: usize,
    /// Stacks ever carved from mappings (the pool's size).
    pub stacks_carved: usize,
    /// Mappings the stacks were carved from.
    pub stack_mappings: usize,
    /// How guard pages are made: `"madvise"` (no extra VMA), `"mprotect"`, or `"-"` before
    /// the first stack.
    pub guard_pages: &'static str,
    /// io_uring operations alive in the whole process (not only this runtime): in flight,
    /// or completed and not yet dropped. Each owns the memory the kernel reads or writes.
    pub ops_live: usize,
}

impl Stats {
    /// The workers' counters added up.
    pub fn total(&self) -> WorkerStats {
        let mut t = WorkerStats::default();
        for w in &self.workers {
            t.add(w);
        }
        t
    }

    /// Fibers alive now (spawned and not finished).
    pub fn fibers_live(&self) -> u64 {
        self.fibers_spawned.saturating_sub(self.fibers_finished)
    }

    /// The scheduling counters divided by `units` (echoes, requests): what each unit of
    /// work cost in resumes, kernel entries, steals and wake-ups. `Display`s as one line.
    pub fn per(&self, units: u64) -> PerUnit {
        PerUnit {
            total: self.total(),
            units,
        }
    }
}

/// The scheduling counters per unit of work, from [`Stats::per`].
#[derive(Debug, Clone, Copy)]
pub struct PerUnit {
    total: WorkerStats,
    units: u64,
}

impl fmt::Display for PerUnit {
    /// One line of `key=value` pairs with three decimals.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.total;
        let n = self.units.max(1) as f64;
        let pairs = [
            ("resumes", t.resumes),
            ("ops", t.ops_submitted),
            ("sends_direct", t.sends_direct),
            ("enters", t.enters),
            ("sleeps", t.sleeps),
            ("steal_attempts", t.steal_attempts),
            ("steals", t.steals),
            ("stolen_fibers", t.stolen_fibers),
            ("wakes_remote", t.wakes_remote),
            ("wakes_msg_ring", t.wakes_msg_ring),
            ("wakes_eventfd", t.wakes_eventfd),
            ("cross_ring_ops", t.cross_ring_ops),
        ];
        write!(f, "units={}", self.units)?;
        for (k, v) in pairs {
            write!(f, " {k}={:.3}", v as f64 / n)?;
        }
        Ok(())
    }
}

impl fmt::Display for Stats {
    /// One line of `key=value` pairs, for a server's exit report.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.total();
        write!(
            f,
            "workers={} fibers_spawned={} fibers_live={} resumes={} resumes_direct={} \
             steal_attempts={} \
             steals={} stolen_fibers={} wakes_remote={} cross_ring_ops={} \
             injector_pops={} ops={} sends_direct={} enters={} cqe_own={} cqe_stolen={} \
             cqe_completer={} sleeps={} wakes_msg_ring={} wakes_eventfd={} cq_overflows={} fixed_files={} \
             files_direct={} files_to_ring={} stacks_in_use={} stacks_carved={} \
             stack_mappings={} guard={} ops_live={}",
            self.workers.len(),
            self.fibers_spawned,
            self.fibers_live(),
            t.resumes,
            t.resumes_direct,
            t.steal_attempts,
            t.steals,
            t.stolen_fibers,
            t.wakes_remote,
            t.cross_ring_ops,
            t.injector_pops,
            t.ops_submitted,
            t.sends_direct,
            t.enters,
            t.completions_own,
            t.completions_stolen,
            self.completions_completer,
            t.sleeps,
            t.wakes_msg_ring,
            t.wakes_eventfd,
            t.cq_overflows,
            t.fixed_files,
            t.files_direct,
            t.files_to_ring,
            self.stacks_in_use,
            self.stacks_carved,
            self.stack_mappings,
            self.guard_pages,
            self.ops_live,
        )
    }
}
