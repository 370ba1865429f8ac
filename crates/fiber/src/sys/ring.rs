//! One io_uring per worker: a submission side only its owner thread touches, and a
//! completion side any thread may reap under the ring's CQ lock.
//!
//! [`RingOwner`] is `!Send` and exists once per ring, created on the thread that will submit
//! (so `IORING_SETUP_SINGLE_ISSUER` holds); it is the only way to reach the SQ or call
//! `io_uring_enter`. [`RingShared`] is the `Sync` half: the completion queue, behind a try-lock
//! that the owner, the Completer thread and I/O-stealing workers race for (the paper's CQ
//! lock), and the ring fd that other workers target with `IORING_OP_MSG_RING`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use std::time::{Duration, Instant};

use io_uring::{IoUring, Probe, opcode, squeue, types};

use super::bufring::{BGID, BufRing};
use super::cvt;
use super::files::FixedFiles;
use super::op::{self, OpRef, Reaped, Sqe};
use crate::park::Waker;

/// Ring setup options, as the runtime builder passes them down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RingSetup {
    pub(crate) entries: u32,
    /// Completion queue entries (0: four times `entries`). A worker's CQ must hold every
    /// completion that can arrive between two reaps, about the operations in flight (one
    /// multishot recv per connection), or the kernel parks the excess on its overflow list.
    pub(crate) cq_entries: u32,
    pub(crate) single_issuer: bool,
    pub(crate) defer_taskrun: bool,
    pub(crate) coop_taskrun: bool,
    pub(crate) sqpoll_idle_ms: Option<u32>,
    /// A provided-buffer ring for multishot recv: (buffers, bytes each).
    pub(crate) provided_bufs: Option<(u16, usize)>,
    /// Slots of a table of fixed files (see [`FixedFiles`]); 0: no table. The ring does
    /// without one where the kernel refuses it.
    pub(crate) fixed_files: u32,
    /// Whether threads other than the owner reap this ring ([`RingShared::try_reap_foreign`]: the
    /// Completer, workers stealing I/O). Without them the owner reaps without the CQ lock.
    pub(crate) reaped_by_others: bool,
}

/// What the running kernel supports, probed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Features {
    pub(crate) msg_ring: bool,
    /// Multishot accept and provided-buffer rings (5.19; `IORING_OP_SOCKET` arrived in the
    /// same release).
    pub(crate) accept_multishot: bool,
    /// Multishot recv (6.0; `IORING_OP_SEND_ZC` arrived in the same release).
    pub(crate) recv_multishot: bool,
}

/// Opcodes the runtime cannot work without.
const REQUIRED: &[(u8, &str)] = &[
    (opcode::Accept::CODE, "ACCEPT"),
    (opcode::Connect::CODE, "CONNECT"),
    (opcode::Recv::CODE, "RECV"),
    (opcode::Send::CODE, "SEND"),
    (opcode::Read::CODE, "READ"),
    (opcode::Write::CODE, "WRITE"),
    (opcode::OpenAt::CODE, "OPENAT"),
    (opcode::Close::CODE, "CLOSE"),
    (opcode::Fsync::CODE, "FSYNC"),
    (opcode::Timeout::CODE, "TIMEOUT"),
    (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    (opcode::Shutdown::CODE, "SHUTDOWN"),
];

/// Creates a small ring to find out whether io_uring works here and what it supports.
/// `Err` carries the OS error (ENOSYS, EPERM, ...) or names a missing opcode.
pub(crate) fn probe() -> Result<Features, ProbeError> {
    let ring = IoUring::new(2).map_err(ProbeError::Setup)?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(ProbeError::Setup)?;
    for &(code, name) in REQUIRED {
        if !probe.is_supported(code) {
            return Err(ProbeError::Missing(name));
        }
    }
    Ok(Features {
        msg_ring: probe.is_supported(opcode::MsgRingData::CODE),
        accept_multishot: probe.is_supported(opcode::Socket::CODE),
        recv_multishot: probe.is_supported(opcode::SendZc::CODE),
    })
}

/// Why [`probe`] failed.
#[derive(Debug)]
pub(crate) enum ProbeError {
    Setup(io::Error),
    Missing(&'static str),
}

/// The shared half of a ring.
pub(crate) struct RingShared {
    uring: IoUring,
    /// The CQ lock: held by whoever is reaping this ring's completions, where others than
    /// the owner may (`reaped_by_others`).
    cq_lock: AtomicBool,
    reaped_by_others: bool,
    /// User operations pushed and not yet finally completed.
    in_flight: AtomicUsize,
    /// Multishot recvs whose reader fell behind, to be cancelled by the owner (whoever
    /// reaped the CQE that found them so, but only the owner may touch the SQ).
    throttled: Mutex<Vec<OpRef>>,
    /// Whether `throttled` may be non-empty: the owner checks this every round, the lock
    /// only when it is set.
    has_throttled: AtomicBool,
    /// Provided buffers for multishot recv. Declared after `uring` so that it is unmapped
    /// only after the ring is closed.
    bufs: Option<Arc<BufRing>>,
}

impl std::fmt::Debug for RingShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingShared")
            .field("fd", &self.uring.as_raw_fd())
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish()
    }
}

/// Counts of what one reaping pass found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReapCount {
    /// CQEs of user operations.
    pub(crate) ops: usize,
    /// Wake-up messages and internal completions.
    pub(crate) other: usize,
    /// Of `other`: wake-ups meant for the ring's owner (MSG_RING messages, its eventfd read
    /// completing). A thread that reaps another worker's ring must pass these on, or the
    /// owner, asleep in the ring, never learns of them.
    pub(crate) wakeups: usize,
}

struct CqGuard<'a>(&'a AtomicBool);

impl Drop for CqGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Clears an owner's `reaping` flag when its reap ends (also by a panic in a `wake`).
struct Reaping<'a>(&'a Cell<bool>);

impl Drop for Reaping<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl RingShared {
    /// The ring's fd, as a MSG_RING target.
    pub(crate) fn fd(&self) -> RawFd {
        self.uring.as_raw_fd()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Whether multishot recvs wait to be cancelled for falling behind (see
    /// [`RingOwner::cancel_throttled`]).
    pub(crate) fn has_throttled(&self) -> bool {
        self.has_throttled.load(Ordering::Acquire)
    }

    /// Reaps up to `max` CQEs of a ring this thread does not own, if the ring lets others
    /// reap it and nobody else is reaping it. Each op's waiter goes to `wake`. Returns
    /// `None` if another thread holds the CQ lock, or the ring is its owner's alone.
    pub(crate) fn try_reap_foreign(
        &self,
        max: usize,
        wake: impl FnMut(Waker),
    ) -> Option<ReapCount> {
        if !self.reaped_by_others {
            return None;
        }
        self.reap_locked(max, wake)
    }

    /// Reaps under the CQ lock; `None` if another thread holds it.
    fn reap_locked(&self, max: usize, wake: impl FnMut(Waker)) -> Option<ReapCount> {
        if self.cq_lock.swap(true, Ordering::Acquire) {
            return None;
        }
        let _guard = CqGuard(&self.cq_lock);
        // SAFETY: the CQ lock is held, so nobody else reaps meanwhile; the guard releases it
        // after `reap` returned.
        Some(unsafe { self.reap(max, wake) })
    }

    /// Reaps up to `max` CQEs; each op's waiter goes to `wake`.
    ///
    /// # Safety
    ///
    /// Nobody else reaps this ring until this returns (the CQ lock is held, or this is the
    /// owner of a ring nobody else reaps, or the ring is being dropped).
    unsafe fn reap(&self, max: usize, mut wake: impl FnMut(Waker)) -> ReapCount {
        let mut count = ReapCount::default();
        // SAFETY: per the caller no other `CompletionQueue` of this ring exists; this one is
        // dropped (publishing the new head) before the function returns.
        let mut cq = unsafe { self.uring.completion_shared() };
        for cqe in (&mut cq).take(max) {
            let data = match (io_uring::cqueue::buffer_select(cqe.flags()), &self.bufs) {
                (Some(bid), Some(bufs)) => {
                    let len = usize::try_from(cqe.result()).unwrap_or(0);
                    // SAFETY: the CQE selected buffer `bid` of this ring's buffer group and
                    // reports `len` bytes in it; this CQE is consumed once, here.
                    unsafe { BufRing::lend(bufs, bid, len) }
                }
                _ => None,
            };
            // SAFETY: [1] a CQE of this ring, whose SQEs carry `user_data` made by
            // `op::into_user_data` or the tags of `op`; [2] consumed from the CQ once, here.
            match unsafe { op::decode(cqe.user_data(), cqe.result(), cqe.flags(), data) } {
                Reaped::Op {
                    waiter,
                    internal,
                    last,
                    throttle,
                } => {
                    if let Some(op) = throttle {
                        self.throttled
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(op);
                        self.has_throttled.store(true, Ordering::Release);
                    }
                    // Wake first, then drop the in-flight count: whoever sees the count at
                    // zero (shutdown's quiescence check) then also sees the woken fiber queued.
                    if let Some(w) = waiter {
                        wake(w);
                    }
                    if internal {
                        count.other += 1;
                        count.wakeups += 1;
                    } else {
                        count.ops += 1;
                        if last {
                            self.in_flight.fetch_sub(1, Ordering::AcqRel);
                        }
                    }
                }
                Reaped::Wake => {
                    count.other += 1;
                    count.wakeups += 1;
                }
                Reaped::Ignored => count.other += 1,
            }
        }
        drop(cq);
        count
    }
}

impl Drop for RingShared {
    fn drop(&mut self) {
        // Release what already completed; an op still in flight keeps its memory (its reference
        // stays in the kernel's hands and is leaked), because the kernel may still write it
        // while it tears the ring down asynchronously.
        // SAFETY: `&mut self`: nobody else holds the ring.
        let _ = unsafe { self.reap(usize::MAX, drop) };
        if self.in_flight() > 0 {
            // The kernel may still pick and fill provided buffers: never unmap them.
            std::mem::forget(self.bufs.take());
        }
    }
}

/// The submitting half of a ring; one per ring, on its creator thread.
pub(crate) struct RingOwner {
    shared: Arc<RingShared>,
    /// Set while this owner reaps without the CQ lock: a reap from inside a `wake` finds
    /// it set and reaps nothing.
    reaping: Cell<bool>,
    /// SQEs pushed since the last `io_uring_enter`.
    pending: Cell<u32>,
    /// SQEs that found the SQ full, oldest first: they enter the SQ, in order, as the
    /// kernel consumes it, so that a full SQ (or an enter that consumed nothing: a signal,
    /// EBUSY, an error) delays an operation but never fails it.
    backlog: RefCell<VecDeque<squeue::Entry>>,
    /// Whether an SQE not yet submitted may wait in the kernel for an event (one not marked
    /// `Sqe::inline`); cleared once everything pushed has been submitted.
    may_wait: Cell<bool>,
    /// Test hook: the errors the next `io_uring_enter` calls fail with.
    #[cfg(test)]
    fail_enters: RefCell<Vec<i32>>,
    /// `io_uring_enter` calls made, for the stats.
    enters: Cell<u64>,
    /// The ring's index in this thread's table of registered ring fds, when it has one: an
    /// enter then names the ring by that index, and the kernel skips looking its file up
    /// (an `fdget`/`fdput` pair per enter). The table is per thread, so only the thread
    /// that registered may use it: the owner, which `!Send` keeps on it.
    registered: Option<RegisteredRing>,
    /// The table of fixed files, when the setup asked for one and the kernel took it.
    files: Option<FixedFiles>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for RingOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingOwner")
            .field("shared", &self.shared)
            .field("pending", &self.pending.get())
            .finish()
    }
}

impl RingOwner {
    /// Creates a ring on this thread.
    pub(crate) fn new(setup: RingSetup) -> io::Result<RingOwner> {
        let mut b = IoUring::builder();
        if setup.single_issuer || setup.defer_taskrun {
            b.setup_single_issuer();
        }
        if setup.defer_taskrun {
            b.setup_defer_taskrun();
            b.setup_taskrun_flag();
        } else if setup.coop_taskrun {
            b.setup_coop_taskrun();
            b.setup_taskrun_flag();
        }
        if let Some(idle) = setup.sqpoll_idle_ms {
            b.setup_sqpoll(idle);
        }
        let cq = match setup.cq_entries {
            0 => setup.entries.saturating_mul(4),
            n => n,
        };
        b.setup_cqsize(cq.max(16));
        // The kernel caps the CQ (65,536 entries) instead of refusing a larger request.
        b.setup_clamp();
        let uring = b.build(setup.entries.max(8))?;
        // SQPOLL enters only to wake its thread, and the crate's submit knows how.
        let registered = match setup.sqpoll_idle_ms {
            None => RegisteredRing::new(uring.as_raw_fd()),
            Some(_) => None,
        };
        let bufs = match setup.provided_bufs {
            Some((entries, size)) => {
                let br = BufRing::new(entries, size)?;
                // SAFETY: the ring memory of `br` stays mapped until the io_uring is closed:
                // `br` moves into the same `RingShared`, declared after `uring`, and is leaked
                // rather than unmapped if operations are still in flight at drop.
                unsafe {
                    uring.submitter().register_buf_ring_with_flags(
                        br.ring_addr(),
                        br.entries(),
                        BGID,
                        0,
                    )?;
                }
                Some(Arc::new(br))
            }
            None => None,
        };
        let files = match setup.fixed_files {
            0 => None,
            n => FixedFiles::register(&uring, n).ok(),
        };
        Ok(RingOwner {
            shared: Arc::new(RingShared {
                uring,
                cq_lock: AtomicBool::new(false),
                reaped_by_others: setup.reaped_by_others,
                in_flight: AtomicUsize::new(0),
                throttled: Mutex::new(Vec::new()),
                has_throttled: AtomicBool::new(false),
                bufs,
            }),
            reaping: Cell::new(false),
            pending: Cell::new(0),
            backlog: RefCell::new(VecDeque::new()),
            may_wait: Cell::new(false),
            #[cfg(test)]
            fail_enters: RefCell::new(Vec::new()),
            enters: Cell::new(0),
            registered,
            files,
            _not_send: PhantomData,
        })
    }

    /// Registers `fd` in the ring's table of fixed files: its slot, or `None` where there is
    /// no table, it is full or the kernel refused (the file is then named by descriptor).
    pub(crate) fn insert_file(&self, fd: RawFd) -> Option<u32> {
        self.files.as_ref()?.insert(&self.shared.uring, fd)
    }

    /// Empties a slot [`insert_file`](Self::insert_file) filled, after the SQEs already
    /// pushed (which may name it) have reached the kernel.
    pub(crate) fn remove_file(&self, slot: u32) {
        if let Some(files) = &self.files {
            let _ = self.push(files.remove(slot));
        }
    }

    /// Whether the ring has a table of fixed files.
    pub(crate) fn has_fixed_files(&self) -> bool {
        self.files.is_some()
    }

    pub(crate) fn shared(&self) -> &Arc<RingShared> {
        &self.shared
    }

    /// Reaps up to `max` CQEs as the ring's owner; each op's waiter goes to `wake`. `None`
    /// if another thread holds the CQ lock (or this owner is reaping already).
    pub(crate) fn try_reap(&self, max: usize, wake: impl FnMut(Waker)) -> Option<ReapCount> {
        if self.shared.reaped_by_others {
            return self.shared.reap_locked(max, wake);
        }
        if self.reaping.replace(true) {
            return None;
        }
        let _guard = Reaping(&self.reaping);
        // SAFETY: nobody but the owner reaps this ring (`reaped_by_others` is fixed at its
        // setup), the owner is unique and `!Send`, so only its thread gets here, and
        // `reaping` keeps that thread from reaping twice at once.
        Some(unsafe { self.shared.reap(max, wake) })
    }

    pub(crate) fn enters(&self) -> u64 {
        self.enters.get()
    }

    /// Whether enters name the ring by its registered index (see `registered`).
    #[cfg(test)]
    pub(crate) fn is_registered(&self) -> bool {
        self.registered.is_some()
    }

    /// Queues an SQE for the next submission (behind the backlog if the SQ is full). It
    /// cannot fail: the op's reference moves into the SQE, and the SQE reaches the kernel at
    /// a later enter whatever happens meanwhile.
    pub(crate) fn push(&self, sqe: Sqe) -> io::Result<()> {
        let Sqe { entry, op, inline } = sqe;
        if !inline {
            self.may_wait.set(true);
        }
        let counted = op.as_ref().is_some_and(|o| !o.is_internal());
        let entry = match op {
            Some(op) => entry.user_data(op::into_user_data(op)),
            None => entry,
        };
        if counted {
            self.shared.in_flight.fetch_add(1, Ordering::AcqRel);
        }
        let mut backlog = self.backlog.borrow_mut();
        if backlog.is_empty() && self.push_sq(&entry) {
            return Ok(());
        }
        backlog.push_back(entry);
        Ok(())
    }

    /// Puts one entry in the SQ; `false` if it is full.
    fn push_sq(&self, entry: &squeue::Entry) -> bool {
        // SAFETY: [1] this `RingOwner` is the only one for the ring and is `!Send`, so this
        // thread is the only one touching the SQ, and no other `SubmissionQueue` exists (each
        // one is dropped before this function returns); [2] every pointer in the entry points
        // into memory owned by its op (`op/sqe.rs` builds all entries), and the op's reference, moved
        // into `user_data`, keeps that memory alive until the final CQE releases it.
        let pushed = unsafe { self.shared.uring.submission_shared().push(entry) }.is_ok();
        if pushed {
            self.pending.set(self.pending.get() + 1);
        }
        pushed
    }

    /// Moves backlogged entries into the SQ while it has room; whether any are left.
    fn refill_sq(&self) -> bool {
        let mut backlog = self.backlog.borrow_mut();
        while let Some(entry) = backlog.front() {
            if !self.push_sq(entry) {
                return true;
            }
            backlog.pop_front();
        }
        false
    }

    /// Pushes an ASYNC_CANCEL for every multishot recv a reaper found too far ahead of its
    /// reader (`op::RECV_BACKLOG`). A thief or the Completer that reaps such a CQE while
    /// this owner falls asleep does not wake it: the recv's next CQE does, and the owner
    /// then gets here before it sleeps again.
    pub(crate) fn cancel_throttled(&self) {
        // Looked at every round: a load, and the swap only when set.
        if !self.shared.has_throttled.load(Ordering::Acquire)
            || !self.shared.has_throttled.swap(false, Ordering::AcqRel)
        {
            return;
        }
        let ops = std::mem::take(
            &mut *self
                .shared
                .throttled
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for op in ops {
            if !op.is_done() {
                let _ = self.push(Sqe::cancel(&op));
            }
        }
    }

    /// Whether an `io_uring_enter` is needed to make progress: SQEs to submit, deferred task
    /// work to run, or overflowed CQEs to flush.
    pub(crate) fn needs_enter(&self) -> bool {
        if self.unsubmitted() > 0 {
            return true;
        }
        // SAFETY: as in `push`: the owner thread is the only SQ user; the queue is dropped
        // at the end of this statement.
        let sq = unsafe { self.shared.uring.submission_shared() };
        sq.taskrun() || sq.cq_overflow()
    }

    /// Whether the CQ holds completions not yet reaped (posted since the last reap: by the
    /// kernel on its own, or by the last enter).
    pub(crate) fn has_completions(&self) -> bool {
        // SAFETY: only reads the CQ's head and tail. The view is forgotten, not dropped: its
        // drop would store the head it read, and where another thread reaps this ring (the
        // Completer, I/O stealing) that store could move the head back over CQEs reaped
        // meanwhile, which would then be reaped twice.
        let cq = unsafe { self.shared.uring.completion_shared() };
        let empty = cq.is_empty();
        std::mem::forget(cq);
        !empty
    }

    /// Whether completions overflowed the CQ and wait on the kernel's overflow list (they are
    /// not lost: the next enter flushes them, but each one cost the kernel an allocation).
    pub(crate) fn cq_overflowed(&self) -> bool {
        // SAFETY: as in `push`: the owner thread is the only SQ user; the queue is dropped
        // at the end of this statement.
        unsafe { self.shared.uring.submission_shared() }.cq_overflow()
    }

    /// Submits pending SQEs (and, for task-run rings, runs deferred completions) without
    /// waiting.
    pub(crate) fn flush(&self) -> io::Result<()> {
        if self.needs_enter() {
            self.enter(false)?;
        }
        Ok(())
    }

    /// Submits pending SQEs and sleeps until at least one CQE is available.
    pub(crate) fn wait(&self) -> io::Result<()> {
        self.enter(true)
    }

    /// Submits what was pushed if every SQE of it completes, as a rule, while it is
    /// submitted (see `Sqe::inline`: a send, a no-op, a close), and returns whether the
    /// kernel took any. A worker with nothing else to run calls this before it announces
    /// itself idle, and reaps the completions right after, instead of letting them end at
    /// once the sleep that submitting them in the same enter would begin.
    pub(crate) fn submit_inline(&self) -> bool {
        let before = self.unsubmitted();
        if before == 0 || self.may_wait.get() {
            return false;
        }
        let _ = self.enter(false);
        self.unsubmitted() < before
    }

    /// SQEs pushed and not yet taken by the kernel: in the SQ, or in the backlog behind it.
    pub(crate) fn unsubmitted(&self) -> usize {
        self.pending.get() as usize + self.backlog.borrow().len()
    }

    /// Submits everything pushed (the SQ, refilled from the backlog as the kernel consumes
    /// it); with `wait`, the last enter also sleeps until a CQE is available. An enter that
    /// consumed nothing (a signal, EBUSY, EAGAIN) ends the call early: the rest goes at the
    /// next one.
    fn enter(&self, wait: bool) -> io::Result<()> {
        let r = self.enter_all(wait);
        if self.unsubmitted() == 0 {
            self.may_wait.set(false);
        }
        r
    }

    /// [`enter`](Self::enter)'s loop of enters.
    fn enter_all(&self, wait: bool) -> io::Result<()> {
        loop {
            let more = self.refill_sq();
            let wait_now = wait && !more;
            let before = self.pending.get();
            self.enters.set(self.enters.get() + 1);
            match self.enter_once(wait_now) {
                Ok(submitted) => {
                    self.pending
                        .set(before.saturating_sub(u32::try_from(submitted).unwrap_or(u32::MAX)));
                    if !more || submitted == 0 {
                        return Ok(());
                    }
                }
                // A signal, or the CQ is full until we reap: both resolve in the caller's loop.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
                    ) =>
                {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Cancels everything in flight on this ring and reaps (handing each woken waiter to
    /// `wake`) until the kernel has finished with it and `done` holds, or until `grace` has
    /// passed: an operation the kernel cannot cancel must not keep a thread from exiting.
    /// What is left then is leaked with its memory (see `RingShared`'s drop). Returns
    /// whether everything finished.
    pub(crate) fn drain(
        &self,
        grace: Duration,
        mut wake: impl FnMut(Waker),
        done: impl Fn() -> bool,
    ) -> bool {
        let _ = self.push(Sqe::cancel_all());
        let deadline = Instant::now() + grace;
        loop {
            let _ = self.flush();
            self.try_reap(usize::MAX, &mut wake);
            if self.shared.in_flight() == 0 && done() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let _ = self.wait_timeout(left.min(Duration::from_millis(100)));
        }
    }

    /// Submits, and sleeps until a CQE is available or `dur` has passed.
    fn wait_timeout(&self, dur: Duration) -> io::Result<()> {
        self.refill_sq();
        self.enters.set(self.enters.get() + 1);
        let ts = types::Timespec::from(dur);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.shared.uring.submitter().submit_with_args(1, &args) {
            Ok(n) => {
                self.pending.set(
                    self.pending
                        .get()
                        .saturating_sub(u32::try_from(n).unwrap_or(0)),
                );
                Ok(())
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// One `io_uring_enter`: the number of SQEs the kernel consumed.
    fn enter_once(&self, wait: bool) -> io::Result<usize> {
        #[cfg(test)]
        if let Some(errno) = self.fail_enters.borrow_mut().pop() {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if let Some(ring) = &self.registered {
            return self.enter_registered(ring, wait);
        }
        let submitter = self.shared.uring.submitter();
        if wait {
            submitter.submit_and_wait(1)
        } else {
            submitter.submit()
        }
    }

    /// [`enter_once`](Self::enter_once) through the registered index, with the flags the
    /// io-uring crate's `submit_and_wait` would pass (it cannot name a ring by an index it
    /// did not register itself): GETEVENTS to wait, and also to run deferred task work or
    /// flush overflowed CQEs, which only an enter with GETEVENTS does.
    fn enter_registered(&self, ring: &RegisteredRing, wait: bool) -> io::Result<usize> {
        let (to_submit, flags) = {
            // SAFETY: as in `push`: the owner thread is the only SQ user; the queue is
            // dropped at the end of this block, before the enter.
            let sq = unsafe { self.shared.uring.submission_shared() };
            let get_events = wait || sq.taskrun() || sq.cq_overflow();
            (
                u32::try_from(sq.len()).unwrap_or(u32::MAX),
                if get_events { GETEVENTS } else { 0 },
            )
        };
        ring.enter(to_submit, u32::from(wait), flags)
    }

    /// Registers an eventfd the kernel signals on every CQE posted to this ring.
    pub(crate) fn register_eventfd(&self, fd: RawFd) -> io::Result<()> {
        self.shared.uring.submitter().register_eventfd(fd)
    }
}

const GETEVENTS: u32 = 1 << 0;
const REGISTERED_RING: u32 = 1 << 4;
const REGISTER_RING_FDS: libc::c_long = 20;
const UNREGISTER_RING_FDS: libc::c_long = 21;

/// `struct io_uring_rsrc_update`, the argument of (un)registering ring fds.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// A ring's fd registered in the calling thread's io_uring context (Linux 5.18): enters
/// name it by `index`. The owner unregisters it when dropped, on the same thread (it is
/// `!Send`) and while the ring's fd is still open, so that the thread's table (16 slots)
/// never fills with rings that are gone: the registration holds a reference to the ring.
#[derive(Debug)]
struct RegisteredRing {
    index: u32,
}

impl RegisteredRing {
    /// Registers `fd`; `None` where the kernel cannot (before 5.18, or the thread's table
    /// is full): enters then name the ring by its fd, as before.
    fn new(fd: RawFd) -> Option<RegisteredRing> {
        let mut up = RsrcUpdate {
            offset: u32::MAX, // any free slot; the kernel writes back which
            resv: 0,
            data: u64::try_from(fd).ok()?,
        };
        // SAFETY: `up` is a valid `io_uring_rsrc_update` that lives across the call, which
        // reads and writes exactly one of them (nr_args 1); `fd` is an io_uring fd.
        let n = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                libc::c_long::from(fd),
                REGISTER_RING_FDS,
                &raw mut up,
                1 as libc::c_long,
            )
        };
        (n == 1).then_some(RegisteredRing { index: up.offset })
    }

    /// Frees the slot. `ring_fd` is the ring's open fd, which the kernel requires to take
    /// the call (though the slot is what names the registration).
    fn unregister(self, ring_fd: RawFd) {
        let mut up = RsrcUpdate {
            offset: self.index,
            resv: 0,
            data: 0,
        };
        // SAFETY: as in `new`.
        unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                libc::c_long::from(ring_fd),
                UNREGISTER_RING_FDS,
                &raw mut up,
                1 as libc::c_long,
            );
        }
    }

    fn enter(&self, to_submit: u32, min_complete: u32, flags: u32) -> io::Result<usize> {
        // SAFETY: no signal mask or extra argument is passed (null, size 0); `index` names a
        // ring this thread registered and has not unregistered (we are alive).
        let n = cvt(unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                libc::c_long::from(self.index),
                libc::c_long::from(to_submit),
                libc::c_long::from(min_complete),
                libc::c_long::from(flags | REGISTERED_RING),
                std::ptr::null::<libc::c_void>(),
                0 as libc::c_long,
            )
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
impl RingOwner {
    /// Test helper: submits, waits and reaps until `op` is done (at most 10 s, then fails).
    pub(crate) fn complete(&self, op: &OpRef) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !op.is_done() && std::time::Instant::now() < deadline {
            self.wait().unwrap();
            self.try_reap(usize::MAX, drop);
        }
        assert!(op.is_done(), "the operation never completed");
    }
}

impl Drop for RingOwner {
    fn drop(&mut self) {
        if let Some(ring) = self.registered.take() {
            ring.unregister(self.shared.fd());
        }
        if self.files.take().is_some() {
            // The io_uring instance may outlive its owner (the runtime's shared state keeps
            // it): its table must not keep the sockets of dropped streams open meanwhile.
            // Operations in flight keep the files they took.
            let _ = self.shared.uring.submitter().unregister_files();
        }
        // Entries that never reached the kernel: take back the references their ops moved
        // into them.
        for entry in self.backlog.get_mut().drain(..) {
            let ud = entry.get_user_data();
            if ud & op::TAG_MASK == op::TAG_OP && ud != 0 {
                // SAFETY: `ud` came from `into_user_data` in `push`, and the entry never
                // left the backlog, so the kernel never saw it.
                let op = unsafe { op::from_unpushed(ud) };
                if !op.is_internal() {
                    self.shared.in_flight.fetch_sub(1, Ordering::AcqRel);
                }
                op::fail_unsubmitted(&op, libc::ECANCELED);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn small_ring() -> Option<RingOwner> {
        match RingOwner::new(RingSetup {
            entries: 8,
            ..RingSetup::default()
        }) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("skipping: io_uring unavailable: {e}");
                None
            }
        }
    }

    /// A ring nobody but its owner reaps is reaped without the CQ lock: another thread's
    /// `RingShared::try_reap_foreign` reaps nothing, and a reap from inside a wake-up finds the
    /// owner's reap under way and reaps nothing either.
    #[test]
    fn a_ring_only_its_owner_reaps_is_reaped_once_at_a_time() {
        let Some(ring) = small_ring() else { return };
        let ops: Vec<_> = (0..2)
            .map(|_| {
                let (sqe, op) = Sqe::nop();
                ring.push(sqe).unwrap();
                op
            })
            .collect();
        for op in &ops {
            assert_eq!(op.poll(|| Waker::Thread(std::thread::current())), Ok(None));
        }
        ring.wait().unwrap();
        assert_eq!(ring.shared().try_reap_foreign(usize::MAX, drop), None);
        let mut inner = Vec::new();
        let outer = ring.try_reap(usize::MAX, |_| inner.push(ring.try_reap(usize::MAX, drop)));
        assert_eq!(outer.map(|c| c.ops), Some(2));
        assert_eq!(inner, [None, None]);
        assert!(ops.iter().all(|op| op.is_done()));
        assert!(
            ring.try_reap(usize::MAX, drop).is_some(),
            "the flag is cleared"
        );
    }

    /// Where another thread reaps the ring, the owner's look at its CQ
    /// (`has_completions`) must not write the CQ's head: a head written back from before
    /// the other thread's reap would hand the kernel's CQEs out twice (found by wrk against
    /// `srv-fiber --completer`). Every no-op is reaped exactly once.
    #[test]
    fn looking_at_a_ring_another_thread_reaps_reaps_nothing_twice() {
        let Ok(ring) = RingOwner::new(RingSetup {
            entries: 64,
            cq_entries: 4096,
            reaped_by_others: true,
            ..RingSetup::default()
        }) else {
            eprintln!("skipping: io_uring unavailable");
            return;
        };
        const OPS: usize = 20_000;
        let shared = Arc::clone(ring.shared());
        let reaper = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let reap = || {
                shared
                    .try_reap_foreign(usize::MAX, drop)
                    .map_or(0, |c| c.ops)
            };
            let mut reaped = 0;
            while reaped < OPS && std::time::Instant::now() < deadline {
                reaped += reap();
            }
            // A little longer: CQEs reaped twice would show up now.
            reaped + (0..1000).map(|_| reap()).sum::<usize>()
        });
        // Each op held twice over, so that even a CQE reaped twice (which releases the
        // ring's reference twice) frees nothing: the test then counts, instead of crashing.
        let mut ops = Vec::with_capacity(OPS);
        for _ in 0..OPS / 32 {
            for _ in 0..32 {
                let (sqe, op) = Sqe::nop();
                ring.push(sqe).unwrap();
                ops.push((op.clone(), op));
            }
            ring.flush().unwrap();
            for _ in 0..200 {
                std::hint::black_box(ring.has_completions());
            }
        }
        // Completions that overflowed a full CQ (a slow reaper) reach it at an enter.
        while !reaper.is_finished() {
            ring.flush().unwrap();
            std::hint::black_box(ring.has_completions());
            std::thread::yield_now();
        }
        assert_eq!(reaper.join().unwrap(), ops.len(), "CQEs reaped");
        for (op, _) in &ops {
            let waker = || Waker::Thread(std::thread::current());
            assert_eq!(op.poll(waker), Ok(Some((0, 0))), "one result");
            assert_eq!(op.poll(waker), Err(()), "and only one");
        }
    }

    /// Five times the SQ, pushed while every enter fails (a signal, EBUSY, EAGAIN, then a
    /// hard error): no push fails, the hard error is reported by the flush that met it,
    /// and every operation still reaches the kernel and completes afterwards.
    #[test]
    fn a_full_sq_and_failed_enters_delay_operations_but_never_fail_them() {
        let Some(ring) = small_ring() else { return };
        ring.fail_enters
            .borrow_mut()
            .extend([libc::ENXIO, libc::EAGAIN, libc::EBUSY, libc::EINTR]);
        let ops: Vec<_> = (0..40)
            .map(|_| {
                let (sqe, op) = Sqe::timeout(Duration::ZERO);
                ring.push(sqe).expect("a push never fails");
                op
            })
            .collect();
        for _ in 0..3 {
            ring.flush().expect("transient enter errors are not errors");
        }
        assert_eq!(
            ring.flush().map_err(|e| e.raw_os_error()),
            Err(Some(libc::ENXIO))
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while ops.iter().any(|o| !o.is_done()) && Instant::now() < deadline {
            ring.flush().unwrap();
            ring.try_reap(usize::MAX, drop);
            if ring.shared().in_flight() > 0 {
                ring.wait().unwrap();
            }
        }
        assert!(
            ops.iter().all(|o| o.is_done()),
            "an operation never completed"
        );
        assert_eq!(ring.shared().in_flight(), 0);
    }

    /// Twenty rings made and dropped one after another on one thread each get a registered
    /// fd (a thread holds 16 at most: so dropping a ring frees its slot), and operations
    /// complete through enters that name the ring by its index.
    #[test]
    fn rings_register_their_fd_and_give_the_slot_back() {
        for _ in 0..20 {
            let Some(ring) = small_ring() else { return };
            assert!(
                ring.is_registered(),
                "Linux 5.18 and later register ring fds"
            );
            let (sqe, op) = Sqe::timeout(Duration::ZERO);
            ring.push(sqe).unwrap();
            ring.complete(&op);
        }
    }

    /// An operation the kernel never completes (stood in for by an in-flight count no op
    /// backs) delays a drain by the grace period, not forever.
    #[test]
    fn a_drain_gives_up_after_its_grace_period() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let Some(ring) = small_ring() else {
                let _ = tx.send(None);
                return;
            };
            let (sqe, op) = Sqe::timeout(Duration::from_secs(3600));
            ring.push(sqe).unwrap();
            ring.shared.in_flight.fetch_add(1, Ordering::AcqRel);
            let finished = ring.drain(Duration::from_millis(200), drop, || true);
            let _ = tx.send(Some((finished, op.is_done())));
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Some((finished, cancelled))) => {
                assert!(!finished, "the phantom operation cannot finish");
                assert!(cancelled, "the real one was cancelled");
            }
            Ok(None) => {}
            Err(_) => panic!("the drain did not return within 20 s"),
        }
    }
}
