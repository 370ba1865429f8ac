//! The kv suite end to end, small: `cargo xtask bench --suite kv` against redis-server alone
//! (the ringside servers' kv is checked by their own tests), one connection, short points,
//! both clients. Skipped with a message where redis-server or redis-benchmark is missing.

mod util;

use std::process::{Command, Stdio};

fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn kv_suite_against_redis_server() {
    if !(installed("redis-server") && installed("redis-benchmark")) {
        eprintln!(
            "skipping: redis-server or redis-benchmark is not installed (apt-get install redis-server redis-tools)"
        );
        return;
    }
    let out = util::fresh_out("xtask-kv-e2e");
    util::run_bench(
        "cargo xtask bench --suite kv",
        &[
            "--cargo-profile",
            "dev",
            "--suite",
            "kv",
            "--servers",
            "redis",
            "--conns",
            "1",
            "--duration",
            "0.3",
            "--warmup",
            "0",
            "--quiet-wait",
            "0",
        ],
        &out,
    );

    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    // Two clients × two depths × GET and SET, at one connection count.
    assert_eq!(rows.len(), 8, "{rows:#?}");
    for r in &rows {
        assert_eq!((&r["suite"], &r["server"]), (&"kv".into(), &"redis".into()));
        assert_eq!(r["ok"], 1, "{r:#?}");
        assert_eq!(r["errors"], 0, "{r:#?}");
        assert!(r["throughput_per_sec"].as_f64().unwrap() > 0.0, "{r:#?}");
        assert!(r["cpu_us_per_req"].as_f64().unwrap() > 0.0, "{r:#?}");
        assert!(r["peak_mem_bytes"].as_f64().unwrap() > 0.0, "{r:#?}");
        // redis-server stops when asked, not at the SIGKILL after the grace period.
        let notes = r["notes"].to_string();
        assert!(!notes.contains("did not stop"), "{notes}");
        // loadgen's from its histograms, redis-benchmark's as it reports them.
        assert!(r["p99_us"].as_f64().unwrap() > 0.0, "{r:#?}");
    }
    let series: Vec<&str> = rows.iter().map(|r| r["series"].as_str().unwrap()).collect();
    assert!(series.contains(&"redis-benchmark-get-p16"), "{series:?}");
    assert!(series.contains(&"loadgen-set-p1"), "{series:?}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## kv: "), "{report}");
    assert!(report.contains("| Redis(antirez) | 0.309 |"), "{report}");
    assert!(report.contains("| **redis** |"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
}
