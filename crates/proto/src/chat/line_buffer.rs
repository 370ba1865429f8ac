//! [`LineBuffer`]: splits a byte stream into `\n`-terminated lines under a length limit,
//! with one buffer read into directly and compacted in place, so that a line costs
//! neither a copy nor an allocation.

use super::ChatError;

/// How much free space [`LineBuffer::spare`] offers at least (when the limit allows):
/// enough for a typical read without making every connection's buffer large.
const MIN_SPARE: usize = 4096;

/// Splits a byte stream into lines, enforcing a limit ([`MAX_LINE`] for servers reading
/// clients, [`MAX_SERVER_LINE`] for clients reading servers).
///
/// Read straight into [`spare`](Self::spare) and [`commit`](Self::commit) what the read
/// returned (or hand over bytes already read with
/// [`extend_from_slice`](Self::extend_from_slice)), then call
/// [`next_line`](Self::next_line) until it returns `None` before reading again. Lines are
/// borrowed from the buffer; the bytes of a partial line are moved to the front only
/// when more room is needed.
///
/// A line too long is fatal: the stream cannot be split into lines after it, so every
/// later `next_line` returns the same error and bytes given after it are dropped.
///
/// ```
/// use proto::chat::{LineBuffer, MAX_LINE};
///
/// let mut lines = LineBuffer::new(MAX_LINE);
/// let incoming = b"PING a\nPI";
/// let spare = lines.spare();
/// spare[..incoming.len()].copy_from_slice(incoming); // as a read(2) would
/// lines.commit(incoming.len());
/// assert_eq!(lines.next_line(), Some(Ok(&b"PING a"[..])));
/// assert_eq!(lines.next_line(), None);
/// assert_eq!(lines.pending(), 2);
/// ```
///
/// [`MAX_LINE`]: super::MAX_LINE
/// [`MAX_SERVER_LINE`]: super::MAX_SERVER_LINE
#[derive(Debug)]
pub struct LineBuffer {
    /// Backing storage; its length is the physical size, all of it initialised.
    buf: Vec<u8>,
    /// # Invariant
    /// `start <= end <= buf.len()`; `buf[start..end]` are the pending bytes.
    start: usize,
    end: usize,
    /// # Invariant
    /// `buf[start..start + scanned]` holds no `\n`, and `start + scanned <= end`; it
    /// spares rescanning a long partial line each time a few more bytes arrive.
    scanned: usize,
    /// Longest line, newline included; at least 1.
    limit: usize,
    /// A line too long was reported; nothing else will be.
    overflowed: bool,
}

impl LineBuffer {
    /// An empty buffer for lines of at most `limit` bytes, newline included. Nothing is
    /// allocated until the first bytes arrive. A `limit` of 0 is taken as 1 (only empty
    /// lines), since no line can be shorter than its newline.
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            end: 0,
            scanned: 0,
            limit: limit.max(1),
            overflowed: false,
        }
    }

    /// The longest line this buffer accepts, newline included.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Free space to read into: at least `min(4096, room left)` bytes, where room left is
    /// what the limit still allows for the line in progress. Grows or compacts the buffer
    /// as needed, never beyond what `limit` requires.
    ///
    /// After [`next_line`](Self::next_line) has returned `None`, the room left is at least
    /// one byte, so the slice is never empty and a read of 0 bytes into it means EOF.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
        }
        let pending = self.end - self.start;
        let want = MIN_SPARE.min(self.limit.saturating_sub(pending));
        if self.buf.len() - self.end < want {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.start = 0;
                self.end = pending;
            }
            if self.buf.len() - self.end < want {
                // Doubling keeps growth amortised; `pending + want <= limit`, so the
                // buffer never outgrows the limit on this path.
                let doubled = self.buf.len().saturating_mul(2).min(self.limit);
                self.buf.resize(doubled.max(pending + want), 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Records that the first `n` bytes of [`spare`](Self::spare) were written.
    ///
    /// # Panics
    ///
    /// If `n` is larger than the slice `spare` returned: the caller claims bytes it did
    /// not write.
    pub fn commit(&mut self, n: usize) {
        assert!(
            n <= self.buf.len() - self.end,
            "LineBuffer::commit({n}) beyond the {} bytes of spare()",
            self.buf.len() - self.end
        );
        if !self.overflowed {
            self.end += n;
        }
    }

    /// Appends bytes the caller already holds. The buffer grows to hold all of them,
    /// limit or not, since lines already complete in `data` must still be returned; feed
    /// bounded chunks and drain lines in between to keep memory bounded.
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        if self.overflowed || data.is_empty() {
            return;
        }
        let pending = self.end - self.start;
        if self.buf.len() - self.end < data.len() && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = pending;
        }
        let needed = self.end + data.len();
        if self.buf.len() < needed {
            self.buf.resize(needed, 0);
        }
        self.buf[self.end..needed].copy_from_slice(data);
        self.end = needed;
    }

    /// The next complete line without its `\n` (a `\r` before it is left for
    /// [`Command::parse`](super::Command::parse) to drop), `None` when no complete line
    /// is buffered, or `Err(ChatError::LineTooLong)` once `limit` bytes are pending
    /// without a newline among them. A line of exactly `limit` bytes including its `\n`
    /// is fine; `limit + 1` is too long.
    pub fn next_line(&mut self) -> Option<Result<&[u8], ChatError>> {
        if self.overflowed {
            return Some(Err(ChatError::LineTooLong));
        }
        let pending = self.end - self.start;
        // A newline past the first `limit` bytes would end a line that is too long.
        let window = pending.min(self.limit);
        if self.scanned < window {
            let from = self.start + self.scanned;
            match find_newline(&self.buf[from..self.start + window]) {
                Some(at) => {
                    let line_start = self.start;
                    let newline = from + at;
                    self.start = newline + 1;
                    self.scanned = 0;
                    return Some(Ok(&self.buf[line_start..newline]));
                }
                None => self.scanned = window,
            }
        }
        if pending >= self.limit {
            self.overflowed = true;
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
            return Some(Err(ChatError::LineTooLong));
        }
        None
    }

    /// Buffered bytes not yet returned as lines.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }
}

/// The index of the first `\n` in `hay`, eight bytes at a time.
///
/// Finding line ends is most of the bytes a chat server's parsing touches; testing eight
/// bytes per step keeps that cheap without `unsafe` or a dependency such as `memchr`.
fn find_newline(hay: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut chunks = hay.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        // Bytes equal to '\n' become zero; the classic zero-byte test then flags them.
        // Its false positives only ever sit above a true zero byte, so the lowest flag,
        // which little-endian order puts first in memory, is exact.
        let word = u64::from_le_bytes(bytes) ^ NEWLINES;
        let zeros = word.wrapping_sub(ONES) & !word & HIGHS;
        if zeros != 0 {
            return Some(offset + (zeros.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|at| offset + at)
}

#[cfg(test)]
mod tests {
    use super::super::{MAX_LINE, MAX_SERVER_LINE};
    use super::*;

    /// Feeds `chunks` through `spare`/`commit` and collects every line (or the error).
    fn split_via_spare(limit: usize, chunks: &[&[u8]]) -> Vec<Result<Vec<u8>, ChatError>> {
        let mut lb = LineBuffer::new(limit);
        let mut lines = Vec::new();
        for chunk in chunks {
            let mut rest = *chunk;
            while !rest.is_empty() {
                let spare = lb.spare();
                assert!(!spare.is_empty(), "spare() empty after next_line() -> None");
                let n = spare.len().min(rest.len());
                spare[..n].copy_from_slice(&rest[..n]);
                lb.commit(n);
                rest = &rest[n..];
                while let Some(line) = lb.next_line() {
                    let failed = line.is_err();
                    lines.push(line.map(<[u8]>::to_vec));
                    if failed {
                        return lines;
                    }
                }
            }
        }
        lines
    }

    fn ok_lines(lines: &[&str]) -> Vec<Result<Vec<u8>, ChatError>> {
        lines.iter().map(|l| Ok(l.as_bytes().to_vec())).collect()
    }

    #[test]
    fn many_lines_in_one_chunk() {
        let mut lb = LineBuffer::new(MAX_LINE);
        let mut stream = Vec::new();
        for i in 0..1000 {
            stream.extend_from_slice(format!("PING {i}\n").as_bytes());
        }
        lb.extend_from_slice(&stream);
        for i in 0..1000 {
            let line = lb.next_line().expect("a line").expect("short");
            assert_eq!(line, format!("PING {i}").as_bytes());
        }
        assert_eq!(lb.next_line(), None);
        assert_eq!(lb.pending(), 0);
    }

    #[test]
    fn split_at_every_byte_boundary() {
        let stream = b"NICK bob\r\nJOIN r 0\n\nSAY r hello world\r\nPING x\nSAY r part";
        let want = ok_lines(&[
            "NICK bob\r",
            "JOIN r 0",
            "",
            "SAY r hello world\r",
            "PING x",
        ]);
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(split_via_spare(MAX_LINE, &[a, b]), want, "cut at {cut}");
            for cut2 in cut..=stream.len() {
                let (b1, b2) = b.split_at(cut2 - cut);
                assert_eq!(
                    split_via_spare(MAX_LINE, &[a, b1, b2]),
                    want,
                    "cuts at {cut}, {cut2}"
                );
            }
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(split_via_spare(MAX_LINE, &bytes), want);
    }

    #[test]
    fn exactly_limit_and_limit_plus_one() {
        for limit in [1, 2, 7, 8, 9, MAX_LINE, MAX_SERVER_LINE] {
            let mut exact = vec![b'a'; limit - 1];
            exact.push(b'\n');
            let mut over = vec![b'a'; limit];
            over.push(b'\n');
            let line = &exact[..limit - 1];
            for chunk in [1, 3, 4096, usize::MAX] {
                let pieces: Vec<&[u8]> = exact.chunks(chunk.min(exact.len())).collect();
                assert_eq!(
                    split_via_spare(limit, &pieces),
                    vec![Ok(line.to_vec())],
                    "limit {limit}, chunks of {chunk}"
                );
                let pieces: Vec<&[u8]> = over.chunks(chunk.min(over.len())).collect();
                assert_eq!(
                    split_via_spare(limit, &pieces),
                    vec![Err(ChatError::LineTooLong)],
                    "limit {limit}, chunks of {chunk}"
                );
            }
        }
    }

    #[test]
    fn too_long_is_reported_before_the_newline_arrives() {
        let mut lb = LineBuffer::new(8);
        lb.extend_from_slice(b"1234567");
        assert_eq!(lb.next_line(), None);
        lb.extend_from_slice(b"8");
        assert_eq!(lb.next_line(), Some(Err(ChatError::LineTooLong)));
    }

    #[test]
    fn too_long_after_good_lines_and_sticky() {
        let mut lb = LineBuffer::new(8);
        lb.extend_from_slice(b"ok\n123456789\nok\n");
        assert_eq!(lb.next_line(), Some(Ok(&b"ok"[..])));
        assert_eq!(lb.next_line(), Some(Err(ChatError::LineTooLong)));
        assert_eq!(lb.next_line(), Some(Err(ChatError::LineTooLong)));
        lb.extend_from_slice(b"more\n");
        let n = lb.spare().len();
        assert!(n > 0);
        lb.commit(n);
        assert_eq!(lb.pending(), 0, "bytes after the overflow are dropped");
        assert_eq!(lb.next_line(), Some(Err(ChatError::LineTooLong)));
    }

    #[test]
    fn spare_honours_the_limit_and_minimum() {
        let mut lb = LineBuffer::new(MAX_LINE);
        assert_eq!(lb.spare().len(), MAX_LINE);
        lb.extend_from_slice(&[b'a'; 4000]);
        assert_eq!(lb.next_line(), None);
        assert!(lb.spare().len() >= MAX_LINE - 4000);

        let mut lb = LineBuffer::new(MAX_SERVER_LINE);
        assert!(lb.spare().len() >= 4096);
        lb.commit(100);
        assert_eq!(lb.next_line(), None);
        assert!(lb.spare().len() >= 4096);
        assert!(lb.spare().len() <= MAX_SERVER_LINE - 100);

        let mut lb = LineBuffer::new(10);
        assert_eq!(lb.spare().len(), 10);
        lb.commit(9);
        assert_eq!(lb.next_line(), None);
        assert_eq!(lb.spare().len(), 1, "room for the newline only");
    }

    #[test]
    fn buffer_never_outgrows_the_limit_through_spare() {
        let mut lb = LineBuffer::new(MAX_SERVER_LINE);
        // Lines of 8000 bytes, newline included, read in uneven chunks.
        let mut written = 0usize;
        let mut lines = 0;
        for round in 0..400 {
            let spare = lb.spare();
            let n = spare.len().min(37 + 13 * round);
            for b in &mut spare[..n] {
                written += 1;
                *b = if written.is_multiple_of(8000) {
                    b'\n'
                } else {
                    b'x'
                };
            }
            lb.commit(n);
            while let Some(line) = lb.next_line() {
                assert_eq!(line.map(<[u8]>::len), Ok(7999));
                lines += 1;
            }
            assert!(lb.buf.len() <= MAX_SERVER_LINE);
        }
        assert!(lines > 50, "only {lines} lines");
    }

    #[test]
    fn compaction_keeps_the_partial_line() {
        let mut lb = LineBuffer::new(16);
        lb.extend_from_slice(b"0123456789\nabcd");
        assert_eq!(lb.next_line(), Some(Ok(&b"0123456789"[..])));
        assert_eq!(lb.next_line(), None);
        let spare = lb.spare();
        assert_eq!(spare.len(), 12, "compacted: 16 - 4 pending");
        spare[..3].copy_from_slice(b"ef\n");
        lb.commit(3);
        assert_eq!(lb.next_line(), Some(Ok(&b"abcdef"[..])));
        assert_eq!(lb.pending(), 0);
    }

    #[test]
    fn zero_limit_is_one() {
        let mut lb = LineBuffer::new(0);
        assert_eq!(lb.limit(), 1);
        lb.extend_from_slice(b"\n\nx");
        assert_eq!(lb.next_line(), Some(Ok(&b""[..])));
        assert_eq!(lb.next_line(), Some(Ok(&b""[..])));
        assert_eq!(lb.next_line(), Some(Err(ChatError::LineTooLong)));
    }

    #[test]
    #[should_panic(expected = "beyond")]
    fn commit_beyond_spare_panics() {
        let mut lb = LineBuffer::new(8);
        let n = lb.spare().len();
        lb.commit(n + 1);
    }

    #[test]
    fn find_newline_matches_a_plain_search() {
        let mut hay = vec![b'x'; 40];
        assert_eq!(find_newline(&hay), None);
        for at in 0..hay.len() {
            hay[at] = b'\n';
            assert_eq!(find_newline(&hay), Some(at));
            // Bytes that trip naive zero-byte tests: '\n' ^ '\n' neighbours.
            if at + 1 < hay.len() {
                hay[at + 1] = 0x0b;
                assert_eq!(find_newline(&hay), Some(at));
                hay[at + 1] = b'x';
            }
            hay[at] = b'x';
        }
        let tricky = [0x0b, 0x8a, 0x0a, 0x09, 0x00, 0xff, 0x0a, 0x0a, 0x0a];
        assert_eq!(find_newline(&tricky), Some(2));
    }
}
