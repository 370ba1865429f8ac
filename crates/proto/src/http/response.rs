//! Responses: the head a server writes ([`Head`]), and the head a client reads
//! ([`parse_response`]).

use std::io::Write;

use super::{MAX_HEAD, MAX_HEADERS, SERVER};

/// The statuses a ringside server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 200.
    Ok,
    /// 400: a malformed request.
    BadRequest,
    /// 404: no such path.
    NotFound,
    /// 405: a method the path does not serve.
    MethodNotAllowed,
    /// 413: a body over the limit.
    PayloadTooLarge,
    /// 431: a head over the limit.
    HeaderFieldsTooLarge,
    /// 501: a `Transfer-Encoding`.
    NotImplemented,
}

impl Status {
    /// The status line, without its CRLF.
    fn line(self) -> &'static [u8] {
        match self {
            Status::Ok => b"HTTP/1.1 200 OK",
            Status::BadRequest => b"HTTP/1.1 400 Bad Request",
            Status::NotFound => b"HTTP/1.1 404 Not Found",
            Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed",
            Status::PayloadTooLarge => b"HTTP/1.1 413 Payload Too Large",
            Status::HeaderFieldsTooLarge => b"HTTP/1.1 431 Request Header Fields Too Large",
            Status::NotImplemented => b"HTTP/1.1 501 Not Implemented",
        }
    }

    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::PayloadTooLarge => 413,
            Status::HeaderFieldsTooLarge => 431,
            Status::NotImplemented => 501,
        }
    }
}

/// A response head: the status line, `Server`, `Date`, `Content-Type` if any,
/// `Content-Length`, `Allow` and `Connection` if asked for, the blank line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head<'a> {
    /// The status.
    pub status: Status,
    /// The `Date` value, an IMF-fixdate.
    pub date: &'a [u8],
    /// The `Content-Type`, if the response has one.
    pub content_type: Option<&'a str>,
    /// The length of the body (of the body a `GET` would get, for a `HEAD`).
    pub content_length: usize,
    /// The `Allow` value of a `405`.
    pub allow: Option<&'a str>,
    /// The `Connection` value: `close` when the server closes after this response,
    /// `keep-alive` to an HTTP/1.0 client it keeps.
    pub connection: Option<&'a str>,
}

impl<'a> Head<'a> {
    /// A head with no `Content-Type`, `Allow` or `Connection`.
    pub fn new(status: Status, date: &'a [u8], content_length: usize) -> Self {
        Head {
            status,
            date,
            content_type: None,
            content_length,
            allow: None,
            connection: None,
        }
    }

    /// Appends the head to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.status.line());
        out.extend_from_slice(b"\r\nServer: ");
        out.extend_from_slice(SERVER.as_bytes());
        out.extend_from_slice(b"\r\nDate: ");
        out.extend_from_slice(self.date);
        if let Some(t) = self.content_type {
            out.extend_from_slice(b"\r\nContent-Type: ");
            out.extend_from_slice(t.as_bytes());
        }
        out.extend_from_slice(b"\r\nContent-Length: ");
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{}", self.content_length);
        if let Some(a) = self.allow {
            out.extend_from_slice(b"\r\nAllow: ");
            out.extend_from_slice(a.as_bytes());
        }
        if let Some(c) = self.connection {
            out.extend_from_slice(b"\r\nConnection: ");
            out.extend_from_slice(c.as_bytes());
        }
        out.extend_from_slice(b"\r\n\r\n");
    }
}

/// What a client needs of a response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// The `Content-Length`, if there is one.
    pub content_length: Option<usize>,
    /// The `Content-Type`, if there is one.
    pub content_type: Option<String>,
    /// Whether a `Date` header is present.
    pub date: bool,
    /// Whether a `Server` header is present.
    pub server: bool,
    /// Whether the response says `Connection: close`.
    pub close: bool,
    /// The length of the head, blank line included: the body starts there.
    pub len: usize,
}

/// A response head `httparse` refuses, or one longer than [`MAX_HEAD`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed response head")]
pub struct ParseError;

/// Parses the response head at the start of `bytes`: `Ok(None)` while it is incomplete.
pub fn parse_response(bytes: &[u8]) -> Result<Option<ResponseHead>, ParseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(bytes) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(httparse::Status::Partial) if bytes.len() <= MAX_HEAD => return Ok(None),
        _ => return Err(ParseError),
    };
    let mut head = ResponseHead {
        status: resp.code.ok_or(ParseError)?,
        content_length: None,
        content_type: None,
        date: false,
        server: false,
        close: false,
        len,
    };
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or(ParseError)?;
            head.content_length = Some(n);
        } else if h.name.eq_ignore_ascii_case("content-type") {
            head.content_type = Some(String::from_utf8_lossy(h.value).into_owned());
        } else if h.name.eq_ignore_ascii_case("date") {
            head.date = true;
        } else if h.name.eq_ignore_ascii_case("server") {
            head.server = true;
        } else if h.name.eq_ignore_ascii_case("connection") {
            head.close |= h
                .value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        }
    }
    Ok(Some(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    #[test]
    fn heads_round_trip() {
        let mut out = Vec::new();
        let head = Head {
            content_type: Some("text/plain"),
            allow: Some("GET, HEAD"),
            connection: Some("close"),
            ..Head::new(Status::MethodNotAllowed, DATE, 13)
        };
        head.encode(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 405 Method Not Allowed\r\nServer: ringside\r\n\
              Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Type: text/plain\r\n\
              Content-Length: 13\r\nAllow: GET, HEAD\r\nConnection: close\r\n\r\n"
        );
        let parsed = parse_response(&out).unwrap().unwrap();
        assert_eq!(parsed.status, 405);
        assert_eq!(parsed.content_length, Some(13));
        assert_eq!(parsed.content_type.as_deref(), Some("text/plain"));
        assert!(parsed.date && parsed.server && parsed.close);
        assert_eq!(parsed.len, out.len());
        for cut in 0..out.len() {
            assert_eq!(parse_response(&out[..cut]), Ok(None));
        }
        assert_eq!(parse_response(b"HTTP/1.1 2x0 OK\r\n\r\n"), Err(ParseError));
    }
}
