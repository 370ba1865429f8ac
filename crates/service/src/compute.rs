//! Request processing as the benchmarks model it (`--compute-us`): a busy-wait on the
//! thread's own CPU clock, so that a request costs the CPU it says, whatever else happens.
//!
//! A spin on the wall clock would count the time the thread spends preempted or throttled
//! (a CPU quota's throttled periods, a neighbour on its CPU) as work done: under half a CPU
//! at 7,000 echoes/s, 100 µs of such a spin per echo measured 64 µs of CPU per echo, and the
//! server seemed to carry a load it could not. On `CLOCK_THREAD_CPUTIME_ID` a request costs
//! its CPU time under any quota or neighbour, the same in every server (Go's `spin` does the
//! same).

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

/// The CPU time the calling thread has used, or `None` where the clock cannot be read.
fn thread_cpu() -> Option<Duration> {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .ok()
        .map(Duration::from)
}

/// Spins until the calling thread has used `d` more of CPU time, without ever sleeping or
/// yielding: a worker that computes holds its CPU, which is what the echo experiments with
/// compute measure. Where the thread's CPU clock cannot be read (never on Linux), it spins
/// on the monotonic clock instead.
pub fn spin(d: Duration) {
    if d.is_zero() {
        return;
    }
    match thread_cpu() {
        Some(start) => {
            // Bounded: the thread's CPU clock advances while it spins.
            while thread_cpu().is_some_and(|now| now.saturating_sub(start) < d) {
                std::hint::spin_loop();
            }
        }
        None => {
            let start = std::time::Instant::now();
            while start.elapsed() < d {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn spin_lasts_at_least_its_duration() {
        spin(Duration::ZERO);
        let d = Duration::from_millis(2);
        let start = Instant::now();
        spin(d);
        assert!(start.elapsed() >= d);
    }

    #[test]
    fn spin_costs_its_duration_in_cpu_time() {
        let d = Duration::from_millis(3);
        let before = thread_cpu().expect("the thread's CPU clock");
        spin(d);
        let used = thread_cpu().expect("the thread's CPU clock") - before;
        // CPU time, not wall time: a spin preempted half of the time would have used half.
        assert!(used >= d, "spun {used:?} of CPU for {d:?}");
    }
}
