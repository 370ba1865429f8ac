//! The workloads that change the ranking (issue 62), across a real socket: connection churn
//! (`--requests-per-conn`), idle connections (`--idle-conns`), mixes of message and value
//! sizes, Zipf keys, and the bursty and Pareto arrivals. Counted by the peers, never timed.

mod util;

use std::time::Duration;

use loadgen::peer::{Misbehave, Peer, Seen};
use loadgen::{Arrivals, KeyDist, KvConfig, Sizes, Stop};
use util::kv_peer::{KvMisbehave, KvPeer};
use util::{echo_config, kv_config, run_bounded};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn a_client_that_closes_after_r_requests_opens_ceil_total_over_r_connections() {
    // (conns, threads, depth, requests per connection slot, R): R dividing the total or
    // not, above the depth or not, and a connection per request.
    for (conns, threads, depth, total, r) in [
        (4, 2, 1, 25u64, 10u64),
        (3, 1, 3, 30, 10),
        (2, 2, 4, 9, 2),
        (3, 1, 1, 20, 1),
    ] {
        let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
        let mut cfg = echo_config(peer.addr, conns);
        cfg.threads = threads;
        cfg.depth = depth;
        cfg.stop = Stop::Requests(total);
        cfg.requests_per_conn = Some(r);
        let s = run_bounded(&cfg, LIMIT).expect("a churning run");
        let case = format!("{conns} conns, depth {depth}, {total} requests, R {r}");
        assert_eq!(s.errors.total, 0, "{case}: {:?}", s.errors);
        assert_eq!(s.messages, conns as u64 * total, "{case}");
        let want = conns * total.div_ceil(r) as usize;
        assert_eq!(s.connections_opened, want as u64, "{case}");
        assert_eq!(s.reconnect_after, Some(r));
        let seen = peer.seen_closed(want, LIMIT);
        assert_eq!(seen.len(), want, "{case}: the peer's accepts");
        // Every connection carried at most R messages of 16 bytes, and the client closed it.
        for c in &seen {
            assert!(c.bytes > 0 && c.bytes <= r * 16, "{case}: {c:?}");
            assert!(c.closed.is_some(), "{case}: {c:?}");
        }
        assert_eq!(seen.iter().map(|c| c.bytes).sum::<u64>(), s.bytes_sent);
    }
}

#[test]
fn churn_in_the_open_loop_keeps_every_message_and_counts_its_connections() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 4);
    cfg.rate = Some(4_000.0);
    cfg.arrivals = Arrivals::Poisson;
    cfg.depth = 2;
    cfg.stop = Stop::Requests(30);
    cfg.requests_per_conn = Some(7);
    let s = run_bounded(&cfg, LIMIT).expect("an open-loop churning run");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 4 * 30);
    assert_eq!(s.connections_opened, 4 * 30u64.div_ceil(7));
    let seen = peer.seen_closed(4 * 5, LIMIT);
    assert_eq!(seen.len(), 4 * 5);
    // Latency counts from the due time: a message that waited for a fresh connection
    // carries that wait, and its lag was taken once.
    assert_eq!(s.latency_us.count, 4 * 30);
    assert_eq!(s.send_lag_us.map(|p| p.count), Some(4 * 30));
}

#[test]
fn kv_churns_too_and_every_reply_is_still_checked() {
    let peer = KvPeer::spawn(KvMisbehave::Nothing);
    let mut cfg = kv_config(
        peer.addr,
        3,
        KvConfig {
            get_ratio: 0.5,
            keys: 100,
            ..KvConfig::default()
        },
    );
    cfg.depth = 2;
    cfg.stop = Stop::Requests(40);
    cfg.requests_per_conn = Some(3);
    let s = run_bounded(&cfg, LIMIT).expect("a churning kv run");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 3 * 40);
    assert_eq!(s.connections_opened, 3 * 40u64.div_ceil(3));
    // A peer that corrupts values is still caught on a fresh connection.
    let bad = KvPeer::spawn(KvMisbehave::FlipFrom(50));
    let mut cfg = cfg.clone();
    cfg.addr = bad.addr.to_string();
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert!(s.errors.corrupt >= 1, "{:?}", s.errors);
}

#[test]
fn idle_connections_stay_open_and_silent_through_the_window() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 2);
    cfg.threads = 2;
    cfg.idle_conns = 5;
    cfg.stop = Stop::Requests(200);
    let s = run_bounded(&cfg, LIMIT).expect("a run with idle connections");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 2 * 200);
    assert_eq!((s.idle_conns, s.idle_connected, s.idle_held), (5, 5, 5));
    assert_eq!(s.connected, 2, "idle connections are not active ones");
    assert_eq!(s.connections_opened, 7);
    assert!(
        s.get_latency_us.is_none() && s.set_latency_us.is_none(),
        "echo has no GETs"
    );
    let seen = peer.seen_closed(7, LIMIT);
    assert_eq!(seen.len(), 7, "the peer saw every connection");
    let (silent, active): (Vec<&Seen>, Vec<&Seen>) = seen.iter().partition(|c| c.bytes == 0);
    assert_eq!(silent.len(), 5, "{seen:?}");
    assert_eq!(active.iter().map(|c| c.bytes).sum::<u64>(), 2 * 200 * 16);
    // Held through the window: each idle connection closed only after the active ones
    // had sent their last bytes.
    let last_active = active.iter().filter_map(|c| c.last_bytes).max();
    for c in &silent {
        assert!(
            c.closed > last_active,
            "{c:?} closed before {last_active:?}"
        );
    }
}

#[test]
fn a_mix_of_echo_sizes_is_drawn_per_message_and_checked_byte_for_byte() {
    let sizes: Sizes = "16:3,1000:1,5000:1".parse().expect("a mix");
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 3);
    cfg.depth = 3;
    cfg.msg_size = sizes.clone();
    cfg.stop = Stop::Requests(300);
    let s = run_bounded(&cfg, LIMIT).expect("a run of mixed sizes");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 900);
    // Each message's size is the mix's draw for it: the bytes add up exactly.
    let want: u64 = (0..3u32)
        .flat_map(|c| (0..300).map(move |seq| (c, seq)))
        .map(|(c, seq)| sizes.pick(c, seq) as u64)
        .sum();
    assert_eq!(s.bytes_sent, want);
    assert_eq!(s.bytes_received, want);
    assert_eq!(s.msg_sizes.as_deref(), Some("16:3,1000:1,5000:1"));
    assert_eq!(s.msg_size, sizes.mean().round() as usize);
    // A flipped byte deep in the stream is caught, whichever size it falls in.
    let bad = Peer::spawn(Misbehave::CorruptAt(want / 3 / 2)).expect("start the corrupting peer");
    cfg.addr = bad.addr.to_string();
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert_eq!(s.errors.corrupt, 3, "{:?}", s.errors);
}

#[test]
fn kv_with_zipf_keys_and_a_mix_of_value_sizes_checks_every_reply() {
    let peer = KvPeer::spawn(KvMisbehave::Nothing);
    let mut cfg = kv_config(
        peer.addr,
        4,
        KvConfig {
            get_ratio: 0.7,
            keys: 500,
            key_dist: KeyDist::Zipf(0.99),
        },
    );
    cfg.msg_size = "32:9,4K:1".parse().expect("a mix");
    cfg.threads = 2;
    cfg.depth = 4;
    cfg.stop = Stop::Requests(300);
    let s = run_bounded(&cfg, LIMIT).expect("a skewed kv run");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert_eq!(s.messages, 4 * 300);
    assert_eq!(s.key_dist.as_deref(), Some("zipf:0.99"));
    assert_eq!(s.msg_sizes.as_deref(), Some("32:9,4096:1"));
    // GETs and SETs apart: every measured reply in one of the two, both drawn.
    let (get, set) = (
        s.get_latency_us.expect("GETs"),
        s.set_latency_us.expect("SETs"),
    );
    assert_eq!(get.count + set.count, s.latency_us.count);
    assert!(get.count > set.count && set.count > 0, "{get:?} {set:?}");
    assert!(get.max <= s.latency_us.max && set.max <= s.latency_us.max);
    // A store that answers with another key's value is caught under skew too.
    let bad = KvPeer::spawn(KvMisbehave::WrongKeyFrom(20));
    cfg.addr = bad.addr.to_string();
    let s = run_bounded(&cfg, LIMIT).expect("the run itself succeeds");
    assert!(s.errors.corrupt >= 1, "{:?}", s.errors);
}

#[test]
fn bursty_and_pareto_arrivals_run_and_the_self_check_tests_only_poisson_as_exponential() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    for arrivals in [
        Arrivals::OnOff {
            on_ns: 20_000_000,
            off_ns: 30_000_000,
        },
        Arrivals::Pareto { shape: 0.154971 },
    ] {
        let mut cfg = echo_config(peer.addr, 4);
        cfg.rate = Some(2_000.0);
        cfg.arrivals = arrivals;
        cfg.depth = 8;
        cfg.stop = Stop::Requests(100);
        let s = run_bounded(&cfg, LIMIT).expect("an open-loop run");
        assert_eq!(s.errors.total, 0, "{arrivals}: {:?}", s.errors);
        assert_eq!(s.messages, 400);
        assert_eq!(s.arrivals, Some(arrivals.to_string()));
        let check = s.schedule_check.expect("the open loop's self-check");
        assert_eq!(check.exponential_distance, None, "{arrivals}");
    }
}
