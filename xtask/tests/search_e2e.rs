//! The search suite end to end through the real command line: `cargo xtask bench --suite
//! search` on the small generated corpus, two rounds, dev profile (to keep the test short).
//! Checks that every program ran and agreed with the reference counts, and that the table,
//! CSV, JSON and both box plots were written.

use std::process::Command;
use std::time::{Duration, Instant};

/// Builds may be slow on a busy machine; the runs take seconds.
const DEADLINE: Duration = Duration::from_secs(900);

#[test]
fn two_rounds_on_the_small_corpus() {
    let out = std::env::temp_dir().join(format!("xtask-search-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bench", "--suite", "search", "--cargo-profile", "dev"])
        .args(["--corpus", "small", "--repeat", "2", "--server-cpus", "0"])
        .arg("--out")
        .arg(&out)
        .spawn()
        .expect("running the xtask binary");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the xtask") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cargo xtask bench --suite search ran for more than {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "cargo xtask bench --suite search failed: {status}"
    );

    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("search.json")).unwrap()).unwrap();
    let manifest = &run["manifest"];
    let measures = run["measures"].as_array().unwrap();
    let mut programs: Vec<&str> = measures
        .iter()
        .map(|m| m["program"].as_str().unwrap())
        .collect();
    programs.sort_unstable();
    programs.dedup();
    for must in [
        "search-threads",
        "search-tokio",
        "search-tokio-uring",
        "search-fiber",
    ] {
        assert!(programs.contains(&must), "{must} did not run: {programs:?}");
    }
    assert_eq!(measures.len(), 2 * programs.len());
    for m in measures {
        assert!(m["failure"].is_null(), "{m:#}");
        assert_eq!(m["matches"], manifest["matches"], "{m:#}");
        assert_eq!(m["files_matched"], manifest["files_matched"], "{m:#}");
        if m["program"] != "ripgrep" {
            assert_eq!(m["files"], manifest["files"], "{m:#}");
            assert_eq!(m["bytes"], manifest["bytes"], "{m:#}");
        }
        assert!(m["wall_s"].as_f64().unwrap() > 0.0, "{m:#}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| search-fiber |"), "{report}");
    assert!(report.contains("1.17×"), "{report}");
    let csv = std::fs::read_to_string(out.join("search.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + measures.len());
    for svg in ["search-wall.svg", "search-cpu.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(
            text.contains("<svg") && text.contains("search-fiber"),
            "{svg}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
