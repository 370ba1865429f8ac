//! The http suite end to end, small: `cargo xtask bench --suite http` against srv-threads and
//! nginx, 16 connections, short points, both clients and the equal-load point. nginx and wrk
//! are optional: where one is missing its part is skipped with a message and the rest runs.

mod util;

use std::process::{Command, Stdio};

fn installed(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

#[test]
fn http_suite_against_threads_and_nginx() {
    // wrk's `--version` exits 1; nginx has `-v`.
    let wrk = installed("wrk", "--version");
    let nginx = installed("nginx", "-v");
    if !wrk {
        eprintln!("wrk is not installed (apt-get install wrk): its points are skipped");
    }
    if !nginx {
        eprintln!("nginx is not installed (apt-get install nginx): only srv-threads runs");
    }
    let servers = if nginx { "threads,nginx" } else { "threads" };
    let out = util::fresh_out("xtask-http-e2e");
    util::run_bench(
        "cargo xtask bench --suite http",
        &[
            "--cargo-profile",
            "dev",
            "--suite",
            "http",
            "--servers",
            servers,
            "--conns",
            "16",
            // wrk runs whole seconds; loadgen's CPU samples (every 500 ms) need a window.
            "--duration",
            "1",
            "--warmup",
            "0",
            "--rate",
            "500",
            "--quiet-wait",
            "0",
        ],
        &out,
    );

    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    // Per server: both tests by each client at one connection count, and the equal load.
    let per_server = if wrk { 5 } else { 3 };
    let n_servers = if nginx { 2 } else { 1 };
    assert_eq!(rows.len(), per_server * n_servers, "{rows:#?}");
    for r in &rows {
        assert_eq!(r["suite"], "http", "{r:#?}");
        assert_eq!(r["ok"], 1, "{r:#?}");
        assert_eq!(r["errors"], 0, "{r:#?}");
        assert!(r["throughput_per_sec"].as_f64().unwrap() > 0.0, "{r:#?}");
        assert!(r["cpu_us_per_req"].as_f64().unwrap() > 0.0, "{r:#?}");
        assert!(r["p99_us"].as_f64().unwrap() > 0.0, "{r:#?}");
        // nginx stops at the harness's SIGTERM, not at the SIGKILL after the grace period.
        let notes = r["notes"].to_string();
        assert!(!notes.contains("did not stop"), "{notes}");
    }
    let series: Vec<&str> = rows.iter().map(|r| r["series"].as_str().unwrap()).collect();
    assert!(series.contains(&"loadgen-plaintext-p16"), "{series:?}");
    assert!(series.contains(&"loadgen-json-open"), "{series:?}");
    if wrk {
        assert!(series.contains(&"wrk-plaintext-p16"), "{series:?}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## http: "), "{report}");
    assert!(report.contains("16,384"), "{report}");
    assert!(report.contains("| **threads** |"), "{report}");
    if nginx {
        assert!(report.contains("| **nginx** |"), "{report}");
        assert!(report.contains("nginx ÷ first"), "{report}");
        // Its configuration stayed in the run directory.
        let conf = out.join("http/nginx/loadgen-json-p1-c16.server.nginx/nginx.conf");
        assert!(conf.exists(), "{}", conf.display());
    }
    let _ = std::fs::remove_dir_all(&out);
}
