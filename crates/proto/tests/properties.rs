//! Property tests of the public codecs: encode and parse round-trip, arbitrary bytes never
//! panic a parser, and line splitting and message cutting do not depend on how the
//! stream is cut into reads.

use std::num::NonZeroUsize;

use proptest::prelude::*;
use proto::chat::{
    ChatError, Command, LineBuffer, MAX_LINE, MAX_SERVER_LINE, Reply, is_valid_name,
};
use proto::echo::MessageCutter;

/// A valid name or room: 1 to 64 bytes of `[A-Za-z0-9_-]`.
fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_-]{1,64}"
}

/// A free text (SAY text, PING token, ERR reason): any chars but `\n`, of up to `max`
/// chars, not ending in `\r` when `no_trailing_cr` (a client's trailing `\r` is dropped).
fn text(max: usize, no_trailing_cr: bool) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        any::<char>().prop_filter("no newline", |&c| c != '\n'),
        0..max,
    )
    .prop_map(move |chars| {
        let mut s: String = chars.into_iter().collect();
        if no_trailing_cr {
            while s.ends_with('\r') {
                s.pop();
            }
        }
        s
    })
}

/// A text that is never empty.
fn token(max: usize, no_trailing_cr: bool) -> impl Strategy<Value = String> {
    text(max, no_trailing_cr).prop_map(|s| if s.is_empty() { "t".to_string() } else { s })
}

#[derive(Debug, Clone)]
enum OwnedCommand {
    Nick(String),
    Join(String, u64),
    Leave(String),
    Say(String, String),
    Ping(String),
}

impl OwnedCommand {
    fn borrow(&self) -> Command<'_> {
        match self {
            OwnedCommand::Nick(name) => Command::Nick { name },
            OwnedCommand::Join(room, since) => Command::Join {
                room,
                since: *since,
            },
            OwnedCommand::Leave(room) => Command::Leave { room },
            OwnedCommand::Say(room, text) => Command::Say { room, text },
            OwnedCommand::Ping(token) => Command::Ping { token },
        }
    }
}

fn command() -> impl Strategy<Value = OwnedCommand> {
    prop_oneof![
        name().prop_map(OwnedCommand::Nick),
        (name(), any::<u64>()).prop_map(|(r, s)| OwnedCommand::Join(r, s)),
        name().prop_map(OwnedCommand::Leave),
        // Up to 1000 chars of up to 4 bytes stays within MAX_LINE.
        (name(), text(1000, true)).prop_map(|(r, t)| OwnedCommand::Say(r, t)),
        token(1000, true).prop_map(OwnedCommand::Ping),
    ]
}

#[derive(Debug, Clone)]
enum OwnedReply {
    Ok,
    Msg(String, u64, String, String),
    Ack(String, u64),
    Joined(String, u64),
    Left(String),
    Pong(String),
    Err(String),
}

impl OwnedReply {
    fn borrow(&self) -> Reply<'_> {
        match self {
            OwnedReply::Ok => Reply::Ok,
            OwnedReply::Msg(room, seq, name, text) => Reply::Msg {
                room,
                seq: *seq,
                name,
                text,
            },
            OwnedReply::Ack(room, seq) => Reply::Ack { room, seq: *seq },
            OwnedReply::Joined(room, next) => Reply::Joined { room, next: *next },
            OwnedReply::Left(room) => Reply::Left { room },
            OwnedReply::Pong(token) => Reply::Pong { token },
            OwnedReply::Err(reason) => Reply::Err { reason },
        }
    }
}

fn reply() -> impl Strategy<Value = OwnedReply> {
    prop_oneof![
        Just(OwnedReply::Ok),
        // Server lines keep a client's inner and trailing '\r' as they are.
        (name(), any::<u64>(), name(), text(1000, false))
            .prop_map(|(r, s, n, t)| OwnedReply::Msg(r, s, n, t)),
        (name(), any::<u64>()).prop_map(|(r, s)| OwnedReply::Ack(r, s)),
        (name(), any::<u64>()).prop_map(|(r, n)| OwnedReply::Joined(r, n)),
        name().prop_map(OwnedReply::Left),
        token(1000, false).prop_map(OwnedReply::Pong),
        prop_oneof![
            proptest::sample::select(ChatError::ALL.to_vec()).prop_map(|e| e.reason().to_string()),
            token(100, false),
        ]
        .prop_map(OwnedReply::Err),
    ]
}

/// Cut points that split `len` bytes into chunks, from arbitrary raw positions.
fn cuts(len: usize, raw: &[usize]) -> Vec<usize> {
    let mut cuts: Vec<usize> = raw.iter().map(|c| c % (len + 1)).collect();
    cuts.push(0);
    cuts.push(len);
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// The lines of `stream` as a plain reference splitter sees them, with the first line
/// too long ending the list.
fn reference_lines(stream: &[u8], limit: usize) -> Vec<Result<Vec<u8>, ChatError>> {
    let mut out = Vec::new();
    let mut rest = stream;
    loop {
        let window = &rest[..rest.len().min(limit)];
        match window.iter().position(|&b| b == b'\n') {
            Some(at) => {
                out.push(Ok(rest[..at].to_vec()));
                rest = &rest[at + 1..];
            }
            None => {
                if rest.len() >= limit {
                    out.push(Err(ChatError::LineTooLong));
                }
                return out;
            }
        }
    }
}

/// Streams bytes made mostly of newlines and a few letters, so lines of every length
/// around small limits show up often.
fn line_stream() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![3 => Just(b'a'), 1 => Just(b'\n'), 1 => Just(b'\r'), 1 => any::<u8>()],
        0..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn command_round_trips(cmd in command()) {
        let cmd = cmd.borrow();
        let mut line = Vec::new();
        cmd.encode(&mut line);
        prop_assert!(line.len() <= MAX_LINE);
        prop_assert_eq!(line.pop(), Some(b'\n'));
        prop_assert_eq!(Command::parse(&line), Ok(cmd));
        // The same line with '\r\n', as a terminal sends it.
        line.push(b'\r');
        prop_assert_eq!(Command::parse(&line), Ok(cmd));
    }

    #[test]
    fn reply_round_trips(reply in reply()) {
        let reply = reply.borrow();
        let mut line = Vec::new();
        reply.encode(&mut line);
        prop_assert!(line.len() <= MAX_SERVER_LINE);
        prop_assert_eq!(line.pop(), Some(b'\n'));
        prop_assert_eq!(Reply::parse(&line), Ok(reply));
    }

    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Command::parse(&bytes);
        let _ = Reply::parse(&bytes);
    }

    #[test]
    fn parsers_never_panic_on_near_misses(
        word in prop_oneof![
            Just("NICK"), Just("JOIN"), Just("LEAVE"), Just("SAY"), Just("PING"),
            Just("OK"), Just("MSG"), Just("ACK"), Just("JOINED"), Just("LEFT"),
            Just("PONG"), Just("ERR"),
        ],
        rest in proptest::collection::vec(
            prop_oneof![Just(b' '), Just(b'\r'), Just(b'1'), Just(b'r'), any::<u8>()],
            0..40,
        ),
    ) {
        let mut line = word.as_bytes().to_vec();
        line.extend_from_slice(&rest);
        if let Ok(cmd) = Command::parse(&line) {
            // Whatever parses encodes back to a line that parses the same.
            let mut out = Vec::new();
            cmd.encode(&mut out);
            out.pop();
            prop_assert_eq!(Command::parse(&out), Ok(cmd));
        }
        if let Ok(reply) = Reply::parse(&line) {
            let mut out = Vec::new();
            reply.encode(&mut out);
            out.pop();
            prop_assert_eq!(Reply::parse(&out), Ok(reply));
        }
    }

    #[test]
    fn nick_accepts_exactly_the_valid_names(
        bytes in proptest::collection::vec(
            prop_oneof![
                20 => proptest::sample::select(
                    b"abcXYZ019_-".to_vec()
                ),
                1 => any::<u8>(),
            ],
            0..70,
        ),
    ) {
        let mut line = b"NICK ".to_vec();
        line.extend_from_slice(&bytes);
        let name = bytes.strip_suffix(b"\r").unwrap_or(&bytes);
        let parsed = Command::parse(&line);
        if is_valid_name(name) {
            let name = std::str::from_utf8(name).expect("valid names are ASCII");
            prop_assert_eq!(parsed, Ok(Command::Nick { name }));
        } else {
            prop_assert!(parsed.is_err());
        }
    }

    #[test]
    fn line_buffer_matches_reference(
        stream in line_stream(),
        limit in 1usize..20,
        raw_cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let want = reference_lines(&stream, limit);
        let cuts = cuts(stream.len(), &raw_cuts);

        let mut lb = LineBuffer::new(limit);
        let mut got = Vec::new();
        'feed: for pair in cuts.windows(2) {
            let mut chunk = &stream[pair[0]..pair[1]];
            while !chunk.is_empty() {
                let spare = lb.spare();
                prop_assert!(!spare.is_empty());
                let n = spare.len().min(chunk.len());
                spare[..n].copy_from_slice(&chunk[..n]);
                lb.commit(n);
                chunk = &chunk[n..];
                while let Some(line) = lb.next_line() {
                    let failed = line.is_err();
                    got.push(line.map(<[u8]>::to_vec));
                    if failed {
                        break 'feed;
                    }
                }
            }
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn line_buffer_extend_matches_reference(
        stream in line_stream(),
        limit in 1usize..20,
        raw_cuts in proptest::collection::vec(any::<usize>(), 0..20),
    ) {
        let want = reference_lines(&stream, limit);
        let cuts = cuts(stream.len(), &raw_cuts);

        let mut lb = LineBuffer::new(limit);
        let mut got = Vec::new();
        'feed: for pair in cuts.windows(2) {
            lb.extend_from_slice(&stream[pair[0]..pair[1]]);
            while let Some(line) = lb.next_line() {
                let failed = line.is_err();
                got.push(line.map(<[u8]>::to_vec));
                if failed {
                    break 'feed;
                }
            }
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn line_buffer_never_panics(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..5000), 0..8),
        limit in 0usize..10_000,
        interleave in any::<bool>(),
    ) {
        let mut lb = LineBuffer::new(limit);
        for chunk in &chunks {
            if interleave {
                let spare = lb.spare();
                let n = spare.len().min(chunk.len());
                spare[..n].copy_from_slice(&chunk[..n]);
                lb.commit(n);
                lb.extend_from_slice(&chunk[n..]);
            } else {
                lb.extend_from_slice(chunk);
            }
            let mut lines = 0;
            while let Some(line) = lb.next_line() {
                if let Ok(line) = line {
                    prop_assert!(line.len() < limit.max(1));
                    let _ = Command::parse(line);
                } else {
                    break;
                }
                lines += 1;
                prop_assert!(lines <= 5000);
            }
        }
    }

    #[test]
    fn cutter_counts_whole_messages(
        size in 1usize..100,
        feeds in proptest::collection::vec(0usize..500, 0..50),
    ) {
        let mut cutter = MessageCutter::new(NonZeroUsize::new(size).expect("size >= 1"));
        let mut messages = 0;
        let mut total = 0;
        for n in feeds {
            messages += cutter.feed(n);
            total += n;
            prop_assert_eq!(messages, total / size);
            prop_assert_eq!(cutter.partial_len(), total % size);
        }
        prop_assert_eq!(cutter.msg_size(), size);
    }
}

/// Found by `parsers_never_panic_on_near_misses`: `PING \r\r` parses to the token `\r`,
/// which must encode to a command line that parses back to it (a server drops one `\r`
/// before the `\n`; replies have no such rule).
#[test]
fn a_command_token_or_text_ending_in_cr_survives_a_round_trip() {
    let cmd = Command::parse(b"PING \r\r").unwrap();
    let mut out = Vec::new();
    cmd.encode(&mut out);
    assert_eq!(out, b"PING \r\r\n");
    out.pop();
    assert_eq!(Command::parse(&out), Ok(cmd));
    let say = Command::parse(b"SAY r hi\r\r").unwrap();
    let mut out = Vec::new();
    say.encode(&mut out);
    assert_eq!(Command::parse(&out[..out.len() - 1]), Ok(say));
}
