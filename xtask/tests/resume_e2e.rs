//! No finished point is lost: a bench killed with SIGKILL in the middle leaves a directory
//! that `cargo xtask report` renders, and `cargo xtask bench --resume DIR` runs only what is
//! missing. The runs that ended before the kill keep their outcome files untouched; a killed
//! capacity search carries on from its kept probes.

mod util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Every `*.outcome.json` under `dir`, with its contents, but for the anatomy round's
/// (`anatomy/`, one more round after the measured ones: `--counters pass`).
fn outcomes(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut found = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && p != dir.join("anatomy") {
                todo.push(p);
            } else if p.to_string_lossy().ends_with(".outcome.json") {
                found.insert(p.clone(), std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    found
}

/// The pids of `pid`'s descendants, from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(e.path().join("stat"))
            && let Some(rest) = stat.rsplit(')').next()
            && let Some(ppid) = rest.split_whitespace().nth(1).and_then(|x| x.parse().ok())
        {
            parent_of.push((p, ppid));
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for &(child, parent) in &parent_of {
            if parent == p {
                out.push(child);
                todo.push(child);
            }
        }
    }
    out
}

/// Kills `child` and everything it started.
fn kill_family(child: &mut std::process::Child) {
    let family = descendants(child.id());
    let _ = child.kill();
    let _ = child.wait();
    for pid in family {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

/// Runs `xtask bench --resume out` to its end; its exit status.
fn resume(out: &Path) -> std::process::ExitStatus {
    let mut done = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bench", "--no-build", "--resume"])
        .arg(out)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(s) = done.try_wait().unwrap() {
            return s;
        }
        if started.elapsed() > util::DEADLINE {
            let _ = done.kill();
            panic!("--resume ran for more than {:?}", util::DEADLINE);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_killed_capacity_search_resumes_from_its_probes() {
    let out = util::fresh_out("xtask-resume-capacity");
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "bench",
            "--cargo-profile",
            "dev",
            "--suite",
            "capacity",
            "--points",
            "echo",
            "--servers",
            "threads",
            "--conns",
            "4",
            "--duration",
            "0.2",
            "--warmup",
            "0",
            "--rate",
            "200",
            "--repeat",
            "2",
            "--slo",
            "p99=2s",
            "--quiet-wait",
            "0",
            "--out",
        ])
        .arg(&out)
        .spawn()
        .expect("running the xtask binary");
    // Killed once two probes have ended, unless the search is over by then (a client-bound
    // first probe, on a busy machine, ends it at once).
    let started = Instant::now();
    while outcomes(&out).len() < 2 && child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < util::DEADLINE, "no probe ended in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_family(&mut child);
    let before = outcomes(&out);
    assert!(!before.is_empty());
    assert!(resume(&out).success(), "--resume of the capacity run");
    let after = outcomes(&out);
    for (path, text) in &before {
        assert_eq!(after.get(path), Some(text), "{} ran again", path.display());
    }
    // A probe a row, in the order the searches made them (`--repeat 2`: two searches, each
    // numbering its probes from 0), and the finding.
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), after.len(), "{rows:#?}");
    let (mut search, mut step) = (1, 0);
    // First the machine's resolution: floor-epoll probed at the first rate.
    assert_eq!(rows[0]["point"], "echo-resolution", "{:#}", rows[0]);
    assert_eq!(rows[0]["server"], "floor-epoll", "{:#}", rows[0]);
    for r in &rows[1..] {
        let point = r["point"].as_str().unwrap();
        if step > 0 && point.starts_with(&format!("echo-s{}-00-r", search + 1)) {
            (search, step) = (search + 1, 0);
        }
        assert!(
            point.starts_with(&format!("echo-s{search}-{step:02}-r")),
            "{point}"
        );
        step += 1;
        assert_eq!(r["arrivals"], "poisson", "{r}");
        assert_eq!(r["slo"], "p99=2s", "{r}");
    }
    let capacity = std::fs::read_to_string(out.join("capacity.csv")).unwrap();
    assert!(
        capacity
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("threads,echo,p99=2s,")),
        "{capacity}"
    );
}

#[test]
fn a_killed_run_renders_and_resumes() {
    let out = util::fresh_out("xtask-resume");
    let args = [
        "--cargo-profile",
        "dev",
        "--servers",
        "threads",
        "--conns",
        "2,4",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--rate",
        "500",
        "--repeat",
        "2",
        "--quiet-wait",
        "0",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("bench")
        .args(args)
        .arg("--out")
        .arg(&out)
        .spawn()
        .expect("running the xtask binary");
    // Kill it, and everything it started, once two runs have ended.
    let started = Instant::now();
    loop {
        if outcomes(&out).len() >= 2 {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the bench ended before it could be killed"
        );
        assert!(
            started.elapsed() < util::DEADLINE,
            "no run ended within {:?}",
            util::DEADLINE
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_family(&mut child);
    let before = outcomes(&out);
    assert!(before.len() >= 2 && before.len() < 6, "{before:?}");

    // What is there renders.
    let status = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("report")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "report of the killed run: {status}");
    assert!(out.join("report.md").is_file());

    // The order of every round, and the seed that drew it, are recorded before the first
    // run, and --resume keeps both.
    let meta = |dir: &Path, field: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(dir.join("meta.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()[field].clone()
    };
    let orders = |dir: &Path| meta(dir, "orders");
    let order_before = orders(&out);
    let seed_before = meta(&out, "order_seed");
    assert!(seed_before.is_u64(), "order_seed: {seed_before}");
    assert_eq!(
        order_before.as_array().map(Vec::len),
        Some(3),
        "{order_before}"
    );
    assert_eq!(
        order_before[0]["rounds"],
        serde_json::json!([["threads"], ["threads"]])
    );

    // As though the run had been started from another commit than the checkout's now:
    // --resume keeps the run's commit, and says it was completed from this one.
    let started_at = "feedfacefeedfacefeedfacefeedfacefeedface";
    let path = out.join("meta.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    m["commit"] = serde_json::json!(started_at);
    m["dirty"] = serde_json::json!(false);
    std::fs::write(&path, serde_json::to_string_pretty(&m).unwrap()).unwrap();

    // The rest runs; what ended before stays as it was.
    let status = resume(&out);
    assert!(status.success(), "--resume: {status}");
    assert_eq!(orders(&out), order_before);
    assert_eq!(meta(&out, "order_seed"), seed_before);
    assert_eq!(meta(&out, "commit"), serde_json::json!(started_at));
    assert_eq!(meta(&out, "dirty"), serde_json::json!(false));
    let resumed_with = meta(&out, "resumed_with");
    assert_eq!(
        resumed_with.as_array().map(Vec::len),
        Some(1),
        "{resumed_with}"
    );
    let after = outcomes(&out);
    assert_eq!(after.len(), 6, "3 points × 2 rounds: {after:?}");
    let counted = outcomes(&out.join("anatomy"));
    assert_eq!(
        counted.len(),
        3,
        "the anatomy round, 3 points × 1: {counted:?}"
    );
    for (path, text) in &before {
        assert_eq!(
            after.get(path),
            Some(text),
            "{} was run again",
            path.display()
        );
    }
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), 3, "{rows:#?}");
    for r in &rows {
        assert_eq!(r["ok"], 2, "{r}");
    }

    // --resume takes the run's own options, none of its own.
    let refused = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bench", "--suite", "kv", "--resume"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
}
