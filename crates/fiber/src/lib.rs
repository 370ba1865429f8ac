//! # fiber: stackful fibers on per-worker io_uring rings
//!
//! A runtime of stackful coroutines whose system calls are *pseudo-blocking*: the code reads
//! like blocking std code (`TcpStream` implements [`std::io::Read`] and [`std::io::Write`]),
//! but a call that would block prepares an io_uring SQE and parks the fiber, not the thread;
//! the worker runs other fibers and submits the whole batch of SQEs with one system call per
//! dispatch round. It follows the distributed architecture of "Pseudo-blocking system calls
//! with io_uring" (EMPER, Figure 4): one ring per worker, work stealing between workers, an
//! optional Completer thread, and the paper's future work: idle workers sleep in their own
//! ring and are woken by `IORING_OP_MSG_RING`, and idle workers may steal I/O completions.
//! `DESIGN.md` beside this crate explains the design.
//!
//! ```no_run
//! use std::io::{Read, Write};
//!
//! let rt = fiber::Runtime::builder().workers(2).build()?;
//! rt.block_on(|| -> std::io::Result<()> {
//!     let listener = fiber::net::TcpListener::bind("127.0.0.1:0")?;
//!     loop {
//!         let (mut stream, _) = listener.accept()?;
//!         fiber::spawn(move || {
//!             let mut buf = [0u8; 4096];
//!             while let Ok(n @ 1..) = stream.read(&mut buf) {
//!                 if stream.write_all(&buf[..n]).is_err() {
//!                     break;
//!                 }
//!             }
//!         });
//!     }
//! })??;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## What it is not
//!
//! Not an async runtime (there are no futures), not portable (Linux 5.19+ only), and not
//! preemptive: a fiber that computes without calling into the runtime keeps its worker.
//!
//! ## The migration rule
//!
//! Fibers migrate: a fiber parked on one worker may be resumed by another (a worker that
//! steals it, or that reaped its completion). Everything a fiber starts with is `Send`
//! (spawn requires it), but Rust cannot check what lives on the fiber's stack across a
//! blocking point. So:
//!
//! **Do not hold anything tied to the OS thread across a blocking call** (any I/O of this
//! crate, [`nop`], [`sleep`], [`yield_now`], [`JoinHandle::join`], and the primitives of
//! [`sync`]): no reference obtained from a `thread_local!`, no `std::sync::MutexGuard` (use
//! [`sync::Mutex`]), no `Rc` shared with thread-local state. `thread_local!` values are per
//! thread, not per fiber, and may differ before and after the call.
//!
//! The runtime keeps to the same rule: it re-reads its current worker after every resume,
//! and the handles of worker-local state are `!Send` and never live across a switch.
//!
//! ## Blocking from plain threads
//!
//! Everything also works off the runtime's fibers, at the price of blocking the thread:
//! [`JoinHandle::join`], the [`sync`] primitives and [`sleep`] park the thread, and I/O on
//! [`net`] and [`fs`] types from a plain thread goes through a small ring private to that
//! thread.
//!
//! ## Shutdown
//!
//! [`Handle::shutdown`] (from any thread, e.g. a signal thread) or dropping the [`Runtime`]:
//! I/O in flight is cancelled (`ECANCELED`), new I/O and spawns fail, runnable fibers run
//! until they park; fibers still parked (on a channel, a mutex) are then torn down: their
//! stacks unwound, their destructors run. Destructors must not block then (they see
//! blocking calls fail or return at once). A fiber that never parks keeps the runtime up.

#![deny(unsafe_code)]

mod completer;
mod driver;
mod error;
mod fiber;
mod fixed;
pub mod fs;
pub mod io;
mod join;
pub mod net;
mod park;
mod runtime;
mod state;
mod stats;
pub mod sync;
#[allow(unsafe_code)] // The one place for raw memory, the kernel and stack switching.
mod sys;
mod time;
mod worker;

pub use error::{Error, JoinError};
pub use fs::FileOps;
pub use join::JoinHandle;
pub use runtime::{
    Builder, DEFAULT_CQ_ENTRIES, DEFAULT_RING_ENTRIES, DEFAULT_STACK_SIZE, Handle, MIN_STACK_SIZE,
    RingFlags, Runtime, probe,
};
pub use stats::{PerUnit, Stats, WorkerStats};
pub use time::{nop, sleep, yield_now};

/// Spawns a fiber on the runtime of the calling fiber.
///
/// # Panics
///
/// When called outside a fiber (use [`Runtime::spawn`] or [`Handle::spawn`] there).
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // The worker's own reference to the runtime: no count of the runtime's `Arc` to bump.
    match worker::current() {
        Some(w) => fiber::spawn_on(&w.rt, fiber::NO_HOME, f),
        None => panic!("fiber::spawn called outside a fiber; use Runtime::spawn or Handle::spawn"),
    }
}

/// CPU time (user + system) this process has used, in clock ticks, from `/proc/self/stat`.
/// For measuring an idle runtime.
pub fn process_cpu_ticks() -> std::io::Result<u64> {
    sys::fd::process_cpu_ticks()
}
