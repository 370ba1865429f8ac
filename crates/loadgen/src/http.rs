//! The http workload: `GET /plaintext` or `GET /json` (TechEmpower's tests), pipelined
//! `--depth` deep, and the check of every response: status `200`, a `Date` header, a
//! `Content-Length` equal to the body's, and the exact body the path must have.
//!
//! Responses are read with `proto::http::parse_response` (httparse), the codec the servers
//! share; a response arrives in any number of reads.

use proto::http::parse_response;

use crate::error::Fault;
use crate::torn::Torn;

/// The two paths of TechEmpower's plaintext and json tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpPath {
    /// `/plaintext`: `Hello, World!`.
    Plaintext,
    /// `/json`: `{"message":"Hello, World!"}`.
    Json,
}

impl HttpPath {
    /// The path as requested.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpPath::Plaintext => "/plaintext",
            HttpPath::Json => "/json",
        }
    }

    /// The request, the same bytes every time.
    pub(crate) fn request(self) -> &'static [u8] {
        match self {
            HttpPath::Plaintext => {
                b"GET /plaintext HTTP/1.1\r\nHost: ringside\r\nAccept: text/plain\r\n\r\n"
            }
            HttpPath::Json => {
                b"GET /json HTTP/1.1\r\nHost: ringside\r\nAccept: application/json\r\n\r\n"
            }
        }
    }

    /// The body every response must have.
    fn body(self) -> &'static [u8] {
        match self {
            HttpPath::Plaintext => b"Hello, World!",
            HttpPath::Json => br#"{"message":"Hello, World!"}"#,
        }
    }
}

/// The longest response a valid one can be: a head within the limit and the body.
const MAX_RESPONSE: usize = proto::http::MAX_HEAD + 64;

/// The responses of one connection that have arrived only in part.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    torn: Torn,
}

impl Partial {
    /// Checks every whole response of the stream (what came before, then `data`), calling
    /// `each` once a response passes, and keeps the bytes of one still incomplete. Stops at
    /// the first fault: a status other than 200 is the server's error, anything else wrong
    /// a corrupt response. An incomplete response longer than any valid one is corrupt, so
    /// the buffer stays bounded whatever the server sends.
    pub(crate) fn feed(
        &mut self,
        data: &[u8],
        path: HttpPath,
        mut each: impl FnMut() -> Result<(), Fault>,
    ) -> Result<(), Fault> {
        self.torn.feed(data, MAX_RESPONSE, |rest| {
            let Some(head) = parse_response(rest).map_err(|_| Fault::Corrupt)? else {
                return Ok(None);
            };
            if head.status != 200 {
                return Err(Fault::ServerError);
            }
            let body = path.body();
            if head.content_length != Some(body.len()) || !head.date {
                return Err(Fault::Corrupt);
            }
            let end = head.len + body.len();
            if rest.len() < end {
                return Ok(None);
            }
            if &rest[head.len..end] != body {
                return Err(Fault::Corrupt);
            }
            each()?;
            Ok(Some(end))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: &str, date: bool, body: &[u8], length: usize) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {status}\r\nServer: x\r\n").into_bytes();
        if date {
            out.extend_from_slice(b"Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {length}\r\n\r\n").as_bytes());
        out.extend_from_slice(body);
        out
    }

    fn feed_all(parts: &[&[u8]], path: HttpPath) -> (usize, Result<(), Fault>) {
        let mut p = Partial::default();
        let mut n = 0;
        for part in parts {
            let r = p.feed(part, path, || {
                n += 1;
                Ok(())
            });
            if r.is_err() {
                return (n, r);
            }
        }
        (n, Ok(()))
    }

    #[test]
    fn torn_responses_are_kept() {
        let one = response("200 OK", true, b"Hello, World!", 13);
        let stream = one.repeat(3);
        for cut in 0..stream.len() {
            let (n, r) = feed_all(&[&stream[..cut], &stream[cut..]], HttpPath::Plaintext);
            assert_eq!((n, r), (3, Ok(())), "cut at {cut}");
        }
        let json = response("200 OK", true, br#"{"message":"Hello, World!"}"#, 27);
        assert_eq!(feed_all(&[&json], HttpPath::Json), (1, Ok(())));
    }

    #[test]
    fn every_fault_is_named() {
        let p = HttpPath::Plaintext;
        let bad = |bytes: Vec<u8>| feed_all(&[&bytes], p).1;
        assert_eq!(
            bad(response("404 Not Found", true, b"", 0)),
            Err(Fault::ServerError)
        );
        assert_eq!(
            bad(response("200 OK", false, b"Hello, World!", 13)),
            Err(Fault::Corrupt)
        );
        assert_eq!(
            bad(response("200 OK", true, b"Hello, World?", 13)),
            Err(Fault::Corrupt)
        );
        assert_eq!(
            bad(response("200 OK", true, b"Hello", 5)),
            Err(Fault::Corrupt)
        );
        assert_eq!(bad(b"HTTP/1.1 2x0\r\n\r\n".to_vec()), Err(Fault::Corrupt));
        assert_eq!(bad(vec![b'x'; MAX_RESPONSE + 1]), Err(Fault::Corrupt));
        let json = response("200 OK", true, br#"{"message":"Hello, World!"}"#, 27);
        assert_eq!(
            feed_all(&[&json], p).1,
            Err(Fault::Corrupt),
            "the wrong path's body"
        );
    }
}
