//! Property tests of the RESP2 codec: requests and replies round-trip through their
//! encoders and parsers, any split of a stream into reads parses the same as the whole
//! (valid or not), and arbitrary bytes never panic either parser.

use proptest::prelude::*;
use proto::resp::{ProtocolError, Reply, RequestBuffer, encode_request, parse_reply};

type Words = Vec<Vec<u8>>;

/// Everything a stream parses to: the requests, and the error that ended it if any.
fn parse_in_chunks(stream: &[u8], cuts: &[usize]) -> (Vec<Words>, Option<ProtocolError>) {
    let mut buf = RequestBuffer::new();
    let mut requests = Vec::new();
    let mut error = None;
    let mut at = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(stream.len());
    for end in bounds {
        buf.extend_from_slice(&stream[at..end]);
        at = end;
        while let Some(r) = buf.next_request() {
            match r {
                Ok(r) => requests.push(r.args().map(<[u8]>::to_vec).collect()),
                Err(e) => error = Some(e),
            }
        }
    }
    (requests, error)
}

/// An inline request line for `words`, each double-quoted with every byte that is not
/// alphanumeric written as `\xHH`, the way a careful client quotes binary words.
fn inline_line(words: &Words) -> Vec<u8> {
    let mut line = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        line.push(b'"');
        for &b in w {
            if b.is_ascii_alphanumeric() {
                line.push(b);
            } else {
                line.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            }
        }
        line.push(b'"');
    }
    line.extend_from_slice(b"\r\n");
    line
}

fn words() -> impl Strategy<Value = Words> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6)
}

/// A request and whether it goes inline.
fn requests() -> impl Strategy<Value = Vec<(Words, bool)>> {
    proptest::collection::vec((words(), any::<bool>()), 1..12)
}

fn encode_all(requests: &[(Words, bool)]) -> Vec<u8> {
    let mut stream = Vec::new();
    for (words, inline) in requests {
        if *inline {
            stream.extend_from_slice(&inline_line(words));
        } else {
            encode_request(&mut stream, words);
        }
    }
    stream
}

fn reply() -> impl Strategy<Value = Reply> {
    let line = proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..30,
    );
    let leaf = prop_oneof![
        line.clone().prop_map(Reply::Simple),
        line.prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        proptest::collection::vec(any::<u8>(), 0..60).prop_map(Reply::Bulk),
        Just(Reply::Null),
        Just(Reply::NullArray),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        proptest::collection::vec(inner, 0..6).prop_map(Reply::Array)
    })
}

proptest! {
    #[test]
    fn requests_round_trip_in_any_split(
        requests in requests(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let stream = encode_all(&requests);
        let expected: Vec<Words> = requests.iter().map(|(w, _)| w.clone()).collect();
        prop_assert_eq!(parse_in_chunks(&stream, &[]), (expected.clone(), None));
        prop_assert_eq!(parse_in_chunks(&stream, &cuts), (expected, None));
    }

    #[test]
    fn requests_split_byte_by_byte(requests in requests()) {
        let stream = encode_all(&requests);
        let cuts: Vec<usize> = (0..stream.len()).collect();
        let expected: Vec<Words> = requests.iter().map(|(w, _)| w.clone()).collect();
        prop_assert_eq!(parse_in_chunks(&stream, &cuts), (expected, None));
    }

    /// Arbitrary bytes (a valid stream with bytes changed, or noise) never panic, and
    /// whatever they parse to, requests and error alike, does not depend on the reads.
    #[test]
    fn any_bytes_parse_the_same_in_any_split(
        requests in requests(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        noise in proptest::collection::vec(any::<u8>(), 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut stream = encode_all(&requests);
        for (at, byte) in flips {
            let len = stream.len();
            stream[at % len] = byte;
        }
        stream.extend_from_slice(&noise);
        prop_assert_eq!(parse_in_chunks(&stream, &cuts), parse_in_chunks(&stream, &[]));
        prop_assert_eq!(parse_in_chunks(&noise, &cuts), parse_in_chunks(&noise, &[]));
    }

    #[test]
    fn replies_round_trip(replies in proptest::collection::vec(reply(), 1..8)) {
        let mut stream = Vec::new();
        for r in &replies {
            r.encode(&mut stream);
        }
        let mut at = 0;
        for r in &replies {
            // Every strict prefix of a reply is incomplete, never an error.
            let (parsed, used) = parse_reply(&stream[at..]).expect("valid").expect("complete");
            prop_assert_eq!(&parsed, r);
            for end in at..at + used {
                prop_assert_eq!(parse_reply(&stream[at..end]), Ok(None));
            }
            at += used;
        }
        prop_assert_eq!(at, stream.len());
    }

    #[test]
    fn any_bytes_never_panic_the_reply_parser(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        // Whatever the bytes, a parsed reply uses no byte it was not given.
        if let Ok(Some((_, used))) = parse_reply(&bytes) {
            prop_assert!(used <= bytes.len());
        }
    }
}
