//! `cargo xtask bench --client-hosts` end to end, on hosts made of network namespaces
//! (`netbed`): a server namespace and two client namespaces joined by veth pairs, none linked
//! to the root namespace, addresses from 198.18.0.0/15, an sshd in each client namespace,
//! with no SFTP subsystem (so no scp). xtask runs in the server namespace, copies loadgen to
//! the clients through their ssh sessions, starts an agent on each over ssh and drives
//! srv-threads with both. Checks that the merged figures are the agents' added: the count is
//! their sum and the merged p99 is the p99 of their histograms added; and that each host's
//! copy went to a directory of its own, removed at the end. Skipped, with the reason, where
//! the machine cannot make the namespaces (not root, no `ip netns`, no sshd).

mod util;

use std::path::Path;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;

fn histogram(path: &Path) -> Histogram<u64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()))
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The test bed of two client hosts, or `None` (said, with why) where this machine cannot make
/// it.
fn two_client_bed(test: &str) -> Option<netbed::Testbed> {
    let bed = netbed::Testbed::builder().clients(2).sftp(false);
    if let Err(skip) = bed.probe() {
        eprintln!("skipped {test}: {skip}");
        return None;
    }
    Some(bed.build().expect("the network test bed"))
}

/// `xtask bench --cargo-profile dev ARGS` in the server's namespace, driven from both client
/// hosts, writing into `out`.
fn bench_from_clients(tb: &netbed::Testbed, args: &[&str], out: &Path) -> std::process::Command {
    let hosts = format!("{},{}", tb.ssh_host(0), tb.ssh_host(1));
    let ssh_config = tb.ssh_config().display().to_string();
    let server_addr = tb.server_addr().to_string();
    let mut cmd = tb.in_server(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["bench", "--cargo-profile", "dev"])
        .args(args)
        .args(["--quiet-wait", "0", "--client-hosts", &hosts])
        .args(["--ssh-config", &ssh_config, "--server-addr", &server_addr])
        .arg("--out")
        .arg(out);
    cmd
}

#[test]
fn two_client_hosts_drive_one_server() {
    let Some(tb) = two_client_bed("two_client_hosts_drive_one_server") else {
        return;
    };
    let out = util::fresh_out("xtask-testbed");
    let mut cmd = bench_from_clients(
        &tb,
        &[
            "--servers",
            "threads",
            "--conns",
            "10",
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--rate",
            "1000",
            "--repeat",
            "1",
        ],
        &out,
    );
    let (status, stderr) = util::run_capturing("xtask bench --client-hosts", &mut cmd);
    assert!(status.success(), "{status}: {stderr}");
    // Each host's copy: its own directory, made by mktemp -d and gone at the end.
    let copies: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split_once(": loadgen copied to ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once("/loadgen,").map(|(dir, _)| dir))
        .collect();
    assert_eq!(copies.len(), 2, "{stderr}");
    assert_ne!(copies[0], copies[1]);
    for dir in copies {
        assert!(dir.contains("/ringside-loadgen."), "{dir}");
        assert!(!Path::new(dir).exists(), "{dir} is left on its host");
    }

    let dir = out.join("quick").join("threads");
    for point in ["closed-c10", "open-c10-r1000"] {
        let merged = json(&dir.join(format!("{point}.loadgen.json")));
        let a0 = json(&dir.join(format!("{point}.agent0.json")));
        let a1 = json(&dir.join(format!("{point}.agent1.json")));
        let who = json(&dir.join(format!("{point}.agents.json")));
        assert_eq!(who[0]["conns"], 5, "{who}");
        assert_eq!(who[1]["conns"], 5, "{who}");
        assert_eq!(who[0]["agent"], tb.ssh_host(0), "{who}");
        assert_eq!(who[1]["agent"], tb.ssh_host(1), "{who}");
        let count = |v: &serde_json::Value| v["messages"].as_u64().unwrap();
        assert!(count(&a0) > 0 && count(&a1) > 0, "{point}: {a0} {a1}");
        assert_eq!(count(&merged), count(&a0) + count(&a1), "{point}");
        assert_eq!(merged["errors"]["total"], 0, "{point}: {merged}");

        // The merged histogram is the agents' histograms added, and its p99 is theirs.
        let mut sum = histogram(&dir.join(format!("{point}.agent0.hist")));
        sum.add(histogram(&dir.join(format!("{point}.agent1.hist"))))
            .unwrap();
        let merged_hist = histogram(&dir.join(format!("{point}.hist")));
        assert_eq!(merged_hist, sum, "{point}");
        assert_eq!(merged_hist.len(), count(&merged), "{point}");
        let p99_us = sum.value_at_quantile(0.99) as f64 / 1000.0;
        let reported = merged["latency_us"]["p99"].as_f64().unwrap();
        assert!(
            (reported - p99_us).abs() < 1e-6,
            "{point}: merged p99 {reported} µs, recomputed {p99_us} µs"
        );
        if point.starts_with("open") {
            let rate = merged["rate"].as_f64().unwrap();
            let r0 = who[0]["rate"].as_f64().unwrap();
            let r1 = who[1]["rate"].as_f64().unwrap();
            assert!(
                (r0 + r1 - rate).abs() < 1e-6,
                "{point}: {r0} + {r1} != {rate}"
            );
        }
    }
    let rows = json(&out.join("summary.json"));
    assert_eq!(rows.as_array().unwrap().len(), 2, "{rows}");
    let meta = json(&out.join("meta.json"));
    assert_eq!(meta["settings"]["client_hosts"][1], tb.ssh_host(1));
    drop(tb);
}

#[test]
fn the_capacity_suite_runs_from_client_hosts() {
    let Some(tb) = two_client_bed("the_capacity_suite_runs_from_client_hosts") else {
        return;
    };
    let out = util::fresh_out("xtask-testbed-capacity");
    let mut cmd = bench_from_clients(
        &tb,
        &[
            "--suite",
            "capacity",
            "--points",
            "echo",
            "--servers",
            "threads",
            "--conns",
            "10",
            "--duration",
            "0.3",
            "--warmup",
            "0.1",
            "--rate",
            "200",
            "--repeat",
            "1",
            "--slo",
            "p99=1s",
        ],
        &out,
    );
    let (status, stderr) =
        util::run_capturing("xtask bench --suite capacity --client-hosts", &mut cmd);
    assert!(status.success(), "{status}: {stderr}");
    // The first probe: Poisson arrivals on both hosts, each drawing its own gaps, merged.
    let dir = out.join("capacity").join("threads");
    let merged = json(&dir.join("echo-s1-00-r200.loadgen.json"));
    assert_eq!(merged["arrivals"], "poisson", "{merged}");
    for agent in ["agent0", "agent1"] {
        let a = json(&dir.join(format!("echo-s1-00-r200.{agent}.json")));
        assert_eq!(a["arrivals"], "poisson", "{agent}: {a}");
        assert!(a["messages"].as_u64().unwrap() > 0, "{agent}: {a}");
    }
    let capacity = std::fs::read_to_string(out.join("capacity.csv")).unwrap();
    let line = capacity
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("{capacity}"));
    assert!(line.starts_with("threads,echo,p99=1s,"), "{capacity}");
    drop(tb);
}
