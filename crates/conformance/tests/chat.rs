//! Chat conformance (docs/PROTOCOL.md "Chat", docs/protocol-notes.md "Chat",
//! docs/room-log.md): the commands and replies, the seam between replay and live
//! messages under concurrent senders, durability across kill -9, recovery of torn and
//! corrupt logs, every `ERR` text, overlong lines and slow subscribers, and a long
//! conversation that leaves the server's memory where it was.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use conformance::chat::MAX_LINE;
use conformance::net::{self, Deadline};
use conformance::roomlog::{self, Record};
use conformance::{ChatClient, Target};

conformance::conformance_tests!(
    chat_basics needs Chat,
    chat_replay_live_seam needs Chat,
    chat_durability_kill9 needs Chat,
    chat_torn_tail needs Chat,
    chat_corrupt_log needs Chat,
    chat_errors needs Chat,
    chat_line_too_long needs Chat,
    chat_slow_subscriber needs Chat,
    chat_fsync_off_the_loop needs Chat,
    chat_pings_leave_memory_flat needs Chat,
);

/// NICK/OK, PING/PONG, JOIN/JOINED, SAY/ACK, MSG to the other subscribers only,
/// LEAVE/LEFT.
fn chat_basics(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "chat"])?;
    let mut alice = ChatClient::connect(server.addr())?;
    let mut bob = ChatClient::connect(server.addr())?;
    let mut anon = ChatClient::connect(server.addr())?;

    alice.expect("NICK alice", "OK")?;
    alice.expect("PING hello there", "PONG hello there")?;
    alice.expect("PING x\r", "PONG x")?;
    bob.expect("NICK bob", "OK")?;
    alice.expect("JOIN lobby 0", "JOINED lobby 1")?;
    bob.expect("JOIN lobby 0", "JOINED lobby 1")?;

    alice.expect("SAY lobby hi there, bob", "ACK lobby 1")?;
    bob.expect_line("bob, subscribed", "MSG lobby 1 alice hi there, bob")?;
    bob.expect("SAY lobby hello", "ACK lobby 2")?;
    // Each subscriber gets the room in seq order, so a copy of its own message 1 would
    // come before message 2.
    alice.expect_line("alice, subscribed", "MSG lobby 2 bob hello")?;
    // Not subscribed, unnamed, and a message with empty text.
    anon.expect("SAY lobby ", "ACK lobby 3")?;
    alice.expect_line("alice, subscribed", "MSG lobby 3 anon ")?;
    bob.expect_line("bob, subscribed", "MSG lobby 3 anon ")?;
    alice.expect("PING a", "PONG a")?;
    bob.expect("PING b", "PONG b")?;

    bob.expect("LEAVE lobby", "LEFT lobby")?;
    alice.expect("SAY lobby are you there?", "ACK lobby 4")?;
    // Unsubscribed, bob may join again and catch up from where he left: message 4
    // comes exactly once, from the replay.
    bob.send("JOIN lobby 3")?;
    bob.expect_line("bob, rejoining", "MSG lobby 4 alice are you there?")?;
    bob.expect_line("bob, rejoining", "JOINED lobby 5")?;
    bob.expect("PING c", "PONG c")?;
    anon.expect("PING d", "PONG d")?;
    ensure!(
        server.stdout_after_ready().is_empty(),
        "stdout after READY: {:?}",
        server.stdout_after_ready()
    );
    Ok(())
}

/// What a subscriber saw: every `(seq, nick, text)` in arrival order, how many came
/// before its JOINED line, and the `next` that line gave.
#[derive(Debug, Default)]
struct Seen {
    msgs: Vec<(u64, String, String)>,
    replayed: usize,
    joined_next: Option<u64>,
}

fn parse_msg(room: &str, line: &str) -> Result<(u64, String, String)> {
    let rest = line
        .strip_prefix("MSG ")
        .and_then(|r| r.strip_prefix(room))
        .and_then(|r| r.strip_prefix(' '))
        .with_context(|| format!("expected a MSG of room {room}, got {line:?}"))?;
    let mut parts = rest.splitn(3, ' ');
    let (Some(seq), Some(nick), Some(text)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("malformed MSG line {line:?}");
    };
    let seq = seq.parse().with_context(|| format!("seq in {line:?}"))?;
    Ok((seq, nick.to_owned(), text.to_owned()))
}

/// Several senders SAY as fast as they can while subscribers JOIN with `since = 0` at
/// different points of the stream: each sees every seq exactly once, in order, with no
/// gap or repeat where the replay ends and the live stream begins.
fn chat_replay_live_seam(target: &Target) -> Result<()> {
    const ROOM: &str = "seam";
    const SENDERS: usize = 3;
    const BATCH: usize = 8;
    // Each joiner JOINs once this many messages are acknowledged in all; the senders go
    // on until every joiner has its JOINED and `AFTER_JOINS` more are acknowledged.
    const JOIN_AT: [u64; 3] = [10, 120, 300];
    const AFTER_JOINS: u64 = 100;
    const MAX_PER_SENDER: usize = 4000;
    // The last message, sent once the senders are done: a subscriber that sees it has
    // seen everything before it, since it gets the room in order.
    const CLOSER: &str = "closer";

    #[derive(Debug, Default)]
    struct Progress {
        acked: u64,
        joined: usize,
        acked_when_all_joined: Option<u64>,
    }

    let server = target.start(&["--proto", "chat"])?;
    let deadline = Deadline::after(Duration::from_secs(15));
    let progress = Mutex::new(Progress::default());
    let changed = Condvar::new();
    let lock = || progress.lock().unwrap_or_else(|e| e.into_inner());
    let update = |f: &dyn Fn(&mut Progress)| {
        f(&mut lock());
        changed.notify_all();
    };

    let read_until_closer = |client: &mut ChatClient, seen: &mut Seen| -> Result<()> {
        loop {
            deadline.check("subscriber reading")?;
            let last = seen.msgs.last().map_or(0, |m| m.0);
            let line = client.recv().with_context(|| format!("after seq {last}"))?;
            if let Some(next) = line.strip_prefix(&format!("JOINED {ROOM} ")) {
                ensure!(seen.joined_next.is_none(), "a second JOINED: {line:?}");
                seen.joined_next = Some(next.parse().with_context(|| format!("{line:?}"))?);
                seen.replayed = seen.msgs.len();
                update(&|p| {
                    p.joined += 1;
                    if p.joined == JOIN_AT.len() {
                        p.acked_when_all_joined = Some(p.acked);
                    }
                });
                continue;
            }
            let msg = parse_msg(ROOM, &line)?;
            let closer = msg.1 == CLOSER;
            seen.msgs.push(msg);
            if closer {
                return Ok(());
            }
        }
    };

    let mut early = ChatClient::connect(server.addr())?;
    early.expect(&format!("JOIN {ROOM} 0"), &format!("JOINED {ROOM} 1"))?;

    let (acks, seen) = thread::scope(|s| -> Result<_> {
        // Subscribed before any SAY: a live stream only.
        let early = s.spawn(|| -> Result<Seen> {
            let mut seen = Seen {
                joined_next: Some(1),
                ..Seen::default()
            };
            read_until_closer(&mut early, &mut seen).context("subscriber joined before any SAY")?;
            Ok(seen)
        });
        let joiners: Vec<_> = JOIN_AT
            .into_iter()
            .map(|at| {
                let (server, progress, changed, read_until_closer) =
                    (&server, &progress, &changed, &read_until_closer);
                s.spawn(move || -> Result<Seen> {
                    let mut c = ChatClient::connect(server.addr())?;
                    let mut p = progress.lock().unwrap_or_else(|e| e.into_inner());
                    while p.acked < at {
                        let left = deadline.remaining("waiting to join")?;
                        p = changed
                            .wait_timeout(p, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    drop(p);
                    c.send(&format!("JOIN {ROOM} 0"))?;
                    let mut seen = Seen::default();
                    read_until_closer(&mut c, &mut seen)
                        .with_context(|| format!("subscriber joined after {at} ACKs"))?;
                    Ok(seen)
                })
            })
            .collect();

        let senders: Vec<_> = (0..SENDERS)
            .map(|i| {
                let (server, lock, update) = (&server, &lock, &update);
                s.spawn(move || -> Result<Vec<(u64, String, String)>> {
                    let nick = format!("sender{i}");
                    let mut c = ChatClient::connect(server.addr())?;
                    c.expect(&format!("NICK {nick}"), "OK")?;
                    let mut acked = Vec::new();
                    for batch in 0..MAX_PER_SENDER / BATCH {
                        let p = lock();
                        if p.acked_when_all_joined
                            .is_some_and(|at| p.acked >= at + AFTER_JOINS)
                        {
                            break;
                        }
                        drop(p);
                        deadline.check("sending")?;
                        let texts: Vec<String> = (0..BATCH)
                            .map(|k| format!("from {nick} number {}", batch * BATCH + k))
                            .collect();
                        for text in &texts {
                            c.send(&format!("SAY {ROOM} {text}"))?;
                        }
                        for text in texts {
                            let line = c.recv().context("waiting for ACK")?;
                            let seq = line
                                .strip_prefix(&format!("ACK {ROOM} "))
                                .and_then(|s| s.parse::<u64>().ok())
                                .with_context(|| format!("expected ACK, got {line:?}"))?;
                            acked.push((seq, nick.clone(), text));
                        }
                        update(&|p| p.acked += BATCH as u64);
                    }
                    Ok(acked)
                })
            })
            .collect();

        let mut acks = Vec::new();
        for sender in senders {
            acks.extend(
                sender
                    .join()
                    .map_err(|_| anyhow::anyhow!("sender panicked"))??,
            );
        }
        let mut closer = ChatClient::connect(server.addr())?;
        closer.expect(&format!("NICK {CLOSER}"), "OK")?;
        let seq = acks.len() as u64 + 1;
        closer.expect(&format!("SAY {ROOM} the end"), &format!("ACK {ROOM} {seq}"))?;
        acks.push((seq, CLOSER.to_owned(), "the end".to_owned()));
        let seen = std::iter::once(early)
            .chain(joiners)
            .map(|j| {
                j.join()
                    .map_err(|_| anyhow::anyhow!("subscriber panicked"))?
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((acks, seen))
    })?;

    // The ACKs handed out 1..=N, each once.
    let total = acks.len() as u64;
    let by_seq: BTreeMap<u64, (String, String)> = acks
        .iter()
        .map(|(seq, nick, text)| (*seq, (nick.clone(), text.clone())))
        .collect();
    ensure!(
        by_seq.len() == acks.len() && by_seq.keys().copied().eq(1..=total),
        "the ACKs of {total} messages are not the seqs 1..={total}"
    );
    eprintln!(
        "chat_replay_live_seam: {total} messages; joiners replayed {:?}",
        seen.iter().map(|j| j.replayed).collect::<Vec<_>>()
    );
    for (who, seen) in seen.iter().enumerate() {
        let name = match who {
            0 => "the subscriber joined before any SAY".to_owned(),
            n => format!("the subscriber joined after {} ACKs", JOIN_AT[n - 1]),
        };
        for (i, (seq, nick, text)) in seen.msgs.iter().enumerate() {
            ensure!(
                *seq == i as u64 + 1,
                "{name}: message {} of its stream has seq {seq} (replayed {}, JOINED next {:?})",
                i + 1,
                seen.replayed,
                seen.joined_next
            );
            let (want_nick, want_text) = &by_seq[seq];
            ensure!(
                nick == want_nick && text == want_text,
                "{name}: seq {seq} is {nick} {text:?}"
            );
        }
        ensure!(
            seen.msgs.len() as u64 == total,
            "{name}: saw {} of {total} messages",
            seen.msgs.len()
        );
        ensure!(
            seen.joined_next == Some(seen.replayed as u64 + 1),
            "{name}: replayed {} messages, then JOINED next {:?}",
            seen.replayed,
            seen.joined_next
        );
    }
    Ok(())
}

/// ACKed messages survive kill -9 of the server and a restart on the same `--data`;
/// the next SAY continues the seq; the file is the format of docs/room-log.md.
fn chat_durability_kill9(target: &Target) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().to_str().context("temp dir path")?;
    let texts = [
        "first",
        "second one",
        "  spaced  out  ",
        "",
        "fifth: ünïcödé",
    ];

    let mut server = target.start(&["--proto", "chat", "--data", data])?;
    let mut alice = ChatClient::connect(server.addr())?;
    alice.expect("NICK alice", "OK")?;
    for (i, text) in texts.iter().enumerate() {
        alice.expect(
            &format!("SAY durable {text}"),
            &format!("ACK durable {}", i + 1),
        )?;
    }
    alice.expect("SAY other x", "ACK other 1")?;
    let exit = server.kill9()?;
    drop(server);
    ensure!(
        exit.signal.is_some(),
        "server was not killed by the signal: {}",
        exit.describe_status()
    );

    let stored = roomlog::parse(&fs::read(dir.path().join("durable.log"))?)
        .context("durable.log is not a valid room log")?;
    let want: Vec<Record> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| Record {
            seq: i as u64 + 1,
            name: "alice".into(),
            text: (*t).into(),
        })
        .collect();
    ensure!(stored == want, "durable.log holds {stored:?}");

    let server = target.start(&["--proto", "chat", "--data", data])?;
    let mut bob = ChatClient::connect(server.addr())?;
    bob.send("JOIN durable 0")?;
    for (i, text) in texts.iter().enumerate() {
        bob.expect_line(
            "replay after restart",
            &format!("MSG durable {} alice {text}", i + 1),
        )?;
    }
    bob.expect_line("replay after restart", "JOINED durable 6")?;
    let mut carol = ChatClient::connect(server.addr())?;
    carol.expect("SAY durable after restart", "ACK durable 6")?;
    bob.expect_line("live after restart", "MSG durable 6 anon after restart")?;
    carol.expect("SAY other y", "ACK other 2")?;
    carol.send("JOIN durable 4")?;
    carol.expect_line(
        "partial replay",
        &format!("MSG durable 5 alice {}", texts[4]),
    )?;
    carol.expect_line("partial replay", "MSG durable 6 anon after restart")?;
    carol.expect_line("partial replay", "JOINED durable 7")?;
    Ok(())
}

fn append(path: &Path, bytes: &[u8]) -> Result<()> {
    OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(bytes)?;
    Ok(())
}

/// A torn last record (a crash mid-write) is cut at restart, never served, and the seq
/// goes on from the last whole record.
fn chat_torn_tail(target: &Target) -> Result<()> {
    const ROOM: &str = "tail-room";
    let dir = tempfile::tempdir()?;
    let data = dir.path().to_str().context("temp dir path")?;
    let log = dir.path().join(format!("{ROOM}.log"));

    let mut server = target.start(&["--proto", "chat", "--data", data, "--fsync", "always"])?;
    let mut c = ChatClient::connect(server.addr())?;
    for seq in 1..=3 {
        c.expect(
            &format!("SAY {ROOM} message {seq}"),
            &format!("ACK {ROOM} {seq}"),
        )?;
    }
    server.kill9()?;
    drop(server);

    let cases = [
        "a partial header",
        "a header and part of its body",
        "a whole last record with a bad CRC",
    ];
    let mut stored = 3;
    for (case, what) in cases.into_iter().enumerate() {
        let seq = stored + 1;
        let mut torn = roomlog::record(seq, "anon", &format!("torn {seq}"));
        match case {
            0 => torn.truncate(5),
            1 => torn.truncate(roomlog::HEADER_LEN + 6),
            _ => {
                let last = torn.len() - 1;
                torn[last] ^= 0x01;
            }
        }
        append(&log, &torn)?;
        let mut server = target
            .start(&["--proto", "chat", "--data", data])
            .with_context(|| format!("restart after appending {what}"))?;
        let mut c = ChatClient::connect(server.addr())?;
        c.send(&format!("JOIN {ROOM} 0"))?;
        for seq in 1..=stored {
            let line = c.recv()?;
            let (got, _, text) = parse_msg(ROOM, &line).with_context(|| format!("after {what}"))?;
            ensure!(
                got == seq && !text.starts_with("torn"),
                "after {what}: replay served {line:?}"
            );
        }
        c.expect_line(
            &format!("JOINED after {what}"),
            &format!("JOINED {ROOM} {}", stored + 1),
        )?;
        stored += 1;
        ChatClient::connect(server.addr())?
            .expect(
                &format!("SAY {ROOM} message {stored}"),
                &format!("ACK {ROOM} {stored}"),
            )
            .with_context(|| format!("after {what}"))?;
        c.expect_line(
            &format!("live after {what}"),
            &format!("MSG {ROOM} {stored} anon message {stored}"),
        )?;
        let exit = server.kill9()?;
        ensure!(
            exit.stderr.contains(ROOM),
            "after {what}: the cut is not reported on stderr: {:?}",
            exit.stderr
        );
        // The torn bytes are gone: the file is whole records only.
        let records =
            roomlog::parse(&fs::read(&log)?).with_context(|| format!("{ROOM}.log after {what}"))?;
        ensure!(
            records.len() as u64 == stored,
            "after {what}: the log holds {} records",
            records.len()
        );
    }
    Ok(())
}

/// A log crafted here (not by a server) is recovered and replayed; corruption in the
/// middle of a log makes the server refuse to start, with exit status 2, and leaves the
/// file as it was.
fn chat_corrupt_log(target: &Target) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().to_str().context("temp dir path")?;
    let good: Vec<u8> = [
        roomlog::record(1, "x", "crafted one"),
        roomlog::record(2, "y-Y_9", ""),
        roomlog::record(3, "z", "three 3"),
    ]
    .concat();
    fs::write(dir.path().join("crafted.log"), &good)?;
    fs::write(dir.path().join("notes.txt"), b"not a room log, ignored")?;
    let mut server = target.start(&["--proto", "chat", "--data", data])?;
    let mut c = ChatClient::connect(server.addr())?;
    c.send("JOIN crafted 0")?;
    for line in [
        "MSG crafted 1 x crafted one",
        "MSG crafted 2 y-Y_9 ",
        "MSG crafted 3 z three 3",
        "JOINED crafted 4",
    ] {
        c.expect_line("replay of a crafted log", line)?;
    }
    // From a connection that has not joined: this test is about recovery, not about
    // who gets which MSG.
    ChatClient::connect(server.addr())?.expect("SAY crafted four", "ACK crafted 4")?;
    c.expect_line("live after a crafted log", "MSG crafted 4 anon four")?;
    server.kill9()?;
    drop(server);

    let rec = |seq: u64, text: &str| roomlog::record(seq, "x", text);
    let mut bad_crc = rec(2, "two");
    let at = bad_crc.len() - 1;
    bad_crc[at] ^= 0x20;
    let bad_utf8 = roomlog::frame(&roomlog::body(2, b"x", b"\xff\xfe"));
    let bad_name = roomlog::frame(&roomlog::body(2, b"x.y", b"two"));
    let cases = [
        (
            "a bad CRC in the middle",
            [rec(1, "one"), bad_crc, rec(3, "three")].concat(),
        ),
        (
            "a seq gap in the middle",
            [rec(1, "one"), rec(3, "three"), rec(4, "four")].concat(),
        ),
        (
            "a seq out of order in the last record",
            [rec(1, "one"), rec(2, "two"), rec(2, "again")].concat(),
        ),
        (
            "text that is not UTF-8 in the middle",
            [rec(1, "one"), bad_utf8, rec(3, "three")].concat(),
        ),
        (
            "a bad name in the middle",
            [rec(1, "one"), bad_name, rec(3, "three")].concat(),
        ),
    ];
    for (what, bytes) in cases {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("broken.log");
        fs::write(&path, &bytes)?;
        let data = dir.path().to_str().context("temp dir path")?;
        let exit = target
            .run_to_exit(&["--proto", "chat", "--data", data])
            .with_context(|| what.to_owned())?;
        ensure!(
            exit.code == Some(2),
            "{what}: expected exit status 2, got {}; stderr: {}",
            exit.describe_status(),
            exit.stderr.trim_end()
        );
        ensure!(exit.stdout.is_empty(), "{what}: stdout {:?}", exit.stdout);
        ensure!(
            exit.stderr.contains("broken.log"),
            "{what}: stderr does not name the file: {:?}",
            exit.stderr
        );
        ensure!(
            fs::read(&path)? == bytes,
            "{what}: the server changed the corrupt file"
        );
    }
    Ok(())
}

/// Every `ERR` of the table in docs/protocol-notes.md, with its exact text, and the
/// connection still usable after each.
fn chat_errors(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "chat"])?;
    let mut c = ChatClient::connect(server.addr())?;
    let long = "n".repeat(65);
    let cases: Vec<(Vec<u8>, &str)> = [
        // UTF-8 is checked before the command.
        (&b"SAY r \xff\n"[..], "ERR invalid utf-8"),
        (b"\xc3\x28\n", "ERR invalid utf-8"),
        (b"nick \xe2\x82\n", "ERR invalid utf-8"),
        (b"\n", "ERR unknown command"),
        (b"\r\n", "ERR unknown command"),
        (b"nick bob\n", "ERR unknown command"),
        (b"HELLO\n", "ERR unknown command"),
        (b"JOINX r 0\n", "ERR unknown command"),
        (b" PING x\n", "ERR unknown command"),
        (b"NICK\n", "ERR wrong number of arguments"),
        (b"NICK a b\n", "ERR wrong number of arguments"),
        (b"JOIN r\n", "ERR wrong number of arguments"),
        (b"JOIN r 1 x\n", "ERR wrong number of arguments"),
        (b"LEAVE\n", "ERR wrong number of arguments"),
        (b"LEAVE r x\n", "ERR wrong number of arguments"),
        (b"SAY r\n", "ERR wrong number of arguments"),
        (b"SAY\n", "ERR wrong number of arguments"),
        (b"PING\n", "ERR wrong number of arguments"),
        (b"NICK bad!name\n", "ERR bad name"),
        ("NICK é\n".as_bytes(), "ERR bad name"),
        (format!("NICK {long}\n").as_bytes(), "ERR bad name"),
        (b"JOIN bad.room 0\n", "ERR bad room"),
        // Arguments are checked left to right: the room before the seq.
        (b"JOIN bad.room x\n", "ERR bad room"),
        (b"SAY r/x hello\n", "ERR bad room"),
        (format!("LEAVE {long}\n").as_bytes(), "ERR bad room"),
        (b"JOIN r -1\n", "ERR bad seq"),
        (b"JOIN r +1\n", "ERR bad seq"),
        (b"JOIN r 1x\n", "ERR bad seq"),
        (b"JOIN r 18446744073709551616\n", "ERR bad seq"),
        (b"JOIN r 000000000000000000001\n", "ERR bad seq"),
    ]
    .iter()
    .map(|(line, reply)| (line.to_vec(), *reply))
    .collect();
    for (i, (line, reply)) in cases.iter().enumerate() {
        c.send_raw(line)?;
        let what = format!("sent {:?}", String::from_utf8_lossy(line));
        c.expect_line(&what, reply)?;
        c.expect(&format!("PING after {i}"), &format!("PONG after {i}"))
            .with_context(|| format!("the connection is not usable after it was {what}"))?;
    }

    // The largest seq is valid; 20 digits are allowed.
    c.expect("JOIN big 18446744073709551615", "JOINED big 1")?;
    c.expect("JOIN big 0", "ERR already joined")?;
    c.expect("LEAVE big", "LEFT big")?;
    c.expect("JOIN big 00000000000000000000", "JOINED big 1")?;
    c.expect("LEAVE big", "LEFT big")?;

    c.expect("JOIN r 0", "JOINED r 1")?;
    c.expect("JOIN r 0", "ERR already joined")?;
    c.expect("JOIN r 5", "ERR already joined")?;
    c.expect("LEAVE q", "ERR not joined")?;
    // The failed JOINs left exactly one subscription: one copy of each message.
    let mut other = ChatClient::connect(server.addr())?;
    other.expect("SAY r once", "ACK r 1")?;
    c.expect_line("still subscribed once", "MSG r 1 anon once")?;
    c.expect("PING between", "PONG between")?;
    c.expect("LEAVE r", "LEFT r")?;
    c.expect("LEAVE r", "ERR not joined")?;
    c.expect("NICK renamed", "OK")?;
    c.expect("SAY r still here", "ACK r 2")?;
    Ok(())
}

/// A line of exactly 4096 bytes is fine; a longer one gets `ERR line too long` and
/// the server closes that connection only.
fn chat_line_too_long(target: &Target) -> Result<()> {
    let server = target.start(&["--proto", "chat"])?;
    let mut watcher = ChatClient::connect(server.addr())?;
    watcher.expect("JOIN big 0", "JOINED big 1")?;

    let mut a = ChatClient::connect(server.addr())?;
    let prefix = "SAY big ";
    let fits = "f".repeat(MAX_LINE - prefix.len() - 1);
    a.expect(&format!("{prefix}{fits}"), "ACK big 1")?;
    // The MSG around a text that long is itself longer than 4096 bytes.
    watcher.expect_line("a 4096-byte SAY", &format!("MSG big 1 anon {fits}"))?;

    let over = "o".repeat(MAX_LINE - prefix.len());
    a.send(&format!("{prefix}{over}"))?;
    a.expect_line("a 4097-byte line", "ERR line too long")?;
    let (rest, partial) = a.recv_until_close(64 * 1024)?;
    ensure!(
        rest.is_empty() && partial.is_empty(),
        "after ERR line too long: {rest:?} {partial:?}"
    );

    // Far past the limit and no newline at all: the server must not wait for one.
    let mut b = ChatClient::connect(server.addr())?;
    b.expect("PING b", "PONG b")?;
    // The server may close before it has read it all; a failed write is fine.
    let _ = b.send_raw(&vec![b'x'; 3 * MAX_LINE]);
    b.expect_line("12 KiB without a newline", "ERR line too long")?;
    let (rest, partial) = b.recv_until_close(64 * 1024)?;
    ensure!(
        rest.is_empty() && partial.is_empty(),
        "after ERR line too long: {rest:?} {partial:?}"
    );

    watcher.expect("PING still here", "PONG still here")?;
    watcher.expect("SAY elsewhere after", "ACK elsewhere 1")?;
    let mut fresh = ChatClient::connect(server.addr())?;
    fresh.expect("PING fresh", "PONG fresh")?;
    Ok(())
}

/// A subscriber that never reads is disconnected once its queue passes
/// `--max-pending`; the sender keeps getting ACKs, another subscriber gets every
/// message, and the slow one can catch up after reconnecting.
fn chat_slow_subscriber(target: &Target) -> Result<()> {
    const ROOM: &str = "slow-room";
    const MAX_PENDING: usize = 64 * 1024;
    const TEXT: usize = 3000;
    // Messages in flight to the fast subscriber at most: 12 KiB, far below the limit
    // even if the server's writer for it is not scheduled for a while.
    const BATCH: u64 = 4;
    let deadline = Deadline::after(Duration::from_secs(15));
    // The slow subscriber's receive buffer, fixed so the kernel cannot grow it.
    const SLOW_RCVBUF: usize = 64 * 1024;
    // The kernel holds up to a send buffer on the server side plus the receive buffer
    // here (the kernel doubles what it is set to) before the server queues anything
    // itself; twice all that, and the server's queue must pass its limit.
    let (wmem, _) = net::tcp_buffer_max();
    let messages = ((2 * (wmem + 2 * SLOW_RCVBUF + MAX_PENDING) + (1 << 20)) / TEXT) as u64;

    let server = target.start(&["--proto", "chat", "--max-pending", &MAX_PENDING.to_string()])?;
    let slow_stream = server.connect()?;
    net::set_recv_buffer(&slow_stream, SLOW_RCVBUF)?;
    let mut slow = ChatClient::from_stream(slow_stream);
    slow.expect(&format!("JOIN {ROOM} 0"), &format!("JOINED {ROOM} 1"))?;
    let mut fast = ChatClient::connect(server.addr())?;
    fast.expect(&format!("JOIN {ROOM} 0"), &format!("JOINED {ROOM} 1"))?;
    let mut sender = ChatClient::connect(server.addr())?;
    sender.expect("NICK sender", "OK")?;
    let text = |seq: u64| format!("{seq:08}{}", "p".repeat(TEXT - 8));

    // The fast subscriber reads as it goes; the sender waits for it to catch up after
    // each batch, so that it never falls far enough behind to count as slow itself.
    let fast_seen = Mutex::new(0u64);
    let fast_moved = Condvar::new();
    thread::scope(|s| -> Result<()> {
        let reader = s.spawn(|| -> Result<()> {
            for seq in 1..=messages {
                let line = fast
                    .recv()
                    .with_context(|| format!("fast subscriber, waiting for seq {seq}"))?;
                let want = format!("MSG {ROOM} {seq} sender {}", text(seq));
                ensure!(
                    line == want,
                    "fast subscriber: expected seq {seq}, got {:.60?}",
                    line
                );
                *fast_seen.lock().unwrap_or_else(|e| e.into_inner()) = seq;
                fast_moved.notify_all();
            }
            Ok(())
        });
        let mut seq = 0;
        while seq < messages {
            let mut seen = fast_seen.lock().unwrap_or_else(|e| e.into_inner());
            while *seen < seq {
                if reader.is_finished() {
                    break;
                }
                let left = deadline.remaining("sender waiting for the fast subscriber")?;
                seen = fast_moved
                    .wait_timeout(seen, left.min(Duration::from_millis(100)))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            drop(seen);
            if reader.is_finished() {
                break;
            }
            let batch = BATCH.min(messages - seq);
            for k in 1..=batch {
                sender.send(&format!("SAY {ROOM} {}", text(seq + k)))?;
            }
            for k in 1..=batch {
                sender
                    .expect_line("sender", &format!("ACK {ROOM} {}", seq + k))
                    .context("the sender must keep getting ACKs while a subscriber is slow")?;
            }
            seq += batch;
        }
        reader
            .join()
            .map_err(|_| anyhow::anyhow!("fast reader panicked"))??;
        Ok(())
    })?;

    // The server closes its side of the slow subscriber's connection, with what the
    // kernel still holds for it unsent. Watching for that in /proc, not by reading,
    // gives a server whose own sending lags behind (a busy machine) the time to notice.
    let (near, far) = (slow.stream().local_addr()?, slow.stream().peer_addr()?);
    while net::tcp_state(far, near)? == Some(net::TCP_ESTABLISHED) {
        deadline.check(&format!(
            "the slow subscriber was not disconnected, with {messages} messages for it"
        ))?;
        thread::sleep(Duration::from_millis(5));
    }
    // Then it gets some prefix of the room, and EOF. A wide window drains it quickly.
    net::set_recv_buffer(slow.stream(), 4 << 20)?;
    let (lines, partial) = slow
        .recv_until_close(messages as usize * (TEXT + 64))
        .context("the slow subscriber was not disconnected")?;
    for (i, line) in lines.iter().enumerate() {
        let want = format!("MSG {ROOM} {} sender {}", i + 1, text(i as u64 + 1));
        ensure!(
            *line == want,
            "slow subscriber: line {} is {:.60?}",
            i + 1,
            line
        );
    }
    let last = lines.len() as u64;
    ensure!(
        last < messages,
        "the slow subscriber got all {messages} messages: it was never cut off"
    );
    eprintln!(
        "chat_slow_subscriber: cut off after {last} of {messages} messages (+{} bytes)",
        partial.len()
    );

    // It catches up after reconnecting.
    let mut back = ChatClient::connect(server.addr())?;
    back.send(&format!("JOIN {ROOM} {last}"))?;
    for seq in last + 1..=messages {
        deadline.check("catching up")?;
        back.expect_line(
            "catching up",
            &format!("MSG {ROOM} {seq} sender {}", text(seq)),
        )?;
    }
    back.expect_line("catching up", &format!("JOINED {ROOM} {}", messages + 1))?;
    Ok(())
}

/// With `--fsync always`, a `SAY` whose sync is held (at the test gate of
/// `service::commit`, `RINGSIDE_TEST_SYNC_GATE`) holds up its own `ACK` only: another
/// connection's `PING` is answered while the sync is pending, on one worker, and the
/// `ACK` follows once the sync is let through.
fn chat_fsync_off_the_loop(target: &Target) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let gate = dir.path().join("gate");
    let pending = dir.path().join("gate.pending");
    let data = dir.path().join("data");
    let data = data.to_str().context("temp dir path")?;
    let args = [
        "--proto",
        "chat",
        "--data",
        data,
        "--fsync",
        "always",
        "--workers",
        "1",
    ];
    let server = target.start_env(&args, &[("RINGSIDE_TEST_SYNC_GATE", gate.as_os_str())])?;
    let mut a = ChatClient::connect(server.addr())?;
    let mut b = ChatClient::connect(server.addr())?;
    b.expect("PING before", "PONG before")?;
    a.send("SAY r held at the gate")?;
    let deadline = Deadline::after(Duration::from_secs(20));
    while !pending.exists() {
        deadline.check("waiting for the SAY's sync to reach the test gate")?;
        thread::sleep(Duration::from_millis(5));
    }
    b.expect(
        "PING while a sync is pending",
        "PONG while a sync is pending",
    )?;
    // The sync is still held, so the ACK cannot have been sent.
    a.stream().set_nonblocking(true)?;
    let mut byte = [0u8; 1];
    let early = a.stream().read(&mut byte);
    a.stream().set_nonblocking(false)?;
    match early {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => bail!("the SAY's connection got {other:?} before its sync was done"),
    }
    fs::write(&gate, b"")?;
    a.expect_line("the ACK after the sync", "ACK r 1")?;
    a.expect("SAY r next", "ACK r 2")?;
    b.expect("SAY r from b", "ACK r 3")?;
    Ok(())
}

/// A connection that sends 100,000 `PING`s one at a time, each after the `PONG` of the
/// last (so that each is a read of its own on the server), grows the server's memory by
/// less than 2 MiB between the 10,000th and the 100,000th. Something a server paid per
/// read and kept until the connection ends (a cancel registration that only a cancel
/// empties, say: compio keeps one per read submitted under its `CancelToken`) would hold
/// 90,000 of them, tens of MiB.
fn chat_pings_leave_memory_flat(target: &Target) -> Result<()> {
    const WARM: u32 = 10_000;
    const PINGS: u32 = 100_000;
    // Go's heap grows to its GC target (twice the live heap, GOGC=100) before it collects,
    // and its scavenger gives pages back lazily, so srv-go's RSS rises by a few MiB of
    // garbage before it levels (4.3 MiB for the event loop): its bound is the GC's pacing
    // plus room, still far below a leak of 200 bytes a PING (17 MiB over 90,000).
    let bound: u64 = if target.spec().bin == "srv-go" {
        12 << 20
    } else {
        2 << 20
    };
    let server = target.start(&["--proto", "chat"])?;
    let mut c = ChatClient::connect(server.addr())?;
    let mut warm = None;
    for i in 1..=PINGS {
        c.expect(&format!("PING {i}"), &format!("PONG {i}"))?;
        if i == WARM {
            warm = Some(server.rss()?);
        }
    }
    let warm = warm.context("no reading after the warm-up")?;
    let end = server.rss()?;
    let grown = end.saturating_sub(warm);
    eprintln!(
        "chat_pings_leave_memory_flat: {} KiB after {WARM} PINGs, {} KiB after {PINGS}",
        warm >> 10,
        end >> 10
    );
    ensure!(
        grown < bound,
        "the server grew by {} KiB between the {WARM}th and the {PINGS}th PING of one \
         connection (bound {} KiB)",
        grown >> 10,
        bound >> 10
    );
    Ok(())
}
