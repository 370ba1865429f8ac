//! The capacity suite's decisions, as pure functions of what was measured so far: the latency
//! objective (`--slo p99=5ms`), whether a probe meets it, and which rate to try next. Given the
//! same probes it always asks for the same next rate, so that `--resume` walks a stopped
//! search again from its saved probes and carries on where it stopped.
//!
//! The search, per server and workload:
//!
//! 1. **sweep**: from [`Search::start`], rates a factor [`Search::factor`] apart, up while the
//!    probes meet the objective and down while none has; the first miss above a hit (or the
//!    first hit below a miss) brackets the capacity;
//! 2. **bisect**: the bracket halved until it is narrower than [`Search::resolution`] of its
//!    lower end;
//! 3. **confirm**: [`Search::repeats`] more probes at the rate found; every one must meet the
//!    objective, else the rate steps down by the resolution and is confirmed again.
//!
//! A probe that missed where the client may be why (its CPU saturated, or its own delay in
//! sending explains the miss) says nothing about the server: the search stops there and the
//! capacity is "at least" the highest rate met before it. A probe that met the objective
//! stands whatever the client did: latency counts from the due time, so a slow client only
//! ever makes the server look worse.
//!
//! It may call nothing else of xtask.

use serde::{Deserialize, Serialize};

/// The percentiles an objective may name, as `--slo` and the summary's columns spell them.
pub(crate) const PERCENTILES: [&str; 7] = ["p50", "p90", "p95", "p99", "p99.9", "p99.99", "max"];

/// A latency objective: `percentile` of the latency at or under `limit_us`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Slo {
    /// One of [`PERCENTILES`].
    pub(crate) percentile: String,
    pub(crate) limit_us: f64,
}

impl std::fmt::Display for Slo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = self.limit_us;
        let limit = if us >= 1e6 && us % 1e6 == 0.0 {
            format!("{}s", us / 1e6)
        } else if us >= 1e3 && us % 1e3 == 0.0 {
            format!("{}ms", us / 1e3)
        } else {
            format!("{us}us")
        };
        write!(f, "{}={limit}", self.percentile)
    }
}

impl std::str::FromStr for Slo {
    type Err = String;

    /// `p99=5ms`: a percentile of [`PERCENTILES`], `=`, a positive time in `us` (or `µs`),
    /// `ms` or `s`.
    fn from_str(s: &str) -> Result<Slo, String> {
        let form = "write it as PERCENTILE=TIME, like p99=5ms or p99.9=800us";
        let Some((p, t)) = s.split_once('=') else {
            return Err(format!("`{s}` is not a latency objective: {form}"));
        };
        let percentile = p.trim().to_ascii_lowercase();
        if !PERCENTILES.contains(&percentile.as_str()) {
            return Err(format!(
                "`{p}` is not a percentile the summary has: use one of {}",
                PERCENTILES.join(", ")
            ));
        }
        let t = t.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+')))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let scale = match unit {
            "us" | "µs" => 1.0,
            "ms" => 1e3,
            "s" => 1e6,
            "" => return Err(format!("`{t}` has no unit: give us, ms or s ({form})")),
            _ => return Err(format!("`{unit}` is not a unit of time: use us, ms or s")),
        };
        match num.parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(Slo {
                percentile,
                limit_us: v * scale,
            }),
            _ => Err(format!("`{t}` is not a positive time ({form})")),
        }
    }
}

/// Whether a server sustained the rate `offered` over a window of `window_secs`: it achieved
/// it within 1%, or, under Poisson arrivals, within three standard deviations of the count of
/// arrivals the window holds (`3 / sqrt(offered × window)`: 9.5% for 1000 arrivals, 1% from
/// 90,000), since a window of Poisson arrivals holds that many fewer now and then with
/// nothing wrong on the server's side.
pub(crate) fn sustained(offered: f64, achieved: f64, window_secs: f64, poisson: bool) -> bool {
    let mut tolerance = 0.01;
    let expected = offered * window_secs;
    if poisson && expected > 0.0 {
        tolerance = f64::max(tolerance, 3.0 / expected.sqrt());
    }
    achieved >= offered * (1.0 - tolerance)
}

/// Whether the client, not the server, may have made a probe miss its objective: the client's
/// own delay in sending at the same percentile (how long after their due time it released
/// messages) is half the limit or more, so that it cannot release messages in time to measure
/// the objective. In the open loop, latency counts from the due time, so a client that is slow
/// only ever makes the server look worse: a probe that met the objective stands whatever the
/// client did. A smaller delay is the host's timer and scheduling jitter, the same at every
/// rate (about 1–2 ms at p99 on a 2-CPU VM whatever the load): subtracting it whole would call
/// every close miss the client's and stop every search at its first one.
/// A probe whose latency met the limit missed for another reason (the rate not sustained,
/// errors), which this does not explain.
pub(crate) fn client_explains_miss(latency_us: f64, send_lag_us: f64, limit_us: f64) -> bool {
    latency_us > limit_us && send_lag_us >= limit_us / 2.0
}

/// The percentile of loadgen's summary that stands for `percentile` (one of [`PERCENTILES`]):
/// the same, or the next one up where loadgen reports none (p95: p99), as its JSON names it.
pub(crate) fn loadgen_percentile(percentile: &str) -> &'static str {
    match percentile {
        "p50" => "p50",
        "p90" => "p90",
        "p95" | "p99" => "p99",
        "p99.9" => "p99_9",
        "p99.99" => "p99_99",
        _ => "max",
    }
}

/// What the search needs of one probe: a run of the server at an offered rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Probe {
    /// The rate offered, per second.
    pub(crate) rate: f64,
    /// The server sustained it (the achieved rate within the tolerance of the offered, no
    /// error) and its latency met the objective.
    pub(crate) met: bool,
    /// The client, not the server, may have made the probe miss (its CPU saturated, or its
    /// own delay in sending explains the miss: [`client_explains_miss`]): it says nothing of
    /// the server.
    pub(crate) client_bound: bool,
}

/// How the search goes: where it starts, how coarse and how fine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Search {
    /// The first rate tried, per second.
    pub(crate) start: f64,
    /// The ratio of one sweep rate to the next.
    pub(crate) factor: f64,
    /// The bisection stops when the bracket is narrower than this share of its lower end.
    pub(crate) resolution: f64,
    /// Probes at the rate found that must all meet the objective.
    pub(crate) repeats: usize,
    /// No rate below this or above this is tried.
    pub(crate) min_rate: f64,
    pub(crate) max_rate: f64,
}

impl Default for Search {
    fn default() -> Search {
        Search {
            start: 1000.0,
            factor: 2.0,
            resolution: 0.02,
            repeats: 3,
            min_rate: 10.0,
            max_rate: 10_000_000.0,
        }
    }
}

/// Where a search stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase {
    Sweep,
    Bisect { lo: f64, hi: f64 },
    Confirm { rate: f64 },
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Next {
    /// Probe this rate.
    Try { rate: f64, phase: Phase },
    /// The search is over.
    Done(Found),
}

/// What a search found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum Found {
    /// The highest rate that met the objective, confirmed.
    Capacity { rate: f64 },
    /// The client bounded a probe: the server met the objective at `rate` at least (0 when
    /// no probe met it before).
    ClientBound { rate: f64 },
    /// Not even the least rate met the objective.
    Below { rate: f64 },
    /// The highest rate tried met it: the capacity is above it.
    Above { rate: f64 },
    /// The bracket was found but no rate in it was confirmed within the step-downs allowed.
    Unconfirmed { rate: f64 },
}

impl Found {
    /// The rate the finding is about.
    pub(crate) fn rate(self) -> f64 {
        match self {
            Found::Capacity { rate }
            | Found::ClientBound { rate }
            | Found::Below { rate }
            | Found::Above { rate }
            | Found::Unconfirmed { rate } => rate,
        }
    }
}

/// How many times a failed confirmation may step the rate down before the search gives up.
const STEP_DOWNS: usize = 5;

impl Search {
    /// The rate as probes are run and named: whole messages per second.
    fn round(&self, r: f64) -> f64 {
        r.clamp(self.min_rate, self.max_rate).round().max(1.0)
    }

    /// The next step after `probes`, the probes of this search so far in the order they ran.
    pub(crate) fn next(&self, probes: &[Probe]) -> Next {
        let mut phase = Phase::Sweep;
        let mut highest_met: Option<f64> = None;
        let mut lowest_missed: Option<f64> = None;
        let mut confirmed = 0;
        let mut step_downs = 0;
        let mut rate = self.round(self.start);
        // Replays the probes: each moves the state as it did when it ran.
        for p in probes {
            if p.client_bound {
                return Next::Done(Found::ClientBound {
                    rate: highest_met.unwrap_or(0.0),
                });
            }
            if p.met {
                highest_met = Some(highest_met.map_or(p.rate, |h| h.max(p.rate)));
            } else {
                lowest_missed = Some(lowest_missed.map_or(p.rate, |l| l.min(p.rate)));
            }
            match phase {
                Phase::Sweep => match (highest_met, lowest_missed) {
                    (Some(lo), Some(hi)) if lo < hi => phase = Phase::Bisect { lo, hi },
                    (Some(_), None) => {
                        let up = self.round(p.rate * self.factor);
                        if up <= p.rate {
                            return Next::Done(Found::Above { rate: p.rate });
                        }
                        rate = up;
                    }
                    _ => {
                        let down = self.round(p.rate / self.factor);
                        if down >= p.rate {
                            return Next::Done(Found::Below { rate: p.rate });
                        }
                        rate = down;
                    }
                },
                Phase::Bisect { lo, hi } => {
                    phase = if p.met {
                        Phase::Bisect { lo: p.rate, hi }
                    } else {
                        Phase::Bisect { lo, hi: p.rate }
                    };
                }
                Phase::Confirm { rate: c } => {
                    if p.met {
                        confirmed += 1;
                        if confirmed >= self.repeats {
                            return Next::Done(Found::Capacity { rate: c });
                        }
                    } else {
                        step_downs += 1;
                        confirmed = 0;
                        let down = self.round(c * (1.0 - self.resolution));
                        if step_downs > STEP_DOWNS || down >= c {
                            return Next::Done(Found::Unconfirmed { rate: c });
                        }
                        phase = Phase::Confirm { rate: down };
                    }
                }
            }
            if let Phase::Bisect { lo, hi } = phase {
                let mid = self.round((lo + hi) / 2.0);
                if (hi - lo) <= self.resolution * lo || mid <= lo || mid >= hi {
                    phase = Phase::Confirm { rate: lo };
                } else {
                    rate = mid;
                }
            }
            if let Phase::Confirm { rate: c } = phase {
                if self.repeats == 0 {
                    return Next::Done(Found::Capacity { rate: c });
                }
                rate = c;
            }
        }
        Next::Try { rate, phase }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a simulated server that meets the objective up to `knee` and
    /// misses it above, its client bound above `client_limit`; returns what it found and the
    /// probes it made.
    fn simulate(s: &Search, knee: f64, client_limit: f64) -> (Found, Vec<Probe>) {
        let mut probes = Vec::new();
        // Bounded: a search of these settings needs a few dozen probes.
        for _ in 0..200 {
            match s.next(&probes) {
                Next::Done(f) => return (f, probes),
                Next::Try { rate, .. } => probes.push(Probe {
                    rate,
                    met: rate <= knee,
                    client_bound: rate > client_limit,
                }),
            }
        }
        panic!("the search did not end: {probes:?}");
    }

    #[test]
    fn the_search_finds_a_latency_jump_within_the_resolution() {
        let s = Search::default();
        for knee in [37.0, 999.0, 1000.0, 4_321.0, 5_000.0, 47_000.0, 123_456.0] {
            let (found, probes) = simulate(&s, knee, f64::INFINITY);
            let Found::Capacity { rate } = found else {
                panic!("knee {knee}: {found:?}");
            };
            assert!(rate <= knee, "knee {knee}: found {rate}, above it");
            assert!(
                rate >= knee * (1.0 - s.resolution) - 1.0,
                "knee {knee}: found {rate}, more than the resolution below it"
            );
            // The last probes are the confirmation's, all at the rate found.
            let tail = &probes[probes.len() - s.repeats..];
            assert!(tail.iter().all(|p| p.rate == rate && p.met), "{tail:?}");
            assert!(probes.len() < 40, "knee {knee}: {} probes", probes.len());
        }
    }

    #[test]
    fn a_confirmation_that_misses_steps_down() {
        let s = Search::default();
        // Meets up to 5000, but the first probe at 4960 and above after the bracket misses:
        // a server whose knee is noisy.
        let mut probes: Vec<Probe> = Vec::new();
        let mut missed_once = false;
        for _ in 0..100 {
            match s.next(&probes) {
                Next::Done(f) => {
                    let Found::Capacity { rate } = f else {
                        panic!("{f:?}")
                    };
                    assert!(rate < 5000.0 && rate > 4700.0, "{rate}");
                    assert!(missed_once);
                    return;
                }
                Next::Try { rate, phase } => {
                    let noisy = matches!(phase, Phase::Confirm { .. }) && !missed_once;
                    missed_once |= noisy;
                    probes.push(Probe {
                        rate,
                        met: rate <= 5000.0 && !noisy,
                        client_bound: false,
                    });
                }
            }
        }
        panic!("no end");
    }

    #[test]
    fn a_client_bound_probe_ends_the_search_at_least_at_the_last_rate_met() {
        let (found, _) = simulate(&Search::default(), 100_000.0, 20_000.0);
        assert_eq!(found, Found::ClientBound { rate: 16_000.0 });
    }

    #[test]
    fn the_edges_of_the_range_are_said() {
        let s = Search::default();
        assert_eq!(
            simulate(&s, 1.0, f64::INFINITY).0,
            Found::Below { rate: 10.0 }
        );
        let (found, _) = simulate(&s, f64::INFINITY, f64::INFINITY);
        assert_eq!(found, Found::Above { rate: 10_000_000.0 });
    }

    #[test]
    fn sustained_allows_the_noise_of_poisson_arrivals_only() {
        assert!(sustained(10_000.0, 9_950.0, 1.0, false));
        assert!(!sustained(10_000.0, 9_850.0, 1.0, false));
        // 10,000 Poisson arrivals: a standard deviation of 1%, three of them allowed.
        assert!(sustained(10_000.0, 9_750.0, 1.0, true));
        assert!(!sustained(10_000.0, 9_650.0, 1.0, true));
        // Many arrivals: back to 1%.
        assert!(!sustained(1_000_000.0, 985_000.0, 1.0, true));
    }

    #[test]
    fn a_miss_is_the_clients_only_where_its_own_delay_explains_it() {
        // The client released messages 3 ms late against a 5 ms objective: it cannot measure
        // it, whatever the server did.
        assert!(client_explains_miss(6000.0, 3000.0, 5000.0));
        assert!(client_explains_miss(9000.0, 2500.0, 5000.0));
        // 1.5 ms of send delay is the host's jitter, present at every rate: a close miss is
        // still the server's.
        assert!(!client_explains_miss(6000.0, 1500.0, 5000.0));
        assert!(!client_explains_miss(9000.0, 2000.0, 5000.0));
        assert!(!client_explains_miss(9000.0, 0.0, 5000.0));
        // Latency within the limit: the miss was something else (errors, the rate).
        assert!(!client_explains_miss(4000.0, 1000.0, 5000.0));
        assert_eq!(loadgen_percentile("p95"), "p99");
        assert_eq!(loadgen_percentile("p99.9"), "p99_9");
        for p in PERCENTILES {
            assert!(!loadgen_percentile(p).contains('.'), "{p}");
        }
    }

    #[test]
    fn objectives_parse() {
        let slo: Slo = "p99=5ms".parse().unwrap();
        assert_eq!(slo.percentile, "p99");
        assert_eq!(slo.limit_us, 5000.0);
        assert_eq!(slo.to_string(), "p99=5ms");
        assert_eq!("p99.9=800us".parse::<Slo>().unwrap().limit_us, 800.0);
        assert_eq!("P50=1.5s".parse::<Slo>().unwrap().limit_us, 1_500_000.0);
        assert_eq!(
            "p99.9=250µs".parse::<Slo>().unwrap().to_string(),
            "p99.9=250us"
        );
    }

    #[test]
    fn bad_objectives_are_refused_with_a_reason() {
        for (bad, says) in [
            ("p99", "PERCENTILE=TIME"),
            ("p98=5ms", "not a percentile"),
            ("latency=5ms", "not a percentile"),
            ("p99=5", "no unit"),
            ("p99=5min", "not a unit"),
            ("p99=0ms", "not a positive time"),
            ("p99=-3ms", "not a positive time"),
            ("p99=ms", "not a positive time"),
            ("p99=1.2.3ms", "not a positive time"),
        ] {
            let e = bad.parse::<Slo>().expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
