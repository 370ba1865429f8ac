//! The echo workload against a correct echo peer and against broken ones: counts and bytes
//! add up, and every kind of misbehaviour is detected, reported as what it is, and never
//! hangs the run.

mod util;

use std::time::Duration;

use loadgen::peer::{Misbehave, Peer, closed_port};
use loadgen::{Error, Stop};
use util::{echo_config, run_bounded};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn counts_and_bytes_add_up_in_a_request_count_run() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    for (threads, depth, msg_size) in [(1, 1, 16), (2, 3, 100), (3, 8, 5000)] {
        let mut cfg = echo_config(peer.addr, 12);
        cfg.threads = threads;
        cfg.depth = depth;
        cfg.msg_size = msg_size.into();
        cfg.stop = Stop::Requests(300);
        let s = run_bounded(&cfg, LIMIT).expect("run against a correct peer");
        let msgs = 12 * 300;
        assert_eq!(s.errors.total, 0, "{:?}", s.errors);
        assert_eq!(s.errors.stalled, 0, "{:?}", s.errors);
        assert_eq!(s.connected, 12);
        assert_eq!(s.messages, msgs);
        assert_eq!(s.sent_total, msgs);
        assert_eq!(s.replies_total, msgs);
        assert_eq!(s.bytes_sent, msgs * msg_size as u64);
        assert_eq!(s.bytes_received, msgs * msg_size as u64);
        assert_eq!(s.latency_us.count, msgs);
        assert_eq!(s.histograms.latency.len(), msgs);
        assert!(s.window_secs > 0.0 && s.throughput_per_sec > 0.0);
        assert!(s.latency_us.p50 <= s.latency_us.p99 && s.latency_us.p99 <= s.latency_us.max);
    }
}

#[test]
fn a_duration_run_answers_everything_it_sent() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 8);
    cfg.threads = 2;
    cfg.depth = 2;
    cfg.warmup = Duration::from_millis(200);
    cfg.stop = Stop::Duration(Duration::from_millis(500));
    let s = run_bounded(&cfg, LIMIT).expect("run against a correct peer");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.sent_total, s.replies_total);
    assert!(
        s.messages > 0 && s.messages < s.replies_total,
        "warmup replies are not measured"
    );
    assert_eq!(s.bytes_sent, s.sent_total * 16);
    assert_eq!(s.bytes_received, s.bytes_sent);
    assert_eq!(s.window_secs, 0.5);
}

#[test]
fn a_corrupted_byte_is_caught_on_every_connection() {
    // Flip a byte in the middle of the 11th message of each connection.
    let peer = Peer::spawn(Misbehave::CorruptAt(10 * 32 + 20)).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 4);
    cfg.msg_size = 32.into();
    cfg.stop = Stop::Requests(1000);
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert_eq!(s.errors.corrupt, 4, "{:?}", s.errors);
    assert_eq!(s.errors.total, 4, "{:?}", s.errors);
    assert_eq!(
        s.messages,
        4 * 10,
        "the ten good replies per connection count"
    );
}

#[test]
fn a_byte_of_a_header_is_caught_too() {
    // The low byte of the sequence number of the 3rd message.
    let peer = Peer::spawn(Misbehave::CorruptAt(2 * 16)).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 1);
    cfg.stop = Stop::Requests(10);
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert_eq!(s.errors.corrupt, 1, "{:?}", s.errors);
    assert_eq!(s.messages, 2);
}

#[test]
fn dropped_connections_are_counted_and_the_run_ends() {
    let peer = Peer::spawn(Misbehave::DropAfter(50 * 16)).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 6);
    cfg.threads = 2;
    cfg.stop = Stop::Requests(1000);
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert_eq!(s.errors.closed + s.errors.reset, 6, "{:?}", s.errors);
    assert_eq!(s.messages, 6 * 50);

    let mut cfg = echo_config(peer.addr, 6);
    cfg.stop = Stop::Duration(Duration::from_secs(30));
    let s = run_bounded(&cfg, LIMIT).expect("a duration run ends once every connection is gone");
    assert_eq!(s.errors.closed + s.errors.reset, 6, "{:?}", s.errors);
}

#[test]
fn a_stall_is_reported_and_the_connection_goes_on() {
    let peer = Peer::spawn(Misbehave::StallAt(100 * 16, Duration::from_millis(200)))
        .expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 2);
    cfg.stall = Duration::from_millis(100);
    cfg.stop = Stop::Requests(300);
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert!(s.errors.stalled >= 2, "{:?}", s.errors);
    assert_eq!(
        s.errors.total, 0,
        "a stall is not a failure: {:?}",
        s.errors
    );
    assert_eq!(s.messages, 600);
    assert!(s.latency_us.max >= 200_000.0, "{:?}", s.latency_us);
}

#[test]
fn a_server_that_never_answers_cannot_hang_a_duration_run() {
    let peer = Peer::spawn(Misbehave::Mute).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 3);
    cfg.depth = 2;
    cfg.stop = Stop::Duration(Duration::from_millis(300));
    cfg.grace = Duration::from_millis(200);
    let s = run_bounded(&cfg, Duration::from_secs(20)).expect("the run itself succeeds");
    assert_eq!(s.messages, 0);
    assert_eq!(s.errors.unanswered, 6, "{:?}", s.errors);
}

#[test]
fn a_server_that_never_answers_is_given_up_in_a_request_run() {
    let peer = Peer::spawn(Misbehave::Mute).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 2);
    cfg.stall = Duration::from_millis(50);
    cfg.reply_timeout = Duration::from_millis(300);
    cfg.stop = Stop::Requests(5);
    let s = run_bounded(&cfg, Duration::from_secs(20)).expect("the run itself succeeds");
    assert_eq!(s.errors.timed_out, 2, "{:?}", s.errors);
    assert_eq!(s.errors.stalled, 2, "{:?}", s.errors);
}

#[test]
fn nothing_listening_is_a_usage_error() {
    let cfg = echo_config(closed_port().expect("a closed loopback port"), 3);
    match run_bounded(&cfg, LIMIT) {
        Err(e @ Error::Unreachable { .. }) => assert!(e.is_usage()),
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[test]
fn an_address_that_does_not_resolve_is_a_usage_error() {
    let mut cfg = echo_config(closed_port().expect("a closed loopback port"), 1);
    cfg.addr = "no-such-host.invalid:80".into();
    match run_bounded(&cfg, LIMIT) {
        Err(e @ Error::Resolve { .. }) => assert!(e.is_usage()),
        other => panic!("expected Resolve, got {other:?}"),
    }
    cfg.addr = "not an address".into();
    assert!(matches!(
        run_bounded(&cfg, LIMIT),
        Err(Error::Resolve { .. })
    ));
}

#[test]
fn messages_held_back_by_depth_are_charged_to_the_server_not_the_clients_lag() {
    // The peer stops for 400 ms after each connection's tenth message; with one message in
    // flight, what falls due meanwhile waits for that reply: the server's delay. Its latency
    // counts from the due time; the client's send lag does not grow with it.
    let stall = Duration::from_millis(400);
    let peer = Peer::spawn(Misbehave::StallAt(16 * 10, stall)).expect("start the echo peer");
    for pacing in [loadgen::Pacing::Spin, loadgen::Pacing::Sleep] {
        let mut cfg = echo_config(peer.addr, 4);
        cfg.rate = Some(400.0);
        cfg.pacing = Some(pacing);
        cfg.stop = Stop::Duration(Duration::from_secs(1));
        let s = run_bounded(&cfg, LIMIT).expect("run against a stalling peer");
        assert_eq!(s.errors.total, 0, "{:?}", s.errors);
        let lag = s
            .send_lag_us
            .expect("an open-loop run reports its send lag");
        let stall_us = stall.as_secs_f64() * 1e6;
        assert!(
            s.latency_us.max >= stall_us * 0.9,
            "the held messages waited out the stall: {:?}",
            s.latency_us
        );
        // Each measured message's lag is taken once: at its write, or where it was held, at
        // its release (which of the two is `pacing::Held`'s, tested beside it).
        assert_eq!(lag.count, s.messages, "{pacing:?}: {lag:?}");
        assert_eq!(s.pacing.as_deref(), Some(pacing.as_str()));
        assert!(s.schedule_ok.is_some() && s.schedule_check.is_some());
    }
}
