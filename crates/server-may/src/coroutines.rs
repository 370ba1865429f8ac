//! The one module of srv-may (and search-may) allowed `unsafe`: may's `spawn`, its
//! `cancel`, and the listener handed to may's event loop through a raw descriptor.
//!
//! may marks spawning `unsafe` (its `go!` macro hides the block) because a coroutine
//! breaks two assumptions safe Rust makes of a thread: a coroutine may resume on another
//! scheduler thread after any blocking point (may steals work), so a thread-local read
//! before the point and used after it may be another thread's; and a coroutine's stack
//! is fixed, with a guard page below it. What runs in our coroutines keeps to both:
//!
//! - No thread-local is held across a blocking point. The connection code (`service`'s
//!   blocking loops, the hub, the outbox) keeps its state on the coroutine's stack and
//!   heap; its counts go to a [`launch::Tally`] the coroutine owns, not to a
//!   thread-local. std's own thread-locals (the panic count, the current thread's
//!   handle) are read and dropped within one call.
//! - The stack is [`STACK_WORDS`] words (64 KiB), srv-fiber's default; buffers (the
//!   16 KiB read buffer, replay batches) are on the heap. Overflowing it hits the guard
//!   page: a fault that ends the process, never silent corruption.
#![allow(unsafe_code)] // may's spawn and cancel are unsafe fns; see the module doc.

use std::io;
use std::os::fd::{FromRawFd, IntoRawFd};

use may::coroutine::{Builder, JoinHandle};

/// A coroutine's stack in machine words, as may counts it: 64 KiB, the same as
/// srv-fiber's default stack (may's own default is 32 KiB).
pub const STACK_WORDS: usize = 64 * 1024 / size_of::<usize>();

/// Starts `f` as a coroutine on may's scheduler (starting the scheduler's threads on
/// first use).
pub fn spawn<F, T>(f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: may's contract for a coroutine, kept by everything this crate runs in one
    // (the module doc): [1] no thread-local is held across a blocking point;
    // [2] the code fits the STACK_WORDS stack, whose overflow faults on a guard page.
    unsafe { Builder::new().stack_size(STACK_WORDS).spawn(f) }
}

/// Ends a coroutine at its next blocking point (its stack unwinds; what it owns drops).
pub fn cancel<T>(handle: &JoinHandle<T>) {
    // SAFETY: may's contract for `cancel` is that the coroutine's resources are dropped
    // where it is blocked. The only coroutine this cancels is an accept loop, which owns
    // its listener and a tally and holds no lock while it waits in `accept`.
    unsafe { handle.coroutine().cancel() }
}

/// Hands a listener bound by `launch::bind` (its backlog and options, as every server's)
/// to may's event loop.
pub fn listener(std: std::net::TcpListener) -> may::net::TcpListener {
    let fd = std.into_raw_fd();
    // SAFETY: `fd` is an open listening socket that `into_raw_fd` has just released, so
    // the may listener becomes its one owner.
    unsafe { may::net::TcpListener::from_raw_fd(fd) }
}
