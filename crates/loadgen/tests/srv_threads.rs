//! loadgen against the real thing: `srv-threads`, started through the conformance harness
//! (which builds it first, once per test process, into this test's target directory).

mod util;

use std::time::Duration;

use conformance::{Resolved, SERVERS, Server};
use loadgen::{ChatConfig, ChatProfile, Stop};
use util::{chat_config, echo_config, run_bounded};

const LIMIT: Duration = Duration::from_secs(60);

/// Starts `srv-threads --proto <proto>` (the conformance list's `threads` entry) and waits
/// for its READY line; the `Server` kills it when dropped.
fn server(proto: &str) -> Server {
    let spec = SERVERS
        .iter()
        .find(|s| s.id == "threads")
        .expect("the conformance list has srv-threads");
    match spec.resolve().expect("build srv-threads") {
        Resolved::Ready(target) => target
            .start(&["--proto", proto])
            .unwrap_or_else(|e| panic!("start srv-threads: {e}")),
        // Only a server that needs Go or io_uring can be skipped, and srv-threads needs
        // neither: a skip here is a bug of the list.
        Resolved::Skipped(why) => panic!("srv-threads skipped: {why}"),
    }
}

#[test]
fn echo_counts_and_bytes_are_right() {
    let srv = server("echo");
    let mut cfg = echo_config(srv.addr(), 20);
    cfg.threads = 2;
    cfg.depth = 2;
    cfg.msg_size = 100.into();
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
    let srv = server("echo");
    let mut cfg = echo_config(srv.addr(), 50);
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
    let srv = server("chat");
    let mut cfg = chat_config(srv.addr(), 4, ChatConfig::default());
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
    let mut cfg = chat_config(srv.addr(), 16, room);
    cfg.threads = 2;
    cfg.depth = 2;
    cfg.stop = Stop::Duration(Duration::from_millis(700));
    let s = run_bounded(&cfg, LIMIT).expect("rooms against srv-threads");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert!(s.messages > 0);
    assert_eq!(s.deliveries, 3 * s.messages);
}
