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
use crate::sys::counted::Counted;
use crate::worker;

/// A reference to a fiber: the registry's, a run queue's, the running one's, a waker's.
/// Not an `Arc`: a fiber is made with two references at once and its end frees it without
/// an atomic read-modify-write when those are its last (see `sys::counted`).
pub(crate) type FiberRef = Counted<Fiber>;

/// A fiber, shared by the run queues, the wakers that may make it runnable and the registry
/// the runtime tears down at shutdown. `repr(C)`, what a wake-up and a resume touch first:
/// behind the count of its `Counted` block, which is line-aligned, they share one cache
/// line (a parked fiber's record is cold when its I/O completes); `id` and `registered`,
/// read at spawn, finish and teardown, come last.
#[repr(C)]
pub(crate) struct Fiber {
    pub(crate) state: RunState,
    /// The coroutine, taken out by the worker that runs it and put back when it suspends.
    ///
    /// # Invariant
    ///
    /// `Some` whenever the fiber is PARKED or SCHEDULED and not torn down; `None` while a
    /// worker runs it and once it is done.
    coro: TakeCell<FiberCoro>,
    pub(crate) rt: Arc<Shared>,
    /// The worker the fiber runs on when the runtime pins fibers ([`NO_HOME`] until it
    /// first runs, unless spawned onto a worker): every wake-up queues it there.
    home: AtomicUsize,
    /// The part of its stack the fiber's next resume touches (`coro::stack_window`; 0 before
    /// it first parks): the worker that will resume it prefetches it when the fiber is woken.
    park_window: AtomicUsize,
    id: u64,
    /// Where the fiber sits in the runtime's registry.
    registered: Registered,
}

// The hot fields end within the first line of the block (the count takes 8 bytes of it).
const _: () = assert!(std::mem::offset_of!(Fiber, id) + 8 <= 64);

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
}

/// Makes the fiber runnable if it is parked; remembers the wake-up if it is running.
pub(crate) fn wake(f: FiberRef) {
    if f.state.wake() {
        worker::schedule(f);
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
    coro::on_worker_stack(coro::RUNTIME_CALL_STACK, move || spawn_here(rt, home, f))
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
    let coro = FiberCoro::with_hand_off(stack, body, worker::finish_hand_off);
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::hint::black_box;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use crate::JoinHandle;
    use crate::sync::Sender;
    use crate::sys::coro;

    #[test]
    fn a_fibers_record_and_the_join_slot_of_a_small_result_take_reusable_blocks() {
        use crate::error::JoinError;
        use crate::park::Waker;
        use crate::sys::{counted::Counted, oneshot};
        assert!(Counted::<super::Fiber>::in_block());
        assert!(oneshot::in_block::<Result<u64, JoinError>, Waker>());
        assert!(oneshot::in_block::<
            Result<std::io::Result<usize>, JoinError>,
            Waker,
        >());
    }

    /// Spawns a fiber whose closure carries `N` bytes and returns their sum.
    #[inline(never)]
    fn spawn_carrying<const N: usize>(byte: u8) -> JoinHandle<u32> {
        let load = black_box([byte; N]);
        crate::spawn(move || black_box(load).iter().map(|&b| u32::from(b)).sum())
    }

    /// Goes down the current fiber's stack as far as a spawn of an `N`-byte closure made
    /// there still runs on it instead of on the worker's stack (see `coro::on_worker_stack`):
    /// each level spawns one as a probe. From the deepest level whose probe stayed, it spawns
    /// enough of them to grow the run queue more than once and wakes [`RECEIVERS`] fibers
    /// parked on `tx`'s channel, and returns the handles and the least room any runtime call
    /// there ran in.
    #[inline(never)]
    fn spawn_at_the_edge<const N: usize>(
        tx: &Sender<u32>,
    ) -> Option<(Vec<JoinHandle<u32>>, usize)> {
        let least_room = || coro::LEAST_ROOM_RUN_IN.with(Cell::get);
        let pad = black_box([0u8; 64]);
        coro::LEAST_ROOM_RUN_IN.with(|l| l.set(usize::MAX));
        let probe = spawn_carrying::<N>(0);
        let stayed = least_room() != usize::MAX;
        let deepest = if !stayed {
            None
        } else if let Some(deeper) = spawn_at_the_edge::<N>(tx) {
            Some(deeper)
        } else {
            // The deepest level whose probe stayed: the same frame made the probe.
            coro::LEAST_ROOM_RUN_IN.with(|l| l.set(usize::MAX));
            let mut spawned = Vec::with_capacity(300);
            for _ in 0..300 {
                spawned.push(spawn_carrying::<N>(1));
            }
            for _ in 0..RECEIVERS {
                if let Err(e) = tx.send(7) {
                    return edge_failed(format!("a send to the receivers: {e:?}"));
                }
            }
            Some((spawned, least_room()))
        };
        black_box(pad);
        if let Err(e) = probe.join() {
            return edge_failed(format!("a probe: {e:?}"));
        }
        deepest
    }

    /// What went wrong at the edge, for the test's thread to report: a panic there, on a
    /// fiber with little stack left, would overflow it while printing its backtrace (a
    /// SIGSEGV that says nothing).
    static EDGE_FAILURE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

    fn edge_failed<T>(what: String) -> Option<T> {
        if let Ok(mut f) = EDGE_FAILURE.lock() {
            f.get_or_insert(what);
        }
        None
    }

    /// Every wait of these tests gives up after this long.
    const TIMEOUT: Duration = Duration::from_secs(20);

    /// Fibers on the second worker woken from the edge: more than one block of the first
    /// worker's queue of remote wake-ups for it.
    const RECEIVERS: usize = 100;

    /// Spawns and wakes from the edge of the room on a smallest stack (see
    /// `spawn_at_the_edge`), on worker 0 of two, and checks that all of it ran and came back.
    fn spawn_and_wake_at_the_edge(builder: crate::Builder) {
        const N: usize = 4;
        if crate::probe().is_err() {
            eprintln!("skipping: io_uring is unavailable");
            return;
        }
        let rt = builder
            .workers(2)
            .stack_size(crate::MIN_STACK_SIZE)
            .build()
            .expect("build a runtime");
        let (tx, rx) = crate::sync::channel::<u32>(RECEIVERS);
        let parked = Arc::new(AtomicUsize::new(0));
        let receivers: Vec<_> = (0..RECEIVERS)
            .map(|_| {
                let (rx, parked) = (rx.clone(), Arc::clone(&parked));
                rt.handle().spawn_on(1, move || {
                    parked.fetch_add(1, Ordering::SeqCst);
                    rx.recv().unwrap_or(0)
                })
            })
            .collect();
        // Let them park, so that each send below is a wake-up across workers.
        let deadline = Instant::now() + TIMEOUT;
        while parked.load(Ordering::SeqCst) < RECEIVERS && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        let mut edge = rt.handle().spawn_on(0, move || {
            let Some((spawned, least)) = spawn_at_the_edge::<N>(&tx) else {
                return (0, 0);
            };
            let sum: u32 = spawned
                .into_iter()
                .map(|h| h.join().expect("a fiber"))
                .sum();
            (sum, least)
        });
        let edge = edge.join_timeout(TIMEOUT);
        if let Some(failure) = EDGE_FAILURE.lock().ok().and_then(|mut f| f.take()) {
            panic!("at the edge of the stack: {failure}");
        }
        let (sum, least) = edge.expect("the fiber at the edge");
        // They ran on that fiber's stack with little more room than they ask for.
        let room = coro::RUNTIME_CALL_STACK;
        assert!((room..room + 1024).contains(&least), "ran in {least} bytes");
        assert_eq!(sum, 300 * N as u32);
        for mut r in receivers {
            assert_eq!(r.join_timeout(TIMEOUT), Ok(7));
        }
    }

    #[test]
    fn a_spawn_and_a_wake_up_fit_in_the_room_a_fiber_leaves() {
        spawn_and_wake_at_the_edge(crate::Runtime::builder());
    }

    /// A stealing worker's queue is crossbeam's deque, whose growth retires the old buffer
    /// through crossbeam's epochs: a deeper call than a pinned worker's `VecDeque`.
    #[test]
    fn a_spawn_and_a_wake_up_fit_in_the_room_a_fiber_leaves_when_workers_steal() {
        spawn_and_wake_at_the_edge(crate::Runtime::builder().stealing_for_tests());
    }
}
