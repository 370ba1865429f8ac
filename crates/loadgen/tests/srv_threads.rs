//! loadgen against the real thing: `srv-threads`, when it has been built.
//!
//! The binary is found through `$SRV_THREADS` or in the workspace's `target/debug`; build it
//! with `cargo build -p server-threads`. Without it these tests say so and pass, as tests
//! that need io_uring do on kernels without it.

mod util;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use loadgen::{ChatConfig, ChatProfile, Stop};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use util::{chat_config, echo_config, run_bounded};

const LIMIT: Duration = Duration::from_secs(60);

/// A running `srv-threads`, stopped when dropped.
struct Server {
    child: Option<Child>,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SIGTERM lets the chat server remove its temporary room directory; a server that
        // does not exit within 5 s gets SIGKILL. The child is ours, by its pid.
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

fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SRV_THREADS") {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/srv-threads");
    p.exists().then_some(p)
}

/// Starts `srv-threads --proto <proto>` and waits (at most 10 s) for its READY line.
fn server(proto: &str) -> Option<Server> {
    let Some(bin) = binary() else {
        eprintln!("skipping: srv-threads is not built (cargo build -p server-threads)");
        return None;
    };
    let mut child = Command::new(&bin)
        .args(["--proto", proto, "--addr", "127.0.0.1:0"])
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
        addr: "127.0.0.1:0".parse().expect("a socket address"),
    };
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("srv-threads printed READY within 10 s");
    server.addr = line
        .trim()
        .strip_prefix("READY ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not a READY line: {line:?}"));
    Some(server)
}

#[test]
fn echo_counts_and_bytes_are_right() {
    let Some(srv) = server("echo") else { return };
    let mut cfg = echo_config(srv.addr, 20);
    cfg.threads = 2;
    cfg.depth = 2;
    cfg.msg_size = 100;
    cfg.stop = Stop::Requests(500);
    let s = run_bounded(&cfg, LIMIT).expect("run against srv-threads");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 10_000);
    assert_eq!(s.replies_total, 10_000);
    assert_eq!(s.bytes_sent, 1_000_000);
    assert_eq!(s.bytes_received, 1_000_000);
    assert_eq!(s.latency_us.count, 10_000);
}

#[test]
fn echo_open_loop_keeps_its_rate() {
    let Some(srv) = server("echo") else { return };
    let mut cfg = echo_config(srv.addr, 50);
    cfg.rate = Some(5_000.0);
    cfg.depth = 4;
    cfg.stop = Stop::Duration(Duration::from_secs(2));
    let s = run_bounded(&cfg, LIMIT).expect("run against srv-threads");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    let err = (s.messages as f64 - 10_000.0).abs() / 10_000.0;
    assert!(err <= 0.02, "{} messages in 2 s at 5000/s", s.messages);
}

#[test]
fn chat_ingest_and_rooms_add_up() {
    let Some(srv) = server("chat") else { return };
    let mut cfg = chat_config(srv.addr, 4, ChatConfig::default());
    cfg.depth = 8;
    cfg.stop = Stop::Requests(200);
    let s = run_bounded(&cfg, LIMIT).expect("ingest against srv-threads");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 800);
    assert_eq!(s.bytes_sent, 800 * 64);

    let room = ChatConfig {
        profile: ChatProfile::Room,
        room_size: 4,
        ..ChatConfig::default()
    };
    let mut cfg = chat_config(srv.addr, 16, room);
    cfg.threads = 2;
    cfg.depth = 2;
    cfg.stop = Stop::Duration(Duration::from_millis(700));
    let s = run_bounded(&cfg, LIMIT).expect("rooms against srv-threads");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert!(s.messages > 0);
    assert_eq!(s.deliveries, 3 * s.messages);
}
