//! An HTTP peer for the loadgen tests: a thread per connection that answers every request
//! (counted by its blank line) with a canned `/plaintext` response, and goes wrong from a
//! given response on, in one of the ways loadgen must notice.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::thread;

/// What the peer does wrong from response `n` of each connection on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpMisbehave {
    /// A correct server.
    Nothing,
    /// Answers `404 Not Found`.
    NotFoundFrom(u64),
    /// A body with one byte changed.
    WrongBodyFrom(u64),
    /// No `Date` header.
    NoDateFrom(u64),
}

/// A running peer; its listener thread lives as long as the test process.
#[derive(Debug)]
pub(crate) struct HttpPeer {
    pub(crate) addr: SocketAddr,
}

impl HttpPeer {
    pub(crate) fn spawn(how: HttpMisbehave) -> HttpPeer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the http peer");
        let addr = listener.local_addr().expect("its address");
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                thread::spawn(move || serve(stream, how));
            }
        });
        HttpPeer { addr }
    }
}

fn response(n: u64, how: HttpMisbehave) -> Vec<u8> {
    let (status, date, body): (&str, bool, &[u8]) = match how {
        HttpMisbehave::NotFoundFrom(k) if n >= k => ("404 Not Found", true, b""),
        HttpMisbehave::WrongBodyFrom(k) if n >= k => ("200 OK", true, b"Hello, World?"),
        HttpMisbehave::NoDateFrom(k) if n >= k => ("200 OK", false, b"Hello, World!"),
        _ => ("200 OK", true, b"Hello, World!"),
    };
    let mut out = format!("HTTP/1.1 {status}\r\nServer: peer\r\n").into_bytes();
    if date {
        out.extend_from_slice(b"Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

fn serve(mut stream: std::net::TcpStream, how: HttpMisbehave) {
    let _ = stream.set_nodelay(true);
    let mut buf = [0u8; 16 * 1024];
    // The last bytes of the previous read, so that a blank line split across reads counts.
    let mut tail: Vec<u8> = Vec::new();
    let mut answered = 0u64;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        tail.extend_from_slice(&buf[..n]);
        let mut out = Vec::new();
        while let Some(end) = tail.windows(4).position(|w| w == b"\r\n\r\n") {
            out.extend_from_slice(&response(answered, how));
            answered += 1;
            tail.drain(..end + 4);
        }
        if stream.write_all(&out).is_err() {
            return;
        }
    }
}
