//! The coroutine under a fiber: a corosensei coroutine on a pooled stack, movable between
//! worker threads, and the stack switch a parking fiber makes back to its worker.
//!
//! A worker resumes a fiber with [`FiberCoro::resume`]; code running on the fiber gives the
//! thread back with [`suspend`], from any depth, because the current coroutine's `Yielder` is
//! kept in a thread-local while the coroutine runs. After `suspend` returns the fiber may be on
//! another thread: nothing here keeps thread-local state across the switch, and the accessors
//! are `#[inline(never)]` so that the thread pointer is read afresh after every resume.

use std::cell::Cell;

use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::stack::{MIN_STACK_SIZE, PooledStack};

/// Why a fiber gave its thread back to the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// Runnable again right away: put it at the back of the run queue.
    Yield,
    /// Waiting for a wake-up (an I/O completion, a sync primitive, a join).
    Park,
}

type Inner = Coroutine<(), (Suspend, usize), (), PooledStack>;

/// A fiber's coroutine, with the address of its `Yielder` once it has started.
pub(crate) struct FiberCoro {
    inner: Inner,
    /// The address of the coroutine's `Yielder` (0 until its first resume). It lives on the
    /// coroutine's own stack and so has a fixed address for the coroutine's lifetime; the
    /// body publishes it in `YIELDER` when it starts, and `resume` keeps it from there.
    yielder: usize,
    /// The top (highest address) of the coroutine's stack.
    top: usize,
}

impl std::fmt::Debug for FiberCoro {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FiberCoro")
            .field("started", &self.inner.started())
            .field("done", &self.inner.done())
            .finish()
    }
}

// SAFETY: `Coroutine` is `!Send` because the code on its stack might hold `!Send` values
// across a suspension point, and moving the coroutine would move them to another thread.
// [1] A fiber starts from a `Send + 'static` closure (`FiberCoro::new` requires it), so
// everything it begins with may cross threads. [2] What the fiber creates on its own stack is
// reachable from elsewhere only through the fiber, which runs on one thread at a time: the
// scheduler's state machine (`fiber.rs`) hands a fiber to exactly one worker per resume, and
// the `TakeCell` around the coroutine orders the hand-over between threads. [3] The remaining
// hazard, values tied to the identity of the OS thread (a reference into a thread-local, a
// `std::sync::MutexGuard`) held across a blocking point, is excluded by the migration rule in
// the crate documentation, which every blocking function of this crate repeats; the
// runtime's own thread-locals are never held across a switch (see the module docs).
unsafe impl Send for FiberCoro {}

thread_local! {
    /// Address of the `Yielder` of the coroutine this thread is running, or 0.
    static YIELDER: Cell<usize> = const { Cell::new(0) };
    /// Set while this thread drops suspended coroutines at shutdown.
    static TEARDOWN: Cell<bool> = const { Cell::new(false) };
}

#[inline(never)]
fn swap_yielder(addr: usize) -> usize {
    YIELDER.with(|y| y.replace(addr))
}

#[inline(never)]
fn current_yielder() -> usize {
    YIELDER.with(Cell::get)
}

/// Whether this thread is force-unwinding fibers at shutdown. A fiber's code sees this from
/// destructors that run during that unwinding, where it must not park.
#[inline(never)]
pub(crate) fn in_teardown() -> bool {
    TEARDOWN.with(Cell::get)
}

/// Whether the calling code runs on a fiber.
#[inline(never)]
pub(crate) fn on_fiber() -> bool {
    current_yielder() != 0
}

/// The largest fiber body [`FiberCoro::new`] places on the new stack as it is.
const LARGEST_INLINE_BODY: usize = 512;

impl FiberCoro {
    /// A coroutine that will run `body` on `stack` when first resumed.
    ///
    /// `body` must not unwind: the runtime wraps user code in `catch_unwind`.
    ///
    /// A body larger than [`LARGEST_INLINE_BODY`] is moved to the heap first: corosensei
    /// writes the body onto the new stack and panics on one over 1 KiB.
    pub(crate) fn new<F>(stack: PooledStack, body: F) -> FiberCoro
    where
        F: FnOnce() + Send + 'static,
    {
        if size_of::<F>() > LARGEST_INLINE_BODY {
            let body = Box::new(body);
            return FiberCoro::with_body(stack, body);
        }
        FiberCoro::with_body(stack, body)
    }

    fn with_body<F>(stack: PooledStack, body: F) -> FiberCoro
    where
        F: FnOnce() + Send + 'static,
    {
        let top = corosensei::stack::Stack::base(&stack).get();
        let inner = Coroutine::with_stack(stack, move |y: &Yielder<(), (Suspend, usize)>, ()| {
            swap_yielder(std::ptr::from_ref(y) as usize);
            body();
        });
        FiberCoro {
            inner,
            yielder: 0,
            top,
        }
    }

    /// Runs the fiber on this thread until it suspends (`Some((why, window))`, `window` the
    /// part of its stack the next resume touches, for [`prefetch_stack`]) or returns (`None`).
    ///
    /// A panic escaping the body would propagate here; the runtime's body never lets one out.
    ///
    /// Inlined into the worker's resume loop: left to itself the compiler inlines it or not
    /// depending on unrelated changes around the loop, and the call it leaves costs a yield
    /// 20–30% (a yield 94 against 78 ns when a change elsewhere in the worker made it a call).
    #[inline(always)]
    pub(crate) fn resume(&mut self) -> Option<(Suspend, usize)> {
        let prev = swap_yielder(self.yielder);
        let r = self.inner.resume(());
        // Whenever the coroutine gives the thread back, `YIELDER` holds its `Yielder` (set
        // by the body on its first run, and restored by `on_worker_stack`).
        self.yielder = swap_yielder(prev);
        match r {
            CoroutineResult::Yield((why, sp)) => Some((why, stack_window(sp, self.top))),
            CoroutineResult::Return(()) => None,
        }
    }

    /// The stack of a coroutine that returned, for another coroutine.
    ///
    /// # Panics
    ///
    /// If the coroutine has not returned (`resume` gave `None`).
    pub(crate) fn into_stack(self) -> PooledStack {
        self.inner.into_stack()
    }

    /// Drops a suspended coroutine, unwinding its stack so that its destructors run. Code on
    /// the fiber sees [`in_teardown`] meanwhile and must not park.
    pub(crate) fn teardown(self) {
        let prev = TEARDOWN.with(|t| t.replace(true));
        drop(self);
        TEARDOWN.with(|t| t.set(prev));
    }
}

/// Gives the thread back to the worker that resumed the current fiber.
///
/// Returns `false` without suspending when the caller is not on a fiber, or runs in a
/// destructor during shutdown teardown. After a `true` return the fiber may be running on a
/// different thread.
#[inline(never)]
pub(crate) fn suspend(why: Suspend) -> bool {
    let addr = current_yielder();
    if addr == 0 || in_teardown() {
        return false;
    }
    // SAFETY: [1] `YIELDER` is non-zero only between `FiberCoro::resume`'s two
    // `swap_yielder` calls (or from the body's first line until its end), that is while this
    // thread runs the coroutine whose `Yielder` lives at `addr`; [2] only that coroutine's
    // code runs on this thread meanwhile (the worker loop is itself suspended in `resume`), so
    // we are on that coroutine's stack and the `Yielder` outlives this call; [3] the reference
    // is used on this thread only and dropped before returning.
    let yielder = unsafe { &*(addr as *const Yielder<(), (Suspend, usize)>) };
    let here = 0u8;
    yielder.suspend((why, std::ptr::from_ref(&here) as usize));
    true
}

/// Runs `f` on the fiber's own stack when at least `needs` bytes of it are left below the
/// caller (or when not on a fiber at all), and otherwise on the stack of the worker that
/// resumed the fiber, so that runtime work with deep call chains (a run-queue resize, carving
/// a new stack) does not overflow a small fiber stack. `needs` is
/// [`RUNTIME_CALL_STACK`] for calls it is measured for, [`ALWAYS_ON_WORKER_STACK`] for
/// calls whose depth is not bounded. `f` must not park.
///
/// The switch there and back is two of a spawn + join's stack switches, and two of every
/// wake-up one fiber gives another; a fiber that has used little of its stack skips it.
#[inline(never)]
pub(crate) fn on_worker_stack<F, R>(needs: usize, f: F) -> R
where
    F: FnOnce() -> R + Send,
{
    let addr = current_yielder();
    if addr == 0 || in_teardown() {
        return f();
    }
    let left = stack_left(addr);
    if left >= needs {
        #[cfg(test)]
        LEAST_ROOM_RUN_IN.with(|l| l.set(l.get().min(left)));
        return f();
    }
    // SAFETY: as in `suspend`: a non-zero `YIELDER` is the `Yielder` of the coroutine this
    // thread is running, on whose stack we are; the reference does not outlive this call.
    let yielder = unsafe { &*(addr as *const Yielder<(), (Suspend, usize)>) };
    // While `f` runs on the worker's stack, this thread is not "on a fiber": a nested call
    // must not switch to the worker's stack again (it would start at the same stack top and
    // overwrite the frames of this one), and `f` cannot suspend.
    swap_yielder(0);
    let r = yielder.on_parent_stack(f);
    swap_yielder(addr);
    r
}

/// The stack a runtime call made through [`on_worker_stack`] with this room may take at
/// most: a spawn (carving a stack, building the coroutine, registering the fiber) or a pinned
/// worker's wake-up (a `VecDeque` push that grows the queue). Unoptimised frames are several
/// times larger, so a debug build asks for more.
/// `fiber::tests::a_spawn_and_a_wake_up_fit_in_the_room_a_fiber_leaves` runs both at the edge
/// of this room on the smallest stack, with wake-ups of fibers on its own worker and on
/// another; they needed less than 1 KiB in a release build and 2 to 3 KiB in a debug build
/// (the test dies of SIGSEGV with less).
pub(crate) const RUNTIME_CALL_STACK: usize = if cfg!(debug_assertions) {
    8 * 1024
} else {
    4 * 1024
};

/// The room no fiber has: the call always runs on the worker's stack. For a stealing
/// worker's wake-up, whose crossbeam deque, when it grows, retires the old buffer through
/// crossbeam's epochs, moving a bag of 64 deferred functions by value (in a debug build that
/// overflowed a 16 KiB stack with 14 KiB left).
pub(crate) const ALWAYS_ON_WORKER_STACK: usize = usize::MAX;

/// How much of the current fiber's stack is left below the caller, counting the stack as
/// [`MIN_STACK_SIZE`] bytes (every fiber stack has at least that many). The `Yielder` at
/// `yielder` sits in the coroutine's first frame, at the top of the stack, so what lies
/// between it and here is (slightly less than) what the fiber has used. Anywhere else (above
/// the `Yielder`: not on that stack) counts as no room.
#[inline(always)]
fn stack_left(yielder: usize) -> usize {
    let here = 0u8;
    let used = yielder.checked_sub(std::ptr::from_ref(&here) as usize);
    used.map_or(0, |used| MIN_STACK_SIZE.saturating_sub(used))
}

#[cfg(test)]
thread_local! {
    /// The least [`stack_left`] a runtime call ran in on a fiber's own stack on this thread.
    pub(crate) static LEAST_ROOM_RUN_IN: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The part of a parked fiber's stack its resume will touch, packed in one word for
/// [`prefetch_stack`]: the first cache line (64-aligned) and, in the low six bits, the number
/// of lines. The window is `sp` minus [`PREFETCH_BELOW`] (the registers the switch saved) to
/// plus [`PREFETCH_ABOVE`] (the frames the fiber returns through), clamped to the page of
/// `sp` below and to the stack's top above: only pages the fiber has used, which are mapped.
/// A prefetch into a page that is not (a guard page, or stack never touched) is dropped only
/// after a page walk, which cost spawn + join 500 ns when the window crossed one.
pub(crate) fn stack_window(sp: usize, top: usize) -> usize {
    let page = super::page_size();
    let lo = sp.saturating_sub(PREFETCH_BELOW).max(sp & !(page - 1)) & !63;
    let hi = sp.saturating_add(PREFETCH_ABOVE).min(top);
    if sp == 0 || hi <= lo {
        return 0;
    }
    let lines = ((hi - lo).div_ceil(64)).min(63);
    lo | lines
}

/// Asks the CPU to start loading a parked fiber's stack window (from [`stack_window`]), so
/// that the cache misses of a cold stack overlap instead of stalling the resume one by one.
/// Only for the thread that will resume the fiber: lines prefetched into another core's cache
/// would have to be taken back from it when the fiber writes its stack.
pub(crate) fn prefetch_stack(window: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut a = window & !63;
        for _ in 0..(window & 63) {
            // SAFETY: a prefetch is a hint: it never faults and changes no memory.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    a as *const i8,
                )
            };
            a += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = window;
}

/// How much of a parked stack [`prefetch_stack`] loads: below the recorded address, the
/// registers the switch saved; above it, the frames the fiber returns through (an echo's
/// park, 16 lines in all). Measured at 20,000 echoes/s over 1000 connections: 256/768
/// saved 9% of srv-fiber's CPU per echo, 512/1536 4%, 512/3072 no more than that.
const PREFETCH_BELOW: usize = 256;
const PREFETCH_ABOVE: usize = 768;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::sys::stack::StackPool;

    #[test]
    fn suspend_from_nested_calls_returns_to_resume() {
        let pool = StackPool::new(64 * 1024);
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let l = Arc::clone(&log);
        fn deep(n: u32, l: &std::sync::Mutex<Vec<u32>>) {
            if n == 0 {
                l.lock().unwrap().push(1);
                assert!(suspend(Suspend::Park));
                l.lock().unwrap().push(3);
            } else {
                deep(n - 1, l);
            }
        }
        let mut co = FiberCoro::new(pool.get().unwrap(), move || deep(10, &l));
        assert!(!on_fiber());
        assert_eq!(co.resume().map(|r| r.0), Some(Suspend::Park));
        log.lock().unwrap().push(2);
        // Resume on another thread: the coroutine migrates.
        let co = std::thread::spawn(move || {
            assert_eq!(co.resume().map(|r| r.0), None);
            co
        })
        .join()
        .unwrap();
        drop(co);
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3]);
        assert_eq!(pool.counts().in_use, 0);
    }

    #[test]
    fn the_prefetch_window_stays_in_used_pages_of_the_stack() {
        let page = crate::sys::page_size();
        let top = 16 * page;
        // Deep in the stack: 256 below, 768 above, 16 lines.
        let sp = top - 2 * page + 1024;
        let w = stack_window(sp, top);
        assert_eq!(w & !63, (sp - 256) & !63);
        assert_eq!(w & 63, 16);
        // Just above a page boundary: nothing below the page of `sp`.
        let sp = top - 4 * page + 64;
        assert_eq!(stack_window(sp, top) & !63, top - 4 * page);
        // Near the top: nothing above the stack.
        let sp = top - 128;
        let w = stack_window(sp, top);
        assert!((w & !63) + (w & 63) * 64 <= top);
        assert_eq!(stack_window(0, top), 0);
    }

    #[test]
    fn suspend_outside_a_fiber_is_refused() {
        assert!(!suspend(Suspend::Yield));
    }

    #[test]
    fn teardown_runs_destructors_and_frees_the_stack() {
        struct Flag(Arc<AtomicUsize>);
        impl Drop for Flag {
            fn drop(&mut self) {
                // A destructor during teardown must not be able to park.
                assert!(!suspend(Suspend::Park));
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let pool = StackPool::new(64 * 1024);
        let dropped = Arc::new(AtomicUsize::new(0));
        let d = Arc::clone(&dropped);
        let mut co = FiberCoro::new(pool.get().unwrap(), move || {
            let _f = Flag(d);
            loop {
                suspend(Suspend::Park);
            }
        });
        assert_eq!(co.resume().map(|r| r.0), Some(Suspend::Park));
        co.teardown();
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(pool.counts().in_use, 0);
    }
}
