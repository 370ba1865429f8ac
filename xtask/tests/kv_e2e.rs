//! The kv suite end to end, small: `cargo xtask bench --suite kv` against redis-server alone
//! (the ringside servers' kv is checked by their own tests), one connection, short points,
//! both clients, and the Go event-loop article's two points at its full command (100,000
//! requests a test, a few seconds against redis-server); then `--points article-get` alone.
//! Skipped with a message where redis-server or redis-benchmark is missing.

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
    // Two clients × two depths × GET and SET, at one connection count; the article's two.
    assert_eq!(rows.len(), 8 + 2, "{rows:#?}");
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
    // The article's points: its 50 clients whatever --conns says, and every figure of its.
    for id in ["article-set-c50", "article-get-c50"] {
        let r = rows.iter().find(|r| r["point"] == id).expect(id);
        assert_eq!(r["conns"], 50, "{r:#?}");
        assert_eq!(r["stop"], "2000 req/conn", "{r:#?}");
        for m in ["avg_us", "min_us"] {
            assert!(r["per_repeat"][m][0].as_f64().unwrap() > 0.0, "{m}: {r:#?}");
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## kv: "), "{report}");
    assert!(
        report.contains("The Go event-loop article's table, on this machine"),
        "{report}"
    );
    assert!(
        report.contains("| **redis** (Redis(antirez)) | GET"),
        "{report}"
    );
    assert!(
        report.contains("| **go** (Goroutines) | not run |"),
        "{report}"
    );
    assert!(report.contains("| **redis** |"), "{report}");
    let _ = std::fs::remove_dir_all(&out);
    the_article_get_alone();
}

/// `--points article-get`: the article's GETs alone, on the key stored before them.
fn the_article_get_alone() {
    let out = util::fresh_out("xtask-kv-e2e-article");
    util::run_bench(
        "cargo xtask bench --suite kv --points article-get",
        &[
            "--cargo-profile",
            "dev",
            "--suite",
            "kv",
            "--servers",
            "redis",
            "--points",
            "article-get",
            "--quiet-wait",
            "0",
        ],
        &out,
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["point"].as_str().unwrap()).collect();
    assert_eq!(ids, ["article-get-c50"]);
    assert_eq!(rows[0]["ok"], 1, "{:#?}", rows[0]);
    let _ = std::fs::remove_dir_all(&out);
}
