//! The kv workload: against a small in-test store, correct and broken, then against
//! redis-server (when installed) and the ringside servers that serve `--proto kv` (when built
//! with it); the last two skip with a message where they are missing.

mod util;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use loadgen::peer::{Misbehave, Peer};
use loadgen::{Error, KvConfig, Stop, Summary};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use util::kv_peer::{KvMisbehave, KvPeer};
use util::{kv_config, run_bounded};

const LIMIT: Duration = Duration::from_secs(60);

fn kv(get_ratio: f64, keys: u64) -> KvConfig {
    KvConfig {
        get_ratio,
        keys,
        ..KvConfig::default()
    }
}

fn mixed_run(addr: SocketAddr, conns: usize, depth: usize) -> Result<Summary, Error> {
    let mut cfg = kv_config(addr, conns, kv(0.5, 200));
    cfg.threads = 2;
    cfg.depth = depth;
    cfg.stop = Stop::Requests(300);
    run_bounded(&cfg, LIMIT)
}

#[test]
fn a_mix_against_a_correct_store_has_no_faults() {
    let peer = KvPeer::spawn(KvMisbehave::Nothing);
    let s = mixed_run(peer.addr, 8, 4).expect("a run against a correct store");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 2400);
    assert_eq!(s.replies_total, 2400);
    assert_eq!(s.workload, "kv");
    assert_eq!((s.get_ratio, s.keys), (Some(0.5), Some(200)));
    // Half GETs of 32-byte values ($32 header, value, CRLF), half +OK, give or take the mix.
    let per_reply = s.bytes_received as f64 / 2400.0;
    assert!(
        (15.0..35.0).contains(&per_reply),
        "{per_reply} bytes a reply"
    );
}

#[test]
fn set_only_and_open_loop() {
    // A store that forgets serves SETs well; with no GETs nothing is preloaded or looked up.
    let peer = KvPeer::spawn(KvMisbehave::Forget);
    let mut cfg = kv_config(peer.addr, 4, kv(0.0, 1000));
    cfg.stop = Stop::Requests(100);
    let s = run_bounded(&cfg, LIMIT).expect("SETs against a store that forgets");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 400);
    assert_eq!(s.bytes_received, 400 * 5, "+OK and CRLF each");

    let peer = KvPeer::spawn(KvMisbehave::Nothing);
    let mut cfg = kv_config(peer.addr, 10, kv(0.9, 500));
    cfg.rate = Some(2000.0);
    cfg.depth = 4;
    cfg.stop = Stop::Duration(Duration::from_secs(1));
    let s = run_bounded(&cfg, LIMIT).expect("an open-loop run");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.mode, "open");
    // The schedule's slots are exact; a loaded machine may leave a few late ones owed.
    assert!((1900..=2001).contains(&s.messages), "{}", s.messages);
}

#[test]
fn wrong_flipped_missing_and_refused_values_are_caught() {
    for (how, what) in [
        (KvMisbehave::WrongKeyFrom(100), "another key's value"),
        (KvMisbehave::FlipFrom(100), "a flipped bit"),
        (KvMisbehave::Forget, "a missing key"),
    ] {
        let peer = KvPeer::spawn(how);
        let s = mixed_run(peer.addr, 4, 2).expect("the run itself goes on");
        assert!(s.errors.corrupt > 0, "{what} passed: {:?}", s.errors);
        assert!(
            s.messages < 1200,
            "{what}: the faulty connections were given up"
        );
    }
    // The preload stores 200 keys; SETs after it are refused.
    let peer = KvPeer::spawn(KvMisbehave::ErrorFrom(250));
    let s = mixed_run(peer.addr, 4, 2).expect("the run itself goes on");
    assert!(s.errors.server_error > 0, "{:?}", s.errors);
    assert_eq!(s.errors.corrupt, 0, "{:?}", s.errors);
}

#[test]
fn a_server_that_is_not_kv_is_a_usage_error() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("an echo peer on loopback");
    let e = mixed_run(peer.addr, 2, 1).expect_err("an echo server is no store");
    assert!(matches!(e, Error::Preload { .. }), "{e}");
    assert!(e.is_usage());
    assert!(e.to_string().contains("is it a kv server?"), "{e}");
    let refused = KvPeer::spawn(KvMisbehave::ErrorFrom(0));
    let e = mixed_run(refused.addr, 2, 1).expect_err("a store that refuses every SET");
    assert!(e.to_string().contains("-ERR out of luck"), "{e}");
}

/// A server process of a test, stopped (SIGTERM, then SIGKILL after 5 s) when dropped.
struct Server {
    child: Option<Child>,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = Pid::from_raw(child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        if rx.recv_timeout(Duration::from_secs(5)).is_err() {
            let _ = kill(pid, Signal::SIGKILL);
        }
    }
}

/// Starts redis-server with persistence off on a free loopback port, or says why not.
fn redis() -> Option<Server> {
    let installed = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!(
            "skipping: redis-server is not installed (apt-get install redis-server redis-tools)"
        );
        return None;
    }
    // A port the kernel just handed out and took back: free unless something races for it,
    // in which case redis-server fails to bind and the wait below says so.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    let server = Server {
        child: Some(child),
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    let until = Instant::now() + Duration::from_secs(10);
    // Bounded by the deadline.
    while TcpStream::connect_timeout(&server.addr, Duration::from_secs(1)).is_err() {
        assert!(
            Instant::now() < until,
            "redis-server did not listen on {} within 10 s",
            server.addr
        );
        thread::sleep(Duration::from_millis(20));
    }
    Some(server)
}

#[test]
fn redis_server_passes_every_check() {
    let Some(srv) = redis() else { return };
    let s = mixed_run(srv.addr, 50, 16).expect("a run against redis-server");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 15_000);
    let mut cfg = kv_config(srv.addr, 20, kv(1.0, 1000));
    cfg.rate = Some(4000.0);
    cfg.stop = Stop::Duration(Duration::from_millis(500));
    let s = run_bounded(&cfg, LIMIT).expect("GETs at a rate against redis-server");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert!(s.messages > 1900, "{}", s.messages);
}

/// Starts a ringside server binary of `target/debug` with `--proto kv`, or says why not: it
/// is not built (srv-go: `go build -o target/debug/srv-go .` in peers/go, as xtask does), or
/// it does not serve kv.
fn ringside(binary: &str) -> Option<Server> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/debug")
        .join(binary);
    if !bin.exists() {
        eprintln!("skipping {binary}: not built");
        return None;
    }
    let mut child = Command::new(&bin)
        .args(["--proto", "kv", "--addr", "127.0.0.1:0", "--workers", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut server = Server {
        child: Some(child),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let line = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
    match line.trim().strip_prefix("READY ").map(str::parse) {
        Some(Ok(addr)) => {
            server.addr = addr;
            Some(server)
        }
        _ => {
            eprintln!("skipping {binary}: it does not serve --proto kv (no READY line)");
            None
        }
    }
}

#[test]
fn ringside_servers_that_serve_kv_pass_every_check() {
    for binary in [
        "srv-threads",
        "srv-reactor",
        "srv-tokio",
        "srv-tokio-uring",
        "srv-fiber",
        "srv-go",
    ] {
        let Some(srv) = ringside(binary) else {
            continue;
        };
        let s = mixed_run(srv.addr, 20, 16).unwrap_or_else(|e| panic!("{binary}: {e}"));
        assert_eq!(s.errors.total, 0, "{binary}: {:?}", s.errors);
        assert_eq!(s.messages, 6000, "{binary}");
    }
}
