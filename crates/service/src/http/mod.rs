//! The HTTP service of `--proto http`, TechEmpower's plaintext and json tests, free of
//! any runtime: one connection's state ([`Connection`]: bytes in, responses out, an
//! [`Exchange`]) and its loop for blocking runtimes ([`serve_blocking`], srv-threads and
//! srv-fiber).
//!
//! - `GET /plaintext`: `200`, `Hello, World!`, `Content-Type: text/plain`.
//! - `GET /json`: `200`, `{"message":"Hello, World!"}` serialized per request with
//!   serde_json, `Content-Type: application/json`.
//! - `HEAD` of either: the same head, no body. Another method: `405` with
//!   `Allow: GET, HEAD`. Another path (the query is not part of it): `404`.
//! - A request `proto::http` refuses: its status, then the connection closes.
//!
//! Every response carries `Server`, `Date` (an IMF-fixdate cached per thread and
//! formatted again once a second, [`date`]) and `Content-Length`. The responses to one
//! read go out in one buffer, and [`Connection::execute`] stops at the connection's limit
//! of pending output, as kv's does (`service::exchange`).
//!
//! ```
//! use service::exchange::{Exchange, Feed, Flow};
//! use service::http::Connection;
//!
//! let mut conn = Connection::new(64 * 1024);
//! let mut out = Vec::new();
//! conn.feed(b"GET /plaintext HTTP/1.1\r\n\r\nGET /json HTTP/1.1\r\nConnection: close\r\n\r\n");
//! assert_eq!(conn.execute(&mut out), Flow::Close);
//! let text = String::from_utf8(out).unwrap();
//! assert!(text.starts_with("HTTP/1.1 200 OK\r\nServer: ringside\r\nDate: "));
//! assert!(text.ends_with("Connection: close\r\n\r\n{\"message\":\"Hello, World!\"}"));
//! ```

pub mod date;

use std::io::{self, BufRead, Write};

use proto::http::{Head, Method, Request, RequestBuffer, Status};
use serde::Serialize;

use crate::counters::Tally;
use crate::exchange::{Exchange, Feed, Flow};

/// The body of `/plaintext`.
pub const PLAINTEXT: &[u8] = b"Hello, World!";
/// What `/json` serializes.
pub const MESSAGE: &str = "Hello, World!";
/// The `Allow` of a `405`.
pub const ALLOW: &str = "GET, HEAD";

/// The object `/json` serializes, per request, as TechEmpower's rules ask.
#[derive(Debug, Serialize)]
struct Message {
    message: &'static str,
}

/// One HTTP connection's state: the bytes received and not yet answered.
#[derive(Debug)]
pub struct Connection {
    input: RequestBuffer,
    limit: usize,
    closing: bool,
    /// The json body, serialized here first to learn its length; reused.
    scratch: Vec<u8>,
}

impl Connection {
    /// A connection that has received nothing yet, whose [`execute`](Exchange::execute)
    /// stops once its output holds `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Connection {
            input: RequestBuffer::new(),
            limit,
            closing: false,
            scratch: Vec::new(),
        }
    }

    /// Bytes received and not yet answered.
    pub fn pending_input(&self) -> usize {
        self.input.pending()
    }
}

impl Feed for Connection {
    fn feed(&mut self, bytes: &[u8]) {
        if !self.closing {
            self.input.extend_from_slice(bytes);
        }
    }
}

impl Exchange for Connection {
    fn execute(&mut self, out: &mut Vec<u8>) -> Flow {
        if self.closing {
            return Flow::Close;
        }
        let date = date::now();
        while out.len() < self.limit {
            match self.input.next_request() {
                None => return Flow::NeedInput,
                Some(Err(e)) => {
                    Head {
                        connection: Some("close"),
                        ..Head::new(e.status(), &date, 0)
                    }
                    .encode(out);
                    self.closing = true;
                    return Flow::Close;
                }
                Some(Ok(request)) => {
                    respond(&request, &date, &mut self.scratch, out);
                    if !request.keep_alive {
                        self.closing = true;
                        return Flow::Close;
                    }
                }
            }
        }
        Flow::OutputFull
    }
}

/// Appends the response to `request` to `out`.
fn respond(request: &Request<'_>, date: &[u8], scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    let path = request.path.split('?').next().unwrap_or_default();
    let connection = match (request.keep_alive, request.http10) {
        (false, _) => Some("close"),
        (true, true) => Some("keep-alive"),
        (true, false) => None,
    };
    let (content_type, body): (&str, &[u8]) = match path {
        "/plaintext" => ("text/plain", PLAINTEXT),
        "/json" => {
            scratch.clear();
            // Serializing a struct of one string into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *scratch, &Message { message: MESSAGE });
            ("application/json", scratch)
        }
        _ => {
            Head {
                connection,
                ..Head::new(Status::NotFound, date, 0)
            }
            .encode(out);
            return;
        }
    };
    if request.method == Method::Other {
        Head {
            allow: Some(ALLOW),
            connection,
            ..Head::new(Status::MethodNotAllowed, date, 0)
        }
        .encode(out);
        return;
    }
    Head {
        content_type: Some(content_type),
        connection,
        ..Head::new(Status::Ok, date, body.len())
    }
    .encode(out);
    if request.method == Method::Get {
        out.extend_from_slice(body);
    }
}

/// Serves one HTTP connection over blocking I/O until the peer closes it or a response
/// ends it, then flushes `writer` and returns (the caller closes the connection). The
/// responses to each read go out in one `write_all`; while it blocks nothing is read,
/// and they never hold more than `limit` bytes and one response.
pub fn serve_blocking<R: BufRead, W: Write>(
    reader: R,
    writer: W,
    limit: usize,
    tally: &mut Tally,
) -> io::Result<()> {
    crate::exchange::serve_blocking(reader, writer, &mut Connection::new(limit), tally)
}

#[cfg(test)]
mod tests;
