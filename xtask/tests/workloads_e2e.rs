//! Issue 62's suites end to end, small: `cargo xtask bench --suite churn,idle,sizes,bursts,skew`
//! against srv-threads alone (dev profile), a few short points of each (`--points`): the client
//! closing after every request, idle connections beside the active ones, a mix of sizes,
//! on-off and Pareto arrivals, Zipf keys. Checks that each point ran clean with its knobs
//! recorded, that the server's own counts show the churned connections closed, that the
//! idle ones were held, and that the report has each workload's section and figure.

mod util;

use std::path::Path;

#[test]
fn each_workload_runs_against_one_server_and_is_reported() {
    let out = util::fresh_out("xtask-workloads-e2e");
    util::run_bench(
        "cargo xtask bench --suite churn,idle,sizes,bursts,skew",
        &[
            "--cargo-profile",
            "dev",
            "--suite",
            "churn,idle,sizes,bursts,skew",
            "--servers",
            "threads",
            "--conns",
            "4",
            "--duration",
            "0.3",
            "--warmup",
            "0",
            "--rate",
            "1000",
            "--repeat",
            "1",
            "--quiet-wait",
            "0",
            "--points",
            "r1-,keep-alive-,kv-loadgen-r1,active-100,active-10,quiet,echo-16B,echo-mix,kv-loadgen-1KiB,poisson-l50,onoff-l50,pareto-l90,set1-get30-zipf1.2",
        ],
        &out,
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let row = |id: &str| {
        rows.iter()
            .find(|r| r["point"] == id)
            .unwrap_or_else(|| panic!("no row {id}: {rows:#?}"))
    };
    assert_eq!(rows.len(), 13, "{rows:#?}");
    for r in &rows {
        assert_eq!(
            (r["ok"].as_u64(), r["errors"].as_u64()),
            (Some(1), Some(0)),
            "{r:#?}"
        );
        assert!(r["throughput_per_sec"].as_f64().unwrap() > 0.0, "{r:#?}");
    }
    // Churn: a connection per request, counted by loadgen and by the server.
    let r1 = row("r1-c4");
    assert_eq!(r1["requests_per_conn"], 1);
    let opened = r1["connections_opened"].as_f64().unwrap();
    assert!(
        opened >= r1["throughput_per_sec"].as_f64().unwrap() * 0.3,
        "{r1:#?}"
    );
    assert!(r1["server_accepted"].as_f64().unwrap() >= opened, "{r1:#?}");
    assert!(r1["server_closed"].as_f64().unwrap() >= opened, "{r1:#?}");
    assert_eq!(row("keep-alive-c4")["connections_opened"], 4.0);
    assert_eq!(row("kv-loadgen-r1-c50")["requests_per_conn"], 1);
    // Idle: held through the window.
    let idle = row("active-10-c4");
    assert_eq!(
        (idle["conns"].as_u64(), idle["idle_conns"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(idle["idle_held"], 3.0, "{idle:#?}");
    // Sizes, bursts, skew: their knobs reached loadgen and came back.
    assert_eq!(row("echo-mix-c4")["sizes"], "64:95,64K:5");
    assert_eq!(row("kv-loadgen-1KiB-c50")["msg_bytes"], 1024.0);
    assert_eq!(row("onoff-l50-c4")["arrivals"], "onoff");
    assert_eq!(row("onoff-l50-c4")["rate"], 500.0);
    let skew = row("set1-get30-zipf1.2-c4");
    assert_eq!(
        (&skew["key_dist"], &skew["ratio"]),
        (&"zipf:1.2".into(), &"1:30".into())
    );
    assert!(skew["get_p99_us"].as_f64().unwrap() > 0.0, "{skew:#?}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in [
        "## churn:",
        "CPU per connection (slope)",
        "## idle:",
        "CPU at no load",
        "## sizes:",
        "dearest / cheapest",
        "## bursts:",
        "ρ of p99 with Poisson's",
        "## skew:",
        "GET p99 · SET p99",
        "Where the ranking changes",
        "## Where the ranking changes",
        "- churn: no two servers swap places.",
    ] {
        assert!(report.contains(want), "{want} not in {report}");
    }
    for suite in ["churn", "idle", "sizes", "bursts", "skew"] {
        let figure = out.join(format!("plots/{suite}-crossover.svg"));
        assert!(Path::new(&figure).is_file(), "{}", figure.display());
    }
}
