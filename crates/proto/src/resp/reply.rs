//! RESP2 replies: the `encode_*` functions a server writes replies with, straight into
//! its output buffer, and [`Reply`] with [`parse_reply`], the client side (load
//! generator, tests), plus [`encode_request`] for clients to send requests.

use memchr::memchr;
use thiserror::Error;

use super::{MAX_BULK_LEN, MAX_MULTIBULK_LEN, parse_i64, push_i64};

/// Appends a simple string reply, `+<s>\r\n`. `s` must hold no CR or LF.
pub fn encode_simple(out: &mut Vec<u8>, s: &[u8]) {
    debug_assert!(!s.iter().any(|&b| b == b'\r' || b == b'\n'));
    out.push(b'+');
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

/// Appends an error reply, `-<text>\r\n`, where `text` starts with its code
/// (`ERR syntax error`). `text` must hold no CR or LF.
pub fn encode_error(out: &mut Vec<u8>, text: &[u8]) {
    debug_assert!(!text.iter().any(|&b| b == b'\r' || b == b'\n'));
    out.push(b'-');
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

/// Appends an integer reply, `:<n>\r\n`.
pub fn encode_integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    push_i64(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends a bulk string reply, `$<len>\r\n<bytes>\r\n`.
pub fn encode_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    push_i64(out, bytes.len() as i64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Appends the null bulk string, `$-1\r\n` (GET of a missing key).
pub fn encode_null(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

/// Appends the null array, `*-1\r\n`.
pub fn encode_null_array(out: &mut Vec<u8>) {
    out.extend_from_slice(b"*-1\r\n");
}

/// Appends the header of an array of `n` elements, `*<n>\r\n`; the caller appends the
/// elements.
pub fn encode_array_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    push_i64(out, n as i64);
    out.extend_from_slice(b"\r\n");
}

/// Appends a request as clients send it: an array of bulk strings.
///
/// ```
/// let mut out = Vec::new();
/// proto::resp::encode_request(&mut out, &[&b"GET"[..], b"k"]);
/// assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
/// ```
pub fn encode_request<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    encode_array_header(out, args.len());
    for arg in args {
        encode_bulk(out, arg.as_ref());
    }
}

/// A reply as a client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`
    Simple(Vec<u8>),
    /// `-ERR ...`, without the `-`.
    Error(Vec<u8>),
    /// `:1`
    Integer(i64),
    /// `$3\r\nabc`
    Bulk(Vec<u8>),
    /// `$-1`
    Null,
    /// `*2\r\n...`
    Array(Vec<Reply>),
    /// `*-1`
    NullArray,
}

impl Reply {
    /// Appends this reply's bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Simple(s) => encode_simple(out, s),
            Self::Error(e) => encode_error(out, e),
            Self::Integer(n) => encode_integer(out, *n),
            Self::Bulk(b) => encode_bulk(out, b),
            Self::Null => encode_null(out),
            Self::Array(items) => {
                encode_array_header(out, items.len());
                for item in items {
                    item.encode(out);
                }
            }
            Self::NullArray => encode_null_array(out),
        }
    }
}

/// A reply stream that is not RESP2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ReplyError {
    /// A reply starting with a byte that is no RESP2 type.
    #[error("not a RESP2 reply type: {0:#04x}")]
    BadType(u8),
    /// A line not ending in CRLF, or a bulk string not followed by CRLF.
    #[error("a RESP2 line or bulk string does not end in CRLF")]
    MissingCrlf,
    /// An integer, length or count that is not a number in range.
    #[error("a RESP2 integer, length or count is not a number in range")]
    BadNumber,
    /// Arrays nested deeper than [`MAX_DEPTH`](Self::MAX_DEPTH).
    #[error("RESP2 arrays nested too deep")]
    TooDeep,
}

impl ReplyError {
    /// Deepest array nesting [`parse_reply`] follows (no Redis reply of the supported
    /// commands nests more than twice); bounds its recursion on hostile input.
    pub const MAX_DEPTH: usize = 32;
}

/// Parses the first reply in `buf`: `Ok(Some((reply, bytes used)))`, or `Ok(None)` when
/// `buf` ends inside it.
///
/// ```
/// use proto::resp::{Reply, parse_reply};
/// assert_eq!(parse_reply(b"$1\r\nv\r\n+OK"), Ok(Some((Reply::Bulk(b"v".to_vec()), 7))));
/// assert_eq!(parse_reply(b"+OK\r"), Ok(None));
/// ```
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ReplyError> {
    parse_at(buf, 0)
}

fn parse_at(buf: &[u8], depth: usize) -> Result<Option<(Reply, usize)>, ReplyError> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    if !matches!(kind, b'+' | b'-' | b':' | b'$' | b'*') {
        return Err(ReplyError::BadType(kind));
    }
    let Some(nl) = memchr(b'\n', buf) else {
        return Ok(None);
    };
    if nl < 2 || buf[nl - 1] != b'\r' {
        return Err(ReplyError::MissingCrlf);
    }
    let line = &buf[1..nl - 1];
    let after = nl + 1;
    let number = || parse_i64(line).ok_or(ReplyError::BadNumber);
    Ok(Some(match kind {
        b'+' => (Reply::Simple(line.to_vec()), after),
        b'-' => (Reply::Error(line.to_vec()), after),
        b':' => (Reply::Integer(number()?), after),
        b'$' => match number()? {
            -1 => (Reply::Null, after),
            n => {
                let len = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= MAX_BULK_LEN)
                    .ok_or(ReplyError::BadNumber)?;
                if buf.len() < after + len + 2 {
                    return Ok(None);
                }
                if &buf[after + len..after + len + 2] != b"\r\n" {
                    return Err(ReplyError::MissingCrlf);
                }
                (
                    Reply::Bulk(buf[after..after + len].to_vec()),
                    after + len + 2,
                )
            }
        },
        _ => match number()? {
            -1 => (Reply::NullArray, after),
            n => {
                let count = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= MAX_MULTIBULK_LEN)
                    .ok_or(ReplyError::BadNumber)?;
                if depth >= ReplyError::MAX_DEPTH {
                    return Err(ReplyError::TooDeep);
                }
                // Each element takes at least 3 bytes, so a count the bytes cannot hold
                // allocates nothing up front.
                let mut items = Vec::with_capacity(count.min((buf.len() - after) / 3));
                let mut at = after;
                for _ in 0..count {
                    let Some((item, used)) = parse_at(&buf[at..], depth + 1)? else {
                        return Ok(None);
                    };
                    items.push(item);
                    at += used;
                }
                (Reply::Array(items), at)
            }
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_encodes_as_redis_sends_it() {
        let mut out = Vec::new();
        encode_simple(&mut out, b"OK");
        encode_error(&mut out, b"ERR syntax error");
        encode_integer(&mut out, -3);
        encode_bulk(&mut out, b"");
        encode_null(&mut out);
        encode_array_header(&mut out, 2);
        encode_bulk(&mut out, b"a");
        encode_null(&mut out);
        encode_null_array(&mut out);
        assert_eq!(
            out,
            b"+OK\r\n-ERR syntax error\r\n:-3\r\n$0\r\n\r\n$-1\r\n*2\r\n$1\r\na\r\n$-1\r\n*-1\r\n"
        );
    }

    #[test]
    fn malformed_replies_are_errors() {
        assert_eq!(parse_reply(b"?x\r\n"), Err(ReplyError::BadType(b'?')));
        assert_eq!(parse_reply(b"+OK\n"), Err(ReplyError::MissingCrlf));
        assert_eq!(parse_reply(b":1x\r\n"), Err(ReplyError::BadNumber));
        assert_eq!(parse_reply(b"$1\r\nab\r\n"), Err(ReplyError::MissingCrlf));
        let deep = b"*1\r\n".repeat(ReplyError::MAX_DEPTH + 1);
        assert_eq!(parse_reply(&deep), Err(ReplyError::TooDeep));
    }
}
