//! `cargo xtask compare`'s tests: the verdicts of two runs, a point as one family, the gate
//! and its header.

use super::*;

fn row(server: &str, tp: &[f64]) -> Row {
    let mut r = Row {
        suite: "quick".into(),
        server: server.into(),
        point: "closed-c1".into(),
        label: "1 conns".into(),
        ok: tp.len(),
        throughput_per_sec: crate::record::stats::median(tp),
        p99_us: Some(100.0),
        cpu_us_per_req: Some(10.0),
        ..Row::default()
    };
    r.per_repeat
        .insert("throughput_per_sec".into(), tp.to_vec());
    r.per_repeat.insert("p99_us".into(), vec![100.0; tp.len()]);
    r
}

#[test]
fn ratios_only_where_the_repeats_tell_them_from_noise() {
    let a = vec![
        row("threads", &[1000.0, 1010.0, 990.0, 1005.0, 995.0]),
        row("go", &[10.0]),
    ];
    let b = vec![
        row("threads", &[1500.0, 1490.0, 1510.0, 1505.0, 1495.0]),
        row("fiber", &[5.0]),
    ];
    let t = compare(&a, &b, "A", "B", &[]);
    assert!(
        t.contains("| quick | threads | 1 conns | 1.0k | 1.5k | 1.50× [1.49–1.52] (p<0.001) | 100 µs | 100 µs | ~ (1.00× [1.00–1.00]) |"),
        "{t}"
    );
    assert!(t.contains("Only in A: quick / go / 1 conns."), "{t}");
    assert!(t.contains("Only in B: quick / fiber / 1 conns."), "{t}");
    // Overlapping repeats: no verdict, whatever the medians say.
    let c = vec![row("threads", &[900.0, 1100.0, 1000.0, 1200.0, 950.0])];
    let t = compare(&a[..1], &c, "A", "C", &[]);
    let line = t.lines().find(|l| l.starts_with("| quick")).unwrap();
    assert!(!line.contains("(p"), "{line}");
    assert!(line.contains("| ~ (1.02× ["), "{line}");
}

#[test]
fn a_point_is_one_family() {
    // At one point, fifteen servers whose B is their A again with other noise, and one
    // 20% faster in B: the one is found, and none of the fifteen is.
    let noisy = |k: u32, by: f64| -> Vec<f64> {
        (0..5)
            .map(|i| by * 1000.0 * (1.0 + 0.01 * f64::from((i * 7 + k * 3) % 5) - 0.02))
            .collect()
    };
    let names: Vec<String> = (0..16).map(|s| format!("s{s}")).collect();
    let a: Vec<Row> = (0..16)
        .map(|s| row(&names[s], &noisy(s as u32, 1.0)))
        .collect();
    let b: Vec<Row> = (0..16)
        .map(|s| {
            row(
                &names[s],
                &noisy(s as u32 + 1, if s == 4 { 1.2 } else { 1.0 }),
            )
        })
        .collect();
    let t = compare(&a, &b, "A", "B", &[]);
    let found: Vec<&str> = t.lines().filter(|l| l.contains("(p")).collect();
    assert_eq!(found.len(), 1, "{t}");
    assert!(found[0].starts_with("| quick | s4 |"), "{t}");
}

#[test]
fn a_run_compared_with_itself_is_all_tildes() {
    let a = vec![
        row("threads", &[1000.0, 1300.0, 900.0]),
        row("fiber", &[2000.0, 2100.0, 1900.0, 2050.0, 2200.0]),
        row("go", &[10.0]),
    ];
    let t = compare(&a, &a, "A", "A", &[]);
    let body: Vec<&str> = t.lines().filter(|l| l.starts_with("| quick")).collect();
    assert_eq!(body.len(), 3);
    for l in body {
        assert!(!l.contains("(p"), "{l}");
    }
    assert!(
        t.contains("| quick | fiber | 1 conns | 2.0k | 2.0k | ~ (1.00× [0.9"),
        "{t}"
    );
}

fn cpu_row(server: &str, cpu: &[f64]) -> Row {
    let mut r = row(server, &[1000.0; 5]);
    r.cpu_us_per_req = Some(crate::record::stats::median(cpu).unwrap_or(0.0));
    r.per_repeat.insert("cpu_us_per_req".into(), cpu.to_vec());
    r
}

#[test]
fn the_gate_fails_a_real_regression_above_the_threshold_only() {
    let a = vec![cpu_row("reactor", &[10.0, 10.1, 9.9, 10.05, 9.95])];
    // 20% dearer in every repeat: real, and above 5%.
    let b = vec![cpu_row("reactor", &[12.0, 12.1, 11.9, 12.05, 11.95])];
    let worse = regressions(&a, &b, Metric::Cpu, 5.0);
    assert_eq!(worse.len(), 1, "{worse:?}");
    assert!(
        worse[0].starts_with("quick / reactor / 1 conns: 1.20× [1.19–1.21] (p<0.001)"),
        "{worse:?}"
    );
    // Real but below the threshold.
    assert!(regressions(&a, &b, Metric::Cpu, 25.0).is_empty());
    // Cheaper is no regression, however real.
    assert!(regressions(&b, &a, Metric::Cpu, 5.0).is_empty());
    // The same run: nothing.
    assert!(regressions(&a, &a, Metric::Cpu, 0.0).is_empty());
    // Above the threshold by the medians, but the repeats overlap: no verdict, no failure.
    let c = vec![cpu_row("reactor", &[9.0, 14.0, 12.0, 8.0, 15.0])];
    assert!(regressions(&a, &c, Metric::Cpu, 5.0).is_empty());
    // A point the hypervisor stole a third of in B is not judged, however much dearer.
    let mut stolen = b.clone();
    stolen[0].steal_median_pct = Some(35.0);
    assert!(regressions(&a, &stolen, Metric::Cpu, 5.0).is_empty());
    assert_eq!(disturbed_points(&a, &stolen, Metric::Cpu).len(), 1);
    // A little steal leaves the CPU judged (the task clock leaves stolen time out).
    stolen[0].steal_median_pct = Some(4.0);
    assert_eq!(regressions(&a, &stolen, Metric::Cpu, 5.0).len(), 1);
    // A point B failed, and one B left out, fail the gate whatever the metric.
    let mut failed = a.clone();
    failed[0].ok = 0;
    failed[0].failure = Some("the server did not start".into());
    let worse = regressions(&a, &failed, Metric::Cpu, 5.0);
    assert_eq!(worse.len(), 1, "{worse:?}");
    assert!(
        worse[0].contains("B failed (the server did not start)"),
        "{worse:?}"
    );
    let worse = regressions(&a, &[], Metric::Throughput, 5.0);
    assert_eq!(
        worse,
        vec!["quick / reactor / 1 conns: not in B".to_string()]
    );
    // Throughput: lower is worse.
    let slow = vec![row("reactor", &[800.0, 810.0, 790.0, 805.0, 795.0])];
    let fast = vec![row("reactor", &[1000.0, 1010.0, 990.0, 1005.0, 995.0])];
    assert_eq!(regressions(&fast, &slow, Metric::Throughput, 5.0).len(), 1);
    assert!(regressions(&slow, &fast, Metric::Throughput, 5.0).is_empty());
    // p99 half as long again in every repeat: a regression, unless B's load generator missed
    // its schedule, when the latency is the client's and is not judged (its CPU still is).
    let tail = |k: f64| {
        let mut r = cpu_row("reactor", &[10.0, 10.1, 9.9, 10.05, 9.95]);
        let p99 = [100.0, 101.0, 99.0, 100.5, 99.5].map(|v| v * k);
        r.per_repeat.insert("p99_us".into(), p99.to_vec());
        r
    };
    let (a, mut b) = (vec![tail(1.0)], vec![tail(1.5)]);
    assert_eq!(regressions(&a, &b, Metric::P99, 5.0).len(), 1);
    b[0].schedule_ok = Some(false);
    assert!(regressions(&a, &b, Metric::P99, 5.0).is_empty());
    assert_eq!(disturbed_points(&a, &b, Metric::P99).len(), 1);
    assert!(disturbed_points(&a, &b, Metric::Cpu).is_empty());
}

#[test]
fn percentages_parse_with_or_without_the_sign() {
    assert_eq!(parse_pct("5%"), Ok(5.0));
    assert_eq!(parse_pct("2.5"), Ok(2.5));
    assert!(parse_pct("-1").is_err());
    assert!(parse_pct("five").is_err());
}

#[test]
fn the_header_says_when_machines_or_commits_differ() {
    let a = Meta {
        cpu_model: Some("EPYC".into()),
        cores: 2,
        commit: Some("aaaaaaaaaaaaaaaa".into()),
        ..Meta::default()
    };
    assert!(provenance(Some(&a), Some(&a)).is_empty());
    let b = Meta {
        cores: 4,
        commit: Some("bbbbbbbbbbbb".into()),
        ..a.clone()
    };
    let notes = provenance(Some(&a), Some(&b));
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].contains("Different machines"), "{notes:?}");
    assert!(
        notes[1].contains("`aaaaaaaaaaaa`, B `bbbbbbbbbbbb`"),
        "{notes:?}"
    );
    assert_eq!(provenance(None, Some(&a)).len(), 1);
}
