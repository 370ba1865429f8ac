//! The open loop's self-check, as Lancet's: whether the client kept its schedule, so that a
//! point's latency is the server's and not the client's.
//!
//! Three things are checked over the measured window:
//!
//! - **The send lag** (how long after its due time each message was written): its p99 must be
//!   at most [`LAG_P99_MAX_US`], or a tenth of the point's latency p99 where that is larger
//!   (a lag that small moves the latency by less than its own noise).
//! - **The achieved gaps against the intended ones**: each worker records the gaps between
//!   the due times of its consecutive messages and between their writes. Their distributions
//!   must lie within [`GAP_DISTANCE_MAX`] of each other by a Kolmogorov distance that allows
//!   each gap [`GAP_SLACK_NS`] of jitter (a plain Kolmogorov-Smirnov test at 100,000 gaps
//!   would reject any jitter at all; a millisecond-rounded sleeper or a schedule that stops
//!   and bursts is far outside it).
//! - **Poisson arrivals against the exponential**: the achieved gaps of a Poisson run must
//!   fit the exponential of the intended mean, within the same distance: uniform gaps
//!   labelled Poisson fail it. Only Poisson: on-off and Pareto gaps are not exponential by
//!   design, and are judged by the achieved against the intended gaps alone.
//!
//! The client's hiccups (its loop not running when it meant to) and the hypervisor's steal
//! on its CPUs are not criteria by themselves, since they may fall where nothing was due;
//! they are the reason told when the lag or the gaps fail.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::pacing::Hiccups;

/// The largest p99 send lag, in microseconds, of a point whose schedule was kept (unless a
/// tenth of the latency p99 is larger).
pub(crate) const LAG_P99_MAX_US: f64 = 100.0;

/// The largest distance between the achieved and intended gap distributions.
pub(crate) const GAP_DISTANCE_MAX: f64 = 0.05;

/// The largest share of the messages `--depth` may hold back for the exponential test to
/// apply.
pub(crate) const HELD_MAX_SHARE: f64 = 0.01;

/// The jitter a gap may have before it counts against the distance.
pub(crate) const GAP_SLACK_NS: u64 = 10_000;

/// The gaps of one worker's sends: intended (between due times) and achieved (between
/// writes), each a histogram made before the run, so that recording allocates nothing.
#[derive(Debug, Clone)]
pub(crate) struct Gaps {
    pub(crate) intended: Histogram<u64>,
    pub(crate) achieved: Histogram<u64>,
    last: Option<(u64, u64)>,
}

impl Default for Gaps {
    fn default() -> Self {
        Gaps::new()
    }
}

impl Gaps {
    /// Empty histograms of gaps from 1 ns to an hour.
    pub(crate) fn new() -> Gaps {
        Gaps {
            intended: crate::hist::new_histogram(),
            achieved: crate::hist::new_histogram(),
            last: None,
        }
    }

    /// A measured message due at `due_ns` was written at `sent_ns`.
    pub(crate) fn sent(&mut self, due_ns: u64, sent_ns: u64) {
        if let Some((due0, sent0)) = self.last {
            // A gap of 0 (two messages in one write) is recorded as the smallest, 1 ns.
            self.intended
                .saturating_record(due_ns.saturating_sub(due0).max(1));
            self.achieved
                .saturating_record(sent_ns.saturating_sub(sent0).max(1));
        }
        self.last = Some((due_ns, sent_ns));
    }

    /// Both workers' gaps together (each worker's gaps are its own sequence's).
    pub(crate) fn add(&mut self, other: &Gaps) {
        // Same bounds: the addition cannot fail.
        let _ = self.intended.add(&other.intended);
        let _ = self.achieved.add(&other.achieved);
    }
}

/// The self-check of one open-loop run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleCheck {
    /// Whether the client kept its schedule: every criterion met.
    pub ok: bool,
    /// Why not, in words (the failed criteria, with the hiccups and steal that may explain
    /// them); `None` when ok.
    pub reason: Option<String>,
    /// Send lag p50 and p99, microseconds.
    pub lag_p50_us: f64,
    pub lag_p99_us: f64,
    /// The lag p99 allowed at this point's latency.
    pub lag_p99_max_us: f64,
    /// Distance between the achieved and intended gaps.
    pub gap_distance: f64,
    /// Poisson only: distance between the achieved gaps and the exponential of the intended
    /// mean.
    pub exponential_distance: Option<f64>,
    /// Gaps compared.
    pub gaps: u64,
    /// The client's hiccups over the window.
    pub hiccups: u64,
    pub hiccup_longest_us: f64,
    /// Share of the window lost in hiccups, percent (of the busiest worker's).
    pub hiccup_lost_pct: f64,
    /// Time the hypervisor stole from the client's CPUs, percent of the window.
    pub client_steal_pct: Option<f64>,
}

/// What the check is made of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckInput<'a> {
    pub(crate) lag: &'a Histogram<u64>,
    pub(crate) latency_p99_us: f64,
    pub(crate) gaps: &'a Gaps,
    /// Whether the arrivals were Poisson, the one process whose gaps are exponential.
    pub(crate) poisson: bool,
    /// Measured messages held back by `--depth` (the server was behind).
    pub(crate) held: u64,
    pub(crate) hiccups: Hiccups,
    pub(crate) window_ns: u64,
    pub(crate) client_steal_pct: Option<f64>,
}

/// Judges a run's schedule.
pub(crate) fn check(i: CheckInput<'_>) -> ScheduleCheck {
    let us = |ns: u64| ns as f64 / 1e3;
    let lag_p50_us = us(i.lag.value_at_quantile(0.5));
    let lag_p99_us = us(i.lag.value_at_quantile(0.99));
    let lag_p99_max_us = LAG_P99_MAX_US.max(i.latency_p99_us / 10.0);
    let gap_distance = distance(&i.gaps.achieved, |x| cdf(&i.gaps.intended, x));
    let mean = i.gaps.intended.mean();
    // A server that falls behind holds messages back in bursts, and the sends let out
    // between them need not be exponential: the shape is judged on a schedule the depth
    // left whole.
    let whole = i.held as f64 <= HELD_MAX_SHARE * i.lag.len() as f64;
    let exponential_distance = (i.poisson && whole && mean > 0.0)
        .then(|| distance(&i.gaps.achieved, |x| 1.0 - (-(x as f64) / mean).exp()));
    let mut failed = Vec::new();
    if lag_p99_us > lag_p99_max_us {
        failed.push(format!(
            "send lag p99 {} > {}",
            show_us(lag_p99_us),
            show_us(lag_p99_max_us)
        ));
    }
    if gap_distance > GAP_DISTANCE_MAX {
        failed.push(format!(
            "the achieved gaps differ from the intended (distance {gap_distance:.3} > {GAP_DISTANCE_MAX})"
        ));
    }
    if let Some(d) = exponential_distance.filter(|&d| d > GAP_DISTANCE_MAX) {
        failed.push(format!(
            "the achieved gaps are not exponential (distance {d:.3} > {GAP_DISTANCE_MAX})"
        ));
    }
    let hiccup_lost_pct = if i.window_ns > 0 {
        i.hiccups.lost_ns as f64 / i.window_ns as f64 * 100.0
    } else {
        0.0
    };
    let reason = (!failed.is_empty()).then(|| {
        let mut why = failed.join("; ");
        if i.hiccups.count > 0 {
            why.push_str(&format!(
                "; the client stalled {} times (longest {}, {hiccup_lost_pct:.1}% of the window)",
                i.hiccups.count,
                show_us(us(i.hiccups.longest_ns))
            ));
        }
        if let Some(s) = i.client_steal_pct.filter(|&s| s >= 1.0) {
            why.push_str(&format!(
                "; the hypervisor stole {s:.1}% of the client's CPUs"
            ));
        }
        why
    });
    ScheduleCheck {
        ok: failed.is_empty(),
        reason,
        lag_p50_us,
        lag_p99_us,
        lag_p99_max_us,
        gap_distance,
        exponential_distance,
        gaps: i.gaps.achieved.len(),
        hiccups: i.hiccups.count,
        hiccup_longest_us: us(i.hiccups.longest_ns),
        hiccup_lost_pct,
        client_steal_pct: i.client_steal_pct,
    }
}

fn show_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// The fraction of `h`'s values at most `x`.
fn cdf(h: &Histogram<u64>, x: u64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    h.count_between(0, x) as f64 / h.len() as f64
}

/// The Kolmogorov distance between the distribution of `achieved` and the reference `f`,
/// each achieved gap allowed [`GAP_SLACK_NS`] either way: the largest amount by which one
/// CDF exceeds the other shifted by the slack.
fn distance(achieved: &Histogram<u64>, f: impl Fn(u64) -> f64) -> f64 {
    if achieved.is_empty() {
        return 0.0;
    }
    let n = achieved.len() as f64;
    let mut below = 0u64;
    let mut d: f64 = 0.0;
    for v in achieved.iter_recorded() {
        let x = v.value_iterated_to();
        // Just below this value, and at it.
        let before = below as f64 / n;
        below += v.count_at_value();
        let at = below as f64 / n;
        let lo = f(x.saturating_sub(GAP_SLACK_NS).saturating_sub(1));
        let hi = f(x + GAP_SLACK_NS);
        d = d.max(lo - before).max(at - hi);
    }
    d.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const N: usize = 100_000;
    /// 20,000 messages a second.
    const MEAN_NS: f64 = 50_000.0;

    fn poisson_due() -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut t = 0.0;
        (0..N)
            .map(|_| {
                let u: f64 = rng.random();
                t += -(1.0 - u).ln() * MEAN_NS;
                t as u64
            })
            .collect()
    }

    /// The check of messages due at `due`, written at `sent` (lag measured against due).
    fn judge(due: &[u64], sent: &[u64], poisson: bool) -> ScheduleCheck {
        judge_held(due, sent, poisson, 0)
    }

    /// As [`judge`], with `held` more measured messages held back by the depth (their lag
    /// taken at release, none of them in the gaps).
    fn judge_held(due: &[u64], sent: &[u64], poisson: bool, held: u64) -> ScheduleCheck {
        let mut gaps = Gaps::new();
        let mut lag = crate::hist::new_histogram();
        for (&d, &s) in due.iter().zip(sent) {
            assert!(s >= d, "a write before its due time");
            gaps.sent(d, s);
            lag.saturating_record((s - d).max(1));
        }
        for _ in 0..held {
            lag.saturating_record(1);
        }
        check(CheckInput {
            lag: &lag,
            latency_p99_us: 300.0,
            gaps: &gaps,
            poisson,
            held,
            hiccups: Hiccups::default(),
            window_ns: *due.last().unwrap_or(&0),
            client_steal_pct: None,
        })
    }

    #[test]
    fn an_exact_poisson_schedule_passes() {
        let due = poisson_due();
        let c = judge(&due, &due, true);
        assert!(c.ok, "{c:?}");
        assert_eq!(c.gaps, N as u64 - 1);
        assert!(c.exponential_distance.is_some_and(|d| d < 0.02), "{c:?}");
    }

    #[test]
    fn a_poisson_schedule_with_microseconds_of_jitter_passes() {
        let due = poisson_due();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let sent: Vec<u64> = due
            .iter()
            .map(|&d| d + rng.random_range(1_000..8_000))
            .collect();
        let c = judge(&due, &sent, true);
        assert!(c.ok, "{c:?}");
    }

    #[test]
    fn the_same_schedule_rounded_up_to_the_millisecond_fails() {
        let due = poisson_due();
        let sent: Vec<u64> = due
            .iter()
            .map(|&d| d.div_ceil(1_000_000) * 1_000_000)
            .collect();
        let c = judge(&due, &sent, true);
        assert!(!c.ok);
        let why = c.reason.unwrap_or_default();
        assert!(why.contains("send lag p99"), "{why}");
        assert!(why.contains("achieved gaps differ"), "{why}");
    }

    #[test]
    fn the_same_schedule_with_2_ms_holes_every_100_ms_fails() {
        let due = poisson_due();
        // Whatever falls due in the first 2 ms of each 100 ms goes out at its end.
        let sent: Vec<u64> = due
            .iter()
            .map(|&d| {
                let into = d % 100_000_000;
                if into < 2_000_000 {
                    d - into + 2_000_000
                } else {
                    d
                }
            })
            .collect();
        let c = judge(&due, &sent, true);
        assert!(!c.ok, "{c:?}");
        assert!(c.reason.unwrap_or_default().contains("send lag p99"));
    }

    #[test]
    fn a_schedule_a_slow_server_thinned_in_bursts_is_judged_on_its_gaps_alone() {
        // A throttled server: whatever falls due in the last 1.5 ms of every 2 ms waits for
        // room (held), the rest goes out on time. What is sent is not exponential, and the
        // client kept its schedule.
        let due = poisson_due();
        let (sent, held): (Vec<u64>, Vec<u64>) =
            due.iter().partition(|&&d| d % 2_000_000 < 500_000);
        let c = judge_held(&sent, &sent, true, held.len() as u64);
        assert!(c.ok, "{c:?}");
        assert_eq!(c.exponential_distance, None);
        // Were none of them held, the same sends would be a schedule bent out of shape.
        let c = judge_held(&sent, &sent, true, 0);
        assert!(!c.ok && c.reason.unwrap_or_default().contains("not exponential"));
    }

    #[test]
    fn uniform_gaps_labelled_poisson_fail_and_pass_as_uniform() {
        let due: Vec<u64> = (0..N as u64).map(|k| k * MEAN_NS as u64).collect();
        let c = judge(&due, &due, true);
        assert!(!c.ok);
        assert!(c.reason.unwrap_or_default().contains("not exponential"));
        let c = judge(&due, &due, false);
        assert!(c.ok, "{c:?}");
        assert_eq!(c.exponential_distance, None);
    }

    #[test]
    fn the_lag_allowed_grows_with_the_latency_and_the_reason_names_hiccups_and_steal() {
        let mut lag = crate::hist::new_histogram();
        lag.saturating_record(500_000);
        let gaps = Gaps::new();
        let input = |latency_p99_us| CheckInput {
            lag: &lag,
            latency_p99_us,
            gaps: &gaps,
            poisson: false,
            held: 0,
            hiccups: Hiccups {
                count: 3,
                lost_ns: 1_400_000,
                longest_ns: 700_000,
            },
            window_ns: 1_000_000_000,
            client_steal_pct: Some(4.0),
        };
        assert!(check(input(10_000.0)).ok);
        let c = check(input(1_000.0));
        assert!(!c.ok);
        let why = c.reason.unwrap_or_default();
        assert!(
            why.contains("stalled 3 times (longest 700 µs, 0.1% of the window)"),
            "{why}"
        );
        assert!(why.contains("stole 4.0%"), "{why}");
    }

    #[test]
    fn pareto_and_on_off_schedules_kept_pass_on_their_gaps_alone() {
        use crate::config::Arrivals;
        use crate::schedule::Schedule;
        for arrivals in [
            Arrivals::Pareto { shape: 0.154971 },
            Arrivals::OnOff {
                on_ns: 10_000_000,
                off_ns: 40_000_000,
            },
        ] {
            let mut clock = Schedule::new(20_000.0, 1, arrivals, 3).clock(0);
            let due: Vec<u64> = (0..N).map(|_| clock.next_ns()).collect();
            let c = judge(&due, &due, arrivals.is_poisson());
            assert!(c.ok, "{arrivals}: {c:?}");
            assert_eq!(c.exponential_distance, None);
            // Judged as exponential, on-off gaps (silences of 40 ms) would fail: the test
            // must not apply to them. fb_ia's Pareto lies within the distance allowed of
            // its exponential, so the test would not tell there.
            if let Arrivals::OnOff { .. } = arrivals {
                let c = judge(&due, &due, true);
                assert!(!c.ok, "{arrivals} gaps pass as exponential: {c:?}");
            }
            // A client that sends them evenly instead is caught by the gaps alone.
            let even: Vec<u64> = (0..N as u64).map(|k| k * 50_000).collect();
            let sent: Vec<u64> = due.iter().zip(&even).map(|(&d, &e)| d.max(e)).collect();
            assert!(!judge(&due, &sent, false).ok, "{arrivals}");
        }
    }
}
