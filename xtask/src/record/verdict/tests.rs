//! `record::verdict`'s tests: the model against the paired t, Bonferroni's adjustment and
//! its intervals, Welch's t, a server missing a round, and a latency the load generator made.

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn two_servers_by_round_are_the_paired_t_on_log_ratios() {
    // Ratios 1.10, 1.12, 1.08, 1.11, 1.09 on a drifting machine.
    let a = [10.0, 20.0, 15.0, 12.0, 30.0];
    let ratio = [1.10, 1.12, 1.08, 1.11, 1.09];
    let b: Vec<f64> = a.iter().zip(ratio).map(|(x, r)| x * r).collect();
    let some = |x: &[f64]| x.iter().copied().map(Some).collect::<Vec<_>>();
    let e = against_reference(&some(&a), &[&some(&b)])[0].unwrap();
    let d: Vec<f64> = ratio.iter().map(|r: &f64| r.ln()).collect();
    let (m, ss) = mean_ss(&d);
    assert!(close(e.log_ratio, m), "{e:?}");
    assert!(close(e.var, ss / 4.0 / 5.0), "{e:?}");
    assert!(close(e.df, 4.0), "{e:?}");
    // The drift (a doubling from round to round) does not reach the verdict.
    let v = family(&[Some(e)])[0].unwrap();
    assert!(v.differs && v.p < 1e-3, "{v:?}");
    assert!(v.low < 1.1 && 1.1 < v.high, "{v:?}");
}

#[test]
fn bonferroni_adjusts_each_p_and_its_interval_agrees() {
    let e = |t: f64| Estimate {
        log_ratio: t,
        var: 1.0,
        df: 1e9,
        n: 5,
    };
    // Two-sided normal p of 3, 2.5 and 0.5: 0.0027, 0.0124, 0.617.
    let v = family(&[Some(e(2.5)), None, Some(e(3.0)), Some(e(0.5))]);
    assert_eq!(v[1], None);
    let p: Vec<f64> = [0, 2, 3].iter().map(|&i| v[i].unwrap().p).collect();
    // Three comparisons: each p times 3, at most 1.
    assert!((p[1] - 3.0 * 0.002_699_8).abs() < 1e-5, "{p:?}");
    assert!((p[0] - 3.0 * 0.012_419_3).abs() < 1e-5, "{p:?}");
    assert_eq!(p[2], 1.0);
    assert!(v[0].unwrap().differs && v[2].unwrap().differs && !v[3].unwrap().differs);
    // The simultaneous interval is at 1 − 0.05/3: z = 2.394; a verdict exactly where it
    // leaves 1 (log 0) out.
    let i = v[2].unwrap();
    assert!((i.high.ln() - 3.0 - 2.393_98).abs() < 1e-4, "{i:?}");
    for w in v.iter().flatten() {
        assert_eq!(w.differs, w.low > 1.0 || w.high < 1.0, "{w:?}");
    }
}

#[test]
fn welch_and_edge_cases() {
    // Welch on logs: equal spreads, 5 a side, df 8.
    let a = [10.0, 10.2, 9.9, 10.1, 10.3];
    let b: Vec<f64> = a.iter().map(|x| x * 1.5).collect();
    let e = welch(&a, &b).unwrap();
    assert!(close(e.log_ratio, 1.5f64.ln()) && close(e.df, 8.0), "{e:?}");
    assert_eq!(welch(&[1.0], &a), None);
    // Identical values: no difference, p = 1; a constant ratio with no noise: p = 0.
    let same = [Some(2.0), Some(2.0), Some(2.0)];
    let v = family(&against_reference(&same, &[&same]))[0].unwrap();
    assert!(!v.differs && close(v.p, 1.0), "{v:?}");
    let twice = [Some(4.0), Some(4.0), Some(4.0)];
    assert!(
        family(&against_reference(&same, &[&twice]))[0]
            .unwrap()
            .differs
    );
    // A server with one round in common with the reference cannot be compared.
    let one = [None, None, Some(4.0)];
    assert_eq!(against_reference(&same, &[&one])[0], None);
}

#[test]
fn a_server_missing_a_round_is_paired_on_the_rounds_it_has() {
    let reference = [Some(10.0), Some(10.1), Some(9.9), Some(10.0)];
    let full = [Some(10.1), Some(10.0), Some(10.0), Some(9.9)];
    let gap = [Some(11.0), None, Some(10.9), Some(11.1)];
    let e = against_reference(&reference, &[&full, &gap]);
    assert_eq!(e[0].unwrap().n, 4);
    assert_eq!(e[1].unwrap().n, 3);
    assert!(close(e[1].unwrap().df, 2.0), "{e:?}");
}

/// A row of `server` whose p99 in each round is `p99`.
fn tail(server: &str, p99: &[f64]) -> Row {
    let mut r = Row {
        server: server.into(),
        ok: p99.len(),
        ..Row::default()
    };
    r.per_round
        .insert("p99_us".into(), p99.iter().copied().map(Some).collect());
    r.per_repeat.insert("p99_us".into(), p99.to_vec());
    r
}

#[test]
fn latency_off_the_clients_schedule_is_never_a_verdict() {
    let reference = tail("floor", &[300.0, 420.0, 350.0, 390.0, 310.0]);
    let twin = tail("twin", &[310.0, 400.0, 360.0, 380.0, 320.0]);
    let slow = |name: &str| {
        let p99: Vec<f64> = reference
            .rounds_of("p99_us")
            .iter()
            .flatten()
            .map(|v| v * 1.5)
            .collect();
        tail(name, &p99)
    };
    let (a, mut b) = (slow("a"), slow("b"));
    let v = column(&reference, &[&twin, &a, &b], "p99_us");
    assert!(
        !v[0].unwrap().differs && v[1].unwrap().differs && v[2].unwrap().differs,
        "{v:?}"
    );
    // b's load generator fell off its schedule: b has no verdict, and its comparison is
    // not one of the family's (a's adjusted p is that of a column of two).
    b.schedule_ok = Some(false);
    let v = column(&reference, &[&twin, &a, &b], "p99_us");
    let without = column(&reference, &[&twin, &a], "p99_us");
    assert_eq!(v[2], None, "{v:?}");
    assert_eq!(v[..2], without[..], "{v:?}");
    // Its CPU per request is still the server's, and still judged.
    b.per_round
        .insert("cpu_us_per_req".into(), vec![Some(2.0); 5]);
    let mut r = reference.clone();
    r.per_round.insert(
        "cpu_us_per_req".into(),
        vec![Some(1.0), Some(1.1), Some(0.9), Some(1.0), Some(1.05)],
    );
    assert!(column(&r, &[&b], "cpu_us_per_req")[0].is_some_and(|v| v.differs));
    // Across two runs likewise.
    assert_eq!(across_runs(&[(&reference, &b)], "p99_us"), vec![None]);
    assert!(across_runs(&[(&reference, &a)], "p99_us")[0].is_some());
    // A reference off its schedule leaves its latency column untested.
    let mut off = reference.clone();
    off.schedule_ok = Some(false);
    assert!(unusable(&off, "p99_us").is_some_and(|why| why.contains('◊')));
    assert_eq!(unusable(&off, "cpu_us_per_req"), None);
    assert_eq!(column(&off, &[&twin, &a], "p99_9_us"), vec![None, None]);
}

#[test]
fn the_latencies_are_the_percentiles_and_the_extremes() {
    for m in [
        "p99_us",
        "p99_9_us",
        "p50_us",
        "p99_999_us",
        "max_us",
        "avg_us",
        "min_us",
    ] {
        assert!(is_latency(m), "{m}");
    }
    for m in [
        "cpu_us_per_req",
        "throughput_per_sec",
        "client_cpu_per_msg_us",
        "mem_per_conn_bytes",
    ] {
        assert!(!is_latency(m), "{m}");
    }
}

#[test]
fn three_servers_are_paired_whatever_the_thirds_noise() {
    // Shukla's unbiased variances for three servers sum to the paired variance of the two
    // compared: the third's noise, however large, does not reach the comparison.
    let a = [10.0, 20.0, 15.0, 12.0, 30.0];
    let ratio = [1.10, 1.12, 1.08, 1.11, 1.09];
    let b: Vec<f64> = a.iter().zip(ratio).map(|(x, r)| x * r).collect();
    let some = |x: &[f64]| x.iter().copied().map(Some).collect::<Vec<_>>();
    let (quiet, wild) = (
        some(&[10.0, 20.0, 15.0, 12.0, 30.0]),
        some(&[5.0, 90.0, 7.0, 40.0, 3.0]),
    );
    let d: Vec<f64> = ratio.iter().map(|r: &f64| r.ln()).collect();
    let (_, ss) = mean_ss(&d);
    for third in [&quiet, &wild] {
        let e = against_reference(&some(&a), &[&some(&b), third])[0].unwrap();
        assert!(close(e.var, ss / 4.0 / 5.0), "{e:?}");
        assert!(close(e.df, 4.0), "{e:?}");
    }
    // From four servers up each has its own variance from the two-way residuals, which the
    // others' noise reaches by a share of 1/G²: a wild fourth widens the first comparison.
    let four = |x: &[Option<f64>]| against_reference(&some(&a), &[&some(&b), &quiet, x])[0];
    let (calm, noisy) = (four(&quiet).unwrap(), four(&wild).unwrap());
    assert!(noisy.var > calm.var, "{calm:?} {noisy:?}");
}
