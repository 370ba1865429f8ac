//! HTTP/1.1 as `--proto http` speaks it: the request buffer a server reads clients
//! through ([`RequestBuffer`], parsing with the `httparse` crate), the response head a
//! server writes ([`Head`]), and the response parser of the client side
//! ([`parse_response`], for the load generator and the tests).
//!
//! A connection is keep-alive and may pipeline: any number of requests per read, each
//! split across reads at any byte. The limits, and the status each one earns (after which
//! the server closes the connection), are written down in `docs/protocol-notes.md`:
//!
//! - a request head (request line and headers) longer than [`MAX_HEAD`] bytes, or with
//!   more than [`MAX_HEADERS`] headers: `431`;
//! - a head `httparse` refuses, a bad or conflicting `Content-Length`: `400`;
//! - a body longer than [`MAX_BODY`] bytes: `413` (the body is not read);
//! - any `Transfer-Encoding`: `501` (no chunked bodies are read).
//!
//! A body within the limit is read and dropped as it arrives, never buffered: the
//! request is handed out once its last body byte is in, so a response never overtakes the
//! body of its own request.
//!
//! ```
//! use proto::http::{Head, Method, RequestBuffer, Status};
//!
//! let mut input = RequestBuffer::new();
//! // A pipelined read: one whole request and half of a second.
//! input.extend_from_slice(b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\nHEAD /json HT");
//! let mut out = Vec::new();
//! while let Some(request) = input.next_request() {
//!     let request = request.expect("well formed");
//!     assert_eq!((request.method, request.path, request.keep_alive), (Method::Get, "/plaintext", true));
//!     let head = Head::new(Status::Ok, b"Sun, 06 Nov 1994 08:49:37 GMT", 2);
//!     head.encode(&mut out);
//!     out.extend_from_slice(b"hi");
//! }
//! assert!(out.starts_with(b"HTTP/1.1 200 OK\r\nServer: ringside\r\n"));
//! input.extend_from_slice(b"TP/1.0\r\n\r\n");
//! let head = input.next_request().expect("complete").expect("well formed");
//! assert_eq!((head.method, head.keep_alive), (Method::Head, false));
//! ```

mod request;
mod response;

pub use request::{Method, Request, RequestBuffer, RequestError};
pub use response::{Head, ParseError, ResponseHead, Status, parse_response};

/// The longest request head (request line, headers, the blank line) a server reads.
pub const MAX_HEAD: usize = 8 * 1024;
/// The most headers a request may have.
pub const MAX_HEADERS: usize = 64;
/// The longest request body a server reads (and drops).
pub const MAX_BODY: usize = 64 * 1024;
/// The `Server` header of every response.
pub const SERVER: &str = "ringside";
/// The length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form of `Date`.
pub const DATE_LEN: usize = 29;
