//! `cargo xtask compare`'s tests: the verdicts of two runs, a point as one family, and the
//! header (the gate's are in `gate/tests.rs`).

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

#[test]
fn a_point_whose_cpu_b_raised_names_what_changed_in_its_anatomy() {
    let with = |cpu: &[f64], syscalls: f64| {
        let mut r = row("fiber", &[1000.0; 5]);
        r.cpu_us_per_req = crate::record::stats::median(cpu);
        r.per_repeat.insert("cpu_us_per_req".into(), cpu.to_vec());
        r.counted.syscalls_per_req = Some(syscalls);
        r
    };
    let a = vec![with(&[10.0, 10.1, 9.9, 10.05, 9.95], 2.0)];
    let b = vec![with(&[13.0, 13.1, 12.9, 13.05, 12.95], 3.0)];
    let t = compare(&a, &b, "A", "B", &[]);
    assert!(
        t.contains(
            "- quick / fiber / 1 conns: B 1.30× A's CPU per request; in B 3.00 system calls per \
             request against 2.00"
        ),
        "{t}"
    );
    // Where B's CPU is not higher, no line.
    let t = compare(&a, &a, "A", "A", &[]);
    assert!(!t.contains("What changed in the anatomy"), "{t}");
}
