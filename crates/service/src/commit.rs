//! Group commit for `--fsync always`: one `fdatasync(2)` covers every append to a room
//! file since the last one, on a thread of its own, so that no runtime's event loop
//! waits for the disk and a burst of `SAY`s costs one sync, not one each.
//!
//! ```text
//!  conn A: SAY r x ─► append (write(2), room locked) ─► Pending ─┐ on_done(ACK A)
//!  conn B: SAY r y ─► append ──────────────────────────► Pending ─┤ on_done(ACK B)
//!                                                                 ▼
//!  commit thread:  take every waiter ─► fdatasync each file once ─► call each on_done
//!                  (appends arriving meanwhile wait for the next round)
//! ```
//!
//! The sender's `ACK` is produced by the `on_done` callback (through the connection's
//! own queue), so it follows the sync; the connection handles no further command of its
//! own until then, while its runtime serves every other connection. Live `MSG` lines
//! to other subscribers are offered at append time, before the sync: a power loss can
//! lose a message a subscriber saw, never one whose sender got its `ACK`.
//!
//! A failed `fdatasync` fails every `SAY` of its round with `ERR storage failure`, and
//! the room file refuses every later append until the server restarts: after a failed
//! sync the kernel may have dropped the dirty pages, so what is on the disk is unknown.
//!
//! Tests can hold a round: with `RINGSIDE_TEST_SYNC_GATE=<path>` in the environment,
//! before each sync the commit thread creates `<path>.pending` and waits (at most 60 s)
//! until `<path>` exists. The inline sync of [`crate::log::RoomLog::append`] (srv-threads
//! `--mode process`, where each connection is a process and has no loop to keep free)
//! waits at the same gate. Nothing else reads that variable.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The environment variable that names a test's sync gate (see the module docs).
pub const SYNC_GATE_ENV: &str = "RINGSIDE_TEST_SYNC_GATE";

/// What the commit thread syncs for one room file: a handle on the file, and whether a
/// sync of it ever failed.
#[derive(Debug)]
pub struct SyncTarget {
    file: File,
    failed: AtomicBool,
}

impl SyncTarget {
    pub(crate) fn new(file: File) -> Self {
        SyncTarget {
            file,
            failed: AtomicBool::new(false),
        }
    }

    /// Whether a sync of this file failed: then nothing more may be appended to it.
    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    fn sync(&self) -> io::Result<()> {
        if self.has_failed() {
            return Err(io::Error::other("an earlier fdatasync of this room failed"));
        }
        let result = self.file.sync_data();
        if result.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        result
    }
}

/// Called once with the outcome of the sync that covers an append.
type Done = Box<dyn FnOnce(io::Result<()>) + Send>;

/// The group-commit queue of one hub and its thread, started with the first waiter.
#[derive(Clone)]
pub struct GroupCommit(Arc<Shared>);

impl fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("GroupCommit")
            .field("waiting", &st.waiting.len())
            .field("rounds", &st.rounds)
            .finish_non_exhaustive()
    }
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    gate: Option<PathBuf>,
}

#[derive(Default)]
struct State {
    waiting: Vec<(Arc<SyncTarget>, Done)>,
    started: bool,
    stop: bool,
    /// Sync rounds done, for tests and the debug view.
    rounds: u64,
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit::new()
    }
}

impl GroupCommit {
    /// A queue with no thread yet; the first [`GroupCommit::submit`] starts it.
    pub fn new() -> Self {
        GroupCommit(Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            gate: test_gate().map(PathBuf::from),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Callbacks run outside the lock, so a panic cannot leave it half-updated.
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `done` to be called, on the commit thread, with the outcome of the next
    /// sync of `target` that starts after this call.
    pub fn submit(&self, target: Arc<SyncTarget>, done: Done) {
        let mut st = self.lock();
        if st.stop {
            drop(st);
            done(Err(io::Error::other("the server is stopping")));
            return;
        }
        st.waiting.push((target, done));
        if !st.started {
            st.started = true;
            let shared = Arc::clone(&self.0);
            let spawned = std::thread::Builder::new()
                .name("group-commit".into())
                .spawn(move || run(&shared));
            if let Err(e) = spawned {
                st.started = false;
                let waiting = std::mem::take(&mut st.waiting);
                drop(st);
                for (_, done) in waiting {
                    done(Err(io::Error::new(e.kind(), e.to_string())));
                }
                return;
            }
        }
        drop(st);
        self.0.work.notify_one();
    }

    /// Sync rounds done so far.
    pub fn rounds(&self) -> u64 {
        self.lock().rounds
    }

    /// Lets the thread finish what is queued and exit.
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.0.work.notify_one();
    }
}

/// A sync's outcome, copyable to every waiter it covers (`io::Error` is not `Clone`).
type Outcome = Result<(), (io::ErrorKind, String)>;

/// The commit thread: takes every waiter at once, syncs each file among them once,
/// then answers them all.
fn run(shared: &Shared) {
    let lock = || shared.state.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let batch = {
            let mut st = lock();
            while st.waiting.is_empty() && !st.stop {
                st = shared.work.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            if st.waiting.is_empty() {
                return;
            }
            std::mem::take(&mut st.waiting)
        };
        if let Some(gate) = &shared.gate {
            wait_at_gate(gate);
        }
        let mut synced: Vec<(&Arc<SyncTarget>, Outcome)> = Vec::new();
        for (target, _) in &batch {
            if !synced.iter().any(|(t, _)| Arc::ptr_eq(t, target)) {
                let result = target.sync().map_err(|e| (e.kind(), e.to_string()));
                synced.push((target, result));
            }
        }
        let outcomes: Vec<_> = batch
            .iter()
            .map(|(target, _)| {
                let (_, r) = synced
                    .iter()
                    .find(|(t, _)| Arc::ptr_eq(t, target))
                    .expect("every target of the batch was synced");
                r.clone()
            })
            .collect();
        lock().rounds += 1;
        for ((_, done), outcome) in batch.into_iter().zip(outcomes) {
            done(outcome.map_err(|(kind, text)| io::Error::new(kind, text)));
        }
    }
}

/// The sync gate of [`SYNC_GATE_ENV`], read once.
pub(crate) fn test_gate() -> Option<&'static Path> {
    static GATE: OnceLock<Option<PathBuf>> = OnceLock::new();
    GATE.get_or_init(|| std::env::var_os(SYNC_GATE_ENV).map(PathBuf::from))
        .as_deref()
}

/// The test hook: announces a pending sync, then waits for the test to open the gate.
pub(crate) fn wait_at_gate(gate: &Path) {
    let mut pending = gate.as_os_str().to_owned();
    pending.push(".pending");
    let _ = File::create(&pending);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gate.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = std::fs::remove_file(&pending);
}

/// An append written to its room file and not yet durable: the sender's `ACK` waits for
/// it. Drop it and the sync still happens; nobody hears of it.
#[must_use = "the ACK waits for this sync"]
pub struct Pending {
    commit: GroupCommit,
    target: Arc<SyncTarget>,
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

impl Pending {
    pub(crate) fn new(commit: GroupCommit, target: Arc<SyncTarget>) -> Self {
        Pending { commit, target }
    }

    /// Calls `done` with the outcome of the sync that covers the append, on the commit
    /// thread (or at once, on the caller's, if the commit thread cannot run): it must
    /// not block, only hand the outcome to the connection and wake it.
    pub fn on_done(self, done: impl FnOnce(io::Result<()>) + Send + 'static) {
        self.commit.submit(self.target, Box::new(done));
    }

    /// Blocks the calling thread until the append is durable.
    pub fn wait(self) -> io::Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.on_done(move |r| {
            let _ = tx.send(r);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(io::Error::other("the commit thread is gone")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(dir: &tempfile::TempDir, name: &str) -> Arc<SyncTarget> {
        let file = File::create(dir.path().join(name)).unwrap();
        Arc::new(SyncTarget::new(file))
    }

    #[test]
    fn every_waiter_hears_and_one_round_covers_a_burst() {
        let dir = tempfile::tempdir().unwrap();
        let commit = GroupCommit::new();
        let (a, b) = (target(&dir, "a"), target(&dir, "b"));
        let (tx, rx) = std::sync::mpsc::channel();
        // Hold the thread on a first round so the burst queues up behind it.
        let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
        commit.submit(
            Arc::clone(&a),
            Box::new(move |r| {
                r.unwrap();
                hold_rx.recv_timeout(Duration::from_secs(10)).unwrap();
            }),
        );
        for i in 0..10 {
            let tx = tx.clone();
            let t = if i % 2 == 0 { &a } else { &b };
            Pending::new(commit.clone(), Arc::clone(t)).on_done(move |r| {
                tx.send((i, r.is_ok())).unwrap();
            });
        }
        hold_tx.send(()).unwrap();
        let mut heard: Vec<_> = (0..10)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        heard.sort_unstable();
        assert_eq!(heard, (0..10).map(|i| (i, true)).collect::<Vec<_>>());
        // The first round and at most a few more: never one per waiter.
        assert!(commit.rounds() < 10, "{commit:?}");
        assert!(Pending::new(commit.clone(), a).wait().is_ok());
        commit.stop();
        assert!(Pending::new(commit, b).wait().is_err());
    }

    #[test]
    fn a_failed_target_fails_every_later_sync() {
        let dir = tempfile::tempdir().unwrap();
        let t = target(&dir, "a");
        t.failed.store(true, Ordering::Release);
        assert!(Pending::new(GroupCommit::new(), t).wait().is_err());
    }
}
