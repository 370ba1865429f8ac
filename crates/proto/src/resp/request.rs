//! The server side of RESP2: [`RequestBuffer`] cuts a client's byte stream into
//! requests exactly as redis-server 7's `processMultibulkBuffer` and
//! `processInlineBuffer` do, quirks included, so that the same bytes get the same
//! replies and the same `Protocol error` texts.
//!
//! The quirks kept on purpose, because a conformance check against redis-server sees
//! them: the two bytes after a bulk string are skipped without looking at them; a
//! `*<n>` or `$<n>` line needs one byte after its `\r` and skips it unseen; a NUL byte
//! ends the search for a line end (Redis searches with `strchr`), so a line with a NUL
//! before its end waits until the 64 KiB limit and then fails; `*0` and `*-1` and an
//! empty inline line are requests of no words, which get no reply.

use std::fmt;

use memchr::memchr2;

use super::{MAX_BULK_LEN, MAX_INLINE, MAX_MULTIBULK_LEN, MAX_QUERY_BUF};

/// A malformed request. Redis answers all but [`ProtocolError::QueryBufferLimit`] with
/// `-ERR Protocol error: <text>` ([`ProtocolError::encode`]) and then closes the
/// connection; the buffer parses nothing after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*<n>` with `n` not an integer (Redis's `string2ll`: no sign but `-`, no leading
    /// zeros, no spaces) or above [`MAX_MULTIBULK_LEN`].
    InvalidMultibulkLength,
    /// More than [`MAX_INLINE`] bytes after a `*` with no `\r`.
    TooBigMultibulkCount,
    /// An array element that does not start with `$`; the byte it starts with.
    ExpectedDollar(u8),
    /// `$<n>` with `n` not an integer, negative, or above [`MAX_BULK_LEN`].
    InvalidBulkLength,
    /// More than [`MAX_INLINE`] bytes of a `$<n>` line with no `\r`.
    TooBigBulkCount,
    /// More than [`MAX_INLINE`] bytes of an inline request with no `\n`.
    TooBigInline,
    /// An inline request whose quotes do not close (or a closing quote followed by
    /// something other than a space).
    UnbalancedQuotes,
    /// More than [`MAX_QUERY_BUF`] bytes of one unfinished request: Redis closes the
    /// connection without a reply.
    QueryBufferLimit,
}

impl ProtocolError {
    /// Appends the reply Redis sends for this error (`-ERR Protocol error: ...\r\n`), or
    /// nothing for [`ProtocolError::QueryBufferLimit`].
    pub fn encode(&self, out: &mut Vec<u8>) {
        let text: &[u8] = match self {
            Self::InvalidMultibulkLength => b"invalid multibulk length",
            Self::TooBigMultibulkCount => b"too big mbulk count string",
            Self::ExpectedDollar(byte) => {
                // Redis formats the byte with `%c` and then maps CR and LF to spaces
                // (its error replies are single lines); any other byte goes out raw.
                let shown = if matches!(byte, b'\r' | b'\n') {
                    b' '
                } else {
                    *byte
                };
                out.extend_from_slice(b"-ERR Protocol error: expected '$', got '");
                out.push(shown);
                out.extend_from_slice(b"'\r\n");
                return;
            }
            Self::InvalidBulkLength => b"invalid bulk length",
            Self::TooBigBulkCount => b"too big bulk count string",
            Self::TooBigInline => b"too big inline request",
            Self::UnbalancedQuotes => b"unbalanced quotes in request",
            Self::QueryBufferLimit => return,
        };
        out.extend_from_slice(b"-ERR Protocol error: ");
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ExpectedDollar(byte) => write!(
                f,
                "Protocol error: expected '$', got '{}'",
                byte.escape_ascii()
            ),
            Self::QueryBufferLimit => write!(
                f,
                "query buffer limit: more than {MAX_QUERY_BUF} bytes of one request"
            ),
            other => {
                let mut line = Vec::new();
                other.encode(&mut line);
                // `-ERR ` before, `\r\n` after; the rest is ASCII.
                let text = &line[5..line.len() - 2];
                f.write_str(&String::from_utf8_lossy(text))
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One request: its words (the command name first), borrowed from the buffer until
/// the next call to [`RequestBuffer::next_request`].
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    base: &'a [u8],
    /// `(offset, len)` of each word in `base`.
    ///
    /// # Invariant
    /// Never empty (a request of no words is skipped), and every range lies in `base`.
    words: &'a [(usize, usize)],
}

impl<'a> Request<'a> {
    /// Number of words, the command name included (at least 1).
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Always false: requests of no words get no reply and are never returned. Here for
    /// clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Word `i` (0 is the command name), if there is one.
    pub fn arg(&self, i: usize) -> Option<&'a [u8]> {
        let &(at, len) = self.words.get(i)?;
        Some(&self.base[at..at + len])
    }

    /// The words in order, the command name first.
    pub fn args(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let base = self.base;
        self.words.iter().map(move |&(at, len)| &base[at..at + len])
    }
}

/// Where the parser is inside a request.
#[derive(Debug, Clone, Copy, Default)]
enum State {
    /// Between requests.
    #[default]
    Start,
    /// Inside an array: `remaining` elements to go, the next one's length if its `$`
    /// line has been read.
    Array {
        remaining: usize,
        bulk: Option<usize>,
    },
}

/// What one step of parsing produced.
enum Parsed {
    /// A complete array request starting at this offset of `buf`.
    Array(usize),
    /// A complete inline request, its words in `scratch`.
    Inline,
    /// A request of no words: no reply.
    Nothing,
}

/// The bytes a connection has received and not yet parsed, and the parser's place in
/// them: fed with [`RequestBuffer::extend_from_slice`], drained with
/// [`RequestBuffer::next_request`].
///
/// It never allocates per request: words are offsets into the buffer (array requests)
/// or into one scratch buffer (inline requests, whose quotes and escapes are decoded).
#[derive(Debug, Default)]
pub struct RequestBuffer {
    buf: Vec<u8>,
    /// Start of the request being parsed; what lies before it has been returned.
    start: usize,
    /// Where parsing resumes inside the request that starts at `start`.
    cursor: usize,
    state: State,
    /// The words of the request in progress or last returned: offsets from `start` for
    /// array requests, into `scratch` for inline ones.
    words: Vec<(usize, usize)>,
    scratch: Vec<u8>,
    /// Set after a protocol error: nothing more is parsed.
    failed: bool,
}

/// Capacity above which a buffer that has emptied out is shrunk, so that one 512 MB
/// request does not pin 512 MB for the rest of the connection.
const SHRINK_ABOVE: usize = 1024 * 1024;

impl RequestBuffer {
    /// An empty buffer at the start of a connection.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the connection. After a protocol error they are dropped:
    /// the connection is closing.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.failed {
            return;
        }
        if self.start > 0 {
            // Offsets of a request in progress are relative to `start`, so moving
            // everything down by `start` keeps them valid.
            self.buf.drain(..self.start);
            self.cursor -= self.start;
            self.start = 0;
            if self.buf.capacity() > SHRINK_ABOVE && self.buf.len() < self.buf.capacity() / 4 {
                self.buf.shrink_to(self.buf.len().max(bytes.len()) * 2);
            }
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not yet returned as requests (a partial request included).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Whether a protocol error has been returned (the connection must close).
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// The next complete request, `Some(Err(_))` once for a malformed one (after which
    /// it returns `None` for good), or `None` when the rest is an unfinished request.
    pub fn next_request(&mut self) -> Option<Result<Request<'_>, ProtocolError>> {
        if self.failed {
            return None;
        }
        loop {
            match self.step() {
                Ok(None) => {
                    if self.pending() > MAX_QUERY_BUF {
                        self.failed = true;
                        return Some(Err(ProtocolError::QueryBufferLimit));
                    }
                    return None;
                }
                Ok(Some(Parsed::Nothing)) => continue,
                Ok(Some(Parsed::Array(at))) => {
                    return Some(Ok(Request {
                        base: &self.buf[at..],
                        words: &self.words,
                    }));
                }
                Ok(Some(Parsed::Inline)) => {
                    return Some(Ok(Request {
                        base: &self.scratch,
                        words: &self.words,
                    }));
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }

    /// Parses as far as the bytes allow: `Ok(None)` when they end inside a request.
    fn step(&mut self) -> Result<Option<Parsed>, ProtocolError> {
        if let State::Array { remaining, bulk } = self.state {
            return self.elements(remaining, bulk);
        }
        let Some(&first) = self.buf.get(self.start) else {
            return Ok(None);
        };
        if first != b'*' {
            return self.inline();
        }
        let rest = &self.buf[self.start..];
        let Some(cr) = find_line_end(rest, b'\r') else {
            return if rest.len() > MAX_INLINE {
                Err(ProtocolError::TooBigMultibulkCount)
            } else {
                Ok(None)
            };
        };
        // Redis wants the byte after the CR before it goes on, and skips it unseen.
        if cr + 1 >= rest.len() {
            return Ok(None);
        }
        let count = parse_i64(&rest[1..cr])
            .filter(|&n| n <= MAX_MULTIBULK_LEN as i64)
            .ok_or(ProtocolError::InvalidMultibulkLength)?;
        self.cursor = self.start + cr + 2;
        if count <= 0 {
            self.start = self.cursor;
            return Ok(Some(Parsed::Nothing));
        }
        self.words.clear();
        self.elements(count as usize, None)
    }

    /// Reads the elements of an array request, from `self.cursor` on.
    fn elements(
        &mut self,
        mut remaining: usize,
        mut bulk: Option<usize>,
    ) -> Result<Option<Parsed>, ProtocolError> {
        while remaining > 0 {
            let len = match bulk {
                Some(len) => len,
                None => {
                    let rest = &self.buf[self.cursor..];
                    let Some(cr) = find_line_end(rest, b'\r') else {
                        if rest.len() > MAX_INLINE {
                            return Err(ProtocolError::TooBigBulkCount);
                        }
                        break;
                    };
                    if cr + 1 >= rest.len() {
                        break;
                    }
                    if rest[0] != b'$' {
                        return Err(ProtocolError::ExpectedDollar(rest[0]));
                    }
                    let len = parse_i64(&rest[1..cr])
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|&n| n <= MAX_BULK_LEN)
                        .ok_or(ProtocolError::InvalidBulkLength)?;
                    self.cursor += cr + 2;
                    len
                }
            };
            // The two bytes after the string are Redis's CRLF; it skips them unseen.
            if self.buf.len() - self.cursor < len + 2 {
                bulk = Some(len);
                self.state = State::Array { remaining, bulk };
                return Ok(None);
            }
            self.words.push((self.cursor - self.start, len));
            self.cursor += len + 2;
            remaining -= 1;
            bulk = None;
        }
        if remaining > 0 {
            self.state = State::Array { remaining, bulk };
            return Ok(None);
        }
        self.state = State::Start;
        let at = self.start;
        self.start = self.cursor;
        Ok(Some(Parsed::Array(at)))
    }

    /// Reads an inline request (a line of words) at `self.start`.
    fn inline(&mut self) -> Result<Option<Parsed>, ProtocolError> {
        let rest = &self.buf[self.start..];
        let Some(nl) = find_line_end(rest, b'\n') else {
            return if rest.len() > MAX_INLINE {
                Err(ProtocolError::TooBigInline)
            } else {
                Ok(None)
            };
        };
        let end = if nl > 0 && rest[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        split_args(&rest[..end], &mut self.scratch, &mut self.words)?;
        self.start += nl + 1;
        self.cursor = self.start;
        Ok(Some(if self.words.is_empty() {
            Parsed::Nothing
        } else {
            Parsed::Inline
        }))
    }
}

/// Index of the first `end` byte in `bytes`, as C's `strchr` finds it: a NUL byte
/// before it hides it.
fn find_line_end(bytes: &[u8], end: u8) -> Option<usize> {
    let at = memchr2(end, 0, bytes)?;
    (bytes[at] == end).then_some(at)
}

/// Parses a signed decimal as Redis's `string2ll` does: an optional `-`, then digits
/// with no leading zero (`0` alone is zero, `-0` is not a number), nothing else, within
/// `i64`.
///
/// ```
/// use proto::resp::parse_i64;
/// assert_eq!(parse_i64(b"-12"), Some(-12));
/// assert_eq!(parse_i64(b"012"), None);
/// assert_eq!(parse_i64(b"+1"), None);
/// assert_eq!(parse_i64(b"9223372036854775808"), None);
/// ```
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s),
    };
    match digits.first()? {
        b'1'..=b'9' => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude).or_else(|| {
            // i64::MIN's magnitude is one more than i64::MAX's.
            (magnitude == i64::MIN.unsigned_abs()).then_some(i64::MIN)
        })
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// C's `isspace` in the C locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Splits an inline line into words as Redis's `sdssplitargs` does: words separated by
/// blanks; `"..."` with the escapes `\xHH`, `\n`, `\r`, `\t`, `\b`, `\a` and `\<c>`;
/// `'...'` with `\'`; a closing quote must be followed by a blank or the end. The words
/// go into `scratch`, their places into `words`.
fn split_args(
    line: &[u8],
    scratch: &mut Vec<u8>,
    words: &mut Vec<(usize, usize)>,
) -> Result<(), ProtocolError> {
    scratch.clear();
    words.clear();
    // `at(i)` is `line[i]`, or NUL past the end, as in the C original: a line holds no
    // NUL (the line-end search stops at one), so NUL means the end.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(());
        }
        let word_start = scratch.len();
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if in_double {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && at(p + 2).is_ascii_hexdigit()
                    && at(p + 3).is_ascii_hexdigit()
                {
                    scratch.push(hex_value(at(p + 2)) * 16 + hex_value(at(p + 3)));
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    scratch.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => b'\x08',
                        b'a' => b'\x07',
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    done = true;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    scratch.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    scratch.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    done = true;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    scratch.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    other => scratch.push(other),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        words.push((word_start, scratch.len() - word_start));
    }
}

/// The value of an ASCII hex digit (the caller has checked it is one).
fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request in `input`, as owned words, and the error if one ends it.
    fn parse_all(input: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>) {
        let mut buf = RequestBuffer::new();
        buf.extend_from_slice(input);
        let mut requests = Vec::new();
        while let Some(r) = buf.next_request() {
            match r {
                Ok(r) => requests.push(r.args().map(<[u8]>::to_vec).collect()),
                Err(e) => return (requests, Some(e)),
            }
        }
        (requests, None)
    }

    fn words(ws: &[&str]) -> Vec<Vec<u8>> {
        ws.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn arrays_and_inline_commands_pipelined() {
        let (requests, err) = parse_all(b"*1\r\n$4\r\nPING\r\nSET k v\r\n*0\r\n\r\n*-1\r\nGET k\n");
        assert_eq!(err, None);
        assert_eq!(
            requests,
            [
                words(&["PING"]),
                words(&["SET", "k", "v"]),
                words(&["GET", "k"])
            ]
        );
    }

    #[test]
    fn bulk_strings_are_binary_safe() {
        let (requests, _) = parse_all(b"*2\r\n$3\r\nGET\r\n$5\r\na\r\n\0b\r\n");
        assert_eq!(requests, [vec![b"GET".to_vec(), b"a\r\n\0b".to_vec()]]);
    }

    #[test]
    fn inline_quotes_and_escapes_as_sdssplitargs() {
        let (requests, err) = parse_all(b"SET \"a b\\x41\\n\" 'it\\'s'  \"\"\r\nECHO x\"y z\"\r\n");
        assert_eq!(err, None);
        assert_eq!(
            requests,
            [
                vec![
                    b"SET".to_vec(),
                    b"a bA\n".to_vec(),
                    b"it's".to_vec(),
                    Vec::new()
                ],
                vec![b"ECHO".to_vec(), b"xy z".to_vec()],
            ]
        );
        assert_eq!(
            parse_all(b"ECHO \"abc\r\n").1,
            Some(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(
            parse_all(b"ECHO \"abc\"d\r\n").1,
            Some(ProtocolError::UnbalancedQuotes)
        );
    }

    #[test]
    fn malformed_frames_get_redis_texts() {
        let cases: &[(&[u8], &[u8])] = &[
            (
                b"*x\r\n",
                b"-ERR Protocol error: invalid multibulk length\r\n",
            ),
            (
                b"*2147483648\r\n",
                b"-ERR Protocol error: invalid multibulk length\r\n",
            ),
            (
                b"*1\r\n:1\r\n",
                b"-ERR Protocol error: expected '$', got ':'\r\n",
            ),
            (
                b"*1\r\n\r\n",
                b"-ERR Protocol error: expected '$', got ' '\r\n",
            ),
            (
                b"*1\r\n$-1\r\n",
                b"-ERR Protocol error: invalid bulk length\r\n",
            ),
            (
                b"*1\r\n$536870913\r\n",
                b"-ERR Protocol error: invalid bulk length\r\n",
            ),
            (
                b"*1\r\n$01\r\n",
                b"-ERR Protocol error: invalid bulk length\r\n",
            ),
        ];
        for (input, reply) in cases {
            let (_, err) = parse_all(input);
            let mut out = Vec::new();
            err.expect("an error").encode(&mut out);
            assert_eq!(out, *reply, "{}", input.escape_ascii());
        }
    }

    #[test]
    fn long_lines_without_an_end_fail_past_64_kib() {
        let mut line = vec![b'a'; MAX_INLINE];
        assert_eq!(parse_all(&line), (vec![], None));
        line.push(b'a');
        assert_eq!(parse_all(&line).1, Some(ProtocolError::TooBigInline));
        let mut count = vec![b'*'; MAX_INLINE + 1];
        assert_eq!(
            parse_all(&count).1,
            Some(ProtocolError::TooBigMultibulkCount)
        );
        count.truncate(MAX_INLINE);
        assert_eq!(parse_all(&count), (vec![], None));
        let mut bulk = b"*1\r\n".to_vec();
        bulk.resize(4 + MAX_INLINE + 1, b'$');
        assert_eq!(parse_all(&bulk).1, Some(ProtocolError::TooBigBulkCount));
    }

    #[test]
    fn a_nul_hides_the_line_end_as_strchr_does() {
        assert_eq!(parse_all(b"GET a\0b\r\n"), (vec![], None));
    }

    #[test]
    fn nothing_after_an_error() {
        let mut buf = RequestBuffer::new();
        buf.extend_from_slice(b"PING\r\n*x\r\nPING\r\n");
        assert!(buf.next_request().expect("one").is_ok());
        assert!(buf.next_request().expect("the error").is_err());
        assert!(buf.next_request().is_none());
        buf.extend_from_slice(b"PING\r\n");
        assert!(buf.next_request().is_none());
        assert!(buf.is_failed());
    }

    #[test]
    fn string2ll_rules() {
        for (s, v) in [
            (&b"0"[..], Some(0)),
            (b"-0", None),
            (b"", None),
            (b"-", None),
            (b" 1", None),
            (b"1 ", None),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"-9223372036854775809", None),
            (b"99999999999999999999", None),
        ] {
            assert_eq!(parse_i64(s), v, "{}", s.escape_ascii());
        }
    }
}
