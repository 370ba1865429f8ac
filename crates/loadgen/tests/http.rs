//! The http workload: against a small in-test peer, correct and broken, and against
//! `srv-threads --proto http`, closed loop pipelined and open loop, both paths.

mod util;

use std::time::Duration;

use conformance::{Resolved, SERVERS, Server};
use loadgen::{Config, HttpPath, Stop};
use util::http_peer::{HttpMisbehave, HttpPeer};
use util::run_bounded;

const LIMIT: Duration = Duration::from_secs(60);

fn config(addr: std::net::SocketAddr, conns: usize, path: HttpPath) -> Config {
    let mut cfg = Config::http(addr.to_string(), conns, path);
    cfg.connect_timeout = Duration::from_secs(5);
    cfg.reply_timeout = Duration::from_secs(5);
    cfg.grace = Duration::from_secs(2);
    cfg
}

#[test]
fn a_correct_peer_has_no_faults() {
    let peer = HttpPeer::spawn(HttpMisbehave::Nothing);
    let mut cfg = config(peer.addr, 4, HttpPath::Plaintext);
    cfg.depth = 16;
    cfg.stop = Stop::Requests(200);
    let s = run_bounded(&cfg, LIMIT).expect("a run against a correct peer");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!((s.messages, s.replies_total), (800, 800));
    assert_eq!(s.workload, "http");
    assert_eq!(s.path.as_deref(), Some("/plaintext"));
    assert_eq!(
        s.bytes_sent,
        800 * s.msg_size as u64,
        "a request is fixed bytes"
    );
}

#[test]
fn wrong_status_body_and_missing_date_are_caught() {
    for (how, server_error) in [
        (HttpMisbehave::NotFoundFrom(50), true),
        (HttpMisbehave::WrongBodyFrom(50), false),
        (HttpMisbehave::NoDateFrom(50), false),
    ] {
        let peer = HttpPeer::spawn(how);
        let mut cfg = config(peer.addr, 2, HttpPath::Plaintext);
        cfg.depth = 4;
        cfg.stop = Stop::Requests(100);
        let s = run_bounded(&cfg, LIMIT).expect("a run against a broken peer");
        let counted = if server_error {
            s.errors.server_error
        } else {
            s.errors.corrupt
        };
        assert!(counted >= 1, "{how:?}: {:?}", s.errors);
    }
}

/// Starts `srv-threads --proto http` (the conformance list's `threads` entry).
fn server() -> Server {
    let spec = SERVERS
        .iter()
        .find(|s| s.id == "threads")
        .expect("the conformance list has srv-threads");
    match spec.resolve().expect("build srv-threads") {
        Resolved::Ready(target) => target
            .start(&["--proto", "http"])
            .unwrap_or_else(|e| panic!("start srv-threads: {e}")),
        Resolved::Skipped(why) => panic!("srv-threads skipped: {why}"),
    }
}

#[test]
fn srv_threads_plaintext_pipelined_and_json_open_loop() {
    let srv = server();
    let mut cfg = config(srv.addr(), 8, HttpPath::Plaintext);
    cfg.depth = 16;
    cfg.threads = 2;
    cfg.stop = Stop::Requests(500);
    let s = run_bounded(&cfg, LIMIT).expect("plaintext against srv-threads");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 4000);

    let mut cfg = config(srv.addr(), 10, HttpPath::Json);
    cfg.rate = Some(2000.0);
    cfg.depth = 4;
    cfg.stop = Stop::Duration(Duration::from_secs(1));
    let s = run_bounded(&cfg, LIMIT).expect("json at a rate against srv-threads");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(
        (s.mode.as_str(), s.path.as_deref()),
        ("open", Some("/json"))
    );
    // The schedule's slots are exact; a loaded machine may leave a few late ones owed.
    assert!((1900..=2001).contains(&s.messages), "{}", s.messages);
}
