//! The open loop: it keeps its rate, and latency counts from when a message was due, so a
//! server stall shows in the latency percentiles while the service time stays low.

mod util;

use std::time::Duration;

use loadgen::Stop;
use loadgen::peer::{Misbehave, Peer};
use util::{echo_config, run_bounded};

const LIMIT: Duration = Duration::from_secs(60);

/// Every message due in the 2 s window is sent and counted, so the count is the rate times
/// the window whatever the machine's speed: this checks the schedule, not the clock.
#[test]
fn the_rate_holds_within_two_percent_over_two_seconds() {
    let peer = Peer::spawn(Misbehave::Nothing).expect("start the echo peer");
    for (conns, threads, rate) in [(10, 1, 2_000.0), (7, 2, 3_333.0)] {
        let mut cfg = echo_config(peer.addr, conns);
        cfg.threads = threads;
        cfg.rate = Some(rate);
        cfg.depth = 4;
        cfg.stop = Stop::Duration(Duration::from_secs(2));
        cfg.warmup = Duration::from_millis(100);
        let s = run_bounded(&cfg, LIMIT).expect("run against a correct peer");
        assert_eq!(s.errors.total, 0, "{:?}", s.errors);
        let want = 2.0 * rate;
        let got = s.messages as f64;
        assert!(
            (got - want).abs() / want <= 0.02,
            "{conns} conns, {threads} threads, {rate}/s: {got} messages in 2 s"
        );
        assert!((s.throughput_per_sec - rate).abs() / rate <= 0.02);
    }
}

/// A 200 ms stall at 1000 messages/s delays about 200 messages: well over 1% of 2000, so the
/// p99 latency counted from the due time is most of the stall. Only the one message in flight
/// when the stall began waited on the server, so the p99 service time is untouched.
#[test]
fn a_stall_shows_in_open_loop_latency_but_not_in_service_time() {
    let peer = Peer::spawn(Misbehave::StallAt(500 * 16, Duration::from_millis(200)))
        .expect("start the echo peer");
    let mut cfg = echo_config(peer.addr, 1);
    cfg.rate = Some(1000.0);
    cfg.stall = Duration::from_millis(100);
    cfg.stop = Stop::Duration(Duration::from_secs(2));
    let s = run_bounded(&cfg, LIMIT).expect("run against the stalling peer");
    assert_eq!(s.errors.total, 0, "{:?}", s.errors);
    assert!(s.errors.stalled >= 1, "{:?}", s.errors);
    assert!(
        s.latency_us.p99 >= 150_000.0,
        "the stall must show in p99 latency: {:?}",
        s.latency_us
    );
    // Fewer than 1% of the messages can have waited 150 ms on the server: only the one in
    // flight when the stall began did.
    assert!(
        s.service_time_us.p99 < 150_000.0,
        "the stall must not show in p99 service time: {:?} vs {:?}",
        s.service_time_us,
        s.latency_us
    );
    assert!(
        s.service_time_us.max >= 200_000.0,
        "the stalled message itself"
    );
}
