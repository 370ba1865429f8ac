//! A tiny end-to-end sweep through the real command line: `cargo xtask bench` builds
//! srv-threads and loadgen (dev profile, to keep the test short), runs three one-second points
//! (closed loop at 1 and 10 connections, open loop at 10) twice against srv-threads, and
//! writes a complete run directory. Checks the files, the numbers' sanity, the intervals, that
//! `cargo xtask compare` of the run with itself finds no difference, and that nothing is left
//! running.

mod util;

use std::path::Path;
use std::process::Command;

fn still_running_with(arg: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let zombie = std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            });
            if cmd.contains(arg) && !zombie {
                found.push(cmd);
            }
        }
    }
    found
}

#[test]
fn tiny_sweep_of_one_server() {
    let out = util::fresh_out("xtask-e2e");
    util::run_bench(
        "cargo xtask bench",
        &[
            "--cargo-profile",
            "dev",
            "--servers",
            "threads",
            "--conns",
            "1,10",
            "--duration",
            "1",
            "--warmup",
            "0",
            "--rate",
            "1000",
            "--repeat",
            "2",
            "--quiet-wait",
            "0",
        ],
        &out,
    );

    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), 3, "{rows:#?}");
    for r in &rows {
        assert_eq!(r["server"], "threads");
        assert_eq!(r["ok"], 2, "{r:#?}");
        assert_eq!(r["ci_level"], 0.5, "{r:#?}");
        let (lo, hi) = (
            r["cpu_us_per_req_ci_low"].as_f64().unwrap(),
            r["cpu_us_per_req_ci_high"].as_f64().unwrap(),
        );
        assert!(
            lo <= hi && r["cpu_us_per_req_min"].as_f64().unwrap() == lo,
            "{r:#?}"
        );
        assert_eq!(
            r["per_repeat"]["throughput_per_sec"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(r["throughput_per_sec"].as_f64().unwrap() > 0.0, "{r:#?}");
        assert_eq!(r["errors"], 0, "{r:#?}");
        assert!(r["p99_us"].as_f64().unwrap() > 0.0, "{r:#?}");
        assert!(r["cpu_us_per_req"].as_f64().unwrap() > 0.0, "{r:#?}");
        assert!(r["peak_mem_bytes"].as_f64().unwrap() > 0.0, "{r:#?}");
        // What the kernel counted, or why not: never a zero standing for "not counted". An
        // echo is a read and a write at the least (or an io_uring_enter).
        match r["counters_unavailable"].as_str() {
            Some(why) if r["syscalls_per_req"].is_null() => {
                assert!(why.contains("not"), "{r:#?}");
            }
            _ => assert!(r["syscalls_per_req"].as_f64().unwrap() >= 1.0, "{r:#?}"),
        }
        let hist = r["hist"].as_str().unwrap();
        assert!(out.join(hist).is_file(), "{hist}");
        assert!(out.join(hist.replace(".hist", ".hgrm")).is_file(), "{hist}");
    }
    assert_eq!(rows[1]["mode"], "closed");
    assert_eq!(rows[1]["conns"], 10);
    assert_eq!(rows[2]["mode"], "open");
    assert_eq!(rows[2]["conns"], 10);
    assert_eq!(rows[2]["rate"], 1000.0);

    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4);
    let head = csv.lines().next().unwrap();
    for c in [
        "throughput_per_sec_ci_low",
        "cpu_us_per_req_ci_high",
        "cpu_us_per_req_min",
        "p99_us_ci_low",
        "syscalls_per_req",
        "syscalls_by_name",
    ] {
        assert!(head.split(',').any(|h| h == c), "{c} not in {head}");
    }
    let compared = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("compare")
        .args([&out, &out])
        .output()
        .expect("running cargo xtask compare");
    assert!(compared.status.success());
    let text = String::from_utf8_lossy(&compared.stdout);
    let body: Vec<&str> = text.lines().filter(|l| l.starts_with("| quick")).collect();
    assert_eq!(body.len(), 3, "{text}");
    // No verdict anywhere: every B/A cell is `~ (ratio [interval])`, none `ratio [..] (p=…)`.
    assert!(body.iter().all(|l| !l.contains("(p")), "{text}");
    // A point something else disturbed (‡: another job on the server's CPU) is not judged
    // at all; every other shows its ratio of 1.
    assert!(
        body.iter()
            .all(|l| l.contains("~ (1.00×") || l.contains('‡')),
        "{text}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert!(
        meta["kernel"].is_string() && meta["command"].as_str().unwrap().contains("--conns 1,10")
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("## At a glance") && report.contains("| **threads** |"),
        "{report}"
    );
    // The report opens with its conclusion, written from the headline point's verdicts.
    assert!(
        report.contains("**In one paragraph.** At 1,000 echoes/s over 10 connections"),
        "{report}"
    );
    assert!(Path::new(&out.join("plots/quick-throughput.svg")).is_file());
    assert!(Path::new(&out.join("plots/quick-latency-open.svg")).is_file());
    // The open-loop point's CPU per echo: a ranked dot plot, a row per server.
    let ranked = std::fs::read_to_string(out.join("plots/quick-cpu-per-echo-open.svg")).unwrap();
    assert!(ranked.contains("\nthreads\n"), "{ranked}");
    assert!(report.contains("CPU per echo at equal load"), "{report}");

    let left = still_running_with(&out.display().to_string());
    assert!(left.is_empty(), "left running: {left:?}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// srv-threads at one connection, in windows as short as the default run's: its connection
/// thread exits when loadgen closes the connection right after the window, which a sampler of
/// the live threads lost whole (0.00 µs per echo). Its cgroup's counter, read at the window's
/// edges, keeps it.
#[test]
fn a_thread_per_connection_server_costs_what_it_spends() {
    let out = util::fresh_out("xtask-e2e-exact");
    util::run_bench(
        "cargo xtask bench",
        &[
            "--cargo-profile",
            "dev",
            "--servers",
            "threads",
            "--conns",
            "1",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--rate",
            "1000",
            "--repeat",
            "1",
            "--quiet-wait",
            "0",
        ],
        &out,
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    let accounting = meta["accounting"].as_str().unwrap();
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r["ok"], 1, "{r:#?}");
        // An echo is at least a read and a write: a microsecond and more on any machine.
        assert!(r["cpu_us_per_req"].as_f64().unwrap() > 1.0, "{r:#?}");
        let kind = r["cpu_accounting"].as_str().unwrap();
        assert!(accounting.starts_with(kind), "{kind} against {accounting}");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("CPU accounting: "), "{report}");
    std::fs::remove_dir_all(&out).unwrap();
}
