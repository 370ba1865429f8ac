//! How an open-loop worker waits for its next due message, and how it notices that it was
//! not running when it meant to.
//!
//! A send that first waits in the kernel inherits the wake-up's delay (on a VM, tens of
//! microseconds usually and milliseconds at the tail), and `epoll_wait` itself only sleeps in
//! whole milliseconds. So, as Lancet and Treadmill do, a worker with a CPU of its own never
//! sleeps while it sends: it reads the clock, releases what is due, polls with a zero timeout
//! and serves a bounded batch of events, checking the schedule between them
//! ([`Pacing::Spin`]). A worker that shares its CPU cannot spin without taking the CPU from
//! whoever shares it: it sleeps on an absolute `timerfd` (nanoseconds, the timer slack set to
//! 1 ns) until [`SPIN_AHEAD_NS`] before the due time, then spins the rest
//! ([`Pacing::Sleep`]). Neither ever waits on a millisecond-rounded timeout: [`plan`] always
//! names the timer's exact wake time, and `poll`'s own timeout is only a fallback past it.
//!
//! What a spinning client's CPU time says about its work is nothing (it is always 100%), so
//! the worker counts the time it spent working, from a poll that returned something to the
//! next poll ([`Busy`]); the client-bound rule reads that.

use std::time::Duration;

/// How far ahead of a due time a sleeping worker wakes, to spin the rest: more than the
/// timer's usual wake-up delay, little enough not to keep a shared CPU.
pub(crate) const SPIN_AHEAD_NS: u64 = 20_000;

/// Two clock readings of the loop further apart than this mean that the worker was not
/// running in between (preempted, descheduled, its vCPU stolen): a hiccup. A step of the loop
/// between two readings (one event's read, check and write) takes a few microseconds.
pub(crate) const HICCUP_NS: u64 = 20_000;

/// How an open-loop worker waits between sends (`--pacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// Never sleep while sending: poll with a zero timeout in a loop. For a worker with a CPU
    /// of its own.
    Spin,
    /// Sleep on a nanosecond timer until shortly before the due time, then spin. For workers
    /// that share a CPU.
    Sleep,
}

impl Pacing {
    /// As `--pacing` and the summary name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Pacing::Spin => "spin",
            Pacing::Sleep => "sleep",
        }
    }

    /// The right pacing for `threads` workers on `cpus` (empty: not pinned): spin only where
    /// every worker is pinned to a CPU no other worker has.
    pub fn default_for(threads: usize, cpus: &[usize]) -> Pacing {
        if !cpus.is_empty() && threads <= cpus.len() {
            Pacing::Spin
        } else {
            Pacing::Sleep
        }
    }
}

impl std::str::FromStr for Pacing {
    type Err = String;

    fn from_str(s: &str) -> Result<Pacing, String> {
        match s {
            "spin" => Ok(Pacing::Spin),
            "sleep" => Ok(Pacing::Sleep),
            other => Err(format!("--pacing takes spin or sleep, not {other:?}")),
        }
    }
}

/// What the worker does before its next turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Poll with a zero timeout: something is due now or soon enough to spin for.
    Spin,
    /// Sleep until the timer, armed for this instant (nanoseconds after the run's epoch),
    /// wakes the worker; `poll`'s timeout is a fallback well past it.
    Until(u64),
}

impl Wait {
    /// `poll`'s timeout for this wait at `now`: zero to spin; else a fallback a millisecond
    /// past the timer, which always wakes the worker first (`poll` rounds up to whole
    /// milliseconds, so it is never the clock that decides).
    pub(crate) fn poll_timeout(self, now: u64) -> Duration {
        match self {
            Wait::Spin => Duration::ZERO,
            Wait::Until(at) => Duration::from_nanos(at.saturating_sub(now) + 1_000_000),
        }
    }
}

/// How to wait at `now` for the next due message `due` (none: nothing left to send) when
/// the worker's other business (stall checks, the window's edges, the end of the drain) next
/// needs it at `deadline`.
pub(crate) fn plan(pacing: Pacing, now: u64, due: Option<u64>, deadline: u64) -> Wait {
    let wake = match (due, pacing) {
        // A spinning worker with a message still to send never sleeps: a wake-up from even
        // a short sleep (to its next housekeeping) may come late for the message after it.
        (Some(_), Pacing::Spin) => return Wait::Spin,
        (Some(due), Pacing::Sleep) if due <= deadline => {
            if due <= now + SPIN_AHEAD_NS {
                return Wait::Spin;
            }
            due - SPIN_AHEAD_NS
        }
        _ => deadline,
    };
    if wake <= now {
        Wait::Spin
    } else {
        Wait::Until(wake)
    }
}

/// The loop's hiccups: readings of the clock further apart than [`HICCUP_NS`] while the
/// worker meant to be running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hiccups {
    /// How many.
    pub count: u64,
    /// Their time together, in nanoseconds.
    pub lost_ns: u64,
    /// The longest, in nanoseconds.
    pub longest_ns: u64,
}

impl Hiccups {
    /// Notes the gap between two readings the worker meant to be close.
    pub(crate) fn gap(&mut self, from: u64, to: u64) {
        let gap = to.saturating_sub(from);
        if gap > HICCUP_NS {
            self.count += 1;
            self.lost_ns += gap;
            self.longest_ns = self.longest_ns.max(gap);
        }
    }

    /// Both together, as of two workers.
    pub fn and(self, other: Hiccups) -> Hiccups {
        Hiccups {
            count: self.count + other.count,
            lost_ns: self.lost_ns + other.lost_ns,
            longest_ns: self.longest_ns.max(other.longest_ns),
        }
    }
}

/// A connection's released messages that could not be written at once because it had
/// `--depth` in flight: they wait for the server's reply, not for the client, so their lag
/// is taken at their release, and the connection's next writes take them first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Held(u64);

impl Held {
    /// A message was released while `unsent` released messages (itself included) were not
    /// yet written and the connection had `room` free slots: whether it is held.
    pub(crate) fn release(&mut self, unsent: u64, room: u64) -> bool {
        let held = unsent > room;
        self.0 += u64::from(held);
        held
    }

    /// `n` messages go out in one write: how many of them, from the first, were held.
    pub(crate) fn write(&mut self, n: u64) -> u64 {
        let held = self.0.min(n);
        self.0 -= held;
        held
    }
}

/// The worker's own clock of its work and hiccups over the measured window.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Busy {
    /// Time spent working: from a poll that returned events (or a turn that released
    /// messages) to the next poll.
    pub(crate) work_ns: u64,
    pub(crate) hiccups: Hiccups,
    /// The last reading of the clock the loop made while it meant to run, if it did not
    /// sleep since.
    last: Option<u64>,
}

impl Busy {
    /// A reading of the clock inside a turn (or at a spin's poll): a gap since the last one
    /// is a hiccup.
    pub(crate) fn reading(&mut self, now: u64, measured: bool) {
        if let (Some(last), true) = (self.last, measured) {
            self.hiccups.gap(last, now);
        }
        self.last = Some(now);
    }

    /// The worker woke from a sleep it asked to end at `asked`: waking later is a hiccup.
    pub(crate) fn woke(&mut self, asked: u64, now: u64, measured: bool) {
        if measured {
            self.hiccups.gap(asked, now);
        }
        self.last = Some(now);
    }

    /// The worker is about to sleep: no reading is expected until it wakes.
    pub(crate) fn sleeping(&mut self) {
        self.last = None;
    }

    /// A turn that did work ran from `from` to `to`.
    pub(crate) fn worked(&mut self, from: u64, to: u64, measured: bool) {
        if measured {
            self.work_ns += to.saturating_sub(from);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_worker_never_sleeps_while_a_message_is_to_come() {
        assert_eq!(
            plan(Pacing::Spin, 100, Some(5_000_000), 50_000_000),
            Wait::Spin
        );
        assert_eq!(plan(Pacing::Spin, 100, Some(100), 50_000_000), Wait::Spin);
        // Past its next housekeeping too: it spins through it.
        assert_eq!(
            plan(Pacing::Spin, 100, Some(90_000_000), 50_000_000),
            Wait::Spin
        );
    }

    #[test]
    fn a_sleeping_worker_wakes_exactly_ahead_of_a_due_time_just_past_a_tick() {
        // A tick (the housekeeping deadline) at 50 ms; a message due 1 ns after it, and one
        // 1 ns before it. The timer is set to the nanosecond, never to a millisecond.
        let tick = 50_000_000;
        assert_eq!(
            plan(Pacing::Sleep, 0, Some(tick + 1), tick),
            Wait::Until(tick),
            "the tick comes first"
        );
        assert_eq!(
            plan(Pacing::Sleep, 0, Some(tick - 1), tick),
            Wait::Until(tick - 1 - SPIN_AHEAD_NS)
        );
        assert_eq!(
            plan(Pacing::Sleep, 1, Some(1_234_567), tick),
            Wait::Until(1_234_567 - SPIN_AHEAD_NS)
        );
    }

    #[test]
    fn every_wait_names_its_exact_instant_and_polls_past_it() {
        // Whatever the due time and deadline, the wait is a spin or the exact instant asked
        // for; poll's fallback never comes before it.
        for pacing in [Pacing::Spin, Pacing::Sleep] {
            for now in [0u64, 1, 999_999, 1_000_001] {
                for due in [None, Some(now), Some(now + 1), Some(now + 1_500_001)] {
                    for deadline in [now, now + 1, now + 1_000_000, now + 3_333_333] {
                        match plan(pacing, now, due, deadline) {
                            Wait::Spin => {}
                            Wait::Until(at) => {
                                assert!(at > now);
                                assert!(
                                    pacing == Pacing::Sleep || due.is_none(),
                                    "a spinning worker slept with a message to send"
                                );
                                let expected = match due {
                                    Some(d) if d <= deadline => d - SPIN_AHEAD_NS,
                                    _ => deadline,
                                };
                                assert_eq!(at, expected);
                                let fallback = Wait::Until(at).poll_timeout(now);
                                assert!(fallback > Duration::from_nanos(at - now));
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn with_nothing_to_send_a_worker_sleeps_to_its_deadline_and_so_does_a_sleeper_before_a_far_message()
     {
        assert_eq!(plan(Pacing::Spin, 10, None, 1_000), Wait::Until(1_000));
        assert_eq!(
            plan(Pacing::Sleep, 10, Some(5_000_000), 1_000),
            Wait::Until(1_000)
        );
        assert_eq!(plan(Pacing::Sleep, 10, None, 5), Wait::Spin);
    }

    #[test]
    fn spin_is_the_default_only_where_each_worker_has_a_cpu_of_its_own() {
        assert_eq!(Pacing::default_for(1, &[0]), Pacing::Spin);
        assert_eq!(Pacing::default_for(2, &[0, 1]), Pacing::Spin);
        assert_eq!(Pacing::default_for(2, &[0]), Pacing::Sleep);
        assert_eq!(Pacing::default_for(1, &[]), Pacing::Sleep);
        assert_eq!("spin".parse(), Ok(Pacing::Spin));
        assert!("fast".parse::<Pacing>().is_err());
    }

    #[test]
    fn only_messages_that_found_the_flight_full_are_held_and_they_go_out_first() {
        let mut h = Held::default();
        // Depth 1, the slot free: released and written at once; its lag is the write's.
        assert!(!h.release(1, 1));
        assert_eq!(h.write(1), 0);
        // The slot taken: the next two wait for replies.
        assert!(h.release(1, 0));
        assert!(h.release(2, 0));
        // A reply frees the slot: the first held goes out, then the second.
        assert_eq!(h.write(1), 1);
        assert_eq!(h.write(1), 1);
        assert_eq!(h, Held::default());
        // Depth 4 with two in flight: two of three released fit, the third is held; the
        // write after a reply takes the held one and a new one, of which one was held.
        assert!(!h.release(1, 2));
        assert!(!h.release(2, 2));
        assert!(h.release(3, 2));
        assert_eq!(h.write(2), 1);
        assert_eq!(h.write(2), 0);
    }

    #[test]
    fn hiccups_are_the_gaps_past_the_threshold_and_only_in_the_window() {
        let mut b = Busy::default();
        b.reading(0, true);
        b.reading(HICCUP_NS, true);
        b.reading(HICCUP_NS * 3, true);
        b.reading(HICCUP_NS * 10, false);
        b.sleeping();
        b.reading(HICCUP_NS * 100, true);
        b.woke(HICCUP_NS * 200, HICCUP_NS * 200 + 5, true);
        b.woke(HICCUP_NS * 300, HICCUP_NS * 305, true);
        assert_eq!(b.hiccups.count, 2);
        assert_eq!(b.hiccups.longest_ns, HICCUP_NS * 5);
        assert_eq!(b.hiccups.lost_ns, HICCUP_NS * 7);
    }
}
