//! Workers: an OS thread each, owning a ring and a run queue, running the dispatch loop.
//!
//! One dispatch round reaps the ring's completions, which make their fibers runnable again,
//! then runs up to [`BUDGET`] fibers (from the local queue, then the remote queue and the
//! injector), and submits every SQE the fibers prepared with a single `io_uring_enter`. A
//! worker that finds nothing to run steals (with work stealing), or submits SQEs that
//! complete as they are submitted (sends) and reaps them at once; failing both, or if that
//! made nothing runnable, it announces itself idle, checks every queue once more, and sleeps
//! in `io_uring_enter` until a CQE arrives: its own I/O, a MSG_RING from another worker, or
//! the read of its eventfd completing.
//!
//! The worker's thread-local context is only read through `#[inline(never)]` accessors and
//! never held across a fiber switch, because a fiber may resume on another worker.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, mpsc};
use std::thread;

use crossbeam_deque::Steal;
use slab::Slab;

use crate::fiber::{Fiber, FiberRef, NO_HOME};
use crate::runtime::{DRAINING, RUNNING, Requests, STOPPED, Shared, TEARDOWN, WorkerShared, lock};
use crate::stats::WorkerCounters;
use crate::sys::coro::{self, FiberCoro, Suspend};
use crate::sys::fd::pin_to_cpu;
use crate::sys::op::{OpRef, Sqe};
use crate::sys::ring::RingOwner;
use crate::sys::stack::PooledStack;

/// Fibers run per dispatch round before the batch of SQEs is submitted.
pub(crate) const BUDGET: usize = 64;
/// Every this many picks, the injector is checked before the local queue (fairness to work
/// from outside).
const INJECTOR_INTERVAL: u32 = 61;
/// Most CQEs reaped in one pass.
const REAP_MAX: usize = 4096;
/// How long an exiting worker waits for the kernel to finish the operations it cancelled.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    static CTX: RefCell<Option<Rc<WorkerCtx>>> = const { RefCell::new(None) };
    /// Direct sends the fibers of this thread's worker made since the worker last published
    /// them (`publish_sends_direct`): a plain `Cell`, which costs a fiber's send a few
    /// instructions where the worker's context would cost about forty.
    static SENDS_DIRECT: Cell<u64> = const { Cell::new(0) };
}

/// The state of a worker that only its own thread touches.
pub(crate) struct WorkerCtx {
    pub(crate) index: usize,
    pub(crate) rt: Arc<Shared>,
    /// `rt.workers[index]`, without the index and its bounds check on every look.
    me: Arc<WorkerShared>,
    local: RunQueue,
    pub(crate) ring: RingOwner,
    /// The fiber this worker is running now, with its coroutine.
    current: RefCell<Option<Running>>,
    /// How many more fibers this round may run (from the worker's loop, or switched to
    /// straight from a fiber that yields or parks: `hand_off`) before the worker reaps its
    /// ring.
    round_left: Cell<usize>,
    /// A fiber that returned and handed the thread straight to another one (`finish_hand_off`):
    /// that one recycles it on arrival (`recycle_handed_off`).
    handed_off: RefCell<Option<Running>>,
    /// The pending read of this worker's eventfd, re-armed when it completes.
    eventfd_op: RefCell<Option<OpRef>>,
    rng: Cell<u64>,
    tick: Cell<u32>,
    /// Stacks of fibers that finished here, for the next spawns here: taking one from the
    /// runtime's pool costs a lock, a count and a reference each way.
    stacks: RefCell<Vec<PooledStack>>,
    /// The fibers that live on this worker for good (spawned here, fibers pinned): its
    /// own part of the runtime's registry, without the shared part's lock (see
    /// `Shared::register`).
    fibers: RefCell<Slab<FiberRef>>,
}

/// Most stacks a worker keeps for its next spawns; more go back to the runtime's pool.
const STACK_CACHE: usize = 32;

/// A fiber running on a worker, and its coroutine (taken out of the fiber meanwhile).
struct Running {
    fiber: FiberRef,
    coro: FiberCoro,
}

impl std::fmt::Debug for WorkerCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerCtx")
            .field("index", &self.index)
            .field("ring", &self.ring)
            .finish()
    }
}

/// The calling thread's worker, if it is one.
#[inline(never)]
pub(crate) fn current() -> Option<Rc<WorkerCtx>> {
    CTX.with(|c| c.borrow().clone())
}

/// Runs `f` on the calling thread's worker, if it is one (without cloning its `Rc`).
pub(crate) fn with_current<R>(f: impl FnOnce(&WorkerCtx) -> R) -> Option<R> {
    CTX.with(|c| c.borrow().as_deref().map(f))
}

/// The fiber running on the calling thread, if any.
#[inline(never)]
pub(crate) fn current_fiber() -> Option<FiberRef> {
    CTX.with(|c| {
        c.borrow()
            .as_ref()
            .and_then(|w| w.current.borrow().as_ref().map(|r| r.fiber.clone()))
    })
}

/// The runtime of the calling thread's worker, if any.
#[inline(never)]
pub(crate) fn current_runtime() -> Option<Arc<Shared>> {
    CTX.with(|c| c.borrow().as_ref().map(|w| Arc::clone(&w.rt)))
}

/// Whether the calling thread is a worker of a runtime that uses multishot recv.
#[inline(never)]
pub(crate) fn multishot_recv_here() -> bool {
    CTX.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|w| w.rt.config.multishot_recv)
    })
}

/// Makes a fiber runnable: on the calling worker's own queue if it belongs to the same
/// runtime, else on the runtime's injector.
///
/// On a fiber this runs on the worker's stack unless the fiber has room for it: a queue push
/// may resize the queue, which can take more stack than a small fiber has to spare.
pub(crate) fn schedule(f: FiberRef) {
    let needs = if f.rt.config.stealing {
        coro::ALWAYS_ON_WORKER_STACK
    } else {
        coro::RUNTIME_CALL_STACK
    };
    coro::on_worker_stack(needs, move || schedule_here(f));
}

/// Where a woken fiber must run: without stealing, a fiber that has run goes back to its own
/// worker; with stealing, anywhere ([`NO_HOME`]).
fn wake_home(f: &FiberRef) -> usize {
    if f.rt.config.stealing {
        NO_HOME
    } else {
        f.home()
    }
}

#[inline(never)]
fn schedule_here(f: FiberRef) {
    let home = wake_home(&f);
    let f = CTX.with(|c| {
        let c = c.borrow();
        match c.as_ref() {
            Some(ctx) if Arc::ptr_eq(&ctx.rt, &f.rt) => {
                ctx.schedule_own(f, home);
                None
            }
            _ => Some(f),
        }
    });
    if let Some(f) = f {
        let rt = Arc::clone(&f.rt);
        if home == NO_HOME {
            rt.injector.push(f);
            rt.notify_one(None);
        } else {
            rt.push_remote(home, f, None);
        }
    }
}

/// From a fiber: gives its worker's thread up, to run again at once (a yield: after the
/// other runnable fibers of its worker) or when woken (a park). Where `WorkerCtx::hand_off`
/// allows, the thread goes straight to the next fiber of the worker's queue; otherwise back to
/// the worker. `false` off a fiber, or at teardown (nothing done).
///
/// Not inlined, like the thread-local accessors: its callers loop around it, and a fiber
/// of a stealing runtime may come back on another thread.
#[inline(never)]
pub(crate) fn suspend(why: Suspend) -> bool {
    // The worker's context is read here, before the switch, and let go.
    let next = CTX.with(|c| c.borrow().as_ref().and_then(|ctx| ctx.hand_off(why)));
    let arrival = match next {
        Some(next) => Some(coro::switch_to(next)),
        None => coro::suspend(why),
    };
    if arrival == Some(coro::Arrival::AfterReturned) {
        recycle_handed_off();
    }
    arrival.is_some()
}

/// Back on a fiber after a switch: if the fiber that ran before it returned and handed the
/// thread here (`finish_hand_off`), its stack goes back to the worker's cache. Not inlined:
/// the thread-local is read afresh after the switch.
#[inline(never)]
fn recycle_handed_off() {
    with_current(|ctx| {
        let done = ctx.handed_off.borrow_mut().take();
        if let Some(Running { fiber, coro }) = done {
            ctx.finished(fiber, coro);
        }
    });
}

/// The end of a fiber's body on a runtime that pins fibers: a fiber of the local queue that
/// has run before (and so has a frame to return into) takes the thread straight from it,
/// instead of the worker, which would only recycle it and resume that one. The returned
/// fiber waits in `handed_off` until the other one arrives.
pub(crate) fn finish_hand_off() -> Option<coro::Entered> {
    CTX.with(|c| c.borrow().as_ref().and_then(|ctx| ctx.hand_off_finished()))
}

/// Whether a fiber's send should be a system call of its own rather than an SQE: when its
/// worker has nothing else to run this round and no SQE waiting, the worker's next step
/// would be to submit that one SQE alone, so a direct `send` costs one system call either
/// way and saves the op, the SQE and the CQE. With other fibers queued, their SQEs and this
/// one go in one enter (a closed loop of many connections: about a third of an enter per
/// echo, against a `send` each). Off a worker: no.
pub(crate) fn send_alone() -> bool {
    with_current(|ctx| ctx.local.is_empty() && ctx.ring.unsubmitted() == 0).unwrap_or(false)
}

/// Counts a send that [`send_alone`] let go directly and the socket took.
pub(crate) fn sent_directly() {
    SENDS_DIRECT.with(|n| n.set(n.get() + 1));
}

/// Starts worker `index` on its own thread. It reports on `ready` whether its ring could be
/// created.
pub(crate) fn spawn(
    rt: Arc<Shared>,
    index: usize,
    local: crossbeam_deque::Worker<FiberRef>,
    ready: mpsc::Sender<(usize, io::Result<()>)>,
) -> io::Result<thread::JoinHandle<()>> {
    let name = format!("{}-w{index}", rt.config.name);
    thread::Builder::new()
        .name(name)
        .spawn(move || worker_main(rt, index, local, &ready))
}

fn worker_main(
    rt: Arc<Shared>,
    index: usize,
    local: crossbeam_deque::Worker<FiberRef>,
    ready: &mpsc::Sender<(usize, io::Result<()>)>,
) {
    let ring = match init(&rt, index) {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send((index, Err(e)));
            return;
        }
    };
    // Set once, here, by this worker only.
    let _ = rt.workers[index].ring.set(Arc::clone(ring.shared()));
    let ctx = Rc::new(WorkerCtx {
        index,
        rng: Cell::new(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xA076_1D64)),
        local: if rt.config.stealing {
            RunQueue::Shared(local)
        } else {
            RunQueue::Own(RefCell::new(VecDeque::new()))
        },
        me: Arc::clone(&rt.workers[index]),
        rt,
        ring,
        current: RefCell::new(None),
        round_left: Cell::new(0),
        handed_off: RefCell::new(None),
        eventfd_op: RefCell::new(None),
        tick: Cell::new(0),
        stacks: RefCell::new(Vec::new()),
        fibers: RefCell::new(Slab::new()),
    });
    CTX.with(|c| *c.borrow_mut() = Some(Rc::clone(&ctx)));
    let _ = ready.send((index, Ok(())));
    ctx.run();
    ctx.exit();
    ctx.publish_sends_direct();
    CTX.with(|c| c.borrow_mut().take());
}

fn init(rt: &Shared, index: usize) -> io::Result<RingOwner> {
    if let Some(cpu) = rt.config.cpu_for(index) {
        pin_to_cpu(cpu).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cannot pin to CPU {cpu}: {e}"),
            )
        })?;
    }
    let ring = RingOwner::new(rt.config.ring)?;
    if let Some(fd) = &rt.workers[index].cq_eventfd {
        use std::os::fd::AsRawFd;
        ring.register_eventfd(fd.as_raw_fd())?;
    }
    Ok(ring)
}

impl WorkerCtx {
    pub(crate) fn stats(&self) -> &WorkerCounters {
        &self.me.stats
    }

    /// A stack from this worker's cache, if it has one.
    pub(crate) fn cached_stack(&self) -> Option<PooledStack> {
        let mut stacks = self.stacks.borrow_mut();
        let s = stacks.pop();
        self.stats().stacks_cached.set(stacks.len() as u64);
        s
    }

    /// Keeps the stack of a fiber that finished here for the next spawn (or gives it back
    /// to the pool when the cache is full).
    fn cache_stack(&self, stack: PooledStack) {
        let mut stacks = self.stacks.borrow_mut();
        if stacks.len() < STACK_CACHE {
            stacks.push(stack);
            self.stats().stacks_cached.set(stacks.len() as u64);
        }
    }

    /// Adds a fiber to this worker's own registry (see `Shared::register`).
    pub(crate) fn register_here(&self, make: impl FnOnce(usize) -> Fiber) -> FiberRef {
        let mut fibers = self.fibers.borrow_mut();
        let entry = fibers.vacant_entry();
        let (fiber, kept) = FiberRef::new_pair(make(entry.key()));
        entry.insert(kept);
        fiber
    }

    /// Removes a fiber from this worker's own registry.
    pub(crate) fn unregister_here(&self, key: usize) -> Option<FiberRef> {
        self.fibers.borrow_mut().try_remove(key)
    }

    /// The fibers in this worker's own registry.
    fn registered_here(&self) -> Vec<FiberRef> {
        self.fibers
            .borrow()
            .iter()
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// Queues a woken fiber of this worker's runtime from this worker's thread: here, with
    /// its stack's window prefetched, if it may run here (`home` is this worker or
    /// [`NO_HOME`]), else on its home worker's remote queue.
    fn schedule_own(&self, f: FiberRef, home: usize) {
        if home == NO_HOME || home == self.index {
            f.prefetch_stack();
            self.push_local(f);
        } else {
            self.rt.push_remote(home, f, Some(self));
        }
    }

    /// Wakes the waiter of a completion this worker reaped from its own ring, on its own
    /// stack: as [`Waker::wake`](crate::park::Waker::wake), but a fiber of this runtime is
    /// scheduled with this context directly, without the thread-local lookup and the stack
    /// check a wake-up from a fiber needs.
    fn wake_reaped(&self, waker: crate::park::Waker) {
        match waker {
            crate::park::Waker::Fiber(f) if Arc::ptr_eq(&f.rt, &self.rt) => {
                if f.state.wake() {
                    let home = wake_home(&f);
                    self.schedule_own(f, home);
                }
            }
            other => other.wake(),
        }
    }

    fn push_local(&self, f: FiberRef) {
        self.local.push(f);
        // More than one runnable fiber here: an idle worker could take some (only with
        // stealing; pinned fibers wait for this worker).
        if self.rt.config.stealing && self.local.len() > 1 {
            self.rt.notify_one(Some(self));
        }
    }

    fn run(&self) {
        self.arm_eventfd();
        let mut cancelled_all = false;
        let mut tore_down = false;
        loop {
            let state = self.rt.state();
            if state == TEARDOWN && !self.rt.config.stealing && !tore_down {
                tore_down = true;
                if self.rt.teardown_by() != self.index {
                    self.teardown_pinned(false);
                }
            }
            if state >= DRAINING && !cancelled_all {
                // Cancel everything in flight; ops pushed after this see the state and fail.
                let _ = self.ring.push(Sqe::cancel_all());
                cancelled_all = true;
            }
            if state == STOPPED {
                break;
            }
            self.push_remote_requests();
            // Completions the last enter posted (the one that woke this worker, or that
            // submitted write-behind sends), or that arrived since: their fibers run in
            // this round. Reaping before running, not after (and the inline submission's
            // completions at once, below), makes an echo one pass of this loop, not four.
            let wakeups = self.reap_own();
            self.run_round();
            self.stats().enters.set(self.ring.enters());
            if self.go_round_again(wakeups) {
                // More to run right away: hand the kernel this round's SQEs and go on.
                let _ = self.ring.flush();
                continue;
            }
            if self.rt.config.io_stealing && self.steal_io() > 0 {
                let _ = self.ring.flush();
                continue;
            }
            if let Some(f) = self.steal_when_idle() {
                self.local.push(f);
                let _ = self.ring.flush();
                continue;
            }
            // Nothing runnable. SQEs that complete as they are submitted (write-behind
            // sends): submit them alone and reap them at once, rather than announce this
            // worker idle for an enter that their own completions end at once; then go round
            // again only if that made something runnable (an echo's send wakes nobody), and
            // otherwise go idle, whose check finds any other work.
            if self.ring.submit_inline() && self.go_round_again(self.reap_own()) {
                continue;
            }
            // Submit the round's SQEs and sleep in the same enter.
            self.idle();
        }
    }

    /// Whether the loop must go round again rather than on towards idle, after a reap that
    /// saw `wakeups`: fibers are runnable, completions wait in the CQ, or a wake-up said that
    /// another thread changed what this worker must look at (the runtime's state, its
    /// requests), perhaps after this pass read it.
    fn go_round_again(&self, wakeups: usize) -> bool {
        wakeups > 0 || !self.local.is_empty() || self.ring.has_completions()
    }

    fn run_round(&self) {
        self.round_left.set(BUDGET);
        while self.round_left.get() > 0 {
            let Some(f) = self.next_fiber() else { break };
            self.round_left.set(self.round_left.get() - 1);
            self.run_fiber(f);
        }
    }

    fn run_fiber(&self, f: FiberRef) {
        if self.rt.state() >= TEARDOWN {
            teardown_one(self, &f);
            return;
        }
        // `None`: torn down while queued.
        let Some(mut coro) = f.take_coro() else {
            return;
        };
        if !self.rt.config.stealing {
            f.settle_home(self.index);
        }
        f.state.start();
        let entered = coro.enter();
        // Moved in and out, not cloned: no reference count traffic per resume.
        *self.current.borrow_mut() = Some(Running { fiber: f, coro });
        let switched = coro::run(entered);
        // The fiber that switched back: this one, or one it handed the thread to.
        let Some(Running { fiber: f, mut coro }) = self.current.borrow_mut().take() else {
            return;
        };
        self.stats().resumes.inc();
        match coro.settle(switched) {
            Some((why, window)) => self.suspended(f, coro, why, |_| window),
            None => self.finished(f, coro),
        }
    }

    /// From the running fiber, on a runtime that pins fibers: makes the next fiber of the
    /// local queue the running one, and does for the running one what the worker's loop does
    /// when a fiber suspends (a yield queues it behind the others; a park leaves it to its
    /// waker, or queues it if a wake-up came first); the caller then switches straight to
    /// the fiber returned: one stack switch instead of two, and no pass through the worker's
    /// loop. `None` (nothing done) when there is no such fiber, the round's budget is spent
    /// (the worker then reaps its ring before running more), or the fiber has too little
    /// stack left for the queue operations.
    fn hand_off(&self, why: Suspend) -> Option<coro::Entered> {
        // Nothing to hand the thread to (an echo's fiber, parking alone): say so first,
        // before the stack check and the rest.
        if self.local.is_empty() || !coro::may_switch_to(coro::RUNTIME_CALL_STACK) {
            return None;
        }
        let (Running { fiber: me, coro }, entered) = self.make_next_current(false)?;
        // Back in its place before the switch: its coroutine cannot be entered until `next`
        // marks it suspended, and on a runtime that pins fibers only this thread takes it (a
        // waker elsewhere queues it here).
        self.suspended(me, coro, why, FiberCoro::window_here);
        Some(entered)
    }

    /// A fiber suspended: its coroutine goes back in its place; a yield queues it behind the
    /// others, a park leaves it to its waker (with `window`, the part of its stack its next
    /// resume touches, found only then), or queues it if a wake-up came first. Inlined into
    /// both callers, as the code was before it was shared (a call here made a yield about
    /// 10% slower).
    #[inline(always)]
    fn suspended(
        &self,
        f: FiberRef,
        coro: FiberCoro,
        why: Suspend,
        window: impl FnOnce(&FiberCoro) -> usize,
    ) {
        match why {
            Suspend::Yield => {
                f.put_coro(coro);
                f.state.yielded();
                self.local.push(f);
            }
            Suspend::Park => {
                f.set_park_window(window(&coro));
                f.put_coro(coro);
                if f.state.park() {
                    self.local.push(f);
                }
            }
        }
    }

    /// The end of the running fiber's body (see `finish_hand_off`): as `hand_off`, to a fiber
    /// that has run before; the returned one waits in `handed_off`.
    fn hand_off_finished(&self) -> Option<coro::Entered> {
        if self.handed_off.borrow().is_some() {
            return None;
        }
        let (done, entered) = self.make_next_current(true)?;
        *self.handed_off.borrow_mut() = Some(done);
        Some(entered)
    }

    /// What the hand-offs share, on a runtime that pins fibers with the round's budget not
    /// spent: the next fiber of the local queue (one that has run before, if `started_only`)
    /// becomes the running one, entered, and is returned with the one that was running.
    /// `None` (nothing done) when there is no such fiber.
    fn make_next_current(&self, started_only: bool) -> Option<(Running, coro::Entered)> {
        if self.rt.config.stealing || self.round_left.get() == 0 || self.rt.state() >= TEARDOWN {
            return None;
        }
        let mut current = self.current.borrow_mut();
        // `None`: a coroutine this worker did not resume (none of the runtime's).
        current.as_ref()?;
        let next = self.local.pop()?;
        // `None`: torn down while queued (dropped, as `run_fiber` does).
        let mut next_coro = next.take_coro()?;
        if started_only && !next_coro.started() {
            // No frame to return into: the worker starts it.
            next.put_coro(next_coro);
            self.local.push_front(next);
            return None;
        }
        self.round_left.set(self.round_left.get() - 1);
        next.settle_home(self.index);
        next.state.start();
        let entered = next_coro.enter();
        let was = current.replace(Running {
            fiber: next,
            coro: next_coro,
        });
        let Some(was) = was else {
            unreachable!("checked above");
        };
        self.stats().resumes.inc();
        self.stats().resumes_direct.inc();
        Some((was, entered))
    }

    /// A fiber returned: its stack goes to this worker's cache, and it leaves the registry.
    /// `f` is the running one's reference; with the registry's, usually the last two (freed
    /// then without an atomic read-modify-write). Out of line, once per fiber, so that the
    /// resume loop around it stays small.
    #[cold]
    #[inline(never)]
    fn finished(&self, f: FiberRef, coro: FiberCoro) {
        f.state.finish();
        self.cache_stack(coro.into_stack());
        match self.rt.unregister(self, &f) {
            Some(registry_ref) => FiberRef::release_pair(f, registry_ref),
            None => drop(f),
        }
    }

    fn next_fiber(&self) -> Option<FiberRef> {
        let t = self.tick.get().wrapping_add(1);
        self.tick.set(t);
        if t.is_multiple_of(INJECTOR_INTERVAL)
            && let Some(f) = self.pop_remote().or_else(|| self.pop_injector())
        {
            return Some(f);
        }
        if let Some(f) = self.local.pop() {
            return Some(f);
        }
        // Stealing waits until the round is over and found nothing (`steal_when_idle`).
        self.pop_remote().or_else(|| self.pop_injector())
    }

    /// A fiber pinned here that another thread woke.
    fn pop_remote(&self) -> Option<FiberRef> {
        self.local.take_from(&self.me.remote)
    }

    fn pop_injector(&self) -> Option<FiberRef> {
        let f = self.local.take_from(&self.rt.injector);
        if f.is_some() {
            self.stats().injector_pops.inc();
        }
        f
    }

    fn next_rand(&self) -> u64 {
        // xorshift64: only spreads steal attempts, needs no quality.
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x
    }

    /// With work stealing: a batch of fibers from a random other worker's queue and one of
    /// them, taken only once this worker has run out of work of its own (its queues are
    /// empty, and its ring had nothing ready after the round). Stealing at every empty pick
    /// instead costs a look at every other worker's queue (a SeqCst fence each) per round,
    /// and takes fibers from a worker that would have run them a moment later on a warm cache
    /// and its own ring.
    fn steal_when_idle(&self) -> Option<FiberRef> {
        let n = self.rt.stealers.len();
        let RunQueue::Shared(local) = &self.local else {
            return None;
        };
        if n <= 1 {
            return None;
        }
        self.stats().steal_attempts.inc();
        let start = (self.next_rand() % n as u64) as usize;
        for k in 0..n {
            let j = (start + k) % n;
            if j == self.index {
                continue;
            }
            let before = local.len();
            loop {
                match self.rt.stealers[j].steal_batch_and_pop(local) {
                    Steal::Success(f) => {
                        self.stats().steals.inc();
                        let moved = local.len().saturating_sub(before) + 1;
                        self.stats().stolen_fibers.add(moved as u64);
                        return Some(f);
                    }
                    Steal::Empty => break,
                    Steal::Retry => {}
                }
            }
        }
        None
    }

    /// Reaps this worker's ring (and re-arms the eventfd read if it completed); returns how
    /// many of the CQEs were wake-ups (MSG_RING messages, the eventfd read).
    fn reap_own(&self) -> usize {
        let Some(c) = self.ring.try_reap(REAP_MAX, |w| self.wake_reaped(w)) else {
            return 0;
        };
        self.stats().completions_own.add(c.ops as u64);
        if self.ring.cq_overflowed() {
            self.stats().cq_overflows.inc();
        }
        if c.wakeups > 0 {
            // Perhaps the read of the eventfd completed.
            self.rearm_eventfd_if_done();
        }
        c.wakeups
    }

    /// I/O stealing: reaps other workers' rings; their fibers become runnable here.
    fn steal_io(&self) -> usize {
        let mut total = 0;
        for (j, w) in self.rt.workers.iter().enumerate() {
            if j == self.index {
                continue;
            }
            // A sleeping worker is woken by its own CQEs and reaps them itself: steal only
            // from busy ones.
            if w.sleeping.load(Ordering::SeqCst) {
                continue;
            }
            let Some(ring) = w.ring.get() else { continue };
            if let Some(c) = ring.try_reap_foreign(REAP_MAX, crate::park::Waker::wake) {
                self.stats().completions_stolen.add(c.ops as u64);
                total += c.ops;
                if c.wakeups > 0 {
                    // We took the owner's wake-up: hand it a new one.
                    let _ = self.ring.push(Sqe::msg_ring(ring.fd()));
                    let _ = self.ring.flush();
                }
            }
        }
        total
    }

    fn arm_eventfd(&self) {
        use std::os::fd::AsRawFd;
        let fd = self.me.eventfd.as_raw_fd();
        let (sqe, op) = Sqe::eventfd_read(fd);
        if self.ring.push(sqe).is_ok() {
            *self.eventfd_op.borrow_mut() = Some(op);
        }
    }

    fn rearm_eventfd_if_done(&self) {
        let done = self
            .eventfd_op
            .borrow()
            .as_ref()
            .is_none_or(|op| op.is_done());
        if done {
            self.arm_eventfd();
        }
    }

    fn push_remote_requests(&self) {
        self.ring.cancel_throttled();
        let me = &self.me;
        if !me.has_requests.load(Ordering::SeqCst) {
            return;
        }
        // Cleared before the requests are taken: one added after the take sets it again.
        me.has_requests.store(false, Ordering::SeqCst);
        let Requests {
            cancels,
            file_removals,
        } = std::mem::take(&mut *lock(&me.requests));
        for op in cancels {
            if !op.is_done() {
                let _ = self.ring.push(Sqe::cancel(&op));
            }
        }
        for slot in file_removals {
            self.ring.remove_file(slot);
        }
    }

    /// Adds this thread's direct sends to the worker's counters (each time it goes idle,
    /// and as it exits).
    fn publish_sends_direct(&self) {
        let n = SENDS_DIRECT.with(|n| n.replace(0));
        if n > 0 {
            self.stats().sends_direct.add(n);
        }
    }

    fn idle(&self) {
        self.publish_sends_direct();
        let rt = &self.rt;
        rt.announce_idle(self.index);
        let sleep = !self.has_work() && !self.try_finish_drain();
        if sleep {
            self.stats().sleeps.inc();
            let _ = self.ring.wait();
        }
        rt.unannounce(self.index);
    }

    /// Whether anything became runnable or needs this worker (checked after announcing idle,
    /// so that work published before the announcement is seen here and work published after
    /// it finds this worker's `sleeping` flag set).
    fn has_work(&self) -> bool {
        let rt = &self.rt;
        !self.local.is_empty()
            || !self.me.remote.is_empty()
            || !rt.injector.is_empty()
            // Each look at a deque costs a SeqCst fence; without stealing they stay empty.
            || (rt.config.stealing && rt.stealers.iter().any(|s| !s.is_empty()))
            || self.me.has_requests.load(Ordering::SeqCst)
            || self.ring.shared().has_throttled()
    }

    /// During shutdown, when no fiber is runnable and no I/O is in flight anywhere, tears the
    /// remaining (parked) fibers down and stops the runtime. Returns whether it did.
    fn try_finish_drain(&self) -> bool {
        let rt = &self.rt;
        if rt.state() != DRAINING || !quiescent(rt) || !rt.advance_state(DRAINING, TEARDOWN) {
            return false;
        }
        if rt.config.stealing {
            teardown_all(self);
            rt.set_state(STOPPED);
            rt.wake_all();
        } else {
            // Fibers never change threads, not even to be torn down: every worker unwinds
            // its own (this one also those that never ran), and the last one stops.
            rt.set_teardown_by(self.index);
            self.teardown_pinned(true);
        }
        true
    }

    /// Tears down the fibers pinned to this worker (and, for the worker that began the
    /// teardown, those not pinned yet); the last worker to finish stops the runtime.
    fn teardown_pinned(&self, homeless_too: bool) {
        let rt = &self.rt;
        for f in self.registered_here().into_iter().chain(rt.registered()) {
            let home = f.home();
            if home == self.index || (homeless_too && home == NO_HOME) {
                if f.state.is_done() {
                    rt.unregister(self, &f);
                } else {
                    teardown_one(self, &f);
                }
            }
        }
        if rt.teardown_done() {
            rt.set_state(STOPPED);
        }
        rt.wake_all();
    }

    /// Cancels what is still in flight on this ring and waits, at most [`EXIT_GRACE`], for
    /// the kernel to finish with it, so that the memory of every op is released before the
    /// ring goes (an op still in flight after that is leaked with its memory).
    fn exit(&self) {
        let eventfd_op = self.eventfd_op.borrow_mut().take();
        self.ring.drain(EXIT_GRACE, crate::park::Waker::wake, || {
            eventfd_op.as_ref().is_none_or(|op| op.is_done())
        });
        while self.local.pop().is_some() {}
        // Empty after a teardown; dropped here in any case (after the borrow ends: a fiber's
        // drop may run code), so that no fiber keeps the runtime's shared state alive past
        // its workers.
        let fibers = std::mem::take(&mut *self.fibers.borrow_mut());
        drop(fibers);
        self.stacks.borrow_mut().clear();
        self.stats().stacks_cached.set(0);
    }
}

/// A worker's queue of runnable fibers.
enum RunQueue {
    /// With work stealing: other workers steal from it through their `Stealer`.
    Shared(crossbeam_deque::Worker<FiberRef>),
    /// Pinned fibers: only this worker touches it, so it needs no atomics. (Quiescence
    /// does not need to look at it: a worker announces itself idle only with it empty,
    /// and only the worker itself pushes to it.)
    Own(RefCell<VecDeque<FiberRef>>),
}

impl RunQueue {
    fn push(&self, f: FiberRef) {
        match self {
            RunQueue::Shared(q) => q.push(f),
            RunQueue::Own(q) => q.borrow_mut().push_back(f),
        }
    }

    /// Puts back a fiber just popped, at the front (pinned fibers only: a shared deque has
    /// no such push, and pushes at its back).
    fn push_front(&self, f: FiberRef) {
        match self {
            RunQueue::Shared(q) => q.push(f),
            RunQueue::Own(q) => q.borrow_mut().push_front(f),
        }
    }

    fn pop(&self) -> Option<FiberRef> {
        match self {
            RunQueue::Shared(q) => q.pop(),
            RunQueue::Own(q) => q.borrow_mut().pop_front(),
        }
    }

    fn len(&self) -> usize {
        match self {
            RunQueue::Shared(q) => q.len(),
            RunQueue::Own(q) => q.borrow().len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves a batch from `from` into this queue and returns one of them.
    fn take_from(&self, from: &crossbeam_deque::Injector<FiberRef>) -> Option<FiberRef> {
        // Looking costs two loads; stealing from an empty injector costs a SeqCst fence. A
        // push this misses wakes the worker or is seen by its idle check, as ever.
        if from.is_empty() {
            return None;
        }
        loop {
            let got = match self {
                RunQueue::Shared(q) => from.steal_batch_and_pop(q),
                RunQueue::Own(q) => {
                    let got = from.steal();
                    if got.is_success() {
                        // A few more while we are at it, as `steal_batch_and_pop` does.
                        let mut q = q.borrow_mut();
                        for _ in 0..16 {
                            match from.steal() {
                                Steal::Success(f) => q.push_back(f),
                                _ => break,
                            }
                        }
                    }
                    got
                }
            };
            match got {
                Steal::Success(f) => return Some(f),
                Steal::Empty => return None,
                Steal::Retry => {}
            }
        }
    }
}

/// No worker runs anything, no queue holds a fiber, no user I/O is in flight, and no worker
/// woke up while we looked (epochs unchanged).
fn quiescent(rt: &Shared) -> bool {
    let epochs: Vec<u64> = rt
        .workers
        .iter()
        .map(|w| w.epoch.load(Ordering::SeqCst))
        .collect();
    if !rt.workers.iter().all(|w| w.sleeping.load(Ordering::SeqCst)) {
        return false;
    }
    if rt.workers.iter().any(|w| {
        w.ring.get().is_some_and(|r| r.in_flight() > 0) || w.has_requests.load(Ordering::SeqCst)
    }) {
        return false;
    }
    fence(Ordering::SeqCst);
    if !rt.injector.is_empty()
        || rt.stealers.iter().any(|s| !s.is_empty())
        || rt.workers.iter().any(|w| !w.remote.is_empty())
    {
        return false;
    }
    fence(Ordering::SeqCst);
    rt.workers
        .iter()
        .zip(&epochs)
        .all(|(w, &e)| w.epoch.load(Ordering::SeqCst) == e)
}

fn teardown_one(here: &WorkerCtx, f: &Fiber) {
    if let Some(coro) = f.take_coro() {
        f.state.finish();
        coro.teardown();
        here.rt.unregister(here, f);
    }
}

/// Tears down every registered fiber. A fiber another worker is still running (it started
/// before the teardown began) is retried until it parks.
fn teardown_all(here: &WorkerCtx) {
    let rt = &here.rt;
    loop {
        let fibers = rt.registered();
        if fibers.is_empty() {
            return;
        }
        let mut busy = false;
        for f in &fibers {
            if f.state.is_done() {
                rt.unregister(here, f);
            } else if let Some(coro) = f.take_coro() {
                f.state.finish();
                coro.teardown();
                rt.unregister(here, f);
            } else {
                busy = true;
            }
        }
        if busy {
            thread::yield_now();
        }
    }
}

/// The state of the runtime as seen by a fiber about to start an operation.
pub(crate) fn accepting_io(rt: &Shared) -> bool {
    rt.state() == RUNNING
}
