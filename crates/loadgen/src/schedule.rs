//! The open-loop schedule: when each message is due, independent of when replies come back.
//!
//! Message `k` of connection `c` (of `n`) is due `(k * n + c) / rate` seconds after the epoch,
//! so the connections take turns and the whole run sends at exactly `rate`, evenly spaced. The
//! due time is a pure function of `(c, k)`: a message that goes out late (the server was slow,
//! the connection had `depth` messages in flight) keeps its due time, and its latency is
//! counted from it. That is what makes coordinated omission visible instead of hiding it.

/// The global schedule of an open-loop run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    conns: u64,
    ns_per_msg: f64,
}

impl Schedule {
    /// `rate` messages per second in total over `conns` connections.
    pub(crate) fn new(rate: f64, conns: usize) -> Schedule {
        Schedule {
            conns: conns as u64,
            ns_per_msg: 1e9 / rate,
        }
    }

    /// Nanoseconds after the epoch at which message `k` of connection `conn` is due.
    pub(crate) fn due_ns(&self, conn: usize, k: u64) -> u64 {
        // f64 holds the slot index exactly up to 2^53 and rounds the product to well under a
        // nanosecond for any run this tool can make; the cast saturates instead of wrapping.
        ((k * self.conns + conn as u64) as f64 * self.ns_per_msg) as u64
    }
}

/// One worker's walk through the schedule: its own connections, in due order.
///
/// The worker's connections are a subset of the global ones; taking them in order within each
/// round `k` visits their messages in increasing due time, so a worker finds its next due
/// message in O(1) with no timer per connection.
#[derive(Debug)]
pub(crate) struct Cursor {
    schedule: Schedule,
    /// Global connection ids of this worker, ascending.
    conns: Vec<usize>,
    /// Index into the worker's sequence: round `next / conns.len()`, connection
    /// `next % conns.len()`.
    next: u64,
}

/// The message a [`Cursor`] stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    /// Index of the connection in the worker's list.
    pub(crate) local: usize,
    /// The connection's message number.
    pub(crate) k: u64,
    /// When it is due, in nanoseconds after the epoch.
    pub(crate) at_ns: u64,
}

impl Cursor {
    /// `conns` are the worker's global connection ids, ascending and not empty.
    pub(crate) fn new(schedule: Schedule, conns: Vec<usize>) -> Cursor {
        debug_assert!(!conns.is_empty() && conns.windows(2).all(|w| w[0] < w[1]));
        Cursor {
            schedule,
            conns,
            next: 0,
        }
    }

    /// The next message in due order.
    pub(crate) fn peek(&self) -> Due {
        let n = self.conns.len() as u64;
        let local = (self.next % n) as usize;
        let k = self.next / n;
        Due {
            local,
            k,
            at_ns: self.schedule.due_ns(self.conns[local], k),
        }
    }

    /// Moves past the message [`Cursor::peek`] returns.
    pub(crate) fn advance(&mut self) {
        self.next += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    /// Counts the messages a set of workers release in `[from, to)`, walking the cursors the way
    /// the worker loop does.
    fn released(rate: f64, conns: usize, threads: usize, from: u64, to: u64) -> u64 {
        let schedule = Schedule::new(rate, conns);
        let mut total = 0;
        for t in 0..threads {
            let mine: Vec<usize> = (t..conns).step_by(threads).collect();
            let mut cursor = Cursor::new(schedule, mine);
            // Bounded: a worker releases at most rate * 2 s messages in the window, plus the
            // ones before it.
            for _ in 0..10_000_000u64 {
                let due = cursor.peek();
                if due.at_ns >= to {
                    break;
                }
                if due.at_ns >= from {
                    total += 1;
                }
                cursor.advance();
            }
        }
        total
    }

    #[test]
    fn rate_holds_within_two_percent_over_two_seconds() {
        for &(rate, conns, threads) in &[
            (1_000.0, 1, 1),
            (10_000.0, 100, 1),
            (12_345.0, 7, 3),
            (50_000.0, 1000, 2),
            (333.0, 1000, 4),
            (200_000.0, 64, 2),
        ] {
            let got = released(rate, conns, threads, SEC, 3 * SEC);
            let want = 2.0 * rate;
            let err = (got as f64 - want).abs() / want;
            assert!(
                err <= 0.02,
                "rate {rate} over {conns} conns and {threads} threads: {got} messages in 2 s, want {want}"
            );
            // The slots are exact: the count is off by at most one slot at each edge.
            assert!((got as f64 - want).abs() <= 2.0, "{got} vs {want}");
        }
    }

    #[test]
    fn workers_together_walk_the_global_schedule_in_order() {
        let (rate, conns, threads) = (1000.0, 10, 3);
        let schedule = Schedule::new(rate, conns);
        let mut all = Vec::new();
        for t in 0..threads {
            let mine: Vec<usize> = (t..conns).step_by(threads).collect();
            let mut cursor = Cursor::new(schedule, mine.clone());
            let mut last = 0;
            for _ in 0..40 {
                let due = cursor.peek();
                assert!(due.at_ns >= last, "a worker's dues go forward");
                last = due.at_ns;
                all.push(due.at_ns);
                cursor.advance();
            }
        }
        all.sort_unstable();
        // Every slot of the global schedule up to the first 4 rounds appears exactly once.
        for (slot, &at) in all.iter().take(40).enumerate() {
            assert_eq!(at, (slot as u64) * SEC / 1000);
        }
    }

    #[test]
    fn due_time_does_not_depend_on_when_it_is_asked() {
        let s = Schedule::new(3.0, 2);
        assert_eq!(s.due_ns(0, 0), 0);
        assert_eq!(s.due_ns(1, 0), SEC / 3);
        assert_eq!(s.due_ns(0, 3), 2 * SEC);
    }
}
