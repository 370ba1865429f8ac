//! The A/A check of the method, on synthetic runs rather than on a machine: two identical
//! servers whose first run of each round costs 5% more (what a cold page cache or a neighbour
//! that quiets down does to a position), with seeded noise. In the fixed order of old (A B in
//! every round) the statistics give a false verdict in most trials; in the counterbalanced
//! order of `plan::order` about as often as the test's level, or less. And a real 10%
//! difference is still found with 5 repeats.
//!
//! It may call the plan layer's `order` and the record layer's `stats` (it is tests only).

use crate::plan::order;
use crate::record::stats;

/// xorshift64*, so that every run of the tests draws the same values.
struct XorShift(u64);

impl XorShift {
    /// Uniform in (0, 1).
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// How much more the first run of a round costs.
const FIRST_PENALTY: f64 = 0.05;

/// The noise of a run: lognormal with this σ (about 2%, the spread of repeats of CPU per echo
/// on a quiet 2-CPU host).
const NOISE: f64 = 0.02;

/// Trials per case: enough that the rates below are known to a percent or two.
const TRIALS: usize = 2000;

/// Two servers' values by round at one point, the rounds in the order `rounds` gives (each a
/// permutation of 0 and 1): server `s` costs `cost[s]`, `FIRST_PENALTY` more when it runs
/// first, times the noise.
fn simulate(rounds: &[Vec<usize>], cost: [f64; 2], rng: &mut XorShift) -> [Vec<Option<f64>>; 2] {
    let mut values = [vec![None; rounds.len()], vec![None; rounds.len()]];
    for (k, row) in rounds.iter().enumerate() {
        for (pos, &s) in row.iter().enumerate() {
            let position = if pos == 0 { 1.0 + FIRST_PENALTY } else { 1.0 };
            values[s][k] = Some(cost[s] * position * (NOISE * rng.normal()).exp());
        }
    }
    values
}

/// What a trial's statistics said: the Mann-Whitney verdict on the repeats, and the sign
/// test's on the rounds.
#[derive(Debug, Default)]
struct Verdicts {
    mann_whitney: usize,
    sign: usize,
}

/// Runs `TRIALS` points of two servers costing `cost`, trial `t` in the order `order(t)`, and
/// counts the verdicts (p < `stats::ALPHA`) of each test.
fn trials(seed: u64, cost: [f64; 2], order: impl Fn(usize) -> Vec<Vec<usize>>) -> Verdicts {
    let mut rng = XorShift(seed);
    let mut v = Verdicts::default();
    for t in 0..TRIALS {
        let [a, b] = simulate(&order(t), cost, &mut rng);
        let flat = |x: &[Option<f64>]| x.iter().flatten().copied().collect::<Vec<f64>>();
        let p = stats::mann_whitney(&flat(&a), &flat(&b)).unwrap_or(1.0);
        v.mann_whitney += usize::from(p < stats::ALPHA);
        let paired = stats::paired(&a, &b).map_or(1.0, |p| p.p);
        v.sign += usize::from(paired < stats::ALPHA);
    }
    v
}

/// A B in every round, as the sweep ran before the order was counterbalanced.
fn fixed(rounds: usize) -> Vec<Vec<usize>> {
    vec![vec![0, 1]; rounds]
}

/// The share of the trials.
fn rate(count: usize) -> f64 {
    count as f64 / TRIALS as f64
}

#[test]
fn a_position_effect_fakes_verdicts_in_a_fixed_order_but_not_a_counterbalanced_one() {
    // Five repeats, the quick suite's default; the trial is the point (the design relabels
    // the servers from one point to the next, as a run does).
    let same = [10.0, 10.0];
    let old = trials(0x5eed_0001, same, |_| fixed(5));
    let new = trials(0x5eed_0001, same, |t| order::rounds(2, 5, t));
    assert!(
        rate(old.mann_whitney) > 0.6,
        "the fixed order gave a false verdict in only {old:?} of {TRIALS}"
    );
    // The test's level at 5 a side is 8/252 = 3.2% for exchangeable repeats; one server
    // going first 3 times of 5 must not push it far above that.
    let level = stats::false_positive_rate(5, 5);
    assert!(
        rate(new.mann_whitney) <= level + 0.01,
        "counterbalanced: {new:?} of {TRIALS}, level {level}"
    );
    // The sign test cannot reach 0.05 with 5 rounds at all.
    assert_eq!((old.sign, new.sign), (0, 0));
}

#[test]
fn with_six_rounds_the_paired_view_is_fooled_by_a_fixed_order_only() {
    let same = [10.0, 10.0];
    let old = trials(0x5eed_0002, same, |_| fixed(6));
    let new = trials(0x5eed_0002, same, |t| order::rounds(2, 6, t));
    assert!(rate(old.sign) > 0.6, "fixed: {old:?} of {TRIALS}");
    assert!(rate(old.mann_whitney) > 0.6, "fixed: {old:?} of {TRIALS}");
    // Each server first in 3 rounds of 6: the sign test's real size at n = 6 is 1/32.
    assert!(
        rate(new.sign) <= 1.0 / 32.0 + 0.01,
        "counterbalanced: {new:?}"
    );
    assert!(
        rate(new.mann_whitney) <= stats::false_positive_rate(6, 6) + 0.01,
        "counterbalanced: {new:?}"
    );
}

#[test]
fn a_real_ten_percent_difference_is_still_found_with_five_repeats() {
    let apart = [10.0, 11.0];
    let new = trials(0x5eed_0003, apart, |t| order::rounds(2, 5, t));
    assert!(
        rate(new.mann_whitney) > 0.9,
        "a 10% difference was found in only {new:?} of {TRIALS}"
    );
    // And the paired view sees it in (nearly) every round: its median ratio is near 1.10.
    let mut rng = XorShift(0x5eed_0004);
    let [a, b] = simulate(&order::rounds(2, 5, 0), apart, &mut rng);
    let p = stats::paired(&a, &b).unwrap();
    assert!((p.ratio - 1.1).abs() < 0.07, "{p:?}");
}
