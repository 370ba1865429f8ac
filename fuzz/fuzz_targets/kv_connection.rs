//! Fuzzes the kv request path end to end, `proto::resp::RequestBuffer` under
//! `service::kv::Connection`: no input panics it, and the replies do not depend on how
//! the input is cut into reads (the first byte of the input picks the cut).
#![no_main]

use libfuzzer_sys::fuzz_target;
use service::kv::{Connection, Flow, Store};

/// The replies to `input` fed in pieces of `piece` bytes, and whether it closed.
fn run(input: &[u8], piece: usize) -> (Vec<u8>, bool) {
    let store = Store::new();
    let mut conn = Connection::new();
    let mut out = Vec::new();
    for chunk in input.chunks(piece.max(1)) {
        conn.feed(chunk);
        loop {
            match conn.execute(&store, &mut out, 64 * 1024) {
                Flow::NeedInput => break,
                Flow::OutputFull => continue,
                Flow::Close => return (out, true),
            }
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    // TTL replies and expiry read the clock, so only inputs without them compare.
    let timed = |w: &[u8]| {
        w.windows(3)
            .any(|x| x.eq_ignore_ascii_case(b"ttl") || x.eq_ignore_ascii_case(b"exp"))
            || w.windows(2).any(|x| {
                x.eq_ignore_ascii_case(b"ex") || x.eq_ignore_ascii_case(b"px")
            })
    };
    let whole = run(input, input.len());
    let cut = run(input, usize::from(cut) + 1);
    if !timed(input) {
        assert_eq!(whole, cut);
    }
});
