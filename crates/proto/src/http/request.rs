//! The server side of HTTP/1.1: a connection's received bytes cut into requests by
//! `httparse`, with the limits of the module doc, and bodies skipped as they arrive.

use super::{MAX_BODY, MAX_HEAD, MAX_HEADERS, Status};

/// The methods a server tells apart; every other one is [`Method::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: the response without its body.
    Head,
    /// Any other method.
    Other,
}

/// One request, borrowed from its [`RequestBuffer`]; its body, if any, has been read and
/// dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The method.
    pub method: Method,
    /// The request target as sent (origin form: the path and any query).
    pub path: &'a str,
    /// Whether the connection stays open after the response: HTTP/1.1 unless
    /// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// HTTP/1.0 (a keep-alive response to it says `Connection: keep-alive`).
    pub http10: bool,
}

/// Why a request cannot be served; the server answers [`RequestError::status`] and
/// closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request line or a header is malformed, or `Content-Length` is not one number.
    #[error("malformed request")]
    Malformed,
    /// The head passed [`MAX_HEAD`] bytes or [`MAX_HEADERS`] headers.
    #[error("request head too large")]
    HeadTooLarge,
    /// `Content-Length` passed [`MAX_BODY`].
    #[error("request body too large")]
    BodyTooLarge,
    /// The request has a `Transfer-Encoding`, which this server does not read.
    #[error("transfer encoding not implemented")]
    TransferEncoding,
}

impl RequestError {
    /// The status of the response that answers it.
    pub fn status(self) -> Status {
        match self {
            RequestError::Malformed => Status::BadRequest,
            RequestError::HeadTooLarge => Status::HeaderFieldsTooLarge,
            RequestError::BodyTooLarge => Status::PayloadTooLarge,
            RequestError::TransferEncoding => Status::NotImplemented,
        }
    }
}

/// What the head of a request said, kept while its body is skipped.
#[derive(Debug, Clone, Copy)]
struct Parsed {
    method: Method,
    keep_alive: bool,
    http10: bool,
}

/// A connection's received bytes, cut into requests.
///
/// Bytes go in with [`extend_from_slice`](Self::extend_from_slice) as reads deliver
/// them; [`next_request`](Self::next_request) hands out each complete request, or an
/// error after which nothing more is parsed.
#[derive(Debug, Default)]
pub struct RequestBuffer {
    /// Received bytes; the unparsed ones start at `start`.
    ///
    /// # Invariant
    /// `start <= buf.len()`.
    buf: Vec<u8>,
    start: usize,
    /// Body bytes still to drop before `body_of` is handed out.
    skip: usize,
    body_of: Option<Parsed>,
    /// The target of the last request, so that a request can borrow it while its body
    /// is skipped; reused, so that no request allocates once it has grown.
    path: String,
    failed: bool,
}

impl RequestBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes read from the connection.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        if self.failed {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        // Body bytes are dropped here, before they are ever copied in (a body being
        // skipped means every byte before it has been handed out).
        let skipped = if self.buf.is_empty() {
            self.skip.min(bytes.len())
        } else {
            0
        };
        self.skip -= skipped;
        self.buf.extend_from_slice(&bytes[skipped..]);
    }

    /// Bytes received and not yet handed out in a request (a body being skipped counts
    /// only as far as it has arrived and not been dropped).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete request, an error (after which every call returns `None`), or
    /// `None` while the next request is incomplete.
    pub fn next_request(&mut self) -> Option<Result<Request<'_>, RequestError>> {
        if self.failed {
            return None;
        }
        if self.body_of.is_none() {
            match self.parse_head() {
                Ok(None) => return None,
                Ok(Some(())) => {}
                Err(e) => {
                    self.failed = true;
                    self.buf = Vec::new();
                    self.start = 0;
                    return Some(Err(e));
                }
            }
        }
        let dropped = self.skip.min(self.pending());
        self.start += dropped;
        self.skip -= dropped;
        if self.skip > 0 {
            return None;
        }
        let head = self.body_of.take()?;
        Some(Ok(Request {
            method: head.method,
            path: &self.path,
            keep_alive: head.keep_alive,
            http10: head.http10,
        }))
    }

    /// Parses the head at `start` into `body_of`, `skip` and `path`: `Ok(None)` while it
    /// is incomplete.
    fn parse_head(&mut self) -> Result<Option<()>, RequestError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let bytes = &self.buf[self.start..];
        let len = match req.parse(bytes) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if bytes.len() > MAX_HEAD => {
                return Err(RequestError::HeadTooLarge);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(RequestError::HeadTooLarge),
            Err(_) => return Err(RequestError::Malformed),
        };
        if len > MAX_HEAD {
            return Err(RequestError::HeadTooLarge);
        }
        let http10 = req.version == Some(0);
        let mut keep_alive = !http10;
        let mut length: Option<usize> = None;
        for header in req.headers.iter() {
            let name = header.name;
            if name.eq_ignore_ascii_case("content-length") {
                let n = content_length(header.value)?;
                if length.is_some_and(|m| m != n) {
                    return Err(RequestError::Malformed);
                }
                length = Some(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(RequestError::TransferEncoding);
            } else if name.eq_ignore_ascii_case("connection") {
                for token in header.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        keep_alive = true;
                    }
                }
            }
        }
        let length = length.unwrap_or(0);
        if length > MAX_BODY {
            return Err(RequestError::BodyTooLarge);
        }
        let method = match req.method {
            Some("GET") => Method::Get,
            Some("HEAD") => Method::Head,
            _ => Method::Other,
        };
        self.path.clear();
        self.path.push_str(req.path.unwrap_or("/"));
        self.start += len;
        self.skip = length;
        self.body_of = Some(Parsed {
            method,
            keep_alive,
            http10,
        });
        Ok(Some(()))
    }
}

/// A `Content-Length` value: decimal digits only (no sign, no spaces inside), at most a
/// number that fits.
fn content_length(value: &[u8]) -> Result<usize, RequestError> {
    let digits = value.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(RequestError::Malformed);
    }
    // Past MAX_BODY the exact number does not matter: saturate instead of overflowing.
    Ok(digits.iter().fold(0usize, |n, &d| {
        n.saturating_mul(10).saturating_add(usize::from(d - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &mut RequestBuffer) -> Vec<Result<(Method, String, bool), RequestError>> {
        let mut out = Vec::new();
        while let Some(r) = input.next_request() {
            out.push(r.map(|r| (r.method, r.path.to_owned(), r.keep_alive)));
        }
        out
    }

    fn one(bytes: &[u8]) -> Vec<Result<(Method, String, bool), RequestError>> {
        let mut input = RequestBuffer::new();
        input.extend_from_slice(bytes);
        all(&mut input)
    }

    #[test]
    fn methods_versions_and_connection() {
        assert_eq!(
            one(b"GET /a HTTP/1.1\r\n\r\nHEAD /b?x=1 HTTP/1.1\r\nConnection: Close\r\n\r\n"),
            [
                Ok((Method::Get, "/a".into(), true)),
                Ok((Method::Head, "/b?x=1".into(), false))
            ]
        );
        assert_eq!(
            one(b"POST / HTTP/1.0\r\n\r\n"),
            [Ok((Method::Other, "/".into(), false))]
        );
        assert_eq!(
            one(b"GET / HTTP/1.0\r\nConnection: foo, Keep-Alive\r\n\r\n"),
            [Ok((Method::Get, "/".into(), true))]
        );
    }

    #[test]
    fn errors_stop_the_stream() {
        let e = |bytes: &[u8]| one(bytes).last().cloned().and_then(Result::err);
        assert_eq!(e(b"GET\r\n\r\n"), Some(RequestError::Malformed));
        assert_eq!(e(b"GET / HTTP/2.0\r\n\r\n"), Some(RequestError::Malformed));
        assert_eq!(
            e(b"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"),
            Some(RequestError::Malformed)
        );
        assert_eq!(
            e(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Some(RequestError::Malformed)
        );
        assert_eq!(
            e(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Some(RequestError::TransferEncoding)
        );
        assert_eq!(
            e(b"POST / HTTP/1.1\r\nContent-Length: 65537\r\n\r\n"),
            Some(RequestError::BodyTooLarge)
        );
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 1, b'a');
        assert_eq!(e(&big), Some(RequestError::HeadTooLarge), "incomplete");
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(e(&big), Some(RequestError::HeadTooLarge), "complete");
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(e(&many), Some(RequestError::HeadTooLarge));
        // After an error, nothing more is parsed.
        let mut input = RequestBuffer::new();
        input.extend_from_slice(b"BAD\x01 / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n");
        assert!(matches!(input.next_request(), Some(Err(_))));
        input.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        assert!(input.next_request().is_none());
    }

    #[test]
    fn bodies_are_skipped_across_reads() {
        let mut input = RequestBuffer::new();
        input.extend_from_slice(b"POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123");
        assert!(input.next_request().is_none(), "the body is not all in");
        input.extend_from_slice(b"45");
        assert!(input.next_request().is_none());
        assert_eq!(input.pending(), 0, "body bytes are dropped");
        input.extend_from_slice(b"6789GET /b HTTP/1.1\r\n\r\n");
        assert_eq!(
            all(&mut input),
            [
                Ok((Method::Other, "/a".into(), true)),
                Ok((Method::Get, "/b".into(), true))
            ]
        );
        assert_eq!(input.pending(), 0);
    }
}
