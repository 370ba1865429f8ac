//! Each repeat's value kept by its round, for the verdicts' model of a point (server plus
//! round, `record::verdict`): it needs to know which repeats ran in the same round,
//! which the per-repeat lists (failed repeats left out) no longer say.
//!
//! It may call the run layer's `outcome`.

use std::collections::BTreeMap;

use crate::run::outcome::{Failure, Measured};

/// How a metric is read off one repeat.
type Reading = fn(&Measured) -> Option<f64>;

/// The metrics the report compares round by round (those its verdicts are on), and how each
/// is read off a repeat.
pub(crate) const PAIRED_METRICS: [(&str, Reading); 2] = [
    ("throughput_per_sec", |m| Some(m.throughput_per_sec)),
    ("cpu_us_per_req", |m| m.cost.cpu_us_per_req),
];

/// For each of [`PAIRED_METRICS`], its value in each round, `None` where the round failed or
/// gave none. `outcomes[k]` is round `k`'s (the sweep keeps a server's outcomes at a point in
/// round order).
pub(crate) fn per_round(
    outcomes: &[Result<Measured, Failure>],
) -> BTreeMap<String, Vec<Option<f64>>> {
    PAIRED_METRICS
        .iter()
        .map(|&(metric, value)| {
            let each = outcomes
                .iter()
                .map(|o| o.as_ref().ok().and_then(value))
                .collect();
            (metric.to_string(), each)
        })
        .collect()
}
