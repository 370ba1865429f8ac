//! The search suite end to end through the real command line: `cargo xtask bench --suite
//! search` on the small generated corpus, two rounds, dev profile (to keep the test short).
//! Checks that every program ran and agreed with the reference counts, and that the table,
//! CSV, JSON and both box plots were written.

mod util;

#[test]
fn two_rounds_on_the_small_corpus() {
    let out = util::fresh_out("xtask-search-e2e");
    util::run_bench(
        "cargo xtask bench --suite search",
        &[
            "--suite",
            "search",
            "--cargo-profile",
            "dev",
            "--corpus",
            "small",
            "--repeat",
            "2",
            "--server-cpus",
            "0",
        ],
        &out,
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
        "search-monoio",
        "search-compio",
        "search-glommio",
        "search-smol",
        "search-may",
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
    assert!(
        report.contains("search-may reads with blocking `std::fs` calls"),
        "{report}"
    );
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
