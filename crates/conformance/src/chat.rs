//! A minimal chat client for tests: send lines, receive lines, each wait bounded. It
//! parses nothing beyond line framing, so a test states the exact bytes it expects.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};

use crate::net::{self, annotate};

/// The longest line a client may send, newline included (docs/PROTOCOL.md).
pub const MAX_LINE: usize = 4096;
/// The longest line a server may send, newline included (docs/protocol-notes.md).
pub const MAX_SERVER_LINE: usize = 8192;

/// True for a valid nick or room: 1 to 64 bytes of `[A-Za-z0-9_-]`.
pub fn is_valid_name(name: &[u8]) -> bool {
    (1..=64).contains(&name.len())
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

/// One chat connection. Reads have [`net::IO_TIMEOUT`]: a line that does not come is
/// an error, never a hang.
#[derive(Debug)]
pub struct ChatClient {
    stream: TcpStream,
    /// Bytes received but not yet returned as lines.
    buf: Vec<u8>,
}

impl ChatClient {
    /// Connects to a chat server.
    pub fn connect(addr: SocketAddr) -> io::Result<ChatClient> {
        Ok(ChatClient::from_stream(net::connect(addr)?))
    }

    /// Wraps a connected stream, for instance one with a small receive buffer.
    pub fn from_stream(stream: TcpStream) -> ChatClient {
        ChatClient {
            stream,
            buf: Vec::new(),
        }
    }

    /// The socket, for timeouts, shutdown or socket options.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends `line` and a newline.
    pub fn send(&mut self, line: &str) -> io::Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.send_raw(&bytes)
    }

    /// Sends bytes exactly as given: no newline added, UTF-8 not required.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next line, without its newline, or `None` at EOF. Errors: a timeout, a line
    /// longer than [`MAX_SERVER_LINE`], a line that is not UTF-8, a partial line at EOF.
    pub fn recv_line(&mut self) -> io::Result<Option<String>> {
        let mut chunk = [0; 16 * 1024];
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let rest = self.buf.split_off(end + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.pop();
                return String::from_utf8(line).map(Some).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("server line not UTF-8: {e}"),
                    )
                });
            }
            if self.buf.len() >= MAX_SERVER_LINE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("server line longer than {MAX_SERVER_LINE} bytes"),
                ));
            }
            let n = match self.stream.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(annotate(e, "waiting for a line from the server")),
            };
            if n == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "EOF after a partial line {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next line; EOF is an error.
    pub fn recv(&mut self) -> io::Result<String> {
        self.recv_line()?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
        })
    }

    /// Sends `line` and returns the next line received.
    pub fn request(&mut self, line: &str) -> io::Result<String> {
        self.send(line)?;
        self.recv()
    }

    /// Sends `line` and fails unless the next line received is exactly `want`.
    pub fn expect(&mut self, line: &str, want: &str) -> io::Result<()> {
        self.send(line)?;
        self.expect_line(&format!("reply to {line:?}"), want)
    }

    /// Fails unless the next line received is exactly `want`; `what` names it.
    pub fn expect_line(&mut self, what: &str, want: &str) -> io::Result<()> {
        let got = self
            .recv()
            .map_err(|e| annotate(e, &format!("{what}: expected {want:?}")))?;
        if got != want {
            return Err(io::Error::other(format!(
                "{what}: expected {want:?}, got {got:?}"
            )));
        }
        Ok(())
    }

    /// Reads lines until the server closes the connection, for at most `limit` bytes.
    /// A reset counts as a close. A trailing partial line is returned apart: a server
    /// that drops a slow client may cut its last line.
    pub fn recv_until_close(&mut self, limit: usize) -> io::Result<(Vec<String>, Vec<u8>)> {
        let mut rest = std::mem::take(&mut self.buf);
        rest.extend(net::read_to_close(&mut self.stream, limit)?);
        let mut lines = Vec::new();
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let tail = rest.split_off(end + 1);
            rest.pop();
            lines.push(String::from_utf8_lossy(&rest).into_owned());
            rest = tail;
        }
        Ok((lines, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_valid_name(b"a-Z_09"));
        assert!(is_valid_name(&[b'x'; 64]));
        assert!(!is_valid_name(&[b'x'; 65]));
        assert!(!is_valid_name(b""));
        assert!(!is_valid_name(b"a.b"));
        assert!(!is_valid_name("é".as_bytes()));
    }
}
