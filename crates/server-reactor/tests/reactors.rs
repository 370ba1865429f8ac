//! Behaviour of the reactors across real loopback sockets that the
//! conformance suite does not single out: fairness between connections of
//! one reactor, chat fan-out between reactors in both accept modes, and the
//! counters a stop returns.

mod util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use server_reactor::AcceptMode;

/// One reactor serving two connections with `--compute-us`: one pipelines
/// messages as fast as the reactor computes them, the other sends one message
/// at a time. The second still gets its echoes. A reactor that read the busy
/// connection until `WouldBlock` would compute a whole 16 KiB read of it (a
/// thousand messages) per turn, and the busy client keeps its socket full, so
/// get to the second only when the busy socket happens to run dry. Measured
/// here: about 50 ms for the pings with the turn budget, about a minute
/// without it; the deadline below sits between, far from both.
#[test]
fn a_busy_connection_does_not_starve_another() {
    const PINGS: usize = 100;
    const DEADLINE: Duration = Duration::from_secs(20);
    let config = util::config(1, AcceptMode::Handoff, Some(Duration::from_micros(50)));
    let reactors = server_reactor::Reactors::start(&config, None).expect("reactors start");
    let addr = reactors.local_addr();
    let mut busy = util::connect(addr);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        let done = &done;
        s.spawn(move || {
            // Keeps about WINDOW bytes in flight: always more queued at the
            // server than one read takes, and little to drain at the end.
            const WINDOW: usize = 128 * 1024;
            let chunk = vec![7u8; 16 * 1024];
            let mut buf = vec![0u8; 64 * 1024];
            let (mut sent, mut echoed) = (0, 0);
            // Bounded by the pings below: they end within their timeouts.
            while !done.load(Ordering::Relaxed) {
                busy.write_all(&chunk).expect("busy write");
                sent += chunk.len();
                while sent - echoed > WINDOW {
                    echoed += busy.read(&mut buf).expect("busy read");
                }
            }
            busy.shutdown(std::net::Shutdown::Write)
                .expect("busy shutdown");
            while busy.read(&mut buf).expect("busy drain") > 0 {}
        });
        let mut other = util::connect(addr);
        let mut back = [0u8; 16];
        let started = Instant::now();
        for i in 0..PINGS {
            let left = DEADLINE.saturating_sub(started.elapsed());
            other
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("read timeout");
            other.write_all(b"ping, 16 bytes!!").expect("ping");
            let echoed = other.read_exact(&mut back);
            if echoed.is_err() {
                done.store(true, Ordering::Relaxed);
            }
            echoed.unwrap_or_else(|e| {
                panic!("echo {i} beside a busy connection, {DEADLINE:?} for all: {e}")
            });
            assert_eq!(&back, b"ping, 16 bytes!!");
        }
        done.store(true, Ordering::Relaxed);
        eprintln!(
            "{PINGS} echoes beside a busy connection in {:?}",
            started.elapsed()
        );
    });
    let totals = reactors.stop();
    assert_eq!(totals.accepted, 2);
}

fn send(stream: &mut TcpStream, line: &str) {
    stream
        .write_all(format!("{line}\n").as_bytes())
        .expect("send a line");
}

fn recv(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a line from the server");
    assert!(line.ends_with('\n'), "cut short: {line:?}");
    line.pop();
    line
}

/// Subscribers spread over four reactors all get every message, in order,
/// whichever reactor the sender is on.
fn fan_out_across_reactors(accept: AcceptMode) {
    const CLIENTS: usize = 12;
    const MESSAGES: u64 = 20;
    let (reactors, hub) = util::chat(4, accept);
    let mut clients: Vec<(TcpStream, BufReader<TcpStream>)> = (0..CLIENTS)
        .map(|_| {
            let s = util::connect(reactors.local_addr());
            let r = BufReader::new(s.try_clone().expect("clone"));
            (s, r)
        })
        .collect();
    for (i, (s, r)) in clients.iter_mut().enumerate() {
        send(s, &format!("NICK c{i}"));
        assert_eq!(recv(r), "OK");
        send(s, "JOIN room 0");
        assert_eq!(recv(r), "JOINED room 1");
    }
    // Each message from a different client, so from different reactors.
    for seq in 1..=MESSAGES {
        let from = seq as usize % CLIENTS;
        let (s, r) = &mut clients[from];
        send(s, &format!("SAY room m{seq}"));
        assert_eq!(recv(r), format!("ACK room {seq}"));
        for (i, (_, r)) in clients.iter_mut().enumerate() {
            if i != from {
                assert_eq!(
                    recv(r),
                    format!("MSG room {seq} c{from} m{seq}"),
                    "client {i}"
                );
            }
        }
    }
    assert_eq!(hub.stats().messages, MESSAGES);
    drop(clients);
    let totals = reactors.stop();
    assert_eq!(totals.accepted, CLIENTS as u64);
    assert_eq!(totals.lines, 2 * CLIENTS as u64 + MESSAGES);
}

#[test]
fn chat_fans_out_across_reactors_with_handoff() {
    fan_out_across_reactors(AcceptMode::Handoff);
}

#[test]
fn chat_fans_out_across_reactors_with_reuseport() {
    fan_out_across_reactors(AcceptMode::Reuseport);
}

/// The largest buffer (the third field of a `tcp_wmem`/`tcp_rmem` sysctl)
/// the kernel may give a socket, or a generous guess.
fn tcp_buffer_max(name: &str) -> usize {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(8 << 20)
}

/// A subscriber that does not read is cut off, and cutting it holds up
/// neither the sender nor a subscriber on the same reactor.
#[test]
fn a_slow_subscriber_is_cut_without_stalling_its_reactor() {
    const TEXT: usize = 4000;
    const MAX_PENDING: usize = 32 * 1024;
    let hub = std::sync::Arc::new(
        service::hub::Hub::open(None, service::log::Fsync::Never).expect("a temporary hub"),
    );
    let mut config = util::config(1, AcceptMode::Handoff, None);
    config.max_pending = MAX_PENDING;
    let reactors = server_reactor::Reactors::start(&config, Some(hub)).expect("reactors start");
    let addr = reactors.local_addr();
    let mut slow = util::connect(addr);
    let mut slow_r = BufReader::new(slow.try_clone().expect("clone"));
    send(&mut slow, "JOIN r 0");
    assert_eq!(recv(&mut slow_r), "JOINED r 1");
    let mut fast = util::connect(addr);
    let mut fast_r = BufReader::new(fast.try_clone().expect("clone"));
    send(&mut fast, "JOIN r 0");
    assert_eq!(recv(&mut fast_r), "JOINED r 1");
    let mut sender = util::connect(addr);
    let mut sender_r = BufReader::new(sender.try_clone().expect("clone"));
    let text = "t".repeat(TEXT);
    // More than the kernel can hold for the slow one on both sides, plus the
    // server's write buffer and the limit, twice over.
    let bytes = 2 * (tcp_buffer_max("tcp_wmem") + tcp_buffer_max("tcp_rmem") + 2 * MAX_PENDING);
    let messages = bytes / TEXT + 1;
    for seq in 1..=messages {
        send(&mut sender, &format!("SAY r {text}"));
        assert_eq!(recv(&mut sender_r), format!("ACK r {seq}"));
        assert_eq!(recv(&mut fast_r), format!("MSG r {seq} anon {text}"));
    }
    // Now it reads: a prefix of the room, then the end of the stream.
    let mut seen = 0;
    loop {
        let mut line = String::new();
        match slow_r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) if line.ends_with('\n') => {
                seen += 1;
                assert_eq!(line, format!("MSG r {seen} anon {text}\n"));
            }
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the slow subscriber after {seen} lines: {e}"),
        }
    }
    assert!(
        seen < messages,
        "the slow subscriber got all {messages} messages"
    );
    eprintln!("cut off after {seen} of {messages} messages");
    drop((slow, slow_r));
    let totals = reactors.stop();
    assert_eq!(totals.cut, 1);
}
