//! The capacity suite's decisions, as pure functions of what was measured so far: the latency
//! objective (`--slo p99=5ms`), whether a probe meets it, and which rate to try next. Given the
//! same probes it always asks for the same next rate, so that `--resume` walks a stopped
//! search again from its saved probes and carries on where it stopped.
//!
//! A rate is judged by a **trial**, not a probe: a probe that meets the objective decides it,
//! one that misses is run again, and the rate counts as missed only when [`MISSES`] (2) of up
//! to three probes missed. A window of noise on the host (a scheduler hiccup, a neighbour)
//! makes a probe miss now and then; alone it never lowers the bracket. The search, per server
//! and workload, trial by trial:
//!
//! 1. **sweep**: from [`Search::start`], rates a factor [`Search::factor`] apart, up while the
//!    trials meet the objective and down while none has; the first miss above a hit (or the
//!    first hit below a miss) brackets the capacity;
//! 2. **bisect**: the bracket halved until it is narrower than [`Search::resolution`] of its
//!    lower end;
//! 3. **retest**: the bracket's upper end tried again; should it meet the objective this time,
//!    the bracket moves up (to the next miss above it, or the sweep carries on upwards);
//! 4. **confirm**: [`Search::confirmations`] more trials at the rate found; every one must meet
//!    the objective, else the rate steps down by the resolution and is confirmed again.
//!
//! A probe whose schedule the load generator did not keep (its self-check failed) is the
//! client's, met or missed: it says nothing of the server and is run again, up to
//! [`CLIENT_RETRIES`] times in a row; only then does the search end, client-bound, at least at
//! the highest rate met. The capacity's interval comes from several searches
//! (`record::capacity`), not from one.
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

/// What the search needs of one probe: a run of the server at an offered rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Probe {
    /// The rate offered, per second.
    pub(crate) rate: f64,
    /// The server sustained it (the achieved rate within the tolerance of the offered, no
    /// error) and its latency met the objective.
    pub(crate) met: bool,
    /// The load generator kept its schedule (its self-check passed), so the probe measured
    /// the server. One that did not is the client's, met or missed: it says nothing of the
    /// server and is run again (up to [`CLIENT_RETRIES`] times in a row).
    pub(crate) schedule_ok: bool,
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
    /// Trials at the rate found, after its bracket's upper end missed again, that must all
    /// meet the objective.
    pub(crate) confirmations: usize,
    /// How many of a trial's probes must miss for its rate to count as missed ([`MISSES`]).
    pub(crate) misses: usize,
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
            confirmations: 2,
            misses: MISSES,
            min_rate: 10.0,
            max_rate: 10_000_000.0,
        }
    }
}

/// Where a search stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase {
    Sweep,
    Bisect {
        lo: f64,
        hi: f64,
    },
    /// The bracket is narrow: its upper end, a miss, is tried once more before the lower end
    /// is confirmed. Should it meet the objective this time, the bracket moves up.
    Retest {
        lo: f64,
        hi: f64,
    },
    Confirm {
        rate: f64,
    },
}

/// Why a rate is probed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Attempt {
    /// A new trial of the rate.
    First,
    /// Its last probe missed: a miss counts once [`MISSES`] probes of the trial missed.
    AfterMiss,
    /// The client did not keep its schedule on the last probe: it is run again.
    AfterClient,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Next {
    /// Probe this rate.
    Try {
        rate: f64,
        phase: Phase,
        attempt: Attempt,
    },
    /// The search is over.
    Done(Found),
}

/// What a search found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub(crate) enum Found {
    /// The highest rate that met the objective, confirmed.
    Capacity { rate: f64 },
    /// The client did not keep its schedule at a rate, [`CLIENT_RETRIES`] retries running:
    /// the server met the objective at `rate` at least (0 when no rate met it before).
    ClientBound { rate: f64 },
    /// Not even the least rate met the objective.
    Below { rate: f64 },
    /// The highest rate tried met it: the capacity is above it.
    Above { rate: f64 },
    /// The bracket was found but no rate in it was confirmed within the step-downs allowed.
    Unconfirmed { rate: f64 },
}

impl Found {
    /// What `capacity.csv`'s `result` calls it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Found::Capacity { .. } => "capacity",
            Found::ClientBound { .. } => "client-bound",
            Found::Below { .. } => "below",
            Found::Above { .. } => "above",
            Found::Unconfirmed { .. } => "unconfirmed",
        }
    }

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

/// How many of a trial's probes must miss for the rate to count as missed: a trial is a vote
/// of up to `2 × MISSES - 1` probes, decided as soon as the hits outnumber the misses or the
/// misses reach this. One miss alone, the host's noise as often as the server, never lowers
/// the bracket.
pub(crate) const MISSES: usize = 2;

/// How many times in a row a probe whose schedule the client did not keep is run again
/// before the search ends, client-bound.
pub(crate) const CLIENT_RETRIES: usize = 3;

/// How many times a failed confirmation may step the rate down before the search gives up.
const STEP_DOWNS: usize = 5;

/// A search replayed up to now: the rate to try, its phase, the trials decided so far and the
/// one under way.
#[derive(Debug)]
struct State {
    phase: Phase,
    rate: f64,
    /// The rates whose trials met, and missed, in the order they were decided.
    met: Vec<f64>,
    missed: Vec<f64>,
    /// The trial under way at `rate`: its hits and misses, and the client's failures in a row.
    hits: usize,
    misses: usize,
    client_failures: usize,
    /// Trials met at the rate being confirmed, and step-downs so far.
    confirmed: usize,
    step_downs: usize,
}

impl State {
    fn highest_met(&self) -> Option<f64> {
        self.met.iter().copied().reduce(f64::max)
    }

    /// The bracket's upper end: the least rate missed above `lo` (above every rate, without
    /// one).
    fn lowest_missed_above(&self, lo: Option<f64>) -> Option<f64> {
        let lo = lo.unwrap_or(f64::NEG_INFINITY);
        self.missed
            .iter()
            .copied()
            .filter(|&m| m > lo)
            .reduce(f64::min)
    }

    fn attempt(&self) -> Attempt {
        if self.client_failures > 0 {
            Attempt::AfterClient
        } else if self.misses > 0 {
            Attempt::AfterMiss
        } else {
            Attempt::First
        }
    }
}

/// The sweep's factor in a search run again from a capacity found: close steps, since the
/// knee is near.
pub(crate) const AGAIN_FACTOR: f64 = 1.1;

impl Search {
    /// `self` run again from the capacity `found` by an earlier search: its sweep starts
    /// there, in steps of [`AGAIN_FACTOR`], so that it brackets the knee in a few probes (12
    /// or so against about 19 from afar) yet finds it afresh, up or down.
    pub(crate) fn again(&self, found: f64) -> Search {
        Search {
            start: found,
            factor: AGAIN_FACTOR,
            ..*self
        }
    }

    /// The rate as probes are run and named: whole messages per second.
    fn round(&self, r: f64) -> f64 {
        r.clamp(self.min_rate, self.max_rate).round().max(1.0)
    }

    /// The next step after `probes`, the probes of this search so far in the order they ran.
    /// They are replayed: each moves the state as it did when it ran, so the same probes
    /// always lead to the same next step.
    pub(crate) fn next(&self, probes: &[Probe]) -> Next {
        let mut st = State {
            phase: Phase::Sweep,
            rate: self.round(self.start),
            met: Vec::new(),
            missed: Vec::new(),
            hits: 0,
            misses: 0,
            client_failures: 0,
            confirmed: 0,
            step_downs: 0,
        };
        for p in probes {
            if !p.schedule_ok {
                st.client_failures += 1;
                if st.client_failures > CLIENT_RETRIES {
                    return Next::Done(Found::ClientBound {
                        rate: st.highest_met().unwrap_or(0.0),
                    });
                }
                continue;
            }
            st.client_failures = 0;
            if p.met {
                st.hits += 1;
            } else {
                st.misses += 1;
            }
            let met = if st.misses >= self.misses.max(1) {
                false
            } else if st.hits > st.misses {
                true
            } else {
                continue;
            };
            (st.hits, st.misses) = (0, 0);
            if let Some(found) = self.decided(&mut st, met) {
                return Next::Done(found);
            }
        }
        Next::Try {
            rate: st.rate,
            phase: st.phase,
            attempt: st.attempt(),
        }
    }

    /// Moves the search on from a trial decided at `st.rate`; what it found when it ends.
    fn decided(&self, st: &mut State, met: bool) -> Option<Found> {
        let r = st.rate;
        if met {
            st.met.push(r);
        } else {
            st.missed.push(r);
        }
        match st.phase {
            Phase::Sweep => self.sweep(st),
            Phase::Bisect { lo, hi } => {
                st.phase = if met {
                    Phase::Bisect { lo: r, hi }
                } else {
                    Phase::Bisect { lo, hi: r }
                };
                self.narrow(st)
            }
            // The upper end missed again: the bracket holds.
            Phase::Retest { lo, .. } if !met => self.confirm(st, lo),
            // It met this time: the first miss was noise, and the bracket moves up.
            Phase::Retest { .. } => match st.lowest_missed_above(Some(r)) {
                Some(hi) => {
                    st.phase = Phase::Bisect { lo: r, hi };
                    self.narrow(st)
                }
                None => {
                    st.phase = Phase::Sweep;
                    self.sweep(st)
                }
            },
            Phase::Confirm { rate: c } if met => {
                st.confirmed += 1;
                (st.confirmed >= self.confirmations).then_some(Found::Capacity { rate: c })
            }
            Phase::Confirm { rate: c } => {
                st.step_downs += 1;
                let down = self.round(c * (1.0 - self.resolution));
                if st.step_downs > STEP_DOWNS || down >= c {
                    return Some(Found::Unconfirmed { rate: c });
                }
                self.confirm(st, down)
            }
        }
    }

    /// The sweep: up by [`Search::factor`] from the highest rate met while none missed above
    /// it, down from the least missed while none met; a miss above a hit brackets the knee.
    fn sweep(&self, st: &mut State) -> Option<Found> {
        let lo = st.highest_met();
        match (lo, st.lowest_missed_above(lo)) {
            (Some(lo), Some(hi)) => {
                st.phase = Phase::Bisect { lo, hi };
                self.narrow(st)
            }
            (Some(lo), None) => {
                let up = self.round(lo * self.factor);
                if up <= lo {
                    return Some(Found::Above { rate: lo });
                }
                st.rate = up;
                None
            }
            (None, least) => {
                let least = least.unwrap_or(st.rate);
                let down = self.round(least / self.factor);
                if down >= least {
                    return Some(Found::Below { rate: least });
                }
                st.rate = down;
                None
            }
        }
    }

    /// The bisection: the bracket halved until narrower than [`Search::resolution`]; then its
    /// upper end tried again (unless it has missed twice already), then its lower end
    /// confirmed.
    fn narrow(&self, st: &mut State) -> Option<Found> {
        let Phase::Bisect { lo, hi } = st.phase else {
            return None;
        };
        let mid = self.round((lo + hi) / 2.0);
        if (hi - lo) > self.resolution * lo && mid > lo && mid < hi {
            st.rate = mid;
            return None;
        }
        if st.missed.iter().filter(|&&m| m == hi).count() >= 2 {
            return self.confirm(st, lo);
        }
        st.phase = Phase::Retest { lo, hi };
        st.rate = hi;
        None
    }

    /// Starts confirming `rate`.
    fn confirm(&self, st: &mut State, rate: f64) -> Option<Found> {
        st.phase = Phase::Confirm { rate };
        st.confirmed = 0;
        st.rate = rate;
        (self.confirmations == 0).then_some(Found::Capacity { rate })
    }
}

#[cfg(test)]
mod tests;
