//! The open-loop schedule: when each message is due, independent of when replies come back.
//!
//! Four arrival processes, each a pure function of the run's options (and, but for uniform,
//! its seed), so that a message that goes out late (the server was slow, the connection had
//! `depth` messages in flight) keeps its due time, and its latency is counted from it. That
//! is what makes coordinated omission visible instead of hiding it.
//!
//! - **Uniform**: message `k` of connection `c` (of `n`) is due `(k * n + c) / rate` seconds
//!   after the epoch, so the connections take turns and the whole run sends at exactly `rate`,
//!   evenly spaced.
//! - **Poisson**: each connection sends at `rate / n` with exponential gaps, drawn from its
//!   own stream of a seeded generator (ChaCha8, stream = the connection's id), so that the
//!   connections are independent Poisson processes and together one of `rate`, exact in
//!   expectation. This is how independent users arrive; evenly spaced sends never bunch up, so
//!   they show a server's queueing only once it is saturated.
//! - **On-off**: the same Poisson processes, run on a clock that only ticks in the
//!   on-periods (every connection in step: `on` on, `off` off, from the epoch), at the rate
//!   that keeps the average at `rate`: a point in on-time `t` is due at
//!   `floor(t / on) * (on + off) + t mod on`. Bursts at `(on + off) / on` times the rate,
//!   then silence.
//! - **Pareto**: each connection's gaps drawn from a generalized Pareto distribution
//!   (location 0, shape ξ, the scale that gives the mean gap `n / rate`), by inversion from
//!   the same streams: mutilate's `fb_ia` is ξ = 0.154971.
//!
//! A connection's due times are walked by a [`Clock`]; the worker keeps two of each, one that
//! releases messages as they fall due ([`Cursor`]) and one that stamps them as they go out, so
//! that no due time has to be remembered between the two.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::Arrivals;

/// The global schedule of an open-loop run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    conns: u64,
    ns_per_msg: f64,
    arrivals: Arrivals,
    seed: u64,
}

impl Schedule {
    /// `rate` messages per second in total over `conns` connections, arriving as `arrivals`
    /// says; `seed` draws the Poisson gaps.
    pub(crate) fn new(rate: f64, conns: usize, arrivals: Arrivals, seed: u64) -> Schedule {
        Schedule {
            conns: conns as u64,
            ns_per_msg: 1e9 / rate,
            arrivals,
            seed,
        }
    }

    /// The due times of connection `conn`'s messages, from its first.
    pub(crate) fn clock(&self, conn: usize) -> Clock {
        let rng = match self.arrivals {
            Arrivals::Uniform => None,
            Arrivals::Poisson | Arrivals::OnOff { .. } | Arrivals::Pareto { .. } => {
                let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
                rng.set_stream(conn as u64);
                Some(rng)
            }
        };
        Clock {
            schedule: *self,
            conn: conn as u64,
            k: 0,
            at_ns: 0.0,
            rng,
        }
    }

    /// Uniform arrivals: nanoseconds after the epoch at which message `k` of connection
    /// `conn` is due.
    fn uniform_ns(&self, conn: u64, k: u64) -> u64 {
        // f64 holds the slot index exactly up to 2^53 and rounds the product to well under a
        // nanosecond for any run this tool can make; the cast saturates instead of wrapping.
        ((k * self.conns + conn) as f64 * self.ns_per_msg) as u64
    }
}

/// The due times of one connection's messages, in order.
#[derive(Debug, Clone)]
pub(crate) struct Clock {
    schedule: Schedule,
    conn: u64,
    /// The number of the next message.
    k: u64,
    /// When the last message was due, in nanoseconds after the epoch (on-off: of on-time).
    at_ns: f64,
    /// But for uniform arrivals: the connection's own stream of the generator.
    rng: Option<ChaCha8Rng>,
}

impl Clock {
    /// When the next message is due, in nanoseconds after the epoch; moves past it.
    pub(crate) fn next_ns(&mut self) -> u64 {
        let s = &self.schedule;
        let Some(rng) = &mut self.rng else {
            let due = s.uniform_ns(self.conn, self.k);
            self.k += 1;
            return due;
        };
        // `1 - u` is in (0, 1], so its logarithm is finite.
        let u: f64 = rng.random();
        let ln_v = (1.0 - u).ln();
        let mean = s.ns_per_msg * s.conns as f64;
        self.k += 1;
        match s.arrivals {
            Arrivals::OnOff { on_ns, off_ns } => {
                // An exponential gap of on-time, at the rate that keeps the average.
                let (on, off) = (on_ns as f64, off_ns as f64);
                self.at_ns += -ln_v * mean * on / (on + off);
                let cycle = (self.at_ns / on).floor();
                (cycle * (on + off) + (self.at_ns - cycle * on)) as u64
            }
            Arrivals::Pareto { shape } => {
                // The generalized Pareto's inverse, `scale * (v^-ξ - 1) / ξ`, whose mean is
                // `scale / (1 - ξ)`.
                let scale = mean * (1.0 - shape);
                self.at_ns += scale * (-shape * ln_v).exp_m1() / shape;
                self.at_ns as u64
            }
            // An exponential gap of mean `conns / rate`, by inversion.
            Arrivals::Poisson | Arrivals::Uniform => {
                self.at_ns += -ln_v * mean;
                self.at_ns as u64
            }
        }
    }
}

/// One worker's walk through the schedule: its own connections' messages, in due order.
///
/// Uniform: the worker's connections are a subset of the global ones; taking them in order
/// within each round `k` visits their messages in increasing due time, so a worker finds its
/// next due message in O(1) with no timer per connection. The others: the connections' next
/// due times in a heap, O(log n) a message.
#[derive(Debug)]
pub(crate) struct Cursor {
    /// The next due time of each of the worker's connections.
    clocks: Vec<Clock>,
    /// Uniform: index into the worker's sequence, round `next / n`, connection `next % n`,
    /// and the due time there.
    next: u64,
    /// But for uniform arrivals: each connection's next due time and index in the worker's
    /// list, soonest first.
    heap: Option<BinaryHeap<Reverse<(u64, usize)>>>,
}

/// The message a [`Cursor`] stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    /// Index of the connection in the worker's list.
    pub(crate) local: usize,
    /// When it is due, in nanoseconds after the epoch.
    pub(crate) at_ns: u64,
}

impl Cursor {
    /// `conns` are the worker's global connection ids, ascending and not empty.
    pub(crate) fn new(schedule: Schedule, conns: &[usize]) -> Cursor {
        debug_assert!(!conns.is_empty() && conns.windows(2).all(|w| w[0] < w[1]));
        let mut clocks: Vec<Clock> = conns.iter().map(|&c| schedule.clock(c)).collect();
        let heap = match schedule.arrivals {
            Arrivals::Uniform => None,
            Arrivals::Poisson | Arrivals::OnOff { .. } | Arrivals::Pareto { .. } => Some(
                clocks
                    .iter_mut()
                    .enumerate()
                    .map(|(i, c)| Reverse((c.next_ns(), i)))
                    .collect(),
            ),
        };
        Cursor {
            clocks,
            next: 0,
            heap,
        }
    }

    /// The next message in due order.
    pub(crate) fn peek(&self) -> Due {
        match &self.heap {
            Some(heap) => {
                // Never empty: a connection's entry is replaced, never removed.
                let Reverse((at_ns, local)) = heap.peek().copied().unwrap_or_default();
                Due { local, at_ns }
            }
            None => {
                let n = self.clocks.len() as u64;
                let local = (self.next % n) as usize;
                let clock = &self.clocks[local];
                Due {
                    local,
                    at_ns: clock.schedule.uniform_ns(clock.conn, self.next / n),
                }
            }
        }
    }

    /// Moves past the message [`Cursor::peek`] returns.
    pub(crate) fn advance(&mut self) {
        match &mut self.heap {
            Some(heap) => {
                if let Some(mut top) = heap.peek_mut() {
                    let local = top.0.1;
                    top.0 = (self.clocks[local].next_ns(), local);
                }
            }
            None => self.next += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    /// Counts the messages a set of workers release in `[from, to)`, walking the cursors the way
    /// the worker loop does.
    fn released(rate: f64, conns: usize, threads: usize, from: u64, to: u64) -> u64 {
        released_as(Arrivals::Uniform, rate, conns, threads, from, to)
    }

    fn released_as(
        arrivals: Arrivals,
        rate: f64,
        conns: usize,
        threads: usize,
        from: u64,
        to: u64,
    ) -> u64 {
        let schedule = Schedule::new(rate, conns, arrivals, 7);
        let mut total = 0;
        for t in 0..threads {
            let mine: Vec<usize> = (t..conns).step_by(threads).collect();
            let mut cursor = Cursor::new(schedule, &mine);
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
        let schedule = Schedule::new(rate, conns, Arrivals::Uniform, 0);
        let mut all = Vec::new();
        for t in 0..threads {
            let mine: Vec<usize> = (t..conns).step_by(threads).collect();
            let mut cursor = Cursor::new(schedule, &mine);
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
        let s = Schedule::new(3.0, 2, Arrivals::Uniform, 0);
        let (mut c0, mut c1) = (s.clock(0), s.clock(1));
        assert_eq!(c0.next_ns(), 0);
        assert_eq!(c1.next_ns(), SEC / 3);
        c0.next_ns();
        c0.next_ns();
        assert_eq!(c0.next_ns(), 2 * SEC);
    }

    /// The `n` gaps between one connection's due times: their mean and coefficient of
    /// variation.
    fn gap_stats(s: &Schedule, conn: usize, n: usize) -> (f64, f64) {
        let mut clock = s.clock(conn);
        let mut last = clock.next_ns();
        let gaps: Vec<f64> = (0..n)
            .map(|_| {
                let at = clock.next_ns();
                let gap = (at - last) as f64;
                last = at;
                gap
            })
            .collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn poisson_gaps_have_the_mean_and_the_spread_of_an_exponential() {
        // 2,000/s over 4 connections: 500/s each, a mean gap of 2 ms. Over 200,000 gaps the
        // mean's standard error is 0.22% and the CV's about 0.3%: 2% and 3% are far outside
        // chance, and far inside what evenly spaced sends (CV 0) or a wrong scale would give.
        let s = Schedule::new(2_000.0, 4, Arrivals::Poisson, 42);
        for conn in [0, 3] {
            let (mean, cv) = gap_stats(&s, conn, 200_000);
            assert!(
                (mean / 2e6 - 1.0).abs() < 0.02,
                "conn {conn}: mean gap {mean} ns"
            );
            assert!((cv - 1.0).abs() < 0.03, "conn {conn}: CV {cv}");
        }
        // Uniform sends are evenly spaced: CV 0.
        let (mean, cv) = gap_stats(&Schedule::new(2_000.0, 4, Arrivals::Uniform, 42), 1, 1000);
        assert!((mean / 2e6 - 1.0).abs() < 0.01 && cv < 1e-3, "{mean} {cv}");
    }

    #[test]
    fn poisson_schedules_are_seeded_and_connections_differ() {
        let s = Schedule::new(1_000.0, 2, Arrivals::Poisson, 1);
        let first = |s: &Schedule, c| {
            let mut clock = s.clock(c);
            (0..5).map(|_| clock.next_ns()).collect::<Vec<u64>>()
        };
        assert_eq!(
            first(&s, 0),
            first(&s, 0),
            "the same seed draws the same gaps"
        );
        assert_ne!(
            first(&s, 0),
            first(&s, 1),
            "each connection has its own stream"
        );
        let other = Schedule::new(1_000.0, 2, Arrivals::Poisson, 2);
        assert_ne!(first(&s, 0), first(&other, 0), "another seed draws others");
    }

    #[test]
    fn poisson_workers_together_send_the_rate_in_due_order() {
        // 5,000/s over 100 connections and 3 workers for 20 s: 100,000 messages expected, a
        // standard deviation of 316; 2% is more than six of them.
        let got = released_as(Arrivals::Poisson, 5_000.0, 100, 3, 0, 20 * SEC);
        let err = (got as f64 - 100_000.0).abs() / 100_000.0;
        assert!(err < 0.02, "{got} messages in 20 s at 5,000/s");
        let schedule = Schedule::new(500.0, 10, Arrivals::Poisson, 3);
        let mut cursor = Cursor::new(schedule, &[1, 4, 7]);
        let mut last = 0;
        let mut seen = [0u32; 3];
        for _ in 0..3000 {
            let due = cursor.peek();
            assert!(due.at_ns >= last, "a worker's dues go forward");
            last = due.at_ns;
            seen[due.local] += 1;
            cursor.advance();
        }
        assert!(
            seen.iter().all(|&n| n > 800),
            "every connection takes its share: {seen:?}"
        );
    }

    /// The mean of `n` gaps of connection `conn` and the share of its due times that fall in
    /// an on-period of `on` ns in every `on + off`.
    fn gaps_and_on_share(s: &Schedule, conn: usize, n: usize, on: u64, off: u64) -> (f64, f64) {
        let mut clock = s.clock(conn);
        let first = clock.next_ns();
        let mut last = first;
        let mut in_on = u64::from(first % (on + off) < on);
        for _ in 0..n {
            last = clock.next_ns();
            in_on += u64::from(last % (on + off) < on);
        }
        (
            (last - first) as f64 / n as f64,
            in_on as f64 / (n + 1) as f64,
        )
    }

    #[test]
    fn on_off_gaps_keep_the_mean_and_fall_only_in_the_on_periods() {
        // 1,000/s over 2 connections, 10 ms on and 30 ms off: 500/s each on average, 2,000/s
        // each while on. Over 200,000 gaps (400 s, 10,000 cycles) the mean gap's error is
        // the last partial cycle's and chance's, both well under 1%.
        let (on, off) = (10_000_000, 30_000_000);
        let s = Schedule::new(
            1_000.0,
            2,
            Arrivals::OnOff {
                on_ns: on,
                off_ns: off,
            },
            5,
        );
        for conn in [0, 1] {
            let (mean, on_share) = gaps_and_on_share(&s, conn, 200_000, on, off);
            assert!(
                (mean / 2e6 - 1.0).abs() < 0.01,
                "conn {conn}: mean gap {mean}"
            );
            assert_eq!(on_share, 1.0, "every send falls in an on-period");
        }
        // The schedule is a pure function of the options and the seed.
        let (mut a, mut b) = (s.clock(1), s.clock(1));
        assert!((0..100).all(|_| a.next_ns() == b.next_ns()));
    }

    #[test]
    fn pareto_gaps_have_the_mean_of_the_rate_and_a_tail_heavier_than_poisson() {
        // 2,000/s over 4 connections: a mean gap of 2 ms. Shape 0.154971 (fb_ia): the
        // variance is finite (ξ < 1/2), so over 400,000 gaps the mean's standard error is
        // under 0.3%; 2% is far outside chance.
        let s = Schedule::new(2_000.0, 4, Arrivals::Pareto { shape: 0.154971 }, 11);
        let (mean, cv) = gap_stats(&s, 2, 400_000);
        assert!((mean / 2e6 - 1.0).abs() < 0.02, "mean gap {mean} ns");
        // A generalized Pareto's CV is 1 / sqrt(1 - 2ξ): 1.2 at this shape, 1 for Poisson.
        let want_cv = 1.0 / (1.0 - 2.0 * 0.154971f64).sqrt();
        assert!((cv / want_cv - 1.0).abs() < 0.05, "CV {cv}, want {want_cv}");
        // Seeded, and connections differ.
        let first = |c| {
            let mut clock = s.clock(c);
            (0..5).map(|_| clock.next_ns()).collect::<Vec<u64>>()
        };
        assert_eq!(first(0), first(0));
        assert_ne!(first(0), first(1));
    }

    #[test]
    fn arrivals_parse_and_name_themselves() {
        for text in [
            "uniform",
            "poisson",
            "onoff:10:90",
            "onoff:0.5:2",
            "pareto:0.154971",
        ] {
            let a: Arrivals = text.parse().unwrap();
            assert_eq!(a.to_string(), text);
        }
        assert_eq!(
            "onoff:10:90".parse(),
            Ok(Arrivals::OnOff {
                on_ns: 10_000_000,
                off_ns: 90_000_000
            })
        );
        for bad in [
            "",
            "bursty",
            "onoff",
            "onoff:10",
            "onoff:0:10",
            "onoff:10:-1",
            "onoff:x:1",
            "pareto",
            "pareto:0",
            "pareto:1",
            "pareto:1.5",
            "pareto:x",
        ] {
            assert!(bad.parse::<Arrivals>().is_err(), "{bad:?} was accepted");
        }
    }
}
