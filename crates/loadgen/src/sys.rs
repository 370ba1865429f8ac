//! The few kernel facilities loadgen needs besides sockets: CPU pinning, its own CPU time,
//! the file-descriptor limit, and how busy a set of CPUs was.

use std::io;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;

/// CPU time the calling thread has used, user and system, in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    // The thread CPU clock exists on every Linux; should it fail, a zero reads as "no CPU
    // used", which the summary shows rather than hides.
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock `Instant` reads and the worker's
/// `timerfd` is armed on.
pub(crate) fn monotonic_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Sets the calling thread's timer slack to 1 ns, so that the kernel does not defer its
/// wake-ups by the default 50 µs to batch them with others'.
pub(crate) fn exact_timers() -> io::Result<()> {
    nix::sys::prctl::set_timerslack(1).map_err(io::Error::from)
}

/// The calling thread's CPU affinity.
pub(crate) fn affinity() -> io::Result<CpuSet> {
    sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)
}

/// Restricts the calling thread to `set`.
pub(crate) fn set_affinity(set: &CpuSet) -> io::Result<()> {
    sched_setaffinity(Pid::from_raw(0), set).map_err(io::Error::from)
}

/// Pins the calling thread to the CPUs in `cpus`.
pub(crate) fn pin(cpus: &[usize]) -> io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond what the kernel's CPU set can name"),
            )
        })?;
    }
    set_affinity(&set)
}

/// What became of the file-descriptor limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NofileLimit {
    /// The soft limit in force now.
    pub(crate) soft: u64,
    /// Whether it is at least what was asked for.
    pub(crate) enough: bool,
}

/// Raises the soft `RLIMIT_NOFILE` to `needed` if it is lower, as far as the hard limit allows.
pub(crate) fn raise_nofile(needed: u64) -> io::Result<NofileLimit> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft >= needed {
        return Ok(NofileLimit { soft, enough: true });
    }
    let target = needed.min(hard);
    setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    Ok(NofileLimit {
        soft: target,
        enough: target >= needed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_moves() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        assert!(thread_cpu_ns() > a, "{x}");
    }
}
