//! Helpers shared by the integration tests: the io_uring probe that skips, and runtimes.

#![allow(dead_code)] // Each test binary uses a different subset of these helpers.

use std::time::{Duration, Instant};

/// Every test wait gives up after this long.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(20);

/// Returns `false` (and says why) when io_uring is unusable here, so the test can skip.
pub(crate) fn io_uring_available() -> bool {
    match fiber::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipping: {e}");
            false
        }
    }
}

/// Skips the calling test when io_uring is unusable here.
#[macro_export]
macro_rules! require_io_uring {
    () => {
        if !$crate::util::io_uring_available() {
            return;
        }
    };
}

/// A runtime with `workers` workers and small stacks.
pub(crate) fn runtime(workers: usize) -> fiber::Runtime {
    fiber::Runtime::builder()
        .workers(workers)
        .stack_size(32 * 1024)
        .build()
        .expect("build a runtime")
}

/// A runtime whose fibers migrate between workers (work stealing), small stacks.
pub(crate) fn stealing_runtime(workers: usize) -> fiber::Runtime {
    let b = fiber::Runtime::builder()
        .workers(workers)
        .stack_size(32 * 1024);
    // SAFETY: the tests' fibers hold no thread-local references or std mutex guards across
    // blocking calls.
    unsafe { b.work_stealing() }
        .build()
        .expect("build a runtime")
}

/// Joins with the test timeout, failing the test on timeout.
pub(crate) fn join<T>(mut h: fiber::JoinHandle<T>) -> T {
    match h.join_timeout(TIMEOUT) {
        Ok(v) => v,
        Err(e) => panic!("joining a fiber: {e}"),
    }
}

/// The runtime's stats once it has retired every fiber and given back every stack (a join
/// returns once the fiber stored its value; the worker retires it right after), or at
/// [`TIMEOUT`]: the caller asserts on what it gets.
pub(crate) fn stats_when_retired(rt: &fiber::Runtime) -> fiber::Stats {
    let deadline = Instant::now() + TIMEOUT;
    let mut stats = rt.stats();
    while (stats.fibers_live() > 0 || stats.stacks_in_use > 0) && Instant::now() < deadline {
        std::thread::yield_now();
        stats = rt.stats();
    }
    stats
}

/// The stats of the runtime the calling fiber runs on.
pub(crate) fn stats_here() -> fiber::Stats {
    fiber::Handle::current().expect("on a fiber").stats()
}
