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
/// is read off a repeat. The tail's, read off each repeat's histogram, are [`TAIL_METRICS`].
pub(crate) const PAIRED_METRICS: [(&str, Reading); 2] = [
    ("throughput_per_sec", |m| Some(m.throughput_per_sec)),
    ("cpu_us_per_req", |m| m.cost.cpu_us_per_req),
];

/// The tail percentiles the report compares round by round, as the summary names them: a
/// repeat's [`Tail`] holds them in this order.
pub(crate) const TAIL_METRICS: [&str; 2] = ["p99_us", "p99_9_us"];

/// One repeat's p99 and p99.9 in µs (in the order of [`TAIL_METRICS`]), `None` where it has
/// no such figure (an outside client reports no p99.9; a histogram may be empty).
pub(crate) type Tail = [Option<f64>; 2];

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

/// For each of [`TAIL_METRICS`], its value in each round: `tails` holds the successful
/// repeats' tails in round order (one for each `Ok` of `outcomes`), and a failed round is
/// `None`. Nothing where no repeat has the metric.
pub(crate) fn tails_per_round<T>(
    outcomes: &[Result<T, Failure>],
    tails: &[Tail],
) -> BTreeMap<String, Vec<Option<f64>>> {
    let mut next = tails.iter();
    let by_round: Vec<Tail> = outcomes
        .iter()
        .map(|o| match o {
            Ok(_) => next.next().copied().unwrap_or([None; 2]),
            Err(_) => [None; 2],
        })
        .collect();
    TAIL_METRICS
        .iter()
        .enumerate()
        .map(|(i, &metric)| {
            let each: Vec<Option<f64>> = by_round.iter().map(|t| t[i]).collect();
            (metric.to_string(), each)
        })
        .filter(|(_, each)| each.iter().any(Option::is_some))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_round_keeps_its_place_in_the_tails() {
        let ok = || Ok(());
        let failed = || Err(Failure::Interrupted);
        let outcomes = vec![ok(), failed(), ok()];
        let tails = [[Some(300.0), Some(900.0)], [Some(310.0), None]];
        let by_round = tails_per_round(&outcomes, &tails);
        assert_eq!(by_round["p99_us"], vec![Some(300.0), None, Some(310.0)]);
        assert_eq!(by_round["p99_9_us"], vec![Some(900.0), None, None]);
        // An outside client's repeats have a p99 and no p99.9: that metric is left out.
        let by_round = tails_per_round(&outcomes, &[[Some(1.0), None], [Some(2.0), None]]);
        assert!(!by_round.contains_key("p99_9_us"), "{by_round:?}");
    }
}
