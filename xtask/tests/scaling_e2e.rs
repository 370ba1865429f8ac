//! A tiny scaling suite through the real command line: srv-threads (dev profile) at 1 and 2
//! workers where the machine has two CPUs (the server's CPUs shared with loadgen's, as a test
//! may), else at 1, each worker count with its three half-second points at 10 connections.
//! Checks that every point ran with its own worker count (in the row and in meta.json's
//! points), the report's section with the reason the sweep stops, and the plots.

mod util;

#[test]
fn tiny_scaling_sweep() {
    let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let server_cpus = if two { "0,1" } else { "0" };
    let out = util::fresh_out("xtask-scaling-e2e");
    util::run_bench(
        "cargo xtask bench --suite scaling",
        &[
            "--cargo-profile",
            "dev",
            "--suite",
            "scaling",
            "--servers",
            "threads",
            "--server-cpus",
            server_cpus,
            "--client-cpus",
            "0",
            // Where the server has two CPUs, one of them is loadgen's: a test may share.
            "--allow-overlap",
            "--conns",
            "10",
            "--duration",
            "0.5",
            "--warmup",
            "0",
            "--rate",
            "500",
            "--repeat",
            "1",
            "--quiet-wait",
            "0",
        ],
        &out,
    );

    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let counts: &[u64] = if two { &[1, 2] } else { &[1] };
    assert_eq!(rows.len(), 3 * counts.len(), "{rows:#?}");
    for (i, r) in rows.iter().enumerate() {
        let w = counts[i / 3];
        assert_eq!(r["suite"], "scaling");
        assert_eq!(r["workers"], w, "{r:#?}");
        assert_eq!(r["x"], w as f64, "{r:#?}");
        assert_eq!(r["ok"], 1, "{r:#?}");
        assert_eq!(r["errors"], 0, "{r:#?}");
        assert!(r["throughput_per_sec"].as_f64().unwrap() > 0.0, "{r:#?}");
        // Measured, though a half-second window may see no 10 ms CPU tick.
        assert!(r["cpu_us_per_req"].as_f64().unwrap() >= 0.0, "{r:#?}");
    }
    let series: Vec<&str> = rows[..3]
        .iter()
        .map(|r| r["series"].as_str().unwrap())
        .collect();
    assert_eq!(series, ["closed", "open", "work-200us"]);
    assert_eq!(rows[1]["rate"], 500.0);
    assert_eq!(rows[2]["compute_us"], 200);
    if two {
        assert_eq!(rows[4]["rate"], 1000.0);
        // The server was started with the point's workers.
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
        let points = meta["settings"]["points"].as_array().unwrap();
        assert_eq!(points[3]["workers"], 2, "{points:#?}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("## scaling: Scaling with workers"),
        "{report}"
    );
    assert!(report.contains("scaling stops at"), "{report}");
    assert!(report.contains("| efficiency |"), "{report}");
    assert!(report.contains("| **threads** | 1.00"), "{report}");
    for plot in [
        "throughput",
        "cpu-per-echo",
        "cpu-per-echo-open",
        "efficiency",
        "work",
    ] {
        let svg = out.join(format!("plots/scaling-{plot}.svg"));
        assert!(svg.is_file(), "{}", svg.display());
    }
    std::fs::remove_dir_all(&out).unwrap();
}
