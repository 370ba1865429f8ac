//! RESP2, the Redis serialization protocol, as `--proto kv` speaks it: the request
//! parser a server reads clients through, and the reply encoder and parser.
//!
//! The reference is redis-server 7 (`networking.c`): requests are arrays of bulk strings
//! (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or inline commands (`GET k\r\n`, split into words
//! the way `redis-cli` and `sdssplitargs` do, quotes included), any number per read and
//! split anywhere across reads. A malformed request gets the same
//! `-ERR Protocol error: ...` text Redis sends ([`ProtocolError`]), after which the
//! server closes the connection, as Redis does. The limits are Redis's defaults:
//! [`MAX_BULK_LEN`], [`MAX_INLINE`], [`MAX_MULTIBULK_LEN`], [`MAX_QUERY_BUF`].
//!
//! Replies are written straight into an output buffer by the `encode_*` functions (no
//! reply value is built on a server's hot path); [`Reply`] and [`parse_reply`] are the
//! client side, for the load generator and the tests.
//!
//! ```
//! use proto::resp::{RequestBuffer, encode_bulk, encode_null};
//!
//! let mut input = RequestBuffer::new();
//! // A pipelined read: one request in the array form, one inline, half of a third.
//! input.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nECHO \"a b\"\r\n*1\r\n$4\r\nPI");
//! let mut out = Vec::new();
//! while let Some(request) = input.next_request() {
//!     let request = request.expect("well formed");
//!     match request.arg(0) {
//!         Some(b"GET") => encode_null(&mut out),
//!         Some(b"ECHO") => encode_bulk(&mut out, request.arg(1).unwrap_or_default()),
//!         _ => unreachable!(),
//!     }
//! }
//! assert_eq!(out, b"$-1\r\n$3\r\na b\r\n");
//! input.extend_from_slice(b"NG\r\n");
//! let ping = input.next_request().expect("complete").expect("well formed");
//! assert_eq!(ping.args().collect::<Vec<_>>(), [b"PING"]);
//! ```

mod reply;
mod request;

pub use reply::{
    Reply, ReplyError, encode_array_header, encode_bulk, encode_error, encode_integer, encode_null,
    encode_null_array, encode_request, encode_simple, parse_reply,
};
pub use request::{ProtocolError, Request, RequestBuffer, parse_i64};

/// Longest bulk string a request may carry: Redis's `proto-max-bulk-len`, 512 MB.
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;

/// Longest inline request line, and longest `*<count>` or `$<len>` line: Redis's
/// `PROTO_INLINE_MAX_SIZE`, 64 KiB.
pub const MAX_INLINE: usize = 64 * 1024;

/// Most elements a request array may announce: Redis's bound, `INT_MAX`.
pub const MAX_MULTIBULK_LEN: usize = i32::MAX as usize;

/// Most unparsed bytes one connection may hold: Redis's `client-query-buffer-limit`,
/// 1 GiB. Redis closes such a client without a reply, and so does [`RequestBuffer`].
pub const MAX_QUERY_BUF: usize = 1024 * 1024 * 1024;

/// Appends `n` in decimal.
fn push_i64(out: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::push_i64;

    #[test]
    fn decimal_of_the_extremes() {
        for n in [0, 1, -1, 10, -10, i64::MAX, i64::MIN, 1234567890] {
            let mut out = Vec::new();
            push_i64(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
