//! The gate of `cargo xtask compare --fail-above PCT`: every point the two runs share, judged
//! on one metric by one rule ([`RULE`], which `--help`, the comparison's header and
//! docs/RING.md quote), with three ends: pass (0), fail (1) and inconclusive
//! ([`INCONCLUSIVE`]), never a pass that judged nothing.
//!
//! - **What is judged.** A (suite, server, point) both runs measured, on `--metric`, where
//!   neither row is blocked (`verdict::blocked`: failed, ‡, † for throughput, ◊ for p99) and
//!   each has at least [`MIN_REPEATS`] repeats. Every other shared point is *unjudged* and
//!   named, with why; one is enough to make the gate inconclusive where nothing failed. A point
//!   A measured that B failed or left out fails the gate: a build whose server no longer runs
//!   does not pass.
//! - **The control.** Two runs are two moments of the machine, and what shifted between them
//!   is in every ratio. Where both runs carry an unchanged server at the point (`--control`,
//!   else the suite's own reference: floor-epoll, redis, nginx), each server's change B/A is
//!   set against the control's (the ratio of ratios, the two Welch estimates' difference), so a
//!   machine that moved as a whole does not fail the gate. The control itself is reported, not
//!   judged. Where there is none, the header says so and the judgement is widened by a
//!   machine drift of [`DRIFT`] each run.
//! - **The family.** Every judged comparison of the gate is one family (Bonferroni across the
//!   points and servers), so the gate holds its false failures to 5% on equal runs, whatever
//!   the count of points.
//!
//! It may call the record layer (rows, verdicts) and the plan layer's suites.

use serde::Serialize;

use super::Metric;
use crate::plan::suites::Suite;
use crate::record::row::Row;
use crate::record::verdict::{self, Estimate};

/// The gate's one rule, as `--help`, the header and docs/RING.md say it.
pub(crate) const RULE: &str = "the gate fails when a point of B is worse than A's by more \
than PCT with 95% confidence: the whole of its simultaneous interval (a family of every point \
the gate judges; against the control's change where both runs carry one) lies above 1 + PCT \
(for throughput, below 1 − PCT); or when B failed or left out a point A measured. It is \
inconclusive when, nothing failing, a point both runs share could not be judged (fewer than 3 \
repeats, failed in A, ‡ disturbed, † client-bound for throughput, ◊ off schedule for p99).";

/// The exit status of an inconclusive gate.
pub(crate) const INCONCLUSIVE: u8 = 3;

/// Repeats a run needs at a point for the gate to judge it: below that Welch's t has no or
/// one degree of freedom and Bonferroni's cut-off is out of reach.
pub(crate) const MIN_REPEATS: usize = 3;

/// The standard deviation of the log of a run's level where no control measures it: how far
/// the whole machine moves between two runs minutes apart. Two runs of one binary on the
/// 2-CPU EPYC guest read 1.10–1.14× at one point with both servers moving together (issue 59):
/// a shift of that size is about two of these.
pub(crate) const DRIFT: f64 = 0.05;

/// What became of a point at the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// Judged, and not worse by more than PCT with the gate's confidence.
    Pass,
    /// Judged worse by more than PCT, or failed or left out in B.
    Fail,
    /// Shared by both runs but not judged: `why` says why.
    Unjudged,
    /// The control: its change is taken as the machine's.
    Control,
}

/// One point at the gate, as `compare --json` writes it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Decision {
    pub(crate) suite: String,
    pub(crate) server: String,
    pub(crate) point: String,
    pub(crate) label: String,
    pub(crate) status: Status,
    /// B / A (against the control's B / A where `control` is set), its simultaneous interval
    /// and Bonferroni's adjusted p, where it was judged (or is the control).
    pub(crate) ratio: Option<f64>,
    pub(crate) low: Option<f64>,
    pub(crate) high: Option<f64>,
    pub(crate) p: Option<f64>,
    /// The server whose change this one was set against.
    pub(crate) control: Option<String>,
    /// Why it was not judged, or why it failed without a ratio.
    pub(crate) why: Option<String>,
    pub(crate) disturbed: [bool; 2],
    pub(crate) client_bound: [bool; 2],
    pub(crate) schedule_missed: [bool; 2],
}

/// The gate's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Outcome {
    Pass,
    Fail,
    Inconclusive,
}

impl Outcome {
    /// The exit status it ends `compare` with.
    pub(crate) fn status(self) -> u8 {
        match self {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::Inconclusive => INCONCLUSIVE,
        }
    }
}

/// Every decision of the gate and its end, as `compare --json` writes it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Gate {
    pub(crate) metric: &'static str,
    pub(crate) fail_above_pct: f64,
    pub(crate) rule: &'static str,
    pub(crate) outcome: Outcome,
    pub(crate) exit_status: u8,
    /// Comparisons in the gate's family (Bonferroni's m).
    pub(crate) family: usize,
    /// The drift assumed where no control was at hand, as a log standard deviation a run.
    pub(crate) drift_without_control: f64,
    pub(crate) decisions: Vec<Decision>,
}

impl Gate {
    /// The decisions with `status`.
    pub(crate) fn with(&self, status: Status) -> impl Iterator<Item = &Decision> {
        self.decisions.iter().filter(move |d| d.status == status)
    }

    /// What the header says of the controls: which was used, and where there was none.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut controls: Vec<&str> = self.with(Status::Control).map(|d| &*d.server).collect();
        controls.dedup();
        let bare = self
            .decisions
            .iter()
            .filter(|d| d.status != Status::Control && d.ratio.is_some() && d.control.is_none())
            .count();
        let mut out = vec![format!(
            "**Gate** (`--fail-above {}%`, {}): {RULE}",
            self.fail_above_pct, self.metric
        )];
        if !controls.is_empty() {
            out.push(format!(
                "**Control**: {}, in both runs: each server's change is set against its change at the same point (the ratio of ratios), so a shift of the whole machine between the runs does not fail the gate.",
                controls.join(", ")
            ));
        }
        if bare > 0 {
            out.push(format!(
                "**No control** at {bare} judged point(s): no unchanged server in both runs to measure the machine's shift between them, so the gate widened their intervals by a drift of {:.0}% a run (put the suite's reference, floor-epoll, redis or nginx, in both runs, or name one with `--control`).",
                DRIFT * 100.0
            ));
        }
        out
    }
}

/// The control of `suite` at the gate: `named` (`--control`; `none` for none), else the
/// suite's own reference.
fn control_of(suite: &str, named: Option<&str>) -> Option<String> {
    match named {
        Some("none") => None,
        Some(n) => Some(n.to_string()),
        None => Suite::ALL
            .iter()
            .find(|s| s.name() == suite)
            .and_then(|s| s.own_reference())
            .map(str::to_string),
    }
}

/// Why a pair may not be judged on `metric`, if it may not.
fn unjudged(ra: &Row, rb: &Row, metric: &str) -> Option<String> {
    if ra.ok == 0 {
        return Some("A failed".into());
    }
    for (run, r) in [("A", ra), ("B", rb)] {
        if let Some(why) = verdict::blocked(r, metric) {
            return Some(format!("{why} in {run}"));
        }
    }
    let few = [ra, rb]
        .iter()
        .any(|r| r.repeats_of(metric).len() < MIN_REPEATS);
    few.then(|| format!("fewer than {MIN_REPEATS} repeats"))
}

/// B against A at one pair: Welch's t on the log repeats, `None` where it gives nothing.
fn change(ra: &Row, rb: &Row, metric: &str) -> Option<Estimate> {
    verdict::welch(ra.repeats_of(metric), rb.repeats_of(metric))
}

/// `e` less the control's change `c` (the ratio of ratios); or, with no control, `e` widened
/// by the machine's drift between two runs ([`DRIFT`] a run).
fn controlled(e: Estimate, c: Option<Estimate>) -> Estimate {
    match c {
        Some(c) => {
            let var = e.var + c.var;
            let df = var * var / (e.var * e.var / e.df + c.var * c.var / c.df);
            Estimate {
                log_ratio: e.log_ratio - c.log_ratio,
                var,
                df: if df.is_finite() { df } else { e.df + c.df },
                n: e.n.min(c.n),
            }
        }
        None => Estimate {
            var: e.var + 2.0 * DRIFT * DRIFT,
            ..e
        },
    }
}

/// A decision with nothing judged yet.
fn decision(ra: Option<&Row>, rb: &Row, status: Status, why: Option<String>) -> Decision {
    let both = |f: fn(&Row) -> bool| [ra.is_some_and(f), f(rb)];
    Decision {
        suite: rb.suite.clone(),
        server: rb.server.clone(),
        point: rb.point.clone(),
        label: rb.label.clone(),
        status,
        ratio: None,
        low: None,
        high: None,
        p: None,
        control: None,
        why,
        disturbed: both(Row::disturbed),
        client_bound: both(|r| r.client_bound),
        schedule_missed: both(Row::schedule_missed),
    }
}

/// The index in `rows` of `r`'s twin: the same suite, server and point.
fn twin(r: &Row, rows: &[Row]) -> Option<usize> {
    rows.iter()
        .position(|o| o.suite == r.suite && o.server == r.server && o.point == r.point)
}

/// A's points that B failed or left out: failures, whatever the metric.
fn lost(a: &[Row], b: &[Row]) -> Vec<Decision> {
    let mut out = Vec::new();
    for ra in a.iter().filter(|r| r.ok > 0) {
        match twin(ra, b).map(|j| &b[j]) {
            None => out.push(decision(
                Some(ra),
                ra,
                Status::Fail,
                Some("not in B".into()),
            )),
            Some(rb) if rb.ok == 0 => {
                let why = rb.failure.as_deref().unwrap_or("no repeat succeeded");
                let why = format!("B failed ({why})");
                out.push(decision(Some(ra), rb, Status::Fail, Some(why)));
            }
            Some(_) => {}
        }
    }
    out
}

/// The control's change at `rb`'s point on `metric`, where both runs carry the control
/// judgeable and some other server shares the point: its name and its change.
fn control_at(
    a: &[Row],
    b: &[Row],
    rb: &Row,
    metric: &str,
    named: Option<&str>,
) -> Option<(String, Estimate)> {
    let c = control_of(&rb.suite, named)?;
    let at_point = |r: &&Row| r.suite == rb.suite && r.point == rb.point;
    let cb = b.iter().filter(at_point).find(|r| r.server == c)?;
    let ca = a.iter().filter(at_point).find(|r| r.server == c)?;
    if unjudged(ca, cb, metric).is_some() {
        return None;
    }
    let others = b
        .iter()
        .filter(at_point)
        .any(|r| r.server != c && twin(r, a).is_some());
    others.then_some(())?;
    Some((c, change(ca, cb, metric)?))
}

/// Sets `v`'s ratio, interval and p on `d`.
fn set(d: &mut Decision, v: Option<verdict::Verdict>) {
    (d.ratio, d.low, d.high, d.p) = (
        v.map(|v| v.ratio),
        v.map(|v| v.low),
        v.map(|v| v.high),
        v.map(|v| v.p),
    );
}

/// The points both runs share (B's that did not fail where A ran): each unjudged, the
/// control, or judged, with the estimate of each judged one by its index in the decisions.
fn shared(
    a: &[Row],
    b: &[Row],
    metric: &str,
    named: Option<&str>,
) -> (Vec<Decision>, Vec<(usize, Estimate)>) {
    let mut decisions = Vec::new();
    let mut estimates = Vec::new();
    for rb in b {
        let Some(ra) = twin(rb, a).map(|i| &a[i]) else {
            continue;
        };
        if rb.ok == 0 && ra.ok > 0 {
            continue; // A failure of B's, in `lost`.
        }
        let e = match unjudged(ra, rb, metric) {
            Some(why) => Err(why),
            None => change(ra, rb, metric).ok_or_else(|| "no values to test".to_string()),
        };
        let e = match e {
            Ok(e) => e,
            Err(why) => {
                decisions.push(decision(Some(ra), rb, Status::Unjudged, Some(why)));
                continue;
            }
        };
        let mut d = decision(Some(ra), rb, Status::Pass, None);
        match control_at(a, b, rb, metric, named) {
            Some((c, ce)) if c == rb.server => {
                d.status = Status::Control;
                set(&mut d, verdict::family(&[Some(ce)])[0]);
            }
            Some((c, ce)) => {
                d.control = Some(c);
                estimates.push((decisions.len(), controlled(e, Some(ce))));
            }
            None => estimates.push((decisions.len(), controlled(e, None))),
        }
        decisions.push(d);
    }
    (decisions, estimates)
}

/// The gate on `metric` at `pct` percent, with `named` the control (`--control`).
pub(crate) fn judge(a: &[Row], b: &[Row], metric: Metric, pct: f64, named: Option<&str>) -> Gate {
    let name = metric.of().0;
    let (mut decisions, estimates) = shared(a, b, name, named);
    let family = estimates.len();
    let verdicts = verdict::family(&estimates.iter().map(|(_, e)| Some(*e)).collect::<Vec<_>>());
    for ((i, _), v) in estimates.iter().zip(verdicts) {
        let d = &mut decisions[*i];
        set(d, v);
        // The end of the interval nearest to no change must be beyond PCT.
        let near = if metric == Metric::Throughput {
            d.high
        } else {
            d.low
        };
        if near.is_some_and(|n| metric.worse(n, pct)) {
            d.status = Status::Fail;
        }
    }
    decisions.extend(lost(a, b));
    let has = |s: Status| decisions.iter().any(|d| d.status == s);
    let outcome = if has(Status::Fail) {
        Outcome::Fail
    } else if has(Status::Unjudged) || family == 0 {
        Outcome::Inconclusive
    } else {
        Outcome::Pass
    };
    Gate {
        metric: name,
        fail_above_pct: pct,
        rule: RULE,
        outcome,
        exit_status: outcome.status(),
        family,
        drift_without_control: DRIFT,
        decisions,
    }
}

/// A decision as a line of the gate's end: `quick / reactor / 1 conns: 1.31× [1.20–1.43]
/// (p=0.008) against floor-epoll's change`, or its reason.
pub(crate) fn line(d: &Decision) -> String {
    let at = format!("{} / {} / {}", d.suite, d.server, d.label);
    match (d.ratio, d.low, d.high, d.p) {
        (Some(r), Some(l), Some(h), Some(p)) if d.status != Status::Unjudged => {
            let p = if p < 0.001 {
                "p<0.001".to_string()
            } else {
                format!("p={p:.3}")
            };
            let against = d
                .control
                .as_deref()
                .map(|c| format!(" against {c}'s change"))
                .unwrap_or_default();
            format!("{at}: {r:.2}× [{l:.2}–{h:.2}] ({p}){against}")
        }
        _ => format!("{at}: {}", d.why.as_deref().unwrap_or("no ratio")),
    }
}

#[cfg(test)]
mod tests;
