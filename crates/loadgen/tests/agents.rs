//! `loadgen agent` and the fleet that drives it, on one machine: agents as local processes
//! over the same control protocol that ssh carries to other hosts. The barrier, the exact
//! split, the merge (the sum of the agents' histograms, not of their percentiles), and
//! failures that fail the run loudly.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use loadgen::agent::{FromAgent, PROTOCOL, ToAgent};
use loadgen::fleet::{Fleet, share_args, split};
use loadgen::peer::{Misbehave, Peer, closed_port};
use loadgen::{Percentiles, hist};

const START: Duration = Duration::from_secs(20);
const READY: Duration = Duration::from_secs(20);
const RUN: Duration = Duration::from_secs(60);

fn agent_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loadgen"));
    cmd.arg("agent");
    cmd
}

fn local_fleet(n: usize) -> Fleet {
    let agents = (0..n)
        .map(|i| (format!("local{i}"), agent_command()))
        .collect();
    Fleet::start(agents, START).expect("local agents start")
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The base command line of a closed echo run with `requests` echoes a connection.
fn echo_args(addr: SocketAddr, requests: u64) -> Vec<String> {
    args(&[
        "echo",
        "--addr",
        &addr.to_string(),
        "--conns",
        "1",
        "--requests",
        &requests.to_string(),
        "--reply-timeout",
        "10",
        "--connect-timeout",
        "5",
        "--quiet",
    ])
}

#[test]
fn agents_add_up_to_one_run() {
    let peer = Peer::spawn(Misbehave::Nothing).unwrap();
    let mut fleet = local_fleet(2);
    let base = echo_args(peer.addr, 200);
    let shares = split(11, None, 2);
    let per_agent: Vec<Vec<String>> = shares.iter().map(|s| share_args(&base, s)).collect();
    let m = fleet.run(&per_agent, READY, RUN).expect("the fleet's run");
    fleet.stop(Duration::from_secs(5));

    assert_eq!(m.agents.len(), 2);
    assert_eq!(m.agents[0].summary.conns, 6);
    assert_eq!(m.agents[1].summary.conns, 5);
    // A closed loop of K echoes a connection: the counts are exact.
    for a in &m.agents {
        assert_eq!(
            a.summary.messages,
            a.summary.conns as u64 * 200,
            "{}",
            a.agent
        );
        assert_eq!(a.summary.histograms.latency.len(), a.summary.messages);
    }
    assert_eq!(m.summary.conns, 11);
    assert_eq!(m.summary.messages, 11 * 200);
    assert_eq!(m.summary.errors.total, 0);
    // The merged histogram is the sum of the agents' histograms: what one histogram of every
    // sample holds. Its percentiles come from it, not from the agents' percentiles.
    let sum = hist::merge(m.agents.iter().map(|a| &a.summary.histograms.latency));
    assert_eq!(m.summary.histograms.latency, sum);
    assert_eq!(m.summary.histograms.latency.len(), 2200);
    assert_eq!(m.summary.latency_us, Percentiles::of(&sum));
    assert_eq!(m.summary.latency_us.count, 2200);
    for a in &m.agents {
        assert!(
            a.clock.offset_ns.unsigned_abs() < 1_000_000_000,
            "two processes of one host agree on the time: {:?}",
            a.clock
        );
    }
}

#[test]
fn an_open_loop_rate_is_split_with_the_connections() {
    let peer = Peer::spawn(Misbehave::Nothing).unwrap();
    let mut fleet = local_fleet(3);
    let base = args(&[
        "echo",
        "--addr",
        &peer.addr.to_string(),
        "--conns",
        "1",
        "--duration",
        "0.5",
        "--quiet",
    ]);
    let shares = split(7, Some(2_100.0), 3);
    let per_agent: Vec<Vec<String>> = shares.iter().map(|s| share_args(&base, s)).collect();
    let m = fleet.run(&per_agent, READY, RUN).expect("the fleet's run");
    fleet.stop(Duration::from_secs(5));
    let rates: Vec<f64> = m.agents.iter().map(|a| a.summary.rate.unwrap()).collect();
    assert_eq!(rates, [900.0, 600.0, 600.0]);
    assert_eq!(m.summary.rate, Some(2_100.0));
    assert_eq!(m.summary.conns, 7);
    assert_eq!(m.summary.mode, "open");
}

#[test]
fn a_fleet_runs_again_and_again() {
    let peer = Peer::spawn(Misbehave::Nothing).unwrap();
    let mut fleet = local_fleet(2);
    for requests in [10, 20] {
        let base = echo_args(peer.addr, requests);
        let per_agent: Vec<Vec<String>> = split(4, None, 2)
            .iter()
            .map(|s| share_args(&base, s))
            .collect();
        let m = fleet.run(&per_agent, READY, RUN).expect("the fleet's run");
        assert_eq!(m.summary.messages, 4 * requests);
    }
    fleet.stop(Duration::from_secs(5));
}

/// An echo server that counts the bytes that reach it before `go` is set.
struct Watched {
    addr: SocketAddr,
    go: Arc<AtomicBool>,
    early: Arc<AtomicU64>,
    total: Arc<AtomicU64>,
}

fn watched_echo() -> Watched {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let w = Watched {
        addr: listener.local_addr().unwrap(),
        go: Arc::default(),
        early: Arc::default(),
        total: Arc::default(),
    };
    let (go, early, total) = (w.go.clone(), w.early.clone(), w.total.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let (go, early, total) = (go.clone(), early.clone(), total.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    if !go.load(Ordering::SeqCst) {
                        early.fetch_add(n as u64, Ordering::SeqCst);
                    }
                    total.fetch_add(n as u64, Ordering::SeqCst);
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    w
}

/// One agent process, spoken to by hand.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Raw {
    fn start() -> Raw {
        let mut child = agent_command()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut raw = Raw {
            child,
            stdin,
            stdout,
        };
        match raw.recv() {
            FromAgent::Hello { protocol, .. } => assert_eq!(protocol, PROTOCOL),
            other => panic!("expected hello, got {other:?}"),
        }
        raw
    }

    fn send(&mut self, msg: &ToAgent) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message; the agent's own timeouts bound every wait, and a test that hangs
    /// here is killed by the harness's limit on the child (dropped below).
    fn recv(&mut self) -> FromAgent {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the agent closed its output");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn nothing_is_sent_before_the_go() {
    let server = watched_echo();
    let mut agent = Raw::start();
    let run = share_args(
        &echo_args(server.addr, 50),
        &loadgen::fleet::Share {
            index: 0,
            conns: 4,
            rate: None,
        },
    );
    agent.send(&ToAgent::Run {
        protocol: PROTOCOL,
        args: run,
    });
    match agent.recv() {
        FromAgent::Ready { connected } => assert_eq!(connected, 4),
        other => panic!("expected ready, got {other:?}"),
    }
    // The agent answers pings while it waits at the barrier.
    agent.send(&ToAgent::Ping { seq: 7 });
    match agent.recv() {
        FromAgent::Pong { seq, .. } => assert_eq!(seq, 7),
        other => panic!("expected pong, got {other:?}"),
    }
    server.go.store(true, Ordering::SeqCst);
    agent.send(&ToAgent::Go);
    match agent.recv() {
        FromAgent::Done { summary, .. } => assert_eq!(summary.messages, 200),
        other => panic!("expected done, got {other:?}"),
    }
    assert_eq!(
        server.early.load(Ordering::SeqCst),
        0,
        "bytes reached the server before the go"
    );
    assert_eq!(server.total.load(Ordering::SeqCst), 200 * 16);
}

#[test]
fn the_agent_refuses_what_it_cannot_honour() {
    let mut agent = Raw::start();
    for (run, protocol, expect) in [
        (args(&["echo", "--conns", "1"]), PROTOCOL, "--addr"),
        (
            args(&["echo", "--addr", "127.0.0.1:1", "--conns", "1"]),
            99,
            "protocol 99",
        ),
        (
            args(&[
                "echo",
                "--addr",
                "127.0.0.1:1",
                "--conns",
                "1",
                "--json",
                "/tmp/x",
            ]),
            PROTOCOL,
            "drop --json",
        ),
        (
            args(&[
                "echo",
                "--addr",
                "127.0.0.1:1",
                "--conns",
                "1",
                "--server-pid",
                "1",
            ]),
            PROTOCOL,
            "drop --server-pid",
        ),
    ] {
        agent.send(&ToAgent::Run {
            protocol,
            args: run,
        });
        match agent.recv() {
            FromAgent::Failed { message, usage } => {
                assert!(message.contains(expect), "{message}");
                assert!(usage, "{message}");
            }
            other => panic!("expected failed, got {other:?}"),
        }
    }
    // Still serving after every refusal.
    agent.send(&ToAgent::Ping { seq: 1 });
    assert!(matches!(agent.recv(), FromAgent::Pong { seq: 1, .. }));
    agent.send(&ToAgent::Abort);
    let status = agent.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_failing_agent_fails_the_run_with_its_words() {
    let peer = Peer::spawn(Misbehave::Nothing).unwrap();
    let mut fleet = local_fleet(2);
    let good = share_args(
        &echo_args(peer.addr, 10),
        &loadgen::fleet::Share {
            index: 0,
            conns: 2,
            rate: None,
        },
    );
    let bad = share_args(
        &echo_args(closed_port().unwrap(), 10),
        &loadgen::fleet::Share {
            index: 0,
            conns: 2,
            rate: None,
        },
    );
    let e = fleet
        .run(&[good, bad], READY, RUN)
        .expect_err("an agent with no server fails the run");
    assert_eq!(e.agent, "local1");
    assert!(e.what.contains("no server at"), "{e}");
    assert!(e.usage, "{e}");
}

#[test]
fn an_agent_that_cannot_start_fails_the_fleet() {
    let mut dying = Command::new("sh");
    dying.args([
        "-c",
        "echo 'ssh: connect to host nowhere: refused' >&2; exit 255",
    ]);
    let e = Fleet::start(
        vec![
            ("local0".to_string(), agent_command()),
            ("nowhere".to_string(), dying),
        ],
        START,
    )
    .expect_err("a dead agent fails the fleet");
    assert_eq!(e.agent, "nowhere");
    assert!(e.what.contains("hello"), "{e}");
    assert!(e.stderr.contains("connect to host nowhere"), "{e}");

    let mut other = Command::new("sh");
    other.args([
        "-c",
        r#"echo '{"type":"hello","protocol":99,"version":"9.9.9","host":"h"}'; read _"#,
    ]);
    let e = Fleet::start(vec![("old".to_string(), other)], START)
        .expect_err("another protocol is refused");
    assert!(e.to_string().contains("control protocol 99"), "{e}");
}

#[test]
fn a_lost_agent_fails_the_run() {
    let peer = Peer::spawn(Misbehave::Nothing).unwrap();
    // An agent that says hello, answers pings, and dies when the run comes.
    let mut fake = Command::new("sh");
    fake.args([
        "-c",
        r#"echo '{"type":"hello","protocol":1,"version":"0","host":"h"}'
           i=0; while read line; do
             case "$line" in
               *ping*) echo "{\"type\":\"pong\",\"seq\":$i,\"wall_ns\":0}"; i=$((i+1));;
               *run*) echo 'lost the link' >&2; exit 255;;
             esac
           done"#,
    ]);
    let mut fleet = Fleet::start(
        vec![
            ("local0".to_string(), agent_command()),
            ("flaky".to_string(), fake),
        ],
        START,
    )
    .expect("both say hello");
    let base = echo_args(peer.addr, 10);
    let per_agent: Vec<Vec<String>> = split(2, None, 2)
        .iter()
        .map(|s| share_args(&base, s))
        .collect();
    let e = fleet
        .run(&per_agent, READY, RUN)
        .expect_err("a lost agent fails the run");
    assert_eq!(e.agent, "flaky");
    assert!(e.what.contains("lost"), "{e}");
    assert!(e.stderr.contains("lost the link"), "{e}");
}
