//! The tests of loadgen's command line and summary as the harness makes and reads them.

use super::*;

#[test]
fn reads_the_promised_fields_and_the_error_total() {
    let text = r#"{
        "throughput_per_sec": 12345.5,
        "latency_us": {"p50": 10.0, "p90": 20.0, "p99": 30.0, "p99_9": 40.0,
                       "p99_99": 50.0, "p99_999": 60.0, "max": 70.0, "count": 3},
        "errors": {"total": 2, "reset": 1, "delivery": 1, "stalled": 9},
        "client_cpu_per_msg_us": 1.5,
        "client_bound": true,
        "window_secs": 4.0,
        "something_new": [1, 2]
    }"#;
    let s = parse_summary(text).unwrap();
    assert_eq!(s.throughput_per_sec, 12345.5);
    assert_eq!(s.latency_us.p99_999, 60.0);
    assert_eq!(s.errors, 2);
    assert_eq!(s.delivery_errors, 1);
    assert!(s.client_bound);
    assert_eq!(s.window_secs, Some(4.0));
    let plain = r#"{"throughput_per_sec": 1, "latency_us": {}, "errors": 3,
                    "client_cpu_per_msg_us": 0, "client_bound": false}"#;
    assert_eq!(parse_summary(plain).unwrap().errors, 3);
    assert!(parse_summary("{}").is_err());
}

#[test]
fn the_grace_covers_draining_one_message_per_connection() {
    let point = |conns, compute_us| Point {
        suite: crate::plan::suites::Suite::EmperEcho,
        series: "work-200us".into(),
        id: "c".into(),
        label: "c".into(),
        conns,
        workload: Workload::Echo {
            msg_size: 16,
            compute_us,
        },
        load: Load::Closed,
        stop: Stop::Duration(4.0),
        warmup: 1.0,
        workers: None,
        arrivals: crate::plan::suites::Arrivals::Uniform,
        seed: None,
        shape: crate::plan::suites::Shape::default(),
    };
    assert_eq!(grace(&point(1000, 0)), 2.0);
    assert!((grace(&point(10_000, 200)) - 4.0).abs() < 1e-9);
}

#[test]
fn poisson_arrivals_and_their_seed_reach_loadgen() {
    let point = |arrivals, seed| Point {
        suite: crate::plan::suites::Suite::Capacity,
        series: "echo".into(),
        id: "echo-03-r500".into(),
        label: "echo @ 500/s".into(),
        conns: 10,
        workload: Workload::Echo {
            msg_size: 16,
            compute_us: 0,
        },
        load: Load::Open { rate: 500.0 },
        stop: Stop::Duration(1.0),
        warmup: 0.3,
        workers: None,
        arrivals,
        seed,
        shape: crate::plan::suites::Shape::default(),
    };
    let p = Path::new("x");
    let files = Files {
        json: p,
        hist: p,
        hgrm: p,
        interval_log: p,
    };
    let cpus = CpuList::one(0);
    let a = args(&point(Arrivals::Poisson, Some(4)), "h:1", &cpus, &files).join(" ");
    assert!(a.contains("--rate 500 --arrivals poisson --seed 4"), "{a}");
    let a = args(&point(Arrivals::Uniform, Some(4)), "h:1", &cpus, &files).join(" ");
    assert!(!a.contains("--arrivals") && !a.contains("--seed"), "{a}");
}

#[test]
fn kv_points_become_loadgen_kv() {
    let points = crate::plan::suites::Suite::Kv.points(&crate::plan::suites::Overrides::default());
    let p = points
        .iter()
        .find(|p| p.id == "loadgen-set-p16-c50")
        .unwrap();
    let f = Path::new("f");
    let files = Files {
        json: f,
        hist: f,
        hgrm: f,
        interval_log: f,
    };
    let a = args(p, "127.0.0.1:9", &CpuList::one(0), &files);
    assert_eq!(a[0], "kv");
    let line = a.join(" ");
    for want in [
        "--conns 50",
        "--value-size 32",
        "--keys 100000",
        "--get-ratio 0",
        "--depth 16",
    ] {
        assert!(line.contains(want), "{want} not in {line}");
    }
    assert!(!line.contains("--msg-size"), "{line}");
}

#[test]
fn http_points_become_loadgen_http() {
    let points =
        crate::plan::suites::Suite::Http.points(&crate::plan::suites::Overrides::default());
    let f = Path::new("f");
    let files = Files {
        json: f,
        hist: f,
        hgrm: f,
        interval_log: f,
    };
    for (id, want) in [
        ("loadgen-plaintext-p16-c256", "--path /plaintext --depth 16"),
        ("loadgen-json-p1-c16", "--path /json --depth 1"),
        ("loadgen-json-open-c256", "--rate 10000"),
    ] {
        let p = points.iter().find(|p| p.id == id).unwrap();
        let a = args(p, "127.0.0.1:9", &CpuList::one(0), &files);
        assert_eq!(a[0], "http");
        let line = a.join(" ");
        assert!(line.contains(want), "{want} not in {line}");
    }
}

#[test]
fn issue_62s_knobs_reach_loadgen_and_loadgen_takes_every_point() {
    use crate::plan::suites::{Overrides, Suite};
    use clap::Parser as _;
    let f = Path::new("f");
    let files = Files {
        json: f,
        hist: f,
        hgrm: f,
        interval_log: f,
    };
    let o = Overrides {
        workers: 1,
        ..Overrides::default()
    };
    let line = |suite: Suite, id: &str| {
        let points = suite.points(&o);
        let p = points.iter().find(|p| p.id == id).unwrap();
        args(p, "127.0.0.1:9", &CpuList::one(0), &files).join(" ")
    };
    for (suite, id, want) in [
        (
            Suite::Churn,
            "r1-c64",
            "echo --addr 127.0.0.1:9 --conns 64 --msg-size 16",
        ),
        (
            Suite::Churn,
            "r10-c4096",
            "--requests-per-conn 10 --threads 1",
        ),
        (Suite::Churn, "kv-loadgen-r1-c50", "--get-ratio 1 --depth 1"),
        (Suite::Churn, "kv-loadgen-r1-c50", "--requests-per-conn 1"),
        (Suite::Idle, "active-10-c1000", "--conns 100 --msg-size 16"),
        (
            Suite::Idle,
            "active-10-c1000",
            "--rate 10000 --idle-conns 900",
        ),
        (Suite::Sizes, "echo-mix-c64", "--msg-size 64:95,64K:5"),
        (Suite::Sizes, "echo-1MiB-c64", "--msg-size 1048576"),
        (Suite::Sizes, "kv-loadgen-64KiB-c50", "--value-size 65536"),
        (
            Suite::Bursts,
            "onoff-l70-c100",
            "--rate 28000 --arrivals onoff:10:10",
        ),
        (
            Suite::Bursts,
            "pareto-l50-c100",
            "--arrivals pareto:0.154971",
        ),
        (
            Suite::Skew,
            "set1-get30-zipf0.99-c50",
            "--ratio 1:30 --key-dist zipf:0.99",
        ),
    ] {
        let l = line(suite, id);
        assert!(l.contains(want), "{id}: {want} not in {l}");
    }
    assert!(!line(Suite::Churn, "keep-alive-c64").contains("--requests-per-conn"));
    assert!(!line(Suite::Skew, "set1-get1-uniform-c50").contains("--get-ratio"));
    // The connect timeout counts the idle connections too.
    assert!(line(Suite::Idle, "quiet-c10000").contains("--connect-timeout 50"));
    // loadgen itself accepts the command line of every point these suites run.
    for suite in [
        Suite::Churn,
        Suite::Idle,
        Suite::Sizes,
        Suite::Bursts,
        Suite::Skew,
    ] {
        for p in suite
            .points(&o)
            .iter()
            .filter(|p| p.workload.outside_client().is_none())
        {
            let mut a = vec!["loadgen".to_string()];
            a.extend(args(p, "127.0.0.1:9", &CpuList::one(0), &files));
            let cli =
                loadgen::cli::Cli::try_parse_from(&a).unwrap_or_else(|e| panic!("{}: {e}", p.id));
            assert!(cli.config().is_ok(), "{}: {:?}", p.id, cli.config().err());
        }
    }
}

#[test]
fn finds_the_window_start() {
    let log = "#[Logged with loadgen 0.0.0]\n#[Histogram log format version 1.3]\n\
               #[StartTime: 1700000000.250 (seconds since epoch)]\n";
    assert_eq!(window_start(log), Some(1_700_000_000.25));
    assert_eq!(window_start("nothing"), None);
}
