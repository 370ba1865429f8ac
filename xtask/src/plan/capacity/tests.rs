//! The capacity search tested on simulated servers: exact ones, noisy ones (seeded, so every
//! run draws the same noise) and ones whose client now and then fails its self-check; and the
//! objective's grammar.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

/// Runs a search to its end, `outcome` saying how each probe at a rate went (`met`,
/// `schedule_ok`); returns what it found and the probes it made.
fn run(s: &Search, mut outcome: impl FnMut(f64, Phase) -> (bool, bool)) -> (Found, Vec<Probe>) {
    let mut probes = Vec::new();
    // Bounded: a search of these settings needs a few dozen probes.
    for _ in 0..300 {
        match s.next(&probes) {
            Next::Done(f) => return (f, probes),
            Next::Try { rate, phase, .. } => {
                let (met, schedule_ok) = outcome(rate, phase);
                probes.push(Probe {
                    rate,
                    met,
                    schedule_ok,
                });
            }
        }
    }
    panic!("the search did not end: {probes:?}");
}

/// A simulated server that meets the objective up to `knee` and misses it above, its client
/// keeping its schedule up to `client_limit` only.
fn simulate(s: &Search, knee: f64, client_limit: f64) -> (Found, Vec<Probe>) {
    run(s, |rate, _| (rate <= knee, rate <= client_limit))
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
        // The last probes are the confirmation's, all at the rate found; before them the
        // bracket's upper end, tried again, missed again (a miss is two probes).
        let n = s.confirmations;
        let tail = &probes[probes.len() - n..];
        assert!(tail.iter().all(|p| p.rate == rate && p.met), "{tail:?}");
        let retest = &probes[probes.len() - n - MISSES..probes.len() - n];
        assert!(
            retest.iter().all(|p| p.rate > rate && !p.met),
            "knee {knee}: {retest:?}"
        );
        assert!(probes.len() < 45, "knee {knee}: {} probes", probes.len());
    }
}

#[test]
fn one_miss_is_probed_again_and_two_count() {
    let s = Search::default();
    // The first probe misses, the second meets: the first rate counts as met, and the sweep
    // goes up.
    let first = Probe {
        rate: 1000.0,
        met: false,
        schedule_ok: true,
    };
    let again = |met| Probe { met, ..first };
    assert_eq!(
        s.next(&[first]),
        Next::Try {
            rate: 1000.0,
            phase: Phase::Sweep,
            attempt: Attempt::AfterMiss
        }
    );
    // A miss and a hit: the third probe decides.
    assert!(matches!(
        s.next(&[first, again(true)]),
        Next::Try { rate: 1000.0, .. }
    ));
    assert!(matches!(
        s.next(&[first, again(true), again(true)]),
        Next::Try { rate: 2000.0, .. }
    ));
    // Two misses: the rate is missed, and the sweep goes down.
    assert!(matches!(
        s.next(&[first, again(false)]),
        Next::Try { rate: 500.0, .. }
    ));
    assert!(matches!(
        s.next(&[first, again(true), again(false)]),
        Next::Try { rate: 500.0, .. }
    ));
}

#[test]
fn a_confirmation_that_misses_twice_steps_down() {
    let s = Search::default();
    // Meets up to 5000, but the first two probes of the confirmation miss: a server whose
    // knee is noisy. (One miss alone would be probed again and outvoted.)
    let mut noisy = 0;
    let mut first_confirmed = None;
    let (found, _) = run(&s, |rate, phase| {
        let Phase::Confirm { rate: c } = phase else {
            return (rate <= 5000.0, true);
        };
        first_confirmed.get_or_insert(c);
        noisy += 1;
        (rate <= 5000.0 && noisy > 2, true)
    });
    let Found::Capacity { rate } = found else {
        panic!("{found:?}")
    };
    let first = first_confirmed.unwrap();
    assert_eq!(rate, s.round(first * (1.0 - s.resolution)), "{first}");
    assert!(rate < 5000.0 && rate > 4700.0, "{rate}");
}

#[test]
fn an_upper_end_that_meets_when_tried_again_moves_the_bracket_up() {
    let s = Search::default();
    // Knee at 5000; every probe at 4000 misses the first time it is tried (two probes), as if
    // the host were busy then, and meets after.
    let mut at_4000 = 0;
    let (found, probes) = run(&s, |rate, _| {
        if rate == 4000.0 {
            at_4000 += 1;
            return (at_4000 > 2, true);
        }
        (rate <= 5000.0, true)
    });
    let Found::Capacity { rate } = found else {
        panic!("{found:?}")
    };
    assert!(rate > 4900.0 && rate <= 5000.0, "{rate}: {probes:?}");
    // Without the retest the bracket [2000, 4000] would have held it under 4000.
}

#[test]
fn a_client_that_keeps_failing_ends_the_search_at_least_at_the_last_rate_met() {
    let (found, probes) = simulate(&Search::default(), 100_000.0, 20_000.0);
    assert_eq!(found, Found::ClientBound { rate: 16_000.0 });
    // The rate the client could not keep was tried once and retried CLIENT_RETRIES times.
    let at_32000 = probes.iter().filter(|p| p.rate == 32_000.0).count();
    assert_eq!(at_32000, 1 + CLIENT_RETRIES);
}

#[test]
fn a_probe_the_client_failed_is_retried_not_the_end() {
    let s = Search::default();
    // The client's self-check fails on every other probe at each rate's first try, met or
    // missed: each is run again and the search finds the knee as if it had not.
    for knee in [4_321.0, 47_000.0] {
        let mut n = 0;
        let (found, probes) = run(&s, |rate, _| {
            n += 1;
            (rate <= knee, n % 2 == 0)
        });
        let (clean, clean_probes) = simulate(&s, knee, f64::INFINITY);
        assert_eq!(found, clean, "knee {knee}");
        assert!(matches!(found, Found::Capacity { .. }), "{found:?}");
        let failed = probes.iter().filter(|p| !p.schedule_ok).count();
        assert_eq!(probes.len() - failed, clean_probes.len());
        assert!(failed > 10, "{failed}");
    }
    // Three failures in a row, then a probe kept: still not the end.
    let mut n = 0;
    let (found, _) = run(&s, |rate, _| {
        n += 1;
        (rate <= 9_000.0, n > CLIENT_RETRIES)
    });
    assert!(matches!(found, Found::Capacity { .. }), "{found:?}");
}

/// The share of `searches` simulated searches, each of a server whose knee is drawn from
/// 2,000 to 200,000/s (log-uniform) and whose probes at or under it miss falsely with
/// probability `false_miss`, that land within 5% of the knee.
fn share_within_5pct(s: &Search, seed: u64, searches: usize, false_miss: f64) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut close = 0;
    for _ in 0..searches {
        let knee = 2_000.0 * 100f64.powf(rng.random::<f64>());
        let (found, _) = run(s, |rate, _| {
            (rate <= knee && !rng.random_bool(false_miss), true)
        });
        if let Found::Capacity { rate } = found
            && (rate - knee).abs() <= 0.05 * knee
        {
            close += 1;
        }
    }
    close as f64 / searches as f64
}

#[test]
fn a_search_whose_probes_miss_falsely_now_and_then_still_lands_near_the_knee() {
    let s = Search::default();
    for seed in [1, 2, 3] {
        let share = share_within_5pct(&s, seed, 1000, 0.02);
        assert!(share >= 0.95, "seed {seed}: {share}");
    }
    // The vote is what survives noise, not a noise that cannot hurt: at 10% false misses
    // the search still lands there, and would not were one miss enough to lower the bracket.
    assert!(share_within_5pct(&s, 1, 1000, 0.10) >= 0.95);
    let one = Search { misses: 1, ..s };
    let share = share_within_5pct(&one, 1, 1000, 0.10);
    assert!(share < 0.95, "{share}");
}

#[test]
fn a_search_again_from_a_capacity_found_takes_fewer_probes() {
    let s = Search::default();
    for knee in [3_000.0, 47_000.0] {
        let (first, probes) = simulate(&s, knee, f64::INFINITY);
        let again = Search::again(&s, first.rate());
        let (second, fewer) = simulate(&again, knee, f64::INFINITY);
        assert_eq!(second, first, "knee {knee}");
        assert!(
            fewer.len() < probes.len(),
            "{} {}",
            fewer.len(),
            probes.len()
        );
    }
    // A capacity found too high the first time: the search again sweeps down to the knee.
    let again = Search::again(&s, 60_000.0);
    let (found, _) = simulate(&again, 47_000.0, f64::INFINITY);
    assert!((46_000.0..=47_000.0).contains(&found.rate()), "{found:?}");
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
