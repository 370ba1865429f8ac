//! Fibers: a coroutine, its run state, and spawning.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::JoinError;
use crate::join::{self, JoinHandle};
use crate::runtime::{Registered, Shared};
use crate::state::RunState;
use crate::sys::cell::TakeCell;
use crate::sys::coro::{self, FiberCoro};
use crate::worker;

/// A fiber, shared by the run queues, the wakers that may make it runnable and the registry
/// the runtime tears down at shutdown.
pub(crate) struct Fiber {
    id: u64,
    pub(crate) state: RunState,
    /// The coroutine, taken out by the worker that runs it and put back when it suspends.
    ///
    /// # Invariant
    ///
    /// `Some` whenever the fiber is PARKED or SCHEDULED and not torn down; `None` while a
    /// worker runs it and once it is done.
    coro: TakeCell<FiberCoro>,
    pub(crate) rt: Arc<Shared>,
    /// Where the fiber sits in the runtime's registry.
    registered: Registered,
    /// The worker the fiber runs on when the runtime pins fibers ([`NO_HOME`] until it
    /// first runs, unless spawned onto a worker): every wake-up queues it there.
    home: AtomicUsize,
    /// The part of its stack the fiber's next resume touches (`coro::stack_window`; 0 before
    /// it first parks): the worker that will resume it prefetches it when the fiber is woken.
    park_window: AtomicUsize,
}

/// The home of a fiber that has not run yet.
pub(crate) const NO_HOME: usize = usize::MAX;

impl std::fmt::Debug for Fiber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fiber")
            .field("id", &self.id)
            .field("state", &self.state)
            .finish()
    }
}

impl Fiber {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn take_coro(&self) -> Option<FiberCoro> {
        self.coro.take()
    }

    /// Puts back the coroutine this caller took with [`take_coro`](Self::take_coro).
    pub(crate) fn put_coro(&self, c: FiberCoro) {
        self.coro.put(c);
    }

    pub(crate) fn set_park_window(&self, window: usize) {
        self.park_window.store(window, Ordering::Relaxed);
    }

    /// Starts loading the part of the stack this fiber's next resume touches; only on the
    /// thread that will resume it (see `coro::prefetch_stack`).
    pub(crate) fn prefetch_stack(&self) {
        coro::prefetch_stack(self.park_window.load(Ordering::Relaxed));
    }

    pub(crate) fn registered(&self) -> Registered {
        self.registered
    }

    /// The worker this fiber is pinned to, or [`NO_HOME`].
    pub(crate) fn home(&self) -> usize {
        self.home.load(Ordering::Relaxed)
    }

    /// Pins the fiber to `worker` if it has no home yet (its first run). Only the worker
    /// running the fiber, or its spawner before queueing it, calls this; the run queues
    /// publish the value to later wakers.
    pub(crate) fn settle_home(&self, worker: usize) {
        if self.home() == NO_HOME {
            self.home.store(worker, Ordering::Relaxed);
        }
    }

    /// Makes the fiber runnable if it is parked; remembers the wake-up if it is running.
    pub(crate) fn wake(self: Arc<Self>) {
        if self.state.wake() {
            worker::schedule(self);
        }
    }
}

/// Builds a fiber for `rt` running `f`. The fiber is registered but not yet queued.
///
/// On a fiber it runs on the worker's stack (see `schedule`).
/// `home`: the worker it must run on, or [`NO_HOME`] to start where it is queued.
pub(crate) fn spawn_on<F, T>(rt: &Arc<Shared>, home: usize, f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    coro::on_worker_stack(move || spawn_here(rt, home, f))
}

fn spawn_here<F, T>(rt: &Arc<Shared>, home: usize, f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (done, handle) = join::result_slot();
    if !rt.accepting_spawns() {
        // Dropped unsent: the handle reports `Cancelled`.
        return handle;
    }
    let here = worker::current().filter(|w| Arc::ptr_eq(&w.rt, rt));
    let cached = here.as_ref().and_then(|w| w.cached_stack());
    let stack = match cached.map_or_else(|| rt.stacks.get(), Ok) {
        Ok(s) => s,
        Err(e) => {
            done.send(Err(JoinError::Spawn(e.to_string())));
            return handle;
        }
    };
    // `done` goes with the body: dropped unsent (torn down, or never started), it records
    // the cancellation.
    let body = move || match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => done.send(Ok(v)),
        Err(payload) => {
            if coro::in_teardown() {
                // The runtime's forced unwind at shutdown: let it through.
                resume_unwind(payload);
            }
            done.send(Err(JoinError::Panicked(panic_message(&*payload))));
        }
    };
    let coro = FiberCoro::new(stack, body);
    let here_index = here.as_ref().map_or(NO_HOME, |w| w.index);
    let fiber = rt.register(here.as_deref(), home, |id, registered| Fiber {
        id,
        state: RunState::new_scheduled(),
        coro: TakeCell::new(coro),
        rt: Arc::clone(rt),
        registered,
        // In its worker's own registry: pinned there from the start.
        home: AtomicUsize::new(match registered {
            Registered::Worker(_) => here_index,
            Registered::Shared(..) => home,
        }),
        park_window: AtomicUsize::new(0),
    });
    worker::schedule(fiber);
    handle
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}
