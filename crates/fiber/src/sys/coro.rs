//! The coroutine under a fiber: its own stack (from the pool), movable between worker
//! threads, switched to and from with the assembly of [`super::switch`].
//!
//! A worker resumes a fiber in three steps, [`FiberCoro::enter`], [`run`] and
//! [`FiberCoro::settle`]; code running on the fiber gives the thread back with [`suspend`],
//! from any depth, because the current coroutine's [`Link`] is kept in a thread-local while
//! the coroutine runs; or hands it straight to another suspended coroutine with
//! [`switch_to`], which then switches back to the worker in its place. After `suspend`
//! returns the fiber may be on another thread: nothing here keeps thread-local state across
//! the switch, and the accessors are `#[inline(never)]` so that the thread pointer is read
//! afresh after every resume (`switch_to` alone reads them inline: only fibers that never
//! change threads hand off).
//!
//! A coroutine's state (in its `Link`) says whether its saved stack pointer may be switched
//! to: `enter` refuses one that is running, and a coroutine becomes suspended only once its
//! stack pointer is saved (by its resumer after the switch back, or by the sibling it handed
//! the thread to, on arrival). So a `FiberCoro` may be handed to another thread before its
//! switch away has happened, without that thread ever entering it early.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
use std::any::Any;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::ptr::NonNull;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

use super::stack::{MIN_STACK_SIZE, PooledStack};
use super::switch;

/// How a suspended coroutine got its thread back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Resumed by its worker, or handed the thread by a coroutine that suspended.
    Resumed,
    /// Handed the thread by a coroutine that returned ([`FiberCoro::with_hand_off`]), whose
    /// `FiberCoro` its holder may now recycle.
    AfterReturned,
}

/// Why a fiber gave its thread back to the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// Runnable again right away: put it at the back of the run queue.
    Yield,
    /// Waiting for a wake-up (an I/O completion, a sync primitive, a join).
    Park,
}

// The word a switch passes: to a coroutine (besides the address of a `Link`, see
// `switch_to`) ...
const RESUME: usize = 0;
const FORCE_UNWIND: usize = 1;
// ... and back to its resumer.
const YIELDED: usize = 2;
const PARKED: usize = 3;
const RETURNED: usize = 4;
const PANICKED: usize = 5;
/// Words at least this large are the address of a `Link` (nothing is mapped at page 0),
/// with [`FINISHED_BIT`] set when that coroutine has returned.
const FIRST_LINK_WORD: usize = 4096;
const FINISHED_BIT: usize = 1;

// `Link::state`.
const NOT_STARTED: u8 = 0;
const SUSPENDED: u8 = 1;
const RUNNING: u8 = 2;
const DONE: u8 = 3;

/// What a coroutine and its resumer share. It lives at the top of the coroutine's own stack,
/// so it has a fixed address for the coroutine's lifetime (the coroutine's code finds it
/// through `LINK`) and costs no allocation. `#[repr(C)]`: the assembly of `switch::start`
/// finds `parent_sp` in its second word. Aligned to a cache line, with what every resume and
/// suspension reads or writes (`sp`, `parent_sp`, `state`, `top`) in its first: a parked
/// fiber's link is cold when it is resumed, so this is one miss, not two.
#[repr(C, align(64))]
struct Link {
    /// The coroutine's stack pointer while it is suspended (0 before it starts).
    sp: usize,
    /// The resumer's stack pointer while the coroutine runs: where it switches back to.
    parent_sp: usize,
    /// NOT_STARTED or SUSPENDED: `sp` may be switched to; RUNNING: it may not (the
    /// coroutine runs, or its switch away has not saved `sp` yet); DONE.
    state: AtomicU8,
    /// The top (highest address) of the stack this link lives on.
    top: usize,
    /// The body not yet started (at the top of the stack, the first frame starting below
    /// it), the function that runs it, and how to drop it if it never is.
    body: usize,
    entry: switch::Entry,
    drop_body: unsafe fn(usize),
    /// Asked when the body has returned: a suspended coroutine to hand the thread to instead
    /// of going back to the resumer (see [`FiberCoro::with_hand_off`]).
    on_finish: fn() -> Option<Entered>,
    /// A panic that escaped the body, for the resumer to propagate.
    panic: Option<Box<dyn Any + Send>>,
    /// The stack this link lives on: `Some` until the coroutine's `FiberCoro` gives it back
    /// (`into_stack`, or its drop), and kept for good (leaked) by a coroutine whose frames
    /// may still run.
    stack: Option<PooledStack>,
}

const _: () = assert!(std::mem::offset_of!(Link, parent_sp) == size_of::<usize>());
const _: () = assert!(std::mem::offset_of!(Link, top) + size_of::<usize>() <= 64);

/// The unwinding a teardown starts in a suspended coroutine (from its `suspend` call).
struct ForcedUnwind;

/// A fiber's coroutine: its stack, with the [`Link`] (which holds the stack itself) and
/// (until it starts) the body on it. One pointer, cheap to move in and out of a fiber.
pub(crate) struct FiberCoro {
    link: NonNull<Link>,
}

/// A coroutine claimed for running ([`FiberCoro::enter`]): [`run`] switches to it, or
/// [`switch_to`] from a sibling.
pub(crate) struct Entered {
    link: NonNull<Link>,
    /// Not started: entered with `switch::start`, a call into its entry.
    fresh: bool,
}

/// What [`run`] came back with: the word, and which coroutine switched back (the one entered,
/// or a sibling it handed the thread to), for [`FiberCoro::settle`].
#[must_use]
pub(crate) struct Switched {
    word: usize,
    from: usize,
}

impl std::fmt::Debug for FiberCoro {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FiberCoro")
            .field("state", &self.state())
            .finish()
    }
}

// SAFETY: `FiberCoro` holds a raw pointer into its own stack, so it is not `Send` by itself;
// moving it moves the suspended code on that stack to another thread. [1] A fiber starts
// from a `Send + 'static` closure (`FiberCoro::new` requires it), so everything it begins
// with may cross threads. [2] What the fiber creates on its own stack is reachable from
// elsewhere only through the fiber, which runs on one thread at a time: `enter` refuses a
// coroutine that is not suspended, and the state is made SUSPENDED only after its stack
// pointer is saved (release; `enter` acquires). [3] The remaining hazard, values tied to the
// identity of the OS thread (a reference into a thread-local, a `std::sync::MutexGuard`)
// held across a blocking point, is excluded by the migration rule in the crate documentation,
// which every blocking function of this crate repeats; the runtime's own thread-locals are
// never held across a switch (see the module docs).
unsafe impl Send for FiberCoro {}

thread_local! {
    /// Address of the `Link` of the coroutine this thread is running, or 0.
    static LINK: Cell<usize> = const { Cell::new(0) };
    /// Set while this thread drops suspended coroutines at shutdown.
    static TEARDOWN: Cell<bool> = const { Cell::new(false) };
}

#[inline(never)]
fn swap_link(addr: usize) -> usize {
    LINK.with(|l| l.replace(addr))
}

#[inline(never)]
fn current_link() -> usize {
    LINK.with(Cell::get)
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
    current_link() != 0
}

/// The largest fiber body [`FiberCoro::new`] places on the new stack as it is; a larger one
/// is boxed, so that a stack's top page keeps room for the fiber's frames.
const LARGEST_INLINE_BODY: usize = 512;

// The link and the largest inline body leave most of any stack to its frames.
const _: () = assert!(size_of::<Link>() + 16 + LARGEST_INLINE_BODY + 16 <= MIN_STACK_SIZE / 8);

/// What the top of a new stack holds above the first frame: the `Link`, then the body.
const fn reserved_top<F>() -> usize {
    size_of::<Link>().next_multiple_of(16) + size_of::<F>().next_multiple_of(16)
}

impl FiberCoro {
    /// A coroutine that will run `body` on `stack` when first resumed.
    ///
    /// `body` must not unwind: the runtime wraps user code in `catch_unwind` (a panic that
    /// escapes anyway is resumed by [`settle`](Self::settle)).
    pub(crate) fn new<F>(stack: PooledStack, body: F) -> FiberCoro
    where
        F: FnOnce() + Send + 'static,
    {
        if size_of::<F>() > LARGEST_INLINE_BODY || align_of::<F>() > 16 {
            let body = Box::new(body);
            return FiberCoro::with_body(stack, body);
        }
        FiberCoro::with_body(stack, body)
    }

    /// As [`new`](Self::new), and when the body has returned `on_finish` may name a
    /// suspended coroutine to switch to in place of going back to the resumer (which the
    /// other one then takes over, as after [`switch_to`]). The returned coroutine is marked
    /// DONE by that one's arrival, for whoever holds its `FiberCoro` to recycle the stack.
    /// `on_finish` runs on this coroutine's stack, at its very end: it must not suspend.
    pub(crate) fn with_hand_off<F>(
        stack: PooledStack,
        body: F,
        on_finish: fn() -> Option<Entered>,
    ) -> FiberCoro
    where
        F: FnOnce() + Send + 'static,
    {
        let co = FiberCoro::new(stack, body);
        // SAFETY: as in `state`: the coroutine has not started.
        unsafe { (*co.link.as_ptr()).on_finish = on_finish };
        co
    }

    fn with_body<F>(stack: PooledStack, body: F) -> FiberCoro
    where
        F: FnOnce() + Send + 'static,
    {
        let top = stack.top();
        // A stack's top is the end of its pool slot: page-aligned, by `PooledStack`'s making.
        debug_assert_eq!(
            top % align_of::<Link>(),
            0,
            "a stack top that is not line-aligned"
        );
        let link_addr = top - size_of::<Link>().next_multiple_of(16);
        let body_addr = top - reserved_top::<F>();
        // SAFETY: [1] the stack is ours alone (a `PooledStack` is handed to one owner) and at
        // least `MIN_STACK_SIZE` long, so the `reserved_top` bytes for the link and the body
        // (at most 512 + 128) are writable memory of it; [2] `link_addr` is aligned for a
        // `Link` (the top is, and its size is a multiple of its alignment), `body_addr` is
        // 16-aligned, and `F`'s alignment is at most 16 (a larger one was boxed); [3]
        // `entry::<F>` reads the body from `body_addr` (`run_with` and `switch_to` pass it).
        unsafe { (body_addr as *mut F).write(body) };
        let link = Link {
            sp: 0,
            parent_sp: 0,
            state: AtomicU8::new(NOT_STARTED),
            body: body_addr,
            entry: entry::<F>,
            drop_body: drop_body::<F>,
            on_finish: no_hand_off,
            panic: None,
            stack: Some(stack),
            top,
        };
        // SAFETY: `link_addr` is aligned writable memory of our stack, above the body ([1]
        // and [2] above), and nothing else lives there.
        unsafe { (link_addr as *mut Link).write(link) };
        FiberCoro {
            // SAFETY: a stack's top is never 0, so neither is anything below it in it.
            link: unsafe { NonNull::new_unchecked(link_addr as *mut Link) },
        }
    }

    fn state(&self) -> u8 {
        // SAFETY: the link lives on our stack, mapped while we hold it (or leaked with it).
        unsafe { self.link.as_ref().state.load(Ordering::Acquire) }
    }

    /// Runs the fiber on this thread until it suspends (`Some((why, window))`, `window` the
    /// part of its stack the next resume touches, for [`prefetch_stack`]) or returns (`None`).
    /// What the worker does in three steps ([`enter`](Self::enter), [`run`],
    /// [`settle`](Self::settle)), for a coroutine that hands the thread to no sibling.
    ///
    /// # Panics
    ///
    /// If the coroutine is not suspended (it runs, or returned), or a sibling it handed the
    /// thread to switched back instead.
    #[cfg(test)]
    pub(crate) fn resume(&mut self) -> Option<(Suspend, usize)> {
        let switched = run(self.enter());
        self.settle(switched)
    }

    /// Whether the coroutine has run at all.
    pub(crate) fn started(&self) -> bool {
        self.state() != NOT_STARTED
    }

    /// Claims the coroutine for running: it must be suspended (or not started).
    ///
    /// # Panics
    ///
    /// If it runs (here, elsewhere, or has handed the thread to a sibling whose arrival has
    /// not yet marked it suspended) or has returned.
    #[inline(always)]
    pub(crate) fn enter(&mut self) -> Entered {
        // SAFETY: as in `state`.
        let state = unsafe { &self.link.as_ref().state };
        assert!(
            may_enter(state),
            "entered a coroutine that is not suspended (state {})",
            self.state()
        );
        let fresh = self.state() == NOT_STARTED;
        // SAFETY: as in `state`.
        unsafe { self.link.as_ref().state.store(RUNNING, Ordering::Relaxed) };
        Entered {
            link: self.link,
            fresh,
        }
    }

    /// Takes back the thread from a [`run`] of this coroutine: what the word it switched back
    /// with means, with its state updated.
    ///
    /// # Panics
    ///
    /// If `switched` came from another coroutine, or the body panicked (the panic goes on
    /// here).
    #[inline(always)]
    pub(crate) fn settle(&mut self, switched: Switched) -> Option<(Suspend, usize)> {
        assert_eq!(
            switched.from,
            self.link.as_ptr() as usize,
            "settled a coroutine with another one's switch"
        );
        // SAFETY: the coroutine switched back to us (`from`), so its `sp` is saved and no
        // code runs on its stack.
        let link = unsafe { &mut *self.link.as_ptr() };
        let why = match switched.word {
            YIELDED => Suspend::Yield,
            PARKED => Suspend::Park,
            PANICKED => {
                link.state.store(DONE, Ordering::Relaxed);
                let payload = link.panic.take();
                resume_unwind(payload.unwrap_or_else(|| Box::new("fiber body panicked")))
            }
            _ => {
                link.state.store(DONE, Ordering::Relaxed);
                return None;
            }
        };
        publish_suspended(&link.state);
        Some((why, stack_window(link.sp, link.top)))
    }

    /// The part of the stack its next resume touches ([`stack_window`]) if the coroutine, which
    /// runs here, suspends from about here: for a suspension whose stack pointer `settle`
    /// does not see (a hand-off to a sibling).
    pub(crate) fn window_here(&self) -> usize {
        let here = 0u8;
        // SAFETY: as in `state`; `top` does not change.
        let top = unsafe { self.link.as_ref().top };
        stack_window(std::ptr::from_ref(&here) as usize, top)
    }

    /// The stack of a coroutine that returned, for another coroutine.
    ///
    /// # Panics
    ///
    /// If the coroutine has not returned (`settle` gave `None`).
    pub(crate) fn into_stack(self) -> PooledStack {
        assert_eq!(self.state(), DONE, "the stack of a coroutine still running");
        // SAFETY: as in `settle`: nothing runs on the stack of a coroutine that returned.
        match unsafe { (*self.link.as_ptr()).stack.take() } {
            Some(s) => s,
            None => unreachable!("a FiberCoro keeps its stack until into_stack"),
        }
    }

    /// Drops a suspended coroutine, unwinding its stack so that its destructors run. Code on
    /// the fiber sees [`in_teardown`] meanwhile and must not park.
    pub(crate) fn teardown(self) {
        drop(self);
    }

    /// Unwinds a suspended coroutine from its `suspend` call, with `TEARDOWN` set.
    fn force_unwind(&mut self) {
        let prev_teardown = TEARDOWN.with(|t| t.replace(true));
        let entered = self.enter();
        let switched = run_with(entered, FORCE_UNWIND);
        TEARDOWN.with(|t| t.set(prev_teardown));
        if switched.from != self.link.as_ptr() as usize {
            // Cannot happen (`switch_to` refuses during teardown). The coroutine stays
            // RUNNING, so its stack is never reused (`Drop`).
            return;
        }
        // SAFETY: as in `settle`.
        let link = unsafe { &mut *self.link.as_ptr() };
        match switched.word {
            RETURNED => link.state.store(DONE, Ordering::Relaxed),
            PANICKED => {
                // A destructor panicked while unwinding and the panic was caught inside the
                // fiber; nowhere to report it at teardown.
                link.state.store(DONE, Ordering::Relaxed);
                drop(link.panic.take());
            }
            _ => {
                // It suspended again (it cannot: `suspend` refuses during teardown). Its
                // frames must never run again: it stays RUNNING, so its stack is never
                // reused (`Drop`).
            }
        }
    }
}

impl Drop for FiberCoro {
    fn drop(&mut self) {
        match self.state() {
            NOT_STARTED => {
                // SAFETY: as in `state`; nothing runs on the stack.
                let link = unsafe { &mut *self.link.as_ptr() };
                link.state.store(DONE, Ordering::Relaxed);
                // SAFETY: the body written by `with_body` was never read (the coroutine never
                // started) and is dropped once, here.
                unsafe { (link.drop_body)(link.body) };
            }
            SUSPENDED => self.force_unwind(),
            _ => {}
        }
        if self.state() == DONE {
            // SAFETY: nothing runs on the stack of a coroutine that is DONE. The stack goes
            // back to its pool last: the link lives on it.
            let stack = unsafe { (*self.link.as_ptr()).stack.take() };
            drop(stack);
        }
        // Still RUNNING (entered and never run, running somewhere, or refusing to unwind):
        // its frames may run, so its stack is leaked where it is, with the link.
    }
}

/// Switches this thread to an entered coroutine until it (or a sibling it hands the thread
/// to) switches back.
#[inline(always)]
pub(crate) fn run(entered: Entered) -> Switched {
    run_with(entered, RESUME)
}

#[inline(always)]
fn run_with(entered: Entered, word: usize) -> Switched {
    let link = entered.link.as_ptr();
    let prev = swap_link(link as usize);
    // SAFETY: [1] `enter` found the coroutine NOT_STARTED (then its body sits at `body`, the
    // top of its unused stack, and `entry` runs it) or SUSPENDED (acquire: `sp` is the stack
    // pointer its last switch saved), and marked it RUNNING, so nobody else switches to it;
    // [2] its stack is mapped while the `FiberCoro` lives, and a `FiberCoro` dropped while
    // RUNNING leaks its stack; [3] `parent_sp` is ours to write, and the link is
    // `#[repr(C)]` with `parent_sp` second, as `start` needs.
    let word = unsafe { entered.switch_into(&raw mut (*link).parent_sp, word) };
    // Whoever switched back left its own link here (a sibling `switch_to` moves it).
    let from = swap_link(prev);
    Switched { word, from }
}

impl Entered {
    /// Switches the thread to this coroutine, saving the caller's stack pointer in `save`:
    /// a call into its entry if it has not started (`switch::start`), else a switch to the
    /// stack pointer it saved. Returns the word it (or whoever took over) switches back with.
    ///
    /// # Safety
    ///
    /// As for `switch::switch`: `save` is the caller's own slot, and the caller's context
    /// stays where it is until switched to again. The coroutine was entered (`enter`), so
    /// nobody else switches to it, and its stack is mapped while its `FiberCoro` lives (or is
    /// leaked with it).
    #[inline(always)]
    unsafe fn switch_into(self, save: *mut usize, word: usize) -> usize {
        let link = self.link.as_ptr();
        // SAFETY: the caller's guarantees; a fresh coroutine's body sits at `body`, the top
        // of its unused stack, and `entry` runs it; a suspended one's `sp` is the stack
        // pointer its last switch saved (published before `enter` could see SUSPENDED); the
        // link is `#[repr(C)]` with `parent_sp` second, as `start` needs.
        unsafe {
            if self.fresh {
                let body = (*link).body;
                switch::start(save, word, body, (*link).entry, body, link as usize)
            } else {
                switch::switch(save, (*link).sp, word)
            }
        }
    }
}

/// Whether the caller may hand its thread to a sibling with [`switch_to`]: it runs on a
/// coroutine, not at teardown, with at least `needs` bytes of stack left for the work it
/// does before the switch. The thread-locals are read inline: a caller that hands off comes
/// back on the same thread (only a runtime that pins fibers does).
#[inline(always)]
pub(crate) fn may_switch_to(needs: usize) -> bool {
    let link = LINK.with(Cell::get);
    link != 0 && stack_left(link) >= needs && !TEARDOWN.with(Cell::get)
}

/// From code on a coroutine: hands this thread straight to `next`, which takes over the
/// running coroutine's resumer (its next `suspend` goes there). The running coroutine is
/// left suspended (marked so by `next` once its stack pointer is saved), to be resumed by
/// whoever holds its `FiberCoro`; this returns when it is, on this thread (only a runtime
/// that pins fibers hands off: the thread-locals are read inline).
///
/// # Panics
///
/// Off a coroutine, or during teardown ([`may_switch_to`] says).
#[inline(always)]
pub(crate) fn switch_to(next: Entered) -> Arrival {
    let to = next.link.as_ptr();
    let me = LINK.with(Cell::get);
    assert!(
        me != 0 && !TEARDOWN.with(Cell::get),
        "switch_to off a coroutine or at teardown"
    );
    LINK.with(|l| l.set(to as usize));
    let me = me as *mut Link;
    // SAFETY: [1] `me` is the link of the coroutine running here (from `LINK`), so `sp` is
    // ours to write; its resumer waits at `parent_sp`, which `next` takes over; [2] `next`
    // was entered (see `run_with` [1], [2]); [3] the word passed is `me`'s address, which
    // `next` marks suspended once this switch has saved `sp` (`arrived`).
    let back = unsafe {
        (*to).parent_sp = (*me).parent_sp;
        next.switch_into(&raw mut (*me).sp, me as usize)
    };
    arrived(back)
}

/// What a coroutine does first with the word it was switched to with: a sibling's link is
/// marked suspended (its stack pointer is saved by now), or done (it has returned, and is off
/// its stack), and a teardown starts unwinding.
#[inline(always)]
fn arrived(word: usize) -> Arrival {
    if word >= FIRST_LINK_WORD {
        let link = (word & !FINISHED_BIT) as *const Link;
        // SAFETY: the word is the link of the coroutine that switched here (`switch_to`, or
        // the end of `entry`), whose stack is mapped while its `FiberCoro` lives; the state
        // is atomic.
        let state = unsafe { &(*link).state };
        if word & FINISHED_BIT == 0 {
            publish_suspended(state);
        } else {
            state.store(DONE, Ordering::Release);
            return Arrival::AfterReturned;
        }
    } else if word == FORCE_UNWIND {
        resume_unwind(Box::new(ForcedUnwind));
    }
    Arrival::Resumed
}

/// Marks a coroutine whose stack pointer is saved as one that may be entered (release:
/// [`may_enter`] acquires, so whoever enters it next sees the saved stack pointer and
/// everything the coroutine wrote before its switch).
#[inline(always)]
fn publish_suspended(state: &AtomicU8) {
    state.store(SUSPENDED, Ordering::Release);
}

/// Whether a coroutine may be entered: not started, or suspended with its stack pointer
/// saved ([`publish_suspended`]).
#[inline(always)]
fn may_enter(state: &AtomicU8) -> bool {
    matches!(state.load(Ordering::Acquire), NOT_STARTED | SUSPENDED)
}

/// Drops a body of type `F` at `addr` in place.
///
/// # Safety
///
/// `addr` holds an `F` nobody else reads or drops.
unsafe fn drop_body<F>(addr: usize) {
    // SAFETY: the caller's guarantee.
    unsafe { std::ptr::drop_in_place(addr as *mut F) };
}

/// The first code of a coroutine: runs the body, and returns the coroutine's last word
/// (`switch::start` takes it to whoever resumed the coroutine last).
///
/// # Safety
///
/// Called only by `switch::start` for a coroutine `with_body` made: `body` holds an `F`
/// that nobody else reads, `link` the coroutine's `Link`.
unsafe extern "C" fn entry<F: FnOnce()>(body: usize, link: usize, first: usize) -> usize {
    let link = link as *mut Link;
    // SAFETY: the caller's guarantee: the body is read once, here.
    let f = unsafe { (body as *mut F).read() };
    // A coroutine is never started by a teardown (`Drop` drops a body not started), so
    // `first` is RESUME or a sibling's link.
    let word = match catch_unwind(AssertUnwindSafe(move || {
        arrived(first);
        f();
    })) {
        Ok(()) => RETURNED,
        Err(payload) if payload.is::<ForcedUnwind>() => RETURNED,
        Err(payload) => {
            // SAFETY: the link is this coroutine's; its resumer waits in `switch`.
            unsafe { (*link).panic = Some(payload) };
            PANICKED
        }
    };
    if word != RETURNED || in_teardown() {
        return word;
    }
    // SAFETY: the link is this coroutine's.
    let Some(next) = (unsafe { (*link).on_finish })() else {
        return word;
    };
    if next.fresh {
        // A new coroutine has no saved frame to return into. `on_finish` never names one
        // (it checks `started`); were it to, the coroutine would stay entered and unrun.
        debug_assert!(false, "on_finish named a coroutine that has not started");
        return word;
    }
    let to = next.link.as_ptr();
    // SAFETY: [1] nothing runs on this stack after this but `start`'s return path, which
    // loads `parent_sp` (now `next`'s saved stack pointer, switched to as `switch` would)
    // and makes `next`'s `switch` or `start` call return our word; [2] `next` was entered
    // (RUNNING, not fresh: its `sp` was saved by a switch), and takes over our resumer; [3]
    // the word is our link with its low bit set (links are word-aligned), which `next`'s
    // arrival reads as "mark it DONE", once we are off this stack.
    unsafe {
        (*to).parent_sp = (*link).parent_sp;
        (*link).parent_sp = (*to).sp;
    }
    swap_link(to as usize);
    link as usize | FINISHED_BIT
}

/// The `on_finish` of a coroutine made by [`FiberCoro::new`]: no hand-off.
fn no_hand_off() -> Option<Entered> {
    None
}

/// Gives the thread back to the worker that resumed the current fiber.
///
/// Returns `None` without suspending when the caller is not on a fiber, or runs in a
/// destructor during shutdown teardown. After it returns `Some` the fiber may be running on a
/// different thread.
#[inline(never)]
pub(crate) fn suspend(why: Suspend) -> Option<Arrival> {
    let addr = current_link();
    if addr == 0 || in_teardown() {
        return None;
    }
    let link = addr as *mut Link;
    let word = match why {
        Suspend::Yield => YIELDED,
        Suspend::Park => PARKED,
    };
    // SAFETY: [1] `LINK` is non-zero only while this thread runs the coroutine whose link is
    // at `addr` (set around `run_with`'s and `switch_to`'s switches, cleared by
    // `on_worker_stack` while off the fiber's stack), so we are on that coroutine's stack and
    // its resumer waits in `switch` at `parent_sp`; [2] `sp` is ours to write until we are
    // switched to again.
    let back = unsafe { switch::switch(&raw mut (*link).sp, (*link).parent_sp, word) };
    Some(arrived(back))
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
    let addr = current_link();
    if addr == 0 || in_teardown() {
        return f();
    }
    let left = stack_left(addr);
    if left >= needs {
        #[cfg(test)]
        LEAST_ROOM_RUN_IN.with(|l| l.set(l.get().min(left)));
        return f();
    }
    // SAFETY: as in `suspend`: a non-zero `LINK` is the link of the coroutine this thread
    // runs, whose resumer waits in `switch` with its stack pointer at `parent_sp`.
    let parent_sp = unsafe { (*(addr as *const Link)).parent_sp };
    // While `f` runs on the worker's stack, this thread is not "on a fiber": a nested call
    // must not switch to the worker's stack again (it would start at the same place and
    // overwrite the frames of this one), and `f` cannot suspend.
    swap_link(0);
    // SAFETY: below `parent_sp` the resumer's stack is free: the resumer is suspended in
    // `switch`, whose frame and callers' frames lie above it. A thread's stack (the
    // resumer runs on a worker's or a test's thread) has room for a runtime call.
    let r = unsafe { switch::call_on_stack(parent_sp - 64, f) };
    swap_link(addr);
    r.unwrap_or_else(|payload| resume_unwind(payload))
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
/// [`MIN_STACK_SIZE`] bytes (every fiber stack has at least that many). The `Link` at
/// `link` sits at the top of the stack, so what lies between it and here is (slightly more
/// than) what the fiber has used. Anywhere else (above the `Link`: not on that stack) counts
/// as no room.
#[inline(always)]
fn stack_left(link: usize) -> usize {
    let here = 0u8;
    let used = link.checked_sub(std::ptr::from_ref(&here) as usize);
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
                assert!(suspend(Suspend::Park).is_some());
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
        assert!(suspend(Suspend::Yield).is_none());
    }

    #[test]
    fn a_coroutine_hands_the_thread_to_a_sibling_and_both_come_back() {
        let pool = StackPool::new(64 * 1024);
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (l, l2) = (Arc::clone(&log), Arc::clone(&log));
        let b = FiberCoro::new(pool.get().unwrap(), move || {
            l2.lock().unwrap().push(2);
            assert!(suspend(Suspend::Park).is_some());
            l2.lock().unwrap().push(5);
        });
        // `a` enters `b` and hands the thread to it; `b` then parks back to our resume.
        let slot = Arc::new(std::sync::Mutex::new(Some(b)));
        let s = Arc::clone(&slot);
        let mut a = FiberCoro::new(pool.get().unwrap(), move || {
            l.lock().unwrap().push(1);
            let entered = s.lock().unwrap().as_mut().map(FiberCoro::enter).unwrap();
            assert!(may_switch_to(RUNTIME_CALL_STACK));
            switch_to(entered);
            l.lock().unwrap().push(4);
        });
        let switched = run(a.enter());
        let mut b = slot.lock().unwrap().take().unwrap();
        assert_eq!(b.settle(switched).map(|r| r.0), Some(Suspend::Park));
        log.lock().unwrap().push(3);
        // `b`'s arrival marked `a` suspended, so it can be resumed where it handed off.
        assert_eq!(a.resume(), None);
        assert_eq!(b.resume(), None);
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3, 4, 5]);
        drop((a.into_stack(), b.into_stack()));
        assert_eq!(pool.counts().in_use, 0);
    }

    thread_local! {
        static NEXT: std::cell::RefCell<Option<Entered>> = const { std::cell::RefCell::new(None) };
    }

    fn take_next() -> Option<Entered> {
        NEXT.with(|n| n.borrow_mut().take())
    }

    #[test]
    fn a_coroutine_that_returns_hands_the_thread_to_a_suspended_one() {
        let pool = StackPool::new(64 * 1024);
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (la, lb) = (Arc::clone(&log), Arc::clone(&log));
        let mut b = FiberCoro::new(pool.get().unwrap(), move || {
            lb.lock().unwrap().push("b parks");
            let arrival = suspend(Suspend::Park);
            assert_eq!(arrival, Some(Arrival::AfterReturned));
            lb.lock().unwrap().push("b after a returned");
        });
        assert_eq!(b.resume().map(|r| r.0), Some(Suspend::Park));
        NEXT.with(|n| *n.borrow_mut() = Some(b.enter()));
        let mut a = FiberCoro::with_hand_off(
            pool.get().unwrap(),
            move || la.lock().unwrap().push("a runs"),
            take_next,
        );
        // `a` returns into `b`, which then returns to us: the switch back is `b`'s.
        let switched = run(a.enter());
        assert_eq!(b.settle(switched), None);
        assert_eq!(
            *log.lock().unwrap(),
            vec!["b parks", "a runs", "b after a returned"]
        );
        // `b`'s arrival marked `a` done: its stack can be recycled.
        drop((a.into_stack(), b.into_stack()));
        assert_eq!(pool.counts().in_use, 0);
    }

    #[test]
    fn a_running_coroutine_cannot_be_entered_or_settled_with_another_ones_switch() {
        let pool = StackPool::new(64 * 1024);
        let mut a = FiberCoro::new(pool.get().unwrap(), || {
            suspend(Suspend::Park);
        });
        let mut b = FiberCoro::new(pool.get().unwrap(), || {});
        let entered = a.enter();
        let again = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _ = a.enter();
        }));
        assert!(again.is_err(), "entered twice");
        let switched = run(entered);
        let wrong = std::panic::catch_unwind(AssertUnwindSafe(|| b.settle(switched)));
        assert!(wrong.is_err(), "settled with another coroutine's switch");
        // `a` never settled stays RUNNING: dropping it leaks its stack instead of reusing a
        // stack whose frames may still run.
        drop(a);
        drop(b);
        assert_eq!(pool.counts().in_use, 1);
    }

    #[test]
    fn a_panic_that_escapes_the_body_reaches_the_resumer() {
        let pool = StackPool::new(64 * 1024);
        let mut co = FiberCoro::new(pool.get().unwrap(), || panic!("out of the body"));
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| co.resume()));
        let payload = r.expect_err("the panic reaches the resumer");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"out of the body"));
        drop(co.into_stack());
        assert_eq!(pool.counts().in_use, 0);
    }

    #[test]
    fn a_coroutine_never_started_drops_its_body_and_a_large_one_is_boxed() {
        struct Flag(Arc<AtomicUsize>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let pool = StackPool::new(64 * 1024);
        let dropped = Arc::new(AtomicUsize::new(0));
        let f = Flag(Arc::clone(&dropped));
        drop(FiberCoro::new(pool.get().unwrap(), move || drop(f)));
        let big = [Flag(Arc::clone(&dropped)), Flag(Arc::clone(&dropped))];
        let padding = [0u8; 4096];
        drop(FiberCoro::new(pool.get().unwrap(), move || {
            drop((big, padding));
        }));
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
        assert_eq!(pool.counts().in_use, 0);
    }

    #[test]
    fn a_runtime_call_without_room_runs_on_the_resumers_stack() {
        let pool = StackPool::new(64 * 1024);
        let stack = pool.get().unwrap();
        let (bottom, top) = (stack.top() - pool.stack_size(), stack.top());
        let mut co = FiberCoro::new(stack, move || {
            let (on, at) = on_worker_stack(ALWAYS_ON_WORKER_STACK, || {
                let here = 0u8;
                (on_fiber(), std::ptr::from_ref(&here) as usize)
            });
            assert!(!on, "a call on the worker's stack is not on the fiber");
            assert!(!(bottom..top).contains(&at), "ran on the fiber's stack");
            let (_, at) = on_worker_stack(0, || {
                let here = 0u8;
                ((), std::ptr::from_ref(&here) as usize)
            });
            assert!(
                (bottom..top).contains(&at),
                "with room it stays on the fiber's stack"
            );
            let r = std::panic::catch_unwind(|| {
                on_worker_stack(ALWAYS_ON_WORKER_STACK, || panic!("in a runtime call"))
            });
            assert!(r.is_err(), "the panic comes back to the fiber");
            // The fiber is still a fiber after that: it can park.
            assert!(suspend(Suspend::Park).is_some());
        });
        assert_eq!(co.resume().map(|r| r.0), Some(Suspend::Park));
        assert_eq!(co.resume(), None);
        drop(co.into_stack());
    }

    /// A backtrace walks a fiber's frames and stops at `switch::start` (its return address
    /// undefined in its CFI), instead of wandering off the top of the stack.
    #[test]
    fn a_backtrace_taken_on_a_fiber_ends_at_its_first_frame() {
        let pool = StackPool::new(256 * 1024);
        let mut co = FiberCoro::new(pool.get().unwrap(), || {
            let bt = std::backtrace::Backtrace::force_capture();
            assert_eq!(bt.status(), std::backtrace::BacktraceStatus::Captured);
            let text = bt.to_string();
            assert!(text.contains("coro::entry"), "{text}");
            assert!(text.lines().count() < 200, "{text}");
        });
        assert_eq!(co.resume(), None);
        drop(co.into_stack());
    }

    #[test]
    fn teardown_runs_destructors_and_frees_the_stack() {
        struct Flag(Arc<AtomicUsize>);
        impl Drop for Flag {
            fn drop(&mut self) {
                // A destructor during teardown must not be able to park.
                assert!(suspend(Suspend::Park).is_none());
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

/// The hand-over of a suspended coroutine between threads under every interleaving loom can
/// find: the thread that switched away (or the sibling that arrived in its place) saves the
/// stack pointer and then marks the coroutine suspended; another thread that finds it
/// suspended may enter it and must see that stack pointer. Fails (a race on `sp`) if
/// `publish_suspended` loses its release or `may_enter` its acquire.
///
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p fiber --lib loom_model --release`.
#[cfg(all(test, loom))]
mod loom_model {
    use super::{AtomicU8, RUNNING, may_enter, publish_suspended};
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn a_coroutine_found_suspended_has_its_stack_pointer_saved() {
        loom::model(|| {
            let state = Arc::new(AtomicU8::new(RUNNING));
            let sp = Arc::new(UnsafeCell::new(0usize));
            let (st, s) = (Arc::clone(&state), Arc::clone(&sp));
            let switched_away = thread::spawn(move || {
                // The switch saves the stack pointer; the arrival on the other side marks it.
                // SAFETY: loom checks that no other access to the cell is concurrent.
                s.with_mut(|p| unsafe { *p = 0x7000 });
                publish_suspended(&st);
            });
            if may_enter(&state) {
                // SAFETY: as above; the model fails if this read races with the write.
                assert_eq!(sp.with(|p| unsafe { *p }), 0x7000);
            }
            switched_away.join().unwrap();
            assert!(may_enter(&state));
        });
    }
}
