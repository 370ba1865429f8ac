//! Request processing as the benchmarks model it (`--compute-us`): a busy-wait on a
//! monotonic clock, so that the CPU stays busy the way real work keeps it busy.

use std::time::{Duration, Instant};

/// Spins for `d` on [`Instant`] without ever sleeping or yielding: a worker that
/// computes holds its CPU, which is what the echo experiments with compute measure.
pub fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_lasts_at_least_its_duration() {
        spin(Duration::ZERO);
        let d = Duration::from_millis(2);
        let start = Instant::now();
        spin(d);
        assert!(start.elapsed() >= d);
    }
}
