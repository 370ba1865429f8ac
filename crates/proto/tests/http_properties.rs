//! Property tests of the HTTP/1.1 request buffer: any split of a stream of requests into
//! reads parses the same as the whole (valid or not, bodies included), and arbitrary bytes
//! never panic it nor grow it past the head limit.

use proptest::prelude::*;
use proto::http::{MAX_HEAD, Method, RequestBuffer, RequestError};

type Parsed = (Vec<(Method, String, bool)>, Option<RequestError>);

/// Everything a stream parses to, fed in the pieces `cuts` makes.
fn parse_in_chunks(stream: &[u8], cuts: &[usize]) -> Parsed {
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
                Ok(r) => requests.push((r.method, r.path.to_owned(), r.keep_alive)),
                Err(e) => error = Some(e),
            }
        }
        assert!(buf.pending() <= MAX_HEAD + stream.len().min(MAX_HEAD));
    }
    (requests, error)
}

/// A request: its method, path, body length and whether it asks to close.
fn request() -> impl Strategy<Value = (Method, String, usize, bool)> {
    (
        prop_oneof![Just(Method::Get), Just(Method::Head), Just(Method::Other)],
        "/[a-z]{0,12}",
        prop_oneof![Just(0usize), 1usize..300],
        proptest::bool::weighted(0.1),
    )
}

fn encode((method, path, body, close): &(Method, String, usize, bool)) -> Vec<u8> {
    let name = match method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Other => "POST",
    };
    let mut out = format!("{name} {path} HTTP/1.1\r\nHost: x\r\n").into_bytes();
    if *body > 0 {
        out.extend_from_slice(format!("Content-Length: {body}\r\n").as_bytes());
    }
    if *close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    // A body that looks like a request, to catch one parsed as such.
    out.extend(b"GET /no HTTP/1.1\r\n\r\n".iter().cycle().take(*body));
    out
}

proptest! {
    #[test]
    fn any_split_of_pipelined_requests_parses_the_same(
        requests in proptest::collection::vec(request(), 1..10),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let stream: Vec<u8> = requests.iter().flat_map(encode).collect();
        let whole = parse_in_chunks(&stream, &[]);
        let expected: Vec<_> = requests.iter().map(|(m, p, _, c)| (*m, p.clone(), !c)).collect();
        prop_assert_eq!(&whole, &(expected, None));
        prop_assert_eq!(parse_in_chunks(&stream, &cuts), whole);
    }

    #[test]
    fn byte_by_byte_is_the_same_as_whole(requests in proptest::collection::vec(request(), 1..4)) {
        let stream: Vec<u8> = requests.iter().flat_map(encode).collect();
        let cuts: Vec<usize> = (0..stream.len()).collect();
        prop_assert_eq!(parse_in_chunks(&stream, &cuts), parse_in_chunks(&stream, &[]));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_split_the_same(
        prefix in proptest::collection::vec(request(), 0..3),
        junk in proptest::collection::vec(any::<u8>(), 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut stream: Vec<u8> = prefix.iter().flat_map(encode).collect();
        stream.extend_from_slice(&junk);
        prop_assert_eq!(parse_in_chunks(&stream, &cuts), parse_in_chunks(&stream, &[]));
    }
}
