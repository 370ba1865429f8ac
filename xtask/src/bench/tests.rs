//! The command line of `cargo xtask bench` parsed as clap parses it, and the order of its
//! runs.
//!
//! It may call what `bench` may.

use clap::Parser;

use super::plan::points;
use super::sweep::schedule;
use super::*;
use crate::plan::servers::Variant;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench)
}

/// A machine of `n` CPUs, a core each, one node.
fn machine(n: usize) -> crate::plan::topology::Topology {
    crate::plan::topology::Topology {
        cores: (0..n)
            .map(|c| crate::plan::topology::Core {
                node: 0,
                package: 0,
                core: c,
                cpus: vec![c],
            })
            .collect(),
    }
}

/// Parsed and placed on a machine of `n` CPUs.
fn placed(args: &[&str], n: usize) -> anyhow::Result<BenchArgs> {
    let mut a = parse(args)?;
    a.place(&machine(n))?;
    Ok(a)
}

#[test]
fn placement_defaults_follow_the_machine() {
    let a = placed(&[], 2).unwrap();
    assert_eq!(
        (a.server_cpus.to_string(), a.client_cpus.to_string()),
        ("1".into(), "0".into())
    );
    let a = placed(&[], 16).unwrap();
    assert_eq!(a.server_cpus.to_string(), "8,9,10,11,12,13,14,15");
    assert_eq!(a.client_cpus.to_string(), "0,1,2,3,4,5,6,7");
    assert_eq!(a.workers(), 8);
    // One side given: the other is the rest of the machine.
    let a = placed(&["--server-cpus", "0-3"], 16).unwrap();
    assert_eq!(a.client_cpus.to_string(), "4,5,6,7,8,9,10,11,12,13,14,15");
    let a = placed(&["--client-cpus", "8-15"], 16).unwrap();
    assert_eq!(a.server_cpus.to_string(), "0,1,2,3,4,5,6,7");
    let a = placed(&["--server-cpus", "0"], 2).unwrap();
    assert_eq!(a.client_cpus.to_string(), "1");
    let p = a.placed.as_ref().unwrap();
    assert_eq!(p.topology, "2 CPUs: 2 cores × 1 thread, 1 NUMA node");
}

#[test]
fn the_search_suite_may_take_every_cpu() {
    // No loadgen runs beside it, so there is no other side to leave CPUs for.
    let a = placed(&["--suite", "search", "--server-cpus", "0,1"], 2).unwrap();
    assert_eq!(a.server_cpus.to_string(), "0,1");
    let a = placed(&["--suite", "search", "--server-cpus", "0-15"], 16).unwrap();
    assert_eq!(a.server_cpus.len(), 16);
    let a = placed(&["--suite", "search"], 16).unwrap();
    assert_eq!(a.server_cpus.to_string(), "8,9,10,11,12,13,14,15");
    // The other suites still need CPUs for loadgen.
    let e = placed(&["--server-cpus", "0,1"], 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("give the other side's CPUs too"), "{e}");
}

#[test]
fn overlapping_cpus_are_refused_unless_asked_for() {
    let e = placed(&["--server-cpus", "0,1", "--client-cpus", "1"], 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("would share CPU 1"), "{e}");
    assert!(e.contains("--allow-overlap"), "{e}");
    let a = placed(
        &[
            "--server-cpus",
            "0,1",
            "--client-cpus",
            "1",
            "--allow-overlap",
        ],
        2,
    )
    .unwrap();
    assert_eq!(a.workers(), 2);
    let e = placed(&["--server-cpus", "0,1"], 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("takes every CPU"), "{e}");
}

#[test]
fn search_options() {
    let a = parse(&[
        "--suite", "search", "--corpus", "small", "--cold", "--tree", "/t",
    ])
    .unwrap();
    assert_eq!(a.suites(), [Suite::Search]);
    assert_eq!(a.corpus, CorpusSize::Small);
    assert!(a.cold);
    assert_eq!(a.tree.as_deref(), Some(std::path::Path::new("/t")));
    assert_eq!(a.needle, "io_uring");
    assert!(Suite::Search.points(&a.overrides(1)).is_empty());
    assert!(parse(&["--corpus", "huge"]).is_err());
}

#[test]
fn defaults() {
    let a = placed(&[], 2).unwrap();
    assert_eq!(a.suites(), [Suite::Quick]);
    assert_eq!(a.server_cpus, CpuList::one(1));
    assert_eq!(a.client_cpus, CpuList::one(0));
    assert_eq!(a.workers(), 1);
    assert_eq!(a.repeat, None);
    assert_eq!(a.repeats(Suite::Quick), 5);
    assert_eq!(a.repeats(Suite::Memory), 1);
    assert_eq!(a.repeats(Suite::Search), 15);
    assert_eq!(a.server_cpu_quota, None);
    assert_eq!(a.counters, super::sweep::Counters::Pass);
    assert_eq!(a.cargo_profile, "release");
    assert_eq!(a.quiet_wait, 10.0);
}

#[test]
fn every_option() {
    let a = placed(
        &[
            "--suite",
            "emper-echo,chat-cpu,emper-echo",
            "--servers",
            "threads,fiber+completer",
            "--conns",
            "1,10",
            "--duration",
            "2.5",
            "--warmup",
            "0",
            "--repeat",
            "3",
            "--server-cpus",
            "2-3",
            "--client-cpus",
            "0,1",
            "--workers",
            "4",
            "--rate",
            "1000",
            "--out",
            "/tmp/x",
            "--no-build",
            "--quiet-wait",
            "0",
            "--server-cpu-quota",
            "0.5",
            "--counters",
            "off",
        ],
        4,
    )
    .unwrap();
    assert_eq!(a.suites(), [Suite::EmperEcho, Suite::ChatCpu]);
    assert_eq!(a.servers.as_deref(), Some("threads,fiber+completer"));
    assert_eq!(a.conns, Some(ConnList(vec![1, 10])));
    assert_eq!(
        (a.duration, a.warmup, a.rate),
        (Some(2.5), Some(0.0), Some(1000.0))
    );
    assert_eq!(a.repeat, Some(3));
    assert_eq!(a.repeats(Suite::Memory), 3);
    assert_eq!(a.server_cpu_quota, Some(0.5));
    assert_eq!(a.counters, super::sweep::Counters::Off);
    assert_eq!(a.server_cpus.to_string(), "2,3");
    assert_eq!(a.client_cpus.to_string(), "0,1");
    assert_eq!(a.workers(), 4);
    assert!(a.no_build && !a.list);
    assert_eq!(a.quiet_wait, 0.0);
    assert_eq!(a.overrides(a.workers()).conns, Some(vec![1, 10]));
}

#[test]
fn bad_options_are_refused_with_the_valid_values() {
    let e = parse(&["--suite", "fast"]).unwrap_err().to_string();
    assert!(
        e.contains("quick") && e.contains("emper-echo") && e.contains("memory"),
        "{e}"
    );
    assert!(parse(&["--duration", "0"]).is_err());
    assert!(parse(&["--duration", "-1"]).is_err());
    assert!(parse(&["--warmup", "x"]).is_err());
    assert!(parse(&["--repeat", "0"]).is_err());
    assert!(parse(&["--conns", "0,1"]).is_err());
    assert!(parse(&["--server-cpus", "1-0"]).is_err());
    assert!(parse(&["--rate", "0"]).is_err());
    assert!(parse(&["--workers", "0"]).is_err());
    assert!(parse(&["--server-cpu-quota", "0"]).is_err());
    let e = parse(&["--suite", "capacity", "--slo", "p99=5"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no unit: give us, ms or s"), "{e}");
    let e = parse(&["--slo", "p97=1ms"]).unwrap_err().to_string();
    assert!(e.contains("p50, p90, p95, p99, p99.9, p99.99, max"), "{e}");
    assert!(parse(&["--arrivals", "bursty"]).is_err());
}

#[test]
fn capacity_options() {
    let a = parse(&[
        "--suite",
        "capacity",
        "--slo",
        "p99.9=800us",
        "--arrivals",
        "uniform",
    ])
    .unwrap();
    assert_eq!(
        a.slo.as_ref().map(ToString::to_string).as_deref(),
        Some("p99.9=800us")
    );
    let points = Suite::Capacity.points(&a.overrides(1));
    let ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["echo", "churn", "kv", "http"]);
    assert!(
        points
            .iter()
            .all(|p| p.arrivals == suites::Arrivals::Uniform)
    );
    // Poisson unless told otherwise, in this suite only.
    let a = parse(&["--suite", "capacity"]).unwrap();
    assert!(
        Suite::Capacity
            .points(&a.overrides(1))
            .iter()
            .all(|p| p.arrivals == suites::Arrivals::Poisson)
    );
    assert!(
        Suite::Quick
            .points(&a.overrides(1))
            .iter()
            .all(|p| p.arrivals == suites::Arrivals::Uniform)
    );
}

#[test]
fn every_round_runs_every_server_in_the_order_of_the_design() {
    let a = parse(&["--conns", "1,10", "--repeat", "2"]).unwrap();
    let pts = points(&a);
    let v = |n: &str| Variant {
        name: n.into(),
        binary: format!("srv-{n}"),
        flags: vec![],
        about: String::new(),
        command: None,
    };
    let servers = [v("a"), v("b"), v("c")];
    let plan =
        |seed| crate::plan::order::plan(&pts, &servers, |v, w| v.serves(w), |s| a.repeats(s), seed);
    let orders = plan(11);
    let runs = schedule(&orders, &servers);
    // Point after point, round after round, each round every server once, in the order the
    // design's rows give the servers drawn for the point.
    let mut expected = Vec::new();
    for (point, o) in orders.iter().enumerate() {
        let drawn = &o.rounds[0];
        let second: Vec<&String> = [1, 2, 0].iter().map(|&i| &drawn[i]).collect();
        assert_eq!(o.rounds[1].iter().collect::<Vec<_>>(), second, "{o:?}");
        for (round, names) in o.rounds.iter().enumerate() {
            for n in names {
                let server = servers.iter().position(|v| &v.name == n).unwrap();
                expected.push((point, round, server));
            }
        }
    }
    let order: Vec<(usize, usize, usize)> =
        runs.iter().map(|r| (r.point, r.round, r.server)).collect();
    assert_eq!(order, expected);
    assert_eq!(runs.len(), pts.len() * 2 * 3);
    // The same seed, the same order; the seeds' draws differ.
    assert_eq!(plan(11), orders);
    assert!((0..8).any(|seed| plan(seed) != orders));
    assert_eq!(pts.last().map(|p| p.id.as_str()), Some("open-c10-r20000"));
}

#[test]
fn an_echo_only_server_sits_out_the_chat_points() {
    let a = parse(&["--suite", "quick,chat-cpu", "--conns", "1", "--repeat", "1"]).unwrap();
    let pts = points(&a);
    let floor = Variant {
        name: "floor-epoll".into(),
        binary: "srv-floor".into(),
        flags: vec!["--api".into(), "epoll".into()],
        about: String::new(),
        command: None,
    };
    let floor = [floor];
    let orders = crate::plan::order::plan(&pts, &floor, |v, w| v.serves(w), |s| a.repeats(s), 1);
    let runs = schedule(&orders, &floor);
    assert!(!runs.is_empty());
    assert!(
        runs.iter().all(|r| pts[r.point].suite != Suite::ChatCpu),
        "srv-floor was scheduled for a chat point"
    );
}

#[test]
fn go_poll_sits_out_a_chat_suite_with_a_message() {
    let mut inv = crate::plan::servers::Inventory {
        go_dir: Some("peers/go".into()),
        go_version: Some("go version go1.26".into()),
        ..Default::default()
    };
    inv.packages
        .insert("srv-threads".into(), "server-threads".into());
    let a = parse(&["--suite", "quick,chat-cpu", "--conns", "1", "--repeat", "1"]).unwrap();
    let pts = points(&a);
    let mut servers = inv.select("go-poll,threads").unwrap();
    let mut skipped = Vec::new();
    super::plan::sit_out(&pts, &inv, &mut servers, &mut skipped).unwrap();
    // It runs the echo points and sits out the chat ones, and says so.
    assert_eq!(servers.len(), 2);
    assert_eq!(
        skipped,
        ["go-poll in chat-cpu: it does not serve --proto chat (the conformance list's limits)"]
    );
    // Alone on a chat suite it is refused before anything runs, with the reason.
    let a = parse(&["--suite", "chat-cpu", "--conns", "1", "--repeat", "1"]).unwrap();
    let mut servers = inv.select("go-poll").unwrap();
    let mut skipped = Vec::new();
    let e = super::plan::sit_out(&points(&a), &inv, &mut servers, &mut skipped)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no server of --servers serves") && e.contains("--proto chat"),
        "{e}"
    );
}

#[test]
fn a_compute_variant_sits_out_kv_and_http_with_a_line() {
    let mut inv = crate::plan::servers::Inventory::default();
    inv.packages
        .insert("srv-threads".into(), "server-threads".into());
    let a = parse(&["--suite", "quick,kv,http", "--conns", "1", "--repeat", "1"]).unwrap();
    let pts = points(&a);
    let mut servers = inv.select("threads+compute-us=100,threads").unwrap();
    let compute = servers[0].clone();
    let mut skipped = Vec::new();
    super::plan::sit_out(&pts, &inv, &mut servers, &mut skipped).unwrap();
    // It runs the echo points only, and the kv and http suites say why it is not there.
    assert_eq!(servers.len(), 2);
    assert!(pts.iter().any(|p| inv.serves(&compute, p.workload)));
    assert!(
        pts.iter()
            .filter(|p| p.workload.proto() != "echo")
            .all(|p| !inv.serves(&compute, p.workload))
    );
    assert_eq!(
        skipped,
        [
            "threads+compute-us=100 in kv's kv points: --compute-us applies to echo only",
            "threads+compute-us=100 in http's http points: --compute-us applies to echo only",
        ]
    );
    // `+compute-us=0` is no setting at all: it serves everything.
    let zero = inv.select("threads+compute-us=0").unwrap();
    assert!(pts.iter().all(|p| inv.serves(&zero[0], p.workload)));
}
