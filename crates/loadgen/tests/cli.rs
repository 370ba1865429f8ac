//! The `loadgen` binary: the files it writes and its exit statuses, as scripts see them.

mod util;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use loadgen::peer::{Misbehave, Peer, closed_port};

/// Runs the binary with `args`, killing nothing but waiting at most a minute for it.
fn loadgen(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start loadgen");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("loadgen ended within a minute")
        .expect("loadgen's output")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn writes_json_hist_hgrm_and_interval_log() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (json, hist, hgrm, hlog) = (
        dir.path().join("s.json"),
        dir.path().join("l.hist"),
        dir.path().join("l.hgrm"),
        dir.path().join("l.hlog"),
    );
    let addr = peer.addr.to_string();
    let out = loadgen(&[
        "echo",
        "--addr",
        &addr,
        "--conns",
        "4",
        "--threads",
        "2",
        "--duration",
        "1.2",
        "--rate",
        "2000",
        "--json",
        path_str(&json),
        "--hist",
        path_str(&hist),
        "--hgrm",
        path_str(&hgrm),
        "--interval-log",
        path_str(&hlog),
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("p99.999"), "{stdout}");

    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("valid JSON");
    for key in ["throughput_per_sec", "client_cpu_per_msg_us"] {
        assert!(v[key].as_f64().is_some(), "{key} in {v}");
    }
    assert!(v["client_bound"].is_boolean());
    assert_eq!(v["errors"]["total"], 0);
    for key in ["p50", "p90", "p99", "p99_9", "p99_99", "p99_999", "max"] {
        assert!(v["latency_us"][key].as_f64().is_some(), "latency_us.{key}");
        assert!(
            v["service_time_us"][key].as_f64().is_some(),
            "service_time_us.{key}"
        );
    }
    let messages = v["messages"].as_u64().unwrap();
    assert!(messages > 2000, "{messages}");

    let bytes = std::fs::read(&hist).unwrap();
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .expect("a V2 histogram");
    assert_eq!(h.len(), messages);

    let table = std::fs::read_to_string(&hgrm).unwrap();
    assert!(table.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
    assert!(
        table.contains(&format!("Total count    = {messages:>12}]")),
        "{table}"
    );

    let log = std::fs::read(&hlog).unwrap();
    let mut total = 0;
    let mut intervals = 0;
    for entry in IntervalLogIterator::new(&log) {
        if let LogEntry::Interval(_) = entry.expect("a well-formed interval log") {
            intervals += 1;
        }
    }
    assert!(intervals >= 1, "at least one interval in a 1.2 s run");
    // The intervals hold the measured values, split by second.
    for line in String::from_utf8(log).unwrap().lines() {
        if line.starts_with('#') || line.starts_with('"') {
            continue;
        }
        total += 1;
    }
    assert_eq!(total, intervals);
}

#[test]
fn no_server_is_a_one_line_error_with_status_2() {
    let addr = closed_port().expect("a closed loopback port").to_string();
    let out = loadgen(&["echo", "--addr", &addr, "--conns", "2", "--duration", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no server at"), "{stderr}");
}

#[test]
fn bad_arguments_exit_with_status_2() {
    for args in [
        &[
            "echo",
            "--addr",
            "nonsense",
            "--conns",
            "1",
            "--duration",
            "1",
        ][..],
        &["echo", "--addr", "127.0.0.1:1", "--conns", "0"],
        &["echo", "--conns", "1"],
        &[
            "echo",
            "--addr",
            "127.0.0.1:1",
            "--conns",
            "1",
            "--msg-size",
            "4",
        ],
        &["ping", "--addr", "127.0.0.1:1", "--conns", "1"],
    ] {
        let out = loadgen(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn malformed_workload_options_are_one_line_errors_with_status_2() {
    let echo = ["echo", "--addr", "127.0.0.1:1", "--conns", "1"];
    let kv = ["kv", "--addr", "127.0.0.1:1", "--conns", "1"];
    for (base, extra, says) in [
        (&echo, &["--msg-size", "64:x"][..], "--msg-size"),
        (&echo, &["--msg-size", "16,8"], "--msg-size"),
        (&echo, &["--requests-per-conn", "0"], "--requests-per-conn"),
        (&echo, &["--arrivals", "onoff:10"], "--arrivals"),
        (&echo, &["--arrivals", "pareto:1.5"], "--arrivals"),
        (&kv, &["--ratio", "1-10"], "--ratio"),
        (&kv, &["--ratio", "1:10", "--get-ratio", "0.5"], "--ratio"),
        (&kv, &["--key-dist", "zipf:-1"], "--key-dist"),
        (&kv, &["--value-size", "32:0"], "--value-size"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = loadgen(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn an_unwritable_output_fails_before_the_run() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    let addr = peer.addr.to_string();
    let out = loadgen(&[
        "echo",
        "--addr",
        &addr,
        "--conns",
        "1",
        "--duration",
        "30",
        "--json",
        "/nonexistent-dir/s.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--json"), "{stderr}");
}
