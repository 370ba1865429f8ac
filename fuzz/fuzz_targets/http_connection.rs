//! Fuzzes the http request path end to end, `proto::http::RequestBuffer` (httparse) under
//! `service::http::Connection`: no input panics it, and the responses do not depend on how
//! the input is cut into reads (the first byte of the input picks the cut; the `Date`
//! values, which read the clock, are blanked before comparing).
#![no_main]

use libfuzzer_sys::fuzz_target;
use service::exchange::{Exchange, Feed, Flow};
use service::http::Connection;

/// The responses to `input` fed in pieces of `piece` bytes, and whether it closed.
fn run(input: &[u8], piece: usize) -> (Vec<u8>, bool) {
    let mut conn = Connection::new(64 * 1024);
    let mut out = Vec::new();
    let mut closed = false;
    'feed: for chunk in input.chunks(piece.max(1)) {
        conn.feed(chunk);
        loop {
            match conn.execute(&mut out) {
                Flow::NeedInput => break,
                Flow::OutputFull => continue,
                Flow::Close => {
                    closed = true;
                    break 'feed;
                }
            }
        }
    }
    // Blank every Date value: the second may turn between the two runs.
    let mut at = 0;
    while let Some(i) = out[at..].windows(6).position(|w| w == b"Date: ") {
        let start = at + i + 6;
        let end = (start + proto::http::DATE_LEN).min(out.len());
        out[start..end].fill(b'-');
        at = end;
    }
    (out, closed)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    assert_eq!(run(input, input.len()), run(input, usize::from(cut) + 1));
});
