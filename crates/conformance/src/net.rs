//! Loopback socket helpers with a timeout on every wait, and the kernel's socket
//! buffer limits, which tell a test how much data the kernel alone can absorb.

use std::fs;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use nix::sys::socket::{setsockopt, sockopt};

/// The longest any single connect, read or write may wait. A server that answers at
/// all answers on loopback in far less; a test that hits it fails, it does not hang.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to `addr` with [`IO_TIMEOUT`] on the connect, every read and every write,
/// and `TCP_NODELAY` on, as every server sets it too.
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

/// Sets the kernel receive buffer of `stream` (the kernel doubles the value and turns
/// off autotuning): small, so that a client that stops reading fills up fast; large
/// again, so that it drains fast.
pub fn set_recv_buffer(stream: &TcpStream, bytes: usize) -> io::Result<()> {
    setsockopt(stream, sockopt::RcvBuf, &bytes).map_err(io::Error::from)
}

/// Reads until EOF, for at most `limit` bytes. A reset after the peer closed counts as
/// EOF: a server that closes a socket with unread input makes the kernel send RST.
pub fn read_to_close(stream: &mut TcpStream, limit: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(out),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(annotate(
                    e,
                    &format!("after {} bytes, waiting for EOF", out.len()),
                ));
            }
        }
        if out.len() > limit {
            return Err(io::Error::other(format!(
                "read {} bytes and no EOF yet, more than the {limit} expected",
                out.len()
            )));
        }
    }
}

/// Half-closes the write side, ignoring a peer that is already gone.
pub fn shutdown_write(stream: &TcpStream) -> io::Result<()> {
    match stream.shutdown(Shutdown::Write) {
        Err(e) if e.kind() != io::ErrorKind::NotConnected => Err(e),
        _ => Ok(()),
    }
}

/// True for the errors a read or write with a timeout gives when the time ran out.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Writes to `stream`, whose write timeout the caller set to `stall`, until the server
/// stops reading it: a write that fails by the timeout, or that takes `stall` or longer,
/// ends it with `(bytes sent, true)`; `cap` bytes sent or `within` passed end it with
/// `(bytes sent, false)`. `next(sent, buf)` puts in `buf` what to send after `sent` bytes.
/// For checks that a client that never reads cannot make a server buffer without bound.
pub fn flood_until_stalled(
    mut stream: TcpStream,
    cap: usize,
    within: Duration,
    stall: Duration,
    mut next: impl FnMut(usize, &mut Vec<u8>),
) -> io::Result<(usize, bool)> {
    use std::io::Write;
    let deadline = Instant::now() + within;
    let mut buf = Vec::new();
    let mut sent = 0;
    while sent < cap && Instant::now() < deadline {
        next(sent, &mut buf);
        let began = Instant::now();
        match stream.write(&buf) {
            // A write cut short by the timeout stalled as much as one that failed.
            Ok(n) if began.elapsed() >= stall => return Ok((sent + n, true)),
            Ok(n) => sent += n,
            Err(e) if is_timeout(&e) => return Ok((sent, true)),
            Err(e) => return Err(e),
        }
    }
    Ok((sent, false))
}

/// [`flood_until_stalled`] with one request over and over (pipelined, never a reply read),
/// on a clone of `stream` whose write timeout is set to `stall`, for up to 10 s.
pub fn flood_with_request(
    stream: &TcpStream,
    request: &[u8],
    cap: usize,
    stall: Duration,
) -> io::Result<(usize, bool)> {
    let writer = stream.try_clone()?;
    writer.set_write_timeout(Some(stall))?;
    let batch = request.repeat((64 * 1024 / request.len().max(1)).max(1));
    flood_until_stalled(writer, cap, Duration::from_secs(10), stall, |sent, buf| {
        buf.clear();
        buf.extend_from_slice(&batch[sent % batch.len()..]);
    })
}

/// Checks that a flood ([`flood_until_stalled`], [`flood_with_request`]) ended because the
/// server cut the connection (a write failed with a reset or a broken pipe), as a server
/// that cannot pause a client must (`Limit::NoReadPause`); otherwise says how it ended:
/// stalled (the server paused the client after all) or ran to its cap (the server took
/// everything, its memory unbounded).
pub fn expect_cut(end: io::Result<(usize, bool)>) -> io::Result<()> {
    match end {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
        Ok((sent, true)) => Err(io::Error::other(format!(
            "the server stopped reading the client after {} KiB instead of cutting it",
            sent / 1024
        ))),
        Ok((sent, false)) => Err(io::Error::other(format!(
            "the server took {} MiB from a client that never reads and did not cut it",
            sent >> 20
        ))),
    }
}

/// The kernel's maximum autotuned send and receive buffers for TCP, in bytes: what a
/// connection can hold in the kernel before a server has to queue anything itself.
/// Falls back to 4 MiB and 6 MiB (Linux defaults) if /proc does not say.
pub fn tcp_buffer_max() -> (usize, usize) {
    let max_of = |path: &str, default: usize| {
        fs::read_to_string(path)
            .ok()
            .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
            .unwrap_or(default)
    };
    (
        max_of("/proc/sys/net/ipv4/tcp_wmem", 4 << 20),
        max_of("/proc/sys/net/ipv4/tcp_rmem", 6 << 20),
    )
}

/// The kernel's TCP state of the socket bound to `local` and connected to `remote`,
/// from /proc/net/tcp: `Some(1)` is ESTABLISHED, `Some(4)` FIN_WAIT1 (closed with data
/// still unsent), and so on as in the kernel's `tcp_states.h`; `None` if there is no
/// such socket (any more). It lets a test see the server's side of a connection close
/// without reading, which would relieve the very backpressure being tested.
pub fn tcp_state(local: SocketAddr, remote: SocketAddr) -> io::Result<Option<u8>> {
    let (path, want_local, want_remote) = match (local, remote) {
        (SocketAddr::V4(l), SocketAddr::V4(r)) => ("/proc/net/tcp", proc_v4(l), proc_v4(r)),
        (SocketAddr::V6(l), SocketAddr::V6(r)) => ("/proc/net/tcp6", proc_v6(l), proc_v6(r)),
        _ => return Ok(None),
    };
    for line in fs::read_to_string(path)?.lines().skip(1) {
        let mut fields = line.split_whitespace().skip(1);
        let (Some(l), Some(r), Some(state)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if l.eq_ignore_ascii_case(&want_local) && r.eq_ignore_ascii_case(&want_remote) {
            return Ok(u8::from_str_radix(state, 16).ok());
        }
    }
    Ok(None)
}

/// TCP state ESTABLISHED in [`tcp_state`].
pub const TCP_ESTABLISHED: u8 = 1;

/// An address as /proc/net/tcp prints it: the address as a native-endian u32, in hex.
fn proc_v4(addr: std::net::SocketAddrV4) -> String {
    format!(
        "{:08X}:{:04X}",
        u32::from_ne_bytes(addr.ip().octets()),
        addr.port()
    )
}

/// An address as /proc/net/tcp6 prints it: four native-endian u32 words, in hex.
fn proc_v6(addr: std::net::SocketAddrV6) -> String {
    let o = addr.ip().octets();
    let words: String = o
        .chunks(4)
        .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
        .collect();
    format!("{words}:{:04X}", addr.port())
}

/// A point in time a whole test (or one phase of it) must finish by.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    /// The deadline `budget` from now.
    pub fn after(budget: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + budget,
        }
    }

    /// Time left, or a `TimedOut` error naming `what` if none is left.
    pub fn remaining(&self, what: &str) -> io::Result<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("deadline passed: {what}"),
            ));
        }
        Ok(left)
    }

    /// Fails with a `TimedOut` error naming `what` once the deadline has passed.
    pub fn check(&self, what: &str) -> io::Result<()> {
        self.remaining(what).map(|_| ())
    }
}

/// Adds `context` to an error, keeping its kind.
pub(crate) fn annotate(e: io::Error, context: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{context}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn tcp_state_sees_both_sides_of_a_loopback_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let (c, s) = (client.local_addr().unwrap(), server.local_addr().unwrap());
        assert_eq!(tcp_state(c, s).unwrap(), Some(TCP_ESTABLISHED));
        assert_eq!(tcp_state(s, c).unwrap(), Some(TCP_ESTABLISHED));
        drop(server);
        assert_ne!(tcp_state(s, c).unwrap(), Some(TCP_ESTABLISHED));
    }
}
