//! The verdicts on synthetic runs beyond the model they fit: outliers, noise that only adds
//! (an exponential added to the log, as a shared host adds work and never takes it away), one
//! server disturbed in one round, and one server three times noisier than the rest, at three,
//! eight and sixteen servers. Each case has a server 10% (or 5%) dearer than the reference and
//! the others equal to it, and asserts both sides: the equal servers draw a verdict at most
//! [`most_false`] of the time, and the dearer one is found at least a stated share of the time
//! (an estimator that never speaks fails). `docs/VERDICTS.md` quotes each case's figures, and
//! [`super::quoted`] checks them.

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

use super::{Estimator, drawn, method, most_false, normal, quoted};
use crate::record::verdict::{self, Estimate};

/// Runs a case: a rate near 5% is known to ±0.34% (one standard deviation).
pub(super) const RUNS: usize = 4_000;

/// What a run's log value has besides its server's cost and the round's drift (3%).
#[derive(Debug, Clone, Copy)]
pub(super) enum Noise {
    /// Normal, σ 2% (three times that for the noisy server): the model.
    Model,
    /// The model's, and one run in forty 30% dearer.
    Outliers,
    /// Only adds: an exponential of mean 2% (three times that for the noisy server).
    OnlyAdds,
    /// The model's, and one server (drawn) 20% dearer in one round (drawn).
    Disturbed,
}

/// A column: `servers` servers, server 0 the reference, server 1 dearer by `dearer`, server 2
/// `noisier` times as noisy, the rest equal.
#[derive(Debug, Clone, Copy)]
pub(super) struct Case {
    servers: usize,
    noise: Noise,
    noisier: f64,
    dearer: f64,
}

/// How often, over `runs` runs of five drawn rounds, a verdict fell on an equal server, and
/// how often on the dearer one.
pub(super) fn rates(seed: u64, c: Case, estimate: Estimator, runs: usize) -> (f64, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut false_runs, mut found) = (0usize, 0usize);
    for _ in 0..runs {
        let rounds = drawn(c.servers, 5, &mut rng);
        let disturbed = (
            rng.random_range(0..c.servers),
            rng.random_range(0..rounds.len()),
        );
        let mut values = vec![vec![None; rounds.len()]; c.servers];
        for (k, row) in rounds.iter().enumerate() {
            let drift = 0.03 * normal(&mut rng);
            for &s in row {
                let scale = if s == 2 { 0.02 * c.noisier } else { 0.02 };
                let noise = match c.noise {
                    Noise::OnlyAdds => -scale * (1.0 - rng.random::<f64>()).ln(),
                    _ => scale * normal(&mut rng),
                };
                let extra = match c.noise {
                    Noise::Outliers if rng.random::<f64>() < 1.0 / 40.0 => 1.3f64.ln(),
                    Noise::Disturbed if (s, k) == disturbed => 1.2f64.ln(),
                    _ => 0.0,
                };
                let cost = if s == 1 { 1.0 + c.dearer } else { 1.0 };
                values[s][k] = Some((cost.ln() + drift + noise + extra).exp());
            }
        }
        let v = verdict::family(&estimate(&values));
        let said = |s: usize| v[s - 1].is_some_and(|v| v.differs);
        found += usize::from(said(1));
        false_runs += usize::from((2..c.servers).any(said));
    }
    (false_runs as f64 / runs as f64, found as f64 / runs as f64)
}

/// Each case's least share found: five to seven standard deviations (about 0.7% each at 4,000
/// runs) under what it measures (`docs/VERDICTS.md`), so that an estimator that speaks less
/// often fails. Server 1 is 10% dearer (5% where one server is noisier, at three).
const CASES: [(&str, Case, f64); 13] = [
    ("three, one noisier", case(3, Noise::Model, 3.0, 0.05), 0.6),
    ("three, outliers", case(3, Noise::Outliers, 1.0, 0.10), 0.73),
    (
        "three, only adds",
        case(3, Noise::OnlyAdds, 1.0, 0.10),
        0.95,
    ),
    (
        "three, one disturbed",
        case(3, Noise::Disturbed, 1.0, 0.10),
        0.42,
    ),
    ("four, one noisier", case(4, Noise::Model, 3.0, 0.10), 0.93),
    ("eight, one noisier", case(8, Noise::Model, 3.0, 0.10), 0.95),
    ("eight, outliers", case(8, Noise::Outliers, 1.0, 0.10), 0.68),
    ("eight, only adds", case(8, Noise::OnlyAdds, 1.0, 0.10), 0.9),
    (
        "eight, one disturbed",
        case(8, Noise::Disturbed, 1.0, 0.10),
        0.69,
    ),
    (
        "sixteen, one noisier",
        case(16, Noise::Model, 3.0, 0.10),
        0.93,
    ),
    (
        "sixteen, outliers",
        case(16, Noise::Outliers, 1.0, 0.10),
        0.66,
    ),
    (
        "sixteen, only adds",
        case(16, Noise::OnlyAdds, 1.0, 0.10),
        0.85,
    ),
    (
        "sixteen, one disturbed",
        case(16, Noise::Disturbed, 1.0, 0.10),
        0.79,
    ),
];

pub(super) const fn case(servers: usize, noise: Noise, noisier: f64, dearer: f64) -> Case {
    Case {
        servers,
        noise,
        noisier,
        dearer,
    }
}

/// One test per count of servers, each its four kinds of noise: the method's rates, asserted,
/// and at three servers (where the method changed) the variance of before beside them
/// ([`mixed`]), all as the docs quote them.
fn check(servers: usize, seed: u64) {
    let cases = CASES
        .iter()
        .enumerate()
        .filter(|(_, c)| c.1.servers == servers);
    for (i, (name, c, least)) in cases {
        let (false_rate, found) = rates(seed + i as u64, *c, method, RUNS);
        let before = (servers == 3).then(|| rates(seed + i as u64, *c, mixed, RUNS));
        eprintln!("{name}: false verdicts {false_rate:.4}, found {found:.4}; before {before:.4?}");
        let bound = most_false(RUNS, servers - 2, servers - 1);
        assert!(false_rate <= bound, "{name}: {false_rate} > {bound}");
        assert!(found >= *least, "{name}: found {found}");
        let (b0, b1) = before.unzip();
        quoted(name, &[Some(false_rate), Some(found), b0, b1], RUNS);
    }
}

#[test]
fn three_servers_beyond_the_model() {
    check(3, 0x5eed_0300);
}

#[test]
fn four_servers_one_noisier() {
    // Where the variance of four servers and more is most biased by one noisier server (its
    // own read 0.78 of what it is, a quiet one's 1.67 times).
    check(4, 0x5eed_0400);
}

#[test]
fn eight_servers_beyond_the_model() {
    check(8, 0x5eed_0800);
}

#[test]
fn sixteen_servers_beyond_the_model() {
    check(16, 0x5eed_1600);
}

/// The per-server variance before Shukla's: `S_g · G/(G−1)` over K − 1, each with
/// `(K−1)(G−1)/G` degrees of freedom, unbiased only where the servers are alike.
fn mixed(values: &[Vec<Option<f64>>]) -> Vec<Option<Estimate>> {
    let y: Vec<Vec<f64>> = values
        .iter()
        .map(|s| s.iter().map(|v| v.unwrap_or(1.0).ln()).collect())
        .collect();
    let (g, k) = (y.len() as f64, y[0].len());
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let rows: Vec<f64> = y.iter().map(|r| mean(r)).collect();
    let cols: Vec<f64> = (0..k)
        .map(|j| mean(&y.iter().map(|r| r[j]).collect::<Vec<_>>()))
        .collect();
    let grand = mean(&rows);
    let n = k as f64 - 1.0;
    let var: Vec<f64> = y
        .iter()
        .zip(&rows)
        .map(|(r, m)| {
            let ss: f64 = (0..k).map(|j| (r[j] - m - cols[j] + grand).powi(2)).sum();
            ss / n * g / (g - 1.0) / k as f64
        })
        .collect();
    let d = n * (g - 1.0) / g;
    (1..y.len())
        .map(|i| {
            let v = var[0] + var[i];
            Some(Estimate {
                log_ratio: rows[i] - rows[0],
                var: v,
                df: v * v / ((var[0].powi(2) + var[i].powi(2)) / d),
                n: k,
            })
        })
        .collect()
}

#[test]
fn with_three_servers_one_noisy_the_quiet_ones_keep_their_power() {
    // The case the variance mixed of every server's noise got wrong: the quiet servers'
    // variance 2.3 times too large, a difference of 5% found far less often than it could.
    let c = CASES[0].1;
    let (_, before) = rates(0x5eed_0300, c, mixed, RUNS);
    let (_, now) = rates(0x5eed_0300, c, method, RUNS);
    assert!(now > before + 0.2, "Shukla's {now}, the mixed {before}");
}
