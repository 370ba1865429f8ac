//! The tail's verdicts on synthetic runs: each repeat's p99 (or p99.9) drawn as a real
//! window's would be, from latencies with a heavy (Pareto) tail, with the machine's drift, the
//! client's own noise and, in one case, now and then a hiccup that stretches one repeat's
//! tail, then tested
//! by the same model and family as CPU per echo (`verdict::against_reference`, on the logs).
//! An A/A column must stay quiet, and a server whose tail is half as long again must be found.
//! `docs/VERDICTS.md` quotes the rates printed here.

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

use super::{FEW, TRIALS, five, method, most_false, normal, quoted};
use crate::record::verdict;

/// What shapes one repeat's tail percentile besides the server.
#[derive(Debug, Clone, Copy)]
struct Tail {
    /// Latencies above the percentile in a window: 100 for p99 of 10,000 echoes (a default
    /// point, 0.5 s at 20,000/s), 10 for p99.9. The fewer, the noisier the percentile.
    above: usize,
    /// The Pareto tail's index: the smaller, the heavier the tail (2: a finite mean, an
    /// infinite variance).
    alpha: f64,
    /// The client's own noise on a repeat: lognormal with this σ.
    client: f64,
    /// How often a repeat has a hiccup, and the most it stretches the tail (uniformly from
    /// 1.5× to this).
    hiccup: f64,
    hiccup_most: f64,
    /// A drift every run of a round shares: lognormal with this σ.
    drift: f64,
}

/// p99 of a default point: a heavy tail, 5% client noise, 10% drift from round to round, no
/// hiccup of the client's (a window where the client was late fails its self-check, and its
/// latency is never judged: `Row::schedule_missed`).
const P99: Tail = Tail {
    above: 100,
    alpha: 2.0,
    client: 0.05,
    hiccup: 0.0,
    hiccup_most: 1.0,
    drift: 0.10,
};

/// p99.9 of the same point: ten echoes above it.
const P99_9: Tail = Tail { above: 10, ..P99 };

/// p99 with a hiccup the self-check does not see (the server's own, a pause of its runtime)
/// in one repeat of twenty, stretching that repeat's tail 1.5–3×.
const HICCUPS: Tail = Tail {
    hiccup: 0.05,
    hiccup_most: 3.0,
    ..P99
};

/// The percentile of one window of a server whose true percentile is `scale`: the share of
/// the window's latencies above it is a Gamma(`above`) draw over the window (the order
/// statistic of uniforms, to within 1/n; drawn by Wilson and Hilferty's cube of a normal,
/// within a per cent of the Gamma's quantiles from 10 up), and the Pareto tail turns that
/// share into a latency, `scale · (above / G)^(1/α)`.
fn window(scale: f64, t: Tail, rng: &mut ChaCha8Rng) -> f64 {
    let m = t.above as f64;
    let g = m * (1.0 - 1.0 / (9.0 * m) + normal(rng) / (3.0 * m.sqrt())).powi(3);
    let hiccup = if rng.random::<f64>() < t.hiccup {
        1.5 + (t.hiccup_most - 1.5) * rng.random::<f64>()
    } else {
        1.0
    };
    scale * (m / g).powf(1.0 / t.alpha) * (t.client * normal(rng)).exp() * hiccup
}

/// How often, over `runs` runs of five drawn rounds, the column found each server different
/// from server 0 (whose tails are `scale[0]`), and anywhere in the column.
fn rates(seed: u64, runs: usize, scale: &[f64], t: Tail) -> (Vec<f64>, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let order = five(scale.len());
    let (mut each, mut any) = (vec![0usize; scale.len()], 0);
    for _ in 0..runs {
        let rounds = order(&mut rng);
        let mut values = vec![vec![None; rounds.len()]; scale.len()];
        for (k, row) in rounds.iter().enumerate() {
            let drift = (t.drift * normal(&mut rng)).exp();
            for &s in row {
                values[s][k] = Some(window(scale[s] * drift, t, &mut rng));
            }
        }
        let found: Vec<bool> = verdict::family(&method(&values))
            .iter()
            .map(|v| v.is_some_and(|v| v.differs))
            .collect();
        for (s, &f) in found.iter().enumerate() {
            each[s + 1] += usize::from(f);
        }
        any += usize::from(found.contains(&true));
    }
    let share = |c: usize| c as f64 / runs as f64;
    (each.into_iter().map(share).collect(), share(any))
}

#[test]
fn an_a_a_tail_column_stays_quiet() {
    // Two copies of one server (the A/A run), and sixteen equal servers.
    let cases = [
        ("p99", P99, 0x5eed_0201),
        ("p99.9", P99_9, 0x5eed_0202),
        ("p99 with hiccups", HICCUPS, 0x5eed_0203),
    ];
    for (name, t, seed) in cases {
        let (_, two) = rates(seed, FEW, &[400.0; 2], t);
        let (_, sixteen) = rates(seed + 0x10, TRIALS, &[400.0; 16], t);
        eprintln!(
            "{name}, A/A: a false verdict in {two:.3} of runs with two copies, {sixteen:.3} with sixteen"
        );
        // Two: one paired t, at its level exactly: `most_false`.
        assert!(two <= most_false(FEW, 1, 1), "{name}: {two}");
        assert!(sixteen <= verdict::ALPHA, "{name}: {sixteen}");
        quoted(&format!("{name}, two copies"), &[Some(two), None], FEW);
        quoted(
            &format!("{name}, sixteen equal"),
            &[Some(sixteen), None],
            TRIALS,
        );
    }
}

#[test]
fn a_tail_half_as_long_again_is_found() {
    // Two servers, one's p99 1.5× the other's: the A/A run's shape with a real difference.
    let (each, _) = rates(0x5eed_0211, TRIALS, &[400.0, 600.0], P99);
    eprintln!("p99 1.5x, two servers: found in {:.3} of runs", each[1]);
    assert!(each[1] >= 0.9, "{each:?}");
    quoted("p99 1.5×, two servers", &[None, Some(each[1])], TRIALS);
    // One of sixteen, the others equal: found, and the fourteen stay quiet.
    let mut scale = [400.0; 16];
    scale[7] = 600.0;
    let (each, any) = rates(0x5eed_0212, TRIALS, &scale, P99);
    eprintln!("p99 1.5x, one of sixteen: found in {:.3} of runs", each[7]);
    assert!(each[7] >= 0.9, "{each:?}");
    assert!(any - each[7] <= verdict::ALPHA, "{each:?} {any}");
    quoted("p99 1.5×, one of sixteen", &[None, Some(each[7])], TRIALS);
    // p99.9 rests on ten echoes a window, and a hiccup in one repeat of twenty hides much: for
    // the docs, how often each still finds it.
    let (each, _) = rates(0x5eed_0213, TRIALS, &scale, P99_9);
    eprintln!(
        "p99.9 1.5x, one of sixteen: found in {:.3} of runs",
        each[7]
    );
    assert!(each[7] >= 0.2, "{each:?}");
    quoted("p99.9 1.5×, one of sixteen", &[None, Some(each[7])], TRIALS);
    let (each, _) = rates(0x5eed_0214, TRIALS, &scale, HICCUPS);
    eprintln!(
        "p99 1.5x with hiccups, one of sixteen: found in {:.3} of runs",
        each[7]
    );
    assert!(each[7] >= 0.5, "{each:?}");
    quoted(
        "p99 with hiccups 1.5×, one of sixteen",
        &[None, Some(each[7])],
        TRIALS,
    );
}
