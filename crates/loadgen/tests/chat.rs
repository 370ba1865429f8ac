//! The chat workloads against a small chat peer: ACKs and deliveries add up, and a server
//! that skips, repeats or refuses messages is caught.

mod util;

use std::time::Duration;

use loadgen::peer::{Misbehave, Peer};
use loadgen::{ChatConfig, ChatProfile, Error, Stop};
use util::chat_peer::{ChatMisbehave, ChatPeer};
use util::{chat_config, run_bounded};

const LIMIT: Duration = Duration::from_secs(60);

fn room(size: usize) -> ChatConfig {
    ChatConfig {
        profile: ChatProfile::Room,
        room_size: size,
        ..ChatConfig::default()
    }
}

#[test]
fn ingest_awaits_and_counts_every_ack() {
    let peer = ChatPeer::spawn(ChatMisbehave::Nothing);
    let mut cfg = chat_config(peer.addr, 4, ChatConfig::default());
    cfg.threads = 2;
    cfg.depth = 4;
    // 64-byte lines at 64 kB/s: 1000 lines/s per connection.
    cfg.msg_size = 64.into();
    if let loadgen::Workload::Chat(c) = &mut cfg.workload {
        c.byte_rate = 64_000.0;
    }
    cfg.stop = Stop::Requests(300);
    let s = run_bounded(&cfg, LIMIT).expect("run against a correct chat peer");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 1200);
    assert_eq!(s.replies_total, 1200);
    assert_eq!(s.bytes_sent, 1200 * 64);
    assert_eq!(s.mode, "open");
    assert_eq!(s.rate, Some(4000.0));
    assert_eq!(s.profile.as_deref(), Some("ingest"));
    assert_eq!(s.delivery_latency_us, None);
}

#[test]
fn every_member_gets_every_message_of_its_room() {
    let peer = ChatPeer::spawn(ChatMisbehave::Nothing);
    for (threads, rate) in [(1, None), (2, Some(3000.0)), (3, None)] {
        let mut cfg = chat_config(peer.addr, 12, room(4));
        cfg.threads = threads;
        cfg.rate = rate;
        cfg.depth = 2;
        cfg.stop = Stop::Duration(Duration::from_millis(500));
        let s = run_bounded(&cfg, LIMIT).expect("run against a correct chat peer");
        assert_eq!(s.errors.total, 0, "{threads} threads: {:?}", s.errors);
        assert!(s.messages > 0);
        assert_eq!(
            s.deliveries,
            3 * s.messages,
            "each measured message reaches the 3 other members"
        );
        let d = s
            .delivery_latency_us
            .expect("delivery latency in the room profile");
        assert_eq!(d.count, s.deliveries);
    }
}

#[test]
fn a_room_run_by_request_count_waits_for_the_last_deliveries() {
    let peer = ChatPeer::spawn(ChatMisbehave::Nothing);
    let mut cfg = chat_config(peer.addr, 6, room(3));
    cfg.threads = 2;
    cfg.stop = Stop::Requests(100);
    let s = run_bounded(&cfg, LIMIT).expect("run against a correct chat peer");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 600);
    assert_eq!(s.deliveries, 1200);
}

#[test]
fn a_skipped_delivery_is_caught() {
    let peer = ChatPeer::spawn(ChatMisbehave::SkipDelivery(10));
    let mut cfg = chat_config(peer.addr, 4, room(4));
    cfg.threads = 2;
    cfg.stop = Stop::Requests(50);
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert_eq!(s.errors.delivery, 1, "{:?}", s.errors);
}

#[test]
fn a_repeated_delivery_is_caught() {
    let peer = ChatPeer::spawn(ChatMisbehave::DuplicateDelivery(7));
    // Two rooms of two: seq 7 of each is repeated to one member.
    let mut cfg = chat_config(peer.addr, 4, room(2));
    cfg.stop = Stop::Requests(50);
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert_eq!(s.errors.delivery, 2, "{:?}", s.errors);
}

#[test]
fn err_replies_are_counted_as_server_errors() {
    let peer = ChatPeer::spawn(ChatMisbehave::RefuseSay);
    let mut cfg = chat_config(peer.addr, 3, room(3));
    cfg.stop = Stop::Requests(10);
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert_eq!(s.errors.server_error, 3, "{:?}", s.errors);
}

#[test]
fn an_echo_server_fails_the_chat_handshake() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    let mut cfg = chat_config(peer.addr, 2, room(2));
    cfg.connect_timeout = Duration::from_secs(2);
    match run_bounded(&cfg, LIMIT) {
        Err(e @ Error::Handshake { .. }) => assert!(e.is_usage()),
        other => panic!("expected a handshake error, got {other:?}"),
    }
}
