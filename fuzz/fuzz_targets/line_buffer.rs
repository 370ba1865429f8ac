//! Fuzzes `proto::chat::LineBuffer`: the first two bytes choose a line limit and a read
//! size, the rest is the stream. Fed through `spare`/`commit` in reads of that size, it
//! must yield exactly the lines of the same stream fed in one piece, each under the
//! limit and without a newline, and stop at the first line too long.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto::chat::LineBuffer;

fn lines(lb: &mut LineBuffer, got: &mut Vec<Result<Vec<u8>, ()>>, limit: usize) {
    while let Some(line) = lb.next_line() {
        match line {
            Ok(line) => {
                assert!(line.len() < limit.max(1));
                assert!(!line.contains(&b'\n'));
                got.push(Ok(line.to_vec()));
            }
            Err(_) => {
                got.push(Err(()));
                return;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [limit, step, stream @ ..] = data else {
        return;
    };
    let limit = usize::from(*limit) * 4;
    let step = usize::from(*step).max(1);

    let mut whole = LineBuffer::new(limit);
    whole.extend_from_slice(stream);
    let mut want = Vec::new();
    lines(&mut whole, &mut want, limit);

    let mut split = LineBuffer::new(limit);
    let mut got = Vec::new();
    for chunk in stream.chunks(step) {
        if got.last() == Some(&Err(())) {
            break;
        }
        let spare = split.spare();
        let n = spare.len().min(chunk.len());
        spare[..n].copy_from_slice(&chunk[..n]);
        split.commit(n);
        split.extend_from_slice(&chunk[n..]);
        lines(&mut split, &mut got, limit);
    }
    assert_eq!(got, want);
});
